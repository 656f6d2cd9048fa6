#include "copy.hpp"

#include <algorithm>
#include <cstring>

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

/// A 2-D transpose tile loop: dst[i*dsi + j*dsj] = src[i*ssi + j*ssj].
void tile2d(const float* src, int64_t ssi, int64_t ssj, float* dst, int64_t dsi, int64_t dsj, int64_t ni, int64_t nj) {
  constexpr int64_t T = 16;
  for (int64_t i0 = 0; i0 < ni; i0 += T)
    for (int64_t j0 = 0; j0 < nj; j0 += T) {
      const int64_t i1 = std::min(ni, i0 + T), j1 = std::min(nj, j0 + T);
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) dst[i * dsi + j * dsj] = src[i * ssi + j * ssj];
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
  if (k >= 0 && ds.back() == 1) {
    Shape outer;
    std::vector<int> dims;
    for (int i = 0; i < r - 1; ++i)
      if (i != k) outer.push_back(shape[size_t(i)]), dims.push_back(i);
    const int64_t n = numel(outer);
    parallel_for(n, [&](int64_t o) {
      Index idx = unflatten(o, outer);
      int64_t so = 0, d = 0;
      for (size_t q = 0; q < dims.size(); ++q) so += idx[int(q)] * ss[size_t(dims[q])], d += idx[int(q)] * ds[size_t(dims[q])];
      tile2d(src + so, ss[size_t(k)], ss.back(), dst + d, ds[size_t(k)], 1, shape[size_t(k)], inner);
    }, n * shape[size_t(k)] * inner > 8192);
    return;
  }
  Shape outer(shape.begin(), shape.end() - 1);
  const int64_t rows = numel(outer), si = ss.back(), di = ds.back();
  parallel_chunks(rows, std::max<int64_t>(1, 16384 / inner), [&](int64_t b, int64_t e) {
    Index idx = unflatten(b, outer);
    for (int64_t row = b; row < e; ++row) {
      int64_t so = 0, d = 0;
      for (int i = 0; i < r - 1; ++i) so += idx[i] * ss[size_t(i)], d += idx[i] * ds[size_t(i)];
      for (int64_t j = 0; j < inner; ++j) dst[d + j * di] = src[so + j * si];
      next_index(idx, outer);
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
