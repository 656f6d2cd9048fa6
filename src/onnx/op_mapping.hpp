#pragma once
// Per-op ONNX mapping (private to src/onnx): how each ONNX op_type becomes a pet Op on import
// and how each pet Op is written back on export. One place per op, import and export side by side.
#include <functional>
#include <optional>
#include <map>
#include <set>

#include "proto_util.hpp"

namespace pet::onnx::detail {

/// What the importer knows about one ONNX node while mapping it.
struct NodeCtx {
  const ::onnx::NodeProto& node;
  int64_t opset;
  /// Constant value of ONNX input i (initializer, folded value or bound input), or null.
  std::function<const std::pair<DType, ConstValue>*(int)> constant;
  /// The same, or the value of a tensor the model computes from constants alone (evaluated at
  /// import), or null: for inputs an op must know (shapes, scatter targets).
  std::function<const std::pair<DType, ConstValue>*(int)> computed;
  /// The value of input i where the model fixes it (an initializer, a folded value, a constant
  /// an expansion made, an input already bound), without binding a given input: for inputs an
  /// op folds where it can and computes where it cannot (an STFT's window).
  std::function<const std::pair<DType, ConstValue>*(int)> fixed;
  /// Type (dtype and static shape) of ONNX input i, or nullopt when it is missing.
  std::function<std::optional<TensorType>(int)> type;
  /// The narrow float type (kFloat16, kBFloat16) ONNX input i has where the model says so (a
  /// declaration, an initializer, a Cast, ONNX's type inference), else 0: pet holds it as float32.
  std::function<int32_t(int)> narrow;

  bool present(int i) const { return i < node.input_size() && !node.input(i).empty(); }
  /// Number of non-empty outputs counting up to the last non-empty one.
  int num_outputs() const;

  const ::onnx::AttributeProto* attr(std::string_view name) const;
  int64_t i(std::string_view name, int64_t def) const;
  /// A 0/1 attribute (keepdims, transA, ceil_mode, ...); InvalidInput for any other value,
  /// which ONNX's runtimes read differently (ONNX Runtime's ArgMax keeps dims for 1 only, ONNX's
  /// reference drops them for 0 only).
  bool flag(std::string_view name, bool def) const;
  float f(std::string_view name, float def) const;
  std::string s(std::string_view name, const std::string& def) const;
  std::vector<int64_t> ints(std::string_view name, std::vector<int64_t> def = {}) const;
  /// Integer list from constant input i; Unsupported (static shapes needed) when not constant.
  std::vector<int64_t> const_ints(int i, std::string_view what) const;
  /// Scalar from constant input i (float or integer tensor of one element).
  double const_scalar(int i, std::string_view what) const;
};

struct Mapped {
  Op op;
  std::vector<int> data_inputs;  ///< ONNX input positions that stay data inputs of the pet op
};

/// Resize's attributes, scales and sizes (opset 11 on), all but antialias and
/// keep_aspect_ratio_policy (the forms expand.cpp imports).
ops::Resize resize_attrs(const NodeCtx& c);

using ImportFn = std::function<Mapped(const NodeCtx&)>;
const std::map<std::string, ImportFn, std::less<>>& import_table();

/// What the exporter offers to each op's export function.
struct ExportCtx {
  ::onnx::GraphProto* g;
  std::set<std::string>* names;    ///< tensor and node names in use (for unique())
  std::set<std::string> node_names;  ///< names of the nodes written so far
  std::string unique(const std::string& base);
  /// Adds an initializer and returns its name.
  std::string initializer(const std::string& base, DType dtype, const ConstValue& v);
  std::string ints(const std::string& base, const std::vector<int64_t>& v);
  std::string scalar(const std::string& base, float v);
  ::onnx::NodeProto* add(std::string_view op_type, const std::string& name, const std::vector<std::string>& in,
                         const std::vector<std::string>& out);
};

/// Writes node n of g as ONNX node(s).
void export_node(const Graph& g, const Node& n, ExportCtx& ctx);

}  // namespace pet::onnx::detail
