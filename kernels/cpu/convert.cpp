#include "convert.hpp"

#include <cstring>

#include "pet/core/narrow_float.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define PET_CONVERT_F16C 1
#endif

namespace pet::cpu {
namespace {

#ifdef PET_CONVERT_F16C
/// float16 rounding of x[0, n) by eight-wide F16C conversions there and back; returns how
/// many it did (a multiple of 8).
__attribute__((target("avx,f16c"))) int64_t round_half_f16c(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
  }
  return i;
}
#endif

/// bfloat16: the upper 16 bits, nearest, ties to even (beyond the largest finite value,
/// infinity); NaN stays NaN, made quiet, as float_to_narrow does.
void round_bfloat16(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, 4);
    const uint32_t nearest = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u, nan = (u | 0x00400000u) & 0xffff0000u;
    u = (u & 0x7fffffffu) > 0x7f800000u ? nan : nearest;
    std::memcpy(y + i, &u, 4);
  }
}

}  // namespace

bool has_f16c() {
#ifdef PET_CONVERT_F16C
  static const bool f = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return f;
#else
  return false;
#endif
}

void round_to_narrow(const float* x, float* y, int64_t n, int32_t narrow, bool hardware) {
  if (narrow == kBFloat16) return round_bfloat16(x, y, n);
  int64_t i = 0;
#ifdef PET_CONVERT_F16C
  if (hardware && has_f16c()) i = round_half_f16c(x, y, n);
#endif
  for (; i < n; ++i) y[i] = narrow_round(x[i], narrow);
}

}  // namespace pet::cpu
