#pragma once
/// Pooling over 1, 2 or 3 spatial dimensions.
///   window(o) = { o_i*s_i - pb_i + r_i*d_i : r_i < K_i }
///   MaxPool:      out = max over the window positions inside X (padding never wins)
///   AveragePool:  out = sum over positions inside X / count, where count is the number of
///                 positions inside X, or (count_include_pad) inside the padded extent
///                 [-pb, n + pe); the extra ceil_mode region is never counted.
#include <limits>

#include "pet/ir/ops/conv.hpp"

namespace pet::ops {

namespace detail {
struct Window {
  std::vector<int64_t> kernel_shape, strides, pads, dilations;
  AutoPad auto_pad = AutoPad::NotSet;
  bool ceil_mode = false;

  Shape infer_window(InTypes in) {
    using namespace pet::detail;
    expect_arity(in, 1, 1);
    expect_float(in, 0, "input X");
    expect_rank(in, 0, 3, 5, "input X");
    const Shape& x = in[0].shape;
    size_t k = x.size() - 2;
    if (kernel_shape.size() != k)
      throw InvalidInput(cat("kernel_shape ", kernel_shape, " must have ", k, " values for input shape ", x));
    for (int64_t v : kernel_shape)
      if (v < 1) throw InvalidInput(cat("kernel_shape ", kernel_shape, " must be positive"));
    expect_bounded(kernel_shape, "kernel_shape");
    check_window_attrs(k, strides, dilations, pads);
    resolve_auto_pad(auto_pad, pads, Shape(x.begin() + 2, x.end()), kernel_shape, strides, dilations);
    Shape out{x[0], x[1]};
    for (size_t i = 0; i < k; ++i) {
      int64_t o = window_out(x[2 + i], kernel_shape[i], strides[i], dilations[i], pads[i], pads[i + k], ceil_mode);
      if (o < 1) throw InvalidInput(cat("output would be empty for input ", x, " and kernel ", kernel_shape));
      out.push_back(o);
    }
    return out;
  }

  /// Calls f(input_index, inside_x, inside_padded) for every window position of output o.
  template <class F>
  void for_window(const Index& o, const Shape& xs, F&& f) const {
    const int k = int(xs.size()) - 2;
    Index r(k), xi(int(xs.size()));
    xi[0] = o[0];
    xi[1] = o[1];
    do {
      bool in_x = true, in_pad = true;
      for (int i = 0; i < k; ++i) {
        int64_t p = o[2 + i] * strides[i] - pads[i] + r[i] * dilations[i];
        xi[2 + i] = p;
        in_x = in_x && p >= 0 && p < xs[2 + i];
        in_pad = in_pad && p >= -pads[i] && p < xs[2 + i] + pads[i + k];
      }
      f(xi, in_x, in_pad);
    } while (next_index(r, kernel_shape));
  }
  /// Output split points over the spatial dims; `extra_pad_bounds` adds the padded extent's
  /// edges (where count_include_pad's divisor changes).
  SplitPoints window_splits(const SplitPoints& in, const Shape& x, const Shape& o, bool extra_pad_bounds) const {
    const size_t k = x.size() - 2;
    SplitPoints s = SplitPoints::none(o);
    s.dims[0] = in.dims[0];
    s.dims[1] = in.dims[1];
    for (size_t i = 0; i < k; ++i) {
      cuts::Cuts extra;
      if (extra_pad_bounds) extra = {-pads[i], x[2 + i] + pads[i + k]};
      s.dims[2 + i] = cuts::window(in.dims[2 + i], x[2 + i], kernel_shape[i], strides[i], dilations[i], pads[i], o[2 + i], extra);
    }
    return s;
  }
  Box window_input(const Box& out, const Shape& x) const {
    const size_t k = x.size() - 2;
    Box b = Box::whole(x);
    b.dims[0] = Interval{out.dims[0].lo, out.dims[0].hi, 1};
    b.dims[1] = Interval{out.dims[1].lo, out.dims[1].hi, 1};
    if (out.empty()) return b;
    for (size_t i = 0; i < k; ++i) {
      int64_t lo = out.dims[2 + i].lo * strides[i] - pads[i];
      int64_t hi = (out.dims[2 + i].hi - 1) * strides[i] - pads[i] + (kernel_shape[i] - 1) * dilations[i] + 1;
      b.dims[2 + i] = Interval{std::clamp<int64_t>(lo, 0, x[2 + i]), std::clamp<int64_t>(hi, 0, x[2 + i]), 1};
    }
    return b;
  }
  int64_t window_size() const {
    int64_t n = 1;
    for (int64_t v : kernel_shape) n = flop_mul(n, v);
    return n;
  }
  bool operator==(const Window&) const = default;
};
}  // namespace detail

struct MaxPool : detail::Window {
  static constexpr std::string_view name = "MaxPool";
  PET_ATTRS(kernel_shape, strides, pads, dilations, auto_pad, ceil_mode, storage_order, num_outputs);
  static constexpr bool multilinear = false;
  int64_t storage_order = 0;  ///< for Indices: 0 row-major, 1 column-major
  int num_outputs = 1;        ///< 2 adds Indices (int64 flat positions in X)

  Types infer(InTypes in) {
    Shape out = infer_window(in);
    if (storage_order != 0 && storage_order != 1) throw InvalidInput(cat("storage_order ", storage_order, " must be 0 or 1"));
    Types t{{DType::Float32, out}};
    if (num_outputs == 2) t.push_back({DType::Int64, out});
    return t;
  }
  template <class E, class R>
  E at(int k, const Index& o, const R& read) const {
    pet::detail::require_ordered<E>(name);
    const Shape& xs = read.shape(0);
    double best = -std::numeric_limits<double>::infinity();
    Index arg;
    bool any = false;
    for_window(o, xs, [&](const Index& xi, bool in_x, bool) {
      if (!in_x) return;
      double v = read.real(0, xi);
      if (!any || v > best) best = v, arg = xi, any = true;
    });
    // A window that sees only padding: the lowest finite value, as ONNX Runtime and oneDNN
    // give (not -inf), and index -1.
    if (!any) return k == 0 ? E(std::numeric_limits<float>::lowest()) : E(-1);
    if (k == 0) return E(best);
    if (storage_order == 0) return E(flat_offset(arg, xs));
    int64_t off = 0;  // column-major over the spatial dims, then channel and batch
    for (int i = arg.rank - 1; i >= 2; --i) off = off * xs[i] + arg[i];
    return E(off + (arg[0] * xs[1] + arg[1]) * numel(Shape(xs.begin() + 2, xs.end())));
  }
  int64_t flops(InTypes, InTypes out) const { return flop_mul(numel(out[0].shape), window_size()); }
  bool operator==(const MaxPool&) const = default;
};

struct AveragePool : detail::Window {
  static constexpr std::string_view name = "AveragePool";
  PET_ATTRS(kernel_shape, strides, pads, dilations, auto_pad, ceil_mode, count_include_pad);
  static constexpr bool multilinear = true;
  bool count_include_pad = false;

  Types infer(InTypes in) { return {{DType::Float32, infer_window(in)}}; }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    // count_include_pad: the divisor is the whole window, also where ceil_mode lets it reach
    // past the end padding (as ONNX Runtime computes); else the elements inside X. A window
    // with none of them (ceil_mode) averages to 0.
    E acc(0);
    int64_t count = 0;
    for_window(o, read.shape(0), [&](const Index& xi, bool in_x, bool) {
      if (in_x) acc += read(0, xi);
      count += in_x;
    });
    if (count_include_pad) count = window_size();
    return count ? div_count(acc, count) : E(0);
  }
  Splits propagate(InSplits in, InTypes it, InTypes ot) const {
    return {window_splits(in[0], it[0].shape, ot[0].shape, count_include_pad)};
  }
  std::vector<Box> input_boxes(const Box& out, int, InTypes it, InTypes) const { return {window_input(out, it[0].shape)}; }
  int64_t flops(InTypes, InTypes out) const { return flop_mul(numel(out[0].shape), window_size()); }
  bool operator==(const AveragePool&) const = default;
};

/// out[n, c, 1, ..] = mean over the spatial dims of X[n, c, ...]
struct GlobalAveragePool {
  static constexpr std::string_view name = "GlobalAveragePool";
  PET_ATTRS();
  static constexpr bool multilinear = true;
  Types infer(InTypes in) const {
    pet::detail::expect_arity(in, 1, 1);
    pet::detail::expect_float(in, 0, "input X");
    pet::detail::expect_rank(in, 0, 3, kMaxRank, "input X");
    Shape out = in[0].shape;
    for (size_t i = 2; i < out.size(); ++i) out[i] = 1;
    return {{DType::Float32, out}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    const Shape& xs = read.shape(0);
    Shape sp(xs.begin() + 2, xs.end());
    Index r(int(sp.size())), xi(int(xs.size()));
    xi[0] = o[0];
    xi[1] = o[1];
    E acc(0);
    if (numel(sp) == 0) return acc;
    do {
      for (int i = 0; i < r.rank; ++i) xi[2 + i] = r[i];
      acc += read(0, xi);
    } while (next_index(r, sp));
    return div_count(acc, numel(sp));
  }
  Splits propagate(InSplits in, InTypes, InTypes ot) const {
    SplitPoints s = SplitPoints::none(ot[0].shape);
    s.dims[0] = in[0].dims[0];
    s.dims[1] = in[0].dims[1];
    return {s};
  }
  std::vector<Box> input_boxes(const Box& out, int, InTypes it, InTypes) const {
    std::vector<int> m(it[0].shape.size(), -1);
    m[0] = 0;
    m[1] = 1;
    return {select_dims(out, it[0].shape, m)};
  }
  int64_t flops(InTypes in, InTypes) const { return numel(in[0].shape); }
  bool operator==(const GlobalAveragePool&) const = default;
};

}  // namespace pet::ops
