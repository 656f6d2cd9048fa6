// Convs on the cpu backend and their algorithm choice by measurement.
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

bool CpuExecutable::lower_op(NodeId n, const ops::Conv& c, const std::string& who) {
  const Node& node = g_.node(n);
  const TensorId x = node.inputs[0], w = node.inputs[1];
  const Shape &xs = g_.type(x).shape, &ws = g_.type(w).shape;
  const size_t k = xs.size() - 2;
  const ConvGeometry geo(c, ws);
  const auto &strides = geo.strides, &dil = geo.dil, &pl = geo.pl, &pr = geo.pr;
  const Shape& wdims = geo.wdims;
  PostOpChain chain;
  std::string text;
  // oneDNN 2.6's brgconv loses the bias in output rows that see only padding when a sum
  // post-op is fused (and crashes with an eltwise before the sum): such convs add their
  // residual in a separate step.
  const bool pad_rows = sees_only_padding(c, xs);
  auto [out, residual] = absorb_post_ops(node.outputs[0], chain, text, !pad_rows);
  if (pad_rows && text.find("residual") == std::string::npos) {
    NodeId a = sole_consumer(out);
    if (a >= 0 && std::holds_alternative<ops::Add>(g_.node(a).op)) text += " (residual add not fused: output rows that see only padding)";
  }
  const post_ops po = chain.build();
  primitive_attr attr;
  attr.set_post_ops(po);
  const Shape& ys = g_.type(node.outputs[0]).shape;
  const bool bias = node.inputs.size() == 3;
  auto make_with = [&](algorithm alg, const md_t& src_md, const md_t& dst_md) {
    auto d = bias ? convolution_forward::desc(prop_kind::forward_inference, alg, src_md, any_md(wdims), plain_md({ws[0]}), dst_md, strides,
                                              dil, pl, pr)
                  : convolution_forward::desc(prop_kind::forward_inference, alg, src_md, any_md(wdims), dst_md, strides, dil, pl, pr);
    return convolution_forward::primitive_desc(d, attr, eng_);
  };
  auto make = [&](algorithm alg) { return make_with(alg, any_md(xs), any_md(ys)); };
  auto pd = dnnl_call(who, [&] { return make(algorithm::convolution_direct); });
  // The candidates: oneDNN's direct conv on its blocked layouts or on plain ones, oneDNN's
  // Winograd (AVX-512 only in 2.x) and pet's Winograd F(4x4,3x3). A forced algorithm or
  // layout (CompileOptions) is taken where it applies; "auto" times the candidates (with the
  // reorders each needs at a layout boundary: a plain input from a graph input or a pet
  // copy, a plain consumer) and keeps the fastest, remembered per configuration.
  const std::string &want_alg = opt_.conv_algorithm, &want_layout = opt_.conv_layout;
  const bool plain_in = is_plain(int(x)), plain_out = wants_plain(out);
  auto boundary = [&](const md_t& src_md, const md_t& dst_md) {
    double t = 0;
    if (plain_in && src_md != plain_md(xs)) t += time_reorder(plain_md(xs), src_md);
    if (plain_out && dst_md != plain_md(ys)) t += time_reorder(dst_md, plain_md(ys));
    return t;
  };
  const bool measure = opt_.choose_algorithms && want_alg == "auto";
  std::vector<std::string> names;  // candidates in order of preference when nothing is timed
  if (want_alg == "winograd") names.push_back("pet-winograd");
  if (want_alg == "onednn-winograd") names.push_back("onednn-winograd");
  if (want_layout == "plain") names.push_back("plain");
  names.push_back("blocked");
  if (measure) {
    if (want_layout == "auto" && plain_in) names.push_back("plain");
    if (want_layout == "auto") names.push_back("onednn-winograd"), names.push_back("pet-winograd");
  }
  std::optional<convolution_forward::primitive_desc> plain_pd, owino_pd;
  std::shared_ptr<cpu::Winograd4x3> wg_cand;
  md_t xs8, ys8;  // nChw8c / nCdhw8c or nhwc / ndhwc, the layouts pet's transforms read and write
  const bool three_by_three = (k == 2 || (k == 3 && ws[2] <= 3)) && ws[k] == 3 && ws[k + 1] == 3;
  const bool unit = std::all_of(c.strides.begin(), c.strides.end(), [](int64_t v) { return v == 1; }) &&
                    std::all_of(c.dilations.begin(), c.dilations.end(), [](int64_t v) { return v == 1; });
  std::vector<cpu::Epilogue> epi;
  // Builds candidate `n` if it applies here; false if not.
  auto available = [&](const std::string& n) -> bool {
    if (n == "blocked") return true;
    if (n == "plain") {
      if (pd.src_desc() == plain_md(xs) && pd.dst_desc() == plain_md(ys)) return false;  // blocked is plain already
      try {
        plain_pd = make_with(algorithm::convolution_direct, plain_md(xs), plain_md(ys));
        return true;
      } catch (const dnnl::error&) {
        return false;  // no plain-layout implementation
      }
    }
    if (n == "onednn-winograd") {
      if (k != 2 || c.group != 1 || !three_by_three || !unit) return false;
      try {
        owino_pd = make(algorithm::convolution_winograd);
        return true;
      } catch (const dnnl::error&) {
        return false;  // no Winograd implementation for this CPU / shape
      }
    }
    if (n == "pet-winograd") {
      if (!three_by_three || c.group != 1 || !unit || !cpu::Winograd4x3::applies(ws[1], ws[0]) || !g_.tensor(w).is_constant() ||
          (bias && !g_.tensor(node.inputs[2]).is_constant()) || !cpu::epilogue_of(po, epi))
        return false;
      // Channels-last where the input is so (a 1x1 brgconv's output, as in DenseNet and
      // ResNet's bottlenecks): no reorder into the transforms' layout and none out of it for
      // the next such conv; 8-channel blocks otherwise.
      const auto last = k == 2 ? memory::format_tag::nhwc : memory::format_tag::ndhwc;
      cpu::WinogradShape sh;
      sh.channels_last = slots_[size_t(x)].md == md_t(dims_of(xs), dt::f32, last);
      const auto tag = sh.channels_last ? last : k == 2 ? memory::format_tag::nChw8c : memory::format_tag::nCdhw8c;
      xs8 = md_t(dims_of(xs), dt::f32, tag);
      ys8 = md_t(dims_of(ys), dt::f32, tag);
      sh.n = xs[0], sh.c = xs[1], sh.k = ws[0];
      sh.h = xs[k], sh.w = xs[k + 1];
      sh.pad_top = c.pads[k - 2], sh.pad_left = c.pads[k - 1], sh.pad_bottom = c.pads[2 * k - 2], sh.pad_right = c.pads[2 * k - 1];
      if (k == 3) sh.d = xs[2], sh.kd = ws[2], sh.pad_front = c.pads[0], sh.pad_back = c.pads[3];
      const float* bptr = bias ? std::get<Tensor<float>>(*g_.tensor(node.inputs[2]).value).data() : nullptr;
      wg_cand = std::make_shared<cpu::Winograd4x3>(eng_, sh, std::get<Tensor<float>>(*g_.tensor(w).value).data(), bptr, epi);
      return true;
    }
    return false;
  };
  std::vector<std::string> cands;
  for (const auto& n : names)
    if (std::find(cands.begin(), cands.end(), n) == cands.end() && available(n)) cands.push_back(n);
  const std::string cache_key = cat("cpu@", cpu_backend_version(), "|", num_threads(), "|", op_signature(node.op), "|", xs, wdims,
                                    ys, bias ? "b" : "", "|", text, "|", plain_in ? "plain-in" : "", plain_out ? "plain-out" : "");
  // The same conv at another layout boundary or with other fused ops: its choice is taken
  // where this one was never timed. The optimizer profiles each conv alone, between plain
  // tensors and without its activation (windows end at non-multilinear ops), and then
  // compiles whole programs where most convs sit between blocked ones with a ReLU fused:
  // timing all of CSRNet's convs again at batch 16 took 100 s, and with only the boundary
  // shared, compiling the original program once before its first trial in place still took
  // 16 s (every conv with its ReLU). Neither the reorders nor an element-wise epilogue
  // change the choice often; the optimizer times the whole program in place anyway. Except
  // transcendental activations (sigmoid, SiLU, tanh, GELU, ...): some oneDNN kernels apply
  // them element by element in reference code (its gemm conv took 8.3 ms for a SiLU that
  // brgconv fuses for free), so those stay in the key.
  std::string costly;
  for (const auto& e : chain.entries)
    if (!e.sum && e.alg != algorithm::eltwise_relu && e.alg != algorithm::eltwise_linear && e.alg != algorithm::eltwise_clip)
      costly += cat("+", int(e.alg));
  const std::string any_boundary_key = cat("cpu@", cpu_backend_version(), "|", num_threads(), "|", op_signature(node.op), "|", xs, wdims,
                                           ys, bias ? "b" : "", "|any-boundary-any-epilogue", costly);
  std::string decision = cands.front();
  std::optional<std::string> chosen;
  bool other_boundary = false;
  if (measure && cands.size() > 1) {
    chosen = AlgorithmCache::instance().get(opt_.algorithm_cache, cache_key);
    if (!chosen || std::find(cands.begin(), cands.end(), *chosen) == cands.end()) {
      chosen = AlgorithmCache::instance().get(opt_.algorithm_cache, any_boundary_key);
      other_boundary = chosen.has_value();
    }
    if (chosen && std::find(cands.begin(), cands.end(), *chosen) != cands.end()) {
      decision = *chosen;
    } else {
      other_boundary = false;
      chosen.reset();
      double best = 1e30;
      timings_clean_ = true;
      for (const auto& n : cands) {
        double t = n == "pet-winograd" ? time_winograd(*wg_cand, xs8, ys8, best) + boundary(xs8, ys8)
                   : n == "plain"      ? time_pd(*plain_pd, best)
                   : n == "onednn-winograd" ? time_pd(*owino_pd, best) + boundary(owino_pd->src_desc(), owino_pd->dst_desc())
                                            : time_pd(pd, best) + boundary(pd.src_desc(), pd.dst_desc());
        if (t < best) best = t, decision = n;
      }
      // A choice timed while the machine was busy is used, never kept (in memory it is, so
      // this process decides the same way for the same configuration).
      AlgorithmCache::instance().put(opt_.algorithm_cache, cache_key, decision, timings_clean_);
      AlgorithmCache::instance().put(opt_.algorithm_cache, any_boundary_key, decision, timings_clean_);
    }
  }
  std::string alg = "direct";
  std::shared_ptr<cpu::Winograd4x3> wg;
  if (decision == "plain") pd = *plain_pd;
  if (decision == "onednn-winograd") pd = *owino_pd, alg = "winograd";
  if (decision == "pet-winograd") {
    wg = wg_cand;
    alg = cat("pet winograd F(4x4,3x3)", k == 3 ? cat(" x ", ws[2], " depth taps") : "", ", ", wg->chunks(), "x", wg->chunk_tiles(), " tiles");
  }
  if (want_alg != "auto" && want_alg != "direct" && decision != "pet-winograd" && decision != "onednn-winograd")
    alg += cat(" (", want_alg, " does not apply)");
  if (chosen) alg += other_boundary ? " (cached choice, timed at another layout boundary or epilogue)" : " (cached choice)";
  if (measure && cands.size() > 1 && !chosen && !timings_clean_) alg += " (timed on a busy machine: used, not saved)";
  if (wg) {
    int xs_slot = as_layout(int(x), xs8, who);
    if (residual >= 0) prepare_residual(out, residual, ys8, who);
    else define(out, ys8);
    std::vector<int> reads{xs_slot};
    if (residual >= 0) reads.push_back(int(residual));
    Step& st = add_step(cat(who, ": ", alg, " (", layout_name(xs8), ")", text), reads, {int(out)});
    st.fn = [this, wg, xs_slot, o = int(out)] { wg->run(strm_, ptr(xs_slot), ptr(o)); };
    return true;
  }
  int xs_slot = as_layout(int(x), pd.src_desc(), who);
  int w_slot = int(w);
  if (c.group > 1) {
    // view the [F, C/G, K..] weight as [G, F/G, C/G, K..] first
    Slot v = slots_[size_t(w)];
    v.md = plain_md(wdims);
    v.type.shape = wdims;
    v.plain = -1;
    slots_.push_back(v);
    w_slot = int(slots_.size()) - 1;
  }
  w_slot = as_layout(w_slot, pd.weights_desc(), who);
  if (residual >= 0) prepare_residual(out, residual, pd.dst_desc(), who);
  else define(out, pd.dst_desc());
  std::vector<int> reads{xs_slot, w_slot};
  Step& st = add_step(cat(who, ": oneDNN conv ", pd.impl_info_str(), " (", alg, ", ", layout_name(pd.src_desc()), ")", text), reads, {int(out)});
  st.prim = primitive(convolution_forward(pd));
  st.args = {{DNNL_ARG_SRC, xs_slot}, {DNNL_ARG_WEIGHTS, w_slot}, {DNNL_ARG_DST, int(out)}};
  if (bias) {
    int b = as_layout(int(node.inputs[2]), plain_md({ws[0]}), who);
    st.args.push_back({DNNL_ARG_BIAS, b});
    st.reads.push_back(b);
  }
  if (residual >= 0) st.reads.push_back(int(residual));
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::ConvTranspose& c, const std::string& who) {
  const Node& node = g_.node(n);
  const TensorId x = node.inputs[0], w = node.inputs[1], y = node.outputs[0];
  const Shape &xs = g_.type(x).shape, &ws = g_.type(w).shape, &ys = g_.type(y).shape;
  const size_t k = xs.size() - 2;
  const int64_t G = c.group, Cg = ws[0] / G, Fg = ws[1];
  memory::dims strides(c.strides.begin(), c.strides.end()), dil, pl(c.pads.begin(), c.pads.begin() + long(k)), pr;
  for (int64_t d : c.dilations) dil.push_back(d - 1);
  // oneDNN relates the extents as out = (in - 1) s - pl - pr + (k - 1) d + 1: output padding
  // is a smaller (possibly negative) end pad.
  for (size_t i = 0; i < k; ++i) pr.push_back(c.pads[k + i] - c.output_padding[i]);
  // oneDNN's weights are [O, I, k...] (grouped: [G, O/G, I/G, k...]); ONNX's [I, O/G, k...]
  // is that with the two channel dims swapped: a strided view, reordered once.
  int64_t taps = 1;
  for (size_t i = 0; i < k; ++i) taps *= ws[2 + i];
  memory::dims wdims = G > 1 ? memory::dims{G, Fg, Cg} : memory::dims{Fg, Cg};
  memory::dims wstrides = G > 1 ? memory::dims{Cg * Fg * taps, taps, Fg * taps} : memory::dims{taps, Fg * taps};
  for (size_t i = 0; i < k; ++i) {
    int64_t inner = 1;
    for (size_t j = i + 1; j < k; ++j) inner *= ws[2 + j];
    wdims.push_back(ws[2 + i]);
    wstrides.push_back(inner);
  }
  // No post-ops and, where it can, no bias in the primitive: oneDNN 2.6 runs its
  // deconvolution as a backward-data conv and applies both in a reference pass after it
  // (measured standalone, AVX-512, [1,128,64,64] -> [1,64,128,128], 2x2 stride 2: 0.71 ms
  // alone, 1.78 with the bias, 11 with a fused ReLU). The bias is a oneDNN binary add in
  // the deconvolution's layout instead (0.04 ms), the activations their own steps.
  Shape bias_dims(ys.size(), 1);
  bias_dims[1] = ys[1];
  const md_t bias_plain = plain_md(bias_dims);
  auto make = [&](bool with_bias) {
    const md_t wmd(wdims, dt::f32, memory::format_tag::any);
    auto d = with_bias ? deconvolution_forward::desc(prop_kind::forward_inference, algorithm::deconvolution_direct, any_md(xs), wmd,
                                                     plain_md({ys[1]}), any_md(ys), strides, dil, pl, pr)
                       : deconvolution_forward::desc(prop_kind::forward_inference, algorithm::deconvolution_direct, any_md(xs), wmd,
                                                     any_md(ys), strides, dil, pl, pr);
    return deconvolution_forward::primitive_desc(d, eng_);
  };
  auto pd = dnnl_call(who, [&] { return make(false); });
  // The bias operand in the destination's layout: channel-blocked alike, padded by a reorder.
  std::optional<binary::primitive_desc> add_pd;
  md_t bias_md;
  if (node.inputs.size() == 3) {
    using tag = memory::format_tag;
    const md_t dst = pd.dst_desc();
    for (tag t : {tag::nCw16c, tag::nCw8c, tag::nChw16c, tag::nChw8c, tag::nCdhw16c, tag::nCdhw8c, tag::nwc, tag::nhwc, tag::ndhwc})
      if (md_t(dst.dims(), dt::f32, t, true) == dst) bias_md = md_t(bias_plain.dims(), dt::f32, t);
    if (dst == plain_md(ys)) bias_md = bias_plain;
    if (!bias_md.is_zero()) {
      add_pd = dnnl_call(who, [&] { return binary::primitive_desc(binary::desc(algorithm::binary_add, dst, bias_md, dst), eng_); });
      if (std::string(add_pd->impl_info_str()).rfind("ref", 0) == 0) add_pd.reset();
    }
    if (!add_pd) pd = dnnl_call(who, [&] { return make(true); });  // the primitive's own bias after all
  }
  int xs_slot = as_layout(int(x), pd.src_desc(), who);
  Slot v = slots_[size_t(plain_slot(int(w)))];
  v.md = md_t(wdims, dt::f32, wstrides);
  v.type.shape = Shape(wdims.begin(), wdims.end());
  v.plain = -1;
  slots_.push_back(v);
  const int w_slot = as_layout(int(slots_.size()) - 1, pd.weights_desc(), who);
  const int raw = add_pd ? new_slot(g_.type(y), pd.dst_desc()) : int(y);
  if (!add_pd) define(y, pd.dst_desc());
  Step& st = add_step(cat(who, ": oneDNN deconvolution ", pd.impl_info_str(), " (", layout_name(pd.src_desc()), ")"), {xs_slot, w_slot}, {raw});
  st.prim = primitive(deconvolution_forward(pd));
  st.args = {{DNNL_ARG_SRC, xs_slot}, {DNNL_ARG_WEIGHTS, w_slot}, {DNNL_ARG_DST, raw}};
  if (node.inputs.size() == 3 && !add_pd) {
    int b = as_layout(int(node.inputs[2]), plain_md({ys[1]}), who);
    st.args.push_back({DNNL_ARG_BIAS, b});
    st.reads.push_back(b);
  }
  if (add_pd) {
    Slot bv = slots_[size_t(plain_slot(int(node.inputs[2])))];
    bv.md = bias_plain;
    bv.type.shape = bias_dims;
    bv.plain = -1;
    slots_.push_back(bv);
    const int b = as_layout(int(slots_.size()) - 1, bias_md, who);
    define(y, add_pd->dst_desc());
    Step& bs = add_step(cat(who, ": its bias, oneDNN binary ", add_pd->impl_info_str()), {raw, b}, {int(y)});
    bs.prim = primitive(binary(*add_pd));
    bs.args = {{DNNL_ARG_SRC_0, raw}, {DNNL_ARG_SRC_1, b}, {DNNL_ARG_DST, int(y)}};
  }
  return true;
}

bool CpuExecutable::sees_only_padding(const ops::Conv& c, const Shape& xs) {
  const size_t k = xs.size() - 2;
  for (size_t i = 0; i < k; ++i) {
    const int64_t n = xs[2 + i], s = c.strides[i], d = c.dilations[i], pb = c.pads[i], kk = c.kernel_shape[i];
    const int64_t out = (n + pb + c.pads[i + k] - ((kk - 1) * d + 1)) / s + 1;
    for (int64_t o = 0; o < out; ++o) {
      bool any = false;
      for (int64_t r = 0; r < kk && !any; ++r) {
        const int64_t p = o * s - pb + r * d;
        any = p >= 0 && p < n;
      }
      if (!any) return true;
    }
  }
  return false;
}

bool CpuExecutable::wants_plain(TensorId t) const {
  if (is_output_.count(t)) return true;
  for (NodeId c : consumers_[size_t(t)]) {
    const Op& op = g_.node(c).op;
    if (std::holds_alternative<ops::RT>(op) || std::holds_alternative<ops::Transpose>(op) || std::holds_alternative<ops::Slice>(op) ||
        std::holds_alternative<ops::Split>(op) || std::holds_alternative<ops::Pad>(op) || std::holds_alternative<ops::Patch>(op) ||
        std::holds_alternative<ops::MatMul>(op) || std::holds_alternative<ops::Gemm>(op) || std::holds_alternative<ops::Reshape>(op) ||
        std::holds_alternative<ops::Flatten>(op))
      return true;
  }
  return false;
}

double CpuExecutable::time_reorder(const md_t& from, const md_t& to) {
  auto a = aligned_floats(from.get_size() / sizeof(float) + 1), b = aligned_floats(to.get_size() / sizeof(float) + 1);
  std::memset(a.get(), 0, from.get_size());
  memory ma(from, eng_, a.get()), mb(to, eng_, b.get());
  reorder r(ma, mb);
  return best_seconds([&] { r.execute(strm_, ma, mb); });
}

double CpuExecutable::time_winograd(cpu::Winograd4x3& wg, const md_t& src_md, const md_t& dst_md, double bound) {
  auto src = aligned_floats(src_md.get_size() / sizeof(float) + 1), dst = aligned_floats(dst_md.get_size() / sizeof(float) + 1);
  std::memset(src.get(), 0, src_md.get_size());
  std::memset(dst.get(), 0, dst_md.get_size());
  return best_seconds([&] { wg.run(strm_, src.get(), dst.get()); }, bound);
}

}  // namespace pet::backend::cpu_detail
