// Experiment 1 (Theorem 2 in practice): for non-equivalent pairs, the rate at which one
// random test at a differing position wrongly passes, as the prime shrinks, against the
// Schwartz-Zippel bound d/p (d: total degree of the difference polynomial there).
// Usage: exp_theorem2 [trials=4000] [out.csv]
#include "pairs.hpp"
#include "poly.hpp"
#include "common.hpp"
#include "pet/core/field.hpp"
#include "pet/verify/verifier.hpp"

using namespace pet;

namespace {
/// A position where the pair differs (from the verifier) and the degree of the difference.
std::pair<Index, int> failing_position(const lab::Pair& p) {
  auto r = verify::verify(p.original, p.mutant);
  for (const auto& c : r.outputs[0].cells)
    if (!c.equal)
      for (const Index& v : c.positions) {
        auto leaves = [&](const Graph& g) {
          std::vector<std::optional<Tensor<lab::Poly>>> l(size_t(g.num_tensors()));
          auto names = verify::shared_leaves(p.original, p.mutant);
          for (size_t i = 0; i < g.inputs().size(); ++i) {
            Tensor<lab::Poly> t(g.type(g.inputs()[i]).shape);
            for (int64_t k = 0; k < t.size(); ++k) t[k] = lab::Poly::var(int(i), k);
            l[size_t(g.inputs()[i])] = t;
          }
          for (TensorId t = 0; t < g.num_tensors(); ++t)
            if (g.tensor(t).is_constant() && is_float(g.type(t).dtype)) {
              int id = 1000;
              for (const auto& [name, s] : names.weights) {
                if (name == g.tensor(t).name) break;
                ++id;
              }
              Tensor<lab::Poly> w(g.type(t).shape);
              for (int64_t k = 0; k < w.size(); ++k) w[k] = lab::Poly::var(id, k);
              l[size_t(t)] = w;
            }
          return l;
        };
        verify::PointEvaluator<lab::Poly> ea(p.original, leaves(p.original)), eb(p.mutant, leaves(p.mutant));
        lab::Poly d = ea.at(p.original.outputs()[0], v) - eb.at(p.mutant.outputs()[0], v);
        if (d.terms.empty()) continue;
        int degree = 0;
        for (const auto& [m, c] : d.terms) degree = std::max(degree, int(m.size()));
        return {v, degree};
      }
  throw InvalidInput(p.name + " has no differing position");
}
}  // namespace

int main(int argc, char** argv) {
  const int trials = argc > 1 ? std::atoi(argv[1]) : 4000;
  const std::string path = argc > 2 ? argv[2] : "theorem2.csv";
  std::vector<lab::Pair> pairs;
  pairs.push_back(lab::conv_transposed_kernel({.c = 2, .h = 5, .w = 5, .f = 2}, 1));
  pairs.push_back(lab::conv_batch_to_width({.n = 2, .c = 2, .h = 4, .w = 4, .f = 2}, 2));
  pairs.push_back(lab::dilated_to_dense({.c = 1, .h = 6, .w = 6, .f = 1, .pad = 2, .dil = 2}, true, 3));
  pairs.push_back(lab::conv_split_halves({.c = 2, .h = 6, .w = 4, .f = 2}, 3, false, 4));
  pairs.push_back(lab::random_program_pair(7, true));
  const std::vector<uint64_t> primes = {2, 3, 5, 7, 31, 127, 8191, 2147483647};
  auto csv = lab::open_csv(path, "Theorem 2 in practice: false-pass rate of one random test at a differing position",
                           "pair,prime,degree,trials,false_passes,rate,bound_d_over_p");
  lab::Progress progress("theorem2", int64_t(pairs.size() * primes.size()));
  int step = 0, violations = 0;
  for (const auto& p : pairs) {
    auto [pos, degree] = failing_position(p);
    auto names = verify::shared_leaves(p.original, p.mutant);
    for (uint64_t prime : primes) {
      FpRt::Scope scope(prime);
      Rng rng(prime * 7919 + uint64_t(degree));
      int64_t passes = 0;
      for (int t = 0; t < trials; ++t) {
        std::vector<Tensor<FpRt>> inputs;
        std::map<std::string, Tensor<FpRt>> weights;
        auto draw = [&](const Shape& s) {
          Tensor<FpRt> x(s);
          for (int64_t k = 0; k < x.size(); ++k) x[k] = FpRt::raw(uint32_t(rng.below(prime)));
          return x;
        };
        for (TensorId in : p.original.inputs()) inputs.push_back(draw(p.original.type(in).shape));
        for (const auto& [name, s] : names.weights) weights.emplace(name, draw(s));
        auto leaves = [&](const Graph& g) {
          std::vector<std::optional<Tensor<FpRt>>> l(size_t(g.num_tensors()));
          for (size_t i = 0; i < g.inputs().size(); ++i) l[size_t(g.inputs()[i])] = inputs[i];
          for (TensorId t = 0; t < g.num_tensors(); ++t)
            if (g.tensor(t).is_constant() && is_float(g.type(t).dtype)) l[size_t(t)] = weights.at(g.tensor(t).name);
          return l;
        };
        verify::PointEvaluator<FpRt> ea(p.original, leaves(p.original)), eb(p.mutant, leaves(p.mutant));
        try {
          passes += ea.at(p.original.outputs()[0], pos) == eb.at(p.mutant.outputs()[0], pos);
        } catch (const InvalidInput&) {  // an average over a multiple of p has no value in F_p
          passes = -1;
          break;
        }
      }
      if (passes < 0) {
        csv << p.name << "," << prime << "," << degree << "," << trials << ",,n/a (divides by a multiple of p)," << "\n";
        progress.tick(++step);
        std::printf("%-28s p=%-10llu d=%d  not defined: the program divides by a multiple of p\n", p.name.c_str(),
                    (unsigned long long)prime, degree);
        continue;
      }
      double rate = double(passes) / trials, bound = std::min(1.0, double(degree) / double(prime));
      // Allow sampling noise (4 standard deviations) before calling the bound violated.
      double slack = 4 * std::sqrt(bound * (1 - bound) / trials) + 1.0 / trials;
      violations += rate > bound + slack;
      csv << p.name << "," << prime << "," << degree << "," << trials << "," << passes << "," << rate << "," << bound << "\n";
      progress.tick(++step);
      std::printf("%-28s p=%-10llu d=%d  false passes %5lld/%d = %.4f  bound %.4f\n", p.name.c_str(), (unsigned long long)prime, degree,
                  (long long)passes, trials, rate, bound);
    }
  }
  std::printf("theorem2: %d (pair, prime) rates above the Schwartz-Zippel bound beyond sampling noise\n", violations);
  return violations == 0 ? 0 : 1;
}
