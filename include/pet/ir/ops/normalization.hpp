#pragma once
/// Normalisations and softmax (none is multilinear).
#include <cmath>

#include "pet/ir/op_base.hpp"

namespace pet::ops {

/// BatchNormalization over channel dim 1 of X [N, C, ...].
///  inference: Y = (X - mean[c]) / sqrt(var[c] + eps) * scale[c] + B[c]
///  training_mode (opset 14+): the statistics are the batch's (population variance) and two
///  more outputs are the running statistics: momentum * input + (1 - momentum) * batch.
struct BatchNormalization {
  static constexpr std::string_view name = "BatchNormalization";
  PET_ATTRS(epsilon, momentum, training_mode, num_outputs);
  static constexpr bool multilinear = false;
  float epsilon = 1e-5f, momentum = 0.9f;
  bool training_mode = false;
  int num_outputs = 1;

  Types infer(InTypes in) const {
    using namespace pet::detail;
    expect_arity(in, 5, 5);
    for (size_t i = 0; i < 5; ++i) expect_float(in, i, cat("input ", i));
    expect_rank(in, 0, 2, kMaxRank, "input X");
    int64_t c = in[0].shape[1];
    const char* names[] = {"X", "scale", "B", "input_mean", "input_var"};
    for (size_t i = 1; i < 5; ++i)
      if (in[i].shape != Shape{c})
        throw InvalidInput(cat(names[i], " has shape ", in[i].shape, " but X has ", c, " channels"));
    if (num_outputs != 1 && !(training_mode && num_outputs == 3))
      throw InvalidInput(cat("has ", num_outputs, " outputs; 1 (inference) or 3 (training_mode) expected"));
    Types out{in[0]};
    if (num_outputs == 3) out.insert(out.end(), {in[3], in[4]});
    return out;
  }
  /// Batch mean and population variance of channel c (training mode).
  template <class R>
  std::pair<double, double> batch_stats(int64_t c, const R& read) const {
    const Shape& xs = read.shape(0);
    Shape per = xs;
    per[1] = 1;
    Index i(int(xs.size()));
    double s = 0, s2 = 0;
    int64_t n = numel(per);
    do {
      Index xi = i;
      xi[1] = c;
      double v = read.real(0, xi);
      s += v, s2 += v * v;
    } while (next_index(i, per));
    double mean = s / double(n);
    return {mean, s2 / double(n) - mean * mean};
  }
  template <class E, class R>
  E at(int k, const Index& o, const R& read) const {
    pet::detail::require_ordered<E>(name);
    const int64_t c = k == 0 ? o[1] : o[0];
    Index ci{c};
    double mean = read.real(3, ci), var = read.real(4, ci);
    if (training_mode) {
      auto [bm, bv] = batch_stats(c, read);
      if (k == 1) return E(momentum * mean + (1 - momentum) * bm);
      if (k == 2) return E(momentum * var + (1 - momentum) * bv);
      mean = bm, var = bv;
    }
    double x = read.real(0, o);
    return E((x - mean) / std::sqrt(var + epsilon) * read.real(1, ci) + read.real(2, ci));
  }
  bool operator==(const BatchNormalization&) const = default;
};

/// LayerNormalization (opset 17) over dims [axis, rank):
///   Y = (X - mean) * InvStdDev * Scale + B,  InvStdDev = 1 / sqrt(var + eps)
/// Optional outputs Mean and InvStdDev have X's shape with the normalised dims set to 1.
struct LayerNormalization {
  static constexpr std::string_view name = "LayerNormalization";
  PET_ATTRS(axis, epsilon, num_outputs);
  static constexpr bool multilinear = false;
  int64_t axis = -1;
  float epsilon = 1e-5f;
  int num_outputs = 1;

  Types infer(InTypes in) {
    using namespace pet::detail;
    expect_arity(in, 2, 3);
    for (size_t i = 0; i < in.size(); ++i) expect_float(in, i, i == 0 ? "input X" : i == 1 ? "Scale" : "B");
    const Shape& x = in[0].shape;
    if (x.empty()) throw InvalidInput("input X must have rank >= 1");
    axis = normalize_axis(axis, int64_t(x.size()), "axis");
    Shape norm(x.begin() + axis, x.end());
    for (size_t i = 1; i < in.size(); ++i)
      if (!broadcasts_to(in[i].shape, norm))
        throw InvalidInput(cat(i == 1 ? "Scale" : "B", " of shape ", in[i].shape,
                               " does not broadcast to the normalised shape ", norm));
    if (num_outputs < 1 || num_outputs > 3) throw InvalidInput(cat("has ", num_outputs, " outputs; 1 to 3 expected"));
    Types out{in[0]};
    Shape stat = x;
    for (size_t i = size_t(axis); i < x.size(); ++i) stat[i] = 1;
    for (int k = 1; k < num_outputs; ++k) out.push_back({DType::Float32, stat});
    return out;
  }
  /// Mean and 1/sqrt(var+eps) of the row that position o (of X or of a statistic) lies in.
  template <class R>
  std::pair<double, double> row_stats(const Index& o, const R& read) const {
    const Shape& xs = read.shape(0);
    Shape norm(xs.begin() + axis, xs.end());
    Index r(int(norm.size())), xi = o;
    double s = 0, s2 = 0;
    int64_t n = numel(norm);
    do {
      for (int i = 0; i < r.rank; ++i) xi[int(axis) + i] = r[i];
      double v = read.real(0, xi);
      s += v, s2 += v * v;
    } while (next_index(r, norm));
    double mean = s / double(n);
    return {mean, 1.0 / std::sqrt(std::max(s2 / double(n) - mean * mean, 0.0) + epsilon)};
  }
  template <class E, class R>
  E at(int k, const Index& o, const R& read) const {
    pet::detail::require_ordered<E>(name);
    auto [mean, inv] = row_stats(o, read);
    if (k == 1) return E(mean);
    if (k == 2) return E(inv);
    Index tail(o.rank - int(axis));
    for (int i = 0; i < tail.rank; ++i) tail[i] = o[int(axis) + i];
    double y = (read.real(0, o) - mean) * inv * read.real(1, broadcast_index(tail, read.shape(1)));
    if (read.count() == 3) y += read.real(2, broadcast_index(tail, read.shape(2)));
    return E(y);
  }
  int64_t flops(InTypes in, InTypes) const { return 8 * numel(in[0].shape); }
  bool operator==(const LayerNormalization&) const = default;
};

/// out[n, c, ...] = scale[c] (x - mean) / sqrt(var + epsilon) + B[c], mean and (biased)
/// variance over the spatial dims of (n, c).
struct InstanceNormalization {
  static constexpr std::string_view name = "InstanceNormalization";
  PET_ATTRS(epsilon);
  static constexpr bool multilinear = false;
  float epsilon = 1e-5f;
  Types infer(InTypes in) const {
    using namespace pet::detail;
    expect_arity(in, 3, 3);
    for (size_t i = 0; i < 3; ++i) expect_float(in, i, i == 0 ? "input" : i == 1 ? "scale" : "B");
    const Shape& x = in[0].shape;
    if (x.size() < 3) throw InvalidInput(cat("input must be N x C x D1 x ..., got ", x));
    for (size_t i = 1; i < 3; ++i)
      if (in[i].shape != Shape{x[1]})
        throw InvalidInput(cat(i == 1 ? "scale" : "B", " must have shape [", x[1], "] (the channels), got ", in[i].shape));
    return {in[0]};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    pet::detail::require_ordered<E>(name);
    const Shape& xs = read.shape(0);
    Shape sp(xs.begin() + 2, xs.end());
    Index r(int(sp.size())), xi = o;
    double sum = 0, sq = 0;
    const double n = double(numel(sp));
    for (int pass = 0; pass < 2; ++pass) {  // the mean, then the squared deviations from it
      const double mean = sum / n;
      do {
        for (int i = 0; i < r.rank; ++i) xi[2 + i] = r[i];
        double v = read.real(0, xi);
        if (pass == 0) sum += v;
        else sq += (v - mean) * (v - mean);
      } while (next_index(r, sp));
    }
    const double mean = sum / n, var = sq / n;
    Index c(1);
    c[0] = o[1];
    return E(read.real(1, c) * (read.real(0, o) - mean) / std::sqrt(var + double(epsilon)) + read.real(2, c));
  }
  int64_t flops(InTypes in, InTypes) const { return 6 * numel(in[0].shape); }
  bool operator==(const InstanceNormalization&) const = default;
};

namespace detail {
/// Softmax, LogSoftmax and Hardmax: one row per output element, over dims [axis, axis+1)
/// (opset 13+) or, for opset < 13 (`flatten_tail`), over all dims [axis, rank) as one row.
template <class D>
struct RowOp {
  int64_t axis = -1;
  bool flatten_tail = false;
  static constexpr bool multilinear = false;
  Types infer(InTypes in) {
    pet::detail::expect_arity(in, 1, 1);
    pet::detail::expect_float(in, 0, "input");
    if (in[0].shape.empty()) throw InvalidInput("input must have rank >= 1");
    axis = normalize_axis(axis, int64_t(in[0].shape.size()), "axis");
    return {in[0]};
  }
  /// The row (dims [axis, end)) containing o.
  int row_end(int rank) const { return flatten_tail ? rank : int(axis) + 1; }
  /// Calls f(index, value) for every element of o's row, in row order.
  template <class R, class F>
  void for_row(const Index& o, const R& read, F&& f) const {
    const Shape& xs = read.shape(0);
    const int end = row_end(int(xs.size()));
    Shape row(xs.begin() + axis, xs.begin() + end);
    Index r(int(row.size())), xi = o;
    do {
      for (int i = 0; i < r.rank; ++i) xi[int(axis) + i] = r[i];
      f(xi, read.real(0, xi));
    } while (next_index(r, row));
  }
  /// The row's maximum and sum of exp(x - maximum).
  template <class R>
  std::pair<double, double> exp_sum(const Index& o, const R& read) const {
    double mx = -INFINITY, sum = 0;
    for_row(o, read, [&](const Index&, double v) { mx = std::max(mx, v); });
    for_row(o, read, [&](const Index&, double v) { sum += std::exp(v - mx); });
    return {mx, sum};
  }
  int64_t flops(InTypes in, InTypes) const { return 5 * numel(in[0].shape); }
  bool operator==(const RowOp&) const = default;
};
}  // namespace detail

///   out[v] = exp(x[v] - max_row) / sum_row exp(x - max_row)
struct Softmax : detail::RowOp<Softmax> {
  static constexpr std::string_view name = "Softmax";
  PET_ATTRS(axis, flatten_tail);
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    pet::detail::require_ordered<E>(name);
    auto [mx, sum] = exp_sum(o, read);
    return E(std::exp(read.real(0, o) - mx) / sum);
  }
  bool operator==(const Softmax&) const = default;
};

///   out[v] = x[v] - max_row - ln(sum_row exp(x - max_row))
struct LogSoftmax : detail::RowOp<LogSoftmax> {
  static constexpr std::string_view name = "LogSoftmax";
  PET_ATTRS(axis, flatten_tail);
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    pet::detail::require_ordered<E>(name);
    auto [mx, sum] = exp_sum(o, read);
    return E(read.real(0, o) - mx - std::log(sum));
  }
  bool operator==(const LogSoftmax&) const = default;
};

///   out[v] = 1 if v is the first maximum of its row (NaN never wins), else 0
struct Hardmax : detail::RowOp<Hardmax> {
  static constexpr std::string_view name = "Hardmax";
  PET_ATTRS(axis, flatten_tail);
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    pet::detail::require_ordered<E>(name);
    Index best = o;
    double bv = 0;
    bool any = false;
    for_row(o, read, [&](const Index& xi, double v) {
      if (!any || v > bv || (std::isnan(bv) && !std::isnan(v))) best = xi, bv = v, any = true;
    });
    for (int i = 0; i < o.rank; ++i)
      if (best[i] != o[i]) return E(0);
    return E(1);
  }
  bool operator==(const Hardmax&) const = default;
};

/// Local response normalization across channels (AlexNet, GoogLeNet):
///   out[n, c, ...] = x[n, c, ...] / (bias + alpha / size * sum of x[n, c', ...]^2)^beta
/// over c' in [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)] inside [0, C).
struct LRN {
  static constexpr std::string_view name = "LRN";
  PET_ATTRS(size, alpha, beta, bias);
  static constexpr bool multilinear = false;
  int64_t size = 0;
  float alpha = 1e-4f;
  float beta = 0.75f;
  float bias = 1.0f;
  Types infer(InTypes in) const {
    pet::detail::expect_arity(in, 1, 1);
    pet::detail::expect_float(in, 0, "input");
    if (in[0].shape.size() < 2) throw InvalidInput(cat("input must be N x C x ..., got ", in[0].shape));
    if (size < 1) throw InvalidInput(cat("size must be at least 1, got ", size));
    return {in[0]};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    pet::detail::require_ordered<E>(name);
    const auto [lo, hi] = window(o[1], read.shape(0)[1]);
    Index xi = o;
    double sq = 0;
    for (int64_t c = lo; c <= hi; ++c) {
      xi[1] = c;
      const double v = read.real(0, xi);
      sq += v * v;
    }
    return E(scaled(read.real(0, o), sq));
  }
  /// The channels [lo, hi] whose squares channel c sums (of C): (size - 1) / 2 before it,
  /// size / 2 after it (an even size reaches one further after).
  std::pair<int64_t, int64_t> window(int64_t c, int64_t C) const {
    return {std::max<int64_t>(0, c - (size - 1) / 2), std::min<int64_t>(C - 1, c + size / 2)};
  }
  /// x scaled by its window's sum of squares sq (summed in double, in channel order).
  double scaled(double x, double sq) const { return x / std::pow(double(bias) + double(alpha) / double(size) * sq, double(beta)); }
  int64_t flops(InTypes in, InTypes) const { return flop_mul(2 * std::min(size, in[0].shape[1]) + 4, numel(in[0].shape)); }
  bool operator==(const LRN&) const = default;
};

}  // namespace pet::ops
