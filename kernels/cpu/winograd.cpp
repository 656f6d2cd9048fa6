// Winograd F(4x4, 3x3) (Lavin and Gray, 2016) with the transforms on 8-channel vectors and
// the per-position products as one batched oneDNN matmul, over chunks of tiles that stay in
// cache.
#include "winograd.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "pet/core/error.hpp"
#include "pet/core/parallel.hpp"

namespace pet::cpu {

namespace {
using md_t = dnnl::memory::desc;
typedef float v8 __attribute__((vector_size(32)));

inline v8 load(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, v8 v) { std::memcpy(p, &v, sizeof v); }

std::shared_ptr<float[]> floats(size_t n) {
  size_t bytes = std::max<size_t>(64, (n * sizeof(float) + 63) / 64 * 64);
  return std::shared_ptr<float[]>(static_cast<float*>(std::aligned_alloc(64, bytes)), [](float* p) { std::free(p); });
}

/// r = B^T d for six rows d (the input transform, applied to rows then to columns).
template <class T>
inline void bt6(const T d[6], T r[6]) {
  r[0] = 4 * d[0] - 5 * d[2] + d[4];
  r[1] = -4 * d[1] - 4 * d[2] + d[3] + d[4];
  r[2] = 4 * d[1] - 4 * d[2] - d[3] + d[4];
  r[3] = -2 * d[1] - d[2] + 2 * d[3] + d[4];
  r[4] = 2 * d[1] - d[2] - 2 * d[3] + d[4];
  r[5] = 4 * d[1] - 5 * d[3] + d[5];
}
/// r = A^T m for six rows m (the output transform).
template <class T>
inline void at6(const T m[6], T r[4]) {
  const T a = m[1] + m[2], b = m[1] - m[2], c = m[3] + m[4], d = m[3] - m[4];
  r[0] = m[0] + a + c;
  r[1] = b + 2 * d;
  r[2] = a + 4 * c;
  r[3] = b + 8 * d + m[5];
}
}  // namespace

bool epilogue_of(const dnnl::post_ops& po, std::vector<Epilogue>& out) {
  out.clear();
  for (int i = 0; i < po.len(); ++i) {
    Epilogue e;
    if (po.kind(i) == dnnl::primitive::kind::sum) {
      e.kind = Epilogue::Sum;
      po.get_params_sum(i, e.scale);
    } else if (po.kind(i) == dnnl::primitive::kind::eltwise) {
      po.get_params_eltwise(i, e.scale, e.alg, e.alpha, e.beta);
      if (e.alg != dnnl::algorithm::eltwise_relu && e.alg != dnnl::algorithm::eltwise_linear) return false;
    } else {
      return false;
    }
    out.push_back(e);
  }
  return true;
}

Winograd4x3::Winograd4x3(const dnnl::engine& eng, const WinogradShape& shape, const float* weights, const float* bias,
                         std::vector<Epilogue> epilogue)
    : s_(shape), epi_(std::move(epilogue)) {
  const int64_t c = s_.c, k = s_.k, kd = s_.kd;
  PET_CHECK(applies(c, k), "Winograd4x3: channels must be multiples of 8");
  od_ = s_.d + s_.pad_front + s_.pad_back - kd + 1;
  oh_ = s_.h + s_.pad_top + s_.pad_bottom - 2;
  ow_ = s_.w + s_.pad_left + s_.pad_right - 2;
  PET_CHECK(od_ > 0 && oh_ > 0 && ow_ > 0, "Winograd4x3: empty output");
  th_ = (oh_ + 3) / 4;
  tw_ = (ow_ + 3) / 4;
  tiles_ = s_.n * od_ * th_ * tw_;
  kc_ = kd * c;  // the matmul's inner dim: every depth tap of every input channel
  // Chunks of tiles whose transformed inputs and products (36 x tiles x channels each) take
  // about 2 MiB, so that the matmul reads what the transform just wrote from cache.
  const int64_t per_tile = 36 * std::max(kc_, k) * int64_t(sizeof(float));
  int64_t want = std::max<int64_t>(16, (int64_t(2) << 20) / per_tile);
  chunks_ = (tiles_ + want - 1) / want;
  tc_ = (tiles_ + chunks_ - 1) / chunks_;
  bias_.assign(size_t(k), 0.f);
  if (bias) std::copy(bias, bias + k, bias_.begin());

  // U[p][z*c + cc][k] = (G g G^T)[p] for filter k, channel cc, depth tap z, in double.
  static const double G[6][3] = {{1.0 / 4, 0, 0},           {-1.0 / 6, -1.0 / 6, -1.0 / 6}, {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                 {1.0 / 24, 1.0 / 12, 1.0 / 6}, {1.0 / 24, -1.0 / 12, 1.0 / 6},  {0, 0, 1}};
  std::vector<float> u(size_t(36 * kc_ * k));
  parallel_for(k, [&](int64_t kk) {
    for (int64_t cc = 0; cc < c; ++cc)
      for (int64_t z = 0; z < kd; ++z) {
        const float* g = weights + ((kk * c + cc) * kd + z) * 9;
        double t[6][3];
        for (int i = 0; i < 6; ++i)
          for (int j = 0; j < 3; ++j) t[i][j] = G[i][0] * g[0 * 3 + j] + G[i][1] * g[1 * 3 + j] + G[i][2] * g[2 * 3 + j];
        for (int i = 0; i < 6; ++i)
          for (int j = 0; j < 6; ++j)
            u[size_t(((i * 6 + j) * kc_ + z * c + cc) * k + kk)] = float(t[i][0] * G[j][0] + t[i][1] * G[j][1] + t[i][2] * G[j][2]);
      }
  });
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  md_t vmd({36, tc_, kc_}, dt::f32, tag::abc), umd_any({36, kc_, k}, dt::f32, tag::any), mmd({36, tc_, k}, dt::f32, tag::abc);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(vmd, umd_any, mmd), eng);
  mm_ = dnnl::matmul(pd);
  v_ = floats(size_t(36 * tc_ * kc_));
  m_ = floats(size_t(36 * tc_ * k));
  u_ = floats(pd.weights_desc().get_size() / sizeof(float) + 1);
  dnnl::stream st(eng);
  dnnl::memory plain(md_t({36, kc_, k}, dt::f32, tag::abc), eng, u.data());
  umem_ = dnnl::memory(pd.weights_desc(), eng, u_.get());
  dnnl::reorder(plain, umem_).execute(st, plain, umem_);
  st.wait();
  vmem_ = dnnl::memory(vmd, eng, v_.get());
  mmem_ = dnnl::memory(mmd, eng, m_.get());
}

Winograd4x3::~Winograd4x3() = default;

void Winograd4x3::input_transform(const float* src, int64_t t0) {
  const int64_t cb = s_.c / 8, kd = s_.kd, H = s_.h, W = s_.w, D = s_.d;
  const Block8Layout in(s_.channels_last, s_.c, D, H, W);
  float* V = v_.get();
  parallel_for(tc_ * kd * cb, [&](int64_t q) {
    const int64_t tl = q / (kd * cb), z = (q / cb) % kd, b = q % cb, t = t0 + tl;
    float* out = V + tl * kc_ + z * s_.c + b * 8;  // position p at out + p * tc_ * kc_
    const int64_t img = t / (od_ * th_ * tw_), r = t % (od_ * th_ * tw_), zo = r / (th_ * tw_), rr = r % (th_ * tw_);
    const int64_t zi = zo + z - s_.pad_front;
    if (t >= tiles_ || zi < 0 || zi >= D) {
      for (int p = 0; p < 36; ++p) store(out + p * tc_ * kc_, v8{});
      return;
    }
    const int64_t y0 = (rr / tw_) * 4 - s_.pad_top, x0 = (rr % tw_) * 4 - s_.pad_left;
    const float* base = src + in.at(img, b, zi, 0, 0);
    v8 d[6][6];
    for (int i = 0; i < 6; ++i) {
      const int64_t y = y0 + i;
      for (int j = 0; j < 6; ++j) {
        const int64_t x = x0 + j;
        d[i][j] = (y >= 0 && y < H && x >= 0 && x < W) ? load(base + y * in.row + x * in.pixel) : v8{};
      }
    }
    v8 col[6], tr[6][6];
    for (int j = 0; j < 6; ++j) {  // columns: B^T d
      for (int i = 0; i < 6; ++i) col[i] = d[i][j];
      v8 o[6];
      bt6(col, o);
      for (int i = 0; i < 6; ++i) tr[i][j] = o[i];
    }
    for (int i = 0; i < 6; ++i) {  // rows: (B^T d) B
      v8 o[6];
      bt6(tr[i], o);
      for (int j = 0; j < 6; ++j) store(out + (i * 6 + j) * tc_ * kc_, o[j]);
    }
  }, tc_ * kd * cb > 1);
}

void Winograd4x3::output_transform(float* dst, int64_t t0) {
  const int64_t kb = s_.k / 8, K = s_.k;
  const Block8Layout out(s_.channels_last, K, od_, oh_, ow_);
  const float* M = m_.get();
  const int64_t real = std::min(tc_, tiles_ - t0);
  parallel_for(real * kb, [&](int64_t q) {
    const int64_t tl = q / kb, b = q % kb, t = t0 + tl;
    const int64_t img = t / (od_ * th_ * tw_), r = t % (od_ * th_ * tw_), zo = r / (th_ * tw_), rr = r % (th_ * tw_);
    const int64_t y0 = (rr / tw_) * 4, x0 = (rr % tw_) * 4;
    v8 m[6][6], tr[4][6], o[4][4];
    for (int p = 0; p < 36; ++p) m[p / 6][p % 6] = load(M + (p * tc_ + tl) * K + b * 8);
    for (int j = 0; j < 6; ++j) {  // columns: A^T m
      v8 col[6], r4[4];
      for (int i = 0; i < 6; ++i) col[i] = m[i][j];
      at6(col, r4);
      for (int i = 0; i < 4; ++i) tr[i][j] = r4[i];
    }
    for (int i = 0; i < 4; ++i) at6(tr[i], o[i]);  // rows: (A^T m) A
    const v8 bias = load(bias_.data() + b * 8);
    float* base = dst + out.at(img, b, zo, 0, 0);
    for (int i = 0; i < 4; ++i) {
      const int64_t y = y0 + i;
      if (y >= oh_) break;
      for (int j = 0; j < 4; ++j) {
        const int64_t x = x0 + j;
        if (x >= ow_) break;
        float* p = base + y * out.row + x * out.pixel;
        v8 v = o[i][j] + bias;
        for (const Epilogue& e : epi_) {
          if (e.kind == Epilogue::Sum) {
            v += e.scale * load(p);
          } else if (e.alg == dnnl::algorithm::eltwise_relu) {
            v = v > 0 ? v : e.alpha * v;
          } else {
            v = e.alpha * v + e.beta;
          }
        }
        store(p, v);
      }
    }
  }, real * kb > 1);
}

void Winograd4x3::run(dnnl::stream& s, const float* src, float* dst) {
  for (int64_t ch = 0; ch < chunks_; ++ch) {
    const int64_t t0 = ch * tc_;
    input_transform(src, t0);
    mm_.execute(s, {{DNNL_ARG_SRC, vmem_}, {DNNL_ARG_WEIGHTS, umem_}, {DNNL_ARG_DST, mmem_}});
    s.wait();
    output_transform(dst, t0);
  }
}

}  // namespace pet::cpu
