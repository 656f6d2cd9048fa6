#include "copy.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>
#ifdef __AVX2__
#include <immintrin.h>
#endif

#include "pet/core/parallel.hpp"

namespace pet::cpu {

void simplify_views(Shape& shape, std::initializer_list<std::vector<int64_t>*> views) {
  Shape s;
  std::vector<std::vector<int64_t>> v(views.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    bool merge = !s.empty();
    size_t k = 0;
    for (auto* w : views) merge = merge && v[k].back() == (*w)[i] * shape[i], ++k;
    if (merge) s.back() *= shape[i];
    else s.push_back(shape[i]);
    k = 0;
    for (auto* w : views) {
      if (merge) v[k].back() = (*w)[i];
      else v[k].push_back((*w)[i]);
      ++k;
    }
  }
  if (s.empty()) s = {1}, std::fill(v.begin(), v.end(), std::vector<int64_t>{1});
  shape = s;
  size_t k = 0;
  for (auto* w : views) *w = std::move(v[k++]);
}

void simplify(Shape& shape, std::vector<int64_t>& a, std::vector<int64_t>& b) { simplify_views(shape, {&a, &b}); }

namespace {

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

namespace {
/// Nested loops over R dims with the rank known at compile time (tight code, no odometer).
template <int R, class Block>
inline void nest(const float* s, float* d, const int64_t* ext, const int64_t* os, const int64_t* od, Block& blk) {
  if constexpr (R == 0) {
    blk(s, d);
  } else {
    const int64_t n = ext[0], a = os[0], b = od[0];
    for (int64_t i = 0; i < n; ++i) nest<R - 1>(s + i * a, d + i * b, ext + 1, os + 1, od + 1, blk);
  }
}

/// Calls blk(src + so, dst + d) for every position of `outer` (offsets so/d by the strides),
/// in parallel over the first dim (chunks of about `grain` positions). Ranks up to 6 run as
/// nested loops of known depth; deeper ones follow an odometer.
template <class Block>
void for_each_block(const float* src, const std::vector<int64_t>& os, float* dst, const std::vector<int64_t>& od, const Shape& outer,
                    int64_t grain, Block&& blk) {
  const int r = int(outer.size());
  const int64_t n0 = outer[0], per = numel(outer) / std::max<int64_t>(n0, 1);
  auto slab = [&]<int R>(std::integral_constant<int, R>, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) nest<R>(src + i * os[0], dst + i * od[0], outer.data() + 1, os.data() + 1, od.data() + 1, blk);
  };
  parallel_chunks(n0, std::max<int64_t>(1, grain / std::max<int64_t>(per, 1)), [&](int64_t b, int64_t e) {
    switch (r) {
      case 1: return slab(std::integral_constant<int, 0>{}, b, e);
      case 2: return slab(std::integral_constant<int, 1>{}, b, e);
      case 3: return slab(std::integral_constant<int, 2>{}, b, e);
      case 4: return slab(std::integral_constant<int, 3>{}, b, e);
      case 5: return slab(std::integral_constant<int, 4>{}, b, e);
      case 6: return slab(std::integral_constant<int, 5>{}, b, e);
      default: break;
    }
    const Shape rest(outer.begin() + 1, outer.end());
    for (int64_t i = b; i < e; ++i) {
      Index idx(r - 1);
      int64_t so = i * os[0], d = i * od[0];
      for (int64_t q = 0; q < per; ++q) {
        blk(src + so, dst + d);
        for (int k = r - 2; k >= 0; --k) {
          so += os[size_t(k + 1)], d += od[size_t(k + 1)];
          if (++idx[k] < rest[size_t(k)]) break;
          so -= os[size_t(k + 1)] * rest[size_t(k)], d -= od[size_t(k + 1)] * rest[size_t(k)];
          idx[k] = 0;
        }
      }
    }
  });
}

/// Copies n < 64 floats: whole vectors, the last one overlapping the one before it (both
/// within [0, n)), so that short rows cost no scalar tail.
inline void copy_short(const float* __restrict sp, float* __restrict dp, int64_t n) {
#ifdef __AVX2__
  if (n >= 8) {
    int64_t j = 0;
    for (; j + 8 < n; j += 8) _mm256_storeu_ps(dp + j, _mm256_loadu_ps(sp + j));
    _mm256_storeu_ps(dp + n - 8, _mm256_loadu_ps(sp + n - 8));
    return;
  }
  if (n >= 4) {
    _mm_storeu_ps(dp, _mm_loadu_ps(sp));
    _mm_storeu_ps(dp + n - 4, _mm_loadu_ps(sp + n - 4));
    return;
  }
#endif
  for (int64_t j = 0; j < n; ++j) dp[j] = sp[j];
}

/// Calls f(std::integral_constant<int, n>) for 1 <= n <= 16.
template <class F>
void with_small_length(int64_t n, F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) { ((n == I + 1 ? (f(std::integral_constant<int, I + 1>{}), 0) : 0), ...); }(
      std::make_integer_sequence<int, 16>{});
}

/// Even (k = 0) and odd (k = 1) elements of 16 consecutive floats, in order.
#ifdef __AVX2__
/// The same for 8 consecutive floats (4 pairs).
inline void deinterleave2x4(const float* sp, float* d0, float* d1) {
  __m128 a = _mm_loadu_ps(sp), b = _mm_loadu_ps(sp + 4);
  _mm_storeu_ps(d0, _mm_shuffle_ps(a, b, 0x88));
  _mm_storeu_ps(d1, _mm_shuffle_ps(a, b, 0xDD));
}
inline void deinterleave2(const float* sp, float* d0, float* d1) {
  __m256 a = _mm256_loadu_ps(sp), b = _mm256_loadu_ps(sp + 8);
  __m256 ev = _mm256_shuffle_ps(a, b, 0x88), od = _mm256_shuffle_ps(a, b, 0xDD);  // a0 a2 b0 b2 | a4 a6 b4 b6
  _mm256_storeu_ps(d0, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8)));
  if (d1) _mm256_storeu_ps(d1, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), 0xD8)));
}
#endif
}  // namespace

void box_copy(const float* src, const std::vector<int64_t>& src_strides, float* dst, const std::vector<int64_t>& dst_strides,
              const Shape& shape_in) {
  if (numel(shape_in) == 0) return;
  Shape shape = shape_in;
  std::vector<int64_t> ss = src_strides, ds = dst_strides;
  simplify(shape, ss, ds);
  const int r = int(shape.size());
  const int64_t inner = shape.back(), si = ss.back(), di = ds.back();
  const int64_t grain = std::max<int64_t>(1, 16384 / inner);
  auto outer_without = [&](int skip, Shape& o, std::vector<int64_t>& os, std::vector<int64_t>& od) {
    for (int i = 0; i < r - 1; ++i)
      if (i != skip) o.push_back(shape[size_t(i)]), os.push_back(ss[size_t(i)]), od.push_back(ds[size_t(i)]);
    if (o.empty()) o = {1}, os = {0}, od = {0};
    // Walk the outer dims in source order (largest source stride outermost): the source is
    // then read once, front to back, and the destination written as a few sequential streams
    // (a tile regroup otherwise re-reads every source cache line once per tile column).
    std::vector<size_t> order(o.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return os[x] > os[y]; });
    Shape o2;
    std::vector<int64_t> os2, od2;
    for (size_t i : order) o2.push_back(o[i]), os2.push_back(os[i]), od2.push_back(od[i]);
    o = o2, os = os2, od = od2;
  };
  if (si == 1 && di == 1) {  // contiguous rows: memcpy for long ones, a plain loop for short ones
    Shape o;
    std::vector<int64_t> os, od;
    outer_without(-1, o, os, od);
    if (inner >= 64)
      for_each_block(src, os, dst, od, o, grain, [&](const float* sp, float* dp) { std::memcpy(dp, sp, size_t(inner) * sizeof(float)); });
    else if (inner <= 16)  // the row length as a compile-time constant: no loop, no branch
      with_small_length(inner, [&]<int N>(std::integral_constant<int, N>) {
        for_each_block(src, os, dst, od, o, grain, [](const float* sp, float* dp) { copy_short(sp, dp, N); });
      });
    else
      for_each_block(src, os, dst, od, o, grain, [&](const float* sp, float* dp) { copy_short(sp, dp, inner); });
    return;
  }
  // A transposed pair of dims: find the dim that is contiguous in the source and tile the
  // innermost destination dim against it.
  int k = -1;
  for (int i = 0; i < r - 1; ++i)
    if (ss[size_t(i)] == 1) k = i;
  if (k >= 0 && di == 1 && shape[size_t(k)] >= 8 && inner >= 8) {
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
      transpose_rows(src + so, si, dst + d, ds[size_t(k)], b * 64, std::min(ni, (b + 1) * 64), inner);
    }, n * ni * inner > 16384);
    return;
  }
  // A narrow transposed pair (a parity or phase regroup: the source holds rows of `e` < 8
  // interleaved phases): read each source block [inner][e] once and write e destination rows.
  if (k >= 0 && di == 1 && si == shape[size_t(k)]) {
    const int64_t e = shape[size_t(k)], dk = ds[size_t(k)];
    Shape o;
    std::vector<int64_t> os, od;
    outer_without(k, o, os, od);
    auto run = [&]<int E>(std::integral_constant<int, E>) {
      for_each_block(src, os, dst, od, o, std::max<int64_t>(1, grain / e), [&](const float* sp, float* dp) {
        int64_t j = 0;
#ifdef __AVX2__
        if constexpr (E == 2)
          for (; j + 8 <= inner; j += 8) deinterleave2(sp + 2 * j, dp + j, dp + dk + j);
#endif
        const int64_t ee = E > 0 ? E : e;
        for (; j < inner; ++j)
          for (int64_t p = 0; p < ee; ++p) dp[p * dk + j] = sp[j * ee + p];
      });
    };
    if (e == 2 && inner <= 16)  // both extents compile-time constants (a parity regroup of small maps)
      with_small_length(inner, [&]<int N>(std::integral_constant<int, N>) {
        for_each_block(src, os, dst, od, o, std::max<int64_t>(1, grain / 2), [dk](const float* sp, float* dp) {
          int j = 0;
#ifdef __AVX2__
          for (; j + 8 <= N; j += 8) deinterleave2(sp + 2 * j, dp + j, dp + dk + j);
          if constexpr (N % 8 >= 4) {  // 4 more pairs, then the last 4 again (overlapping) for the rest
            deinterleave2x4(sp + 2 * j, dp + j, dp + dk + j);
            if (N % 4) deinterleave2x4(sp + 2 * (N - 4), dp + N - 4, dp + dk + N - 4);
            j = N;
          }
#endif
          for (; j < N; ++j) dp[j] = sp[2 * j], dp[dk + j] = sp[2 * j + 1];
        });
      });
    else if (e == 2) run(std::integral_constant<int, 2>{});
    else if (e == 3) run(std::integral_constant<int, 3>{});
    else if (e == 4) run(std::integral_constant<int, 4>{});
    else run(std::integral_constant<int, 0>{});
    return;
  }
  // General gather along rows of the innermost dim.
  Shape o;
  std::vector<int64_t> os, od;
  outer_without(-1, o, os, od);
  for_each_block(src, os, dst, od, o, grain, [&](const float* sp, float* dp) {
    int64_t j = 0;
    if (di == 1 && si == 2) {
#ifdef __AVX2__
      for (; j + 8 < inner; j += 8) deinterleave2(sp + 2 * j, dp + j, nullptr);  // reads sp[2j+15] <= sp[2(inner-1)]
#endif
      for (; j < inner; ++j) dp[j] = sp[2 * j];
    } else if (di == 1) {
      for (; j < inner; ++j) dp[j] = sp[j * si];
    } else {
      for (; j < inner; ++j) dp[j * di] = sp[j * si];
    }
  });
}

void strided_copy(const float* src, const std::vector<int64_t>& src_strides, float* dst, const Shape& shape) {
  box_copy(src, src_strides, dst, strides_of(shape), shape);
}

void fill(float* dst, int64_t n, float v) {
  parallel_chunks(n, 1 << 16, [&](int64_t b, int64_t e) { std::fill(dst + b, dst + e, v); });
}


}  // namespace pet::cpu
