#pragma once
/// Element types of graph tensors. Float32 carries data; Int64/Int32/Bool carry shapes,
/// indices and masks (stored as int64 inside pet, tagged with their ONNX type).
#include <cstdint>
#include <string_view>

namespace pet {

enum class DType : uint8_t { Float32, Int64, Int32, Bool };

inline constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Int64: return "int64";
    case DType::Int32: return "int32";
    case DType::Bool: return "bool";
  }
  return "?";
}

inline constexpr bool is_float(DType t) { return t == DType::Float32; }

}  // namespace pet
