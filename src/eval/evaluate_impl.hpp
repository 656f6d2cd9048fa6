#pragma once
// Template implementation of the interpreter; included only by the instantiation units
// interpreter_{float,double,f31}.cpp so that each element type is compiled once.
#include <climits>

#include "kernels.hpp"
#include "pet/eval/interpreter.hpp"

namespace pet {

namespace detail {

template <class OpT, class T, class E>
concept MultiOutputFormula = requires(const OpT& o, const Index& i, const Reader<T, E>& r) {
  { o.template at<E>(0, i, r) };
};

template <class T, class E, class OpT>
Tensor<E> formula_output(const OpT& op, int k, std::span<const Value<T>> in, const Shape& shape) {
  Tensor<E> t(shape);
  const Reader<T, E> rd{in};
  parallel_chunks(t.size(), 256, [&](int64_t b, int64_t e) {
    Index idx = unflatten(b, shape);
    for (int64_t i = b; i < e; ++i) {
      if constexpr (MultiOutputFormula<OpT, T, E>) t[i] = op.template at<E>(k, idx, rd);
      else t[i] = op.template at<E>(idx, rd);
      next_index(idx, shape);
    }
  });
  return t;
}

template <class T, class OpT>
std::vector<Value<T>> by_formula(const OpT& op, std::span<const Value<T>> in, InTypes out_types) {
  std::vector<Value<T>> out;
  for (size_t k = 0; k < out_types.size(); ++k) {
    if (is_float(out_types[k].dtype)) out.emplace_back(formula_output<T, T>(op, int(k), in, out_types[k].shape));
    else out.emplace_back(formula_output<T, int64_t>(op, int(k), in, out_types[k].shape));
  }
  return out;
}

template <class T>
const Tensor<T>& data(std::span<const Value<T>> in, size_t i) {
  const auto* t = std::get_if<Tensor<T>>(&in[i]);
  PET_CHECK(t, "input ", i, " is not a data tensor");
  return *t;
}

template <class T>
bool all_data(std::span<const Value<T>> in) {
  for (const auto& v : in)
    if (!std::holds_alternative<Tensor<T>>(v)) return false;
  return true;
}

template <class OpT>
concept BinaryArith = std::is_same_v<OpT, ops::Add> || std::is_same_v<OpT, ops::Sub> ||
                      std::is_same_v<OpT, ops::Mul> || std::is_same_v<OpT, ops::Div>;
template <class OpT>
concept UnaryArith = requires(const OpT& o) { o.template apply<float>(1.0f); };
template <class OpT>
concept Alias = std::is_same_v<OpT, ops::Reshape> || std::is_same_v<OpT, ops::Flatten> ||
                std::is_same_v<OpT, ops::Squeeze> || std::is_same_v<OpT, ops::Unsqueeze> ||
                std::is_same_v<OpT, ops::Identity>;

/// The fast path of one op, or nullopt when the formula must be used.
template <class T, class OpT>
std::optional<std::vector<Value<T>>> fast(const OpT& op, std::span<const Value<T>> in, InTypes out_types) {
  using V = std::vector<Value<T>>;
  const Shape& os = out_types[0].shape;
  constexpr bool real = std::is_floating_point_v<T>;
  if constexpr (Alias<OpT>) {
    return V{std::visit([&](const auto& t) { return Value<T>(t.reshaped(os)); }, in[0])};
  } else if constexpr (std::is_same_v<OpT, ops::Dropout>) {
    V out{in[0]};
    if (out_types.size() == 2) out.emplace_back(Tensor<int64_t>(os, int64_t(1)));
    return out;
  } else if constexpr (std::is_same_v<OpT, ops::Transpose>) {
    return V{std::visit([&](const auto& t) { return Value<T>(kernels::rt_copy(t, t.shape(), op.perm, os)); }, in[0])};
  } else if constexpr (std::is_same_v<OpT, ops::RT>) {
    return V{std::visit([&](const auto& t) { return Value<T>(kernels::rt_copy(t, op.split_shape, op.perm, os)); }, in[0])};
  } else if constexpr (std::is_same_v<OpT, ops::Patch>) {
    return V{std::visit([&](const auto& base) -> Value<T> {
      using TT = std::decay_t<decltype(base)>;
      const auto& patch = std::get<TT>(in[1]);
      TT out = base.clone();
      const Shape& ps = patch.shape();
      if (patch.size() == 0) return out;
      Index i(int(ps.size()));
      int64_t k = 0;
      do {
        Index o = i;
        for (int d = 0; d < o.rank; ++d) o[d] += op.offsets[size_t(d)];
        out.at(o) = patch[k++];
      } while (next_index(i, ps));
      return out;
    }, in[0])};
  } else if constexpr (std::is_same_v<OpT, ops::Conv>) {
    return V{kernels::conv(op, data(in, 0), data(in, 1), in.size() == 3 ? &data(in, 2) : nullptr, os)};
  } else if constexpr (std::is_same_v<OpT, ops::Resize> && real) {
    return V{kernels::resize(op, data(in, 0), os)};
  } else if constexpr (std::is_same_v<OpT, ops::ConvTranspose>) {
    return V{kernels::conv_transpose(op, data(in, 0), data(in, 1), in.size() == 3 ? &data(in, 2) : nullptr, os)};
  } else if constexpr (std::is_same_v<OpT, ops::MatMul>) {
    return V{kernels::matmul(data(in, 0), data(in, 1), os)};
  } else if constexpr (std::is_same_v<OpT, ops::Gemm>) {
    return V{kernels::gemm_op(op, data(in, 0), data(in, 1), in.size() == 3 ? &data(in, 2) : nullptr, os)};
  } else if constexpr (BinaryArith<OpT>) {
    if (!is_float(out_types[0].dtype) || !all_data(in)) return std::nullopt;
    if constexpr (std::is_same_v<OpT, ops::Div> && !real) return std::nullopt;  // formula reports /0
    auto f = [](T a, T b) {
      if constexpr (std::is_same_v<OpT, ops::Add>) return a + b;
      else if constexpr (std::is_same_v<OpT, ops::Sub>) return a - b;
      else if constexpr (std::is_same_v<OpT, ops::Mul>) return a * b;
      else return a / b;
    };
    return V{kernels::binary(f, data(in, 0), data(in, 1), os)};
  } else if constexpr (UnaryArith<OpT>) {
    if (!is_float(out_types[0].dtype)) return std::nullopt;
    if constexpr (!real && !OpT::multilinear) detail::require_ordered<T>(OpT::name);
    return V{kernels::unary(data(in, 0), [&](T v) { return op.template apply<T>(v); })};
  } else if constexpr (std::is_same_v<OpT, ops::Hardmax> && real) {
    return V{kernels::hardmax(op, data(in, 0))};
  } else if constexpr (std::is_same_v<OpT, ops::CumSum>) {
    return V{std::visit([&](const auto& t) { return Value<T>(kernels::cumsum(op, t)); }, in[0])};
  } else if constexpr (std::is_same_v<OpT, ops::TopK>) {
    if constexpr (!real) {
      return std::nullopt;  // the formula refuses the field
    } else {
      return std::visit([&](const auto& t) {
        auto [v, i] = kernels::topk(op, t, os);
        return V{Value<T>(std::move(v)), Value<T>(std::move(i))};
      }, in[0]);
    }
  } else if constexpr (std::is_same_v<OpT, ops::ScatterElements> || std::is_same_v<OpT, ops::ScatterND>) {
    const auto* idx = std::get_if<Tensor<int64_t>>(&in[1]);
    if (!idx || in[0].index() != in[2].index()) return std::nullopt;
    return V{std::visit([&](const auto& x) {
      using TT = std::decay_t<decltype(x)>;
      if constexpr (std::is_same_v<OpT, ops::ScatterElements>) return Value<T>(kernels::scatter_elements(op, x, *idx, std::get<TT>(in[2])));
      else return Value<T>(kernels::scatter_nd(op, x, *idx, std::get<TT>(in[2])));
    }, in[0])};
  } else if constexpr (std::is_same_v<OpT, ops::QuantizeLinear> && real) {
    const auto* zero = in.size() == 3 ? std::get_if<Tensor<int64_t>>(&in[2]) : nullptr;
    if (!all_data(in.first(2)) || (in.size() == 3 && !zero)) return std::nullopt;
    return V{kernels::quantize(op, data(in, 0), data(in, 1), zero)};
  } else if constexpr (std::is_same_v<OpT, ops::DequantizeLinear> && real) {
    const auto* x = std::get_if<Tensor<int64_t>>(&in[0]);
    const auto* zero = in.size() == 3 ? std::get_if<Tensor<int64_t>>(&in[2]) : nullptr;
    if (!x || !std::holds_alternative<Tensor<T>>(in[1]) || (in.size() == 3 && !zero)) return std::nullopt;
    return V{kernels::dequantize(op, *x, data(in, 1), zero)};
  } else if constexpr (std::is_same_v<OpT, ops::DynamicQuantizeLinear> && real) {
    const Tensor<T>& x = data(in, 0);
    float lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < x.size(); ++i) {
      const float v = float(x[i]);
      if (v == v) lo = std::min(lo, v), hi = std::max(hi, v);
    }
    const auto p = OpT::params(lo, hi);
    Tensor<int64_t> y(x.shape());
    parallel_for(x.size(), [&](int64_t i) { y[i] = OpT::quantize(float(x[i]), p); }, x.size() > 16384);
    return V{std::move(y), Tensor<T>(Shape{}, T(p.scale)), Tensor<int64_t>(Shape{}, p.zero)};
  } else if constexpr (is_one_of<OpT, ops::MatMulInteger, ops::ConvInteger, ops::QLinearMatMul, ops::QLinearConv> && real) {
    // integer operands and zero points; QLinear scales as data
    constexpr bool qlinear = is_one_of<OpT, ops::QLinearMatMul, ops::QLinearConv>;
    constexpr int kb = qlinear ? 3 : 1;
    for (size_t i = 0; i < in.size(); ++i)
      if (std::holds_alternative<Tensor<T>>(in[i]) != (qlinear && (i == 1 || i == 4 || i == 6))) return std::nullopt;
    auto ints = [&](int i) { return i < 0 ? nullptr : &std::get<Tensor<int64_t>>(in[size_t(i)]); };
    int za = 2, zb = 5;
    if constexpr (std::is_same_v<OpT, ops::MatMulInteger>) za = op.a_zero ? 2 : -1, zb = op.b_zero_input();
    if constexpr (std::is_same_v<OpT, ops::ConvInteger>) za = op.x_zero ? 2 : -1, zb = op.w_zero_input();
    Tensor<int64_t> acc;
    if constexpr (is_one_of<OpT, ops::MatMulInteger, ops::QLinearMatMul>)
      acc = kernels::int_matmul(*ints(0), ints(za), *ints(kb), ints(zb), os);
    else
      acc = kernels::int_conv(op.conv(), *ints(0), ints(za), *ints(kb), ints(zb), in.size() == 9 ? ints(8) : nullptr, os);
    if constexpr (!qlinear) {
      return V{std::move(acc)};
    } else {
      const int axis = std::is_same_v<OpT, ops::QLinearConv> ? 1 : int(os.size()) - 1;
      return V{kernels::requantize(acc, axis, data(in, 1)[0], data(in, 4), data(in, 6)[0], (*ints(7))[0], op.to)};
    }
  } else if constexpr (std::is_same_v<OpT, ops::GridSample> && real) {
    return V{kernels::grid_sample(op, data(in, 0), data(in, 1), os)};
  } else if constexpr (std::is_same_v<OpT, ops::RoiAlign> && real) {
    return V{kernels::roi_align(op, data(in, 0), data(in, 1), std::get<Tensor<int64_t>>(in[2]), os)};
  } else if constexpr (std::is_same_v<OpT, ops::Det> && real) {
    return V{kernels::det(data(in, 0), os)};
  } else if constexpr ((std::is_same_v<OpT, ops::Softmax> || std::is_same_v<OpT, ops::LogSoftmax>) && real) {
    return V{kernels::softmax(op, data(in, 0))};
  } else if constexpr (std::is_same_v<OpT, ops::LayerNormalization> && real) {
    auto outs = kernels::layer_norm(op, data(in, 0), data(in, 1), in.size() == 3 ? &data(in, 2) : nullptr, out_types);
    return V(outs.begin(), outs.end());
  } else if constexpr (std::is_same_v<OpT, ops::InstanceNormalization> && real) {
    return V{kernels::instance_norm(op, data(in, 0), data(in, 1), data(in, 2))};
  } else if constexpr (std::is_same_v<OpT, ops::BatchNormalization> && real) {
    if (op.training_mode) return std::nullopt;
    std::vector<Tensor<T>> ts;
    for (size_t i = 0; i < 5; ++i) ts.push_back(data(in, i));
    return V{kernels::batch_norm<T>(op, ts)};
  } else {
    return std::nullopt;
  }
}

}  // namespace detail

template <class T>
std::vector<Value<T>> evaluate_by_formula(const Op& op, std::span<const Value<T>> in, InTypes out_types) {
  return std::visit([&](const auto& o) { return detail::by_formula<T>(o, in, out_types); }, op);
}

namespace detail {
/// Integer results of a narrower type than int64 (int32, int8, uint8) wrap to it, as that
/// type's arithmetic does in ONNX Runtime (an int8 Add of 100 and 100 is -56). Outputs that
/// are already in range (almost all) are left as they are, aliases included.
template <class T>
void wrap_narrow_ints(std::vector<Value<T>>& out, InTypes out_types) {
  for (size_t k = 0; k < out.size() && k < out_types.size(); ++k) {
    const DType dt = out_types[k].dtype;
    auto* t = std::get_if<Tensor<int64_t>>(&out[k]);
    if (!t || (dt != DType::Int32 && !is_int8(dt))) continue;
    int64_t i = 0;
    while (i < t->size() && (*t)[i] == wrap_to(dt, (*t)[i])) ++i;
    if (i == t->size()) continue;
    Tensor<int64_t> w = t->clone();
    for (; i < w.size(); ++i) w[i] = wrap_to(dt, w[i]);
    out[k] = std::move(w);
  }
}
}  // namespace detail

template <class T>
std::vector<Value<T>> evaluate_op(const Op& op, std::span<const Value<T>> in, InTypes out_types) {
  std::vector<Value<T>> out = std::visit([&](const auto& o) {
    if (auto r = detail::fast<T>(o, in, out_types)) return std::move(*r);
    return detail::by_formula<T>(o, in, out_types);
  }, op);
  detail::wrap_narrow_ints(out, out_types);
  return out;
}

namespace detail {
template <class T>
Tensor<T> default_lift(const Tensor<float>& t, const std::string& name) {
  if constexpr (std::is_same_v<T, float>) return t;
  else return lift_tensor<T>(t, cat("constant '", name, "'"));
}

/// Rethrows the current pet error with `prefix` prepended, keeping its type.
[[noreturn]] inline void rethrow_with(const std::string& prefix) {
  try {
    throw;
  } catch (const InvalidInput& e) {
    throw InvalidInput(prefix + e.what());
  } catch (const Unsupported& e) {
    throw Unsupported(prefix + e.what());
  } catch (const InternalError& e) {
    throw InternalError(prefix + e.what());
  }
}
}  // namespace detail

template <class T>
Interpreter<T>::Interpreter(const Graph& g, ConstantLifter<T> lift) : g_(g), order_(g.topo_order()) {
  constants_.resize(size_t(g.num_tensors()));
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    const TensorInfo& info = g.tensor(t);
    if (!info.value) continue;
    if (const auto* f = std::get_if<Tensor<float>>(&*info.value))
      constants_[size_t(t)] = Value<T>(lift ? lift(t, *f) : detail::default_lift<T>(*f, info.name));
    else if (const auto* i = std::get_if<Tensor<int64_t>>(&*info.value))
      constants_[size_t(t)] = Value<T>(*i);
    // 1-byte integer constants (a quantized model's weights) are widened when a node reads
    // them, not held widened for the interpreter's life (8 bytes an element)
  }
  last_use_.assign(size_t(g.num_tensors()), -1);
  for (size_t pos = 0; pos < order_.size(); ++pos)
    for (TensorId t : g.node(order_[pos]).inputs) last_use_[size_t(t)] = int(pos);
  for (TensorId t : g.outputs()) last_use_[size_t(t)] = INT_MAX;
}

template <class T>
std::vector<Value<T>> Interpreter<T>::run(std::span<const Value<T>> inputs) const {
  if (inputs.size() != g_.inputs().size())
    throw InvalidInput(cat("the model has ", g_.inputs().size(), " inputs but ", inputs.size(), " values were given"));
  std::vector<std::optional<Value<T>>> vals(size_t(g_.num_tensors()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorInfo& info = g_.tensor(g_.inputs()[i]);
    const Shape& s = value_shape(inputs[i]);
    bool data = std::holds_alternative<Tensor<T>>(inputs[i]);
    if (data != is_float(info.type.dtype))
      throw InvalidInput(cat("input '", info.name, "' must be ", dtype_name(info.type.dtype), " but ",
                             data ? "a float" : "an integer", " tensor was given"));
    if (s != info.type.shape)
      throw InvalidInput(cat("input '", info.name, "' has shape ", s, " but the model expects ", info.type.shape));
    vals[size_t(g_.inputs()[i])] = inputs[i];
  }
  auto get = [&](TensorId t) -> Value<T> {
    if (constants_[size_t(t)]) return *constants_[size_t(t)];
    if (const auto& c = g_.tensor(t).value) return Value<T>(const_ints(*c));
    PET_CHECK(vals[size_t(t)].has_value(), "tensor '", g_.tensor(t).name, "' has no value");
    return *vals[size_t(t)];
  };
  for (size_t pos = 0; pos < order_.size(); ++pos) {
    const Node& n = g_.node(order_[pos]);
    std::vector<Value<T>> in;
    in.reserve(n.inputs.size());
    for (TensorId t : n.inputs) in.push_back(get(t));
    Types out_types;
    for (TensorId t : n.outputs) out_types.push_back(g_.type(t));
    std::vector<Value<T>> out;
    try {
      out = evaluate_op<T>(n.op, in, out_types);
    } catch (const Error&) {
      detail::rethrow_with(cat(op_name(n.op), " '", n.name, "': "));
    }
    PET_CHECK(out.size() == n.outputs.size(), op_name(n.op), " '", n.name, "' produced ", out.size(), " outputs");
    for (size_t k = 0; k < out.size(); ++k) {
      PET_CHECK(value_shape(out[k]) == out_types[k].shape, op_name(n.op), " '", n.name, "' output ", k, " has shape ",
                value_shape(out[k]), " instead of ", out_types[k].shape);
      vals[size_t(n.outputs[k])] = std::move(out[k]);
    }
    in.clear();
    for (TensorId t : n.inputs)
      if (last_use_[size_t(t)] == int(pos)) vals[size_t(t)].reset();
  }
  std::vector<Value<T>> result;
  for (TensorId t : g_.outputs()) result.push_back(get(t));
  return result;
}

#define PET_INSTANTIATE_INTERPRETER(T)                                                                  \
  template class Interpreter<T>;                                                                       \
  template std::vector<Value<T>> evaluate_op<T>(const Op&, std::span<const Value<T>>, InTypes);        \
  template std::vector<Value<T>> evaluate_by_formula<T>(const Op&, std::span<const Value<T>>, InTypes);

}  // namespace pet
