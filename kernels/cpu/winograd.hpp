#pragma once
// Winograd F(4x4, 3x3) convolution for the cpu backend. oneDNN 2.x has Winograd only for
// AVX-512 machines; on AVX2 its 3x3 convs are direct. This one is pet's: the input and output
// transforms are pet kernels (8 channels per AVX2 vector, on oneDNN's nChw8c layout or on
// channels-last nhwc, where 8 channels are as contiguous) and the 36 products per tile are one
// batched oneDNN matmul. It does 4x fewer multiplications than a
// direct conv; the backend times it against oneDNN's direct conv and keeps the faster.
#include <dnnl.hpp>
#include <memory>
#include <vector>

namespace pet::cpu {

/// What the conv does to its result after the bias, in order (oneDNN post-ops that pet can
/// apply itself).
struct Epilogue {
  enum Kind { Sum, Eltwise } kind = Eltwise;
  dnnl::algorithm alg = dnnl::algorithm::eltwise_relu;  ///< relu (alpha: negative slope) or linear
  float alpha = 0, beta = 0, scale = 1;
};

/// The post-ops as Epilogue steps; false when one of them is not relu, linear or a sum.
bool epilogue_of(const dnnl::post_ops& po, std::vector<Epilogue>& out);

/// The geometry of a conv that Winograd4x3 runs: x [n, c, (d,) h, w], weights [k, c, (kd,) 3, 3],
/// stride 1, dilation 1, one group. 2-D convs have d = kd = 1 and no depth pads; 3-D convs are
/// Winograd in H and W and a sum over the kd depth taps (folded into the matmul's inner dim).
/// src and dst are both nChw8c / nCdhw8c, or (channels_last) both nhwc / ndhwc.
struct WinogradShape {
  int64_t n = 1, c = 0, d = 1, h = 0, w = 0, k = 0, kd = 1;
  int64_t pad_front = 0, pad_back = 0, pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  bool channels_last = false;
};

/// Where the 8 channels [8b, 8b + 8) of pixel (img, z, y, x) start in a tensor of C channels
/// over D x H x W (C a multiple of 8): nChw8c (nCdhw8c) or, channels_last, nhwc (ndhwc). The 8
/// are contiguous in both.
struct Block8Layout {
  int64_t img, block, depth, row, pixel;
  Block8Layout(bool channels_last, int64_t C, int64_t D, int64_t H, int64_t W)
      : img(C * D * H * W),
        block(channels_last ? 8 : D * H * W * 8),
        depth(H * W * (channels_last ? C : 8)),
        row(W * (channels_last ? C : 8)),
        pixel(channels_last ? C : 8) {}
  int64_t at(int64_t i, int64_t b, int64_t z, int64_t y, int64_t x) const { return i * img + b * block + z * depth + y * row + x * pixel; }
};

class Winograd4x3 {
 public:
  /// weights [k, c, kd, 3, 3] (row-major), bias [k] or null; c and k multiples of 8.
  Winograd4x3(const dnnl::engine& eng, const WinogradShape& shape, const float* weights, const float* bias, std::vector<Epilogue> epilogue);
  ~Winograd4x3();
  /// src in nChw8c / nCdhw8c (or nhwc / ndhwc: WinogradShape::channels_last), dst likewise
  /// ([n, k, (od,) oh, ow]); dst is read first when a Sum is fused.
  void run(dnnl::stream& s, const float* src, float* dst);
  /// Tiles per chunk (the matmul's rows) and chunks per run.
  int64_t chunk_tiles() const { return tc_; }
  int64_t chunks() const { return chunks_; }
  static bool applies(int64_t c, int64_t k) { return c % 8 == 0 && k % 8 == 0; }

 private:
  void input_transform(const float* src, int64_t t0);
  void output_transform(float* dst, int64_t t0);
  WinogradShape s_;
  int64_t od_, oh_, ow_, th_, tw_, tiles_, tc_, chunks_, kc_;
  std::vector<float> bias_;
  std::vector<Epilogue> epi_;
  std::shared_ptr<float[]> v_, m_, u_;
  dnnl::matmul mm_;
  dnnl::memory vmem_, umem_, mmem_;
};

}  // namespace pet::cpu
