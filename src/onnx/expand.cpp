#include "expand.hpp"

namespace pet::onnx::detail {

namespace {

/// MeanVarianceNormalization as its ONNX function body writes it: (X - E[X]) / (sqrt(E[X^2] -
/// E[X]^2) + 1e-9), the means over `axes` (default [0, 2, 3]).
std::vector<TensorId> mean_variance_normalization(const NodeCtx& c, const std::string& name, Graph& g,
                                                  const std::function<TensorId(int)>& data) {
  if (!c.present(0)) throw InvalidInput("required input 0 (X) is missing");
  const auto t = c.type(0);
  if (!t || !is_float(t->dtype)) throw Unsupported("X must be float");
  ops::ReduceMean mean;
  mean.axes = c.ints("axes", {0, 2, 3});
  mean.keepdims = true;
  auto op = [&](const std::string& what, Op o, std::vector<TensorId> in, const std::string& out = "") {
    return add_part(g, name, what, std::move(o), std::move(in), out);
  };
  const TensorId x = data(0);
  const TensorId m = op("mean", mean, {x});
  const TensorId m2 = op("mean_squared", ops::Mul{}, {m, m});
  const TensorId ex2 = op("mean_of_squares", mean, {op("squares", ops::Mul{}, {x, x})});
  const TensorId sd = op("std", ops::Sqrt{}, {op("variance", ops::Sub{}, {ex2, m2})});
  const TensorId eps = g.add_constant(g.unique_name(cat(name, "/epsilon")), Tensor<float>(Shape{}, std::vector<float>{1e-9f}));
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  if (!out.empty() && !c.node.output(0).empty())
    out[0] = op("normalized", ops::Div{}, {op("centered", ops::Sub{}, {x, m}), op("std_eps", ops::Add{}, {sd, eps})}, c.node.output(0));
  return out;
}

/// LpNormalization (p 1 or 2, along `axis`, default -1): x / ||x||_p, the norm ReduceL1 or
/// ReduceL2 over the axis; where a norm is 0 the result is 0, as ONNX Runtime writes it (the
/// spec says nothing; ONNX's Python reference divides and gives NaN).
std::vector<TensorId> lp_normalization(const NodeCtx& c, const std::string& name, Graph& g, const std::function<TensorId(int)>& data) {
  if (!c.present(0)) throw InvalidInput("required input 0 (input) is missing");
  const auto t = c.type(0);
  if (!t || !is_float(t->dtype)) throw Unsupported("input must be float");
  const int64_t p = c.i("p", 2), rank = int64_t(t->shape.size());
  if (p != 1 && p != 2) throw InvalidInput(cat("p must be 1 or 2, got ", p));
  const int64_t axis = c.i("axis", -1);
  if (axis < -rank || axis >= rank) throw InvalidInput(cat("axis ", axis, " is out of range for rank ", rank));
  const std::vector<int64_t> axes{axis < 0 ? axis + rank : axis};
  auto op = [&](const std::string& what, Op o, std::vector<TensorId> in, const std::string& out = "") {
    return add_part(g, name, what, std::move(o), std::move(in), out);
  };
  const TensorId x = data(0);
  const TensorId norm = p == 1 ? op("norm", ops::ReduceL1{{.axes = axes, .keepdims = true}}, {x}) : op("norm", ops::ReduceL2{{.axes = axes, .keepdims = true}}, {x});
  const TensorId zero = g.add_constant(g.unique_name(cat(name, "/zero")), Tensor<float>(Shape{}, std::vector<float>{0.f}));
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  if (!out.empty() && !c.node.output(0).empty())
    out[0] = op("normalized", ops::Where{}, {op("zero_norm", ops::Equal{}, {norm, zero}), zero, op("quotient", ops::Div{}, {x, norm})}, c.node.output(0));
  return out;
}

/// |x|^p, written with the cheapest op for p 1 and 2.
TensorId abs_pow(Graph& g, const std::string& name, TensorId x, int64_t p) {
  if (p == 2) return add_part(g, name, "square", ops::Mul{}, {x, x});
  const TensorId a = add_part(g, name, "abs", ops::Abs{}, {x});
  if (p == 1) return a;
  const TensorId e = g.add_constant(g.unique_name(cat(name, "/p")), Tensor<float>(Shape{}, std::vector<float>{float(p)}));
  return add_part(g, name, "power", ops::Pow{}, {a, e});
}
/// s^(1/p), the last step of an Lp norm.
TensorId root(Graph& g, const std::string& name, TensorId s, int64_t p, const std::string& out) {
  if (p == 1) return add_part(g, name, "norm", ops::Identity{}, {s}, out);
  if (p == 2) return add_part(g, name, "norm", ops::Sqrt{}, {s}, out);
  const TensorId e = g.add_constant(g.unique_name(cat(name, "/inverse_p")), Tensor<float>(Shape{}, std::vector<float>{float(1.0 / double(p))}));
  return add_part(g, name, "norm", ops::Pow{}, {s, e}, out);
}
int64_t lp_p(const NodeCtx& c) {
  const int64_t p = c.i("p", 2);
  if (p < 1) throw InvalidInput(cat("p must be positive, got ", p));
  return p;
}

/// LpPool: (sum over the window of |x|^p)^(1/p), the sum a depthwise Conv with a weight of
/// ones (the pooling's kernel, strides, pads, dilations; zero padding adds nothing). With
/// ceil_mode the last windows reach past the padded input: the Conv's end pads grow to hold
/// them, zeros again.
std::vector<TensorId> lp_pool(const NodeCtx& c, const std::string& name, Graph& g, const std::function<TensorId(int)>& data) {
  if (!c.present(0)) throw InvalidInput("required input 0 (X) is missing");
  const auto t = c.type(0);
  if (!t || t->dtype != DType::Float32) throw Unsupported("X must be float32");
  const int64_t p = lp_p(c);
  Mapped mp = import_table().at("AveragePool")(c);  // the same window attributes
  auto pool = std::get<ops::AveragePool>(mp.op);
  const std::vector<TensorType> in{*t};
  pool.infer(in);  // checks them and resolves auto_pad into pads
  const Shape& xs = t->shape;
  const size_t k = xs.size() - 2;
  ops::Conv conv{.kernel_shape = pool.kernel_shape, .strides = pool.strides, .pads = pool.pads, .dilations = pool.dilations, .group = xs[1]};
  if (pool.ceil_mode)
    for (size_t i = 0; i < k; ++i) {
      const int64_t o = ops::detail::window_out(xs[2 + i], pool.kernel_shape[i], pool.strides[i], pool.dilations[i], pool.pads[i], pool.pads[i + k], true);
      const int64_t reach = (o - 1) * pool.strides[i] + (pool.kernel_shape[i] - 1) * pool.dilations[i] + 1;
      conv.pads[i + k] += std::max<int64_t>(0, reach - (xs[2 + i] + pool.pads[i] + pool.pads[i + k]));
    }
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  if (out.empty() || c.node.output(0).empty()) return out;
  Shape ws{xs[1], 1};
  ws.insert(ws.end(), pool.kernel_shape.begin(), pool.kernel_shape.end());
  const TensorId ones = g.add_constant(g.unique_name(cat(name, "/ones")), Tensor<float>(ws, std::vector<float>(size_t(numel(ws)), 1.f)));
  const TensorId sum = add_part(g, name, "window_sum", conv, {abs_pow(g, name, data(0), p), ones});
  out[0] = root(g, name, sum, p, c.node.output(0));
  return out;
}

/// GlobalLpPool: (sum over every spatial position of |x|^p)^(1/p), [N, C, 1, ...]: ReduceL1 or
/// ReduceL2 for p 1 and 2.
std::vector<TensorId> global_lp_pool(const NodeCtx& c, const std::string& name, Graph& g, const std::function<TensorId(int)>& data) {
  if (!c.present(0)) throw InvalidInput("required input 0 (X) is missing");
  const auto t = c.type(0);
  if (!t || t->dtype != DType::Float32) throw Unsupported("X must be float32");
  if (t->shape.size() < 3) throw InvalidInput(cat("X must be N x C x D1 x ..., got ", t->shape));
  const int64_t p = lp_p(c);
  std::vector<int64_t> axes;
  for (size_t d = 2; d < t->shape.size(); ++d) axes.push_back(int64_t(d));
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  if (out.empty() || c.node.output(0).empty()) return out;
  const std::string& y = c.node.output(0);
  if (p == 1) out[0] = add_part(g, name, "norm", ops::ReduceL1{{.axes = axes, .keepdims = true}}, {data(0)}, y);
  else if (p == 2) out[0] = add_part(g, name, "norm", ops::ReduceL2{{.axes = axes, .keepdims = true}}, {data(0)}, y);
  else out[0] = root(g, name, add_part(g, name, "sum", ops::ReduceSum{{.axes = axes, .keepdims = true}}, {abs_pow(g, name, data(0), p)}), p, y);
  return out;
}

/// ReverseSequence: along time_axis (0 or 1), the first sequence_lens[b] steps of batch entry b
/// (batch_axis, the other of 0 and 1) reversed, the rest as they are: a GatherElements along
/// the time axis whose index is t' = len - 1 - t where t < len, else t. Constant lengths (each
/// in [0, T]) give a constant index; lengths the model computes, an index computed with them.
std::vector<TensorId> reverse_sequence(const NodeCtx& c, const std::string& name, Graph& g, const std::function<TensorId(int)>& data) {
  if (!c.present(0) || !c.present(1)) throw InvalidInput("inputs 0 (input) and 1 (sequence_lens) are required");
  const auto t = c.type(0), lt = c.type(1);
  if (!t || !lt) throw InvalidInput("the input's and sequence_lens' types are unknown");
  const int64_t batch_axis = c.i("batch_axis", 1), time_axis = c.i("time_axis", 0);
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0)))
    throw InvalidInput(cat("batch_axis (", batch_axis, ") and time_axis (", time_axis, ") must be 0 and 1, one each"));
  const Shape& xs = t->shape;
  if (xs.size() < 2) throw InvalidInput(cat("input must have rank 2 or more, got shape ", xs));
  const int64_t B = xs[size_t(batch_axis)], T = xs[size_t(time_axis)];
  if (lt->dtype != DType::Int64 || lt->shape != Shape{B})
    throw InvalidInput(cat("sequence_lens must be int64 of shape [", B, "] (the batch), got ", dtype_name(lt->dtype), " ", lt->shape));
  // index shape: T and B in their places, 1 elsewhere (Expand makes it the input's)
  Shape is(xs.size(), 1), ts(xs.size(), 1), bs(xs.size(), 1);
  is[size_t(time_axis)] = ts[size_t(time_axis)] = T;
  is[size_t(batch_axis)] = bs[size_t(batch_axis)] = B;
  TensorId index;
  if (const auto* lens = c.fixed(1)) {
    const Tensor<int64_t> l = const_ints(lens->second);
    Tensor<int64_t> ix(is);
    for (int64_t b = 0; b < B; ++b) {
      if (l[b] < 0 || l[b] > T) throw InvalidInput(cat("sequence_lens[", b, "] = ", l[b], " is outside [0, ", T, "]"));
      for (int64_t s = 0; s < T; ++s) ix[time_axis == 0 ? s * B + b : b * T + s] = s < l[b] ? l[b] - 1 - s : s;
    }
    index = g.add_constant(g.unique_name(cat(name, "/index")), DType::Int64, std::move(ix));
  } else {
    Tensor<int64_t> steps(ts), one(Shape{}, std::vector<int64_t>{1});
    for (int64_t s = 0; s < T; ++s) steps[s] = s;
    const TensorId st = g.add_constant(g.unique_name(cat(name, "/steps")), DType::Int64, std::move(steps));
    const TensorId o = g.add_constant(g.unique_name(cat(name, "/one")), DType::Int64, std::move(one));
    const TensorId len = add_part(g, name, "lengths", ops::Reshape{.shape = bs}, {data(1)});
    const TensorId rev = add_part(g, name, "reversed", ops::Sub{}, {add_part(g, name, "last", ops::Sub{}, {len, o}), st});
    index = add_part(g, name, "index", ops::Where{}, {add_part(g, name, "inside", ops::Less{}, {st, len}), rev, st});
  }
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  if (out.empty() || c.node.output(0).empty()) return out;
  const TensorId full = add_part(g, name, "index_full", ops::Expand{.shape = xs}, {index});
  out[0] = add_part(g, name, "gather", ops::GatherElements{.axis = time_axis}, {data(0), full}, c.node.output(0));
  return out;
}

/// Compress with a constant condition: a Gather of the positions where it holds (along axis,
/// or of the flattened input without one); positions past the condition's end are dropped,
/// and conditions past the input's end are ignored (as ONNX Runtime). A condition the model
/// computes would make the output's shape depend on values: refused.
std::vector<TensorId> compress(const NodeCtx& c, const std::string& name, Graph& g, const std::function<TensorId(int)>& data) {
  if (!c.present(0) || !c.present(1)) throw InvalidInput("inputs 0 (input) and 1 (condition) are required");
  const auto t = c.type(0);
  if (!t) throw InvalidInput("the input's type is unknown");
  const auto* cond = c.computed(1);
  if (!cond)
    throw Unsupported(cat("condition (input 1 '", c.node.input(1), "') must be a constant: the output's shape would depend on its values"));
  if (cond->first != DType::Bool) throw InvalidInput(cat("condition must be bool, got ", dtype_name(cond->first)));
  const Tensor<int64_t> keep = const_ints(cond->second);
  if (keep.rank() != 1) throw InvalidInput(cat("condition must be 1-D, got shape ", keep.shape()));
  const Shape& xs = t->shape;
  const auto* axis_attr = c.attr("axis");
  int64_t axis = 0, extent = numel(xs);
  if (axis_attr) {
    axis = c.i("axis", 0);
    const int64_t r = int64_t(xs.size());
    if (axis < -r || axis >= r) throw InvalidInput(cat("axis ", axis, " is out of range for input shape ", xs));
    if (axis < 0) axis += r;
    extent = xs[size_t(axis)];
  }
  std::vector<int64_t> at;
  for (int64_t i = 0; i < std::min(extent, keep.size()); ++i)
    if (keep[i]) at.push_back(i);
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  if (out.empty() || c.node.output(0).empty()) return out;
  TensorId x = data(0);
  if (!axis_attr) x = add_part(g, name, "flat", ops::Reshape{.shape = {extent}}, {x});
  const int64_t n = int64_t(at.size());
  const TensorId idx = g.add_constant(g.unique_name(cat(name, "/kept")), DType::Int64, Tensor<int64_t>(Shape{n}, std::move(at)));
  out[0] = add_part(g, name, "gather", ops::Gather{.axis = axis}, {x, idx}, c.node.output(0));
  return out;
}

/// GroupNormalization: the channels in num_groups groups, each group of each batch entry
/// normalized over its channels and positions (InstanceNormalization of x viewed as [N, G,
/// C/G * D...]), then scaled and shifted: per group where scale and bias have G values (opset
/// 18's form), per channel where they have C (opset 21's).
std::vector<TensorId> group_normalization(const NodeCtx& c, const std::string& name, Graph& g, const std::function<TensorId(int)>& data) {
  if (!c.present(0) || !c.present(1) || !c.present(2)) throw InvalidInput("inputs 0 (X), 1 (scale) and 2 (bias) are required");
  const auto t = c.type(0), st = c.type(1), bt = c.type(2);
  if (!t || t->dtype != DType::Float32) throw Unsupported("X must be float32");
  const Shape& xs = t->shape;
  if (xs.size() < 3) throw InvalidInput(cat("X must be N x C x D1 x ..., got ", xs));
  if (!c.attr("num_groups")) throw InvalidInput("attribute 'num_groups' is required");
  const int64_t G = c.i("num_groups", 1), C = xs[1];
  if (G < 1 || C % G) throw InvalidInput(cat("num_groups ", G, " must divide the ", C, " channels"));
  const bool per_group = st && st->shape == Shape{G};
  for (const auto& [tt, what] : {std::pair{st, "scale"}, std::pair{bt, "bias"}})
    if (!tt || (tt->shape != Shape{G} && tt->shape != Shape{C}) || tt->shape != st->shape)
      throw InvalidInput(cat(what, " must have shape [", G, "] (the groups, opset 18) or [", C, "] (the channels, opset 21), both alike",
                             tt ? cat(", got ", tt->shape) : std::string()));
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  if (out.empty() || c.node.output(0).empty()) return out;
  const float eps = c.f("epsilon", 1e-5f);
  const TensorId grouped = add_part(g, name, "groups", ops::Reshape{.shape = {xs[0], G, -1}}, {data(0)});
  TensorId scale, bias;
  if (per_group) {
    scale = data(1), bias = data(2);
  } else {
    scale = g.add_constant(g.unique_name(cat(name, "/ones")), Tensor<float>(Shape{G}, std::vector<float>(size_t(G), 1.f)));
    bias = g.add_constant(g.unique_name(cat(name, "/zeros")), Tensor<float>(Shape{G}, std::vector<float>(size_t(G), 0.f)));
  }
  const TensorId normed = add_part(g, name, "normalized", ops::InstanceNormalization{.epsilon = eps}, {grouped, scale, bias});
  if (per_group) {
    out[0] = add_part(g, name, "ungroup", ops::Reshape{.shape = xs}, {normed}, c.node.output(0));
    return out;
  }
  Shape cs(xs.size() - 1, 1);
  cs[0] = C;
  const TensorId y = add_part(g, name, "ungroup", ops::Reshape{.shape = xs}, {normed});
  const TensorId scaled = add_part(g, name, "scaled", ops::Mul{}, {y, add_part(g, name, "scale_column", ops::Reshape{.shape = cs}, {data(1)})});
  out[0] = add_part(g, name, "shifted", ops::Add{}, {scaled, add_part(g, name, "bias_column", ops::Reshape{.shape = cs}, {data(2)})}, c.node.output(0));
  return out;
}

/// AffineGrid (opset 20): theta [N, 2, 3] (or [N, 3, 4]) times the homogeneous coordinates of
/// every output position, x along W first: a MatMul of the constant base grid [H W, 3] (or
/// [D H W, 4]) with theta transposed, [N, H, W, 2] (or [N, D, H, W, 3]). Coordinates in
/// [-1, 1]: pixel centres (align_corners 0) or corners (1), as ONNX's reference places them.
std::vector<TensorId> affine_grid(const NodeCtx& c, const std::string& name, Graph& g, const std::function<TensorId(int)>& data) {
  if (!c.present(0)) throw InvalidInput("required input 0 (theta) is missing");
  const auto t = c.type(0);
  if (!t || t->dtype != DType::Float32) throw Unsupported("theta must be float32");
  const std::vector<int64_t> size = c.const_ints(1, "size");
  if (size.size() != 4 && size.size() != 5) throw InvalidInput(cat("size must be [N, C, H, W] or [N, C, D, H, W], got ", size));
  const int64_t k = int64_t(size.size()) - 2;  // 2 or 3 spatial dims
  if (t->shape != Shape{size[0], k, k + 1})
    throw InvalidInput(cat("theta must have shape [", size[0], ", ", k, ", ", k + 1, "] for size ", size, ", got ", t->shape));
  for (int64_t i = 2; i < int64_t(size.size()); ++i)
    if (size[size_t(i)] < 1) throw InvalidInput(cat("size ", size, " has an empty spatial dim"));
  const bool corners = c.flag("align_corners", false);
  auto coord = [&](int64_t i, int64_t n) {
    if (corners) return n == 1 ? -1.0 : -1.0 + 2.0 * double(i) / double(n - 1);
    return -1.0 + (2.0 * double(i) + 1.0) / double(n);
  };
  const Shape sp(size.begin() + 2, size.end());
  const int64_t positions = numel(sp);
  if (positions * (k + 1) > (int64_t(1) << 28)) throw Unsupported(cat("an affine grid of ", sp, " positions is over the 2^28 values allowed"));
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  if (out.empty() || c.node.output(0).empty()) return out;
  Tensor<float> base(Shape{positions, k + 1});
  for (int64_t p = 0; p < positions; ++p) {
    int64_t rest = p;
    std::vector<double> xyz(static_cast<size_t>(k));  // x (the last dim), y, z
    for (int64_t d = k - 1; d >= 0; --d) {
      xyz[size_t(k - 1 - d)] = coord(rest % sp[size_t(d)], sp[size_t(d)]);
      rest /= sp[size_t(d)];
    }
    for (int64_t j = 0; j < k; ++j) base[p * (k + 1) + j] = float(xyz[size_t(j)]);
    base[p * (k + 1) + k] = 1.f;
  }
  const TensorId b = g.add_constant(g.unique_name(cat(name, "/base_grid")), std::move(base));
  const TensorId tt = add_part(g, name, "theta_t", ops::Transpose{.perm = {0, 2, 1}}, {data(0)});
  const TensorId grid = add_part(g, name, "grid", ops::MatMul{}, {b, tt});  // [N, positions, k]
  Shape os{size[0]};
  os.insert(os.end(), sp.begin(), sp.end());
  os.push_back(k);
  out[0] = add_part(g, name, "shape", ops::Reshape{.shape = os}, {grid}, c.node.output(0));
  return out;
}

/// Gelu with approximate = 'tanh' (opset 20): 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))),
/// as ONNX's function body writes it.
std::vector<TensorId> gelu_tanh(const NodeCtx& c, const std::string& name, Graph& g, const std::function<TensorId(int)>& data) {
  if (!c.present(0)) throw InvalidInput("required input 0 (X) is missing");
  const auto t = c.type(0);
  if (!t || t->dtype != DType::Float32) throw Unsupported("X must be float32");
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  if (out.empty() || c.node.output(0).empty()) return out;
  auto scalar = [&](const char* what, float v) { return g.add_constant(g.unique_name(cat(name, "/", what)), Tensor<float>(Shape{}, std::vector<float>{v})); };
  auto op = [&](const std::string& what, Op o, std::vector<TensorId> in, const std::string& y = "") { return add_part(g, name, what, std::move(o), std::move(in), y); };
  const TensorId x = data(0);
  const TensorId x3 = op("cube", ops::Mul{}, {op("square", ops::Mul{}, {x, x}), x});
  const TensorId inner = op("inner", ops::Add{}, {x, op("cubic_term", ops::Mul{}, {x3, scalar("c", 0.044715f)})});
  const TensorId th = op("tanh", ops::Tanh{}, {op("scaled", ops::Mul{}, {inner, scalar("sqrt_2_over_pi", float(0.7978845608028654))})});
  const TensorId half_x = op("half_x", ops::Mul{}, {x, scalar("half", 0.5f)});
  out[0] = op("gelu", ops::Mul{}, {half_x, op("one_plus", ops::Add{}, {th, scalar("one", 1.f)})}, c.node.output(0));
  return out;
}

/// Pad with mode 'wrap' (opset 19): per padded axis a Gather of the positions, as ONNX Runtime
/// pads: negative pads first crop the axis, then position i of the result reads the cropped
/// axis at (i - begin) mod its length (numpy's wrap, also for pads longer than the axis).
std::vector<TensorId> pad_wrap(const NodeCtx& c, const std::string& name, Graph& g, const std::function<TensorId(int)>& data) {
  if (!c.present(0)) throw InvalidInput("required input 0 (data) is missing");
  const auto t = c.type(0);
  if (!t) throw InvalidInput("the input's type is unknown");
  ops::Pad pad{.pads = c.const_ints(1, "pads")};
  if (c.present(3)) pad.axes = c.const_ints(3, "axes");
  const std::vector<TensorType> in{*t};
  pad.infer(in);  // checks the pads and expands axes
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  if (out.empty() || c.node.output(0).empty()) return out;
  const Shape& xs = t->shape;
  const size_t r = xs.size();
  TensorId x = data(0);
  std::vector<size_t> moved;
  for (size_t a = 0; a < r; ++a)
    if (pad.pads[a] != 0 || pad.pads[a + r] != 0) moved.push_back(a);
  if (moved.empty()) {
    out[0] = add_part(g, name, "identity", ops::Identity{}, {x}, c.node.output(0));
    return out;
  }
  for (size_t k = 0; k < moved.size(); ++k) {
    const size_t a = moved[k];
    const int64_t b = pad.pads[a], e = pad.pads[a + r];
    const int64_t c0 = std::max<int64_t>(0, -b), m = xs[a] - c0 - std::max<int64_t>(0, -e);
    const int64_t len = m + std::max<int64_t>(b, 0) + std::max<int64_t>(e, 0);
    if (m <= 0 && len > 0)
      throw InvalidInput(cat("pads ", pad.pads, " crop dimension ", a, " of ", xs, " to nothing before wrapping it"));
    if (len <= 0) throw Unsupported(cat("pads ", pad.pads, " leave dimension ", a, " of ", xs, " empty; pet supports empty results of Pad only with mode constant"));
    std::vector<int64_t> at(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i) at[size_t(i)] = c0 + (((i - std::max<int64_t>(b, 0)) % m) + m) % m;
    const TensorId idx = g.add_constant(g.unique_name(cat(name, "/positions", a)), DType::Int64, Tensor<int64_t>(Shape{len}, std::move(at)));
    x = add_part(g, name, cat("wrap", a), ops::Gather{.axis = int64_t(a)}, {x, idx}, k + 1 == moved.size() ? c.node.output(0) : "");
  }
  out[0] = x;
  return out;
}

/// ReduceMax and ReduceMin of a bool tensor (opset 20: any and all): the reduction of its 0/1
/// values as float, cast back to bool.
std::vector<TensorId> reduce_bool(const NodeCtx& c, const std::string& name, Graph& g, const std::function<TensorId(int)>& data) {
  if (!c.present(0)) throw InvalidInput("required input 0 (data) is missing");
  Mapped mp = import_table().at(c.node.op_type())(c);  // the axes and keepdims
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  if (out.empty() || c.node.output(0).empty()) return out;
  const TensorId v = add_part(g, name, "as_float", ops::Cast{.to = DType::Float32}, {data(0)});
  out[0] = add_part(g, name, "as_bool", ops::Cast{.to = DType::Bool}, {add_part(g, name, "reduce", mp.op, {v})}, c.node.output(0));
  return out;
}

/// One axis of a Resize as taps: output position x reads input positions index[x][k] (clamped
/// to [0, n - 1], as ONNX's edge padding) with weights weight[x][k], as ONNX's reference
/// computes them: the source coordinate of `o.coord`, then nearest's pick, linear's or cubic's
/// coefficients, stretched by 1 / scale when antialiasing a downscale and normalised,
/// exclude_outside dropping taps outside the input. align_corners and pytorch_half_pixel take
/// the integer output length, as pet's Resize and ONNX Runtime do (the reference takes n * scale).
struct ResizeTaps {
  int64_t k = 0;
  std::vector<int64_t> index;  // [m, k]
  std::vector<float> weight;   // [m, k]
  std::vector<int64_t> first;  // [m]: each row's first tap before clamping

  /// Whether every row has the same weights and starts `stride` after the last (an integer
  /// downscale with aligned coordinates): then the taps are a strided convolution of the input
  /// padded by repeating its edges, `pad_begin` and `pad_end` positions (both >= 0).
  bool strided(int64_t n, int64_t& stride, int64_t& pad_begin, int64_t& pad_end) const {
    const int64_t m = int64_t(first.size());
    if (k < 2 || m < 1) return false;
    stride = m > 1 ? first[1] - first[0] : 1;
    if (stride < 1) return false;
    for (int64_t x = 0; x < m; ++x) {
      if (first[size_t(x)] != first[0] + x * stride) return false;
      for (int64_t i = 0; i < k; ++i)
        if (weight[size_t(x * k + i)] != weight[size_t(i)]) return false;
    }
    pad_begin = -first[0];
    pad_end = first[size_t(m - 1)] + k - 1 - (n - 1);
    return pad_begin >= 0 && pad_end >= 0 && (n + pad_begin + pad_end - k) / stride + 1 == m;
  }
};
ResizeTaps resize_taps(int64_t n, int64_t m, double scale, const ops::Resize& o, bool antialias) {
  using C = ops::Resize::Coord;
  using M = ops::Resize::Mode;
  const double a = double(o.cubic_coeff_a);
  const double s = std::min(scale, 1.0);  // the antialias stretch
  int64_t start = 0, k = 2;
  if (o.mode == M::Nearest) start = 0, k = 2;
  else if (o.mode == M::Linear) start = antialias ? int64_t(std::floor(-1 / s)) + 1 : 0, k = antialias ? 2 - 2 * start : 2;
  else start = antialias ? int64_t(std::floor(-2 / s)) + 1 : -1, k = antialias ? 2 - 2 * start : 4;
  auto cubic = [&](double t) {
    t = std::abs(t);
    if (t <= 1) return (a + 2) * t * t * t - (a + 3) * t * t + 1;
    if (t < 2) return a * t * t * t - 5 * a * t * t + 8 * a * t - 4 * a;
    return 0.0;
  };
  ResizeTaps r;
  r.k = o.mode == M::Nearest ? 1 : k;
  std::vector<double> c(static_cast<size_t>(k));
  // the source coordinate as pet's Resize and ONNX Runtime take it (align_corners and
  // pytorch_half_pixel with the integer output length m), in float for nearest (whose ties
  // it decides), in double for the weights
  auto source = [&](auto xt, auto sc) {
    using T = decltype(xt);
    const T nn = T(n), mm = T(m), half = T(0.5);
    switch (o.coord) {
      case C::AlignCorners: return m > 1 ? xt * (nn - 1) / (mm - 1) : T(0);
      case C::Asymmetric: return xt / sc;
      case C::PytorchHalfPixel: return m > 1 ? (xt + half) / sc - half : T(0);
      case C::HalfPixel: return (xt + half) / sc - half;
      case C::HalfPixelSymmetric: return nn / 2 * (1 - mm / (sc * nn)) + (xt + half) / sc - half;
      case C::TfHalfPixelForNN: return (xt + half) / sc;
      case C::TfCropAndResize: break;
    }
    throw Unsupported("tf_crop_and_resize with antialias or keep_aspect_ratio_policy");
  };
  for (int64_t x = 0; x < m; ++x) {
    const double xo = o.mode == M::Nearest ? double(source(float(x), float(scale))) : source(double(x), scale);
    const double fl = std::floor(xo);
    const int64_t base = int64_t(fl) - (xo == fl ? 1 : 0);  // the ratio in (0, 1]
    const double ratio = xo == fl ? 1.0 : xo - fl;
    if (o.mode == M::Nearest) {
      using R = ops::Resize::Round;
      const bool right = ratio == 1.0 || (o.nearest_mode == R::PreferFloor ? ratio > 0.5 : o.nearest_mode == R::PreferCeil ? ratio >= 0.5 : o.nearest_mode == R::Ceil);
      r.index.push_back(std::clamp<int64_t>(base + (right ? 1 : 0), 0, n - 1));
      r.weight.push_back(1.f);
      continue;
    }
    for (int64_t i = 0; i < k; ++i) {
      const double t = double(start + i) - ratio;
      if (o.mode == M::Linear) c[size_t(i)] = antialias ? std::clamp(1 - std::abs(t * s), 0.0, 1.0) : (i == 0 ? 1 - ratio : ratio);
      else c[size_t(i)] = cubic(antialias ? t * s : t);
    }
    if (o.exclude_outside)
      for (int64_t i = 0; i < k; ++i)
        if (base + start + i < 0 || base + start + i >= n) c[size_t(i)] = 0;
    if (antialias || o.exclude_outside) {
      double sum = 0;
      for (double v : c) sum += v;
      for (double& v : c) v /= sum;
    }
    r.first.push_back(base + start);
    for (int64_t i = 0; i < k; ++i) {
      r.index.push_back(std::clamp<int64_t>(base + start + i, 0, n - 1));
      r.weight.push_back(float(c[size_t(i)]));
    }
  }
  return r;
}

/// Resize with antialias (linear and cubic, opset 18) or keep_aspect_ratio_policy (opset 18):
/// per resized axis a Gather of the taps ([m, k] positions), times their weights, summed over
/// the k taps (nearest: one Gather); where every axis's taps are a strided window of the same
/// weights, a depthwise strided Conv instead. Only the taps are read, as the formula reads them.
std::vector<TensorId> resize_taps_import(const NodeCtx& c, const std::string& name, Graph& g, const std::function<TensorId(int)>& data) {
  if (!c.present(0)) throw InvalidInput("required input 0 (X) is missing");
  const auto t = c.type(0);
  if (!t || t->dtype != DType::Float32) throw Unsupported("X must be float32");
  const ops::Resize o = resize_attrs(c);
  const bool antialias = c.flag("antialias", false) && o.mode != ops::Resize::Mode::Nearest;
  const std::string policy = c.s("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    throw InvalidInput(cat("keep_aspect_ratio_policy '", policy, "' is not one of stretch, not_larger, not_smaller"));
  if (o.coord == ops::Resize::Coord::TfCropAndResize) throw Unsupported("tf_crop_and_resize with antialias or keep_aspect_ratio_policy");
  const Shape& xs = t->shape;
  const int64_t r = int64_t(xs.size());
  std::vector<int64_t> axes;
  for (int64_t a : o.axes) {
    if (a < -r || a >= r) throw InvalidInput(cat("axes ", o.axes, " for an input of rank ", r));
    a = a < 0 ? a + r : a;
    if (std::find(axes.begin(), axes.end(), a) != axes.end()) throw InvalidInput(cat("axes ", o.axes, " repeat axis ", a));
    axes.push_back(a);
  }
  if (axes.empty())
    for (int64_t a = 0; a < r; ++a) axes.push_back(a);
  std::vector<double> scale(size_t(r), 1.0);
  Shape out = xs;
  if (!o.sizes.empty()) {
    if (o.sizes.size() != axes.size()) throw InvalidInput(cat("sizes ", o.sizes, " must have a value per axis (", axes.size(), ")"));
    for (size_t i = 0; i < axes.size(); ++i) {
      if (o.sizes[i] <= 0) throw InvalidInput(cat("sizes ", o.sizes, " must be positive"));
      if (xs[size_t(axes[i])] == 0) throw Unsupported(cat("resizing the empty dimension ", axes[i], " of ", xs));
      scale[size_t(axes[i])] = double(o.sizes[i]) / double(xs[size_t(axes[i])]);
      out[size_t(axes[i])] = o.sizes[i];
    }
    if (policy != "stretch") {  // one scale for every axis listed, the output rounded half up
      double common = scale[size_t(axes[0])];
      for (int64_t a : axes) common = policy == "not_larger" ? std::min(common, scale[size_t(a)]) : std::max(common, scale[size_t(a)]);
      for (int64_t a : axes) {
        scale[size_t(a)] = common;
        out[size_t(a)] = int64_t(common * double(xs[size_t(a)]) + 0.5);
        if (out[size_t(a)] < 1) throw InvalidInput(cat("keep_aspect_ratio_policy '", policy, "' with sizes ", o.sizes, " gives dim ", a, " no extent"));
      }
    }
  } else {
    if (o.scales.size() != axes.size()) throw InvalidInput(cat("scales ", o.scales, " must have a value per axis (", axes.size(), ")"));
    for (size_t i = 0; i < axes.size(); ++i) {
      const double sc = o.scales[i];
      if (!(sc > 0) || !std::isfinite(sc)) throw InvalidInput(cat("scales ", o.scales, " must be positive"));
      const size_t a = size_t(axes[i]);
      scale[a] = sc;
      const double e = std::floor(double(xs[a]) * sc);
      if (!(e >= 1) || e > double(kMaxElements)) throw InvalidInput(cat("scale ", sc, " gives dim ", a, " of ", xs, " an extent of ", e));
      out[a] = int64_t(e);
    }
  }
  std::vector<TensorId> res(size_t(c.node.output_size()), -1);
  if (res.empty() || c.node.output(0).empty()) return res;
  std::vector<int64_t> moved;
  for (int64_t d = 0; d < r; ++d)
    if (out[size_t(d)] != xs[size_t(d)] || scale[size_t(d)] != 1.0) moved.push_back(d);
  TensorId x = data(0);
  const std::string& y = c.node.output(0);
  if (moved.empty()) {
    res[0] = add_part(g, name, "identity", ops::Identity{}, {x}, y);
    return res;
  }
  std::vector<ResizeTaps> all;
  for (int64_t d : moved) all.push_back(resize_taps(xs[size_t(d)], out[size_t(d)], scale[size_t(d)], o, antialias));
  // Every resized axis spatial (N and C kept) with the same weights at every position, as
  // integer downscales with aligned coordinates have them: edge padding and one depthwise
  // strided Conv of the outer product of the axes' weights, which the backends run as a conv
  // (a Gather along the last axis reads one element at a time).
  if (r >= 3 && moved.front() >= 2) {
    struct Window {
      int64_t stride = 1, pb = 0, pe = 0;
    };
    std::vector<Window> win(moved.size());
    bool ok = true;
    int64_t taps_2d = 1;
    for (size_t j = 0; j < moved.size() && ok; ++j) {
      ok = all[j].strided(xs[size_t(moved[j])], win[j].stride, win[j].pb, win[j].pe);
      taps_2d *= all[j].k;
    }
    // one Conv over the axes' joint window where it is small, else one Conv per axis
    // (separable: k_h + k_w taps a position where the joint window has k_h k_w)
    const size_t passes = taps_2d <= 16 ? 1 : moved.size();
    for (size_t pass = 0; ok && pass < passes; ++pass) {
      ops::Conv conv{.group = xs[1]};
      ops::Pad pad{.pads = std::vector<int64_t>(size_t(2 * r), 0), .mode = ops::PadMode::Edge};
      Shape ws{xs[1], 1};
      std::vector<float> kernel{1.f};
      for (int64_t d = 2; d < r; ++d) {
        const auto it = std::find(moved.begin(), moved.end(), d);
        const size_t j = size_t(it - moved.begin());
        Window wd;
        int64_t k = 1;
        std::vector<float> w{1.f};
        if (it != moved.end() && (passes == 1 || j == pass)) {
          wd = win[j];
          k = all[j].k;
          w.assign(all[j].weight.begin(), all[j].weight.begin() + k);
        }
        conv.strides.push_back(wd.stride);
        conv.kernel_shape.push_back(k);
        pad.pads[size_t(d)] = wd.pb, pad.pads[size_t(r + d)] = wd.pe;
        ws.push_back(k);
        std::vector<float> outer;
        for (float a : kernel)
          for (float b : w) outer.push_back(a * b);
        kernel = std::move(outer);
      }
      std::vector<float> wv;
      for (int64_t ch = 0; ch < xs[1]; ++ch) wv.insert(wv.end(), kernel.begin(), kernel.end());
      const TensorId w = g.add_constant(g.unique_name(cat(name, "/kernel")), Tensor<float>(ws, std::move(wv)));
      bool padded = false;
      for (int64_t v : pad.pads) padded = padded || v != 0;
      if (padded) x = add_part(g, name, "edges", pad, {x});
      x = add_part(g, name, "taps", conv, {x, w}, pass + 1 == passes ? y : "");
    }
    if (ok) {
      res[0] = x;
      return res;
    }
  }
  for (size_t j = 0; j < moved.size(); ++j) {
    const int64_t d = moved[j];
    const int64_t n = xs[size_t(d)], m = out[size_t(d)];
    ResizeTaps& taps = all[j];
    if (m * taps.k > (int64_t(1) << 26))
      throw Unsupported(cat("resizing dim ", d, " from ", n, " to ", m, " takes ", taps.k, " taps per position: over 2^26 positions"));
    const std::string last = j + 1 == moved.size() ? y : "";
    if (taps.k == 1) {
      const TensorId idx = g.add_constant(g.unique_name(cat(name, "/positions", d)), DType::Int64, Tensor<int64_t>(Shape{m}, std::move(taps.index)));
      x = add_part(g, name, cat("axis", d), ops::Gather{.axis = d}, {x, idx}, last);
      continue;
    }
    const TensorId idx = g.add_constant(g.unique_name(cat(name, "/taps", d)), DType::Int64, Tensor<int64_t>(Shape{m, taps.k}, std::move(taps.index)));
    Shape ws{m, taps.k};
    ws.resize(size_t(r - d + 1), 1);  // [m, k, 1, ...]: along the gathered dims
    const TensorId w = g.add_constant(g.unique_name(cat(name, "/weights", d)), Tensor<float>(ws, std::move(taps.weight)));
    const TensorId gathered = add_part(g, name, cat("taps", d), ops::Gather{.axis = d}, {x, idx});
    const TensorId weighted = add_part(g, name, cat("weighted", d), ops::Mul{}, {gathered, w});
    x = add_part(g, name, cat("axis", d), ops::ReduceSum{{.axes = {d + 1}, .keepdims = false}}, {weighted}, last);
  }
  res[0] = x;
  return res;
}

/// Blocked QuantizeLinear and DequantizeLinear (opset 21, block_size B along axis): the scale
/// (and zero point) hold one value per block of B positions along the axis, the last block
/// possibly short, and match x elsewhere. Both are constants, expanded at import to x's shape
/// (position i of the axis takes block i / B); then DequantizeLinear is (x - zero) * scale, and
/// QuantizeLinear round-half-even(x / scale) + zero saturated to the type, in pet's ops.
std::vector<TensorId> blocked_quantization(const NodeCtx& c, const std::string& name, Graph& g, const std::function<TensorId(int)>& data) {
  const bool quantize = c.node.op_type() == "QuantizeLinear";
  if (!c.present(0) || !c.present(1)) throw InvalidInput("inputs 0 (x) and 1 (scale) are required");
  const auto t = c.type(0);
  if (!t) throw InvalidInput("x's type is unknown");
  const Shape& xs = t->shape;
  const int64_t r = int64_t(xs.size()), block = c.i("block_size", 0);
  int64_t axis = c.i("axis", 1);
  if (axis < -r || axis >= r) throw InvalidInput(cat("axis ", axis, " is out of range for x of shape ", xs));
  if (axis < 0) axis += r;
  if (block < 1) throw InvalidInput(cat("block_size must be positive, got ", block));
  const int64_t n = xs[size_t(axis)], blocks = n == 0 ? 0 : (n - 1) / block + 1;  // (block may be INT64_MAX)
  Shape ps = xs;
  ps[size_t(axis)] = blocks;
  const auto* scale = c.computed(1);
  if (!scale) throw Unsupported(cat("the scale (input 1 '", c.node.input(1), "') of blocked quantization must be a constant"));
  if (!is_float(scale->first)) throw InvalidInput("the scale must be float");
  const auto& sv = std::get<Tensor<float>>(scale->second);
  if (sv.shape() != ps)
    throw InvalidInput(cat("the scale has shape ", sv.shape(), "; x ", xs, " in blocks of ", block, " along axis ", axis, " needs ", ps));
  DType qt = quantize ? DType::UInt8 : t->dtype;
  Tensor<int64_t> zero(ps, std::vector<int64_t>(size_t(numel(ps)), 0));
  if (c.present(2)) {
    const auto* z = c.computed(2);
    if (!z) throw Unsupported(cat("the zero point (input 2 '", c.node.input(2), "') of blocked quantization must be a constant"));
    if (!is_int8(z->first)) throw Unsupported(cat("zero point of type ", dtype_name(z->first), "; pet quantizes to int8 and uint8"));
    zero = const_ints(z->second);
    if (zero.shape() != ps) throw InvalidInput(cat("the zero point has shape ", zero.shape(), "; the scale's is ", ps));
    qt = z->first;
  }
  if (quantize && c.attr("output_dtype") && c.i("output_dtype", 0) != 0) {
    const DType d = dtype_from_onnx(int32_t(std::clamp<int64_t>(c.i("output_dtype", 0), INT32_MIN, INT32_MAX)), "output_dtype");
    if (c.present(2) && d != qt) throw InvalidInput(cat("output_dtype is ", dtype_name(d), " but y_zero_point is ", dtype_name(qt)));
    qt = d;
  }
  if (!is_int8(qt)) throw Unsupported(cat(quantize ? "quantization to " : "dequantization of ", dtype_name(qt), "; pet quantizes to int8 and uint8"));
  if (!quantize && !is_int8(t->dtype)) throw Unsupported(cat("blocked dequantization of ", dtype_name(t->dtype), "; pet takes int8 and uint8"));
  if (quantize && !is_float(t->dtype)) throw InvalidInput(cat("x must be float, got ", dtype_name(t->dtype)));
  // the scale and zero point at every position of x
  const int64_t inner = [&] { int64_t p = 1; for (size_t d = size_t(axis) + 1; d < xs.size(); ++d) p *= xs[d]; return p; }();
  const int64_t total = numel(xs);
  std::vector<float> s_full(static_cast<size_t>(total)), z_full(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) {
    const int64_t outer = i / (n * inner), pos = (i / inner) % n, in = i % inner;
    const int64_t j = (outer * blocks + pos / block) * inner + in;
    s_full[size_t(i)] = sv[j];
    z_full[size_t(i)] = float(zero[j]);
  }
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  if (out.empty() || c.node.output(0).empty()) return out;
  const TensorId s = g.add_constant(g.unique_name(cat(name, "/scale")), Tensor<float>(xs, std::move(s_full)));
  const TensorId z = g.add_constant(g.unique_name(cat(name, "/zero_point")), Tensor<float>(xs, std::move(z_full)));
  const std::string& y = c.node.output(0);
  if (!quantize) {
    const TensorId xf = add_part(g, name, "as_float", ops::Cast{.to = DType::Float32}, {data(0)});
    out[0] = add_part(g, name, "dequantized", ops::Mul{}, {add_part(g, name, "centred", ops::Sub{}, {xf, z}), s}, y);
    return out;
  }
  const TensorId v = add_part(g, name, "rounded", ops::Round{}, {add_part(g, name, "scaled", ops::Div{}, {data(0), s})});
  const ops::QuantizeLinear q{.to = qt};
  const TensorId sat = add_part(g, name, "saturated", ops::Clip{.min = double(q.lo()), .max = double(q.hi())}, {add_part(g, name, "shifted", ops::Add{}, {v, z})});
  out[0] = add_part(g, name, "quantized", ops::Cast{.to = qt}, {sat}, y);
  return out;
}

}  // namespace

const std::map<std::string, FormExpansion, std::less<>>& form_table() {
  static const std::map<std::string, FormExpansion, std::less<>> t = [] {
    auto bool_input = [](const NodeCtx& c) { return c.present(0) && c.type(0) && c.type(0)->dtype == DType::Bool; };
    return std::map<std::string, FormExpansion, std::less<>>{
        {"Gelu", {[](const NodeCtx& c) { return c.s("approximate", "none") == "tanh"; }, gelu_tanh}},
        {"Pad", {[](const NodeCtx& c) { return c.s("mode", "constant") == "wrap"; }, pad_wrap}},
        {"ReduceMax", {bool_input, reduce_bool}},
        {"ReduceMin", {bool_input, reduce_bool}},
        {"QuantizeLinear", {[](const NodeCtx& c) { return c.i("block_size", 0) != 0; }, blocked_quantization}},
        {"DequantizeLinear", {[](const NodeCtx& c) { return c.i("block_size", 0) != 0; }, blocked_quantization}},
        {"Resize", {[](const NodeCtx& c) {
                      return (c.flag("antialias", false) && c.s("mode", "nearest") != "nearest") || c.s("keep_aspect_ratio_policy", "stretch") != "stretch";
                    },
                    resize_taps_import}},
    };
  }();
  return t;
}

const std::map<std::string, ExpandFn, std::less<>>& expand_table() {
  static const std::map<std::string, ExpandFn, std::less<>> t = [] {
    std::map<std::string, ExpandFn, std::less<>> m = {
      {"RNN", import_recurrent},
      {"GRU", import_recurrent},
      {"LSTM", import_recurrent},
      {"MeanVarianceNormalization", mean_variance_normalization},
      {"LpNormalization", lp_normalization},
      {"LpPool", lp_pool},
      {"GlobalLpPool", global_lp_pool},
      {"ReverseSequence", reverse_sequence},
      {"Compress", compress},
      {"GroupNormalization", group_normalization},
      {"AffineGrid", affine_grid},
    };
    add_signal_ops(m);
    add_layout_ops(m);
    add_loss_ops(m);
    return m;
  }();
  return t;
}

}  // namespace pet::onnx::detail
