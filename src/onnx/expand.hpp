#pragma once
// ONNX ops that import as several pet ops (private to src/onnx): recurrent nodes unrolled
// over their sequence, function ops spelled out in their body's ops.
#include "op_mapping.hpp"

namespace pet::onnx::detail {

/// Adds the pet ops that compute ONNX node `c.node` (named `name`) to `g`; `data(i)` is the
/// pet tensor of ONNX input i. Returns one pet tensor per ONNX output, named as the ONNX
/// output, or -1 where the node leaves an output unnamed.
using ExpandFn = std::function<std::vector<TensorId>(const NodeCtx& c, const std::string& name, Graph& g,
                                                     const std::function<TensorId(int)>& data)>;
const std::map<std::string, ExpandFn, std::less<>>& expand_table();

/// Ops that import as one pet op in their common form and as several in another: Gelu's tanh
/// approximation (opset 20), Pad's wrap mode (opset 19), ReduceMax and ReduceMin of bool
/// (opset 20), Resize's antialias and keep_aspect_ratio_policy (opset 18), blocked
/// QuantizeLinear and DequantizeLinear (opset 21). `expand` is taken where `takes(c)` holds;
/// otherwise import_table's entry.
struct FormExpansion {
  std::function<bool(const NodeCtx&)> takes;
  ExpandFn expand;
};
const std::map<std::string, FormExpansion, std::less<>>& form_table();

/// Adds `o` on `in` as a node named "name/what" (made unique) and returns its first output,
/// named `out` where given (an ONNX output's name).
inline TensorId add_part(Graph& g, const std::string& name, const std::string& what, Op o, std::vector<TensorId> in,
                         const std::string& out = "") {
  return g.add_node(g.unique_name(cat(name, "/", what)), std::move(o), std::move(in),
                    out.empty() ? std::vector<std::string>{} : std::vector<std::string>{out})[0];
}

/// ONNX RNN, GRU and LSTM, unrolled over their static sequence length: per direction, the
/// input projection of every step as one MatMul (biases added once), then per step the
/// recurrent MatMul, the gates (Split), their activations and the state update, as ONNX's
/// equations write them. W, R, B and P must be constants (they are initializers in exported
/// models); sequence_lens, where given, must be constant and equal the sequence length (padded
/// batches are refused). (recurrent.cpp)
std::vector<TensorId> import_recurrent(const NodeCtx& c, const std::string& name, Graph& g,
                                       const std::function<TensorId(int)>& data);

/// DFT, STFT, HannWindow, HammingWindow, BlackmanWindow and MelWeightMatrix, added to `t`
/// (expand_signal.cpp).
void add_signal_ops(std::map<std::string, ExpandFn, std::less<>>& t);

/// CenterCropPad, Col2Im, MaxUnpool and DeformConv, added to `t` (expand_layout.cpp).
void add_layout_ops(std::map<std::string, ExpandFn, std::less<>>& t);

/// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, added to `t` (expand_loss.cpp).
void add_loss_ops(std::map<std::string, ExpandFn, std::less<>>& t);

/// ONNX Runtime's quantized contrib ops (domain com.microsoft): QLinearAdd, QLinearMul,
/// QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QLinearGlobalAveragePool,
/// QLinearAveragePool, QLinearConcat (DequantizeLinear, the float op, QuantizeLinear) and QGemm
/// (MatMulInteger, the int32 bias, the requantization). (expand_quant.cpp)
const std::map<std::string, ExpandFn, std::less<>>& microsoft_table();

/// An ONNX op that takes int8 and uint8 tensors where pet's takes float (MaxPool: the values
/// only move or are compared): `mp.op` between DequantizeLinear and QuantizeLinear with scale 1
/// and zero point 0, which is exact. (expand_quant.cpp)
std::vector<TensorId> import_int8_through_float(const NodeCtx& c, const std::string& name, Graph& g,
                                                const std::function<TensorId(int)>& data, const Mapped& mp);

}  // namespace pet::onnx::detail
