#pragma once
/// Boxes and split points (paper section 5.1; see docs/boxes.md).
/// A Box is a product of half-open intervals [lo, hi) with a step per dimension (step 1 is
/// a contiguous box; a larger step represents the strided regions that interleaving
/// reshapes produce). SplitPoints holds, per dimension, the sorted interior positions where
/// the summation structure of a program's output may change.
#include <algorithm>
#include <vector>

#include "pet/core/shape.hpp"

namespace pet {

struct Interval {
  int64_t lo = 0, hi = 0;  ///< half-open
  int64_t step = 1;        ///< positions lo, lo+step, ... < hi
  int64_t count() const { return hi > lo ? (hi - lo + step - 1) / step : 0; }
  bool contains(int64_t x) const { return x >= lo && x < hi && (x - lo) % step == 0; }
  bool operator==(const Interval&) const = default;
};

struct Box {
  std::vector<Interval> dims;

  static Box whole(const Shape& s) {
    Box b;
    for (int64_t d : s) b.dims.push_back({0, d, 1});
    return b;
  }
  int rank() const { return int(dims.size()); }
  bool empty() const {
    for (const auto& d : dims)
      if (d.count() == 0) return true;
    return false;
  }
  int64_t volume() const {
    int64_t v = 1;
    for (const auto& d : dims) v *= d.count();
    return v;
  }
  bool contains(const Index& idx) const {
    if (idx.rank != rank()) return false;
    for (int i = 0; i < idx.rank; ++i)
      if (!dims[i].contains(idx[i])) return false;
    return true;
  }
  /// First position of the box.
  Index origin() const {
    Index v(rank());
    for (int i = 0; i < rank(); ++i) v[i] = dims[i].lo;
    return v;
  }
  bool operator==(const Box&) const = default;
};

inline std::string to_string(const Box& b) {
  std::string s = "[";
  for (int i = 0; i < b.rank(); ++i) {
    if (i) s += ", ";
    s += cat(b.dims[i].lo, ":", b.dims[i].hi);
    if (b.dims[i].step != 1) s += cat(":", b.dims[i].step);
  }
  return s + "]";
}

/// Intersection of two contiguous boxes (steps must be 1).
inline Box intersect(const Box& a, const Box& b) {
  PET_CHECK(a.rank() == b.rank(), "rank ", a.rank(), " vs ", b.rank());
  Box r;
  for (int i = 0; i < a.rank(); ++i) {
    PET_CHECK(a.dims[i].step == 1 && b.dims[i].step == 1, "intersect needs contiguous boxes");
    r.dims.push_back({std::max(a.dims[i].lo, b.dims[i].lo), std::min(a.dims[i].hi, b.dims[i].hi), 1});
  }
  return r;
}

/// Per-dimension sorted split points strictly inside (0, n).
struct SplitPoints {
  std::vector<std::vector<int64_t>> dims;

  static SplitPoints none(const Shape& s) { return SplitPoints{std::vector<std::vector<int64_t>>(s.size())}; }
  int rank() const { return int(dims.size()); }

  /// Adds a split at `x` of dimension `d` (ignored unless 0 < x < n).
  void add(int d, int64_t x, int64_t n) {
    if (x <= 0 || x >= n) return;
    auto& v = dims[size_t(d)];
    auto it = std::lower_bound(v.begin(), v.end(), x);
    if (it == v.end() || *it != x) v.insert(it, x);
  }

  /// The grid of contiguous boxes these split points cut `shape` into.
  std::vector<Box> boxes(const Shape& shape) const {
    PET_CHECK(int(shape.size()) == rank(), "split points of rank ", rank(), " for shape ", shape);
    std::vector<std::vector<Interval>> per_dim(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) {
      int64_t lo = 0;
      for (int64_t x : dims[d]) {
        per_dim[d].push_back({lo, x, 1});
        lo = x;
      }
      per_dim[d].push_back({lo, shape[d], 1});
    }
    std::vector<Box> out{Box{}};
    for (size_t d = 0; d < shape.size(); ++d) {
      std::vector<Box> next;
      for (const auto& b : out)
        for (const auto& iv : per_dim[d]) {
          Box nb = b;
          nb.dims.push_back(iv);
          next.push_back(std::move(nb));
        }
      out = std::move(next);
    }
    return out;
  }
};

}  // namespace pet
