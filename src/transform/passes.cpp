// The built-in graph passes (see include/pet/transform/pass.hpp for the list). Each pass
// matches guard by guard and edits the graph in place; a pattern is rewritten only when
// every intermediate it swallows has no other reader and is not a graph output.
#include "passes.hpp"

#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "pet/eval/interpreter.hpp"
#include "pet/ir/builder.hpp"

namespace pet::transform {

std::optional<float> scalar_operand(const Graph& g, NodeId n, TensorId t) {
  const Node& node = g.node(n);
  if (node.inputs.size() != 2) return std::nullopt;
  TensorId o = node.inputs[0] == t ? node.inputs[1] : node.inputs[0];
  if (o == t || !g.tensor(o).is_constant() || !is_float(g.type(o).dtype) || numel(g.type(o).shape) != 1) return std::nullopt;
  if (g.type(node.outputs[0]).shape != g.type(t).shape) return std::nullopt;
  return std::get<Tensor<float>>(*g.tensor(o).value)[0];
}

NodeId sole_reader(const Graph& g, TensorId t) {
  const auto& u = g.uses(t);
  return u.size() == 1 && !g.is_output(t) ? u[0].node : -1;
}

// (patterns.hpp)
/// Every reader of `from` reads `to`; a graph output keeps its name (so the program's
/// interface does not change) unless `to` is a graph input or output already.
void redirect(Graph& g, TensorId from, TensorId to) {
  const bool named = g.is_output(from) && !g.is_output(to) &&
                     std::find(g.inputs().begin(), g.inputs().end(), to) == g.inputs().end();
  g.replace_all_uses(from, to);
  if (named) {
    const std::string name = g.tensor(from).name;
    g.rename(from, g.unique_name(name + "_replaced"));
    g.rename(to, name);
  }
}

/// Erases the nodes of a matched pattern, readers before producers (a node is erased once
/// nothing reads its outputs any more).
void erase_all(Graph& g, std::vector<NodeId> nodes) {
  std::erase_if(nodes, [&](NodeId n) { return g.erased(n); });
  while (!nodes.empty()) {
    auto free = std::find_if(nodes.begin(), nodes.end(), [&](NodeId n) {
      for (TensorId o : g.node(n).outputs)
        if (!g.uses(o).empty() || g.is_output(o)) return false;
      return true;
    });
    PET_CHECK(free != nodes.end(), "erase_all: the pattern's nodes are still read from outside it");
    g.erase_node(*free);
    nodes.erase(free);
  }
}

namespace detail {
namespace {

const Tensor<float>& fconst(const Graph& g, TensorId t) { return std::get<Tensor<float>>(*g.tensor(t).value); }
bool is_const(const Graph& g, TensorId t) { return g.tensor(t).is_constant(); }

// ------------------------------------------------------------------ dead-code
class DeadCode final : public Pass {
 public:
  std::string_view name() const override { return "dead-code"; }
  std::string_view description() const override { return "removes nodes whose results reach no graph output, and Dropout masks nobody reads"; }
  PassStats run(Graph& g) override {
    std::vector<bool> live(size_t(g.num_tensors()), false);
    for (TensorId t : g.outputs()) live[size_t(t)] = true;
    auto order = g.topo_order();
    int removed = 0;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const Node& n = g.node(*it);
      bool used = false;
      for (TensorId t : n.outputs) used = used || live[size_t(t)];
      if (!used) {
        g.erase_node(*it);
        ++removed;
        continue;
      }
      for (TensorId t : n.inputs) live[size_t(t)] = true;
    }
    // A Dropout whose mask nobody reads (PyTorch exports one with every dropout) keeps only
    // its data output, which backends take as a view.
    int masks = 0;
    for (NodeId n : order) {
      if (g.erased(n)) continue;
      const Node node = g.node(n);
      const auto* d = std::get_if<ops::Dropout>(&node.op);
      if (!d || node.outputs.size() != 2 || live[size_t(node.outputs[1])]) continue;
      ops::Dropout one = *d;
      one.num_outputs = 1;
      const TensorId y = g.add_node(g.unique_name(node.name + "_nomask"), one, {node.inputs[0]})[0];
      redirect(g, node.outputs[0], y);
      g.erase_node(n);
      ++masks;
    }
    return {removed + masks, cat(removed, " nodes removed", masks ? cat(", ", masks, " unused dropout masks dropped") : "")};
  }
};

// ------------------------------------------------------------------ constant-folding
class ConstantFolding final : public Pass {
 public:
  std::string_view name() const override { return "constant-folding"; }
  std::string_view description() const override {
    return "computes nodes whose inputs are all constants once (unless the result is much larger than its inputs)";
  }
  PassStats run(Graph& g) override {
    int folded = 0;
    for (NodeId n : g.topo_order()) {
      const Node& node = g.node(n);
      if (node.inputs.empty()) continue;
      bool all = true;
      int64_t in_elems = 0, out_elems = 0;
      for (TensorId t : node.inputs) all = all && is_const(g, t), in_elems += numel(g.type(t).shape);
      for (TensorId t : node.outputs) out_elems += numel(g.type(t).shape);
      // an Expand of a constant to a large tensor stays an Expand; up to 2^18 elements (1 MB
      // of floats, Swin-T's shifted-window mask) anything folds
      if (!all || out_elems > std::max<int64_t>(4 * in_elems + 65536, int64_t(1) << 18)) continue;
      std::vector<Value<float>> vals;
      for (TensorId t : node.inputs) vals.push_back(const_value(*g.tensor(t).value));
      std::vector<Value<float>> outs;
      try {
        outs = evaluate_op<float>(node.op, vals, g.output_types(n));
      } catch (const Error&) {
        continue;  // the run will report it where it happens
      }
      const std::vector<TensorId> results = node.outputs;
      for (size_t k = 0; k < outs.size(); ++k) {
        TensorId c = g.add_constant(g.unique_name(g.tensor(results[k]).name + "_folded"), g.type(results[k]).dtype, to_constant(outs[k]));
        redirect(g, results[k], c);
      }
      g.erase_node(n);
      ++folded;
    }
    return {folded, cat(folded, " nodes folded")};
  }
};

// ------------------------------------------------------------------ bn-folding
/// Conv or ConvTranspose -> BatchNormalization (inference, constant statistics, constant
/// weights): each output channel's filter scaled by a = gamma / sqrt(var + eps), the bias
/// (b - mean) a + beta. A Conv's output channel is its weight's dim 0; a ConvTranspose's
/// ([C_in, C_out/G, k...]) is group (c / (C_in/G)) times C_out/G plus its dim 1.
class BnFolding final : public Pass {
 public:
  std::string_view name() const override { return "bn-folding"; }
  std::string_view description() const override { return "folds an inference BatchNormalization into the conv or transposed conv before it"; }
  PassStats run(Graph& g) override {
    int folded = 0;
    for (NodeId n : g.topo_order()) {
      const Node node = g.node(n);
      const auto* bn = std::get_if<ops::BatchNormalization>(&node.op);
      if (!bn || bn->training_mode || node.outputs.size() != 1 || node.inputs.size() != 5) continue;
      const TensorId x = node.inputs[0];
      const NodeId p = g.tensor(x).producer;
      if (p < 0 || sole_reader(g, x) != n) continue;
      const auto* ct = std::get_if<ops::ConvTranspose>(&g.node(p).op);
      if (!ct && !std::holds_alternative<ops::Conv>(g.node(p).op)) continue;
      const Node conv = g.node(p);
      bool consts = is_const(g, conv.inputs[1]) && (conv.inputs.size() < 3 || is_const(g, conv.inputs[2]));
      for (size_t i = 1; i < 5; ++i) consts = consts && is_const(g, node.inputs[i]);
      if (!consts) continue;
      Tensor<float> w = fconst(g, conv.inputs[1]).clone();
      const Tensor<float>&sc = fconst(g, node.inputs[1]), &sh = fconst(g, node.inputs[2]), &mu = fconst(g, node.inputs[3]),
      &var = fconst(g, node.inputs[4]);
      const Shape& ws = w.shape();
      // f output channels; weight row r (of `per` values) scales by channel channel_of(r)
      const int64_t rows = ct ? ws[0] * ws[1] : ws[0], per = w.size() / rows, f = ct ? ws[1] * ct->group : ws[0];
      auto channel_of = [&](int64_t r) { return ct ? r / ws[1] / (ws[0] / ct->group) * ws[1] + r % ws[1] : r; };
      Tensor<float> b({f}, 0.0f);
      if (conv.inputs.size() == 3) b = fconst(g, conv.inputs[2]).clone();
      std::vector<double> a(static_cast<size_t>(f));
      for (int64_t o = 0; o < f; ++o) {
        a[size_t(o)] = double(sc[o]) / std::sqrt(double(var[o]) + bn->epsilon);
        b[o] = float((double(b[o]) - mu[o]) * a[size_t(o)] + sh[o]);
      }
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < per; ++i) w[r * per + i] = float(w[r * per + i] * a[size_t(channel_of(r))]);
      std::vector<TensorId> ins{conv.inputs[0], g.add_constant(g.unique_name(conv.name + "_w_bn"), w),
                                g.add_constant(g.unique_name(conv.name + "_b_bn"), b)};
      const TensorId y = g.add_node(g.unique_name(conv.name + "_bn"), conv.op, ins)[0];
      redirect(g, node.outputs[0], y);
      erase_all(g, {n, p});
      ++folded;
    }
    return {folded, cat(folded, " batch norms folded")};
  }
};

// ------------------------------------------------------------------ channel-scale-folding
/// Conv(x * s), s a scale per input channel (squeeze-and-excitation's: s [1, C, 1, 1], or any
/// shape whose only dim above 1 is x's channel dim), is a Conv of x whose weights are scaled:
/// sum_c W[o, c, k] (s[c] x[c, ..]) = sum_c (W[o, c, k] s[c]) x[c, ..], and a zero pad stays
/// zero. The Mul then reads the weights instead of x: done where they hold at most half as
/// many values (a backend reads and writes them again to lay them out), as in EfficientNet's
/// and MobileNet-v3's early blocks (x [1, 32, 112, 112], W [16, 32, 1, 1]), or where s and
/// W are constants (folded here). Ungrouped convs, float32.
class ChannelScaleFolding final : public Pass {
 public:
  std::string_view name() const override { return "channel-scale-folding"; }
  std::string_view description() const override {
    return "a per-channel scale of a conv's input (squeeze-and-excitation) moved onto the conv's weights where they are smaller";
  }
  PassStats run(Graph& g) override {
    int folded = 0;
    for (NodeId n : g.topo_order()) {
      const Node node = g.node(n);
      const auto* conv = std::get_if<ops::Conv>(&node.op);
      if (!conv || conv->group != 1 || node.inputs.size() < 2) continue;
      const TensorId y = node.inputs[0], w = node.inputs[1];
      const NodeId m = g.tensor(y).producer;
      if (m < 0 || sole_reader(g, y) != n || !std::holds_alternative<ops::Mul>(g.node(m).op)) continue;
      const Node mul = g.node(m);
      const Shape& ys = g.type(y).shape;
      if (mul.inputs.size() != 2 || g.type(y).dtype != DType::Float32 || g.type(w).dtype != DType::Float32 || ys.size() < 3) continue;
      for (int i = 0; i < 2; ++i) {
        const TensorId x = mul.inputs[size_t(i)], s = mul.inputs[size_t(1 - i)];
        const Shape& ss = g.type(s).shape;
        if (x == s || g.type(x).shape != ys || g.type(x).dtype != DType::Float32 || g.type(s).dtype != DType::Float32 || ss.size() > ys.size())
          continue;
        bool per_channel = true;
        for (size_t d = 0; d < ss.size(); ++d) per_channel = per_channel && (ss[d] == 1 || d + ys.size() - ss.size() == 1);
        const bool constant = is_const(g, s) && is_const(g, w);
        if (!per_channel || (!constant && 2 * numel(g.type(w).shape) > numel(ys))) continue;
        TensorId scaled;
        if (constant) {
          const std::vector<Value<float>> vals{const_value(*g.tensor(w).value), const_value(*g.tensor(s).value)};
          const std::vector<TensorType> types{g.type(w)};
          auto v = evaluate_op<float>(ops::Mul{}, vals, types);
          scaled = g.add_constant(g.unique_name(node.name + "_w_scaled"), DType::Float32, to_constant(v[0]));
        } else {
          scaled = g.add_node(g.unique_name(node.name + "_w_scaled"), ops::Mul{}, {w, s})[0];
        }
        std::vector<TensorId> ins = node.inputs;
        ins[0] = x, ins[1] = scaled;
        const TensorId z = g.add_node(g.unique_name(node.name + "_scaled"), node.op, ins)[0];
        redirect(g, node.outputs[0], z);
        erase_all(g, {n, m});
        ++folded;
        break;
      }
    }
    return {folded, cat(folded, " input scales moved onto conv weights")};
  }
};

// ------------------------------------------------------------------ gather-to-slice
/// Gather with constant indices that step evenly through the axis (one index, as in
/// `q, k, v = qkv[0], qkv[1], qkv[2]`, or i0, i0 + s, ..., all in range) is a strided Slice,
/// reshaped to the indices' dims: a copy the backends do as one, where a Gather reads an
/// index per element. Indices out of range stay a Gather (the run reports them).
class GatherToSlice final : public Pass {
 public:
  std::string_view name() const override { return "gather-to-slice"; }
  std::string_view description() const override {
    return "turns a Gather with constant, evenly stepping indices into a strided Slice (and a Reshape)";
  }
  PassStats run(Graph& g) override {
    int rewritten = 0;
    for (NodeId n : g.topo_order()) {
      const Node node = g.node(n);
      const auto* gather = std::get_if<ops::Gather>(&node.op);
      if (!gather || !is_float(g.type(node.inputs[0]).dtype) || !g.tensor(node.inputs[1]).is_constant()) continue;
      const std::vector<int64_t> idx = const_ints(*g.tensor(node.inputs[1]).value).vec();
      const int64_t axis = gather->axis, extent = g.type(node.inputs[0]).shape[size_t(axis)];
      std::vector<int64_t> at;
      for (int64_t i : idx) at.push_back(i < 0 ? i + extent : i);
      const int64_t step = at.size() > 1 ? at[1] - at[0] : 1;
      bool even = !at.empty() && step != 0;
      for (size_t i = 0; i < at.size() && even; ++i) even = at[i] >= 0 && at[i] < extent && at[i] == at[0] + int64_t(i) * step;
      if (!even) continue;
      const int64_t last = at.back() + step;  // one past the last index, in the step's direction
      ops::Slice sl;
      sl.starts = {at[0]};
      sl.ends = {last < 0 ? std::numeric_limits<int64_t>::min() : last};
      sl.axes = {axis};
      sl.steps = {step};
      TensorId y = g.add_node(g.unique_name(node.name + "_slice"), sl, {node.inputs[0]})[0];
      const Shape& want = g.type(node.outputs[0]).shape;
      if (g.type(y).shape != want) {
        ops::Reshape r;
        r.shape = want;
        y = g.add_node(g.unique_name(node.name + "_reshape"), r, {y})[0];
      }
      redirect(g, node.outputs[0], y);
      erase_all(g, {n});
      ++rewritten;
    }
    return {rewritten, cat(rewritten, " gathers rewritten")};
  }
};

// ------------------------------------------------------------------ pad-folding
/// Pad (constant 0, spatial dims, non-negative) -> Conv or AveragePool: the pads move into
/// the op (an explicitly padded AveragePool counts the zeros: count_include_pad). A pool's pads
/// stay smaller than its window, as ONNX Runtime requires of every pool it loads (a file
/// pet optimize wrote with a 1-wide window and a pad of 1 failed to load there).
/// Then a conv's end padding that no window reads (a stride steps over it) is dropped; the
/// output is the same. OpenVINO 2024.6 computes a strided 1x1 conv with padding after an
/// element-wise op with a row too many; the padding pet's rewrites leave is of this kind.
class PadFolding final : public Pass {
 public:
  std::string_view name() const override { return "pad-folding"; }
  std::string_view description() const override {
    return "folds a zero Pad of the spatial dims into the conv or average pool that reads it, drops end padding no conv window reads";
  }
  /// Drops the end padding of `cv` (on input shape x, kernel ks) that no window reads.
  static bool trim_unread_end_pads(ops::Conv& cv, const Shape& x, const Shape& ks) {
    const size_t k = cv.strides.size();
    bool trimmed = false;
    for (size_t i = 0; i < k; ++i) {
      const int64_t n = x[2 + i], s = cv.strides[i], span = (ks[i] - 1) * cv.dilations[i] + 1;
      const int64_t o = ops::detail::window_out(n, ks[i], s, cv.dilations[i], cv.pads[i], cv.pads[k + i], false);
      const int64_t read = std::max<int64_t>(0, (o - 1) * s + span - n - cv.pads[i]);  // end padding the last window reads
      if (read < cv.pads[k + i]) cv.pads[k + i] = read, trimmed = true;
    }
    return trimmed;
  }
  static int trim_all(Graph& g) {
    int trimmed = 0;
    for (NodeId n : g.topo_order()) {
      const Node node = g.node(n);
      const auto* cv = std::get_if<ops::Conv>(&node.op);
      if (!cv) continue;
      ops::Conv t = *cv;
      if (!trim_unread_end_pads(t, g.type(node.inputs[0]).shape, Shape(g.type(node.inputs[1]).shape.begin() + 2, g.type(node.inputs[1]).shape.end())))
        continue;
      // The same conv under its own name: a backend may know it by name (the cpu backend's
      // int8 weights of a quantized conv, recorded before constant folding).
      const TensorId y = g.add_node(node.name, t, node.inputs)[0];
      redirect(g, node.outputs[0], y);
      erase_all(g, {n});
      ++trimmed;
    }
    return trimmed;
  }
  PassStats run(Graph& g) override {
    int folded = 0;
    for (NodeId n : g.topo_order()) {
      const Node node = g.node(n);
      const bool conv = std::holds_alternative<ops::Conv>(node.op), avg = std::holds_alternative<ops::AveragePool>(node.op);
      if ((!conv && !avg) || node.inputs.empty()) continue;
      const TensorId x = node.inputs[0];
      const NodeId p = g.tensor(x).producer;
      const ops::Pad* pad = p >= 0 ? std::get_if<ops::Pad>(&g.node(p).op) : nullptr;
      if (!pad || pad->mode != ops::PadMode::Constant || pad->value != 0.0 || sole_reader(g, x) != n) continue;
      const size_t r = g.type(x).shape.size(), k = r - 2;
      bool spatial = pad->pads[0] == 0 && pad->pads[1] == 0 && pad->pads[r] == 0 && pad->pads[r + 1] == 0;
      for (int64_t v : pad->pads) spatial = spatial && v >= 0;
      if (!spatial) continue;
      std::vector<int64_t> extra;
      for (size_t i = 0; i < k; ++i) extra.push_back(pad->pads[2 + i]);
      for (size_t i = 0; i < k; ++i) extra.push_back(pad->pads[r + 2 + i]);
      Op merged = node.op;
      if (auto* cv = std::get_if<ops::Conv>(&merged)) {
        for (size_t i = 0; i < extra.size(); ++i) cv->pads[i] += extra[i];
      } else {
        auto* ap = std::get_if<ops::AveragePool>(&merged);
        bool unpadded = !ap->ceil_mode;
        for (int64_t v : ap->pads) unpadded = unpadded && v == 0;
        for (size_t i = 0; i < k; ++i) unpadded = unpadded && extra[i] < ap->kernel_shape[i] && extra[k + i] < ap->kernel_shape[i];
        if (!unpadded) continue;
        ap->pads = extra;
        ap->count_include_pad = true;
      }
      std::vector<TensorId> ins{g.node(p).inputs[0]};
      for (size_t i = 1; i < node.inputs.size(); ++i) ins.push_back(node.inputs[i]);
      const TensorId y = g.add_node(node.name, merged, ins)[0];  // the conv, under its name (as trim_all)
      redirect(g, node.outputs[0], y);
      erase_all(g, {n, p});
      ++folded;
    }
    const int trimmed = trim_all(g);
    return {folded + trimmed, cat(folded, " pads folded", trimmed ? cat(", ", trimmed, " convs' unread end padding dropped") : "")};
  }
};

// ------------------------------------------------------------------ layer-norm-canonicalization
/// m = ReduceMean(x, last); d = x - m; v = ReduceMean(d ^ 2, last); y = d / sqrt(v + eps),
/// then optionally y * gamma and + beta (vectors over the last dim): one LayerNormalization.
class LayerNormCanonicalization final : public Pass {
 public:
  std::string_view name() const override { return "layer-norm-canonicalization"; }
  std::string_view description() const override {
    return "rewrites the decomposed LayerNorm PyTorch exports before opset 17 as one LayerNormalization";
  }
  PassStats run(Graph& g) override {
    int n_done = 0;
    for (NodeId n : g.topo_order())
      if (!g.erased(n) && rewrite(g, n)) ++n_done;
    return {n_done, cat(n_done, " layer norms")};
  }

 private:
  template <class O>
  static const O* as(const Graph& g, NodeId n) {
    return n < 0 ? nullptr : std::get_if<O>(&g.node(n).op);
  }
  static bool rewrite(Graph& g, NodeId n) {
    const auto* r = as<ops::ReduceMean>(g, n);
    if (!r) return false;
    const TensorId x = g.node(n).inputs[0];
    const Shape& xs = g.type(x).shape;
    if (xs.empty() || r->axes != std::vector<int64_t>{int64_t(xs.size()) - 1} || !r->keepdims) return false;
    const TensorId m = g.node(n).outputs[0];
    const NodeId sub = sole_reader(g, m);
    if (!as<ops::Sub>(g, sub) || g.node(sub).inputs[0] != x || g.node(sub).inputs[1] != m) return false;
    const TensorId d = g.node(sub).outputs[0];
    const auto& du = g.uses(d);
    if (du.size() != 2 || g.is_output(d)) return false;
    NodeId pw = -1, dv = -1;
    for (const auto& u : du) {
      if (as<ops::Pow>(g, u.node)) pw = u.node;
      if (as<ops::Div>(g, u.node)) dv = u.node;
    }
    if (pw < 0 || dv < 0 || g.node(pw).inputs[0] != d || g.node(dv).inputs[0] != d) return false;
    auto two = scalar_operand(g, pw, d);
    if (!two || *two != 2.f) return false;
    const NodeId m2 = sole_reader(g, g.node(pw).outputs[0]);
    const auto* r2 = as<ops::ReduceMean>(g, m2);
    if (!r2 || r2->axes != r->axes || !r2->keepdims) return false;
    const NodeId add = sole_reader(g, g.node(m2).outputs[0]);
    if (!as<ops::Add>(g, add)) return false;
    auto eps = scalar_operand(g, add, g.node(m2).outputs[0]);
    if (!eps || !(*eps >= 0)) return false;
    const NodeId sq = sole_reader(g, g.node(add).outputs[0]);
    if (!as<ops::Sqrt>(g, sq) || g.node(dv).inputs[1] != g.node(sq).outputs[0] || sole_reader(g, g.node(sq).outputs[0]) != dv) return false;
    std::vector<NodeId> nodes{n, sub, pw, m2, add, sq, dv};
    TensorId y = g.node(dv).outputs[0];
    const int64_t len = xs.back();
    auto vector_const = [&](NodeId node, TensorId t) -> std::optional<TensorId> {
      const auto& in = g.node(node).inputs;
      if (in.size() != 2) return std::nullopt;
      TensorId o = in[0] == t ? in[1] : in[0];
      if (o == t || !is_const(g, o) || g.type(o).shape != Shape{len} || g.type(g.node(node).outputs[0]).shape != g.type(t).shape)
        return std::nullopt;
      return o;
    };
    std::optional<TensorId> gamma, beta;
    if (NodeId mul = sole_reader(g, y); as<ops::Mul>(g, mul))
      if ((gamma = vector_const(mul, y))) {
        nodes.push_back(mul);
        y = g.node(mul).outputs[0];
        if (NodeId ad = sole_reader(g, y); as<ops::Add>(g, ad))
          if ((beta = vector_const(ad, y))) {
            nodes.push_back(ad);
            y = g.node(ad).outputs[0];
          }
      }
    if (!gamma) gamma = g.add_constant(g.unique_name(g.node(n).name + "_ones"), Tensor<float>({len}, 1.f));
    std::vector<TensorId> ins{x, *gamma};
    if (beta) ins.push_back(*beta);
    ops::LayerNormalization ln;
    ln.axis = int64_t(xs.size()) - 1;
    ln.epsilon = *eps;
    const TensorId out = g.add_node(g.unique_name(g.node(n).name + "_layer_norm"), ln, ins)[0];
    redirect(g, y, out);
    erase_all(g, nodes);
    return true;
  }
};

// ------------------------------------------------------------------ gelu-canonicalization
/// x * (erf(x / sqrt 2) + 1) * 0.5 (also x * 0.7071.. inside erf) as one Gelu node.
class GeluCanonicalization final : public Pass {
 public:
  std::string_view name() const override { return "gelu-canonicalization"; }
  std::string_view description() const override { return "rewrites x * (erf(x / sqrt 2) + 1) * 0.5 as one Gelu"; }
  PassStats run(Graph& g) override {
    int done = 0;
    for (TensorId x = 0; x < g.num_tensors(); ++x)
      if (is_float(g.type(x).dtype) && rewrite(g, x)) ++done;
    return {done, cat(done, " GELUs")};
  }

 private:
  static bool rewrite(Graph& g, TensorId x) {
    const auto uses = g.uses(x);
    if (uses.size() != 2) return false;
    for (const auto& u : uses) {
      const NodeId d = u.node;
      if (g.node(d).inputs[0] != x) continue;
      auto c = scalar_operand(g, d, x);
      if (!c) continue;
      const bool div = std::holds_alternative<ops::Div>(g.node(d).op) && std::abs(*c - 1.41421356f) < 1e-6f;
      const bool mul = std::holds_alternative<ops::Mul>(g.node(d).op) && std::abs(*c - 0.70710678f) < 1e-6f;
      if (!div && !mul) continue;
      const NodeId e = sole_reader(g, g.node(d).outputs[0]);
      if (e < 0 || !std::holds_alternative<ops::Erf>(g.node(e).op)) continue;
      const NodeId a = sole_reader(g, g.node(e).outputs[0]);
      if (a < 0 || !std::holds_alternative<ops::Add>(g.node(a).op)) continue;
      auto one = scalar_operand(g, a, g.node(e).outputs[0]);
      if (!one || *one != 1.f) continue;
      const NodeId m1 = sole_reader(g, g.node(a).outputs[0]);
      const NodeId other = uses[0].node == d ? uses[1].node : uses[0].node;
      if (m1 != other || !std::holds_alternative<ops::Mul>(g.node(m1).op)) continue;
      const NodeId m2 = sole_reader(g, g.node(m1).outputs[0]);
      if (m2 < 0 || !std::holds_alternative<ops::Mul>(g.node(m2).op)) continue;
      auto half = scalar_operand(g, m2, g.node(m1).outputs[0]);
      if (!half || *half != 0.5f) continue;
      const TensorId y = g.add_node(g.unique_name(g.node(d).name + "_gelu"), ops::Gelu{}, {x})[0];
      redirect(g, g.node(m2).outputs[0], y);
      erase_all(g, {d, e, a, m1, m2});
      return true;
    }
    return false;
  }
};

// ------------------------------------------------------------------ rt-folding
bool reshape_like(const Op& op) {
  return std::holds_alternative<ops::Reshape>(op) || std::holds_alternative<ops::Flatten>(op) || std::holds_alternative<ops::Squeeze>(op) ||
         std::holds_alternative<ops::Unsqueeze>(op);
}

/// A reshape-like op after an R/T op becomes the R/T's output shape; a reshape-like op
/// before an R/T op is dropped (R/T reads its input in flat order); a transpose of a
/// reshape becomes one R/T op.
class RtFolding final : public Pass {
 public:
  std::string_view name() const override { return "rt-folding"; }
  std::string_view description() const override { return "folds reshapes and transposes around R/T ops into one R/T op"; }
  PassStats run(Graph& g) override {
    int folded = 0;
    for (int before = -1; before != folded;) {  // until a sweep folds nothing (chains fold a link per sweep)
      before = folded;
      sweep(g, folded);
    }
    return {folded, cat(folded, " layout chains folded")};
  }

 private:
  static void sweep(Graph& g, int& folded) {
    for (NodeId n : g.topo_order()) {
      if (g.erased(n)) continue;
      const Node node = g.node(n);
      if (node.inputs.empty() || node.outputs.size() != 1) continue;
      const TensorId x = node.inputs[0];
      const NodeId p = g.tensor(x).producer;
      if (p < 0 || sole_reader(g, x) != n) continue;
      const Node& pn = g.node(p);
      std::optional<Op> op;
      if (std::holds_alternative<ops::RT>(node.op) && reshape_like(pn.op)) {
        op = node.op;  // R/T of a reshape: the reshape is redundant
      } else if (reshape_like(node.op) && std::holds_alternative<ops::RT>(pn.op)) {
        ops::RT merged = std::get<ops::RT>(pn.op);
        merged.out_shape = g.type(node.outputs[0]).shape;
        op = merged;
      } else if (const auto* tr = std::get_if<ops::Transpose>(&node.op); tr && reshape_like(pn.op)) {
        const Shape& s = g.type(x).shape;
        Shape t;
        for (int64_t q : tr->perm) t.push_back(s[size_t(q)]);
        op = ops::RT{.split_shape = s, .perm = tr->perm, .out_shape = t};
      }
      if (!op) continue;
      const TensorId y = g.add_node(g.unique_name(node.name + "_rt"), *op, {pn.inputs[0]})[0];
      redirect(g, node.outputs[0], y);
      erase_all(g, {n, p});
      ++folded;
    }
  }
};

// ------------------------------------------------------------------ conv-merging
/// Whether node a's outputs reach node b.
bool reaches(const Graph& g, NodeId a, NodeId b) {
  std::vector<NodeId> stack{a};
  std::vector<bool> seen(size_t(g.num_nodes()), false);
  while (!stack.empty()) {
    NodeId n = stack.back();
    stack.pop_back();
    if (n == b) return true;
    if (seen[size_t(n)]) continue;
    seen[size_t(n)] = true;
    for (TensorId t : g.node(n).outputs)
      for (const auto& u : g.uses(t)) stack.push_back(u.node);
  }
  return false;
}

/// Convs that share weight, bias, strides, dilations and group (a correction kernel and the
/// mutant's main conv, paper Fig. 6) become one conv over their inputs, padded explicitly
/// and concatenated along the batch or a stride-1 spatial axis; the result is sliced back.
class ConvMerging final : public Pass {
 public:
  std::string_view name() const override { return "conv-merging"; }
  std::string_view description() const override {
    return "merges convs sharing weights into one conv over concatenated inputs (correction fusion)";
  }
  PassStats run(Graph& g) override {
    std::map<std::tuple<TensorId, TensorId, std::vector<int64_t>, std::vector<int64_t>, int64_t>, std::vector<NodeId>> by_weight;
    for (NodeId n : g.topo_order()) {
      const Node& node = g.node(n);
      const auto* c = std::get_if<ops::Conv>(&node.op);
      if (!c || node.inputs.size() < 2) continue;
      const TensorId bias = node.inputs.size() == 3 ? node.inputs[2] : -1;
      by_weight[{node.inputs[1], bias, c->strides, c->dilations, c->group}].push_back(n);
    }
    int merged = 0;
    for (auto& [key, nodes] : by_weight) {
      const auto& strides = std::get<2>(key);
      std::vector<NodeId> left = nodes;
      while (left.size() >= 2) {
        const NodeId head = left[0];
        const Shape hs = padded(g, head);
        std::vector<NodeId> best{head};
        int best_axis = -1;
        for (int axis : {0, int(hs.size()) - 1, int(hs.size()) - 2}) {
          if (axis >= 2 && strides[size_t(axis - 2)] != 1) continue;
          std::vector<NodeId> cand{head};
          for (size_t i = 1; i < left.size(); ++i) {
            const Shape s = padded(g, left[i]);
            bool ok = s.size() == hs.size();
            for (size_t d = 0; ok && d < s.size(); ++d) ok = int(d) == axis || s[d] == hs[d];
            for (NodeId m : cand) ok = ok && !reaches(g, m, left[i]) && !reaches(g, left[i], m);
            if (ok) cand.push_back(left[i]);
          }
          if (cand.size() > best.size()) best = cand, best_axis = axis;
        }
        if (best.size() >= 2) {
          merge(g, best, best_axis);
          merged += int(best.size()) - 1;
        }
        std::vector<NodeId> rest;
        for (NodeId n : left)
          if (n != head && (best.size() < 2 || std::find(best.begin(), best.end(), n) == best.end())) rest.push_back(n);
        left = rest;
      }
    }
    return {merged, cat(merged, " convs merged")};
  }

 private:
  static Shape padded(const Graph& g, NodeId n) {
    const auto& c = std::get<ops::Conv>(g.node(n).op);
    Shape s = g.type(g.node(n).inputs[0]).shape;
    const size_t k = c.strides.size();
    for (size_t i = 0; i < k; ++i) s[2 + i] += c.pads[i] + c.pads[i + k];
    return s;
  }
  /// The members' inputs must exist before the first member: the merged conv goes where the
  /// last input is ready, which topological order guarantees for independent members.
  static void merge(Graph& g, const std::vector<NodeId>& members, int axis) {
    Builder b(g);
    const Node first = g.node(members[0]);
    ops::Conv c = std::get<ops::Conv>(first.op);
    const size_t k = c.strides.size();
    std::vector<TensorId> parts;
    std::vector<int64_t> offsets;
    int64_t offset = 0;
    for (NodeId m : members) {
      const Node& node = g.node(m);
      const auto& mc = std::get<ops::Conv>(node.op);
      TensorId x = node.inputs[0];
      bool any = false;
      for (int64_t p : mc.pads) any = any || p;
      if (any) {
        std::vector<int64_t> pads(2 * (k + 2), 0);
        for (size_t i = 0; i < k; ++i) pads[2 + i] = mc.pads[i], pads[k + 4 + i] = mc.pads[i + k];
        x = b.add(ops::Pad{.pads = pads}, {x}, g.unique_name("fuse_pad"));
      }
      parts.push_back(x);
      offsets.push_back(offset);
      offset += g.type(x).shape[size_t(axis)];
    }
    c.pads.assign(2 * k, 0);
    std::vector<TensorId> in{b.concat(parts, axis), first.inputs[1]};
    if (first.inputs.size() == 3) in.push_back(first.inputs[2]);
    const TensorId y = b.add(c, in, g.unique_name("fused_conv"));
    for (size_t i = 0; i < members.size(); ++i) {
      const TensorId out = g.node(members[i]).outputs[0];
      const Shape want = g.type(out).shape;
      const TensorId part = b.slice(y, axis, offsets[i], offsets[i] + want[size_t(axis)]);
      redirect(g, out, part);
    }
    erase_all(g, members);
  }
};


// ------------------------------------------------------------------ einsum-lowering
/// Einsum as ReduceSum, Transpose, Reshape and MatMul: a summed label held by one operand is
/// reduced first; two operands are contracted as batch x M x K by batch x K x N (labels in
/// both and kept are the batch, in both and not kept the K); more operands pairwise, left
/// to right. A label repeated in one term (a diagonal, "bii->b") is taken first: its r dims
/// moved last (Transpose), merged (Reshape to N^r) and read every 1 + N + ... + N^(r-1)
/// elements (a strided Slice), N of them. Left as it is (the reference kernel runs it): a
/// summed label whose extents differ between operands (broadcast ellipsis).
class EinsumLowering final : public Pass {
 public:
  std::string_view name() const override { return "einsum-lowering"; }
  std::string_view description() const override { return "rewrites Einsum as ReduceSum, Transpose, Reshape and MatMul where it maps"; }
  PassStats run(Graph& g) override {
    int done = 0;
    const int nodes = g.num_nodes();
    for (NodeId n = 0; n < nodes; ++n)
      if (!g.erased(n) && std::holds_alternative<ops::Einsum>(g.node(n).op) && lower(g, n)) ++done;
    return {done, cat(done, " einsums")};
  }

 private:
  using Labels = std::vector<int>;
  struct Term {
    TensorId t;
    Labels labels;
  };
  static bool has(const Labels& l, int x) { return std::find(l.begin(), l.end(), x) != l.end(); }

  static bool mappable(const Graph& g, const Node& node, const ops::Einsum& e) {
    std::map<int, std::set<int64_t>> sizes;
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const Labels& l = e.in_labels[k];
      for (size_t d = 0; d < l.size(); ++d) sizes[l[d]].insert(g.type(node.inputs[k]).shape[d]);
      for (int x : l) {  // a diagonal: its dims equal (the op checks), and N^r not beyond 2^40
        const int64_t r = std::count(l.begin(), l.end(), x), n = g.type(node.inputs[k]).shape[size_t(std::find(l.begin(), l.end(), x) - l.begin())];
        double merged = 1;
        for (int64_t i = 0; i < r; ++i) merged *= double(n);
        if (r > 1 && merged > double(int64_t(1) << 40)) return false;
      }
    }
    for (int l : e.summed)
      if (sizes[l].size() > 1) return false;
    return true;
  }

  /// x with every label it repeats taken once, along the diagonal.
  static Term diagonal(Builder& b, const Graph& g, Term x, const std::string& base) {
    for (size_t d = 0; d < x.labels.size(); ++d) {
      const int l = x.labels[d];
      if (std::count(x.labels.begin(), x.labels.end(), l) < 2) continue;
      std::vector<int64_t> perm, rep;
      Labels rest;
      Shape to;
      const Shape& xs = g.type(x.t).shape;
      for (size_t i = 0; i < x.labels.size(); ++i) {
        if (x.labels[i] == l) {
          rep.push_back(int64_t(i));
        } else {
          perm.push_back(int64_t(i));
          rest.push_back(x.labels[i]);
          to.push_back(xs[i]);
        }
      }
      perm.insert(perm.end(), rep.begin(), rep.end());
      const int64_t n = xs[d];
      int64_t merged = 1, step = 0;
      for (size_t i = 0; i < rep.size(); ++i) step += merged, merged *= n;  // step = 1 + n + ... + n^(r-1)
      TensorId t = permute(b, x.t, perm, base + "_diag_t");
      to.push_back(merged);
      t = reshape(b, g, t, to, base + "_diag");
      t = b.add(ops::Slice{.starts = {0}, .ends = {merged}, .axes = {int64_t(to.size()) - 1}, .steps = {step}}, {t}, base + "_diag_slice");
      rest.push_back(l);
      return diagonal(b, g, {t, rest}, base);  // (the next repeated label, if any)
    }
    return x;
  }

  /// Sums away the labels of x that `needed` lacks.
  static Term reduce(Builder& b, Term x, const Labels& needed, const std::string& base) {
    std::vector<int64_t> axes;
    Labels rest;
    for (size_t d = 0; d < x.labels.size(); ++d) (has(needed, x.labels[d]) ? rest.push_back(x.labels[d]) : axes.push_back(int64_t(d)));
    if (axes.empty()) return x;
    return {b.add(ops::ReduceSum{{.axes = axes, .keepdims = false}}, {x.t}, base + "_sum"), rest};
  }
  /// x's dims in the order `perm` (x itself where that is the identity).
  static TensorId permute(Builder& b, TensorId x, const std::vector<int64_t>& perm, const std::string& name) {
    for (size_t i = 0; i < perm.size(); ++i)
      if (perm[i] != int64_t(i)) return b.add(ops::Transpose{.perm = perm}, {x}, name);
    return x;
  }
  static Term transpose(Builder& b, Term x, const Labels& order, const std::string& base) {
    std::vector<int64_t> perm;
    for (int l : order) perm.push_back(int64_t(std::find(x.labels.begin(), x.labels.end(), l) - x.labels.begin()));
    return {permute(b, x.t, perm, base + "_t"), order};
  }
  static TensorId reshape(Builder& b, const Graph& g, TensorId x, Shape to, const std::string& base) {
    if (g.type(x).shape == to) return x;
    return b.add(ops::Reshape{.shape = std::vector<int64_t>(to.begin(), to.end())}, {x}, base + "_r");
  }

  /// a (x) b keeping the labels in `keep` (the output's and the later operands').
  static Term contract(Builder& b, const Graph& g, Term a, Term c, const Labels& keep, const std::string& base) {
    Labels need_a = keep, need_c = keep;
    need_a.insert(need_a.end(), c.labels.begin(), c.labels.end());
    need_c.insert(need_c.end(), a.labels.begin(), a.labels.end());
    a = reduce(b, a, need_a, base + "_a");
    c = reduce(b, c, need_c, base + "_b");
    Labels batch, m, n, k;
    for (int l : keep)
      if (has(a.labels, l) && has(c.labels, l)) batch.push_back(l);
    for (int l : a.labels) {
      if (has(batch, l)) continue;
      (has(c.labels, l) ? k : m).push_back(l);
    }
    for (int l : c.labels)
      if (!has(batch, l) && !has(a.labels, l)) n.push_back(l);
    auto size_in = [&](const Term& t, int l) { return g.type(t.t).shape[size_t(std::find(t.labels.begin(), t.labels.end(), l) - t.labels.begin())]; };
    auto prod = [&](const Term& t, const Labels& ls) {
      int64_t p = 1;
      for (int l : ls) p *= size_in(t, l);
      return p;
    };
    auto cat_labels = [](std::initializer_list<const Labels*> ls) {
      Labels r;
      for (const Labels* l : ls) r.insert(r.end(), l->begin(), l->end());
      return r;
    };
    a = transpose(b, a, cat_labels({&batch, &m, &k}), base + "_a");
    c = transpose(b, c, cat_labels({&batch, &k, &n}), base + "_b");
    Shape as, cs, out;
    for (int l : batch) {
      as.push_back(size_in(a, l));
      cs.push_back(size_in(c, l));
      out.push_back(std::max(size_in(a, l), size_in(c, l)));
    }
    as.push_back(prod(a, m));
    as.push_back(prod(a, k));
    cs.push_back(prod(c, k));
    cs.push_back(prod(c, n));
    for (int l : m) out.push_back(size_in(a, l));
    for (int l : n) out.push_back(size_in(c, l));
    const TensorId y = b.add(ops::MatMul{}, {reshape(b, g, a.t, as, base + "_a"), reshape(b, g, c.t, cs, base + "_b")}, base + "_matmul");
    return {reshape(b, g, y, out, base + "_out"), cat_labels({&batch, &m, &n})};
  }

  static bool lower(Graph& g, NodeId id) {
    const Node node = g.node(id);
    const ops::Einsum e = std::get<ops::Einsum>(node.op);
    if (!mappable(g, node, e)) return false;
    Builder b(g);
    const std::string base = g.unique_name(node.name);
    Term acc = diagonal(b, g, {node.inputs[0], e.in_labels[0]}, base);
    for (size_t k = 1; k < node.inputs.size(); ++k) {
      Labels keep = e.out_labels;
      for (size_t j = k + 1; j < node.inputs.size(); ++j) keep.insert(keep.end(), e.in_labels[j].begin(), e.in_labels[j].end());
      acc = contract(b, g, acc, diagonal(b, g, {node.inputs[k], e.in_labels[k]}, cat(base, "_", k)), keep, cat(base, "_", k));
    }
    acc = reduce(b, acc, e.out_labels, base);
    acc = transpose(b, acc, e.out_labels, base);
    TensorId y = acc.t;
    if (g.type(y).shape != g.type(node.outputs[0]).shape) y = reshape(b, g, y, g.type(node.outputs[0]).shape, base);
    if (y == node.inputs[0]) y = b.add(ops::Identity{}, {y}, base + "_identity");
    redirect(g, node.outputs[0], y);
    erase_all(g, {id});
    return true;
  }
};
}  // namespace

const std::vector<std::function<std::unique_ptr<Pass>()>>& builtin_passes() {
  static const std::vector<std::function<std::unique_ptr<Pass>()>> v = {
      [] { return std::make_unique<DeadCode>(); },
      [] { return std::make_unique<ConstantFolding>(); },
      [] { return std::make_unique<BnFolding>(); },
      [] { return std::make_unique<PadFolding>(); },
      [] { return std::make_unique<ChannelScaleFolding>(); },
      [] { return std::make_unique<LayerNormCanonicalization>(); },
      [] { return std::make_unique<GeluCanonicalization>(); },
      [] { return std::make_unique<RtFolding>(); },
      [] { return std::make_unique<ConvMerging>(); },
      [] { return std::make_unique<EinsumLowering>(); },
      [] { return std::make_unique<GatherToSlice>(); },
  };
  return v;
}

}  // namespace detail
}  // namespace pet::transform
