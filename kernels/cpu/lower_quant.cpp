// Quantized (QDQ) programs on the cpu backend: QuantizeLinear / DequantizeLinear steps, and
// the int8 kernels that replace the float ops between them.
//
// A QDQ model (ONNX Runtime's quantizer, for instance) computes
//     x_q = QuantizeLinear(x), conv(DequantizeLinear(x_q), DequantizeLinear(w_q)) + b, ...
// The backend passes fold DequantizeLinear(w_q) to a float weight. Where a Conv's, MatMul's or
// Gemm's input is a dequantized int8 tensor, per tensor, and its weight is still exactly the
// dequantized int8 weight (zero point 0, per tensor or per output channel), it runs on
// oneDNN's int8 kernel: the int8 tensor itself is its source (with its zero point), the int8
// weight its weight, scale_x * scale_w[c] its output scale, the bias divided by that scale.
// The sums are exact in int32, which the float program only approximates; the one rounding
// left is the output's. Where the result (after activations) is quantized per tensor again,
// the kernel writes the int8 result directly (1 / scale_y and the zero point as final
// post-ops, oneDNN's saturating, round-to-nearest-even conversion), and the float tensor never
// exists. Between such kernels, an Add, Sub or Mul of two dequantized int8 tensors that is
// quantized again is one int8-to-int8 step, and a unary op a 256-entry table. A
// DequantizeLinear whose result only these read is never computed.
//
// Only on CPUs with VNNI (AVX-512 VNNI, AVX-VNNI, AMX): without it oneDNN's int8 kernels
// multiply u8 by s8 with vpmaddubsw, whose 16-bit pair sums saturate (measured: 255 x 127
// taps came out at half their value on the AVX2 kernel), so there the float path runs, as it
// does with CompileOptions::int8 off (pet run --no-int8).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "executable.hpp"
#include "quant_helpers.hpp"
#include "pet/core/parallel.hpp"
#include "pet/eval/interpreter.hpp"

namespace pet::backend::cpu_detail {

namespace {
std::optional<QuantParams> quant_params(const Graph& g, const Node& node, int64_t axis) {
  QuantParams p;
  const TensorInfo& s = g.tensor(node.inputs[1]);
  if (!s.is_constant()) return std::nullopt;
  p.scale = std::get<Tensor<float>>(*s.value).vec();
  if (node.inputs.size() == 3) {
    const TensorInfo& z = g.tensor(node.inputs[2]);
    if (!z.is_constant()) return std::nullopt;
    p.zero = const_ints(*z.value).vec();
  } else {
    p.zero.assign(p.scale.size(), 0);
  }
  p.axis = p.scale.size() == 1 ? -1 : axis;
  return p;
}
std::optional<QuantParams> quant_params(const Graph& g, const Node& node) {
  if (const auto* q = std::get_if<ops::QuantizeLinear>(&node.op)) return quant_params(g, node, q->axis);
  if (const auto* d = std::get_if<ops::DequantizeLinear>(&node.op)) return quant_params(g, node, d->axis);
  return std::nullopt;
}
/// out[i] = table[in[i] ^ flip], written so that it vectorises (32-bit gathers).
void lookup_block(const uint8_t* __restrict in, uint8_t* __restrict out, int64_t n, const uint32_t* __restrict table, uint8_t flip) {
  for (int64_t i = 0; i < n; ++i) out[i] = uint8_t(table[uint8_t(in[i] ^ flip)]);
}

}  // namespace

bool CpuExecutable::int8_isa() {
  const auto isa = static_cast<unsigned>(get_effective_cpu_isa());
  auto has = [&](cpu_isa i) { return (isa & unsigned(i)) == unsigned(i); };
  return has(cpu_isa::avx512_core_vnni) || has(cpu_isa::avx2_vnni);
}

void CpuExecutable::collect_quant_weights(const Graph& original) {
  for (NodeId n = 0; n < original.num_nodes(); ++n) {
    const Node& node = original.node(n);
    // the axis of the weight's output channels, where oneDNN takes one scale per channel
    int64_t channel_axis = -1;
    if (std::holds_alternative<ops::Conv>(node.op)) channel_axis = 0;
    else if (std::holds_alternative<ops::MatMul>(node.op)) channel_axis = 1;
    else if (const auto* gm = std::get_if<ops::Gemm>(&node.op)) channel_axis = gm->trans_b ? 0 : 1;
    if (channel_axis < 0 || node.inputs.size() < 2) continue;
    const NodeId p = original.tensor(node.inputs[1]).producer;
    if (p < 0) continue;
    const Node& dn = original.node(p);
    const auto* d = std::get_if<ops::DequantizeLinear>(&dn.op);
    if (!d || !original.tensor(dn.inputs[0]).is_constant() || original.type(dn.inputs[0]).dtype != DType::Int8) continue;
    const auto qp = quant_params(original, dn, d->axis);
    const Shape& ws = original.type(dn.inputs[0]).shape;
    if (!qp || std::any_of(qp->zero.begin(), qp->zero.end(), [](int64_t z) { return z != 0; })) continue;
    if (!std::holds_alternative<ops::Conv>(node.op) && ws.size() != 2) continue;
    const int64_t axis = qp->axis < 0 && !qp->per_tensor() ? qp->axis + int64_t(ws.size()) : qp->axis;
    if (!qp->per_tensor() && !(axis == channel_axis && int64_t(qp->scale.size()) == ws[size_t(axis)])) continue;
    qweights_.emplace(node.name, QuantWeights{std::get<Tensor<int8_t>>(*original.tensor(dn.inputs[0]).value), qp->scale, qp->per_tensor() ? -1 : axis});
  }
}

const CpuExecutable::QuantWeights* CpuExecutable::node_qweights(NodeId n) {
  if (auto it = qweights_of_.find(n); it != qweights_of_.end()) return it->second;
  const QuantWeights* found = nullptr;
  const Node& node = g_.node(n);
  const TensorInfo& w = g_.tensor(node.inputs[1]);
  if (w.is_constant() && g_.type(node.inputs[1]).dtype == DType::Float32) {
    const auto& wf = std::get<Tensor<float>>(*w.value);
    auto [b, e] = qweights_.equal_range(node.name);
    for (auto it = b; it != e && !found; ++it) {
      const QuantWeights& q = it->second;
      if (q.q.shape() != wf.shape()) continue;
      // Still exactly DequantizeLinear's result (no pass has changed the weight).
      int64_t inner = 1;
      for (size_t i = size_t(std::max<int64_t>(q.axis, 0)) + 1; i < wf.shape().size(); ++i) inner *= wf.shape()[i];
      const int64_t count = int64_t(q.scale.size());
      bool same = true;
      for (int64_t i = 0; i < wf.size() && same; ++i)
        same = wf[i] == ops::DequantizeLinear::dequantize(int64_t(q.q[i]), q.scale[size_t(count > 1 ? i / inner % count : 0)], 0);
      if (same) found = &q;
    }
  }
  qweights_of_[n] = found;
  return found;
}

bool CpuExecutable::quantized_pair(TensorId t) const {
  const NodeId p = g_.tensor(t).producer;
  if (p < 0 || !std::holds_alternative<ops::QuantizeLinear>(g_.node(p).op)) return false;
  const auto qp = quant_params(g_, g_.node(p));
  if (!qp || is_output_.count(t) || consumers_[size_t(t)].empty() || numel(g_.type(t).shape) == 0) return false;
  for (NodeId c : consumers_[size_t(t)]) {
    const Node& dn = g_.node(c);
    const auto dp = quant_params(g_, dn);
    if (!std::holds_alternative<ops::DequantizeLinear>(dn.op) || dn.inputs[0] != t || !dp ||
        (qp->axis >= 0 && dp->axis >= 0 && qp->axis != dp->axis))
      return false;
  }
  return true;
}

bool CpuExecutable::qint8_candidate(NodeId n, TensorId x) {
  const Node& node = g_.node(n);
  if (!int8_ || node.inputs.size() < 2 || node.inputs[0] != x || node.inputs[1] == x) return false;
  if (std::holds_alternative<ops::Conv>(node.op)) {
    if (node.inputs.size() == 3 && !g_.tensor(node.inputs[2]).is_constant()) return false;
  } else if (std::holds_alternative<ops::MatMul>(node.op)) {
    if (g_.type(x).shape.size() < 2) return false;
  } else if (const auto* gm = std::get_if<ops::Gemm>(&node.op)) {
    // oneDNN computes (A B + bias) times the output scale: alpha and beta must be 1
    if (gm->trans_a || gm->alpha != 1.f || (node.inputs.size() == 3 && (gm->beta != 1.f || !g_.tensor(node.inputs[2]).is_constant()))) return false;
  } else {
    return false;
  }
  return int8_source(x) >= 0 && node_qweights(n) != nullptr;
}

bool CpuExecutable::dq_deferrable(NodeId dq) {
  const TensorId y = g_.node(dq).outputs[0];
  if (is_output_.count(y) || consumers_[size_t(y)].empty()) return false;
  for (NodeId c : consumers_[size_t(y)])
    if (!int8_reader(c, y)) return false;
  return true;
}

NodeId CpuExecutable::qbinary_output_q(NodeId n) const {
  const Node& node = g_.node(n);
  const bool binary = std::holds_alternative<ops::Add>(node.op) || std::holds_alternative<ops::Sub>(node.op) ||
                      std::holds_alternative<ops::Mul>(node.op);
  if (!binary || !glue_ || node.inputs.size() != 2 || node.outputs.size() != 1) return -1;
  const Shape& ys = g_.type(node.outputs[0]).shape;
  for (TensorId t : node.inputs)
    if (g_.type(t).shape != ys || int8_source(t) < 0) return -1;
  return requantizer(node.outputs[0]);
}

bool CpuExecutable::qbinary_candidate(NodeId n) const { return qbinary_output_q(n) >= 0; }

NodeId CpuExecutable::qunary_output_q(NodeId n) const {
  const Node& node = g_.node(n);
  const bool unary = std::visit([](const auto& o) { return std::is_base_of_v<ops::detail::Unary<std::decay_t<decltype(o)>>, std::decay_t<decltype(o)>>; }, node.op);
  if (!unary || !glue_ || node.inputs.size() != 1 || node.outputs.size() != 1 || int8_source(node.inputs[0]) < 0) return -1;
  return requantizer(node.outputs[0]);
}

bool CpuExecutable::qunary_candidate(NodeId n) const { return qunary_output_q(n) >= 0; }

bool CpuExecutable::lower_qunary(NodeId n, const std::string& who) {
  const NodeId qy = qunary_output_q(n);
  if (qy < 0) return false;
  const Node& node = g_.node(n);
  const Node& dn = g_.node(g_.tensor(node.inputs[0]).producer);
  const TensorId tx = dn.inputs[0];
  if (!qdevice_.count(tx)) return false;  // the int8 tensor only exists in float
  const QuantParams px = *quant_params(g_, dn), py = *quant_params(g_, g_.node(qy));
  const auto& q = std::get<ops::QuantizeLinear>(g_.node(qy).op);
  const bool sx = slots_[size_t(tx)].md.data.data_type == dnnl_s8, sy = q.to == DType::Int8;
  // The table: for each of the 256 int8 values, DequantizeLinear, the op (the reference
  // interpreter's own evaluation) and QuantizeLinear, as the three nodes compute them.
  Tensor<float> v({256});
  for (int i = 0; i < 256; ++i) v[i] = ops::DequantizeLinear::dequantize(int64_t(sx ? i - 128 : i), px.scale[0], px.zero[0]);
  const std::vector<Value<float>> in{v};
  const TensorType t{DType::Float32, {256}};
  const Tensor<float> f = std::get<Tensor<float>>(evaluate_op<float>(node.op, in, std::span<const TensorType>(&t, 1))[0]);
  // 32-bit entries: loads the compiler vectorises as gathers (there is no byte gather)
  auto table = std::make_shared<std::array<uint32_t, 256>>();
  for (int i = 0; i < 256; ++i) {
    const int64_t r = q.quantize(f[i], py.scale[0], py.zero[0]);
    (*table)[size_t(i)] = sy ? uint8_t(int8_t(r)) : uint8_t(r);
  }
  int x = int(tx);
  if (!dense(slots_[size_t(x)].md)) x = as_layout(x, with_type(plain_md(g_.type(tx).shape), sx ? dt::s8 : dt::u8), who);
  const TensorId ty = g_.node(qy).outputs[0];
  const md_t md = with_type(slots_[size_t(x)].md, sy ? dt::s8 : dt::u8);
  define(ty, md);
  qdevice_.insert(ty);
  absorbed_.insert(qy);
  table_step(x, int(ty), table, sx,
             cat(who, ": int8 table lookup (DequantizeLinear, ", op_name(node.op), ", QuantizeLinear '", g_.node(qy).name,
                 "' for each of the 256 values, ", layout_name(md), ")"));
  return true;
}

void CpuExecutable::table_step(int x, int y, std::shared_ptr<std::array<uint32_t, 256>> table, bool signed_x, std::string text) {
  Step& st = add_step(std::move(text), {x}, {y});
  const int64_t total = numel(slots_[size_t(y)].type.shape);
  st.fn = [this, x, y, total, table, signed_x] {
    const uint8_t* a = reinterpret_cast<const uint8_t*>(ptr(x));
    uint8_t* o = reinterpret_cast<uint8_t*>(ptr(y));
    const uint32_t* tb = table->data();
    const uint8_t flip = ByteCode(signed_x).flip;  // int8 values index from -128
    parallel_chunks(total, 16384, [=](int64_t b, int64_t e) { lookup_block(a + b, o + b, e - b, tb, flip); });
  };
}

bool CpuExecutable::integer_readers(TensorId t) const {
  // (int8 kernels or not: without them, lower_integer.cpp runs these ops on exact f32 kernels)
  if (is_output_.count(t) || consumers_[size_t(t)].empty()) return false;
  for (NodeId c : consumers_[size_t(t)])
    if (!holds_any<ops::QLinearConv, ops::QLinearMatMul, ops::ConvInteger, ops::MatMulInteger>(g_.node(c).op)) return false;
  return true;
}

NodeId CpuExecutable::requantizer(TensorId t) const {
  const NodeId qy = sole_consumer(t);
  if (qy < 0 || !std::holds_alternative<ops::QuantizeLinear>(g_.node(qy).op) || g_.node(qy).inputs[0] != t) return -1;
  const auto qp = quant_params(g_, g_.node(qy));
  if (!qp || !qp->per_tensor()) return -1;
  const TensorId qt = g_.node(qy).outputs[0];
  if (integer_readers(qt)) return qy;  // QOperator models: QLinearConv and the like read it
  if (!quantized_pair(qt)) return -1;
  for (NodeId c : consumers_[size_t(qt)])
    if (!quant_params(g_, g_.node(c))->per_tensor()) return -1;
  return qy;
}

NodeId CpuExecutable::int8_source(TensorId t) const {
  const NodeId d = g_.tensor(t).producer;
  if (d < 0 || !std::holds_alternative<ops::DequantizeLinear>(g_.node(d).op)) return -1;
  const TensorId tq = g_.node(d).inputs[0];
  const NodeId q = g_.tensor(tq).producer;
  const auto dp = quant_params(g_, g_.node(d));
  if (q < 0 || !dp || !dp->per_tensor()) return -1;
  // QOperator models: the int8 result of QLinearConv or QLinearMatMul (lower_integer.cpp)
  if (holds_any<ops::QLinearConv, ops::QLinearMatMul>(g_.node(q).op)) return d;
  if (!quantized_pair(tq) || !quant_params(g_, g_.node(q))->per_tensor()) return -1;
  return d;
}

NodeId CpuExecutable::same_quantization(NodeId n) const {
  const Node& node = g_.node(n);
  const NodeId d = int8_source(node.inputs[0]);
  const NodeId qy = requantizer(node.outputs[0]);
  if (d < 0 || qy < 0) return -1;
  const QuantParams px = *quant_params(g_, g_.node(d)), py = *quant_params(g_, g_.node(qy));
  const DType tx = g_.type(g_.node(d).inputs[0]).dtype, ty = std::get<ops::QuantizeLinear>(g_.node(qy).op).to;
  return px.scale[0] == py.scale[0] && px.zero[0] == py.zero[0] && tx == ty ? qy : -1;
}

NodeId CpuExecutable::qpool_output_q(NodeId n) const {
  const Node& node = g_.node(n);
  const auto* mp = std::get_if<ops::MaxPool>(&node.op);
  if (!mp || !glue_ || node.outputs.size() != 1) return -1;
  return same_quantization(n);
}

bool CpuExecutable::lower_qpool(NodeId n, const std::string& who) {
  const NodeId qy = qpool_output_q(n);
  if (qy < 0) return false;
  const Node& node = g_.node(n);
  const TensorId tq = g_.node(g_.tensor(node.inputs[0]).producer).inputs[0];
  if (!qdevice_.count(tq)) return false;
  const TensorId ty = g_.node(qy).outputs[0];
  const dt type = slots_[size_t(tq)].md.data.data_type == dnnl_s8 ? dt::s8 : dt::u8;
  try {
    if (!lower_pool(n, std::get<ops::MaxPool>(node.op), algorithm::pooling_max, cat(who, " (with QuantizeLinear '", g_.node(qy).name, "')"),
                    int(tq), ty, type))
      return false;
  } catch (const Unsupported&) {
    return false;  // no int8 pooling for this configuration: in float
  }
  qdevice_.insert(ty);
  absorbed_.insert(qy);
  return true;
}

NodeId CpuExecutable::qconcat_output_q(NodeId n) const {
  const Node& node = g_.node(n);
  if (!std::holds_alternative<ops::Concat>(node.op) || !glue_) return -1;
  for (TensorId t : node.inputs)
    if (int8_source(t) < 0) return -1;
  return requantizer(node.outputs[0]);
}

bool CpuExecutable::lower_qconcat(NodeId n, const std::string& who) {
  const NodeId qy = qconcat_output_q(n);
  if (qy < 0) return false;
  const Node& node = g_.node(n);
  for (TensorId t : node.inputs)
    if (!qdevice_.count(g_.node(g_.tensor(t).producer).inputs[0])) return false;
  const auto& q = std::get<ops::QuantizeLinear>(g_.node(qy).op);
  const QuantParams py = *quant_params(g_, g_.node(qy));
  const bool sy = q.to == DType::Int8;
  const dt type = sy ? dt::s8 : dt::u8;
  const int axis = int(std::get<ops::Concat>(node.op).axis);
  const TensorId ty = g_.node(qy).outputs[0];
  const Shape& ys = g_.type(ty).shape;
  // The result channels-last (the layout oneDNN's int8 kernels use), each input copied into
  // its slice by a oneDNN reorder (as the float Concat does), after a table that requantizes it
  // where its scale, zero point or type differ from the result's (QuantizeLinear(
  // DequantizeLinear(v)) for each of the 256 values).
  const auto last = ys.size() == 3 ? memory::format_tag::nwc : ys.size() == 4 ? memory::format_tag::nhwc : ys.size() == 5 ? memory::format_tag::ndhwc
                                                                                                                             : memory::format_tag::undef;
  define(ty, last == memory::format_tag::undef ? with_type(plain_md(ys), type) : md_t(dims_of(ys), type, last));
  qdevice_.insert(ty);
  absorbed_.insert(qy);
  int64_t at = 0;
  int requantized = 0;
  for (TensorId t : node.inputs) {
    const Node& d = g_.node(g_.tensor(t).producer);
    const TensorId tq = d.inputs[0];
    const QuantParams px = *quant_params(g_, d);
    const bool sx = slots_[size_t(tq)].md.data.data_type == dnnl_s8;
    auto table = std::make_shared<std::array<uint32_t, 256>>();
    bool identity = sx == sy;
    for (int i = 0; i < 256; ++i) {
      const int64_t v = sx ? i - 128 : i;
      const int64_t r = q.quantize(ops::DequantizeLinear::dequantize(v, px.scale[0], px.zero[0]), py.scale[0], py.zero[0]);
      (*table)[size_t(i)] = sy ? uint8_t(int8_t(r)) : uint8_t(r);
      identity = identity && r == v;
    }
    int src = int(tq);
    if (!identity) {
      if (!dense(slots_[size_t(src)].md)) src = as_layout(src, with_type(plain_md(g_.type(tq).shape), sx ? dt::s8 : dt::u8), who);
      const int r = new_slot(TensorType{q.to, g_.type(tq).shape}, with_type(slots_[size_t(src)].md, type));
      table_step(src, r, table, sx, cat(who, ": int8 table requantizing '", g_.tensor(tq).name, "' to QuantizeLinear '", g_.node(qy).name, "'"));
      src = r;
      ++requantized;
    }
    const Shape& xs = g_.type(t).shape;
    memory::dims off(ys.size(), 0);
    off[size_t(axis)] = at;
    at += xs[size_t(axis)];
    const md_t slice = slots_[size_t(ty)].md.submemory_desc(dims_of(xs), off);
    Slot v = slots_[size_t(ty)];
    v.md = slice;
    v.plain = -1;
    slots_.push_back(v);
    const int view = int(slots_.size()) - 1;
    Step& st = add_step(cat(who, ": int8 copy of '", g_.tensor(tq).name, "' into its slice (", layout_name(slots_[size_t(src)].md), ")"), {src},
                        {int(ty)});
    st.prim = dnnl_call(who, [&] { return primitive(reorder(reorder::primitive_desc(eng_, slots_[size_t(src)].md, eng_, slice))); });
    st.args = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, view}};
  }
  steps_.back().text += cat(" (", requantized, " of ", node.inputs.size(), " inputs requantized; QuantizeLinear '", g_.node(qy).name, "' absorbed)");
  return true;
}

NodeId CpuExecutable::qmove_output_q(NodeId n) const {
  const Node& node = g_.node(n);
  const bool view = std::holds_alternative<ops::Reshape>(node.op) || std::holds_alternative<ops::Flatten>(node.op) ||
                    std::holds_alternative<ops::Squeeze>(node.op) || std::holds_alternative<ops::Unsqueeze>(node.op) ||
                    std::holds_alternative<ops::Identity>(node.op);
  if ((!view && !std::holds_alternative<ops::Transpose>(node.op)) || !glue_ || node.outputs.size() != 1) return -1;
  return same_quantization(n);
}

bool CpuExecutable::lower_qmove(NodeId n, const std::string& who) {
  const Node& node = g_.node(n);
  const NodeId qy = qmove_output_q(n);
  // between DequantizeLinear and QuantizeLinear; or a move of an int8 tensor itself (a
  // Reshape or Transpose of a uint8 tensor, in QOperator models)
  TensorId tq = -1, ty = -1;
  if (qy >= 0) {
    tq = g_.node(g_.tensor(node.inputs[0]).producer).inputs[0];
    ty = g_.node(qy).outputs[0];
  } else if (holds_any<ops::Reshape, ops::Flatten, ops::Squeeze, ops::Unsqueeze, ops::Identity, ops::Transpose>(node.op) && node.outputs.size() == 1 &&
             is_int8(g_.type(node.inputs[0]).dtype)) {
    tq = node.inputs[0];
    ty = node.outputs[0];
  } else {
    return false;
  }
  if (!qdevice_.count(tq)) return false;
  const dt type = slots_[size_t(tq)].md.data.data_type == dnnl_s8 ? dt::s8 : dt::u8;
  const Shape &xs = g_.type(tq).shape, &ys = g_.type(ty).shape;
  // the int8 tensor in plain layout (one reorder from a kernel's channels-last, cached)
  const int x = as_layout(int(tq), with_type(plain_md(xs), type), who);
  const std::string text = qy >= 0 ? cat(who, " (with QuantizeLinear '", g_.node(qy).name, "'): ") : cat(who, ": ");
  if (const auto* t = std::get_if<ops::Transpose>(&node.op)) {
    // a oneDNN reorder from the source seen with permuted strides
    std::vector<int64_t> perm = t->perm;
    if (perm.empty())
      for (size_t i = xs.size(); i-- > 0;) perm.push_back(int64_t(i));
    const md_t plain = with_type(plain_md(xs), type);
    memory::dims st(ys.size());
    for (size_t i = 0; i < ys.size(); ++i) st[i] = plain.data.format_desc.blocking.strides[perm[i]];
    Slot v = slots_[size_t(x)];
    v.md = md_t(dims_of(ys), type, st);
    v.plain = -1;
    slots_.push_back(v);
    const int src = int(slots_.size()) - 1;
    define(ty, with_type(plain_md(ys), type));
    Step& s = add_step(cat(text, "int8 transpose"), {x}, {int(ty)});
    s.prim = dnnl_call(who, [&] { return primitive(reorder(reorder::primitive_desc(eng_, slots_[size_t(src)].md, eng_, slots_[size_t(ty)].md))); });
    s.args = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, int(ty)}};
  } else {
    alias(int(ty), x, with_type(plain_md(ys), type));
    add_step(cat(text, "int8 view"), {x}, {int(ty)}).fn = [] {};  // keeps the source alive as long as the view is read
  }
  qdevice_.insert(ty);
  if (qy >= 0) absorbed_.insert(qy);
  return true;
}

bool CpuExecutable::int8_reader(NodeId c, TensorId y) {
  return qint8_candidate(c, y) || qbinary_candidate(c) || qunary_candidate(c) || qpool_output_q(c) >= 0 || qconcat_output_q(c) >= 0 ||
         qmove_output_q(c) >= 0;
}

bool CpuExecutable::lower_qbinary(NodeId n, const std::string& who) {
  const NodeId qy = qbinary_output_q(n);
  if (qy < 0) return false;
  const Node& node = g_.node(n);
  const Node &da = g_.node(g_.tensor(node.inputs[0]).producer), &db = g_.node(g_.tensor(node.inputs[1]).producer);
  const TensorId ta = da.inputs[0], tb = db.inputs[0];
  if (!qdevice_.count(ta) || !qdevice_.count(tb)) return false;  // an int8 tensor only computed in float
  const QuantParams pa = *quant_params(g_, da), pb = *quant_params(g_, db), py = *quant_params(g_, g_.node(qy));
  const auto& q = std::get<ops::QuantizeLinear>(g_.node(qy).op);
  // both int8 tensors in one dense layout (the first's, else plain), the result in it too
  int a = int(ta);
  const auto type_of = [&](int s) { return slots_[size_t(s)].md.data.data_type == dnnl_s8 ? dt::s8 : dt::u8; };
  if (!dense(slots_[size_t(a)].md)) a = as_layout(a, with_type(plain_md(g_.type(ta).shape), type_of(a)), who);
  const int b = as_layout(int(tb), with_type(slots_[size_t(a)].md, type_of(int(tb))), who);
  const TensorId ty = g_.node(qy).outputs[0];
  const md_t md = with_type(slots_[size_t(a)].md, q.to == DType::Int8 ? dt::s8 : dt::u8);
  define(ty, md);
  qdevice_.insert(ty);
  absorbed_.insert(qy);
  Step& st = add_step(cat(who, ": int8 element-wise step (dequantize both, ", op_name(node.op), ", QuantizeLinear '", g_.node(qy).name,
                          "' in one pass, ", layout_name(md), ")"),
                      {a, b}, {int(ty)});
  const int kind = std::holds_alternative<ops::Add>(node.op) ? 0 : std::holds_alternative<ops::Sub>(node.op) ? 1 : 2;
  const int64_t total = numel(g_.type(ty).shape);
  const ByteCode ca(type_of(a) == dt::s8), cb(type_of(b) == dt::s8);
  // The ops' float formulas in their order: (a - za) * sa and (b - zb) * sb, then the
  // binary op, then QuantizeLinear's element function.
  const float fsa = pa.scale[0], fza = float(pa.zero[0]) + ca.offset, fsb = pb.scale[0], fzb = float(pb.zero[0]) + cb.offset,
              fsy = py.scale[0], lo = float(q.lo() - py.zero[0]), hi = float(q.hi() - py.zero[0]), zy = float(py.zero[0]);
  st.fn = [this, a, b, ty = int(ty), total, kind, fa = ca.flip, fb = cb.flip, fsa, fza, fsb, fzb, fsy, lo, hi, zy] {
    const uint8_t *x = reinterpret_cast<const uint8_t*>(ptr(a)), *y = reinterpret_cast<const uint8_t*>(ptr(b));
    uint8_t* out = reinterpret_cast<uint8_t*>(ptr(ty));
    parallel_chunks(total, 16384, [=](int64_t s, int64_t e) {
      std::vector<float> v(size_t(e - s));
      for (int64_t i = s; i < e; ++i) {
        const float l = (float(uint8_t(x[i] ^ fa)) - fza) * fsa, r = (float(uint8_t(y[i] ^ fb)) - fzb) * fsb;
        v[size_t(i - s)] = kind == 0 ? l + r : kind == 1 ? l - r : l * r;
      }
      quantize_block(v.data(), out + s, e - s, fsy, lo, hi, zy);
    });
  };
  return true;
}

void CpuExecutable::quantize_step(NodeId n, const std::string& who) {
  const Node& node = g_.node(n);
  const auto& q = std::get<ops::QuantizeLinear>(node.op);
  const QuantParams qp = *quant_params(g_, node);
  // Per tensor: on the source's own layout (zero padding becomes the zero point, which the
  // int8 conv's zero point takes back to zero).
  int src = int(node.inputs[0]);
  if (slots_[size_t(src)].md.data.format_kind != dnnl_blocked || slots_[size_t(src)].md.data.offset0 != 0) src = plain_slot(src);
  const md_t md = with_type(slots_[size_t(src)].md, q.to == DType::Int8 ? dt::s8 : dt::u8);
  const TensorId t = node.outputs[0];
  define(t, md);
  qdevice_.insert(t);
  Step& st = add_step(cat(who, ": quantize to ", dtype_name(q.to), " (", layout_name(md), "), for int8 convs"), {src}, {int(t)});
  const int64_t total = int64_t(md.get_size());
  const float s = qp.scale[0], lo = float(q.lo() - qp.zero[0]), hi = float(q.hi() - qp.zero[0]), z = float(qp.zero[0]);
  st.fn = [this, src, t = int(t), total, s, lo, hi, z] {
    const float* x = ptr(src);
    uint8_t* out = reinterpret_cast<uint8_t*>(ptr(t));
    parallel_chunks(total, 16384, [=](int64_t b, int64_t e) { quantize_block(x + b, out + b, e - b, s, lo, hi, z); });
  };
}

void CpuExecutable::dequantize_step(NodeId n, const std::string& who) {
  const Node& node = g_.node(n);
  const QuantParams dp = *quant_params(g_, node);
  int src = int(node.inputs[0]);
  const bool is_signed = slots_[size_t(src)].md.data.data_type == dnnl_s8;
  const Shape& shape = slots_[size_t(src)].type.shape;
  // Padded blocks (the padding's values are not ours to dequantize), or per axis on a permuted
  // layout (the axis is not where the formula looks): the int8 tensor in plain layout first.
  const md_t plain8 = with_type(plain_md(shape), is_signed ? dt::s8 : dt::u8);
  if (!dense(slots_[size_t(src)].md) || (!dp.per_tensor() && slots_[size_t(src)].md != plain8)) src = as_layout(src, plain8, who);
  const md_t md = with_type(slots_[size_t(src)].md, dt::f32);
  const TensorId y = node.outputs[0];
  define(y, md);
  Step& st = add_step(cat(who, ": dequantize (", layout_name(md), ")"), {src}, {int(y)});
  int64_t count = 1, inner = numel(shape);
  if (!dp.per_tensor()) {
    count = shape[size_t(dp.axis)];
    inner = 1;
    for (size_t i = size_t(dp.axis) + 1; i < shape.size(); ++i) inner *= shape[i];
  }
  const int64_t total = numel(shape);
  st.fn = [this, src, y = int(y), total, count, inner, dp, code = ByteCode(is_signed)] {
    const uint8_t* x = reinterpret_cast<const uint8_t*>(ptr(src));
    float* out = ptr(y);
    parallel_chunks(total, 16384, [&, x, out](int64_t b, int64_t e) {
      for (int64_t i = b; i < e;) {
        const size_t c = count > 1 ? size_t(i / inner % count) : 0;
        const int64_t end = count > 1 ? std::min(e, (i / inner + 1) * inner) : e;
        const float sc = dp.scale[c], zf = float(dp.zero[c]) + code.offset;
        const uint8_t flip = code.flip;
        // (x - z) * s in float is the op's formula: x - z is exact (small integers)
        for (; i < end; ++i) out[i] = (float(uint8_t(x[i] ^ flip)) - zf) * sc;
      }
    });
  };
}

bool CpuExecutable::lower_qdq(NodeId n, const std::string& who) {
  const Node& node = g_.node(n);
  if (std::holds_alternative<ops::QuantizeLinear>(node.op)) {
    const TensorId t = node.outputs[0];
    if (!quantized_pair(t)) {
      // Not a QDQ pair: the int8 tensor written once, into a buffer its readers read (integer
      // ops, int8 moves; host copies for the others). QOperator models.
      const auto qp = quant_params(g_, node);
      if (!qp || !qp->per_tensor()) return false;
      quantize_step(n, who);
      return true;
    }
    qdq_pending_[t] = n;
    // An int8 conv reads the int8 tensor (per tensor only): it is written, once.
    bool reader = false;
    if (quant_params(g_, node)->per_tensor())
      for (NodeId d : consumers_[size_t(t)])
        for (NodeId c : consumers_[size_t(g_.node(d).outputs[0])]) reader = reader || int8_reader(c, g_.node(d).outputs[0]);
    if (reader) quantize_step(n, who);
    return true;
  }
  if (!std::holds_alternative<ops::DequantizeLinear>(node.op)) return false;
  const TensorId t = node.inputs[0];
  if (qdevice_.count(t) && dq_deferrable(n)) {
    dq_deferred_[node.outputs[0]] = n;  // only int8 convs read it: never computed
    return true;
  }
  if (!qdq_pending_.count(t)) {
    if (!qdevice_.count(t)) return false;
    dequantize_step(n, who);  // the int8 tensor is all there is (an int8 conv wrote it)
    return true;
  }
  const Node& qn = g_.node(qdq_pending_.at(t));
  const ops::QuantizeLinear q = std::get<ops::QuantizeLinear>(qn.op);
  const QuantParams qp = *quant_params(g_, qn), dp = *quant_params(g_, node);
  const TensorId y = node.outputs[0];
  const Shape& shape = g_.type(y).shape;
  const int64_t axis = std::max(qp.axis, dp.axis);
  int64_t outer = 1, count = 1, inner = numel(shape);
  if (axis >= 0) {
    count = shape[size_t(axis)];
    outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= shape[size_t(i)];
    for (size_t i = size_t(axis) + 1; i < shape.size(); ++i) inner *= shape[i];
  }
  // Per tensor with equal zero points, zero stays zero: the step runs on the producer's own
  // layout (blocked layouts' padding included), so a conv's output needs no reorder first.
  const bool any_layout = axis < 0 && qp.zero[0] == dp.zero[0];
  const int src = any_layout ? int(qn.inputs[0]) : plain_slot(int(qn.inputs[0]));
  const md_t md = any_layout ? slots_[size_t(src)].md : plain_md(shape);
  define(y, md);
  Step& st = add_step(cat(who, ": quantize and dequantize in one step (with QuantizeLinear '", qn.name, "'; the ",
                          dtype_name(q.to), " tensor is never written)"),
                      {src}, {int(y)});
  // Float arithmetic only (vectorises): round(clamp(x / s_q, lo - z_q, hi - z_q)) + (z_q - z_d),
  // times s_d, which is the ops' element functions exactly (small integers are exact in
  // float); NaN quantizes to lo, as QuantizeLinear's does.
  const int64_t total = any_layout ? int64_t(md.get_size() / sizeof(float)) : outer * count * inner;
  st.fn = [this, src, y = int(y), lo = float(q.lo()), hi = float(q.hi()), qp, dp, total, count, inner, per_axis = axis >= 0] {
    const float* x = ptr(src);
    float* out = ptr(y);
    parallel_chunks(total, 16384, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e;) {
        const int64_t c = per_axis ? i / inner % count : 0, end = per_axis ? std::min(e, (i / inner + 1) * inner) : e;
        const size_t iq = qp.axis >= 0 ? size_t(c) : 0, id = dp.axis >= 0 ? size_t(c) : 0;
        const float qs = qp.scale[iq], ds = dp.scale[id], qlo = lo - float(qp.zero[iq]), qhi = hi - float(qp.zero[iq]),
                    shift = float(qp.zero[iq] - dp.zero[id]);
        for (; i < end; ++i) {
          float v = x[i] / qs;
          v = v == v ? v : qlo;
          v = v < qlo ? qlo : v;
          v = v > qhi ? qhi : v;
          out[i] = (std::nearbyint(v) + shift) * ds;
        }
      }
    });
  };
  return true;
}

bool CpuExecutable::int8_begin(NodeId n, Int8Plan& p) {
  const Node& node = g_.node(n);
  const TensorId x = node.inputs[0];
  const NodeId dn = g_.tensor(x).producer;
  if (dn < 0 || !std::holds_alternative<ops::DequantizeLinear>(g_.node(dn).op)) return false;
  p.tq = g_.node(dn).inputs[0];
  if (!qdevice_.count(p.tq) || !qint8_candidate(n, x)) return false;
  p.qw = node_qweights(n);
  p.xp = *quant_params(g_, g_.node(dn));
  // Output scales: the int32 sums times scale_x * scale_w[c] are the float op's result.
  p.oscale.resize(p.qw->scale.size());
  for (size_t i = 0; i < p.oscale.size(); ++i) p.oscale[i] = p.xp.scale[0] * p.qw->scale[i];
  p.absorbed_before = absorbed_;
  p.out = absorb_post_ops(p.out, p.chain, p.text, false).first;
  // The result quantized again, per tensor: the kernel writes the int8 tensor. QuantizeLinear
  // rounds x / scale (half to even) and then adds the zero point; the kernel's conversion
  // rounds once, so an odd zero point (round(a + z) != round(a) + z at ties) is added after
  // an explicit round post-op, as oneDNN's destination zero point.
  const NodeId qy = sole_consumer(p.out);
  if (qy >= 0 && std::holds_alternative<ops::QuantizeLinear>(g_.node(qy).op) && quantized_pair(g_.node(qy).outputs[0])) {
    std::optional<QuantParams> yp = quant_params(g_, g_.node(qy));
    for (NodeId d : consumers_[size_t(g_.node(qy).outputs[0])]) yp = yp && yp->per_tensor() && quant_params(g_, g_.node(d))->per_tensor() ? yp : std::nullopt;
    if (yp && !p.chain.accepts(algorithm::eltwise_linear)) yp.reset();
    if (yp && yp->zero[0] % 2 != 0 && !p.chain.accepts(algorithm::eltwise_round)) yp.reset();
    if (yp) p.qy = qy, p.yp = *yp;
  }
  return true;
}

bool CpuExecutable::int8_scales_ok(Int8Plan& p, std::optional<TensorId> bias) const {
  // The kernel divides by the output scales (the bias in units of the int32 sums) and by the
  // next QuantizeLinear's scale: a zero, subnormal or huge scale (a degenerate calibration)
  // would make that infinite where the float program is finite; such ops run in float.
  for (float s : p.oscale)
    if (!std::isnormal(s) || s < 0) return false;
  if (bias) {
    const auto& bf = std::get<Tensor<float>>(*g_.tensor(*bias).value);
    const int64_t channels = std::max<int64_t>(bf.size(), int64_t(p.oscale.size()));
    for (int64_t c = 0; c < channels; ++c)
      if (!std::isfinite(float(double(bf[bf.size() == 1 ? 0 : c]) / double(p.oscale[p.oscale.size() > 1 ? size_t(c) : 0])))) return false;
  }
  if (p.qy >= 0 && !(std::isnormal(p.yp.scale[0]) && p.yp.scale[0] > 0 && std::isnormal(1.f / p.yp.scale[0]))) p.qy = -1;  // float result, quantized by its own step
  return true;
}

primitive_attr CpuExecutable::int8_attr(const Int8Plan& p, bool quantized_dst, int scale_mask, dt& dst_type) const {
  PostOpChain po = p.chain;
  primitive_attr attr;
  dst_type = dt::f32;
  if (quantized_dst) {
    const int64_t z = p.yp.zero[0];
    po.eltwise(algorithm::eltwise_linear, 1.f / p.yp.scale[0], z % 2 == 0 ? float(z) : 0.f);
    if (z % 2 != 0) {
      po.eltwise(algorithm::eltwise_round, 0.f, 0.f);
      attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
    }
    dst_type = std::get<ops::QuantizeLinear>(g_.node(p.qy).op).to == DType::Int8 ? dt::s8 : dt::u8;
  }
  attr.set_post_ops(po.build());
  attr.set_output_scales(p.oscale.size() > 1 ? scale_mask : 0, p.oscale);
  if (p.xp.zero[0] != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  return attr;
}

int CpuExecutable::int8_const(const md_t& md, const void* data, size_t bytes, const TensorType& type) {
  Slot c;
  c.type = type;
  c.md = md;
  c.owned = aligned_floats(std::max(md.get_size(), bytes) / sizeof(float) + 1);
  std::memcpy(c.owned.get(), data, bytes);
  slots_.push_back(c);
  return int(slots_.size()) - 1;
}

int CpuExecutable::int8_weights(const Int8Plan& p, const md_t& from_md, const md_t& to_md, const std::string& who) {
  std::vector<int8_t> q(size_t(p.qw->q.size()));
  for (size_t i = 0; i < q.size(); ++i) q[i] = int8_t(p.qw->q[int64_t(i)]);
  Slot ws8;
  ws8.type = TensorType{DType::Int8, p.qw->q.shape()};
  ws8.md = to_md;
  ws8.owned = aligned_floats(to_md.get_size() / sizeof(float) + 1);
  memory from(from_md, eng_, q.data()), to(to_md, eng_, ws8.owned.get());
  dnnl_call(who, [&] { reorder(from, to).execute(strm_, from, to); });
  strm_.wait();
  slots_.push_back(ws8);
  return int(slots_.size()) - 1;
}

void CpuExecutable::int8_finish(Step& st, const Int8Plan& p, bool quantized_dst, std::optional<TensorId> bias, const md_t& bias_md) {
  if (bias) {
    // in units of the int32 sums: b / (scale_x * scale_w[c])
    const auto& bf = std::get<Tensor<float>>(*g_.tensor(*bias).value);
    const int64_t channels = int64_t(bias_md.get_size() / sizeof(float));
    std::vector<float> b(static_cast<size_t>(channels));
    for (int64_t i = 0; i < channels; ++i)
      b[size_t(i)] = float(double(bf[bf.size() == 1 ? 0 : i]) / double(p.oscale[p.oscale.size() > 1 ? size_t(i) : 0]));
    st.args.push_back({DNNL_ARG_BIAS, int8_const(bias_md, b.data(), b.size() * sizeof(float), g_.type(*bias))});
  }
  auto zero_point = [&](int arg, int64_t v) {
    const int32_t zv = int32_t(v);
    st.args.push_back({DNNL_ARG_ATTR_ZERO_POINTS | arg, int8_const(md_t({1}, dt::s32, memory::format_tag::x), &zv, sizeof zv, TensorType{DType::Int32, {1}})});
  };
  if (p.xp.zero[0] != 0) zero_point(DNNL_ARG_SRC, p.xp.zero[0]);
  if (quantized_dst && p.yp.zero[0] % 2 != 0) zero_point(DNNL_ARG_DST, p.yp.zero[0]);
  if (quantized_dst) {
    absorbed_.insert(p.qy);
    qdevice_.insert(g_.node(p.qy).outputs[0]);
  }
}

template <class PD, class Make>
std::optional<std::pair<PD, TensorId>> CpuExecutable::int8_choose(Int8Plan& p, Make&& make) {
  // oneDNN's reference int8 kernels are correct but far slower than the float ones
  auto usable = [](std::optional<PD> pd) { return pd && std::string(pd->impl_info_str()).rfind("ref", 0) != 0 ? pd : std::nullopt; };
  std::optional<PD> pd;
  if (p.qy >= 0) pd = usable(make(true));
  if (!pd) p.qy = -1, pd = usable(make(false));
  if (!pd) {
    absorbed_ = p.absorbed_before;
    return std::nullopt;
  }
  const TensorId dst = p.qy >= 0 ? g_.node(p.qy).outputs[0] : p.out;
  if (p.qy >= 0) p.text += cat(" + QuantizeLinear '", g_.node(p.qy).name, "' (writes ", dtype_name(g_.type(dst).dtype), ")");
  return std::pair{*pd, dst};
}

bool CpuExecutable::lower_qconv(NodeId n, const std::string& who) {
  const Node& node = g_.node(n);
  const auto* cp = std::get_if<ops::Conv>(&node.op);
  if (!cp) return false;
  const ops::Conv& c = *cp;
  Int8Plan p;
  p.out = node.outputs[0];
  if (!int8_begin(n, p)) return false;
  if (!int8_scales_ok(p, node.inputs.size() == 3 ? std::optional<TensorId>(node.inputs[2]) : std::nullopt)) {
    absorbed_ = p.absorbed_before;
    return false;
  }
  const TensorId x = node.inputs[0], w = node.inputs[1];
  const Shape &xs = g_.type(x).shape, &ws = g_.type(w).shape;
  const ConvGeometry geo(c, ws);
  const auto &strides = geo.strides, &dil = geo.dil, &pl = geo.pl, &pr = geo.pr;
  const Shape& wdims = geo.wdims;
  const int64_t O = ws[0];
  const bool bias = node.inputs.size() == 3;
  const dt src_type = slots_[size_t(p.tq)].md.data.data_type == dnnl_s8 ? dt::s8 : dt::u8;
  const md_t src_any(dims_of(xs), src_type, memory::format_tag::any), w_any(dims_of(wdims), dt::s8, memory::format_tag::any),
      b_md = plain_md({O});
  auto make = [&](bool quantized_dst) -> std::optional<convolution_forward::primitive_desc> {
    dt dst_type;
    const primitive_attr attr = int8_attr(p, quantized_dst, 1 << 1, dst_type);
    const md_t dst_any(dims_of(g_.type(p.out).shape), dst_type, memory::format_tag::any);
    try {
      auto d = bias ? convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct, src_any, w_any, b_md, dst_any,
                                                strides, dil, pl, pr)
                    : convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct, src_any, w_any, dst_any, strides,
                                                dil, pl, pr);
      return convolution_forward::primitive_desc(d, attr, eng_);
    } catch (const dnnl::error&) {
      return std::nullopt;
    }
  };
  const auto chosen = int8_choose<convolution_forward::primitive_desc>(p, make);
  if (!chosen) return false;
  const auto& [pd, dst] = *chosen;
  const bool quantized_dst = p.qy >= 0;
  // the int8 weight, reordered once into the kernel's layout
  const int w_slot = int8_weights(p, with_type(plain_md(wdims), dt::s8), pd.weights_desc(), who);
  const int xs_slot = as_layout(int(p.tq), pd.src_desc(), who);
  define(dst, pd.dst_desc());
  Step& st = add_step(cat(who, ": oneDNN int8 conv ", pd.impl_info_str(), " (", dtype_name(g_.type(p.tq).dtype), " source '", g_.tensor(p.tq).name,
                          "', int8 weights ", p.oscale.size() > 1 ? "per channel" : "per tensor", ", ", layout_name(pd.src_desc()), ")", p.text),
                      {xs_slot, w_slot}, {int(dst)});
  st.prim = primitive(convolution_forward(pd));
  st.args = {{DNNL_ARG_SRC, xs_slot}, {DNNL_ARG_WEIGHTS, w_slot}, {DNNL_ARG_DST, int(dst)}};
  int8_finish(st, p, quantized_dst, bias ? std::optional<TensorId>(node.inputs[2]) : std::nullopt, b_md);
  return true;
}

bool CpuExecutable::lower_qmatmul(NodeId n, const std::string& who) {
  const Node& node = g_.node(n);
  const auto* gm = std::get_if<ops::Gemm>(&node.op);
  if (!gm && !std::holds_alternative<ops::MatMul>(node.op)) return false;
  Int8Plan p;
  p.out = node.outputs[0];
  const TensorId x = node.inputs[0];
  if (!qint8_candidate(n, x)) return false;  // (which also makes the shapes below exist: A of rank 2 or more, B 2-D)
  const Shape& xs = g_.type(x).shape;
  const Shape& ws = g_.type(node.inputs[1]).shape;  // [K, N], or [N, K] for Gemm's trans_b
  const bool trans_b = gm && gm->trans_b;
  const int64_t K = xs.back(), N = trans_b ? ws[0] : ws[1], rows = numel(xs) / K;
  // A bias: Gemm's C, or a following Add of a constant [N] (before the post-ops)
  std::optional<TensorId> bias;
  const auto absorbed_outer = absorbed_;
  auto vector_n = [&](TensorId t) {
    const Shape& s = g_.type(t).shape;
    return g_.tensor(t).is_constant() && !s.empty() && numel(s) == N && s.back() == N;
  };
  if (gm && node.inputs.size() == 3) {
    if (!vector_n(node.inputs[2]) && numel(g_.type(node.inputs[2]).shape) != 1) return false;
    bias = node.inputs[2];
  }
  if (!bias)
    if (NodeId c = sole_consumer(p.out); c >= 0 && std::holds_alternative<ops::Add>(g_.node(c).op)) {
      const Node& add = g_.node(c);
      const TensorId other = add.inputs[0] == p.out ? add.inputs[1] : add.inputs[0];
      if (other != p.out && vector_n(other) && g_.type(add.outputs[0]).shape == g_.type(p.out).shape) {
        bias = other;
        absorbed_.insert(c);
        p.text += " + bias";
        p.out = add.outputs[0];
      }
    }
  if (!int8_begin(n, p)) {
    absorbed_ = absorbed_outer;
    return false;
  }
  p.absorbed_before = absorbed_outer;
  if (!int8_scales_ok(p, bias)) {
    absorbed_ = p.absorbed_before;
    return false;
  }
  const dt src_type = slots_[size_t(p.tq)].md.data.data_type == dnnl_s8 ? dt::s8 : dt::u8;
  const md_t src_md = with_type(plain_md({rows, K}), src_type), w_any(memory::dims{K, N}, dt::s8, memory::format_tag::any),
      b_md = plain_md({1, N});
  auto make = [&](bool quantized_dst) -> std::optional<matmul::primitive_desc> {
    dt dst_type;
    const primitive_attr attr = int8_attr(p, quantized_dst, 1 << 1, dst_type);
    try {
      const md_t dst_md = with_type(plain_md({rows, N}), dst_type);
      return matmul::primitive_desc(bias ? matmul::desc(src_md, w_any, b_md, dst_md) : matmul::desc(src_md, w_any, dst_md), attr, eng_);
    } catch (const dnnl::error&) {
      return std::nullopt;
    }
  };
  const auto chosen = int8_choose<matmul::primitive_desc>(p, make);
  if (!chosen) return false;
  const auto& [pd, dst] = *chosen;
  const bool quantized_dst = p.qy >= 0;
  // the int8 weight as [K, N] (Gemm's trans_b: its [N, K] seen transposed), reordered once
  const md_t w_user = trans_b ? md_t({K, N}, dt::s8, memory::dims{1, K}) : with_type(plain_md({K, N}), dt::s8);
  const int w_slot = int8_weights(p, w_user, pd.weights_desc(), who);
  // the source as [rows, K], plain
  const int plain_src = as_layout(int(p.tq), with_type(plain_md(xs), src_type), who);
  Slot sv = slots_[size_t(plain_src)];
  sv.md = src_md;
  sv.plain = -1;
  slots_.push_back(sv);
  const int src_view = int(slots_.size()) - 1;
  const Shape& ds = g_.type(dst).shape;
  define(dst, with_type(plain_md(ds), quantized_dst ? pd.dst_desc().data_type() : dt::f32));
  Slot dv = slots_[size_t(dst)];
  dv.md = pd.dst_desc();
  dv.plain = -1;
  slots_.push_back(dv);
  const int dst_view = int(slots_.size()) - 1;
  Step& st = add_step(cat(who, ": oneDNN int8 matmul ", pd.impl_info_str(), " (", dtype_name(g_.type(p.tq).dtype), " source '",
                          g_.tensor(p.tq).name, "', int8 weights ", p.oscale.size() > 1 ? "per channel" : "per tensor", ")", p.text),
                      {src_view, w_slot}, {int(dst)});
  st.prim = primitive(matmul(pd));
  st.args = {{DNNL_ARG_SRC, src_view}, {DNNL_ARG_WEIGHTS, w_slot}, {DNNL_ARG_DST, dst_view}};
  int8_finish(st, p, quantized_dst, bias, b_md);
  return true;
}

}  // namespace pet::backend::cpu_detail
