#pragma once
/// The reference interpreter: runs a Graph over any element type T (float, double, F31).
/// The same program thus runs as floating point or as exact finite-field arithmetic (the
/// latter only through multilinear ops and integer shape arithmetic).
/// Instantiated once (src/eval) for float, double and F31.
#include <functional>

#include "pet/eval/value.hpp"
#include "pet/ir/graph.hpp"

namespace pet {

/// How float constants (weights) become T: by default a cast for float/double and an exact
/// integer embedding for a field (non-integers are Unsupported there).
template <class T>
using ConstantLifter = std::function<Tensor<T>(TensorId, const Tensor<float>&)>;

template <class T>
Tensor<T> lift_tensor(const Tensor<float>& t, std::string_view who) {
  return map_tensor<T>(t, [&](float x) { return lift_scalar<T>(x, who); });
}

/// Evaluates one op on values (fast kernels where pet has them, else the element formula).
template <class T>
std::vector<Value<T>> evaluate_op(const Op& op, std::span<const Value<T>> in, InTypes out_types);

/// Evaluates one op strictly through its element formula `at` (the definition; slow). Tests
/// compare evaluate_op against it.
template <class T>
std::vector<Value<T>> evaluate_by_formula(const Op& op, std::span<const Value<T>> in, InTypes out_types);

template <class T>
class Interpreter {
 public:
  explicit Interpreter(const Graph& g, ConstantLifter<T> lift = {});
  /// Runs the graph on values for g.inputs() (in order); returns values of g.outputs().
  /// Checks each input's shape and kind against the graph.
  std::vector<Value<T>> run(std::span<const Value<T>> inputs) const;

 private:
  const Graph& g_;
  std::vector<NodeId> order_;
  std::vector<std::optional<Value<T>>> constants_;
  std::vector<int> last_use_;  ///< position in order_ after which a tensor is dead
};

extern template class Interpreter<float>;
extern template class Interpreter<double>;
extern template class Interpreter<F31>;

}  // namespace pet
