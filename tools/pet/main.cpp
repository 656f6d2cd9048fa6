// The `pet` command line: pet <command> [args]. Errors print one sentence and exit non-zero:
// 2 invalid input, 3 unsupported, 4 internal error, 1 a failed check.
#include <cstdio>
#include <new>
#include <string>
#include <vector>

#include "cli.hpp"

namespace {
const char* kUsage =
    "usage: pet <command> [options]\n"
    "  info MODEL.onnx            inputs, outputs, op counts, FLOPs, parameters, multilinear subprograms\n"
    "  run  MODEL.onnx            execute: [--backend cpu|cuda|reference] [--inputs DIR] [--check DIR] [--repeat N]\n"
    "                             [--json FILE] [--save DIR] [--seed S] [--threads N] [--plan] [--profile]\n"
    "                             [--conv-algorithm auto|direct|winograd|onednn-winograd] [--conv-layout auto|blocked|plain]\n"
    "                             [--algorithm-cache FILE|none]\n"
    "  verify A.onnx B.onnx       which outputs of B agree with A for all inputs and weights:\n"
    "                             [--tests t] [--prime p] [--seed s] [--z3] [--z3-all] [--json FILE] [--cells]\n"
    "                             [--exhaustive]\n"
    "  mutate SUB.onnx --out-dir DIR   corrected mutants of a multilinear subprogram as ONNX files:\n"
    "                             [--depth d] [--rules all|none|NAME,...] [--json FILE] [--list-rules] [--explain]\n"
    "                             [--cost profile|roofline] [--profile-cache FILE|none] [--threads N]\n"
    "common options: --shape NAME=1x3x224x224  --dim NAME=N  --default-dim N (symbolic dims, default 1)\n";
}

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::string cmd = args[0];
  args.erase(args.begin());
  try {
    if (cmd == "info") return pet::cli::cmd_info(args);
    if (cmd == "run") return pet::cli::cmd_run(args);
    if (cmd == "verify") return pet::cli::cmd_verify(args);
    if (cmd == "mutate") return pet::cli::cmd_mutate(args);
    std::fprintf(stderr, "pet: error: unknown command '%s'\n%s", cmd.c_str(), kUsage);
    return 2;
  } catch (const pet::InvalidInput& e) {
    std::fprintf(stderr, "pet %s: error: %s\n", cmd.c_str(), e.what());
    return 2;
  } catch (const pet::Unsupported& e) {
    std::fprintf(stderr, "pet %s: unsupported: %s\n", cmd.c_str(), e.what());
    return 3;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "pet %s: error: out of memory\n", cmd.c_str());
    return 4;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pet %s: internal error: %s\n", cmd.c_str(), e.what());
    return 4;
  }
}
