#pragma once
/// The mutation pipeline for one multilinear subprogram (paper sections 4 and 5): mutants from
/// the rules and from the generic generator, verified (not equivalent ones dropped),
/// corrected (correction kernels patched over the failing boxes), fused, checked once more
/// to be equivalent as a whole, and ranked by estimated cost.
#include <functional>

#include "pet/mutate/correct.hpp"
#include "pet/mutate/generator.hpp"
#include "pet/mutate/rule.hpp"

namespace pet::mutate {

struct Options {
  int depth = 3;                        ///< generator depth (0: rules only)
  std::vector<std::string> rules{"all"};  ///< "all", "none" or rule names (of `rule_set`)
  /// The rules to draw from: null for the built-in ones (builtin_rules()); a library user
  /// passes a RuleSet with rules of their own (make_builtin_rules() plus theirs, or only theirs).
  const RuleSet* rule_set = nullptr;
  GeneratorOptions generator;           ///< budgets (depth is taken from above)
  verify::Options verify;
  /// Generated programs that agree with the original at fewer sampled positions than this
  /// are not verified (their correction would cover most of the output).
  double min_agreement = 0.5;
  /// Cost of a program in milliseconds, used to rank mutants and to choose between the fused
  /// and unfused corrections: pet mutate passes the cpu backend's op profiler
  /// (backend::Profiler::program_cost_ms); empty: the roofline estimate_ms().
  std::function<double(const Graph&)> cost;
  /// Wall-clock budget of the whole run (rules, generator, verification, costing); 0: none.
  /// Candidates are verified and costed the rules' first, then the generator's, each in
  /// order of their roofline estimate (estimate_ms, with Winograd-eligible convs' multiplies
  /// at half; cheapest first), so that a run cut short has looked at the most promising ones.
  double seconds = 0;
  /// Called as the run goes (after generating, then before each candidate is verified)
  /// with a line of progress: `pet mutate` prints it on stderr.
  std::function<void(const std::string&)> progress;
};

struct Mutant {
  Graph graph;               ///< corrected (and fused when that is cheaper)
  std::string origin;        ///< the rule's name, or "generated"
  verify::Verdict verdict;   ///< of the uncorrected mutant
  CorrectionStats corrections;
  bool fused = false;
  double est_ms = 0;
  double uncorrected_ms = 0;  ///< the mutant alone; est_ms - uncorrected_ms is what the corrections cost
  std::string summary;       ///< its ops, e.g. "PetRT Conv PetRT + 2 corrections"
};

struct MutateResult {
  std::vector<Mutant> mutants;  ///< best estimated first
  double original_est_ms = 0;
  double seconds = 0;
  std::string stop_reason;
  int64_t rule_attempts = 0, rule_matches = 0, generated = 0, verified = 0, rejected = 0, duplicates = 0;
  int64_t unexamined = 0;  ///< candidates left when the time budget ran out
  /// Where the time went: rules and generator, verification (finite-field tests), costing
  /// (the profiler, which compiles and times op configurations it has not seen).
  double generate_seconds = 0, verify_seconds = 0, cost_seconds = 0;
  std::vector<std::string> rule_refusals;  ///< "rule at node: reason" (for --explain)
  /// When nothing was verified: why (no rule applied, generator off or without candidates).
  std::string nothing_verified;
};

MutateResult run(const Graph& subprogram, const Options& opt = {});

}  // namespace pet::mutate
