// Every command's options, once: parsing, `pet COMMAND --help` and `pet --help` come from
// these tables, so help and accepted options cannot drift apart.
#include <cstdio>

#include "cli.hpp"

namespace pet::cli {

namespace {
const std::vector<Option> kModelOptions = {
    {"shape", "NAME=AxBxC", "full shape of input NAME (overrides the model's)"},
    {"dim", "NAME=N", "value of symbolic dimension NAME (ONNX dim_param)"},
    {"default-dim", "N", "value of every other symbolic dimension (default 1)"},
    {"memory-limit", "SIZE", "refuse programs whose tensors need more than SIZE at once (512M, 8G; default 80 % of RAM)"},
};
std::vector<Option> with_model(std::vector<Option> v) {
  v.insert(v.end(), kModelOptions.begin(), kModelOptions.end());
  return v;
}
}  // namespace

const std::vector<CommandSpec>& commands() {
  static const std::vector<CommandSpec> c = {
      {"info", "MODEL.onnx", "inputs, outputs, op counts, FLOPs, parameters and multilinear subprograms of a model",
       with_model({{"json", "FILE", "also write the summary as JSON"},
                   {"quiet", "", "no text summary"},
                   {"extract", "K", "write multilinear subprogram K (as listed) as a model, for pet mutate and pet verify"},
                   {"output", "SUB.onnx", "where --extract writes (also -o)"}})},
      {"run", "MODEL.onnx", "execute (time, check) a model on a backend",
       with_model({{"backend", "cpu|cuda|reference", "where to run (default cpu; cuda where built and a GPU is present)"},
                   {"tf32", "", "cuda: TF32 tensor cores in convolutions and matrix products (faster, less exact; default off)"},
                   {"inputs", "DIR", "inputs from ONNX test data (input_0.pb, ...); default seeded random"},
                   {"check", "DIR", "compare every output with DIR's output_N.pb (pass: max|out-ref| <= atol + rtol max|ref|; integer outputs exactly, int8 and uint8 ones by the same rule)"},
                   {"atol", "A", "absolute tolerance of --check (default 1e-4)"},
                   {"rtol", "R", "tolerance relative to max|ref| of --check (default 1e-3)"},
                   {"repeat", "N", "time N runs after one warm-up"},
                   {"json", "FILE", "write {model, backend, median_ms, min_ms, runs, times_ms, outputs, check, ...}"},
                   {"save", "DIR", "write inputs and outputs as ONNX test data"},
                   {"seed", "S", "seed of the random inputs (default 1)"},
                   {"threads", "N", "threads (default: the physical cores)"},
                   {"plan", "", "print the compiled plan (kernels, fused ops, layouts, algorithms, memory)"},
                   {"profile", "", "print the median time of each step of the plan"},
                   {"conv-algorithm", "auto|direct|winograd|onednn-winograd", "force a conv algorithm (default auto: timed)"},
                   {"conv-layout", "auto|blocked|plain", "force the layout of direct convs"},
                   {"no-int8", "", "cpu: run a quantized model's convs and matrix products in float (default: oneDNN's int8 kernels where the CPU has VNNI)"},
                   {"algorithm-cache", "FILE|none", "where timed algorithm choices are kept (default ~/.cache/pet/algorithms.db)"},
                   {"disable-pass", "NAME,...", "leave graph passes out before lowering (see --list-passes)"},
                   {"print-after", "NAME,...|all", "print the graph after these passes"},
                   {"list-passes", "", "list the graph passes and exit"}})},
      {"optimize", "MODEL.onnx -o OUT.onnx", "rewrite a model with fully and partially equivalent transformations into a faster one",
       with_model({{"output", "OUT.onnx", "where the optimized model goes (also -o)"},
                   {"depth", "d", "generator depth (default 3)"},
                   {"rounds", "r", "search rounds per window (default 4)"},
                   {"top-k", "K", "candidates kept per round (default 4)"},
                   {"window", "N", "most ops mutated at a time (default 4)"},
                   {"policy", "both|equivalent|partial|none", "which transformations (default both)"},
                   {"budget", "SECONDS", "whole search, shared among the windows (70 % search, 30 % measuring in context); stops cleanly keeping the best found; the end-to-end timing and check come after it (default 120; 0: none)"},
                   {"window-budget", "SECONDS", "one window's search (default 30)"},
                   {"backend", "cpu|cuda", "the backend measured and optimized for (default cpu)"},
                   {"tf32", "", "cuda: measure and optimize with TF32 tensor cores (the end-to-end check still compares with the exact original)"},
                   {"threads", "N", "threads (default: the physical cores)"},
                   {"only", "RULE,...", "only these mutation rules (the generator still runs; --depth 0 turns it off)"},
                   {"disable", "RULE,...", "leave these mutation rules out"},
                   {"disable-pass", "NAME,...", "leave graph passes out (canonicalisation and post-optimisations)"},
                   {"print-after", "NAME,...|all", "print the graph after these passes"},
                   {"profile-cache", "FILE|none", "the op profiler's cache (default ~/.cache/pet/opcache.db)"},
                   {"algorithm-cache", "FILE|none", "the backends' algorithm choices (default ~/.cache/pet/algorithms.db)"},
                   {"decision-cache", "FILE|none", "the optimizer's memory of earlier runs: window search results (verified again) and in-context decisions (default: decisions.db beside the profile cache)"},
                   {"json", "FILE", "write the report as JSON"},
                   {"explain", "", "also say why each window kept its original form"},
                   {"keep-slower", "", "write the optimized program even if it measured slower (for analysis)"},
                   {"external-data", "", "write the weights as ONNX external data in OUT.data beside OUT (automatic where they exceed the 2 GiB one ONNX file holds)"},
                   {"fixed-shapes", "", "allow rewrites that need the values the symbolic dims were bound to, and write those dims at them where such a rewrite is kept (default: every rewrite carries over to every value, and the dims stay symbolic)"},
                   {"apply-candidates", "", "for tests: every window takes its best mutant without measuring it in place; written however it times"},
                   {"quiet", "", "no progress and no report"}})},
      {"verify", "ORIGINAL.onnx MUTANT.onnx", "which output regions of MUTANT agree with ORIGINAL for every input and weight",
       with_model({{"tests", "t", "random finite-field tests per position (default 2)"},
                   {"prime", "p", "the field's prime (default 2^31-1)"},
                   {"seed", "s", "seed of the random draws"},
                   {"z3", "", "cross-check the tested positions with Z3"},
                   {"z3-all", "", "cross-check every position with Z3"},
                   {"z3-timeout", "SECONDS", "watchdog per Z3 query"},
                   {"exhaustive", "", "also test every position (small programs)"},
                   {"cells", "", "print every box intersection"},
                   {"json", "FILE", "write {verdict, boxes_checked, positions_tested, tests, prime, correction, seconds, z3}"},
                   {"quiet", "", "no text report"}})},
      {"mutate", "SUB.onnx --out-dir DIR", "corrected mutants of a multilinear subprogram, as ONNX files ranked by measured cost",
       with_model({{"out-dir", "DIR", "where mutants and index.json go"},
                   {"depth", "d", "generator depth (default 3)"},
                   {"rules", "all|none|NAME,...", "mutation rules to apply (default all)"},
                   {"list-rules", "", "list the rules and exit"},
                   {"explain", "", "say why each rule did not apply"},
                   {"all", "", "also list mutants estimated slower than the original"},
                   {"time-budget", "SECONDS", "stop the generator after this long"},
                   {"tests", "t", "finite-field tests per position"},
                   {"seed", "s", "seed of the verifier's draws"},
                   {"cost", "profile|roofline", "cost model ranking the mutants (default profile: measured on the cpu backend)"},
                   {"profile-cache", "FILE|none", "the op profiler's cache (default ~/.cache/pet/opcache.db)"},
                   {"threads", "N", "threads of the cpu backend when profiling"},
                   {"json", "FILE", "also write the index as JSON here"},
                   {"quiet", "", "no text report"}})},
      {"ops", "", "the ONNX op types pet imports (default domain; If, Loop, Scan and sequences inlined at import)",
       {{"json", "FILE", "also write the list as JSON"}, {"quiet", "", "no text list"}}},
      {"cache", "show|export|clear [FILE...]", "pet's on-disk caches (op timings, algorithm choices, optimizer decisions): list, dump as JSON, empty",
       {{"json", "FILE", "show/export: write JSON here (default: text, or JSON on stdout for export)"}}},
  };
  return c;
}

const CommandSpec& command_spec(std::string_view name) {
  for (const auto& c : commands())
    if (c.name == name) return c;
  throw InternalError(cat("no option table for command '", name, "'"));
}

std::string help_text(const CommandSpec& c) {
  std::string s = cat("usage: pet ", c.name, c.positional.empty() ? "" : " ", c.positional, " [options]\n  ", c.summary, "\n\noptions:\n");
  constexpr size_t col = 30;  // help starts here (or on the next line after a long option)
  auto line = [&](const std::string& left, const std::string& help) {
    s += "  " + left;
    s += left.size() + 2 < col ? std::string(col - 2 - left.size(), ' ') : "\n" + std::string(col, ' ');
    s += help + "\n";
  };
  for (const auto& o : c.options) line("--" + o.name + (o.value.empty() ? "" : " " + o.value), o.help);
  line("--help", "this text");
  return s;
}

std::string usage_text() {
  std::string s = "usage: pet <command> [options]   (pet <command> --help for its options)\n";
  for (const auto& c : commands()) s += cat("  ", c.name, c.positional.empty() ? "" : " ", c.positional, "\n      ", c.summary, "\n");
  s += "exit codes: 0 success, 1 a failed check, 2 invalid input, 3 unsupported, 4 internal error\n";
  return s;
}

}  // namespace pet::cli
