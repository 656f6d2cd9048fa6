#pragma once
// ONNX's recurrent nodes (RNN, GRU, LSTM) on import (private to src/onnx).
#include "op_mapping.hpp"

namespace pet::onnx::detail {

/// True for the op types import_recurrent expands.
bool is_recurrent(std::string_view op_type);

/// Expands an ONNX RNN, GRU or LSTM node into pet ops, unrolled over its static sequence
/// length: per direction, the input projection of every step as one MatMul (biases added
/// once), then per step the recurrent MatMul, the gates (Split), their activations and the
/// state update, as ONNX's equations write them. W, R, B and P must be constants (they are
/// initializers in exported models); sequence_lens, where given, must be constant and equal
/// the sequence length (padded batches are refused). `data(i)` is the pet tensor of ONNX input
/// i (X, initial_h, initial_c). Returns one pet tensor per ONNX output (Y, Y_h[, Y_c]), -1
/// where the node leaves an output unnamed.
std::vector<TensorId> import_recurrent(const NodeCtx& c, const std::string& name, Graph& g,
                                       const std::function<TensorId(int)>& data);

}  // namespace pet::onnx::detail
