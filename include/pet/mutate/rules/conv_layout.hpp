#pragma once
/// Rules that move a conv's work between the batch and the spatial dims (paper Fig. 2), for
/// 1-D, 2-D and 3-D convs.
#include <algorithm>
#include <numeric>

#include "pet/mutate/rule.hpp"

namespace pet::mutate::rules {

namespace detail {
/// Whether the conv keeps the size of spatial dim i (stride 1, pads summing to the dilated
/// kernel's extent minus one): then images placed side by side along i give side-by-side outputs.
inline bool keeps_size(const ops::Conv& c, const Shape& w, int i) {
  const size_t k = w.size() - 2;
  return c.strides[size_t(i)] == 1 && c.pads[size_t(i)] + c.pads[size_t(i) + k] == (w[size_t(2 + i)] - 1) * c.dilations[size_t(i)];
}
/// Pads (ONNX order: all begins, then all ends) that add `extra[i]` zeros at the end of
/// spatial dim i of a rank-(k+2) tensor.
inline std::vector<int64_t> end_pads(const Shape& extra) {
  const size_t r = extra.size() + 2;
  std::vector<int64_t> p(2 * r, 0);
  for (size_t i = 0; i < extra.size(); ++i) p[r + 2 + i] = extra[i];
  return p;
}
/// The conv's inputs with input 0 replaced.
template <class M>
std::vector<TensorId> conv_inputs(const M& m, TensorId x) {
  std::vector<TensorId> in{x, m.input(1)};
  if (m.num_inputs() == 3) in.push_back(m.input(2));
  return in;
}
}  // namespace detail

/// conv over a batch of N == one conv over the N images placed side by side along W (or H),
/// the last (second-to-last) spatial dim of a 1-D, 2-D or 3-D conv; the columns (rows) at the
/// seams read the neighbour image instead of padding.
template <int FromEnd>  // 1 = W, 2 = H
struct ConvBatchToSpatial final : Rule<ops::Conv> {
  std::string_view name() const override { return FromEnd == 1 ? "conv-batch-to-width" : "conv-batch-to-height"; }
  std::string_view description() const override {
    return FromEnd == 1 ? "images of a batch side by side along W, one conv, seams corrected"
                        : "images of a batch stacked along H, one conv, seams corrected";
  }
  Result apply(const Match<ops::Conv>& m, MutantBuilder& b) const override {
    const Shape &x = m.type(0).shape, &w = m.type(1).shape;
    const int r = int(x.size()), a = r - FromEnd;  // the axis the images are placed along
    if (a < 2) return no_match("a 1-D conv has no height");
    if (x[0] < 2) return no_match("batch is 1");
    if (!detail::keeps_size(m.op(), w, a - 2)) return no_match("the conv changes the spatial size along the concatenation axis");
    const int64_t n = x[0];
    const Shape& y = m.out_type().shape;
    // [n, c, ..., s_a, ...] -> [c, ..., n, s_a, ...] -> [1, c, ..., n * s_a, ...]
    std::vector<int64_t> perm;
    for (int i = 1; i < a; ++i) perm.push_back(i);
    perm.push_back(0);
    for (int i = a; i < r; ++i) perm.push_back(i);
    Shape wide = x;
    wide[0] = 1;
    wide[size_t(a)] *= n;
    TensorId yw = b.add(m.op(), detail::conv_inputs(m, b.rt(m.input(0), x, perm, wide)), FromEnd == 1 ? "conv_wide" : "conv_tall");
    // [f, ..., n, t_a, ...] -> [n, f, ..., t_a, ...]
    Shape view(y.begin() + 1, y.end());
    view.insert(view.begin() + (a - 1), n);
    std::vector<int64_t> back{a - 1};
    for (int i = 0; i < r; ++i)
      if (i != a - 1) back.push_back(i);
    return b.replace(m.output(0), b.rt(yw, view, back, y));
  }
};

/// The reverse: a conv over one image cut into `Parts` pieces along W (its last spatial dim),
/// run as a batch.
template <int Parts>
struct ConvWidthToBatch final : Rule<ops::Conv> {
  std::string_view name() const override { return "conv-width-to-batch"; }
  std::string_view description() const override { return "an image cut into pieces along W, convolved as a batch, cuts corrected"; }
  Result apply(const Match<ops::Conv>& m, MutantBuilder& b) const override {
    const Shape &x = m.type(0).shape, &w = m.type(1).shape;
    const int k = int(x.size()) - 2;
    if (x[0] != 1) return no_match("batch is not 1");
    if (x.back() % Parts) return no_match(cat("width ", x.back(), " is not divisible by ", Parts));
    if (!detail::keeps_size(m.op(), w, k - 1)) return no_match("the conv changes the width");
    const int64_t piece = x.back() / Parts;
    const Shape& y = m.out_type().shape;
    // [1, c, ..., Parts * piece] -> [c, ..., Parts, piece] -> [Parts, c, ..., piece]
    Shape view(x.begin() + 1, x.end() - 1), batch = x;
    view.insert(view.end(), {Parts, piece});
    batch[0] = Parts;
    batch.back() = piece;
    std::vector<int64_t> perm{k};
    for (int i = 0; i < k; ++i) perm.push_back(i);
    perm.push_back(k + 1);
    TensorId yb = b.add(m.op(), detail::conv_inputs(m, b.rt(m.input(0), view, perm, batch)), "conv_pieces");
    // [Parts, f, ..., piece] -> [f, ..., Parts, piece]
    Shape yview = y;
    yview[0] = Parts;
    yview.back() = piece;
    std::vector<int64_t> back;
    for (int i = 1; i <= k; ++i) back.push_back(i);
    back.insert(back.end(), {0, k + 1});
    return b.replace(m.output(0), b.rt(yb, yview, back, y));
  }
};

/// Paper section 4: a conv over a 1xCxHxW image (or 1xCxDxHxW volume) run as a batch of TxT
/// tiles of H and W (e.g. 1x48x38x38 as 16x48x10x10, with the image padded with zeros up to a
/// multiple of T).
template <int Tiles>
struct ConvSpatialToBatch final : Rule<ops::Conv> {
  std::string_view name() const override { return Tiles == 4 ? "conv-spatial-to-batch-4x4" : "conv-spatial-to-batch-2x2"; }
  std::string_view description() const override { return "an image cut into tiles convolved as a batch, tile seams corrected"; }
  Result apply(const Match<ops::Conv>& m, MutantBuilder& b) const override {
    const Shape &x = m.type(0).shape, &w = m.type(1).shape;
    const int r = int(x.size()), k = r - 2, lead = k - 2;  // lead: spatial dims before H (the depth)
    if (k < 2) return no_match("a 1-D conv has no height");
    if (x[0] != 1) return no_match("batch is not 1");
    if (!detail::keeps_size(m.op(), w, k - 2) || !detail::keeps_size(m.op(), w, k - 1)) return no_match("the conv changes the spatial size");
    const int64_t h = x[size_t(r - 2)], wd = x[size_t(r - 1)];
    if (h < 2 * Tiles || wd < 2 * Tiles) return no_match(cat("image ", h, "x", wd, " is too small for ", Tiles, "x", Tiles, " tiles"));
    const int64_t c = x[1], th = (h + Tiles - 1) / Tiles, tw = (wd + Tiles - 1) / Tiles, hp = th * Tiles, wp = tw * Tiles;
    Shape extra(size_t(k), 0);
    extra[size_t(k - 2)] = hp - h;
    extra[size_t(k - 1)] = wp - wd;
    TensorId in0 = hp != h || wp != wd ? b.pad(m.input(0), detail::end_pads(extra)) : m.input(0);
    // [1, c, lead.., T, th, T, tw] -> [T, T, c, lead.., th, tw] -> [T*T, c, lead.., th, tw]
    Shape view{c}, tiles{Tiles * Tiles, c};
    for (int i = 0; i < lead; ++i) view.push_back(x[size_t(2 + i)]), tiles.push_back(x[size_t(2 + i)]);
    view.insert(view.end(), {Tiles, th, Tiles, tw});
    tiles.insert(tiles.end(), {th, tw});
    std::vector<int64_t> perm{lead + 1, lead + 3, 0};
    for (int i = 0; i < lead; ++i) perm.push_back(1 + i);
    perm.insert(perm.end(), {lead + 2, lead + 4});
    TensorId yt = b.add(m.op(), detail::conv_inputs(m, b.rt(in0, view, perm, tiles)), "conv_tiles");
    // [T, T, f, lead'.., th, tw] -> [f, lead'.., T, th, T, tw] -> [1, f, lead'.., hp, wp]
    const Shape& yo = m.out_type().shape;
    Shape yview{Tiles, Tiles, yo[1]}, full{1, yo[1]};
    for (int i = 0; i < lead; ++i) yview.push_back(yo[size_t(2 + i)]), full.push_back(yo[size_t(2 + i)]);
    yview.insert(yview.end(), {th, tw});
    full.insert(full.end(), {hp, wp});
    std::vector<int64_t> back{2};
    for (int i = 0; i < lead; ++i) back.push_back(3 + i);
    back.insert(back.end(), {0, 3 + lead, 1, 4 + lead});
    TensorId y = b.rt(yt, yview, back, full);
    if (hp != h) y = b.slice(y, r - 2, 0, h);
    if (wp != wd) y = b.slice(y, r - 1, 0, wd);
    return b.replace(m.output(0), y);
  }
};

/// An odd-sized input padded with one zero at the end of each odd spatial dim, convolved, the
/// output sliced back (exactly equivalent; it enables rules that need even sizes).
struct ConvPadOdd final : Rule<ops::Conv> {
  std::string_view name() const override { return "conv-pad-odd"; }
  std::string_view description() const override { return "odd-sized input padded to even size, output sliced back"; }
  Result apply(const Match<ops::Conv>& m, MutantBuilder& b) const override {
    const Shape& x = m.type(0).shape;
    Shape odd(x.size() - 2);
    for (size_t i = 0; i < odd.size(); ++i) odd[i] = x[2 + i] % 2;
    if (std::all_of(odd.begin(), odd.end(), [](int64_t v) { return v == 0; }))
      return no_match(x.size() == 4 ? "height and width are even" : "the spatial sizes are even");
    TensorId y = b.add(m.op(), detail::conv_inputs(m, b.pad(m.input(0), detail::end_pads(odd))), "conv_even");
    const Shape& yo = m.out_type().shape;
    for (size_t i = 2; i < yo.size(); ++i)
      if (b.type(y).shape[i] != yo[i]) y = b.slice(y, int64_t(i), 0, yo[i]);
    return b.replace(m.output(0), y);
  }
};

/// A non-square kernel turned by transposing H and W (the last two spatial dims of a 2-D or
/// 3-D conv) of the input, the kernel and the output.
struct ConvTransposeSpatial final : Rule<ops::Conv> {
  std::string_view name() const override { return "conv-transpose-spatial"; }
  std::string_view description() const override { return "a KxL kernel as LxK on the transposed image"; }
  Result apply(const Match<ops::Conv>& m, MutantBuilder& b) const override {
    const Shape& w = m.type(1).shape;
    const size_t r = w.size(), k = r - 2, h = k - 2, v = k - 1;  // h, v: spatial indices of H and W
    if (k < 2) return no_match("a 1-D conv has no height");
    if (w[r - 2] == w[r - 1]) return no_match("the kernel is square");
    const ops::Conv& c = m.op();
    ops::Conv t = c;
    std::swap(t.kernel_shape[h], t.kernel_shape[v]);
    std::swap(t.strides[h], t.strides[v]);
    std::swap(t.dilations[h], t.dilations[v]);
    std::swap(t.pads[h], t.pads[v]);
    std::swap(t.pads[k + h], t.pads[k + v]);
    std::vector<int64_t> perm(r);
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[r - 2], perm[r - 1]);
    TensorId xt = b.add(ops::Transpose{.perm = perm}, {m.input(0)});
    TensorId wt = b.add(ops::Transpose{.perm = perm}, {m.input(1)});
    std::vector<TensorId> in{xt, wt};
    if (m.num_inputs() == 3) in.push_back(m.input(2));
    TensorId y = b.add(t, in, "conv_turned");
    return b.replace(m.output(0), b.add(ops::Transpose{.perm = perm}, {y}));
  }
};

}  // namespace pet::mutate::rules
