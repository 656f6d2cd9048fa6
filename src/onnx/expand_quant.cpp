// ONNX Runtime's quantized contrib ops (domain com.microsoft), which its QOperator quantizer
// writes for the ops other than Conv and MatMul, and ONNX ops on int8 tensors that pet's op
// takes in float only: each imported as standard ops (expand.hpp).
//
// QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax,
// QLinearGlobalAveragePool, QLinearAveragePool and QLinearConcat are, by their definition in
// ONNX Runtime's contrib op documentation, the float op between DequantizeLinear of each
// quantized input and QuantizeLinear of the result: pet imports exactly that, which the cpu
// backend runs as one int8 step or table (kernels/cpu/lower_quant.cpp). ONNX Runtime's own
// kernels compute the same formula in another float order (QLinearAdd: a * (s_a / s_c) +
// b * (s_b / s_c) + an adjusted zero point, with FMA), so an element that lies within float
// rounding of a midpoint can land one quantization step away from pet's.
//
// QGemm is the integer product with an int32 bias: Y = alpha s_a s_b (sum_k (A - z_a)(B - z_b)
// + C), quantized with y_scale and y_zero_point where given (else float): MatMulInteger, Add of
// C (int32), Cast to float, Mul by alpha s_a s_b / y_scale (per column where b_scale is), and
// QuantizeLinear with scale 1 (rounds half to even, adds the zero point, saturates): ONNX
// Runtime's requantization, m = (alpha s_a s_b) / s_y, as QLinearMatMul's.
#include "expand.hpp"

namespace pet::onnx::detail {

namespace {

using Data = std::function<TensorId(int)>;

struct Builder {
  const NodeCtx& c;
  const std::string& name;
  Graph& g;
  const Data& data;

  TensorId op(const std::string& what, Op o, std::vector<TensorId> in, const std::string& out = "") {
    return add_part(g, name, what, std::move(o), std::move(in), out);
  }
  void require(std::initializer_list<std::pair<int, const char*>> inputs) const {
    for (auto [i, what] : inputs)
      if (!c.present(i)) throw InvalidInput(cat("required input ", i, " (", what, ") is missing"));
  }
  DType int8_type(int i, const char* what) const {
    const auto t = c.type(i);
    if (!t) throw InvalidInput(cat("input ", i, " (", what, ") has no type"));
    if (!is_int8(t->dtype)) throw InvalidInput(cat(what, " (input ", i, ") must be int8 or uint8, got ", dtype_name(t->dtype)));
    return t->dtype;
  }
  /// The zero point at input i, or (absent) a 0 of type t.
  TensorId zero(int i, DType t, const std::string& what) {
    if (i >= 0 && c.present(i)) {
      const auto zt = c.type(i);
      if (!zt || zt->dtype != t) throw InvalidInput(cat(what, " (input ", i, ") must be ", dtype_name(t), zt ? cat(", got ", dtype_name(zt->dtype)) : ""));
      return data(i);
    }
    return g.add_constant(g.unique_name(cat(name, "/", what)), t, Tensor<int64_t>(Shape{}, int64_t(0)));
  }
  TensorId scalar(const std::string& what, float v) { return g.add_constant(g.unique_name(cat(name, "/", what)), Tensor<float>(Shape{}, v)); }
  /// DequantizeLinear of input x with scale input s and zero point input z (optional).
  TensorId dequantize(int x, int s, int z, const char* what) {
    require({{x, what}, {s, "its scale"}});
    const DType t = int8_type(x, what);
    return op(cat("dequantize_", what), ops::DequantizeLinear{}, {data(x), data(s), zero(z, t, cat(what, "_zero_point"))});
  }
  /// QuantizeLinear of y with scale input s and zero point input z (optional: type t, 0), named
  /// as the node's output 0.
  std::vector<TensorId> quantize(TensorId y, int s, int z, DType t) {
    require({{s, "y_scale"}});
    const TensorId zp = zero(z, t, "y_zero_point");
    std::vector<TensorId> out(size_t(c.node.output_size()), -1);
    if (!out.empty() && !c.node.output(0).empty())
      out[0] = op("quantize", ops::QuantizeLinear{.axis = 1, .to = t}, {y, data(s), zp}, c.node.output(0));
    return out;
  }
};

/// X, X_scale, X_zero_point, Y_scale, Y_zero_point: Q(op(DQ(X)))
template <class Make>
ExpandFn unary(Make make) {
  return [make](const NodeCtx& c, const std::string& name, Graph& g, const Data& data) {
    Builder b{c, name, g, data};
    const TensorId x = b.dequantize(0, 1, 2, "X");
    const DType t = b.int8_type(0, "X");
    return b.quantize(make(b, x), 3, 4, t);
  };
}

/// A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point: Q(DQ(A) op DQ(B))
ExpandFn binary(Op o) {
  return [o](const NodeCtx& c, const std::string& name, Graph& g, const Data& data) {
    Builder b{c, name, g, data};
    const TensorId x = b.dequantize(0, 1, 2, "A"), y = b.dequantize(3, 4, 5, "B");
    const DType t = b.int8_type(0, "A");
    if (b.int8_type(3, "B") != t) throw InvalidInput("A and B must have the same type");
    return b.quantize(b.op(std::string(op_name(o)), o, {x, y}), 6, 7, t);
  };
}

/// channels_last = 1: the pool on the channels-first transpose, transposed back.
TensorId channels_first_pool(Builder& b, TensorId x, Op pool) {
  if (!b.c.flag("channels_last", false)) return b.op(std::string(op_name(pool)), pool, {x});
  const int64_t r = int64_t(b.g.type(x).shape.size());
  if (r < 3) throw InvalidInput(cat("X must have rank 3 or more, got ", r));
  std::vector<int64_t> to{0, r - 1}, back{0};
  for (int64_t d = 1; d < r - 1; ++d) to.push_back(d);
  for (int64_t d = 2; d < r; ++d) back.push_back(d);
  back.push_back(1);
  const TensorId p = b.op(std::string(op_name(pool)), pool, {b.op("to_channels_first", ops::Transpose{.perm = to}, {x})});
  return b.op("to_channels_last", ops::Transpose{.perm = back}, {p});
}

/// QLinearConcat: Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input.
std::vector<TensorId> qlinear_concat(const NodeCtx& c, const std::string& name, Graph& g, const Data& data) {
  Builder b{c, name, g, data};
  if (!c.attr("axis")) throw InvalidInput("attribute 'axis' is required");
  const int n = c.node.input_size();
  if (n < 5 || (n - 2) % 3 != 0) throw InvalidInput(cat("QLinearConcat takes Y_scale, Y_zero_point and triples (X, X_scale, X_zero_point); got ", n, " inputs"));
  b.require({{1, "Y_zero_point"}});
  const DType t = b.int8_type(1, "Y_zero_point");
  std::vector<TensorId> parts;
  for (int i = 2; i < n; i += 3) {
    if (b.int8_type(i, "X") != t) throw InvalidInput(cat("input ", i, " must be ", dtype_name(t), " as Y_zero_point"));
    parts.push_back(b.dequantize(i, i + 1, i + 2, "X"));
  }
  return b.quantize(b.op("Concat", ops::Concat{.axis = c.i("axis", 0)}, parts), 0, 1, t);
}

/// QGemm: A, a_scale, a_zero_point, B, b_scale, b_zero_point, C, y_scale, y_zero_point.
std::vector<TensorId> qgemm(const NodeCtx& c, const std::string& name, Graph& g, const Data& data) {
  Builder b{c, name, g, data};
  b.require({{0, "A"}, {1, "a_scale"}, {3, "B"}, {4, "b_scale"}});
  const DType ta = b.int8_type(0, "A"), tb = b.int8_type(3, "B");
  if (c.flag("transA", false)) throw Unsupported("QGemm with transA = 1");
  const auto as = c.type(0), bs = c.type(3);
  if (as->shape.size() != 2 || bs->shape.size() != 2) throw InvalidInput(cat("A and B must be 2-D, got ", as->shape, " and ", bs->shape));
  const float alpha = c.f("alpha", 1.f);
  const bool trans_b = c.flag("transB", false);
  const int64_t N = bs->shape[trans_b ? 0 : 1];
  // B as [K, N]: a constant B transposed here
  TensorId bt = data(3);
  if (trans_b) {
    const auto* cb = c.constant(3);
    if (!cb) throw Unsupported("QGemm with transB = 1 and a B computed at run time");
    const Tensor<int64_t> v = pet::const_ints(cb->second);
    const int64_t K = bs->shape[1];
    Tensor<int64_t> tv(Shape{K, N});
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) tv[k * N + n] = v[n * K + k];
    bt = g.add_constant(g.unique_name(cat(name, "/B_transposed")), tb, tv);
  }
  const auto* sa = c.constant(1);
  const auto* sb = c.constant(4);
  if (!sa || !sb) throw Unsupported("QGemm with scales computed at run time");
  const auto& sav = std::get<Tensor<float>>(sa->second);
  const auto& sbv = std::get<Tensor<float>>(sb->second);
  if (sav.size() != 1 || (sbv.size() != 1 && sbv.size() != N))
    throw InvalidInput(cat("a_scale must be one value and b_scale one or N = ", N, " values; got ", sav.size(), " and ", sbv.size()));
  // (a zero point 0 stands in for A's where only B's is given)
  const ops::MatMulInteger mi{.a_zero = c.present(2) || c.present(5), .b_zero = c.present(5)};
  std::vector<TensorId> in{data(0), bt};
  if (mi.a_zero) in.push_back(b.zero(2, ta, "a_zero_point"));
  if (mi.b_zero) in.push_back(b.zero(5, tb, "b_zero_point"));
  TensorId y = b.op("MatMulInteger", mi, in);
  if (c.present(6)) {
    const auto ct = c.type(6);
    if (!ct || ct->dtype != DType::Int32) throw InvalidInput("C (input 6) must be int32");
    y = b.op("add_C", ops::Add{}, {y, data(6)});
  }
  y = b.op("to_float", ops::Cast{.to = DType::Float32}, {y});
  // the multiplier per column: (alpha s_a s_b) / s_y, or alpha s_a s_b for a float Y
  const bool quantized = c.present(7);
  float sy = 1.f;
  if (quantized) {
    const auto* syc = c.constant(7);
    if (!syc || std::get<Tensor<float>>(syc->second).size() != 1) throw Unsupported("QGemm with a y_scale that is not one constant value");
    sy = std::get<Tensor<float>>(syc->second)[0];
  }
  std::vector<float> m;
  for (int64_t i = 0; i < sbv.size(); ++i) m.push_back(quantized ? (alpha * sav[0] * sbv[i]) / sy : alpha * sav[0] * sbv[i]);
  const TensorId mt = m.size() == 1 ? b.scalar("multiplier", m[0]) : g.add_constant(g.unique_name(cat(name, "/multiplier")), Tensor<float>(Shape{N}, m));
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  if (out.empty() || c.node.output(0).empty()) return out;
  if (!quantized) {
    out[0] = b.op("scale", ops::Mul{}, {y, mt}, c.node.output(0));
    return out;
  }
  const DType ty = c.present(8) ? b.int8_type(8, "y_zero_point") : DType::UInt8;
  const TensorId z = b.zero(8, ty, "y_zero_point");
  out[0] = b.op("quantize", ops::QuantizeLinear{.axis = 1, .to = ty}, {b.op("scale", ops::Mul{}, {y, mt}), b.scalar("unit_scale", 1.f), z}, c.node.output(0));
  return out;
}

}  // namespace

const std::map<std::string, ExpandFn, std::less<>>& microsoft_table() {
  static const std::map<std::string, ExpandFn, std::less<>> t = {
      {"QLinearAdd", binary(ops::Add{})},
      {"QLinearMul", binary(ops::Mul{})},
      {"QLinearSigmoid", unary([](Builder& b, TensorId x) { return b.op("Sigmoid", ops::Sigmoid{}, {x}); })},
      {"QLinearLeakyRelu", unary([](Builder& b, TensorId x) { return b.op("LeakyRelu", ops::LeakyRelu{.alpha = b.c.f("alpha", 0.01f)}, {x}); })},
      {"QLinearSoftmax", unary([](Builder& b, TensorId x) {
         // the attribute opset says which Softmax: before 13 one row over dims [axis, rank)
         const int64_t opset = b.c.i("opset", 0);
         if (opset <= 0) throw InvalidInput("attribute 'opset' is required");
         ops::Softmax s;
         s.flatten_tail = opset < 13;
         s.axis = b.c.i("axis", opset < 13 ? 1 : -1);
         return b.op("Softmax", s, {x});
       })},
      {"QLinearGlobalAveragePool", unary([](Builder& b, TensorId x) { return channels_first_pool(b, x, ops::GlobalAveragePool{}); })},
      {"QLinearAveragePool", unary([](Builder& b, TensorId x) { return channels_first_pool(b, x, import_table().at("AveragePool")(b.c).op); })},
      {"QLinearConcat", qlinear_concat},
      {"QGemm", qgemm},
  };
  return t;
}

std::vector<TensorId> import_int8_through_float(const NodeCtx& c, const std::string& name, Graph& g, const Data& data, const Mapped& mp) {
  Builder b{c, name, g, data};
  const DType t = b.int8_type(0, "X");
  if (c.num_outputs() > 1) throw Unsupported(cat(c.node.op_type(), " on ", dtype_name(t), " with more than one output (pet computes it through float)"));
  const TensorId one = b.scalar("unit_scale", 1.f), z = b.zero(-1, t, "zero_point");
  std::vector<TensorId> in{b.op("to_float", ops::DequantizeLinear{}, {data(0), one, z})};
  for (size_t k = 1; k < mp.data_inputs.size(); ++k) in.push_back(data(mp.data_inputs[k]));
  const TensorId y = b.op(c.node.op_type(), mp.op, in);
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  if (!out.empty() && !c.node.output(0).empty()) out[0] = b.op("to_int8", ops::QuantizeLinear{.axis = 1, .to = t}, {y, one, z}, c.node.output(0));
  return out;
}

}  // namespace pet::onnx::detail
