#pragma once
/// A thin convenience layer over Graph::add_node for writing programs in C++ (tests, rules):
///   Builder b(g); auto y = b.add(ops::Conv{.strides = {1, 1}}, {x, w});
/// Every call type-checks immediately (errors name the op and node).
#include "pet/ir/graph.hpp"

namespace pet {

class Builder {
 public:
  explicit Builder(Graph& g) : g_(g) {}
  Graph& graph() { return g_; }

  TensorId input(const std::string& name, Shape shape, DType t = DType::Float32) {
    return g_.add_input(name, {t, std::move(shape)});
  }
  TensorId constant(const std::string& name, Tensor<float> v) { return g_.add_constant(name, std::move(v)); }
  TensorId ints(const std::string& name, std::vector<int64_t> v) {
    Shape s{int64_t(v.size())};
    return g_.add_constant(name, DType::Int64, Tensor<int64_t>(s, std::move(v)));
  }
  /// Adds a single-output op and returns its output.
  TensorId add(Op op, std::vector<TensorId> inputs, std::string name = "") {
    auto outs = add_multi(std::move(op), std::move(inputs), std::move(name));
    if (outs.size() != 1) throw InvalidInput(cat("Builder::add: op has ", outs.size(), " outputs; use add_multi"));
    return outs[0];
  }
  std::vector<TensorId> add_multi(Op op, std::vector<TensorId> inputs, std::string name = "") {
    if (name.empty()) name = g_.unique_name(std::string(op_name(op)));
    return g_.add_node(std::move(name), std::move(op), std::move(inputs));
  }
  void output(TensorId t) { g_.add_output(t); }

 private:
  Graph& g_;
};

}  // namespace pet
