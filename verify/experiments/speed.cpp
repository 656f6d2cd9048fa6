// Verification speed on the paper's two headline mutants (issue: each under one second):
//  - CSRNet back-end layer: dilation-2 conv 1x512x14x14, 512 filters, vs the parity
//    regrouping with a dense conv (both the block and the batch layout);
//  - ResNet-18 3x3 conv (64 -> 64 on 56x56) at batch 16 vs batch-to-width.
// Prints one JSON object per case (median of repeated runs) and writes them to a file.
#include <algorithm>
#include <cstdio>
#include <fstream>

#include "pairs.hpp"
#include "pet/verify/verifier.hpp"

using namespace pet;

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 5;
  const char* out_path = argc > 2 ? argv[2] : "verify_speed.jsonl";
  std::vector<lab::Pair> pairs;
  lab::ConvSpec csr{.n = 1, .c = 512, .h = 14, .w = 14, .f = 512, .k = 3, .pad = 2, .dil = 2};
  pairs.push_back(lab::dilated_to_dense(csr, true, 1));
  pairs.push_back(lab::dilated_to_dense(csr, false, 1));
  pairs.push_back(lab::conv_batch_to_width(lab::ConvSpec{.n = 16, .c = 64, .h = 56, .w = 56, .f = 64}, 1));
  std::ofstream out(out_path);
  for (const auto& p : pairs) {
    std::vector<double> t;
    verify::Report r;
    for (int i = 0; i < repeats; ++i) {
      r = verify::verify(p.original, p.mutant);
      t.push_back(r.seconds);
      std::fprintf(stderr, "\r%s: run %d/%d", p.name.c_str(), i + 1, repeats);
    }
    std::fprintf(stderr, "\n");
    std::sort(t.begin(), t.end());
    char line[512];
    std::snprintf(line, sizeof line,
                  "{\"pair\": \"%s\", \"output\": [%lld,%lld,%lld,%lld], \"verdict\": \"%s\", \"boxes\": %lld, \"positions\": %lld, "
                  "\"tests\": %d, \"evaluations\": %lld, \"corrected_elements\": %lld, \"median_s\": %.4f, \"min_s\": %.4f, \"runs\": %d}",
                  p.name.c_str(), (long long)r.outputs[0].shape[0], (long long)r.outputs[0].shape[1], (long long)r.outputs[0].shape[2],
                  (long long)r.outputs[0].shape[3], std::string(verify::verdict_name(r.verdict)).c_str(), (long long)r.boxes_checked,
                  (long long)r.positions_tested, r.tests, (long long)r.evaluations, (long long)r.outputs[0].corrected_elements,
                  t[t.size() / 2], t.front(), repeats);
    std::puts(line);
    out << line << "\n";
  }
}
