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

}  // namespace

const std::map<std::string, ExpandFn, std::less<>>& expand_table() {
  static const std::map<std::string, ExpandFn, std::less<>> t = {
      {"RNN", import_recurrent},
      {"GRU", import_recurrent},
      {"LSTM", import_recurrent},
      {"MeanVarianceNormalization", mean_variance_normalization},
  };
  return t;
}

}  // namespace pet::onnx::detail
