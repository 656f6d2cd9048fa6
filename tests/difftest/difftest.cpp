// Differential test of pet's backends: random programs (program_gen.hpp) run on the cpu
// backend under every conv algorithm and layout choice, on 1 and 2 threads and two input
// seeds (or, with --backend cuda, on the cuda backend), against the reference interpreter.
// Programs run in forked worker processes, so a crash or a hang is recorded against its
// program and the run goes on. Failures are shrunk to a minimal program (nodes bypassed or
// cut off one at a time while the failure persists) and written as ONNX files with the
// command that replays them.
//
//   difftest run [--count N] [--seed S] [--start I] [--workers W] [--out DIR] [--json FILE]
//                [--emit DIR] [--emit-every K] [--min-ops A] [--max-ops B] [--timeout SEC]
//                [--max-shrink N] [--asan BIN] [--quiet] [--backend cpu|cuda]
//   difftest replay MODEL.onnx|DIR... every configuration x {1, 2, 3} threads x 2 seeds
//   difftest show SEED INDEX          one program, and its plan under each configuration
//
// With --optimize [--optimize-budget S] (run, replay, show), each program goes through the
// whole optimizer first (pet optimize's search on a budget of S seconds, default 3, every
// window taking its best mutant unmeasured), and the optimized program is checked: its
// interface, the reference interpreter and the backend on it against the original's
// reference outputs, and an ONNX round trip; --emit writes the optimized programs.
//
// With --carry-over (implies --optimize), the optimizer must also keep only rewrites that carry
// over to the program at its inputs' leading dims plus one (pet optimize's check for
// symbolic dims: Options::carry_over_to, with that program as the model there), and the
// optimized program, rebound there (optimize::RebindLike), must compute what that program
// computes. Programs that do not rebind there are optimized without it.
//
// Exit: 0 all agree, 1 a failure, 2 bad usage, 3 the backend is not here (cuda without a
// CUDA device, or not built).
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>

#include "pet/backend/backend.hpp"
#include "pet/core/parallel.hpp"
#include "pet/eval/compare.hpp"
#include "pet/eval/interpreter.hpp"
#include "pet/onnx/onnx.hpp"
#include "pet/optimize/optimize.hpp"
#include "pet/transform/rebind.hpp"
#include "program_gen.hpp"

namespace fs = std::filesystem;
using namespace pet;
using namespace pet::difftest;

namespace {

/// One way to compile a program on the backend under test.
struct Config {
  std::string name, conv_algorithm, conv_layout;
  int threads = 1;
};

/// The backend under test (--backend): "cpu", or "cuda" (one configuration: cuDNN chooses
/// its algorithms by measurement). Set once by main, before any worker is forked.
std::string g_backend = "cpu";
/// --optimize: programs go through the optimizer first (check_optimized), with this budget.
bool g_optimize = false;
/// --carry-over: the optimizer keeps rewrites that carry over to the leading dims plus one.
bool g_carry = false;
double g_optimize_budget = 3;

/// The backend of this process, made once (a cuda backend holds a CUDA context; workers are
/// forked before any is made, since a CUDA context does not survive fork).
backend::Backend& backend_under_test() {
  static std::unique_ptr<backend::Backend> b = backend::make_backend(g_backend);
  return *b;
}

std::vector<Config> base_configs() {
  if (g_backend == "cuda") return {{"cuda", "auto", "auto"}};
  return {{"auto", "auto", "auto"},
          {"direct-blocked", "direct", "blocked"},
          {"direct-plain", "direct", "plain"},
          {"pet-winograd", "winograd", "auto"},
          {"onednn-winograd", "onednn-winograd", "auto"}};
}

/// The configurations for program `index`: each algorithm once, threads alternating.
std::vector<Config> configs_for(uint64_t index) {
  auto c = base_configs();
  for (size_t i = 0; i < c.size(); ++i) c[i].threads = int((index + i) % 2) + 1;
  return c;
}
/// Every algorithm on every thread count (replay, shrinking).
std::vector<Config> all_configs(std::vector<int> threads = {1, 2}) {
  std::vector<Config> out;
  for (int t : threads)
    for (Config c : base_configs()) c.threads = t, out.push_back(c);
  return out;
}

constexpr double kAtol = 1e-4, kRtol = 1e-3;  // pet run --check's rule
const uint64_t kInputSeeds[] = {11, 12};

/// compare() with one allowance: where the reference is beyond +-1e30 (the lowest float of
/// a max-pool window of padding, fed on to a conv), the backend must be beyond it too, or
/// inf or NaN: the algorithms overflow at different points (the reference accumulates in
/// double), so a sum of such values can come out as -3.1e38 in one and +inf in another
/// (seed 1000 program 13065: a conv over -FLT_MAX rows, then + -FLT_MAX); the other
/// positions are compared as usual, against the largest of them.
Comparison compare_outputs(const Value<float>& got, const Value<float>& ref) {
  const auto* r = std::get_if<Tensor<float>>(&ref);
  const auto* g = std::get_if<Tensor<float>>(&got);
  if (!r || !g || g->shape() != r->shape()) return compare(got, ref, kAtol, kRtol);
  constexpr double huge = 1e30;
  bool any_huge = false;
  for (int64_t i = 0; i < r->size(); ++i) any_huge = any_huge || (std::abs((*r)[i]) > huge && !std::isnan((*r)[i]));
  if (!any_huge) return compare(got, ref, kAtol, kRtol);
  Tensor<float> g2 = g->clone(), r2 = r->clone();
  int64_t bad = 0;
  for (int64_t i = 0; i < r->size(); ++i)
    if (std::abs(r2[i]) > huge && !std::isnan(r2[i])) {
      bad += !(std::abs(g2[i]) > huge || std::isnan(g2[i]));
      g2[i] = r2[i] = 0;
    }
  Comparison c = compare(Value<float>(g2), Value<float>(r2), kAtol, kRtol);
  c.mismatches += bad;
  c.pass = c.pass && !bad;
  if (bad) c.problem = cat(bad, " elements beyond 1e30 in the reference are not in the result");
  return c;
}

struct Failure {
  std::string kind;    ///< mismatch, error, crash, hang, roundtrip
  std::string config;  ///< e.g. "direct-plain/2t"
  std::string detail;
};

std::string config_label(const Config& c) { return cat(c.name, "/", c.threads, "t"); }

std::vector<Value<float>> inputs_for(const Graph& g, uint64_t seed) {
  Rng rng(seed);
  std::vector<Value<float>> in;
  for (TensorId t : g.inputs()) in.push_back(backend::random_value(g.type(t), rng));
  return in;
}

/// The outcome of one program: "invalid" when the reference itself refuses it (the
/// generator made something pet rejects at run time), else the failures (none: it passed).
struct Outcome {
  bool invalid = false;
  std::string invalid_reason;
  std::vector<Failure> failures;
  std::optional<Graph> optimized;  ///< --optimize: the program the optimizer made (what --emit writes)
  std::string applied;             ///< --optimize: what it applied (applied_text)
  int rewritten = 0;               ///< --optimize: windows rewritten
  /// --carry-over: 1 the program rebound at the leading dims + 1 (the optimizer got it), 2 and
  /// the optimized program rebound there too and was checked there
  int carried = 0;
};

/// The reference interpreter's outputs computed in double, rounded to float.
std::vector<Value<float>> exact_outputs(const Graph& g, const std::vector<Value<float>>& in) {
  auto widen = [](const auto& v, auto to) {
    using To = decltype(to);
    return std::visit([](const auto& t) -> Value<To> {
      using E = std::decay_t<decltype(t[0])>;
      if constexpr (std::is_same_v<E, int64_t>) {
        return t;
      } else {
        Tensor<To> r(t.shape());
        for (int64_t i = 0; i < t.size(); ++i) r[i] = To(t[i]);
        return r;
      }
    }, v);
  };
  std::vector<Value<double>> wide;
  for (const auto& v : in) wide.push_back(widen(v, 0.0));
  std::vector<Value<float>> out;
  for (const auto& v : Interpreter<double>(g).run(wide)) out.push_back(widen(v, 0.f));
  return out;
}

/// Output k of program g's run on input set `in`, against the reference's: "" when they agree
/// by the rule above, else what differs. `exact` holds the double-precision reference
/// outputs of `in`, computed when first needed.
std::string disagreement(const Graph& g, size_t k, const Value<float>& got, const Value<float>& ref, const std::vector<Value<float>>& in,
                         std::optional<std::vector<Value<float>>>& exact) {
  const Comparison cmp = compare_outputs(got, ref);
  if (cmp.pass) return "";
  // An output whose exact value is far smaller than the terms it sums (a row's deviations
  // from its mean, added up: 0 exactly) is float rounding noise in the reference too; a
  // result within tolerance of the exact value, computed in double, is right (seed 44000
  // program 879: reference 1.4e-4, cpu -6e-6, exact 0).
  if (!exact) exact = exact_outputs(g, in);
  const Comparison to_exact = compare_outputs(got, (*exact)[k]);
  if (to_exact.pass) return "";
  // An output that is rounding noise itself (a decomposed layer norm of a row whose values
  // are equal in exact arithmetic: the float reference is off its own exact value by more
  // than the tolerance) carries no information to check: the backend passes if it is no
  // further from the exact value than 4 times the reference's own float error (seed 85000
  // program 1728: reference and cpu both noise of 1e-3 where the exact value is about 1e-13).
  const Comparison ref_to_exact = compare_outputs(ref, (*exact)[k]);
  if (!ref_to_exact.pass && to_exact.problem.empty() && to_exact.max_abs_err <= 4 * ref_to_exact.max_abs_err) return "";
  return cat("output ", k, " ('", g.tensor(g.outputs()[k]).name, "'): ", cmp.problem.empty() ? "" : cmp.problem + "; ", "max|out-ref| ",
             cmp.max_abs_err, " max|ref| ", cmp.max_abs_ref, ", ", cmp.mismatches, " elements off");
}

/// The reference interpreter's outputs of g on each input seed (into ins and refs); false,
/// with the outcome said, when the reference refuses the program or fails.
bool reference_runs(const Graph& g, std::vector<std::vector<Value<float>>>& ins, std::vector<std::vector<Value<float>>>& refs, Outcome& out) {
  try {
    auto ref = backend::make_backend("reference")->compile(g);
    for (uint64_t s : kInputSeeds) {
      ins.push_back(inputs_for(g, s));
      refs.push_back(ref->run(ins.back()));
    }
  } catch (const InternalError& e) {
    out.failures.push_back({"error", "reference", e.what()});
    return false;
  } catch (const Error& e) {
    out.invalid = true;
    out.invalid_reason = e.what();
    return false;
  }
  return true;
}

Outcome check_optimized(const Graph& g);

Outcome check_program(const Graph& g, const std::vector<Config>& configs) {
  if (g_optimize) return check_optimized(g);
  Outcome out;
  std::vector<std::vector<Value<float>>> ins, refs;
  if (!reference_runs(g, ins, refs, out)) return out;
  std::vector<std::optional<std::vector<Value<float>>>> exact(ins.size());  // double-precision references, when needed
  backend::Backend& be = backend_under_test();
  std::vector<std::vector<float>> constants(size_t(g.num_tensors()));  // the float constants' values before
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (const auto* f = g.tensor(t).is_constant() ? std::get_if<Tensor<float>>(&*g.tensor(t).value) : nullptr) constants[size_t(t)] = f->vec();
  for (const Config& c : configs) {
    backend::CompileOptions opt;
    opt.threads = c.threads;
    opt.conv_algorithm = c.conv_algorithm;
    opt.conv_layout = c.conv_layout;
    try {
      set_num_threads(c.threads);
      auto exe = be.compile(g, opt);
      bool failed = false;
      // Each input twice: buffers are reused between runs. The first run's outputs are kept
      // over the second and must come out of it unchanged (the caller's tensors are not the
      // backend's to write); they are dropped before the next input's, whose run may then
      // reuse their storage.
      std::vector<Value<float>> kept, snapshot;
      for (size_t s = 0; s < ins.size() && !failed; ++s)
        for (int round = 0; round < 2 && !failed; ++round) {
          auto got = exe->run(ins[s]);
          if (round == 0) {
            kept = got;
            snapshot.clear();
            for (const auto& v : got) snapshot.push_back(std::visit([](const auto& t) { return Value<float>(t.clone()); }, v));
          } else {
            for (size_t k = 0; k < kept.size() && !failed; ++k)
              if (!compare(kept[k], snapshot[k], 0, 0).pass) {
                out.failures.push_back({"mismatch", config_label(c), cat("output ", k, " of input seed ", kInputSeeds[s], "'s first run changed during its second run")});
                failed = true;
              }
            kept.clear();
          }
          if (got.size() != refs[s].size()) {
            out.failures.push_back({"mismatch", config_label(c), cat(got.size(), " outputs, expected ", refs[s].size())});
            failed = true;
            break;
          }
          for (size_t k = 0; k < got.size(); ++k) {
            const std::string d = disagreement(g, k, got[k], refs[s][k], ins[s], exact[s]);
            if (d.empty()) continue;
            out.failures.push_back({"mismatch", config_label(c), cat(d, ", input seed ", kInputSeeds[s], "\nplan:\n", exe->describe())});
            failed = true;
            break;
          }
        }
    } catch (const std::exception& e) {
      out.failures.push_back({"error", config_label(c), e.what()});
    }
  }
  // The backend reads the graph's constants in place: no configuration may have changed them.
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (g.tensor(t).is_constant() && !constants[size_t(t)].empty() &&
        std::memcmp(constants[size_t(t)].data(), std::get<Tensor<float>>(*g.tensor(t).value).data(), constants[size_t(t)].size() * sizeof(float)) != 0) {
      out.failures.push_back({"mismatch", "all", cat("constant '", g.tensor(t).name, "' changed while the backend compiled and ran the program")});
      break;
    }
  return out;
}

/// The transformations an optimized program took, one line each ("" for none).
std::string applied_text(const optimize::Report& r) {
  std::string s;
  for (const auto& w : r.windows)
    if (w.applied != "original")
      s += cat("  window ", w.index, " (", w.ops, "): ", w.applied, " ", w.verdict, w.correction_kernels ? cat(", ", w.correction_kernels, " correction kernels") : "",
               w.reused ? " (reused)" : "", " -> ", w.summary, "\n");
  for (const auto& p : r.passes)
    if (p.stats.changed) s += cat("  pass ", p.name, ": ", p.stats.note, "\n");
  return s;
}

/// --optimize: the program through the whole optimizer (`pet optimize`'s search on a small
/// budget, every window taking its best mutant without measuring in place, so that rewrites
/// are exercised whether or not they pay off), then the optimized program checked on its own:
/// the same inputs and outputs (names, types), the reference interpreter and the backend
/// under test on it against the original's reference outputs, and an ONNX round trip.
Outcome check_optimized(const Graph& g) {
  Outcome out;
  std::vector<std::vector<Value<float>>> ins, refs;
  if (!reference_runs(g, ins, refs, out)) return out;
  optimize::Options o;
  o.backend = g_backend;
  o.budget_s = g_optimize_budget;
  o.window_budget_s = g_optimize_budget / 2;
  o.depth = 2;
  o.rounds = 2;
  o.top_k = 3;
  o.measure_best = 3;
  o.threads = 1;
  o.time_rounds = 1;
  o.time_runs = 1;
  o.apply_candidates = true;
  set_num_threads(1);
  // --carry-over: the program at its inputs' leading dims plus one, where it rebinds there.
  std::map<std::string, Shape> shapes;
  std::optional<Graph> there;
  if (g_carry) {
    for (TensorId t : g.inputs()) {
      Shape sh = g.type(t).shape;
      if (!sh.empty()) ++sh[0];
      shapes[g.tensor(t).name] = sh;
    }
    try {
      there = transform::rebind(g, shapes);
      backend::make_backend("reference")->compile(*there)->run(inputs_for(*there, kInputSeeds[0]));
      o.carry_over_to = {{"leading dims + 1", shapes, std::make_shared<const Graph>(*there)}};
      out.carried = 1;
    } catch (const Error&) {
      there.reset();
    }
  }
  optimize::Result r;
  try {
    r = optimize::optimize(g, o);
  } catch (const std::exception& e) {
    out.failures.push_back({"error", "optimize", e.what()});
    return out;
  }
  out.optimized = r.graph;
  const Graph& h = *out.optimized;
  const std::string applied = out.applied = applied_text(r.report);
  for (const auto& w : r.report.windows) out.rewritten += w.applied != "original";
  auto fail = [&](const char* kind, const char* where, const std::string& what) {
    out.failures.push_back({kind, where, cat(what, "\napplied:\n", applied.empty() ? "  nothing\n" : applied, "optimized program:\n", to_text(h))});
  };
  auto interface = [](const Graph& x, const std::vector<TensorId>& ts) {
    std::string s;
    for (TensorId t : ts) s += cat(x.tensor(t).name, ":", to_string(x.type(t)), " ");
    return s;
  };
  if (interface(g, g.inputs()) != interface(h, h.inputs()) || interface(g, g.outputs()) != interface(h, h.outputs())) {
    fail("mismatch", "interface", cat("inputs ", interface(h, h.inputs()), "outputs ", interface(h, h.outputs()), "where the original has inputs ",
                                      interface(g, g.inputs()), "outputs ", interface(g, g.outputs())));
    return out;
  }
  std::vector<std::optional<std::vector<Value<float>>>> exact(ins.size());
  // The optimized program compiled by `compile`, run on every input set.
  auto check_runs = [&](const char* where, const std::function<std::unique_ptr<backend::Executable>()>& compile) {
    try {
      const auto exe = compile();
      for (size_t s = 0; s < ins.size(); ++s) {
        const auto got = exe->run(ins[s]);
        for (size_t k = 0; k < got.size(); ++k)
          if (std::string d = disagreement(g, k, got[k], refs[s][k], ins[s], exact[s]); !d.empty()) {
            fail("mismatch", where, cat(d, ", input seed ", kInputSeeds[s]));
            return;
          }
      }
    } catch (const std::exception& e) {
      fail("error", where, e.what());
    }
  };
  check_runs("optimized/reference", [&] { return backend::make_backend("reference")->compile(h); });
  check_runs(g_backend == "cuda" ? "optimized/cuda" : "optimized/cpu", [&] { return backend_under_test().compile(h); });
  check_runs("optimized/onnx-roundtrip",
             [&] { return backend::make_backend("reference")->compile(onnx::import_bytes(onnx::export_bytes(h), "optimized program").graph); });
  // --carry-over: what was kept carries over; the optimized program rebound there (where it
  // rebinds: pet optimize writes the original where not) computes what the program there does.
  if (there) {
    std::optional<Graph> h2;
    try {
      h2 = optimize::RebindLike(g, *there, o)(h, shapes);
    } catch (const Error&) {  // not rebound: pet optimize would write the original
    }
    if (h2) {
      out.carried = 2;
      try {
        const auto in = inputs_for(*there, kInputSeeds[0]);
        const auto want = backend::make_backend("reference")->compile(*there)->run(in);
        const auto got = backend::make_backend("reference")->compile(*h2)->run(in);
        std::optional<std::vector<Value<float>>> exact;
        for (size_t k = 0; k < got.size() && k < want.size(); ++k)
          if (std::string d = disagreement(*there, k, got[k], want[k], in, exact); !d.empty()) {
            fail("mismatch", "carry-over", cat(d, " at the leading dims + 1, where the search found its rewrites carry over"));
            break;
          }
      } catch (const std::exception& e) {
        fail("error", "carry-over", e.what());
      }
    }
  }
  return out;
}

/// Writes the program and its reference outputs in ONNX's backend-test layout (for ONNX
/// Runtime and OpenVINO, tests/difftest/ort_check.py), then re-imports the file and checks
/// that it computes what the program computes. `original`: the program g was optimized from
/// (same inputs and outputs), written beside it as original.onnx, so that a runtime's own
/// error on a program can be told apart from one on pet's rewrite of it.
std::optional<Failure> emit(const Graph& g, const fs::path& dir, const Graph* original) {
  try {
    fs::create_directories(dir / "test_data_set_0");
    onnx::export_file(g, (dir / "model.onnx").string());
    if (original) onnx::export_file(*original, (dir / "original.onnx").string());
    auto in = inputs_for(g, kInputSeeds[0]);
    auto ref = backend::make_backend("reference")->compile(g)->run(in);
    for (size_t i = 0; i < in.size(); ++i)
      onnx::write_tensor_file((dir / "test_data_set_0" / cat("input_", i, ".pb")).string(),
                              {g.tensor(g.inputs()[i]).name, g.type(g.inputs()[i]).dtype, in[i]});
    for (size_t i = 0; i < ref.size(); ++i)
      onnx::write_tensor_file((dir / "test_data_set_0" / cat("output_", i, ".pb")).string(),
                              {g.tensor(g.outputs()[i]).name, g.type(g.outputs()[i]).dtype, ref[i]});
    onnx::Model m = onnx::import_file((dir / "model.onnx").string());
    auto back = backend::make_backend("reference")->compile(m.graph)->run(in);
    for (size_t k = 0; k < ref.size(); ++k) {
      Comparison c = compare_outputs(back.at(k), ref[k]);
      if (!c.pass) return Failure{"roundtrip", "export+import", cat("output ", k, " differs after an ONNX round trip: ", c.max_abs_err)};
    }
  } catch (const std::exception& e) {
    return Failure{"roundtrip", "export+import", e.what()};
  }
  return std::nullopt;
}

// ------------------------------------------------------------------ worker processes

std::string one_line(std::string s) {
  for (char& ch : s)
    if (ch == '\n' || ch == '\t') ch = ' ';
  return s;
}

struct RunOptions {
  uint64_t seed = 1, start = 0, count = 300;
  int workers = 1, batch = 50, timeout_s = 120, max_shrink = 20;
  GenOptions gen;
  std::string out_dir, json, emit_dir, asan;
  uint64_t emit_every = 0;
  bool quiet = false;
};

/// A worker's loop (in the child): for each program, "S i" before it and "R i kind<TAB>config<TAB>detail"
/// per failure, then "D i ok|rewritten|invalid" after it (with " rebound" or " carried" for --carry-over).
[[noreturn]] void worker(int fd, const RunOptions& ro, uint64_t begin, uint64_t end) {
  FILE* f = fdopen(fd, "w");
  setvbuf(f, nullptr, _IOLBF, 0);
  for (uint64_t i = begin; i < end; ++i) {
    std::fprintf(f, "S %lu\n", (unsigned long)i);
    std::fflush(f);
    Graph g = random_program(program_seed(ro.seed, i), ro.gen);
    Outcome o = check_program(g, configs_for(i));
    if (!o.invalid && o.failures.empty() && ro.emit_every && i % ro.emit_every == 0 && !ro.emit_dir.empty())
      if (auto fl = emit(o.optimized ? *o.optimized : g, fs::path(ro.emit_dir) / cat("p", i), o.optimized ? &g : nullptr))
        o.failures.push_back(*fl);
    for (const Failure& fl : o.failures)
      std::fprintf(f, "R %lu %s\t%s\t%s\n", (unsigned long)i, fl.kind.c_str(), fl.config.c_str(), one_line(fl.detail).c_str());
    std::fprintf(f, "D %lu %s%s\n", (unsigned long)i, o.invalid ? "invalid" : o.rewritten ? "rewritten" : "ok",
                 o.carried == 2 ? " carried" : o.carried == 1 ? " rebound" : "");
    std::fflush(f);
  }
  std::fclose(f);
  _exit(0);
}

struct Child {
  pid_t pid = -1;
  int fd = -1;
  uint64_t begin = 0, end = 0, current = 0;
  bool started = false;  ///< "S current" seen, "D current" not yet
  std::string buf;
  std::chrono::steady_clock::time_point last;
};

std::string signal_text(int status) {
  if (WIFSIGNALED(status)) return cat("killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  return cat("exit status ", WEXITSTATUS(status));
}

/// Runs `f` in a forked child with a time limit; returns its exit status text or "" for 0,
/// and "timeout" when it ran too long.
template <class F>
std::string in_child(F&& f, int timeout_s, int* code = nullptr) {
  pid_t pid = fork();
  if (pid == 0) {
    alarm(unsigned(timeout_s));
    int rc = f();
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(rc);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (code) *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) return "timeout";
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  return signal_text(status);
}

/// The failure class of a program under every configuration, in a child process: "" if it
/// passes, else "mismatch", "error", "crash" or "hang".
std::string failure_class(const Graph& g, int timeout_s) {
  int code = 0;
  std::string st = in_child(
      [&] {
        Outcome o = check_program(g, all_configs());
        if (o.invalid) return 0;
        for (const auto& fl : o.failures)
          if (fl.kind == "mismatch") return 11;
        return o.failures.empty() ? 0 : 12;
      },
      timeout_s, &code);
  if (st.empty()) return "";
  if (st == "timeout") return "hang";
  if (code == 11) return "mismatch";
  if (code == 12) return "error";
  return "crash";
}

/// g with node n's outputs replaced (by a same-typed input of n, or by fresh graph inputs),
/// or with output `drop` removed; dead nodes and unused inputs go. nullopt if nothing changed.
std::optional<Graph> without_node(const Graph& g, NodeId n, bool bypass) {
  Graph h;
  h.name = g.name;
  GraphCopy c(g, h);
  c.leaves();
  const Node& target = g.node(n);
  for (NodeId m : g.topo_order()) {
    if (m != n) {
      c.node(m);
      continue;
    }
    for (TensorId o : target.outputs) {
      TensorId rep = -1;
      if (bypass)
        for (TensorId i : target.inputs)
          if (g.type(i) == g.type(o) && !g.tensor(i).is_constant()) rep = c[i];
      if (rep < 0) {
        if (bypass) return std::nullopt;
        rep = h.add_input(h.unique_name(g.tensor(o).name + "_in"), g.type(o));
      }
      c.map[size_t(o)] = rep;
    }
  }
  std::set<TensorId> seen;
  for (TensorId t : g.outputs())
    if (seen.insert(c[t]).second) h.add_output(c[t]);
  return remove_dead_nodes(h);
}
std::optional<Graph> without_output(const Graph& g, size_t drop) {
  if (g.outputs().size() < 2) return std::nullopt;
  Graph h;
  h.name = g.name;
  GraphCopy c(g, h);
  c.leaves();
  for (NodeId m : g.topo_order()) c.node(m);
  for (size_t k = 0; k < g.outputs().size(); ++k)
    if (k != drop) h.add_output(c[g.outputs()[k]]);
  return remove_dead_nodes(h);
}
/// Drops graph inputs nobody reads (remove_dead_nodes keeps them).
Graph without_unused_inputs(const Graph& g) {
  auto consumers = g.consumers();
  std::set<TensorId> outs(g.outputs().begin(), g.outputs().end());
  Graph h;
  h.name = g.name;
  GraphCopy c(g, h);
  c.leaves([&](TensorId t) { return g.tensor(t).is_constant() || !consumers[size_t(t)].empty() || outs.count(t); });
  for (NodeId m : g.topo_order()) c.node(m);
  c.outputs();
  return h;
}

/// Shrinks g while its failure class stays `kind`.
Graph shrink(Graph g, const std::string& kind, int timeout_s, bool quiet) {
  bool progress = true;
  int tries = 0;
  while (progress) {
    progress = false;
    for (size_t k = 0; k < g.outputs().size() && !progress; ++k)
      if (auto h = without_output(g, k); h && failure_class(*h, timeout_s) == kind) g = std::move(*h), progress = true;
    for (int mode = 0; mode < 2 && !progress; ++mode)
      for (NodeId n = g.num_nodes() - 1; n >= 0 && !progress; --n) {
        std::optional<Graph> h;
        try {
          h = without_node(g, n, mode == 0);
        } catch (const Error&) {
          continue;
        }
        ++tries;
        if (h && failure_class(*h, timeout_s) == kind) g = std::move(*h), progress = true;
      }
    if (!quiet) std::fprintf(stderr, "  shrinking: %d nodes (%d tries)\n", g.num_nodes(), tries);
  }
  return without_unused_inputs(g);
}

struct Found {
  uint64_t index;
  std::string kind, config, detail;
};

int cmd_run(const RunOptions& ro) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Found> found;
  uint64_t done = 0, invalid = 0, rewritten = 0;  // rewritten: --optimize rewrote a window
  uint64_t rebound = 0, carried = 0;  // --carry-over: programs rebound there, and optimized ones checked there
  std::vector<std::pair<uint64_t, uint64_t>> batches;
  for (uint64_t b = ro.start; b < ro.start + ro.count; b += uint64_t(ro.batch))
    batches.push_back({b, std::min(b + uint64_t(ro.batch), ro.start + ro.count)});
  std::reverse(batches.begin(), batches.end());
  std::vector<Child> kids;
  auto spawn = [&](uint64_t begin, uint64_t end) {
    int p[2];
    if (pipe(p) != 0) throw InternalError("pipe failed");
    pid_t pid = fork();
    if (pid == 0) {
      close(p[0]);
      worker(p[1], ro, begin, end);
    }
    close(p[1]);
    Child c;
    c.pid = pid, c.fd = p[0], c.begin = begin, c.end = end, c.current = begin;
    c.last = std::chrono::steady_clock::now();
    kids.push_back(c);
  };
  auto last_report = std::chrono::steady_clock::now();
  while (!batches.empty() || !kids.empty()) {
    while (int(kids.size()) < ro.workers && !batches.empty()) {
      auto [b, e] = batches.back();
      batches.pop_back();
      spawn(b, e);
    }
    std::vector<pollfd> fds;
    for (auto& k : kids) fds.push_back({k.fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 1000);
    for (size_t ki = 0; ki < kids.size(); ++ki) {
      Child& k = kids[ki];
      bool eof = false;
      if (fds[ki].revents & (POLLIN | POLLHUP)) {
        char tmp[65536];
        ssize_t n = read(k.fd, tmp, sizeof tmp);
        if (n <= 0) eof = true;
        else k.buf.append(tmp, size_t(n)), k.last = std::chrono::steady_clock::now();
      }
      size_t nl;
      while ((nl = k.buf.find('\n')) != std::string::npos) {
        std::string line = k.buf.substr(0, nl);
        k.buf.erase(0, nl + 1);
        if (line.size() < 3) continue;
        uint64_t idx = std::stoull(line.substr(2));
        std::string rest = line.substr(line.find(' ', 2) + 1);
        if (line[0] == 'S') k.current = idx, k.started = true;
        else if (line[0] == 'D') {
          k.started = false, ++done;
          const std::string what = rest.substr(0, rest.find(' '));
          if (what == "invalid") ++invalid;
          if (what == "rewritten") ++rewritten;
          if (rest.find(" rebound") != std::string::npos) ++rebound;
          if (rest.find(" carried") != std::string::npos) ++rebound, ++carried;
        } else if (line[0] == 'R') {
          std::string kind = rest.substr(0, rest.find('\t'));
          std::string r2 = rest.substr(rest.find('\t') + 1);
          found.push_back({idx, kind, r2.substr(0, r2.find('\t')), r2.substr(r2.find('\t') + 1)});
          if (!ro.quiet) std::fprintf(stderr, "difftest: program %lu: %s on %s\n", (unsigned long)idx, kind.c_str(), found.back().config.c_str());
        }
      }
      const bool hung = std::chrono::steady_clock::now() - k.last > std::chrono::seconds(ro.timeout_s);
      if (hung) kill(k.pid, SIGKILL);
      if (eof || hung) {
        int status = 0;
        waitpid(k.pid, &status, 0);
        close(k.fd);
        if (k.started) {  // died inside program k.current
          found.push_back({k.current, hung ? "hang" : "crash", "?", hung ? cat("no progress for ", ro.timeout_s, " s") : signal_text(status)});
          if (!ro.quiet) std::fprintf(stderr, "difftest: program %lu: %s\n", (unsigned long)k.current, found.back().detail.c_str());
          ++done;
          if (k.current + 1 < k.end) batches.push_back({k.current + 1, k.end});
        } else if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
          found.push_back({k.current, "crash", "?", cat("worker ", signal_text(status), " between programs")});
          if (k.current + 1 < k.end) batches.push_back({k.current + 1, k.end});
        }
        kids.erase(kids.begin() + long(ki));
        fds.erase(fds.begin() + long(ki));
        --ki;
      }
    }
    if (!ro.quiet && std::chrono::steady_clock::now() - last_report > std::chrono::seconds(5)) {
      last_report = std::chrono::steady_clock::now();
      double s = std::chrono::duration<double>(last_report - t0).count();
      std::fprintf(stderr, "difftest: %lu/%lu programs, %zu failures, %.1f programs/s, about %.0f s left\n", (unsigned long)done,
                   (unsigned long)ro.count, found.size(), double(done) / s, double(ro.count - done) / std::max(1e-9, double(done) / s));
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Shrink and write each failing program (one per program index).
  std::set<uint64_t> shrunk;
  nlohmann::json jf = nlohmann::json::array();
  int written = 0;
  for (const Found& f : found) {
    nlohmann::json e{{"index", f.index}, {"program_seed", program_seed(ro.seed, f.index)}, {"kind", f.kind}, {"config", f.config},
                     {"detail", f.detail.substr(0, 2000)}};
    if (!shrunk.count(f.index) && written < ro.max_shrink && !ro.out_dir.empty()) {
      shrunk.insert(f.index);
      ++written;
      Graph g = random_program(program_seed(ro.seed, f.index), ro.gen);
      std::string kind = failure_class(g, ro.timeout_s);
      if (kind.empty()) {
        e["note"] = "did not fail again when re-run alone (flaky or order-dependent)";
      } else {
        if (!ro.quiet) std::fprintf(stderr, "difftest: shrinking program %lu (%s, %d nodes)\n", (unsigned long)f.index, kind.c_str(), g.num_nodes());
        Graph small = shrink(g, kind, ro.timeout_s, ro.quiet);
        fs::create_directories(ro.out_dir);
        const std::string tag = cat("seed", ro.seed, "_p", f.index, "_", kind);
        const fs::path model = fs::path(ro.out_dir) / (tag + ".onnx");
        std::string exported;
        try {
          onnx::export_file(small, model.string());
          exported = model.string();
        } catch (const std::exception& ex) {
          exported = cat("(not exportable: ", ex.what(), ")");
        }
        std::ofstream txt(fs::path(ro.out_dir) / (tag + ".txt"));
        txt << "difftest failure: " << kind << " (program " << f.index << " of run seed " << ro.seed << ")\n"
            << "first seen: " << f.config << ": " << f.detail.substr(0, 600) << "\n\n"
            << "replay: build/tests/difftest replay " << (g_carry ? "--carry-over " : g_optimize ? "--optimize " : "") << exported << "\n"
            << "regenerate: build/tests/difftest show " << (g_carry ? "--carry-over " : g_optimize ? "--optimize " : "") << ro.seed << " " << f.index << "\n\n"
            << "minimal program (" << small.num_nodes() << " nodes):\n"
            << to_text(small) << "\noriginal program (" << g.num_nodes() << " nodes):\n"
            << to_text(g);
        if (!ro.asan.empty() && (kind == "crash" || kind == "error") && !exported.empty() && exported[0] != '(') {
          const std::string log = (fs::path(ro.out_dir) / (tag + ".asan.txt")).string();
          std::string cmd = cat("'", ro.asan, "' replay ", g_carry ? "--carry-over '" : g_optimize ? "--optimize '" : "'", exported, "' > '", log, "' 2>&1");
          int rc = std::system(cmd.c_str());
          e["asan_log"] = log;
          e["asan_exit"] = rc;
        }
        e["minimal"] = exported;
        e["minimal_nodes"] = small.num_nodes();
      }
    }
    jf.push_back(e);
  }
  nlohmann::json j{{"programs", done},       {"invalid", invalid},     {"failures", jf},     {"failed_programs", shrunk.size()},
                   {"seed", ro.seed},         {"start", ro.start},      {"seconds", seconds}, {"input_seeds", {kInputSeeds[0], kInputSeeds[1]}},
                   {"min_ops", ro.gen.min_ops}, {"max_ops", ro.gen.max_ops}};
  if (g_optimize) j["optimize"] = {{"budget_s", g_optimize_budget}, {"programs_rewritten", rewritten}};
  if (g_carry) j["carry_over"] = {{"programs_rebound", rebound}, {"optimized_checked_there", carried}};
  std::set<uint64_t> bad;
  for (const Found& f : found) bad.insert(f.index);
  j["failed_programs"] = bad.size();
  nlohmann::json cj = nlohmann::json::array();
  for (const auto& c : base_configs()) cj.push_back(c.name);
  j["configs"] = cj;
  if (!ro.json.empty()) std::ofstream(ro.json) << j.dump(1) << "\n";
  std::printf("difftest: %lu programs (seed %lu, from %lu), %lu refused by the reference, %zu failing, %.1f s\n", (unsigned long)done,
              (unsigned long)ro.seed, (unsigned long)ro.start, (unsigned long)invalid, bad.size(), seconds);
  if (g_optimize) std::printf("difftest: --optimize rewrote a window of %lu programs\n", (unsigned long)rewritten);
  if (g_carry)
    std::printf("difftest: --carry-over: %lu programs rebound at their leading dims + 1; of them %lu optimized programs rebound there and checked\n",
                (unsigned long)rebound, (unsigned long)carried);
  for (const Found& f : found)
    std::printf("  program %lu: %s on %s: %s\n", (unsigned long)f.index, f.kind.c_str(), f.config.c_str(),
                one_line(f.detail.substr(0, 300)).c_str());
  return bad.empty() ? 0 : 1;
}

int cmd_replay(const std::vector<std::string>& args) {
  std::vector<std::string> files;  // a directory stands for the .onnx files in it
  for (const auto& a : args) {
    if (!fs::is_directory(a)) {
      files.push_back(a);
      continue;
    }
    std::vector<std::string> in;
    for (const auto& e : fs::directory_iterator(a))
      if (e.path().extension() == ".onnx") in.push_back(e.path().string());
    std::sort(in.begin(), in.end());
    files.insert(files.end(), in.begin(), in.end());
  }
  if (files.empty()) throw InvalidInput("replay: no ONNX files given");
  int failed = 0;
  for (const auto& f : files) {
    onnx::Model m = onnx::import_file(f);
    Outcome o = check_program(m.graph, all_configs({1, 2, 3}));
    if (o.invalid) {
      std::printf("%s: refused by the reference: %s\n", f.c_str(), o.invalid_reason.c_str());
      ++failed;
      continue;
    }
    for (const auto& fl : o.failures) std::printf("%s: %s on %s: %s\n", f.c_str(), fl.kind.c_str(), fl.config.c_str(), fl.detail.c_str());
    if (o.failures.empty() && g_optimize) std::printf("%s: ok (optimized; reference, %s and ONNX round trip x 2 input seeds)\n", f.c_str(), g_backend.c_str());
    else if (o.failures.empty()) std::printf("%s: ok (%zu configurations x 2 input seeds)\n", f.c_str(), all_configs({1, 2, 3}).size());
    failed += !o.failures.empty();
  }
  return failed ? 1 : 0;
}

int cmd_show(uint64_t seed, uint64_t index, const GenOptions& gen) {
  Graph g = random_program(program_seed(seed, index), gen);
  std::printf("%s", to_text(g).c_str());
  for (const Config& c : configs_for(index)) {
    backend::CompileOptions opt;
    opt.threads = c.threads;
    opt.conv_algorithm = c.conv_algorithm;
    opt.conv_layout = c.conv_layout;
    try {
      std::printf("\n== %s\n%s", config_label(c).c_str(), backend_under_test().compile(g, opt)->describe().c_str());
    } catch (const std::exception& e) {
      std::printf("\n== %s: %s\n", config_label(c).c_str(), e.what());
    }
  }
  Outcome o = check_program(g, configs_for(index));
  for (const auto& fl : o.failures) std::printf("\n%s on %s: %s\n", fl.kind.c_str(), fl.config.c_str(), fl.detail.c_str());
  if (o.invalid) std::printf("\nrefused by the reference: %s\n", o.invalid_reason.c_str());
  if (o.optimized)
    std::printf("\noptimized program (applied:\n%s):\n%s", o.applied.empty() ? "  nothing\n" : o.applied.c_str(), to_text(*o.optimized).c_str());
  return o.failures.empty() ? 0 : 1;
}

int usage() {
  std::fprintf(stderr,
               "usage: difftest run [--count N] [--seed S] [--start I] [--workers W] [--out DIR] [--json FILE] [--emit DIR]\n"
               "                    [--emit-every K] [--min-ops A] [--max-ops B] [--timeout SEC] [--max-shrink N] [--asan BIN] [--quiet]\n"
               "                    [--backend cpu|cuda] [--optimize] [--optimize-budget S] [--carry-over]\n"
               "       difftest replay [--backend cpu|cuda] [--optimize] MODEL.onnx|DIR...\n"
               "       difftest show [--backend cpu|cuda] [--optimize] SEED INDEX\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return usage();
  try {
    RunOptions ro;
    std::vector<std::string> pos;
    for (size_t i = 1; i < args.size(); ++i) {
      const std::string& a = args[i];
      auto val = [&]() -> std::string {
        if (i + 1 >= args.size()) throw InvalidInput(cat(a, " needs a value"));
        return args[++i];
      };
      if (a == "--count") ro.count = std::stoull(val());
      else if (a == "--seed") ro.seed = std::stoull(val());
      else if (a == "--start") ro.start = std::stoull(val());
      else if (a == "--workers") ro.workers = std::max(1, std::stoi(val()));
      else if (a == "--batch") ro.batch = std::max(1, std::stoi(val()));
      else if (a == "--out") ro.out_dir = val();
      else if (a == "--json") ro.json = val();
      else if (a == "--emit") ro.emit_dir = val();
      else if (a == "--emit-every") ro.emit_every = std::stoull(val());
      else if (a == "--min-ops") ro.gen.min_ops = std::stoi(val());
      else if (a == "--max-ops") ro.gen.max_ops = std::stoi(val());
      else if (a == "--timeout") ro.timeout_s = std::stoi(val());
      else if (a == "--max-shrink") ro.max_shrink = std::stoi(val());
      else if (a == "--asan") ro.asan = val();
      else if (a == "--quiet") ro.quiet = true;
      else if (a == "--backend") g_backend = val();
      else if (a == "--optimize") g_optimize = true;
      else if (a == "--carry-over") g_optimize = g_carry = true;
      else if (a == "--optimize-budget") g_optimize_budget = std::stod(val()), g_optimize = true;
      else if (!a.empty() && a[0] == '-') throw InvalidInput(cat("unknown option ", a));
      else pos.push_back(a);
    }
    if (!ro.emit_dir.empty() && !ro.emit_every) ro.emit_every = 1;
    if (g_backend != "cpu" && g_backend != "cuda") throw InvalidInput(cat("--backend '", g_backend, "': choose cpu or cuda"));
    // Whether the backend is here, asked in a child: this process must not hold a CUDA
    // context when it forks the workers.
    int code = 0;
    const std::string st = in_child(
        [] {
          try {
            backend::make_backend(g_backend);
            return 0;
          } catch (const std::exception& e) {
            std::fprintf(stderr, "difftest: skipped: backend %s is not here: %s\n", g_backend.c_str(), e.what());
            return 3;
          }
        },
        60, &code);
    if (code == 3) return 3;
    if (!st.empty()) throw InternalError(cat("making backend ", g_backend, ": ", st));
    if (args[0] == "replay") return cmd_replay(pos);
    if (args[0] == "run") return cmd_run(ro);
    if (args[0] == "show" && pos.size() == 2) return cmd_show(std::stoull(pos[0]), std::stoull(pos[1]), ro.gen);
    return usage();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "difftest: %s\n", e.what());
    return 2;
  }
}
