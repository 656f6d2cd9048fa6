#pragma once
/// Rules that move a 2-D conv's work between the batch and the spatial dims (paper Fig. 2).
#include "pet/mutate/rule.hpp"

namespace pet::mutate::rules {

namespace detail {
inline bool is_conv2d(const TensorType& x) { return x.shape.size() == 4; }
/// Whether the conv keeps the size of spatial dim i (stride 1, pads summing to the dilated
/// kernel's extent minus one): then images placed side by side along i give side-by-side outputs.
inline bool keeps_size(const ops::Conv& c, const Shape& w, int i) {
  return c.strides[size_t(i)] == 1 && c.pads[size_t(i)] + c.pads[size_t(i) + 2] == (w[size_t(2 + i)] - 1) * c.dilations[size_t(i)];
}
}  // namespace detail

/// conv over a batch of N == one conv over the N images placed side by side along W (or H);
/// the columns (rows) at the seams read the neighbour image instead of padding.
template <int Axis>  // 3 = W, 2 = H
struct ConvBatchToSpatial final : Rule<ops::Conv> {
  std::string_view name() const override { return Axis == 3 ? "conv-batch-to-width" : "conv-batch-to-height"; }
  std::string_view description() const override {
    return Axis == 3 ? "images of a batch side by side along W, one conv, seams corrected"
                     : "images of a batch stacked along H, one conv, seams corrected";
  }
  Result apply(const Match<ops::Conv>& m, MutantBuilder& b) const override {
    const Shape &x = m.type(0).shape, &w = m.type(1).shape;
    if (!detail::is_conv2d(m.type(0))) return no_match("not a 2-D conv");
    if (x[0] < 2) return no_match("batch is 1");
    if (!detail::keeps_size(m.op(), w, Axis - 2)) return no_match("the conv changes the spatial size along the concatenation axis");
    const int64_t n = x[0], c = x[1], h = x[2], wd = x[3];
    const Shape& y = m.out_type().shape;
    TensorId wide = Axis == 3 ? b.rt(m.input(0), x, {1, 2, 0, 3}, {1, c, h, n * wd}) : b.rt(m.input(0), x, {1, 0, 2, 3}, {1, c, n * h, wd});
    std::vector<TensorId> in{wide, m.input(1)};
    if (m.num_inputs() == 3) in.push_back(m.input(2));
    TensorId yw = b.add(m.op(), in, "conv_" + std::string(Axis == 3 ? "wide" : "tall"));
    TensorId back = Axis == 3 ? b.rt(yw, {y[1], y[2], n, y[3]}, {2, 0, 1, 3}, y) : b.rt(yw, {y[1], n, y[2], y[3]}, {1, 0, 2, 3}, y);
    return b.replace(m.output(0), back);
  }
};

/// The reverse: a conv over one image cut into `Parts` pieces along W, run as a batch.
template <int Parts>
struct ConvWidthToBatch final : Rule<ops::Conv> {
  std::string_view name() const override { return "conv-width-to-batch"; }
  std::string_view description() const override { return "an image cut into pieces along W, convolved as a batch, cuts corrected"; }
  Result apply(const Match<ops::Conv>& m, MutantBuilder& b) const override {
    const Shape &x = m.type(0).shape, &w = m.type(1).shape;
    if (!detail::is_conv2d(m.type(0))) return no_match("not a 2-D conv");
    if (x[0] != 1) return no_match("batch is not 1");
    if (x[3] % Parts) return no_match(cat("width ", x[3], " is not divisible by ", Parts));
    if (!detail::keeps_size(m.op(), w, 1)) return no_match("the conv changes the width");
    const int64_t c = x[1], h = x[2], piece = x[3] / Parts;
    const Shape& y = m.out_type().shape;
    TensorId batch = b.rt(m.input(0), {c, h, Parts, piece}, {2, 0, 1, 3}, {Parts, c, h, piece});
    std::vector<TensorId> in{batch, m.input(1)};
    if (m.num_inputs() == 3) in.push_back(m.input(2));
    TensorId yb = b.add(m.op(), in, "conv_pieces");
    return b.replace(m.output(0), b.rt(yb, {Parts, y[1], y[2], piece}, {1, 2, 0, 3}, y));
  }
};

/// Paper section 4: a conv over a 1xCxHxW image run as a batch of TxT tiles (e.g.
/// 1x48x38x38 as 16x48x10x10, with the image padded with zeros up to a multiple of T).
template <int Tiles>
struct ConvSpatialToBatch final : Rule<ops::Conv> {
  std::string_view name() const override { return Tiles == 4 ? "conv-spatial-to-batch-4x4" : "conv-spatial-to-batch-2x2"; }
  std::string_view description() const override { return "an image cut into tiles convolved as a batch, tile seams corrected"; }
  Result apply(const Match<ops::Conv>& m, MutantBuilder& b) const override {
    const Shape &x = m.type(0).shape, &w = m.type(1).shape;
    if (!detail::is_conv2d(m.type(0))) return no_match("not a 2-D conv");
    if (x[0] != 1) return no_match("batch is not 1");
    if (!detail::keeps_size(m.op(), w, 0) || !detail::keeps_size(m.op(), w, 1)) return no_match("the conv changes the spatial size");
    if (x[2] < 2 * Tiles || x[3] < 2 * Tiles) return no_match(cat("image ", x[2], "x", x[3], " is too small for ", Tiles, "x", Tiles, " tiles"));
    const int64_t c = x[1], th = (x[2] + Tiles - 1) / Tiles, tw = (x[3] + Tiles - 1) / Tiles, hp = th * Tiles, wp = tw * Tiles;
    TensorId in0 = m.input(0);
    if (hp != x[2] || wp != x[3]) in0 = b.pad(in0, {0, 0, 0, 0, 0, 0, hp - x[2], wp - x[3]});
    TensorId tiles = b.rt(in0, {c, Tiles, th, Tiles, tw}, {1, 3, 0, 2, 4}, {Tiles * Tiles, c, th, tw});
    std::vector<TensorId> in{tiles, m.input(1)};
    if (m.num_inputs() == 3) in.push_back(m.input(2));
    TensorId yt = b.add(m.op(), in, "conv_tiles");
    const int64_t f = m.out_type().shape[1];
    TensorId y = b.rt(yt, {Tiles, Tiles, f, th, tw}, {2, 0, 3, 1, 4}, {1, f, hp, wp});
    if (hp != x[2]) y = b.slice(y, 2, 0, x[2]);
    if (wp != x[3]) y = b.slice(y, 3, 0, x[3]);
    return b.replace(m.output(0), y);
  }
};

/// An odd-sized input padded with one zero row/column at the end, convolved, the output
/// sliced back (exactly equivalent; it enables rules that need even sizes).
struct ConvPadOdd final : Rule<ops::Conv> {
  std::string_view name() const override { return "conv-pad-odd"; }
  std::string_view description() const override { return "odd-sized input padded to even size, output sliced back"; }
  Result apply(const Match<ops::Conv>& m, MutantBuilder& b) const override {
    const Shape& x = m.type(0).shape;
    if (!detail::is_conv2d(m.type(0))) return no_match("not a 2-D conv");
    const int64_t ph = x[2] % 2, pw = x[3] % 2;
    if (!ph && !pw) return no_match("height and width are even");
    std::vector<TensorId> in{b.pad(m.input(0), {0, 0, 0, 0, 0, 0, ph, pw}), m.input(1)};
    if (m.num_inputs() == 3) in.push_back(m.input(2));
    TensorId y = b.add(m.op(), in, "conv_even");
    const Shape& yo = m.out_type().shape;
    if (b.type(y).shape[2] != yo[2]) y = b.slice(y, 2, 0, yo[2]);
    if (b.type(y).shape[3] != yo[3]) y = b.slice(y, 3, 0, yo[3]);
    return b.replace(m.output(0), y);
  }
};

/// A non-square kernel turned by transposing H and W of the input, the kernel and the output.
struct ConvTransposeSpatial final : Rule<ops::Conv> {
  std::string_view name() const override { return "conv-transpose-spatial"; }
  std::string_view description() const override { return "a KxL kernel as LxK on the transposed image"; }
  Result apply(const Match<ops::Conv>& m, MutantBuilder& b) const override {
    const Shape& w = m.type(1).shape;
    if (!detail::is_conv2d(m.type(0))) return no_match("not a 2-D conv");
    if (w[2] == w[3]) return no_match("the kernel is square");
    const ops::Conv& c = m.op();
    ops::Conv t = c;
    t.kernel_shape = {w[3], w[2]};
    t.strides = {c.strides[1], c.strides[0]};
    t.dilations = {c.dilations[1], c.dilations[0]};
    t.pads = {c.pads[1], c.pads[0], c.pads[3], c.pads[2]};
    TensorId xt = b.add(ops::Transpose{.perm = {0, 1, 3, 2}}, {m.input(0)});
    TensorId wt = b.add(ops::Transpose{.perm = {0, 1, 3, 2}}, {m.input(1)});
    std::vector<TensorId> in{xt, wt};
    if (m.num_inputs() == 3) in.push_back(m.input(2));
    TensorId y = b.add(t, in, "conv_turned");
    return b.replace(m.output(0), b.add(ops::Transpose{.perm = {0, 1, 3, 2}}, {y}));
  }
};

}  // namespace pet::mutate::rules
