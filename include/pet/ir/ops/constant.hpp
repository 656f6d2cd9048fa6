#pragma once
/// Ops that produce values without reading data: Constant and Shape.
#include <variant>

#include "pet/ir/op_base.hpp"

namespace pet::ops {

/// A literal tensor (the importer folds ONNX Constant nodes into graph constants; the op
/// exists so that builders and rewrites can create literals as nodes too).
struct Constant {
  static constexpr std::string_view name = "Constant";
  PET_ATTRS(dtype, value);
  static constexpr bool multilinear = false, layout = true;
  DType dtype = DType::Float32;
  std::variant<Tensor<float>, Tensor<int64_t>> value;

  const Shape& shape() const { return std::visit([](const auto& t) -> const Shape& { return t.shape(); }, value); }
  Types infer(InTypes in) const {
    pet::detail::expect_arity(in, 0, 0);
    if (is_float(dtype) != std::holds_alternative<Tensor<float>>(value))
      throw InvalidInput(cat("value storage does not match dtype ", dtype_name(dtype)));
    return {{dtype, shape()}};
  }
  template <class E, class R>
  E at(const Index& o, const R&) const {
    if (auto* f = std::get_if<Tensor<float>>(&value)) return lift_scalar<E>(f->at(o), "Constant value");
    return E(std::get<Tensor<int64_t>>(value).at(o));
  }
  bool operator==(const Constant& o) const {
    if (dtype != o.dtype || shape() != o.shape()) return false;
    return std::visit([&](const auto& t) {
      using T = std::decay_t<decltype(t)>;
      return t.vec() == std::get<T>(o.value).vec();
    }, value);
  }
};

/// out = the input's shape as int64 [rank], sliced to [start, end) (opset 15).
struct ShapeOf {
  static constexpr std::string_view name = "Shape";
  PET_ATTRS(start, end);
  static constexpr bool multilinear = false, layout = true;
  int64_t start = 0;
  int64_t end = std::numeric_limits<int64_t>::max();
  Types infer(InTypes in) {
    pet::detail::expect_arity(in, 1, 1);
    int64_t r = int64_t(in[0].shape.size());
    auto clampi = [&](int64_t v) { return std::clamp(v < 0 ? v + r : v, int64_t(0), r); };
    start = clampi(start);
    end = clampi(end);
    return {{DType::Int64, {std::max<int64_t>(end - start, 0)}}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const { return E(read.shape(0)[size_t(start + o[0])]); }
  bool operator==(const ShapeOf&) const = default;
};

}  // namespace pet::ops
