#pragma once
/// The verifier (paper section 5.2): decides which output regions of a mutant agree with the
/// original program for every input and every weight.
///  1. Box propagation for both programs; the grid of the union of their split points is the
///     set of box intersections.
///  2. Theorem 1: in each intersection, test the m+1 positions v0, v0+e_1, ..., v0+e_m (a
///     direction is skipped where the box is one wide).
///  3. Theorem 2: each position is tested on t independent draws of uniformly random inputs
///     and weights from F_p (p = 2^31 - 1 by default): a wrong "equal" has probability
///     <= (n/p)^t for a program of degree n. One draw is shared by all boxes and positions.
/// Inputs are matched by position; float constants (weights) are variables matched by name
/// (the same name in both programs is the same variable); integer constants are shape data.
#include <functional>
#include <string>

#include "pet/verify/boxes.hpp"

namespace pet::verify {

enum class Verdict { Equivalent, PartiallyEquivalent, NotEquivalent };
std::string_view verdict_name(Verdict v);

struct Options {
  int tests = 2;                    ///< independent random draws (t)
  uint64_t prime = 2147483647;      ///< p; 2^31-1 uses a fast Mersenne reduction
  uint64_t seed = 1;                ///< draws are reproducible from it
  bool exhaustive = false;          ///< also test every output position (lab, small shapes)
  /// With exhaustive: called now and then (from one worker thread) with the positions
  /// evaluated so far and the total (all tests), for a progress line.
  std::function<void(int64_t done, int64_t total)> progress;
};

struct Cell {
  Box box;                       ///< one intersection of a box of each program
  std::vector<Index> positions;  ///< the Theorem 1 positions tested
  bool equal = true;
};

struct OutputResult {
  std::string name;
  Shape shape;
  SplitPoints splits_a, splits_b;  ///< each program's boxes (as split points)
  std::vector<Cell> cells;
  std::vector<Box> correction;     ///< failing cells, merged
  int64_t corrected_elements = 0;
  /// Exhaustive mode: positions where some draw differs (row-major flat offsets).
  std::vector<int64_t> differing;
};

struct Report {
  Verdict verdict = Verdict::Equivalent;
  std::vector<OutputResult> outputs;
  int64_t boxes_checked = 0, positions_tested = 0, evaluations = 0;
  int tests = 0;
  uint64_t prime = 0;
  double seconds = 0;
};

/// Verifies `mutant` against `original`. Throws InvalidInput when either program has a
/// non-multilinear op (naming the node) or their inputs/outputs do not match.
Report verify(const Graph& original, const Graph& mutant, const Options& opt = {});

/// Human-readable report (boxes, verdict per intersection, positions, correction region).
std::string format_report(const Report& r, const Graph& original, const Graph& mutant, bool list_cells);

/// The leaves (inputs and float constants) both programs share, as random draws over T.
/// Exposed for the lab (Z3, exhaustive studies).
struct LeafNames {
  std::vector<std::string> inputs;                    ///< by position
  std::vector<std::pair<std::string, Shape>> weights; ///< float constants, by name (union)
};
LeafNames shared_leaves(const Graph& a, const Graph& b);

}  // namespace pet::verify
