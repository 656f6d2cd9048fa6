#pragma once
/// Element types of graph tensors. Float32 carries data; Int64/Int32/Bool carry shapes,
/// indices and masks; Int8/UInt8 carry quantized data (QuantizeLinear's output,
/// DequantizeLinear's input). Integer values are int64 at run time, tagged with their ONNX type
/// (1-byte constants keep one byte: const_value.hpp); casts and quantization wrap or saturate.
#include <cstdint>
#include <string_view>

namespace pet {

enum class DType : uint8_t { Float32, Int64, Int32, Bool, Int8, UInt8 };

inline constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Int64: return "int64";
    case DType::Int32: return "int32";
    case DType::Bool: return "bool";
    case DType::Int8: return "int8";
    case DType::UInt8: return "uint8";
  }
  return "?";
}

inline constexpr bool is_float(DType t) { return t == DType::Float32; }
/// The 8-bit integer types (quantized data).
inline constexpr bool is_int8(DType t) { return t == DType::Int8 || t == DType::UInt8; }

/// v converted to integer type t as a C++ cast to that type converts it (two's complement
/// wrap-around for Int32, Int8 and UInt8; non-zero -> 1 for Bool).
inline constexpr int64_t wrap_to(DType t, int64_t v) {
  switch (t) {
    case DType::Int32: return int32_t(uint32_t(uint64_t(v)));
    case DType::Int8: return int8_t(uint8_t(uint64_t(v)));
    case DType::UInt8: return uint8_t(uint64_t(v));
    case DType::Bool: return v != 0;
    case DType::Int64:
    case DType::Float32: return v;
  }
  return v;
}

}  // namespace pet
