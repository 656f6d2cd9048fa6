#pragma once
// Byte-level helpers of the quantized steps (lower_quant.cpp: QDQ programs; lower_integer.cpp:
// ONNX's integer ops), private to kernels/cpu.
#include <cmath>
#include <cstdint>
#include <vector>

#include "executable.hpp"

namespace pet::backend::cpu_detail {

inline md_t with_type(md_t md, dt type) {
  md.data.data_type = static_cast<dnnl_data_type_t>(type);
  return md;
}
/// Every element once, nothing else: no padding, no gaps, no offset (element-wise steps may
/// then run over the buffer in memory order, whatever the layout).
inline bool dense(const md_t& md) {
  const auto& d = md.data;
  if (d.format_kind != dnnl_blocked || d.offset0 != 0) return false;
  size_t n = d.data_type == dnnl_f32 || d.data_type == dnnl_s32 ? 4 : 1;
  for (int i = 0; i < d.ndims; ++i) n *= size_t(d.dims[i]);
  return md.get_size() == n;
}
/// QuantizeLinear's element function on n values (lo, hi: the range less the zero point z),
/// written so that it vectorises: NaN gives lo, as the op's.
inline void quantize_block(const float* __restrict x, uint8_t* __restrict out, int64_t n, float s, float lo, float hi, float z) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] / s;
    v = v == v ? v : lo;
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    out[i] = uint8_t(int32_t(std::nearbyint(v) + z));
  }
}

/// QLinearConv's and QLinearMatMul's requantization of one row of n int32 sums
/// (ops::detail::requantize): s = sum + add in int32 (wrapping, as ONNX Runtime's int32
/// arithmetic), float(s) * m, clamped to [lo, hi] (the range less the zero point z; NaN gives
/// lo), rounded half to even, plus z; written so that it vectorises.
inline void requantize_row(const int32_t* __restrict sum, const int32_t* __restrict add, const float* __restrict m, uint8_t* __restrict out,
                           int64_t n, float lo, float hi, float z) {
  for (int64_t c = 0; c < n; ++c) {
    const int32_t s = int32_t(uint32_t(sum[c]) + uint32_t(add[c]));
    float v = float(s) * m[c];
    v = v == v ? v : lo;
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    out[c] = uint8_t(int32_t(std::nearbyint(v) + z));
  }
}

/// requantize_row over `rows` consecutive rows of n, `tile` rows at a time, with add_t and m_t
/// holding add and m `tile` times over: one long vectorised loop instead of a short one per row
/// (a row of 32 channels took twice as long per element, 8 to 24 channels far longer).
inline void requantize_rows(const int32_t* sum, const int32_t* add, const float* m, const int32_t* add_t, const float* m_t, int64_t tile,
                            uint8_t* out, int64_t rows, int64_t n, float lo, float hi, float z) {
  int64_t r = 0;
  for (; r + tile <= rows; r += tile) requantize_row(sum + r * n, add_t, m_t, out + r * n, tile * n, lo, hi, z);
  for (; r < rows; ++r) requantize_row(sum + r * n, add, m, out + r * n, n, lo, hi, z);
}
/// The rows per call of requantize_rows for rows of n, and a per-channel vector v repeated that often.
inline int64_t requantize_tile(int64_t n) { return n >= 512 ? 1 : 512 / n; }
template <class T>
std::vector<T> tiled(const std::vector<T>& v, int64_t tile) {
  std::vector<T> t;
  t.reserve(v.size() * size_t(tile));
  for (int64_t k = 0; k < tile; ++k) t.insert(t.end(), v.begin(), v.end());
  return t;
}

/// int8 and uint8 buffers are read and written as bytes: a byte b holds the value
/// (b ^ flip) - offset, flip and offset 128 for int8, 0 for uint8 (two's complement), and an
/// int32 result in the type's range is stored as uint8_t(r) either way.
struct ByteCode {
  uint8_t flip;
  float offset;
  explicit ByteCode(bool is_signed) : flip(is_signed ? 0x80 : 0), offset(is_signed ? 128.f : 0.f) {}
};

}  // namespace pet::backend::cpu_detail
