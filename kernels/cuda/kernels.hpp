#pragma once
// pet's own CUDA kernels (kernels.cu), callable from host C++: each one launches on a stream
// and returns; their index arithmetic is device_index.hpp's, their element formulas the
// ops' own (pet/ir/ops, PET_HD).
#include <cuda_runtime_api.h>

#include "device_index.hpp"

namespace pet::cuda {

/// Copies a box element by element (writes in destination order, coalesced).
void launch_box_copy(const DevBox& b, const float* src, float* dst, cudaStream_t s);
/// Copies a transposing box through shared-memory tiles (reads and writes coalesced).
void launch_tile_copy(const DevTile& t, const float* src, float* dst, cudaStream_t s);
void launch_fill(float* dst, int64_t n, float v, cudaStream_t s);
/// y = a (op) b with numpy broadcasting.
void launch_binary(BinaryKind k, const DevBroadcast& br, const float* a, const float* b, float* y, cudaStream_t s);
/// Whether pet has a kernel for this unary element-wise op.
bool has_unary_kernel(const Op& op);
/// y = f(x) for a unary element-wise op (its own formula); false when `op` is not one.
bool launch_unary(const Op& op, const float* x, float* y, int64_t n, cudaStream_t s);
/// Layer normalisation of `rows` rows of `cols` (mean and variance accumulated in double,
/// two passes, as the reference interpreter does); gamma and beta have `cols` elements
/// (beta may be null).
void launch_layer_norm(const float* x, const float* gamma, const float* beta, float* y, int64_t rows, int64_t cols, float eps, cudaStream_t s);

}  // namespace pet::cuda
