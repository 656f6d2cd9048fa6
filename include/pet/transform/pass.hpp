#pragma once
/// Graph passes (after MLIR's Pass and oneDNN graph's pass pipelines): a pass is a named
/// rewrite with a one-line description that edits a graph in place and says how much it
/// changed; a pipeline runs passes in order, can leave any out by name and can print the
/// graph after any of them (to bisect a numerical mismatch, leave passes out one at a time).
///
/// Built-in passes (make_pass / pass_names):
///   dead-code                     nodes whose results reach no graph output
///   constant-folding              nodes whose inputs are all constants, computed once
///   bn-folding                    inference BatchNormalization folded into the conv before it
///   pad-folding                   a zero Pad of spatial dims folded into the conv / average pool after it;
///                                 a conv's end padding that no window reads dropped
///   channel-scale-folding         a per-channel scale of a conv's input (squeeze-and-excitation's x * s)
///                                 moved onto the conv's weights where they are smaller than the input
///   layer-norm-canonicalization   PyTorch's decomposed LayerNorm (ReduceMean, Sub, Pow, ...) as one op
///   gelu-canonicalization         x * (erf(x / sqrt 2) + 1) * 0.5 as one Gelu op
///   rt-folding                    reshape / transpose chains around R/T ops folded into one R/T op
///   conv-merging                  convs sharing weights merged into one over concatenated inputs
///                                 (correction fusion, paper Fig. 6)
///   einsum-lowering               Einsum as ReduceSum, Transpose, Reshape and MatMul where it maps
///   gather-to-slice               Gather with constant, evenly stepping indices as a strided Slice (+ Reshape)
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "pet/ir/graph.hpp"

namespace pet::transform {

struct PassStats {
  int changed = 0;   ///< nodes rewritten, folded or removed
  std::string note;  ///< what, for people ("3 batch norms folded")
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;
  /// Rewrites g in place. The pipeline compacts g afterwards (erased nodes, unread constants).
  virtual PassStats run(Graph& g) = 0;
};

struct PipelineOptions {
  std::set<std::string, std::less<>> disabled;     ///< passes left out, by name
  std::set<std::string, std::less<>> print_after;  ///< print the graph after these ("all": every pass)
  /// Where printed graphs and pass statistics go (default: stderr when print_after is set).
  std::function<void(const std::string&)> log;
};

struct PassRecord {
  std::string name;
  bool skipped = false;
  PassStats stats;
  double seconds = 0;
};

class Pipeline {
 public:
  Pipeline() = default;
  explicit Pipeline(const std::vector<std::string>& names);  ///< built-in passes by name
  Pipeline& add(std::unique_ptr<Pass> p);
  std::vector<std::string> names() const;
  /// Runs the passes in order; throws InvalidInput naming a pass in `disabled` or
  /// `print_after` that the pipeline does not have.
  std::vector<PassRecord> run(Graph& g, const PipelineOptions& opt = {}) const;

 private:
  std::vector<std::unique_ptr<Pass>> passes_;
};

/// A built-in pass; InvalidInput naming the known ones if there is none of that name.
std::unique_ptr<Pass> make_pass(std::string_view name);
/// Names and descriptions of the built-in passes.
std::vector<std::pair<std::string, std::string>> pass_catalog();

/// What every backend runs before lowering: einsum-lowering, constant-folding, gather-to-slice, bn-folding, pad-folding,
/// channel-scale-folding, layer-norm-canonicalization, gelu-canonicalization, dead-code.
Pipeline backend_pipeline();

/// Parses "a,b,c" into a set of pass names (for --disable-pass / --print-after).
std::set<std::string, std::less<>> pass_list(const std::string& text);

}  // namespace pet::transform
