// Experiment 3 (the paper's Table 2): verification work of the box method (m+1 positions per
// box intersection) vs checking every output position, on the paper's operator cases at
// real model sizes, with measured times for both.
// Usage: exp_table2 [out.csv] [--no-exhaustive]
#include "pairs.hpp"
#include "common.hpp"
#include "pet/verify/verifier.hpp"

using namespace pet;

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "table2.csv";
  const bool exhaustive = !(argc > 2 && std::string(argv[2]) == "--no-exhaustive");
  std::vector<std::pair<std::string, lab::Pair>> cases;
  cases.emplace_back("conv 3x3, 2x64x56x56 (batch to width)", lab::conv_batch_to_width({.n = 2, .c = 64, .h = 56, .w = 56, .f = 64}, 1));
  cases.emplace_back("dilated conv, 1x512x14x14 d=2 (to dense)",
                     lab::dilated_to_dense({.c = 512, .h = 14, .w = 14, .f = 512, .pad = 2, .dil = 2}, true, 2));
  cases.emplace_back("grouped conv, 1x256x28x28 g=32 (split)",
                     lab::grouped_conv_split({.c = 256, .h = 28, .w = 28, .f = 256, .group = 32}, 3));
  cases.emplace_back("GEMM merge, 128x768 x 3 x 768x768 (Q/K/V)", lab::qkv_merge(128, 768, 768, 4));
  auto csv = lab::open_csv(path, "Table 2: verification work, box method vs all positions (t=2, p=2^31-1)",
                           "case,verdict,output_elements,boxes,positions_box,tests,work_box,work_all,reduction,seconds_box,seconds_all");
  lab::Progress progress("table2", int64_t(cases.size()));
  int done = 0;
  for (auto& [name, p] : cases) {
    auto box = verify::verify(p.original, p.mutant);
    double all_s = -1;
    if (exhaustive) all_s = verify::verify(p.original, p.mutant, {.exhaustive = true}).seconds;
    int64_t elements = 0;
    for (const auto& o : box.outputs) elements += numel(o.shape);
    int64_t work_box = box.positions_tested * box.tests, work_all = elements * box.tests;
    csv << '"' << name << "\"," << verify::verdict_name(box.verdict) << "," << elements << "," << box.boxes_checked << "," << box.positions_tested
        << "," << box.tests << "," << work_box << "," << work_all << "," << double(work_all) / double(work_box) << "," << box.seconds << ","
        << all_s << "\n";
    std::printf("%-44s %-21s boxes %5lld  positions x tests: box %7lld vs all %9lld (%7.0fx)  time %.3f s vs %.2f s\n", name.c_str(),
                std::string(verify::verdict_name(box.verdict)).c_str(), (long long)box.boxes_checked, (long long)work_box,
                (long long)work_all, double(work_all) / double(work_box), box.seconds, all_s);
    progress.tick(++done);
  }
}
