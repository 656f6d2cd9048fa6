#pragma once
/// Mutation rules as templates (paper section 4; guard-then-rewrite in the style of MLIR's
/// OpRewritePattern). A rule matches one op type, checks its guards (each failure returns a
/// reason), then builds the replacement with a shape-checking builder:
///
///   struct ConvBatchToWidth final : Rule<ops::Conv> {
///     std::string_view name() const override { return "conv-batch-to-width"; }
///     Result apply(const Match<ops::Conv>& m, MutantBuilder& b) const override {
///       if (m.type(0).shape[0] < 2) return no_match("batch is 1");
///       ...
///       return b.replace(m.output(0), y);
///     }
///   };
///
/// A rule claims nothing about equivalence: the verifier decides, and the corrector adds
/// correction kernels where the mutant is wrong.
#include <memory>
#include <string>
#include <variant>

#include "pet/ir/builder.hpp"

namespace pet::mutate {

/// Outcome of a rule: success, or the reason it does not apply.
struct Result {
  std::string failure;
  bool ok() const { return failure.empty(); }
};
inline Result no_match(std::string reason) { return Result{std::move(reason)}; }

/// What mapped() throws for an original tensor the mutant does not hold yet: a rule that
/// reads a tensor computed after its node (another conv's weight that a Concat of an earlier
/// round computes, as on Inception-v3) does not apply there; it is no internal error.
struct NotMappedYet : InternalError {
  using InternalError::InternalError;
};

/// Builds a mutant: a copy of the program in which the rule replaces some op outputs.
/// Nodes are copied in topological order; at the matched node the rule adds new nodes and
/// calls replace(); nodes whose outputs were all replaced are not copied.
class MutantBuilder : public Builder {
 public:
  explicit MutantBuilder(const Graph& original);
  const Graph& original() const { return orig_; }
  /// The new graph's tensor for an original tensor (inputs, constants, copied or replaced
  /// outputs); throws NotMappedYet when it does not exist yet.
  TensorId mapped(TensorId original_tensor) const;
  bool is_mapped(TensorId t) const { return map_[size_t(t)] >= 0; }
  /// Declares that `replacement` (a new tensor) computes original tensor `original_output`.
  Result replace(TensorId original_output, TensorId replacement);
  /// Copies node n unless all its outputs were replaced.
  void copy_node(NodeId n);
  /// Finishes the mutant: graph outputs (keeping their names).
  Graph finish();

  const TensorType& type(TensorId t) const { return graph().type(t); }

 private:
  const Graph& orig_;
  Graph g_;
  std::vector<TensorId> map_;
  std::vector<bool> replaced_;
};

/// What a rule sees of its match: the node, its op, and its inputs (already in the mutant).
template <class OpT>
class Match {
 public:
  Match(const Graph& g, NodeId n, const MutantBuilder& b) : g_(g), n_(n), b_(b) {}
  const OpT& op() const { return std::get<OpT>(g_.node(n_).op); }
  const Node& node() const { return g_.node(n_); }
  NodeId node_id() const { return n_; }
  const Graph& graph() const { return g_; }
  int num_inputs() const { return int(g_.node(n_).inputs.size()); }
  /// Input i as a tensor of the mutant under construction.
  TensorId input(int i) const { return b_.mapped(g_.node(n_).inputs[size_t(i)]); }
  /// Output k of the original node (what replace() takes).
  TensorId output(int k = 0) const { return g_.node(n_).outputs[size_t(k)]; }
  const TensorType& type(int i) const { return g_.type(g_.node(n_).inputs[size_t(i)]); }
  const TensorType& out_type(int k = 0) const { return g_.type(output(k)); }
  /// Whether input i is a constant (a weight).
  bool is_constant(int i) const { return g_.tensor(g_.node(n_).inputs[size_t(i)]).is_constant(); }
  /// Other nodes of the same op type that read the same tensor as input `i` (siblings to merge).
  std::vector<NodeId> siblings(int i) const {
    std::vector<NodeId> r;
    TensorId t = g_.node(n_).inputs[size_t(i)];
    for (NodeId k = 0; k < g_.num_nodes(); ++k)
      if (k != n_ && std::holds_alternative<OpT>(g_.node(k).op) && g_.node(k).inputs.size() > size_t(i) &&
          g_.node(k).inputs[size_t(i)] == t)
        r.push_back(k);
    return r;
  }

 private:
  const Graph& g_;
  NodeId n_;
  const MutantBuilder& b_;
};

/// Type-erased rule interface.
struct RuleBase {
  virtual ~RuleBase() = default;
  /// Stable name (used by --rules and in reports).
  virtual std::string_view name() const = 0;
  /// One sentence on what the rule does.
  virtual std::string_view description() const = 0;
  /// Applies the rule at node n of g: the mutant, or the reason it does not apply.
  virtual std::variant<Graph, std::string> apply_at(const Graph& g, NodeId n) const = 0;
};

/// A rule matching ops of type OpT.
template <class OpT>
struct Rule : RuleBase {
  virtual Result apply(const Match<OpT>& m, MutantBuilder& b) const = 0;

  std::variant<Graph, std::string> apply_at(const Graph& g, NodeId n) const final {
    if (!std::holds_alternative<OpT>(g.node(n).op)) return cat("node is ", op_name(g.node(n).op), ", not ", OpT::name);
    try {
      MutantBuilder b(g);
      bool applied = false;
      for (NodeId k : g.topo_order()) {
        if (k != n) {
          b.copy_node(k);
          continue;
        }
        Result r = apply(Match<OpT>(g, n, b), b);
        if (!r.ok()) return r.failure;
        applied = true;
      }
      PET_CHECK(applied, "rule ", name(), " never reached node ", n);
      return b.finish();
    } catch (const InvalidInput& e) {
      return cat("the rewrite does not type-check: ", e.what());
    } catch (const NotMappedYet& e) {
      return cat("the rewrite reads a tensor computed after node '", g.node(n).name, "': ", e.what());
    }
  }
};

/// An ordered collection of rules with lookup by name.
class RuleSet {
 public:
  template <class... R>
  static RuleSet of() {
    RuleSet s;
    (s.rules_.push_back(std::make_unique<R>()), ...);
    return s;
  }
  const std::vector<std::unique_ptr<RuleBase>>& rules() const { return rules_; }
  const RuleBase* find(std::string_view name) const {
    for (const auto& r : rules_)
      if (r->name() == name) return r.get();
    return nullptr;
  }
  void add(std::unique_ptr<RuleBase> r) { rules_.push_back(std::move(r)); }

 private:
  std::vector<std::unique_ptr<RuleBase>> rules_;
};

/// Every built-in rule (include/pet/mutate/rules/).
const RuleSet& builtin_rules();
/// A fresh set of the built-in rules, to add rules of one's own to (RuleSet::add).
RuleSet make_builtin_rules();

}  // namespace pet::mutate
