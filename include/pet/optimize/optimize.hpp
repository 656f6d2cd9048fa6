#pragma once
/// The whole-model optimizer (paper section 6, Algorithm 2), as passes over a model:
///
///  1. canonicalisation: the fully equivalent graph rewrites every backend wants (constant and
///     BN folding, Pad folding, LayerNorm and GELU as single ops, dead code);
///  2. partitioning: the multilinear subprograms between non-linear ops; subprograms that read
///     a common tensor are searched together (parallel branches, BERT's Q/K/V), and large ones
///     a window of at most `window` ops at a time (each window convex: no path leaves it and
///     comes back);
///  3. search per window: r rounds of mutation (rules + generator + verification + correction
///     kernels + correction fusion, as `pet mutate`), the top K candidates by the cost model
///     kept in a heap, each round mutating the last round's survivors; identical windows
///     (same ops, attributes, shapes; weights aside, they are variables of the verification)
///     are searched once and the result reused;
///  4. measurement: the best candidates of each window timed as compiled programs on the
///     backend against the original window; a window keeps its original form unless a
///     candidate measures faster;
///  5. stitching and post-optimisations (each a pass): R/T ops moved through element-wise
///     activations, inverse R/T pairs eliminated (proved by the finite-field tester), R/T
///     chains folded, correction convs merged, constants precomputed, dead code;
///  6. the end-to-end check on the reference interpreter against the original (random inputs):
///     on a mismatch the transformations are re-checked one by one and the one that broke it is
///     named; then the whole program is timed against the original and kept only if faster.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pet/backend/backend.hpp"
#include "pet/mutate/mutate.hpp"
#include "pet/transform/pass.hpp"

namespace pet::optimize {

enum class Policy { Both, Equivalent, Partial, None };
/// "both", "equivalent", "partial", "none"; InvalidInput otherwise.
Policy parse_policy(const std::string& s);
std::string_view policy_name(Policy p);

struct Progress {
  int window = 0, windows = 0;  ///< 1-based index of the window being searched, and how many
  int round = 0;
  double best_speedup = 1;      ///< estimated, over all windows searched so far
  double elapsed_s = 0;
  std::string what;             ///< "searching", "measuring", "checking", ...
};

struct Options {
  int depth = 3;           ///< generator depth (paper d)
  int rounds = 4;          ///< search rounds (paper r)
  int top_k = 4;           ///< candidates kept per round
  int window = 4;          ///< most ops mutated at a time
  Policy policy = Policy::Both;
  double budget_s = 120;   ///< whole search, shared fairly among the windows; 0: none. The search stops cleanly and keeps the best found.
  double window_budget_s = 30;  ///< one window's search
  int measure_best = 3;    ///< candidates per window timed as compiled programs
  std::string backend = "cpu";
  bool tf32 = false;       ///< cuda: TF32 tensor cores (backend::BackendOptions)
  int threads = 0;
  std::vector<std::string> only_rules, disable_rules;  ///< rule names
  const mutate::RuleSet* rule_set = nullptr;           ///< null: the built-in rules
  std::string profile_cache, algorithm_cache;          ///< empty: in memory only
  /// The optimizer's memory of earlier runs, under the same options, backend version,
  /// thread count and search code (search_code_fingerprint()): each window's search result (its best candidates, keyed by the window's
  /// structure; a warm run verifies them again instead of searching) and the in-context
  /// decisions on the whole canonical program (which windows took which candidate: applied
  /// without timing whole programs again when the same candidates are found). The result is
  /// still checked and timed end to end. Empty: none (pet optimize: decisions.db beside
  /// the op cache).
  std::string decision_cache;
  /// Passes left out or printed (canonicalisation and post-optimisations together).
  transform::PipelineOptions passes;
  /// Post-optimisations of one's own, run after the built-in ones (the end-to-end check
  /// covers them like every other step).
  std::vector<std::shared_ptr<transform::Pass>> extra_passes;
  /// End-to-end check: random inputs, |opt - orig| <= atol + rtol max|orig|, per output.
  double check_atol = 1e-4, check_rtol = 1e-3;
  int check_seeds = 2;
  /// Whole-program timing against the original: interleaved rounds of `time_runs` each.
  int time_rounds = 5, time_runs = 5;
  /// Return the optimized program even when it measured slower (for analysis; the report
  /// still says so).
  bool keep_if_slower = false;
  /// For testing the rewrites (tests/difftest's optimize mode): every window takes its best
  /// estimated mutant that stitches, whether or not it is estimated faster than the original,
  /// without measuring it in place, and the result is returned however it times. The
  /// end-to-end check still runs.
  bool apply_candidates = false;
  /// Other values of the model's symbolic dims that every rewrite kept must carry over to (pet
  /// optimize: the model imported at two more values of them, unless --fixed-shapes). A
  /// window's candidate is tried in place only where the window and the candidate, rebound
  /// at each entry's input shapes (transform::rebind), are still equivalent (the verifier, as
  /// in the search) and the whole program with it rebinds there too; otherwise the window
  /// keeps its form and the report says why. Empty: the program is optimised for its shapes
  /// alone (a rewrite may need them, as the phase split of a dilated conv needs its height).
  struct OtherShapes {
    std::string label;                        ///< "N=2": the values, for the report
    std::map<std::string, Shape> inputs;      ///< the graph inputs' shapes there, by name
    /// The model as imported there, where the caller has it: it says what the program's
    /// folded shape arithmetic becomes there (transform::RebindGuide). Without it the
    /// program is rebound by transform::rebind's rules alone.
    std::shared_ptr<const Graph> model;
  };
  std::vector<OtherShapes> carry_over_to;
  std::function<void(const Progress&)> progress;
};

/// Where one window's search spent its time (seconds).
struct SearchTimes {
  double total = 0, generate = 0, verify = 0, cost = 0;
  int64_t unexamined = 0;  ///< mutator candidates left unexamined when the budget ran out
};

struct WindowReport {
  int index = 0;
  std::vector<std::string> nodes;  ///< node names in the (canonicalised) model
  std::string ops;                 ///< "Conv Add"
  std::string applied = "original";  ///< rule name, "generated", or "original"
  std::string verdict;             ///< "equivalent", "partially equivalent", or ""
  double corrected_fraction = 0;
  int correction_kernels = 0;
  std::string summary;             ///< the chosen program's ops
  double est_original_ms = 0, est_chosen_ms = 0;
  double measured_original_ms = 0, measured_chosen_ms = 0;
  int rounds = 0, candidates = 0;
  /// This window's search: wall seconds, and of them verification and costing (profiling)
  SearchTimes times;
  double measure_seconds = 0;      ///< timing candidates in context
  double carry_seconds = 0;        ///< checking that candidates carry over (Options::carry_over_to; in measure_seconds where measured)
  bool reused = false;             ///< an identical window's search result
  bool decision_cached = false;    ///< the in-context choice came from the decision cache
  bool search_cached = false;      ///< the search result came from the decision cache (verified again)
  std::string why_kept;            ///< when the original form was kept: why (--explain)
};

/// The least end-to-end gain for which the optimized program is written instead of the
/// original (a smaller one is within the noise of these machines).
inline constexpr double kMinEndToEndGain = 0.01;
/// Report::why_original where no rewrite was kept: the program, as a backend compiles it
/// (after transform::backend_pipeline), is the original's, so it is not timed.
inline constexpr const char* kNothingKept = "no rewrite was kept; the program compiles as the original does";

struct Report {
  std::string model;
  double search_seconds = 0, total_seconds = 0;
  /// Compiling the program as it stood before the first measurement in place (its algorithm
  /// choices timed where the profiler had not met a conv).
  double baseline_compile_seconds = 0;
  double original_ms = 0, optimized_ms = 0;  ///< end to end on the backend, medians
  int timing_rounds = 0, timing_rounds_won = 0;  ///< interleaved rounds, and those the optimized program won
  double speedup = 1;
  bool kept_original = false;  ///< the optimized program was not faster (or not correct)
  /// The program itself does not rebind at an entry of Options::carry_over_to (its shapes were
  /// folded into constants at import): no rewrite could carry over, so none was searched and
  /// the original is returned (why_original says where).
  bool not_rebindable = false;
  std::string why_original;
  std::vector<WindowReport> windows;
  int reused_windows = 0;
  bool decisions_cached = false;  ///< the in-context decisions came from the decision cache
  int searches_cached = 0;        ///< windows whose search result came from the decision cache
  int64_t profiler_measured = 0, profiler_hits = 0;
  /// Op configurations a window's search met after its budget and left unmeasured (the
  /// candidates made with them were not considered).
  int64_t profiler_skipped = 0;
  std::vector<transform::PassRecord> passes;
  /// Post-optimisation passes left out at the end, and why: with one, the program did not
  /// compute at other values of the symbolic dims what the model does there (a pass sees the
  /// bound extents: Options::carry_over_to).
  std::vector<std::string> passes_left_out;
  std::string check;  ///< "pass (max error ...)" of the end-to-end numeric check
  std::string stop_reason;
};

struct Result {
  Graph graph;  ///< the program to write (the canonicalised original when nothing paid off)
  Report report;
};

/// Optimizes a whole program. Throws InternalError naming the window and the transformation
/// when the end-to-end check finds a difference it cannot attribute.
Result optimize(const Graph& model, const Options& opt = {});

/// A digest of the sources that decide what a search finds (rules, generator, verifier,
/// corrections, passes, search), made at build time: part of the decision cache's keys.
const char* search_code_fingerprint();

/// The end-to-end check on its own: "" when `program` computes what `original` computes (the
/// reference interpreter on opt.check_seeds random input sets, in double where the original
/// quantizes; tolerance opt.check_atol + opt.check_rtol * max|original| per output), else
/// what differs. Inputs and outputs are matched by position.
std::string compare(const Graph& program, const Graph& original, const Options& opt);

/// The program as the optimizer's passes see it before the search (canonicalisation).
transform::Pipeline canonicalization_pipeline();
/// Canonicalises g in place as optimize does before its search (opt.passes applies).
std::vector<transform::PassRecord> canonicalise(Graph& g, const Options& opt);

/// Programs optimize derives from `model` (canonicalised, windows rewritten, post-optimised)
/// at other input shapes: transform::rebind guided by `there`, the model imported at other
/// values of its symbolic dims, canonicalised and post-optimised alike. The nodes the
/// optimizer left as they were take their attributes from the model there (its folded shape
/// arithmetic: a Reshape target or a class token computed from the batch); the others follow
/// rebind's rules. Throws as rebind does.
class RebindLike {
 public:
  RebindLike(const Graph& model, const Graph& there, const Options& opt);
  Graph operator()(const Graph& program, const std::map<std::string, Shape>& input_shapes) const;

 private:
  Graph base_, there_, post_base_, post_there_;
};
/// The post-optimisations run after stitching (with `extra` appended).
transform::Pipeline post_optimization_pipeline(const std::vector<std::shared_ptr<transform::Pass>>& extra = {});

// ---- the parts, for tests ------------------------------------------------------------
/// A set of nodes of a program searched as one: its nodes (topological order), the tensors
/// it reads from outside (in order of first use) and the tensors it produces that are read
/// outside or are graph outputs.
struct Window {
  std::vector<NodeId> nodes;
  std::vector<TensorId> inputs, outputs;
};
/// Multilinear subprograms (those reading a common tensor joined), cut into convex windows
/// of at most `max_ops` nodes, in topological order of their first node.
std::vector<Window> partition(const Graph& g, int max_ops);
/// The window of `nodes` (in topological order): its inputs and outputs derived from g.
Window make_window(const Graph& g, std::vector<NodeId> nodes);
/// The window as a standalone program: graph inputs for `inputs`, its constants copied
/// (named w0, w1, ... by first use), outputs in order.
Graph extract(const Graph& g, const Window& w);
/// A key of the window's structure: ops with every attribute, how they connect, input and
/// constant types, and the values of integer constants (float constants are weights: the
/// verifier treats them as variables, so a result holds for any values).
std::string structure_key(const Graph& window_program);
/// Replaces window w of g with `program` (a program with the window's inputs and outputs, in
/// order, whose constants named w0, w1, ... stand for the window's own constants).
void substitute(Graph& g, const Window& w, const Graph& program);

/// Top-K search over rounds on one window program (no measurement): candidates best first,
/// the original included. `cost` estimates a program (ms).
struct Candidate {
  Graph graph;
  double est_ms = 0;
  std::string origin = "original";
  std::string verdict;
  double corrected_fraction = 0;
  int correction_kernels = 0;
  std::string summary;
};
std::vector<Candidate> search(const Graph& window_program, const Options& opt, const std::function<double(const Graph&)>& cost,
                              int* rounds_done = nullptr, std::string* stop = nullptr, SearchTimes* times = nullptr);

}  // namespace pet::optimize
