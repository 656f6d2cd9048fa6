#include "copy.hpp"

#include <algorithm>
#include <cstring>
#ifdef __AVX2__
#include <immintrin.h>
#endif

#include "pet/core/parallel.hpp"

namespace pet::cpu {

namespace {
/// Drops unit dims and merges dims that are contiguous in both views, so that copies run
/// over as few and as long rows as possible.
void simplify(Shape& shape, std::vector<int64_t>& a, std::vector<int64_t>& b) {
  Shape s;
  std::vector<int64_t> sa, sb;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!s.empty() && sa.back() == a[i] * shape[i] && sb.back() == b[i] * shape[i]) {
      s.back() *= shape[i];
      sa.back() = a[i];
      sb.back() = b[i];
      continue;
    }
    s.push_back(shape[i]);
    sa.push_back(a[i]);
    sb.push_back(b[i]);
  }
  if (s.empty()) s = {1}, sa = {1}, sb = {1};
  shape = s;
  a = sa;
  b = sb;
}

#ifdef __AVX2__
/// dst[r*dsi + c] = src[r + c*ssj] for an 8x8 block (rows of the source are contiguous).
inline void transpose8x8(const float* src, int64_t ssj, float* dst, int64_t dsi) {
  __m256 r0 = _mm256_loadu_ps(src + 0 * ssj), r1 = _mm256_loadu_ps(src + 1 * ssj), r2 = _mm256_loadu_ps(src + 2 * ssj),
         r3 = _mm256_loadu_ps(src + 3 * ssj), r4 = _mm256_loadu_ps(src + 4 * ssj), r5 = _mm256_loadu_ps(src + 5 * ssj),
         r6 = _mm256_loadu_ps(src + 6 * ssj), r7 = _mm256_loadu_ps(src + 7 * ssj);
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
         t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
         t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE), u2 = _mm256_shuffle_ps(t1, t3, 0x44),
         u3 = _mm256_shuffle_ps(t1, t3, 0xEE), u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
         u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  _mm256_storeu_ps(dst + 0 * dsi, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(dst + 1 * dsi, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(dst + 2 * dsi, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(dst + 3 * dsi, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(dst + 4 * dsi, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(dst + 5 * dsi, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(dst + 6 * dsi, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(dst + 7 * dsi, _mm256_permute2f128_ps(u3, u7, 0x31));
}
#endif

/// A 2-D transpose over rows [i0, i1): dst[i*dsi + j] = src[i + j*ssj] (the source is
/// contiguous along i, the destination along j), in 8x8 register blocks inside 64x64 tiles.
void transpose_rows(const float* src, int64_t ssj, float* dst, int64_t dsi, int64_t i0, int64_t i1, int64_t nj) {
  constexpr int64_t T = 64;
  for (int64_t ib = i0; ib < i1; ib += T)
    for (int64_t jb = 0; jb < nj; jb += T) {
      const int64_t ie = std::min(i1, ib + T), je = std::min(nj, jb + T);
      int64_t i = ib;
#ifdef __AVX2__
      for (; i + 8 <= ie; i += 8) {
        int64_t j = jb;
        for (; j + 8 <= je; j += 8) transpose8x8(src + i + j * ssj, ssj, dst + i * dsi + j, dsi);
        for (; j < je; ++j)
          for (int64_t r = 0; r < 8; ++r) dst[(i + r) * dsi + j] = src[i + r + j * ssj];
      }
#endif
      for (; i < ie; ++i)
        for (int64_t j = jb; j < je; ++j) dst[i * dsi + j] = src[i + j * ssj];
    }
}
}  // namespace

void box_copy(const float* src, const std::vector<int64_t>& src_strides, float* dst, const std::vector<int64_t>& dst_strides,
              const Shape& shape_in) {
  if (numel(shape_in) == 0) return;
  Shape shape = shape_in;
  std::vector<int64_t> ss = src_strides, ds = dst_strides;
  simplify(shape, ss, ds);
  const int r = int(shape.size());
  const int64_t inner = shape.back();
  if (ss.back() == 1 && ds.back() == 1) {  // contiguous rows: memcpy
    Shape outer(shape.begin(), shape.end() - 1);
    const int64_t rows = numel(outer);
    parallel_chunks(rows, std::max<int64_t>(1, 16384 / inner), [&](int64_t b, int64_t e) {
      Index idx = unflatten(b, outer);
      for (int64_t row = b; row < e; ++row) {
        int64_t so = 0, d = 0;
        for (int i = 0; i < r - 1; ++i) so += idx[i] * ss[size_t(i)], d += idx[i] * ds[size_t(i)];
        std::memcpy(dst + d, src + so, size_t(inner) * sizeof(float));
        next_index(idx, outer);
      }
    });
    return;
  }
  // A transposed pair of dims: find the dim that is contiguous in the source and tile the
  // innermost destination dim against it.
  int k = -1;
  for (int i = 0; i < r - 1; ++i)
    if (ss[size_t(i)] == 1) k = i;
  if (k >= 0 && ds.back() == 1 && shape[size_t(k)] >= 8 && inner >= 8) {
    Shape outer;
    std::vector<int> dims;
    for (int i = 0; i < r - 1; ++i)
      if (i != k) outer.push_back(shape[size_t(i)]), dims.push_back(i);
    const int64_t n = numel(outer), ni = shape[size_t(k)], blocks = (ni + 63) / 64;
    // parallel over (outer position, block of 64 rows of the transposed pair)
    parallel_for(n * blocks, [&](int64_t q) {
      const int64_t o = q / blocks, b = q % blocks;
      Index idx = unflatten(o, outer);
      int64_t so = 0, d = 0;
      for (size_t p = 0; p < dims.size(); ++p) so += idx[int(p)] * ss[size_t(dims[p])], d += idx[int(p)] * ds[size_t(dims[p])];
      transpose_rows(src + so, ss.back(), dst + d, ds[size_t(k)], b * 64, std::min(ni, (b + 1) * 64), inner);
    }, n * ni * inner > 16384);
    return;
  }
  // General gather: rows of the innermost dim, offsets kept by an odometer over the outer dims.
  Shape outer(shape.begin(), shape.end() - 1);
  const int64_t rows = numel(outer), si = ss.back(), di = ds.back();
  const int ro = r - 1;
  parallel_chunks(rows, std::max<int64_t>(1, 16384 / inner), [&](int64_t b, int64_t e) {
    Index idx = unflatten(b, outer);
    int64_t so = 0, d = 0;
    for (int i = 0; i < ro; ++i) so += idx[i] * ss[size_t(i)], d += idx[i] * ds[size_t(i)];
    for (int64_t row = b; row < e; ++row) {
      const float* sp = src + so;
      float* dp = dst + d;
      if (di == 1 && si == 2)
        for (int64_t j = 0; j < inner; ++j) dp[j] = sp[2 * j];
      else if (di == 1)
        for (int64_t j = 0; j < inner; ++j) dp[j] = sp[j * si];
      else
        for (int64_t j = 0; j < inner; ++j) dp[j * di] = sp[j * si];
      for (int i = ro - 1; i >= 0; --i) {  // odometer step
        so += ss[size_t(i)], d += ds[size_t(i)];
        if (++idx[i] < shape[size_t(i)]) break;
        so -= ss[size_t(i)] * shape[size_t(i)], d -= ds[size_t(i)] * shape[size_t(i)];
        idx[i] = 0;
      }
    }
  });
}

void strided_copy(const float* src, const std::vector<int64_t>& src_strides, float* dst, const Shape& shape) {
  box_copy(src, src_strides, dst, strides_of(shape), shape);
}

void fill(float* dst, int64_t n, float v) {
  parallel_chunks(n, 1 << 16, [&](int64_t b, int64_t e) { std::fill(dst + b, dst + e, v); });
}

void rt_view(const Shape& split_shape, const std::vector<int64_t>& perm, Shape& tshape, std::vector<int64_t>& strides) {
  std::vector<int64_t> st = strides_of(split_shape);
  tshape.clear();
  strides.clear();
  for (int64_t p : perm) {
    tshape.push_back(split_shape[size_t(p)]);
    strides.push_back(st[size_t(p)]);
  }
}

}  // namespace pet::cpu
