// transform::rebind: a program at other input shapes (include/pet/transform/rebind.hpp).
#include "pet/transform/rebind.hpp"

#include <limits>

namespace pet::transform {

std::optional<Shape> follow_reshape(const Shape& from, const Shape& to, const Shape& target) {
  if (from.size() != to.size()) return std::nullopt;
  Shape out = target;
  std::vector<bool> follows(target.size(), false);
  std::vector<size_t> rest;
  auto before = [](const Shape& s, size_t d) {  // the product of the dims before d
    int64_t p = 1;
    for (size_t k = 0; k < d && k < s.size(); ++k) p *= s[k];
    return p;
  };
  for (size_t d = 0; d < from.size(); ++d) {
    if (from[d] == to[d]) continue;
    // ONNX's 0: the same extent at the same position, after dims of the same total size (the
    // same factor of the flat offset)
    if (d < target.size() && target[d] == from[d] && from[d] > 0 && before(from, d) == before(target, d)) {
      out[d] = to[d];
      follows[d] = true;
    } else {
      rest.push_back(d);
    }
  }
  if (rest.size() > 1) return std::nullopt;
  if (rest.size() == 1) {
    // Input dim a spans the flat offsets [inner, span = inner * from[a]) as a factor.
    const size_t a = rest[0];
    if (from[a] <= 0 || to[a] <= 0) return std::nullopt;
    int64_t inner = 1;
    for (size_t d = a + 1; d < from.size(); ++d) inner *= from[d];
    if (inner <= 0) return std::nullopt;
    const int64_t span = inner * from[a];
    std::vector<int64_t> stride(target.size(), 1);  // of each target dim
    for (size_t j = target.size(); j-- > 0;) {
      if (target[j] <= 0) return std::nullopt;
      if (j > 0) stride[j - 1] = stride[j] * target[j];
    }
    // One target dim j holds the whole span, from a multiple of its stride: target[j] =
    // outer * from[a] * (inner / stride), which becomes outer * to[a] * (inner / stride). A
    // dim of size 1 fits between any two factors; it is taken as the innermost factor of the
    // outermost dim that can hold it (batch-like dims stay together: a dilated conv made dense
    // puts its phases and the batch in dim 0). A larger dim has one place.
    bool placed = false;
    for (size_t j = 0; j < target.size() && !placed; ++j) {
      if (follows[j] || stride[j] > inner || inner % stride[j] != 0 || (stride[j] * target[j]) % span != 0) continue;
      out[j] = target[j] / from[a] * to[a];
      placed = true;
    }
    // Or target dims split the span exactly (the phases and batch of a dense conv's output
    // split again): one of them grows by to[a] / from[a]. Where that leaves a choice, a dim of
    // size 1 (where a dim bound to 1 went), the innermost.
    if (!placed) {
      std::optional<size_t> pick;
      int64_t covered = 1;
      bool starts = false, ends = false;
      for (size_t j = target.size(); j-- > 0;) {
        if (stride[j] < inner || stride[j] * target[j] > span) continue;
        covered *= target[j];
        starts = starts || stride[j] == inner;
        ends = ends || stride[j] * target[j] == span;
        if (follows[j] || (target[j] * to[a]) % from[a] != 0) continue;
        if (!pick || (target[j] == 1 && target[*pick] != 1)) pick = j;
      }
      if (!pick || !starts || !ends || covered != from[a]) return std::nullopt;
      out[*pick] = target[*pick] * to[a] / from[a];
    }
  }
  if (numel(out) != numel(to)) return std::nullopt;
  return out;
}

namespace {

[[noreturn]] void cannot(const Node& n, const std::string& why) {
  throw Unsupported(cat(op_name(n.op), " '", n.name, "': ", why));
}

std::vector<size_t> changed_dims(const Shape& from, const Shape& to) {
  std::vector<size_t> c;
  for (size_t d = 0; d < from.size() && d < to.size(); ++d)
    if (from[d] != to[d]) c.push_back(d);
  return c;
}

/// n's op with the attributes that spell out extents following the inputs' new shapes.
Op follow(const Node& n, const Graph& g, const std::vector<Shape>& old_in, const std::vector<Shape>& new_in) {
  const Shape& out_old = g.type(n.outputs[0]).shape;
  auto reshape = [&](const Shape& from, const Shape& to, const Shape& target, const char* what) {
    auto s = follow_reshape(from, to, target);
    if (!s) cannot(n, cat(what, " ", target, " of ", from, " has no counterpart for ", to));
    return *s;
  };
  if (old_in.empty() || old_in[0] == new_in[0]) {
    if (const auto* p = std::get_if<ops::Patch>(&n.op); p && old_in.size() == 2 && old_in[1] != new_in[1])
      cannot(n, cat("its patch ", old_in[1], " became ", new_in[1], " while the base stayed ", old_in[0]));
    return n.op;
  }
  const std::vector<size_t> changed = changed_dims(old_in[0], new_in[0]);
  if (old_in[0].size() != new_in[0].size()) cannot(n, "an input changed rank");
  return std::visit(
      [&](const auto& o) -> Op {
        using O = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<O, ops::Reshape>) {
          return ops::Reshape{.shape = reshape(old_in[0], new_in[0], o.shape, "shape"), .allowzero = o.allowzero};
        } else if constexpr (std::is_same_v<O, ops::RT>) {
          ops::RT r = o;
          r.split_shape = reshape(old_in[0], new_in[0], o.split_shape, "split shape");
          r.out_shape = reshape(o.transposed_shape(), r.transposed_shape(), o.out_shape, "output shape");
          return r;
        } else if constexpr (std::is_same_v<O, ops::Slice>) {
          ops::Slice s;
          for (size_t d = 0; d < o.begin.size(); ++d) {
            int64_t e = o.begin[d] + out_old[d] * o.step[d];
            if (e < 0) e = std::numeric_limits<int64_t>::min();
            if (std::find(changed.begin(), changed.end(), d) != changed.end()) {
              if (o.begin[d] != 0 || o.step[d] != 1 || out_old[d] != old_in[0][d])
                cannot(n, cat("it takes part of dim ", d, ", whose extent changes"));
              e = std::numeric_limits<int64_t>::max();
            }
            s.starts.push_back(o.begin[d]);
            s.ends.push_back(e);
            s.axes.push_back(int64_t(d));
            s.steps.push_back(o.step[d]);
          }
          return s;
        } else if constexpr (std::is_same_v<O, ops::Expand>) {
          ops::Expand e = o;
          const size_t off = o.shape.size() - old_in[0].size();
          for (size_t d : changed) {
            if (o.shape[off + d] != old_in[0][d]) cannot(n, cat("it broadcasts dim ", d, ", whose extent changes"));
            e.shape[off + d] = new_in[0][d];
          }
          return e;
        } else if constexpr (std::is_same_v<O, ops::Patch>) {
          for (size_t d : changed)
            if (o.offsets[d] != 0 || old_in[1][d] != old_in[0][d]) cannot(n, cat("it patches part of dim ", d, ", whose extent changes"));
          if (changed_dims(old_in[1], new_in[1]) != changed) cannot(n, "its base and its patch change differently");
          return o;
        } else if constexpr (std::is_same_v<O, ops::Split>) {
          if (std::find(changed.begin(), changed.end(), size_t(o.axis)) != changed.end())
            cannot(n, cat("it splits dim ", o.axis, ", whose extent changes"));
          return o;
        } else if constexpr (std::is_same_v<O, ops::Resize>) {
          if (!o.axes.empty()) cannot(n, "it resizes listed axes of an input whose shape changes");
          ops::Resize r = o;
          for (size_t d : changed)
            if (o.sizes[d] != old_in[0][d]) cannot(n, cat("it resizes dim ", d, ", whose extent changes"));
          if (o.by_sizes) {
            for (size_t d : changed) r.sizes[d] = new_in[0][d];
            r.scales.clear();
          } else {
            r.sizes.clear();
          }
          return r;
        } else {
          return o;
        }
      },
      n.op);
}

}  // namespace

namespace {
/// Nodes of a program by name.
std::map<std::string, NodeId> nodes_by_name(const Graph* g) {
  std::map<std::string, NodeId> m;
  for (NodeId id = 0; id < g->num_nodes(); ++id) m.emplace(g->node(id).name, id);
  return m;
}

std::vector<Shape> input_shapes_of(const Graph& g, const Node& n) {
  std::vector<Shape> s;
  for (TensorId t : n.inputs) s.push_back(g.type(t).shape);
  return s;
}

/// Whether constants a (of g) and b (of base) are the same tensor: the same type and values
/// (copies of a program share their constants' storage: compared at once).
bool same_constant(const TensorInfo& a, const TensorInfo& b) {
  if (!b.is_constant() || a.type != b.type || a.value->index() != b.value->index()) return false;
  return std::visit(
      [&](const auto& x) {
        const auto& y = std::get<std::decay_t<decltype(x)>>(*b.value);
        if (x.size() != y.size()) return false;
        if (x.data() == y.data()) return true;
        const auto xs = x.span(), ys = y.span();
        return std::equal(xs.begin(), xs.end(), ys.begin());
      },
      *a.value);
}
}  // namespace

Graph rebind(const Graph& g, const std::map<std::string, Shape>& input_shapes, const std::vector<RebindGuide>& guides) {
  Graph out;
  out.name = g.name;
  GraphCopy copy(g, out);
  for (TensorId t : g.inputs()) {
    TensorType type = g.type(t);
    if (auto it = input_shapes.find(g.tensor(t).name); it != input_shapes.end()) type.shape = it->second;
    copy.map[size_t(t)] = out.add_input(g.tensor(t).name, type);
  }
  for (const auto& guide : guides) PET_CHECK(guide.base && guide.there, "rebind: a guide without its two programs");
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    const auto& info = g.tensor(t);
    if (!info.is_constant()) continue;
    const TensorInfo* there = nullptr;
    for (const auto& guide : guides) {
      auto b = guide.base->find(info.name);
      auto h = guide.there->find(info.name);
      if (b && h && same_constant(info, guide.base->tensor(*b)) && guide.there->tensor(*h).is_constant() &&
          guide.there->type(*h).dtype == info.type.dtype) {
        there = &guide.there->tensor(*h);
        break;
      }
    }
    copy.map[size_t(t)] = out.add_constant(info.name, info.type.dtype, there ? *there->value : *info.value);
  }
  struct Named {
    std::map<std::string, NodeId> base, there;
  };
  std::vector<Named> named;
  for (const auto& guide : guides) named.push_back({nodes_by_name(guide.base), nodes_by_name(guide.there)});
  // The op of a guide's node that g's node n is, at the new input shapes, where a guide knows it.
  auto guided_op = [&](const Node& n, const std::vector<Shape>& old_in, const std::vector<Shape>& new_in) -> const Op* {
    for (size_t k = 0; k < guides.size(); ++k) {
      auto b = named[k].base.find(n.name);
      auto h = named[k].there.find(n.name);
      if (b == named[k].base.end() || h == named[k].there.end()) continue;
      const Node& bn = guides[k].base->node(b->second);
      const Node& hn = guides[k].there->node(h->second);
      if (bn.op.index() != n.op.index() || hn.op.index() != n.op.index() || op_signature(bn.op) != op_signature(n.op)) continue;
      if (input_shapes_of(*guides[k].base, bn) != old_in || input_shapes_of(*guides[k].there, hn) != new_in) continue;
      return &hn.op;
    }
    return nullptr;
  };
  for (NodeId id : g.topo_order()) {
    const Node& n = g.node(id);
    std::vector<Shape> old_in, new_in;
    for (TensorId t : n.inputs) {
      old_in.push_back(g.type(t).shape);
      new_in.push_back(out.type(copy[t]).shape);
    }
    const Op* known = guided_op(n, old_in, new_in);
    const Op op = known ? *known : follow(n, g, old_in, new_in);
    try {
      copy.node(id, true, &op);
    } catch (const InvalidInput& e) {
      throw Unsupported(cat("at the new shapes, ", e.what()));
    }
  }
  copy.outputs();
  return out;
}

}  // namespace pet::transform
