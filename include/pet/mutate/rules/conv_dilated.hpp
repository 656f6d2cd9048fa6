#pragma once
/// Dilated conv -> dense conv (paper section 2): output position o reads o - p + r*d, so
/// positions of one residue mod d only read positions of one residue mod d: regrouping the
/// image by residue along each spatial dim gives d^k phase images (k = 1, 2 or 3 spatial
/// dims) on which a dense conv does the work; a dense conv can take Winograd (2-D, and 3-D
/// as depth taps of 2-D tiles), a dilated one cannot.
#include <algorithm>

#include "pet/mutate/rules/conv_layout.hpp"

namespace pet::mutate::rules {

/// Phase images in the batch: exactly equivalent (needs stride 1, equal dilation d along
/// every spatial dim, pads divisible by d; the image is zero-padded up to a multiple of d).
/// `Blocks`: phase images as d x ... x d blocks of one image instead, one dense conv over it:
/// block seams read the neighbour block instead of padding (partially equivalent).
template <bool Blocks>
struct ConvDilatedToDense final : Rule<ops::Conv> {
  std::string_view name() const override { return Blocks ? "conv-dilated-to-dense-blocks" : "conv-dilated-to-dense"; }
  std::string_view description() const override {
    return Blocks ? "dilated conv as a dense conv over the image regrouped into d x d blocks by residue, seams corrected"
                  : "dilated conv as a dense conv over the d x d residue images stacked in the batch";
  }
  Result apply(const Match<ops::Conv>& m, MutantBuilder& b) const override {
    const ops::Conv& c = m.op();
    const Shape& x = m.type(0).shape;
    const size_t k = x.size() - 2;  // spatial dims
    if (k < 1 || k > 3) return no_match(cat("a conv with ", k, " spatial dims"));
    const int64_t d = c.dilations[0];
    if (std::all_of(c.dilations.begin(), c.dilations.end(), [](int64_t v) { return v < 2; })) return no_match("not dilated");
    if (std::any_of(c.dilations.begin(), c.dilations.end(), [d](int64_t v) { return v != d; }))
      return no_match(cat("dilated unequally along the spatial dims (dilations ", c.dilations, ")"));
    if (std::any_of(c.strides.begin(), c.strides.end(), [](int64_t v) { return v != 1; })) return no_match("strided");
    for (int64_t p : c.pads)
      if (p % d) return no_match(cat("pads ", c.pads, " are not divisible by the dilation ", d));
    const int64_t n = x[0], ch = x[1], f = m.out_type().shape[1];
    // Each spatial dim s padded up to sp = q * d: a view [n, ch, q1, d, q2, d, ...] of it.
    Shape sp(k), q(k), extra(k), view{n, ch}, padded{n, ch};
    for (size_t i = 0; i < k; ++i) {
      q[i] = (x[2 + i] + d - 1) / d;
      sp[i] = q[i] * d;
      extra[i] = sp[i] - x[2 + i];
      view.insert(view.end(), {q[i], d});
      padded.push_back(sp[i]);
    }
    ops::Conv dense = c;  // dilation 1, pads divided by d; each phase image keeps its size
    std::fill(dense.dilations.begin(), dense.dilations.end(), 1);
    for (auto& p : dense.pads) p /= d;
    const bool needs_pad = std::any_of(extra.begin(), extra.end(), [](int64_t v) { return v != 0; });
    TensorId in0 = needs_pad ? b.pad(m.input(0), detail::end_pads(extra)) : m.input(0);
    Shape full_out{n, f};
    full_out.insert(full_out.end(), sp.begin(), sp.end());
    TensorId y;
    if (Blocks) {
      // [n, ch, q1, d, ...] -> [n, ch, d, q1, ...]: residue-major along every spatial dim.
      std::vector<int64_t> perm{0, 1};
      for (size_t i = 0; i < k; ++i) perm.insert(perm.end(), {int64_t(3 + 2 * i), int64_t(2 + 2 * i)});
      TensorId z = b.add(dense, detail::conv_inputs(m, b.rt(in0, view, perm, padded)), "conv_dense_blocks");
      if (b.type(z).shape != full_out) return no_match("the dense conv changes the block image size");
      Shape zview{n, f};
      for (size_t i = 0; i < k; ++i) zview.insert(zview.end(), {d, q[i]});
      y = b.rt(z, zview, perm, full_out);  // the same swap is its own inverse
    } else {
      // [n, ch, q1, d, ...] -> [d, ..., n, ch, q1, ...] -> [d^k n, ch, q1, ...].
      std::vector<int64_t> perm;
      int64_t phases = 1;
      for (size_t i = 0; i < k; ++i) perm.push_back(int64_t(3 + 2 * i)), phases *= d;
      perm.insert(perm.end(), {0, 1});
      for (size_t i = 0; i < k; ++i) perm.push_back(int64_t(2 + 2 * i));
      Shape batched{phases * n, ch};
      batched.insert(batched.end(), q.begin(), q.end());
      TensorId z = b.add(dense, detail::conv_inputs(m, b.rt(in0, view, perm, batched)), "conv_dense_phases");
      Shape zs{phases * n, f};
      zs.insert(zs.end(), q.begin(), q.end());
      if (b.type(z).shape != zs) return no_match("the dense conv changes the phase image size");
      // [d, ..., n, f, q1, ...] -> [n, f, q1, d, q2, d, ...].
      Shape zview(k, d);
      zview.insert(zview.end(), {n, f});
      zview.insert(zview.end(), q.begin(), q.end());
      std::vector<int64_t> back{int64_t(k), int64_t(k + 1)};
      for (size_t i = 0; i < k; ++i) back.insert(back.end(), {int64_t(k + 2 + i), int64_t(i)});
      y = b.rt(z, zview, back, full_out);
    }
    const Shape& yo = m.out_type().shape;
    for (size_t i = 0; i < k; ++i)
      if (sp[i] != yo[2 + i]) y = b.slice(y, int64_t(2 + i), 0, yo[2 + i]);
    return b.replace(m.output(0), y);
  }
};

}  // namespace pet::mutate::rules
