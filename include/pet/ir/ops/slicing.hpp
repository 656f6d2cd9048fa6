#pragma once
/// Operators that cut, join, pad and select (Concat, Split, Slice, Pad are linear).
#include <algorithm>
#include <cmath>
#include <limits>

#include "pet/ir/op_base.hpp"

namespace pet::ops {

/// out = the inputs joined along `axis`; out[.., a, ..] = x_j[.., a - offset_j, ..].
struct Concat {
  static constexpr std::string_view name = "Concat";
  PET_ATTRS(axis);
  static constexpr bool multilinear = true, layout = true;
  int64_t axis = 0;
  Types infer(InTypes in) {
    if (in.empty()) throw InvalidInput("expects at least one input");
    const Shape& x0 = in[0].shape;
    axis = normalize_axis(axis, int64_t(x0.size()), "axis");
    Shape out = x0;
    for (size_t j = 1; j < in.size(); ++j) {
      pet::detail::expect_same_dtype(in, 0, j);
      const Shape& x = in[j].shape;
      bool ok = x.size() == x0.size();
      for (size_t i = 0; ok && i < x.size(); ++i) ok = int64_t(i) == axis || x[i] == x0[i];
      if (!ok) throw InvalidInput(cat("input ", j, " has shape ", x, " but input 0 has ", x0, " (only axis ", axis, " may differ)"));
      out[size_t(axis)] += x[size_t(axis)];
    }
    return {{in[0].dtype, out}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    Index xi = o;
    for (int j = 0;; ++j) {
      int64_t n = read.shape(j)[size_t(axis)];
      if (xi[int(axis)] < n || j + 1 == read.count()) return read(j, xi);
      xi[int(axis)] -= n;
    }
  }
  Splits propagate(InSplits in, InTypes it, InTypes ot) const {
    const Shape& o = ot[0].shape;
    SplitPoints s = SplitPoints::none(o);
    int64_t off = 0;
    for (size_t j = 0; j < in.size(); ++j) {
      for (size_t d = 0; d < o.size(); ++d) {
        if (int64_t(d) != axis) {
          s.dims[d] = cuts::unite(s.dims[d], in[j].dims[d], o[d]);
          continue;
        }
        cuts::Cuts c{off};
        for (int64_t t : in[j].dims[d]) c.push_back(t + off);
        s.dims[d] = cuts::unite(s.dims[d], c, o[d]);
      }
      off += it[j].shape[size_t(axis)];
    }
    return {s};
  }
  std::vector<Box> input_boxes(const Box& out, int, InTypes it, InTypes) const {
    std::vector<Box> r;
    int64_t off = 0;
    for (const auto& t : it) {
      Box b = out;
      auto& d = b.dims[size_t(axis)];
      int64_t n = t.shape[size_t(axis)];
      d = Interval{std::clamp<int64_t>(d.lo - off, 0, n), std::clamp<int64_t>(d.hi - off, 0, n), 1};
      if (d.hi < d.lo) d.hi = d.lo;
      r.push_back(b);
      off += n;
    }
    return r;
  }
  bool operator==(const Concat&) const = default;
};

/// Output k = x[.., offset_k : offset_k + split[k], ..] along `axis`. Empty `split` means
/// equal parts (the last one smaller when the size does not divide, as in opset 18).
struct Split {
  static constexpr std::string_view name = "Split";
  PET_ATTRS(axis, split, num_outputs, uneven);
  static constexpr bool multilinear = true, layout = true;
  int64_t axis = 0;
  std::vector<int64_t> split;
  int num_outputs = 1;
  /// Without `split`: the last part may be smaller (opset 18's num_outputs); otherwise the
  /// axis must divide evenly (before opset 18).
  bool uneven = false;
  Types infer(InTypes in) {
    pet::detail::expect_arity(in, 1, 1);
    const Shape& x = in[0].shape;
    axis = normalize_axis(axis, int64_t(x.size()), "axis");
    int64_t n = x[size_t(axis)];
    if (split.empty()) {
      if (num_outputs < 1) throw InvalidInput("needs at least one output");
      if (!uneven && n % num_outputs != 0)
        throw InvalidInput(cat("axis ", axis, " of ", x, " (size ", n, ") does not split into ", num_outputs,
                               " equal parts; give 'split' explicitly"));
      int64_t part = (n + num_outputs - 1) / num_outputs;
      for (int k = 0; k < num_outputs; ++k) split.push_back(std::max<int64_t>(0, std::min(part, n - k * part)));
    }
    if (int(split.size()) != num_outputs)
      throw InvalidInput(cat("split ", split, " has ", split.size(), " parts but the node has ", num_outputs, " outputs"));
    int64_t total = 0;
    for (int64_t s : split) {
      if (s < 0 || s > n) throw InvalidInput(cat("split ", split, " has a part outside [0, ", n, "]"));
      total += s;
    }
    if (total != n) throw InvalidInput(cat("split ", split, " sums to ", total, " but axis ", axis, " of ", x, " has size ", n));
    Types out;
    for (int64_t s : split) {
      Shape sh = x;
      sh[size_t(axis)] = s;
      out.push_back({in[0].dtype, sh});
    }
    return out;
  }
  template <class E, class R>
  E at(int k, const Index& o, const R& read) const {
    Index xi = o;
    for (int j = 0; j < k; ++j) xi[int(axis)] += split[size_t(j)];
    return read(0, xi);
  }
  Splits propagate(InSplits in, InTypes, InTypes ot) const {
    Splits r;
    int64_t off = 0;
    for (size_t k = 0; k < ot.size(); ++k) {
      SplitPoints s = in[0];
      cuts::Cuts c;
      for (int64_t t : in[0].dims[size_t(axis)]) c.push_back(t - off);
      s.dims[size_t(axis)] = cuts::normalize(c, split[k]);
      r.push_back(s);
      off += split[k];
    }
    return r;
  }
  std::vector<Box> input_boxes(const Box& out, int k, InTypes, InTypes) const {
    Box b = out;
    int64_t off = 0;
    for (int j = 0; j < k; ++j) off += split[size_t(j)];
    b.dims[size_t(axis)].lo += off;
    b.dims[size_t(axis)].hi += off;
    return {b};
  }
  bool operator==(const Split&) const = default;
};

/// ONNX Slice. infer() resolves starts/ends/axes/steps into `begin` and `step` per dim:
///   out[.., i_d, ..] = x[.., begin_d + i_d * step_d, ..]
struct Slice {
  static constexpr std::string_view name = "Slice";
  PET_ATTRS(starts, ends, axes, steps, begin, step);
  static constexpr bool multilinear = true, layout = true;
  std::vector<int64_t> starts, ends, axes, steps;
  std::vector<int64_t> begin, step;  ///< resolved, one per input dim

  Types infer(InTypes in) {
    pet::detail::expect_arity(in, 1, 1);
    const Shape& x = in[0].shape;
    int64_t r = int64_t(x.size());
    if (starts.size() != ends.size()) throw InvalidInput(cat("starts ", starts, " and ends ", ends, " differ in length"));
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (axes.size() != starts.size() || steps.size() != starts.size())
      throw InvalidInput(cat("starts, ends, axes and steps must have equal lengths: ", starts, ", ", ends, ", ", axes, ", ", steps));
    axes = pet::detail::normalize_axes(axes, r, "axes");
    begin.assign(size_t(r), 0);
    step.assign(size_t(r), 1);
    Shape out = x;
    for (size_t i = 0; i < axes.size(); ++i) {
      size_t a = size_t(axes[i]);
      int64_t n = x[a], s = steps[i];
      if (s == 0 || s == std::numeric_limits<int64_t>::min()) throw InvalidInput(cat("steps ", steps, " contain 0 or INT64_MIN"));
      auto clampi = [&](int64_t v, int64_t lo, int64_t hi) {
        if (v < 0) v += n;  // v >= INT64_MIN + n cannot overflow
        return std::max(lo, std::min(v, hi));
      };
      int64_t b = 0;
      if (n == 0) {
        out[a] = 0;
      } else if (s > 0) {
        b = clampi(starts[i], 0, n);
        int64_t e = clampi(ends[i], 0, n);
        out[a] = e > b ? (e - b - 1) / s + 1 : 0;
      } else {
        b = clampi(starts[i], 0, n - 1);
        int64_t e = clampi(ends[i], -1, n - 1);
        out[a] = b > e ? (b - e - 1) / (-s) + 1 : 0;
      }
      begin[a] = b;
      step[a] = s;
    }
    return {{in[0].dtype, out}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    Index xi(o.rank);
    for (int d = 0; d < o.rank; ++d) xi[d] = begin[size_t(d)] + o[d] * step[size_t(d)];
    return read(0, xi);
  }
  Splits propagate(InSplits in, InTypes, InTypes ot) const {
    const Shape& o = ot[0].shape;
    SplitPoints s = SplitPoints::none(o);
    for (size_t d = 0; d < o.size(); ++d) {
      cuts::Cuts c;
      const int64_t b = begin[d], st = step[d];
      for (int64_t t : in[0].dims[d]) {
        if (st > 0) c.push_back(t - b >= 0 ? (t - b + st - 1) / st : -((b - t) / st));
        else c.push_back((b - t >= 0 ? (b - t) / (-st) : -((t - b - st - 1) / (-st))) + 1);
      }
      s.dims[d] = cuts::normalize(c, o[d]);
    }
    return {s};
  }
  std::vector<Box> input_boxes(const Box& out, int, InTypes it, InTypes) const {
    Box b = Box::whole(it[0].shape);
    if (out.empty()) {
      for (auto& d : b.dims) d.hi = d.lo;
      return {b};
    }
    for (size_t d = 0; d < b.dims.size(); ++d) {
      int64_t first = begin[d] + out.dims[d].lo * step[d], last = begin[d] + (out.dims[d].hi - 1) * step[d];
      b.dims[d] = Interval{std::min(first, last), std::max(first, last) + 1, 1};
    }
    return {b};
  }
  bool operator==(const Slice&) const = default;
};

enum class PadMode : uint8_t { Constant, Reflect, Edge };

/// ONNX Pad: pads = [b_1..b_r, e_1..e_r] (negative values crop).
///   out[o] = x[o - b] inside x; outside: `value` (constant), the mirror image without the
///   edge (reflect), or the nearest edge element (edge).
struct Pad {
  static constexpr std::string_view name = "Pad";
  PET_ATTRS(pads, mode, value, axes);
  static constexpr bool multilinear = true, layout = true;
  std::vector<int64_t> pads;
  PadMode mode = PadMode::Constant;
  double value = 0.0;
  /// Opset 18: `pads` holds begins then ends of these axes only; inference expands them to
  /// every axis and clears `axes`.
  std::vector<int64_t> axes;

  Types infer(InTypes in) {
    pet::detail::expect_arity(in, 1, 1);
    const Shape& x = in[0].shape;
    size_t r = x.size();
    if (!axes.empty()) {
      if (pads.size() != 2 * axes.size())
        throw InvalidInput(cat("pads ", pads, " must have ", 2 * axes.size(), " values for axes ", axes));
      std::vector<int64_t> full(2 * r, 0);
      std::vector<bool> seen(r, false);
      for (size_t k = 0; k < axes.size(); ++k) {
        size_t a = size_t(normalize_axis(axes[k], int64_t(r), "axes"));
        if (seen[a]) throw InvalidInput(cat("axes ", axes, " repeat axis ", a));
        seen[a] = true;
        full[a] = pads[k];
        full[a + r] = pads[k + axes.size()];
      }
      pads = full;
      axes.clear();
    }
    if (pads.size() != 2 * r) throw InvalidInput(cat("pads ", pads, " must have ", 2 * r, " values for input shape ", x));
    pet::detail::expect_bounded(pads, "pads");
    Shape out = x;
    for (size_t i = 0; i < r; ++i) {
      out[i] = x[i] + pads[i] + pads[i + r];
      if (out[i] < 0) throw InvalidInput(cat("pads ", pads, " crop more than dimension ", i, " of ", x, " holds"));
      if (mode != PadMode::Constant && x[i] == 0 && out[i] > 0)
        throw InvalidInput(cat("cannot ", mode == PadMode::Reflect ? "reflect" : "edge", "-pad the empty dimension ", i));
      if (mode == PadMode::Reflect && (pads[i] >= x[i] || pads[i + r] >= x[i]) && x[i] > 0 && (pads[i] > 0 || pads[i + r] > 0))
        throw InvalidInput(cat("reflect pads ", pads, " must be smaller than dimension ", i, " (", x[i], ")"));
    }
    return {{in[0].dtype, out}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    const Shape& x = read.shape(0);
    const int r = o.rank;
    Index xi(r);
    for (int i = 0; i < r; ++i) {
      int64_t p = o[i] - pads[size_t(i)], n = x[size_t(i)];
      if (p < 0 || p >= n) {
        if (mode == PadMode::Constant) return lift_scalar<E>(value, "Pad value");
        if (mode == PadMode::Edge) p = p < 0 ? 0 : n - 1;
        else p = p < 0 ? -p : 2 * (n - 1) - p;
      }
      xi[i] = p;
    }
    return read(0, xi);
  }
  Splits propagate(InSplits in, InTypes it, InTypes ot) const {
    const Shape &x = it[0].shape, &o = ot[0].shape;
    const size_t r = x.size();
    SplitPoints s = SplitPoints::none(o);
    for (size_t d = 0; d < r; ++d) {
      const int64_t pb = pads[d];
      cuts::Cuts c{pb, pb + x[d]};
      for (int64_t t : in[0].dims[d]) c.push_back(t + pb);
      if (mode != PadMode::Constant) {  // mirrored / clamped regions: cut every position there
        for (int64_t p = 1; p <= pb; ++p) c.push_back(p);
        for (int64_t p = pb + x[d]; p < o[d]; ++p) c.push_back(p);
      }
      s.dims[d] = cuts::normalize(c, o[d]);
    }
    return {s};
  }
  std::vector<Box> input_boxes(const Box& out, int, InTypes it, InTypes) const {
    const Shape& x = it[0].shape;
    Box b = Box::whole(x);
    for (size_t d = 0; d < x.size(); ++d) {
      int64_t lo = out.dims[d].lo - pads[d], hi = out.dims[d].hi - pads[d];
      if (mode != PadMode::Constant && (lo < 0 || hi > x[d])) continue;  // whole dim
      lo = std::clamp<int64_t>(lo, 0, x[d]);
      hi = std::clamp<int64_t>(hi, lo, x[d]);
      b.dims[d] = Interval{lo, hi, 1};
    }
    return {b};
  }
  bool operator==(const Pad&) const = default;
};

/// out[a.., q.., b..] = x[a.., idx[q..], b..] with idx = indices (negative wraps);
/// out has shape x[:axis] + indices.shape + x[axis+1:].
struct Gather {
  static constexpr std::string_view name = "Gather";
  PET_ATTRS(axis);
  static constexpr bool multilinear = false, layout = true;
  int64_t axis = 0;
  Types infer(InTypes in) {
    pet::detail::expect_arity(in, 2, 2);
    if (in[1].dtype != DType::Int64 && in[1].dtype != DType::Int32)
      throw InvalidInput(cat("indices must be int64 or int32, got ", dtype_name(in[1].dtype)));
    const Shape &x = in[0].shape, &ix = in[1].shape;
    if (x.empty()) throw InvalidInput("data must have rank >= 1");
    axis = normalize_axis(axis, int64_t(x.size()), "axis");
    Shape out(x.begin(), x.begin() + axis);
    out.insert(out.end(), ix.begin(), ix.end());
    out.insert(out.end(), x.begin() + axis + 1, x.end());
    if (out.size() > size_t(kMaxRank)) throw InvalidInput(cat("output rank ", out.size(), " exceeds ", kMaxRank));
    return {{in[0].dtype, out}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    const Shape &x = read.shape(0), &ix = read.shape(1);
    const int a = int(axis), q = int(ix.size());
    Index ii(q), xi(int(x.size()));
    for (int i = 0; i < q; ++i) ii[i] = o[a + i];
    int64_t k = read.ints(1, ii), n = x[size_t(a)];
    if (k < -n || k >= n) throw InvalidInput(cat("Gather: index ", k, " is out of range for axis ", a, " of size ", n));
    for (int i = 0; i < a; ++i) xi[i] = o[i];
    xi[a] = k < 0 ? k + n : k;
    for (int i = a + 1; i < xi.rank; ++i) xi[i] = o[i - 1 + q];
    return read(0, xi);
  }
  bool operator==(const Gather&) const = default;
};

/// out[i] = data[i with dim axis replaced by indices[i]] (negative indices count from the
/// end); out has the shape of indices.
struct GatherElements {
  static constexpr std::string_view name = "GatherElements";
  PET_ATTRS(axis);
  static constexpr bool multilinear = false, layout = true;
  int64_t axis = 0;
  Types infer(InTypes in) {
    pet::detail::expect_arity(in, 2, 2);
    if (in[1].dtype != DType::Int64 && in[1].dtype != DType::Int32)
      throw InvalidInput(cat("indices must be int64 or int32, got ", dtype_name(in[1].dtype)));
    const Shape &x = in[0].shape, &ix = in[1].shape;
    if (x.empty()) throw InvalidInput("data must have rank >= 1");
    if (ix.size() != x.size()) throw InvalidInput(cat("indices ", ix, " must have the rank of data ", x));
    axis = normalize_axis(axis, int64_t(x.size()), "axis");
    for (size_t d = 0; d < x.size(); ++d)
      if (int64_t(d) != axis && ix[d] > x[d])
        throw InvalidInput(cat("indices ", ix, " are larger than data ", x, " in dim ", d));
    return {{in[0].dtype, ix}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    const int a = int(axis);
    const int64_t n = read.shape(0)[size_t(a)], k = read.ints(1, o);
    if (k < -n || k >= n) throw InvalidInput(cat("GatherElements: index ", k, " is out of range for axis ", a, " of size ", n));
    Index xi = o;
    xi[a] = k < 0 ? k + n : k;
    return read(0, xi);
  }
  bool operator==(const GatherElements&) const = default;
};

/// data (rank r) read at index tuples: indices (rank q) holds, for each of its first q - 1
/// positions, m = indices.shape[-1] coordinates into data's dims [b, b + m) after the b =
/// batch_dims leading dims both share; out[p, t] = data[p[:b], indices[p], t], shape
/// indices.shape[:-1] + data.shape[b + m:]. Negative coordinates count from the end.
struct GatherND {
  static constexpr std::string_view name = "GatherND";
  PET_ATTRS(batch_dims);
  static constexpr bool multilinear = false, layout = true;
  int64_t batch_dims = 0;
  Types infer(InTypes in) const {
    pet::detail::expect_arity(in, 2, 2);
    if (in[1].dtype != DType::Int64 && in[1].dtype != DType::Int32)
      throw InvalidInput(cat("indices must be int64 or int32, got ", dtype_name(in[1].dtype)));
    const Shape &x = in[0].shape, &ix = in[1].shape;
    const int64_t r = int64_t(x.size()), q = int64_t(ix.size()), b = batch_dims;
    if (r < 1 || q < 1) throw InvalidInput(cat("data ", x, " and indices ", ix, " must have rank >= 1"));
    if (b < 0 || b >= std::min(r, q)) throw InvalidInput(cat("batch_dims ", b, " must be in [0, min(rank(data), rank(indices)))"));
    for (int64_t d = 0; d < b; ++d)
      if (x[size_t(d)] != ix[size_t(d)]) throw InvalidInput(cat("data ", x, " and indices ", ix, " differ in batch dim ", d));
    const int64_t m = ix.back();
    if (m < 1 || m > r - b) throw InvalidInput(cat("indices' last dim ", m, " must be in [1, ", r - b, "] (data's rank less batch_dims)"));
    Shape out(ix.begin(), ix.end() - 1);
    out.insert(out.end(), x.begin() + b + m, x.end());
    if (out.size() > size_t(kMaxRank)) throw InvalidInput(cat("output rank ", out.size(), " exceeds ", kMaxRank));
    return {{in[0].dtype, out}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    const Shape &x = read.shape(0), &ix = read.shape(1);
    const int q = int(ix.size()), b = int(batch_dims), m = int(ix.back());
    Index ii(q), xi(int(x.size()));
    for (int i = 0; i < q - 1; ++i) ii[i] = o[i];
    for (int i = 0; i < b; ++i) xi[i] = o[i];
    for (int j = 0; j < m; ++j) {
      ii[q - 1] = j;
      const int64_t n = x[size_t(b + j)], k = read.ints(1, ii);
      if (k < -n || k >= n) throw InvalidInput(cat("GatherND: index ", k, " is out of range for data dim ", b + j, " of size ", n));
      xi[b + j] = k < 0 ? k + n : k;
    }
    for (int i = b + m; i < xi.rank; ++i) xi[i] = o[q - 1 + i - b - m];
    return read(0, xi);
  }
  bool operator==(const GatherND&) const = default;
};

/// The upper (or lower) triangle of each matrix in the last two dims, the rest zero:
///   out[.., i, j] = x[.., i, j] if j - i >= k (upper) or j - i <= k (lower), else 0.
struct Trilu {
  static constexpr std::string_view name = "Trilu";
  PET_ATTRS(upper, k);
  static constexpr bool multilinear = false;
  bool upper = true;
  int64_t k = 0;
  Types infer(InTypes in) const {
    pet::detail::expect_arity(in, 1, 1);
    if (in[0].shape.size() < 2) throw InvalidInput(cat("input must have rank >= 2, got ", in[0].shape));
    return {in[0]};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    const int64_t d = o[o.rank - 1] - o[o.rank - 2];
    return (upper ? d >= k : d <= k) ? read(0, o) : E(0);
  }
  bool operator==(const Trilu&) const = default;
};

/// One-hot encoding: indices (any numeric type) get a new dim of size `depth` at `axis`;
///   out[.., p, ..] = values[1] if p == indices[..] (negative indices + depth), else values[0]
/// (indices outside [-depth, depth) give values[0] everywhere).
struct OneHot {
  static constexpr std::string_view name = "OneHot";
  PET_ATTRS(depth, axis);
  static constexpr bool multilinear = false;
  int64_t depth = 1;
  int64_t axis = -1;
  Types infer(InTypes in) {
    pet::detail::expect_arity(in, 2, 2);
    if (in[0].dtype == DType::Bool) throw InvalidInput("indices must be numeric, got bool");
    if (numel(in[1].shape) != 2 || in[1].shape.size() != 1)
      throw InvalidInput(cat("values must have shape [2] (off, on), got ", in[1].shape));
    if (depth < 1) throw InvalidInput(cat("depth must be at least 1, got ", depth));
    const Shape& ix = in[0].shape;
    axis = normalize_axis(axis, int64_t(ix.size()) + 1, "axis");
    Shape out = ix;
    out.insert(out.begin() + axis, depth);
    if (out.size() > size_t(kMaxRank)) throw InvalidInput(cat("output rank ", out.size(), " exceeds ", kMaxRank));
    return {{in[1].dtype, out}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    const int a = int(axis);
    Index ii(o.rank - 1);
    for (int i = 0, j = 0; i < o.rank; ++i)
      if (i != a) ii[j++] = o[i];
    const double v = read.real(0, ii);
    int64_t idx = std::isfinite(v) ? int64_t(v) : depth;
    if (idx < 0) idx += depth;
    Index vi(1);
    vi[0] = idx == o[a] ? 1 : 0;
    return read(1, vi);
  }
  bool operator==(const OneHot&) const = default;
};

/// How Scatter ops combine an update u with the value v already at its position: none
/// (v = u; of several updates to one position the last in row-major order of the indices
/// wins, as ONNX Runtime writes them), add, mul, max or min.
enum class ScatterReduction { None, Add, Mul, Max, Min };

namespace detail {
template <class E>
E scatter_combine(ScatterReduction r, E v, E u) {
  switch (r) {
    case ScatterReduction::None: return u;
    case ScatterReduction::Add: return v + u;
    case ScatterReduction::Mul: return v * u;
    case ScatterReduction::Max:
    case ScatterReduction::Min:
      if constexpr (is_field_v<E>) {
        pet::detail::require_ordered<E>("Scatter with reduction max or min");
        return v;
      } else {
        return r == ScatterReduction::Max ? (v < u ? u : v) : (u < v ? u : v);
      }
  }
  return u;
}
inline void expect_indices(InTypes in, size_t i) {
  if (in[i].dtype != DType::Int64 && in[i].dtype != DType::Int32)
    throw InvalidInput(cat("indices must be int64 or int32, got ", dtype_name(in[i].dtype)));
}
/// An index k into a dim of size n, negative from the end; out of range is an error.
inline int64_t scatter_index(std::string_view op, int64_t k, int64_t n, int64_t dim) {
  if (k < -n || k >= n) throw InvalidInput(cat(op, ": index ", k, " is out of range for dim ", dim, " of size ", n));
  return k < 0 ? k + n : k;
}
}  // namespace detail

/// data with updates written (or combined by `reduction`) at positions along `axis`:
/// for every position j of indices (and updates, of the same shape and data's rank),
///   out[j with dim axis replaced by indices[j]] = combine(out[...], updates[j]),
/// in row-major order of j, starting from out = data. Negative indices count from the end.
/// (ONNX's deprecated Scatter is this with reduction none.)
struct ScatterElements {
  static constexpr std::string_view name = "ScatterElements";
  PET_ATTRS(axis, reduction);
  static constexpr bool multilinear = false;
  int64_t axis = 0;
  ScatterReduction reduction = ScatterReduction::None;
  Types infer(InTypes in) {
    pet::detail::expect_arity(in, 3, 3);
    detail::expect_indices(in, 1);
    pet::detail::expect_same_dtype(in, 0, 2);
    const Shape &x = in[0].shape, &ix = in[1].shape, &u = in[2].shape;
    if (x.empty()) throw InvalidInput("data must have rank >= 1");
    if (ix != u) throw InvalidInput(cat("indices ", ix, " and updates ", u, " must have the same shape"));
    if (ix.size() != x.size()) throw InvalidInput(cat("indices ", ix, " must have the rank of data ", x));
    axis = normalize_axis(axis, int64_t(x.size()), "axis");
    for (size_t d = 0; d < x.size(); ++d)
      if (int64_t(d) != axis && ix[d] > x[d])
        throw InvalidInput(cat("indices ", ix, " are larger than data ", x, " in dim ", d));
    return {in[0]};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    const int a = int(axis);
    const Shape &x = read.shape(0), &ix = read.shape(1);
    E v = read(0, o);
    Index j = o;
    for (int d = 0; d < o.rank; ++d)
      if (d != a && o[d] >= ix[size_t(d)]) return v;  // no update reaches this row
    for (int64_t k = 0; k < ix[size_t(a)]; ++k) {
      j[a] = k;
      if (detail::scatter_index(name, read.ints(1, j), x[size_t(a)], a) == o[a]) v = detail::scatter_combine(reduction, v, read(2, j));
    }
    return v;
  }
  int64_t flops(InTypes in, InTypes) const { return reduction == ScatterReduction::None ? 0 : numel(in[2].shape); }
  bool operator==(const ScatterElements&) const = default;
};

/// data with updates written (or combined by `reduction`) at index tuples: indices (rank q)
/// holds, for each position p of its first q - 1 dims, k = indices.shape[-1] coordinates into
/// data's first k dims; updates has shape indices.shape[:-1] + data.shape[k:] and
///   out[indices[p], t] = combine(out[indices[p], t], updates[p, t])
/// in row-major order of p, starting from out = data. Negative coordinates count from the end.
struct ScatterND {
  static constexpr std::string_view name = "ScatterND";
  PET_ATTRS(reduction);
  static constexpr bool multilinear = false;
  ScatterReduction reduction = ScatterReduction::None;
  Types infer(InTypes in) const {
    pet::detail::expect_arity(in, 3, 3);
    detail::expect_indices(in, 1);
    pet::detail::expect_same_dtype(in, 0, 2);
    const Shape &x = in[0].shape, &ix = in[1].shape, &u = in[2].shape;
    if (x.empty() || ix.empty()) throw InvalidInput(cat("data ", x, " and indices ", ix, " must have rank >= 1"));
    const int64_t k = ix.back();
    if (k < 1 || k > int64_t(x.size())) throw InvalidInput(cat("indices' last dim ", k, " must be in [1, ", x.size(), "] (data's rank)"));
    Shape want(ix.begin(), ix.end() - 1);
    want.insert(want.end(), x.begin() + k, x.end());
    if (u != want) throw InvalidInput(cat("updates ", u, " must have shape ", want, " (indices' shape without its last dim, then data's dims after the first ", k, ")"));
    return {in[0]};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    const Shape &x = read.shape(0), &ix = read.shape(1);
    const int q = int(ix.size()), k = int(ix.back());
    E v = read(0, o);
    Shape ps(ix.begin(), ix.end() - 1);
    if (numel(ps) == 0) return v;
    Index p(q - 1), ii(q), ui(q - 1 + o.rank - k);
    do {
      bool hit = true;
      for (int i = 0; i < q - 1; ++i) ii[i] = p[i];
      for (int c = 0; c < k && hit; ++c) {
        ii[q - 1] = c;
        hit = detail::scatter_index(name, read.ints(1, ii), x[size_t(c)], c) == o[c];
      }
      if (!hit) continue;
      for (int i = 0; i < q - 1; ++i) ui[i] = p[i];
      for (int d = k; d < o.rank; ++d) ui[q - 1 + d - k] = o[d];
      v = detail::scatter_combine(reduction, v, read(2, ui));
    } while (next_index(p, ps));
    return v;
  }
  int64_t flops(InTypes in, InTypes) const { return reduction == ScatterReduction::None ? 0 : numel(in[2].shape); }
  bool operator==(const ScatterND&) const = default;
};

/// pet's correction patch: `base` with `patch` written over the box that starts at `offsets`.
///   out[v] = patch[v - offsets] where offsets <= v < offsets + patch.shape, else base[v]
/// Exported to ONNX as Slice and Concat ops.
struct Patch {
  static constexpr std::string_view name = "PetPatch";
  PET_ATTRS(offsets);
  static constexpr bool multilinear = true, layout = true;
  std::vector<int64_t> offsets;

  bool inside(const Index& v, const Shape& patch) const {
    for (int d = 0; d < v.rank; ++d)
      if (v[d] < offsets[size_t(d)] || v[d] >= offsets[size_t(d)] + patch[size_t(d)]) return false;
    return true;
  }
  Types infer(InTypes in) const {
    pet::detail::expect_arity(in, 2, 2);
    pet::detail::expect_same_dtype(in, 0, 1);
    const Shape &b = in[0].shape, &p = in[1].shape;
    if (b.size() != p.size() || offsets.size() != b.size())
      throw InvalidInput(cat("base ", b, ", patch ", p, " and offsets ", offsets, " must have the same rank"));
    for (size_t d = 0; d < b.size(); ++d)
      if (offsets[d] < 0 || offsets[d] + p[d] > b[d])
        throw InvalidInput(cat("patch ", p, " at offsets ", offsets, " does not fit in base ", b));
    return {in[0]};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    const Shape& p = read.shape(1);
    if (!inside(o, p)) return read(0, o);
    Index q = o;
    for (int d = 0; d < q.rank; ++d) q[d] -= offsets[size_t(d)];
    return read(1, q);
  }
  Splits propagate(InSplits in, InTypes it, InTypes ot) const {
    const Shape &o = ot[0].shape, &p = it[1].shape;
    SplitPoints s = in[0];
    for (size_t d = 0; d < o.size(); ++d) {
      cuts::Cuts c{offsets[d], offsets[d] + p[d]};
      for (int64_t t : in[1].dims[d]) c.push_back(t + offsets[d]);
      s.dims[d] = cuts::unite(s.dims[d], c, o[d]);
    }
    return {s};
  }
  std::vector<Box> input_boxes(const Box& out, int, InTypes it, InTypes) const {
    const Shape& p = it[1].shape;
    Box bp = out;
    for (size_t d = 0; d < p.size(); ++d) {
      auto& iv = bp.dims[d];
      iv = Interval{std::clamp<int64_t>(iv.lo - offsets[d], 0, p[d]), std::clamp<int64_t>(iv.hi - offsets[d], 0, p[d]), 1};
      if (iv.hi < iv.lo) iv.hi = iv.lo;
    }
    return {out, bp};
  }
  bool operator==(const Patch&) const = default;
};

}  // namespace pet::ops
