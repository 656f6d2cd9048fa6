// Correction kernels, patches, correction fusion and layout folding.
#include "pet/mutate/correct.hpp"
#include "pet/transform/pass.hpp"

#include <functional>
#include <map>

namespace pet::mutate {

namespace {

std::pair<std::vector<int64_t>, std::vector<int64_t>> bounds(const Box& b) {
  std::vector<int64_t> lo, hi;
  for (const auto& d : b.dims) lo.push_back(d.lo), hi.push_back(d.hi);
  return {lo, hi};
}
Shape box_shape(const Box& b) {
  Shape s;
  for (const auto& d : b.dims) s.push_back(d.hi - d.lo);
  return s;
}

/// Builds "the original restricted to a box" into a target graph, pull-based and memoised:
/// region(t, box) is a target tensor holding exactly the elements of original tensor t in box.
class Restrictor {
 public:
  Restrictor(const Graph& orig, Builder& b) : o_(orig), b_(b) {}

  TensorId region(TensorId t, const Box& box) {
    auto key = std::make_pair(t, bounds(box));
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    TensorId r = compute(t, box);
    PET_CHECK(b_.graph().type(r).shape == box_shape(box), "restricted '", o_.tensor(t).name, "' to ", to_string(box), " but got ",
              b_.graph().type(r).shape);
    memo_.emplace(key, r);
    return r;
  }

 private:
  Graph& g() { return b_.graph(); }
  /// x holds region `have` of some tensor; returns the part `want` (inside `have`).
  TensorId cut(TensorId x, const Box& have, const Box& want) {
    std::vector<int64_t> starts, ends, axes;
    for (int d = 0; d < have.rank(); ++d)
      if (have.dims[size_t(d)].lo != want.dims[size_t(d)].lo || have.dims[size_t(d)].hi != want.dims[size_t(d)].hi) {
        starts.push_back(want.dims[size_t(d)].lo - have.dims[size_t(d)].lo);
        ends.push_back(want.dims[size_t(d)].hi - have.dims[size_t(d)].lo);
        axes.push_back(d);
      }
    if (axes.empty()) return x;
    return b_.add(ops::Slice{.starts = starts, .ends = ends, .axes = axes}, {x}, "corr_slice");
  }
  TensorId leaf(TensorId t) {
    const auto& info = o_.tensor(t);
    if (!info.is_constant()) {
      auto pos = std::find(o_.inputs().begin(), o_.inputs().end(), t) - o_.inputs().begin();
      return g().inputs().at(size_t(pos));
    }
    if (auto f = g().find(info.name); f && g().tensor(*f).is_constant()) return *f;
    return g().add_constant(g().unique_name(info.name), info.type.dtype, *info.value);
  }
  TensorId whole(TensorId t) { return region(t, Box::whole(o_.type(t).shape)); }
  /// The op on whole inputs, then cut to the box (ops without a restricted form).
  TensorId fallback(const Node& n, int k, const Box& box) {
    std::vector<TensorId> in;
    for (TensorId t : n.inputs) in.push_back(whole(t));
    auto outs = b_.add_multi(n.op, in, "corr_" + std::string(op_name(n.op)));
    return cut(outs[size_t(k)], Box::whole(o_.type(n.outputs[size_t(k)]).shape), box);
  }
  /// The same op over the inputs' required regions (exact for ops whose restriction is
  /// themselves on sub-boxes: matmuls, element-wise, transposes, reductions).
  TensorId same_op(const Node& n, NodeId id, int k, const Box& box) {
    auto ib = verify::input_boxes(o_, id, k, box);
    std::vector<TensorId> in;
    for (size_t i = 0; i < n.inputs.size(); ++i) in.push_back(region(n.inputs[i], ib[i]));
    auto outs = b_.add_multi(n.op, in, "corr_" + std::string(op_name(n.op)));
    if (g().type(outs[size_t(k)]).shape != box_shape(box)) return fallback(n, k, box);
    return outs[size_t(k)];
  }
  /// Sliding-window ops (conv, average pool): slice the rows the box reads and turn the
  /// clipped part into explicit padding of the restricted op.
  template <class W>
  bool window_region(const W& w, const Shape& xs, const Box& box, Box& xb, std::vector<int64_t>& pads) {
    const size_t k = xs.size() - 2;
    pads.assign(2 * k, 0);
    for (size_t i = 0; i < k; ++i) {
      const auto& d = box.dims[2 + i];
      const int64_t ksz = w.kernel_shape[i];
      int64_t r0 = d.lo * w.strides[i] - w.pads[i], r1 = (d.hi - 1) * w.strides[i] - w.pads[i] + (ksz - 1) * w.dilations[i] + 1;
      int64_t cl = std::max<int64_t>(r0, 0), ch = std::min<int64_t>(r1, xs[2 + i]);
      if (ch <= cl) return false;
      xb.dims[2 + i] = Interval{cl, ch, 1};
      pads[i] = cl - r0;
      pads[i + k] = r1 - ch;
    }
    return true;
  }

  TensorId compute(TensorId t, const Box& box) {
    const auto& info = o_.tensor(t);
    if (box.empty()) {  // nothing to compute: an empty constant of the right shape (a leaf, as weights are: a
                        // Constant node is not multilinear, and the verifier refused the corrected mutant)
      const std::string name = g().unique_name("corr_empty");
      if (is_float(info.type.dtype)) return g().add_constant(name, Tensor<float>(box_shape(box)));
      return g().add_constant(name, info.type.dtype, Tensor<int64_t>(box_shape(box)));
    }
    if (info.producer < 0) return cut(leaf(t), Box::whole(info.type.shape), box);
    const NodeId id = info.producer;
    const Node& n = o_.node(id);
    const int k = info.output_index;
    return std::visit([&](const auto& op) -> TensorId {
      using O = std::decay_t<decltype(op)>;
      if constexpr (std::is_same_v<O, ops::Conv>) {
        const Shape &xs = o_.type(n.inputs[0]).shape, &ws = o_.type(n.inputs[1]).shape;
        const int64_t fg = ws[0] / op.group, cg = ws[1];
        const int64_t g0 = box.dims[1].lo / fg, g1 = (box.dims[1].hi + fg - 1) / fg;
        Box xb = Box::whole(xs), wb = Box::whole(ws), ob = box;
        xb.dims[0] = box.dims[0];
        xb.dims[1] = Interval{g0 * cg, g1 * cg, 1};
        wb.dims[0] = Interval{g0 * fg, g1 * fg, 1};
        ob.dims[1] = wb.dims[0];
        ops::Conv c = op;
        if (!window_region(op, xs, box, xb, c.pads)) return fallback(n, k, box);
        c.group = g1 - g0;
        c.auto_pad = AutoPad::NotSet;
        std::vector<TensorId> in{region(n.inputs[0], xb), region(n.inputs[1], wb)};
        if (n.inputs.size() == 3) in.push_back(region(n.inputs[2], Box{{wb.dims[0]}}));
        return cut(b_.add(c, in, "corr_conv"), ob, box);
      } else if constexpr (std::is_same_v<O, ops::AveragePool>) {
        if (op.ceil_mode && op.count_include_pad) return fallback(n, k, box);
        const Shape& xs = o_.type(n.inputs[0]).shape;
        Box xb = Box::whole(xs);
        xb.dims[0] = box.dims[0];
        xb.dims[1] = box.dims[1];
        ops::AveragePool p = op;
        if (!window_region(op, xs, box, xb, p.pads)) return fallback(n, k, box);
        p.ceil_mode = false;
        p.auto_pad = AutoPad::NotSet;
        return b_.add(p, {region(n.inputs[0], xb)}, "corr_avgpool");
      } else if constexpr (std::is_same_v<O, ops::Slice>) {
        Box ib = verify::input_boxes(o_, id, k, box)[0];
        TensorId x = region(n.inputs[0], ib);
        bool unit = true;
        for (int64_t s : op.step) unit = unit && s == 1;
        if (unit) return x;
        std::vector<int64_t> starts, ends, axes, steps;
        for (size_t d = 0; d < op.step.size(); ++d) {
          int64_t len = ib.dims[d].hi - ib.dims[d].lo;
          axes.push_back(int64_t(d));
          steps.push_back(op.step[d]);
          starts.push_back(op.step[d] > 0 ? 0 : len - 1);
          ends.push_back(op.step[d] > 0 ? len : std::numeric_limits<int64_t>::min());
        }
        return b_.add(ops::Slice{.starts = starts, .ends = ends, .axes = axes, .steps = steps}, {x}, "corr_slice");
      } else if constexpr (std::is_same_v<O, ops::Split>) {
        return region(n.inputs[0], verify::input_boxes(o_, id, k, box)[0]);
      } else if constexpr (std::is_same_v<O, ops::Concat>) {
        auto ib = verify::input_boxes(o_, id, k, box);
        std::vector<TensorId> parts;
        for (size_t i = 0; i < ib.size(); ++i)
          if (!ib[i].empty()) parts.push_back(region(n.inputs[i], ib[i]));
        if (parts.size() == 1) return parts[0];
        return b_.add(ops::Concat{.axis = op.axis}, parts, "corr_concat");
      } else if constexpr (std::is_same_v<O, ops::Pad>) {
        if (op.mode != ops::PadMode::Constant) return fallback(n, k, box);
        const Shape& xs = o_.type(n.inputs[0]).shape;
        const size_t r = xs.size();
        Box xb = Box::whole(xs);
        std::vector<int64_t> pads(2 * r);
        for (size_t d = 0; d < r; ++d) {
          int64_t lo = box.dims[d].lo - op.pads[d], hi = box.dims[d].hi - op.pads[d];
          int64_t cl = std::clamp<int64_t>(lo, 0, xs[d]), ch = std::clamp<int64_t>(hi, cl, xs[d]);
          xb.dims[d] = Interval{cl, ch, 1};
          pads[d] = ch > cl ? cl - lo : hi - lo;
          pads[d + r] = ch > cl ? hi - ch : 0;
        }
        return b_.add(ops::Pad{.pads = pads, .mode = op.mode, .value = op.value}, {region(n.inputs[0], xb)}, "corr_pad");
      } else if constexpr (std::is_same_v<O, ops::Expand>) {
        TensorId x = region(n.inputs[0], verify::input_boxes(o_, id, k, box)[0]);
        return b_.add(ops::Expand{.shape = box_shape(box)}, {x}, "corr_expand");
      } else if constexpr (std::is_same_v<O, ops::MatMul> || std::is_same_v<O, ops::Gemm> || std::is_same_v<O, ops::Add> ||
                           std::is_same_v<O, ops::Sub> || std::is_same_v<O, ops::Mul> || std::is_same_v<O, ops::Neg> ||
                           std::is_same_v<O, ops::Identity> || std::is_same_v<O, ops::Transpose> || std::is_same_v<O, ops::ReduceSum> ||
                           std::is_same_v<O, ops::ReduceMean> || std::is_same_v<O, ops::GlobalAveragePool> || std::is_same_v<O, ops::Einsum>) {
        return same_op(n, id, k, box);
      } else if constexpr (std::is_same_v<O, ops::Dropout>) {
        if (k == 0) return region(n.inputs[0], box);
        return fallback(n, k, box);
      } else if constexpr (!O::multilinear) {
        // never in a multilinear program (the verifier refuses them); whole and cut if ever
        return fallback(n, k, box);
      } else if constexpr (is_one_of<O, ops::Reshape, ops::Flatten, ops::Squeeze, ops::Unsqueeze, ops::RT, ops::Patch>) {
        return fallback(n, k, box);  // computed whole and cut (no restricted form)
      } else {
        static_assert(always_false<O>, "Restrictor: say how this op is restricted to a box (or list it with the fallbacks)");
      }
    }, n.op);
  }

  const Graph& o_;
  Builder& b_;
  std::map<std::pair<TensorId, std::pair<std::vector<int64_t>, std::vector<int64_t>>>, TensorId> memo_;
};

/// Copies every node of `src` into `dst` (same names); returns the tensor map.
std::vector<TensorId> copy_into(const Graph& src, Graph& dst) {
  GraphCopy c(src, dst);
  c.leaves();
  for (NodeId n : src.topo_order()) c.node(n);
  return std::move(c.map);
}

/// Sets the outputs of `g` to `outs`, giving them `names`.
void set_outputs(Graph& g, const std::vector<TensorId>& outs, const std::vector<std::string>& names) {
  for (size_t i = 0; i < outs.size(); ++i) {
    if (g.tensor(outs[i]).name != names[i]) {
      if (auto other = g.find(names[i])) g.rename(*other, g.unique_name(names[i] + "_pre"));
      g.rename(outs[i], names[i]);
    }
    g.add_output(outs[i]);
  }
}

}  // namespace

TensorId restrict_program(const Graph& original, TensorId out, const Box& box, Builder& target) {
  Restrictor r(original, target);
  return r.region(out, box);
}

Graph add_corrections(const Graph& original, const Graph& mutant, const verify::Report& report, CorrectionStats* stats) {
  Graph g;
  g.name = mutant.name + "-corrected";
  auto map = copy_into(mutant, g);
  Builder b(g);
  Restrictor r(original, b);
  CorrectionStats st;
  const int before = g.num_nodes();
  std::vector<TensorId> outs;
  std::vector<std::string> names;
  for (size_t o = 0; o < report.outputs.size(); ++o) {
    const auto& res = report.outputs[o];
    TensorId y = map[size_t(mutant.outputs()[o])];
    for (const Box& box : res.correction) {
      TensorId c = r.region(original.outputs()[o], box);
      auto [lo, hi] = bounds(box);
      y = b.add(ops::Patch{.offsets = lo}, {y, c}, "correction_patch");
      ++st.kernels;
    }
    st.corrected_elements += res.corrected_elements;
    st.total_elements += numel(res.shape);
    outs.push_back(y);
    names.push_back(mutant.tensor(mutant.outputs()[o]).name);
  }
  for (NodeId n = before; n < g.num_nodes(); ++n)
    if (!std::holds_alternative<ops::Patch>(g.node(n).op)) st.correction_flops = flop_add(st.correction_flops, op_flops(g.node(n).op, g.input_types(n), g.output_types(n)));
  set_outputs(g, outs, names);
  if (stats) *stats = st;
  return g;
}

// ------------------------------------------------------------------ fusion
int fuse(Graph& g) {
  auto records = transform::Pipeline({"rt-folding", "conv-merging", "dead-code"}).run(g);
  return records[1].stats.changed;
}

double estimate_ms(const Graph& g, double gflops, double gbytes_per_s) {
  // Ops that read only constants (weights) are precomputed once at compile time: free.
  std::vector<bool> constant(size_t(g.num_tensors()), false);
  for (TensorId t = 0; t < g.num_tensors(); ++t) constant[size_t(t)] = g.tensor(t).is_constant();
  double ms = 0;
  for (NodeId n : g.topo_order()) {
    bool all_const = true;
    for (TensorId t : g.node(n).inputs) all_const = all_const && constant[size_t(t)];
    if (all_const) {
      for (TensorId t : g.node(n).outputs) constant[size_t(t)] = true;
      continue;
    }
    Types in = g.input_types(n), out = g.output_types(n);
    double bytes = 0;
    for (const auto& t : in) bytes += 4.0 * double(numel(t.shape));
    for (const auto& t : out) bytes += 4.0 * double(numel(t.shape));
    double flops = double(op_flops(g.node(n).op, in, out));
    ms += std::max(flops / (gflops * 1e6), bytes / (gbytes_per_s * 1e6));
  }
  return ms;
}

}  // namespace pet::mutate
