#pragma once
// TensorProto <-> pet tensors (private to src/onnx).
#include <onnx/onnx_pb.h>

#include <ostream>

#include "pet/onnx/onnx.hpp"

namespace pet::onnx::detail {

/// ONNX element type -> DType; Unsupported for types pet does not handle.
DType dtype_from_onnx(int32_t t, std::string_view who);
int32_t dtype_to_onnx(DType t);
std::string_view onnx_type_name(int32_t t);
/// FLOAT16 and BFLOAT16, the narrow float types pet computes as float32 (core/narrow_float.hpp).
using pet::float_to_narrow;
using pet::is_narrow_float;
using pet::narrow_to_float;

/// Decodes a TensorProto (raw_data, typed fields or external data under base_dir, or in
/// `weights` where it names WeightStore::kLocation: that tensor, shared).
std::pair<DType, ConstValue> tensor_from_proto(const ::onnx::TensorProto& p, const std::string& base_dir,
                                               std::string_view who, const WeightStore* weights = nullptr);
/// Whether float TensorProto p (raw or external data, read in chunks) holds t's shape and
/// bytes; false for other types and layouts.
bool same_data(const ::onnx::TensorProto& p, const std::string& base_dir, const Tensor<float>& t, std::string_view who);
/// Frees a TensorProto's data (raw or typed; clear() alone keeps the capacity).
void release_data(::onnx::TensorProto& p);
/// Whether p is a weight left in a WeightStore (lean bytes), and its offset and length there.
bool in_store(const ::onnx::TensorProto& p, uint64_t* offset = nullptr, uint64_t* length = nullptr);
/// p as a reference to float tensor t in `weights` (lean bytes): type, dims and external data.
void store_ref(const Tensor<float>& t, WeightStore& weights, ::onnx::TensorProto* p);
void tensor_to_proto(DType dtype, const ConstValue& v, ::onnx::TensorProto* p);
/// ONNX's type inference (strict) over `model`, node by node from its inputs' types alone
/// (no shapes, no values: libonnx 1.12's inference functions crash on some malformed shapes),
/// after each node's schema Verify (a model whose nodes do not verify is left to pet's own
/// import); InvalidInput naming `label` where its types do not agree (float16 and float32
/// inputs of one Add: pet, which computes both as float32, would not notice). Returns the
/// tensors of the main graph it finds float16 or bfloat16, with that type.
std::map<std::string, int32_t> check_types(const ::onnx::ModelProto& model, const std::string& label);
/// Reads a tensor's external data (ONNX "location"/"offset"/"length" entries) relative to
/// base_dir; `who` names it in errors.
std::string external_bytes(const ::onnx::TensorProto& p, const std::string& base_dir, std::string_view who);
/// The bytes of a tensor's external data (its range checked against the file).
int64_t external_length(const ::onnx::TensorProto& p, const std::string& base_dir, std::string_view who);
/// Copies a tensor's external data to `out` in chunks (never held in whole); its length.
uint64_t copy_external(const ::onnx::TensorProto& p, const std::string& base_dir, std::ostream& out, std::string_view who);

}  // namespace pet::onnx::detail
