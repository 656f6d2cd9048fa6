// ONNX's loss functions in pet ops: NegativeLogLikelihoodLoss (opset 12) and
// SoftmaxCrossEntropyLoss (opset 12, a LogSoftmax over the classes then the same loss), as
// ONNX's function bodies define them: each target's value picked by a GatherElements along the
// class dim, weighted, targets equal to ignore_index counted as 0 with weight 0, then kept per
// element ('none'), summed ('sum') or summed over the sum of the weights ('mean').
#include "expand.hpp"

namespace pet::onnx::detail {

namespace {

using Data = std::function<TensorId(int)>;

enum class Reduction { None, Sum, Mean };

/// A ReduceSum over every dim, to a scalar.
ops::ReduceSum sum_all() {
  ops::ReduceSum r;
  r.keepdims = false;
  return r;
}

Reduction reduction_of(const NodeCtx& c) {
  const std::string r = c.s("reduction", "mean");
  if (r == "none") return Reduction::None;
  if (r == "sum") return Reduction::Sum;
  if (r == "mean") return Reduction::Mean;
  throw InvalidInput(cat("reduction '", r, "' is not one of 'none', 'sum', 'mean'"));
}

/// The loss of log-probabilities `logp` (type `lt`: [N, C, d...]) against targets `target`
/// (ONNX input 1) with optional class weights (ONNX input 2), named `out_name`.
TensorId nll(const NodeCtx& c, const std::string& name, Graph& g, const Data& data, TensorId logp, const TensorType& lt,
             const std::string& out_name) {
  const Shape& xs = lt.shape;
  const auto tt = c.type(1);
  if (!tt || (tt->dtype != DType::Int64 && tt->dtype != DType::Int32)) throw InvalidInput("the target (input 1) must be int64 or int32");
  Shape want = xs;
  want.erase(want.begin() + 1);
  if (tt->shape != want) throw InvalidInput(cat("the target's shape ", tt->shape, " must be the input's without the class dim, ", want));
  const int64_t C = xs[1];
  const bool weighted = c.present(2);
  if (weighted) {
    const auto wt = c.type(2);
    if (!wt || wt->dtype != DType::Float32 || wt->shape != Shape{C})
      throw InvalidInput(cat("the weights (input 2) must be float32 of shape [", C, "], one per class", wt ? cat(", got ", wt->shape) : std::string()));
  }
  const Reduction red = reduction_of(c);
  auto scalar = [&](const std::string& what, float v) { return g.add_constant(g.unique_name(cat(name, "/", what)), Tensor<float>(Shape{}, std::vector<float>{v})); };
  TensorId target = data(1);
  if (tt->dtype == DType::Int32) target = add_part(g, name, "target_int64", ops::Cast{.to = DType::Int64}, {target});
  // Ignored targets: weight 0, and a class index of 0 to read (the ignored value may be no class).
  TensorId ignored = -1;
  if (c.attr("ignore_index")) {
    const TensorId ii = g.add_constant(g.unique_name(cat(name, "/ignore_index")), DType::Int64, Tensor<int64_t>(Shape{}, std::vector<int64_t>{c.i("ignore_index", 0)}));
    const TensorId zero = g.add_constant(g.unique_name(cat(name, "/class_0")), DType::Int64, Tensor<int64_t>(Shape{}, std::vector<int64_t>{0}));
    ignored = add_part(g, name, "ignored", ops::Equal{}, {target, ii});
    target = add_part(g, name, "read_class", ops::Where{}, {ignored, zero, target});
  }
  const TensorId picked = add_part(g, name, "picked",
                                   ops::GatherElements{.axis = 1}, {logp, add_part(g, name, "target_column", ops::Unsqueeze{.axes = {1}}, {target})});
  TensorId loss = add_part(g, name, "negated", ops::Neg{}, {add_part(g, name, "picked_row", ops::Squeeze{.axes = {1}}, {picked})});
  TensorId weight = -1;  // per element, where not all 1
  if (weighted) weight = add_part(g, name, "weight", ops::Gather{.axis = 0}, {data(2), target});
  if (ignored >= 0) weight = add_part(g, name, "kept_weight", ops::Where{}, {ignored, scalar("zero", 0.f), weight >= 0 ? weight : scalar("one", 1.f)});
  const bool last = red == Reduction::None;
  if (weighted && ignored < 0) loss = add_part(g, name, "weighted", ops::Mul{}, {loss, weight}, last ? out_name : "");
  else if (ignored >= 0)  // 0 where ignored, whatever the picked value (it may be infinite)
    loss = add_part(g, name, "weighted", ops::Where{}, {ignored, scalar("zero_loss", 0.f), weighted ? add_part(g, name, "times_weight", ops::Mul{}, {loss, weight}) : loss},
                    last ? out_name : "");
  if (red == Reduction::None) return (weighted || ignored >= 0) ? loss : add_part(g, name, "loss", ops::Identity{}, {loss}, out_name);
  const TensorId sum = add_part(g, name, "sum", sum_all(), {loss}, red == Reduction::Sum ? out_name : "");
  if (red == Reduction::Sum) return sum;
  if (weight < 0) return add_part(g, name, "mean", ops::Div{}, {sum, scalar("count", float(numel(want)))}, out_name);
  return add_part(g, name, "mean", ops::Div{}, {sum, add_part(g, name, "weight_sum", sum_all(), {weight})}, out_name);
}

TensorType checked_scores(const NodeCtx& c, const char* what) {
  if (!c.present(0) || !c.present(1)) throw InvalidInput(cat("inputs 0 (", what, ") and 1 (the targets) are required"));
  const auto t = c.type(0);
  if (!t || t->dtype != DType::Float32) throw Unsupported(cat(what, " must be float32"));
  if (t->shape.size() < 2) throw InvalidInput(cat(what, " must be [N, C] or [N, C, d1, ...], got ", t->shape));
  if (t->shape[1] < 1) throw InvalidInput(cat(what, " has no classes (shape ", t->shape, ")"));
  return *t;
}

/// NegativeLogLikelihoodLoss: input [N, C, d...] of log-probabilities, target [N, d...].
std::vector<TensorId> nll_loss(const NodeCtx& c, const std::string& name, Graph& g, const Data& data) {
  const TensorType t = checked_scores(c, "input");
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  if (out.empty() || c.node.output(0).empty()) return out;
  out[0] = nll(c, name, g, data, data(0), t, c.node.output(0));
  return out;
}

/// SoftmaxCrossEntropyLoss: the loss of LogSoftmax(scores) over the class dim (dim 1), which
/// is also the optional second output (log_prob).
std::vector<TensorId> softmax_cross_entropy(const NodeCtx& c, const std::string& name, Graph& g, const Data& data) {
  const TensorType t = checked_scores(c, "scores");
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  const bool want_logp = out.size() > 1 && !c.node.output(1).empty();
  if (out.empty() || (c.node.output(0).empty() && !want_logp)) return out;
  ops::LogSoftmax over_classes;
  over_classes.axis = 1;
  const TensorId logp = add_part(g, name, "log_prob", over_classes, {data(0)}, want_logp ? c.node.output(1) : "");
  if (want_logp) out[1] = logp;
  if (!c.node.output(0).empty()) out[0] = nll(c, name, g, data, logp, t, c.node.output(0));
  return out;
}

}  // namespace

void add_loss_ops(std::map<std::string, ExpandFn, std::less<>>& t) {
  t["NegativeLogLikelihoodLoss"] = nll_loss;
  t["SoftmaxCrossEntropyLoss"] = softmax_cross_entropy;
}

}  // namespace pet::onnx::detail
