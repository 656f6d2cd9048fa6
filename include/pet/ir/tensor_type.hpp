#pragma once
#include "pet/core/dtype.hpp"
#include "pet/core/shape.hpp"

namespace pet {

/// The static type of a graph tensor.
struct TensorType {
  DType dtype = DType::Float32;
  Shape shape;
  bool operator==(const TensorType&) const = default;
};

inline std::string to_string(const TensorType& t) { return cat(dtype_name(t.dtype), t.shape); }

}  // namespace pet
