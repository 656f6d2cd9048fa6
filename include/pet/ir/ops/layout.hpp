#pragma once
/// Layout operators: they move elements and compute nothing (all linear).
#include <algorithm>

#include "pet/ir/op_base.hpp"

namespace pet::ops {

/// out[i_0, .., i_n] = x[j] with j[perm[k]] = i[k]; empty perm reverses the dims.
struct Transpose {
  static constexpr std::string_view name = "Transpose";
  PET_ATTRS(perm);
  static constexpr bool multilinear = true, layout = true;
  std::vector<int64_t> perm;

  Types infer(InTypes in) {
    pet::detail::expect_arity(in, 1, 1);
    const Shape& x = in[0].shape;
    int64_t r = int64_t(x.size());
    if (perm.empty())
      for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
    if (int64_t(perm.size()) != r) throw InvalidInput(cat("perm ", perm, " has ", perm.size(), " entries for rank ", r));
    perm = pet::detail::normalize_axes(perm, r, "perm");
    Shape out;
    for (int64_t p : perm) out.push_back(x[size_t(p)]);
    return {{in[0].dtype, out}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    Index xi(o.rank);
    for (int k = 0; k < o.rank; ++k) xi[int(perm[size_t(k)])] = o[k];
    return read(0, xi);
  }
  Splits propagate(InSplits in, InTypes, InTypes ot) const {
    SplitPoints s = SplitPoints::none(ot[0].shape);
    for (size_t k = 0; k < perm.size(); ++k) s.dims[k] = in[0].dims[size_t(perm[k])];
    return {s};
  }
  std::vector<Box> input_boxes(const Box& out, int, InTypes it, InTypes) const {
    std::vector<int> m(perm.size());
    for (size_t k = 0; k < perm.size(); ++k) m[size_t(perm[k])] = int(k);
    return {select_dims(out, it[0].shape, m)};
  }
  bool operator==(const Transpose&) const = default;
};

namespace detail {
/// Row-major re-indexing shared by every reshape-like op: out index -> flat -> in index.
template <class E, class R>
E reindex(const Index& o, const Shape& out_shape, const R& read) {
  return read(0, unflatten(flat_offset(o, out_shape), read.shape(0)));
}
/// Box propagation of any row-major reshape.
inline Splits reshape_splits(InSplits in, InTypes it, InTypes ot) {
  return {SplitPoints{cuts::reshape(it[0].shape, in[0].dims, ot[0].shape)}};
}
inline std::vector<Box> reshape_input(const Box& out, InTypes it, InTypes ot) {
  return {bounding_preimage(out, it[0].shape, [&](const Index& o) { return unflatten(flat_offset(o, ot[0].shape), it[0].shape); })};
}
}  // namespace detail

/// ONNX Reshape: `shape` may hold one -1 (inferred) and 0 (copy the input dim unless
/// allowzero). infer() resolves it to the explicit output shape.
struct Reshape {
  static constexpr std::string_view name = "Reshape";
  PET_ATTRS(shape, allowzero);
  static constexpr bool multilinear = true, layout = true;
  std::vector<int64_t> shape;
  bool allowzero = false;

  Types infer(InTypes in) {
    pet::detail::expect_arity(in, 1, 1);
    const Shape& x = in[0].shape;
    Shape out = shape;
    int infer_at = -1;
    int64_t known = 1;
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i] == 0 && !allowzero) {
        if (i >= x.size()) throw InvalidInput(cat("shape ", shape, " copies dimension ", i, " which input ", x, " lacks"));
        out[i] = x[i];
      }
      if (out[i] == -1) {
        if (infer_at >= 0) throw InvalidInput(cat("shape ", shape, " has more than one -1"));
        infer_at = int(i);
        continue;
      }
      if (out[i] < 0) throw InvalidInput(cat("shape ", shape, " has a negative dimension"));
      if (out[i] > kMaxElements || known > kMaxElements) throw InvalidInput(cat("shape ", shape, " has more than 2^36 elements"));
      known *= out[i];
    }
    int64_t n = numel(x);
    if (infer_at >= 0) {
      if (known == 0 || n % known)
        throw InvalidInput(cat("cannot reshape ", x, " (", n, " elements) into ", shape));
      out[size_t(infer_at)] = n / known;
    }
    if (numel(out) != n) throw InvalidInput(cat("cannot reshape ", x, " (", n, " elements) into ", shape));
    shape = out;
    // The resolved shape is explicit; a 0 in it is a real zero-size dim from now on.
    allowzero = std::find(out.begin(), out.end(), 0) != out.end();
    return {{in[0].dtype, out}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const { return detail::reindex<E>(o, shape, read); }
  Splits propagate(InSplits in, InTypes it, InTypes ot) const { return detail::reshape_splits(in, it, ot); }
  std::vector<Box> input_boxes(const Box& out, int, InTypes it, InTypes ot) const { return detail::reshape_input(out, it, ot); }
  bool operator==(const Reshape&) const = default;
};

/// out = x reshaped to [prod(dims < axis), prod(dims >= axis)]
struct Flatten {
  static constexpr std::string_view name = "Flatten";
  PET_ATTRS(axis);
  static constexpr bool multilinear = true, layout = true;
  int64_t axis = 1;
  Types infer(InTypes in) {
    pet::detail::expect_arity(in, 1, 1);
    const Shape& x = in[0].shape;
    int64_t r = int64_t(x.size());
    if (axis < -r || axis > r) throw InvalidInput(cat("axis ", axis, " is out of range for rank ", r));
    if (axis < 0) axis += r;
    int64_t a = 1, b = 1;
    for (int64_t i = 0; i < r; ++i) (i < axis ? a : b) *= x[size_t(i)];
    return {{in[0].dtype, {a, b}}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    const Shape& x = read.shape(0);
    int64_t b = 1;
    for (size_t i = size_t(axis); i < x.size(); ++i) b *= x[i];
    return read(0, unflatten(o[0] * b + o[1], x));
  }
  Splits propagate(InSplits in, InTypes it, InTypes ot) const { return detail::reshape_splits(in, it, ot); }
  std::vector<Box> input_boxes(const Box& out, int, InTypes it, InTypes ot) const { return detail::reshape_input(out, it, ot); }
  bool operator==(const Flatten&) const = default;
};

/// Removes the listed size-1 dims (all size-1 dims when axes is empty).
struct Squeeze {
  static constexpr std::string_view name = "Squeeze";
  PET_ATTRS(axes);
  static constexpr bool multilinear = true, layout = true;
  std::vector<int64_t> axes;
  Types infer(InTypes in) {
    pet::detail::expect_arity(in, 1, 1);
    const Shape& x = in[0].shape;
    if (axes.empty())
      for (size_t i = 0; i < x.size(); ++i)
        if (x[i] == 1) axes.push_back(int64_t(i));
    axes = pet::detail::normalize_axes(axes, int64_t(x.size()), "axes");
    std::sort(axes.begin(), axes.end());
    Shape out;
    for (size_t i = 0; i < x.size(); ++i) {
      bool sq = std::binary_search(axes.begin(), axes.end(), int64_t(i));
      if (sq && x[i] != 1) throw InvalidInput(cat("cannot squeeze dimension ", i, " of size ", x[i], " in shape ", x));
      if (!sq) out.push_back(x[i]);
    }
    return {{in[0].dtype, out}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    Index xi(int(read.shape(0).size()));
    for (int i = 0, oi = 0; i < xi.rank; ++i)
      xi[i] = std::binary_search(axes.begin(), axes.end(), int64_t(i)) ? 0 : o[oi++];
    return read(0, xi);
  }
  Splits propagate(InSplits in, InTypes it, InTypes ot) const { return detail::reshape_splits(in, it, ot); }
  std::vector<Box> input_boxes(const Box& out, int, InTypes it, InTypes) const {
    std::vector<int> m(it[0].shape.size(), -1);
    for (int i = 0, o = 0; i < int(m.size()); ++i)
      if (!std::binary_search(axes.begin(), axes.end(), int64_t(i))) m[size_t(i)] = o++;
    return {select_dims(out, it[0].shape, m)};
  }
  bool operator==(const Squeeze&) const = default;
};

/// Inserts size-1 dims at `axes` (positions in the output).
struct Unsqueeze {
  static constexpr std::string_view name = "Unsqueeze";
  PET_ATTRS(axes);
  static constexpr bool multilinear = true, layout = true;
  std::vector<int64_t> axes;
  Types infer(InTypes in) {
    pet::detail::expect_arity(in, 1, 1);
    const Shape& x = in[0].shape;
    int64_t r = int64_t(x.size() + axes.size());
    if (axes.empty()) throw InvalidInput("axes must not be empty");
    axes = pet::detail::normalize_axes(axes, r, "axes");
    std::sort(axes.begin(), axes.end());
    Shape out;
    for (int64_t i = 0, xi = 0; i < r; ++i)
      out.push_back(std::binary_search(axes.begin(), axes.end(), i) ? 1 : x[size_t(xi++)]);
    return {{in[0].dtype, out}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    Index xi(int(read.shape(0).size()));
    for (int i = 0, k = 0; i < o.rank; ++i)
      if (!std::binary_search(axes.begin(), axes.end(), int64_t(i))) xi[k++] = o[i];
    return read(0, xi);
  }
  Splits propagate(InSplits in, InTypes it, InTypes ot) const { return detail::reshape_splits(in, it, ot); }
  std::vector<Box> input_boxes(const Box& out, int, InTypes it, InTypes ot) const {
    std::vector<int> m;
    for (int i = 0; i < int(ot[0].shape.size()); ++i)
      if (!std::binary_search(axes.begin(), axes.end(), int64_t(i))) m.push_back(i);
    return {select_dims(out, it[0].shape, m)};
  }
  bool operator==(const Unsqueeze&) const = default;
};

/// pet's composite R/T op (paper section 4): out = reshape(transpose(reshape(x, split_shape),
/// perm), out_shape). One op for any reshape/transpose chain, so that the mutation generator
/// explores layouts in one step and the backend runs them as one strided copy.
///   out[o] = x[unflat_x(flat(j))],  j[perm[k]] = i[k],  i = unflat_T(flat(o))
/// where T = split_shape permuted by perm.
struct RT {
  static constexpr std::string_view name = "PetRT";
  PET_ATTRS(split_shape, perm, out_shape);
  static constexpr bool multilinear = true, layout = true;
  Shape split_shape;
  std::vector<int64_t> perm;
  Shape out_shape;

  Shape transposed_shape() const {
    Shape t;
    for (int64_t p : perm) t.push_back(split_shape[size_t(p)]);
    return t;
  }
  Types infer(InTypes in) {
    pet::detail::expect_arity(in, 1, 1);
    const Shape& x = in[0].shape;
    int64_t n = numel(x);
    if (split_shape.size() > size_t(kMaxRank))
      throw InvalidInput(cat("split shape ", split_shape, " has more than ", kMaxRank, " dims"));
    if (numel(split_shape) != n) throw InvalidInput(cat("split shape ", split_shape, " does not hold the ", n, " elements of ", x));
    if (numel(out_shape) != n) throw InvalidInput(cat("output shape ", out_shape, " does not hold the ", n, " elements of ", x));
    if (perm.size() != split_shape.size())
      throw InvalidInput(cat("perm ", perm, " has ", perm.size(), " entries for split shape ", split_shape));
    perm = pet::detail::normalize_axes(perm, int64_t(perm.size()), "perm");
    return {{in[0].dtype, out_shape}};
  }
  /// The input position that output position o copies: the flat offset of o, read as a
  /// position of the transposed split shape, is the split shape's position permuted.
  Index source(const Index& o, const Shape& in_shape) const {
    int64_t f = flat_offset(o, out_shape), src = 0;
    const int r = int(perm.size());
    std::array<int64_t, kMaxRank> strides{};
    int64_t st = 1;
    for (int k = r - 1; k >= 0; --k) strides[size_t(k)] = st, st *= split_shape[size_t(k)];
    for (int k = r - 1; k >= 0; --k) {  // digits of f in the transposed shape, innermost first
      const int64_t n = split_shape[size_t(perm[size_t(k)])];
      src += (f % n) * strides[size_t(perm[size_t(k)])];
      f /= n;
    }
    return unflatten(src, in_shape);
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const { return read(0, source(o, read.shape(0))); }
  /// Split, permute, merge: the reshape rules twice around a transpose.
  Splits propagate(InSplits in, InTypes it, InTypes) const {
    auto a = cuts::reshape(it[0].shape, in[0].dims, split_shape);
    std::vector<cuts::Cuts> t;
    for (int64_t p : perm) t.push_back(a[size_t(p)]);
    return {SplitPoints{cuts::reshape(transposed_shape(), t, out_shape)}};
  }
  std::vector<Box> input_boxes(const Box& out, int, InTypes it, InTypes) const {
    return {bounding_preimage(out, it[0].shape, [&](const Index& o) { return source(o, it[0].shape); })};
  }
  bool operator==(const RT&) const = default;
};

/// out[v] = x[v mod x.shape] (x repeated `repeats[d]` times along each dim d). Not
/// multilinear here: the verifier does not look through it.
struct Tile {
  static constexpr std::string_view name = "Tile";
  PET_ATTRS(repeats);
  static constexpr bool multilinear = false, layout = true;
  std::vector<int64_t> repeats;
  Types infer(InTypes in) const {
    pet::detail::expect_arity(in, 1, 1);
    const Shape& x = in[0].shape;
    if (repeats.size() != x.size()) throw InvalidInput(cat("repeats ", repeats, " must have one value per input dim (", x.size(), ")"));
    Shape out;
    for (size_t i = 0; i < x.size(); ++i) {
      if (repeats[i] < 0) throw InvalidInput(cat("repeats ", repeats, " must not be negative"));
      if (repeats[i] > 0 && x[i] > std::numeric_limits<int64_t>::max() / repeats[i]) throw InvalidInput(cat("repeats ", repeats, " overflow"));
      out.push_back(x[i] * repeats[i]);
    }
    return {{in[0].dtype, out}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    const Shape& x = read.shape(0);
    Index xi(o.rank);
    for (int i = 0; i < o.rank; ++i) xi[i] = o[i] % x[size_t(i)];
    return read(0, xi);
  }
  bool operator==(const Tile&) const = default;
};

/// out = x broadcast to bcast(x.shape, shape)
struct Expand {
  static constexpr std::string_view name = "Expand";
  PET_ATTRS(shape);
  static constexpr bool multilinear = true, layout = true;
  std::vector<int64_t> shape;
  Types infer(InTypes in) {
    pet::detail::expect_arity(in, 1, 1);
    shape = broadcast_shapes(in[0].shape, shape, "input and shape");
    return {{in[0].dtype, shape}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const { return read(0, broadcast_index(o, read.shape(0))); }
  Splits propagate(InSplits in, InTypes it, InTypes ot) const {
    SplitPoints s = SplitPoints::none(ot[0].shape);
    cuts::add_broadcast(s.dims, ot[0].shape, it[0].shape, in[0].dims);
    return {s};
  }
  std::vector<Box> input_boxes(const Box& out, int, InTypes it, InTypes ot) const {
    std::vector<int> m(it[0].shape.size(), -1);
    size_t off = ot[0].shape.size() - m.size();
    for (size_t d = 0; d < m.size(); ++d)
      if (it[0].shape[d] != 1) m[d] = int(off + d);
    return {select_dims(out, it[0].shape, m)};
  }
  bool operator==(const Expand&) const = default;
};

}  // namespace pet::ops
