// Data-movement ops as box copies (include/pet/backend/copy_plan.hpp).
#include "pet/backend/copy_plan.hpp"

#include <algorithm>
#include <optional>

namespace pet::backend {
namespace {
/// The R/T op (and Transpose, its special case): the source viewed with the strides of the
/// split shape, permuted; written contiguously.
BoxCopy rt_copy(const Shape& split, const std::vector<int64_t>& perm) {
  BoxCopy c;
  const std::vector<int64_t> st = strides_of(split);
  for (int64_t p : perm) {
    c.shape.push_back(split[size_t(p)]);
    c.src_strides.push_back(st[size_t(p)]);
  }
  c.dst_strides = strides_of(c.shape);
  c.what = "strided copy";
  return c;
}

/// Pad with mode edge or reflect: output position i of dim d reads the input at
/// j = i - pads[d], clamped to [0, n - 1] (edge) or mirrored about the first and last
/// positions (reflect: -j, 2 (n - 1) - j). Per dim up to three ranges (before the input,
/// stride 0 or -1; the input itself, past what negative pads crop; after it, stride 0 or -1);
/// one box per combination of the dims' ranges. Reflect with negative pads: nullopt.
std::optional<std::vector<BoxCopy>> mirror_pad_plan(const ops::Pad& o, const Shape& xs, const Shape& ys) {
  struct Range {
    int64_t dst, len, src, step;
  };
  const bool reflect = o.mode == ops::PadMode::Reflect;
  const size_t r = xs.size();
  const auto xst = strides_of(xs), yst = strides_of(ys);
  if (numel(ys) == 0) {  // nothing to write
    BoxCopy c;
    c.src_strides = xst, c.dst_strides = yst, c.shape = ys, c.what = "empty";
    return std::vector{c};
  }
  std::vector<std::vector<Range>> ranges(r);
  for (size_t d = 0; d < r; ++d) {
    const int64_t pb = o.pads[d], pe = o.pads[d + r];
    if (reflect && (pb < 0 || pe < 0)) return std::nullopt;
    const int64_t lo = std::max<int64_t>(0, -pb), hi = std::min(xs[d], ys[d] - pb);
    const int64_t mid = std::max<int64_t>(0, hi - lo), start = std::max<int64_t>(0, lo + pb), after = ys[d] - start - mid;
    if (start > 0) ranges[d].push_back(reflect ? Range{0, start, pb, -1} : Range{0, start, 0, 0});
    if (mid > 0) ranges[d].push_back({start, mid, lo, 1});
    if (after > 0) ranges[d].push_back(reflect ? Range{start + mid, after, xs[d] - 2, -1} : Range{start + mid, after, xs[d] - 1, 0});
  }
  std::vector<BoxCopy> v;
  std::vector<size_t> pick(r, 0);
  while (true) {
    BoxCopy c;
    bool interior = true;
    for (size_t d = 0; d < r; ++d) {
      const Range& g = ranges[d][pick[d]];
      c.shape.push_back(g.len);
      c.src_strides.push_back(g.step * xst[d]);
      c.dst_strides.push_back(yst[d]);
      c.src_offset += g.src * xst[d];
      c.dst_offset += g.dst * yst[d];
      interior = interior && g.step == 1;
    }
    c.what = interior ? "copy of the input" : reflect ? "copy of a mirrored border" : "copy of an edge";
    v.push_back(std::move(c));
    size_t d = r;
    while (d > 0 && ++pick[d - 1] == ranges[d - 1].size()) pick[--d] = 0;
    if (d == 0) break;
  }
  return v;
}
}  // namespace

std::optional<std::vector<BoxCopy>> copy_plan(const Op& op, InTypes in, InTypes out) {
  return std::visit([&](const auto& o) -> std::optional<std::vector<BoxCopy>> {
    using O = std::decay_t<decltype(o)>;
    if constexpr (std::is_same_v<O, ops::RT>) {
      return std::vector{rt_copy(o.split_shape, o.perm)};
    } else if constexpr (std::is_same_v<O, ops::Transpose>) {
      return std::vector{rt_copy(in[0].shape, o.perm)};
    } else if constexpr (std::is_same_v<O, ops::Slice>) {
      const Shape& xs = in[0].shape;
      const auto xst = strides_of(xs);
      BoxCopy c;
      c.src_strides.resize(xs.size());
      for (size_t d = 0; d < xs.size(); ++d) c.src_strides[d] = xst[d] * o.step[d], c.src_offset += o.begin[d] * xst[d];
      c.shape = out[0].shape;
      c.dst_strides = strides_of(c.shape);
      c.what = "strided copy";
      return std::vector{c};
    } else if constexpr (std::is_same_v<O, ops::Split>) {
      const auto xst = strides_of(in[0].shape);
      std::vector<BoxCopy> v;
      int64_t off = 0;
      for (size_t k = 0; k < out.size(); ++k) {
        BoxCopy c;
        c.dst = int(k);
        c.src_strides = xst;
        c.src_offset = off * xst[size_t(o.axis)];
        c.shape = out[k].shape;
        c.dst_strides = strides_of(c.shape);
        c.what = cat("copy of part ", k);
        v.push_back(c);
        off += out[k].shape[size_t(o.axis)];
      }
      return v;
    } else if constexpr (std::is_same_v<O, ops::Pad>) {
      if (o.mode != ops::PadMode::Constant) return mirror_pad_plan(o, in[0].shape, out[0].shape);
      const Shape &xs = in[0].shape, &ys = out[0].shape;
      BoxCopy c;
      c.src_strides = strides_of(xs);
      c.dst_strides = strides_of(ys);
      c.shape.resize(xs.size());
      for (size_t d = 0; d < xs.size(); ++d) {  // negative pads crop
        const int64_t lo = std::max<int64_t>(0, -o.pads[d]), hi = std::min(xs[d], ys[d] - o.pads[d]);
        c.shape[d] = std::max<int64_t>(0, hi - lo);
        c.src_offset += lo * c.src_strides[d];
        c.dst_offset += (lo + o.pads[d]) * c.dst_strides[d];
      }
      c.fill_first = true;
      c.fill_value = float(o.value);
      c.what = "fill + copy";
      return std::vector{c};
    } else if constexpr (std::is_same_v<O, ops::Patch>) {
      const Shape &ys = out[0].shape, &ps = in[1].shape;
      BoxCopy base;
      base.src_strides = base.dst_strides = strides_of(ys);
      base.shape = ys;
      base.what = "copy of the base";
      BoxCopy patch;
      patch.src = 1;
      patch.src_strides = strides_of(ps);
      patch.dst_strides = base.dst_strides;
      for (size_t d = 0; d < ys.size(); ++d) patch.dst_offset += o.offsets[d] * patch.dst_strides[d];
      patch.shape = ps;
      patch.over_previous = true;
      patch.what = "patch copy";
      return std::vector{base, patch};
    } else if constexpr (std::is_same_v<O, ops::Expand>) {
      const Shape &xs = in[0].shape, &ys = out[0].shape;
      const auto own = strides_of(xs);
      BoxCopy c;
      c.src_strides.assign(ys.size(), 0);
      for (size_t i = 0; i < xs.size(); ++i) c.src_strides[ys.size() - xs.size() + i] = xs[i] == 1 ? 0 : own[i];
      c.shape = ys;
      c.dst_strides = strides_of(ys);
      c.what = "broadcast copy";
      return std::vector{c};
    } else if constexpr (std::is_same_v<O, ops::Tile>) {
      // Output dim i of extent r d is read as (t, j) with t < r (stride 0 in the source) and
      // j < d; a dim repeated once, or of extent 1, needs only one of the two.
      const Shape &xs = in[0].shape, &ys = out[0].shape;
      const auto xst = strides_of(xs), yst = strides_of(ys);
      BoxCopy c;
      for (size_t i = 0; i < xs.size(); ++i) {
        const int64_t r = o.repeats[i], d = xs[i];
        if (r != 1 && d != 1) c.shape.push_back(r), c.src_strides.push_back(0), c.dst_strides.push_back(d * yst[i]);
        c.shape.push_back(d == 1 ? r : d);
        c.src_strides.push_back(d == 1 ? 0 : xst[i]);
        c.dst_strides.push_back(yst[i]);
      }
      if (c.shape.size() > size_t(kMaxRank)) return std::nullopt;  // a box copy's rank limit (a backend's fixed-size index)
      c.what = "tiling copy";
      return std::vector{c};
    } else if constexpr (std::is_same_v<O, ops::Concat>) {
      const Shape& ys = out[0].shape;
      const auto yst = strides_of(ys);
      std::vector<BoxCopy> v;
      int64_t off = 0;
      for (size_t k = 0; k < in.size(); ++k) {
        BoxCopy c;
        c.src = int(k);
        c.src_strides = strides_of(in[k].shape);
        c.dst_strides = yst;
        c.dst_offset = off * yst[size_t(o.axis)];
        c.shape = in[k].shape;
        c.what = cat("copy of input ", k);
        v.push_back(c);
        off += in[k].shape[size_t(o.axis)];
      }
      return v;
    } else {
      return std::nullopt;
    }
  }, op);
}

void run_copy_plan(const std::vector<BoxCopy>& plan, const std::vector<const float*>& in, const std::vector<float*>& out,
                   const std::vector<int64_t>& out_sizes) {
  for (const BoxCopy& c : plan) {
    float* d = out.at(size_t(c.dst));
    if (c.fill_first) std::fill(d, d + out_sizes.at(size_t(c.dst)), c.fill_value);
    const float* s = in.at(size_t(c.src));
    const int64_t n = numel(c.shape);
    const int r = int(c.shape.size());
    std::vector<int64_t> idx(size_t(r), 0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t so = c.src_offset, dof = c.dst_offset;
      for (int k = 0; k < r; ++k) so += idx[size_t(k)] * c.src_strides[size_t(k)], dof += idx[size_t(k)] * c.dst_strides[size_t(k)];
      d[dof] = s[so];
      for (int k = r - 1; k >= 0 && ++idx[size_t(k)] == c.shape[size_t(k)]; --k) idx[size_t(k)] = 0;
    }
  }
}

}  // namespace pet::backend
