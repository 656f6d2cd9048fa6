// pet's own CUDA kernels (kernels.hpp).
#include "kernels.hpp"

namespace pet::cuda {
namespace {
constexpr int kThreads = 256;

int64_t grid_for(int64_t n) { return std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t(1) << 20); }

__global__ void box_copy_kernel(DevBox b, const float* __restrict__ src, float* __restrict__ dst) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < b.count; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t s, d;
    box_element(b, i, s, d);
    dst[d] = src[s];
  }
}

__global__ void tile_copy_kernel(DevTile t, const float* __restrict__ src, float* __restrict__ dst) {
  __shared__ float tile[DevTile::kTile][DevTile::kTile + 1];  // +1: no bank conflicts
  const int x = threadIdx.x, y = threadIdx.y;                 // blockDim = (32, 8)
  for (int64_t blk = blockIdx.x; blk < t.blocks; blk += gridDim.x) {
    // read: consecutive threads walk the source's contiguous dim b
    for (int r = y; r < DevTile::kTile; r += blockDim.y) {
      int64_t s, d;
      if (tile_element(t, blk, r, x, s, d)) tile[r][x] = src[s];
    }
    __syncthreads();
    // write: consecutive threads walk the destination's contiguous dim a
    for (int r = y; r < DevTile::kTile; r += blockDim.y) {
      int64_t s, d;
      if (tile_element(t, blk, x, r, s, d)) dst[d] = tile[x][r];
    }
    __syncthreads();
  }
}

__global__ void fill_kernel(float* dst, int64_t n, float v) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) dst[i] = v;
}

__global__ void binary_kernel(BinaryKind k, DevBroadcast br, const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ y) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < br.count; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t ia, ib;
    broadcast_element(br, i, ia, ib);
    y[i] = binary(k, a[ia], b[ib]);
  }
}

template <class O>
__global__ void unary_kernel(O op, const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = op.template apply<float>(x[i]);
}

/// One block per row; a two-pass block reduction in double.
__global__ void layer_norm_kernel(const float* __restrict__ x, const float* __restrict__ gamma, const float* __restrict__ beta,
                                  float* __restrict__ y, int64_t cols, float eps) {
  __shared__ double part[kThreads];
  const float* row = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  double s = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += double(row[j]);
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (int(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  const double mean = part[0] / double(cols);
  __syncthreads();
  double v = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const double d = double(row[j]) - mean;
    v += d * d;
  }
  part[threadIdx.x] = v;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (int(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  const double rstd = 1.0 / sqrt(part[0] / double(cols) + double(eps));
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    out[j] = float((double(row[j]) - mean) * rstd * double(gamma[j]) + (beta ? double(beta[j]) : 0.0));
}

/// Calls f(op as O) for the unary element-wise op types (the list is here once); false when
/// `op` is none of them.
template <class... O, class F>
bool with_op(const Op& op, F&& f) {
  return ((std::holds_alternative<O>(op) ? (f(std::get<O>(op)), true) : false) || ...);
}
template <class F>
bool with_unary(const Op& op, F&& f) {
  using namespace ops;
  return with_op<Neg, Relu, LeakyRelu, Clip, Sqrt, Erf, Exp, Sigmoid, Tanh, Gelu, Abs, Log, Reciprocal, Floor, Ceil, Round, Sign, Softsign,
                 Softplus, Mish, HardSwish, Elu, Selu, HardSigmoid, Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh, Celu, ThresholdedRelu, Shrink>(op, f);
}
}  // namespace

void launch_box_copy(const DevBox& b, const float* src, float* dst, cudaStream_t s) {
  if (b.count == 0) return;
  box_copy_kernel<<<unsigned(grid_for(b.count)), kThreads, 0, s>>>(b, src, dst);
}

void launch_tile_copy(const DevTile& t, const float* src, float* dst, cudaStream_t s) {
  if (t.blocks == 0) return;
  tile_copy_kernel<<<unsigned(std::min<int64_t>(t.blocks, int64_t(1) << 20)), dim3(DevTile::kTile, 8), 0, s>>>(t, src, dst);
}

void launch_fill(float* dst, int64_t n, float v, cudaStream_t s) {
  if (n == 0) return;
  fill_kernel<<<unsigned(grid_for(n)), kThreads, 0, s>>>(dst, n, v);
}

void launch_binary(BinaryKind k, const DevBroadcast& br, const float* a, const float* b, float* y, cudaStream_t s) {
  if (br.count == 0) return;
  binary_kernel<<<unsigned(grid_for(br.count)), kThreads, 0, s>>>(k, br, a, b, y);
}

bool has_unary_kernel(const Op& op) {
  return with_unary(op, [](const auto&) {});
}

bool launch_unary(const Op& op, const float* x, float* y, int64_t n, cudaStream_t s) {
  return with_unary(op, [&](const auto& o) {
    if (n > 0) unary_kernel<<<unsigned(grid_for(n)), kThreads, 0, s>>>(o, x, y, n);
  });
}

void launch_layer_norm(const float* x, const float* gamma, const float* beta, float* y, int64_t rows, int64_t cols, float eps, cudaStream_t s) {
  if (rows == 0) return;
  layer_norm_kernel<<<unsigned(rows), kThreads, 0, s>>>(x, gamma, beta, y, cols, eps);
}

}  // namespace pet::cuda
