#pragma once
/// Dilated conv -> dense conv (paper section 2): output position o reads o - p + r*d, so
/// rows (columns) of one residue mod d only read rows of one residue mod d: regrouping the
/// image by residue gives d^2 phase images on which a dense conv does the work.
#include "pet/mutate/rules/conv_layout.hpp"

namespace pet::mutate::rules {

/// Phase images in the batch: exactly equivalent (needs stride 1, equal dilation d on H and
/// W, pads divisible by d; the image is zero-padded up to a multiple of d).
/// `Blocks`: phase images as d x d blocks of one image instead, one dense conv over it:
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
    if (!detail::is_conv2d(m.type(0))) return no_match("not a 2-D conv");
    const int64_t d = c.dilations[0];
    if (c.dilations[0] < 2 && c.dilations[1] < 2) return no_match("not dilated");
    if (c.dilations[1] != d) return no_match(cat("dilated unequally along H and W (dilations ", c.dilations, ")"));
    if (c.strides[0] != 1 || c.strides[1] != 1) return no_match("strided");
    for (int64_t p : c.pads)
      if (p % d) return no_match(cat("pads ", c.pads, " are not divisible by the dilation ", d));
    const int64_t n = x[0], ch = x[1], hp = (x[2] + d - 1) / d * d, wp = (x[3] + d - 1) / d * d, h2 = hp / d, w2 = wp / d;
    const Shape& yo = m.out_type().shape;
    const int64_t f = yo[1];
    // The dense conv: dilation 1, pads divided by d; output size per phase must be h2 x w2.
    ops::Conv dense = c;
    dense.dilations = {1, 1};
    for (auto& p : dense.pads) p /= d;
    TensorId in0 = m.input(0);
    if (hp != x[2] || wp != x[3]) in0 = b.pad(in0, {0, 0, 0, 0, 0, 0, hp - x[2], wp - x[3]});
    std::vector<TensorId> in{TensorId(-1), m.input(1)};
    if (m.num_inputs() == 3) in.push_back(m.input(2));
    TensorId y;
    if (Blocks) {
      in[0] = b.rt(in0, {n, ch, h2, d, w2, d}, {0, 1, 3, 2, 5, 4}, {n, ch, hp, wp});
      TensorId z = b.add(dense, in, "conv_dense_blocks");
      const Shape& zs = b.type(z).shape;
      if (zs[2] != hp || zs[3] != wp) return no_match("the dense conv changes the block image size");
      y = b.rt(z, {n, f, d, h2, d, w2}, {0, 1, 3, 2, 5, 4}, {n, f, hp, wp});
    } else {
      in[0] = b.rt(in0, {n, ch, h2, d, w2, d}, {3, 5, 0, 1, 2, 4}, {d * d * n, ch, h2, w2});
      TensorId z = b.add(dense, in, "conv_dense_phases");
      const Shape& zs = b.type(z).shape;
      if (zs[2] != h2 || zs[3] != w2) return no_match("the dense conv changes the phase image size");
      y = b.rt(z, {d, d, n, f, h2, w2}, {2, 3, 4, 0, 5, 1}, {n, f, hp, wp});
    }
    if (hp != yo[2]) y = b.slice(y, 2, 0, yo[2]);
    if (wp != yo[3]) y = b.slice(y, 3, 0, yo[3]);
    return b.replace(m.output(0), y);
  }
};

}  // namespace pet::mutate::rules
