#pragma once
/// Run-time values of the reference interpreter over an element type T (float, double or a
/// field): data tensors hold T; integer, int32 and bool tensors hold int64.
#include <cstdint>
#include <variant>

#include "pet/ir/const_value.hpp"
#include "pet/ir/tensor_type.hpp"
#include "pet/core/field.hpp"
#include "pet/core/tensor.hpp"

namespace pet {

template <class T>
using Value = std::variant<Tensor<T>, Tensor<int64_t>>;

/// A constant as a run-time value: float as it is (shared storage), integers as int64
/// (shared when held so, widened from 1-byte storage).
inline Value<float> const_value(const ConstValue& c) {
  if (const auto* f = std::get_if<Tensor<float>>(&c)) return *f;
  return const_ints(c);
}
/// A run-time value as a constant's value (shared storage; Graph::add_constant narrows
/// 1-byte integer types).
inline ConstValue to_constant(const Value<float>& v) {
  if (const auto* f = std::get_if<Tensor<float>>(&v)) return *f;
  return std::get<Tensor<int64_t>>(v);
}

template <class T>
const Shape& value_shape(const Value<T>& v) {
  return std::visit([](const auto& t) -> const Shape& { return t.shape(); }, v);
}

namespace detail {
template <class To, class From>
To convert_element(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (std::is_same_v<From, int64_t>) {
    return To(x);
  } else if constexpr (is_field_v<From>) {
    throw Unsupported("a finite-field value cannot be converted to an integer or real");
  } else if constexpr (std::is_same_v<To, int64_t>) {
    // Truncation; NaN and values beyond int64 give INT64_MIN, as x86's conversion does (and
    // so ONNX Runtime there), never C++'s undefined behaviour.
    const double d = double(x);
    return d == d && d > -9223372036854775808.0 && d < 9223372036854775808.0 ? int64_t(d) : INT64_MIN;
  } else {
    return To(x);
  }
}
}  // namespace detail

/// How op formulas read their inputs (see op_base.hpp): element as E, as double, as int.
template <class T, class E>
struct Reader {
  std::span<const Value<T>> in;

  int count() const { return int(in.size()); }
  const Shape& shape(int i) const { return value_shape(in[size_t(i)]); }
  E operator()(int i, const Index& idx) const {
    return std::visit([&](const auto& t) { return detail::convert_element<E>(t.at(idx)); }, in[size_t(i)]);
  }
  double real(int i, const Index& idx) const {
    return std::visit([&](const auto& t) { return detail::convert_element<double>(t.at(idx)); }, in[size_t(i)]);
  }
  int64_t ints(int i, const Index& idx) const {
    return std::visit([&](const auto& t) { return detail::convert_element<int64_t>(t.at(idx)); }, in[size_t(i)]);
  }
};

}  // namespace pet
