// A rule of one's own, outside pet's tree: a conv's filters in two halves, as two convs whose
// outputs are concatenated (fully equivalent; pet's verifier proves it, no correction needed).
// It is passed to the mutator in a RuleSet of its own, run on a small conv, and the mutant is
// written as ONNX (with the original, for `pet verify`).
#include <cstdio>

#include "pet/core/rng.hpp"
#include "pet/mutate/mutate.hpp"
#include "pet/onnx/onnx.hpp"

namespace {

struct ConvSplitFilters final : pet::mutate::Rule<pet::ops::Conv> {
  std::string_view name() const override { return "conv-split-filters"; }
  std::string_view description() const override { return "a conv's filters in two halves, concatenated after"; }

  pet::mutate::Result apply(const pet::mutate::Match<pet::ops::Conv>& m, pet::mutate::MutantBuilder& b) const override {
    using namespace pet;
    const ops::Conv& conv = m.op();
    const int64_t f = m.type(1).shape[0];
    if (conv.group != 1) return mutate::no_match("the conv is grouped");
    if (f < 2 || f % 2) return mutate::no_match("the filter count is not even");
    auto halves = b.split(m.input(1), 0, {f / 2, f / 2});  // weight [F, C, ...] -> two [F/2, C, ...]
    std::vector<TensorId> bias;
    if (m.num_inputs() == 3) bias = b.split(m.input(2), 0, {f / 2, f / 2});
    std::vector<TensorId> parts;
    for (int h = 0; h < 2; ++h) {
      std::vector<TensorId> in{m.input(0), halves[size_t(h)]};
      if (!bias.empty()) in.push_back(bias[size_t(h)]);
      parts.push_back(b.add(conv, in, h ? "conv_hi" : "conv_lo"));
    }
    return b.replace(m.output(0), b.concat(parts, 1));
  }
};

}  // namespace

int main(int argc, char** argv) {
  using namespace pet;
  Graph g;
  Builder b(g);
  Rng rng(1);
  Tensor<float> w({8, 4, 3, 3}), bias({8});
  for (int64_t i = 0; i < w.size(); ++i) w[i] = float(rng.range(-2, 2));
  for (int64_t i = 0; i < bias.size(); ++i) bias[i] = float(rng.range(-2, 2));
  b.output(b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {b.input("x", {1, 4, 10, 10}), b.constant("w", w), b.constant("b", bias)}, "conv"));

  mutate::RuleSet mine;
  mine.add(std::make_unique<ConvSplitFilters>());
  mutate::Options opt;
  opt.rule_set = &mine;
  opt.depth = 0;  // the rule only, no generated mutants
  mutate::MutateResult r = mutate::run(g, opt);
  for (const auto& mu : r.mutants)
    std::printf("%s: %s, %lld corrected elements, %s\n", mu.origin.c_str(), std::string(verify::verdict_name(mu.verdict)).c_str(),
                (long long)mu.corrections.corrected_elements, mu.summary.c_str());
  if (r.mutants.empty() || r.mutants[0].origin != "conv-split-filters") {
    std::fprintf(stderr, "the rule produced no verified mutant\n");
    return 1;
  }
  if (argc > 1) {  // DIR: the original and the mutant as ONNX files
    onnx::export_file(g, std::string(argv[1]) + "/original.onnx");
    onnx::export_file(r.mutants[0].graph, std::string(argv[1]) + "/mutant.onnx");
  }
  return 0;
}
