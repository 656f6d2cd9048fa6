#pragma once
/// Correction kernels (paper section 5.3). For every box where a mutant is wrong, a
/// correction kernel computes the original program on that box only, reading just the input
/// regions the box depends on (backward propagation), and a patch writes it over the
/// mutant's output. Then correction fusion (paper Fig. 6): convs that share their weights
/// (a correction and the mutant's main conv) are merged into one conv over their inputs,
/// concatenated with explicit padding, and the result is split.
#include "pet/ir/builder.hpp"
#include "pet/verify/verifier.hpp"

namespace pet::mutate {

struct CorrectionStats {
  int64_t corrected_elements = 0, total_elements = 0;
  int kernels = 0;             ///< correction kernels (one per correction box)
  int64_t correction_flops = 0;  ///< FLOPs of the correction kernels before fusion
  int fused_convs = 0;          ///< convs merged away by correction fusion
  double fraction() const { return total_elements ? double(corrected_elements) / double(total_elements) : 0.0; }
};

/// The original program restricted to `box` of its output `out`, built into `target` from the
/// target's own tensors for the original's inputs (by position) and weights (by name).
TensorId restrict_program(const Graph& original, TensorId out, const Box& box, Builder& target);

/// The mutant with correction kernels patched over every failing box of `report`.
Graph add_corrections(const Graph& original, const Graph& mutant, const verify::Report& report, CorrectionStats* stats = nullptr);

/// Correction fusion and layout clean-up on any program: convs sharing weights, bias and
/// attributes merged into one (batch or spatial concatenation, padding made explicit);
/// chains of reshapes and transposes folded into R/T ops. Returns the number of convs merged.
int fuse(Graph& g);

/// Cost estimate in milliseconds: a roofline per op, FLOPs at `gflops` and bytes moved at
/// `gbytes_per_s` (this machine: ~200 GFLOP/s, ~10 GB/s), until the cpu backend's profiler
/// replaces it. Ops on constants only are free (precomputed at compile time).
double estimate_ms(const Graph& g, double gflops = 200.0, double gbytes_per_s = 10.0);

}  // namespace pet::mutate
