// pet mutate SUB.onnx: every corrected mutant of a multilinear subprogram, as ONNX files.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli.hpp"
#include "pet/backend/backend.hpp"
#include "pet/core/parallel.hpp"
#include "pet/mutate/mutate.hpp"

namespace pet::cli {

namespace {
std::string format_percent(double p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, p < 0.01 && p > 0 ? "%.2g %%" : "%.2f %%", p);
  return buf;
}
}  // namespace

int cmd_mutate(const std::vector<std::string>& argv) {
  Args a(command_spec("mutate"), argv);
  if (a.flag("list-rules")) {
    for (const auto& r : mutate::builtin_rules().rules())
      std::printf("%-32s %s\n", std::string(r->name()).c_str(), std::string(r->description()).c_str());
    return 0;
  }
  if (a.positional.size() != 1 || !a.get("out-dir"))
    throw InvalidInput("usage: pet mutate SUB.onnx --out-dir DIR [options] (pet mutate --help lists them)");
  const std::string path = a.positional[0], dir = *a.get("out-dir");
  prepare_dir(dir, "--out-dir");
  if (auto jf = a.get("json")) check_writable_file(*jf, "--json");
  mutate::Options opt;
  opt.depth = int(a.get_int("depth", 3));
  if (opt.depth < 0 || opt.depth > 6) throw InvalidInput(cat("--depth ", opt.depth, " must be between 0 and 6"));
  if (auto r = a.get("rules")) {
    opt.rules.clear();
    std::stringstream ss(*r);
    for (std::string item; std::getline(ss, item, ',');)
      if (!item.empty()) opt.rules.push_back(item);
    if (opt.rules.empty()) throw InvalidInput("--rules needs all, none or rule names");
  }
  opt.verify.tests = int(a.get_int("tests", 2));
  opt.verify.seed = uint64_t(a.get_int("seed", 1));
  if (a.get("time-budget")) opt.generator.seconds = seconds_option(a, "time-budget", 0, false);
  if (int t = threads_option(a); t > 0) set_num_threads(t);
  if (opt.verify.tests < 1 || opt.verify.tests > 64) throw InvalidInput(cat("--tests ", opt.verify.tests, ": choose 1 to 64 tests per position"));
  // Cost model: the cpu backend's op profiler (measured, cached on disk) when this build has
  // it, else the roofline estimate.
  const auto backends = backend::available_backends();
  std::string cost = a.get("cost").value_or(std::find(backends.begin(), backends.end(), "cpu") != backends.end() ? "profile" : "roofline");
  if (cost != "profile" && cost != "roofline") throw InvalidInput(cat("--cost '", cost, "': choose profile or roofline"));
  std::unique_ptr<backend::Backend> cpu;
  std::unique_ptr<backend::Profiler> prof;
  std::string cost_desc = "roofline estimate: FLOPs at 200 GFLOP/s, bytes at 10 GB/s per op";
  if (cost == "profile") {
    cpu = backend::make_backend("cpu");
    std::string cache = cache_option(a, "profile-cache", backend::Profiler::default_cache_file(), "opcache");
    prof = std::make_unique<backend::Profiler>(*cpu, cache, 8, 0.04);
    cost_desc = cat("cpu op profiler: sum of the minimum times of the ops (8+ runs and 40+ ms each), each timed alone on ", num_threads(), " threads (cache ",
                    cache.empty() ? "off" : cache, ")");
    opt.cost = [&](const Graph& g) { return prof->program_cost_ms(g); };
  }
  onnx::Model m = load_model(a, path, import_options(a));
  require_multilinear_model(m.graph, path, "mutate");
  // Progress on stderr (a line at most every half second; one rewritten line on a terminal).
  const bool tty = ::isatty(2), quiet = a.flag("quiet");
  auto last = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  bool printed = false;
  opt.progress = [&](const std::string& line) {
    if (quiet || std::chrono::steady_clock::now() - last < std::chrono::milliseconds(500)) return;
    last = std::chrono::steady_clock::now();
    std::fprintf(stderr, "%spet mutate: %s%s", tty ? "\r\033[K" : "", line.c_str(), tty ? "" : "\n");
    printed = true;
  };
  mutate::MutateResult r;
  try {
    r = mutate::run(m.graph, opt);
  } catch (const InvalidInput& e) {
    throw InvalidInput(cat(path, ": ", e.what()));
  }
  if (printed && tty) std::fputs("\r\033[K", stderr);
  // A reused folder: the previous run's mutants go, so the folder holds this index's files only.
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    if (e.is_regular_file() && f.rfind("mutant_", 0) == 0 && e.path().extension() == ".onnx") std::filesystem::remove(e.path());
  }
  nlohmann::json j;
  j["subprogram"] = path;
  j["original_est_ms"] = r.original_est_ms;
  j["seconds"] = r.seconds;
  j["stop_reason"] = r.stop_reason;
  j["counts"] = {{"rule_attempts", r.rule_attempts}, {"rule_matches", r.rule_matches}, {"generated", r.generated},
                 {"verified", r.verified}, {"not_equivalent", r.rejected}, {"duplicates", r.duplicates}};
  j["cost_model"] = cost_desc;
  if (!r.nothing_verified.empty()) j["nothing_verified"] = r.nothing_verified;
  if (prof) {
    j["profiler"] = {{"measured", prof->measured()}, {"cache_hits", prof->hits()}};
    prof->save();
  }
  j["mutants"] = nlohmann::json::array();
  for (size_t i = 0; i < r.mutants.size(); ++i) {
    const auto& mu = r.mutants[i];
    char name[48];  // "mutant_" + up to 20 digits + ".onnx"
    std::snprintf(name, sizeof name, "mutant_%03zu.onnx", i);
    onnx::export_file(mu.graph, (std::filesystem::path(dir) / name).string());
    nlohmann::json e{{"file", name},
                     {"verdict", verify::verdict_name(mu.verdict)},
                     {"corrected_elements", mu.corrections.corrected_elements},
                     {"corrected_fraction", mu.corrections.fraction()},
                     {"correction_kernels", mu.corrections.kernels},
                     {"correction_flops", mu.corrections.correction_flops},
                     {"fused", mu.fused},
                     {"fused_convs", mu.corrections.fused_convs},
                     {"est_ms", mu.est_ms},
                     {"correction_ms", std::max(0.0, mu.est_ms - mu.uncorrected_ms)},
                     {"est_speedup", mu.est_ms > 0 ? r.original_est_ms / mu.est_ms : 0.0},
                     {"ops", mu.summary},
                     {"slower_than_original", mu.est_ms > r.original_est_ms}};
    if (mu.origin == "generated") e["generated"] = true;
    else e["rule"] = mu.origin;
    j["mutants"].push_back(e);
  }
  std::ofstream((std::filesystem::path(dir) / "index.json").string()) << j.dump(2) << "\n";
  if (auto jf = a.get("json")) {
    std::ofstream f(*jf);
    if (!f) throw InvalidInput(cat("cannot write '", *jf, "'"));
    f << j.dump(2) << "\n";
  }
  if (!a.flag("quiet")) {
    std::printf("%s: %zu corrected mutants in %.2f s (original est %.3f ms; %lld rule matches, %lld generated, %lld verified, %lld not "
                "equivalent)\ngenerator: %s\n",
                path.c_str(), r.mutants.size(), r.seconds, r.original_est_ms, (long long)r.rule_matches, (long long)r.generated,
                (long long)r.verified, (long long)r.rejected, r.stop_reason.c_str());
    int slower = 0;
    for (size_t i = 0; i < r.mutants.size(); ++i) {
      const auto& mu = r.mutants[i];
      const bool is_slower = mu.est_ms > r.original_est_ms;
      if (is_slower && !a.flag("all")) {
        ++slower;
        continue;
      }
      const std::string verdict =
          mu.verdict == verify::Verdict::Equivalent
              ? std::string("equivalent")
              : cat("partially equivalent, corrected (", mu.corrections.corrected_elements, " elements, ",
                    format_percent(100 * mu.corrections.fraction()), ")");
      std::printf("  mutant_%03zu  est %8.3f ms (%.2fx%s)  %-26s %s: %s\n", i, mu.est_ms, mu.est_ms > 0 ? r.original_est_ms / mu.est_ms : 0.0,
                  is_slower ? ", slower" : "", mu.origin.c_str(), verdict.c_str(), mu.summary.c_str());
    }
    if (slower) std::printf("  (%d mutants estimated slower than the original are not listed; --all lists them)\n", slower);
    if (!r.nothing_verified.empty()) std::printf("nothing verified: %s\n", r.nothing_verified.c_str());
    if (a.flag("explain"))
      for (const auto& why : r.rule_refusals) std::printf("  refused: %s\n", why.c_str());
  }
  return 0;
}

}  // namespace pet::cli
