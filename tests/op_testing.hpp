#pragma once
// Helpers for operator tests: build one-node graphs, random inputs, and the three standard
// checks (fast kernel vs element formula, float vs finite field, error messages).
#include <doctest/doctest.h>

#include <cmath>

#include "pet/core/rng.hpp"
#include "pet/eval/interpreter.hpp"
#include "pet/ir/builder.hpp"

namespace pet::testing {

/// Output types of `op` on inputs of the given types, through Graph::add_node (so that
/// errors carry the "<Op> 'n': " prefix users see).
inline Types infer(Op op, const Types& in) {
  Graph g;
  std::vector<TensorId> ids;
  for (size_t i = 0; i < in.size(); ++i) ids.push_back(g.add_input(cat("x", i), in[i]));
  auto outs = g.add_node("n", std::move(op), ids);
  Types t;
  for (TensorId o : outs) t.push_back(g.type(o));
  return t;
}
inline Shape out_shape(Op op, const Types& in) { return infer(std::move(op), in).at(0).shape; }
inline TensorType f32(Shape s) { return {DType::Float32, std::move(s)}; }
inline TensorType i64(Shape s) { return {DType::Int64, std::move(s)}; }

/// Inputs drawn at random: floats in [lo, hi] (integers when `integral`), integer tensors via
/// `ints` (default: 0/1 values, fine for masks).
struct InputSpec {
  double lo = -1, hi = 1;
  bool integral = false;
  std::function<int64_t(Rng&)> ints = [](Rng& r) { return r.range(0, 1); };
};

inline std::vector<Value<float>> random_inputs(const Types& in, Rng& rng, const InputSpec& spec) {
  std::vector<Value<float>> v;
  for (const auto& t : in) {
    if (is_float(t.dtype)) {
      Tensor<float> x(t.shape);
      for (int64_t i = 0; i < x.size(); ++i)
        x[i] = spec.integral ? float(rng.range(int64_t(spec.lo), int64_t(spec.hi))) : float(rng.uniform(spec.lo, spec.hi));
      v.emplace_back(x);
    } else {
      Tensor<int64_t> x(t.shape);
      for (int64_t i = 0; i < x.size(); ++i) x[i] = spec.ints(rng);
      v.emplace_back(x);
    }
  }
  return v;
}

template <class T>
std::vector<Value<T>> lift_inputs(const std::vector<Value<float>>& in) {
  std::vector<Value<T>> out;
  for (const auto& v : in) {
    if (const auto* f = std::get_if<Tensor<float>>(&v)) out.emplace_back(lift_tensor<T>(*f, "test input"));
    else out.emplace_back(std::get<Tensor<int64_t>>(v));
  }
  return out;
}

inline double as_double(const Value<double>& v, int64_t i) {
  if (const auto* f = std::get_if<Tensor<double>>(&v)) return (*f)[i];
  return double(std::get<Tensor<int64_t>>(v)[i]);
}

/// The resolved op (attributes filled in by inference) and its output types.
inline std::pair<Op, Types> resolve(Op op, const Types& in) {
  Types out = infer_types(op, in);
  return {op, out};
}

/// Fast kernels (evaluate_op) agree with the element formula (evaluate_by_formula) in double
/// and float on random inputs.
inline void check_fast_vs_formula(Op op, const Types& in, uint64_t seed, const InputSpec& spec = {}) {
  auto [rop, out] = resolve(op, in);
  Rng rng(seed);
  auto xs = random_inputs(in, rng, spec);
  auto xd = lift_inputs<double>(xs);
  auto fast = evaluate_op<double>(rop, xd, out);
  auto slow = evaluate_by_formula<double>(rop, xd, out);
  auto fastf = evaluate_op<float>(rop, xs, out);
  REQUIRE(fast.size() == out.size());
  for (size_t k = 0; k < out.size(); ++k) {
    REQUIRE(value_shape(fast[k]) == out[k].shape);
    REQUIRE(value_shape(slow[k]) == out[k].shape);
    double scale = 1e-9;
    for (int64_t i = 0; i < numel(out[k].shape); ++i) scale = std::max(scale, std::abs(as_double(slow[k], i)));
    for (int64_t i = 0; i < numel(out[k].shape); ++i) {
      double a = as_double(fast[k], i), b = as_double(slow[k], i);
      double af = std::visit([&](const auto& t) { return double(t[i]); }, fastf[k]);
      INFO(op_name(op), " output ", k, " element ", i, " (", unflatten(i, out[k].shape).v[0], "...) seed ", seed,
           " inputs ", in.size(), ": fast ", a, " formula ", b, " float ", af);
      REQUIRE(std::abs(a - b) <= 1e-9 * scale);
      REQUIRE(std::abs(af - b) <= 1e-4 * scale);
    }
  }
}

/// Over F_p with integer inputs, the op computes the same values as in double: for every
/// output y_fp and y_double, y_fp * q == round(y_double * q) for the smallest denominator q
/// (1 except for averages).
inline void check_float_vs_field(Op op, const Types& in, uint64_t seed, InputSpec spec = {}) {
  spec.integral = true;
  if (spec.lo == -1 && spec.hi == 1) spec.lo = -4, spec.hi = 4;
  auto [rop, out] = resolve(op, in);
  Rng rng(seed);
  auto xs = random_inputs(in, rng, spec);
  auto yd = evaluate_op<double>(rop, lift_inputs<double>(xs), out);
  auto yf = evaluate_op<F31>(rop, lift_inputs<F31>(xs), out);
  auto yff = evaluate_by_formula<F31>(rop, lift_inputs<F31>(xs), out);
  for (size_t k = 0; k < out.size(); ++k) {
    for (int64_t i = 0; i < numel(out[k].shape); ++i) {
      double d = as_double(yd[k], i);
      if (const auto* t = std::get_if<Tensor<int64_t>>(&yf[k])) {
        REQUIRE(double((*t)[i]) == d);
        continue;
      }
      F31 f = std::get<Tensor<F31>>(yf[k])[i];
      REQUIRE(f == std::get<Tensor<F31>>(yff[k])[i]);
      int64_t q = 1;
      while (q < 10000 && std::abs(d * double(q) - std::nearbyint(d * double(q))) > 1e-6 * std::max(1.0, std::abs(d * q))) ++q;
      INFO(op_name(op), " element ", i, " seed ", seed, ": double ", d, " field ", f.v, " denominator ", q);
      REQUIRE(q < 10000);
      REQUIRE(f * F31(q) == F31(int64_t(std::llround(d * double(q)))));
    }
  }
}

/// Both checks on one case (multilinear ops).
inline void check_op(Op op, const Types& in, uint64_t seed, const InputSpec& spec = {}) {
  check_fast_vs_formula(op, in, seed, spec);
  if (is_multilinear(op)) check_float_vs_field(op, in, seed + 1, spec);
}

}  // namespace pet::testing
