#pragma once
/// Matrix products.
#include <array>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

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

  int64_t flops(InTypes in, InTypes out) const { return flop_mul(2, numel(out[0].shape), in[0].shape.back()); }
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
    return flop_mul(2, numel(out[0].shape), trans_a ? in[0].shape[0] : in[0].shape[1]);
  }
  bool operator==(const Gemm&) const = default;
};

/// ONNX Einsum: an equation over one or more inputs, "ij,jk->ik" (explicit output) or "ij,jk"
/// (implicit: the letters that occur once, in ASCII order, after any ellipsis dims). Letters
/// name dims; a letter repeated in one term takes the diagonal; "..." stands for the dims a
/// term's rank leaves over, right-aligned and broadcast (size 1) across terms as in numpy.
///   out[o] = sum over the labels not in the output of  prod_t in_t[labels of t]
/// infer() parses the equation for the input ranks into labels (0-51 letters, 52+ ellipsis
/// dims). The cpu backend lowers one- and two-input forms that map to ReduceSum, Transpose,
/// Reshape and MatMul (pass einsum-lowering); others run on the reference kernel.
struct Einsum {
  static constexpr std::string_view name = "Einsum";
  PET_ATTRS(equation);
  static constexpr bool multilinear = true;
  std::string equation;
  // Parsed by infer():
  std::vector<std::vector<int>> in_labels;  ///< per input, the label of each dim
  std::vector<int> out_labels;              ///< the label of each output dim
  std::vector<int64_t> label_size;          ///< per label, its (broadcast) extent
  std::vector<int> summed;                  ///< labels not in the output

  static constexpr int kEllipsis = 52;
  static int letter(char c) {
    if (c >= 'a' && c <= 'z') return c - 'a';
    if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
    return -1;
  }
  static char letter_char(int l) { return char(l < 26 ? 'a' + l : 'A' + (l - 26)); }

  Types infer(InTypes in) {
    using namespace pet::detail;
    if (in.empty()) throw InvalidInput("Einsum needs at least one input");
    for (size_t i = 0; i < in.size(); ++i) expect_float(in, i, cat("input ", i));
    std::string eq;
    for (char c : equation)
      if (c != ' ') eq += c;
    const size_t arrow = eq.find("->");
    const std::string lhs = eq.substr(0, arrow);
    std::vector<std::string> terms(1);
    for (char c : lhs) {
      if (c == ',') terms.emplace_back();
      else terms.back() += c;
    }
    if (terms.size() != in.size())
      throw InvalidInput(cat("equation '", equation, "' has ", terms.size(), " input terms for ", in.size(), " inputs"));
    // One term: its letters (-2 for "...") checked; ell_rank its ellipsis dims.
    auto parse = [&](const std::string& t, std::string_view where) {
      std::vector<int> r;
      for (size_t i = 0; i < t.size(); ++i) {
        if (t.compare(i, 3, "...") == 0) {
          if (std::find(r.begin(), r.end(), -2) != r.end()) throw InvalidInput(cat("equation '", equation, "': ", where, " has two ellipses"));
          r.push_back(-2);
          i += 2;
        } else if (letter(t[i]) >= 0) {
          r.push_back(letter(t[i]));
        } else {
          throw InvalidInput(cat("equation '", equation, "': '", t[i], "' in ", where, " is not a letter, ',', '->' or '...'"));
        }
      }
      return r;
    };
    int ell = 0;
    std::vector<std::vector<int>> raw;
    std::vector<int> ell_rank(in.size(), 0);
    for (size_t k = 0; k < terms.size(); ++k) {
      raw.push_back(parse(terms[k], cat("input term ", k)));
      const bool has = std::find(raw[k].begin(), raw[k].end(), -2) != raw[k].end();
      const int letters = int(raw[k].size()) - has, rank = int(in[k].shape.size());
      if (has ? rank < letters : rank != letters)
        throw InvalidInput(cat("equation '", equation, "': term '", terms[k], "' does not fit input ", k, " of rank ", rank));
      ell_rank[k] = has ? rank - letters : 0;
      ell = std::max(ell, ell_rank[k]);
    }
    label_size.assign(size_t(kEllipsis + ell), -1);
    std::vector<int> count(label_size.size(), 0);
    in_labels.assign(in.size(), {});
    for (size_t k = 0; k < raw.size(); ++k) {
      const Shape& s = in[k].shape;
      for (int l : raw[k]) {
        if (l == -2) {
          for (int e = ell - ell_rank[k]; e < ell; ++e) in_labels[k].push_back(kEllipsis + e);
        } else {
          in_labels[k].push_back(l);
        }
      }
      for (size_t d = 0; d < s.size(); ++d) {
        const int l = in_labels[k][d];
        ++count[size_t(l)];
        // The first extent seen; an ellipsis dim of extent 1 broadcasts to (or from) any other.
        int64_t& z = label_size[size_t(l)];
        const bool ellipsis = l >= kEllipsis;
        if (z == -1 || (ellipsis && z == 1)) z = s[d];
        if (s[d] != z && !(ellipsis && s[d] == 1))
          throw InvalidInput(cat("equation '", equation, "': dim ", d, " of input ", k, " ", s, " has size ", s[d],
                                 " but the same label has size ", z, " elsewhere"));
      }
    }
    out_labels.clear();
    if (arrow == std::string::npos) {
      for (int e = 0; e < ell; ++e) out_labels.push_back(kEllipsis + e);
      std::vector<int> once;
      for (int l = 0; l < kEllipsis; ++l)
        if (count[size_t(l)] == 1) once.push_back(l);
      // ASCII order: A-Z (ids 26..51) before a-z (0..25).
      std::sort(once.begin(), once.end(), [](int a, int b) { return letter_char(a) < letter_char(b); });
      out_labels.insert(out_labels.end(), once.begin(), once.end());
    } else {
      for (int l : parse(eq.substr(arrow + 2), "the output")) {
        if (l == -2) {
          for (int e = 0; e < ell; ++e) out_labels.push_back(kEllipsis + e);
          continue;
        }
        if (count[size_t(l)] == 0)
          throw InvalidInput(cat("equation '", equation, "': output label '", letter_char(l), "' is in no input term"));
        if (std::find(out_labels.begin(), out_labels.end(), l) != out_labels.end())
          throw InvalidInput(cat("equation '", equation, "': output label '", letter_char(l), "' is repeated"));
        out_labels.push_back(l);
      }
    }
    if (out_labels.size() > size_t(kMaxRank)) throw Unsupported(cat("equation '", equation, "': output of rank ", out_labels.size()));
    summed.clear();
    for (int l = 0; l < int(label_size.size()); ++l)
      if (count[size_t(l)] && std::find(out_labels.begin(), out_labels.end(), l) == out_labels.end()) summed.push_back(l);
    Shape out;
    for (int l : out_labels) out.push_back(label_size[size_t(l)]);
    return {{DType::Float32, out}};
  }

  template <class E, class R>
  E at(const Index& o, const R& read) const {
    std::array<int64_t, 64> val{};
    for (int d = 0; d < o.rank; ++d) val[size_t(out_labels[size_t(d)])] = o[d];
    E acc(0);
    for (;;) {
      E p(1);
      for (size_t t = 0; t < in_labels.size(); ++t) {
        const Shape& s = read.shape(int(t));
        Index xi(int(s.size()));
        for (size_t d = 0; d < s.size(); ++d) xi[int(d)] = s[d] == 1 ? 0 : val[size_t(in_labels[t][d])];
        p = p * read(int(t), xi);
      }
      acc += p;
      size_t k = 0;  // next summed position (odometer)
      for (; k < summed.size(); ++k) {
        int64_t& v = val[size_t(summed[k])];
        if (++v < label_size[size_t(summed[k])]) break;
        v = 0;
      }
      if (k == summed.size()) break;
    }
    return acc;
  }

  /// For input k, the output dim each of its dims maps to (-1: summed or broadcast).
  std::vector<int> operand_dims(size_t k, const Shape& s) const {
    std::vector<int> m(s.size(), -1);
    for (size_t d = 0; d < s.size(); ++d) {
      auto it = std::find(out_labels.begin(), out_labels.end(), in_labels[k][d]);
      if (it != out_labels.end() && !(s[d] == 1 && label_size[size_t(in_labels[k][d])] != 1)) m[d] = int(it - out_labels.begin());
    }
    return m;
  }
  Splits propagate(InSplits in, InTypes it, InTypes ot) const {
    SplitPoints s = SplitPoints::none(ot[0].shape);
    for (size_t k = 0; k < it.size(); ++k) {
      auto m = operand_dims(k, it[k].shape);
      for (size_t d = 0; d < m.size(); ++d)
        if (m[d] >= 0) s.dims[size_t(m[d])] = cuts::unite(s.dims[size_t(m[d])], in[k].dims[d], ot[0].shape[size_t(m[d])]);
    }
    return {s};
  }
  std::vector<Box> input_boxes(const Box& out, int, InTypes it, InTypes) const {
    std::vector<Box> r;
    for (size_t k = 0; k < it.size(); ++k) r.push_back(select_dims(out, it[k].shape, operand_dims(k, it[k].shape)));
    return r;
  }
  int64_t flops(InTypes in, InTypes out) const {
    int64_t inner = 1;
    for (int l : summed) inner = flop_mul(inner, label_size[size_t(l)]);
    return flop_mul(2, numel(out[0].shape), inner, int64_t(std::max<size_t>(1, in.size() - 1)));
  }
  /// The parsed members follow from the equation and the input types.
  bool operator==(const Einsum& o) const { return equation == o.equation; }
};

/// Det (opset 11): out[b] = det(X[b]) of each square matrix X[b] of X [..., M, M] (out [...];
/// det of 0 x 0 is 1). Gaussian elimination with partial pivoting (the largest |pivot| of the
/// column, the first among equals), in the element type, as LU factorisation computes it; a
/// zero column gives 0. Not over a finite field (pivoting needs an order).
struct Det {
  static constexpr std::string_view name = "Det";
  PET_ATTRS();
  static constexpr bool multilinear = false;

  Types infer(InTypes in) const {
    pet::detail::expect_arity(in, 1, 1);
    pet::detail::expect_float(in, 0, "input X");
    const Shape& x = in[0].shape;
    if (x.size() < 2 || x[x.size() - 1] != x[x.size() - 2])
      throw InvalidInput(cat("X ", x, " must hold square matrices in its last two dims ([..., M, M])"));
    return {{DType::Float32, Shape(x.begin(), x.end() - 2)}};
  }
  /// The determinant of the m x m row-major matrix a (overwritten by its elimination).
  template <class E>
  static E determinant(std::vector<E>& a, int64_t m) {
    E det(1);
    for (int64_t k = 0; k < m; ++k) {
      int64_t p = k;
      for (int64_t i = k + 1; i < m; ++i)
        if (std::abs(a[size_t(i * m + k)]) > std::abs(a[size_t(p * m + k)])) p = i;
      const E piv = a[size_t(p * m + k)];
      if (piv == E(0)) return E(0);
      if (p != k) {
        for (int64_t j = k; j < m; ++j) std::swap(a[size_t(p * m + j)], a[size_t(k * m + j)]);
        det = -det;
      }
      det *= piv;
      for (int64_t i = k + 1; i < m; ++i) {
        const E f = a[size_t(i * m + k)] / piv;
        if (f == E(0)) continue;
        for (int64_t j = k + 1; j < m; ++j) a[size_t(i * m + j)] -= f * a[size_t(k * m + j)];
      }
    }
    return det;
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    if constexpr (!detail::is_real_v<E>) {
      pet::detail::require_ordered<E>(name);
      throw Unsupported("Det takes float input only");
    } else {
      const Shape& x = read.shape(0);
      const int r = int(x.size());
      const int64_t m = x[size_t(r - 1)];
      Index xi(r);
      for (int d = 0; d < r - 2; ++d) xi[d] = o[d];
      std::vector<E> a(size_t(m * m));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < m; ++j) {
          xi[r - 2] = i, xi[r - 1] = j;
          a[size_t(i * m + j)] = read(0, xi);
        }
      return determinant(a, m);
    }
  }
  int64_t flops(InTypes in, InTypes out) const {
    const int64_t m = in[0].shape.back();
    return flop_mul(numel(out[0].shape), flop_mul(2, m, m, m) / 3 + 1);
  }
  bool operator==(const Det&) const = default;
};

}  // namespace pet::ops
