#pragma once
/// Shapes, indices and axis helpers. Shapes are static: pet binds every symbolic dimension
/// (ONNX dim_param) when a model is imported.
#include <array>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "pet/core/error.hpp"

namespace pet {

using Shape = std::vector<int64_t>;

/// Largest rank pet handles (ONNX models in practice stay <= 6).
inline constexpr int kMaxRank = 8;
/// Largest element count of one tensor (2^36, i.e. 256 GiB of float32): anything larger is
/// treated as a malformed model rather than attempted.
inline constexpr int64_t kMaxElements = int64_t(1) << 36;

inline std::string to_string(const Shape& s) { return cat(s); }

/// Number of elements; throws InvalidInput on a negative dimension or an absurd size.
inline int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) throw InvalidInput(cat("shape ", s, " has a negative dimension"));
    if (d != 0 && n > kMaxElements / d)
      throw Unsupported(cat("shape ", s, " has more than 2^36 elements (the most pet supports in one tensor)"));
    n *= d;
  }
  return n;
}

/// Largest FLOP count pet reports (2^62): cost estimates of the shapes a huge or malformed
/// model declares saturate here instead of overflowing int64, and a sum of a few still fits.
inline constexpr int64_t kMaxFlops = int64_t(1) << 62;
/// a * b for non-negative counts, saturating at kMaxFlops.
inline int64_t flop_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r) || r > kMaxFlops) return kMaxFlops;
  return r;
}
template <class... T>
int64_t flop_mul(int64_t a, int64_t b, T... rest) { return flop_mul(flop_mul(a, b), rest...); }
/// a + b for non-negative counts, saturating at kMaxFlops.
inline int64_t flop_add(int64_t a, int64_t b) { return a > kMaxFlops - b ? kMaxFlops : a + b; }

/// Row-major strides (in elements).
inline std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int i = int(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

/// Maps an ONNX axis in [-rank, rank) to [0, rank); `who` names the caller in the error.
inline int normalize_axis(int64_t axis, int64_t rank, std::string_view who) {
  if (axis < -rank || axis >= rank)
    throw InvalidInput(cat(who, ": axis ", axis, " is out of range for rank ", rank));
  return int(axis < 0 ? axis + rank : axis);
}

/// A position in a tensor of rank <= kMaxRank, without heap allocation.
struct Index {
  std::array<int64_t, kMaxRank> v{};
  int rank = 0;
  Index() = default;
  explicit Index(int r) : rank(r) {}
  Index(std::initializer_list<int64_t> l) : rank(int(l.size())) {
    int i = 0;
    for (int64_t x : l) v[i++] = x;
  }
  int64_t& operator[](int i) { return v[i]; }
  int64_t operator[](int i) const { return v[i]; }
  int size() const { return rank; }
  bool operator==(const Index& o) const {
    if (rank != o.rank) return false;
    for (int i = 0; i < rank; ++i)
      if (v[i] != o.v[i]) return false;
    return true;
  }
};

/// Flat row-major offset of `idx` in `shape` (no bounds check).
inline int64_t flat_offset(const Index& idx, const Shape& shape) {
  int64_t off = 0;
  for (int i = 0; i < idx.rank; ++i) off = off * shape[i] + idx[i];
  return off;
}

/// Inverse of flat_offset.
inline Index unflatten(int64_t off, const Shape& shape) {
  Index idx(int(shape.size()));
  for (int i = int(shape.size()) - 1; i >= 0; --i) {
    idx[i] = shape[i] ? off % shape[i] : 0;
    off = shape[i] ? off / shape[i] : 0;
  }
  return idx;
}

inline bool in_bounds(const Index& idx, const Shape& shape) {
  for (int i = 0; i < idx.rank; ++i)
    if (idx[i] < 0 || idx[i] >= shape[i]) return false;
  return true;
}

/// Increments `idx` in row-major order within `shape`; returns false after the last index.
inline bool next_index(Index& idx, const Shape& shape) {
  for (int i = idx.rank - 1; i >= 0; --i) {
    if (++idx[i] < shape[i]) return true;
    idx[i] = 0;
  }
  return false;
}

/// Numpy/ONNX multidirectional broadcast of two shapes; throws with `who` on mismatch.
inline Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view who) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      throw InvalidInput(cat(who, ": shapes ", a, " and ", b, " cannot be broadcast (dimension ",
                             i, " is ", da, " vs ", db, ")"));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

/// Whether `from` broadcasts to exactly `to` (ONNX unidirectional broadcasting).
inline bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[i + off]) return false;
  return true;
}

/// The index of a broadcast input of shape `in` that output position `out` reads.
inline Index broadcast_index(const Index& out, const Shape& in) {
  Index r(int(in.size()));
  int off = out.rank - int(in.size());
  for (int i = 0; i < r.rank; ++i) r[i] = in[i] == 1 ? 0 : out[i + off];
  return r;
}

}  // namespace pet
