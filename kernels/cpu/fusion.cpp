// Post-op chains of the cpu executable: what a oneDNN primitive absorbs after it.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "executable.hpp"
#include "algorithm_cache.hpp"
#include "copy.hpp"
#include "pet/core/parallel.hpp"
#include "pet/eval/interpreter.hpp"
#include "pet/transform/patterns.hpp"

namespace pet::backend::cpu_detail {

bool CpuExecutable::single_use(TensorId t) const { return consumers_[size_t(t)].size() == 1 && !is_output_.count(t); }

NodeId CpuExecutable::sole_consumer(TensorId t) const { return single_use(t) ? consumers_[size_t(t)][0] : -1; }

std::optional<std::tuple<algorithm, float, float>> CpuExecutable::eltwise_of(const Op& op) {
  if (std::holds_alternative<ops::Relu>(op)) return std::tuple{algorithm::eltwise_relu, 0.f, 0.f};
  if (auto* l = std::get_if<ops::LeakyRelu>(&op)) return std::tuple{algorithm::eltwise_relu, l->alpha, 0.f};
  if (std::holds_alternative<ops::Sigmoid>(op)) return std::tuple{algorithm::eltwise_logistic, 0.f, 0.f};
  if (std::holds_alternative<ops::Tanh>(op)) return std::tuple{algorithm::eltwise_tanh, 0.f, 0.f};
  if (std::holds_alternative<ops::Gelu>(op)) return std::tuple{algorithm::eltwise_gelu_erf, 0.f, 0.f};
  if (std::holds_alternative<ops::Exp>(op)) return std::tuple{algorithm::eltwise_exp, 0.f, 0.f};
  if (std::holds_alternative<ops::Sqrt>(op)) return std::tuple{algorithm::eltwise_sqrt, 0.f, 0.f};
  if (std::holds_alternative<ops::Neg>(op)) return std::tuple{algorithm::eltwise_linear, -1.f, 0.f};
  if (std::holds_alternative<ops::Abs>(op)) return std::tuple{algorithm::eltwise_abs, 0.f, 0.f};
  if (std::holds_alternative<ops::Reciprocal>(op)) return std::tuple{algorithm::eltwise_pow, 1.f, -1.f};
  if (std::holds_alternative<ops::Round>(op)) return std::tuple{algorithm::eltwise_round, 0.f, 0.f};
  // (not Log, Softplus, Mish: oneDNN 2.6's log is off near 1, see lower_op(Log))
  if (std::holds_alternative<ops::HardSwish>(op)) return std::tuple{algorithm::eltwise_hardswish, 0.f, 0.f};
  if (auto* e = std::get_if<ops::Elu>(&op)) return std::tuple{algorithm::eltwise_elu, e->alpha, 0.f};
  // min > max: ONNX (and the reference) give max everywhere; oneDNN's clip does not
  if (auto* c = std::get_if<ops::Clip>(&op); c && c->min <= c->max)
    return std::tuple{algorithm::eltwise_clip, float(std::max(c->min, -3.4e38)), float(std::min(c->max, 3.4e38))};
  return std::nullopt;
}

bool CpuExecutable::fusable_activation(const Op& op) {
  return std::holds_alternative<ops::Relu>(op) || std::holds_alternative<ops::Clip>(op) || std::holds_alternative<ops::Sigmoid>(op) ||
         std::holds_alternative<ops::Tanh>(op) || std::holds_alternative<ops::LeakyRelu>(op) || std::holds_alternative<ops::Gelu>(op);
}

std::string CpuExecutable::split_note(const Op& op) {
  return cat(" (", op_name(op), " not fused: oneDNN 2.6 keeps one set of parameters per post-op kind in a primitive)");
}

std::optional<std::pair<NodeId, NodeId>> CpuExecutable::silu_after(TensorId t) const {
  if (is_output_.count(t) || consumers_[size_t(t)].size() != 2 || !is_float(g_.type(t).dtype)) return std::nullopt;
  NodeId s = -1, m = -1;
  for (NodeId c : consumers_[size_t(t)]) {
    if (std::holds_alternative<ops::Sigmoid>(g_.node(c).op)) s = c;
    else if (std::holds_alternative<ops::Mul>(g_.node(c).op)) m = c;
  }
  if (s < 0 || m < 0 || sole_consumer(g_.node(s).outputs[0]) != m) return std::nullopt;
  const auto& in = g_.node(m).inputs;
  const TensorId st = g_.node(s).outputs[0];
  if (!((in[0] == t && in[1] == st) || (in[0] == st && in[1] == t))) return std::nullopt;
  return std::pair{s, m};
}

std::pair<TensorId, TensorId> CpuExecutable::absorb_post_ops(TensorId t, PostOpChain& po, std::string& text, bool allow_sum) {
  TensorId residual = -1;
  while (true) {
    if (auto silu = silu_after(t)) {  // t * sigmoid(t): oneDNN's swish with alpha 1
      if (!po.accepts(algorithm::eltwise_swish)) {
        text += split_note(ops::Sigmoid{});
        break;
      }
      po.eltwise(algorithm::eltwise_swish, 1.f, 0.f);
      text += " + SiLU (Sigmoid, Mul)";
      absorbed_.insert(silu->first);
      absorbed_.insert(silu->second);
      t = g_.node(silu->second).outputs[0];
      continue;
    }
    NodeId c = sole_consumer(t);
    if (c < 0) break;
    if (auto k = transform::scalar_operand(g_, c, t)) {  // scaling and shifting by constants
      const Op& op = g_.node(c).op;
      bool lhs = g_.node(c).inputs[0] == t;
      std::optional<std::pair<float, float>> lin;
      if (std::holds_alternative<ops::Mul>(op)) lin = std::pair{*k, 0.f};
      else if (std::holds_alternative<ops::Div>(op) && lhs) lin = std::pair{1.f / *k, 0.f};
      else if (std::holds_alternative<ops::Add>(op)) lin = std::pair{1.f, *k};
      else if (std::holds_alternative<ops::Sub>(op)) lin = lhs ? std::pair{1.f, -*k} : std::pair{-1.f, *k};
      if (lin) {
        if (!po.accepts(algorithm::eltwise_linear)) {
          text += split_note(op);
          break;
        }
        po.eltwise(algorithm::eltwise_linear, lin->first, lin->second);
        text += cat(" + ", op_name(op), " by a constant");
        absorbed_.insert(c);
        t = g_.node(c).outputs[0];
        continue;
      }
    }
    const Node& node = g_.node(c);
    if (!is_float(g_.type(node.outputs[0]).dtype) || node.outputs.size() != 1) break;
    if (auto e = eltwise_of(node.op); e && fusable_activation(node.op)) {
      auto [alg, a, b] = *e;
      if (!po.accepts(alg)) {
        text += split_note(node.op);
        break;
      }
      po.eltwise(alg, a, b);
      text += cat(" + ", op_name(node.op));
      absorbed_.insert(c);
      t = node.outputs[0];
      continue;
    }
    if (allow_sum && residual < 0 && std::holds_alternative<ops::Add>(node.op) && g_.type(node.inputs[0]) == g_.type(node.inputs[1])) {
      TensorId other = node.inputs[0] == t ? node.inputs[1] : node.inputs[0];
      if (other == t) break;
      // The residual must already exist (computed before this node).
      NodeId p = g_.tensor(other).producer;
      if (p >= 0 && !lowered_.count(p)) break;
      po.sum();
      text += " + residual add";
      absorbed_.insert(c);
      residual = other;
      t = node.outputs[0];
      continue;
    }
    break;
  }
  return {t, residual};
}

void CpuExecutable::prepare_residual(TensorId dst_t, TensorId residual, const md_t& dst_md, const std::string& who) {
  int r = int(residual);
  // In place only when the add is the buffer's last reader: not a graph input's (the
  // caller's memory) or a constant's; every other consumer of the residual lowered already,
  // so that its steps run before this one (a residual block's input, read by the block's
  // first conv and by the add: EfficientNet's, ResNet's), but not this node (conv(x) + x:
  // the primitive would read the buffer it accumulates into); and every other tensor in the
  // buffer (a view of it, or the earlier sum of a chain of blocks accumulated in place) read
  // only by steps placed already, and not a graph output.
  const int q = slots_[size_t(r)].request;
  int unread = 0;  // consumers whose steps are not placed yet: the add, absorbed just now
  for (NodeId c : consumers_[size_t(residual)]) unread += lowered_.count(c) ? 0 : absorbed_.count(c) ? 1 : 2;
  bool dies = unread == 1 && !is_output_.count(residual) && !g_.tensor(residual).is_constant() && q >= 0 && !requests_[size_t(q)].pinned &&
              !slots_[size_t(r)].owned;
  for (TensorId t = 0; t < g_.num_tensors() && dies; ++t) {
    if (t == residual || slots_[size_t(t)].request != q) continue;
    dies = !is_output_.count(t);
    for (NodeId c : consumers_[size_t(t)]) dies = dies && lowered_.count(c);
  }
  if (dies && slots_[size_t(r)].md == dst_md) {
    alias(int(dst_t), r, dst_md);  // in place: the conv accumulates into the residual's buffer
    return;
  }
  define(dst_t, dst_md);
  Step& st = add_step(cat("  copy residual into the output of ", who), {r}, {int(dst_t)});
  st.prim = dnnl_call(who, [&] { return primitive(reorder(reorder::primitive_desc(eng_, slots_[size_t(r)].md, eng_, dst_md))); });
  st.args = {{DNNL_ARG_FROM, r}, {DNNL_ARG_TO, int(dst_t)}};
}

}  // namespace pet::backend::cpu_detail
