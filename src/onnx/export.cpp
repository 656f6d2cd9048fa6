// ONNX export at opset 17, validated with onnx::checker and ONNX's own shape inference.
#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "op_mapping.hpp"

namespace pet::onnx {

using namespace detail;

namespace {
void set_type(::onnx::ValueInfoProto* vi, const std::string& name, const TensorType& t) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(dtype_to_onnx(t.dtype));
  auto* sh = tt->mutable_shape();
  for (int64_t d : t.shape) sh->add_dim()->set_dim_value(d);
}
}  // namespace

uint64_t weight_bytes(const Graph& g) {
  uint64_t n = 0;
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    const auto& info = g.tensor(t);
    if (!info.is_constant()) continue;
    const uint64_t width = info.type.dtype == DType::Int64 ? 8 : info.type.dtype == DType::Float32 || info.type.dtype == DType::Int32 ? 4 : 1;
    n += width * uint64_t(std::max<int64_t>(0, numel(info.type.shape)));
  }
  return n;
}

namespace {
/// The most weight bytes an ONNX file holds inside: protobuf's 2 GiB, less room for the graph.
constexpr uint64_t kWeightsInside = uint64_t(INT32_MAX) - (uint64_t(64) << 20);
}  // namespace

void check_exportable(uint64_t bytes, const std::string& label) {
  if (bytes > kWeightsInside)
    throw Unsupported(cat(label, ": its weights take ", bytes, " bytes (", double(bytes) / double(1 << 30),
                          " GiB); protobuf limits an ONNX file with its weights inside to 2 GiB (a model file is written with its weights as ONNX external data instead)"));
}

namespace {
/// Float weights of at least this many bytes go to a WeightStore (lean bytes) or to OUT.data.
constexpr size_t kExternalMin = 1024;

/// g as an ONNX model proto (opset 17), its weights inside or, given `weights`, its float
/// constants of kExternalMin bytes or more left there (not yet serialized or checked).
::onnx::ModelProto model_of(const Graph& g, WeightStore* weights = nullptr) {
  ::onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("pet");
  model.set_producer_version("0.1");
  auto* os = model.add_opset_import();
  os->set_domain("");
  os->set_version(kExportOpset);
  auto* gp = model.mutable_graph();
  gp->set_name(g.name);
  std::set<std::string> names;
  for (TensorId t = 0; t < g.num_tensors(); ++t) names.insert(g.tensor(t).name);
  for (const auto& n : g.nodes()) names.insert(n.name);
  ExportCtx ctx{gp, &names};

  for (TensorId t : g.inputs()) set_type(gp->add_input(), g.tensor(t).name, g.type(t));
  auto uses = g.consumers();
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    const auto& info = g.tensor(t);
    bool is_output = std::find(g.outputs().begin(), g.outputs().end(), t) != g.outputs().end();
    if (!info.is_constant() || (uses[size_t(t)].empty() && !is_output)) continue;
    auto* init = gp->add_initializer();
    init->set_name(info.name);
    const auto* f = std::get_if<Tensor<float>>(&*info.value);
    if (weights && f && size_t(f->size()) * 4 >= kExternalMin) store_ref(*f, *weights, init);
    else tensor_to_proto(info.type.dtype, *info.value, init);
  }
  for (NodeId n : g.topo_order()) export_node(g, g.node(n), ctx);
  for (TensorId t : g.outputs()) set_type(gp->add_output(), g.tensor(t).name, g.type(t));
  return model;
}

/// Moves m's initializers of at least kExternalMin bytes, and those left in `weights` (lean
/// bytes), into the file `data_path` (ONNX external data: location = its file name, offset,
/// length; each tensor 64-byte aligned).
void move_weights_out(::onnx::ModelProto& m, const std::string& data_path, const WeightStore* weights = nullptr,
                      const std::string& source_dir = "") {
  // Written beside it, then renamed over it: the source model's external data may be that
  // very file (a model optimised in place), and a failed write leaves the old one.
  const std::string tmp = data_path + ".pet-tmp";
  struct Cleanup {
    const std::string& path;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove(path, ec);  // (gone once renamed)
    }
  } cleanup{tmp};
  std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
  if (!f) throw InvalidInput(cat("cannot write '", data_path, "'"));
  const std::string location = std::filesystem::path(data_path).filename().string();
  uint64_t offset = 0;
  for (auto& t : *m.mutable_graph()->mutable_initializer()) {
    uint64_t at = 0, length = 0;
    const bool stored = weights && in_store(t, &at, &length);
    const bool copied = !stored && !source_dir.empty() && t.data_location() == ::onnx::TensorProto::EXTERNAL;
    if (!stored && !copied && (t.data_location() == ::onnx::TensorProto::EXTERNAL || t.raw_data().size() < kExternalMin)) continue;
    const uint64_t pad = (64 - offset % 64) % 64;
    const std::string zeros(pad, '\0');
    if (!f.write(zeros.data(), std::streamsize(pad))) throw InvalidInput(cat("cannot write '", data_path, "'"));
    std::string_view data;
    std::string chunk;
    if (stored) {
      data = std::string_view(reinterpret_cast<const char*>(weights->at(at, length, t.name()).data()), length);
    } else if (copied) {  // the source model's external data, copied over in chunks
      length = copy_external(t, source_dir, f, cat("initializer '", t.name(), "'"));
    } else {
      data = t.raw_data();
    }
    if (!copied) {
      if (!f.write(data.data(), std::streamsize(data.size()))) throw InvalidInput(cat("cannot write '", data_path, "'"));
      length = data.size();
    }
    offset += pad;
    t.clear_external_data();
    for (auto [key, value] : {std::pair<const char*, std::string>{"location", location}, {"offset", std::to_string(offset)},
                              {"length", std::to_string(length)}}) {
      auto* e = t.add_external_data();
      e->set_key(key);
      e->set_value(value);
    }
    offset += length;
    t.set_data_location(::onnx::TensorProto::EXTERNAL);
    release_data(t);
  }
  f.close();
  std::error_code ec;
  if (!f || (std::filesystem::rename(tmp, data_path, ec), ec)) throw InvalidInput(cat("cannot write '", data_path, "'"));
}

/// The weights lean bytes left in `weights` put back inside m (raw data).
void fill_weights(::onnx::ModelProto& m, const WeightStore& weights) {
  for (auto& t : *m.mutable_graph()->mutable_initializer()) {
    uint64_t at = 0, length = 0;
    if (!in_store(t, &at, &length)) continue;
    const Tensor<float>& w = weights.at(at, length, t.name());
    t.clear_external_data();
    t.set_data_location(::onnx::TensorProto::DEFAULT);
    t.set_raw_data(reinterpret_cast<const char*>(w.data()), length);
  }
}

/// Writes m to `path`, its large weights (and those left in `weights`) in `path`.data (ONNX
/// external data).
void write_without_weights(::onnx::ModelProto& m, const std::string& path, const std::string& label, const WeightStore* weights = nullptr) {
  move_weights_out(m, path + ".data", weights);
  if (m.ByteSizeLong() > size_t(INT32_MAX))
    throw Unsupported(cat(label, ": ", m.ByteSizeLong(), " bytes without its weights, over protobuf's 2 GiB limit on one ONNX file"));
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f || !m.SerializeToOstream(&f)) throw InvalidInput(cat("cannot write '", path, "'"));
}

/// write_without_weights, then the file checked with onnx::checker (which opens the data
/// file) and ONNX shape inference.
void write_external(::onnx::ModelProto& m, const std::string& path, const std::string& label, const WeightStore* weights = nullptr) {
  write_without_weights(m, path, label, weights);
  try {
    ::onnx::checker::check_model(path);
    ::onnx::shape_inference::InferShapes(m, ::onnx::OpSchemaRegistry::Instance(), ::onnx::ShapeInferenceOptions(true, 1, false));
  } catch (const std::exception& e) {
    throw InvalidInput(cat(label, ": ONNX checker: ", e.what()));
  }
}
}  // namespace

std::string export_bytes(const Graph& g, WeightStore* weights) {
  if (!weights) check_exportable(weight_bytes(g), cat("exported model '", g.name, "'"));
  ::onnx::ModelProto model = model_of(g, weights);
  std::string bytes;
  if (model.ByteSizeLong() > size_t(INT32_MAX))
    throw Unsupported(cat("exported model '", g.name, "': ", model.ByteSizeLong(), " bytes, over protobuf's 2 GiB limit on one ONNX file"));
  if (!model.SerializeToString(&bytes)) throw InternalError("export: the ONNX model could not be serialized");
  check_bytes(bytes, cat("exported model '", g.name, "'"));
  return bytes;
}

namespace {
/// onnx::checker and ONNX shape inference on `model`, its initializers held outside (in a
/// WeightStore, or with `all_external` any external data) checked as graph inputs of their
/// type and shape: the checker would look for their data in a file beside the working folder.
void check_structure(::onnx::ModelProto model, const std::string& label, bool all_external) {
  auto& inits = *model.mutable_graph()->mutable_initializer();
  for (int i = inits.size(); i-- > 0;) {
    if (!in_store(inits[i]) && !(all_external && inits[i].data_location() == ::onnx::TensorProto::EXTERNAL)) continue;
    auto* vi = model.mutable_graph()->add_input();
    vi->set_name(inits[i].name());
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(inits[i].data_type());
    for (int64_t d : inits[i].dims()) tt->mutable_shape()->add_dim()->set_dim_value(d);
    inits.DeleteSubrange(i, 1);
  }
  try {
    ::onnx::checker::check_model(model);
    ::onnx::shape_inference::InferShapes(model, ::onnx::OpSchemaRegistry::Instance(), ::onnx::ShapeInferenceOptions(true, 1, false));
  } catch (const std::exception& e) {
    throw InvalidInput(cat(label, ": ONNX checker: ", e.what()));
  }
}
}  // namespace

namespace {
/// Calls f on each graph held in node n's attributes (If's branches, Loop's and Scan's body).
template <class F>
void for_each_subgraph(const ::onnx::NodeProto& n, F&& f) {
  for (const auto& a : n.attribute()) {
    if (a.has_g()) f(a.g());
    for (const auto& sg : a.graphs()) f(sg);
  }
}
template <class F>
void for_each_subgraph(::onnx::NodeProto& n, F&& f) {
  for (auto& a : *n.mutable_attribute()) {
    if (a.has_g()) f(*a.mutable_g());
    for (auto& sg : *a.mutable_graphs()) f(sg);
  }
}
/// Whether pred holds for any graph held in node n's attributes.
template <class P>
bool any_subgraph(const ::onnx::NodeProto& n, P&& pred) {
  bool any = false;
  for_each_subgraph(n, [&](const ::onnx::GraphProto& g) { any = any || pred(g); });
  return any;
}

/// t without its tensors' shapes (element types kept), in sequences, optionals and maps too.
void strip_shapes(::onnx::TypeProto& t) {
  switch (t.value_case()) {
    case ::onnx::TypeProto::kTensorType: t.mutable_tensor_type()->clear_shape(); break;
    case ::onnx::TypeProto::kSparseTensorType: t.mutable_sparse_tensor_type()->clear_shape(); break;
    case ::onnx::TypeProto::kSequenceType: strip_shapes(*t.mutable_sequence_type()->mutable_elem_type()); break;
    case ::onnx::TypeProto::kOptionalType: strip_shapes(*t.mutable_optional_type()->mutable_elem_type()); break;
    case ::onnx::TypeProto::kMapType: strip_shapes(*t.mutable_map_type()->mutable_value_type()); break;
    default: break;
  }
}

/// g (its subgraphs too) with no tensor shape declared anywhere.
void strip_shapes(::onnx::GraphProto& g) {
  for (auto* list : {g.mutable_input(), g.mutable_output(), g.mutable_value_info()})
    for (auto& vi : *list) strip_shapes(*vi.mutable_type());
  for (auto& n : *g.mutable_node()) for_each_subgraph(n, [](::onnx::GraphProto& sg) { strip_shapes(sg); });
}

/// Whether t names a type completely enough for ONNX's inference to read it.
bool typed(const ::onnx::TypeProto& t) {
  switch (t.value_case()) {
    case ::onnx::TypeProto::kTensorType: return t.tensor_type().elem_type() != ::onnx::TensorProto::UNDEFINED;
    case ::onnx::TypeProto::kSparseTensorType: return t.sparse_tensor_type().elem_type() != ::onnx::TensorProto::UNDEFINED;
    case ::onnx::TypeProto::kSequenceType: return t.sequence_type().has_elem_type() && typed(t.sequence_type().elem_type());
    case ::onnx::TypeProto::kOptionalType: return t.optional_type().has_elem_type() && typed(t.optional_type().elem_type());
    case ::onnx::TypeProto::kMapType: return t.map_type().has_value_type() && typed(t.map_type().value_type());
    default: return false;
  }
}

/// The names g (its subgraphs too) reads from an outer scope; `defined` holds the names
/// defined around it.
void outer_names(const ::onnx::GraphProto& g, std::set<std::string> defined, std::set<std::string>& out) {
  for (const auto& vi : g.input()) defined.insert(vi.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (const auto& n : g.node()) {
    for (const auto& i : n.input())
      if (!i.empty() && !defined.count(i)) out.insert(i);
    for_each_subgraph(n, [&](const ::onnx::GraphProto& sg) { outer_names(sg, defined, out); });
    for (const auto& o : n.output()) defined.insert(o);
  }
  for (const auto& o : g.output())
    if (!defined.count(o.name())) out.insert(o.name());
}

/// Whether every node of g (its subgraphs too) has the inputs and attributes its ONNX schema
/// requires (OpSchema::Verify); nodes of domains libonnx does not know pass.
bool nodes_verify(const ::onnx::GraphProto& g, const std::map<std::string, int>& opsets) {
  for (const auto& n : g.node()) {
    const std::string domain = n.domain() == "ai.onnx" ? "" : n.domain();
    const auto v = opsets.find(domain);
    if (v != opsets.end())
      if (const auto* schema = ::onnx::OpSchemaRegistry::Schema(n.op_type(), v->second, domain)) {
        try {
          schema->Verify(n);
        } catch (const std::exception&) {
          return false;
        }
      }
    if (any_subgraph(n, [&](const ::onnx::GraphProto& sg) { return !nodes_verify(sg, opsets); })) return false;
  }
  return true;
}
}  // namespace

std::map<std::string, int32_t> detail::check_types(const ::onnx::ModelProto& model, const std::string& label) {
  // This libonnx's (1.12) inference functions read input dims and attribute lists without
  // checking their rank or length (Conv, ConvTranspose, Gemm-6, GatherND, RNN, GRU, LSTM,
  // MaxUnpool, STFT: a fuzzed float16 model crashed it), and some read a required input or
  // attribute without checking it is there (EyeLike, Scan). Only types are wanted here, and
  // pet's own import checks the shapes: each node is inferred alone, from its inputs' types
  // without shapes or values, after its schema's Verify; a model whose nodes do not verify
  // goes without ONNX's type check (pet's import refuses what it cannot compute).
  const auto& graph = model.graph();
  std::map<std::string, int> opsets;
  for (const auto& os : model.opset_import()) opsets[os.domain() == "ai.onnx" ? "" : os.domain()] = int(os.version());
  if (!nodes_verify(graph, opsets)) return {};
  std::map<std::string, ::onnx::TypeProto> types, declared;  // shapes stripped
  auto note = [](std::map<std::string, ::onnx::TypeProto>& m, const std::string& name, ::onnx::TypeProto t) {
    strip_shapes(t);
    if (typed(t)) m.emplace(name, std::move(t));
  };
  for (const auto& vi : graph.input()) note(types, vi.name(), vi.type());
  for (const auto& t : graph.initializer())
    if (!types.count(t.name())) {
      ::onnx::TypeProto tp;
      tp.mutable_tensor_type()->set_elem_type(t.data_type());
      note(types, t.name(), std::move(tp));
    }
  for (const auto* list : {&graph.output(), &graph.value_info()})
    for (const auto& vi : *list) note(declared, vi.name(), vi.type());
  std::vector<std::set<std::string>> reads(size_t(graph.node_size()));
  for (int i = 0; i < graph.node_size(); ++i) {
    const auto& n = graph.node(i);
    for (const auto& in : n.input())
      if (!in.empty()) reads[size_t(i)].insert(in);
    for_each_subgraph(n, [&](const ::onnx::GraphProto& sg) { outer_names(sg, {}, reads[size_t(i)]); });
  }
  // Each node once all it reads is typed (Kahn's order: the file's order need not be one).
  std::map<std::string, std::vector<int>> readers;
  std::vector<size_t> waiting(size_t(graph.node_size()), 0);
  std::vector<int> ready;
  for (int i = 0; i < graph.node_size(); ++i) {
    for (const auto& r : reads[size_t(i)])
      if (!types.count(r)) {
        readers[r].push_back(i);
        ++waiting[size_t(i)];
      }
    if (!waiting[size_t(i)]) ready.push_back(i);
  }
  while (!ready.empty()) {
    const int i = ready.back();
    ready.pop_back();
    const auto& n = graph.node(i);
    ::onnx::ModelProto one;
    *one.mutable_opset_import() = model.opset_import();
    one.set_ir_version(model.ir_version());
    auto& g = *one.mutable_graph();
    *g.add_node() = n;
    strip_shapes(g);
    for (const auto& r : reads[size_t(i)]) {
      auto* vi = g.add_input();
      vi->set_name(r);
      *vi->mutable_type() = types.at(r);
    }
    for (const auto& o : n.output())
      if (auto d = declared.find(o); !o.empty() && d != declared.end()) {  // checked against what is inferred
        auto* vi = g.add_value_info();
        vi->set_name(o);
        *vi->mutable_type() = d->second;
      }
    try {
      ::onnx::shape_inference::InferShapes(one, ::onnx::OpSchemaRegistry::Instance(), ::onnx::ShapeInferenceOptions(true, 1, false));
    } catch (const std::exception& e) {
      throw InvalidInput(cat(label, ": its types do not agree (ONNX type inference: ", e.what(), ")"));
    }
    for (const auto& vi : g.value_info()) {
      if (types.count(vi.name())) continue;  // an output named twice: the first
      note(types, vi.name(), vi.type());
      if (auto r = readers.find(vi.name()); r != readers.end() && types.count(vi.name()))
        for (int k : r->second)
          if (--waiting[size_t(k)] == 0) ready.push_back(k);
    }
  }
  std::map<std::string, int32_t> narrow;
  for (const auto& [name, t] : types)
    if (t.has_tensor_type() && is_narrow_float(t.tensor_type().elem_type())) narrow[name] = t.tensor_type().elem_type();
  return narrow;
}

void check_bytes(std::string_view bytes, const std::string& label) {
  ::onnx::ModelProto model;
  if (bytes.size() > size_t(INT32_MAX) || !model.ParseFromArray(bytes.data(), int(bytes.size())))
    throw InvalidInput(cat(label, ": not a valid ONNX model"));
  check_structure(std::move(model), label, false);
}

namespace {
/// Whether g (its subgraphs too) keeps any tensor as external data; with `initializers`
/// false, any but its own initializers.
bool has_external_data(const ::onnx::GraphProto& g, bool initializers = true) {
  auto external = [](const ::onnx::TensorProto& t) { return t.data_location() == ::onnx::TensorProto::EXTERNAL; };
  for (const auto& t : g.initializer())
    if (initializers && external(t)) return true;
  for (const auto& s : g.sparse_initializer())
    if (external(s.values()) || external(s.indices())) return true;
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      if (a.has_t() && external(a.t())) return true;
      for (const auto& t : a.tensors())
        if (external(t)) return true;
      if (a.has_g() && has_external_data(a.g())) return true;
      for (const auto& sg : a.graphs())
        if (has_external_data(sg)) return true;
    }
  return false;
}
}  // namespace

bool self_contained(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::file_size(path, ec) > uintmax_t(INT32_MAX) || ec) return false;
  std::ifstream f(path, std::ios::binary);
  ::onnx::ModelProto model;  // parsed from the stream and checked as it is: the model is held once
  if (!f || !model.ParseFromIstream(&f) || has_external_data(model.graph())) return false;
  // This ONNX library's checker (1.12) knows IR versions up to 8; newer exporters write 9 and
  // 10 for the same content, which ONNX Runtime and the newer checkers accept.
  if (model.ir_version() > 8) model.set_ir_version(8);
  try {
    check_structure(std::move(model), path, false);
  } catch (const InvalidInput&) {
    return false;
  }
  return true;
}

namespace {
/// Fresh tensor and node names in a graph: "BASE_float32", "BASE_float32_2", ...
struct FreshNames {
  std::set<std::string> used;
  explicit FreshNames(const ::onnx::GraphProto& g) {
    for (const auto& vi : g.input()) used.insert(vi.name());
    for (const auto& vi : g.output()) used.insert(vi.name());
    for (const auto& vi : g.value_info()) used.insert(vi.name());
    for (const auto& t : g.initializer()) used.insert(t.name());
    for (const auto& n : g.node()) {
      used.insert(n.name());
      used.insert(n.input().begin(), n.input().end());
      used.insert(n.output().begin(), n.output().end());
    }
  }
  std::string operator()(const std::string& base, std::string_view suffix = "_float32") {
    std::string n = cat(base, suffix);
    for (int k = 2; used.count(n); ++k) n = cat(base, suffix, "_", k);
    used.insert(n);
    return n;
  }
};

::onnx::NodeProto cast_node(const std::string& name, const std::string& from, const std::string& to, int32_t type) {
  ::onnx::NodeProto c;
  c.set_op_type("Cast");
  c.set_name(name);
  c.add_input(from);
  c.add_output(to);
  auto* a = c.add_attribute();
  a->set_name("to");
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(type);
  return c;
}

/// g's nodes with `first` before them and `last` after.
void surround_nodes(::onnx::GraphProto& g, std::vector<::onnx::NodeProto> first, std::vector<::onnx::NodeProto> last) {
  if (first.empty() && last.empty()) return;
  google::protobuf::RepeatedPtrField<::onnx::NodeProto> nodes;
  for (auto& n : first) *nodes.Add() = std::move(n);
  for (auto& n : *g.mutable_node()) *nodes.Add() = std::move(n);
  for (auto& n : last) *nodes.Add() = std::move(n);
  g.mutable_node()->Swap(&nodes);
}

/// Model::narrow_io's inputs and outputs of `model` (pet's export: float32) declared as the
/// original declares them, each input read through a Cast to float32 and each output written
/// by a Cast from it; the tensors inside keep their names but for those the Casts stand
/// between ("NAME_float32").
void narrow_interface(::onnx::ModelProto& model, const Model& original) {
  auto& g = *model.mutable_graph();
  FreshNames fresh(g);
  auto narrow = [&](const ::onnx::ValueInfoProto& vi) -> int32_t {
    auto it = original.narrow_io.find(vi.name());
    return it != original.narrow_io.end() && vi.type().tensor_type().elem_type() == ::onnx::TensorProto::FLOAT ? it->second : 0;
  };
  // every reference to `from` (a node's input or output, a value_info, an initializer) as `to`
  auto rename = [&](const std::string& from, const std::string& to) {
    for (auto& n : *g.mutable_node()) {
      for (auto& i : *n.mutable_input())
        if (i == from) i = to;
      for (auto& o : *n.mutable_output())
        if (o == from) o = to;
    }
    for (auto& vi : *g.mutable_value_info())
      if (vi.name() == from) vi.set_name(to);
    for (auto& t : *g.mutable_initializer())
      if (t.name() == from) t.set_name(to);
  };
  std::vector<::onnx::NodeProto> first, last;
  std::set<std::string> inputs;
  for (auto& vi : *g.mutable_input()) {
    inputs.insert(vi.name());
    if (const int32_t t = narrow(vi)) {
      const std::string inner = fresh(vi.name());
      rename(vi.name(), inner);
      first.push_back(cast_node(fresh(inner, "_cast"), vi.name(), inner, ::onnx::TensorProto::FLOAT));
      vi.mutable_type()->mutable_tensor_type()->set_elem_type(t);
    }
  }
  for (auto& vi : *g.mutable_output()) {
    const int32_t t = narrow(vi);
    if (!t) continue;
    if (!inputs.count(vi.name())) {  // (a graph input passed through is declared so already)
      const std::string inner = fresh(vi.name());
      rename(vi.name(), inner);
      last.push_back(cast_node(fresh(vi.name(), "_cast"), inner, vi.name(), t));
    }
    vi.mutable_type()->mutable_tensor_type()->set_elem_type(t);
  }
  surround_nodes(g, std::move(first), std::move(last));
}
}  // namespace

bool narrow_weights(const std::string& path, const Model& original) {
  if (!original.narrow_float) return false;
  std::error_code ec;
  if (std::filesystem::file_size(path, ec) > uintmax_t(INT32_MAX) || ec) return false;
  ::onnx::ModelProto m;
  {
    std::ifstream f(path, std::ios::binary);
    if (!f || !m.ParseFromIstream(&f)) throw InvalidInput(cat("'", path, "': not a valid ONNX model"));
  }
  auto& g = *m.mutable_graph();
  if (has_external_data(g)) return false;
  FreshNames fresh(g);
  std::set<std::string> inputs;  // (an initializer listed as a graph input keeps its type)
  for (const auto& vi : g.input()) inputs.insert(vi.name());
  std::vector<::onnx::NodeProto> casts;
  for (auto& t : *g.mutable_initializer()) {
    if (t.data_type() != ::onnx::TensorProto::FLOAT || inputs.count(t.name()) || !t.has_raw_data() || t.raw_data().size() < 1024) continue;
    const std::string& raw = t.raw_data();
    const size_t n = raw.size() / 4;
    for (const int32_t type : {kFloat16, kBFloat16}) {
      std::string narrow(n * 2, '\0');
      bool exact = true;
      for (size_t i = 0; i < n && exact; ++i) {
        float v;
        std::memcpy(&v, raw.data() + i * 4, 4);
        const uint16_t b = float_to_narrow(v, type);
        const float back = narrow_to_float(b, type);
        exact = std::memcmp(&back, &v, 4) == 0;  // (bit for bit: -0 and NaN payloads too)
        std::memcpy(narrow.data() + i * 2, &b, 2);
      }
      if (!exact) continue;
      const std::string name = t.name(), stored = fresh(name, type == kFloat16 ? "_float16" : "_bfloat16");
      casts.push_back(cast_node(fresh(name, "_cast"), stored, name, ::onnx::TensorProto::FLOAT));
      t.set_name(stored);
      t.set_data_type(type);
      t.set_raw_data(std::move(narrow));
      break;
    }
  }
  if (casts.empty()) return false;
  surround_nodes(g, std::move(casts), {});
  std::string bytes;
  if (!m.SerializeToString(&bytes)) throw InternalError("narrow_weights: the ONNX model could not be serialized");
  check_bytes(bytes, path);
  write_file(bytes, path, false);
  return true;
}

std::string narrow_interface(std::string bytes, const Model& original) {
  if (original.narrow_io.empty()) return bytes;
  ::onnx::ModelProto m;
  if (bytes.size() > size_t(INT32_MAX) || !m.ParseFromArray(bytes.data(), int(bytes.size())))
    throw InternalError("narrow_interface: not a valid ONNX model");
  narrow_interface(m, original);
  std::string out;
  if (!m.SerializeToString(&out)) throw InternalError("narrow_interface: the ONNX model could not be serialized");
  check_bytes(out, "the optimized program with the original's float16 and bfloat16 interface");
  return out;
}

void export_file(const Graph& g, const std::string& path, bool external_data, const Model* interface_of) {
  if (external_data || weight_bytes(g) > kWeightsInside) {
    ::onnx::ModelProto m = model_of(g);
    if (interface_of) narrow_interface(m, *interface_of);
    write_external(m, path, cat("exported model '", g.name, "'"));
    return;
  }
  write_file(interface_of ? narrow_interface(export_bytes(g), *interface_of) : export_bytes(g), path, false);
}

bool write_original(const std::string& path, const std::string& out, bool external_data) {
  ::onnx::ModelProto m;
  {
    std::error_code ec;
    if (std::filesystem::file_size(path, ec) > uintmax_t(INT32_MAX) || ec) return false;
    std::ifstream f(path, std::ios::binary);
    if (!f || !m.ParseFromIstream(&f)) return false;
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  uint64_t outside = 0;  // the bytes of its external data
  for (const auto& t : m.graph().initializer())
    if (t.data_location() == ::onnx::TensorProto::EXTERNAL) outside += uint64_t(std::max<int64_t>(0, external_length(t, dir.empty() ? "." : dir, t.name())));
  if (external_data || m.ByteSizeLong() + outside > size_t(INT32_MAX)) {
    // Written with its weights as external data again: copied tensor by tensor (none held in
    // whole), the model checked with them as inputs, as the file is written.
    if (has_external_data(m.graph(), false)) return false;  // (a Constant node's or a subgraph's: rare, exported instead)
    move_weights_out(m, out + ".data", nullptr, dir.empty() ? "." : dir);
    const int64_t ir = m.ir_version();
    try {
      ::onnx::ModelProto checked = m;  // (the graph only: its weights are in OUT.data now)
      if (ir > 8) checked.set_ir_version(8);
      check_structure(std::move(checked), path, true);
    } catch (const InvalidInput&) {
      std::filesystem::remove(out + ".data");
      return false;
    }
    std::ofstream f(out, std::ios::binary | std::ios::trunc);
    if (!f || !m.SerializeToOstream(&f)) throw InvalidInput(cat("cannot write '", out, "'"));
    return true;
  }
  for (auto& t : *m.mutable_graph()->mutable_initializer()) {
    if (t.data_location() != ::onnx::TensorProto::EXTERNAL) continue;
    std::string raw = external_bytes(t, dir.empty() ? "." : dir, cat("initializer '", t.name(), "'"));
    t.clear_external_data();
    t.set_data_location(::onnx::TensorProto::DEFAULT);
    t.set_raw_data(std::move(raw));
  }
  if (has_external_data(m.graph())) return false;  // (a Constant node's or a subgraph's: rare, exported instead)
  // This ONNX library's checker (1.12) knows IR versions up to 8; newer exporters write 9
  // and 10 for the same content, which ONNX Runtime and the newer checkers accept.
  const int64_t ir = m.ir_version();
  try {
    if (ir > 8) m.set_ir_version(8);
    ::onnx::checker::check_model(m);
  } catch (const std::exception&) {
    return false;
  }
  m.set_ir_version(ir);
  std::ofstream f(out, std::ios::binary | std::ios::trunc);
  if (!f || !m.SerializeToOstream(&f)) throw InvalidInput(cat("cannot write '", out, "'"));
  return true;
}

void write_file(std::string_view bytes, const std::string& path, bool external_data, const WeightStore* weights) {
  if (external_data || weights) {
    ::onnx::ModelProto m;
    if (bytes.size() > size_t(INT32_MAX) || !m.ParseFromArray(bytes.data(), int(bytes.size())))
      throw InvalidInput(cat("'", path, "': not a valid ONNX model to write"));
    if (!external_data && weights->size() <= kWeightsInside) {
      check_bytes(bytes, path);  // (shape inference on the lean bytes: it would write into m)
      fill_weights(m, *weights);
      if (m.ByteSizeLong() <= size_t(INT32_MAX)) {
        try {
          ::onnx::checker::check_model(m);
        } catch (const std::exception& e) {
          throw InvalidInput(cat(path, ": ONNX checker: ", e.what()));
        }
        std::ofstream f(path, std::ios::binary | std::ios::trunc);
        if (!f || !m.SerializeToOstream(&f)) throw InvalidInput(cat("cannot write '", path, "'"));
        return;
      }
    }
    write_external(m, path, path, weights);  // (weights filled in above that do not fit in one file go out again)
    return;
  }
  std::ofstream f(path, std::ios::binary);
  if (!f || !f.write(bytes.data(), std::streamsize(bytes.size())))
    throw InvalidInput(cat("cannot write '", path, "'"));
}

}  // namespace pet::onnx
