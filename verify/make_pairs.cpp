// Writes the lab's known operator pairs as ONNX files, for `pet verify`:
//   OUT/<pair>.original.onnx and OUT/<pair>.mutant.onnx
// Usage: lab_pairs OUT [small|paper|subprograms]
//   small: test-sized shapes (default); paper: the CSRNet layer and the ResNet-18 batch-16 conv;
//   subprograms: the mutation generator's test subprograms (OUT/<name>.onnx, originals only).
#include <cstdio>
#include <filesystem>

#include "pairs.hpp"
#include "pet/onnx/onnx.hpp"

using namespace pet;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: lab_pairs OUT [small|paper]\n");
    return 2;
  }
  std::filesystem::create_directories(argv[1]);
  const bool paper = argc > 2 && std::string(argv[2]) == "paper";
  if (argc > 2 && std::string(argv[2]) == "subprograms") {
    for (auto& [name, g] : lab::mutation_subprograms()) {
      auto path = (std::filesystem::path(argv[1]) / (name + ".onnx")).string();
      onnx::export_file(g, path);
      std::printf("%s\n", path.c_str());
    }
    return 0;
  }
  std::vector<lab::Pair> pairs;
  if (paper) {
    lab::ConvSpec csr{.n = 1, .c = 512, .h = 14, .w = 14, .f = 512, .k = 3, .pad = 2, .dil = 2};
    pairs.push_back(lab::dilated_to_dense(csr, true, 1));
    pairs.push_back(lab::dilated_to_dense(csr, false, 1));
    pairs.push_back(lab::conv_batch_to_width(lab::ConvSpec{.n = 16, .c = 64, .h = 56, .w = 56, .f = 64}, 1));
    pairs.push_back(lab::matmuls_to_batched(128, 768, 768, 1));
  } else {
    pairs.push_back(lab::conv_batch_to_width(lab::ConvSpec{.n = 2, .c = 3, .h = 5, .w = 6, .f = 4}, 1));
    pairs.push_back(lab::dilated_to_dense(lab::ConvSpec{.c = 3, .h = 8, .w = 8, .f = 2, .pad = 2, .dil = 2}, true, 2));
    pairs.push_back(lab::dilated_to_dense(lab::ConvSpec{.c = 3, .h = 8, .w = 8, .f = 2, .pad = 2, .dil = 2}, false, 3));
    pairs.push_back(lab::matmuls_to_batched(5, 6, 7, 4));
    pairs.push_back(lab::conv_transposed_kernel(lab::ConvSpec{.c = 2, .h = 6, .w = 6, .f = 3}, 5));
  }
  for (auto& p : pairs) {
    p.original.name = p.name + "-original";
    p.mutant.name = p.name + "-mutant";
    auto base = std::filesystem::path(argv[1]) / p.name;
    onnx::export_file(p.original, base.string() + ".original.onnx");
    onnx::export_file(p.mutant, base.string() + ".mutant.onnx");
    std::printf("%s: %s (expected %s)\n", p.name.c_str(), base.string().c_str(), p.expected.c_str());
  }
}
