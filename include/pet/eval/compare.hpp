#pragma once
/// Comparing computed tensors with references (pet run --check, tests).
#include <cmath>
#include <string>

#include "pet/eval/value.hpp"

namespace pet {

struct Comparison {
  bool pass = false;
  double max_abs_err = 0, max_abs_ref = 0;
  int64_t mismatches = 0;  ///< elements outside the tolerance
  int64_t nan_out = 0, nan_ref = 0;  ///< NaN elements of each side
  std::string problem;     ///< shape/kind mismatch, NaN, ... (empty when comparable)
};

/// Tolerance rules: pet's whole-tensor rule |out - ref| <= atol + rtol * max|ref| (the
/// default of `pet run --check`), or numpy's per-element |out - ref| <= atol + rtol * |ref|
/// (ONNX's backend tests). Integer tensors must match exactly, except quantized ones
/// (`quantized`: int8 or uint8 data, where one step is 1), which follow the rule as floats do.
enum class Tolerance { WholeTensor, PerElement };

inline Comparison compare(const Value<float>& got, const Value<float>& ref, double atol, double rtol,
                          Tolerance mode = Tolerance::WholeTensor, bool quantized = false) {
  Comparison c;
  if (got.index() != ref.index()) {
    c.problem = "one is a float tensor and the other an integer tensor";
    return c;
  }
  if (value_shape(got) != value_shape(ref)) {
    c.problem = cat("shape ", value_shape(got), " differs from the reference's ", value_shape(ref));
    return c;
  }
  if (const auto* g = std::get_if<Tensor<int64_t>>(&got)) {
    const auto& r = std::get<Tensor<int64_t>>(ref);
    for (int64_t i = 0; i < g->size(); ++i) {
      double d = std::abs(double((*g)[i]) - double(r[i]));
      c.max_abs_err = std::max(c.max_abs_err, d);
      c.max_abs_ref = std::max(c.max_abs_ref, std::abs(double(r[i])));
      if (!quantized) c.mismatches += d != 0;
    }
    if (quantized)
      for (int64_t i = 0; i < g->size(); ++i)
        c.mismatches += std::abs(double((*g)[i]) - double(r[i])) >
                        atol + rtol * (mode == Tolerance::WholeTensor ? c.max_abs_ref : std::abs(double(r[i])));
    c.pass = c.mismatches == 0;
    return c;
  }
  const auto& g = std::get<Tensor<float>>(got);
  const auto& r = std::get<Tensor<float>>(ref);
  for (int64_t i = 0; i < g.size(); ++i)
    if (std::isfinite(r[i])) c.max_abs_ref = std::max(c.max_abs_ref, std::abs(double(r[i])));
  for (int64_t i = 0; i < g.size(); ++i) {
    double a = g[i], b = r[i];
    if (std::isnan(a) || std::isnan(b)) {
      c.nan_out += std::isnan(a);
      c.nan_ref += std::isnan(b);
      bool both = std::isnan(a) && std::isnan(b);
      c.mismatches += !both;
      if (!both) c.max_abs_err = INFINITY;
      continue;
    }
    if (std::isinf(a) || std::isinf(b)) {
      c.mismatches += a != b;
      if (a != b) c.max_abs_err = INFINITY;
      continue;
    }
    double d = std::abs(a - b);
    c.max_abs_err = std::max(c.max_abs_err, d);
    double tol = atol + rtol * (mode == Tolerance::WholeTensor ? c.max_abs_ref : std::abs(b));
    c.mismatches += d > tol;
  }
  c.pass = c.mismatches == 0;
  return c;
}

}  // namespace pet
