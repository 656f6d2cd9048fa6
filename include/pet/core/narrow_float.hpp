#pragma once
/// float16 and bfloat16, the narrow float types pet reads and writes but computes as float32:
/// their bits to float32 (exact) and float32 to their bits (nearest, ties to even; NaN stays
/// NaN; beyond the largest finite value, infinity), named by their ONNX type codes.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace pet {

/// ONNX's codes of the narrow float types (TensorProto::FLOAT16, TensorProto::BFLOAT16).
inline constexpr int32_t kFloat16 = 10, kBFloat16 = 16;

inline constexpr bool is_narrow_float(int64_t t) { return t == kFloat16 || t == kBFloat16; }
inline constexpr std::string_view narrow_float_name(int64_t t) { return t == kBFloat16 ? "bfloat16" : t == kFloat16 ? "float16" : "?"; }

/// The float32 value of narrow type t's `bits` (every one is a float32 value).
inline float narrow_to_float(uint16_t bits, int32_t t) {
  uint32_t u;
  if (t == kBFloat16) {
    u = uint32_t(bits) << 16;
  } else {  // IEEE half: sign, 5 exponent bits, 10 fraction bits
    const uint32_t sign = uint32_t(bits & 0x8000u) << 16, e = (bits >> 10) & 0x1fu, f = bits & 0x3ffu;
    if (e == 0x1f) {
      u = sign | 0x7f800000u | (f << 13);  // infinity, NaN (its payload kept)
    } else if (e != 0) {
      u = sign | ((e + 112) << 23) | (f << 13);
    } else {  // zero and the subnormals f * 2^-24, exact in float
      const float v = std::ldexp(float(f), -24);
      std::memcpy(&u, &v, 4);
      u |= sign;
    }
  }
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

/// v's nearest value of narrow type t (ties to even), as t's bits.
inline uint16_t float_to_narrow(float v, int32_t t) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  const uint32_t sign = u & 0x80000000u, a = u & 0x7fffffffu;
  if (t == kBFloat16) {
    if (a > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // NaN stays NaN (quiet)
    return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);  // nearest, ties to even; beyond the largest: infinity
  }
  const uint16_t s = uint16_t(sign >> 16);
  if (a > 0x7f800000u) return uint16_t(s | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
  if (a >= 0x477ff000u) return uint16_t(s | 0x7c00u);  // 65520 and beyond round to infinity
  if (a < 0x38800000u) {  // below 2^-14: a multiple of 2^-24 (subnormal), nearest, ties to even
    float m;
    std::memcpy(&m, &a, 4);
    return uint16_t(s | uint16_t(std::nearbyint(std::ldexp(m, 24))));
  }
  const uint32_t r = a + 0xfffu + ((a >> 13) & 1u);  // nearest, ties to even, on the 13 dropped bits
  return uint16_t(s | (((r >> 23) - 112) << 10) | ((r >> 13) & 0x3ffu));
}

/// v rounded to narrow type t, as float32 (what a Cast to t and back gives).
inline float narrow_round(float v, int32_t t) { return narrow_to_float(float_to_narrow(v, t), t); }

}  // namespace pet
