// ONNX ops that move or sample values, in pet ops: CenterCropPad (opset 18) as a Slice and a
// Pad, Col2Im (opset 18) as a grouped ConvTranspose with one-hot weights, MaxUnpool (opset 9)
// as a ScatterElements into zeros, DeformConv (opset 19) as a GridSample of every kernel tap
// and a MatMul. Their shape inputs must be constants (static shapes).
#include <bit>

#include "expand.hpp"

namespace pet::onnx::detail {

namespace {

using Data = std::function<TensorId(int)>;

/// The most weight elements Col2Im's ConvTranspose may have (256 MB of floats).
constexpr int64_t kMaxCol2ImWeights = int64_t(1) << 26;

/// The product of `dims`, or Unsupported where it passes `limit` (no overflow on the way).
int64_t bounded_product(const std::vector<int64_t>& dims, int64_t limit, std::string_view what) {
  int64_t p = 1;
  for (int64_t d : dims) {
    if (d != 0 && p > limit / d) throw Unsupported(cat(what, " would have over ", limit, " elements"));
    p *= d;
  }
  return p;
}

/// Normalized, distinct axes of a rank-r tensor (all of them where the attribute is absent).
std::vector<int64_t> node_axes(const NodeCtx& c, int64_t r) {
  if (!c.attr("axes")) {
    std::vector<int64_t> all(static_cast<size_t>(r));
    for (int64_t a = 0; a < r; ++a) all[size_t(a)] = a;
    return all;
  }
  std::vector<int64_t> axes = c.ints("axes");
  for (auto& a : axes) {
    if (a < -r || a >= r) throw InvalidInput(cat("axis ", a, " is out of range for rank ", r));
    if (a < 0) a += r;
  }
  std::vector<int64_t> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) throw InvalidInput(cat("axes ", c.ints("axes"), " repeat an axis"));
  return axes;
}

/// CenterCropPad: per axis, a centred window of the wanted length where the input is longer
/// (a Slice from (n - m) / 2, rounded down), the input centred in zeros where it is shorter (a
/// Pad of (m - n) / 2 before, rounded down, the rest after), as ONNX's reference does.
std::vector<TensorId> center_crop_pad(const NodeCtx& c, const std::string& name, Graph& g, const Data& data) {
  if (!c.present(0)) throw InvalidInput("required input 0 (input_data) is missing");
  const auto t = c.type(0);
  if (!t) throw InvalidInput("the input's type is unknown");
  const Shape& xs = t->shape;
  const int64_t r = int64_t(xs.size());
  const std::vector<int64_t> axes = node_axes(c, r);
  const std::vector<int64_t> want = c.const_ints(1, "shape");
  pet::detail::expect_bounded(want, "shape");
  if (want.size() != axes.size())
    throw InvalidInput(cat("shape ", want, " must have one length per axis (", axes.size(), c.attr("axes") ? " axes given" : ", the input's rank", ")"));
  ops::Slice crop;
  std::vector<int64_t> pads(static_cast<size_t>(2 * r), 0);
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t a = axes[k], n = xs[size_t(a)], m = want[k];
    if (m < 0) throw InvalidInput(cat("shape ", want, " has a negative length"));
    if (m < n) {
      crop.axes.push_back(a);
      crop.starts.push_back((n - m) / 2);
      crop.ends.push_back((n - m) / 2 + m);
    } else if (m > n) {
      pads[size_t(a)] = (m - n) / 2;
      pads[size_t(a + r)] = m - n - (m - n) / 2;
    }
  }
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  if (out.empty() || c.node.output(0).empty()) return out;
  const bool pad = std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; });
  TensorId x = data(0);
  if (!crop.axes.empty()) x = add_part(g, name, "crop", std::move(crop), {x}, pad ? "" : c.node.output(0));
  if (pad) x = add_part(g, name, "pad", ops::Pad{.pads = std::move(pads)}, {x}, c.node.output(0));
  if (x == data(0)) x = add_part(g, name, "identity", ops::Identity{}, {x}, c.node.output(0));
  out[0] = x;
  return out;
}

/// Col2Im: input [N, C * prod(block), L], L the number of block positions, each column's
/// block values added into the image [N, C, image...] at its position (strides, dilations,
/// pads as a convolution's). That is a ConvTranspose of the input viewed as [N, C * K, L1,
/// ...] (K = prod(block), Li the block positions along dim i) in C groups, with weights
/// [C * K, 1, block...] that are 1 at each row's own block offset and 0 elsewhere;
/// output_padding makes up an image length a stride does not reach.
std::vector<TensorId> col2im(const NodeCtx& c, const std::string& name, Graph& g, const Data& data) {
  if (!c.present(0)) throw InvalidInput("required input 0 (input) is missing");
  const auto t = c.type(0);
  if (!t || t->dtype != DType::Float32) throw Unsupported("input must be float32");
  const std::vector<int64_t> image = c.const_ints(1, "image_shape"), block = c.const_ints(2, "block_shape");
  const size_t k = image.size();
  if (k < 1 || block.size() != k)
    throw InvalidInput(cat("image_shape ", image, " and block_shape ", block, " must have the same length, 1 or more"));
  if (k > 3) throw Unsupported(cat("image_shape ", image, " has ", k, " spatial dims; pet's ConvTranspose takes 1 to 3"));
  std::vector<int64_t> strides = c.ints("strides"), dilations = c.ints("dilations"), pads = c.ints("pads");
  ops::detail::check_window_attrs(k, strides, dilations, pads);  // defaults, counts, bounds, signs
  pet::detail::expect_bounded(image, "image_shape");
  pet::detail::expect_bounded(block, "block_shape");
  const Shape& xs = t->shape;
  if (xs.size() != 3) throw InvalidInput(cat("input must be [N, C * prod(block_shape), L], got ", xs));
  std::vector<int64_t> positions(k), extra(k);
  for (size_t i = 0; i < k; ++i) {
    if (image[i] < 1 || block[i] < 1) throw InvalidInput(cat("image_shape ", image, " and block_shape ", block, " must be positive"));
    const int64_t span = dilations[i] * (block[i] - 1) + 1, room = image[i] + pads[i] + pads[i + k] - span;
    if (room < 0) throw InvalidInput(cat("block_shape ", block, " with dilations ", dilations, " does not fit image_shape ", image, " with pads ", pads));
    positions[i] = room / strides[i] + 1;
    extra[i] = room % strides[i];
  }
  const int64_t K = bounded_product(block, int64_t(1) << 31, cat("block_shape ", block)),
                L = bounded_product(positions, int64_t(1) << 31, cat("the block positions ", positions));
  if (xs[1] % K != 0) throw InvalidInput(cat("input's dim 1 (", xs[1], ") must be a multiple of prod(block_shape) = ", K));
  if (xs[2] != L) throw InvalidInput(cat("input's dim 2 (", xs[2], ") must be the number of block positions, ", L, " (", positions, ")"));
  const int64_t C = xs[1] / K;
  bounded_product({C, K, K}, kMaxCol2ImWeights, "Col2Im's one-hot weights");
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  if (out.empty() || c.node.output(0).empty()) return out;
  Shape ws{C * K, 1};
  ws.insert(ws.end(), block.begin(), block.end());
  Tensor<float> w(ws);
  for (int64_t row = 0; row < C * K; ++row) w[row * K + row % K] = 1.f;  // each row's weights are [block...] in row-major order
  Shape grid{xs[0], xs[1]};
  grid.insert(grid.end(), positions.begin(), positions.end());
  const TensorId cols = add_part(g, name, "blocks", ops::Reshape{.shape = grid}, {data(0)});
  const TensorId wid = g.add_constant(g.unique_name(cat(name, "/one_hot")), std::move(w));
  out[0] = add_part(g, name, "scatter_add",
                    ops::ConvTranspose{.strides = strides, .pads = pads, .dilations = dilations, .output_padding = extra, .group = C},
                    {cols, wid}, c.node.output(0));
  return out;
}

/// MaxUnpool: X's values written into zeros at I's positions, which count row-major over the
/// whole output (as MaxPool's Indices do); the output's shape is output_shape where given (its
/// positions counted in that shape, as ONNX Runtime does), else (in - 1) * stride + kernel -
/// pads per spatial dim. A ScatterElements into an Expand of 0 over the flattened output.
std::vector<TensorId> max_unpool(const NodeCtx& c, const std::string& name, Graph& g, const Data& data) {
  if (!c.present(0) || !c.present(1)) throw InvalidInput("inputs 0 (X) and 1 (I) are required");
  const auto t = c.type(0), it = c.type(1);
  if (!t || t->dtype != DType::Float32) throw Unsupported("X must be float32");
  if (!it || it->dtype != DType::Int64) throw InvalidInput("I must be int64");
  const Shape& xs = t->shape;
  if (xs.size() < 3) throw InvalidInput(cat("X must be N x C x D1 x ..., got ", xs));
  if (it->shape != xs) throw InvalidInput(cat("I's shape ", it->shape, " must be X's, ", xs));
  const size_t k = xs.size() - 2;
  if (!c.attr("kernel_shape")) throw InvalidInput("attribute 'kernel_shape' is required");
  const std::vector<int64_t> ks = c.ints("kernel_shape");
  std::vector<int64_t> strides = c.ints("strides"), dilations, pads = c.ints("pads");
  ops::detail::check_window_attrs(k, strides, dilations, pads);  // defaults, counts, bounds, signs
  if (ks.size() != k) throw InvalidInput(cat("kernel_shape ", ks, " needs ", k, " values (X is ", xs, ")"));
  pet::detail::expect_bounded(ks, "kernel_shape");
  Shape os{xs[0], xs[1]};
  for (size_t i = 0; i < k; ++i) {
    if (ks[i] < 1) throw InvalidInput(cat("kernel_shape ", ks, " must be positive"));
    os.push_back((xs[2 + i] - 1) * strides[i] + ks[i] - pads[i] - pads[i + k]);
    if (os.back() < 0) throw InvalidInput(cat("pads ", pads, " leave a negative output extent"));
  }
  if (c.present(2)) {
    const std::vector<int64_t> given = c.const_ints(2, "output_shape");
    if (given.size() != xs.size()) throw InvalidInput(cat("output_shape ", given, " must have X's rank, ", xs.size()));
    pet::detail::expect_bounded(given, "output_shape");
    for (int64_t d : given)
      if (d < 0) throw InvalidInput(cat("output_shape ", given, " has a negative extent"));
    os = given;
  }
  bounded_product(os, int64_t(1) << 31, cat("an output of ", os));
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  if (out.empty() || c.node.output(0).empty()) return out;
  const int64_t total = numel(os), n = numel(xs);
  const TensorId zero = g.add_constant(g.unique_name(cat(name, "/zero")), Tensor<float>(Shape{1}, std::vector<float>{0.f}));
  const TensorId zeros = add_part(g, name, "zeros", ops::Expand{.shape = {total}}, {zero});
  const TensorId at = add_part(g, name, "flat_indices", ops::Reshape{.shape = {n}}, {data(1)});
  const TensorId vals = add_part(g, name, "flat_values", ops::Reshape{.shape = {n}}, {data(0)});
  const TensorId placed = add_part(g, name, "unpool", ops::ScatterElements{.axis = 0}, {zeros, at, vals});
  out[0] = add_part(g, name, "shape", ops::Reshape{.shape = os}, {placed}, c.node.output(0));
  return out;
}

/// DeformConv (2-D): each kernel tap k of output (i, j) reads X bilinearly at (i s_h - p_h +
/// k_h d_h + dy, j s_w - p_w + k_w d_w + dx), zero outside X, (dy, dx) the offsets of its
/// offset group (offset: [N, offset_group * K * 2, oh, ow], y before x), times the mask where
/// given; then a grouped convolution's sum with W. In pet ops: the positions (offsets plus
/// constant base positions) normalised and swapped to x, y for a GridSample (zeros padding,
/// align_corners 0: the coordinate (2 p + 1) / n - 1) of X, padded to power-of-two extents n,
/// viewed as [N offset_group, C / offset_group, n_h, n_w] at K oh x ow points, the mask multiplied in, the samples viewed as
/// columns [N, group, C / group K, oh ow] and a MatMul with W viewed as [group, M / group, C /
/// group K], then the bias.
std::vector<TensorId> deform_conv(const NodeCtx& c, const std::string& name, Graph& g, const Data& data) {
  for (int i = 0; i < 3; ++i)
    if (!c.present(i)) throw InvalidInput("inputs 0 (X), 1 (W) and 2 (offset) are required");
  const auto xt = c.type(0), wt = c.type(1), ot = c.type(2);
  for (const auto& [t, what] : {std::pair{xt, "X"}, std::pair{wt, "W"}, std::pair{ot, "offset"}})
    if (!t || t->dtype != DType::Float32) throw Unsupported(cat(what, " must be float32"));
  const Shape &xs = xt->shape, &ws = wt->shape, &os = ot->shape;
  if (xs.size() != 4) throw Unsupported(cat("X ", xs, ": pet imports the 2-D DeformConv (X of rank 4), as ONNX's reference and ONNX Runtime compute it"));
  if (ws.size() != 4) throw InvalidInput(cat("W ", ws, " must have rank 4, as X"));
  const int64_t N = xs[0], C = xs[1], H = xs[2], Wd = xs[3], M = ws[0];
  const int64_t group = c.i("group", 1), og = c.i("offset_group", 1);
  const std::vector<int64_t> ks = c.ints("kernel_shape", {ws[2], ws[3]});
  std::vector<int64_t> strides = c.ints("strides"), dil = c.ints("dilations"), pads = c.ints("pads");
  ops::detail::check_window_attrs(2, strides, dil, pads);  // defaults, counts, bounds, signs
  if (ks != std::vector<int64_t>{ws[2], ws[3]}) throw InvalidInput(cat("kernel_shape ", ks, " does not match W ", ws));
  pet::detail::expect_bounded({group, og, ws[1], ws[2], ws[3]}, "group, offset_group and W's extents");
  if (group < 1 || C % group || M % group || ws[1] * group != C)
    throw InvalidInput(cat("group ", group, " must divide X's ", C, " channels and W's ", M, " filters, each of ", C, " / group channels (W is ", ws, ")"));
  if (og < 1 || C % og) throw InvalidInput(cat("offset_group ", og, " must divide X's ", C, " channels"));
  const int64_t K = ks[0] * ks[1];
  const int64_t oh = ops::detail::window_out(H, ks[0], strides[0], dil[0], pads[0], pads[2], false),
                ow = ops::detail::window_out(Wd, ks[1], strides[1], dil[1], pads[1], pads[3], false);
  if (oh < 1 || ow < 1) throw InvalidInput(cat("the kernel ", ks, " with dilations ", dil, " does not fit X ", xs, " with pads ", pads));
  bounded_product({og, K, 2, oh, ow}, int64_t(1) << 31, "DeformConv's sampling positions");
  const Shape want_off{N, og * K * 2, oh, ow}, want_mask{N, og * K, oh, ow};
  if (os != want_off) throw InvalidInput(cat("offset ", os, " must be [N, offset_group * kH * kW * 2, oH, oW] = ", want_off));
  if (c.present(3)) {
    const auto bt = c.type(3);
    if (!bt || bt->dtype != DType::Float32 || bt->shape != Shape{M}) throw InvalidInput(cat("B must be float32 of shape [", M, "]"));
  }
  if (c.present(4)) {
    const auto mt = c.type(4);
    if (!mt || mt->dtype != DType::Float32 || mt->shape != want_mask) throw InvalidInput(cat("mask must be float32 of shape ", want_mask));
  }
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  if (out.empty() || c.node.output(0).empty()) return out;
  // the taps' positions without offsets, [K, 2 (y, x), oh, ow]
  Tensor<float> base(Shape{K, 2, oh, ow});
  for (int64_t k = 0; k < K; ++k)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        base[((k * 2 + 0) * oh + i) * ow + j] = float(i * strides[0] - pads[0] + (k / ks[1]) * dil[0]);
        base[((k * 2 + 1) * oh + i) * ow + j] = float(j * strides[1] - pads[1] + (k % ks[1]) * dil[1]);
      }
  auto constant = [&](const std::string& what, Tensor<float> t) { return g.add_constant(g.unique_name(cat(name, "/", what)), std::move(t)); };
  const TensorId offs = add_part(g, name, "offsets", ops::Reshape{.shape = {N * og, K, 2, oh, ow}}, {data(2)});
  const TensorId pos = add_part(g, name, "positions", ops::Add{}, {offs, constant("base", std::move(base))});
  // X padded with zeros to power-of-two extents (zeros are what a tap outside X reads): the
  // normalisation and GridSample's (((g + 1) d - 1) / 2) are then exact at whole and half
  // pixels, so a weight that is 0 there stays 0 (a tap just outside X adds nothing)
  const int64_t H2 = int64_t(std::bit_ceil(uint64_t(H))), W2 = int64_t(std::bit_ceil(uint64_t(Wd)));
  const TensorId scaled = add_part(g, name, "scaled", ops::Mul{}, {pos, constant("scale", Tensor<float>(Shape{2, 1, 1}, {2.f / float(H2), 2.f / float(W2)}))});
  const TensorId normed = add_part(g, name, "normalized", ops::Add{},
                                   {scaled, constant("shift", Tensor<float>(Shape{2, 1, 1}, {1.f / float(H2) - 1.f, 1.f / float(W2) - 1.f}))});
  const TensorId last = add_part(g, name, "yx_last", ops::Transpose{.perm = {0, 1, 3, 4, 2}}, {normed});
  const TensorId xy = add_part(g, name, "xy", ops::Gather{.axis = 4},
                               {last, g.add_constant(g.unique_name(cat(name, "/x_then_y")), DType::Int64, Tensor<int64_t>(Shape{2}, std::vector<int64_t>{1, 0}))});
  const TensorId grid = add_part(g, name, "grid", ops::Reshape{.shape = {N * og, K * oh, ow, 2}}, {xy});
  TensorId xp = data(0);
  if (H2 != H || W2 != Wd) xp = add_part(g, name, "padded", ops::Pad{.pads = {0, 0, 0, 0, 0, 0, H2 - H, W2 - Wd}}, {xp});
  const TensorId xg = add_part(g, name, "offset_groups", ops::Reshape{.shape = {N * og, C / og, H2, W2}}, {xp});
  TensorId taps = add_part(g, name, "taps", ops::GridSample{}, {xg, grid});  // [N og, C / og, K oh, ow]
  if (c.present(4))
    taps = add_part(g, name, "masked", ops::Mul{}, {taps, add_part(g, name, "mask", ops::Reshape{.shape = {N * og, 1, K * oh, ow}}, {data(4)})});
  const TensorId cols = add_part(g, name, "columns", ops::Reshape{.shape = {N, group, C / group * K, oh * ow}}, {taps});
  const TensorId wm = add_part(g, name, "filters", ops::Reshape{.shape = {group, M / group, C / group * K}}, {data(1)});
  const TensorId y = add_part(g, name, "sum", ops::MatMul{}, {wm, cols});  // [N, group, M / group, oh ow]
  const bool bias = c.present(3);
  out[0] = add_part(g, name, "output", ops::Reshape{.shape = {N, M, oh, ow}}, {y}, bias ? "" : c.node.output(0));
  if (bias)
    out[0] = add_part(g, name, "bias", ops::Add{}, {out[0], add_part(g, name, "bias_column", ops::Reshape{.shape = {M, 1, 1}}, {data(3)})}, c.node.output(0));
  return out;
}

}  // namespace

void add_layout_ops(std::map<std::string, ExpandFn, std::less<>>& t) {
  t["CenterCropPad"] = center_crop_pad;
  t["Col2Im"] = col2im;
  t["MaxUnpool"] = max_unpool;
  t["DeformConv"] = deform_conv;
}

}  // namespace pet::onnx::detail
