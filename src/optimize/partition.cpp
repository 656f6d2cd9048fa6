// Partitioning a program into windows, extracting a window as a program of its own, and
// substituting a rewritten program back (include/pet/optimize/optimize.hpp).
#include <map>
#include <numeric>
#include <set>

#include "pet/optimize/optimize.hpp"
#include "pet/transform/patterns.hpp"

namespace pet::optimize {

namespace {

bool is_compute(const Op& op) {
  return std::holds_alternative<ops::Conv>(op) || std::holds_alternative<ops::MatMul>(op) || std::holds_alternative<ops::Gemm>(op);
}

/// Forward and backward reachability over the whole program, for convexity checks.
struct Reach {
  const Graph& g;
  std::vector<std::vector<NodeId>> succ, pred;
  explicit Reach(const Graph& graph) : g(graph), succ(size_t(graph.num_nodes())), pred(size_t(graph.num_nodes())) {
    for (NodeId n : g.topo_order())
      for (TensorId t : g.node(n).inputs)
        if (NodeId p = g.tensor(t).producer; p >= 0) succ[size_t(p)].push_back(n), pred[size_t(n)].push_back(p);
  }
  /// No node outside s is both reachable from s and reaches s.
  bool convex(const std::set<NodeId>& s) const {
    auto walk = [&](const std::vector<std::vector<NodeId>>& e) {
      std::vector<char> seen(succ.size(), 0);
      std::vector<NodeId> stack;
      for (NodeId n : s)
        for (NodeId m : e[size_t(n)])
          if (!s.count(m)) stack.push_back(m);
      while (!stack.empty()) {
        NodeId n = stack.back();
        stack.pop_back();
        if (seen[size_t(n)]) continue;
        seen[size_t(n)] = 1;
        for (NodeId m : e[size_t(n)])
          if (!s.count(m)) stack.push_back(m);
      }
      return seen;
    };
    auto down = walk(succ), up = walk(pred);
    for (size_t i = 0; i < down.size(); ++i)
      if (down[i] && up[i]) return false;
    return true;
  }
};

}  // namespace

Window make_window(const Graph& g, std::vector<NodeId> nodes) {
  Window win;
  win.nodes = std::move(nodes);
  const std::set<NodeId> inside(win.nodes.begin(), win.nodes.end());
  std::set<TensorId> produced, seen;
  for (NodeId n : win.nodes)
    for (TensorId t : g.node(n).outputs) produced.insert(t);
  for (NodeId n : win.nodes)
    for (TensorId t : g.node(n).inputs)
      if (!produced.count(t) && !g.tensor(t).is_constant() && seen.insert(t).second) win.inputs.push_back(t);
  for (NodeId n : win.nodes)
    for (TensorId t : g.node(n).outputs) {
      bool outside = g.is_output(t);
      for (const auto& u : g.uses(t)) outside = outside || !inside.count(u.node);
      if (outside) win.outputs.push_back(t);
    }
  return win;
}

std::vector<Window> partition(const Graph& g, int max_ops) {
  const auto order = g.topo_order();
  std::vector<int> pos(size_t(g.num_nodes()), -1);
  for (size_t i = 0; i < order.size(); ++i) pos[size_t(order[i])] = int(i);
  // Multilinear subprograms, joined when they read a common (non-constant) tensor.
  auto comps = multilinear_subprograms(g);
  std::vector<int> parent(comps.size());
  std::iota(parent.begin(), parent.end(), 0);
  std::function<int(int)> root = [&](int i) { return parent[size_t(i)] == i ? i : parent[size_t(i)] = root(parent[size_t(i)]); };
  std::map<TensorId, int> reader_comp;
  for (size_t c = 0; c < comps.size(); ++c) {
    std::set<NodeId> mine(comps[c].begin(), comps[c].end());
    for (NodeId n : comps[c])
      for (TensorId t : g.node(n).inputs) {
        NodeId p = g.tensor(t).producer;
        if (g.tensor(t).is_constant() || (p >= 0 && mine.count(p))) continue;
        auto [it, fresh] = reader_comp.emplace(t, int(c));
        if (!fresh) parent[size_t(root(int(c)))] = root(it->second);
      }
  }
  std::map<int, std::vector<NodeId>> units;
  for (size_t c = 0; c < comps.size(); ++c)
    for (NodeId n : comps[c]) units[root(int(c))].push_back(n);

  Reach reach(g);
  std::vector<Window> out;
  for (auto& [id, nodes] : units) {
    std::sort(nodes.begin(), nodes.end(), [&](NodeId a, NodeId b) { return pos[size_t(a)] < pos[size_t(b)]; });
    std::set<NodeId> left(nodes.begin(), nodes.end());
    while (!left.empty()) {
      // Seed: the first compute op (conv, matmul) left, else the first node left.
      NodeId seed = -1;
      for (NodeId n : nodes)
        if (left.count(n) && is_compute(g.node(n).op)) {
          seed = n;
          break;
        }
      if (seed < 0) seed = *std::find_if(nodes.begin(), nodes.end(), [&](NodeId n) { return left.count(n) > 0; });
      std::set<NodeId> w{seed};
      left.erase(seed);
      // Grow: siblings of the seed's kind reading the same tensor first (merges across
      // branches), then producers and consumers, while the window stays convex.
      bool grew = true;
      while (grew && int(w.size()) < max_ops) {
        grew = false;
        std::vector<std::pair<int, NodeId>> cand;  // (preference, node)
        for (NodeId n : nodes) {
          if (!left.count(n)) continue;
          int pref = -1;
          for (NodeId m : w) {
            const Node &a = g.node(n), &b = g.node(m);
            bool sibling = false, linked = false;
            for (TensorId t : a.inputs)
              for (TensorId u : b.inputs) sibling = sibling || (t == u && !g.tensor(t).is_constant());
            for (TensorId t : a.inputs) linked = linked || g.tensor(t).producer == m;
            for (TensorId t : b.inputs) linked = linked || g.tensor(t).producer == n;
            if (sibling && a.op.index() == b.op.index()) pref = std::max(pref, 2);
            else if (linked) pref = std::max(pref, 1);
            else if (sibling) pref = std::max(pref, 0);
          }
          if (pref >= 0) cand.push_back({-pref * 100000 + pos[size_t(n)], n});
        }
        std::sort(cand.begin(), cand.end());
        for (auto [key, n] : cand) {
          std::set<NodeId> t = w;
          t.insert(n);
          if (!reach.convex(t)) continue;
          w = std::move(t);
          left.erase(n);
          grew = true;
          break;
        }
      }
      std::vector<NodeId> nodes(w.begin(), w.end());
      std::sort(nodes.begin(), nodes.end(), [&](NodeId a, NodeId b) { return pos[size_t(a)] < pos[size_t(b)]; });
      Window win = make_window(g, std::move(nodes));
      if (!win.outputs.empty()) out.push_back(std::move(win));
    }
  }
  std::sort(out.begin(), out.end(), [&](const Window& a, const Window& b) { return pos[size_t(a.nodes[0])] < pos[size_t(b.nodes[0])]; });
  return out;
}

namespace {
/// The window's constants in order of first use.
std::vector<TensorId> window_constants(const Graph& g, const Window& w) {
  std::vector<TensorId> c;
  std::set<TensorId> seen;
  for (NodeId n : w.nodes)
    for (TensorId t : g.node(n).inputs)
      if (g.tensor(t).is_constant() && seen.insert(t).second) c.push_back(t);
  return c;
}
}  // namespace

Graph extract(const Graph& g, const Window& w) {
  Graph p;
  p.name = cat(g.name, "-window");
  std::map<TensorId, TensorId> map;
  for (size_t i = 0; i < w.inputs.size(); ++i) map[w.inputs[i]] = p.add_input(cat("in", i), g.type(w.inputs[i]));
  auto consts = window_constants(g, w);
  for (size_t i = 0; i < consts.size(); ++i) map[consts[i]] = p.add_constant(cat("w", i), g.type(consts[i]).dtype, *g.tensor(consts[i]).value);
  std::map<TensorId, std::string> out_name;
  for (size_t k = 0; k < w.outputs.size(); ++k) out_name[w.outputs[k]] = cat("out", k);
  int i = 0;
  for (NodeId n : w.nodes) {
    const Node& node = g.node(n);
    std::vector<TensorId> in;
    for (TensorId t : node.inputs) in.push_back(map.at(t));
    std::vector<std::string> names;
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      auto it = out_name.find(node.outputs[k]);
      names.push_back(it != out_name.end() ? it->second : cat("t", i, "_", k));
    }
    auto outs = p.add_node(cat("n", i++), node.op, in, names);
    for (size_t k = 0; k < outs.size(); ++k) map[node.outputs[k]] = outs[k];
  }
  for (TensorId t : w.outputs) p.add_output(map.at(t));
  return p;
}

std::string structure_key(const Graph& p) {
  std::string s;
  std::map<TensorId, std::string> ref;
  for (size_t i = 0; i < p.inputs().size(); ++i) {
    ref[p.inputs()[i]] = cat("i", i);
    s += cat("in ", to_string(p.type(p.inputs()[i])), ";");
  }
  int c = 0;
  for (TensorId t = 0; t < p.num_tensors(); ++t) {
    const auto& info = p.tensor(t);
    if (!info.is_constant()) continue;
    ref[t] = cat("c", c++);
    s += cat("const ", to_string(info.type), ";");
    if (!is_float(info.type.dtype)) {  // shape data: its values are part of the structure
      const ConstInts v(*info.value);
      s += cat(v.size() ? "=" : "", ints_key(v), ";");
    }
  }
  int n = 0;
  for (NodeId id : p.topo_order()) {
    const Node& node = p.node(id);
    s += cat(op_signature(node.op), "(");
    for (TensorId t : node.inputs) s += ref.at(t) + ",";
    s += ")";
    for (size_t k = 0; k < node.outputs.size(); ++k) ref[node.outputs[k]] = cat("n", n, ".", k);
    ++n;
    s += ";";
  }
  s += "out";
  for (TensorId t : p.outputs()) s += " " + ref.at(t);
  return s;
}

void substitute(Graph& g, const Window& w, const Graph& program) {
  PET_CHECK(program.inputs().size() == w.inputs.size() && program.outputs().size() == w.outputs.size(),
            "substitute: the program has ", program.inputs().size(), " inputs and ", program.outputs().size(), " outputs for a window of ",
            w.inputs.size(), " and ", w.outputs.size());
  auto consts = window_constants(g, w);
  std::map<TensorId, TensorId> map;
  for (size_t i = 0; i < w.inputs.size(); ++i) map[program.inputs()[i]] = w.inputs[i];
  const std::string stem = g.node(w.nodes[0]).name;
  for (TensorId t = 0; t < program.num_tensors(); ++t) {
    const auto& info = program.tensor(t);
    if (!info.is_constant()) continue;
    const std::string& nm = info.name;
    if (nm.size() > 1 && nm[0] == 'w' && std::all_of(nm.begin() + 1, nm.end(), ::isdigit)) {
      const size_t i = std::stoul(nm.substr(1));
      if (i < consts.size() && g.type(consts[i]) == info.type) {
        map[t] = consts[i];  // the window's own weight
        continue;
      }
    }
    map[t] = g.add_constant(g.unique_name(cat(stem, "_", nm)), info.type.dtype, *info.value);
  }
  for (NodeId id : program.topo_order()) {
    const Node& node = program.node(id);
    std::vector<TensorId> in;
    for (TensorId t : node.inputs) in.push_back(map.at(t));
    auto outs = g.add_node(g.unique_name(cat(stem, "_", node.name)), node.op, in);
    for (size_t k = 0; k < outs.size(); ++k) map[node.outputs[k]] = outs[k];
  }
  for (size_t k = 0; k < w.outputs.size(); ++k) transform::redirect(g, w.outputs[k], map.at(program.outputs()[k]));
  transform::erase_all(g, w.nodes);
}

}  // namespace pet::optimize
