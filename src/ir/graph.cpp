#include "pet/ir/graph.hpp"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/connected_components.hpp>
#include <boost/graph/strong_components.hpp>
#include <boost/graph/topological_sort.hpp>
#include <cstdio>

namespace pet {

// ---------------------------------------------------------------- constant values
const Shape& const_shape(const ConstValue& v) {
  return std::visit([](const auto& t) -> const Shape& { return t.shape(); }, v);
}

ConstInts::ConstInts(const ConstValue& v) : n_(std::visit([](const auto& t) { return t.size(); }, v)), kind_(int(v.index())) {
  if (kind_ == 0) throw InternalError("ConstInts: a float constant read as integers");
  std::visit([&](const auto& t) { p_ = t.data(); }, v);
}

std::string ints_key(const ConstInts& v) {
  std::string s;
  if (v.size() <= 256) {
    for (int64_t i = 0; i < v.size(); ++i) s += cat(i ? "," : "", v[i]);
    return s;
  }
  uint64_t a = 1469598103934665603ull, b = 0x9e3779b97f4a7c15ull;  // FNV-1a over the bytes; a multiply-xorshift
  for (int64_t i = 0; i < v.size(); ++i) {
    const uint64_t x = uint64_t(v[i]);
    for (int k = 0; k < 64; k += 8) a = (a ^ ((x >> k) & 0xff)) * 1099511628211ull;
    b = (b ^ x) * 0xff51afd7ed558ccdull;
    b ^= b >> 33;
  }
  char h[40];
  std::snprintf(h, sizeof h, "%016llx:%016llx", (unsigned long long)a, (unsigned long long)b);
  return cat("#", v.size(), ":", h);
}

Tensor<int64_t> const_ints(const ConstValue& v) {
  return std::visit([](const auto& t) -> Tensor<int64_t> {
    using E = std::decay_t<decltype(t[0])>;
    if constexpr (std::is_same_v<E, int64_t>) {
      return t;
    } else if constexpr (std::is_same_v<E, float>) {
      throw InternalError("const_ints: a float constant read as integers");
    } else {
      Tensor<int64_t> out(t.shape());
      const E* src = t.data();
      int64_t* dst = out.data();
      for (int64_t i = 0; i < t.size(); ++i) dst[i] = int64_t(src[i]);
      return out;
    }
  }, v);
}

ConstValue const_storage(DType t, ConstValue v) {
  const bool f = std::holds_alternative<Tensor<float>>(v);
  if (f != is_float(t)) throw InternalError(cat("a constant's storage does not match its dtype ", dtype_name(t)));
  if (f) return v;
  auto narrow = [&](auto tag) -> ConstValue {
    using E = decltype(tag);
    if (std::holds_alternative<Tensor<E>>(v)) return v;
    const Tensor<int64_t> wide = const_ints(v);
    Tensor<E> out(wide.shape());
    for (int64_t i = 0; i < wide.size(); ++i) out[i] = E(wrap_to(t, wide[i]));
    return out;
  };
  switch (t) {
    case DType::Int8: return narrow(int8_t{});
    case DType::UInt8:
    case DType::Bool: return narrow(uint8_t{});
    default: return std::holds_alternative<Tensor<int64_t>>(v) ? v : ConstValue(const_ints(v));
  }
}

TensorId Graph::new_tensor(std::string name, TensorType type) {
  if (name.empty()) throw InvalidInput("tensor names must not be empty");
  if (by_name_.count(name)) throw InvalidInput(cat("tensor name '", name, "' is defined twice"));
  numel(type.shape);  // rejects negative / absurd shapes
  if (type.shape.size() > size_t(kMaxRank))
    throw Unsupported(cat("tensor '", name, "' has rank ", type.shape.size(), "; pet supports up to ", kMaxRank));
  TensorId id = TensorId(tensors_.size());
  tensors_.push_back(TensorInfo{name, std::move(type), std::nullopt, -1, 0});
  uses_.emplace_back();
  by_name_.emplace(std::move(name), id);
  return id;
}

TensorId Graph::add_input(std::string name, TensorType type) {
  TensorId id = new_tensor(std::move(name), std::move(type));
  inputs_.push_back(id);
  return id;
}

TensorId Graph::add_constant(std::string name, Tensor<float> value) {
  return add_constant(std::move(name), DType::Float32, ConstValue(std::move(value)));
}
TensorId Graph::add_constant(std::string name, DType dtype, Tensor<int64_t> value) {
  return add_constant(std::move(name), dtype, ConstValue(std::move(value)));
}
TensorId Graph::add_constant(std::string name, DType dtype, ConstValue value) {
  if (std::holds_alternative<Tensor<float>>(value) != is_float(dtype))
    throw InternalError(cat("constant '", name, "': storage does not match dtype ", dtype_name(dtype)));
  value = const_storage(dtype, std::move(value));
  const Shape s = const_shape(value);
  TensorId id = new_tensor(std::move(name), {dtype, s});
  tensors_[size_t(id)].value = std::move(value);
  return id;
}

std::vector<TensorId> Graph::add_node(std::string name, Op op, std::vector<TensorId> inputs,
                                      std::vector<std::string> output_names) {
  Types in;
  for (TensorId t : inputs) {
    if (t < 0 || t >= num_tensors())
      throw InternalError(cat(op_name(op), " '", name, "': input tensor id ", t, " does not exist"));
    in.push_back(tensors_[size_t(t)].type);
  }
  Types out;
  try {
    out = infer_types(op, in);
    for (const auto& t : out) {
      numel(t.shape);  // at most 2^36 elements; and each dim, also of an empty tensor
      for (int64_t d : t.shape)
        if (d > kMaxElements) throw Unsupported(cat("output shape ", t.shape, " has a dimension over 2^36 (the most pet supports)"));
    }
  } catch (const InvalidInput& e) {
    throw InvalidInput(cat(op_name(op), " '", name, "': ", e.what()));
  } catch (const Unsupported& e) {
    throw Unsupported(cat(op_name(op), " '", name, "': ", e.what()));
  }
  if (!output_names.empty() && output_names.size() != out.size())
    throw InvalidInput(cat(op_name(op), " '", name, "': ", output_names.size(), " output names for ", out.size(), " outputs"));
  NodeId nid = NodeId(nodes_.size());
  std::vector<TensorId> outs;
  for (size_t k = 0; k < out.size(); ++k) {
    std::string oname = output_names.empty() ? (k == 0 ? name : cat(name, ":", k)) : output_names[k];
    if (output_names.empty() && by_name_.count(oname)) oname = unique_name(oname);
    TensorId t = new_tensor(oname, out[k]);
    tensors_[size_t(t)].producer = nid;
    tensors_[size_t(t)].output_index = int(k);
    outs.push_back(t);
  }
  for (size_t i = 0; i < inputs.size(); ++i) uses_[size_t(inputs[i])].push_back({nid, int(i)});
  nodes_.push_back(Node{std::move(name), std::move(op), std::move(inputs), outs});
  erased_.push_back(false);
  return outs;
}

int Graph::replace_all_uses(TensorId from, TensorId to) {
  PET_CHECK(from >= 0 && from < num_tensors() && to >= 0 && to < num_tensors(), "replace_all_uses of tensor ids ", from, ", ", to);
  if (from == to) return 0;
  PET_CHECK(type(from) == type(to), "replace_all_uses: '", tensor(from).name, "' is ", to_string(type(from)), " but '", tensor(to).name,
            "' is ", to_string(type(to)));
  int n = 0;
  for (const Use& u : uses_[size_t(from)]) {
    nodes_[size_t(u.node)].inputs[size_t(u.slot)] = to;
    uses_[size_t(to)].push_back(u);
    ++n;
  }
  uses_[size_t(from)].clear();
  for (TensorId& o : outputs_)
    if (o == from) o = to, ++n;
  return n;
}

void Graph::set_input(NodeId n, int slot, TensorId t) {
  PET_CHECK(n >= 0 && n < num_nodes() && !erased_[size_t(n)], "set_input on node id ", n);
  Node& node = nodes_[size_t(n)];
  PET_CHECK(slot >= 0 && size_t(slot) < node.inputs.size(), "set_input: node '", node.name, "' has no input ", slot);
  TensorId old = node.inputs[size_t(slot)];
  if (old == t) return;
  PET_CHECK(type(old) == type(t), "set_input: node '", node.name, "' input ", slot, " is ", to_string(type(old)), ", not ", to_string(type(t)));
  auto& u = uses_[size_t(old)];
  u.erase(std::find(u.begin(), u.end(), Use{n, slot}));
  node.inputs[size_t(slot)] = t;
  uses_[size_t(t)].push_back({n, slot});
}

void Graph::erase_node(NodeId n) {
  PET_CHECK(n >= 0 && n < num_nodes() && !erased_[size_t(n)], "erase of node id ", n);
  const Node& node = nodes_[size_t(n)];
  for (TensorId o : node.outputs)
    PET_CHECK(uses_[size_t(o)].empty() && !is_output(o), "erase: output '", tensor(o).name, "' of node '", node.name, "' is still read");
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    auto& u = uses_[size_t(node.inputs[i])];
    u.erase(std::find(u.begin(), u.end(), Use{n, int(i)}));
  }
  erased_[size_t(n)] = true;
}

std::vector<TensorId> Graph::compact() {
  Graph h;
  h.name = name;
  GraphCopy c(*this, h);
  c.leaves([&](TensorId t) { return !tensor(t).is_constant() || !uses_[size_t(t)].empty() || is_output(t); });
  for (NodeId n : topo_order()) c.node(n);
  c.outputs();
  std::vector<TensorId> map = std::move(c.map);
  *this = std::move(h);
  return map;
}

void Graph::add_output(TensorId t) {
  if (t < 0 || t >= num_tensors()) throw InternalError(cat("output tensor id ", t, " does not exist"));
  outputs_.push_back(t);
}

void Graph::rename(TensorId t, const std::string& name) {
  PET_CHECK(t >= 0 && t < num_tensors(), "rename of tensor id ", t);
  if (tensors_[size_t(t)].name == name) return;
  if (name.empty() || by_name_.count(name)) throw InvalidInput(cat("cannot rename '", tensors_[size_t(t)].name, "' to '", name, "': name in use"));
  by_name_.erase(tensors_[size_t(t)].name);
  tensors_[size_t(t)].name = name;
  by_name_.emplace(name, t);
}

std::optional<TensorId> Graph::find(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

Types Graph::input_types(NodeId n) const {
  Types t;
  for (TensorId x : node(n).inputs) t.push_back(type(x));
  return t;
}
Types Graph::output_types(NodeId n) const {
  Types t;
  for (TensorId x : node(n).outputs) t.push_back(type(x));
  return t;
}

std::vector<std::vector<NodeId>> Graph::consumers() const {
  std::vector<std::vector<NodeId>> c(tensors_.size());
  for (size_t n = 0; n < nodes_.size(); ++n)
    if (!erased_[n])
      for (TensorId t : nodes_[n].inputs) c[size_t(t)].push_back(NodeId(n));
  return c;
}

std::string Graph::unique_name(const std::string& prefix) const {
  if (!by_name_.count(prefix)) return prefix;
  for (size_t i = nodes_.size();; ++i) {
    std::string s = cat(prefix, "_", i);
    if (!by_name_.count(s)) return s;
  }
}

std::vector<int> topological_order(int n, const std::vector<std::pair<int, int>>& edges, std::vector<int>* cycle) {
  using G = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  G g(static_cast<size_t>(n));
  for (auto [a, b] : edges) boost::add_edge(size_t(a), size_t(b), g);
  std::vector<size_t> rev;
  try {
    boost::topological_sort(g, std::back_inserter(rev));
  } catch (const boost::not_a_dag&) {
    if (cycle) {
      std::vector<int> comp(static_cast<size_t>(n));
      int nc = boost::strong_components(g, comp.data());
      std::vector<int> size(size_t(nc), 0);
      for (int c : comp) ++size[size_t(c)];
      cycle->clear();
      for (int v = 0; v < n; ++v)
        if (size[size_t(comp[size_t(v)])] > 1) cycle->push_back(v);
      for (auto [a, b] : edges)
        if (a == b) cycle->push_back(a);
    }
    return {};
  }
  return std::vector<int>(rev.rbegin(), rev.rend());
}

std::vector<NodeId> Graph::topo_order() const {
  std::vector<std::pair<int, int>> edges;
  for (size_t n = 0; n < nodes_.size(); ++n)
    if (!erased_[n])
      for (TensorId t : nodes_[n].inputs) {
        NodeId p = tensors_[size_t(t)].producer;
        if (p >= 0) edges.emplace_back(p, int(n));
      }
  std::vector<int> cyc;
  auto order = topological_order(num_nodes(), edges, &cyc);
  if (order.size() != nodes_.size() && !nodes_.empty()) {
    std::vector<std::string> names;
    for (int v : cyc) names.push_back(nodes_[size_t(v)].name);
    throw InvalidInput(cat("graph '", name, "' has a cycle through nodes ", names));
  }
  std::erase_if(order, [&](int n) { return erased_[size_t(n)]; });
  return order;
}

void Graph::validate() const {
  for (size_t n = 0; n < nodes_.size(); ++n) {
    for (TensorId t : nodes_[n].inputs)
      PET_CHECK(t >= 0 && t < num_tensors(), "node ", nodes_[n].name, " reads tensor id ", t);
    for (TensorId t : nodes_[n].outputs)
      PET_CHECK(tensors_[size_t(t)].producer == NodeId(n), "tensor ", tensors_[size_t(t)].name, " producer mismatch");
  }
  for (TensorId t : outputs_) PET_CHECK(t >= 0 && t < num_tensors(), "graph output id ", t);
  topo_order();
}

void GraphCopy::leaves(const std::function<bool(TensorId)>& keep) {
  for (TensorId t : src.inputs())
    if (!keep || keep(t)) map[size_t(t)] = dst.add_input(src.tensor(t).name, src.type(t));
  for (TensorId t = 0; t < src.num_tensors(); ++t)
    if (src.tensor(t).is_constant() && (!keep || keep(t)))
      map[size_t(t)] = dst.add_constant(src.tensor(t).name, src.type(t).dtype, *src.tensor(t).value);
}

std::vector<TensorId> GraphCopy::node(NodeId n, bool same_names, const Op* op, const std::vector<TensorId>* inputs) {
  const Node& nd = src.node(n);
  std::vector<TensorId> in;
  if (inputs) in = *inputs;
  else
    for (TensorId t : nd.inputs) in.push_back(map[size_t(t)]);
  std::vector<std::string> names;
  if (same_names)
    for (TensorId t : nd.outputs) names.push_back(src.tensor(t).name);
  auto outs = dst.add_node(same_names ? nd.name : dst.unique_name(nd.name), op ? *op : nd.op, in, names);
  for (size_t k = 0; k < outs.size() && k < nd.outputs.size(); ++k) map[size_t(nd.outputs[k])] = outs[k];
  return outs;
}

void GraphCopy::outputs() {
  for (TensorId t : src.outputs()) {
    PET_CHECK(map[size_t(t)] >= 0, "output '", src.tensor(t).name, "' was not copied");
    dst.add_output(map[size_t(t)]);
  }
}

std::string to_text(const Graph& g) {
  std::string s;
  for (TensorId t : g.inputs()) s += cat("input ", g.tensor(t).name, " ", to_string(g.type(t)), "\n");
  for (NodeId n : g.topo_order()) {
    const Node& node = g.node(n);
    s += cat(op_signature(node.op), " '", node.name, "' (");
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const TensorInfo& ti = g.tensor(node.inputs[i]);
      s += cat(i ? ", " : "", ti.is_constant() ? "const " : "", ti.name, " ", ti.type.shape);
    }
    s += ") ->";
    for (TensorId o : node.outputs) s += cat(" ", g.tensor(o).name, " ", g.type(o).shape);
    s += "\n";
  }
  s += "outputs:";
  for (TensorId t : g.outputs()) s += cat(" ", g.tensor(t).name);
  return s + "\n";
}

Graph remove_dead_nodes(const Graph& g) {
  std::vector<bool> live(size_t(g.num_tensors()), false);
  for (TensorId t : g.outputs()) live[size_t(t)] = true;
  auto order = g.topo_order();
  std::vector<bool> keep(size_t(g.num_nodes()), false);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Node& n = g.node(*it);
    bool used = false;
    for (TensorId t : n.outputs) used = used || live[size_t(t)];
    if (!used) continue;
    keep[size_t(*it)] = true;
    for (TensorId t : n.inputs) live[size_t(t)] = true;
  }
  Graph out;
  out.name = g.name;
  GraphCopy c(g, out);
  c.leaves([&](TensorId t) { return !g.tensor(t).is_constant() || live[size_t(t)]; });
  for (NodeId n : order)
    if (keep[size_t(n)]) c.node(n);
  c.outputs();
  return out;
}

std::vector<std::vector<NodeId>> multilinear_subprograms(const Graph& g) {
  using U = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS>;
  U u(static_cast<size_t>(g.num_nodes()));
  std::vector<bool> ml(size_t(g.num_nodes()));
  // (integer arithmetic, an Add of int32 sums or of shape values, is not: point evaluation
  // draws float leaves, and rewrites are of float programs)
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    ml[size_t(n)] = is_multilinear(g.node(n).op);
    for (TensorId t : g.node(n).outputs) ml[size_t(n)] = ml[size_t(n)] && is_float(g.type(t).dtype);
  }
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!ml[size_t(n)]) continue;
    for (TensorId t : g.node(n).inputs) {
      NodeId p = g.tensor(t).producer;
      if (p >= 0 && ml[size_t(p)]) boost::add_edge(size_t(p), size_t(n), u);
    }
  }
  std::vector<int> comp(static_cast<size_t>(g.num_nodes()));
  int nc = g.num_nodes() ? boost::connected_components(u, comp.data()) : 0;
  std::vector<std::vector<NodeId>> groups(static_cast<size_t>(nc));
  for (NodeId n : g.topo_order())
    if (ml[size_t(n)]) groups[size_t(comp[size_t(n)])].push_back(n);
  std::vector<std::vector<NodeId>> out;
  for (auto& gr : groups)
    if (!gr.empty()) out.push_back(std::move(gr));
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });
  return out;
}

}  // namespace pet
