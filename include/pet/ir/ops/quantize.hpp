#pragma once
/// Linear quantization, int8 and uint8: QuantizeLinear / DequantizeLinear (opsets 10-21, the
/// operators of QDQ models), DynamicQuantizeLinear (opset 11), and the integer operators of
/// ONNX Runtime's quantizers: MatMulInteger and ConvInteger (opset 10, int32 sums, dynamic
/// quantization), QLinearMatMul and QLinearConv (opset 10, the QOperator format). All are
/// real-only (no meaning over a finite field) and not multilinear, so the optimizer cuts
/// programs at them.
#include <cmath>

#include "pet/ir/op_base.hpp"
#include "pet/ir/ops/conv.hpp"
#include "pet/ir/ops/matmul.hpp"

namespace pet::ops {

namespace detail {
/// Checks scale (and zero point) of x: a scalar or one value (per tensor), or a 1-D tensor
/// of x.shape[axis] values (per axis; axis is normalised then). Returns whether per axis.
inline bool check_quant_params(InTypes in, int64_t& axis, std::string_view scale, std::string_view zero) {
  const Shape &x = in[0].shape, &s = in[1].shape;
  pet::detail::expect_float(in, 1, scale);
  bool per_axis = false;
  if (s.size() > 1 || (s.size() == 1 && s[0] != 1)) {
    if (s.size() != 1) throw InvalidInput(cat(scale, " ", s, " must be a scalar or 1-D"));
    if (x.empty()) throw InvalidInput(cat(scale, " ", s, " has several values but the input is a scalar"));
    axis = normalize_axis(axis, int64_t(x.size()), "axis");
    if (s[0] != x[size_t(axis)])
      throw InvalidInput(cat(scale, " ", s, " must have one value per element of the input's dim ", axis, " (", x[size_t(axis)], ")"));
    per_axis = true;
  }  // per tensor: axis is not read (ONNX ignores it then)
  // one zero point per scale (a scalar and a 1-element tensor both mean one, as exporters mix them)
  if (in.size() == 3 && in[2].shape != s && !(!per_axis && numel(in[2].shape) == 1))
    throw InvalidInput(cat(zero, " ", in[2].shape, " must have the shape of ", scale, " ", s));
  return per_axis;
}
/// Index of the scale (and zero point) for output position o.
inline Index quant_param_index(const Index& o, const Shape& s, int64_t axis) {
  Index si(int(s.size()));
  if (s.size() == 1) si[0] = s[0] == 1 ? 0 : o[int(axis)];
  return si;
}
}  // namespace detail

/// y = saturate(round(x / scale) + zero_point) in the range of `to` (int8: [-128, 127],
/// uint8: [0, 255]); round is half to even; x / scale in float32, as ONNX Runtime computes
/// it. NaN gives the range's minimum (ONNX Runtime's vector kernel). scale and zero_point:
/// per tensor (one value) or per axis (one per element of x's dim `axis`). `to` is the zero
/// point's type (uint8 without one, or opset 21's output_dtype).
struct QuantizeLinear {
  static constexpr std::string_view name = "QuantizeLinear";
  PET_ATTRS(axis, to);
  static constexpr bool multilinear = false;
  int64_t axis = 1;
  DType to = DType::UInt8;
  Types infer(InTypes in) {
    pet::detail::expect_arity(in, 2, 3);
    pet::detail::expect_float(in, 0, "x");
    if (!is_int8(to)) throw InvalidInput(cat("the output type must be int8 or uint8, got ", dtype_name(to)));
    if (in.size() == 3 && in[2].dtype != to)
      throw InvalidInput(cat("y_zero_point is ", dtype_name(in[2].dtype), " but the output type is ", dtype_name(to)));
    detail::check_quant_params(in, axis, "y_scale", "y_zero_point");
    return {{to, in[0].shape}};
  }
  int64_t lo() const { return to == DType::Int8 ? -128 : 0; }
  int64_t hi() const { return to == DType::Int8 ? 127 : 255; }
  /// One element, given x, its scale and zero point.
  int64_t quantize(float x, float scale, int64_t zero) const {
    const float v = x / scale;
    if (v != v) return lo();
    const float r = std::nearbyint(std::clamp(v, float(lo() - zero), float(hi() - zero)));
    return int64_t(r) + zero;
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    if constexpr (is_field_v<E>) {
      pet::detail::require_ordered<E>(name);
      return E(0);
    } else {
      const Index si = detail::quant_param_index(o, read.shape(1), axis);
      const int64_t zero = read.count() == 3 ? read.ints(2, detail::quant_param_index(o, read.shape(2), axis)) : 0;
      return E(quantize(float(read.real(0, o)), float(read.real(1, si)), zero));
    }
  }
  bool operator==(const QuantizeLinear&) const = default;
};

/// y = (x - zero_point) * scale in float32, x int8, uint8 or int32 (zero_point of x's type;
/// per tensor or per axis as QuantizeLinear).
struct DequantizeLinear {
  static constexpr std::string_view name = "DequantizeLinear";
  PET_ATTRS(axis);
  static constexpr bool multilinear = false;
  int64_t axis = 1;
  Types infer(InTypes in) {
    pet::detail::expect_arity(in, 2, 3);
    const DType t = in[0].dtype;
    if (!is_int8(t) && t != DType::Int32) throw InvalidInput(cat("x must be int8, uint8 or int32, got ", dtype_name(t)));
    if (in.size() == 3 && in[2].dtype != t)
      throw InvalidInput(cat("x_zero_point is ", dtype_name(in[2].dtype), " but x is ", dtype_name(t)));
    detail::check_quant_params(in, axis, "x_scale", "x_zero_point");
    return {{DType::Float32, in[0].shape}};
  }
  static float dequantize(int64_t x, float scale, int64_t zero) { return float(x - zero) * scale; }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    if constexpr (is_field_v<E>) {
      pet::detail::require_ordered<E>(name);
      return E(0);
    } else {
      const Index si = detail::quant_param_index(o, read.shape(1), axis);
      const int64_t zero = read.count() == 3 ? read.ints(2, detail::quant_param_index(o, read.shape(2), axis)) : 0;
      return E(dequantize(read.ints(0, o), float(read.real(1, si)), zero));
    }
  }
  bool operator==(const DequantizeLinear&) const = default;
};

/// (y, y_scale, y_zero_point) = uint8 quantization of x with parameters from x's range, as
/// ONNX Runtime computes them: lo = min(0, min x), hi = max(0, max x) (NaN elements skipped),
/// y_scale = (hi - lo) / 255 (1 when hi == lo), y_zero_point = round(clamp(0 - lo / y_scale,
/// 0, 255)) (255 when that is NaN), y = QuantizeLinear(x, y_scale, y_zero_point). All in
/// float32, rounding half to even.
struct DynamicQuantizeLinear {
  static constexpr std::string_view name = "DynamicQuantizeLinear";
  PET_ATTRS();
  static constexpr bool multilinear = false;
  Types infer(InTypes in) const {
    pet::detail::expect_arity(in, 1, 1);
    pet::detail::expect_float(in, 0, "x");
    return {{DType::UInt8, in[0].shape}, {DType::Float32, {}}, {DType::UInt8, {}}};
  }
  struct Params {
    float scale;
    int64_t zero;
  };
  /// The parameters of a tensor whose smallest and largest (non-NaN) elements are lo and hi
  /// (lo = +inf, hi = -inf for none).
  static Params params(float lo, float hi) {
    lo = std::min(lo, 0.f);
    hi = std::max(hi, 0.f);
    const float scale = hi == lo ? 1.f : (hi - lo) / 255.f;
    const float z = 0.f - lo / scale;
    return {scale, z != z ? 255 : int64_t(std::nearbyint(std::clamp(z, 0.f, 255.f)))};
  }
  static int64_t quantize(float x, Params p) { return QuantizeLinear{}.quantize(x, p.scale, p.zero); }
  template <class E, class R>
  E at(int k, const Index& o, const R& read) const {
    if constexpr (is_field_v<E>) {
      pet::detail::require_ordered<E>(name);
      return E(0);
    } else {
      const Shape& s = read.shape(0);
      float lo = INFINITY, hi = -INFINITY;
      if (numel(s) > 0) {
        Index i(int(s.size()));
        do {
          const float v = float(read.real(0, i));
          if (v == v) lo = std::min(lo, v), hi = std::max(hi, v);
        } while (next_index(i, s));
      }
      const Params p = params(lo, hi);
      if (k == 1) return E(p.scale);
      if (k == 2) return E(p.zero);
      return E(quantize(float(read.real(0, o)), p));
    }
  }
  bool operator==(const DynamicQuantizeLinear&) const = default;
};

namespace detail {
/// Checks a zero point or scale of an integer op: one value, or (when `per` > 0) a 1-D tensor
/// of `per` values (one per `what_per`). Returns whether it has several values.
inline bool check_qparam(const TensorType& t, std::string_view what, int64_t per, std::string_view what_per) {
  if (numel(t.shape) == 1) return false;
  if (per > 0 && t.shape == Shape{per}) return true;
  if (per > 0) throw InvalidInput(cat(what, " ", t.shape, " must be one value or one per ", what_per, " (", per, ")"));
  throw InvalidInput(cat(what, " ", t.shape, " must be one value"));
}
inline void expect_int8(InTypes in, size_t i, std::string_view what) {
  if (!is_int8(in[i].dtype)) throw InvalidInput(cat(what, " must be int8 or uint8, got ", dtype_name(in[i].dtype)));
}
inline void expect_zero_type(InTypes in, size_t z, size_t x, std::string_view what, std::string_view of) {
  if (in[z].dtype != in[x].dtype)
    throw InvalidInput(cat(what, " is ", dtype_name(in[z].dtype), " but ", of, " is ", dtype_name(in[x].dtype)));
}
/// Reads two integer inputs of an integer op, each minus its zero point, as the Conv and
/// MatMul formulas read their two data inputs: operand i is input in[i], its zero point
/// input zero[i] (-1: none), one value or one per index of the operand's dim axis[i].
template <class R>
struct ZeroShifted {
  const R& r;
  int in[2], zero[2], axis[2];
  int count() const { return 2; }
  const Shape& shape(int i) const { return r.shape(in[i]); }
  int64_t operator()(int i, const Index& idx) const {
    int64_t v = r.ints(in[i], idx);
    if (zero[i] >= 0) {
      const Shape& zs = r.shape(zero[i]);
      Index zi(int(zs.size()));
      if (numel(zs) > 1) zi[0] = idx[axis[i]];
      v -= r.ints(zero[i], zi);
    }
    return v;
  }
};
/// One value of a scale or zero point input: the only one, or the one of index k.
template <class R>
double qparam(const R& r, int i, int64_t k) {
  const Shape& s = r.shape(i);
  Index zi(int(s.size()));
  if (numel(s) > 1) zi[0] = k;
  return r.real(i, zi);
}
/// QLinearConv's and QLinearMatMul's output (ONNX Runtime's requantization): the int32 sum
/// times m = (scale_a * scale_b) / scale_y in float32, clamped to the range of `to` less the
/// zero point, rounded half to even, plus the zero point (a NaN product gives the range's minimum).
inline int64_t requantize(int64_t acc, float m, int64_t zero, DType to) {
  const int64_t lo = to == DType::Int8 ? -128 : 0, hi = to == DType::Int8 ? 127 : 255;
  const float v = float(int32_t(uint32_t(uint64_t(acc)))) * m;
  if (v != v) return lo;
  return int64_t(std::nearbyint(std::clamp(v, float(lo - zero), float(hi - zero)))) + zero;
}
inline float requant_scale(double sa, double sb, double sy) { return float(sa) * float(sb) / float(sy); }
/// Shared by ConvInteger and QLinearConv: Conv's checks and resolved attributes for input x
/// and weight w (their element types set aside), written back into o.
template <class O>
Shape conv_infer(O& o, const TensorType& x, const TensorType& w) {
  Conv c = o.conv();
  const Types ft{{DType::Float32, x.shape}, {DType::Float32, w.shape}};
  const Shape out = c.infer(ft)[0].shape;
  o.kernel_shape = c.kernel_shape;
  o.strides = c.strides;
  o.pads = c.pads;
  o.dilations = c.dilations;
  o.auto_pad = c.auto_pad;
  return out;
}
}  // namespace detail

/// y = (A - a_zero_point) x (B - b_zero_point) in int32 (numpy matmul, as MatMul), A and B
/// int8 or uint8. a_zero_point: one value (ONNX's per-row form is refused, as by ONNX Runtime);
/// b_zero_point: one value or one per column of B. An absent zero point is 0.
struct MatMulInteger {
  static constexpr std::string_view name = "MatMulInteger";
  PET_ATTRS(a_zero, b_zero);
  static constexpr bool multilinear = false;
  bool a_zero = false, b_zero = false;  ///< whether a_zero_point, b_zero_point are inputs (after A and B)
  int b_zero_input() const { return b_zero ? 2 + int(a_zero) : -1; }
  Types infer(InTypes in) const {
    pet::detail::expect_arity(in, 2 + a_zero + b_zero, 2 + a_zero + b_zero);
    detail::expect_int8(in, 0, "A");
    detail::expect_int8(in, 1, "B");
    const Types ft{{DType::Float32, in[0].shape}, {DType::Float32, in[1].shape}};
    const Shape out = MatMul{}.infer(ft)[0].shape;
    if (a_zero) {
      detail::expect_zero_type(in, 2, 0, "a_zero_point", "A");
      if (numel(in[2].shape) != 1) throw Unsupported(cat("a_zero_point ", in[2].shape, " has several values; pet (as ONNX Runtime) takes one zero point for A"));
    }
    if (b_zero) {
      const size_t z = size_t(b_zero_input());
      detail::expect_zero_type(in, z, 1, "b_zero_point", "B");
      detail::check_qparam(in[z], "b_zero_point", in[1].shape.size() >= 2 ? in[1].shape.back() : 0, "column of B");
    }
    return {{DType::Int32, out}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    if constexpr (is_field_v<E>) {
      pet::detail::require_ordered<E>(name);
      return E(0);
    } else {
      const int rb = int(read.shape(1).size());
      const detail::ZeroShifted<R> z{read, {0, 1}, {a_zero ? 2 : -1, b_zero_input()}, {0, rb - 1}};
      return E(MatMul{}.at<int64_t>(o, z));
    }
  }
  int64_t flops(InTypes in, InTypes out) const { return flop_mul(2, numel(out[0].shape), in[0].shape.back()); }
  bool operator==(const MatMulInteger&) const = default;
};

/// y = Conv(x - x_zero_point, w - w_zero_point) in int32 (Conv's attributes and geometry;
/// padding contributes 0), x and w int8 or uint8. x_zero_point: one value; w_zero_point: one
/// value or one per output channel. An absent zero point is 0.
struct ConvInteger {
  static constexpr std::string_view name = "ConvInteger";
  PET_ATTRS(kernel_shape, strides, pads, dilations, group, auto_pad, x_zero, w_zero);
  static constexpr bool multilinear = false;
  std::vector<int64_t> kernel_shape, strides, pads, dilations;
  int64_t group = 1;
  AutoPad auto_pad = AutoPad::NotSet;
  bool x_zero = false, w_zero = false;  ///< whether x_zero_point, w_zero_point are inputs (after x and w)
  int w_zero_input() const { return w_zero ? 2 + int(x_zero) : -1; }
  Conv conv() const { return Conv{.kernel_shape = kernel_shape, .strides = strides, .pads = pads, .dilations = dilations, .group = group, .auto_pad = auto_pad}; }
  Types infer(InTypes in) {
    pet::detail::expect_arity(in, 2 + x_zero + w_zero, 2 + x_zero + w_zero);
    detail::expect_int8(in, 0, "x");
    detail::expect_int8(in, 1, "w");
    const Shape out = detail::conv_infer(*this, in[0], in[1]);
    if (x_zero) {
      detail::expect_zero_type(in, 2, 0, "x_zero_point", "x");
      detail::check_qparam(in[2], "x_zero_point", 0, "");
    }
    if (w_zero) {
      const size_t z = size_t(w_zero_input());
      detail::expect_zero_type(in, z, 1, "w_zero_point", "w");
      detail::check_qparam(in[z], "w_zero_point", in[1].shape[0], "output channel");
    }
    return {{DType::Int32, out}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    if constexpr (is_field_v<E>) {
      pet::detail::require_ordered<E>(name);
      return E(0);
    } else {
      const detail::ZeroShifted<R> z{read, {0, 1}, {x_zero ? 2 : -1, w_zero_input()}, {0, 0}};
      return E(conv().at<int64_t>(o, z));
    }
  }
  int64_t flops(InTypes in, InTypes out) const { return conv().flops(in.first(2), out); }
  bool operator==(const ConvInteger&) const = default;
};

/// y = requantize(MatMulInteger(a, b, a_zero_point, b_zero_point)) (detail::requantize, with
/// m = (a_scale * b_scale) / y_scale): inputs a, a_scale, a_zero_point, b, b_scale,
/// b_zero_point, y_scale, y_zero_point. a and y: one scale and zero point; b: one, or one per
/// column. y has y_zero_point's type, `to`.
struct QLinearMatMul {
  static constexpr std::string_view name = "QLinearMatMul";
  PET_ATTRS(to);
  static constexpr bool multilinear = false;
  DType to = DType::UInt8;
  Types infer(InTypes in) const {
    using namespace detail;
    pet::detail::expect_arity(in, 8, 8);
    expect_int8(in, 0, "a");
    expect_int8(in, 3, "b");
    expect_int8(in, 7, "y_zero_point");
    for (size_t i : {1, 4, 6}) pet::detail::expect_float(in, i, i == 1 ? "a_scale" : i == 4 ? "b_scale" : "y_scale");
    expect_zero_type(in, 2, 0, "a_zero_point", "a");
    expect_zero_type(in, 5, 3, "b_zero_point", "b");
    const Types ft{{DType::Float32, in[0].shape}, {DType::Float32, in[3].shape}};
    const Shape out = MatMul{}.infer(ft)[0].shape;
    const int64_t n = in[3].shape.size() >= 2 ? in[3].shape.back() : 0;
    check_qparam(in[1], "a_scale", 0, "");
    check_qparam(in[2], "a_zero_point", 0, "");
    check_qparam(in[4], "b_scale", n, "column of b");
    check_qparam(in[5], "b_zero_point", n, "column of b");
    check_qparam(in[6], "y_scale", 0, "");
    check_qparam(in[7], "y_zero_point", 0, "");
    if (in[7].dtype != to) throw InvalidInput(cat("y_zero_point is ", dtype_name(in[7].dtype), " but the output type is ", dtype_name(to)));
    return {{to, out}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    if constexpr (is_field_v<E>) {
      pet::detail::require_ordered<E>(name);
      return E(0);
    } else {
      const int rb = int(read.shape(3).size());
      const detail::ZeroShifted<R> z{read, {0, 3}, {2, 5}, {0, rb - 1}};
      const int64_t acc = MatMul{}.at<int64_t>(o, z), col = o[o.rank - 1];
      const float m = detail::requant_scale(detail::qparam(read, 1, 0), detail::qparam(read, 4, col), detail::qparam(read, 6, 0));
      return E(detail::requantize(acc, m, int64_t(detail::qparam(read, 7, 0)), to));
    }
  }
  int64_t flops(InTypes in, InTypes out) const { return flop_mul(2, numel(out[0].shape), in[0].shape.back()); }
  bool operator==(const QLinearMatMul&) const = default;
};

/// y = requantize(ConvInteger(x, w, x_zero_point, w_zero_point) + B) (detail::requantize,
/// with m = (x_scale * w_scale[f]) / y_scale): inputs x, x_scale, x_zero_point, w, w_scale,
/// w_zero_point, y_scale, y_zero_point and an optional int32 bias B [F]; Conv's attributes and
/// geometry. x and y: one scale and zero point; w: one, or one per output channel. y has
/// y_zero_point's type, `to`.
struct QLinearConv {
  static constexpr std::string_view name = "QLinearConv";
  PET_ATTRS(kernel_shape, strides, pads, dilations, group, auto_pad, to);
  static constexpr bool multilinear = false;
  std::vector<int64_t> kernel_shape, strides, pads, dilations;
  int64_t group = 1;
  AutoPad auto_pad = AutoPad::NotSet;
  DType to = DType::UInt8;
  Conv conv() const { return Conv{.kernel_shape = kernel_shape, .strides = strides, .pads = pads, .dilations = dilations, .group = group, .auto_pad = auto_pad}; }
  Types infer(InTypes in) {
    using namespace detail;
    pet::detail::expect_arity(in, 8, 9);
    expect_int8(in, 0, "x");
    expect_int8(in, 3, "w");
    expect_int8(in, 7, "y_zero_point");
    for (size_t i : {1, 4, 6}) pet::detail::expect_float(in, i, i == 1 ? "x_scale" : i == 4 ? "w_scale" : "y_scale");
    expect_zero_type(in, 2, 0, "x_zero_point", "x");
    expect_zero_type(in, 5, 3, "w_zero_point", "w");
    const Shape out = conv_infer(*this, in[0], in[3]);
    const int64_t f = in[3].shape[0];
    check_qparam(in[1], "x_scale", 0, "");
    check_qparam(in[2], "x_zero_point", 0, "");
    check_qparam(in[4], "w_scale", f, "output channel");
    check_qparam(in[5], "w_zero_point", f, "output channel");
    check_qparam(in[6], "y_scale", 0, "");
    check_qparam(in[7], "y_zero_point", 0, "");
    if (in[7].dtype != to) throw InvalidInput(cat("y_zero_point is ", dtype_name(in[7].dtype), " but the output type is ", dtype_name(to)));
    if (in.size() == 9) {
      if (in[8].dtype != DType::Int32) throw InvalidInput(cat("bias B must be int32, got ", dtype_name(in[8].dtype)));
      if (in[8].shape != Shape{f}) throw InvalidInput(cat("bias shape ", in[8].shape, " must be [", f, "]"));
    }
    return {{to, out}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    if constexpr (is_field_v<E>) {
      pet::detail::require_ordered<E>(name);
      return E(0);
    } else {
      const detail::ZeroShifted<R> z{read, {0, 3}, {2, 5}, {0, 0}};
      int64_t acc = conv().at<int64_t>(o, z);
      if (read.count() == 9) acc += read.ints(8, Index{o[1]});
      const float m = detail::requant_scale(detail::qparam(read, 1, 0), detail::qparam(read, 4, o[1]), detail::qparam(read, 6, 0));
      return E(detail::requantize(acc, m, int64_t(detail::qparam(read, 7, 0)), to));
    }
  }
  int64_t flops(InTypes in, InTypes out) const {
    const Types xw{in[0], in[3]};
    return conv().flops(xw, out);
  }
  bool operator==(const QLinearConv&) const = default;
};

}  // namespace pet::ops
