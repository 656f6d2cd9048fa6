#include "expand.hpp"

namespace pet::onnx::detail {

namespace {

/// MeanVarianceNormalization as its ONNX function body writes it: (X - E[X]) / (sqrt(E[X^2] -
/// E[X]^2) + 1e-9), the means over `axes` (default [0, 2, 3]).
std::vector<TensorId> mean_variance_normalization(const NodeCtx& c, const std::string& name, Graph& g,
                                                  const std::function<TensorId(int)>& data) {
  if (!c.present(0)) throw InvalidInput("required input 0 (X) is missing");
  const auto t = c.type(0);
  if (!t || !is_float(t->dtype)) throw Unsupported("X must be float");
  ops::ReduceMean mean;
  mean.axes = c.ints("axes", {0, 2, 3});
  mean.keepdims = true;
  auto op = [&](const std::string& what, Op o, std::vector<TensorId> in, const std::string& out = "") {
    return add_part(g, name, what, std::move(o), std::move(in), out);
  };
  const TensorId x = data(0);
  const TensorId m = op("mean", mean, {x});
  const TensorId m2 = op("mean_squared", ops::Mul{}, {m, m});
  const TensorId ex2 = op("mean_of_squares", mean, {op("squares", ops::Mul{}, {x, x})});
  const TensorId sd = op("std", ops::Sqrt{}, {op("variance", ops::Sub{}, {ex2, m2})});
  const TensorId eps = g.add_constant(g.unique_name(cat(name, "/epsilon")), Tensor<float>(Shape{}, std::vector<float>{1e-9f}));
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  if (!out.empty() && !c.node.output(0).empty())
    out[0] = op("normalized", ops::Div{}, {op("centered", ops::Sub{}, {x, m}), op("std_eps", ops::Add{}, {sd, eps})}, c.node.output(0));
  return out;
}

/// LpNormalization (p 1 or 2, along `axis`, default -1): x / ||x||_p, the norm ReduceL1 or
/// ReduceL2 over the axis; where a norm is 0 the result is 0, as ONNX Runtime writes it (the
/// spec says nothing; ONNX's Python reference divides and gives NaN).
std::vector<TensorId> lp_normalization(const NodeCtx& c, const std::string& name, Graph& g, const std::function<TensorId(int)>& data) {
  if (!c.present(0)) throw InvalidInput("required input 0 (input) is missing");
  const auto t = c.type(0);
  if (!t || !is_float(t->dtype)) throw Unsupported("input must be float");
  const int64_t p = c.i("p", 2), rank = int64_t(t->shape.size());
  if (p != 1 && p != 2) throw InvalidInput(cat("p must be 1 or 2, got ", p));
  const int64_t axis = c.i("axis", -1);
  if (axis < -rank || axis >= rank) throw InvalidInput(cat("axis ", axis, " is out of range for rank ", rank));
  const std::vector<int64_t> axes{axis < 0 ? axis + rank : axis};
  auto op = [&](const std::string& what, Op o, std::vector<TensorId> in, const std::string& out = "") {
    return add_part(g, name, what, std::move(o), std::move(in), out);
  };
  const TensorId x = data(0);
  const TensorId norm = p == 1 ? op("norm", ops::ReduceL1{{.axes = axes, .keepdims = true}}, {x}) : op("norm", ops::ReduceL2{{.axes = axes, .keepdims = true}}, {x});
  const TensorId zero = g.add_constant(g.unique_name(cat(name, "/zero")), Tensor<float>(Shape{}, std::vector<float>{0.f}));
  std::vector<TensorId> out(size_t(c.node.output_size()), -1);
  if (!out.empty() && !c.node.output(0).empty())
    out[0] = op("normalized", ops::Where{}, {op("zero_norm", ops::Equal{}, {norm, zero}), zero, op("quotient", ops::Div{}, {x, norm})}, c.node.output(0));
  return out;
}

}  // namespace

const std::map<std::string, ExpandFn, std::less<>>& expand_table() {
  static const std::map<std::string, ExpandFn, std::less<>> t = {
      {"RNN", import_recurrent},
      {"GRU", import_recurrent},
      {"LSTM", import_recurrent},
      {"MeanVarianceNormalization", mean_variance_normalization},
      {"LpNormalization", lp_normalization},
  };
  return t;
}

}  // namespace pet::onnx::detail
