#pragma once
/// The generic mutation generator (paper Algorithm 1): a depth-first search that builds
/// programs from pet's multilinear operator set over the original inputs and weights, with
/// parameters derived from the original program (its ops' attributes, its dimensions'
/// divisors, its batch size and dilations), and keeps every program whose outputs have the
/// original's number and shapes and that uses every original input and weight. Mutants are
/// deduplicated by a finite-field fingerprint of their outputs. Search order: iterative
/// deepening, so shallower programs are found first.
///
/// Pruning (documented because it shapes what is found): after a prelude of ops on original
/// tensors only, every op must read the previous op's output (chains, as in every mutant the
/// paper shows); an R/T op never reads another R/T op's output (their composition is one R/T).
#include <functional>
#include <string>

#include "pet/ir/builder.hpp"

namespace pet::mutate {

struct GeneratorOptions {
  int depth = 3;                     ///< most ops in a mutant
  int64_t max_candidates = 20000;    ///< complete programs examined
  int64_t max_states = 5000000;      ///< partial programs visited
  double seconds = 60;               ///< wall-clock budget
  uint64_t seed = 7;                 ///< fingerprint draws
  /// Called every `progress_every` seconds while the search runs (stderr in `pet mutate`),
  /// with the partial and complete programs visited and the mutants kept so far.
  std::function<void(const std::string&)> progress;
  double progress_every = 1;
};

struct GeneratorResult {
  std::vector<Graph> mutants;        ///< unique (by fingerprint), shallowest first
  std::vector<double> agreement;     ///< per mutant: fraction of sampled positions equal to the original
  int64_t states = 0, candidates = 0, duplicates = 0, identical = 0;
  std::string stop_reason;
  double seconds = 0;
};

GeneratorResult generate(const Graph& original, const GeneratorOptions& opt = {});

}  // namespace pet::mutate
