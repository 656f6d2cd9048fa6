#pragma once
// Winograd F(4x4, 3x3) convolution for the cpu backend. oneDNN 2.x has Winograd only for
// AVX-512 machines; on AVX2 its 3x3 convs are direct. This one is pet's: the input and output
// transforms are pet kernels (8 channels per AVX2 vector, on oneDNN's nChw8c layout) and the
// 36 products per tile are one batched oneDNN matmul. It does 4x fewer multiplications than a
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

class Winograd4x3 {
 public:
  /// A 2-D conv, stride 1, dilation 1, one group, 3x3 kernels, on x [n, c, h, w] with pads
  /// (top, left, bottom, right); c and k multiples of 8. weights [k, c, 3, 3], bias [k] or null.
  Winograd4x3(const dnnl::engine& eng, int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t pt, int64_t pl, int64_t pb,
              int64_t pr, const float* weights, const float* bias, std::vector<Epilogue> epilogue);
  ~Winograd4x3();
  /// src in nChw8c, dst in nChw8c ([n, k, oh, ow]); dst is read first when a Sum is fused.
  void run(dnnl::stream& s, const float* src, float* dst);
  int64_t out_h() const { return oh_; }
  int64_t out_w() const { return ow_; }
  /// Tiles per chunk (the matmul's rows) and chunks per run.
  int64_t chunk_tiles() const { return tc_; }
  int64_t chunks() const { return chunks_; }
  static bool applies(int64_t c, int64_t k) { return c % 8 == 0 && k % 8 == 0; }

 private:
  void input_transform(const float* src, int64_t t0);
  void output_transform(float* dst, int64_t t0);
  int64_t n_, c_, h_, w_, k_, pt_, pl_, oh_, ow_, th_, tw_, tiles_, tc_, chunks_;
  std::vector<float> bias_;
  std::vector<Epilogue> epi_;
  std::shared_ptr<float[]> v_, m_, u_;
  dnnl::matmul mm_;
  dnnl::memory vmem_, umem_, mmem_;
};

}  // namespace pet::cpu
