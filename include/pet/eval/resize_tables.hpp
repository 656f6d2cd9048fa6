#pragma once
// Resize by tables, shared by the reference interpreter's fast kernel and the cpu backend
// (which builds the tables once, at compile time).
#include <algorithm>
#include <array>
#include <vector>

#include "pet/core/parallel.hpp"
#include "pet/ir/op.hpp"

namespace pet::kernels {

/// Each dim's taps (input indices and weights, the op's own `taps`) computed once per output
/// coordinate; each output row (all dims but the last fixed) sums its outer taps' input rows,
/// the last dim's taps innermost: the same products, added in the same order as the op's
/// formula (its result to the last bit or two: the compiler fuses some multiply-adds in one
/// and not the other; nearest exactly). Rows run in parallel.
template <class T>
class ResizeTables {
 public:
  ResizeTables(const ops::Resize& op, const Shape& xs, const Shape& ys)
      : nearest_(op.mode == ops::Resize::Mode::Nearest),
        crop_(op.coord == ops::Resize::Coord::TfCropAndResize),
        fill_(T(op.extrapolation_value)),
        ys_(ys),
        taps_(xs.size()),
        xstride_(xs.size(), 1) {
    for (size_t d = 0; d < xs.size(); ++d) {
      const int64_t m = ys[d];
      Taps& t = taps_[d];
      t.count.resize(size_t(m)), t.idx.resize(size_t(m)), t.w.resize(size_t(m)), t.outside.assign(size_t(m), 0);
      for (int64_t o = 0; o < m; ++o) {
        if (crop_) {
          const float v = op.source(o, xs[d], op.sizes[d], op.scales[d], d);
          t.outside[size_t(o)] = v < 0 || v > float(xs[d] - 1);
        }
        t.count[size_t(o)] = op.template taps<T>(o, xs[d], op.sizes[d], op.scales[d], t.idx[size_t(o)], t.w[size_t(o)], d);
      }
    }
    for (size_t d = xs.size() - 1; d-- > 0;) xstride_[d] = xstride_[d + 1] * xs[d + 1];
  }

  /// y (shape ys) from x (shape xs), both row-major.
  void run(const T* x, T* y) const {
    const size_t r = ys_.size();
    const int64_t inner = ys_[r - 1], rows = numel(ys_) / std::max<int64_t>(inner, 1);
    const Taps& last = taps_[r - 1];
    parallel_for(rows, [&](int64_t row) {
      T* dst = y + row * inner;
      // the row's output coordinates along the outer dims
      std::array<int64_t, kMaxRank> oc{};
      bool out_row = false;
      for (size_t d = r - 1, rest = size_t(row); d-- > 0;) {
        oc[d] = int64_t(rest % size_t(ys_[d]));
        rest /= size_t(ys_[d]);
        out_row = out_row || (crop_ && taps_[d].outside[size_t(oc[d])]);
      }
      if (out_row) {
        std::fill(dst, dst + inner, fill_);
        return;
      }
      // every combination of the outer dims' taps (an odometer, the last outer dim fastest):
      // its input row and its weight, multiplied in dim order from 1
      thread_local std::vector<std::pair<const T*, T>> combos;
      combos.clear();
      std::array<int, kMaxRank> j{};
      for (;;) {
        T weight(1);
        int64_t off = 0;
        for (size_t d = 0; d + 1 < r; ++d) {
          off += taps_[d].idx[size_t(oc[d])][size_t(j[d])] * xstride_[d];
          weight *= taps_[d].w[size_t(oc[d])][size_t(j[d])];
        }
        combos.emplace_back(x + off, weight);
        int d = int(r) - 2;
        for (; d >= 0; --d) {
          if (++j[size_t(d)] < taps_[size_t(d)].count[size_t(oc[size_t(d)])]) break;
          j[size_t(d)] = 0;
        }
        if (d < 0) break;
      }
      if (nearest_) {  // one tap of weight 1: 0 + (1 * 1) x
        const T* src = combos[0].first;
        for (int64_t o = 0; o < inner; ++o) dst[o] = crop_ && last.outside[size_t(o)] ? fill_ : T(0) + src[last.idx[size_t(o)][0]];
        return;
      }
      for (int64_t o = 0; o < inner; ++o) {
        if (crop_ && last.outside[size_t(o)]) {
          dst[o] = fill_;
          continue;
        }
        const auto& li = last.idx[size_t(o)];
        const auto& lw = last.w[size_t(o)];
        const int lc = last.count[size_t(o)];
        T acc(0);
        for (const auto& [src, wo] : combos)
          for (int k = 0; k < lc; ++k) acc += (wo * lw[size_t(k)]) * src[li[size_t(k)]];
        dst[o] = acc;
      }
    }, numel(ys_) > 16384);
  }

 private:
  struct Taps {
    std::vector<int> count;
    std::vector<std::array<int64_t, 4>> idx;
    std::vector<std::array<T, 4>> w;
    std::vector<char> outside;  ///< tf_crop_and_resize: the coordinate falls outside the input
  };
  bool nearest_, crop_;
  T fill_;
  Shape ys_;
  std::vector<Taps> taps_;
  std::vector<int64_t> xstride_;
};

}  // namespace pet::kernels
