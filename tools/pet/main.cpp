// The `pet` command line: pet <command> [args]. Errors print one sentence and exit non-zero:
// 2 invalid input, 3 unsupported, 4 internal error, 1 a failed check.
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "cli.hpp"
#include "pet/core/parallel.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    std::fputs(pet::cli::usage_text().c_str(), args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::string cmd = args[0];
  args.erase(args.begin());
  // Threads default to the physical cores (OMP_NUM_THREADS, when set, decides instead).
  if (const char* omp = std::getenv("OMP_NUM_THREADS"); !omp || !*omp) pet::set_num_threads(pet::physical_cores());
  try {
    if (cmd == "info") return pet::cli::cmd_info(args);
    if (cmd == "run") return pet::cli::cmd_run(args);
    if (cmd == "verify") return pet::cli::cmd_verify(args);
    if (cmd == "mutate") return pet::cli::cmd_mutate(args);
    if (cmd == "optimize") return pet::cli::cmd_optimize(args);
    if (cmd == "cache") return pet::cli::cmd_cache(args);
    if (cmd == "ops") return pet::cli::cmd_ops(args);
    std::fprintf(stderr, "pet: error: unknown command '%s'\n%s", cmd.c_str(), pet::cli::usage_text().c_str());
    return 2;
  } catch (const pet::cli::HelpShown&) {
    return 0;
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
