#pragma once
// The ONNX importer's state and per-node logic (private to src/onnx): import.cpp binds inputs,
// orders and maps nodes and folds constants; control_flow.cpp inlines If, Loop and Scan and
// keeps sequences as import-time lists of tensors.
#include <cstring>
#include <unordered_map>

#include "op_mapping.hpp"
#include "expand.hpp"
#include "pet/eval/interpreter.hpp"

namespace pet::onnx::detail {

/// Largest constant-folded tensor (elements); bigger results stay as nodes.
constexpr int64_t kMaxFoldElements = int64_t(1) << 24;
/// Newest default-domain opset pet imports (ONNX 1.17's; what current PyTorch emits). Opset 22
/// only added types (bfloat16, float8) to ops pet imports, their attributes and meaning unchanged.
/// pet writes opset 17, which runtimes older than opset 22 (ONNX Runtime 1.20) load.
constexpr int64_t kMaxOpset = 22;

struct Importer {
  const ImportOptions& opt;
  std::string label, base_dir;
  Model m;
  std::map<std::string, std::pair<DType, ConstValue>> consts;  // by ONNX name
  std::map<std::string, TensorId> ids;                         // ONNX name -> pet tensor
  std::set<std::string> bound_inputs;
  std::set<std::string> dim_params;  // symbolic dimensions of the declared inputs
  std::map<std::string, std::pair<DType, ConstValue>> values;  // known input values by name
  std::map<std::string, std::pair<DType, ConstValue>> evaluated;  // graph tensors computed from constants (computed())
  std::vector<std::string> dropped_empty;  // nodes that compute only empty tensors
  /// ONNX sequences, import-time lists of tensor names (control_flow.cpp): what the sequence
  /// ops build and read is known at import once loops are unrolled.
  std::map<std::string, std::vector<std::string>> sequences;
  std::map<std::string, int32_t> narrow_of;  // tensors the model says are float16 or bfloat16 (NodeCtx::narrow)
  std::set<std::string> taken;  // every name in the model (all scopes) and every name import made up
  int64_t unrolled = 0;         // body nodes imported by unrolling so far (kMaxUnrolledNodes)

  [[noreturn]] void fail_invalid(const std::string& msg) { throw InvalidInput(cat(label, ": ", msg)); }

  Shape bind_shape(const ::onnx::ValueInfoProto& vi) {
    const std::string& name = vi.name();
    if (auto it = opt.input_shapes.find(name); it != opt.input_shapes.end()) {
      m.specialised = m.shapes_given = true;
      return it->second;
    }
    if (auto it = values.find(name); it != values.end()) {
      // The value fixes the shape; a value given for one of its symbolic dims must agree.
      Shape s = std::visit([](const auto& t) { return t.shape(); }, it->second.second);
      const auto& tt = vi.type().tensor_type();
      for (int k = 0; tt.has_shape() && k < tt.shape().dim_size() && size_t(k) < s.size(); ++k) {
        const auto& d = tt.shape().dim(k);
        if (d.has_dim_value()) continue;
        const std::string p = !d.has_dim_param() || d.dim_param().empty() ? unnamed_dim(name, size_t(k)) : d.dim_param();
        dim_params.insert(p);
        if (auto dv = opt.dims.find(p); dv != opt.dims.end() && dv->second != s[size_t(k)])
          fail_invalid(cat("dimension '", p, "' was given as ", dv->second, " but the value given for input '", name, "' has ",
                           s[size_t(k)], " there"));
      }
      return s;
    }
    const auto& tt = vi.type().tensor_type();
    if (!tt.has_shape()) fail_invalid(cat("input '", name, "' has no declared shape; pass its shape explicitly"));
    Shape s;
    for (const auto& d : tt.shape().dim()) {
      if (d.has_dim_value()) {
        if (d.dim_value() < 0) fail_invalid(cat("input '", name, "' has the negative dimension ", d.dim_value()));
        s.push_back(d.dim_value());
      } else {
        // A dim with neither a value nor a name (ONNX's "unknown") is named "input[k]" here,
        // so --dim and the optimizer's bindings can give it values like a dim_param.
        const bool unnamed = !d.has_dim_param() || d.dim_param().empty();
        const std::string p = unnamed ? unnamed_dim(name, s.size()) : d.dim_param();
        dim_params.insert(p);
        m.specialised = true;
        auto it = opt.dims.find(p);
        int64_t v = it != opt.dims.end() ? it->second : opt.default_dim;
        if (unnamed) m.unnamed_dims = true;
        m.dims[p] = v;
        if (it == opt.dims.end())
          m.notes.push_back(cat("input '", name, "' dimension ", s.size(), unnamed ? " (unnamed)" : cat(" ('", p, "')"), " set to ", v));
        s.push_back(v);
      }
    }
    return s;
  }

  /// A value given by position must be for this input: its name (when it has one), rank and
  /// static dimensions agree with the declaration.
  void check_given(const ::onnx::ValueInfoProto& vi, size_t k) {
    const std::string src = k < opt.ordered_input_sources.size() ? opt.ordered_input_sources[k] : cat("input value ", k);
    const std::string given_name = k < opt.ordered_input_names.size() ? opt.ordered_input_names[k] : "";
    if (!given_name.empty() && given_name != vi.name())
      fail_invalid(cat(src, " holds tensor '", given_name, "' but input ", k, " of the model is '", vi.name(), "'"));
    const Shape s = std::visit([](const auto& t) { return t.shape(); }, opt.ordered_input_values[k].second);
    const auto& tt = vi.type().tensor_type();
    if (!tt.has_shape() || opt.input_shapes.count(vi.name())) return;
    std::vector<std::string> decl;
    bool ok = tt.shape().dim_size() == int(s.size());
    for (int d = 0; d < tt.shape().dim_size(); ++d) {
      const auto& dim = tt.shape().dim(d);
      decl.push_back(dim.has_dim_value() ? std::to_string(dim.dim_value()) : dim.has_dim_param() ? dim.dim_param() : "?");
      if (ok && dim.has_dim_value() && dim.dim_value() != s[size_t(d)]) ok = false;
    }
    if (!ok) fail_invalid(cat(src, " has shape ", s, " but input '", vi.name(), "' is declared ", decl));
  }

  void add_graph_inputs(const ::onnx::GraphProto& g) {
    values = opt.input_values;
    size_t declared = 0;
    for (const auto& vi : g.input()) {
      const std::string& name = vi.name();
      if (name.empty()) fail_invalid("a graph input has an empty name");
      if (consts.count(name)) continue;  // an initializer listed as input (IR < 4): a constant
      if (declared < opt.ordered_input_values.size()) {
        values[name] = opt.ordered_input_values[declared];
        check_given(vi, declared);
      }
      m.declared_inputs.push_back(name);
      ++declared;
      if (ids.count(name)) fail_invalid(cat("graph input '", name, "' is declared twice"));
      if (!vi.type().has_tensor_type()) throw Unsupported(cat(label, ": input '", name, "' is not a tensor"));
      DType dt = dtype_from_onnx(vi.type().tensor_type().elem_type(), cat(label, ": input '", name, "'"));
      Shape s = bind_shape(vi);
      // (an empty tensor's other dims too: numel bounds only non-empty ones; beyond this,
      // shape arithmetic with attributes up to 2^24 could overflow)
      for (size_t k = 0; k < s.size(); ++k)
        if (s[k] > kMaxElements)
          throw Unsupported(cat(label, ": input '", name, "' has the dimension ", s[k], " (", k, " of ", s, "); pet takes dimensions up to 2^36"));
      if (auto it = values.find(name); it != values.end() && it->second.first != dt)
        fail_invalid(cat("input '", name, "' is ", dtype_name(dt), " but the given value is ", dtype_name(it->second.first)));
      ids[name] = m.graph.add_input(name, {dt, s});
    }
    for (const auto& [name, _] : opt.input_shapes)
      if (!ids.count(name))
        fail_invalid(cat("a shape was given for input '", name, "', which the model does not have (its inputs: ",
                         m.declared_inputs, ")"));
    for (const auto& [name, _] : opt.dims)
      if (!dim_params.count(name))
        fail_invalid(cat("a value was given for dimension '", name, "', which no input of the model has (",
                         dim_params.empty() ? std::string("it has no symbolic dimensions")
                                            : cat("its symbolic dimensions: ", std::vector<std::string>(dim_params.begin(), dim_params.end())),
                         ")"));
    if (opt.ordered_input_values.size() > declared)
      fail_invalid(cat(opt.ordered_input_values.size(), " input values were given but the model declares ", declared, " inputs"));
  }

  /// Constant value of an ONNX tensor name: initializer, folded, or a bound graph input.
  const std::pair<DType, ConstValue>* constant(const std::string& name) {
    if (auto it = consts.find(name); it != consts.end()) return &it->second;
    if (auto it = values.find(name); it != values.end() && ids.count(name)) {
      bound_inputs.insert(name);
      return &it->second;
    }
    return nullptr;
  }

  /// Constant value of a name that needs no binding: an initializer, a folded value, or an
  /// input already bound (a given input's value is used only where an op needs it constant).
  const std::pair<DType, ConstValue>* folded(const std::string& name) {
    if (auto it = consts.find(name); it != consts.end()) return &it->second;
    if (auto it = values.find(name); it != values.end() && bound_inputs.count(name)) return &it->second;
    return nullptr;
  }

  /// Value of a name an op needs constant: constant(), else the value of a graph tensor
  /// computed from constants only (float arithmetic, which import does not fold: Swin-T's
  /// window masks, scattered with ScatterND), evaluated here; null when it reads a graph input
  /// whose value was not given (a given one is bound, as constant() binds).
  const std::pair<DType, ConstValue>* computed(const std::string& name) {
    if (const auto* c = constant(name)) return c;
    if (auto it = evaluated.find(name); it != evaluated.end()) return &it->second;
    auto id = ids.find(name);
    if (id == ids.end()) return nullptr;
    const Graph& g = m.graph;
    if (const auto& info = g.tensor(id->second); info.is_constant())  // made by an expansion (a window function)
      return &(evaluated[name] = {info.type.dtype, *info.value});
    std::vector<NodeId> cone;  // producers, found depth-first; evaluated in node order
    std::set<NodeId> seen;
    std::vector<TensorId> todo{id->second};
    std::set<TensorId> leaves;  // graph inputs with given values
    int64_t total = 0;
    while (!todo.empty()) {
      const TensorId t = todo.back();
      todo.pop_back();
      const auto& info = g.tensor(t);
      if (info.is_constant()) continue;
      if (info.producer < 0) {  // a graph input: known only where the user gave its value
        if (!values.count(info.name)) return nullptr;
        leaves.insert(t);
        continue;
      }
      if (!seen.insert(info.producer).second) continue;
      for (TensorId o : g.node(info.producer).outputs) total += numel(g.type(o).shape);
      if (total > kMaxFoldElements) return nullptr;
      cone.push_back(info.producer);
      for (TensorId in : g.node(info.producer).inputs) todo.push_back(in);
    }
    std::sort(cone.begin(), cone.end());  // nodes are added in dependency order
    std::map<TensorId, Value<float>> val;
    for (TensorId t : leaves) val.emplace(t, const_value(constant(g.tensor(t).name)->second));  // binds them
    for (NodeId n : cone) {
      const Node& node = g.node(n);
      std::vector<Value<float>> in;
      for (TensorId t : node.inputs) in.push_back(g.tensor(t).is_constant() ? const_value(*g.tensor(t).value) : val.at(t));
      auto outs = evaluate_op<float>(node.op, in, g.output_types(n));
      for (size_t k = 0; k < outs.size(); ++k) val.emplace(node.outputs[k], std::move(outs[k]));
    }
    auto& v = val.at(id->second);
    const DType dt = g.type(id->second).dtype;
    return &(evaluated[name] = {dt, const_storage(dt, to_constant(v))});
  }

  TensorId tensor_id(const std::string& name) {
    if (auto it = ids.find(name); it != ids.end()) {
      if (bound_inputs.count(name)) return constant_id(name);
      return it->second;
    }
    return constant_id(name);
  }
  /// Materialises a constant as a graph tensor on first use as data (an empty one only as a
  /// graph output: import_empty_reader keeps empty tensors from nodes).
  TensorId constant_id(const std::string& name) {
    std::string key = "const:" + name;
    if (auto it = ids.find(key); it != ids.end()) return it->second;
    const auto* c = constant(name);
    PET_CHECK(c, "no value for '", name, "'");
    std::string gname = m.graph.find(name) ? m.graph.unique_name(name + "_const") : name;
    TensorId id = m.graph.add_constant(gname, c->first, c->second);
    ids[key] = id;
    return id;
  }

  /// ONNX nodes in dependency order (Boost.Graph); dangling inputs and cycles are errors.
  std::vector<int> order_nodes(const ::onnx::GraphProto& g) {
    std::unordered_map<std::string, int> producer;
    for (int i = 0; i < g.node_size(); ++i)
      for (const auto& o : g.node(i).output()) {
        if (o.empty()) continue;
        if (producer.count(o) || consts.count(o) || ids.count(o) || sequences.count(o))
          fail_invalid(cat("tensor '", o, "' is defined twice (again by node '", g.node(i).name(), "')"));
        producer[o] = i;
      }
    std::vector<std::pair<int, int>> edges;
    for (int i = 0; i < g.node_size(); ++i) {
      for (const auto& in : g.node(i).input()) {
        if (in.empty()) continue;
        if (auto it = producer.find(in); it != producer.end()) edges.emplace_back(it->second, i);
        else if (!consts.count(in) && !ids.count(in) && !sequences.count(in))
          fail_invalid(cat("node '", g.node(i).name(), "' (", g.node(i).op_type(), ") reads tensor '", in,
                           "', which no node, graph input or initializer defines"));
      }
      std::set<std::string> inner;  // what its If / Loop / Scan bodies read from this scope
      for (const auto& a : g.node(i).attribute()) {
        if (a.has_g()) collect_reads(a.g(), inner);
        for (const auto& sub : a.graphs()) collect_reads(sub, inner);
      }
      for (const auto& in : inner)
        if (auto it = producer.find(in); it != producer.end() && it->second != i) edges.emplace_back(it->second, i);
    }
    std::vector<int> cycle;
    auto order = topological_order(g.node_size(), edges, &cycle);
    if (int(order.size()) != g.node_size()) {
      std::vector<std::string> names;
      for (int v : cycle) names.push_back(g.node(v).name().empty() ? g.node(v).op_type() : g.node(v).name());
      fail_invalid(cat("the graph has a cycle through nodes ", names));
    }
    return order;
  }

  /// Imports one ONNX node; `opset` other than 0 overrides the model's (for the nodes
  /// control_flow.cpp writes, always in opset 11's form).
  void import_node(const ::onnx::NodeProto& node, int index, int64_t opset = 0) {
    const std::string name = node.name().empty() ? cat(node.op_type(), "_", index) : node.name();
    if (opset == 0) opset = m.opset;
    const std::string who = cat(label, ": node '", name, "' (", node.op_type(), ", opset ", opset, "): ");
    // Every input was made: a graph input, an initializer or an output an earlier node made
    // (order_nodes found its producer; an op gives fewer outputs than that node names).
    for (int i = 0; i < node.input_size(); ++i)
      if (const std::string& in = node.input(i); !in.empty() && !ids.count(in) && !consts.count(in) && !sequences.count(in))
        throw InvalidInput(cat(who, "input ", i, " ('", in, "') is named as an output of a node whose op does not give that many outputs"));
    // ONNX Runtime's contrib domain: its quantized ops (expand_quant.cpp)
    const bool microsoft = node.domain() == "com.microsoft";
    if (!node.domain().empty() && node.domain() != "ai.onnx" && !microsoft)
      throw Unsupported(cat(who, "domain '", node.domain(), "' is not supported (only the default ONNX domain, and ONNX Runtime's quantized ops of com.microsoft)"));
    const auto& table = import_table();
    auto it = microsoft ? table.end() : table.find(node.op_type());
    const auto& expands = microsoft ? microsoft_table() : expand_table();
    const auto expand = expands.find(node.op_type());
    const bool structured = !microsoft && is_structured(node);
    if (microsoft && expand == expands.end()) {
      std::string known;
      for (const auto& [k, v] : expands) known += cat(known.empty() ? "" : ", ", k);
      throw Unsupported(cat(who, "op '", node.op_type(), "' of domain 'com.microsoft' is not supported (pet imports ", known, " of it)"));
    }
    if (it == table.end() && expand == expands.end() && !structured)
      throw Unsupported(cat(who, "op '", node.op_type(), "' is not supported"));
    NodeCtx ctx{node, opset,
                [&](int i) -> const std::pair<DType, ConstValue>* { return ctx_present(node, i) ? constant(node.input(i)) : nullptr; },
                [&](int i) -> const std::pair<DType, ConstValue>* { return ctx_present(node, i) ? computed(node.input(i)) : nullptr; },
                [&](int i) -> const std::pair<DType, ConstValue>* {
                  if (!ctx_present(node, i)) return nullptr;
                  if (const auto* c = folded(node.input(i))) return c;
                  auto id = ids.find(node.input(i));
                  return id != ids.end() && m.graph.tensor(id->second).is_constant() ? computed(node.input(i)) : nullptr;
                },
                [&](int i) -> std::optional<TensorType> {
                  if (!ctx_present(node, i)) return std::nullopt;
                  if (const auto* c = folded(node.input(i)))  // a type never binds a given input
                    return TensorType{c->first, std::visit([](const auto& t) { return t.shape(); }, c->second)};
                  if (auto it = ids.find(node.input(i)); it != ids.end()) return m.graph.type(it->second);
                  return std::nullopt;
                },
                [&](int i) -> int32_t {
                  if (!ctx_present(node, i)) return 0;
                  auto it = narrow_of.find(node.input(i));
                  return it == narrow_of.end() ? 0 : it->second;
                }};
    try {
      if (structured) return import_structured(ctx, name);  // control_flow.cpp
      for (int i = 0; i < node.input_size(); ++i)
        if (sequences.count(node.input(i)))
          throw Unsupported(cat("input ", i, " ('", node.input(i), "') is a sequence; ", node.op_type(), " takes tensors"));
      const ExpandFn* expand_fn = expand != expands.end() ? &expand->second : nullptr;
      if (!microsoft)
        if (auto f = form_table().find(node.op_type()); f != form_table().end() && f->second.takes(ctx)) expand_fn = &f->second.expand;
      if (expand_fn) {  // several pet ops (expand.cpp, expand_quant.cpp)
        auto outs = (*expand_fn)(ctx, name, m.graph, [&](int i) { return tensor_id(node.input(i)); });
        for (size_t k = 0; k < outs.size(); ++k)
          if (outs[k] >= 0) ids[node.output(int(k))] = outs[k];
        return;
      }
      Mapped mp = it->second(ctx);
      if (const auto* cast = std::get_if<ops::Cast>(&mp.op); cast && cast->narrow) narrow_of[node.output(0)] = int32_t(cast->narrow);
      if (try_fold_constants(node, ctx, mp)) return;
      // ONNX ops on int8 tensors that pet's op takes in float (exact through float)
      if (node.op_type() == "MaxPool" && ctx.type(0) && is_int8(ctx.type(0)->dtype)) {
        auto outs = import_int8_through_float(ctx, name, m.graph, [&](int i) { return tensor_id(node.input(i)); }, mp);
        for (size_t k = 0; k < outs.size(); ++k)
          if (outs[k] >= 0) ids[node.output(int(k))] = outs[k];
        return;
      }
      if (import_empty_reader(node, name, mp)) return;
      std::vector<TensorId> inputs;
      for (int i : mp.data_inputs) {
        if (!ctx.present(i)) throw InvalidInput(cat("required input ", i, " is missing"));
        inputs.push_back(tensor_id(node.input(i)));
      }
      const size_t count = inputs.size();  // Mean divides by it
      // Variadic Sum / Max / Min of more than two inputs: a chain of the binary op.
      while (inputs.size() > 2 && holds_any<ops::Add, ops::Max, ops::Min>(mp.op)) {
        std::string part = m.graph.unique_name(cat(name, ":partial"));
        inputs.insert(inputs.begin() + 2, m.graph.add_node(m.graph.unique_name(cat(name, "_", inputs.size())), mp.op,
                                                           {inputs[0], inputs[1]}, {part})[0]);
        inputs.erase(inputs.begin(), inputs.begin() + 2);
        mp.data_inputs.erase(mp.data_inputs.begin() + 1);
      }
      // Mean of n > 1 inputs: their sum (the chain above), divided by n.
      if (node.op_type() == "Mean" && inputs.size() == 2) {
        std::string sum = m.graph.unique_name(cat(name, ":sum"));
        TensorId s = m.graph.add_node(m.graph.unique_name(cat(name, "_sum")), mp.op, inputs, {sum})[0];
        TensorId n = m.graph.add_constant(m.graph.unique_name(cat(name, ":count")), Tensor<float>(Shape{}, std::vector<float>{float(count)}));
        inputs = {s, n};
        mp.op = ops::Div{};
      }
      // PRelu before opset 7 (no broadcasting then): a 1-D slope of x's channel count holds
      // one value per channel, as PyTorch's old exports mean it; viewed as [C, 1, ...].
      if (node.op_type() == "PRelu" && opset < 7 && inputs.size() == 2) {
        const Shape xs = m.graph.type(inputs[0]).shape, ss = m.graph.type(inputs[1]).shape;
        if (xs.size() >= 3 && ss.size() == 1 && ss[0] == xs[1] && ss[0] > 1) {
          std::vector<int64_t> to(xs.size() - 1, 1);
          to[0] = ss[0];
          inputs[1] = m.graph.add_node(m.graph.unique_name(cat(name, "_slope")), ops::Reshape{.shape = to}, {inputs[1]},
                                       {m.graph.unique_name(cat(name, ":slope"))})[0];
        }
      }
      Types in_types;
      for (TensorId t : inputs) in_types.push_back(m.graph.type(t));
      Types out_types = infer_types(mp.op, in_types);  // errors get the node prefix below
      if (import_empty_outputs(node, name, mp, inputs, out_types)) return;
      for (int k = int(out_types.size()); k < node.output_size(); ++k)
        if (!node.output(k).empty())
          throw Unsupported(cat("output ", k, " ('", node.output(k), "') is not produced by pet's ", node.op_type()));
      add_imported(node, name, mp.op, inputs, out_types.size());
    } catch (const InvalidInput& e) {
      if (from_inner_node(e)) throw;
      throw InvalidInput(who + e.what());
    } catch (const Unsupported& e) {
      if (from_inner_node(e)) throw;
      throw Unsupported(who + e.what());
    }
  }
  /// An error of a node inside an If, Loop or Scan body already names that node.
  bool from_inner_node(const std::exception& e) const { return std::string_view(e.what()).substr(0, label.size() + 8) == label + ": node '"; }

  // If, Loop, Scan and the sequence ops (control_flow.cpp).
  static void collect_names(const ::onnx::GraphProto& g, std::set<std::string>& out);
  static void collect_reads(const ::onnx::GraphProto& g, std::set<std::string>& out);
  bool is_structured(const ::onnx::NodeProto& node) const;
  /// The op types is_structured takes: If, Loop, Scan and the sequence ops.
  static std::vector<std::string> structured_op_types();
  void import_structured(const NodeCtx& c, const std::string& name);
  void import_if(const NodeCtx& c, const std::string& name);
  void import_loop(const NodeCtx& c, const std::string& name);
  void import_scan(const NodeCtx& c, const std::string& name);
  void import_sequence_op(const NodeCtx& c, const std::string& name);
  struct Body;
  Body instantiate(const ::onnx::GraphProto& g, const std::string& owner, const std::string& tag);
  void import_body(const Body& b);
  std::vector<std::string> scan_steps(const ::onnx::GraphProto& body, const std::string& name, std::vector<std::string>& states,
                                      const std::vector<std::string>& xs, const std::vector<int64_t>& in_axes,
                                      const std::vector<int64_t>& in_dirs, const std::vector<int64_t>& out_axes,
                                      const std::vector<int64_t>& out_dirs, const std::string& tag);
  void alias(const std::string& to, const std::string& from);
  void bind_output(const std::string& to, const std::string& from);
  std::string fresh(const std::string& base);
  std::vector<std::string> emit(const std::string& op_type, const std::vector<std::string>& inputs, int n_out, const std::string& node_name,
                                const std::vector<std::pair<std::string, std::vector<int64_t>>>& ints = {},
                                const std::vector<std::pair<std::string, int64_t>>& int_attrs = {}, std::vector<std::string> out_names = {});
  std::string stack(const std::vector<std::string>& items, int64_t axis, const std::string& node_name, const std::string& out = "");
  std::vector<std::string> unstack(const std::string& x, int64_t axis, const std::string& node_name);
  TensorType type_of(const std::string& name, const std::string& what);
  static bool ctx_present(const ::onnx::NodeProto& n, int i) { return i < n.input_size() && !n.input(i).empty(); }

  /// Empty tensors (a zero dimension) never become graph tensors that a node reads or
  /// writes: a node whose outputs are all empty computes nothing, so its outputs become
  /// empty constants (only their shapes matter; a graph output may be one); an empty input
  /// of a Concat contributes nothing and is dropped. An empty graph input stays an input that
  /// no node reads. Whatever else reads an empty tensor into a non-empty result is refused.
  bool is_empty(const std::string& name) {
    if (auto it = ids.find(name); it != ids.end()) return numel(m.graph.type(it->second).shape) == 0;
    if (auto it = consts.find(name); it != consts.end())
      return std::visit([](const auto& t) { return t.size(); }, it->second.second) == 0;
    return false;
  }
  TensorType data_type(const std::string& name) {
    if (auto it = ids.find(name); it != ids.end()) return m.graph.type(it->second);
    const auto it = consts.find(name);
    PET_CHECK(it != consts.end(), "no tensor or constant '", name, "'");
    return {it->second.first, std::visit([](const auto& t) { return t.shape(); }, it->second.second)};
  }
  void store_empty(const ::onnx::NodeProto& node, const Types& out_types) {
    for (size_t k = 0; k < out_types.size(); ++k) {
      const TensorType& t = out_types[k];
      store(node, int(k), t.dtype, is_float(t.dtype) ? ConstValue(Tensor<float>(t.shape)) : ConstValue(Tensor<int64_t>(t.shape)));
    }
  }
  /// A node with an empty data input; false when it has none.
  bool import_empty_reader(const ::onnx::NodeProto& node, const std::string& name, Mapped& mp) {
    std::vector<size_t> empty;
    for (size_t k = 0; k < mp.data_inputs.size(); ++k) {
      const int i = mp.data_inputs[k];
      if (i < node.input_size() && !node.input(i).empty() && is_empty(node.input(i))) empty.push_back(k);
    }
    if (empty.empty()) return false;
    Types in_types;
    for (int i : mp.data_inputs) {
      if (i >= node.input_size() || node.input(i).empty()) throw InvalidInput(cat("required input ", i, " is missing"));
      in_types.push_back(data_type(node.input(i)));
    }
    if (auto r = empty_reduction(mp.op, in_types)) {
      store(node, 0, r->first, std::move(r->second));
      dropped_empty.push_back(name);
      return true;
    }
    Types out_types;
    if (in_types.size() > 2 && holds_any<ops::Add, ops::Max, ops::Min>(mp.op)) {  // variadic (and Mean): broadcast all
      Types acc{in_types[0]};
      for (size_t k = 1; k < in_types.size(); ++k) acc = infer_types(mp.op, Types{acc[0], in_types[k]});
      out_types = acc;
    } else {
      out_types = infer_types(mp.op, in_types);
    }
    bool all_empty = true;
    for (const auto& t : out_types) all_empty = all_empty && numel(t.shape) == 0;
    if (all_empty) {
      store_empty(node, out_types);
      dropped_empty.push_back(name);
      return true;
    }
    if (std::holds_alternative<ops::Concat>(mp.op)) {
      std::vector<TensorId> inputs;
      for (int i : mp.data_inputs)
        if (!is_empty(node.input(i))) inputs.push_back(tensor_id(node.input(i)));
      add_imported(node, name, inputs.size() == 1 ? Op(ops::Identity{}) : mp.op, inputs, out_types.size());
      return true;
    }
    const size_t k = empty[0];
    size_t o = 0;
    while (numel(out_types[o].shape) == 0) ++o;
    throw Unsupported(cat("input ", mp.data_inputs[k], " ('", node.input(mp.data_inputs[k]), "') is empty (shape ",
                          in_types[k].shape, ") but output ", o, " is not (shape ", out_types[o].shape,
                          "): pet supports empty tensors where the node's outputs are empty too, and as Concat inputs"));
  }
  /// A reduction of an empty input (ONNX opset 18's "reduction over an empty set"): the output,
  /// every element the value over no elements: 0 for ReduceSum, ReduceL1, ReduceL2 and
  /// ReduceSumSquare, 1 for ReduceProd, -inf (the type's lowest value for integers) for ReduceMax
  /// and ReduceLogSum(Exp), +inf (the highest) for ReduceMin. ReduceMean's is undefined: refused.
  /// An empty output (a kept dim empty too) is an empty constant. Nothing when `op` is not a
  /// reduction.
  static std::optional<std::pair<DType, ConstValue>> empty_reduction(const Op& op, const Types& in) {
    return std::visit(
        [&](const auto& o) -> std::optional<std::pair<DType, ConstValue>> {
          using O = std::decay_t<decltype(o)>;
          if constexpr (!std::is_base_of_v<ops::detail::Reduce<O>, O>) {
            return std::nullopt;
          } else {
            if (in.size() != 1) return std::nullopt;
            const TensorType& x = in[0];
            Shape stand_in = x.shape;  // infers the axes as for a non-empty input
            for (int64_t& d : stand_in) d = std::max<int64_t>(d, 1);
            O r = o;
            r.infer(Types{{x.dtype, stand_in}});
            Shape out;
            const auto kept = r.kept_dims(x.shape.size());
            for (size_t i = 0; i < x.shape.size(); ++i)
              if (kept[i] >= 0) out.push_back(x.shape[i]);
              else if (r.keepdims) out.push_back(1);
            const bool is_f = is_float(x.dtype);
            if (numel(out) == 0)  // a kept dim is empty too: nothing to compute
              return is_f ? std::pair{x.dtype, ConstValue(Tensor<float>(out))} : std::pair{x.dtype, ConstValue(Tensor<int64_t>(out))};
            const double inf = std::numeric_limits<double>::infinity();
            auto lowest = [&] { return x.dtype == DType::Int32 ? double(INT32_MIN) : x.dtype == DType::Int8 ? -128.0 : x.dtype == DType::UInt8 ? 0.0 : double(INT64_MIN); };
            auto highest = [&] { return x.dtype == DType::Int32 ? double(INT32_MAX) : x.dtype == DType::Int8 ? 127.0 : x.dtype == DType::UInt8 ? 255.0 : double(INT64_MAX); };
            double v = 0;
            if constexpr (std::is_same_v<O, ops::ReduceMean>) {
              throw Unsupported(cat("the mean over the empty dims of input shape ", x.shape, " is undefined (ONNX leaves it so)"));
            } else if constexpr (std::is_same_v<O, ops::ReduceProd>) {
              v = 1;
            } else if constexpr (std::is_same_v<O, ops::ReduceMax>) {
              v = is_f ? -inf : lowest();
            } else if constexpr (std::is_same_v<O, ops::ReduceMin>) {
              v = is_f ? inf : highest();
            } else if constexpr (std::is_same_v<O, ops::ReduceLogSum> || std::is_same_v<O, ops::ReduceLogSumExp>) {
              if (!is_f) throw Unsupported(cat(O::name, " over an empty set of ", dtype_name(x.dtype), " values is undefined"));
              v = -inf;
            }
            if (is_f) return std::pair{x.dtype, ConstValue(Tensor<float>(out, std::vector<float>(size_t(numel(out)), float(v))))};
            const int64_t iv = x.dtype == DType::Int64 && v <= double(INT64_MIN) ? INT64_MIN : x.dtype == DType::Int64 && v >= double(INT64_MAX) ? INT64_MAX : int64_t(v);
            return std::pair{x.dtype, ConstValue(Tensor<int64_t>(out, std::vector<int64_t>(size_t(numel(out)), iv)))};
          }
        },
        op);
  }
  /// Empty outputs of a node that reads no empty tensor; false when it has none.
  bool import_empty_outputs(const ::onnx::NodeProto& node, const std::string& name, const Mapped& mp, const std::vector<TensorId>& inputs,
                            const Types& out_types) {
    std::vector<int> kept;  // outputs that are not empty
    for (size_t k = 0; k < out_types.size(); ++k)
      if (numel(out_types[k].shape) != 0) kept.push_back(int(k));
    if (kept.size() == out_types.size()) return false;
    store_empty(node, out_types);  // the kept ones are replaced below
    if (kept.empty()) {
      dropped_empty.push_back(name);
      return true;
    }
    const auto* split = std::get_if<ops::Split>(&mp.op);
    if (!split) {
      const int k = [&] { for (size_t j = 0; j < out_types.size(); ++j) if (numel(out_types[j].shape) == 0) return int(j); return 0; }();
      throw Unsupported(cat("output ", k, " would be empty (shape ", out_types[size_t(k)].shape, ") but output ", kept[0],
                            " would not: pet supports empty outputs only where all of a node's outputs are empty, or Split's parts"));
    }
    ops::Split parts = *split;  // the non-empty parts, in order
    parts.split.clear();
    for (int k : kept) parts.split.push_back(split->split[size_t(k)]);
    parts.num_outputs = int(kept.size());
    parts.uneven = false;
    std::vector<std::string> names;
    for (int k : kept) names.push_back(node.output(k));
    add_imported(node, name, kept.size() == 1 ? Op(ops::Identity{}) : Op(parts), inputs, kept.size(), &names);
    for (int k : kept) consts.erase(node.output(k));
    return true;
  }
  /// Adds the node as pet's `op` on `inputs`; its outputs are the ONNX node's (or `names`).
  void add_imported(const ::onnx::NodeProto& node, const std::string& name, const Op& op,
                    const std::vector<TensorId>& inputs, size_t n_out, const std::vector<std::string>* names = nullptr) {
    std::vector<std::string> onnx_names, out_names;
    for (size_t k = 0; k < n_out; ++k) {
      std::string o = names ? (*names)[k] : int(k) < node.output_size() ? node.output(int(k)) : "";
      onnx_names.push_back(o);
      out_names.push_back(o.empty() || m.graph.find(o) ? m.graph.unique_name(cat(name, ":unused", k)) : o);
    }
    auto outs = m.graph.add_node(name, op, inputs, out_names);
    for (size_t k = 0; k < outs.size(); ++k)
      if (!onnx_names[k].empty()) ids[onnx_names[k]] = outs[k];
  }

  /// Folds shape arithmetic: Shape of a static tensor, and Constant and integer-typed nodes
  /// whose inputs are all constant, evaluated on the constants' values before any of them
  /// becomes a graph tensor. Such values may be empty (a shape sliced down to nothing, as
  /// Swin-T's window masks do).
  bool try_fold_constants(const ::onnx::NodeProto& node, const NodeCtx& ctx, Mapped& mp) {
    if (!opt.fold_constants) return false;
    if (std::holds_alternative<ops::ShapeOf>(mp.op)) {  // reads only the static shape
      const auto t = mp.data_inputs.size() == 1 ? ctx.type(mp.data_inputs[0]) : std::nullopt;
      if (!t) return false;
      const Types one{*t};
      infer_types(mp.op, one);  // clamps start and end to the rank
      const auto& shape = std::get<ops::ShapeOf>(mp.op);
      std::vector<int64_t> part(t->shape.begin() + shape.start, t->shape.begin() + std::max(shape.start, shape.end));
      store(node, 0, DType::Int64, Tensor<int64_t>({int64_t(part.size())}, part));
      return true;
    }
    std::vector<const std::pair<DType, ConstValue>*> cv;
    Types in_types;
    for (int i : mp.data_inputs) {
      const auto* c = ctx.present(i) ? folded(node.input(i)) : nullptr;
      if (!c) return false;
      cv.push_back(c);
      in_types.push_back(TensorType{c->first, std::visit([](const auto& t) { return t.shape(); }, c->second)});
    }
    if (cv.size() > 2 && holds_any<ops::Add, ops::Max, ops::Min>(mp.op)) return false;  // variadic: a chain below
    if (node.op_type() == "Mean") return false;                                          // a chain and a Div below
    // A QDQ model's int8 weights stay int8 with their DequantizeLinear (the file pet writes
    // back keeps them small); the backends fold them when they compile.
    if (std::holds_alternative<ops::DequantizeLinear>(mp.op)) return false;
    bool any_int = false;
    for (const auto& t : in_types) any_int = any_int || !is_float(t.dtype);
    const Types out_types = infer_types(mp.op, in_types);
    for (const auto& t : out_types) any_int = any_int || !is_float(t.dtype);
    if (!(any_int || std::holds_alternative<ops::Constant>(mp.op))) return false;
    int64_t total = 0;
    for (const auto& t : out_types) total += numel(t.shape);
    if (total > kMaxFoldElements) return false;
    std::vector<Value<float>> vals;
    for (const auto* c : cv) vals.push_back(const_value(c->second));
    auto outs = evaluate_op<float>(mp.op, vals, out_types);
    for (size_t k = 0; k < outs.size(); ++k)
      store(node, int(k), out_types[k].dtype, to_constant(outs[k]));
    return true;
  }
  void store(const ::onnx::NodeProto& node, int k, DType dt, ConstValue v) {
    if (k < node.output_size() && !node.output(k).empty()) consts[node.output(k)] = {dt, const_storage(dt, std::move(v))};
  }

  /// Imports `model`, releasing each initializer's bytes once converted (peak memory).
  void run(::onnx::ModelProto& model) {
    m.opset = -1;
    for (const auto& os : model.opset_import())
      if (os.domain().empty() || os.domain() == "ai.onnx") m.opset = os.version();
    if (m.opset < 0) fail_invalid("the model imports no version of the default ONNX opset");
    if (m.opset > kMaxOpset) throw Unsupported(cat(label, ": opset ", m.opset, " is newer than pet supports (up to ", kMaxOpset, ")"));
    if (m.opset < 1) fail_invalid(cat("opset version ", m.opset, " is not a valid ONNX opset"));
    if (!model.has_graph()) fail_invalid("the model has no graph");
    auto& g = *model.mutable_graph();
    m.graph.name = g.name().empty() ? "model" : g.name();
    {
      ::onnx::ModelProto declared;
      *declared.mutable_graph()->mutable_input() = g.input();
      *declared.mutable_graph()->mutable_output() = g.output();
      m.declared = declared.SerializeAsString();
      for (const auto* list : {&g.input(), &g.output()})
        for (const auto& vi : *list)
          if (vi.type().has_tensor_type() && is_narrow_float(vi.type().tensor_type().elem_type()))
            m.narrow_io[vi.name()] = vi.type().tensor_type().elem_type();
      m.narrow_float = narrowest_float(g);
      if (m.narrow_float) {
        // float16 and float32 are both float32 in pet: a model that mixes them where ONNX says
        // one type is refused here, by ONNX's own type inference (the opsets this libonnx knows),
        // which also says which tensors are narrow (for CastLike)
        for (const auto* list : {&g.input(), &g.output(), &g.value_info()})
          for (const auto& vi : *list)
            if (vi.type().has_tensor_type() && is_narrow_float(vi.type().tensor_type().elem_type()))
              narrow_of[vi.name()] = vi.type().tensor_type().elem_type();
        for (const auto& t : g.initializer())
          if (is_narrow_float(t.data_type())) narrow_of[t.name()] = t.data_type();
        if (m.opset <= kExportOpset) narrow_of.merge(check_types(model, label));
        m.notes.push_back(cat("it uses ", onnx_type_name(m.narrow_float), ", which pet computes as float32 (its values read exactly, no result "
                              "rounded to it but a Cast's): the results differ from a computation in ", onnx_type_name(m.narrow_float), " by its rounding"));
      }
    }
    for (auto& init : *g.mutable_initializer()) {
      if (init.name().empty()) fail_invalid("an initializer has an empty name");
      if (consts.count(init.name())) fail_invalid(cat("initializer '", init.name(), "' is defined twice"));
      try {
        if (init.data_location() == ::onnx::TensorProto::EXTERNAL && !(opt.weights && in_store(init))) m.external_data = true;
        if (auto shared = shared_weight(init)) {  // (compared without reading it in whole)
          release_data(init);
          consts[init.name()] = {DType::Float32, std::move(*shared)};
          continue;
        }
        auto c = tensor_from_proto(init, base_dir, "initializer", opt.weights);
        release_data(init);
        if (opt.share_weights_with) share_weights(init.name(), c);
        consts[init.name()] = std::move(c);
      } catch (const InvalidInput& e) {
        fail_invalid(e.what());
      } catch (const Unsupported& e) {
        throw Unsupported(cat(label, ": ", e.what()));
      }
    }
    if (g.sparse_initializer_size()) throw Unsupported(cat(label, ": sparse initializers"));
    add_graph_inputs(g);
    collect_names(g, taken);
    for (int i : order_nodes(g)) import_node(g.node(i), i);
    if (g.output_size() == 0) fail_invalid("the graph has no outputs");
    std::set<std::string> listed;
    for (const auto& o : g.output()) {
      if (!listed.insert(o.name()).second) fail_invalid(cat("graph output '", o.name(), "' is listed twice"));
      if (sequences.count(o.name()))
        throw Unsupported(cat(label, ": graph output '", o.name(), "' is a sequence; pet's outputs are tensors"));
      if (!ids.count(o.name()) && !consts.count(o.name()))
        fail_invalid(cat("graph output '", o.name(), "' is not produced by any node"));
      m.graph.add_output(tensor_id(o.name()));
    }
    remove_bound_inputs();
    if (!dropped_empty.empty()) {
      std::vector<std::string> some(dropped_empty.begin(), dropped_empty.begin() + std::min<size_t>(dropped_empty.size(), 5));
      m.notes.push_back(cat(dropped_empty.size(), " node", dropped_empty.size() == 1 ? "" : "s",
                            " compute only empty tensors (a zero dimension) and were left out: ", some,
                            dropped_empty.size() > some.size() ? " ..." : ""));
    }
    m.graph.validate();
  }

  /// The narrowest float type (BFLOAT16, then FLOAT16) that g or its subgraphs use anywhere:
  /// declared types, initializers, tensor attributes, Cast targets; 0 where none.
  static int32_t narrowest_float(const ::onnx::GraphProto& g) {
    int32_t r = 0;
    auto see = [&](int64_t t) {
      if (t == ::onnx::TensorProto::BFLOAT16 || (t == ::onnx::TensorProto::FLOAT16 && !r)) r = int32_t(t);
    };
    for (const auto* list : {&g.input(), &g.output(), &g.value_info()})
      for (const auto& vi : *list)
        if (vi.type().has_tensor_type()) see(vi.type().tensor_type().elem_type());
    for (const auto& t : g.initializer()) see(t.data_type());
    for (const auto& n : g.node())
      for (const auto& a : n.attribute()) {
        if (a.has_t()) see(a.t().data_type());
        if ((n.op_type() == "Cast" && a.name() == "to") || a.name() == "dtype" || a.name() == "output_dtype") see(a.i());
        if (a.has_g()) see(narrowest_float(a.g()));
        for (const auto& sub : a.graphs()) see(narrowest_float(sub));
      }
    return r;
  }

  /// ImportOptions::share_weights_with's float constant of init's name where init holds the
  /// same shape and bytes (raw or external data, compared in chunks).
  std::optional<Tensor<float>> shared_weight(const ::onnx::TensorProto& init) {
    if (!opt.share_weights_with || (opt.weights && in_store(init))) return std::nullopt;
    const Graph& o = *opt.share_weights_with;
    auto t = o.find(init.name());
    const auto* f = t && o.tensor(*t).is_constant() && o.type(*t).dtype == DType::Float32 ? std::get_if<Tensor<float>>(&*o.tensor(*t).value) : nullptr;
    if (!f || !same_data(init, base_dir, *f, cat("initializer '", init.name(), "'"))) return std::nullopt;
    return *f;
  }
  /// Where ImportOptions::share_weights_with has a constant named `name` equal to c (type,
  /// shape, values), c takes its storage (this copy is freed).
  void share_weights(const std::string& name, std::pair<DType, ConstValue>& c) {
    const Graph& o = *opt.share_weights_with;
    auto t = o.find(name);
    if (!t || !o.tensor(*t).is_constant() || o.type(*t).dtype != c.first) return;
    const ConstValue& v = *o.tensor(*t).value;
    if (v.index() != c.second.index()) return;
    std::visit(
        [&](const auto& mine) {
          using T = std::decay_t<decltype(mine)>;
          const T& theirs = std::get<T>(v);
          if (theirs.shape() == mine.shape() && !theirs.shares_storage_with(mine) &&
              std::memcmp(mine.data(), theirs.data(), size_t(mine.size()) * sizeof(*mine.data())) == 0)
            c.second = theirs;
        },
        c.second);
  }

  /// Bound inputs became constants; the graph no longer takes them.
  void remove_bound_inputs() {
    if (bound_inputs.empty()) return;
    Graph g2;
    g2.name = m.graph.name;
    const Graph& g = m.graph;
    auto uses = g.consumers();
    GraphCopy c(g, g2);
    c.leaves([&](TensorId t) {
      const auto& info = g.tensor(t);
      if (info.is_constant() || !bound_inputs.count(info.name) || !uses[size_t(t)].empty()) return true;
      m.notes.push_back(cat("input '", info.name, "' bound to its given value (an attribute of the model)"));
      return false;
    });
    for (NodeId n : g.topo_order()) c.node(n);
    c.outputs();
    m.graph = std::move(g2);
  }
};

}  // namespace pet::onnx::detail
