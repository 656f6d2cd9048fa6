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
  const Graph& graph() const { return g_; }

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

  // Conveniences (each type-checks immediately).
  TensorId rt(TensorId x, Shape split_shape, std::vector<int64_t> perm, Shape out_shape) {
    return add(ops::RT{.split_shape = std::move(split_shape), .perm = std::move(perm), .out_shape = std::move(out_shape)}, {x});
  }
  TensorId slice(TensorId x, int64_t axis, int64_t start, int64_t end) {
    return add(ops::Slice{.starts = {start}, .ends = {end}, .axes = {axis}}, {x});
  }
  TensorId concat(std::vector<TensorId> xs, int64_t axis) { return xs.size() == 1 ? xs[0] : add(ops::Concat{.axis = axis}, std::move(xs)); }
  std::vector<TensorId> split(TensorId x, int64_t axis, std::vector<int64_t> sizes) {
    int n = int(sizes.size());
    return add_multi(ops::Split{.axis = axis, .split = std::move(sizes), .num_outputs = n}, {x});
  }
  TensorId pad(TensorId x, std::vector<int64_t> pads) { return add(ops::Pad{.pads = std::move(pads)}, {x}); }


 private:
  Graph& g_;
};

}  // namespace pet
