#include "norm.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "pet/core/parallel.hpp"

namespace pet::cpu {

// Plain loops with OpenMP simd reductions: the compiler keeps one double accumulator per
// vector lane (Eigen 3.4 does not vectorise float->double casts, 4x slower here).
namespace {
/// A row's mean and 1 / sqrt(variance + eps): two passes accumulated in double.
std::pair<double, double> row_stats(const float* src, int64_t len, float epsilon) {
  double sum = 0, sq = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < len; ++j) sum += double(src[j]);
  const double mean = sum / double(len);
#pragma omp simd reduction(+ : sq)
  for (int64_t j = 0; j < len; ++j) sq += (double(src[j]) - mean) * (double(src[j]) - mean);
  return {mean, 1.0 / std::sqrt(sq / double(len) + double(epsilon))};
}
}  // namespace

void layer_norm_rows(const float* x, float* y, int64_t rows, int64_t len, const float* scale, const float* shift, float epsilon) {
  parallel_for(rows, [&](int64_t r) {
    const float* src = x + r * len;
    float* dst = y + r * len;
    const auto [mean, inv] = row_stats(src, len, epsilon);
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) dst[j] = float((double(src[j]) - mean) * inv) * scale[j] + shift[j];
  }, rows > 1 && rows * len > 16384);
}

void instance_norm_rows(const float* x, float* y, int64_t rows, int64_t len, int64_t channels, const float* scale, const float* shift,
                        float epsilon) {
  parallel_for(rows, [&](int64_t r) {
    const float* src = x + r * len;
    float* dst = y + r * len;
    const auto [mean, inv] = row_stats(src, len, epsilon);
    const double g = scale[r % channels], b = shift[r % channels];
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) dst[j] = float(g * (double(src[j]) - mean) * inv + b);
  }, rows > 1 && rows * len > 16384);
}

void batch_norm_plain(const float* x, float* y, int64_t outer, int64_t channels, int64_t inner, const float* mean, const float* mul, const float* add,
                      bool relu) {
  parallel_chunks(outer * channels, std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(inner, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t c = r % channels;
      const float m = mean[c], k = mul[c], b = add[c];
      const float* src = x + r * inner;
      float* dst = y + r * inner;
      if (relu) {
#pragma omp simd
        for (int64_t j = 0; j < inner; ++j) dst[j] = std::max((src[j] - m) * k + b, 0.f);
      } else {
#pragma omp simd
        for (int64_t j = 0; j < inner; ++j) dst[j] = (src[j] - m) * k + b;
      }
    }
  });
}

void batch_norm_rows(const float* x, int64_t x_stride, float* y, int64_t rows, int64_t channels, const float* mean, const float* mul,
                     const float* add, bool relu) {
  parallel_chunks(rows, std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(channels, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* src = x + r * x_stride;
      float* dst = y + r * channels;
      if (relu) {
#pragma omp simd
        for (int64_t c = 0; c < channels; ++c) dst[c] = std::max((src[c] - mean[c]) * mul[c] + add[c], 0.f);
      } else {
#pragma omp simd
        for (int64_t c = 0; c < channels; ++c) dst[c] = (src[c] - mean[c]) * mul[c] + add[c];
      }
    }
  });
}

}  // namespace pet::cpu
