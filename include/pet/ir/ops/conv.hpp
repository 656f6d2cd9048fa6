#pragma once
/// Convolution over 1, 2 or 3 spatial dimensions (ONNX Conv), with groups and bias.
///   out[n, f, o_1..o_k] = B[f] + sum_{c < C/G, r_1..r_k}
///        X[n, g*C/G + c, o_i*s_i - pb_i + r_i*d_i] * W[f, c, r_1..r_k],   g = f / (F/G)
/// Reads outside X are zero (padding). Output size per spatial dim:
///   floor((n + pb + pe - ((K-1)*d + 1)) / s) + 1.
#include "pet/ir/op_base.hpp"

namespace pet::ops {

namespace detail {
/// Resolves ONNX auto_pad into explicit [begin..., end...] pads for a window op.
inline void resolve_auto_pad(AutoPad& mode, std::vector<int64_t>& pads, const Shape& spatial_in,
                             const std::vector<int64_t>& kernel, const std::vector<int64_t>& strides,
                             const std::vector<int64_t>& dil) {
  size_t k = spatial_in.size();
  if (mode == AutoPad::NotSet) return;
  pads.assign(2 * k, 0);
  if (mode != AutoPad::Valid) {
    for (size_t i = 0; i < k; ++i) {
      int64_t out = (spatial_in[i] + strides[i] - 1) / strides[i];
      int64_t total = std::max<int64_t>((out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - spatial_in[i], 0);
      int64_t small = total / 2, big = total - small;
      pads[i] = mode == AutoPad::SameUpper ? small : big;
      pads[i + k] = mode == AutoPad::SameUpper ? big : small;
    }
  }
  mode = AutoPad::NotSet;
}

/// Output extent of a sliding window; ceil_mode as ONNX's shape inference and ONNX Runtime
/// compute it: ceil((n + pads - dilated kernel) / s) + 1, also when the last window then
/// starts past the input and the begin padding (PyTorch drops that window; ONNX does not).
inline int64_t window_out(int64_t n, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, bool ceil_mode) {
  int64_t span = n + pb + pe - ((k - 1) * d + 1);
  if (span < 0) return 0;
  return (ceil_mode ? (span + s - 1) / s : span / s) + 1;
}

/// Checks and defaults strides/dilations/pads of a window op over `k` spatial dims.
inline void check_window_attrs(size_t k, std::vector<int64_t>& strides, std::vector<int64_t>& dil,
                               std::vector<int64_t>& pads) {
  default_list(strides, k, 1, "strides");
  default_list(dil, k, 1, "dilations");
  default_list(pads, 2 * k, 0, "pads");
  expect_bounded(strides, "strides");
  expect_bounded(dil, "dilations");
  expect_bounded(pads, "pads");
  for (int64_t s : strides)
    if (s < 1) throw InvalidInput(cat("strides ", strides, " must be positive"));
  for (int64_t d : dil)
    if (d < 1) throw InvalidInput(cat("dilations ", dil, " must be positive"));
  for (int64_t p : pads)
    if (p < 0) throw InvalidInput(cat("pads ", pads, " must be non-negative"));
}

/// Advances the kernel position wi[2..] over the spatial dims of weight shape ws (false
/// after the last).
inline bool next_kernel(Index& wi, const Shape& ws) {
  for (int i = wi.rank - 1; i >= 2; --i) {
    if (++wi[i] < ws[i]) return true;
    wi[i] = 0;
  }
  return false;
}
}  // namespace detail

struct Conv {
  static constexpr std::string_view name = "Conv";
  PET_ATTRS(kernel_shape, strides, pads, dilations, group, auto_pad);
  static constexpr bool multilinear = true;
  std::vector<int64_t> kernel_shape;  ///< optional; must match W when given
  std::vector<int64_t> strides, pads, dilations;
  int64_t group = 1;
  AutoPad auto_pad = AutoPad::NotSet;

  int spatial() const { return int(strides.size()); }
  bool has_bias(InTypes in) const { return in.size() == 3; }

  Types infer(InTypes in) {
    using namespace detail;
    expect_arity(in, 2, 3);
    for (size_t i = 0; i < in.size(); ++i) expect_float(in, i, i == 0 ? "input X" : i == 1 ? "weight W" : "bias B");
    const Shape &x = in[0].shape, &w = in[1].shape;
    expect_rank(in, 0, 3, 5, "input X");
    if (w.size() != x.size())
      throw InvalidInput(cat("weight shape ", w, " has rank ", w.size(), " but input shape ", x, " has rank ", x.size()));
    size_t k = x.size() - 2;
    if (group < 1) throw InvalidInput(cat("group ", group, " must be positive"));
    if (x[1] % group)
      throw InvalidInput(cat("input has ", x[1], " channels, not divisible by group ", group));
    if (x[1] / group != w[1])
      throw InvalidInput(cat("input has ", x[1], " channels but weight expects ", w[1] * group,
                             " (weight shape ", w, ", group ", group, ")"));
    if (w[0] % group) throw InvalidInput(cat("weight has ", w[0], " filters, not divisible by group ", group));
    Shape ks(w.begin() + 2, w.end());
    if (!kernel_shape.empty() && kernel_shape != ks)
      throw InvalidInput(cat("kernel_shape ", kernel_shape, " does not match weight shape ", w));
    for (int64_t d : ks)
      if (d < 1) throw InvalidInput(cat("weight shape ", w, " has an empty kernel"));
    kernel_shape = ks;
    check_window_attrs(k, strides, dilations, pads);
    resolve_auto_pad(auto_pad, pads, Shape(x.begin() + 2, x.end()), ks, strides, dilations);
    if (in.size() == 3 && in[2].shape != Shape{w[0]})
      throw InvalidInput(cat("bias shape ", in[2].shape, " must be [", w[0], "]"));
    Shape out{x[0], w[0]};
    for (size_t i = 0; i < k; ++i) {
      int64_t o = window_out(x[2 + i], ks[i], strides[i], dilations[i], pads[i], pads[i + k], false);
      if (o < 1)
        throw InvalidInput(cat("output would be empty: spatial input ", Shape(x.begin() + 2, x.end()),
                               " is smaller than the dilated kernel ", ks, " with pads ", pads));
      out.push_back(o);
    }
    return {{DType::Float32, out}};
  }

  template <class E, class R>
  E at(const Index& o, const R& read) const {
    const Shape &xs = read.shape(0), &ws = read.shape(1);
    const int k = int(xs.size()) - 2;
    const int64_t cg = ws[1], fg = ws[0] / group, g = o[1] / fg;
    E acc = read.count() == 3 ? read(2, Index{o[1]}) : E(0);
    Index xi(int(xs.size())), wi(int(ws.size()));
    xi[0] = o[0];
    wi[0] = o[1];
    for (int64_t c = 0; c < cg; ++c) {
      xi[1] = g * cg + c;
      wi[1] = c;
      for (int i = 0; i < k; ++i) wi[2 + i] = 0;
      do {
        bool inside = true;
        for (int i = 0; i < k; ++i) {
          xi[2 + i] = o[2 + i] * strides[i] - pads[i] + wi[2 + i] * dilations[i];
          inside = inside && xi[2 + i] >= 0 && xi[2 + i] < xs[2 + i];
        }
        if (inside) acc += read(0, xi) * read(1, wi);
      } while (detail::next_kernel(wi, ws));
    }
    return acc;
  }

  Splits propagate(InSplits in, InTypes it, InTypes ot) const {
    const Shape &x = it[0].shape, &w = it[1].shape, &o = ot[0].shape;
    const size_t k = x.size() - 2;
    SplitPoints s = SplitPoints::none(o);
    s.dims[0] = in[0].dims[0];
    cuts::Cuts f = in[1].dims[0];
    if (in.size() == 3) f = cuts::unite(f, in[2].dims[0], o[1]);
    if (group > 1) f = cuts::unite(f, cuts::blocks(o[1], o[1] / group), o[1]);
    s.dims[1] = f;
    for (size_t i = 0; i < k; ++i)
      s.dims[2 + i] = cuts::window(in[0].dims[2 + i], x[2 + i], w[2 + i], strides[i], dilations[i], pads[i], o[2 + i]);
    return {s};
  }
  std::vector<Box> input_boxes(const Box& out, int, InTypes it, InTypes) const {
    const Shape &x = it[0].shape, &w = it[1].shape;
    const size_t k = x.size() - 2;
    const int64_t fg = w[0] / group, cg = w[1];
    Box bx = Box::whole(x), bw = Box::whole(w);
    bx.dims[0] = Interval{out.dims[0].lo, out.dims[0].hi, 1};
    if (!out.empty()) {
      bx.dims[1] = Interval{out.dims[1].lo / fg * cg, ((out.dims[1].hi - 1) / fg + 1) * cg, 1};
      for (size_t i = 0; i < k; ++i) {
        int64_t lo = out.dims[2 + i].lo * strides[i] - pads[i];
        int64_t hi = (out.dims[2 + i].hi - 1) * strides[i] - pads[i] + (w[2 + i] - 1) * dilations[i] + 1;
        bx.dims[2 + i] = Interval{std::clamp<int64_t>(lo, 0, x[2 + i]), std::clamp<int64_t>(hi, 0, x[2 + i]), 1};
      }
    }
    bw.dims[0] = Interval{out.dims[1].lo, out.dims[1].hi, 1};
    std::vector<Box> r{bx, bw};
    if (it.size() == 3) r.push_back(Box{{bw.dims[0]}});
    return r;
  }

  int64_t flops(InTypes in, InTypes out) const {
    const Shape& w = in[1].shape;
    int64_t per = 1;
    for (size_t i = 1; i < w.size(); ++i) per = flop_mul(per, w[i]);
    return flop_mul(2, numel(out[0].shape), per);
  }
  bool operator==(const Conv&) const = default;

};

/// Transposed convolution (ONNX ConvTranspose), W of shape [C_in, C_out / group, k...]:
///   y[n, oc, o] = B[oc] + sum over c of oc's group, kernel position j, input position i with
///                 o = i * stride - pad_begin + j * dilation of x[n, c, i] * W[c, oc mod (C_out/group), j]
/// and spatial size stride (in - 1) + output_padding + (k - 1) dilation + 1 - pads (explicit,
/// or derived from output_shape / auto_pad, below). Not multilinear here: the
/// verifier does not look into it (its box rules are not written).
struct ConvTranspose {
  static constexpr std::string_view name = "ConvTranspose";
  PET_ATTRS(kernel_shape, strides, pads, dilations, output_padding, group, output_shape, auto_pad);
  static constexpr bool multilinear = false;
  std::vector<int64_t> kernel_shape, strides, pads, dilations, output_padding;
  int64_t group = 1;
  /// ONNX's implicit padding: the spatial output extents wanted (output_shape) or auto_pad
  /// SAME_UPPER / SAME_LOWER (extent = input x stride) or VALID; infer() turns either into
  /// explicit pads (total = stride (in - 1) + output_padding + (k - 1) d + 1 - out, its
  /// larger half at the end for SAME_UPPER, at the start otherwise; a negative total is
  /// output padding) and clears them.
  std::vector<int64_t> output_shape;
  AutoPad auto_pad = AutoPad::NotSet;

  Types infer(InTypes in) {
    using namespace detail;
    expect_arity(in, 2, 3);
    for (size_t i = 0; i < in.size(); ++i) expect_float(in, i, i == 0 ? "input X" : i == 1 ? "weight W" : "bias B");
    const Shape &x = in[0].shape, &w = in[1].shape;
    expect_rank(in, 0, 3, 5, "input X");
    if (w.size() != x.size()) throw InvalidInput(cat("weight shape ", w, " has rank ", w.size(), " but input shape ", x, " has rank ", x.size()));
    const size_t k = x.size() - 2;
    if (group < 1) throw InvalidInput(cat("group ", group, " must be positive"));
    if (x[1] != w[0]) throw InvalidInput(cat("input has ", x[1], " channels but weight shape ", w, " expects ", w[0]));
    if (x[1] % group) throw InvalidInput(cat("input has ", x[1], " channels, not divisible by group ", group));
    Shape ks(w.begin() + 2, w.end());
    if (!kernel_shape.empty() && kernel_shape != ks) throw InvalidInput(cat("kernel_shape ", kernel_shape, " does not match weight shape ", w));
    kernel_shape = ks;
    if (output_padding.empty()) output_padding.assign(k, 0);
    expect_bounded(output_padding, "output_padding");  // (the arithmetic below stays in int64)
    expect_bounded(output_shape, "output_shape");
    if (!output_shape.empty() || auto_pad != AutoPad::NotSet) {
      if (!pads.empty()) throw InvalidInput(cat("pads ", pads, " with ", output_shape.empty() ? "auto_pad" : "output_shape", ": give one of them"));
      std::vector<int64_t> dummy;
      check_window_attrs(k, strides, dilations, dummy);
      if (output_padding.size() != k) throw InvalidInput(cat("output_padding ", output_padding, " must have ", k, " values"));
      Shape want;
      if (!output_shape.empty()) {
        if (output_shape.size() == k + 2) want.assign(output_shape.begin() + 2, output_shape.end());
        else if (output_shape.size() == k) want = output_shape;
        else throw InvalidInput(cat("output_shape ", output_shape, " must have ", k, " values (the spatial extents)"));
      }
      pads.assign(2 * k, 0);
      for (size_t i = 0; i < k && auto_pad != AutoPad::Valid; ++i) {
        const int64_t out = want.empty() ? x[2 + i] * strides[i] : want[i];
        int64_t total = strides[i] * (x[2 + i] - 1) + output_padding[i] + (ks[i] - 1) * dilations[i] + 1 - out;
        if (total < 0) {  // a larger output: the extra positions at the end are output padding
          output_padding[i] -= total;
          total = 0;
          if (output_padding[i] >= std::max(strides[i], dilations[i]))
            throw Unsupported(cat("an output extent of ", out, " along spatial dim ", i, " is more than the stride beyond what the transposed conv makes (",
                                  out - output_padding[i], ")"));
        }
        pads[i] = auto_pad == AutoPad::SameUpper ? total / 2 : total - total / 2;
        pads[i + k] = total - pads[i];
      }
      output_shape.clear();
      auto_pad = AutoPad::NotSet;
    }
    check_window_attrs(k, strides, dilations, pads);
    if (output_padding.size() != k) throw InvalidInput(cat("output_padding ", output_padding, " must have ", k, " values"));
    for (size_t i = 0; i < k; ++i)
      if (output_padding[i] < 0 || output_padding[i] >= std::max(strides[i], dilations[i]))
        throw InvalidInput(cat("output_padding ", output_padding, " must be below the stride or the dilation"));
    const int64_t oc = w[1] * group;
    if (in.size() == 3 && in[2].shape != Shape{oc}) throw InvalidInput(cat("bias shape ", in[2].shape, " must be [", oc, "]"));
    Shape out{x[0], oc};
    for (size_t i = 0; i < k; ++i) {
      int64_t o = strides[i] * (x[2 + i] - 1) + output_padding[i] + (ks[i] - 1) * dilations[i] + 1 - pads[i] - pads[i + k];
      if (o < 1) throw InvalidInput(cat("output would be empty: pads ", pads, " remove more than the output holds"));
      out.push_back(o);
    }
    return {{DType::Float32, out}};
  }

  template <class E, class R>
  E at(const Index& o, const R& read) const {
    const Shape &xs = read.shape(0), &ws = read.shape(1);
    const int k = int(xs.size()) - 2;
    const int64_t ocg = ws[1], cg = ws[0] / group, g = o[1] / ocg;
    E acc = read.count() == 3 ? read(2, Index{o[1]}) : E(0);
    Index xi(int(xs.size())), wi(int(ws.size()));
    xi[0] = o[0];
    wi[1] = o[1] - g * ocg;
    for (int64_t c = 0; c < cg; ++c) {
      xi[1] = wi[0] = g * cg + c;
      for (int i = 0; i < k; ++i) wi[2 + i] = 0;
      do {
        bool inside = true;
        for (int i = 0; i < k && inside; ++i) {
          const int64_t t = o[2 + i] + pads[size_t(i)] - wi[2 + i] * dilations[size_t(i)];
          inside = t >= 0 && t % strides[size_t(i)] == 0 && t / strides[size_t(i)] < xs[2 + i];
          if (inside) xi[2 + i] = t / strides[size_t(i)];
        }
        if (inside) acc += read(0, xi) * read(1, wi);
      } while (detail::next_kernel(wi, ws));
    }
    return acc;
  }
  int64_t flops(InTypes in, InTypes) const { return flop_mul(2, numel(in[0].shape), numel(in[1].shape) / in[1].shape[0]); }
  bool operator==(const ConvTranspose&) const = default;

};

}  // namespace pet::ops
