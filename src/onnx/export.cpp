// ONNX export at opset 17, validated with onnx::checker and ONNX's own shape inference.
#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <fstream>

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

std::string export_bytes(const Graph& g) {
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
    tensor_to_proto(info.type.dtype, *info.value, init);
  }
  for (NodeId n : g.topo_order()) export_node(g, g.node(n), ctx);
  for (TensorId t : g.outputs()) set_type(gp->add_output(), g.tensor(t).name, g.type(t));
  std::string bytes;
  if (!model.SerializeToString(&bytes)) throw InternalError("export: the ONNX model could not be serialized");
  check_bytes(bytes, cat("exported model '", g.name, "'"));
  return bytes;
}

void check_bytes(std::string_view bytes, const std::string& label) {
  ::onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), int(bytes.size())))
    throw InvalidInput(cat(label, ": not a valid ONNX model"));
  try {
    ::onnx::checker::check_model(model);
    ::onnx::shape_inference::InferShapes(model, ::onnx::OpSchemaRegistry::Instance(),
                                         ::onnx::ShapeInferenceOptions(true, 1, false));
  } catch (const std::exception& e) {
    throw InvalidInput(cat(label, ": ONNX checker: ", e.what()));
  }
}

void export_file(const Graph& g, const std::string& path) {
  std::string bytes = export_bytes(g);
  std::ofstream f(path, std::ios::binary);
  if (!f || !f.write(bytes.data(), std::streamsize(bytes.size())))
    throw InvalidInput(cat("cannot write '", path, "'"));
}

}  // namespace pet::onnx
