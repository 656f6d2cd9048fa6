#pragma once
/// Data-movement ops as box copies, for every backend: the R/T op, Transpose, Slice, Split,
/// Pad (constant, edge, reflect), Patch, Expand, Tile and Concat each become a few copies of a box of elements
///   dst[dst_offset + i . dst_strides] = src[src_offset + i . src_strides],  i over `shape`
/// (element strides of row-major buffers; a stride 0 broadcasts), some after filling their
/// output. The cpu backend runs them with pet's strided copies (kernels/cpu/copy.hpp), the
/// cuda backend with its copy kernels (kernels/cuda), and tests run them on the host against
/// the reference interpreter: the index arithmetic is written here once.
#include <optional>
#include <vector>

#include "pet/ir/op.hpp"

namespace pet::backend {

struct BoxCopy {
  int src = 0;  ///< which input of the op is read
  int dst = 0;  ///< which output is written
  int64_t src_offset = 0, dst_offset = 0;
  std::vector<int64_t> src_strides, dst_strides;
  Shape shape;                ///< the box (may be empty: a Pad that crops everything)
  bool fill_first = false;    ///< fill the whole output with fill_value before this copy
  float fill_value = 0;
  bool over_previous = false; ///< writes into what an earlier copy of the plan wrote (Patch)
  std::string what;           ///< "strided copy", "copy of part 1", ... (plans, for people)
};

/// The op's box copies (in order), or nullopt when the op is not a data movement that maps
/// to box copies (or not in this form: a reflect Pad with negative pads).
std::optional<std::vector<BoxCopy>> copy_plan(const Op& op, InTypes in, InTypes out);

/// Runs a plan on host buffers (one per input and output, row-major, float): the meaning of
/// a plan, for tests and for backends without a kernel of their own.
void run_copy_plan(const std::vector<BoxCopy>& plan, const std::vector<const float*>& in, const std::vector<float*>& out,
                   const std::vector<int64_t>& out_sizes);

}  // namespace pet::backend
