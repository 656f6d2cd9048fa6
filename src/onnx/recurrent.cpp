#include "expand.hpp"

#include <algorithm>
#include <cctype>

namespace pet::onnx::detail {

namespace {

/// Most steps (sequence length) an unrolled recurrent node may have.
constexpr int64_t kMaxSteps = 4096;

struct Cell {
  int gates;                              ///< gate blocks in W and R (1, 3, 4)
  int acts;                               ///< activation functions per direction (1, 2, 3)
  std::vector<std::string> default_acts;  ///< ONNX's defaults, for one direction
};

Cell cell_of(std::string_view type) {
  if (type == "RNN") return {1, 1, {"Tanh"}};
  if (type == "GRU") return {3, 2, {"Sigmoid", "Tanh"}};
  return {4, 3, {"Sigmoid", "Tanh", "Tanh"}};
}

std::string lower(std::string s) {
  for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

/// The activations of the node, one Op per (direction, function), alpha and beta consumed in
/// order by the functions that take them (as ONNX Runtime reads the lists).
std::vector<Op> activations(const NodeCtx& c, const Cell& cell, int dirs) {
  std::vector<std::string> names;
  if (const auto* a = c.attr("activations")) names.assign(a->strings().begin(), a->strings().end());
  if (names.empty())
    for (int d = 0; d < dirs; ++d) names.insert(names.end(), cell.default_acts.begin(), cell.default_acts.end());
  if (int(names.size()) != cell.acts * dirs)
    throw InvalidInput(cat("'activations' lists ", names.size(), " functions; a ", dirs == 2 ? "bidirectional " : "",
                           c.node.op_type(), " needs ", cell.acts * dirs));
  std::vector<float> alpha, beta;
  if (const auto* a = c.attr("activation_alpha")) alpha.assign(a->floats().begin(), a->floats().end());
  if (const auto* a = c.attr("activation_beta")) beta.assign(a->floats().begin(), a->floats().end());
  size_t ai = 0, bi = 0;
  auto next = [](const std::vector<float>& v, size_t& i, float def) { return i < v.size() ? v[i++] : def; };
  std::vector<Op> out;
  for (const auto& n : names) {
    const std::string l = lower(n);
    if (l == "sigmoid") out.push_back(ops::Sigmoid{});
    else if (l == "tanh") out.push_back(ops::Tanh{});
    else if (l == "relu") out.push_back(ops::Relu{});
    else if (l == "softsign") out.push_back(ops::Softsign{});
    else if (l == "softplus") out.push_back(ops::Softplus{});
    else if (l == "leakyrelu") out.push_back(ops::LeakyRelu{.alpha = next(alpha, ai, 0.01f)});
    else if (l == "elu") out.push_back(ops::Elu{.alpha = next(alpha, ai, 1.0f)});
    else if (l == "thresholdedrelu") out.push_back(ops::ThresholdedRelu{.alpha = next(alpha, ai, 1.0f)});
    else if (l == "hardsigmoid") {
      const float a = next(alpha, ai, 0.2f);
      out.push_back(ops::HardSigmoid{.alpha = a, .beta = next(beta, bi, 0.5f)});
    } else {
      throw Unsupported(cat("activation '", n, "' (recurrent cells take Sigmoid, Tanh, Relu, LeakyRelu, HardSigmoid, Elu, "
                            "Softsign, Softplus and ThresholdedRelu)"));
    }
  }
  return out;
}

/// The float32 constant of input i, of the given shape; `what` names it in errors.
Tensor<float> weight(const NodeCtx& c, int i, const Shape& shape, std::string_view what) {
  const auto* v = c.constant(i);
  if (!v)
    throw Unsupported(cat("input ", i, " (", what, ", '", c.node.input(i), "') is computed by the model; pet unrolls ",
                          c.node.op_type(), " with constant weights (initializers)"));
  if (v->first != DType::Float32) throw Unsupported(cat("input ", i, " (", what, ") is ", dtype_name(v->first), ", not float32"));
  const auto& t = std::get<Tensor<float>>(v->second);
  if (t.shape() != shape) throw InvalidInput(cat("input ", i, " (", what, ") has shape ", t.shape(), "; expected ", shape));
  return t;
}

/// Rows [r0, r0 + n) of matrix d of a [D, rows, cols] tensor, transposed: [cols, n].
Tensor<float> block_t(const Tensor<float>& w, int64_t d, int64_t r0, int64_t n) {
  const int64_t rows = w.shape()[1], cols = w.shape()[2];
  Tensor<float> out({cols, n});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t k = 0; k < cols; ++k) out[k * n + r] = w[(d * rows + r0 + r) * cols + k];
  return out;
}

/// Elements [o, o + n) of row d of a [D, len] tensor.
std::vector<float> row_part(const Tensor<float>& b, int64_t d, int64_t o, int64_t n) {
  const int64_t len = b.shape()[1];
  return std::vector<float>(b.data() + d * len + o, b.data() + d * len + o + n);
}

}  // namespace

std::vector<TensorId> import_recurrent(const NodeCtx& c, const std::string& name, Graph& g,
                                       const std::function<TensorId(int)>& data) {
  const std::string type = c.node.op_type();
  const Cell cell = cell_of(type);
  const bool lstm = type == "LSTM", gru = type == "GRU";
  if (c.node.output_size() > (lstm ? 3 : 2)) throw InvalidInput(cat("has ", c.node.output_size(), " outputs; ", type, " has at most ", lstm ? 3 : 2));
  for (int i : {0, 1, 2})
    if (!c.present(i)) throw InvalidInput(cat("required input ", i, " (", i == 0 ? "X" : i == 1 ? "W" : "R", ") is missing"));
  const auto xt = c.type(0);
  if (!xt) throw InvalidInput("input 0 (X) is missing");
  if (xt->dtype != DType::Float32) throw Unsupported(cat("X is ", dtype_name(xt->dtype), "; pet's recurrent cells take float32"));
  if (xt->shape.size() != 3) throw InvalidInput(cat("X must have rank 3, got ", xt->shape));
  if (numel(xt->shape) == 0) throw Unsupported(cat("X is empty (shape ", xt->shape, ")"));
  const int64_t layout = c.i("layout", 0);
  if (layout != 0 && layout != 1) throw InvalidInput(cat("layout must be 0 or 1, got ", layout));
  const int64_t T = xt->shape[layout ? 1 : 0], B = xt->shape[layout ? 0 : 1], I = xt->shape[2];
  if (T > kMaxSteps)
    throw Unsupported(cat("the sequence is ", T, " steps long; pet unrolls ", type, " at import, up to ", kMaxSteps, " steps"));
  const std::string direction = c.s("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    throw InvalidInput(cat("direction '", direction, "' (forward, reverse or bidirectional)"));
  const int D = direction == "bidirectional" ? 2 : 1;
  const auto wt = c.type(1);
  if (!wt || wt->shape.size() != 3) throw InvalidInput(cat("W must have rank 3 [num_directions, ", cell.gates, " * hidden_size, input_size]"));
  const int64_t H = c.i("hidden_size", wt->shape[1] / cell.gates);
  if (H < 1) throw InvalidInput(cat("hidden_size must be positive, got ", H));
  pet::detail::expect_bounded({H}, "hidden_size");
  const int64_t G = cell.gates * H;
  const Tensor<float> W = weight(c, 1, {D, G, I}, "W");
  const Tensor<float> R = weight(c, 2, {D, G, H}, "R");
  const Tensor<float> Bias = c.present(3) ? weight(c, 3, {D, 2 * G}, "B") : Tensor<float>({D, 2 * G});
  const bool peep = lstm && c.present(7);
  const Tensor<float> P = peep ? weight(c, 7, {D, 3 * H}, "P") : Tensor<float>({D, 3 * H});
  if (c.present(4)) {
    const auto* sl = c.constant(4);
    if (!sl) throw Unsupported("input 4 (sequence_lens) is computed by the model; pet unrolls sequences of one static length");
    const Tensor<int64_t> v = pet::const_ints(sl->second);
    if (v.shape() != Shape{B}) throw InvalidInput(cat("sequence_lens has shape ", v.shape(), "; expected [", B, "]"));
    for (int64_t b = 0; b < B; ++b)
      if (v[b] != T)
        throw Unsupported(cat("sequence_lens[", b, "] is ", v[b], " but the sequence has ", T,
                              " steps; pet unrolls sequences of one length (no padded batches)"));
  }
  if (lstm && c.flag("input_forget", false)) throw Unsupported("input_forget = 1 (coupled input and forget gates)");
  const bool clip = c.attr("clip") != nullptr;
  const float clip_v = c.f("clip", 0.f);
  if (clip && !(clip_v > 0)) throw InvalidInput(cat("clip must be positive, got ", clip_v));
  const bool lbr = gru && c.flag("linear_before_reset", false);
  const std::vector<Op> acts = activations(c, cell, D);

  auto op = [&](const std::string& what, Op o, std::vector<TensorId> in, const std::string& out_name = "") {
    return add_part(g, name, what, std::move(o), std::move(in), out_name);
  };
  auto constant = [&](const std::string& what, Tensor<float> v) { return g.add_constant(g.unique_name(cat(name, "/", what)), std::move(v)); };
  auto split = [&](const std::string& what, TensorId t, int parts) {
    ops::Split s{.axis = 2, .split = std::vector<int64_t>(size_t(parts), H), .num_outputs = parts};
    return g.add_node(g.unique_name(cat(name, "/", what)), s, {t}, {});
  };
  auto clipped = [&](const std::string& what, TensorId t) {
    return clip ? op(what + "_clip", ops::Clip{.min = -clip_v, .max = clip_v}, {t}) : t;
  };
  // Initial states as [D, B, H] (time-major), zeros where not given.
  auto initial = [&](int i, const char* what) -> TensorId {
    if (!c.present(i)) return -1;
    const auto t = c.type(i);
    const Shape want = layout ? Shape{B, D, H} : Shape{D, B, H};
    if (!t || t->shape != want) throw InvalidInput(cat("input ", i, " (", what, ") has shape ", t ? t->shape : Shape{}, "; expected ", want));
    TensorId id = data(i);
    return layout ? op(cat(what, "_time_major"), ops::Transpose{.perm = {1, 0, 2}}, {id}) : id;
  };
  const TensorId h0 = initial(5, "initial_h"), c0 = lstm ? initial(6, "initial_c") : -1;
  auto state = [&](TensorId all, int d, const char* what) -> TensorId {  // [1, B, H] of direction d
    if (all < 0) return constant(cat(what, d), Tensor<float>({1, B, H}));
    if (D == 1) return all;
    return op(cat(what, d), ops::Slice{.starts = {d}, .ends = {d + 1}, .axes = {0}}, {all});
  };
  TensorId x = data(0);
  if (layout) x = op("X_time_major", ops::Transpose{.perm = {1, 0, 2}}, {x});

  std::vector<TensorId> y_dirs, h_last, c_last;
  for (int d = 0; d < D; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    const Op* act = &acts[size_t(d * cell.acts)];
    const Op& f = act[0];
    const Op& gact = cell.acts > 1 ? act[1] : act[0];
    const Op& hact = cell.acts > 2 ? act[2] : act[0];
    // The input projection of every step with the biases that add outside the gates.
    std::vector<float> bias = row_part(Bias, d, 0, G), rb = row_part(Bias, d, G, G);
    for (int64_t k = 0; k < G; ++k)
      if (!lbr || k < 2 * H) bias[size_t(k)] += rb[size_t(k)];
    TensorId xw = op(cat("X_W", d), ops::MatMul{}, {x, constant(cat("W_t", d), block_t(W, d, 0, G))});
    xw = op(cat("X_W_bias", d), ops::Add{}, {xw, constant(cat("bias", d), Tensor<float>({G}, bias))});
    std::vector<TensorId> steps = T == 1 ? std::vector<TensorId>{xw}
                                         : g.add_node(g.unique_name(cat(name, "/steps", d)),
                                                      ops::Split{.axis = 0, .split = std::vector<int64_t>(size_t(T), 1), .num_outputs = int(T)}, {xw}, {});
    TensorId h = state(h0, d, "h0_"), cs = lstm ? state(c0, d, "c0_") : -1;
    std::vector<TensorId> ys(static_cast<size_t>(T));
    TensorId r_all = -1, r_zr = -1, r_h = -1, rbh = -1, p_i = -1, p_o = -1, p_f = -1;
    if (gru) {
      r_zr = constant(cat("R_zr_t", d), block_t(R, d, 0, 2 * H));
      r_h = constant(cat("R_h_t", d), block_t(R, d, 2 * H, H));
      if (lbr) rbh = constant(cat("Rb_h", d), Tensor<float>({H}, row_part(Bias, d, G + 2 * H, H)));
    } else {
      r_all = constant(cat("R_t", d), block_t(R, d, 0, G));
    }
    if (peep) {
      p_i = constant(cat("P_i", d), Tensor<float>({H}, row_part(P, d, 0, H)));
      p_o = constant(cat("P_o", d), Tensor<float>({H}, row_part(P, d, H, H)));
      p_f = constant(cat("P_f", d), Tensor<float>({H}, row_part(P, d, 2 * H, H)));
    }
    for (int64_t s = 0; s < T; ++s) {
      const int64_t t = reverse ? T - 1 - s : s;
      const std::string at = cat("d", d, "t", t, "/");
      const TensorId xs = steps[size_t(t)];  // [1, B, G]
      if (gru) {
        auto zr = split(at + "zr", op(at + "zr_sum", ops::Add{}, {op(at + "H_R_zr", ops::MatMul{}, {h, r_zr}),
                                                                 op(at + "x_zr", ops::Slice{.starts = {0}, .ends = {2 * H}, .axes = {2}}, {xs})}), 2);
        const TensorId z = op(at + "z", f, {clipped(at + "z", zr[0])});
        const TensorId r = op(at + "r", f, {clipped(at + "r", zr[1])});
        const TensorId xh = op(at + "x_h", ops::Slice{.starts = {2 * H}, .ends = {3 * H}, .axes = {2}}, {xs});
        TensorId hh;
        if (lbr) hh = op(at + "r_HR", ops::Mul{}, {r, op(at + "HR_h_b", ops::Add{}, {op(at + "H_R_h", ops::MatMul{}, {h, r_h}), rbh})});
        else hh = op(at + "rH_R", ops::MatMul{}, {op(at + "rH", ops::Mul{}, {r, h}), r_h});
        const TensorId cand = op(at + "h_cand", gact, {clipped(at + "h", op(at + "h_sum", ops::Add{}, {xh, hh}))});
        // H = (1 - z) h~ + z H_prev = h~ + z (H_prev - h~)
        h = op(at + "H", ops::Add{}, {cand, op(at + "z_diff", ops::Mul{}, {z, op(at + "diff", ops::Sub{}, {h, cand})})});
      } else if (!lstm) {
        h = op(at + "H", f, {clipped(at + "H", op(at + "sum", ops::Add{}, {xs, op(at + "H_R", ops::MatMul{}, {h, r_all})}))});
      } else {
        auto gates = split(at + "gates", op(at + "sum", ops::Add{}, {xs, op(at + "H_R", ops::MatMul{}, {h, r_all})}), 4);  // i o f c
        TensorId i = gates[0], o = gates[1], fg = gates[2];
        if (peep) {
          i = op(at + "i_peep", ops::Add{}, {i, op(at + "P_i_C", ops::Mul{}, {cs, p_i})});
          fg = op(at + "f_peep", ops::Add{}, {fg, op(at + "P_f_C", ops::Mul{}, {cs, p_f})});
        }
        i = op(at + "i", f, {clipped(at + "i", i)});
        fg = op(at + "f", f, {clipped(at + "f", fg)});
        const TensorId cand = op(at + "c_cand", gact, {clipped(at + "c", gates[3])});
        cs = op(at + "C", ops::Add{}, {op(at + "f_C", ops::Mul{}, {fg, cs}), op(at + "i_c", ops::Mul{}, {i, cand})});
        if (peep) o = op(at + "o_peep", ops::Add{}, {o, op(at + "P_o_C", ops::Mul{}, {cs, p_o})});
        o = op(at + "o", f, {clipped(at + "o", o)});
        h = op(at + "H", ops::Mul{}, {o, op(at + "h_C", hact, {cs})});
      }
      ys[size_t(t)] = h;
    }
    h_last.push_back(h);
    if (lstm) c_last.push_back(cs);
    if (c.node.output_size() > 0 && !c.node.output(0).empty())
      y_dirs.push_back(T == 1 ? ys[0] : op(cat("Y", d), ops::Concat{.axis = 0}, ys));  // [T, B, H]
  }
  auto join = [&](const std::string& what, const std::vector<TensorId>& parts) {  // [D, B, H]
    return parts.size() == 1 ? parts[0] : op(what, ops::Concat{.axis = 0}, parts);
  };
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  auto named = [&](int k) { return k < c.node.output_size() && !c.node.output(k).empty(); };
  if (named(0)) {
    std::vector<TensorId> parts;
    for (size_t d = 0; d < y_dirs.size(); ++d) parts.push_back(op(cat("Y_dir", d), ops::Unsqueeze{.axes = {1}}, {y_dirs[d]}));
    TensorId y = parts.size() == 1 ? parts[0] : op("Y_dirs", ops::Concat{.axis = 1}, parts);  // [T, D, B, H]
    out[0] = layout ? op("Y_batch_major", ops::Transpose{.perm = {2, 0, 1, 3}}, {y}, c.node.output(0))
                    : op("Y", ops::Identity{}, {y}, c.node.output(0));
  }
  auto last = [&](int k, const char* what, const std::vector<TensorId>& parts) {
    if (!named(k)) return;
    TensorId s = join(cat(what, "_dirs"), parts);
    out[size_t(k)] = layout ? op(cat(what, "_batch_major"), ops::Transpose{.perm = {1, 0, 2}}, {s}, c.node.output(k))
                            : op(what, ops::Identity{}, {s}, c.node.output(k));
  };
  last(1, "Y_h", h_last);
  if (lstm) last(2, "Y_c", c_last);
  return out;
}

}  // namespace pet::onnx::detail
