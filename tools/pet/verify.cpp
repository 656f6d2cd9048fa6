// pet verify A.onnx B.onnx: which output regions of B agree with A for every input and weight.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "pet/verify/verifier.hpp"
#ifdef PET_WITH_Z3
#include "z3_check.hpp"
#endif

namespace pet::cli {

int cmd_verify(const std::vector<std::string>& argv) {
  Args a(command_spec("verify"), argv, 2);
  onnx::ImportOptions io = import_options(a);
  if (auto jf = a.get("json")) check_writable_file(*jf, "--json");
  onnx::Model ma = load_model(a, a.positional[0], io), mb = load_model(a, a.positional[1], io);
  require_multilinear_model(ma.graph, a.positional[0], "verify");
  require_multilinear_model(mb.graph, a.positional[1], "verify");
  verify::Options opt;
  opt.tests = int(a.get_int("tests", 2));
  // Each test keeps one field value per position tested and per tensor on the way: beyond a
  // few dozen tests the false-acceptance bound (1/p per test) is far below any use.
  if (opt.tests < 1 || opt.tests > 64) throw InvalidInput(cat("--tests ", opt.tests, ": choose 1 to 64 tests per position"));
  int64_t prime = a.get_int("prime", 2147483647);
  if (prime < 2) throw InvalidInput(cat("--prime ", prime, " is not a prime"));
  opt.prime = uint64_t(prime);
  opt.seed = uint64_t(a.get_int("seed", 1));
  opt.exhaustive = a.flag("exhaustive");
  const bool tty = ::isatty(2), quiet = a.flag("quiet");
  auto t0 = std::chrono::steady_clock::now();
  auto last = t0 - std::chrono::seconds(1);
  opt.progress = [&](int64_t done, int64_t total) {
    auto now = std::chrono::steady_clock::now();
    if (quiet || now - last < std::chrono::milliseconds(500)) return;
    last = now;
    const double s = std::chrono::duration<double>(now - t0).count();
    std::fprintf(stderr, "%spet verify: exhaustive, %lld of %lld positions, %.0f s, about %.0f s left%s", tty ? "\r\033[K" : "",
                 (long long)done, (long long)total, s, done > 0 ? s * double(total - done) / double(done) : 0.0, tty ? "" : "\n");
  };
  verify::Report r;
  try {
    r = verify::verify(ma.graph, mb.graph, opt);
  } catch (const InvalidInput& e) {
    throw InvalidInput(cat(a.positional[0], " vs ", a.positional[1], ": ", e.what()));
  }
  if (tty && !quiet && opt.exhaustive) std::fputs("\r\033[K", stderr);

  nlohmann::json j;
  j["original"] = a.positional[0];
  j["mutant"] = a.positional[1];
  j["verdict"] = verify::verdict_name(r.verdict);
  j["boxes_checked"] = r.boxes_checked;
  j["positions_tested"] = r.positions_tested;
  j["tests"] = r.tests;
  j["prime"] = r.prime;
  j["seconds"] = r.seconds;
  j["evaluations"] = r.evaluations;
  j["correction"] = nlohmann::json::array();
  for (const auto& out : r.outputs) {
    for (const Box& b : out.correction) {
      std::vector<int64_t> lo, hi;
      for (const auto& d : b.dims) lo.push_back(d.lo), hi.push_back(d.hi);
      j["correction"].push_back({{"output", out.name}, {"lo", lo}, {"hi", hi}});
    }
    j["outputs"].push_back({{"name", out.name}, {"shape", out.shape}, {"boxes", out.cells.size()},
                            {"corrected_elements", out.corrected_elements}});
    if (opt.exhaustive) j["outputs"].back()["differing_elements"] = out.differing.size();
  }
  std::string z3_line;
  if (a.flag("z3") || a.flag("z3-all")) {
#ifdef PET_WITH_Z3
    lab::Z3Options zo;
    zo.all_positions = a.flag("z3-all");
    if (a.get("z3-timeout")) zo.timeout_s = seconds_option(a, "z3-timeout", 10, false);
    zo.memory_limit_bytes = memory_limit(a);
    lab::Z3Result z = lab::z3_cross_check(ma.graph, mb.graph, r, zo);
    j["z3"] = {{"agree", z.disagree == 0 && z.undecided == 0}, {"proved", z.proved}, {"refuted", z.refuted}, {"unknown", z.unknown},
               {"boxes_agreeing", z.agree}, {"boxes_disagreeing", z.disagree}, {"boxes_undecided", z.undecided},
               {"seconds", z.seconds}, {"version", z.version}};
    z3_line = cat("z3 ", z.version, ": ", z.proved, " positions proved equal, ", z.refuted, " refuted, ", z.unknown, " unknown; ",
                  z.agree, " intersections agree with the field verdict, ", z.disagree, " disagree, ", z.undecided, " undecided (",
                  z.seconds, " s)\n");
#else
    throw Unsupported("--z3: pet was built without Z3 (configure with -DPET_WITH_Z3=ON)");
#endif
  }
  if (auto jf = a.get("json")) {
    std::ofstream f(*jf);
    if (!f) throw InvalidInput(cat("cannot write '", *jf, "'"));
    f << j.dump(2) << "\n";
  }
  if (!a.flag("quiet")) {
    bool cells = a.flag("cells");
    if (!cells)
      for (const auto& out : r.outputs) cells = cells || out.cells.size() <= 64;
    std::fputs(verify::format_report(r, ma.graph, mb.graph, cells).c_str(), stdout);
    if (opt.exhaustive)
      for (const auto& out : r.outputs)
        std::printf("exhaustive: output '%s' differs at %zu positions (all inside the correction region: %s)\n", out.name.c_str(),
                    out.differing.size(), [&] {
                      for (int64_t f : out.differing) {
                        Index v = unflatten(f, out.shape);
                        bool in = false;
                        for (const Box& b : out.correction) in = in || b.contains(v);
                        if (!in) return "NO";
                      }
                      return "yes";
                    }());
    std::fputs(z3_line.c_str(), stdout);
  }
  return 0;
}

}  // namespace pet::cli
