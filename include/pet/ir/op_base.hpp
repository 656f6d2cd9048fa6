#pragma once
/// Shared vocabulary of operator definitions (see include/pet/ir/ops/*.hpp).
///
/// Every op is a struct with:
///  - `name` (the ONNX op_type) and `multilinear` (paper section 3: linear in each input, so
///    that the verifier and mutator may look inside it),
///  - attributes as public fields (ONNX names, ONNX defaults),
///  - `infer(inputs)`: checks input types, resolves attributes that depend on input shapes
///    (negative axes, auto_pad, Reshape's 0/-1, Slice clamping) and returns the output types.
///    Errors are InvalidInput sentences without the op's name; the graph prefixes
///    "Op 'node': ".
///  - `at<E>(out_index, read)`: the element formula, generic over the element type E (float,
///    double, a finite field Fp, or int64 for shape arithmetic). `read(i, idx)` returns element
///    `idx` of data input i; `read.ints(i, idx)` reads an integer input; `read.shape(i)` its
///    shape. Ops with several outputs take the output number as well.
///  - multilinear ops also have `propagate(in_splits, in_types, out_types)` (box propagation:
///    the split points of each output, see ir/splits.hpp) and `input_boxes(out_box, k, in_types,
///    out_types)` (backward propagation: the region of each input that output k's box reads).
///  Fast whole-tensor kernels live in include/pet/eval and are tested against `at`.
#include <algorithm>
#include <cmath>
#include <span>
#include <string_view>
#include <tuple>
#include <vector>

#include "pet/core/hd.hpp"
#include "pet/core/field.hpp"
#include "pet/core/tensor.hpp"
#include "pet/ir/splits.hpp"
#include "pet/ir/tensor_type.hpp"

/// Lists an op's attributes, once: equality of programs, signatures, hashes, the profiler's
/// and the algorithm cache's keys and mutant de-duplication all derive from this list (see
/// ir/op.hpp), so an attribute missing here would make different programs look the same.
/// Every data member of an op is an attribute (resolved forms included); ops without any
/// write PET_ATTRS().
#define PET_ATTRS(...)                                      \
  auto attr_refs() const { return std::tie(__VA_ARGS__); } \
  auto attr_refs() { return std::tie(__VA_ARGS__); }       \
  static constexpr std::string_view attr_list = #__VA_ARGS__

namespace pet {

using Types = std::vector<TensorType>;
using InTypes = std::span<const TensorType>;
/// Split points of each input (propagate's argument) or each output (its result).
using Splits = std::vector<SplitPoints>;
using InSplits = std::span<const SplitPoints>;

enum class AutoPad : uint8_t { NotSet, SameUpper, SameLower, Valid };

namespace detail {

inline void expect_arity(InTypes in, size_t lo, size_t hi) {
  if (in.size() < lo || in.size() > hi) {
    if (lo == hi) throw InvalidInput(cat("expects ", lo, " input", lo == 1 ? "" : "s", ", got ", in.size()));
    throw InvalidInput(cat("expects ", lo, " to ", hi, " inputs, got ", in.size()));
  }
}
inline void expect_float(InTypes in, size_t i, std::string_view what) {
  if (!is_float(in[i].dtype))
    throw InvalidInput(cat(what, " must be float32, got ", dtype_name(in[i].dtype)));
}
inline void expect_rank(InTypes in, size_t i, size_t lo, size_t hi, std::string_view what) {
  size_t r = in[i].shape.size();
  if (r < lo || r > hi) {
    if (lo == hi) throw InvalidInput(cat(what, " must have rank ", lo, ", got shape ", in[i].shape));
    throw InvalidInput(cat(what, " must have rank ", lo, " to ", hi, ", got shape ", in[i].shape));
  }
}
inline void expect_same_dtype(InTypes in, size_t a, size_t b) {
  if (in[a].dtype != in[b].dtype)
    throw InvalidInput(cat("input ", a, " is ", dtype_name(in[a].dtype), " but input ", b, " is ",
                           dtype_name(in[b].dtype)));
}
/// Fills an attribute list that ONNX lets default to `n` copies of `v`; checks its length.
inline void default_list(std::vector<int64_t>& l, size_t n, int64_t v, std::string_view what) {
  if (l.empty()) l.assign(n, v);
  if (l.size() != n) throw InvalidInput(cat(what, " has ", l.size(), " values but ", n, " are needed"));
}
/// Largest value pet accepts for a stride, dilation, pad or window size (keeps all index
/// arithmetic far from int64 overflow).
inline constexpr int64_t kMaxAttr = int64_t(1) << 24;
inline void expect_bounded(const std::vector<int64_t>& v, std::string_view what) {
  for (int64_t x : v)
    if (x > kMaxAttr || x < -kMaxAttr) throw InvalidInput(cat(what, " ", v, " has a value beyond +-2^24"));
}

/// Normalises a list of axes; rejects duplicates.
inline std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, int64_t rank, std::string_view who) {
  std::vector<int64_t> r;
  for (int64_t a : axes) {
    int64_t n = normalize_axis(a, rank, who);
    for (int64_t x : r)
      if (x == n) throw InvalidInput(cat(who, ": axis ", a, " is repeated in ", axes));
    r.push_back(n);
  }
  return r;
}

/// Non-multilinear element functions have no meaning in a finite field.
template <class E>
PET_HD void require_ordered(std::string_view op) {
  if constexpr (is_field_v<E>)
    PET_HD_THROW(Unsupported(cat(op, " is not multilinear and cannot be evaluated over a finite field")));
}
template <class E>
constexpr bool is_real_v = std::is_floating_point_v<E>;

}  // namespace detail

namespace ops::detail {
using namespace pet::detail;
}

}  // namespace pet
