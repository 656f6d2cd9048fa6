// If, Loop and Scan inlined at import, and ONNX sequences as import-time lists of tensors.
//
// pet's programs have static shapes and no control flow, so a structured node becomes the
// pet ops of its body: a Loop or Scan unrolled over its trip count (known at import), an If
// replaced by its taken branch (condition known at import) or, when the condition is known
// only at run time, by both branches and a Where per output (their shapes must agree). Each
// inlined copy of a body gets fresh names (the body's names with "@tag"), nodes named
// "owner/tag/node". What a body needs is imported through import_node like any other node,
// so constant folding, empty tensors and errors behave as at the top level; the few nodes
// this file adds itself (Split, Squeeze, Unsqueeze, Concat, Where, Identity) are written as
// ONNX nodes of opset 11 and imported the same way.
#include "importer.hpp"

namespace pet::onnx::detail {

namespace {

/// Unrolling limits: iterations of one Loop or steps of one Scan, and body nodes in all.
constexpr int64_t kMaxIterations = 4096;
constexpr int64_t kMaxUnrolledNodes = int64_t(1) << 20;

const std::set<std::string, std::less<>> kSequenceOps = {
    "SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceAt", "SequenceErase", "SequenceLength",
    "ConcatFromSequence", "SplitToSequence"};

const ::onnx::GraphProto& graph_attr(const NodeCtx& c, std::string_view name) {
  const auto* a = c.attr(name);
  if (!a) throw InvalidInput(cat("attribute '", name, "' (a graph) is missing"));
  if (a->type() != ::onnx::AttributeProto::GRAPH) throw InvalidInput(cat("attribute '", name, "' must be a graph"));
  return a->g();
}

void rename(::onnx::GraphProto& g, const std::map<std::string, std::string>& r) {
  auto f = [&](std::string* s) {
    if (auto it = r.find(*s); it != r.end()) *s = it->second;
  };
  for (auto& v : *g.mutable_input()) f(v.mutable_name());
  for (auto& v : *g.mutable_output()) f(v.mutable_name());
  for (auto& v : *g.mutable_value_info()) f(v.mutable_name());
  for (auto& t : *g.mutable_initializer()) f(t.mutable_name());
  for (auto& n : *g.mutable_node()) {
    for (auto& s : *n.mutable_input()) f(&s);
    for (auto& s : *n.mutable_output()) f(&s);
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) rename(*a.mutable_g(), r);
      for (auto& sub : *a.mutable_graphs()) rename(sub, r);
    }
  }
}

/// The single value of a constant known at import (a trip count, a condition, a position).
int64_t scalar(const std::pair<DType, ConstValue>& v, std::string_view what) {
  return std::visit([&](const auto& t) -> int64_t {
    if (t.size() != 1) throw InvalidInput(cat(what, " must hold one value, got shape ", t.shape()));
    return int64_t(t[0]);
  }, v.second);
}

std::pair<DType, ConstValue> int_scalar(DType dt, int64_t v) { return {dt, Tensor<int64_t>(Shape{}, std::vector<int64_t>{v})}; }

int64_t normalize(int64_t axis, int64_t rank, std::string_view what) {
  if (axis < -rank || axis >= rank) throw InvalidInput(cat(what, " ", axis, " is out of range for rank ", rank));
  return axis < 0 ? axis + rank : axis;
}

}  // namespace

struct Importer::Body {
  ::onnx::GraphProto graph;                 // renamed copy
  std::vector<std::string> inputs, outputs;  // renamed formal inputs and outputs
};

void Importer::collect_names(const ::onnx::GraphProto& g, std::set<std::string>& out) {
  for (const auto& v : g.input()) out.insert(v.name());
  for (const auto& t : g.initializer()) out.insert(t.name());
  for (const auto& n : g.node()) {
    for (const auto& o : n.output())
      if (!o.empty()) out.insert(o);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_names(a.g(), out);
      for (const auto& sub : a.graphs()) collect_names(sub, out);
    }
  }
}

/// Every name the nodes of `g` and of its subgraphs read (those defined inside included).
void Importer::collect_reads(const ::onnx::GraphProto& g, std::set<std::string>& out) {
  for (const auto& n : g.node()) {
    for (const auto& i : n.input())
      if (!i.empty()) out.insert(i);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_reads(a.g(), out);
      for (const auto& sub : a.graphs()) collect_reads(sub, out);
    }
  }
  for (const auto& o : g.output()) out.insert(o.name());  // a body may return an outer name
}

bool Importer::is_structured(const ::onnx::NodeProto& node) const {
  const std::string& t = node.op_type();
  if (t == "If" || t == "Loop" || t == "Scan" || kSequenceOps.count(t)) return true;
  return t == "Identity" && node.input_size() == 1 && sequences.count(node.input(0));  // opset 14+: of a sequence
}

std::vector<std::string> Importer::structured_op_types() {
  std::vector<std::string> v{"If", "Loop", "Scan"};
  v.insert(v.end(), kSequenceOps.begin(), kSequenceOps.end());
  return v;
}

std::string Importer::fresh(const std::string& base) {
  std::string s = base;
  for (int k = 1; taken.count(s) || ids.count(s) || consts.count(s) || sequences.count(s); ++k) s = cat(base, "#", k);
  taken.insert(s);
  return s;
}

/// `to` names what `from` names (a formal input bound to its argument): no node.
void Importer::alias(const std::string& to, const std::string& from) {
  if (auto it = sequences.find(from); it != sequences.end()) {
    sequences[to] = it->second;
  } else if (const auto* c = folded(from)) {
    consts[to] = *c;
  } else if (auto id = ids.find(from); id != ids.end()) {
    ids[to] = id->second;
  } else {
    throw InvalidInput(cat("'", from, "' is not defined (a body reads or returns a name no node, input or initializer defines)"));
  }
}

/// A structured node's output `to` is `from`: aliased where it is a constant or a sequence, an
/// Identity node where it is a graph tensor (so the output keeps its name).
void Importer::bind_output(const std::string& to, const std::string& from) {
  if (to.empty()) return;
  if (sequences.count(from) || folded(from)) return alias(to, from);
  if (!ids.count(from)) return alias(to, from);  // the error
  emit("Identity", {from}, 1, to, {}, {}, {to});
}

std::vector<std::string> Importer::emit(const std::string& op_type, const std::vector<std::string>& inputs, int n_out,
                                        const std::string& node_name,
                                        const std::vector<std::pair<std::string, std::vector<int64_t>>>& ints,
                                        const std::vector<std::pair<std::string, int64_t>>& int_attrs,
                                        std::vector<std::string> out_names) {
  ::onnx::NodeProto n;
  n.set_op_type(op_type);
  n.set_name(node_name);
  for (const auto& i : inputs) n.add_input(i);
  for (int k = 0; k < n_out; ++k) {
    if (size_t(k) >= out_names.size()) out_names.push_back(fresh(n_out == 1 ? node_name : cat(node_name, ":", k)));
    n.add_output(out_names[size_t(k)]);
  }
  for (const auto& [name, v] : ints) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  for (const auto& [name, v] : int_attrs) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
  }
  import_node(n, 0, 11);
  return out_names;
}

TensorType Importer::type_of(const std::string& name, const std::string& what) {
  if (sequences.count(name)) throw Unsupported(cat(what, " ('", name, "') is a sequence where a tensor is needed"));
  if (const auto* c = folded(name)) return {c->first, std::visit([](const auto& t) { return t.shape(); }, c->second)};
  if (auto it = ids.find(name); it != ids.end()) return m.graph.type(it->second);
  throw InvalidInput(cat(what, " ('", name, "') is not defined"));
}

/// The tensors stacked along a new axis (Unsqueeze each, Concat).
std::string Importer::stack(const std::vector<std::string>& items, int64_t axis, const std::string& node_name, const std::string& out) {
  PET_CHECK(!items.empty(), "stack of nothing");
  const std::string target = out.empty() ? fresh(node_name) : out;
  if (items.size() == 1) return emit("Unsqueeze", items, 1, node_name, {{"axes", {axis}}}, {}, {target})[0];
  std::vector<std::string> parts;
  for (size_t k = 0; k < items.size(); ++k)
    parts.push_back(emit("Unsqueeze", {items[k]}, 1, cat(node_name, "/unsqueeze", k), {{"axes", {axis}}})[0]);
  return emit("Concat", parts, 1, node_name, {}, {{"axis", axis}}, {target})[0];
}

/// The slices of `x` along `axis`, each without that axis (Split, Squeeze each).
std::vector<std::string> Importer::unstack(const std::string& x, int64_t axis, const std::string& node_name) {
  const TensorType t = type_of(x, "a scanned input");
  const int64_t n = t.shape[size_t(axis)];
  if (n == 1) return emit("Squeeze", {x}, 1, node_name, {{"axes", {axis}}});
  auto parts = emit("Split", {x}, int(n), cat(node_name, "/split"), {{"split", std::vector<int64_t>(size_t(n), 1)}}, {{"axis", axis}});
  std::vector<std::string> out;
  for (int64_t k = 0; k < n; ++k)
    out.push_back(emit("Squeeze", {parts[size_t(k)]}, 1, cat(node_name, "/squeeze", k), {{"axes", {axis}}})[0]);
  return out;
}

/// A copy of `g` with every name it defines made fresh ("name@tag"), its nodes named
/// "owner/tag/node" and its initializers registered as constants.
Importer::Body Importer::instantiate(const ::onnx::GraphProto& g, const std::string& owner, const std::string& tag) {
  if ((unrolled += g.node_size()) > kMaxUnrolledNodes)
    throw Unsupported(cat("unrolling control flow would import more than ", kMaxUnrolledNodes, " nodes"));
  Body b{g, {}, {}};
  std::set<std::string> defined;
  collect_names(g, defined);
  std::map<std::string, std::string> r;
  for (const auto& d : defined)
    if (!d.empty()) r[d] = fresh(cat(d, "@", tag));
  rename(b.graph, r);
  for (int i = 0; i < b.graph.node_size(); ++i) {
    auto* n = b.graph.mutable_node(i);
    n->set_name(cat(owner, "/", tag, "/", n->name().empty() ? cat(n->op_type(), "_", i) : n->name()));
  }
  for (auto& init : *b.graph.mutable_initializer()) {
    consts[init.name()] = tensor_from_proto(init, base_dir, "initializer", opt.weights);
    release_data(init);
  }
  for (const auto& v : b.graph.input()) b.inputs.push_back(v.name());
  for (const auto& v : b.graph.output()) b.outputs.push_back(v.name());
  return b;
}

void Importer::import_body(const Body& b) {
  for (int i : order_nodes(b.graph)) import_node(b.graph.node(i), i);
  for (const auto& o : b.outputs)
    if (!sequences.count(o) && !ids.count(o) && !folded(o))
      throw InvalidInput(cat("body output '", o, "' is not produced by any node"));
}

void Importer::import_structured(const NodeCtx& c, const std::string& name) {
  const std::string& t = c.node.op_type();
  if (t == "If") return import_if(c, name);
  if (t == "Loop") return import_loop(c, name);
  if (t == "Scan") return import_scan(c, name);
  if (t == "Identity") return bind_output(c.node.output(0), c.node.input(0));
  import_sequence_op(c, name);
}

void Importer::import_if(const NodeCtx& c, const std::string& name) {
  if (!c.present(0)) throw InvalidInput("required input 0 (cond) is missing");
  const auto& then_g = graph_attr(c, "then_branch");
  const auto& else_g = graph_attr(c, "else_branch");
  if (then_g.output_size() != else_g.output_size())
    throw InvalidInput(cat("then_branch has ", then_g.output_size(), " outputs but else_branch has ", else_g.output_size()));
  if (c.node.output_size() > then_g.output_size())
    throw InvalidInput(cat(c.node.output_size(), " outputs but the branches return ", then_g.output_size()));
  if (const auto* cond = c.computed(0)) {  // known at import: the taken branch alone
    const bool taken_then = scalar(*cond, "cond") != 0;
    Body b = instantiate(taken_then ? then_g : else_g, name, taken_then ? "then" : "else");
    import_body(b);
    for (int k = 0; k < c.node.output_size(); ++k) bind_output(c.node.output(k), b.outputs[size_t(k)]);
    return;
  }
  // Known at run time only: both branches, and a Where per output.
  const TensorType ct = type_of(c.node.input(0), "cond");
  if (ct.dtype != DType::Bool || numel(ct.shape) != 1)
    throw InvalidInput(cat("cond must be one bool, got ", dtype_name(ct.dtype), " of shape ", ct.shape));
  std::string cond = c.node.input(0);
  if (!ct.shape.empty()) {
    std::vector<int64_t> axes(ct.shape.size());
    for (size_t k = 0; k < axes.size(); ++k) axes[k] = int64_t(k);
    cond = emit("Squeeze", {cond}, 1, cat(name, "/cond"), {{"axes", axes}})[0];
  }
  Body tb = instantiate(then_g, name, "then");
  import_body(tb);
  Body eb = instantiate(else_g, name, "else");
  import_body(eb);
  for (int k = 0; k < c.node.output_size(); ++k) {
    if (c.node.output(k).empty()) continue;
    const TensorType a = type_of(tb.outputs[size_t(k)], cat("then_branch output ", k));
    const TensorType e = type_of(eb.outputs[size_t(k)], cat("else_branch output ", k));
    if (a.dtype != e.dtype || a.shape != e.shape)
      throw Unsupported(cat("the condition ('", c.node.input(0), "') is known only at run time and output ", k, " differs between the branches (",
                            dtype_name(a.dtype), " ", a.shape, " vs ", dtype_name(e.dtype), " ", e.shape,
                            "): pet's shapes are static, so it inlines both branches and selects"));
    emit("Where", {cond, tb.outputs[size_t(k)], eb.outputs[size_t(k)]}, 1, cat(name, "/select", k), {}, {}, {c.node.output(k)});
  }
}

void Importer::import_loop(const NodeCtx& c, const std::string& name) {
  const auto& body = graph_attr(c, "body");
  const int n_carried = c.node.input_size() - 2;
  if (n_carried < 0) throw InvalidInput(cat("expects at least 2 inputs (M, cond; either may be empty), got ", c.node.input_size()));
  if (body.input_size() != n_carried + 2)
    throw InvalidInput(cat("the body takes ", body.input_size(), " inputs but the loop passes ", n_carried + 2,
                           " (iteration number, condition and ", n_carried, " loop-carried values)"));
  const int n_scan = body.output_size() - 1 - n_carried;
  if (n_scan < 0)
    throw InvalidInput(cat("the body returns ", body.output_size(), " outputs but needs at least ", n_carried + 1,
                           " (condition and ", n_carried, " loop-carried values)"));
  if (c.node.output_size() > n_carried + n_scan)
    throw InvalidInput(cat(c.node.output_size(), " outputs but the body makes ", n_carried + n_scan));
  int64_t trips = -1;  // none: until the condition is false
  if (c.present(0)) {
    const auto* mv = c.computed(0);
    if (!mv)
      throw Unsupported(cat("the trip count ('", c.node.input(0), "') is computed at run time; pet unrolls loops whose trip count is known at import"));
    trips = scalar(*mv, "the trip count (M)");
    if (trips < 0) trips = 0;
  }
  bool cond = true;
  if (c.present(1)) {
    const auto* cv = c.computed(1);
    if (!cv) throw Unsupported(cat("the condition ('", c.node.input(1), "') is computed at run time; pet unrolls loops whose condition is known at import"));
    cond = scalar(*cv, "the condition") != 0;
  }
  std::vector<std::string> carried(c.node.input().begin() + 2, c.node.input().end());
  for (const auto& v : carried)
    if (v.empty()) throw InvalidInput("a loop-carried input is empty");
  std::vector<std::vector<std::string>> scans(static_cast<size_t>(n_scan));
  int64_t i = 0;
  for (; (trips < 0 || i < trips) && cond; ++i) {
    if (i >= kMaxIterations)
      throw Unsupported(cat("the loop runs more than ", kMaxIterations, " iterations", trips >= 0 ? cat(" (", trips, ")") : std::string(),
                            "; pet unrolls loops up to ", kMaxIterations));
    Body b = instantiate(body, name, cat("iter", i));
    consts[b.inputs[0]] = int_scalar(DType::Int64, i);
    consts[b.inputs[1]] = int_scalar(DType::Bool, 1);
    for (int k = 0; k < n_carried; ++k) alias(b.inputs[size_t(k) + 2], carried[size_t(k)]);
    import_body(b);
    const auto* next = computed(b.outputs[0]);
    if (!next)
      throw Unsupported(cat("the condition the body returns ('", body.output(0).name(),
                            "') is computed at run time; pet unrolls loops whose condition is known at import"));
    cond = scalar(*next, "the body's condition") != 0;
    for (int k = 0; k < n_carried; ++k) carried[size_t(k)] = b.outputs[size_t(k) + 1];
    for (int k = 0; k < n_scan; ++k) {
      const std::string& s = b.outputs[size_t(1 + n_carried + k)];
      if (sequences.count(s)) throw Unsupported(cat("scan output ", k, " is a sequence"));
      scans[size_t(k)].push_back(s);
    }
  }
  for (int k = 0; k < std::min(c.node.output_size(), n_carried); ++k) bind_output(c.node.output(k), carried[size_t(k)]);
  for (int k = 0; k + n_carried < c.node.output_size(); ++k) {
    const std::string& out = c.node.output(k + n_carried);
    if (out.empty()) continue;
    if (scans[size_t(k)].empty())
      throw Unsupported(cat("the loop runs no iteration, so the shape of scan output ", k, " ('", out, "') is unknown"));
    stack(scans[size_t(k)], 0, cat(name, "/scan", k), out);
  }
}

/// Steps of a Scan (opset 9's form) over `xs` along `in_axes`; updates `states`, returns the
/// scan outputs stacked along `out_axes`.
std::vector<std::string> Importer::scan_steps(const ::onnx::GraphProto& body, const std::string& name, std::vector<std::string>& states,
                                              const std::vector<std::string>& xs, const std::vector<int64_t>& in_axes,
                                              const std::vector<int64_t>& in_dirs, const std::vector<int64_t>& out_axes,
                                              const std::vector<int64_t>& out_dirs, const std::string& tag) {
  const size_t n_states = states.size();
  const int n_out = body.output_size() - int(n_states);
  if (body.input_size() != int(n_states + xs.size()))
    throw InvalidInput(cat("the body takes ", body.input_size(), " inputs but the scan passes ", n_states + xs.size(), " (", n_states,
                           " states and ", xs.size(), " scanned slices)"));
  if (n_out < 0) throw InvalidInput(cat("the body returns ", body.output_size(), " outputs, fewer than the ", n_states, " states"));
  int64_t steps = -1;
  std::vector<std::vector<std::string>> slices;
  for (size_t j = 0; j < xs.size(); ++j) {
    const TensorType t = type_of(xs[j], cat("scan input ", j));
    const int64_t axis = normalize(in_axes[j], int64_t(t.shape.size()), "scan_input_axes value");
    const int64_t len = t.shape[size_t(axis)];
    if (steps >= 0 && len != steps)
      throw InvalidInput(cat("scan input ", j, " has ", len, " steps along axis ", axis, " but scan input 0 has ", steps));
    steps = len;
    if (len > kMaxIterations) throw Unsupported(cat("the scan runs ", len, " steps; pet unrolls scans up to ", kMaxIterations));
    slices.push_back(len == 0 ? std::vector<std::string>{} : unstack(xs[j], axis, cat(name, "/", tag, "input", j)));
  }
  std::vector<std::vector<std::string>> outs(static_cast<size_t>(n_out));
  for (int64_t s = 0; s < steps; ++s) {
    Body b = instantiate(body, name, cat(tag, "step", s));
    for (size_t k = 0; k < n_states; ++k) alias(b.inputs[k], states[k]);
    for (size_t j = 0; j < xs.size(); ++j) alias(b.inputs[n_states + j], slices[j][size_t(in_dirs[j] ? steps - 1 - s : s)]);
    import_body(b);
    for (size_t k = 0; k < n_states; ++k) states[k] = b.outputs[k];
    for (int k = 0; k < n_out; ++k) outs[size_t(k)].push_back(b.outputs[n_states + size_t(k)]);
  }
  std::vector<std::string> stacked;
  for (int k = 0; k < n_out; ++k) {
    if (outs[size_t(k)].empty()) throw Unsupported(cat("the scan runs no step, so the shape of scan output ", k, " is unknown"));
    auto& items = outs[size_t(k)];
    if (out_dirs[size_t(k)]) std::reverse(items.begin(), items.end());
    const int64_t rank = int64_t(type_of(items[0], cat("scan output ", k)).shape.size()) + 1;
    stacked.push_back(stack(items, normalize(out_axes[size_t(k)], rank, "scan_output_axes value"), cat(name, "/", tag, "output", k)));
  }
  return stacked;
}

void Importer::import_scan(const NodeCtx& c, const std::string& name) {
  const auto& body = graph_attr(c, "body");
  const int64_t n_x = c.i("num_scan_inputs", -1);
  const bool v8 = c.opset < 9;  // opset 8: a batch axis and sequence_lens first
  const int first = v8 ? 1 : 0;
  if (n_x < 1 || n_x > c.node.input_size() - first)
    throw InvalidInput(cat("num_scan_inputs ", n_x, " must be between 1 and the ", c.node.input_size() - first, " inputs"));
  const size_t n_states = size_t(c.node.input_size() - first - n_x);
  std::vector<std::string> states(c.node.input().begin() + first, c.node.input().begin() + first + long(n_states));
  std::vector<std::string> xs(c.node.input().begin() + first + long(n_states), c.node.input().end());
  for (int i = first; i < c.node.input_size(); ++i)
    if (c.node.input(i).empty()) throw InvalidInput(cat("input ", i, " (a state or scanned input) is empty"));
  const size_t n_out = size_t(std::max(0, body.output_size() - int(n_states)));
  auto list = [&](std::string_view attr, size_t n) {
    auto v = c.ints(attr, std::vector<int64_t>(n, 0));
    if (v.size() != n) throw InvalidInput(cat(attr, " has ", v.size(), " values for ", n, " tensors"));
    return v;
  };
  for (const auto& x : xs) type_of(x, "a scan input");
  if (!v8) {
    auto ys = scan_steps(body, name, states, xs, list("scan_input_axes", xs.size()), list("scan_input_directions", xs.size()),
                         list("scan_output_axes", n_out), list("scan_output_directions", n_out), "");
    for (int k = 0; k < c.node.output_size(); ++k)
      bind_output(c.node.output(k), size_t(k) < n_states ? states[size_t(k)] : ys.at(size_t(k) - n_states));
    return;
  }
  // Opset 8: every input has a batch axis 0; the body sees one batch element at a time, the
  // sequence along the scanned inputs' axis 1.
  const auto dirs = list("directions", xs.size());
  const TensorType x0 = type_of(xs[0], "scan input 0");
  if (x0.shape.size() < 2) throw InvalidInput(cat("scan input 0 must have a batch and a sequence axis, got shape ", x0.shape));
  const int64_t batch = x0.shape[0], len = x0.shape[1];
  for (size_t k = 0; k < n_states + xs.size(); ++k) {  // each split along the batch axis: the same batch everywhere
    const bool state = k < n_states;
    const TensorType t = state ? type_of(states[k], "a state") : type_of(xs[k - n_states], "a scan input");
    if (t.shape.size() < (state ? 1u : 2u) || t.shape[0] != batch)
      throw InvalidInput(cat(state ? "state " : "scan input ", state ? k : k - n_states, " has shape ", t.shape, "; opset 8's Scan needs the batch of ",
                             batch, " as its first axis", state ? "" : ", and a sequence axis"));
  }
  if (c.present(0)) {
    const auto* sl = c.computed(0);
    if (!sl) throw Unsupported("sequence_lens is computed at run time; pet needs every sequence at its full length");
    std::visit([&](const auto& t) {
      for (int64_t k = 0; k < t.size(); ++k)
        if (int64_t(t[k]) != len)
          throw Unsupported(cat("sequence_lens holds ", int64_t(t[k]), " but the sequences have ", len, " steps; pet needs every sequence at its full length"));
    }, sl->second);
  }
  std::vector<std::vector<std::string>> per_state(n_states), per_x(xs.size());
  for (size_t k = 0; k < n_states; ++k) per_state[k] = unstack(states[k], 0, cat(name, "/state", k));
  for (size_t j = 0; j < xs.size(); ++j) per_x[j] = unstack(xs[j], 0, cat(name, "/input", j));
  std::vector<std::vector<std::string>> final_states(n_states), ys(n_out);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<std::string> st, x;
    for (size_t k = 0; k < n_states; ++k) st.push_back(per_state[k][size_t(b)]);
    for (size_t j = 0; j < xs.size(); ++j) x.push_back(per_x[j][size_t(b)]);
    auto y = scan_steps(body, name, st, x, std::vector<int64_t>(xs.size(), 0), dirs, std::vector<int64_t>(n_out, 0),
                        std::vector<int64_t>(n_out, 0), cat("batch", b, "/"));
    for (size_t k = 0; k < n_states; ++k) final_states[k].push_back(st[k]);
    for (size_t k = 0; k < n_out; ++k) ys[k].push_back(y[k]);
  }
  for (int k = 0; k < c.node.output_size(); ++k) {
    if (c.node.output(k).empty()) continue;
    const auto& items = size_t(k) < n_states ? final_states[size_t(k)] : ys.at(size_t(k) - n_states);
    stack(items, 0, cat(name, "/output", k), c.node.output(k));
  }
}

void Importer::import_sequence_op(const NodeCtx& c, const std::string& name) {
  const std::string& t = c.node.op_type();
  const auto& node = c.node;
  auto seq = [&](int i) -> const std::vector<std::string>& {
    if (!c.present(i)) throw InvalidInput(cat("required input ", i, " is missing"));
    auto it = sequences.find(node.input(i));
    if (it == sequences.end()) throw InvalidInput(cat("input ", i, " ('", node.input(i), "') is not a sequence"));
    return it->second;
  };
  auto position = [&](int i, int64_t n, int64_t def, bool end_ok) {
    if (!c.present(i)) return def;
    const auto* v = c.computed(i);
    if (!v) throw Unsupported(cat("the position ('", node.input(i), "') is computed at run time; pet needs it at import"));
    int64_t p = scalar(*v, "position");
    const int64_t hi = end_ok ? n : n - 1;
    if (p < -n || p > hi) throw InvalidInput(cat("position ", p, " is out of range for a sequence of ", n, " tensors"));
    return p < 0 ? p + n : p;
  };
  auto result = [&]() -> std::vector<std::string>& {
    if (node.output_size() < 1 || node.output(0).empty()) throw InvalidInput("output 0 is missing");
    return sequences[node.output(0)];
  };
  auto tensor = [&](int i) {
    if (!c.present(i)) throw InvalidInput(cat("required input ", i, " is missing"));
    type_of(node.input(i), cat("input ", i));
    return node.input(i);
  };
  if (t == "SequenceEmpty") {
    result().clear();
  } else if (t == "SequenceConstruct") {
    std::vector<std::string> items;
    for (int i = 0; i < node.input_size(); ++i) items.push_back(tensor(i));
    result() = items;
  } else if (t == "SequenceInsert") {
    auto items = seq(0);
    const std::string x = tensor(1);
    items.insert(items.begin() + position(2, int64_t(items.size()), int64_t(items.size()), true), x);
    result() = items;
  } else if (t == "SequenceErase") {
    auto items = seq(0);
    if (items.empty()) throw InvalidInput("erases from an empty sequence");
    items.erase(items.begin() + position(1, int64_t(items.size()), int64_t(items.size()) - 1, false));
    result() = items;
  } else if (t == "SequenceAt") {
    const auto& items = seq(0);
    if (!c.present(1)) throw InvalidInput("required input 1 (position) is missing");
    bind_output(node.output(0), items[size_t(position(1, int64_t(items.size()), 0, false))]);
  } else if (t == "SequenceLength") {
    consts[node.output(0)] = int_scalar(DType::Int64, int64_t(seq(0).size()));
  } else if (t == "ConcatFromSequence") {
    const auto items = seq(0);
    if (items.empty()) throw InvalidInput("concatenates an empty sequence");
    const auto* axis_attr = c.attr("axis");
    if (!axis_attr) throw InvalidInput("attribute 'axis' is missing");
    const int64_t rank = int64_t(type_of(items[0], "item 0").shape.size());
    if (c.i("new_axis", 0)) {
      stack(items, normalize(c.i("axis", 0), rank + 1, "axis"), name, node.output(0));
    } else if (items.size() == 1) {
      bind_output(node.output(0), items[0]);
    } else {
      emit("Concat", items, 1, name, {}, {{"axis", normalize(c.i("axis", 0), rank, "axis")}}, {node.output(0)});
    }
  } else if (t == "SplitToSequence") {
    const std::string x = tensor(0);
    const TensorType xt = type_of(x, "input 0");
    if (xt.shape.empty()) throw InvalidInput("input 0 must have rank >= 1");
    const int64_t axis = normalize(c.i("axis", 0), int64_t(xt.shape.size()), "axis");
    const int64_t len = xt.shape[size_t(axis)];
    std::vector<int64_t> sizes;
    bool squeeze = false;
    if (!c.present(1)) {
      sizes.assign(size_t(len), 1);
      squeeze = !c.flag("keepdims", true);
    } else {
      const auto v = c.const_ints(1, "split");
      const auto st = c.type(1);
      if (st && st->shape.empty()) {  // one size: equal chunks, the last one smaller
        if (v.at(0) <= 0) throw InvalidInput(cat("split ", v.at(0), " must be positive"));
        for (int64_t k = 0; k < len; k += v[0]) sizes.push_back(std::min(v[0], len - k));
      } else {
        int64_t sum = 0;
        for (int64_t s : v) {
          if (s < 0) throw InvalidInput(cat("split ", v, " has a negative size"));
          sum += s;
        }
        if (sum != len) throw InvalidInput(cat("split ", v, " sums to ", sum, " but axis ", axis, " has length ", len));
        sizes = v;
      }
    }
    if (sizes.size() > size_t(kMaxIterations)) throw Unsupported(cat("splits into ", sizes.size(), " tensors; pet handles up to ", kMaxIterations));
    std::vector<std::string> parts;
    if (sizes.size() == 1) parts = {x};
    else if (!sizes.empty()) parts = emit("Split", {x}, int(sizes.size()), cat(name, "/split"), {{"split", sizes}}, {{"axis", axis}});
    if (squeeze)
      for (size_t k = 0; k < parts.size(); ++k) parts[k] = emit("Squeeze", {parts[k]}, 1, cat(name, "/squeeze", k), {{"axes", {axis}}})[0];
    result() = parts;
  }
}

}  // namespace pet::onnx::detail
