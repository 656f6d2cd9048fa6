#pragma once
/// The same program at other input shapes. `pet optimize` optimises a program at one value of
/// each symbolic dimension (a batch `N` bound to 1 at import); to write a program that takes
/// every value, it rebinds the optimised program at other values and compares what the copies
/// compute with the original model's there (tools/pet/optimize.cpp, onnx::generalise).
#include <map>
#include <string>

#include "pet/ir/graph.hpp"

namespace pet::transform {

/// A copy of g with the inputs named in `input_shapes` at those shapes (the others keep theirs),
/// its nodes added in g's topological order under their names, so that two rebinds of one
/// graph have the same tensors and nodes in the same order. Ops whose attributes spell out
/// extents follow the new shapes where that is well defined:
///  - Reshape and PetRT (each of its two reshapes): a target dim equal to a changed input dim
///    at the same position keeps following it (ONNX's 0); otherwise the one target dim that
///    holds the changed input dim as a factor is scaled with it (ONNX's -1);
///  - Slice: a changed dim taken whole (from 0, step 1) stays whole;
///  - Expand: a target dim equal to a changed input dim follows it;
///  - Patch: a changed dim must be covered whole by the patch;
///  - Resize: scales stay; sizes follow a changed dim only where it is not resized.
/// Anything else that does not carry over throws Unsupported naming the node and why (a Split
/// of a changed dim, a Reshape that drops a dim of size 1 that grows, a shape check that fails
/// at the new shapes): the program is specific to its shapes. Whether the copy computes, at the
/// new shapes, what the original model computes there is the caller's to check.
Graph rebind(const Graph& g, const std::map<std::string, Shape>& input_shapes);

/// Where a reshape of `from` to `target` goes when its input becomes `to` (same rank as
/// `from`), by the rule above; nullopt where it is not well defined.
std::optional<Shape> follow_reshape(const Shape& from, const Shape& to, const Shape& target);

}  // namespace pet::transform
