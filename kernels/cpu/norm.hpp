#pragma once
// pet's layer normalization kernel for the cpu backend. oneDNN 2.x's layer norm accumulates
// the mean and variance in float; on rows whose variance is tiny next to their mean (a Clip
// that leaves most of a row at one value, then a LayerNorm over it) that cancellation costs
// several significant digits (difftest seed 1000, program 26753: 2.6e-3 off on outputs of
// magnitude 1). This kernel computes them as the reference interpreter does: two passes,
// accumulated in double (vectorised OpenMP simd reductions), so both agree to float rounding.
#include <cstdint>

namespace pet::cpu {

/// y[r, j] = float((x[r, j] - mean_r) / sqrt(var_r + eps)) * scale[j] + shift[j] for each of
/// `rows` contiguous rows of `len` floats (multi-threaded over rows).
void layer_norm_rows(const float* x, float* y, int64_t rows, int64_t len, const float* scale, const float* shift, float epsilon);

/// InstanceNormalization on a plain [N, C, spatial...] tensor: each of the N C rows of `len`
/// floats normalised by its own mean and (biased) variance, two passes in double as the
/// op's formula, then y = scale[c] (x - mean) / sqrt(var + eps) + shift[c] (c = row mod C).
void instance_norm_rows(const float* x, float* y, int64_t rows, int64_t len, int64_t channels, const float* scale, const float* shift,
                        float epsilon);

/// Inference batch normalization on a plain [outer, channels, inner] tensor, with its
/// per-channel constants precomputed: y = (x - mean[c]) * mul[c] + add[c], where
/// mul = gamma / sqrt(var + eps) and add = beta; then max(y, 0) with `relu`. (oneDNN 2.6's
/// batch norm on plain NCHW is its slow generic kernel: 0.4-0.6 ms per DenseNet layer where
/// this takes a pass over memory.)
void batch_norm_plain(const float* x, float* y, int64_t outer, int64_t channels, int64_t inner, const float* mean, const float* mul, const float* add,
                      bool relu);

/// The same on channels-last rows: `rows` rows of `channels` values each, row r read at
/// x + r * x_stride (x_stride >= channels: a view of the first channels of a wider tensor, a
/// DenseNet layer's join seen in its block's shared buffer) and written densely at y + r * channels.
void batch_norm_rows(const float* x, int64_t x_stride, float* y, int64_t rows, int64_t channels, const float* mean, const float* mul,
                     const float* add, bool relu);

}  // namespace pet::cpu
