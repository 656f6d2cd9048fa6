#pragma once
// The oneDNN cpu backend's executable (private to kernels/cpu), split by concern:
//   executable.cpp     construction, slots and buffers, layouts and reorders, run, the plan text,
//                      the lowering dispatch and the reference fallback
//   memory_plan.cpp    buffers assigned by lifetime, reused once dead
//   fusion.cpp         post-op chains (activations, scalings, residual sums) a primitive absorbs
//   lower_conv.cpp     convs and their algorithm choice (direct blocked/plain, Winograd), timed
//   lower_matmul.cpp   MatMul and Gemm as oneDNN matmul (bias, scales, post-ops)
//   lower_ops.cpp      pools, element-wise, binary, softmax, layer norm, reductions, concat
//   lower_quant.cpp    quantized programs: QuantizeLinear / DequantizeLinear, int8 convs
//   lower_integer.cpp  ONNX's integer ops (dynamic quantization, QOperator format) on int8 kernels
//   lower_copies.cpp   views and pet's strided copies (R/T, transpose, slice, split, pad, patch, expand, tile)
//   lower_index.cpp    ops between float and integer tensors: Gather, GatherElements, Where, comparisons,
//                      ArgMax/ArgMin, TopK, IsNaN/IsInf, Cast
//   algorithm_cache.*  algorithm choices kept per configuration (in memory and on disk)
// The graph reaching the executable has been through transform::backend_pipeline()
// (constant and BN folding, Pad folding, LayerNorm and GELU as single ops, dead code).
//
// Compilation: nodes are lowered in order, convs and matmuls absorbing the activations,
// residual adds and biases that follow them as post-ops; every float tensor keeps the layout
// its producer chose (convs pick oneDNN's blocked layouts with format_tag::any), consumers
// that accept any layout read it as is, the others get one cached reorder to the plain
// layout; buffers are assigned by lifetime and reused once dead; views share their source's.
#include <dnnl.hpp>

#include <array>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "pet/backend/backend.hpp"
#include "pet/core/parallel.hpp"
#include "broadcast.hpp"
#include "winograd.hpp"

namespace pet::backend::cpu_detail {

using namespace dnnl;
using md_t = memory::desc;
using dt = memory::data_type;

inline memory::dims dims_of(const Shape& s) { return s.empty() ? memory::dims{1} : memory::dims(s.begin(), s.end()); }
inline md_t plain_md(const Shape& s) {
  memory::dims d = dims_of(s), st(d.size());
  int64_t acc = 1;
  for (int i = int(d.size()) - 1; i >= 0; --i) st[size_t(i)] = acc, acc *= d[size_t(i)];
  return md_t(d, dt::f32, st);
}
inline md_t any_md(const Shape& s) { return md_t(dims_of(s), dt::f32, memory::format_tag::any); }

/// A row-major shape seen as [outer, len, inner] around dims [first, last]: the extents
/// before, of, and after them (a kernel along an axis, or over a block of neighbouring dims).
struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;
  AxisSplit(const Shape& s, int64_t first, int64_t last) {
    for (size_t d = 0; d < s.size(); ++d) (int64_t(d) < first ? outer : int64_t(d) > last ? inner : len) *= s[d];
  }
  AxisSplit(const Shape& s, int64_t axis) : AxisSplit(s, axis, axis) {}
};

/// A kernel along an axis, walked over contiguous rows: f(o, i0, w) for each outer index o
/// and block of up to 256 neighbouring inner positions [i0, i0 + w), blocks in parallel.
template <class F>
void for_axis_blocks(const AxisSplit& s, F&& f) {
  const int64_t blocks = (s.inner + 255) / 256, per_block = s.len * std::min<int64_t>(s.inner, 256);
  parallel_chunks(s.outer * blocks, std::max<int64_t>(1, 16384 / std::max<int64_t>(per_block, 1)), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const int64_t i0 = (p % blocks) * 256;
      f(p / blocks, i0, std::min<int64_t>(256, s.inner - i0));
    }
  });
}

/// The position ops::ArgReduce's rule (O::replaces, O ArgMax or ArgMin) picks in one
/// contiguous row, in two passes: the best non-NaN value (row_extreme),
/// then its first (with select_last_index its last) occurrence; 0 when every value is NaN.
/// Walking the row with O::replaces ends at the same position: NaN never wins over a number,
/// ties keep the first (or move to the last), +0 and -0 tie.
/// The largest (max) or smallest non-NaN value of a contiguous row; -inf (+inf) when there is
/// none. L running values, which the compiler vectorises into independent registers: 64 on
/// long rows (one running value was latency bound, 4x slower on rows of 32000), 16 on short
/// ones (where reducing 64 at the end costs more than the row).
template <bool max, int L>
float row_extreme_lanes(const float* row, int64_t len) {
  auto better = [](float v, float m) { return max ? (v > m ? v : m) : (v < m ? v : m); };
  constexpr float none = max ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  float lanes[L];
  std::fill(lanes, lanes + L, none);
  int64_t k = 0;
  for (; k + L <= len; k += L)
    for (int j = 0; j < L; ++j) lanes[j] = better(row[k + j], lanes[j]);
  float m = none;
  for (; k < len; ++k) m = better(row[k], m);
  for (int j = 0; j < L; ++j) m = better(lanes[j], m);
  return m;
}
template <bool max>
float row_extreme(const float* row, int64_t len) {
  return len >= 256 ? row_extreme_lanes<max, 64>(row, len) : row_extreme_lanes<max, 16>(row, len);
}

template <class O>
int64_t best_in_row(const float* row, int64_t len, bool last) {
  const float m = row_extreme<std::is_same_v<O, ops::ArgMax>>(row, len);
  if (last) {
    for (int64_t k = len; k-- > 0;)
      if (row[k] == m) return k;
  } else {
    for (int64_t k = 0; k < len; ++k)
      if (row[k] == m) return k;
  }
  return 0;
}

/// The same rule for w (at most 256) neighbouring positions at once: `base` the first row of
/// a block of sp (rows sp.inner apart, sp.len of them, at least 1), the positions picked into
/// best[0, w), the rows walked once in order.
template <class O>
void best_in_block(const AxisSplit& sp, const float* base, int64_t w, bool last, int64_t* best) {
  float bv[256];
  std::copy(base, base + w, bv);
  std::fill(best, best + w, int64_t(0));
  for (int64_t k = 1; k < sp.len; ++k) {
    const float* row = base + k * sp.inner;
    for (int64_t i = 0; i < w; ++i)
      if (O::replaces(row[i], bv[i], last)) best[i] = k, bv[i] = row[i];
  }
}

/// Wraps a oneDNN call: its errors become pet errors naming the node.
template <class F>
auto dnnl_call(const std::string& who, F&& f) {
  try {
    return f();
  } catch (const dnnl::error& e) {
    throw Unsupported(cat(who, ": oneDNN: ", e.what()));
  }
}

/// 64-byte aligned float storage of at least n elements.
inline std::shared_ptr<float[]> aligned_floats(size_t n) {
  size_t bytes = std::max<size_t>(64, (n * sizeof(float) + 63) / 64 * 64);
  return std::shared_ptr<float[]>(static_cast<float*>(std::aligned_alloc(64, bytes)), [](float* p) { std::free(p); });
}

/// A quantization op's constant parameters, expanded: one value per tensor, or one per index
/// of `axis`.
struct QuantParams {
  std::vector<float> scale;
  std::vector<int64_t> zero;
  int64_t axis = -1;
  bool per_tensor() const { return axis < 0; }
};

/// A conv's strides, dilations (oneDNN's: less 1), pads and weight dims (grouped:
/// [G, O/G, I/G, k...]), as oneDNN's conv descriptors take them.
struct ConvGeometry {
  memory::dims strides, dil, pl, pr;
  Shape wdims;
  ConvGeometry(const ops::Conv& c, const Shape& ws) : strides(c.strides.begin(), c.strides.end()), wdims(ws) {
    const size_t k = ws.size() - 2;
    pl.assign(c.pads.begin(), c.pads.begin() + long(k));
    pr.assign(c.pads.begin() + long(k), c.pads.end());
    for (int64_t d : c.dilations) dil.push_back(d - 1);
    if (c.group > 1) {
      wdims[0] = ws[0] / c.group;
      wdims.insert(wdims.begin(), c.group);
    }
  }
};

struct Slot {
  TensorType type;
  md_t md;                         ///< float layout (empty for integer tensors)
  int request = -1;                ///< buffer request (float, non-constant)
  std::shared_ptr<float[]> owned;  ///< constants: their own storage
  /// integer tensors (and constants, for fallbacks); read through CpuExecutable::host_of: a
  /// 1-byte integer constant (a quantized weight) is widened only when something reads it so
  std::optional<Value<float>> host;
  int plain = -1;                  ///< slot with the same tensor in plain layout, once made
  bool is_float() const { return pet::is_float(type.dtype); }
};

struct Step {
  std::string text;
  std::optional<primitive> prim;
  std::vector<std::pair<int, int>> args;  ///< (DNNL_ARG_*, slot)
  std::unordered_map<int, memory> argmap;
  std::function<void()> fn;
  std::vector<int> reads, writes;
};

struct Request {
  size_t bytes = 0;
  int first = INT32_MAX, last = -1;
  int buffer = -1;
  bool pinned = false;  ///< graph input or output: never shared
};

class CpuExecutable final : public Executable {
 public:
  CpuExecutable(const Graph& original, const CompileOptions& opt);
  std::vector<Value<float>> run(std::span<const Value<float>> inputs) override;
  std::string describe() const override;
  /// Whether oneDNN's int8 kernels compute exactly here (VNNI; see lower_quant.cpp).
  static bool int8_isa();

 private:
  // ------------------------------------------------------------ slots and buffers
  int new_request(TensorId for_tensor, size_t bytes = 0);
  int new_slot(const TensorType& t, const md_t& md);
  /// Gives tensor t (a node output) a fresh buffer in layout md.
  void define(TensorId t, const md_t& md);
  /// Makes slot `view` share slot `src`'s buffer with another layout (same bytes).
  void alias(int view, int src, const md_t& md);
  float* ptr(int s);
  /// Slot s's host value; a graph constant's is made on first use (1-byte integer constants
  /// are not widened to int64 unless a reader needs them so).
  const Value<float>& host_of(int s);
  const Tensor<int64_t>& host_ints(int s) { return std::get<Tensor<int64_t>>(host_of(s)); }
  /// Points request q at external memory (the caller's input, a fresh output tensor) or, with
  /// nullptr, back at its planned buffer: every primitive argument on it follows.
  void bind(int q, float* p);
  bool is_plain(int s) const;
  bool is_const(int s) const;
  Step& add_step(std::string text, std::vector<int> reads, std::vector<int> writes);
  /// The graph's float constants' storage, which slots use in place (read only).
  std::set<const float*> graph_constants_;
  /// Bytes of constants as_layout reordered, and of them those another executable had (shared).
  size_t reordered_bytes_ = 0, shared_reorder_bytes_ = 0;
  /// A slot holding s in layout md (a reorder step, cached for the plain layout; constants
  /// are reordered once here).
  int as_layout(int s, const md_t& md, const std::string& why);
  int plain_slot(int s);
  static std::string layout_name(const md_t& md);
  // ------------------------------------------------------------ memory planning
  void plan_memory();
  // ------------------------------------------------------------ fusion helpers
  bool single_use(TensorId t) const;
  NodeId sole_consumer(TensorId t) const;
  /// The Sigmoid and Mul of `t * sigmoid(t)` (SiLU, as PyTorch exports it: t read by exactly
  /// those two, the Sigmoid's result by the Mul alone), run as one oneDNN swish.
  std::optional<std::pair<NodeId, NodeId>> silu_after(TensorId t) const;
  /// An activation node's oneDNN eltwise form, if any.
  static std::optional<std::tuple<algorithm, float, float>> eltwise_of(const Op& op);
  static bool fusable_activation(const Op& op);
  /// The post-ops of one primitive, kept to what oneDNN 2.6 computes exactly: scalings and
  /// shifts that follow each other compose into one linear post-op, and no eltwise kind
  /// appears twice. (Its jit kernels -- brgconv, binary, matmul -- keep one set of parameters
  /// per eltwise kind, so a second Clip, linear or relu in one chain computed with the
  /// first one's: `x * 0.5 * 0.689` came out as `x * 0.5 * 0.5`.) A chain stops where that
  /// would happen; the rest runs as the next primitives, and the plan says why.
  struct PostOpChain {
    struct Entry {
      bool sum = false;
      algorithm alg = algorithm::eltwise_linear;
      float alpha = 0, beta = 0;
    };
    std::vector<Entry> entries;
    bool has_sum() const {
      return std::any_of(entries.begin(), entries.end(), [](const Entry& e) { return e.sum; });
    }
    /// Whether an eltwise of this kind can be appended (or, for a linear right after a
    /// linear, composed).
    bool accepts(algorithm alg) const {
      if (alg == algorithm::eltwise_linear && !entries.empty() && !entries.back().sum && entries.back().alg == alg) return true;
      return std::none_of(entries.begin(), entries.end(), [&](const Entry& e) { return !e.sum && e.alg == alg; });
    }
    void eltwise(algorithm alg, float a, float b) {
      if (alg == algorithm::eltwise_linear && !entries.empty() && !entries.back().sum && entries.back().alg == alg) {
        Entry& l = entries.back();  // a2 (a1 x + b1) + b2
        l.beta = a * l.beta + b;
        l.alpha = a * l.alpha;
        return;
      }
      entries.push_back({false, alg, a, b});
    }
    void sum() { entries.push_back({true}); }
    post_ops build() const {
      post_ops po;
      for (const Entry& e : entries) {
        if (e.sum) po.append_sum(1.f);
        else po.append_eltwise(1.f, e.alg, e.alpha, e.beta);
      }
      return po;
    }
  };
  static std::string split_note(const Op& op);
  /// Appends the activations, scalings and shifts (and, when allowed, one residual add) that
  /// follow tensor t as post-ops; returns the last tensor absorbed and the residual (or -1).
  std::pair<TensorId, TensorId> absorb_post_ops(TensorId t, PostOpChain& po, std::string& text, bool allow_sum);
  /// Fills the destination with the residual before a primitive with a sum post-op: in place
  /// when the residual dies here in the right layout, else a reorder (copy).
  void prepare_residual(TensorId dst_t, TensorId residual, const md_t& dst_md, const std::string& who);
  // ------------------------------------------------------------ lowering
  void lower(NodeId n);

  /// Ops the reference kernels run (named in the plan). Every other op has its lowering
  /// below; an op in neither place does not compile.
  template <class O>
    requires is_one_of<O, ops::Where, ops::Gather, ops::ShapeOf, ops::Constant,
                      ops::ArgMax, ops::ArgMin, ops::Einsum, ops::Equal,
                      ops::Less, ops::LessOrEqual, ops::Greater, ops::GreaterOrEqual, ops::And, ops::Or, ops::Xor, ops::Not,
                      ops::IsNaN, ops::IsInf,
                      ops::TopK, ops::GatherElements, ops::GatherND, ops::RoiAlign, ops::Det,
                      ops::BitwiseAnd, ops::BitwiseOr, ops::BitwiseXor, ops::BitwiseNot, ops::BitShift,
                      ops::ScatterElements, ops::ScatterND, ops::QuantizeLinear, ops::DequantizeLinear, ops::DynamicQuantizeLinear,
                      ops::MatMulInteger, ops::ConvInteger, ops::QLinearMatMul, ops::QLinearConv>
  bool lower_op(NodeId, const O&, const std::string&) {
    return false;
  }
  /// QDQ pairs (quantized models): a QuantizeLinear whose result only DequantizeLinears read,
  /// all with constant scales and zero points (per tensor, or on one common axis), computes
  /// nothing itself; each DequantizeLinear then computes quantize-and-back from the float
  /// input in one step (the ops' own element functions), the int8 tensor never written.
  /// True when n was lowered so (a DequantizeLinear) or left to its readers (a QuantizeLinear).
  bool lower_qdq(NodeId n, const std::string& who);
  std::map<TensorId, NodeId> qdq_pending_;  ///< results of QuantizeLinears left to their DequantizeLinears
  /// Whether t is a QuantizeLinear's result (constant parameters) that only DequantizeLinears
  /// (constant parameters, on the same axis) read, and not a graph output.
  bool quantized_pair(TensorId t) const;
  /// int8 weights of the original program's convs, MatMuls and Gemms (DequantizeLinear of a
  /// constant int8 tensor, zero points 0, per tensor or per output channel), by node name: the
  /// backend passes fold them to float, and an int8 kernel takes them back where the folded
  /// weight is still exactly their dequantized value (node_qweights checks).
  struct QuantWeights {
    Tensor<int8_t> q;  ///< the graph's own storage
    std::vector<float> scale;
    int64_t axis = -1;  ///< of the scales (-1: per tensor)
  };
  std::multimap<std::string, QuantWeights> qweights_;
  std::map<NodeId, const QuantWeights*> qweights_of_;
  void collect_quant_weights(const Graph& original);
  const QuantWeights* node_qweights(NodeId n);
  /// Whether a Conv, MatMul or Gemm can run int8 reading x: x is a per-tensor
  /// DequantizeLinear's result of a per-tensor quantized pair, the weight is its int8 weight
  /// (a MatMul's: 2-D), its bias constant (a Gemm's: alpha and beta 1, A not transposed).
  bool qint8_candidate(NodeId n, TensorId x);
  /// The DequantizeLinear producing t, if it is per tensor and reads a per-tensor quantized
  /// pair or a QLinearConv's or QLinearMatMul's result (an int8 tensor an int8 step can read
  /// instead of t); else -1.
  NodeId int8_source(TensorId t) const;
  /// Whether only int8 kernels read the DequantizeLinear's result (it need not be computed).
  bool dq_deferrable(NodeId dq);
  bool int8_ = false;                        ///< int8 kernels allowed (CompileOptions::int8) and exact here (int8_isa)
  /// int8 steps between int8 tensors allowed (tables, element-wise steps, pooling, concat,
  /// moves): with int8_, and in programs with QLinearConv or QLinearMatMul (whose results are
  /// int8 buffers whatever the kernel, lower_integer.cpp) where CompileOptions::int8 allows
  bool glue_ = false;
  std::set<TensorId> qdevice_;              ///< int8 tensors in buffers (u8 / s8 layouts)
  std::map<TensorId, NodeId> dq_deferred_;  ///< DequantizeLinear results not computed (int8 convs read the int8 tensor)
  /// A QuantizeLinear (per tensor) writing its int8 tensor, in its source's layout.
  void quantize_step(NodeId q, const std::string& who);
  /// A DequantizeLinear reading an int8 tensor in a buffer.
  void dequantize_step(NodeId dq, const std::string& who);
  /// What an int8 conv or matmul shares: its int8 source and the DequantizeLinear's
  /// parameters, the int8 weight, output scales, the post-ops absorbed and the
  /// QuantizeLinear after them that the kernel may compute too.
  struct Int8Plan {
    TensorId tq = -1, out = -1;  ///< the int8 source; the last float tensor absorbed
    QuantParams xp, yp;
    const QuantWeights* qw = nullptr;
    std::vector<float> oscale;
    PostOpChain chain;
    std::string text;
    NodeId qy = -1;  ///< the QuantizeLinear the kernel may absorb (-1: none)
    std::set<NodeId> absorbed_before;
  };
  /// Fills p for node n (p.out: its float result) if it can run int8; absorbs its post-ops.
  bool int8_begin(NodeId n, Int8Plan& p);
  /// Whether the scales make sense for an int8 kernel (normal, positive; the bias finite in
  /// units of the int32 sums); an output QuantizeLinear with a degenerate scale is left out.
  bool int8_scales_ok(Int8Plan& p, std::optional<TensorId> bias) const;
  /// The kernel's attributes: output scales (per channel on dim `scale_mask`), post-ops,
  /// zero points; with quantized_dst, the QuantizeLinear computed too (dst_type: u8 or s8).
  primitive_attr int8_attr(const Int8Plan& p, bool quantized_dst, int scale_mask, dt& dst_type) const;
  /// The kernel made with the QuantizeLinear computed too where it can be (make(true)), else
  /// with a float result (make(false)); oneDNN's reference kernels refused. The primitive and
  /// its destination tensor (p.qy: -1 when not absorbed), or nullopt with the absorbed ops
  /// restored.
  template <class PD, class Make>
  std::optional<std::pair<PD, TensorId>> int8_choose(Int8Plan& p, Make&& make);
  /// A constant slot holding `bytes` of data in layout md.
  int int8_const(const md_t& md, const void* data, size_t bytes, const TensorType& type);
  /// The int8 weight (in layout from_md) reordered once into to_md.
  int int8_weights(const Int8Plan& p, const md_t& from_md, const md_t& to_md, const std::string& who);
  /// Adds the bias (in units of the int32 sums) and zero points to the step; marks the
  /// absorbed QuantizeLinear's result as an int8 tensor in a buffer.
  void int8_finish(Step& st, const Int8Plan& p, bool quantized_dst, std::optional<TensorId> bias, const md_t& bias_md);
  /// A conv on oneDNN's int8 kernel (see lower_quant.cpp); false where it does not apply.
  bool lower_qconv(NodeId n, const std::string& who);
  /// A MatMul ([.., M, K] x [K, N]) or Gemm with an int8 weight on oneDNN's int8 matmul.
  bool lower_qmatmul(NodeId n, const std::string& who);
  /// Add, Sub or Mul of two per-tensor dequantized int8 tensors of its shape, whose result
  /// only a per-tensor quantized pair reads (residual adds, SiLU's Mul in QDQ models): the
  /// QuantizeLinear it absorbs, or -1.
  NodeId qbinary_output_q(NodeId n) const;
  bool qbinary_candidate(NodeId n) const;
  /// Such a binary as one pet step from the int8 tensors to the int8 result (the ops' float
  /// formulas in their order); false where an int8 input exists only in float.
  bool lower_qbinary(NodeId n, const std::string& who);
  /// A unary element-wise op between a per-tensor DequantizeLinear and QuantizeLinear
  /// (Sigmoid, Tanh, HardSwish, ... in QDQ models): a 256-entry table from the int8 input to
  /// the int8 result, each entry the three ops' own evaluation.
  NodeId qunary_output_q(NodeId n) const;
  bool qunary_candidate(NodeId n) const;
  bool lower_qunary(NodeId n, const std::string& who);
  /// A 256-entry table from int8 slot x to int8 slot y (table[x ^ 128] for signed x).
  void table_step(int x, int y, std::shared_ptr<std::array<uint32_t, 256>> table, bool signed_x, std::string text);
  /// Whether only ONNX's integer ops (QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger)
  /// read t, and t is not an output (int8 steps may then write it for them).
  bool integer_readers(TensorId t) const;
  /// The per-tensor quantized pair that alone reads t (t's sole consumer a QuantizeLinear whose
  /// DequantizeLinears are all per tensor, or whose result only integer ops read): that
  /// QuantizeLinear, or -1.
  NodeId requantizer(TensorId t) const;
  /// For a node between a per-tensor DequantizeLinear and QuantizeLinear with the same scale,
  /// zero point and int8 type (on input 0 and its one output): that QuantizeLinear, or -1.
  NodeId same_quantization(NodeId n) const;
  /// MaxPool between a DequantizeLinear and a QuantizeLinear with the same scale, zero point
  /// and type (max commutes with them, exactly): oneDNN's pooling on the int8 tensor.
  NodeId qpool_output_q(NodeId n) const;
  bool lower_qpool(NodeId n, const std::string& who);
  /// Concat of per-tensor dequantized int8 tensors, quantized again: each input requantized
  /// by a 256-entry table where its scale or zero point differ, then oneDNN's concat on int8.
  NodeId qconcat_output_q(NodeId n) const;
  bool lower_qconcat(NodeId n, const std::string& who);
  /// Reshape, Flatten, Squeeze, Unsqueeze, Identity (views) and Transpose (a oneDNN reorder)
  /// between a DequantizeLinear and a QuantizeLinear with the same scale, zero point and type:
  /// on the int8 tensor (moving values commutes with both, exactly).
  NodeId qmove_output_q(NodeId n) const;
  bool lower_qmove(NodeId n, const std::string& who);
  // ONNX's integer ops (lower_integer.cpp): DynamicQuantizeLinear, MatMulInteger, ConvInteger,
  // QLinearMatMul, QLinearConv.
  /// Lowers n if it is one of them and can run here: DynamicQuantizeLinear always (a pet step);
  /// the others on oneDNN's int8 kernels where int8_ allows (else its f32 kernels, exact within
  /// a bound on the sums), with a constant weight (or a matmul's run-time B) and (QLinear ops)
  /// constant scales and output zero point.
  bool lower_integer(NodeId n, const std::string& who);
  void lower_dynamic_quantize(NodeId n, const std::string& who);
  /// A slot holding int8 tensor t in a byte buffer: t's own (qdevice_), a constant's copy, or
  /// one step writing its host value there (plain layout).
  int int8_buffer(TensorId t, const std::string& who);
  /// Gives an int8 tensor that lives in a buffer (qdevice_) its host value, for readers that
  /// take host values (the reference fallback, other lowerings, the outputs): one copy step.
  void ensure_host(TensorId t, const std::string& who);
  std::set<TensorId> host_copied_;
  /// Whether node c can read the int8 tensor behind the DequantizeLinear result y directly.
  bool int8_reader(NodeId c, TensorId y);
  bool lower_op(NodeId n, const ops::Conv& c, const std::string& who);
  /// ConvTranspose on oneDNN's deconvolution (blocked layouts; the bias a binary add after it),
  /// the weight read as a strided view of ONNX's [C_in, C_out/G, k...].
  bool lower_op(NodeId n, const ops::ConvTranspose& c, const std::string& who);
  /// Inference BatchNormalization that no conv absorbed (DenseNet's, after a Concat) on
  /// oneDNN's batch norm, in the input's layout, with a following Relu fused.
  bool lower_op(NodeId n, const ops::BatchNormalization& bn, const std::string& who);
  /// Whether some output position of the conv reads only padding along a spatial dim (its
  /// window lies wholly in the pads).
  static bool sees_only_padding(const ops::Conv& c, const Shape& xs);
  /// Whether t (in a blocked layout) would need a reorder: a graph output, or read by an op
  /// that works on plain layouts only (pet copies, matmuls, reshapes).
  bool wants_plain(TensorId t) const;
  /// Fastest of five undisturbed runs of f (three once 50 ms were spent) after one warm-up, in seconds:
  /// the compile-time algorithm choices. The minimum, because other tenants of a shared
  /// machine only ever add time; runs during which a thread was preempted are dropped (up to
  /// 30 tries). Bounded, because a batch-16 conv runs 0.2 s and on a shared 2-core machine
  /// most such runs are preempted somewhere (CSRNet at batch 16 spent 100 s choosing its
  /// convs' algorithms): once 0.5 s were spent, one clean run decides (past 1 s, two runs of
  /// any kind, then not kept in the cache); and a candidate whose
  /// clean run takes over 1.5 x `bound` (the best candidate so far) has lost, and is not timed
  /// further. With no clean run at all (or too few in a short timing), the minimum of all, and
  /// `timings_clean_` turns false so that the choice is not kept in the algorithm cache.
  template <class F>
  double best_seconds(F&& f, double bound = 1e30) {
    double best = 1e30, any = 1e30;
    int clean = 0;
    f();
    strm_.wait();
    double spent = 0;
    int want = 5;
    for (int i = 0; i < 30 && clean < want; ++i) {
      const DisturbanceProbe probe;
      auto t0 = std::chrono::steady_clock::now();
      f();
      strm_.wait();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      any = std::min(any, s);
      spent += s;
      if (!probe.disturbed()) best = std::min(best, s), ++clean;
      if (clean && best > 1.5 * bound) return best;  // lost
      if (spent > 0.05 && clean >= 3) want = clean;  // a large op: three clean runs decide
      if (spent > 0.5 && clean >= 1) return best;    // a large op on a busy machine: one does
      if (spent > 1.0 && i >= 1) break;              // ... and without one, two runs say enough
    }
    if (clean < want) timings_clean_ = false;
    return clean ? best : any;
  }
  bool timings_clean_ = true;
  /// Best time of a reorder between two layouts (scratch buffers).
  double time_reorder(const md_t& from, const md_t& to);
  /// Best time of pet's Winograd conv on scratch buffers with the direct conv's layouts.
  double time_winograd(cpu::Winograd4x3& wg, const md_t& src_md, const md_t& dst_md, double bound = 1e30);
  /// Best time of a primitive on scratch buffers (algorithm choice at compile time).
  /// (a conv's or a matmul's: its source, weights, bias and destination on zeroed scratch)
  template <class PD>
  double time_pd(const PD& pd, double bound = 1e30) {
    std::vector<std::shared_ptr<float[]>> keep;
    auto mem = [&](const md_t& md) {
      keep.push_back(aligned_floats(md.get_size() / sizeof(float) + 1));
      std::memset(keep.back().get(), 0, md.get_size());
      return memory(md, eng_, keep.back().get());
    };
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(pd.src_desc())}, {DNNL_ARG_WEIGHTS, mem(pd.weights_desc())},
                                         {DNNL_ARG_DST, mem(pd.dst_desc())}};
    if (pd.bias_desc().get_size()) args.emplace(DNNL_ARG_BIAS, mem(pd.bias_desc()));
    std::conditional_t<std::is_same_v<PD, matmul::primitive_desc>, matmul, convolution_forward> prim(pd);
    return best_seconds([&] { prim.execute(strm_, args); }, bound);
  }
  /// Matrix products (MatMul, Gemm) as oneDNN matmul on plain layouts; constant right
  /// operands are reordered once into the layout the primitive prefers. `fuse`: which
  /// following ops may join as post-ops (2: activations, scalings and a residual add; 1: no
  /// residual add; 0: none); when oneDNN has only its reference implementation for a chain
  /// (a residual add after an activation, for its gemm matmul: 100x slower), the lowering
  /// tries again with less.
  bool lower_matmul(NodeId n, TensorId a, TensorId b, md_t amd, md_t bmd, const Shape& ys, const std::string& who, float alpha,
                    std::optional<TensorId> bias_t, float beta, int fuse = 2);
  static Shape with_rank(const Shape& s, size_t r);
  bool lower_op(NodeId n, const ops::MatMul&, const std::string& who);
  bool lower_op(NodeId n, const ops::Gemm& gm, const std::string& who);

  /// Pools: oneDNN pooling on the input's own layout (int8 max pools: the int8 tensor `src`
  /// in, the int8 tensor `dst` of type `dst_type` out).
  template <class W>
  bool lower_pool(NodeId n, const W& p, algorithm alg, const std::string& who, int src = -1, TensorId dst = -1, dt dst_type = dt::f32) {
    const Node& node = g_.node(n);
    if (node.outputs.size() != 1) return false;
    const TensorId x = node.inputs[0];
    if (src < 0) src = int(x), dst = node.outputs[0];
    const Shape &xs = g_.type(x).shape, &ys = g_.type(node.outputs[0]).shape;
    const size_t k = xs.size() - 2;
    memory::dims strides(p.strides.begin(), p.strides.end()), kernel(p.kernel_shape.begin(), p.kernel_shape.end()), dil,
        pl(p.pads.begin(), p.pads.begin() + long(k)), pr(k);
    for (size_t i = 0; i < k; ++i) {
      dil.push_back(p.dilations[i] - 1);
      // the right padding that yields ONNX's output size (ceil_mode extends it)
      pr[i] = (ys[2 + i] - 1) * p.strides[i] + (p.kernel_shape[i] - 1) * p.dilations[i] + 1 - xs[2 + i] - p.pads[i];
      if (pr[i] < 0) pr[i] = 0;
      // include_padding divides by the whole window, as the formula; an end pad no window
      // reaches (a Pad folded into MaxViT's 3x3 stride-2 pool of 112 rows: pr 0 of 1) is
      // left out, which changes nothing; one that ceil_mode extends stays on pet's kernel
      if (alg == algorithm::pooling_avg_include_padding && pr[i] > p.pads[i + k]) return false;
    }
    auto pd = dnnl_call(who, [&] {
      return pooling_v2_forward::primitive_desc(
          pooling_v2_forward::desc(prop_kind::forward_inference, alg, slots_[size_t(src)].md, md_t(dims_of(ys), dst_type, memory::format_tag::any),
                                   strides, kernel, dil, pl, pr),
          eng_);
    });
    // int8: oneDNN's reference pooling (plain layouts) is far slower than the float path
    if (dst_type != dt::f32 && std::string_view(pd.impl_info_str()).substr(0, 3) == "ref") return false;
    // A plain 3-D input (a graph input, a pet kernel's output) gets oneDNN 2.6's simple_nchw
    // kernel: 92 ms for a 3x3x3 max pool of [1,32,16,56,56] that its jit kernel, on the
    // channel-blocked layout after one reorder, does in about 2.
    const std::string_view impl = pd.impl_info_str();
    if (dst_type == dt::f32 && (impl.substr(0, 6) == "simple" || impl.substr(0, 3) == "ref"))
      for (int block : {16, 8}) {
        using tag = memory::format_tag;
        if (xs.size() < 3 || xs.size() > 5) break;
        const tag t = xs.size() == 5 ? (block == 16 ? tag::nCdhw16c : tag::nCdhw8c) : xs.size() == 4 ? (block == 16 ? tag::nChw16c : tag::nChw8c)
                                                                                                   : (block == 16 ? tag::nCw16c : tag::nCw8c);
        const md_t blocked(dims_of(xs), dt::f32, t);
        try {
          auto bpd = pooling_v2_forward::primitive_desc(
              pooling_v2_forward::desc(prop_kind::forward_inference, alg, blocked, md_t(dims_of(ys), dt::f32, memory::format_tag::any), strides, kernel, dil, pl, pr), eng_);
          if (std::string_view(bpd.impl_info_str()).substr(0, 3) != "jit") continue;
          src = as_layout(src, blocked, who);
          pd = bpd;
          break;
        } catch (const dnnl::error&) {
        }
      }
    define(dst, pd.dst_desc());
    Step& st = add_step(cat(who, ": oneDNN ", dst_type == dt::f32 ? "" : "int8 ", "pooling ", pd.impl_info_str()), {src}, {int(dst)});
    st.prim = primitive(pooling_v2_forward(pd));
    st.args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, int(dst)}};
    return true;
  }
  bool lower_op(NodeId n, const ops::MaxPool& p, const std::string& who);
  bool lower_op(NodeId n, const ops::AveragePool& p, const std::string& who);
  bool lower_op(NodeId n, const ops::GlobalAveragePool&, const std::string& who);
  /// Element-wise activations standalone (when nothing absorbed them), on any layout.
  bool lower_eltwise(NodeId n, const std::string& who);
  /// A group of at least 3 small element-wise ops (2 on at most 4096 elements; unary ops, Add/Sub/Mul/Div) on plain
  /// tensors of one shape, seeded at n, as one pet step that evaluates the ops' own formulas
  /// block by block (the gates of an unrolled LSTM); false when none forms.
  bool fuse_elementwise(NodeId n, const std::string& who);
  bool lower_op(NodeId n, const ops::Relu&, const std::string& who);
  bool lower_op(NodeId n, const ops::LeakyRelu&, const std::string& who);
  bool lower_op(NodeId n, const ops::Sigmoid&, const std::string& who);
  bool lower_op(NodeId n, const ops::Tanh&, const std::string& who);
  bool lower_op(NodeId n, const ops::Gelu&, const std::string& who);
  bool lower_op(NodeId n, const ops::Exp&, const std::string& who);
  bool lower_op(NodeId n, const ops::Sqrt&, const std::string& who);
  bool lower_op(NodeId n, const ops::Neg&, const std::string& who);
  bool lower_op(NodeId n, const ops::Clip&, const std::string& who);
  /// Erf standing alone (a GELU that QDQ nodes split, so that no Gelu formed): Eigen's
  /// vectorised erf, on any layout (erf(0) = 0 keeps blocked layouts' padding zero).
  bool lower_op(NodeId n, const ops::Erf&, const std::string& who);
  /// Float unary ops without a oneDNN eltwise algorithm: pet's element-wise kernel, the op's
  /// own formula (`apply`) over the buffer in chunks, multi-threaded; on the input's layout
  /// where it has no padding (f(0) need not be 0), else on plain.
  template <class O>
    requires is_one_of<O, ops::Floor, ops::Ceil, ops::Sign, ops::Softsign, ops::Selu, ops::HardSigmoid, ops::Celu, ops::ThresholdedRelu,
                       ops::Shrink, ops::Sin, ops::Cos, ops::Tan, ops::Asin, ops::Acos, ops::Atan, ops::Sinh, ops::Cosh, ops::Asinh,
                       ops::Acosh, ops::Atanh>
  bool lower_op(NodeId n, const O& op, const std::string& who) {
    return lower_pet_unary(n, who, [op](const float* a, float* o, int64_t len) {
      for (int64_t i = 0; i < len; ++i) o[i] = op.template apply<float>(a[i]);
    });
  }
  bool lower_pet_unary(NodeId n, const std::string& who, std::function<void(const float*, float*, int64_t)> kernel);
  /// PRelu on oneDNN's prelu (the slope broadcast as ONNX's unidirectional rule says), plain
  /// layouts; pet's broadcasting kernel where oneDNN has only its generic one.
  bool lower_op(NodeId n, const ops::PRelu& op, const std::string& who);
  /// InstanceNormalization: pet's row kernel (two passes in double, as the formula), plain.
  bool lower_op(NodeId n, const ops::InstanceNormalization& op, const std::string& who);
  /// Log, Softplus and Mish: pet's element-wise kernel on Eigen's vectorised log, log1p and
  /// exp (within about 1, 4 and 5 ulp of the exact values). oneDNN 2.6's eltwise log is
  /// off by up to 1.4e-6 absolute near 1 (log(1) = -1.4e-6, 30 % off at 1 + 1e-5), which its
  /// soft_relu and mish inherit (Softplus(-79) = 7.6e-6 for 4.6e-35).
  bool lower_op(NodeId n, const ops::Log&, const std::string& who);
  bool lower_op(NodeId n, const ops::Softplus&, const std::string& who);
  bool lower_op(NodeId n, const ops::Mish&, const std::string& who);
  /// Element-wise ops with a oneDNN eltwise algorithm (eltwise_of).
  template <class O>
    requires is_one_of<O, ops::Abs, ops::Reciprocal, ops::Round, ops::HardSwish, ops::Elu>
  bool lower_op(NodeId n, const O&, const std::string& who) {
    return lower_eltwise(n, who);
  }
  // Max and Min propagate a NaN from either operand (the ops' formula); oneDNN's binary max
  // and min return the other operand, so pet's kernel does them.
  bool lower_op(NodeId n, const ops::Max&, const std::string& who) { return lower_pet_binary(n, algorithm::binary_max, who, "NaN-propagating max"); }
  bool lower_op(NodeId n, const ops::Min&, const std::string& who) { return lower_pet_binary(n, algorithm::binary_min, who, "NaN-propagating min"); }
  /// x ^ c for a scalar constant c: oneDNN's eltwise pow.
  bool lower_op(NodeId n, const ops::Pow&, const std::string& who);
  /// Add/Sub/Mul/Div: same shapes keep the first operand's layout; broadcasts run plain with
  /// the broadcast operand second (operands of Add and Mul swap when needed).
  bool lower_binary(NodeId n, algorithm alg, bool commutative, const std::string& who);
  /// pet's broadcasting kernel (cpu/broadcast.hpp), where oneDNN's binary does not serve.
  bool lower_pet_binary(NodeId n, algorithm alg, const std::string& who, const std::string& why);
  bool lower_pet_binary(NodeId n, cpu::BinaryKind kind, const std::string& who, const std::string& why);
  bool lower_op(NodeId n, const ops::Add&, const std::string& who);
  bool lower_op(NodeId n, const ops::Mul&, const std::string& who);
  bool lower_op(NodeId n, const ops::Sub&, const std::string& who);
  bool lower_op(NodeId n, const ops::Div&, const std::string& who);
  bool lower_op(NodeId n, const ops::Softmax& s, const std::string& who);
  /// LogSoftmax on pet's row or block kernel (the view Softmax uses; not oneDNN's logsoftmax,
  /// whose log is off near 1).
  bool lower_op(NodeId n, const ops::LogSoftmax& s, const std::string& who);
  /// Softmax or (log) LogSoftmax of a node's input seen as `view`, over dim `axis` of it:
  /// Softmax along rows on oneDNN's softmax, the rest on pet's kernels.
  bool lower_softmax(NodeId n, bool log, const Shape& view, int axis, const std::string& who);
  /// LRN on oneDNN's lrn_across_channels for odd sizes and ranks 3 to 5; pet's kernel for the
  /// rest (an even window is not centred as oneDNN's).
  bool lower_op(NodeId n, const ops::LRN& l, const std::string& who);
  /// A plain view of slot s with another shape (same bytes).
  int reshaped(int s, const Shape& shape);
  bool lower_op(NodeId n, const ops::ReduceMean& r, const std::string& who);
  bool lower_op(NodeId n, const ops::LayerNormalization& ln, const std::string& who);
  /// Linear Resize with half-pixel coordinates over the spatial dims, at scales equal to
  /// out / in: oneDNN's resampling (same formula, edges clamped alike); every other mode on
  /// pet's resize tables (pet/eval/resize_tables.hpp), built at compile time.
  bool lower_op(NodeId n, const ops::Resize& r, const std::string& who);
  void lower_layer_norm(TensorId xt, TensorId yt, int64_t axis, float epsilon, std::optional<TensorId> scale_t,
                        std::optional<TensorId> shift_t, const std::string& who);

  /// A reduction over one block of neighbouring dims that is not the last (a mean over
  /// channels): pet's kernel, the op's formula in its order (include/pet/ir/ops/reduce.hpp),
  /// blocks of contiguous positions accumulated along the reduced dims. oneDNN 2.6 has only
  /// its reference kernel there: 9 to 20 ms where this takes under 1. Over dims apart, and
  /// over the last dims where the runs are short or oneDNN has only its reference kernel
  /// (L1, L2, sums of squares): pet's kernel by offsets. False where oneDNN's jit kernel
  /// takes the last dims (runs of 512 and more). `log_of_sum`: ReduceLogSum (alg sum).
  bool lower_pet_reduce(NodeId n, const std::vector<int64_t>& axes, algorithm alg, float p, bool log_of_sum, const std::string& who);
  /// A reduction: pet's kernel where it applies (above), else oneDNN's primitive.
  template <class R>
  bool lower_reduce(NodeId n, const R& r, algorithm alg, const std::string& who, float p = 0.f) {
    const Node& node = g_.node(n);
    const Shape& xs = g_.type(node.inputs[0]).shape;
    if (r.axes.empty()) return lower_view(n);
    if (lower_pet_reduce(n, r.axes, alg, p, false, who)) return true;
    Shape keep = xs;
    for (int64_t a : r.axes) keep[size_t(a)] = 1;
    int x = plain_slot(int(node.inputs[0]));
    auto pd = dnnl_call(who, [&] {
      return reduction::primitive_desc(reduction::desc(alg, plain_md(xs), plain_md(keep), p, 0.f), eng_);
    });
    define(node.outputs[0], plain_md(g_.type(node.outputs[0]).shape));
    Step& st = add_step(cat(who, ": oneDNN reduction ", pd.impl_info_str()), {x}, {int(node.outputs[0])});
    st.prim = primitive(reduction(pd));
    st.args = {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, reshaped(int(node.outputs[0]), keep)}};
    return true;
  }
  bool lower_op(NodeId n, const ops::ReduceSum& r, const std::string& who);
  /// ReduceLogSumExp: pet's kernel (the formula: the maximum, then the sum of e^(x - max) in
  /// its order), plain layout; over a block of neighbouring dims or over dims apart by offset.
  bool lower_op(NodeId n, const ops::ReduceLogSumExp& r, const std::string& who);
  /// CumSum: one running sum per position along the axis (forward, or from the end when
  /// reversed), plain layout.
  bool lower_op(NodeId n, const ops::CumSum& c, const std::string& who);
  bool lower_op(NodeId n, const ops::ReduceMax& r, const std::string& who);
  bool lower_op(NodeId n, const ops::ReduceMin& r, const std::string& who) { return lower_reduce(n, r, algorithm::reduction_min, who); }
  bool lower_op(NodeId n, const ops::ReduceProd& r, const std::string& who) { return lower_reduce(n, r, algorithm::reduction_mul, who); }
  bool lower_op(NodeId n, const ops::ReduceL1& r, const std::string& who) { return lower_reduce(n, r, algorithm::reduction_norm_lp_sum, who, 1.f); }
  bool lower_op(NodeId n, const ops::ReduceL2& r, const std::string& who) { return lower_reduce(n, r, algorithm::reduction_norm_lp_sum, who, 2.f); }
  bool lower_op(NodeId n, const ops::ReduceSumSquare& r, const std::string& who) {
    return lower_reduce(n, r, algorithm::reduction_norm_lp_power_p_sum, who, 2.f);
  }
  /// ReduceLogSum: oneDNN's sum, then the log of each sum in place (a post-op would make
  /// oneDNN 2.6 take its reference reduction: 18 ms instead of 1 on [64,1000,64]).
  bool lower_op(NodeId n, const ops::ReduceLogSum& r, const std::string& who);
  /// Hardmax: pet's row kernel (ops::Hardmax's rows: 1 at each row's first maximum, NaN never
  /// wins), plain layout.
  bool lower_op(NodeId n, const ops::Hardmax& h, const std::string& who);
  /// GridSample: pet's kernel. Each output point's taps (ops::GridSample::taps) computed once
  /// per run, then each channel plane summed over them in the formula's order, plane by
  /// plane (the reference kernel walks all channels per point: 16 ms where this takes 2).
  bool lower_op(NodeId n, const ops::GridSample& op, const std::string& who);
  /// Trilu: each matrix row copied inside the band and zeroed outside it, plain layout.
  bool lower_op(NodeId n, const ops::Trilu& t, const std::string& who);
  /// Mod of floats (fmod = 1, C's fmod, as ops::Mod): pet's broadcasting kernel.
  bool lower_op(NodeId n, const ops::Mod& m, const std::string& who);
  /// OneHot into a float buffer, indices float or integer: `off` everywhere, then `on` at each
  /// index (ops::OneHot's conversion of an index; outside [-depth, depth) none).
  bool lower_op(NodeId n, const ops::OneHot& o, const std::string& who) { return lower_one_hot(n, o, who); }
  bool lower_one_hot(NodeId n, const ops::OneHot& o, const std::string& who);
  bool lower_op(NodeId n, const ops::Concat& c, const std::string& who);
  /// Concats on one axis whose input lists are prefixes of the longest one's (DenseNet's:
  /// each layer joins its block's input and every earlier layer's output, the block's last
  /// join takes them all) share the longest one's buffer: each input is copied into its slice
  /// once, by the first join that has it, and each shorter join is a view of the buffer's
  /// first slices. Dense where the axis is outermost (batch 1, NCHW or channel blocks); else a
  /// strided channels-last view, taken only where BatchNormalizations alone read the shorter
  /// joins (pet's row kernel reads the view). DenseNet-121 copied every layer's join whole:
  /// 62 concats, 5.2 of its 30 ms.
  /// oneDNN reorders of slots into slices of one buffer (a Concat's output), and the input
  /// layouts for the plan text.
  struct SliceCopies {
    std::vector<int> ins;
    std::vector<md_t> subs;
    std::vector<reorder> copies;
    std::string layouts;
  };
  void add_slice_copy(SliceCopies& c, int s, const md_t& sub, const std::string& who);
  /// The step running them into slot y.
  void slice_copy_step(const std::string& text, SliceCopies c, int y);
  struct ConcatFamily {
    NodeId last = -1;              ///< the longest join: its output is the buffer
    md_t md;                       ///< the buffer's layout
    size_t copied = 0;             ///< inputs of `last` in the buffer already (a prefix)
    bool defined = false;          ///< whether the buffer's slot has its request yet
    std::map<NodeId, md_t> views;  ///< each shorter join's layout in the buffer
  };
  std::map<NodeId, std::shared_ptr<ConcatFamily>> concat_families_;  ///< by member
  /// n's family, found when its first member is lowered in layout out_md (nullptr: none).
  std::shared_ptr<ConcatFamily> concat_family(NodeId n, const md_t& out_md);
  bool lower_family_concat(NodeId n, ConcatFamily& f, const std::string& who);
  /// The row stride of a channels-last layout whose batch and spatial positions are rows at
  /// one stride (dense, or a view of the first channels of a wider tensor); nullopt otherwise.
  static std::optional<int64_t> channels_last_stride(const md_t& md);
  /// The dense channels-last layout of shape s (rank 3 to 5).
  static md_t channels_last_md(const Shape& s);
  /// Reshape-like ops: the plain input's buffer seen with the output's shape.
  bool lower_view(NodeId n);
  bool lower_op(NodeId n, const ops::Reshape&, const std::string&);
  bool lower_op(NodeId n, const ops::Flatten&, const std::string&);
  bool lower_op(NodeId n, const ops::Squeeze&, const std::string&);
  bool lower_op(NodeId n, const ops::Unsqueeze&, const std::string&);
  bool lower_op(NodeId n, const ops::Identity&, const std::string&);
  bool lower_op(NodeId n, const ops::Dropout&, const std::string&);
  /// Strided copies (pet's kernels).
  void copy_step(NodeId n, int src, std::vector<int64_t> src_strides, int64_t src_offset, int dst, std::vector<int64_t> dst_strides,
                 int64_t dst_offset, Shape shape, const std::string& text, bool first_fill = false, float fill_value = 0);
  /// A data movement as pet's box copies (pet/backend/copy_plan.hpp); false when the op has
  /// no copy plan.
  bool lower_copies(NodeId n, const std::string& who);
  bool lower_op(NodeId n, const ops::Transpose& t, const std::string& who);
  bool lower_op(NodeId n, const ops::RT& t, const std::string& who);
  bool lower_op(NodeId n, const ops::Slice& s, const std::string& who);
  bool lower_op(NodeId n, const ops::Split& s, const std::string& who);
  bool lower_op(NodeId n, const ops::Pad& p, const std::string& who);
  bool lower_op(NodeId n, const ops::Patch& p, const std::string& who);
  bool lower_op(NodeId n, const ops::Expand&, const std::string& who);
  bool lower_op(NodeId n, const ops::Tile& t, const std::string& who);
  /// Ops between float and integer tensors (lower_index.cpp): Gather and GatherElements of float data, Where
  /// choosing between float operands, comparisons of floats, ArgMax / ArgMin, TopK, Cast; false for
  /// any other node (or form: integer data, say).
  bool lower_mixed(NodeId n, const std::string& who);
  /// Gather: one memcpy per index of the rows after the axis, from the plain data.
  bool lower_gather(NodeId n, const ops::Gather& op, const std::string& who);
  /// GatherElements: one read per index, walked as pet's broadcasting kernels walk their rows.
  bool lower_gather_elements(NodeId n, const ops::GatherElements& op, const std::string& who);
  /// Where: pet's broadcasting select over plain operands.
  bool lower_where(NodeId n, const std::string& who);
  /// ArgMax / ArgMin of float data: one pass per output position (ops::ArgReduce's rule).
  template <class O>
  bool lower_arg_reduce(NodeId n, const O& op, const std::string& who);
  /// Cast: float to float a view; float to an integer type and back pet's conversion loops;
  /// false between integer types.
  bool lower_cast(NodeId n, const ops::Cast& op, const std::string& who);
  bool lower_op(NodeId n, const ops::Cast& c, const std::string& who) { return lower_cast(n, c, who); }
  /// IsNaN / IsInf of float data: the op's own test per element.
  template <class O>
  bool lower_float_test(NodeId n, const O& op, const std::string& who);
  /// TopK of float data: a partial sort of each row (ops::TopK::before), values into a
  /// buffer, indices a fresh host tensor.
  bool lower_topk(NodeId n, const ops::TopK& op, const std::string& who);
  /// GatherND of float data: each index tuple checked (constant indices once, here) and its
  /// slice copied (ops::GatherND).
  bool lower_gather_nd(NodeId n, const ops::GatherND& op, const std::string& who);
  /// ScatterND (no axis) or ScatterElements along `elements_axis`, float data and updates: data
  /// copied, then the updates written (or combined by `reduction`) at offsets from the
  /// indices, checked as the ops say (constant indices once, here), in the indices' order.
  bool lower_scatter(NodeId n, ops::ScatterReduction reduction, std::optional<int64_t> elements_axis, const std::string& who);
  /// Ops from integer tensors to an integer tensor, on host values: And, Or, Xor, Not,
  /// comparisons of integers, Div, Mod and Cast between integer types, with broadcasting (the
  /// ops' own element rules); false for any other op.
  bool lower_integer_elementwise(NodeId n, const std::string& who);
  /// A step giving integer tensor t its host value each run, filled by `fill`.
  void host_result_step(std::string text, std::vector<int> reads, TensorId t, std::function<void(int64_t*)> fill);
  /// Integer tensor t's host value for this run, to be filled: last run's storage again
  /// when nothing else holds it (not the caller, not a view of a reference kernel), else fresh.
  int64_t* host_result(TensorId t, const Shape& shape);
  /// Any other op: the reference interpreter's kernel on plain copies of its inputs.
  void fallback(NodeId n, const std::string& who, const std::string& why);

  CompileOptions opt_;
  Graph g_;
  engine eng_{engine::kind::cpu, 0};
  stream strm_{eng_};
  std::vector<std::vector<NodeId>> consumers_;
  std::set<TensorId> is_output_;
  std::vector<Slot> slots_;
  /// Constants already converted by as_layout: (data, source layout, target layout) -> slot,
  /// so that nodes sharing a weight (the steps of an unrolled LSTM) share one converted copy.
  struct ConstLayout {
    const float* data;
    md_t from, to;
    int slot;
  };
  std::vector<ConstLayout> const_layouts_;
  std::vector<Request> requests_;
  std::vector<std::shared_ptr<float[]>> buffers_;
  std::vector<Step> steps_;
  std::set<NodeId> absorbed_, lowered_;
  std::set<NodeId> fused_;  ///< members of a fused element-wise group other than its first
  std::vector<int> output_slots_;
  std::vector<Recycler<float>> output_storage_;  ///< per output_slots_ entry
  size_t planned_bytes_ = 0, requested_bytes_ = 0;
  std::vector<std::vector<double>> step_ms_;  ///< --profile: each step's time in each run
  int runs_ = 0;
  std::vector<float*> override_;
  std::vector<std::vector<memory>> request_memories_;
};

}  // namespace pet::backend::cpu_detail
