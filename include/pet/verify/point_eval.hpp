#pragma once
/// Demand-driven evaluation of a multilinear program at single output positions (paper
/// section 5.2): an output element is computed from the op's element formula, reading only
/// the input elements it needs, recursively, memoised per tensor element. Used with a field
/// (Schwartz-Zippel tests), with symbolic polynomials (soundness tests) and with Z3 terms.
#include <algorithm>
#include <functional>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "pet/core/hash.hpp"
#include "pet/ir/graph.hpp"

namespace pet::verify {

/// Rejects programs the verifier cannot look into, naming the first non-multilinear node.
inline void require_multilinear(const Graph& g, std::string_view which) {
  for (NodeId n = 0; n < g.num_nodes(); ++n)
    if (!is_multilinear(g.node(n).op))
      throw InvalidInput(cat(which, ": node '", g.node(n).name, "' (", op_name(g.node(n).op),
                             ") is not multilinear; only multilinear programs can be verified"));
}

/// A leaf whose elements are made when read (by row-major offset): a random draw of a tensor
/// of any size then costs nothing until the few elements a point evaluation needs are read (a
/// batch-16 CSRNet input has 51 M elements; verifying a rewrite of its first conv reads some
/// thousands).
template <class T>
using LazyLeaf = std::function<T(int64_t flat)>;

/// Leaves with more elements than this are drawn lazily (random_leaf).
inline constexpr int64_t kLazyLeafFrom = int64_t(1) << 20;

/// A pseudo-random 64-bit value of element `i` of leaf `leaf` in draw `seed` (splitmix64 of
/// the three): the same for every program that reads that leaf, whatever it reads first.
inline uint64_t leaf_hash(uint64_t seed, uint64_t leaf, uint64_t i) {
  auto mix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  return mix(mix(mix(seed) ^ leaf) ^ i);
}
/// A stable key for a leaf's name (FNV-1a), for leaf_hash.
inline uint64_t leaf_key(std::string_view name) { return fnv1a64(name); }

template <class T>
class PointEvaluator {
 public:
  /// `leaves[t]` holds the value of every graph input and float constant t (integer
  /// constants are read from the graph). Leaves may be tensors of any T; a leaf without a
  /// tensor may have a lazy one in `lazy[t]` instead.
  PointEvaluator(const Graph& g, std::vector<std::optional<Tensor<T>>> leaves, std::vector<LazyLeaf<T>> lazy = {})
      : g_(g), leaves_(std::move(leaves)), lazy_(std::move(lazy)), memo_(size_t(g.num_tensors())) {
    PET_CHECK(int(leaves_.size()) == g.num_tensors(), "leaf list of size ", leaves_.size());
    PET_CHECK(lazy_.empty() || int(lazy_.size()) == g.num_tensors(), "lazy leaf list of size ", lazy_.size());
    for (TensorId t : g.inputs())
      PET_CHECK(leaves_[size_t(t)].has_value() || (!lazy_.empty() && lazy_[size_t(t)]), "input '", g.tensor(t).name, "' has no value");
    require_depth(g);
  }

  /// Most ops on one path from an input to an output that point evaluation follows (each
  /// level is a few stack frames of the demand-driven recursion).
  static constexpr int64_t kMaxDepth = 10000;
  static void require_depth(const Graph& g) {
    std::vector<int64_t> depth(size_t(g.num_tensors()), 0);
    int64_t deepest = 0;
    NodeId where = -1;
    for (NodeId n : g.topo_order()) {
      int64_t d = 0;
      for (TensorId t : g.node(n).inputs) d = std::max(d, depth[size_t(t)]);
      for (TensorId t : g.node(n).outputs) depth[size_t(t)] = d + 1;
      if (d + 1 > deepest) deepest = d + 1, where = n;
    }
    if (deepest > kMaxDepth)
      throw Unsupported(cat("the program is ", deepest, " ops deep (through node '", g.node(where).name,
                            "'); point evaluation (verification, mutation) supports at most ", kMaxDepth,
                            " ops on one path; split the program (pet info --extract)"));
  }

  /// The value of tensor t at position idx.
  T at(TensorId t, const Index& idx) {
    if (const auto& leaf = leaves_[size_t(t)]) return leaf->at(idx);
    const TensorInfo& info = g_.tensor(t);
    if (!lazy_.empty() && lazy_[size_t(t)]) return lazy_at(t, idx);
    PET_CHECK(info.producer >= 0, "tensor '", info.name, "' has no value and no producer");
    Memo& m = memo_[size_t(t)];
    const int64_t off = flat_offset(idx, info.type.shape);
    if (m.dense) {
      if (m.done[size_t(off)]) return m.values[size_t(off)];
    } else if (m.values.empty() && numel(info.type.shape) <= kDenseLimit) {
      m.dense = true;
      m.values.assign(size_t(numel(info.type.shape)), T(0));
      m.done.assign(size_t(numel(info.type.shape)), 0);
    } else if (auto it = m.sparse.find(off); it != m.sparse.end()) {
      return it->second;
    }
    T v = compute(info, idx);
    if (m.dense) {
      m.values[size_t(off)] = v;
      m.done[size_t(off)] = 1;
    } else {
      m.sparse.emplace(off, v);
    }
    return v;
  }
  /// Number of element formulas evaluated so far (the work done).
  int64_t evaluations() const { return evaluations_; }

 private:
  static constexpr int64_t kDenseLimit = int64_t(1) << 24;
  /// Out of line: at() recurses once per op on a path (10,000 deep), its frame must stay small.
  [[gnu::noinline]] T lazy_at(TensorId t, const Index& idx) const {
    return lazy_[size_t(t)](flat_offset(idx, g_.tensor(t).type.shape));
  }
  struct Memo {
    bool dense = false;
    std::vector<T> values;
    std::vector<uint8_t> done;
    std::unordered_map<int64_t, T> sparse;
  };
  struct NodeReader {
    PointEvaluator* ev;
    const Node* node;
    int count() const { return int(node->inputs.size()); }
    const Shape& shape(int i) const { return ev->g_.type(node->inputs[size_t(i)]).shape; }
    T operator()(int i, const Index& idx) const { return ev->at(node->inputs[size_t(i)], idx); }
    int64_t ints(int i, const Index& idx) const {
      const auto& v = ev->g_.tensor(node->inputs[size_t(i)]).value;
      if (!v || std::holds_alternative<Tensor<float>>(*v))
        throw Unsupported(cat(op_name(node->op), " '", node->name, "' reads integer data that is not a constant"));
      return std::visit([&](const auto& t) { return int64_t(t.at(idx)); }, *v);
    }
    double real(int, const Index&) const {
      throw Unsupported(cat(op_name(node->op), " '", node->name, "' needs real values; it is not multilinear"));
    }
  };
  T compute(const TensorInfo& info, const Index& idx) {
    const Node& n = g_.node(info.producer);
    ++evaluations_;
    NodeReader r{this, &n};
    return std::visit([&](const auto& op) -> T {
      using O = std::decay_t<decltype(op)>;
      if constexpr (!O::multilinear) {
        throw InvalidInput(cat("node '", n.name, "' (", op_name(n.op), ") is not multilinear"));
      } else if constexpr (requires { op.template at<T>(0, idx, r); }) {
        return op.template at<T>(info.output_index, idx, r);
      } else {
        return op.template at<T>(idx, r);
      }
    }, n.op);
  }

  const Graph& g_;
  std::vector<std::optional<Tensor<T>>> leaves_;
  std::vector<LazyLeaf<T>> lazy_;
  std::vector<Memo> memo_;
  int64_t evaluations_ = 0;
};

}  // namespace pet::verify
