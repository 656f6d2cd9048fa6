#pragma once
/// Rules that merge several ops into one (paper section 2: grouped convs, batched matmuls).
#include <functional>

#include "pet/mutate/rules/conv_layout.hpp"

namespace pet::mutate::rules {

namespace detail {
/// The weight of a conv with kernel k zero-padded (centred) to kernel `to`: (to-k)/2 on each
/// side of every spatial dim.
inline TensorId pad_kernel(MutantBuilder& b, TensorId w, const Shape& ws, const Shape& to) {
  if (ws == to) return w;
  const size_t r = ws.size();
  std::vector<int64_t> p(2 * r, 0);
  for (size_t i = 2; i < r; ++i) {
    const int64_t d = to[i] - ws[i];
    p[i] = d / 2;
    p[r + i] = d - d / 2;
  }
  return b.pad(w, p);
}
}  // namespace detail

/// Convs reading the same input with the same strides and dilations (kernels may differ in
/// size; smaller ones are zero-padded and centred) merged into one conv over the
/// concatenated filters; the output is split back (Inception's parallel 1x1 convs).
struct ConvMergeShared final : Rule<ops::Conv> {
  std::string_view name() const override { return "conv-merge-shared-input"; }
  std::string_view description() const override { return "convs on one input merged into one conv, filters concatenated, output split"; }
  Result apply(const Match<ops::Conv>& m, MutantBuilder& b) const override {
    const ops::Conv& c = m.op();
    if (c.group != 1) return no_match("grouped");
    auto sib = m.siblings(0);
    std::vector<NodeId> group{m.node_id()};
    Shape big = m.type(1).shape;
    const size_t r = big.size(), k = r - 2;
    for (NodeId s : sib) {
      const auto& o = std::get<ops::Conv>(m.graph().node(s).op);
      const Node& node = m.graph().node(s);
      if (o.group != 1 || o.strides != c.strides || o.dilations != c.dilations) continue;
      if (node.inputs.size() != m.node().inputs.size()) continue;  // bias on all or none
      const Shape &a = m.graph().type(node.outputs[0]).shape, &me = m.out_type().shape;
      if (a[0] != me[0] || !std::equal(a.begin() + 2, a.end(), me.begin() + 2, me.end())) continue;
      const Shape& ws = m.graph().type(node.inputs[1]).shape;
      for (size_t i = 2; i < r; ++i) big[i] = std::max(big[i], ws[i]);
      group.push_back(s);
    }
    if (group.size() < 2) return no_match("no sibling conv on the same input with the same strides and dilations");
    // Every member, its kernel padded to `big`, must end up with the same pads.
    std::vector<int64_t> pads;
    std::vector<TensorId> ws, bs;
    std::vector<int64_t> sizes;
    for (NodeId s : group) {
      const Node& node = m.graph().node(s);
      const auto& o = std::get<ops::Conv>(node.op);
      const Shape& w = m.graph().type(node.inputs[1]).shape;
      std::vector<int64_t> p = o.pads;
      for (size_t i = 0; i < k; ++i) {
        if ((big[2 + i] - w[2 + i]) % 2) return no_match("kernel sizes differ by an odd amount");
        const int64_t grow = (big[2 + i] - w[2 + i]) / 2 * o.dilations[i];
        p[i] += grow;
        p[k + i] += grow;
      }
      if (pads.empty()) pads = p;
      else if (p != pads) return no_match("the merged convs would need different padding");
      ws.push_back(detail::pad_kernel(b, b.mapped(node.inputs[1]), w, big));
      if (node.inputs.size() == 3) bs.push_back(b.mapped(node.inputs[2]));
      sizes.push_back(w[0]);
    }
    ops::Conv merged = c;
    merged.pads = pads;
    merged.kernel_shape.assign(big.begin() + 2, big.end());
    std::vector<TensorId> in{m.input(0), b.concat(ws, 0)};
    if (!bs.empty()) in.push_back(b.concat(bs, 0));
    TensorId y = b.add(merged, in, "conv_merged");
    auto parts = b.split(y, 1, sizes);
    for (size_t i = 0; i < group.size(); ++i) {
      Result r = b.replace(m.graph().node(group[i]).outputs[0], parts[i]);
      if (!r.ok()) return r;
    }
    return {};
  }
};

/// Two convs with identical attributes on different inputs of the same shape merged into one
/// grouped conv (group 2) over the inputs concatenated along channels; filter counts that
/// differ are evened out with zero filters, sliced off afterwards.
struct ConvMergeGrouped final : Rule<ops::Conv> {
  std::string_view name() const override { return "conv-merge-grouped"; }
  std::string_view description() const override { return "two convs on different inputs as one grouped conv"; }
  Result apply(const Match<ops::Conv>& m, MutantBuilder& b) const override {
    const ops::Conv& c = m.op();
    if (c.group != 1) return no_match("grouped");
    const Graph& g = m.graph();
    NodeId other = -1;
    for (NodeId k = 0; k < g.num_nodes() && other < 0; ++k) {
      if (k == m.node_id() || !std::holds_alternative<ops::Conv>(g.node(k).op)) continue;
      const auto& o = std::get<ops::Conv>(g.node(k).op);
      const Node& node = g.node(k);
      if (node.inputs[0] == m.node().inputs[0] || o != c || node.inputs.size() != m.node().inputs.size()) continue;
      if (g.type(node.inputs[0]) != m.type(0) || !b.is_mapped(node.inputs[0])) continue;
      const Shape &w0 = m.type(1).shape, &w1 = g.type(node.inputs[1]).shape;
      if (!std::equal(w0.begin() + 1, w0.end(), w1.begin() + 1, w1.end())) continue;  // any rank (a 1-D conv's weight has no dim 3)
      other = k;
    }
    if (other < 0) return no_match("no conv with the same attributes on another input of the same shape");
    const Node& o = g.node(other);
    const int64_t f0 = m.type(1).shape[0], f1 = g.type(o.inputs[1]).shape[0], fm = std::max(f0, f1);
    auto widen = [&](TensorId w, int64_t f, int64_t rank) {
      if (f == fm) return w;
      std::vector<int64_t> p(size_t(2 * rank), 0);
      p[size_t(rank)] = fm - f;
      return b.pad(w, p);
    };
    TensorId x = b.concat({m.input(0), b.mapped(o.inputs[0])}, 1);
    const int64_t wrank = int64_t(m.type(1).shape.size());  // 3 to 5: 1-D to 3-D convs
    std::vector<TensorId> in{x, b.concat({widen(m.input(1), f0, wrank), widen(b.mapped(o.inputs[1]), f1, wrank)}, 0)};
    if (m.num_inputs() == 3) in.push_back(b.concat({widen(m.input(2), f0, 1), widen(b.mapped(o.inputs[2]), f1, 1)}, 0));
    ops::Conv grouped = c;
    grouped.group = 2;
    TensorId y = b.add(grouped, in, "conv_grouped_pair");
    auto parts = b.split(y, 1, {fm, fm});
    TensorId y0 = f0 == fm ? parts[0] : b.slice(parts[0], 1, 0, f0), y1 = f1 == fm ? parts[1] : b.slice(parts[1], 1, 0, f1);
    Result r = b.replace(m.output(0), y0);
    return r.ok() ? b.replace(o.outputs[0], y1) : r;
  }
};

/// A grouped conv as one conv per group over channel slices, concatenated.
struct GroupedConvSplit final : Rule<ops::Conv> {
  std::string_view name() const override { return "grouped-conv-split"; }
  std::string_view description() const override { return "a grouped conv as separate convs over channel slices"; }
  Result apply(const Match<ops::Conv>& m, MutantBuilder& b) const override {
    const ops::Conv& c = m.op();
    if (c.group < 2) return no_match("not grouped");
    if (c.group > 8) return no_match(cat("group ", c.group, " would make more than 8 convs"));
    const int64_t cg = m.type(1).shape[1], fg = m.type(1).shape[0] / c.group;
    std::vector<TensorId> parts;
    for (int64_t g = 0; g < c.group; ++g) {
      ops::Conv one = c;
      one.group = 1;
      std::vector<TensorId> in{b.slice(m.input(0), 1, g * cg, (g + 1) * cg), b.slice(m.input(1), 0, g * fg, (g + 1) * fg)};
      if (m.num_inputs() == 3) in.push_back(b.slice(m.input(2), 0, g * fg, (g + 1) * fg));
      parts.push_back(b.add(one, in, "conv_group"));
    }
    return b.replace(m.output(0), b.concat(parts, 1));
  }
};

/// Matmuls sharing their left operand (BERT's Q/K/V projections) as one matmul over the
/// right operands concatenated along N, split afterwards.
struct MatMulMergeShared final : Rule<ops::MatMul> {
  std::string_view name() const override { return "matmul-merge-shared-input"; }
  std::string_view description() const override { return "matmuls with one left operand merged, right operands concatenated"; }
  Result apply(const Match<ops::MatMul>& m, MutantBuilder& b) const override {
    const Shape& w = m.type(1).shape;
    if (w.size() != 2) return no_match("the right operand is not a matrix");
    std::vector<NodeId> group{m.node_id()};
    for (NodeId s : m.siblings(0))
      if (m.graph().type(m.graph().node(s).inputs[1]).shape.size() == 2 && m.graph().type(m.graph().node(s).inputs[1]).shape[0] == w[0])
        group.push_back(s);
    if (group.size() < 2) return no_match("no other matmul reads the same left operand");
    std::vector<TensorId> ws;
    std::vector<int64_t> sizes;
    for (NodeId s : group) {
      TensorId t = m.graph().node(s).inputs[1];
      ws.push_back(b.mapped(t));
      sizes.push_back(m.graph().type(t).shape[1]);
    }
    TensorId y = b.add(ops::MatMul{}, {m.input(0), b.concat(ws, 1)}, "matmul_merged");
    auto parts = b.split(y, int64_t(b.type(y).shape.size()) - 1, sizes);
    for (size_t i = 0; i < group.size(); ++i) {
      Result r = b.replace(m.graph().node(group[i]).outputs[0], parts[i]);
      if (!r.ok()) return r;
    }
    return {};
  }
};

/// Matmuls with operands of equal shapes stacked into one batched matmul.
struct MatMulMergeBatched final : Rule<ops::MatMul> {
  std::string_view name() const override { return "matmul-merge-batched"; }
  std::string_view description() const override { return "matmuls with equal shapes as one batched matmul"; }
  Result apply(const Match<ops::MatMul>& m, MutantBuilder& b) const override {
    const Graph& g = m.graph();
    std::vector<NodeId> group{m.node_id()};
    for (NodeId k = 0; k < g.num_nodes(); ++k) {
      if (k == m.node_id() || !std::holds_alternative<ops::MatMul>(g.node(k).op)) continue;
      const Node& n = g.node(k);
      if (g.type(n.inputs[0]) == m.type(0) && g.type(n.inputs[1]) == m.type(1) && n.inputs[0] != m.node().inputs[0] &&
          b.is_mapped(n.inputs[0]) && b.is_mapped(n.inputs[1]))
        group.push_back(k);
    }
    if (group.size() < 2) return no_match("no other matmul with operands of the same shapes");
    auto stack = [&](int which) {
      std::vector<TensorId> parts;
      for (NodeId k : group) {
        TensorId t = b.mapped(g.node(k).inputs[size_t(which)]);
        Shape s = b.type(t).shape;
        s.insert(s.begin(), 1);
        parts.push_back(b.add(ops::Reshape{.shape = s}, {t}));
      }
      return b.concat(parts, 0);
    };
    TensorId y = b.add(ops::MatMul{}, {stack(0), stack(1)}, "matmul_batched");
    auto parts = b.split(y, 0, std::vector<int64_t>(group.size(), 1));
    for (size_t i = 0; i < group.size(); ++i) {
      Result r = b.replace(g.node(group[i]).outputs[0], b.add(ops::Reshape{.shape = m.out_type().shape}, {parts[i]}));
      if (!r.ok()) return r;
    }
    return {};
  }
};

/// A 1x1 (1x1x1, 1) conv (stride 1, no padding, group 1) as a matmul over the flattened image.
struct Conv1x1ToMatMul final : Rule<ops::Conv> {
  std::string_view name() const override { return "conv1x1-to-matmul"; }
  std::string_view description() const override { return "a 1x1 conv as W[F,C] x X[N,C,HW]"; }
  Result apply(const Match<ops::Conv>& m, MutantBuilder& b) const override {
    const ops::Conv& c = m.op();
    const Shape &x = m.type(0).shape, &w = m.type(1).shape;
    if (std::any_of(w.begin() + 2, w.end(), [](int64_t v) { return v != 1; })) return no_match("the kernel is not 1x1");
    if (c.group != 1) return no_match("grouped");
    for (int64_t s : c.strides)
      if (s != 1) return no_match("strided");
    for (int64_t p : c.pads)
      if (p) return no_match("padded");
    const int64_t pixels = std::accumulate(x.begin() + 2, x.end(), int64_t(1), std::multiplies<int64_t>());
    TensorId xm = b.add(ops::Reshape{.shape = {x[0], x[1], pixels}}, {m.input(0)});
    TensorId wm = b.add(ops::Reshape{.shape = {w[0], w[1]}}, {m.input(1)});
    TensorId y = b.add(ops::MatMul{}, {wm, xm}, "matmul_1x1");
    if (m.num_inputs() == 3) y = b.add(ops::Add{}, {y, b.add(ops::Reshape{.shape = {w[0], 1}}, {m.input(2)})});
    return b.replace(m.output(0), b.add(ops::Reshape{.shape = m.out_type().shape}, {y}));
  }
};

/// A matmul [M,K] x [K,N] as a 1x1 conv over a [1,K,M,1] image.
struct MatMulToConv1x1 final : Rule<ops::MatMul> {
  std::string_view name() const override { return "matmul-to-conv1x1"; }
  std::string_view description() const override { return "a matmul as a 1x1 conv"; }
  Result apply(const Match<ops::MatMul>& m, MutantBuilder& b) const override {
    const Shape &a = m.type(0).shape, &w = m.type(1).shape;
    if (a.size() != 2 || w.size() != 2) return no_match("not a plain matrix product");
    TensorId xi = b.rt(m.input(0), a, {1, 0}, {1, a[1], a[0], 1});
    TensorId wi = b.rt(m.input(1), w, {1, 0}, {w[1], w[0], 1, 1});
    TensorId y = b.add(ops::Conv{}, {xi, wi}, "conv_from_matmul");
    return b.replace(m.output(0), b.rt(y, {w[1], a[0]}, {1, 0}, {a[0], w[1]}));
  }
};

}  // namespace pet::mutate::rules
