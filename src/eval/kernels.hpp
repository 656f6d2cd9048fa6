#pragma once
// Fast whole-tensor kernels of the reference interpreter (private to src/eval). Each is
// checked against the op's element formula in tests/test_ops.cpp.
#include <Eigen/Core>

#include <algorithm>
#include <array>
#include <cstring>

#include "pet/core/parallel.hpp"
#include "pet/eval/resize_tables.hpp"
#include "pet/eval/value.hpp"
#include "pet/ir/op.hpp"

namespace pet::kernels {

/// C[M,N] (+)= op(A)[M,K] * op(B)[K,N], row-major with leading dimensions.
template <class T>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B, int64_t ldb,
          T* C, int64_t ldc, bool accumulate) {
  if (M == 0 || N == 0) return;
  if constexpr (std::is_floating_point_v<T>) {
    using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using CMap = Eigen::Map<const Mat, 0, Eigen::OuterStride<>>;
    Eigen::Map<Mat, 0, Eigen::OuterStride<>> c(C, M, N, Eigen::OuterStride<>(ldc));
    if (K == 0) {
      if (!accumulate) c.setZero();
      return;
    }
    CMap a(A, ta ? K : M, ta ? M : K, Eigen::OuterStride<>(lda));
    CMap b(B, tb ? N : K, tb ? K : N, Eigen::OuterStride<>(ldb));
    auto run = [&](const auto& x, const auto& y) {
      if (accumulate) c.noalias() += x * y;
      else c.noalias() = x * y;
    };
    if (ta && tb) run(a.transpose(), b.transpose());
    else if (ta) run(a.transpose(), b);
    else if (tb) run(a, b.transpose());
    else run(a, b);
  } else {
    parallel_for(M, [&](int64_t i) {
      T* ci = C + i * ldc;
      if (!accumulate) std::fill(ci, ci + N, T(0));
      for (int64_t k = 0; k < K; ++k) {
        T aik = ta ? A[k * lda + i] : A[i * lda + k];
        if (tb) {
          for (int64_t j = 0; j < N; ++j) ci[j] += aik * B[j * ldb + k];
        } else {
          const T* bk = B + k * ldb;
          for (int64_t j = 0; j < N; ++j) ci[j] += aik * bk[j];
        }
      }
    }, M * N * K > 32768);
  }
}

/// A conv's spatial geometry as 3-D (spatial ranks 1-3 with leading unit dims): input,
/// output and kernel extents, strides, begin pads, dilations.
struct Geometry3 {
  int64_t in[3] = {1, 1, 1}, ou[3] = {1, 1, 1}, ks[3] = {1, 1, 1}, st[3] = {1, 1, 1}, pd[3] = {0, 0, 0}, dl[3] = {1, 1, 1};
  template <class ConvOp>
  Geometry3(const ConvOp& op, const Shape& xs, const Shape& ws, const Shape& os) {
    const int k = int(xs.size()) - 2;
    for (int i = 0; i < k; ++i) {
      const int j = 3 - k + i;
      in[j] = xs[size_t(2 + i)];
      ou[j] = os[size_t(2 + i)];
      ks[j] = ws[size_t(2 + i)];
      st[j] = op.strides[size_t(i)];
      pd[j] = op.pads[size_t(i)];
      dl[j] = op.dilations[size_t(i)];
    }
  }
};

/// out[n, f, p] += bias[f] over N images, F channels, P positions.
template <class T>
void add_channel_bias(Tensor<T>& out, const Tensor<T>& bias, int64_t N, int64_t F, int64_t P) {
  parallel_for(N * F, [&](int64_t nf) {
    T b = bias[nf % F];
    T* o = out.data() + nf * P;
    for (int64_t p = 0; p < P; ++p) o[p] += b;
  }, N * F * P > 65536);
}

/// Conv as im2col + GEMM per (image, group), chunked over output positions to bound memory.
/// Spatial ranks 1-3 are handled as 3-D with leading unit dims.
template <class T>
Tensor<T> conv(const ops::Conv& op, const Tensor<T>& x, const Tensor<T>& w, const Tensor<T>* bias, const Shape& out_shape) {
  const Geometry3 geo(op, x.shape(), w.shape(), out_shape);
  const int64_t *in = geo.in, *ou = geo.ou, *ks = geo.ks, *st = geo.st, *pd = geo.pd, *dl = geo.dl;
  const int64_t N = x.shape()[0], C = x.shape()[1], F = w.shape()[0], G = op.group;
  const int64_t Cg = C / G, Fg = F / G, KK = ks[0] * ks[1] * ks[2], CK = Cg * KK;
  const int64_t P = ou[0] * ou[1] * ou[2], IP = in[0] * in[1] * in[2];
  Tensor<T> out(out_shape);
  // A 1x1 kernel that maps every output position to the same input position: X is the im2col matrix.
  const bool pointwise = KK == 1 && st[0] == 1 && st[1] == 1 && st[2] == 1 && pd[0] == 0 && pd[1] == 0 && pd[2] == 0 && P == IP;
  const int64_t chunk = std::max<int64_t>(ou[2], std::min<int64_t>(P, (int64_t(1) << 24) / std::max<int64_t>(CK, 1)));
  std::vector<T> col(pointwise ? 0 : size_t(CK * std::min(chunk, P)));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      const T* xg = x.data() + (n * C + g * Cg) * IP;
      const T* wg = w.data() + g * Fg * CK;
      T* og = out.data() + (n * F + g * Fg) * P;
      if (pointwise) {
        gemm<T>(false, false, Fg, P, CK, wg, CK, xg, IP, og, P, false);
        continue;
      }
      for (int64_t p0 = 0; p0 < P; p0 += chunk) {
        const int64_t pc = std::min(chunk, P - p0);
        parallel_for(CK, [&](int64_t row) {
          const int64_t c = row / KK, r = row % KK;
          const int64_t rd = r / (ks[1] * ks[2]), rh = (r / ks[2]) % ks[1], rw = r % ks[2];
          const T* xc = xg + c * IP;
          T* dst = col.data() + row * pc;
          for (int64_t q = 0; q < pc; ++q) {
            const int64_t p = p0 + q;
            const int64_t od = p / (ou[1] * ou[2]), oh = (p / ou[2]) % ou[1], ow = p % ou[2];
            const int64_t id = od * st[0] - pd[0] + rd * dl[0], ih = oh * st[1] - pd[1] + rh * dl[1],
                          iw = ow * st[2] - pd[2] + rw * dl[2];
            dst[q] = (id >= 0 && id < in[0] && ih >= 0 && ih < in[1] && iw >= 0 && iw < in[2])
                         ? xc[(id * in[1] + ih) * in[2] + iw]
                         : T(0);
          }
        }, CK * pc > 16384);
        gemm<T>(false, false, Fg, pc, CK, wg, CK, col.data(), pc, og + p0, P, false);
      }
    }
  if (bias) add_channel_bias(out, *bias, N, F, P);
  return out;
}

/// ConvTranspose as GEMM + col2im per (image, group): cols[Fg k, in] = W_g^T x_g, then each
/// column entry added at its output position (in * stride - pad + tap * dilation), chunked
/// over input positions to bound memory; parallel over output channels (each writes its own
/// plane). Spatial ranks 1-3 as 3-D with leading unit dims.
template <class T>
Tensor<T> conv_transpose(const ops::ConvTranspose& op, const Tensor<T>& x, const Tensor<T>& w, const Tensor<T>* bias, const Shape& out_shape) {
  const Geometry3 geo(op, x.shape(), w.shape(), out_shape);
  const int64_t *in = geo.in, *ou = geo.ou, *ks = geo.ks, *st = geo.st, *pd = geo.pd, *dl = geo.dl;
  const int64_t N = x.shape()[0], C = x.shape()[1], G = op.group, Cg = C / G, Fg = w.shape()[1], F = Fg * G;
  const int64_t KK = ks[0] * ks[1] * ks[2], FK = Fg * KK, P = ou[0] * ou[1] * ou[2], IP = in[0] * in[1] * in[2];
  Tensor<T> out(out_shape, T(0));
  const int64_t chunk = std::max<int64_t>(in[2], std::min<int64_t>(IP, (int64_t(1) << 24) / std::max<int64_t>(FK, 1)));
  std::vector<T> col(size_t(FK * std::min(chunk, IP)));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      const T* xg = x.data() + (n * C + g * Cg) * IP;
      const T* wg = w.data() + g * Cg * FK;
      T* og = out.data() + (n * F + g * Fg) * P;
      for (int64_t i0 = 0; i0 < IP; i0 += chunk) {
        const int64_t ic = std::min(chunk, IP - i0);
        gemm<T>(true, false, FK, ic, Cg, wg, FK, xg + i0, IP, col.data(), ic, false);
        parallel_for(Fg, [&](int64_t f) {
          T* of = og + f * P;
          for (int64_t r = 0; r < KK; ++r) {
            const int64_t rd = r / (ks[1] * ks[2]), rh = (r / ks[2]) % ks[1], rw = r % ks[2];
            const T* src = col.data() + (f * KK + r) * ic;
            for (int64_t q = 0; q < ic; ++q) {
              const int64_t i = i0 + q;
              const int64_t id = i / (in[1] * in[2]), ih = (i / in[2]) % in[1], iw = i % in[2];
              const int64_t od = id * st[0] - pd[0] + rd * dl[0], oh = ih * st[1] - pd[1] + rh * dl[1], ow = iw * st[2] - pd[2] + rw * dl[2];
              if (od >= 0 && od < ou[0] && oh >= 0 && oh < ou[1] && ow >= 0 && ow < ou[2]) of[(od * ou[1] + oh) * ou[2] + ow] += src[q];
            }
          }
        }, FK * ic > 16384);
      }
    }
  if (bias) add_channel_bias(out, *bias, N, F, P);
  return out;
}

/// Resize: its tables (pet/eval/resize_tables.hpp), built and run once.
template <class T>
Tensor<T> resize(const ops::Resize& op, const Tensor<T>& x, const Shape& out_shape) {
  Tensor<T> out(out_shape);
  ResizeTables<T>(op, x.shape(), out_shape).run(x.data(), out.data());
  return out;
}

/// numpy matmul with batch broadcasting.
template <class T>
Tensor<T> matmul(const Tensor<T>& a, const Tensor<T>& b, const Shape& out_shape) {
  const Shape &as = a.shape(), &bs = b.shape();
  const int64_t M = as.size() >= 2 ? as[as.size() - 2] : 1, K = as.back();
  const int64_t N = bs.size() >= 2 ? bs.back() : 1;
  Shape ab = as.size() > 2 ? Shape(as.begin(), as.end() - 2) : Shape{};
  Shape bb = bs.size() > 2 ? Shape(bs.begin(), bs.end() - 2) : Shape{};
  Shape ob = broadcast_shapes(ab, bb, "MatMul");
  Tensor<T> out(out_shape);
  const int64_t batches = numel(ob);
  auto run = [&](int64_t bi) {
    Index o = unflatten(bi, ob);
    int64_t aoff = ab.empty() ? 0 : flat_offset(broadcast_index(o, ab), ab);
    int64_t boff = bb.empty() ? 0 : flat_offset(broadcast_index(o, bb), bb);
    const T* A = a.data() + aoff * M * K;
    const T* B = b.data() + boff * K * N;
    T* C = out.data() + bi * M * N;
    gemm<T>(false, false, M, N, K, A, K, B, bs.size() >= 2 ? N : 1, C, N, false);
  };
  // Many small products: parallel over the batch; one big product: Eigen's own threads.
  parallel_for(batches, run, batches > 1 && M * N * K < (int64_t(1) << 22));
  return out;
}

template <class T>
Tensor<T> gemm_op(const ops::Gemm& op, const Tensor<T>& a, const Tensor<T>& b, const Tensor<T>* c, const Shape& out_shape) {
  const int64_t M = out_shape[0], N = out_shape[1], K = op.trans_a ? a.shape()[0] : a.shape()[1];
  Tensor<T> out(out_shape);
  gemm<T>(op.trans_a, op.trans_b, M, N, K, a.data(), a.shape()[1], b.data(), b.shape()[1], out.data(), N, false);
  const T alpha = lift_scalar<T>(op.alpha, "Gemm alpha"), beta = c ? lift_scalar<T>(op.beta, "Gemm beta") : T(0);
  const Shape cs = c ? c->shape() : Shape{};
  parallel_for(M, [&](int64_t i) {
    T* o = out.data() + i * N;
    for (int64_t j = 0; j < N; ++j) {
      T v = alpha * o[j];
      if (c) v += beta * c->at(broadcast_index(Index{i, j}, cs));
      o[j] = v;
    }
  }, M * N > 65536);
  return out;
}

/// Copies src (viewed with per-dim element strides over `shape`) into a contiguous dst.
template <class E>
void strided_copy(const E* src, E* dst, const Shape& shape, const std::vector<int64_t>& src_strides) {
  const int r = int(shape.size());
  if (r == 0) {
    dst[0] = src[0];
    return;
  }
  const int64_t inner = shape.back(), rows = numel(shape) / std::max<int64_t>(inner, 1);
  if (inner == 0) return;
  Shape outer(shape.begin(), shape.end() - 1);
  const int64_t sin = src_strides.back();
  parallel_chunks(rows, std::max<int64_t>(1, 8192 / inner), [&](int64_t b, int64_t e) {
    Index idx = unflatten(b, outer);
    for (int64_t row = b; row < e; ++row) {
      int64_t off = 0;
      for (int i = 0; i < r - 1; ++i) off += idx[i] * src_strides[size_t(i)];
      const E* s = src + off;
      E* d = dst + row * inner;
      if (sin == 1) std::copy(s, s + inner, d);
      else
        for (int64_t j = 0; j < inner; ++j) d[j] = s[j * sin];
      next_index(idx, outer);
    }
  });
}

/// The R/T op (and Transpose, as R/T with split_shape = input shape) as one strided copy.
template <class E>
Tensor<E> rt_copy(const Tensor<E>& x, const Shape& split_shape, const std::vector<int64_t>& perm, const Shape& out_shape) {
  std::vector<int64_t> st = strides_of(split_shape), tst;
  Shape tshape;
  for (int64_t p : perm) {
    tshape.push_back(split_shape[size_t(p)]);
    tst.push_back(st[size_t(p)]);
  }
  // Drop unit dims and merge dims that stay contiguous in the source, to keep rows long.
  Shape ms;
  std::vector<int64_t> mst;
  for (size_t i = 0; i < tshape.size(); ++i) {
    if (tshape[i] == 1) continue;
    if (!ms.empty() && mst.back() == tst[i] * tshape[i]) {
      ms.back() *= tshape[i];
      mst.back() = tst[i];
    } else {
      ms.push_back(tshape[i]);
      mst.push_back(tst[i]);
    }
  }
  Tensor<E> out(out_shape);
  if (out.size() == 0) return out;
  if (ms.empty()) ms.push_back(1), mst.push_back(1);
  strided_copy(x.data(), out.data(), ms, mst);
  return out;
}

/// Element-wise binary op with broadcasting; all operands of element type E.
template <class E, class Op2>
Tensor<E> binary(const Op2& op, const Tensor<E>& a, const Tensor<E>& b, const Shape& out_shape) {
  Tensor<E> out(out_shape);
  const int r = int(out_shape.size());
  auto bstrides = [&](const Shape& s) {
    std::vector<int64_t> st(size_t(r), 0), own = strides_of(s);
    int off = r - int(s.size());
    for (int i = 0; i < int(s.size()); ++i) st[size_t(off + i)] = s[size_t(i)] == 1 ? 0 : own[size_t(i)];
    return st;
  };
  const std::vector<int64_t> sa = bstrides(a.shape()), sb = bstrides(b.shape());
  const int64_t inner = r ? out_shape.back() : 1, rows = inner ? out.size() / inner : 0;
  const int64_t ia = r ? sa.back() : 0, ib = r ? sb.back() : 0;
  Shape outer(out_shape.begin(), out_shape.end() - (r ? 1 : 0));
  parallel_chunks(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)), [&](int64_t rb, int64_t re) {
    Index idx = unflatten(rb, outer);
    for (int64_t row = rb; row < re; ++row) {
      int64_t oa = 0, ob = 0;
      for (int i = 0; i < r - 1; ++i) oa += idx[i] * sa[size_t(i)], ob += idx[i] * sb[size_t(i)];
      const E *pa = a.data() + oa, *pb = b.data() + ob;
      E* po = out.data() + row * inner;
      for (int64_t j = 0; j < inner; ++j) po[j] = op(pa[j * ia], pb[j * ib]);
      next_index(idx, outer);
    }
  });
  return out;
}

template <class E, class F>
Tensor<E> unary(const Tensor<E>& x, F&& f) {
  Tensor<E> out(x.shape());
  const E* src = x.data();
  E* dst = out.data();
  parallel_chunks(x.size(), 16384, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dst[i] = f(src[i]);
  });
  return out;
}

/// Rows along `axis` of a tensor of shape s: outer x len x inner, row (o, i) starting at
/// o * len * inner + i with stride inner.
inline std::array<int64_t, 3> rows_along(const Shape& s, int64_t axis) {
  int64_t outer = 1, len = 1, inner = 1;
  for (int i = 0; i < int(s.size()); ++i) (i < axis ? outer : i == axis ? len : inner) *= s[size_t(i)];
  return {outer, len, inner};
}

/// CumSum in one pass per row (any element type).
template <class E>
Tensor<E> cumsum(const ops::CumSum& op, const Tensor<E>& x) {
  const auto [outer, len, inner] = rows_along(x.shape(), op.axis);
  Tensor<E> out(x.shape());
  parallel_for(outer * inner, [&](int64_t oi) {
    const int64_t base = (oi / inner) * len * inner + oi % inner;
    E acc(0);
    for (int64_t t = 0; t < len; ++t) {
      const int64_t j = base + (op.reverse ? len - 1 - t : t) * inner;
      if (op.exclusive) out[j] = acc, acc += x[j];
      else acc += x[j], out[j] = acc;
    }
  }, x.size() > 16384);
  return out;
}

/// TopK with one sort per row (values as E, indices as int64), in the formula's order.
template <class E>
std::pair<Tensor<E>, Tensor<int64_t>> topk(const ops::TopK& op, const Tensor<E>& x, const Shape& out_shape) {
  const auto [outer, len, inner] = rows_along(x.shape(), op.axis);
  Tensor<E> vals(out_shape);
  Tensor<int64_t> idx(out_shape);
  const int64_t k = op.k;
  parallel_for(outer * inner, [&](int64_t oi) {
    const int64_t o = oi / inner, in = oi % inner, base = o * len * inner + in, obase = o * k * inner + in;
    std::vector<int64_t> order(static_cast<size_t>(len));
    for (int64_t j = 0; j < len; ++j) order[size_t(j)] = j;
    auto v = [&](int64_t j) { return double(x[base + j * inner]); };
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t p, int64_t q) {
      const double a = v(p), b = v(q);
      const bool an = std::isnan(a), bn = std::isnan(b);
      if (an || bn) return an && bn ? p < q : op.largest ? an : bn;
      if (a != b) return op.largest ? a > b : a < b;
      return p < q;
    });
    for (int64_t r = 0; r < k; ++r) {
      vals[obase + r * inner] = x[base + order[size_t(r)] * inner];
      idx[obase + r * inner] = order[size_t(r)];
    }
  }, x.size() > 16384);
  return {vals, idx};
}

/// ScatterElements: data copied, then each update written or combined in row-major order of
/// the indices (so duplicates resolve as the formula says).
template <class E>
Tensor<E> scatter_elements(const ops::ScatterElements& op, const Tensor<E>& x, const Tensor<int64_t>& idx, const Tensor<E>& upd) {
  Tensor<E> out = x.clone();
  const Shape& ix = idx.shape();
  if (idx.size() == 0) return out;
  const std::vector<int64_t> xs = strides_of(x.shape());
  const int a = int(op.axis);
  const int64_t n = x.shape()[size_t(a)];
  Index j(int(ix.size()));
  int64_t k = 0;
  do {
    int64_t off = 0;
    for (int d = 0; d < j.rank; ++d) off += (d == a ? ops::detail::scatter_index(op.name, idx[k], n, a) : j[d]) * xs[size_t(d)];
    out[off] = ops::detail::scatter_combine(op.reduction, out[off], upd[k]);
    ++k;
  } while (next_index(j, ix));
  return out;
}

/// ScatterND: data copied, then each index tuple's slice of updates written or combined, in
/// row-major order of the tuples.
template <class E>
Tensor<E> scatter_nd(const ops::ScatterND& op, const Tensor<E>& x, const Tensor<int64_t>& idx, const Tensor<E>& upd) {
  Tensor<E> out = x.clone();
  const Shape& xs = x.shape();
  const int64_t k = idx.shape().back(), tuples = k ? idx.size() / k : 0;
  int64_t slice = 1;
  for (size_t d = size_t(k); d < xs.size(); ++d) slice *= xs[d];
  const std::vector<int64_t> st = strides_of(xs);
  for (int64_t p = 0; p < tuples; ++p) {
    int64_t off = 0;
    for (int64_t c = 0; c < k; ++c) off += ops::detail::scatter_index(op.name, idx[p * k + c], xs[size_t(c)], c) * st[size_t(c)];
    for (int64_t t = 0; t < slice; ++t) out[off + t] = ops::detail::scatter_combine(op.reduction, out[off + t], upd[p * slice + t]);
  }
  return out;
}

/// Rows of x for per-axis quantization parameters: outer * count * inner elements, the
/// parameter index being the middle coordinate (count 1 for one parameter).
inline std::array<int64_t, 3> quant_blocks(const Shape& x, const Shape& s, int64_t axis) {
  if (s.size() != 1 || s[0] == 1) return {1, 1, numel(x)};
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < x.size(); ++d) inner *= x[d];
  return {outer, x[size_t(axis)], inner};
}

template <class T>
Tensor<int64_t> quantize(const ops::QuantizeLinear& op, const Tensor<T>& x, const Tensor<T>& scale, const Tensor<int64_t>* zero) {
  Tensor<int64_t> out(x.shape());
  const auto [outer, count, inner] = quant_blocks(x.shape(), scale.shape(), op.axis);
  parallel_for(outer * count, [&](int64_t oc) {
    const int64_t c = oc % count;
    const float s = float(scale[c]);
    const int64_t z = zero ? (*zero)[c] : 0;
    for (int64_t i = oc * inner; i < (oc + 1) * inner; ++i) out[i] = op.quantize(float(x[i]), s, z);
  }, x.size() > 16384);
  return out;
}

template <class T>
Tensor<T> dequantize(const ops::DequantizeLinear& op, const Tensor<int64_t>& x, const Tensor<T>& scale, const Tensor<int64_t>* zero) {
  Tensor<T> out(x.shape());
  const auto [outer, count, inner] = quant_blocks(x.shape(), scale.shape(), op.axis);
  parallel_for(outer * count, [&](int64_t oc) {
    const int64_t c = oc % count;
    const float s = float(scale[c]);
    const int64_t z = zero ? (*zero)[c] : 0;
    for (int64_t i = oc * inner; i < (oc + 1) * inner; ++i) out[i] = T(op.dequantize(x[i], s, z));
  }, x.size() > 16384);
  return out;
}

/// The integer ops' operands minus their zero points, as doubles: the products and sums of
/// int8 differences stay integers far below 2^53, so a double GEMM (Eigen's) is exact in any
/// order. zero: one value or one per index of x's dim `axis` (nullptr: 0).
inline Tensor<double> minus_zero(const Tensor<int64_t>& x, const Tensor<int64_t>* zero, int axis) {
  Tensor<double> r(x.shape());
  const Shape& s = x.shape();
  const bool per = zero && zero->size() > 1;
  int64_t inner = 1;
  for (size_t d = size_t(axis) + 1; per && d < s.size(); ++d) inner *= s[d];
  const int64_t count = per ? s[size_t(axis)] : 1;
  for (int64_t i = 0; i < x.size(); ++i) r[i] = double(x[i] - (zero ? (*zero)[per ? (i / inner) % count : 0] : 0));
  return r;
}
inline Tensor<int64_t> to_ints(const Tensor<double>& x) {
  Tensor<int64_t> r(x.shape());
  for (int64_t i = 0; i < x.size(); ++i) r[i] = int64_t(x[i]);
  return r;
}
/// The int32 sums of MatMulInteger / QLinearMatMul (operand inputs a and b, zero points za, zb).
inline Tensor<int64_t> int_matmul(const Tensor<int64_t>& a, const Tensor<int64_t>* za, const Tensor<int64_t>& b,
                                  const Tensor<int64_t>* zb, const Shape& os) {
  return to_ints(matmul<double>(minus_zero(a, za, 0), minus_zero(b, zb, int(b.rank()) - 1), os));
}
/// The int32 sums of ConvInteger / QLinearConv (bias: added per output channel).
inline Tensor<int64_t> int_conv(const ops::Conv& c, const Tensor<int64_t>& x, const Tensor<int64_t>* zx, const Tensor<int64_t>& w,
                                const Tensor<int64_t>* zw, const Tensor<int64_t>* bias, const Shape& os) {
  Tensor<int64_t> r = to_ints(conv<double>(c, minus_zero(x, zx, 0), minus_zero(w, zw, 0), nullptr, os));
  if (bias) {
    const int64_t F = os[1], P = r.size() / std::max<int64_t>(1, os[0] * F);
    for (int64_t i = 0; i < r.size(); ++i) r[i] += (*bias)[(i / P) % F];
  }
  return r;
}
/// QLinearConv's and QLinearMatMul's output from their sums: the scale and zero point of
/// output element i's channel (dim `axis` of the sums; b's or w's scale per channel or one).
template <class T>
Tensor<int64_t> requantize(const Tensor<int64_t>& acc, int axis, T sa, const Tensor<T>& sb, T sy, int64_t zy, DType to) {
  Tensor<int64_t> r(acc.shape());
  const Shape& s = acc.shape();
  int64_t inner = 1;
  for (size_t d = size_t(axis) + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t count = s.empty() ? 1 : s[size_t(axis)];
  std::vector<float> m(size_t(std::max<int64_t>(count, 1)));
  for (int64_t c = 0; c < count; ++c) m[size_t(c)] = ops::detail::requant_scale(double(sa), double(sb[sb.size() > 1 ? c : 0]), double(sy));
  parallel_for(r.size(), [&](int64_t i) { r[i] = ops::detail::requantize(acc[i], m[size_t(count > 1 ? (i / inner) % count : 0)], zy, to); },
               r.size() > 16384);
  return r;
}

/// GridSample with each output point's taps computed once for all its channels; the sums
/// in the formula's order.
template <class E>
Tensor<E> grid_sample(const ops::GridSample& op, const Tensor<E>& x, const Tensor<E>& grid, const Shape& os) {
  const int64_t C = os[1], Ho = os[2], Wo = os[3], H = x.shape()[2], W = x.shape()[3];
  Tensor<E> out(os);
  const E* xp = x.data();
  const E* gp = grid.data();
  E* yp = out.data();
  parallel_for(os[0] * Ho, [&](int64_t ni) {
    const int64_t n = ni / Ho, i = ni % Ho;
    for (int64_t j = 0; j < Wo; ++j) {
      const E* g = gp + ((n * Ho + i) * Wo + j) * 2;
      std::array<int64_t, 4> yi{}, xi{};
      std::array<E, 4> yw{}, xw{};
      const int ny = op.taps<E>(op.source(float(g[1]), H), H, yi, yw), nx = op.taps<E>(op.source(float(g[0]), W), W, xi, xw);
      for (int64_t c = 0; c < C; ++c) {
        const E* plane = xp + (n * C + c) * H * W;
        E acc(0);
        for (int a = 0; a < ny; ++a) {
          if (yi[size_t(a)] < 0) continue;
          const E* row_p = plane + yi[size_t(a)] * W;
          E row(0);
          for (int b = 0; b < nx; ++b)
            if (xi[size_t(b)] >= 0) row += xw[size_t(b)] * row_p[xi[size_t(b)]];
          acc += yw[size_t(a)] * row;
        }
        yp[((n * C + c) * Ho + i) * Wo + j] = acc;
      }
    }
  }, os[0] * Ho * Wo * C > 16384);
  return out;
}

/// RoiAlign with each bin's sample points (ops::RoiAlign::samples) computed once for all its
/// channels; each channel's value pooled as the formula pools it.
template <class E>
Tensor<E> roi_align(const ops::RoiAlign& op, const Tensor<E>& x, const Tensor<E>& rois, const Tensor<int64_t>& batch, const Shape& os) {
  const int64_t R = os[0], C = os[1], Ho = os[2], Wo = os[3], N = x.shape()[0], H = x.shape()[2], W = x.shape()[3];
  Tensor<E> out(os);
  const E* xp = x.data();
  E* yp = out.data();
  for (int64_t r = 0; r < R; ++r)  // (checked before the parallel loop: errors name the roi)
    ops::RoiAlign::check_batch(batch[r], r, N);
  auto roi_of = [&](int64_t r) { return std::array<float, 4>{float(rois[r * 4]), float(rois[r * 4 + 1]), float(rois[r * 4 + 2]), float(rois[r * 4 + 3])}; };
  std::vector<typename ops::RoiAlign::Sample> probe;
  for (int64_t r = 0; r < R; ++r) op.samples(roi_of(r), r, 0, 0, H, W, probe);  // a region not finite or too large throws here
  parallel_for(R * Ho, [&](int64_t ri) {
    const int64_t r = ri / Ho, ph = ri % Ho, b = batch[r];
    const std::array<float, 4> roi = roi_of(r);
    std::vector<typename ops::RoiAlign::Sample> ss;
    for (int64_t pw = 0; pw < Wo; ++pw) {
      const int64_t count = op.samples(roi, r, ph, pw, H, W, ss);
      for (int64_t c = 0; c < C; ++c) {
        const E* plane = xp + (b * C + c) * H * W;
        yp[((r * C + c) * Ho + ph) * Wo + pw] = op.pool<E>(ss, count, [plane, W](int64_t y, int64_t xx) { return plane[y * W + xx]; });
      }
    }
  }, R * Ho * Wo * C > 4096);
  return out;
}

/// Det: each matrix copied out whole and eliminated as the formula eliminates it
/// (ops::Det::determinant), the matrices in parallel.
template <class E>
Tensor<E> det(const Tensor<E>& x, const Shape& os) {
  const int64_t m = x.shape().back(), count = numel(os);
  Tensor<E> out(os);
  const E* xp = x.data();
  parallel_for(count, [&](int64_t b) {
    std::vector<E> a(xp + b * m * m, xp + (b + 1) * m * m);
    out[b] = ops::Det::determinant(a, m);
  }, count * m * m * m > 16384);
  return out;
}

/// Softmax or LogSoftmax (O) over the contiguous dims [axis, end) (rows of length L with
/// stride `inner`).
template <class O, class T>
Tensor<T> softmax(const O& op, const Tensor<T>& x) {
  constexpr bool log = std::is_same_v<O, ops::LogSoftmax>;
  const Shape& s = x.shape();
  const int end = op.row_end(int(s.size()));
  int64_t outer = 1, len = 1, inner = 1;
  for (int i = 0; i < int(s.size()); ++i) (i < op.axis ? outer : i < end ? len : inner) *= s[size_t(i)];
  Tensor<T> out(s);
  parallel_for(outer * inner, [&](int64_t oi) {
    const int64_t o = oi / inner, in = oi % inner;
    const T* src = x.data() + o * len * inner + in;
    T* dst = out.data() + o * len * inner + in;
    T mx = -std::numeric_limits<T>::infinity();
    for (int64_t j = 0; j < len; ++j) mx = std::max(mx, src[j * inner]);
    T sum = 0;
    for (int64_t j = 0; j < len; ++j) sum += dst[j * inner] = std::exp(src[j * inner] - mx);
    if constexpr (log) {
      const T ls = std::log(sum);
      for (int64_t j = 0; j < len; ++j) dst[j * inner] = src[j * inner] - mx - ls;
    } else {
      for (int64_t j = 0; j < len; ++j) dst[j * inner] /= sum;
    }
  }, outer * inner * len > 16384);
  return out;
}

/// Hardmax: 1 at each row's first maximum (NaN never wins), 0 elsewhere; rows as Softmax's.
template <class T>
Tensor<T> hardmax(const ops::Hardmax& op, const Tensor<T>& x) {
  const Shape& s = x.shape();
  const int end = op.row_end(int(s.size()));
  int64_t outer = 1, len = 1, inner = 1;
  for (int i = 0; i < int(s.size()); ++i) (i < op.axis ? outer : i < end ? len : inner) *= s[size_t(i)];
  Tensor<T> out(s, T(0));
  parallel_for(outer * inner, [&](int64_t oi) {
    const int64_t base = (oi / inner) * len * inner + oi % inner;
    int64_t best = 0;
    for (int64_t j = 1; j < len; ++j) {
      const T v = x[base + j * inner], b = x[base + best * inner];
      if (v > b || (std::isnan(b) && !std::isnan(v))) best = j;
    }
    out[base + best * inner] = T(1);
  }, x.size() > 16384);
  return out;
}

/// LayerNormalization with optional Mean and InvStdDev outputs.
template <class T>
std::vector<Tensor<T>> layer_norm(const ops::LayerNormalization& op, const Tensor<T>& x, const Tensor<T>& scale,
                                  const Tensor<T>* bias, InTypes out_types) {
  const Shape& s = x.shape();
  Shape norm(s.begin() + op.axis, s.end());
  const int64_t len = numel(norm), rows = len ? x.size() / len : 0;
  // Scale and B broadcast to the normalised shape once.
  auto expand = [&](const Tensor<T>& t) {
    std::vector<T> v(static_cast<size_t>(len));
    Index i(int(norm.size()));
    for (int64_t j = 0; j < len; ++j, next_index(i, norm)) v[size_t(j)] = t.at(broadcast_index(i, t.shape()));
    return v;
  };
  const std::vector<T> sc = expand(scale), bi = bias ? expand(*bias) : std::vector<T>(size_t(len), T(0));
  std::vector<Tensor<T>> out{Tensor<T>(s)};
  for (size_t k = 1; k < out_types.size(); ++k) out.emplace_back(out_types[k].shape);
  parallel_for(rows, [&](int64_t r) {
    const T* src = x.data() + r * len;
    T* dst = out[0].data() + r * len;
    double sum = 0, sum2 = 0;
    for (int64_t j = 0; j < len; ++j) sum += src[j];
    const double mean = sum / double(len);
    for (int64_t j = 0; j < len; ++j) sum2 += (src[j] - mean) * (src[j] - mean);
    const double inv = 1.0 / std::sqrt(sum2 / double(len) + op.epsilon);
    for (int64_t j = 0; j < len; ++j) dst[j] = T((src[j] - mean) * inv) * sc[size_t(j)] + bi[size_t(j)];
    if (out.size() > 1) out[1][r] = T(mean);
    if (out.size() > 2) out[2][r] = T(inv);
  }, rows * len > 16384);
  return out;
}

/// InstanceNormalization: per (n, c), the spatial mean and variance (two passes).
template <class T>
Tensor<T> instance_norm(const ops::InstanceNormalization& op, const Tensor<T>& x, const Tensor<T>& scale, const Tensor<T>& bias) {
  const int64_t N = x.shape()[0], C = x.shape()[1], P = C && N ? x.size() / (N * C) : 0;
  Tensor<T> out(x.shape());
  parallel_for(N * C, [&](int64_t nc) {
    const int64_t c = nc % C;
    const T* src = x.data() + nc * P;
    T* dst = out.data() + nc * P;
    double sum = 0, sq = 0;
    for (int64_t p = 0; p < P; ++p) sum += double(src[p]);
    const double mean = sum / double(P);
    for (int64_t p = 0; p < P; ++p) sq += (double(src[p]) - mean) * (double(src[p]) - mean);
    const double inv = 1.0 / std::sqrt(sq / double(P) + double(op.epsilon));
    for (int64_t p = 0; p < P; ++p) dst[p] = T(double(scale[c]) * (double(src[p]) - mean) * inv + double(bias[c]));
  }, x.size() > 16384);
  return out;
}

/// Inference BatchNormalization as a per-channel affine map.
template <class T>
Tensor<T> batch_norm(const ops::BatchNormalization& op, std::span<const Tensor<T>> in) {
  const Tensor<T>& x = in[0];
  const int64_t N = x.shape()[0], C = x.shape()[1], P = C ? x.size() / (N * C) : 0;
  Tensor<T> out(x.shape());
  parallel_for(N * C, [&](int64_t nc) {
    const int64_t c = nc % C;
    const T a = T(in[1][c] / std::sqrt(double(in[4][c]) + op.epsilon));
    const T b = in[2][c] - a * in[3][c];
    const T* src = x.data() + nc * P;
    T* dst = out.data() + nc * P;
    for (int64_t p = 0; p < P; ++p) dst[p] = a * src[p] + b;
  }, x.size() > 16384);
  return out;
}

}  // namespace pet::kernels
