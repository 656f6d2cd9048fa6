#pragma once
/// A tensor program: tensors (graph inputs, constants, node outputs) and nodes (an Op over
/// input tensors producing output tensors). Nodes are type-checked when added, so a Graph
/// is always well-typed; topological order and cycle detection use Boost.Graph.
#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "pet/ir/const_value.hpp"
#include "pet/ir/op.hpp"

namespace pet {

using TensorId = int32_t;
using NodeId = int32_t;

struct TensorInfo {
  std::string name;
  TensorType type;
  std::optional<ConstValue> value;  ///< set for constants (initializers)
  NodeId producer = -1;             ///< -1 for graph inputs and constants
  int output_index = 0;             ///< which output of the producer
  bool is_constant() const { return value.has_value(); }
};

struct Node {
  std::string name;
  Op op;
  std::vector<TensorId> inputs, outputs;
};

class Graph {
 public:
  /// Adds a graph input. Names must be unique among tensors.
  TensorId add_input(std::string name, TensorType type);
  /// Adds a constant (an initializer); dtype must agree with the storage.
  TensorId add_constant(std::string name, Tensor<float> value);
  TensorId add_constant(std::string name, DType dtype, Tensor<int64_t> value);
  TensorId add_constant(std::string name, DType dtype, ConstValue value);
  /// Type-checks `op` on the inputs (resolving its attributes), adds the node and returns its
  /// output tensors. Output names default to "<node>" / "<node>:k"; errors are InvalidInput
  /// "<Op> '<node>': <reason>".
  std::vector<TensorId> add_node(std::string name, Op op, std::vector<TensorId> inputs,
                                 std::vector<std::string> output_names = {});
  void add_output(TensorId t);
  /// Renames a tensor (the new name must be unused).
  void rename(TensorId t, const std::string& name);

  // ------------------------------------------------------------ edits (passes)
  /// A reader of a tensor: input `slot` of node `node`.
  struct Use {
    NodeId node;
    int slot;
    bool operator==(const Use&) const = default;
  };
  /// The live nodes reading t, with the input slot (kept up to date by every edit).
  const std::vector<Use>& uses(TensorId t) const { return uses_.at(size_t(t)); }
  /// Whether t is a graph output.
  bool is_output(TensorId t) const { return std::find(outputs_.begin(), outputs_.end(), t) != outputs_.end(); }
  /// Makes every reader of `from` (nodes and graph outputs) read `to`; the types must match.
  /// Returns the number of uses changed.
  int replace_all_uses(TensorId from, TensorId to);
  /// Makes input `slot` of node n read t (same type as before).
  void set_input(NodeId n, int slot, TensorId t);
  /// Removes node n; its outputs must have no readers left (InternalError otherwise). Ids
  /// stay valid until compact().
  void erase_node(NodeId n);
  bool erased(NodeId n) const { return erased_.at(size_t(n)); }
  /// Drops erased nodes and the constants nobody reads, renumbering tensors and nodes (names
  /// are kept). Returns the new id of every old tensor (-1 for dropped ones).
  std::vector<TensorId> compact();

  const TensorInfo& tensor(TensorId t) const { return tensors_.at(size_t(t)); }
  const TensorType& type(TensorId t) const { return tensor(t).type; }
  const Node& node(NodeId n) const { return nodes_.at(size_t(n)); }
  int num_tensors() const { return int(tensors_.size()); }
  int num_nodes() const { return int(nodes_.size()); }
  /// Every node, erased ones included until compact() (check erased(n)).
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<TensorId>& inputs() const { return inputs_; }
  const std::vector<TensorId>& outputs() const { return outputs_; }
  std::optional<TensorId> find(const std::string& name) const;
  /// Input types of node n, in order.
  Types input_types(NodeId n) const;
  Types output_types(NodeId n) const;
  /// Consumers of each tensor (live node ids, once per reading slot).
  std::vector<std::vector<NodeId>> consumers() const;

  /// Nodes in an order where producers precede consumers (Boost.Graph topological_sort).
  /// Throws InvalidInput naming the nodes of a cycle.
  std::vector<NodeId> topo_order() const;
  /// Checks the structural invariants (ids in range, outputs defined, acyclic).
  void validate() const;
  /// A fresh tensor/node name with the given prefix.
  std::string unique_name(const std::string& prefix) const;

  std::string name = "pet";

 private:
  TensorId new_tensor(std::string name, TensorType type);
  std::vector<TensorInfo> tensors_;
  std::vector<Node> nodes_;
  std::vector<std::vector<Use>> uses_;  ///< per tensor
  std::vector<bool> erased_;            ///< per node
  std::vector<TensorId> inputs_, outputs_;
  std::unordered_map<std::string, TensorId> by_name_;
};

/// Rebuilding a program into another graph: `map` takes source tensors to destination ones.
struct GraphCopy {
  const Graph& src;
  Graph& dst;
  std::vector<TensorId> map;
  GraphCopy(const Graph& s, Graph& d) : src(s), dst(d), map(size_t(s.num_tensors()), -1) {}
  /// Copies the inputs and constants (those `keep` accepts) with their names.
  void leaves(const std::function<bool(TensorId)>& keep = {});
  /// Copies node n (or `op` in its place, over `inputs` if given) reading mapped inputs;
  /// `same_names` keeps the node's and its outputs' names, else fresh ones are chosen.
  std::vector<TensorId> node(NodeId n, bool same_names = true, const Op* op = nullptr, const std::vector<TensorId>* inputs = nullptr);
  TensorId operator[](TensorId t) const { return map[size_t(t)]; }
  /// The source's outputs, mapped, as the destination's outputs.
  void outputs();
};

/// The program as text, one line per node in topological order:
///   input x float32[1,3,8,8]
///   Conv{kernel_shape=[3,3],...} 'conv1' (x [1,3,8,8], const w [8,3,3,3]) -> conv1 [1,8,8,8]
///   outputs: conv1
std::string to_text(const Graph& g);

/// A copy of `g` without the nodes whose outputs reach no graph output (and without unused
/// constants).
Graph remove_dead_nodes(const Graph& g);

/// Topological order of `n` items under edges (from -> to), via Boost.Graph. On a cycle
/// returns the items of the non-trivial strongly connected components in `cycle`.
std::vector<int> topological_order(int n, const std::vector<std::pair<int, int>>& edges,
                                   std::vector<int>* cycle);

/// The connected groups of multilinear nodes (paper section 6: non-linear ops cut a program
/// into multilinear subprograms). Nodes with integer results (an Add of int32 sums) take no
/// part. Each group lists node ids in topological order.
std::vector<std::vector<NodeId>> multilinear_subprograms(const Graph& g);

}  // namespace pet
