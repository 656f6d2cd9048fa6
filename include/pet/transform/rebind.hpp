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
///
/// A guide says what some of g's nodes become: `base` is a program g came from (the model
/// as imported, or canonicalised) and `there` the same program at the new shapes (the model
/// imported there: its folded shape constants, a Reshape's target computed from Shape(x) at
/// import, are right there, where the rules above can only guess). A node of g that `base`
/// has under its name, with the same op and attributes and the same input shapes, takes the
/// op of `there`'s node of that name where that node has the op kind and the input shapes g's
/// node now has; a constant of g that `base` has under its name, of the same type and values,
/// becomes `there`'s constant of that name. Of several guides,
/// the first that knows a node or constant says; the other nodes follow the rules above.
struct RebindGuide {
  const Graph* base = nullptr;
  const Graph* there = nullptr;
};
Graph rebind(const Graph& g, const std::map<std::string, Shape>& input_shapes, const std::vector<RebindGuide>& guides = {});

/// Where a reshape of `from` to `target` goes when its input becomes `to` (same rank as
/// `from`), by the rule above; nullopt where it is not well defined.
std::optional<Shape> follow_reshape(const Shape& from, const Shape& to, const Shape& target);

}  // namespace pet::transform
