// Benchmarks of the search's hot paths (no backend involved):
//   verify:    the finite-field verifier on the paper's headline mutants (CSRNet's dilated conv
//              to a dense one, block and batch layout; ResNet's batch-to-width; a conv split in
//              halves; BERT's Q/K/V merge), with the time per box and per tested position;
//   generate:  the mutation generator on the lab's four subprograms at depth 2 and 3
//              (candidate programs examined per second);
//   rules:     the rules alone (pet mutate --depth 0) with the roofline cost, through
//              verification and correction.
// Counters are rates, so runs of different lengths compare.
#include <benchmark/benchmark.h>

#include "pairs.hpp"
#include "pet/mutate/mutate.hpp"
#include "pet/verify/verifier.hpp"

using namespace pet;

namespace {

const std::vector<lab::Pair>& verify_pairs() {
  static const std::vector<lab::Pair> p = [] {
    std::vector<lab::Pair> v;
    lab::ConvSpec csr{.n = 1, .c = 512, .h = 14, .w = 14, .f = 512, .k = 3, .pad = 2, .dil = 2};
    v.push_back(lab::dilated_to_dense(csr, true, 1));
    v.push_back(lab::dilated_to_dense(csr, false, 1));
    v.push_back(lab::conv_batch_to_width(lab::ConvSpec{.n = 16, .c = 64, .h = 56, .w = 56, .f = 64}, 1));
    v.push_back(lab::conv_split_halves(lab::ConvSpec{.n = 1, .c = 64, .h = 56, .w = 56, .f = 64}, 28, false, 1));
    v.push_back(lab::qkv_merge(128, 768, 768, 1));
    return v;
  }();
  return p;
}

void BM_verify(benchmark::State& st) {
  const auto& p = verify_pairs()[size_t(st.range(0))];
  verify::Report r;
  int64_t boxes = 0, positions = 0;
  for (auto _ : st) {
    r = verify::verify(p.original, p.mutant);
    boxes += r.boxes_checked;
    positions += r.positions_tested;
  }
  st.SetLabel(p.name + " (" + std::string(verify::verdict_name(r.verdict)) + ")");
  st.counters["boxes"] = double(r.boxes_checked);
  st.counters["boxes/s"] = benchmark::Counter(double(boxes), benchmark::Counter::kIsRate);
  st.counters["positions/s"] = benchmark::Counter(double(positions), benchmark::Counter::kIsRate);
}

void BM_generate(benchmark::State& st) {
  const auto subs = lab::mutation_subprograms();
  const auto& [name, g] = subs[size_t(st.range(0))];
  mutate::GeneratorOptions opt;
  opt.depth = int(st.range(1));
  opt.seconds = 30;
  mutate::GeneratorResult r;
  int64_t candidates = 0;
  for (auto _ : st) {
    r = mutate::generate(g, opt);
    candidates += r.candidates;
  }
  st.SetLabel(name + " d" + std::to_string(opt.depth) + (r.stop_reason.empty() ? "" : " (" + r.stop_reason + ")"));
  st.counters["mutants"] = double(r.mutants.size());
  st.counters["candidates/s"] = benchmark::Counter(double(candidates), benchmark::Counter::kIsRate);
}

void BM_rules(benchmark::State& st) {
  const auto subs = lab::mutation_subprograms();
  const auto& [name, g] = subs[size_t(st.range(0))];
  mutate::Options opt;
  opt.depth = 0;
  mutate::MutateResult r;
  for (auto _ : st) r = mutate::run(g, opt);
  st.SetLabel(name);
  st.counters["verified"] = double(r.verified);
  st.counters["mutants"] = double(r.mutants.size());
}

}  // namespace

BENCHMARK(BM_verify)->DenseRange(0, 4)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_generate)->ArgsProduct({{0, 1, 2, 3}, {2, 3}})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_rules)->DenseRange(0, 3)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
