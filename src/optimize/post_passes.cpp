// Post-optimisations that need the verifier (paper section 6.2): R/T ops moved through
// element-wise activations, and inverse R/T pairs eliminated, each elimination proved by the
// finite-field tester rather than by pattern.
#include "post_passes.hpp"

#include "pet/ir/builder.hpp"
#include "pet/transform/patterns.hpp"
#include "pet/verify/verifier.hpp"

namespace pet::optimize {

namespace {

bool layout_op(const Op& op) {
  return std::holds_alternative<ops::RT>(op) || std::holds_alternative<ops::Transpose>(op) || std::holds_alternative<ops::Reshape>(op) ||
         std::holds_alternative<ops::Flatten>(op) || std::holds_alternative<ops::Squeeze>(op) || std::holds_alternative<ops::Unsqueeze>(op);
}
bool elementwise_unary(const Op& op) {
  return holds_any<ops::Relu, ops::LeakyRelu, ops::Sigmoid, ops::Tanh, ops::Gelu, ops::Clip, ops::Neg, ops::Exp, ops::Sqrt, ops::Erf>(op);
}

/// act(L(x)) -> L(act(x)) for a layout op L read only by the activation.
class RtThroughActivation final : public transform::Pass {
 public:
  std::string_view name() const override { return "rt-through-activation"; }
  std::string_view description() const override {
    return "moves R/T and reshape ops after the element-wise activations that read them, so R/T pairs meet";
  }
  transform::PassStats run(Graph& g) override {
    int moved = 0;
    for (bool again = true; again;) {
      again = false;
      for (NodeId n : g.topo_order()) {
        if (g.erased(n)) continue;
        const Node act = g.node(n);
        if (!elementwise_unary(act.op) || act.inputs.size() != 1) continue;
        const NodeId l = g.tensor(act.inputs[0]).producer;
        if (l < 0 || !layout_op(g.node(l).op) || transform::sole_reader(g, act.inputs[0]) != n) continue;
        const Node lay = g.node(l);
        if (lay.inputs.size() != 1 || !is_float(g.type(lay.inputs[0]).dtype)) continue;
        const TensorId a = g.add_node(g.unique_name(act.name + "_early"), act.op, {lay.inputs[0]})[0];
        const TensorId y = g.add_node(g.unique_name(lay.name + "_late"), lay.op, {a})[0];
        transform::redirect(g, act.outputs[0], y);
        transform::erase_all(g, {n, l});
        ++moved;
        again = true;
      }
    }
    return {moved, cat(moved, " activations moved before R/T ops")};
  }
};

/// Whether `layout` (a chain of layout ops from its single input to its single output) is the
/// identity, by the finite-field tester (boxes + Schwartz-Zippel).
bool is_identity(const Graph& layout) {
  Graph id;
  Builder b(id);
  const TensorType& t = layout.type(layout.inputs()[0]);
  TensorId x = b.input(layout.tensor(layout.inputs()[0]).name, t.shape, t.dtype);
  b.output(b.add(ops::Identity{}, {x}));
  try {
    return verify::verify(id, layout).verdict == verify::Verdict::Equivalent;
  } catch (const Error&) {
    return false;
  }
}

/// L2(L1(x)) -> x (and L(x) -> x) where the composition is the identity.
class InverseRtElimination final : public transform::Pass {
 public:
  std::string_view name() const override { return "inverse-rt-elimination"; }
  std::string_view description() const override {
    return "removes R/T (and reshape) pairs that undo each other, each proved the identity by the finite-field tester";
  }
  transform::PassStats run(Graph& g) override {
    int removed = 0;
    for (bool again = true; again;) {
      again = false;
      for (NodeId n : g.topo_order()) {
        if (g.erased(n)) continue;
        const Node second = g.node(n);
        if (!layout_op(second.op) || second.inputs.size() != 1 || second.outputs.size() != 1) continue;
        const TensorId y = second.outputs[0];
        // one op that is the identity by itself
        std::vector<NodeId> chain{n};
        TensorId x = second.inputs[0];
        if (g.type(x) != g.type(y)) {
          const NodeId first = g.tensor(x).producer;
          if (first < 0 || !layout_op(g.node(first).op) || g.node(first).inputs.size() != 1 || transform::sole_reader(g, x) != n) continue;
          chain.insert(chain.begin(), first);
          x = g.node(first).inputs[0];
          if (g.type(x) != g.type(y)) continue;
        }
        Graph t;
        Builder b(t);
        TensorId cur = b.input("x", g.type(x).shape, g.type(x).dtype);
        for (NodeId c : chain) cur = b.add(g.node(c).op, {cur});
        b.output(cur);
        if (!is_identity(t)) continue;
        transform::redirect(g, y, x);
        transform::erase_all(g, chain);
        ++removed;
        again = true;
        break;  // the topological order changed
      }
    }
    return {removed, cat(removed, " inverse R/T pairs removed")};
  }
};

}  // namespace

std::unique_ptr<transform::Pass> make_rt_through_activation() { return std::make_unique<RtThroughActivation>(); }
std::unique_ptr<transform::Pass> make_inverse_rt_elimination() { return std::make_unique<InverseRtElimination>(); }

}  // namespace pet::optimize
