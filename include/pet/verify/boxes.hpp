#pragma once
/// Box propagation over a whole program (paper section 5.1): split points flow from the
/// inputs (uniform) through every op's `propagate`; the boxes of a tensor are the grid its
/// split points cut it into.
#include "pet/verify/point_eval.hpp"

namespace pet::verify {

/// Split points of every tensor of a multilinear program (inputs and constants: none).
inline std::vector<SplitPoints> propagate_boxes(const Graph& g) {
  std::vector<SplitPoints> s(size_t(g.num_tensors()));
  for (TensorId t = 0; t < g.num_tensors(); ++t) s[size_t(t)] = SplitPoints::none(g.type(t).shape);
  for (NodeId n : g.topo_order()) {
    const Node& node = g.node(n);
    Splits in;
    for (TensorId t : node.inputs) in.push_back(s[size_t(t)]);
    Types it = g.input_types(n), ot = g.output_types(n);
    Splits out = std::visit([&](const auto& op) -> Splits {
      if constexpr (requires { op.propagate(in, it, ot); }) return op.propagate(in, it, ot);
      else throw InvalidInput(cat("node '", node.name, "' (", op_name(node.op), ") is not multilinear; it has no boxes"));
    }, node.op);
    PET_CHECK(out.size() == node.outputs.size(), op_name(node.op), " propagated ", out.size(), " outputs");
    for (size_t k = 0; k < out.size(); ++k) {
      const Shape& sh = ot[k].shape;
      PET_CHECK(out[k].rank() == int(sh.size()), op_name(node.op), " '", node.name, "' propagated rank ", out[k].rank(),
                " for shape ", sh);
      for (size_t d = 0; d < sh.size(); ++d) out[k].dims[d] = cuts::normalize(out[k].dims[d], sh[d]);
      s[size_t(node.outputs[k])] = std::move(out[k]);
    }
  }
  return s;
}

/// The union of two programs' split points: its grid is the set of non-empty intersections of
/// a box of one with a box of the other.
inline SplitPoints unite(const SplitPoints& a, const SplitPoints& b, const Shape& shape) {
  SplitPoints r = SplitPoints::none(shape);
  for (size_t d = 0; d < shape.size(); ++d) r.dims[d] = cuts::unite(a.dims[d], b.dims[d], shape[d]);
  return r;
}

/// The region of each input of node `n` that a box of its output k reads (backward propagation).
inline std::vector<Box> input_boxes(const Graph& g, NodeId n, int k, const Box& out) {
  const Node& node = g.node(n);
  Types it = g.input_types(n), ot = g.output_types(n);
  return std::visit([&](const auto& op) -> std::vector<Box> {
    if constexpr (requires { op.input_boxes(out, k, it, ot); }) return op.input_boxes(out, k, it, ot);
    else throw InvalidInput(cat("node '", node.name, "' (", op_name(node.op), ") is not multilinear"));
  }, node.op);
}

/// The smallest contiguous box holding both (an empty box is the identity).
inline Box bounding_union(const Box& a, const Box& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  Box r = a;
  for (int d = 0; d < r.rank(); ++d) {
    r.dims[size_t(d)].lo = std::min(a.dims[size_t(d)].lo, b.dims[size_t(d)].lo);
    r.dims[size_t(d)].hi = std::max(a.dims[size_t(d)].hi, b.dims[size_t(d)].hi);
    r.dims[size_t(d)].step = 1;
  }
  return r;
}

/// Backward propagation through a whole program: for a box of tensor `out`, a bounding box of
/// the elements of every tensor that it depends on (nullopt where it depends on none). The
/// correction kernels of a mutant read exactly these regions of the program's inputs.
inline std::vector<std::optional<Box>> required_regions(const Graph& g, TensorId out, const Box& box) {
  std::vector<std::optional<Box>> need(size_t(g.num_tensors()));
  if (box.empty()) return need;
  need[size_t(out)] = box;
  auto order = g.topo_order();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Node& node = g.node(*it);
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const auto& nb = need[size_t(node.outputs[k])];
      if (!nb) continue;
      auto in = input_boxes(g, *it, int(k), *nb);
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        if (in[i].empty()) continue;
        auto& cur = need[size_t(node.inputs[i])];
        cur = cur ? bounding_union(*cur, in[i]) : in[i];
      }
    }
  }
  return need;
}

/// Merges boxes that are adjacent along one dimension and equal in all others, dimension by
/// dimension (innermost first), to describe a region with few boxes.
inline std::vector<Box> merge_boxes(std::vector<Box> boxes) {
  if (boxes.empty()) return boxes;
  const int r = boxes[0].rank();
  for (int d = r - 1; d >= 0; --d) {
    auto key_less = [&](const Box& a, const Box& b) {
      for (int i = 0; i < r; ++i) {
        if (i == d) continue;
        if (a.dims[size_t(i)].lo != b.dims[size_t(i)].lo) return a.dims[size_t(i)].lo < b.dims[size_t(i)].lo;
        if (a.dims[size_t(i)].hi != b.dims[size_t(i)].hi) return a.dims[size_t(i)].hi < b.dims[size_t(i)].hi;
      }
      return a.dims[size_t(d)].lo < b.dims[size_t(d)].lo;
    };
    std::sort(boxes.begin(), boxes.end(), key_less);
    std::vector<Box> out;
    for (auto& b : boxes) {
      if (!out.empty()) {
        Box& last = out.back();
        bool same = true;
        for (int i = 0; i < r && same; ++i)
          if (i != d) same = last.dims[size_t(i)] == b.dims[size_t(i)];
        if (same && last.dims[size_t(d)].hi == b.dims[size_t(d)].lo) {
          last.dims[size_t(d)].hi = b.dims[size_t(d)].hi;
          continue;
        }
      }
      out.push_back(b);
    }
    boxes = std::move(out);
  }
  return boxes;
}

}  // namespace pet::verify
