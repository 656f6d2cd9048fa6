#pragma once
/// Linear quantization (ONNX QuantizeLinear / DequantizeLinear, opsets 10-21, int8 and uint8):
/// the operators of QDQ models. Both are real-only (no meaning over a finite field) and not
/// multilinear, so the optimizer cuts programs at them.
#include <cmath>

#include "pet/ir/op_base.hpp"

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

}  // namespace pet::ops
