// MatMul and Gemm on the cpu backend (oneDNN matmul with bias, scales and post-ops).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "executable.hpp"
#include "algorithm_cache.hpp"
#include "copy.hpp"
#include "pet/core/parallel.hpp"
#include "pet/eval/interpreter.hpp"

namespace pet::backend::cpu_detail {

bool CpuExecutable::lower_matmul(NodeId n, TensorId a, TensorId b, md_t amd, md_t bmd, const Shape& ys, const std::string& who, float alpha,
                  std::optional<TensorId> bias_t, float beta, int fuse) {
  const Node& node = g_.node(n);
  const auto absorbed_before = absorbed_;
  PostOpChain chain;
  std::string text;
  // A following Add of a constant vector over the last dim becomes the matmul's bias.
  TensorId out = node.outputs[0];
  std::optional<int> bias_slot;
  md_t bias_md;
  const size_t r = ys.size();
  auto bias_dims = [&](const Shape& s) -> std::optional<memory::dims> {
    if (s.size() > r || !broadcasts_to(s, ys)) return std::nullopt;
    memory::dims d(r, 1);
    for (size_t i = 0; i < s.size(); ++i) d[r - s.size() + i] = s[i];
    for (size_t i = 0; i + 1 < r; ++i)
      if (d[i] != 1) return std::nullopt;
    return d;
  };
  if (bias_t) {
    // oneDNN computes scale * (A B + bias): a constant C becomes bias = beta * C / alpha.
    auto d = bias_dims(g_.type(*bias_t).shape);
    if (!d || (!g_.tensor(*bias_t).is_constant() && (alpha != 1.f || beta != 1.f))) return false;
    bias_md = md_t(*d, dt::f32, memory::format_tag::any);
    bias_slot = int(*bias_t);
    if (alpha != 1.f || beta != 1.f) {
      Slot sc = slots_[size_t(*bias_t)];
      const int64_t cnt = numel(sc.type.shape);
      sc.owned = aligned_floats(size_t(cnt));
      for (int64_t i = 0; i < cnt; ++i) sc.owned[size_t(i)] = ptr(int(*bias_t))[i] * beta / alpha;
      sc.plain = -1;
      slots_.push_back(sc);
      bias_slot = int(slots_.size()) - 1;
    }
  } else if (NodeId c = sole_consumer(out); c >= 0 && alpha == 1.f && std::holds_alternative<ops::Add>(g_.node(c).op)) {
    // (with alpha != 1 oneDNN would scale the bias too: alpha (A B + bias))
    const Node& add = g_.node(c);
    TensorId other = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
    if (g_.tensor(other).is_constant() && g_.type(add.outputs[0]).shape == g_.type(out).shape)
      if (auto d = bias_dims(g_.type(other).shape)) {
        bias_md = md_t(*d, dt::f32, memory::format_tag::any);
        bias_slot = int(other);
        absorbed_.insert(c);
        text += " + bias";
        out = add.outputs[0];
      }
  }
  // A constant bias of one value for every column (a scalar added after the matmul: log(x W +
  // eps) in a log-mel front end) is written out over N: oneDNN's gemm takes a bias along N and
  // ran its reference kernel for one broadcast over all dims, 2000 times slower ([2998, 201] x
  // [201, 80] + 1e-6: 525 against 0.25 ms here).
  if (bias_slot && ys.back() > 1 && bias_md.dims().back() == 1 && slots_[size_t(*bias_slot)].owned) {
    Slot sc = slots_[size_t(*bias_slot)];
    const float v = ptr(*bias_slot)[0];
    memory::dims d(r, 1);
    d.back() = ys.back();
    sc.type.shape = Shape(d.begin(), d.end());
    sc.owned = aligned_floats(size_t(ys.back()));
    std::fill_n(sc.owned.get(), ys.back(), v);
    sc.md = plain_md(sc.type.shape);
    sc.plain = -1;
    slots_.push_back(sc);
    bias_slot = int(slots_.size()) - 1;
    bias_md = md_t(d, dt::f32, memory::format_tag::any);
  }
  TensorId residual = -1;
  if (fuse > 0) std::tie(out, residual) = absorb_post_ops(out, chain, text, fuse > 1);
  Shape bias_shape;
  if (bias_slot) {
    memory::dims bd = bias_md.dims();
    bias_shape.assign(bd.begin(), bd.end());
  }
  primitive_attr attr;
  attr.set_post_ops(chain.build());
  if (alpha != 1.f) attr.set_output_scales(0, {alpha});
  const bool bconst = g_.tensor(b).is_constant();
  // Constant right operands are stored once in a row-major layout whose rows are padded by
  // 64 bytes: with rows a multiple of 4 KiB apart (N = 3072 floats, BERT's FFN) the jit gemm
  // ran at half speed here (measured: 75 vs 120-150 GFLOP/s for 128x768x3072).
  md_t wmd = bmd;
  if (bconst) {
    memory::dims d = bmd.dims(), st(d.size());
    const int64_t ld = d.back() + (d.back() >= 64 ? 16 : 0);
    int64_t acc = ld * d[d.size() - 2];
    st[d.size() - 1] = 1;
    st[d.size() - 2] = ld;
    for (int i = int(d.size()) - 3; i >= 0; --i) st[size_t(i)] = acc, acc *= d[size_t(i)];
    wmd = md_t(d, dt::f32, st);
  }
  auto pd = dnnl_call(who, [&] {
    auto d = bias_slot ? matmul::desc(amd, wmd, plain_md(bias_shape), plain_md(ys)) : matmul::desc(amd, wmd, plain_md(ys));
    return matmul::primitive_desc(d, attr, eng_);
  });
  if (fuse > 0 && !chain.entries.empty() && std::string_view(pd.impl_info_str()).substr(0, 3) == "ref") {
    absorbed_ = absorbed_before;  // the post-ops stay separate steps
    return lower_matmul(n, a, b, amd, bmd, ys, who, alpha, bias_t, beta, chain.has_sum() ? 1 : 0);
  }
  // A few rows (a vector times a matrix: decoding one token, a recurrent step): oneDNN's own
  // weight layout (brgemm's blocked one, where the CPU has it) timed against the padded rows.
  // Measured here (AVX-512, 2 threads) it was 10-30 % faster at up to 4 rows (1 x 1024 x 1024:
  // 22 vs 32 us) and level from 16; on AVX2 oneDNN may pick a plain layout that the padding
  // exists to avoid, so the choice is timed, not assumed.
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < r; ++i) rows *= ys[i];
  if (bconst && opt_.choose_algorithms && rows <= 16) {
    try {
      const md_t wany(bmd.dims(), dt::f32, memory::format_tag::any);
      auto d = bias_slot ? matmul::desc(amd, wany, plain_md(bias_shape), plain_md(ys)) : matmul::desc(amd, wany, plain_md(ys));
      matmul::primitive_desc own(d, attr, eng_);
      if (std::string_view(own.impl_info_str()).substr(0, 3) != "ref" && !(own.weights_desc() == pd.weights_desc())) {
        const std::string key = cat("cpu@", cpu_backend_version(), "|", num_threads(), "|matmul-weights|", dims_of(g_.type(a).shape), amd.dims(),
                                    bmd.dims(), ys, bias_slot ? "b" : "", "|", text);
        std::optional<std::string> chosen = AlgorithmCache::instance().get(opt_.algorithm_cache, key);
        if (!chosen) {
          timings_clean_ = true;
          const double padded = time_pd(pd), blocked = time_pd(own, padded);
          chosen = blocked < padded ? "oneDNN's layout" : "padded rows";
          AlgorithmCache::instance().put(opt_.algorithm_cache, key, *chosen, timings_clean_);
        }
        if (*chosen == "oneDNN's layout") pd = own, text += " (weights in oneDNN's layout: timed faster for a few rows)";
      }
    } catch (const dnnl::error&) {
      // no other implementation: the padded rows
    }
  }
  int as = plain_slot(int(a));
  int bs = plain_slot(int(b));
  // view the plain operands with the (possibly transposed or rank-padded) descriptors
  auto view = [&](int s, const md_t& md) {
    Slot v = slots_[size_t(s)];
    v.md = md;
    v.plain = -1;
    slots_.push_back(v);
    return int(slots_.size()) - 1;
  };
  int av = view(as, amd);
  int bv = view(bs, bmd);
  if (bconst) bv = as_layout(bv, pd.weights_desc(), who);
  if (residual >= 0) prepare_residual(out, residual, plain_md(g_.type(out).shape), who);
  else define(out, plain_md(g_.type(out).shape));
  Step& st = add_step(cat(who, ": oneDNN matmul ", pd.impl_info_str(), text), {av, bv}, {int(out)});
  if (residual >= 0) st.reads.push_back(int(residual));
  st.prim = primitive(matmul(pd));
  // the output's md for the primitive has the matmul's rank
  int ov = int(out);
  if (g_.type(out).shape != ys) ov = reshaped(int(out), ys);
  st.args = {{DNNL_ARG_SRC, av}, {DNNL_ARG_WEIGHTS, bv}, {DNNL_ARG_DST, ov}};
  if (bias_slot) {
    int bb = view(*bias_slot, plain_md(bias_shape));
    st.args.push_back({DNNL_ARG_BIAS, bb});
    st.reads.push_back(bb);
  }
  return true;
}

Shape CpuExecutable::with_rank(const Shape& s, size_t r) {
  Shape o(r - s.size(), 1);
  o.insert(o.end(), s.begin(), s.end());
  return o;
}

bool CpuExecutable::lower_op(NodeId n, const ops::MatMul&, const std::string& who) {
  const Node& node = g_.node(n);
  Shape a = g_.type(node.inputs[0]).shape, b = g_.type(node.inputs[1]).shape;
  if (a.size() == 1) a = {1, a[0]};
  if (b.size() == 1) b = {b[0], 1};
  if (b.size() == 2 && a.size() > 2) {
    // A [.., M, K] x B [K, N]: A's leading dims are rows too (one GEMM, not a batch of GEMVs).
    int64_t rows = numel(a) / a.back();
    return lower_matmul(n, node.inputs[0], node.inputs[1], plain_md({rows, a.back()}), plain_md(b), {rows, b[1]},
                        cat(who, " ", g_.type(node.inputs[0]).shape, "x", b), 1.f, std::nullopt, 1.f);
  }
  const size_t r = std::max(a.size(), b.size());
  a = with_rank(a, r);
  b = with_rank(b, r);
  Shape ys(r);
  for (size_t i = 0; i + 2 < r; ++i) ys[i] = std::max(a[i], b[i]);
  ys[r - 2] = a[r - 2];
  ys[r - 1] = b[r - 1];
  if (r > 12) return false;
  return lower_matmul(n, node.inputs[0], node.inputs[1], plain_md(a), plain_md(b), ys, cat(who, " ", a, "x", b), 1.f, std::nullopt, 1.f);
}

bool CpuExecutable::lower_op(NodeId n, const ops::Gemm& gm, const std::string& who) {
  const Node& node = g_.node(n);
  if (gm.alpha == 0.f) return false;  // the bias is folded as beta * C / alpha
  const Shape &a = g_.type(node.inputs[0]).shape, &b = g_.type(node.inputs[1]).shape;
  const int64_t m = gm.trans_a ? a[1] : a[0], kk = gm.trans_a ? a[0] : a[1], nn = gm.trans_b ? b[0] : b[1];
  md_t amd = gm.trans_a ? md_t({m, kk}, dt::f32, memory::dims{1, m}) : plain_md({m, kk});
  md_t bmd = gm.trans_b ? md_t({kk, nn}, dt::f32, memory::dims{1, kk}) : plain_md({kk, nn});
  std::optional<TensorId> c;
  if (node.inputs.size() == 3) c = node.inputs[2];
  return lower_matmul(n, node.inputs[0], node.inputs[1], amd, bmd, {m, nn}, who, gm.alpha, c, gm.beta);
}

}  // namespace pet::backend::cpu_detail
