#pragma once
// pet's conversion kernel for the cpu backend: float32 values rounded to float16 or bfloat16
// (ONNX's Cast to them, whose results pet holds as float32; ops::Cast::narrow).
#include <cstdint>

namespace pet::cpu {

/// y[i] = narrow_round(x[i], narrow) for i < n (core/narrow_float.hpp; x may be y). float16
/// by the CPU's conversion instructions where it has F16C and `hardware` is set (the same
/// values, NaN bits included: IEEE's nearest, ties to even), else in portable code; bfloat16
/// in branch-free code the compiler vectorises. Single-threaded: callers split the range.
void round_to_narrow(const float* x, float* y, int64_t n, int32_t narrow, bool hardware = true);

/// Whether this CPU has the F16C conversions round_to_narrow uses for float16.
bool has_f16c();

}  // namespace pet::cpu
