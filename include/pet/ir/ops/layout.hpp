#pragma once
/// Layout operators: they move elements and compute nothing (all linear).
#include <algorithm>
#include <array>
#include <vector>

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
/// Keys' cubic convolution weights (parameter a) of the neighbours x0 - 1 .. x0 + 2 of the
/// point x0 + t, 0 <= t < 1 (Resize's and GridSample's cubic modes).
template <class E>
std::array<E, 4> cubic_weights(E t, E a) {
  auto near = [&](E d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };        // |d| <= 1
  auto far = [&](E d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };  // 1 < |d| < 2
  return {far(t + 1), near(t), near(1 - t), far(2 - t)};
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
      if (out[i] > kMaxElements || known > kMaxElements) throw Unsupported(cat("shape ", shape, " has more than 2^36 elements (the most pet supports in one tensor)"));
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

/// ONNX Resize (opsets 11-19), modes nearest, linear and cubic (N-linear / N-cubic over
/// every resized dim). Per dim d with input extent n, output extent m and scale c (given, or
/// m / n as float when sizes are given), output coordinate o maps to the input coordinate
///   half_pixel           (o + 0.5) / c - 0.5
///   half_pixel_symmetric n / 2 * (1 - m / (c n)) + (o + 0.5) / c - 0.5
///   pytorch_half_pixel   m > 1 ? (o + 0.5) / c - 0.5 : 0
///   align_corners        m > 1 ? o (n - 1) / (m - 1) : 0
///   asymmetric           o / c
///   tf_half_pixel_for_nn (o + 0.5) / c
///   tf_crop_and_resize   m > 1 ? s (n - 1) + o (e - s)(n - 1) / (m - 1) : (s + e) / 2 (n - 1), with
///                        s, e the dim's region of interest (roi: starts, then ends, as
///                        fractions of the extent); an output element any of whose
///                        coordinates falls outside [0, n - 1] is extrapolation_value, and
///                        without sizes the output extent is floor(n (e - s) c)
/// (computed in float, as ONNX Runtime does), except that a dim of scale 1 and unchanged
/// extent reads its own position in every mode but tf_crop_and_resize (ONNX Runtime skips
/// such dims; tf_half_pixel_for_nn under ceil would move them by one). nearest rounds it (nearest_mode: round half
/// down or up, floor, ceil) and clamps to [0, n - 1]. linear clamps it to [0, n - 1] and
/// weighs x0 = floor and x0 + 1 (clamped) by 1 - t and t (t = x - x0). cubic weighs x0 - 1 ..
/// x0 + 2 (indices clamped: edge padding) by Keys' kernel with a = cubic_coeff_a; with
/// exclude_outside the weights of indices outside [0, n - 1] are dropped and the rest
/// renormalised. Output extents: sizes, or floor(n c). antialias and keep_aspect_ratio_policy
/// other than stretch are refused at import. Not multilinear here
/// (the verifier does not look through it).
struct Resize {
  enum class Mode { Nearest, Linear, Cubic };
  enum class Coord { HalfPixel, HalfPixelSymmetric, PytorchHalfPixel, AlignCorners, Asymmetric, TfHalfPixelForNN, TfCropAndResize };
  enum class Round { PreferFloor, PreferCeil, Floor, Ceil };
  static constexpr std::string_view name = "Resize";
  PET_ATTRS(mode, coord, nearest_mode, cubic_coeff_a, exclude_outside, scales, sizes, axes, by_sizes, roi, extrapolation_value);
  static constexpr bool multilinear = false, layout = true;
  Mode mode = Mode::Nearest;
  Coord coord = Coord::HalfPixel;
  Round nearest_mode = Round::PreferFloor;
  float cubic_coeff_a = -0.75f;
  bool exclude_outside = false;
  std::vector<double> scales;   ///< one per dim (empty: from sizes)
  std::vector<int64_t> sizes;   ///< output shape (empty: from scales); infer() fills both
  std::vector<int64_t> axes;    ///< opset 18: the dims scales / sizes are for (infer() expands)
  bool by_sizes = false;        ///< the model gave sizes (the export writes what it was given)
  std::vector<double> roi;      ///< tf_crop_and_resize: starts then ends, per dim (or per axis in axes); float values
  float extrapolation_value = 0.f;  ///< tf_crop_and_resize: the value outside the input

  Types infer(InTypes in) {
    pet::detail::expect_arity(in, 1, 1);
    pet::detail::expect_float(in, 0, "input X");
    const Shape& x = in[0].shape;
    // Once inferred both are set and by_sizes says which was given (infer may run again).
    if (scales.empty() && sizes.empty()) throw InvalidInput("Resize needs scales or sizes");
    if (scales.empty() != sizes.empty()) by_sizes = !sizes.empty();
    const bool crop = coord == Coord::TfCropAndResize;
    if (crop && roi.size() != 2 * (axes.empty() ? x.size() : axes.size()))
      throw InvalidInput(cat("roi has ", roi.size(), " values; tf_crop_and_resize needs a start and an end per ", axes.empty() ? "dim" : "axis", " (",
                             2 * (axes.empty() ? x.size() : axes.size()), ")"));
    if (!axes.empty()) {  // scales / sizes of the listed dims; the others keep their extent
      const std::vector<int64_t> given = by_sizes ? sizes : std::vector<int64_t>{};
      std::vector<double> full_roi;
      if (crop) {  // the other dims: the whole extent
        full_roi.assign(x.size(), 0.0);
        full_roi.resize(2 * x.size(), 1.0);
      }
      const std::vector<double> gscales = scales;
      if ((by_sizes ? given.size() : gscales.size()) != axes.size())
        throw InvalidInput(cat(by_sizes ? "sizes" : "scales", " has a value per axis in axes ", axes, " (", axes.size(), "), got ",
                               by_sizes ? given.size() : gscales.size()));
      std::vector<int64_t> full_sizes(x.begin(), x.end());
      std::vector<double> full_scales(x.size(), 1.0);
      std::vector<bool> seen(x.size(), false);
      for (size_t i = 0; i < axes.size(); ++i) {
        int64_t a = axes[i] < 0 ? axes[i] + int64_t(x.size()) : axes[i];
        if (a < 0 || a >= int64_t(x.size()) || seen[size_t(a)]) throw InvalidInput(cat("axes ", axes, " for an input of rank ", x.size()));
        seen[size_t(a)] = true;
        if (crop) full_roi[size_t(a)] = roi[i], full_roi[x.size() + size_t(a)] = roi[axes.size() + i];
        if (by_sizes) full_sizes[size_t(a)] = given[i];
        else full_scales[size_t(a)] = gscales[i];
      }
      axes.clear();
      if (crop) roi = full_roi;
      if (by_sizes) sizes = full_sizes;
      else scales = full_scales;
    }
    if (!by_sizes) {
      if (scales.size() != x.size()) throw InvalidInput(cat("scales has ", scales.size(), " values for an input of rank ", x.size()));
      sizes.clear();
      for (size_t d = 0; d < x.size(); ++d) {
        if (!(scales[d] > 0) || !std::isfinite(scales[d])) throw InvalidInput(cat("scales ", scales[d], " must be positive"));
        const double part = crop ? double(float(roi[x.size() + d])) - double(float(roi[d])) : 1.0;  // (tf_crop_and_resize: the region's share)
        const double m = std::floor(double(x[d]) * part * double(float(scales[d])));
        if (!(m >= 1)) throw InvalidInput(cat("scale ", scales[d], crop ? cat(" and roi ", roi) : std::string(), " give dim ", d, " no extent"));
        if (m > double(kMaxElements)) throw InvalidInput(cat("scale ", scales[d], " makes dim ", d, " too large"));
        sizes.push_back(int64_t(m));
      }
    } else {
      if (sizes.size() != x.size()) throw InvalidInput(cat("sizes has ", sizes.size(), " values for an input of rank ", x.size()));
      for (int64_t v : sizes)
        if (v <= 0) throw InvalidInput(cat("sizes ", sizes, " must be positive"));
      scales.clear();
      for (size_t d = 0; d < x.size(); ++d) scales.push_back(double(float(sizes[d]) / float(x[d])));
    }
    return {{in[0].dtype, sizes}};
  }

  /// Whether half_pixel_symmetric is plain half_pixel along dim d of an input of shape x (its
  /// adjustment m / (c n) is exactly 1, as when sizes were given).
  bool symmetric_is_half_pixel(const Shape& x, size_t d) const { return float(sizes[d]) / (float(scales[d]) * float(x[d])) == 1.f; }

  /// Input coordinate of output coordinate o along dim d of input extent n, output extent m.
  float source(int64_t o, int64_t n, int64_t m, double scale, size_t d = 0) const {
    const float c = float(scale), of = float(o);
    switch (coord) {
      case Coord::HalfPixel: return (of + 0.5f) / c - 0.5f;
      case Coord::HalfPixelSymmetric: {
        const float adj = float(m) / (c * float(n)), center = float(n) / 2;
        return center * (1 - adj) + (of + 0.5f) / c - 0.5f;
      }
      case Coord::PytorchHalfPixel: return m > 1 ? (of + 0.5f) / c - 0.5f : 0.f;
      case Coord::AlignCorners: return m > 1 ? of * float(n - 1) / float(m - 1) : 0.f;
      case Coord::Asymmetric: return of / c;
      case Coord::TfHalfPixelForNN: return (of + 0.5f) / c;
      case Coord::TfCropAndResize: {
        const float st = float(roi[d]), en = float(roi[roi.size() / 2 + d]), last = float(n - 1);
        return m > 1 ? st * last + of * (en - st) * last / float(m - 1) : 0.5f * (st + en) * last;
      }
    }
    return 0;
  }
  int64_t nearest(float v, int64_t n) const {
    float r;
    switch (nearest_mode) {
      case Round::PreferFloor: r = v == std::floor(v) + 0.5f ? std::floor(v) : std::round(v); break;
      case Round::PreferCeil: r = v == std::floor(v) + 0.5f ? std::ceil(v) : std::round(v); break;
      case Round::Floor: r = std::floor(v); break;
      default: r = std::ceil(v); break;
    }
    return std::clamp<int64_t>(int64_t(r), 0, n - 1);
  }

  /// The input indices and weights dim d of output coordinate o reads (1, 2 or 4 of them).
  template <class E>
  int taps(int64_t o, int64_t n, int64_t m, double scale, std::array<int64_t, 4>& idx, std::array<E, 4>& w, size_t d = 0) const {
    if (m == n && float(scale) == 1.f && coord != Coord::TfCropAndResize) {
      // An unresized dim reads its own position, as ONNX Runtime does (it skips dims of
      // scale 1): tf_half_pixel_for_nn's o + 0.5 would otherwise round up to o + 1 under
      // ceil and round_prefer_ceil, shifting batch and channels by one.
      idx[0] = o;
      w[0] = E(1);
      return 1;
    }
    const float v = source(o, n, m, scale, d);
    if (mode == Mode::Nearest) {
      idx[0] = nearest(v, n);
      w[0] = E(1);
      return 1;
    }
    if (mode == Mode::Linear) {
      const float c = std::clamp(v, 0.f, float(n - 1));
      idx[0] = std::min<int64_t>(int64_t(c), n - 1);
      idx[1] = std::min<int64_t>(idx[0] + 1, n - 1);
      const E t = E(c - float(idx[0]));
      w[0] = E(1) - t;
      w[1] = t;
      return t == E(0) || idx[1] == idx[0] ? 1 : 2;
    }
    const float x0 = std::floor(v);
    const std::array<E, 4> k = detail::cubic_weights(E(v - x0), E(cubic_coeff_a));
    E sum(0);
    for (int j = 0; j < 4; ++j) {
      const int64_t i = int64_t(x0) - 1 + j;
      idx[size_t(j)] = std::clamp<int64_t>(i, 0, n - 1);
      w[size_t(j)] = exclude_outside && (i < 0 || i >= n) ? E(0) : k[size_t(j)];
      sum += w[size_t(j)];
    }
    if (exclude_outside)
      for (auto& x : w) x /= sum;
    return 4;
  }

  template <class E, class R>
  E at(const Index& o, const R& read) const {
    if constexpr (!detail::is_real_v<E>) {
      pet::detail::require_ordered<E>(name);
      throw Unsupported("Resize takes float input only");
    } else {
      const Shape& x = read.shape(0);
      std::array<std::array<int64_t, 4>, kMaxRank> idx{};
      std::array<std::array<E, 4>, kMaxRank> w{};
      std::array<int, kMaxRank> count{};
      for (int d = 0; d < o.rank; ++d) {
        if (coord == Coord::TfCropAndResize) {  // outside the input: the extrapolation value
          const float v = source(o[d], x[size_t(d)], sizes[size_t(d)], scales[size_t(d)], size_t(d));
          if (v < 0 || v > float(x[size_t(d)] - 1)) return E(extrapolation_value);
        }
        count[size_t(d)] = taps<E>(o[d], x[size_t(d)], sizes[size_t(d)], scales[size_t(d)], idx[size_t(d)], w[size_t(d)], size_t(d));
      }
      // Every combination of taps (an odometer over the dims).
      std::array<int, kMaxRank> j{};
      Index xi(o.rank);
      E acc(0);
      for (;;) {
        E weight(1);
        for (int d = 0; d < o.rank; ++d) {
          xi[d] = idx[size_t(d)][size_t(j[size_t(d)])];
          weight *= w[size_t(d)][size_t(j[size_t(d)])];
        }
        acc += weight * read(0, xi);
        int d = o.rank - 1;
        for (; d >= 0; --d) {
          if (++j[size_t(d)] < count[size_t(d)]) break;
          j[size_t(d)] = 0;
        }
        if (d < 0) break;
      }
      return acc;
    }
  }
  int64_t flops(InTypes, InTypes out) const { return mode == Mode::Nearest ? 0 : (mode == Mode::Linear ? 4 : 16) * numel(out[0].shape); }
  bool operator==(const Resize&) const = default;
};

/// X [N, C, H, W] sampled at the points of grid [N, Ho, Wo, 2] (x, y normalised to [-1, 1]):
///   out[n, c, i, j] = X[n, c] interpolated at (y, x) = (denormalise(grid[n, i, j, 1], H),
///                     denormalise(grid[n, i, j, 0], W))
/// with denormalise(g, d) = (g + 1) / 2 * (d - 1) (align_corners) or ((g + 1) d - 1) / 2.
/// Nearest rounds the point half to even; Linear weighs the 2 x 2 neighbours, Cubic the
/// 4 x 4 (Keys, a = -0.75). A neighbour index i outside [0, d) reads 0 (Zeros), index
/// clamp(i, 0, d - 1) (Border) or i reflected at lo and hi (Reflection; [lo, hi] = [0, d - 1]
/// with align_corners, else [-0.5, d - 0.5]). As ONNX Runtime and PyTorch compute it: the
/// point itself is not moved (ONNX's Python reference also clamps it, which differs for
/// Cubic with Border padding near the edges).
struct GridSample {
  enum class Mode { Linear, Nearest, Cubic };
  enum class Padding { Zeros, Border, Reflection };
  static constexpr std::string_view name = "GridSample";
  PET_ATTRS(mode, padding, align_corners);
  static constexpr bool multilinear = false;
  Mode mode = Mode::Linear;
  Padding padding = Padding::Zeros;
  bool align_corners = false;

  Types infer(InTypes in) const {
    pet::detail::expect_arity(in, 2, 2);
    pet::detail::expect_float(in, 0, "input X");
    pet::detail::expect_float(in, 1, "grid");
    const Shape &x = in[0].shape, &g = in[1].shape;
    if (x.size() != 4) throw InvalidInput(cat("X ", x, " must have rank 4 (N, C, H, W)"));
    if (g.size() != 4 || g[3] != 2) throw InvalidInput(cat("grid ", g, " must have shape [N, H_out, W_out, 2]"));
    if (g[0] != x[0]) throw InvalidInput(cat("grid ", g, " and X ", x, " differ in batch"));
    return {{in[0].dtype, Shape{x[0], x[1], g[1], g[2]}}};
  }

  // Coordinates in float arithmetic, as ONNX Runtime and PyTorch compute them (a rounding
  // or a floor at a boundary follows theirs).
  /// The unnormalised coordinate of g along a dim of extent d (Nearest: rounded).
  float source(float g, int64_t d) const {
    const float v = align_corners ? (g + 1) / 2 * float(d - 1) : ((g + 1) * float(d) - 1) / 2;
    return mode == Mode::Nearest ? std::nearbyint(v) : v;
  }
  static float reflect(float v, float lo, float hi) {
    const float range = hi - lo;
    if (!(range > 0)) return lo;
    const float dv = v < lo ? lo - v : v - hi;
    const int64_t k = int64_t(dv / range);
    const float r = dv - float(k) * range;
    if (v < lo) return k % 2 == 0 ? lo + r : hi - r;
    return k % 2 == 0 ? hi - r : lo + r;
  }
  /// The index a neighbour i along a dim of extent d reads, or -1 for a zero.
  int64_t fetch(int64_t i, int64_t d) const {
    if (i >= 0 && i < d) return i;
    if (padding == Padding::Zeros) return -1;
    if (padding == Padding::Border) return std::clamp<int64_t>(i, 0, d - 1);
    const float lo = align_corners ? 0.f : -0.5f, hi = align_corners ? float(d - 1) : float(d) - 0.5f;
    return std::clamp<int64_t>(int64_t(reflect(float(i), lo, hi)), 0, d - 1);
  }
  template <class E>
  int taps(float v, int64_t d, std::array<int64_t, 4>& idx, std::array<E, 4>& w) const {
    // A point far outside reads what one nearer reads, from an index that fits: the same
    // zeros or edge beyond [-3, d + 2] (Zeros, Border); the same reflections a whole number of
    // periods 2 (hi - lo) nearer (Reflection). NaN reads as a point far below.
    const float lo = align_corners ? 0.f : -0.5f, hi = align_corners ? float(d - 1) : float(d) - 0.5f, period = 2 * (hi - lo);
    if (std::isnan(v)) {
      v = -3.f;
    } else if (padding == Padding::Reflection && period > 0) {
      if (v < lo - period || v > hi + period) {
        v = lo + std::fmod(v - lo, period);
        if (v < lo) v += period;
      }
    } else {
      v = std::clamp(v, -3.f, float(d) + 2);
    }
    if (mode == Mode::Nearest) {
      idx[0] = fetch(int64_t(v), d);
      w[0] = E(1);
      return 1;
    }
    const float f = std::floor(v);
    const E t = E(v - f);
    const int64_t i0 = int64_t(f);
    if (mode == Mode::Linear) {
      idx[0] = fetch(i0, d), idx[1] = fetch(i0 + 1, d);
      w[0] = E(1) - t, w[1] = t;
      return 2;
    }
    const std::array<E, 4> k = detail::cubic_weights(t, E(-0.75));
    for (int j = 0; j < 4; ++j) idx[size_t(j)] = fetch(i0 - 1 + j, d), w[size_t(j)] = k[size_t(j)];
    return 4;
  }

  template <class E, class R>
  E at(const Index& o, const R& read) const {
    if constexpr (!detail::is_real_v<E>) {
      pet::detail::require_ordered<E>(name);
      throw Unsupported("GridSample takes float input only");
    } else {
      const Shape& x = read.shape(0);
      const float gx = float(read(1, Index{o[0], o[2], o[3], 0})), gy = float(read(1, Index{o[0], o[2], o[3], 1}));
      std::array<int64_t, 4> yi{}, xi{};
      std::array<E, 4> yw{}, xw{};
      const int ny = taps<E>(source(gy, x[2]), x[2], yi, yw), nx = taps<E>(source(gx, x[3]), x[3], xi, xw);
      E acc(0);
      for (int a = 0; a < ny; ++a) {
        if (yi[size_t(a)] < 0) continue;
        E row(0);
        for (int b = 0; b < nx; ++b)
          if (xi[size_t(b)] >= 0) row += xw[size_t(b)] * read(0, Index{o[0], o[1], yi[size_t(a)], xi[size_t(b)]});
        acc += yw[size_t(a)] * row;
      }
      return acc;
    }
  }
  int64_t flops(InTypes, InTypes out) const { return mode == Mode::Nearest ? 0 : (mode == Mode::Linear ? 8 : 32) * numel(out[0].shape); }
  bool operator==(const GridSample&) const = default;
};

/// RoiAlign (opsets 10, 16): out[r, c, ph, pw] pools bilinear samples of X[b, c] (b =
/// batch_indices[r]) in bin (ph, pw) of region r. The region is rois[r] = (x1, y1, x2, y2)
/// times spatial_scale, less 0.5 with half_pixel (opset 16's default; without it, opset 10's
/// only form, the region is at least 1 x 1), split into output_height x output_width bins;
/// each bin is sampled on a grid of sampling_ratio x sampling_ratio points (0: ceil of the
/// region's extent over the bins, per dim) at start + bin * size + (i + 0.5) * size / grid.
/// A point below -1 or beyond the extent has weight 0 on pixel (0, 0), as in ONNX Runtime (so
/// it reads 0 unless that pixel is inf or NaN); else it is clamped to [0, extent - 1] and read
/// bilinearly from its four neighbours. Avg: the points' mean; Max: the largest of every
/// point's four weighted neighbours (ONNX Runtime's and ONNX's reference rule). Coordinates
/// in float arithmetic, as ONNX Runtime computes them. H and W must be at least 1. A batch
/// index outside [0, N), a region that is not finite or one that needs over 2^20 points a bin
/// is an error when it runs.
struct RoiAlign {
  enum class Mode { Avg, Max };
  static constexpr std::string_view name = "RoiAlign";
  PET_ATTRS(mode, output_height, output_width, sampling_ratio, spatial_scale, half_pixel);
  static constexpr bool multilinear = false;
  Mode mode = Mode::Avg;
  int64_t output_height = 1, output_width = 1, sampling_ratio = 0;
  float spatial_scale = 1.f;
  bool half_pixel = true;

  Types infer(InTypes in) const {
    pet::detail::expect_arity(in, 3, 3);
    pet::detail::expect_float(in, 0, "input X");
    pet::detail::expect_float(in, 1, "rois");
    if (in[2].dtype != DType::Int64) throw InvalidInput(cat("batch_indices must be int64, got ", dtype_name(in[2].dtype)));
    const Shape &x = in[0].shape, &r = in[1].shape, &b = in[2].shape;
    if (x.size() != 4) throw InvalidInput(cat("X ", x, " must have rank 4 (N, C, H, W)"));
    if (x[2] < 1 || x[3] < 1) throw InvalidInput(cat("X ", x, " has no pixels to sample (H and W must be at least 1)"));
    if (r.size() != 2 || r[1] != 4) throw InvalidInput(cat("rois ", r, " must have shape [num_rois, 4]"));
    if (b.size() != 1 || b[0] != r[0]) throw InvalidInput(cat("batch_indices ", b, " must have shape [num_rois] = [", r[0], "]"));
    if (output_height < 1 || output_width < 1 || output_height > pet::detail::kMaxAttr || output_width > pet::detail::kMaxAttr)
      throw InvalidInput(cat("output_height ", output_height, " and output_width ", output_width, " must be in [1, 2^24]"));
    if (sampling_ratio < 0 || sampling_ratio > 1024) throw InvalidInput(cat("sampling_ratio ", sampling_ratio, " must be in [0, 1024]"));
    if (!std::isfinite(spatial_scale)) throw InvalidInput(cat("spatial_scale ", spatial_scale, " is not finite"));
    return {{DType::Float32, Shape{r[0], x[1], output_height, output_width}}};
  }

  /// A sample point's four neighbours (rows y0, y1, columns x0, x1) and their weights, in
  /// ONNX Runtime's order: (y0, x0), (y0, x1), (y1, x0), (y1, x1); outside: all at (0, 0),
  /// weights 0.
  struct Sample {
    int64_t y0 = 0, y1 = 0, x0 = 0, x1 = 0;
    std::array<float, 4> w{};
  };
  /// Roi r's batch index b, checked against the batch of n images.
  static int64_t check_batch(int64_t b, int64_t r, int64_t n) {
    if (b < 0 || b >= n) throw InvalidInput(cat("RoiAlign: batch index ", b, " of roi ", r, " is outside [0, ", n, ")"));
    return b;
  }
  /// The sample points of bin (ph, pw) of region `roi` (x1, y1, x2, y2; region r) over an
  /// H x W image, and the count the average divides by.
  int64_t samples(const std::array<float, 4>& roi, int64_t r, int64_t ph, int64_t pw, int64_t H, int64_t W, std::vector<Sample>& out) const {
    const float off = half_pixel ? 0.5f : 0.f;
    const float sw = roi[0] * spatial_scale - off, sh = roi[1] * spatial_scale - off;
    float rw = roi[2] * spatial_scale - off - sw, rh = roi[3] * spatial_scale - off - sh;
    if (!std::isfinite(sw) || !std::isfinite(sh) || !std::isfinite(rw) || !std::isfinite(rh))
      throw InvalidInput(cat("RoiAlign: roi ", r, " (", roi[0], ", ", roi[1], ", ", roi[2], ", ", roi[3], ") is not finite"));
    if (!half_pixel) rw = std::max(rw, 1.f), rh = std::max(rh, 1.f);
    const float bh = rh / float(output_height), bw = rw / float(output_width);
    const double gh = sampling_ratio > 0 ? double(sampling_ratio) : std::ceil(double(rh / float(output_height)));
    const double gw = sampling_ratio > 0 ? double(sampling_ratio) : std::ceil(double(rw / float(output_width)));
    if (std::max(gh, 0.) * std::max(gw, 0.) > double(1 << 20))
      throw InvalidInput(cat("RoiAlign: roi ", r, " (", roi[0], ", ", roi[1], ", ", roi[2], ", ", roi[3], ") needs ", gh, " x ", gw,
                             " sampling points a bin, more than 2^20"));
    const int64_t grid_h = int64_t(gh), grid_w = int64_t(gw);
    out.clear();
    for (int64_t iy = 0; iy < grid_h; ++iy) {
      const float yy = sh + float(ph) * bh + (float(iy) + .5f) * bh / float(grid_h);
      for (int64_t ix = 0; ix < grid_w; ++ix) {
        const float xx = sw + float(pw) * bw + (float(ix) + .5f) * bw / float(grid_w);
        Sample s;
        if (!(yy < -1.f || yy > float(H) || xx < -1.f || xx > float(W))) {
          float y = std::max(yy, 0.f), x = std::max(xx, 0.f);
          s.y0 = int64_t(y), s.x0 = int64_t(x);
          if (s.y0 >= H - 1) s.y0 = s.y1 = H - 1, y = float(s.y0);
          else s.y1 = s.y0 + 1;
          if (s.x0 >= W - 1) s.x0 = s.x1 = W - 1, x = float(s.x0);
          else s.x1 = s.x0 + 1;
          const float ly = y - float(s.y0), lx = x - float(s.x0), hy = 1.f - ly, hx = 1.f - lx;
          s.w = {hy * hx, hy * lx, ly * hx, ly * lx};
        }
        out.push_back(s);
      }
    }
    return std::max<int64_t>(grid_h * grid_w, 1);
  }
  /// The bin's value from its samples, reading X's plane through v(y, x).
  template <class E, class V>
  E pool(const std::vector<Sample>& ss, int64_t count, V&& v) const {
    E acc(0);
    bool first = true;
    for (const Sample& s : ss) {
      if (mode == Mode::Avg) {
        acc += E(s.w[0]) * v(s.y0, s.x0) + E(s.w[1]) * v(s.y0, s.x1) + E(s.w[2]) * v(s.y1, s.x0) + E(s.w[3]) * v(s.y1, s.x1);
      } else {
        const E m = std::max(std::max(std::max(E(s.w[0]) * v(s.y0, s.x0), E(s.w[1]) * v(s.y0, s.x1)), E(s.w[2]) * v(s.y1, s.x0)),
                             E(s.w[3]) * v(s.y1, s.x1));
        acc = first ? m : std::max(acc, m);
        first = false;
      }
    }
    return mode == Mode::Avg ? acc / E(count) : acc;
  }
  /// Region r's four coordinates and its image (its batch index, checked).
  template <class R>
  int64_t region(int64_t r, const R& read, std::array<float, 4>& roi) const {
    for (int64_t k = 0; k < 4; ++k) roi[size_t(k)] = float(read.real(1, Index{r, k}));
    return check_batch(read.ints(2, Index{r}), r, read.shape(0)[0]);
  }

  template <class E, class R>
  E at(const Index& o, const R& read) const {
    if constexpr (!detail::is_real_v<E>) {
      pet::detail::require_ordered<E>(name);
      throw Unsupported("RoiAlign takes float input only");
    } else {
      const Shape& x = read.shape(0);
      std::array<float, 4> roi{};
      const int64_t b = region(o[0], read, roi);
      std::vector<Sample> ss;
      const int64_t count = samples(roi, o[0], o[2], o[3], x[2], x[3], ss);
      return pool<E>(ss, count, [&](int64_t y, int64_t xx) { return read(0, Index{b, o[1], y, xx}); });
    }
  }
  int64_t flops(InTypes, InTypes out) const { return 8 * numel(out[0].shape); }
  bool operator==(const RoiAlign&) const = default;
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
