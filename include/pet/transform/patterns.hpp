#pragma once
/// Small matching helpers shared by graph passes and backends' fusion matchers.
#include <optional>

#include "pet/ir/graph.hpp"

namespace pet::transform {

/// A float scalar constant operand of binary node n (the other operand being t), if n's
/// output has t's shape (no broadcast growth); else nullopt.
std::optional<float> scalar_operand(const Graph& g, NodeId n, TensorId t);
/// The only reader of t if it has exactly one and is not a graph output, else -1.
NodeId sole_reader(const Graph& g, TensorId t);
/// Every reader of `from` reads `to`; a graph output keeps its name (so the program's
/// interface does not change) unless `to` is a graph input or output already.
void redirect(Graph& g, TensorId from, TensorId to);
/// Erases the nodes of a matched pattern, readers before producers; InternalError if a node
/// is still read from outside the set.
void erase_all(Graph& g, std::vector<NodeId> nodes);

}  // namespace pet::transform
