// ONNX's integer quantization ops on the cpu backend: DynamicQuantizeLinear, MatMulInteger,
// ConvInteger (ONNX Runtime's dynamic quantization) and QLinearMatMul, QLinearConv (its
// QOperator format).
//
// DynamicQuantizeLinear is one pet step: the input's range, the scale and zero point, the
// uint8 tensor (the op's formulas, float32). The four integer ops run on oneDNN's int8 conv
// and matmul with int32 results: the source is the int8 tensor with its zero point (constant,
// or the run-time scalar DynamicQuantizeLinear computed), the weight the constant int8 (or
// uint8) weight less its zero point, which must fit int8 (oneDNN's weights are s8). The int32
// sums are exact on VNNI. Without VNNI (lower_quant.cpp: oneDNN's pair sums saturate there),
// or with int8 kernels off, they run on oneDNN's f32 conv and matmul instead, source and weight
// less their zero points, which is exact where every partial sum stays an integer below 2^24
// (checked per output channel from the constant weight; where it fails, the reduction - a
// matmul's K, a conv's input channels - is cut into equal chunks that pass, whose sums are added
// in integers, else the weight is split in two halves that pass, which doubles the work).
// MatMulInteger and ConvInteger hand their int32 result on as host values;
// QLinearMatMul and QLinearConv requantize it in a pet step, the op's own formula
// (float(sum + bias) * m, m = (s_a * s_b) / s_y, clamped, rounded half to even, plus the zero
// point), into an int8 buffer that the next such op
// reads directly. Convs run channels-last, the int8 kernels' layout.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>

#include "executable.hpp"
#include "pet/core/parallel.hpp"
#include "quant_helpers.hpp"

namespace pet::backend::cpu_detail {

namespace {
memory::format_tag channels_last(size_t rank) {
  return rank == 3 ? memory::format_tag::nwc : rank == 4 ? memory::format_tag::nhwc : memory::format_tag::ndhwc;
}
/// An integer constant's values as int64, read where the graph holds them (a 1-byte weight is
/// not widened).
ConstInts int_value(const Graph& g, TensorId t) { return ConstInts(*g.tensor(t).value); }
ops::Conv conv_of(const Op& op) {
  if (const auto* c = std::get_if<ops::ConvInteger>(&op)) return c->conv();
  return std::get<ops::QLinearConv>(op).conv();
}
/// oneDNN's forward conv of channels-last `xs` into channels-last `ys` by a weight of geo's
/// dims, in the layout oneDNN picks.
convolution_forward::primitive_desc conv_desc(const engine& eng, const ConvGeometry& geo, const Shape& xs, const Shape& ys, dt src, dt wei, dt dst,
                                              const primitive_attr& attr = primitive_attr()) {
  const auto tag = channels_last(xs.size());
  return convolution_forward::primitive_desc(
      convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct, md_t(dims_of(xs), src, tag),
                                md_t(dims_of(geo.wdims), wei, memory::format_tag::any), md_t(dims_of(ys), dst, tag), geo.strides, geo.dil, geo.pl, geo.pr),
      attr, eng);
}
/// The f32 matmul of [rows, K] by [K, N] with K in `parts` equal chunks, as one batched
/// matmul: the source viewed as [parts, rows, K / parts] (strided, no copy), the weight as
/// [parts, K / parts, N], the sums written [rows, parts, N] (each row's chunks side by side,
/// rows `ld` floats apart).
matmul::primitive_desc parts_matmul(const engine& eng, int64_t rows, int64_t K, int64_t N, int64_t parts, int64_t ld) {
  const int64_t kp = K / parts;
  const md_t s(memory::dims{parts, rows, kp}, dt::f32, memory::dims{kp, K, 1});
  const md_t w(memory::dims{parts, kp, N}, dt::f32, memory::format_tag::any);
  const md_t d(memory::dims{parts, rows, N}, dt::f32, memory::dims{N, ld, 1});
  return matmul::primitive_desc(matmul::desc(s, w, d), eng);
}
/// Whether oneDNN has a kernel other than its reference one for that batched matmul.
bool has_parts_kernel(const engine& eng, int64_t rows, int64_t K, int64_t N, int64_t parts) {
  try {
    return std::string(parts_matmul(eng, rows, K, N, parts, parts * N).impl_info_str()).rfind("ref", 0) != 0;
  } catch (const dnnl::error&) {
    return false;
  }
}
}  // namespace

void CpuExecutable::ensure_host(TensorId t, const std::string& who) {
  if (!qdevice_.count(t) || !host_copied_.insert(t).second) return;
  const Shape shape = g_.type(t).shape;
  const bool is_signed = slots_[size_t(t)].md.data.data_type == dnnl_s8;
  const int src = as_layout(int(t), with_type(plain_md(shape), is_signed ? dt::s8 : dt::u8), who);
  Step& st = add_step(cat("  ", g_.tensor(t).name, ": int8 buffer to host values, for ", who), {src}, {});
  st.fn = [this, src, t, shape, code = ByteCode(is_signed)] {
    const uint8_t* x = reinterpret_cast<const uint8_t*>(ptr(src));
    int64_t* v = host_result(t, shape);
    for (int64_t i = 0, n = numel(shape); i < n; ++i) v[i] = int64_t(uint8_t(x[i] ^ code.flip)) - int64_t(code.offset);
  };
}

int CpuExecutable::int8_buffer(TensorId t, const std::string& who) {
  if (qdevice_.count(t)) return int(t);
  const Shape& shape = g_.type(t).shape;
  const md_t md = with_type(plain_md(shape), g_.type(t).dtype == DType::Int8 ? dt::s8 : dt::u8);
  if (g_.tensor(t).is_constant())  // an int8 or uint8 constant is held one byte an element: its bytes as they are
    return std::visit([&](const auto& v) {
      PET_CHECK(sizeof(v[0]) == 1, "int8 constant '", g_.tensor(t).name, "' is not held one byte an element");
      return int8_const(md, v.data(), size_t(v.size()), g_.type(t));
    }, *g_.tensor(t).value);
  const int r = new_slot(g_.type(t), md);
  Step& st = add_step(cat("  ", g_.tensor(t).name, ": host values to an int8 buffer, for ", who), {int(t)}, {r});
  st.fn = [this, t, r] {
    const auto& v = host_ints(int(t));
    uint8_t* o = reinterpret_cast<uint8_t*>(ptr(r));
    for (int64_t i = 0; i < v.size(); ++i) o[i] = uint8_t(v[i]);
  };
  return r;
}

void CpuExecutable::lower_dynamic_quantize(NodeId n, const std::string& who) {
  const Node& node = g_.node(n);
  const TensorId x = node.inputs[0], y = node.outputs[0], ys = node.outputs[1], yz = node.outputs[2];
  // element-wise but for the range: on the source's own layout where that holds every
  // element once and nothing else (a conv's channels-last result: the int8 conv reading y then
  // needs no reorder)
  const int src = dense(slots_[size_t(x)].md) ? int(x) : plain_slot(int(x));
  define(y, with_type(slots_[size_t(src)].md, dt::u8));
  qdevice_.insert(y);
  define(ys, plain_md(Shape{}));
  const int64_t total = numel(g_.type(x).shape);
  Step& st = add_step(cat(who, ": range, scale and uint8 tensor in one pet step (", layout_name(slots_[size_t(src)].md), ")"), {src}, {int(y), int(ys)});
  st.fn = [this, src, y = int(y), ys = int(ys), yz, total] {
    const float* xp = ptr(src);
    // the range: NaN compares false and is skipped, as the op's range skips it; 16 lanes per
    // chunk so that it vectorises (the comparisons are minps and maxps exactly)
    float lo = INFINITY, hi = -INFINITY;
    std::mutex mu;
    parallel_chunks(total, 65536, [&](int64_t b, int64_t e) {
      float l[16], h[16];
      for (int j = 0; j < 16; ++j) l[j] = INFINITY, h[j] = -INFINITY;
      int64_t i = b;
      for (; i + 16 <= e; i += 16)
        for (int j = 0; j < 16; ++j) {
          const float v = xp[i + j];
          l[j] = v < l[j] ? v : l[j];
          h[j] = v > h[j] ? v : h[j];
        }
      for (; i < e; ++i) l[0] = xp[i] < l[0] ? xp[i] : l[0], h[0] = xp[i] > h[0] ? xp[i] : h[0];
      std::lock_guard<std::mutex> g(mu);
      for (int j = 0; j < 16; ++j) lo = l[j] < lo ? l[j] : lo, hi = h[j] > hi ? h[j] : hi;
    });
    const auto p = ops::DynamicQuantizeLinear::params(lo, hi);
    *ptr(ys) = p.scale;
    slots_[size_t(yz)].host = Tensor<int64_t>(Shape{}, p.zero);
    uint8_t* out = reinterpret_cast<uint8_t*>(ptr(y));
    const float z = float(p.zero), s = p.scale;
    parallel_chunks(total, 16384, [=](int64_t b, int64_t e) { quantize_block(xp + b, out + b, e - b, s, 0.f - z, 255.f - z, z); });
  };
}

bool CpuExecutable::lower_integer(NodeId n, const std::string& who) {
  const Node& node = g_.node(n);
  if (std::holds_alternative<ops::DynamicQuantizeLinear>(node.op)) {
    lower_dynamic_quantize(n, who);
    return true;
  }
  const bool qlinear = holds_any<ops::QLinearConv, ops::QLinearMatMul>(node.op);
  const bool is_conv = holds_any<ops::ConvInteger, ops::QLinearConv>(node.op);
  if (!qlinear && !holds_any<ops::MatMulInteger, ops::ConvInteger>(node.op)) return false;
  const bool fk = !int8_;  // f32 kernels: no VNNI here, or int8 kernels not allowed (see the header)
  // input positions: operand a (the source), its zero point, the weight b, its zero point
  int ia = 0, iza = 2, ib = 3, izb = 5;
  if (const auto* m = std::get_if<ops::MatMulInteger>(&node.op)) ib = 1, iza = m->a_zero ? 2 : -1, izb = m->b_zero_input();
  if (const auto* c = std::get_if<ops::ConvInteger>(&node.op)) ib = 1, iza = c->x_zero ? 2 : -1, izb = c->w_zero_input();
  const TensorId a = node.inputs[size_t(ia)], b = node.inputs[size_t(ib)], y = node.outputs[0];
  auto constant = [&](int i) { return i < 0 || g_.tensor(node.inputs[size_t(i)]).is_constant(); };
  const Shape &as = g_.type(a).shape, &bs = g_.type(b).shape, &ys = g_.type(y).shape;
  // A matmul of two activations (attention's, in QOperator models): B is oneDNN's int8 weight
  // at run time, an int8 B as it is, a uint8 B as B - 128 (its bytes with the top bit
  // flipped); its zero point's share, (base - z_b) * sum_k (a - z_a), is added per row by the
  // step after the kernel. A's batch dims must be the result's (B's may broadcast).
  const bool runtime_b = !is_conv && !constant(ib);
  if (!constant(izb) || (is_conv && !constant(ib))) return false;  // (a run-time conv weight: the reference kernel)
  if (runtime_b) {
    if (izb >= 0 && int_value(g_, node.inputs[size_t(izb)]).size() != 1) return false;
    if (as.size() < 2 || bs.size() < 2 || as.size() != ys.size() || !std::equal(as.begin(), as.end() - 2, ys.begin())) return false;
  } else if (!is_conv && bs.size() != 2) {
    return false;  // a constant weight: [rows, K] x [K, N]
  }
  const int64_t O = is_conv ? bs[0] : bs.back();  // output channels (conv) or columns (matmul)
  const bool b_u8 = g_.type(b).dtype == DType::UInt8;
  const int32_t rb_corr = runtime_b ? int32_t((b_u8 ? 128 : 0) - (izb >= 0 ? int_value(g_, node.inputs[size_t(izb)])[0] : 0)) : 0;
  // The weight less its zero point (per tensor, per output channel or per column), as int8
  // where every value fits. Where not (uint8 weights, whose zero point is rarely 128), the
  // kernel takes w - base (base 128 for uint8, 0 for int8: always int8) and one more output
  // channel of ones, whose sums S = sum (a - z_a) over each window let the step after it add
  // (base - z_w[c]) * S: sum (a - z_a)(w - z_w) exactly.
  const ConstInts bw = runtime_b ? ConstInts() : int_value(g_, b);
  const std::optional<ConstInts> bzv = izb >= 0 ? std::optional(int_value(g_, node.inputs[size_t(izb)])) : std::nullopt;
  const ConstInts* bz = bzv ? &*bzv : nullptr;
  const int64_t per_o = is_conv ? bw.size() / std::max<int64_t>(O, 1) : 1;
  auto wzero = [&](int64_t o) { return bz ? (*bz)[bz->size() > 1 ? o : 0] : 0; };
  auto out_channel = [&](int64_t i) { return is_conv ? i / per_o : i % O; };
  bool fits = true;  // (a run-time B, or f32 kernels: nothing to fold)
  for (int64_t i = 0; i < bw.size() && fits && !fk; ++i) fits = bw[i] - wzero(out_channel(i)) >= -128 && bw[i] - wzero(out_channel(i)) <= 127;
  const int64_t base = g_.type(b).dtype == DType::UInt8 ? 128 : 0;
  // Where not, each group of output channels gets one more, of ones: the sums' row then holds
  // channel c at sidx[c] and its group's sum of (a - z_a) at eidx[c].
  const int64_t G = is_conv ? conv_of(node.op).group : 1, Og = O / std::max<int64_t>(G, 1);
  std::vector<int32_t> corr;  // (base - z_w[c]) per output channel; empty: the zero point is in the weight
  std::vector<int64_t> sidx(static_cast<size_t>(O)), eidx(static_cast<size_t>(O), -1);
  for (int64_t c = 0; c < O; ++c) sidx[size_t(c)] = c;
  // A grouped conv's sums come from a second conv instead, a depthwise conv of ones (each
  // input channel's window sums, added up per group after it), so that the weight keeps its
  // group structure and its kernel: eidx[c] is then c's group.
  const bool sums_conv = !fits && G > 1;
  if (!fits)
    for (int64_t c = 0; c < O; ++c) {
      corr.push_back(int32_t(base - wzero(c)));
      sidx[size_t(c)] = sums_conv ? c : c / Og * (Og + 1) + c % Og;
      eidx[size_t(c)] = sums_conv ? c / Og : c / Og * (Og + 1) + Og;
    }
  const int64_t K = is_conv ? 0 : bs[bs.size() - 2], rows = is_conv ? 0 : numel(as) / std::max<int64_t>(K, 1);
  // f32 kernels: the sums are exact where every partial sum is an integer below 2^24, which
  // |a - z_a| <= amax and, per output channel, amax * sum_k |w - z_w| < 2^24 ensure (in any
  // order of summation, FMA or not). Where a channel's bound fails, every channel's weight is
  // split, w - z_w = 2^shift hi + lo with lo in [0, 2^shift), into two output channels (hi at
  // sidx[c], lo at lidx[c], in c's group) whose bounds hold; the step after the kernel adds
  // 2^shift hi + lo in integers. Where no shift up to 8 does, the reference kernel runs.
  // A constant weight's reduction is cut into `parts` equal chunks instead where that suffices
  // (the same work, where the split weight doubles it), added in integers by the step after the
  // kernel: a matmul's K as one batched matmul, its sums laid out [rows, parts, N]; a conv's
  // input channels (per group) as a conv of `parts` times the groups, c's chunk q at channel
  // (c / Og * parts + q) * Og + c % Og.
  int shift = 0;
  int64_t parts = 1;
  // A pointwise conv (1 x 1 taps, stride 1, no pads, one group) is a matmul of its
  // channels-last source, [N x positions, C_in] by [C_in, C_out]: with its input channels in
  // chunks it runs as the chunked matmul (oneDNN's grouped conv for it is its generic kernel,
  // a third slower than its 1 x 1 kernel here).
  bool pointwise = false;
  if (is_conv) {
    const ops::Conv cv = conv_of(node.op);
    pointwise = cv.group == 1 && std::all_of(bs.begin() + 2, bs.end(), [](int64_t k) { return k == 1; }) &&
                std::all_of(cv.strides.begin(), cv.strides.end(), [](int64_t v) { return v == 1; }) &&
                std::all_of(cv.pads.begin(), cv.pads.end(), [](int64_t v) { return v == 0; });
  }
  const int64_t pw_rows = pointwise ? numel(as) / std::max<int64_t>(as[1], 1) : 0;
  // whether oneDNN has a kernel other than its reference one for the conv with p times the groups
  auto has_parts_conv_kernel = [&](int64_t p) {
    try {
      ops::Conv cp = conv_of(node.op);
      cp.group *= p;
      Shape wsh = bs, ysh = ys;
      wsh[0] *= p, wsh[1] /= p, ysh[1] *= p;
      return std::string(conv_desc(eng_, ConvGeometry(cp, wsh), as, ysh, dt::f32, dt::f32, dt::f32).impl_info_str()).rfind("ref", 0) != 0;
    } catch (const dnnl::error&) {
      return false;
    }
  };
  std::vector<int64_t> lidx;
  if (fk) {
    constexpr double limit = 16777216.0;
    const bool a_int8 = g_.type(a).dtype == DType::Int8;
    double amax = 255;  // a run-time zero point: anything in the type's range
    if (iza < 0 || constant(iza)) {
      const int64_t z = iza < 0 ? 0 : int_value(g_, node.inputs[size_t(iza)])[0];
      amax = double(a_int8 ? std::max(128 + z, 127 - z) : std::max(z, 255 - z));
    }
    if (runtime_b) {
      const int64_t z = izb >= 0 ? int_value(g_, node.inputs[size_t(izb)])[0] : 0;
      const double bmax = double(b_u8 ? std::max(z, 255 - z) : std::max(128 + z, 127 - z));
      if (amax * bmax * double(K) >= limit) return false;
    } else {
      auto within = [&](int s) {
        std::vector<double> hs(size_t(O), 0.), ls(size_t(O), 0.);
        for (int64_t i = 0; i < bw.size(); ++i) {
          const int64_t o = out_channel(i), v = bw[i] - wzero(o), hi = v >> s;  // (floor)
          hs[size_t(o)] += double(std::abs(hi));
          ls[size_t(o)] += double(v - hi * (int64_t(1) << s));
        }
        for (int64_t c = 0; c < O; ++c)
          if (amax * hs[size_t(c)] >= limit || amax * ls[size_t(c)] >= limit) return false;
        return true;
      };
      // the reduction in `p` equal chunks (K, or a conv's input channels per group): each
      // chunk's bound per output channel
      const int64_t red = is_conv ? bs[1] : K, taps = is_conv ? per_o / std::max<int64_t>(bs[1], 1) : 1;
      auto chunks_within = [&](int64_t p) {
        std::vector<double> sums(size_t(p * O), 0.);
        for (int64_t i = 0; i < bw.size(); ++i) {
          const int64_t o = out_channel(i), q = (is_conv ? i % per_o / taps : i / O) / (red / p);
          sums[size_t(q * O + o)] += double(std::abs(bw[i] - wzero(o)));
        }
        for (double v : sums)
          if (amax * v >= limit) return false;
        return true;
      };
      if (!within(0))
        for (int64_t p : {2, 3, 4, 6, 8})
          if (red % p == 0 && chunks_within(p) &&
              (pointwise ? has_parts_kernel(eng_, pw_rows, red, O, p) : is_conv ? has_parts_conv_kernel(p) : has_parts_kernel(eng_, rows, K, O, p))) {
            parts = p;
            break;
          }
      while (parts == 1 && !within(shift))
        if (++shift > 8) return false;
      if (shift > 0) {
        lidx.resize(size_t(O));
        for (int64_t c = 0; c < O; ++c) {
          sidx[size_t(c)] = c / Og * 2 * Og + c % Og;
          lidx[size_t(c)] = sidx[size_t(c)] + Og;
        }
      }
    }
  }
  // channels (columns) of the kernel's sums
  int64_t C2 = fk ? (shift > 0 ? 2 * O : parts * O) : O + (corr.empty() || sums_conv ? 0 : G);
  // An f32 matmul whose sums' rows lie a multiple of 4 KiB apart ran at half speed here
  // (oneDNN's gemm:jit, AVX2: ViT's 197 x 768 x 3072 took 8 ms where 197 x 768 x 2304 took 3):
  // 16 columns of zero weights more move them apart.
  const bool pw_parts = pointwise && parts > 1;  // (the chunked matmul for a pointwise conv)
  if (fk && (!is_conv || pw_parts) && !runtime_b && C2 * int64_t(sizeof(float)) % 4096 == 0) C2 += 16;
  Shape bs2 = bs;  // the constant weight's shape with the extra channels (unused for a run-time B)
  if (!runtime_b) bs2[is_conv ? 0 : 1] = parts > 1 && !is_conv ? O : C2;  // (a matmul's K in chunks: the sums' rows only are longer)
  if (is_conv && parts > 1) bs2[1] = bs[1] / parts;
  std::vector<int8_t> w8(runtime_b || fk ? 0 : size_t(numel(bs2)), int8_t(1));
  std::vector<float> wf(runtime_b || !fk ? 0 : size_t(numel(bs2)), 0.f);  // (f32 kernels)
  for (int64_t i = 0; i < bw.size(); ++i) {
    const int64_t o = out_channel(i);
    auto at = [&](int64_t ch) { return size_t(is_conv ? ch * per_o + i % per_o : i / O * bs2[1] + ch); };
    if (!fk) {
      w8[at(sidx[size_t(o)])] = int8_t(bw[i] - (corr.empty() ? wzero(o) : base));
    } else if (pw_parts) {  // [C_out, C_in] as the matmul's [C_in, C_out]
      wf[size_t(i % per_o * O + o)] = float(bw[i] - wzero(o));
    } else if (is_conv && parts > 1) {  // input channel ci of o: chunk q, ci % Ip in it
      const int64_t Ip = bs[1] / parts, taps = per_o / bs[1], ci = i % per_o / taps, q = ci / Ip;
      wf[size_t(((o / Og * parts + q) * Og + o % Og) * (per_o / parts) + ci % Ip * taps + i % taps)] = float(bw[i] - wzero(o));
    } else {
      const int64_t v = bw[i] - wzero(o), hi = v >> shift;
      wf[at(sidx[size_t(o)])] = float(hi);
      if (shift > 0) wf[at(lidx[size_t(o)])] = float(v - hi * (int64_t(1) << shift));
    }
  }
  // QLinear: constant scales and output zero point; the multipliers per output channel
  std::vector<float> mult;
  std::vector<int32_t> bias;
  int64_t yzero = 0;
  DType to = DType::Int32;
  // a's scale may be computed at run time (DynamicQuantizeLinear's): the step then reads it
  int sa_slot = -1;
  std::vector<float> sb_over;  // b's scale per output channel (for a run-time a scale)
  float sy_value = 1.f;
  if (qlinear) {
    for (int i : {4, 6, 7})
      if (!constant(i)) return false;
    if (node.inputs.size() == 9 && !constant(8)) return false;
    const auto fval = [&](int i) { return std::get<Tensor<float>>(*g_.tensor(node.inputs[size_t(i)]).value); };
    const Tensor<float> sb = fval(4), sy = fval(6);
    sy_value = sy[0];
    mult.resize(size_t(O));
    for (int64_t c = 0; c < O; ++c) sb_over.push_back(sb[sb.size() > 1 ? c : 0]);
    if (constant(1))
      for (int64_t c = 0; c < O; ++c) mult[size_t(c)] = ops::detail::requant_scale(fval(1)[0], sb_over[size_t(c)], sy_value);
    else
      sa_slot = plain_slot(int(node.inputs[1]));
    yzero = int_value(g_, node.inputs[7])[0];
    to = g_.type(y).dtype;
    if (node.inputs.size() == 9) {
      const auto& bv = int_value(g_, node.inputs[8]);
      for (int64_t c = 0; c < O; ++c) bias.push_back(int32_t(bv[c]));
    }
  }
  const dt src_type = g_.type(a).dtype == DType::Int8 ? dt::s8 : dt::u8;
  // the kernel's types: int8 source and weight, int32 sums; or all f32
  const dt ksrc = fk ? dt::f32 : src_type, kw = fk ? dt::f32 : dt::s8, ksum = fk ? dt::f32 : dt::s32;
  primitive_attr attr;
  if (iza >= 0 && !fk) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  // (The kernel does not requantize itself: oneDNN's int8 matmul and brgconv kernels round
  // the scaled sums differently from the op's float(sum + bias) * m in some elements, measured
  // on real models, so pet's requantization step always does it.)
  const dt y_type = to == DType::Int8 ? dt::s8 : dt::u8;
  // The kernel: int32 sums, channels-last for convs; oneDNN's reference kernels are refused (slow).
  std::optional<primitive> prim;
  md_t src_md, w_md, acc_md, w_user;
  std::string impl;
  Shape ys2 = ys;  // the sums' shape (a conv's: with the extra channel)
  if (is_conv) ys2[1] = C2;
  Shape ys_s = ys;  // a grouped conv's second conv: each input channel's window sums (depthwise)
  const int64_t Cin = is_conv ? as[1] : 0, Ig = is_conv ? Cin / std::max<int64_t>(G, 1) : 1;
  std::optional<primitive> sums_prim;
  md_t sums_w_user, sums_w_md, sums_md;
  try {
    if (pw_parts) {
      const matmul::primitive_desc pd = parts_matmul(eng_, pw_rows, bs[1], O, parts, C2);
      impl = pd.impl_info_str();
      src_md = pd.src_desc(), w_md = pd.weights_desc(), acc_md = pd.dst_desc();
      w_user = plain_md({parts, bs[1] / parts, O});
      prim = primitive(matmul(pd));
    } else if (is_conv) {
      ops::Conv cop = conv_of(node.op);
      cop.group *= parts;  // (the input channels in chunks: parts times the groups)
      const ConvGeometry geo(cop, bs2);
      const convolution_forward::primitive_desc pd = conv_desc(eng_, geo, as, ys2, ksrc, kw, ksum, attr);
      impl = pd.impl_info_str();
      src_md = pd.src_desc(), w_md = pd.weights_desc(), acc_md = pd.dst_desc();
      w_user = with_type(plain_md(geo.wdims), kw);
      prim = primitive(convolution_forward(pd));
      if (sums_conv) {
        ops::Conv cd = conv_of(node.op);
        cd.group = Cin;
        Shape bs_s = bs;
        bs_s[0] = Cin, bs_s[1] = 1;
        ys_s[1] = Cin;
        const ConvGeometry gs(cd, bs_s);
        const convolution_forward::primitive_desc pd2 = conv_desc(eng_, gs, as, ys_s, ksrc, dt::s8, dt::s32, attr);
        if (std::string(pd2.impl_info_str()).rfind("ref", 0) == 0) return false;
        sums_w_user = with_type(plain_md(gs.wdims), dt::s8);
        sums_w_md = pd2.weights_desc(), sums_md = pd2.dst_desc();
        sums_prim = primitive(convolution_forward(pd2));
      }
    } else if (runtime_b) {
      Shape bp(ys.size() - bs.size(), 1);  // B's dims, with leading 1s (broadcast)
      bp.insert(bp.end(), bs.begin(), bs.end());
      const matmul::primitive_desc pd(
          matmul::desc(with_type(plain_md(as), ksrc), with_type(plain_md(bp), kw), with_type(plain_md(ys), ksum)), attr, eng_);
      impl = pd.impl_info_str();
      src_md = pd.src_desc(), w_md = pd.weights_desc(), acc_md = pd.dst_desc();
      prim = primitive(matmul(pd));
    } else if (parts > 1) {
      const matmul::primitive_desc pd = parts_matmul(eng_, rows, K, O, parts, C2);
      impl = pd.impl_info_str();
      src_md = pd.src_desc(), w_md = pd.weights_desc(), acc_md = pd.dst_desc();
      w_user = plain_md({parts, K / parts, O});
      prim = primitive(matmul(pd));
    } else {
      const md_t s = with_type(plain_md({rows, K}), ksrc), w(memory::dims{K, C2}, kw, memory::format_tag::any),
                 d = with_type(plain_md({rows, C2}), ksum);
      const matmul::primitive_desc pd(matmul::desc(s, w, d), attr, eng_);
      impl = pd.impl_info_str();
      src_md = pd.src_desc(), w_md = pd.weights_desc(), acc_md = pd.dst_desc();
      w_user = with_type(plain_md({K, C2}), kw);
      prim = primitive(matmul(pd));
    }
  } catch (const dnnl::error&) {
    return false;
  }
  if (impl.rfind("ref", 0) == 0) return false;
  // the source's zero point: a constant, or (DynamicQuantizeLinear's) copied from its host
  // value before each run (the int8 kernel's zero point; the f32 kernels' source step reads it)
  int zslot = -1;
  if (iza >= 0) {
    const TensorId zt = node.inputs[size_t(iza)];
    const int32_t zv = constant(iza) ? int32_t(int_value(g_, zt)[0]) : 0;
    zslot = int8_const(md_t({1}, dt::s32, memory::format_tag::x), &zv, sizeof zv, TensorType{DType::Int32, {1}});
    if (!constant(iza)) {
      ensure_host(zt, who);
      Step& zs = add_step(cat("  ", g_.tensor(zt).name, ": zero point for the kernel"), {int(zt)}, {});
      zs.fn = [this, zt, zslot] { *reinterpret_cast<int32_t*>(ptr(zslot)) = int32_t(host_ints(int(zt))[0]); };
    }
  }
  // f32 kernels: an int8 buffer x (of n values) as float(x - z) in `into` (the same layout),
  // z a constant or zslot's value
  auto less_zero = [&](int x, int into, int64_t n, bool is_signed, int32_t z, int zs, const std::string& text) {
    std::vector<int> reads{x};
    if (zs >= 0) reads.push_back(zs);
    Step& cs = add_step(text, reads, {into});
    cs.fn = [this, x, into, n, code = ByteCode(is_signed), z, zs] {
      const uint8_t* in = reinterpret_cast<const uint8_t*>(ptr(x));
      float* o = ptr(into);
      const float off = code.offset + float(zs >= 0 ? *reinterpret_cast<const int32_t*>(ptr(zs)) : z);
      const uint8_t flip = code.flip;
      parallel_chunks(n, 65536, [=](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) o[i] = float(uint8_t(in[i] ^ flip)) - off;
      });
    };
  };
  int w_slot = -1;
  if (runtime_b) {
    // B in a buffer, viewed with the kernel's dims; a uint8 B less 128 by a step (f32
    // kernels: B less its zero point)
    const int bsrc = as_layout(int8_buffer(b, who), with_type(plain_md(bs), b_u8 ? dt::u8 : dt::s8), who);
    if (fk) {
      w_slot = new_slot(TensorType{DType::Float32, bs}, w_md);
      less_zero(bsrc, w_slot, numel(bs), !b_u8, izb >= 0 ? int32_t(int_value(g_, node.inputs[size_t(izb)])[0]) : 0, -1,
                cat("  ", g_.tensor(b).name, ": less its zero point, in f32, for ", who));
    } else if (b_u8) {
      w_slot = new_slot(TensorType{DType::Int8, bs}, w_md);
      Step& fl = add_step(cat("  ", g_.tensor(b).name, ": uint8 to int8 less 128, for ", who), {bsrc}, {w_slot});
      fl.fn = [this, bsrc, w_slot, n = numel(bs)] {
        const uint8_t* x = reinterpret_cast<const uint8_t*>(ptr(bsrc));
        uint8_t* o = reinterpret_cast<uint8_t*>(ptr(w_slot));
        for (int64_t i = 0; i < n; ++i) o[i] = uint8_t(x[i] ^ 0x80);
      };
    } else {
      Slot v = slots_[size_t(bsrc)];
      v.md = w_md;
      v.plain = -1;
      slots_.push_back(v);
      w_slot = int(slots_.size()) - 1;
    }
  } else {
    // the weight, reordered once into the kernel's layout
    Slot ws;
    ws.type = TensorType{fk ? DType::Float32 : DType::Int8, bs2};
    ws.md = w_md;
    ws.owned = aligned_floats(w_md.get_size() / sizeof(float) + 1);
    {
      memory from(w_user, eng_, fk ? static_cast<void*>(wf.data()) : static_cast<void*>(w8.data())), into(w_md, eng_, ws.owned.get());
      dnnl_call(who, [&] { reorder(from, into).execute(strm_, from, into); });
      strm_.wait();
    }
    slots_.push_back(ws);
    w_slot = int(slots_.size()) - 1;
  }
  // the source: the int8 tensor in the kernel's layout (a matmul's viewed as [rows, K]); f32
  // kernels: less its zero point, in f32, by a step
  int src = int8_buffer(a, who);
  src = as_layout(src, pw_parts  ? md_t(dims_of(as), src_type, channels_last(as.size()))
                       : is_conv ? with_type(src_md, src_type)
                                 : with_type(plain_md(as), src_type),
                  who);
  if (fk) {
    const int f = new_slot(TensorType{DType::Float32, is_conv || runtime_b ? as : Shape{rows, K}}, src_md);
    less_zero(src, f, numel(as), src_type == dt::s8, 0, zslot, cat("  ", g_.tensor(a).name, ": less its zero point, in f32, for ", who));
    src = f;
  } else if (!is_conv) {
    Slot v = slots_[size_t(src)];
    v.md = src_md;
    v.plain = -1;
    slots_.push_back(v);
    src = int(slots_.size()) - 1;
  }
  const int acc = new_slot(TensorType{fk ? DType::Float32 : DType::Int32, ys2}, acc_md);
  const std::string kind = fk ? cat("oneDNN f32 ", is_conv && !pw_parts ? "conv " : "matmul ", impl, " (exact: integer sums below 2^24",
                                    shift > 0 ? cat(", the weight split into 2^", shift, " hi + lo") : std::string(),
                                    parts > 1 ? is_conv ? cat(", input channels in ", parts, " chunks of ", bs[1] / parts, pw_parts ? ", a pointwise conv" : " per group")
                                                        : cat(", K in ", parts, " chunks of ", K / parts)
                                              : std::string(), is_conv ? ", channels-last" : "", ")")
                              : cat("oneDNN int8 ", is_conv ? "conv " : "matmul ", impl, " (", dtype_name(g_.type(a).dtype), " source, int32 sums",
                                    is_conv ? ", channels-last" : "", ")");
  Step& st = add_step(cat(who, ": ", kind), {src, w_slot}, {acc});
  st.prim = prim;
  st.args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w_slot}, {DNNL_ARG_DST, acc}};
  if (zslot >= 0 && !fk) st.args.push_back({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zslot});
  int sums_slot = -1;
  if (sums_prim) {
    Slot ones;
    ones.type = TensorType{DType::Int8, {Cin}};
    ones.md = sums_w_md;
    ones.owned = aligned_floats(sums_w_md.get_size() / sizeof(float) + 1);
    std::vector<int8_t> one(sums_w_user.get_size(), int8_t(1));
    memory from(sums_w_user, eng_, one.data()), into(sums_w_md, eng_, ones.owned.get());
    dnnl_call(who, [&] { reorder(from, into).execute(strm_, from, into); });
    strm_.wait();
    slots_.push_back(ones);
    const int ones_slot = int(slots_.size()) - 1;
    sums_slot = new_slot(TensorType{DType::Int32, ys_s}, sums_md);
    Step& s2 = add_step(cat("  ", who, ": window sums (a depthwise conv of ones, for the weight's zero point)"), {src, ones_slot}, {sums_slot});
    s2.prim = sums_prim;
    s2.args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, ones_slot}, {DNNL_ARG_DST, sums_slot}};
    if (zslot >= 0) s2.args.push_back({DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zslot});
  }
  // The sums are R rows of C2 (a conv's: channels-last, R = N x positions); row_sums gives a
  // row's O results: the row itself, or (with the weight's zero point) gathered,
  // sum[sidx[c]] + corr[c] * sum[eidx[c]] in int32 (wrapping, as ONNX Runtime's int32 sums).
  const int64_t R = numel(ys) / std::max<int64_t>(O, 1), P = is_conv && ys[0] > 0 ? R / ys[0] : 1;
  // (a run-time B: plus rb_corr * sum_k (a - z_a) of the row, its `extra`)
  // (ext: the row holding the window sums, the same row or the second conv's)
  auto row_sums = [O, corr, sidx, eidx](const int32_t* row, const int32_t* ext, int32_t* tmp, int32_t extra) -> const int32_t* {
    if (corr.empty() && extra == 0) return row;
    for (int64_t c = 0; c < O; ++c)
      tmp[c] = int32_t(uint32_t(row[sidx[size_t(c)]]) + (corr.empty() ? 0u : uint32_t(corr[size_t(c)]) * uint32_t(ext[eidx[size_t(c)]])) +
                       uint32_t(extra));
    return tmp;
  };
  auto ext_row = [this, sums_slot, Cin, Ig, G](const int32_t* row, int64_t r, int32_t* gtmp) -> const int32_t* {
    if (sums_slot < 0) return row;
    const int32_t* d = reinterpret_cast<const int32_t*>(ptr(sums_slot)) + r * Cin;
    if (Ig == 1) return d;
    for (int64_t g = 0; g < G; ++g) {
      uint32_t t = 0;
      for (int64_t i = 0; i < Ig; ++i) t += uint32_t(d[g * Ig + i]);
      gtmp[g] = int32_t(t);
    }
    return gtmp;
  };
  // rb_corr * sum_k (a[r, k] - z_a), read from the source's buffer (and zero point) at run time
  const int a_slot = runtime_b && rb_corr != 0 && !fk ? src : -1;
  const bool a_signed = g_.type(a).dtype == DType::Int8;
  auto row_extra = [this, a_slot, zslot, K, rb_corr, a_signed](int64_t r) -> int32_t {
    if (a_slot < 0) return 0;
    const uint8_t* x = reinterpret_cast<const uint8_t*>(ptr(a_slot)) + r * K;
    int64_t t = 0;
    for (int64_t k = 0; k < K; ++k) t += a_signed ? int64_t(int8_t(x[k])) : int64_t(x[k]);
    if (zslot >= 0) t -= int64_t(*reinterpret_cast<const int32_t*>(ptr(zslot))) * K;
    return int32_t(uint32_t(rb_corr) * uint32_t(uint64_t(t)));
  };
  // An Add of a constant int32 bias per output channel (column) after MatMulInteger or
  // ConvInteger (ONNX Runtime's QGemm, as pet imports it): absorbed, added to the sums in int32
  // (wrapping) by the step after the kernel; yint is then its result.
  std::vector<int32_t> ibias;
  TensorId yint = y;
  std::string ibias_add;  // its name
  if (const NodeId ad = qlinear || is_output_.count(y) ? -1 : sole_consumer(y); ad >= 0 && std::holds_alternative<ops::Add>(g_.node(ad).op)) {
    const Node& an = g_.node(ad);
    const TensorId bt = an.inputs.size() == 2 ? an.inputs[an.inputs[0] == y ? 1 : 0] : y;
    const Shape& bsh = g_.type(bt).shape;
    bool channel = bt != y && g_.tensor(bt).is_constant() && g_.type(bt).dtype == DType::Int32 && numel(bsh) == O && bsh.size() <= ys.size() &&
                   g_.type(an.outputs[0]).shape == ys;
    for (size_t d = 0; channel && d < bsh.size(); ++d) {
      const size_t od = ys.size() - bsh.size() + d;
      channel = bsh[d] == 1 || od == (is_conv ? 1 : ys.size() - 1);
    }
    if (channel) {
      const ConstInts bv = int_value(g_, bt);
      for (int64_t c = 0; c < O; ++c) ibias.push_back(int32_t(bv[c]));
      absorbed_.insert(ad);
      yint = an.outputs[0];
      ibias_add = an.name;
    }
  }
  // Row r's O int32 sums (tmp and gtmp: O values of scratch each). f32 kernels: the float
  // sums converted (exact integers), or 2^shift hi + lo in int64, wrapped to int32.
  auto raw_sums = [this, acc, C2, O, Og, fk, shift, parts, sidx, lidx, row_sums, ext_row, row_extra](int64_t r, int32_t* tmp, int32_t* gtmp) -> const int32_t* {
    if (fk) {
      const float* f = ptr(acc) + r * C2;
      if (parts > 1)
        for (int64_t c = 0; c < O; ++c) {
          int64_t sum = 0;
          for (int64_t q = 0; q < parts; ++q) sum += int64_t(f[(c / Og * parts + q) * Og + c % Og]);
          tmp[c] = int32_t(uint32_t(uint64_t(sum)));
        }
      else if (shift == 0)
        for (int64_t c = 0; c < O; ++c) tmp[c] = int32_t(f[c]);
      else
        for (int64_t c = 0; c < O; ++c)
          tmp[c] = int32_t(uint32_t(uint64_t(int64_t(f[sidx[size_t(c)]]) * (int64_t(1) << shift) + int64_t(f[lidx[size_t(c)]]))));
      return tmp;
    }
    const int32_t* p = reinterpret_cast<const int32_t*>(ptr(acc)) + r * C2;
    return row_sums(p, ext_row(p, r, gtmp), tmp, row_extra(r));
  };
  auto sums_at = [raw_sums, ibias, O](int64_t r, int32_t* tmp, int32_t* gtmp) -> const int32_t* {
    const int32_t* s = raw_sums(r, tmp, gtmp);
    if (ibias.empty()) return s;
    for (int64_t c = 0; c < O; ++c) tmp[c] = int32_t(uint32_t(s[c]) + uint32_t(ibias[size_t(c)]));
    return tmp;
  };
  std::vector<int> sum_reads{acc};
  if (sums_slot >= 0) sum_reads.push_back(sums_slot);
  if (a_slot >= 0) sum_reads.push_back(a_slot);
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(O, 1));
  const std::string zp_note = shift > 0 ? " (hi and lo halves combined)" : parts > 1 ? " (the chunks' sums added)" : corr.empty() && a_slot < 0 ? "" : " (with the weight's zero point)";
  if (!qlinear) {
    // A Cast to float after it (ONNX Runtime's dynamic quantization): the float result
    // directly (in the sums' layout); else the int32 result as host values, in plain order.
    const NodeId cast = sole_consumer(yint);
    if (cast >= 0 && !is_output_.count(yint) && std::holds_alternative<ops::Cast>(g_.node(cast).op) &&
        g_.type(g_.node(cast).outputs[0]).dtype == DType::Float32 && std::get<ops::Cast>(g_.node(cast).op).narrow == 0) {
      absorbed_.insert(cast);
      // and what ONNX Runtime's dynamic quantization puts after it: a Mul by the scales' product
      // (one value, computed by then), an Add of the bias (one per output channel), a Relu;
      // each as the op computes it, in float, in this order
      TensorId f = g_.node(cast).outputs[0];
      std::string text = cat(" (", ibias_add.empty() ? "" : cat("with int32 Add '", ibias_add, "', "), "with Cast '", g_.node(cast).name, "'");
      int scale_slot = -1, scale_slot2 = -1;  // the scale, or (not computed yet) the two factors of its Mul
      std::vector<float> fbias;
      bool relu = false;
      auto next = [&](TensorId t) -> NodeId { return is_output_.count(t) ? -1 : sole_consumer(t); };
      auto other = [&](NodeId c, TensorId t) { const Node& nc = g_.node(c); return nc.inputs.size() == 2 ? nc.inputs[nc.inputs[0] == t ? 1 : 0] : t; };
      if (const NodeId m = next(f); m >= 0 && std::holds_alternative<ops::Mul>(g_.node(m).op)) {
        const TensorId sc = other(m, f);
        const NodeId sp = g_.tensor(sc).producer;
        auto ready = [&](TensorId t) {  // one float value, available now
          const NodeId p = g_.tensor(t).producer;
          return numel(g_.type(t).shape) == 1 && slots_[size_t(t)].is_float() && (p < 0 || lowered_.count(p));
        };
        const bool product = sp >= 0 && !lowered_.count(sp) && std::holds_alternative<ops::Mul>(g_.node(sp).op) && g_.node(sp).inputs.size() == 2 &&
                             ready(g_.node(sp).inputs[0]) && ready(g_.node(sp).inputs[1]);
        if (sc != f && numel(g_.type(sc).shape) == 1 && slots_[size_t(sc)].is_float() && g_.type(g_.node(m).outputs[0]).shape == ys &&
            (ready(sc) || product)) {
          if (product) {
            scale_slot = plain_slot(int(g_.node(sp).inputs[0]));
            scale_slot2 = plain_slot(int(g_.node(sp).inputs[1]));
          } else {
            scale_slot = plain_slot(int(sc));
          }
          absorbed_.insert(m);
          f = g_.node(m).outputs[0];
          text += cat(", Mul '", g_.node(m).name, "'");
        }
      }
      if (const NodeId ad = next(f); ad >= 0 && std::holds_alternative<ops::Add>(g_.node(ad).op)) {
        const TensorId bt = other(ad, f);
        const Shape& bsh = g_.type(bt).shape;
        // one value per output channel, on the channel dim (a conv's dim 1, a matmul's last)
        bool channel = bt != f && g_.tensor(bt).is_constant() && numel(bsh) == O && bsh.size() <= ys.size() && g_.type(g_.node(ad).outputs[0]).shape == ys;
        for (size_t d = 0; channel && d < bsh.size(); ++d) {
          const size_t od = ys.size() - bsh.size() + d;
          channel = bsh[d] == 1 || od == (is_conv ? 1 : ys.size() - 1);
        }
        if (channel) {
          fbias = std::get<Tensor<float>>(*g_.tensor(bt).value).vec();
          absorbed_.insert(ad);
          f = g_.node(ad).outputs[0];
          text += cat(", Add '", g_.node(ad).name, "'");
        }
      }
      if (const NodeId rl = next(f); rl >= 0 && std::holds_alternative<ops::Relu>(g_.node(rl).op)) {
        relu = true;
        absorbed_.insert(rl);
        f = g_.node(rl).outputs[0];
        text += cat(", Relu '", g_.node(rl).name, "'");
      }
      define(f, is_conv ? md_t(dims_of(ys), dt::f32, channels_last(ys.size())) : plain_md(ys));
      std::vector<int> reads = sum_reads;
      if (scale_slot >= 0) reads.push_back(scale_slot);
      if (scale_slot2 >= 0) reads.push_back(scale_slot2);
      Step& fs = add_step(cat("  ", who, ": int32 sums to float", zp_note, text, ")"), reads, {int(f)});
      fs.fn = [this, f = int(f), R, O, sums_at, grain, scale_slot, scale_slot2, fbias, relu] {
        float* out = ptr(f);
        const float scale = scale_slot < 0 ? 1.f : scale_slot2 < 0 ? *ptr(scale_slot) : *ptr(scale_slot) * *ptr(scale_slot2);
        parallel_chunks(R, grain, [&](int64_t b, int64_t e) {
          std::vector<int32_t> tmp(static_cast<size_t>(O)), gtmp(static_cast<size_t>(O));  // (groups <= O)
          for (int64_t r = b; r < e; ++r) {
            const int32_t* s = sums_at(r, tmp.data(), gtmp.data());
            float* o = out + r * O;
            for (int64_t c = 0; c < O; ++c) o[c] = float(s[c]);
            if (scale_slot >= 0)
              for (int64_t c = 0; c < O; ++c) o[c] = o[c] * scale;
            if (!fbias.empty())
              for (int64_t c = 0; c < O; ++c) o[c] = o[c] + fbias[size_t(c)];
            if (relu)
              for (int64_t c = 0; c < O; ++c) o[c] = ops::Relu{}.apply(o[c]);
          }
        });
      };
      return true;
    }
    Step& hs = add_step(cat("  ", g_.tensor(yint).name, ": int32 sums to host values", zp_note, ibias_add.empty() ? "" : cat(" (with int32 Add '", ibias_add, "')")), sum_reads, {});
    hs.fn = [this, y = yint, ys, R, P, O, sums_at, is_conv] {
      int64_t* v = host_result(y, ys);
      std::vector<int32_t> tmp(static_cast<size_t>(O)), gtmp(static_cast<size_t>(O));  // (groups <= O)
      for (int64_t r = 0; r < R; ++r) {
        const int32_t* s = sums_at(r, tmp.data(), gtmp.data());
        for (int64_t c = 0; c < O; ++c) v[is_conv ? (r / P * O + c) * P + r % P : r * O + c] = s[c];
      }
    };
    return true;
  }
  // requantized into an int8 buffer: R rows of O (a conv's channels-last)
  define(y, is_conv ? md_t(dims_of(ys), y_type, channels_last(ys.size())) : with_type(plain_md(ys), y_type));
  qdevice_.insert(y);
  std::vector<int> reads = sum_reads;
  if (sa_slot >= 0) reads.push_back(sa_slot);
  Step& rq = add_step(cat("  ", who, ": requantize to ", dtype_name(to), zp_note, sa_slot >= 0 ? " (the source's scale read at run time)" : "", " (pet step)"),
                      reads, {int(y)});
  std::vector<int32_t> add(size_t(O), 0);  // the bias (zeros without one)
  for (int64_t c = 0; c < O && !bias.empty(); ++c) add[size_t(c)] = bias[size_t(c)];
  const int64_t qlo = to == DType::Int8 ? -128 : 0, qhi = to == DType::Int8 ? 127 : 255;
  const float lo = float(qlo - yzero), hi = float(qhi - yzero), z = float(yzero);
  // the kernel's rows as they are (int32, nothing to add per row): one pass over a block of
  // rows, without the per-row gather (small channel counts paid more for it than for the sums)
  const bool direct = !fk && corr.empty() && a_slot < 0 && ibias.empty() && C2 == O;
  const int64_t tile = requantize_tile(O);
  std::vector<int32_t> add_t = direct ? tiled(add, tile) : std::vector<int32_t>();
  std::vector<float> mult_t = direct ? tiled(mult, tile) : std::vector<float>();
  rq.fn = [this, y = int(y), R, O, add, add_t, sums_at, grain, mult, mult_t, tile, lo, hi, z, sa_slot, sb_over, sy_value, direct, acc]() mutable {
    if (sa_slot >= 0) {
      for (int64_t c = 0; c < O; ++c) mult[size_t(c)] = ops::detail::requant_scale(*ptr(sa_slot), sb_over[size_t(c)], sy_value);
      if (direct) mult_t = tiled(mult, tile);
    }
    uint8_t* out = reinterpret_cast<uint8_t*>(ptr(y));
    if (direct) {
      const int32_t* p = reinterpret_cast<const int32_t*>(ptr(acc));
      parallel_chunks(R, std::max(grain, tile), [&](int64_t b, int64_t e) {
        requantize_rows(p + b * O, add.data(), mult.data(), add_t.data(), mult_t.data(), tile, out + b * O, e - b, O, lo, hi, z);
      });
      return;
    }
    parallel_chunks(R, grain, [&](int64_t b, int64_t e) {
      std::vector<int32_t> tmp(static_cast<size_t>(O)), gtmp(static_cast<size_t>(O));  // (groups <= O)
      for (int64_t r = b; r < e; ++r) requantize_row(sums_at(r, tmp.data(), gtmp.data()), add.data(), mult.data(), out + r * O, O, lo, hi, z);
    });
  };
  return true;
}

}  // namespace pet::backend::cpu_detail
