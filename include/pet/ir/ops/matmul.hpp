#pragma once
/// Matrix products.
#include "pet/ir/op_base.hpp"

namespace pet::ops {

/// numpy matmul: A [..., M, K] x B [..., K, N] -> [bcast(...), M, N]; a 1-D A is [1, K] with
/// M dropped from the output, a 1-D B is [K, 1] with N dropped.
///   out[b, m, n] = sum_k A[bcast_A(b), m, k] * B[bcast_B(b), k, n]
struct MatMul {
  static constexpr std::string_view name = "MatMul";
  PET_ATTRS();
  static constexpr bool multilinear = true;

  Types infer(InTypes in) const {
    using namespace pet::detail;
    expect_arity(in, 2, 2);
    expect_float(in, 0, "input A");
    expect_float(in, 1, "input B");
    const Shape &a = in[0].shape, &b = in[1].shape;
    if (a.empty() || b.empty()) throw InvalidInput(cat("inputs must have rank >= 1, got ", a, " and ", b));
    int64_t ka = a.back(), kb = b.size() == 1 ? b[0] : b[b.size() - 2];
    if (ka != kb)
      throw InvalidInput(cat("A ", a, " has ", ka, " columns but B ", b, " has ", kb, " rows"));
    Shape ab = a.size() > 2 ? Shape(a.begin(), a.end() - 2) : Shape{};
    Shape bb = b.size() > 2 ? Shape(b.begin(), b.end() - 2) : Shape{};
    Shape out = broadcast_shapes(ab, bb, "batch dimensions");
    if (a.size() >= 2) out.push_back(a[a.size() - 2]);
    if (b.size() >= 2) out.push_back(b.back());
    return {{DType::Float32, out}};
  }

  /// Row m, column n and batch prefix of output index o, and where they live in A and B.
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    const Shape &a = read.shape(0), &b = read.shape(1);
    const int ra = int(a.size()), rb = int(b.size());
    const int batch = o.rank - (ra >= 2) - (rb >= 2);
    Index ai(ra), bi(rb);
    for (int i = 0; i < ra - 2; ++i) {
      int oi = batch - (ra - 2) + i;
      ai[i] = a[i] == 1 ? 0 : o[oi];
    }
    for (int i = 0; i < rb - 2; ++i) {
      int oi = batch - (rb - 2) + i;
      bi[i] = b[i] == 1 ? 0 : o[oi];
    }
    if (ra >= 2) ai[ra - 2] = o[batch];
    if (rb >= 2) bi[rb - 1] = o[o.rank - 1];
    const int64_t kdim = a.back();
    E acc(0);
    for (int64_t k = 0; k < kdim; ++k) {
      ai[ra - 1] = k;
      bi[rb >= 2 ? rb - 2 : 0] = k;
      acc += read(0, ai) * read(1, bi);
    }
    return acc;
  }

  /// Where each output dim comes from: for operand `which` (0 = A, 1 = B), the operand dim
  /// that output dim d maps to, or -1.
  static std::vector<int> operand_dims(const Shape& a, const Shape& b, size_t out_rank, int which) {
    const Shape& s = which == 0 ? a : b;
    const int r = int(s.size()), ro = int(out_rank);
    const int batch = ro - (a.size() >= 2) - (b.size() >= 2);
    std::vector<int> m(out_rank, -1);
    for (int i = 0; i < r - 2; ++i)
      if (s[size_t(i)] != 1) m[size_t(batch - (r - 2) + i)] = i;
    if (which == 0 && r >= 2) m[size_t(batch)] = r - 2;
    if (which == 1 && r >= 2) m[size_t(ro - 1)] = r - 1;
    return m;
  }
  Splits propagate(InSplits in, InTypes it, InTypes ot) const {
    SplitPoints s = SplitPoints::none(ot[0].shape);
    for (int w = 0; w < 2; ++w) {
      auto m = operand_dims(it[0].shape, it[1].shape, ot[0].shape.size(), w);
      for (size_t d = 0; d < m.size(); ++d)
        if (m[d] >= 0) s.dims[d] = cuts::unite(s.dims[d], in[size_t(w)].dims[size_t(m[d])], ot[0].shape[d]);
    }
    return {s};
  }
  std::vector<Box> input_boxes(const Box& out, int, InTypes it, InTypes ot) const {
    std::vector<Box> r;
    for (int w = 0; w < 2; ++w) {
      const Shape& s = it[size_t(w)].shape;
      auto m = operand_dims(it[0].shape, it[1].shape, ot[0].shape.size(), w);
      std::vector<int> inv(s.size(), -1);
      for (size_t d = 0; d < m.size(); ++d)
        if (m[d] >= 0) inv[size_t(m[d])] = int(d);
      r.push_back(select_dims(out, s, inv));
    }
    return r;
  }

  int64_t flops(InTypes in, InTypes out) const { return 2 * numel(out[0].shape) * in[0].shape.back(); }
  bool operator==(const MatMul&) const = default;
};

/// ONNX Gemm: out[m, n] = alpha * sum_k A'[m, k] * B'[k, n] + beta * C[bcast(m, n)],
/// A' = transA ? A^T : A, B' = transB ? B^T : B; C optional (unidirectional broadcast).
struct Gemm {
  static constexpr std::string_view name = "Gemm";
  PET_ATTRS(alpha, beta, trans_a, trans_b);
  static constexpr bool multilinear = true;
  float alpha = 1.0f, beta = 1.0f;
  bool trans_a = false, trans_b = false;

  Types infer(InTypes in) const {
    using namespace pet::detail;
    expect_arity(in, 2, 3);
    for (size_t i = 0; i < in.size(); ++i) expect_float(in, i, i == 0 ? "input A" : i == 1 ? "input B" : "input C");
    expect_rank(in, 0, 2, 2, "input A");
    expect_rank(in, 1, 2, 2, "input B");
    const Shape &a = in[0].shape, &b = in[1].shape;
    int64_t m = trans_a ? a[1] : a[0], ka = trans_a ? a[0] : a[1];
    int64_t kb = trans_b ? b[1] : b[0], n = trans_b ? b[0] : b[1];
    if (ka != kb)
      throw InvalidInput(cat("A", trans_a ? "^T" : "", " of shape ", a, " has ", ka, " columns but B",
                             trans_b ? "^T" : "", " of shape ", b, " has ", kb, " rows"));
    Shape out{m, n};
    if (in.size() == 3) {
      const Shape& c = in[2].shape;
      if (!broadcasts_to(c, out))
        throw InvalidInput(cat("C of shape ", c, " cannot be broadcast to [", m, ",", n, "]"));
    }
    return {{DType::Float32, out}};
  }

  template <class E, class R>
  E at(const Index& o, const R& read) const {
    const Shape& a = read.shape(0);
    const int64_t kdim = trans_a ? a[0] : a[1];
    E acc(0);
    for (int64_t k = 0; k < kdim; ++k) {
      Index ai = trans_a ? Index{k, o[0]} : Index{o[0], k};
      Index bi = trans_b ? Index{o[1], k} : Index{k, o[1]};
      acc += read(0, ai) * read(1, bi);
    }
    E r = lift_scalar<E>(alpha, "Gemm alpha") * acc;
    if (read.count() == 3) r += lift_scalar<E>(beta, "Gemm beta") * read(2, broadcast_index(o, read.shape(2)));
    return r;
  }

  Splits propagate(InSplits in, InTypes it, InTypes ot) const {
    const Shape& o = ot[0].shape;
    SplitPoints s = SplitPoints::none(o);
    s.dims[0] = in[0].dims[trans_a ? 1 : 0];
    s.dims[1] = in[1].dims[trans_b ? 0 : 1];
    if (in.size() == 3) cuts::add_broadcast(s.dims, o, it[2].shape, in[2].dims);
    return {s};
  }
  std::vector<Box> input_boxes(const Box& out, int, InTypes it, InTypes ot) const {
    std::vector<Box> r{select_dims(out, it[0].shape, trans_a ? std::vector<int>{-1, 0} : std::vector<int>{0, -1}),
                       select_dims(out, it[1].shape, trans_b ? std::vector<int>{1, -1} : std::vector<int>{-1, 1})};
    if (it.size() == 3) {
      const Shape& c = it[2].shape;
      std::vector<int> m(c.size(), -1);
      for (size_t d = 0; d < c.size(); ++d)
        if (c[d] != 1) m[d] = int(d + 2 - c.size());
      r.push_back(select_dims(out, c, m));
    }
    return r;
  }

  int64_t flops(InTypes in, InTypes out) const {
    return 2 * numel(out[0].shape) * (trans_a ? in[0].shape[0] : in[0].shape[1]);
  }
  bool operator==(const Gemm&) const = default;
};

}  // namespace pet::ops
