#pragma once
/// Reductions over a set of axes (empty axes: all, unless noop_with_empty_axes).
///   ReduceSum: sum, ReduceMean: sum / count (both linear), ReduceMax: max.
#include <algorithm>
#include <cmath>
#include <limits>

#include "pet/ir/op_base.hpp"

namespace pet::ops {

namespace detail {
template <class D>
struct Reduce {
  std::vector<int64_t> axes;
  bool keepdims = true;
  bool noop_with_empty_axes = false;

  Types infer(InTypes in) {
    using namespace pet::detail;
    expect_arity(in, 1, 1);
    if (in[0].dtype == DType::Bool) throw InvalidInput("does not take bool input");
    const Shape& x = in[0].shape;
    if (axes.empty() && !noop_with_empty_axes)
      for (size_t i = 0; i < x.size(); ++i) axes.push_back(int64_t(i));
    axes = normalize_axes(axes, int64_t(x.size()), "axes");
    std::sort(axes.begin(), axes.end());
    noop_with_empty_axes = axes.empty();
    Shape out;
    for (size_t i = 0; i < x.size(); ++i) {
      bool red = std::find(axes.begin(), axes.end(), int64_t(i)) != axes.end();
      if (red && x[i] == 0 && D::needs_elements)
        throw InvalidInput(cat("cannot reduce the empty dimension ", i, " of shape ", x));
      if (!red) out.push_back(x[i]);
      else if (keepdims) out.push_back(1);
    }
    return {{in[0].dtype, out}};
  }
  /// Calls f(input_index) for every input position reduced into output o.
  template <class F>
  int64_t for_each(const Index& o, const Shape& xs, F&& f) const {
    Shape sub;
    for (int64_t a : axes) sub.push_back(xs[size_t(a)]);
    Index r(int(sub.size())), xi(int(xs.size()));
    // the kept dims of xi come from o (skipping reduced dims if keepdims is off)
    for (int i = 0, oi = 0; i < xi.rank; ++i) {
      bool red = std::find(axes.begin(), axes.end(), int64_t(i)) != axes.end();
      if (!red) xi[i] = o[oi++];
      else if (keepdims) ++oi;
    }
    if (numel(sub) == 0) return 0;
    do {
      for (int j = 0; j < r.rank; ++j) xi[int(axes[size_t(j)])] = r[j];
      f(xi);
    } while (next_index(r, sub));
    return numel(sub);
  }
  /// For each input dim, the output dim it stays as (-1 when reduced away or kept as 1).
  std::vector<int> kept_dims(size_t rank) const {
    std::vector<int> m(rank, -1);
    for (size_t i = 0, o = 0; i < rank; ++i) {
      bool red = std::find(axes.begin(), axes.end(), int64_t(i)) != axes.end();
      if (!red) m[i] = int(o++);
      else if (keepdims) ++o;
    }
    return m;
  }
  Splits propagate(InSplits in, InTypes it, InTypes ot) const {
    SplitPoints s = SplitPoints::none(ot[0].shape);
    auto m = kept_dims(it[0].shape.size());
    for (size_t i = 0; i < m.size(); ++i)
      if (m[i] >= 0) s.dims[size_t(m[i])] = in[0].dims[i];
    return {s};
  }
  std::vector<Box> input_boxes(const Box& out, int, InTypes it, InTypes) const {
    return {select_dims(out, it[0].shape, kept_dims(it[0].shape.size()))};
  }
  int64_t flops(InTypes in, InTypes) const { return numel(in[0].shape); }
  bool operator==(const Reduce&) const = default;
};
}  // namespace detail

struct ReduceSum : detail::Reduce<ReduceSum> {
  static constexpr std::string_view name = "ReduceSum";
  PET_ATTRS(axes, keepdims, noop_with_empty_axes);
  static constexpr bool multilinear = true, needs_elements = false;
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    E acc(0);
    for_each(o, read.shape(0), [&](const Index& xi) { acc += read(0, xi); });
    return acc;
  }
};

struct ReduceMean : detail::Reduce<ReduceMean> {
  static constexpr std::string_view name = "ReduceMean";
  PET_ATTRS(axes, keepdims, noop_with_empty_axes);
  static constexpr bool multilinear = true, needs_elements = true;
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    E acc(0);
    int64_t n = for_each(o, read.shape(0), [&](const Index& xi) { acc += read(0, xi); });
    return div_count(acc, n);
  }
};

namespace detail {
/// ReduceMax's and ReduceMin's formula: the element `better` prefers over all others.
template <class E, class O, class R, class B>
E reduce_extreme(const O& op, const Index& o, const R& read, B better) {
  pet::detail::require_ordered<E>(O::name);
  E best{};
  bool any = false;
  op.for_each(o, read.shape(0), [&](const Index& xi) {
    E v = read(0, xi);
    if constexpr (!is_field_v<E>)
      if (!any || better(v, best)) best = v, any = true;
  });
  return best;
}
}  // namespace detail

struct ReduceMax : detail::Reduce<ReduceMax> {
  static constexpr std::string_view name = "ReduceMax";
  PET_ATTRS(axes, keepdims, noop_with_empty_axes);
  static constexpr bool multilinear = false, needs_elements = true;
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    return detail::reduce_extreme<E>(*this, o, read, [](const auto& a, const auto& b) { return a > b; });
  }
};

struct ReduceMin : detail::Reduce<ReduceMin> {
  static constexpr std::string_view name = "ReduceMin";
  PET_ATTRS(axes, keepdims, noop_with_empty_axes);
  static constexpr bool multilinear = false, needs_elements = true;
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    return detail::reduce_extreme<E>(*this, o, read, [](const auto& a, const auto& b) { return a < b; });
  }
};

/// Float reductions of a function of the elements: out = post(sum of pre(x)) (product for
/// ReduceProd).
#define PET_REDUCE_REAL(NAME, INIT, STEP, POST)                                           \
  struct NAME : detail::Reduce<NAME> {                                                    \
    static constexpr std::string_view name = #NAME;                                       \
    PET_ATTRS(axes, keepdims, noop_with_empty_axes);                                      \
    static constexpr bool multilinear = false, needs_elements = false;                    \
    template <class E, class R>                                                           \
    E at(const Index& o, const R& read) const {                                           \
      if constexpr (detail::is_real_v<E>) {                                               \
        E acc = INIT;                                                                     \
        for_each(o, read.shape(0), [&](const Index& xi) { E x = read(0, xi); STEP; });    \
        return POST;                                                                      \
      } else {                                                                            \
        pet::detail::require_ordered<E>(name);                                            \
        throw Unsupported(cat(name, " takes float input only"));                          \
      }                                                                                   \
    }                                                                                     \
  };
/// out = product of x
PET_REDUCE_REAL(ReduceProd, E(1), acc *= x, acc)
/// out = sum of |x|
PET_REDUCE_REAL(ReduceL1, E(0), acc += std::abs(x), acc)
/// out = sqrt(sum of x^2)
PET_REDUCE_REAL(ReduceL2, E(0), acc += x * x, std::sqrt(acc))
/// out = sum of x^2
PET_REDUCE_REAL(ReduceSumSquare, E(0), acc += x * x, acc)
/// out = ln(sum of x)
PET_REDUCE_REAL(ReduceLogSum, E(0), acc += x, std::log(acc))
#undef PET_REDUCE_REAL

namespace detail {
/// out = the index along `axis` of the first (or, with select_last_index, the last) element
/// that D::better prefers over all others (int64; NaN never wins).
template <class D>
struct ArgReduce {
  int64_t axis = 0;
  bool keepdims = true;
  bool select_last_index = false;
  static constexpr bool multilinear = false;
  Types infer(InTypes in) {
    using namespace pet::detail;
    expect_arity(in, 1, 1);
    if (in[0].dtype == DType::Bool) throw InvalidInput("does not take bool input");
    const Shape& x = in[0].shape;
    if (x.empty()) throw InvalidInput("input must have rank >= 1");
    axis = normalize_axis(axis, int64_t(x.size()), "axis");
    Shape out;
    for (size_t i = 0; i < x.size(); ++i)
      if (int64_t(i) != axis) out.push_back(x[i]);
      else if (keepdims) out.push_back(1);
    return {{DType::Int64, out}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    pet::detail::require_ordered<E>(D::name);
    const Shape& xs = read.shape(0);
    Index xi(int(xs.size()));
    for (int i = 0, oi = 0; i < xi.rank; ++i) {
      if (i == int(axis)) {
        if (keepdims) ++oi;
        continue;
      }
      xi[i] = o[oi++];
    }
    int64_t best = 0;
    double bv = 0;
    for (int64_t k = 0; k < xs[size_t(axis)]; ++k) {
      xi[int(axis)] = k;
      double v = read.real(0, xi);
      if (k == 0 || replaces(v, bv, select_last_index)) best = k, bv = v;
    }
    return E(best);
  }
  /// Whether v, later on the axis, takes the place of the best so far bv: better, or equal
  /// with select_last_index; NaN never wins over a number (and loses to the first number).
  template <class V>
  static bool replaces(V v, V bv, bool select_last_index) {
    return D::better(v, bv) || (select_last_index && v == bv) || (std::isnan(bv) && !std::isnan(v));
  }
  bool operator==(const ArgReduce&) const = default;
};
}  // namespace detail

struct ArgMax : detail::ArgReduce<ArgMax> {
  static constexpr std::string_view name = "ArgMax";
  PET_ATTRS(axis, keepdims, select_last_index);
  static bool better(double a, double b) { return a > b; }
};
struct ArgMin : detail::ArgReduce<ArgMin> {
  static constexpr std::string_view name = "ArgMin";
  PET_ATTRS(axis, keepdims, select_last_index);
  static bool better(double a, double b) { return a < b; }
};

/// out = ln(sum of e^x), evaluated as m + ln(sum of e^(x - m)) with m the maximum
struct ReduceLogSumExp : detail::Reduce<ReduceLogSumExp> {
  static constexpr std::string_view name = "ReduceLogSumExp";
  PET_ATTRS(axes, keepdims, noop_with_empty_axes);
  static constexpr bool multilinear = false, needs_elements = true;
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    if constexpr (detail::is_real_v<E>) {
      E m = -std::numeric_limits<E>::infinity();
      for_each(o, read.shape(0), [&](const Index& xi) { m = std::max(m, read(0, xi)); });
      if (!std::isfinite(m)) return m;
      E acc(0);
      for_each(o, read.shape(0), [&](const Index& xi) { acc += std::exp(read(0, xi) - m); });
      return m + std::log(acc);
    } else {
      pet::detail::require_ordered<E>(name);
      throw Unsupported(cat(name, " takes float input only"));
    }
  }
};

namespace detail {
/// The index of the input element on `axis` at position k with the other dims from o.
inline Index along(const Index& o, int axis, int64_t k) {
  Index xi = o;
  xi[axis] = k;
  return xi;
}
}  // namespace detail

/// Cumulative sum along `axis` (ONNX takes it as a constant input; pet keeps it here):
///   out[.., i, ..] = sum of x[.., j, ..] over j < i (exclusive) or j <= i (inclusive),
/// counted from the end when `reverse`.
struct CumSum {
  static constexpr std::string_view name = "CumSum";
  PET_ATTRS(axis, exclusive, reverse);
  static constexpr bool multilinear = false;
  int64_t axis = 0;
  bool exclusive = false;
  bool reverse = false;
  Types infer(InTypes in) {
    pet::detail::expect_arity(in, 1, 1);
    if (in[0].dtype == DType::Bool) throw InvalidInput("does not take bool input");
    if (in[0].shape.empty()) throw InvalidInput("input must have rank >= 1");
    axis = normalize_axis(axis, int64_t(in[0].shape.size()), "axis");
    return {in[0]};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    const int a = int(axis);
    const int64_t n = read.shape(0)[size_t(a)], i = o[a];
    const int64_t lo = reverse ? i + (exclusive ? 1 : 0) : 0, hi = reverse ? n : i + (exclusive ? 0 : 1);
    E acc(0);
    for (int64_t j = lo; j < hi; ++j) acc += read(0, detail::along(o, a, j));
    return acc;
  }
  int64_t flops(InTypes in, InTypes) const { return numel(in[0].shape); }
  bool operator==(const CumSum&) const = default;
};

/// The k largest (or smallest) elements along `axis` and their indices (int64), sorted:
///   values[.., r, ..] = the r-th element of the row in order (largest first, or smallest
///   first), ties to the lower index; indices[.., r, ..] = its position in the row.
/// NaN counts as larger than any number, as in PyTorch (ONNX leaves it open; ONNX Runtime
/// 1.20 puts it last when smallest first and anywhere when largest first).
struct TopK {
  static constexpr std::string_view name = "TopK";
  PET_ATTRS(k, axis, largest, sorted);
  static constexpr bool multilinear = false;
  int64_t k = 1;
  int64_t axis = -1;
  bool largest = true;
  bool sorted = true;
  Types infer(InTypes in) {
    pet::detail::expect_arity(in, 1, 1);
    if (in[0].dtype == DType::Bool) throw InvalidInput("does not take bool input");
    const Shape& x = in[0].shape;
    if (x.empty()) throw InvalidInput("input must have rank >= 1");
    axis = normalize_axis(axis, int64_t(x.size()), "axis");
    if (k < 0 || k > x[size_t(axis)])
      throw InvalidInput(cat("k = ", k, " is not in [0, ", x[size_t(axis)], "] (the size of axis ", axis, ")"));
    Shape out = x;
    out[size_t(axis)] = k;
    return {{in[0].dtype, out}, {DType::Int64, out}};
  }
  template <class E, class R>
  E at(int out, const Index& o, const R& read) const {
    pet::detail::require_ordered<E>(name);
    const int a = int(axis);
    const int64_t n = read.shape(0)[size_t(a)], r = o[a];
    std::vector<std::pair<double, int64_t>> row(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) row[size_t(j)] = {read.real(0, detail::along(o, a, j)), j};
    std::partial_sort(row.begin(), row.begin() + r + 1, row.end(), [&](const auto& p, const auto& q) { return before(largest, p, q); });
    const int64_t j = row[size_t(r)].second;
    return out == 1 ? E(j) : read(0, detail::along(o, a, j));
  }
  /// The order of a row: (value, index) p comes before q when larger (smallest first: smaller),
  /// NaN counting as larger than any number, ties to the lower index.
  template <class V>
  static bool before(bool largest, const std::pair<V, int64_t>& p, const std::pair<V, int64_t>& q) {
    const bool pn = std::isnan(p.first), qn = std::isnan(q.first);
    if (pn || qn) {
      if (pn && qn) return p.second < q.second;
      return largest ? pn : qn;
    }
    if (p.first != q.first) return largest ? p.first > q.first : p.first < q.first;
    return p.second < q.second;
  }
  bool operator==(const TopK&) const = default;
};

}  // namespace pet::ops
