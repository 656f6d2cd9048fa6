#pragma once
/// ONNX import and export (libonnx's protobuf classes stay inside src/onnx).
///
/// Import (opsets 1-17 of the default domain; models from opset 11 on are the tested range): initializers and Constant nodes become graph
/// constants; every symbolic input dimension is bound (ImportOptions), so all shapes are
/// static; the shape-computation chains that exporters emit (Shape -> Gather -> Unsqueeze
/// -> Concat -> Reshape) fold into constants; ONNX inputs that carry attributes (Reshape's
/// shape, Slice's starts, Pad's pads, ...) must be constant and become op attributes.
/// Errors name the file, the node, its op and what was wrong.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "pet/eval/value.hpp"
#include "pet/ir/graph.hpp"

namespace pet::onnx {

/// Float weights kept out of serialized model bytes while pet passes its own programs through
/// ONNX (export_bytes -> generalise -> import_bytes -> write_file): such "lean" bytes name each
/// float constant of 1 KiB or more as ONNX external data at WeightStore::kLocation, by its
/// offset in the store's layout, and the store holds the tensor itself, its storage shared
/// with the graph it came from (not copied). Only functions given the store read lean bytes;
/// write_file puts the weights back (inside the file, or in OUT.data in the same layout).
class WeightStore {
 public:
  static constexpr std::string_view kLocation = "pet:weights-in-memory";
  /// The offset of t in the layout (64-byte aligned): where the store holds t's storage at
  /// t's shape, that one's; else t is added at the end.
  uint64_t add(const Tensor<float>& t);
  /// The tensor at `offset` of `bytes` bytes (shares its storage); InvalidInput naming `who`
  /// where the store holds none there.
  const Tensor<float>& at(uint64_t offset, uint64_t bytes, std::string_view who) const;
  /// The bytes the layout spans, and its tensors by offset.
  uint64_t size() const { return end_; }
  const std::map<uint64_t, Tensor<float>>& tensors() const { return by_offset_; }

 private:
  std::map<uint64_t, Tensor<float>> by_offset_;
  std::map<std::pair<const float*, Shape>, uint64_t> index_;
  uint64_t end_ = 0;
};

struct ImportOptions {
  /// Full shapes for named graph inputs (overrides what the model declares).
  std::map<std::string, Shape> input_shapes;
  /// Values for symbolic dimensions (ONNX dim_param), e.g. {"batch_size", 16}; an unnamed
  /// (unknown) dimension by its unnamed_dim name, e.g. {"x[0]", 16}.
  std::map<std::string, int64_t> dims;
  /// Used for symbolic or unknown dimensions that `dims` does not bind.
  int64_t default_dim = 1;
  /// Known values of graph inputs. An input whose value is known and that feeds an
  /// attribute-like slot (a Reshape shape, Clip bounds, Slice starts, ...) is bound as a
  /// constant and removed from the graph's inputs; the others only fix the input's shape.
  std::map<std::string, std::pair<DType, ConstValue>> input_values;
  /// Like input_values, by position among the model's declared (non-initializer) inputs;
  /// this is how ONNX test-data folders (input_0.pb, input_1.pb, ...) are matched.
  std::vector<std::pair<DType, ConstValue>> ordered_input_values;
  /// Where each ordered value came from (a file name, for errors) and the tensor name it
  /// carries (checked against the input's name when both are non-empty).
  std::vector<std::string> ordered_input_sources, ordered_input_names;
  /// Fold constant shape arithmetic (integer-typed nodes with constant inputs, Shape).
  bool fold_constants = true;
  /// Where lean bytes (WeightStore) name their weights: import_bytes of such bytes takes the
  /// store's tensors (shared, not copied).
  const WeightStore* weights = nullptr;
  /// A graph imported before from the same model (at other shapes): an initializer equal to
  /// its constant of the same name (type, shape and values) takes that constant's storage, so
  /// that imports of one model at several shapes hold its weights once.
  const Graph* share_weights_with = nullptr;
};

/// ONNX's numbers of its narrow float types (TensorProto::FLOAT16, BFLOAT16).
using pet::kBFloat16;
using pet::kFloat16;

/// Absolute and relative tolerance of a comparison with reference results.
struct Tolerances {
  double atol, rtol;
};
/// The tolerance pet checks a model's results with where it uses `narrow_float`
/// (Model::narrow_float, computed as float32, against results rounded to it op by op):
/// float16's (1e-3, 1e-2), bfloat16's (1e-2, 5e-2), else `plain`.
inline Tolerances narrow_tolerance(int32_t narrow_float, Tolerances plain) {
  return narrow_float == kBFloat16 ? Tolerances{1e-2, 5e-2} : narrow_float == kFloat16 ? Tolerances{1e-3, 1e-2} : plain;
}

struct Model {
  Graph graph;
  int64_t opset = 0;
  std::vector<std::string> notes;  ///< human-readable remarks (bound dims, bound inputs)
  std::vector<std::string> declared_inputs;  ///< the file's non-initializer inputs, in order
  /// An input's shape was chosen at import (a symbolic or unknown dimension bound, or a
  /// --shape given): the program is the file's at those shapes only.
  bool specialised = false;
  /// The symbolic dims (ONNX dim_param) of the declared inputs, each with the value import bound
  /// it to; a dim with neither a value nor a name is here as unnamed_dim(input, k), and sets
  /// `unnamed_dims`; `shapes_given`: an input's whole shape came from ImportOptions::input_shapes.
  std::map<std::string, int64_t> dims;
  bool unnamed_dims = false, shapes_given = false;
  /// Its initializers keep their data in files beside it (ONNX external data).
  bool external_data = false;
  /// The file's graph inputs and outputs as it declares them (a serialized ModelProto holding
  /// only those): what generalise writes the optimized program's interface from.
  std::string declared;
  /// float16 and bfloat16 (ONNX FLOAT16, BFLOAT16) are computed as float32: their values are
  /// read exactly, an explicit Cast to them rounds to them (ops::Cast::narrow) and no other
  /// result is rounded to them (as OpenVINO's CPU plugin computes such models). `narrow_float` is the narrowest of them the
  /// file uses anywhere (BFLOAT16 before FLOAT16; 0: neither), and `narrow_io` the graph
  /// inputs and outputs it declares so, by name: pet's written files declare them so too
  /// (export_file's `interface_of`, generalise), with Casts to and from float32.
  int32_t narrow_float = 0;
  std::map<std::string, int32_t> narrow_io;
};

/// The name import gives dimension k of graph input `input` where the model declares neither
/// a value nor a dim_param for it: "input[k]" (ImportOptions::dims binds it like a dim_param).
inline std::string unnamed_dim(const std::string& input, size_t k) { return cat(input, "[", k, "]"); }

/// Imports an ONNX file. Throws InvalidInput / Unsupported with the file name in the text.
Model import_file(const std::string& path, const ImportOptions& opt = {});
/// Imports serialized ModelProto bytes; `label` names the source in errors; external data
/// is looked up relative to `base_dir`.
Model import_bytes(std::string_view bytes, const std::string& label, const ImportOptions& opt = {},
                   const std::string& base_dir = ".");

/// Opset that export writes.
inline constexpr int64_t kExportOpset = 17;
/// Serializes a graph as an ONNX model (opset 17, checked with onnx::checker), its weights
/// inside. Throws Unsupported where they do not fit in one message (check_exportable).
/// Given `weights`, lean bytes: its float constants of 1 KiB or more are left in the store
/// (WeightStore), which bounds the bytes by the graph's size, not its weights'.
std::string export_bytes(const Graph& g, WeightStore* weights = nullptr);
/// The bytes g's constants take in an exported file (raw data at each ONNX type's width).
uint64_t weight_bytes(const Graph& g);
/// Protobuf limits a message to 2 GiB: throws Unsupported, naming `label` and the size, where
/// `weight_bytes` leaves too little of that for the graph (over 2 GiB less 64 MiB) in bytes
/// with the weights inside (export_bytes; export_file writes such a model with external data).
void check_exportable(uint64_t weight_bytes, const std::string& label);
/// Writes g as an ONNX file (as export_bytes). With `external_data`, or where its weights do
/// not fit in one file, every initializer of 1 KiB or more goes to `path`.data beside it (ONNX
/// external data: its file name as the location, offsets 64-byte aligned), and the file is
/// checked with onnx::checker from disk.
/// Given `interface_of` (the model g computes), g's graph inputs and outputs that model
/// declares float16 or bfloat16 (Model::narrow_io) are written as that type, with a Cast to
/// float32 after each such input and one from float32 before each such output.
void export_file(const Graph& g, const std::string& path, bool external_data = false, const Model* interface_of = nullptr);
/// Serialized model bytes with the interface of `original` restored (export_file's
/// `interface_of`); the bytes themselves where it declares nothing narrow.
std::string narrow_interface(std::string bytes, const Model& original);
/// Where `original` uses float16 or bfloat16 (Model::narrow_float): each float32 initializer
/// of 1 KiB or more of the model file at `path` whose values all are float16 (else bfloat16)
/// values, bit for bit, is stored as that type and read through a Cast to float32 (the
/// program computes the same; the file takes about half the bytes where pet kept the
/// original's weights). The file is rewritten; false (left as it is) where nothing is
/// narrowed, or it is over 2 GiB or keeps external data.
bool narrow_weights(const std::string& path, const Model& original);
/// Writes serialized model bytes to `path`; with `external_data`, its initializers of 1 KiB
/// or more to `path`.data, as export_file. Lean bytes (WeightStore) need their store, and
/// get their weights back (inside, or in `path`.data where they do not fit; checked with
/// onnx::checker).
void write_file(std::string_view bytes, const std::string& path, bool external_data, const WeightStore* weights = nullptr);
/// Writes the model file at `path` to `out` as it is (its symbolic dims, opset, metadata),
/// with the weights it keeps as external data read in; with `external_data`, or where they
/// do not fit in one file, its initializers of 1 KiB or more go to `out`.data. False (nothing
/// written) where the file does not pass onnx::checker or holds external data elsewhere than
/// in its initializers.
bool write_original(const std::string& path, const std::string& out, bool external_data);
/// Runs onnx::checker (and ONNX shape inference) on serialized bytes; throws InvalidInput.
/// In lean bytes (WeightStore) the weights left in a store are checked as graph inputs of
/// their type and shape.
void check_bytes(std::string_view bytes, const std::string& label);
/// Whether the model file at `path` can be copied elsewhere as it is: every tensor is inside
/// it (no external data, which a copy in another folder would lose) and it passes
/// check_bytes. pet optimize writes such a file unchanged where it keeps the original program.
bool self_contained(const std::string& path);

/// One model for every value of the symbolic dims. `at_a` and `at_b` are exports of one
/// program at two bindings of them (transform::rebind: the same tensors and nodes in the same
/// order); `original` is the model the program came from (imported from the file `label`).
/// The result declares the original's graph inputs (their symbolic dims) and, where it
/// declares them consistently, its outputs, and writes each extent that differs between the
/// two the way ONNX says "follow the input": a Reshape target's 0 or -1, a Slice's end
/// INT64_MAX, an Expand's 1. Dims of the original's declarations named in `symbolic` stay
/// symbolic; its other symbolic dims are written at the value they have in `at_a` (and must
/// have the same in `at_b`). Throws Unsupported naming the node where a difference is
/// anything else. What the result computes at other bindings is the caller's to check.
/// Lean exports (WeightStore) need their store; the result is lean then too.
std::string generalise(std::string_view at_a, std::string_view at_b, const Model& original, const std::string& label,
                       const std::set<std::string>& symbolic, const WeightStore* weights = nullptr);

/// A named tensor as stored in ONNX TensorProto files (input_N.pb / output_N.pb).
struct NamedTensor {
  std::string name;
  DType dtype = DType::Float32;
  Value<float> value;  ///< integers of every type as int64
  /// FLOAT16 or BFLOAT16 (ONNX's numbers) where the file holds that type: dtype is Float32 and
  /// the values are the file's, exactly; written back as that type (rounded to nearest).
  int32_t narrow_float = 0;
};
/// v with each value rounded to the nearest float16 (FLOAT16) or bfloat16 (BFLOAT16) value,
/// as written to a file of that type; v itself for other types and integer values.
Value<float> round_to_narrow(const Value<float>& v, int32_t narrow_float);
NamedTensor read_tensor_file(const std::string& path);
void write_tensor_file(const std::string& path, const NamedTensor& t);

/// Reads `<prefix>_0.pb, <prefix>_1.pb, ...` from an ONNX test-data folder, in order.
std::vector<NamedTensor> read_test_data(const std::string& dir, const std::string& prefix);

/// Names of the ONNX op types the importer maps (sorted).
std::vector<std::string> supported_ops();

}  // namespace pet::onnx
