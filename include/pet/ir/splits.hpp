#pragma once
/// Split-point arithmetic shared by the ops' box propagation (paper section 5.1; see
/// docs/boxes.md). A dimension's cuts are the sorted interior positions where the
/// summation structure of a tensor may change. Everything here errs on the side of more
/// cuts: a finer grid only costs checks, a coarser one would make the verifier unsound.
///
/// Soundness criterion used throughout: inside one grid cell, every input variable a value
/// reads must be addressed by one affine function of the position (inputs are labelled by
/// their flat row-major offset) and the set of summation terms must be the same.
#include <algorithm>
#include <vector>

#include "pet/core/box.hpp"

namespace pet::cuts {

using Cuts = std::vector<int64_t>;

/// Sorts, removes duplicates and everything outside (0, n).
inline Cuts normalize(Cuts c, int64_t n) {
  c.erase(std::remove_if(c.begin(), c.end(), [&](int64_t x) { return x <= 0 || x >= n; }), c.end());
  std::sort(c.begin(), c.end());
  c.erase(std::unique(c.begin(), c.end()), c.end());
  return c;
}
inline Cuts unite(const Cuts& a, const Cuts& b, int64_t n) {
  Cuts c = a;
  c.insert(c.end(), b.begin(), b.end());
  return normalize(c, n);
}
inline Cuts every_position(int64_t n) {
  Cuts c;
  for (int64_t i = 1; i < n; ++i) c.push_back(i);
  return c;
}

/// Merges an outer dim (size a, cuts ca) and an inner dim (size b, cuts cb) into one dim
/// x = i*b + k. Crossing a row boundary changes the address i*b+k -> (i, k) non-affinely
/// for the multi-index maps of whatever produced the tensor, so unless one side has size 1
/// every row boundary is cut, and each row is cut like the inner dim.
inline Cuts merge(int64_t a, const Cuts& ca, int64_t b, const Cuts& cb) {
  if (b == 1) return ca;
  if (a == 1) return cb;
  Cuts c;
  for (int64_t i = 0; i < a; ++i) {
    if (i) c.push_back(i * b);
    for (int64_t s : cb) c.push_back(i * b + s);
  }
  return c;
}

/// Splits a dim of size a*b with cuts c into outer (a) and inner (b): a boundary t becomes
/// outer cuts at floor(t/b) and ceil(t/b) and an inner cut at t mod b.
inline std::pair<Cuts, Cuts> split(const Cuts& c, int64_t a, int64_t b) {
  if (b == 1) return {c, {}};
  if (a == 1) return {{}, c};
  Cuts outer, inner;
  for (int64_t t : c) {
    outer.push_back(t / b);
    outer.push_back((t + b - 1) / b);
    inner.push_back(t % b);
  }
  return {normalize(outer, a), normalize(inner, b)};
}

/// Row-major reshape of `in` (cuts per dim) into `out`: dims are grouped into the smallest
/// runs with equal products; each run is merged into one dim and split into the output dims.
inline std::vector<Cuts> reshape(const Shape& in, const std::vector<Cuts>& cin, const Shape& out) {
  std::vector<Cuts> cout(out.size());
  if (numel(in) == 0) return cout;
  size_t i = 0, j = 0;
  while (i < in.size() || j < out.size()) {
    // One group: in[i0, i) and out[j0, j) with equal products (size-1 dims join any group).
    size_t i0 = i, j0 = j;
    int64_t pi = 1, pj = 1;
    if (i < in.size()) pi *= in[i++];
    if (j < out.size()) pj *= out[j++];
    while (pi != pj) {
      if (pi < pj && i < in.size()) pi *= in[i++];
      else if (j < out.size()) pj *= out[j++];
      else if (i < in.size()) pi *= in[i++];
      else PET_CHECK(false, "reshape ", in, " -> ", out, " changes the element count");
    }
    while (i < in.size() && in[i] == 1) ++i;  // trailing unit dims carry no cuts
    int64_t size = in.empty() ? 1 : (i0 < in.size() ? in[i0] : 1);
    Cuts merged = i0 < in.size() ? cin[i0] : Cuts{};
    for (size_t k = i0 + 1; k < i; ++k) {
      merged = normalize(merge(size, merged, in[k], cin[k]), size * in[k]);
      size *= in[k];
    }
    for (size_t k = j0; k < j; ++k) {
      int64_t rest = size / std::max<int64_t>(out[k], 1);
      auto [o, r] = split(merged, out[k], rest);
      cout[k] = o;
      merged = r;
      size = rest;
    }
  }
  return cout;
}

/// Output cuts of a sliding window (conv / pool) along one dim: output o reads input
/// o*s - p + r*d for r in [0, K); the structure changes where such a read crosses a boundary
/// t (0, n, an input cut, or an extra boundary such as the padded extent).
inline Cuts window(const Cuts& in_cuts, int64_t n, int64_t k, int64_t s, int64_t d, int64_t p, int64_t out_n,
                   const Cuts& extra = {}) {
  Cuts bounds = in_cuts;
  bounds.push_back(0);
  bounds.push_back(n);
  bounds.insert(bounds.end(), extra.begin(), extra.end());
  Cuts c;
  for (int64_t t : bounds)
    for (int64_t r = 0; r < k; ++r) {
      int64_t num = t + p - r * d;  // o >= num / s  <=>  read >= t
      c.push_back(num >= 0 ? (num + s - 1) / s : -((-num) / s));
    }
  return normalize(c, out_n);
}

/// Cuts of every size-Fg block boundary (group convolutions: the input channel range jumps).
inline Cuts blocks(int64_t n, int64_t block) {
  Cuts c;
  for (int64_t x = block; x < n; x += block) c.push_back(x);
  return c;
}

/// Maps output cuts for a broadcast operand: dims aligned from the right; a size-1 input
/// dim contributes nothing.
inline void add_broadcast(std::vector<Cuts>& out, const Shape& out_shape, const Shape& in_shape, const std::vector<Cuts>& cin) {
  size_t off = out_shape.size() - in_shape.size();
  for (size_t i = 0; i < in_shape.size(); ++i)
    if (in_shape[i] != 1) out[off + i] = unite(out[off + i], cin[i], out_shape[off + i]);
}

/// Cuts as a SplitPoints value for a shape.
inline SplitPoints to_split_points(const std::vector<Cuts>& c) { return SplitPoints{c}; }

}  // namespace pet::cuts

namespace pet {

/// Bounding box (contiguous) of the positions `f` maps a box to, found by visiting every
/// position when the box is small, else the whole `shape` (an over-approximation is sound
/// for "which inputs does this output read").
template <class F>
Box bounding_preimage(const Box& out, const Shape& shape, F&& f) {
  if (out.empty()) {
    Box b = Box::whole(shape);
    for (auto& d : b.dims) d.hi = d.lo;
    return b;
  }
  if (out.volume() > (int64_t(1) << 20)) return Box::whole(shape);
  Box b;
  b.dims.assign(shape.size(), Interval{INT64_MAX, INT64_MIN, 1});
  Shape ext;
  for (const auto& d : out.dims) ext.push_back(d.count());
  Index r(int(ext.size()));
  do {
    Index o(out.rank());
    for (int i = 0; i < o.rank; ++i) o[i] = out.dims[size_t(i)].lo + r[i] * out.dims[size_t(i)].step;
    Index x = f(o);
    for (int i = 0; i < x.rank; ++i) {
      b.dims[size_t(i)].lo = std::min(b.dims[size_t(i)].lo, x[i]);
      b.dims[size_t(i)].hi = std::max(b.dims[size_t(i)].hi, x[i] + 1);
    }
  } while (next_index(r, ext));
  return b;
}

/// Copies the intervals of `out` that `map[i]` names (-1: the whole input dim) into a box over `shape`.
inline Box select_dims(const Box& out, const Shape& shape, const std::vector<int>& map) {
  Box b = Box::whole(shape);
  for (size_t i = 0; i < map.size(); ++i)
    if (map[i] >= 0) b.dims[i] = Interval{out.dims[size_t(map[i])].lo, out.dims[size_t(map[i])].hi, 1};
  return b;
}

}  // namespace pet
