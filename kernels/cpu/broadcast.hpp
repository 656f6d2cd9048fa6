#pragma once
// pet's broadcasting binary kernel for the cpu backend, for the broadcasts oneDNN 2.6 runs
// only with its reference kernel (an operand broadcast over a middle dim, as Swin's window
// masks are added to the attention scores: 30 ms where this takes under 1) and for a first
// operand that is the broadcast one of a non-commutative op (1 - x), which oneDNN's binary
// does not take.
#include <cstdint>
#include <vector>

#include "pet/core/shape.hpp"

namespace pet::cpu {

/// PRelu: a < 0 ? b a : a (b the slope), as ops::PRelu.
enum class BinaryKind { Add, Sub, Mul, Div, Max, Min, PRelu };

/// y (contiguous, row-major over `shape`) = a (op) b, where a and b are read with element
/// strides a_strides and b_strides over `shape` (0 on the dims they are broadcast over).
/// Multi-threaded; the innermost run is a contiguous or scalar loop the compiler vectorises.
void broadcast_binary(BinaryKind op, const float* a, std::vector<int64_t> a_strides, const float* b, std::vector<int64_t> b_strides,
                      float* y, Shape shape);

/// Row-major element strides of `operand` (rank <= out's, aligned to the right, numpy style)
/// read over `out`: 0 where the operand has extent 1 (or lacks the dim) and out does not.
std::vector<int64_t> broadcast_strides(const Shape& operand, const Shape& out);

/// ONNX Where: y (contiguous over `shape`) = c ? a : b, each operand read with its element
/// strides (0 where broadcast); c nonzero means true. Multi-threaded, rows as in
/// broadcast_binary.
void broadcast_where(const int64_t* c, std::vector<int64_t> c_strides, const float* a, std::vector<int64_t> a_strides, const float* b,
                     std::vector<int64_t> b_strides, float* y, Shape shape);

}  // namespace pet::cpu
