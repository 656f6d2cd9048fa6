// Window programs as JSON (include/pet/optimize/serialize.hpp).
#include "pet/optimize/serialize.hpp"

#include <cstdio>
#include <cstdlib>
#include <map>

#include "pet/eval/value.hpp"

namespace pet::optimize {
namespace {
using nlohmann::json;

template <class T>
struct is_tensor : std::false_type {};
template <class E>
struct is_tensor<Tensor<E>> : std::true_type {};

// Floating-point values as exact hexadecimal text (JSON has no NaN or infinity).
std::string hex(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%a", v);
  return b;
}
double unhex(const json& j) {
  const std::string s = j.get<std::string>();
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end) throw InvalidInput(cat("'", s, "' is not a number"));
  return v;
}

template <class T>
json enc(const T& v) {
  if constexpr (std::is_floating_point_v<T>) {
    return hex(double(v));
  } else if constexpr (is_tensor<T>::value) {
    json d = json::array();
    for (int64_t i = 0; i < v.size(); ++i) d.push_back(enc(v[i]));
    return {{"shape", v.shape()}, {"data", d}};
  } else if constexpr (std::is_same_v<T, ConstValue> || std::is_same_v<T, Value<float>>) {
    // kind 0: float, 1: integers (1-byte storage written as integers too; add_constant
    // narrows them again)
    return std::visit([&](const auto& t) {
      using E = std::remove_cvref_t<decltype(t[0])>;
      return json{{"kind", std::is_same_v<E, float> ? 0 : 1}, {"tensor", enc(t)}};
    }, v);
  } else if constexpr (requires { typename T::value_type; } && !std::is_same_v<T, std::string>) {
    json a = json::array();
    for (const auto& x : v) a.push_back(enc(x));
    return a;
  } else {
    return json(v);
  }
}

template <class T>
void dec(const json& j, T& v) {
  if constexpr (std::is_floating_point_v<T>) {
    v = T(unhex(j));
  } else if constexpr (is_tensor<T>::value) {
    using E = std::remove_cvref_t<decltype(v[0])>;
    Shape shape = j.at("shape").get<Shape>();
    const json& d = j.at("data");
    if (int64_t(d.size()) != numel(shape)) throw InvalidInput("a tensor's data does not fit its shape");
    std::vector<E> data(d.size());
    for (size_t i = 0; i < d.size(); ++i) dec(d[i], data[i]);
    v = Tensor<E>(std::move(shape), std::move(data));
  } else if constexpr (std::is_same_v<T, ConstValue> || std::is_same_v<T, Value<float>>) {
    if (j.at("kind").get<int>() == 0) {
      Tensor<float> t;
      dec(j.at("tensor"), t);
      v = std::move(t);
    } else {
      Tensor<int64_t> t;
      dec(j.at("tensor"), t);
      v = std::move(t);
    }
  } else if constexpr (requires { typename T::value_type; } && !std::is_same_v<T, std::string>) {
    v.clear();
    for (const auto& x : j) {
      typename T::value_type e{};
      dec(x, e);
      v.push_back(std::move(e));
    }
  } else {
    v = j.get<T>();
  }
}

json op_to_json(const Op& op) {
  return std::visit([](const auto& o) {
    json attrs = json::object();
    for_each_attr(o, [&](std::string_view name, const auto& v) { attrs[std::string(name)] = enc(v); });
    return json{{"op", std::string(o.name)}, {"attrs", attrs}};
  }, op);
}

template <size_t I = 0>
Op make_op(std::string_view name) {
  if constexpr (I == std::variant_size_v<Op>) {
    throw InvalidInput(cat("unknown op '", name, "'"));
  } else {
    using O = std::variant_alternative_t<I, Op>;
    if (O::name == name) return O{};
    return make_op<I + 1>(name);
  }
}

Op op_from_json(const json& j) {
  Op op = make_op(j.at("op").get<std::string>());
  const json& attrs = j.at("attrs");
  std::visit([&](auto& o) { for_each_attr(o, [&](std::string_view name, auto& v) { dec(attrs.at(std::string(name)), v); }); }, op);
  return op;
}

/// The index of `window`'s weight that `p`'s tensor t stands for, or -1.
int weight_ref(const Graph& p, TensorId t, const Graph& window) {
  const TensorInfo& info = p.tensor(t);
  if (!info.is_constant() || !is_float(info.type.dtype)) return -1;
  for (TensorId w = 0; w < window.num_tensors(); ++w)
    if (window.tensor(w).is_constant() && window.tensor(w).name == info.name && window.type(w) == info.type) return int(w);
  return -1;
}
}  // namespace

json program_to_json(const Graph& p, const Graph& window) {
  json tensors = json::array(), nodes = json::array(), inputs = json::array(), outputs = json::array();
  std::map<TensorId, size_t> index;  // p's tensor -> its position in "tensors"
  auto add = [&](TensorId t, json j) {
    index[t] = tensors.size();
    tensors.push_back(std::move(j));
  };
  for (TensorId t : p.inputs()) {
    inputs.push_back(tensors.size());
    add(t, {{"input", p.tensor(t).name}, {"dtype", int(p.type(t).dtype)}, {"shape", p.type(t).shape}});
  }
  for (TensorId t = 0; t < p.num_tensors(); ++t) {
    const TensorInfo& info = p.tensor(t);
    if (!info.is_constant()) continue;
    if (weight_ref(p, t, window) >= 0) add(t, {{"weight", info.name}});
    else add(t, {{"constant", info.name}, {"dtype", int(info.type.dtype)}, {"value", enc(*info.value)}});
  }
  // Nodes in id order when that is a topological order (as built; it keeps the program's
  // structure key, which follows the graph's own topological order), else sorted.
  std::vector<NodeId> order;
  {
    std::vector<bool> ready(size_t(p.num_tensors()), false);
    for (TensorId t = 0; t < p.num_tensors(); ++t) ready[size_t(t)] = p.tensor(t).producer < 0;
    bool in_order = true;
    for (NodeId n = 0; n < p.num_nodes() && in_order; ++n) {
      if (p.erased(n)) continue;
      for (TensorId t : p.node(n).inputs) in_order = in_order && ready[size_t(t)];
      for (TensorId t : p.node(n).outputs) ready[size_t(t)] = true;
      order.push_back(n);
    }
    if (!in_order) order = p.topo_order();
  }
  for (NodeId n : order) {
    const Node& node = p.node(n);
    json in = json::array(), out = json::array();
    for (TensorId t : node.inputs) in.push_back(index.at(t));
    for (TensorId t : node.outputs) {
      out.push_back(p.tensor(t).name);
      add(t, nullptr);
    }
    nodes.push_back({{"name", node.name}, {"op", op_to_json(node.op)}, {"inputs", in}, {"outputs", out}});
  }
  for (TensorId t : p.outputs()) outputs.push_back(index.at(t));
  return {{"name", p.name}, {"tensors", tensors.size()}, {"defs", tensors}, {"nodes", nodes}, {"inputs", inputs}, {"outputs", outputs}};
}

Graph program_from_json(const json& j, const Graph& window) {
  try {
    Graph p;
    p.name = j.at("name").get<std::string>();
    const json& defs = j.at("defs");
    std::vector<TensorId> id(defs.size(), -1);
    for (size_t i = 0; i < defs.size(); ++i) {
      const json& d = defs[i];
      if (d.is_null()) continue;  // a node output, added with its node
      if (d.contains("input")) {
        id[i] = p.add_input(d.at("input").get<std::string>(), TensorType{DType(d.at("dtype").get<int>()), d.at("shape").get<Shape>()});
      } else if (d.contains("weight")) {
        const std::string name = d.at("weight").get<std::string>();
        TensorId w = -1;
        for (TensorId t = 0; t < window.num_tensors(); ++t)
          if (window.tensor(t).is_constant() && window.tensor(t).name == name) w = t;
        if (w < 0) throw InvalidInput(cat("the window has no weight '", name, "'"));
        id[i] = p.add_constant(name, window.type(w).dtype, *window.tensor(w).value);
      } else {
        ConstValue v;
        dec(d.at("value"), v);
        id[i] = p.add_constant(d.at("constant").get<std::string>(), DType(d.at("dtype").get<int>()), std::move(v));
      }
    }
    size_t next = 0;
    for (const json& n : j.at("nodes")) {
      std::vector<TensorId> in;
      for (const json& k : n.at("inputs")) {
        const size_t i = k.get<size_t>();
        if (i >= id.size() || id[i] < 0) throw InvalidInput("a node reads a tensor defined after it");
        in.push_back(id[i]);
      }
      auto names = n.at("outputs").get<std::vector<std::string>>();
      auto outs = p.add_node(n.at("name").get<std::string>(), op_from_json(n.at("op")), in, names);
      for (TensorId t : outs) {
        while (next < defs.size() && !defs[next].is_null()) ++next;
        if (next >= defs.size()) throw InvalidInput("more node outputs than tensors");
        id[next++] = t;
      }
    }
    for (const json& k : j.at("outputs")) {
      const size_t i = k.get<size_t>();
      if (i >= id.size() || id[i] < 0) throw InvalidInput("an output is not defined");
      p.add_output(id[i]);
    }
    return p;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw InvalidInput(cat("a damaged search-cache entry: ", e.what()));
  }
}

}  // namespace pet::optimize
