#pragma once
// Z3 cross-check of the finite-field verifier (the only code in pet that links Z3).
// For each box intersection the verifier tested, both programs' outputs at the tested
// positions (or at every position) are built as polynomials over symbolic inputs and
// weights (real variables) and compared symbolically: identity is proved by normalising the
// difference (simplify with som=true: sum of monomials); a non-identity is refuted with a
// counterexample from the QF_NRA solver. Every query runs under a watchdog outside Z3 (its
// own timeout parameter deadlocks in Debian's Z3 4.8.12) and ends proved, refuted or unknown.
#include "pet/verify/verifier.hpp"

namespace pet::lab {

struct Z3Options {
  double timeout_s = 10;       ///< per query (one position), enforced by the watchdog
  bool all_positions = false;  ///< every output position, not only Theorem 1's
  int64_t max_terms = 200000;  ///< skip (unknown) polynomials larger than this
  /// Refuse (Unsupported, before anything is built) when the symbolic inputs and weights
  /// would need more than this many bytes (0: no limit); Z3's own allocations are capped
  /// at it too.
  int64_t memory_limit_bytes = 0;
  /// Bytes per symbolic element (a named Z3 real constant, its term and pet's handle):
  /// peak RSS of `pet verify --z3` minus that without, on 3x3 convs of 29,696 and 821,248
  /// symbols (Z3 4.8.12): 1.3 and 1.1 KB each.
  static constexpr int64_t kBytesPerSymbol = 1200;
};

struct Z3Result {
  int64_t proved = 0, refuted = 0, unknown = 0;  ///< positions
  int64_t agree = 0, disagree = 0, undecided = 0;  ///< box intersections vs the field verdict
  double seconds = 0;
  std::string version;
};

/// Cross-checks `report` (from verify(original, mutant)) with Z3.
Z3Result z3_cross_check(const Graph& original, const Graph& mutant, const verify::Report& report, const Z3Options& opt = {});

}  // namespace pet::lab
