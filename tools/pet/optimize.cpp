// pet optimize MODEL -o OUT: the whole-model optimizer (include/pet/optimize/optimize.hpp).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "pet/backend/backend.hpp"
#include "pet/optimize/optimize.hpp"
#include "pet/transform/rebind.hpp"

namespace pet::cli {

namespace {
std::vector<std::string> names(const std::optional<std::string>& s) {
  std::vector<std::string> v;
  if (!s) return v;
  for (const auto& n : transform::pass_list(*s)) v.push_back(n);
  return v;
}
std::string binding_text(const std::map<std::string, int64_t>& b) {
  std::string s;
  for (const auto& [p, v] : b) s += cat(s.empty() ? "" : ", ", p, "=", v);
  return s;
}

/// The optimized program written for every value of some of the model's symbolic dims.
struct Symbolic {
  std::string bytes;  ///< lean bytes: the float weights are in `weights` (onnx::WeightStore)
  std::shared_ptr<onnx::WeightStore> weights;
  std::set<std::string> dims;  ///< the dims it takes any value of (the others: as bound)
  std::string checked;         ///< the bindings it was checked at
};

/// The values of the model's symbolic dims a program for every value of the dims `free` is
/// checked at: the ones bound, then two more of small values (the checks run the reference
/// interpreter), other than the one bound and different for different dims (2 and 3 for the
/// first dim, 3 and 4 for the next, ...); the other dims as bound.
std::vector<std::map<std::string, int64_t>> three_bindings(const onnx::Model& m, const std::set<std::string>& free) {
  std::vector<std::map<std::string, int64_t>> bindings(3, m.dims);
  int64_t i = 0;
  for (const auto& [p, v] : m.dims) {
    if (!free.count(p)) continue;
    int64_t w = 2 + i++;
    for (size_t k = 1; k < 3; ++k, ++w) {
      if (w == v) ++w;
      bindings[k][p] = w;
    }
  }
  return bindings;
}

std::set<std::string> all_dims(const onnx::Model& m) {
  std::set<std::string> all;
  for (const auto& [p, v] : m.dims) all.insert(p);
  return all;
}

/// The model's input shapes at the two other bindings three_bindings gives for all its
/// symbolic dims: what every rewrite must carry over to (optimize::Options::carry_over_to).
std::vector<optimize::Options::OtherShapes> other_shapes(const std::string& path, const onnx::Model& m, const onnx::ImportOptions& io) {
  std::vector<optimize::Options::OtherShapes> r;
  const auto bindings = three_bindings(m, all_dims(m));
  for (size_t k = 1; k < bindings.size(); ++k) {
    onnx::ImportOptions o = io;
    o.dims = bindings[k];
    o.share_weights_with = &m.graph;  // the weights held once
    const onnx::Model there = onnx::import_file(path, o);
    optimize::Options::OtherShapes s{binding_text(bindings[k]), {}, std::make_shared<const Graph>(there.graph)};
    for (TensorId t : there.graph.inputs()) s.inputs[there.graph.tensor(t).name] = there.graph.type(t).shape;
    r.push_back(std::move(s));
  }
  return r;
}

/// One try for the symbolic dims `free` (the others stay as import bound them): the program
/// rebound at a second binding of them, the two exports written as one file with ONNX's
/// "follow the input" extents (onnx::generalise), and that file, imported at three bindings
/// (the one optimised for and two more), computes there what the original model computes
/// (the end-to-end check). "" on success (`out` filled), else why not.
std::string try_symbolic(const Graph& program, const std::string& as_optimised, const std::shared_ptr<onnx::WeightStore>& weights,
                         const std::string& path, const onnx::Model& m, const onnx::ImportOptions& io, const optimize::Options& opt,
                         const std::set<std::string>& free, Symbolic& out) {
  const auto bindings = three_bindings(m, free);
  // The model at a binding: the import the search's carry-over check made there (the same
  // values: opt.carry_over_to), else imported now (sharing the model's weights).
  auto import_at = [&](const std::map<std::string, int64_t>& b) -> std::shared_ptr<const Graph> {
    for (const auto& o : opt.carry_over_to)
      if (o.label == binding_text(b) && o.model) return o.model;
    onnx::ImportOptions o = io;
    o.dims = b;
    o.share_weights_with = &m.graph;
    return std::make_shared<const Graph>(onnx::import_file(path, o).graph);
  };
  try {
    const std::shared_ptr<const Graph> second_model = import_at(bindings[1]);
    const Graph& second = *second_model;
    std::map<std::string, Shape> shapes;
    for (TensorId t : second.inputs()) shapes[second.tensor(t).name] = second.type(t).shape;
    // The model imported there guides the rebind where the program still has its nodes and
    // constants (their folded shape arithmetic, such as a Reshape target computed from the
    // batch or a class token expanded to it).
    const optimize::RebindLike rebind(m.graph, second, opt);
    // Lean exports: the weights stay in `weights`, shared with the program, not copied into
    // bytes (or over protobuf's 2 GiB), and the imports below take them from there.
    Symbolic s{onnx::generalise(as_optimised, onnx::export_bytes(rebind(program, shapes), weights.get()), m, path, free, weights.get()),
               weights, free, ""};
    const std::string dir = std::filesystem::path(path).parent_path().string();
    for (size_t k = 0; k < bindings.size(); ++k) {
      onnx::ImportOptions o = io;
      o.weights = weights.get();
      o.dims.clear();
      for (const auto& p : free) o.dims[p] = bindings[k].at(p);  // the others are fixed in the written file
      const onnx::Model written = onnx::import_bytes(s.bytes, "the optimized program", o, dir.empty() ? "." : dir);
      const std::shared_ptr<const Graph> there = k == 0 ? nullptr : k == 1 ? second_model : import_at(bindings[k]);
      const Graph& original = k == 0 ? m.graph : *there;
      if (std::string d = optimize::compare(written.graph, original, opt); !d.empty())
        throw Unsupported(cat("at ", binding_text(bindings[k]), " it differs from the original: ", d));
      s.checked += cat(k ? "; " : "", binding_text(o.dims));
    }
    out = std::move(s);
    return "";
  } catch (const InvalidInput& e) {
    return e.what();
  } catch (const Unsupported& e) {
    return e.what();
  }
}

/// The optimized program for every value of the model's symbolic dims where it carries over
/// (try_symbolic); where not for all of them together and `subsets` (--fixed-shapes), for as
/// many as carry over one by one (a batch can stay symbolic where a rewrite needs the height
/// it was optimised for). `why` says why a dim stays fixed.
std::optional<Symbolic> for_every_shape(const Graph& program, const std::string& path, const onnx::Model& m, const onnx::ImportOptions& io,
                                        const optimize::Options& opt, bool subsets, std::string& why) {
  if (m.shapes_given) return why = "--shape fixed its input shapes", std::nullopt;
  const std::set<std::string> all = all_dims(m);
  Symbolic best;
  // The program at the values it was optimised for, in the node order rebind gives (once).
  std::string as_optimised;
  auto weights = std::make_shared<onnx::WeightStore>();
  try {
    as_optimised = onnx::export_bytes(transform::rebind(program, {}), weights.get());
  } catch (const Unsupported& e) {
    return why = e.what(), std::nullopt;
  }
  why = try_symbolic(program, as_optimised, weights, path, m, io, opt, all, best);
  if (why.empty()) return best;
  if (subsets && all.size() > 1) {
    std::set<std::string> free;
    for (const auto& p : all) {
      std::set<std::string> more = free;
      more.insert(p);
      if (try_symbolic(program, as_optimised, weights, path, m, io, opt, more, best).empty()) free = more;
    }
    if (!free.empty()) return best;
  }
  return std::nullopt;
}
}  // namespace

int cmd_optimize(const std::vector<std::string>& argv_in) {
  std::vector<std::string> argv = argv_in;
  for (auto& x : argv)
    if (x == "-o") x = "--output";
  Args a(command_spec("optimize"), argv, 1);
  const std::string path = a.positional[0];
  auto out = a.get("output");
  if (!out) throw InvalidInput("pet optimize needs -o OUT.onnx (where the optimized model goes)");
  optimize::Options opt;
  opt.depth = int(a.get_int("depth", 3));
  opt.rounds = int(a.get_int("rounds", 4));
  opt.top_k = int(a.get_int("top-k", 4));
  opt.window = int(a.get_int("window", 4));
  opt.policy = optimize::parse_policy(a.get("policy").value_or("both"));
  opt.budget_s = seconds_option(a, "budget", 120, true);
  opt.window_budget_s = seconds_option(a, "window-budget", 30, false);
  opt.backend = a.get("backend").value_or(backend::available_backends().front());
  opt.tf32 = a.flag("tf32");
  opt.threads = threads_option(a);
  opt.only_rules = names(a.get("only"));
  opt.disable_rules = names(a.get("disable"));
  opt.profile_cache = cache_option(a, "profile-cache", backend::Profiler::default_cache_file(), "opcache");
  opt.algorithm_cache = cache_option(a, "algorithm-cache", backend::Profiler::default_algorithm_cache_file(), "algorithms");
  opt.decision_cache = cache_option(
      a, "decision-cache", opt.profile_cache.empty() ? std::string("none") : (std::filesystem::path(opt.profile_cache).parent_path() / "decisions.db").string(),
      "decisions");
  check_writable_file(*out, "-o");
  if (auto jf = a.get("json")) check_writable_file(*jf, "--json");
  opt.keep_if_slower = a.flag("keep-slower");
  opt.apply_candidates = a.flag("apply-candidates");
  opt.passes.disabled = transform::pass_list(a.get("disable-pass").value_or(""));
  opt.passes.print_after = transform::pass_list(a.get("print-after").value_or(""));
  if (opt.depth < 0 || opt.depth > 6) throw InvalidInput(cat("--depth ", opt.depth, ": choose 0 to 6"));
  if (opt.rounds < 1 || opt.top_k < 1 || opt.window < 1) throw InvalidInput("--rounds, --top-k and --window need positive counts");
  if (opt.backend == "reference") throw InvalidInput("--backend reference: the optimizer needs a backend to measure on (cpu)");
  const bool quiet = a.flag("quiet");
  const bool tty = isatty(2);
  opt.progress = [&](const optimize::Progress& p) {
    if (quiet) return;
    std::fprintf(stderr, "%spet optimize: window %d of %d, round %d, estimated %.2fx so far, %.1f s: %s%s", tty ? "\r\033[K" : "", p.window,
                 p.windows, p.round, p.best_speedup, p.elapsed_s, p.what.c_str(), tty ? "" : "\n");
    std::fflush(stderr);
  };
  onnx::Model m = load_model(a, path, import_options(a));
  // Weights over what one ONNX file holds go to OUT.data (ONNX external data).
  const uint64_t weights = onnx::weight_bytes(m.graph);
  bool external = a.flag("external-data");
  try {
    onnx::check_exportable(weights, path);
  } catch (const Unsupported&) {
    external = true;
    m.notes.push_back(cat("its weights take ", double(weights) / double(1 << 30), " GiB, more than one ONNX file holds with its graph (2 GiB): they are written to ",
                          *out, ".data beside it (ONNX external data)"));
  }
  // A model that keeps its weights as external data is written so too.
  if (m.external_data && !external) {
    external = true;
    m.notes.push_back(cat("it keeps its weights as ONNX external data: so does ", *out, " (in ", *out, ".data beside it)"));
  }
  if (!quiet)
    for (const auto& note : m.notes) std::fprintf(stderr, "note: %s\n", note.c_str());
  // Unless --fixed-shapes, the rewrites kept must carry over to every value of the symbolic
  // dims (checked at two more), so that the file keeps them symbolic, as the model declares.
  const bool fixed_shapes = a.flag("fixed-shapes");
  if (!fixed_shapes && !m.dims.empty() && !m.shapes_given) {
    try {
      opt.carry_over_to = other_shapes(path, m, import_options(a));
    } catch (const InvalidInput& e) {  // the model itself does not import there: optimised for its shapes
      if (!quiet) std::fprintf(stderr, "note: the model does not import at other values of its symbolic dims (%s); optimising for %s\n", e.what(), binding_text(m.dims).c_str());
    } catch (const Unsupported& e) {
      if (!quiet) std::fprintf(stderr, "note: the model does not import at other values of its symbolic dims (%s); optimising for %s\n", e.what(), binding_text(m.dims).c_str());
    }
  }
  optimize::Result r;
  try {
    r = optimize::optimize(m.graph, opt);
  } catch (const InvalidInput& e) {
    throw InvalidInput(cat(path, ": ", e.what()));
  } catch (const Unsupported& e) {
    throw Unsupported(cat(path, ": ", e.what()));
  }
  if (tty && !quiet) std::fputs("\r\033[K", stderr);
  r.graph.name = m.graph.name;
  auto& rep = r.report;
  if (rep.not_rebindable) rep.why_original += cat(" (--fixed-shapes optimises it for ", binding_text(m.dims), ")");
  // Where nothing paid off on a program specialised at import (a symbolic batch bound to 1),
  // the user's own file is written unchanged, its symbolic dims (and opset, metadata) as they
  // were, where it is self-contained and passes the checker; else the program, as imported
  // (a file ONNX Runtime cannot load as given, such as an opset-13 MeanVarianceNormalization,
  // whose function body it fails on, loads as pet writes it). An optimized program is
  // written for every value of the symbolic dims (for_every_shape; the search kept only
  // rewrites that carry over to them, Options::carry_over_to), or else not at all; with
  // --fixed-shapes for those its rewrites carry over to, at the values optimised for otherwise.
  std::string written = "optimized program", why_fixed;
  std::optional<Symbolic> symbolic;
  bool self_contained = false;  // (the original file: onnx::self_contained, asked where it is copied)
  bool narrowed = false;  // the optimized program was not for every value of the dims: not written
  if (!rep.kept_original && !m.dims.empty()) {
    if (!quiet)
      std::fprintf(stderr, "pet optimize: checking the optimized program at other values of its symbolic dims (optimised at %s)\n",
                   binding_text(m.dims).c_str());
    symbolic = for_every_shape(r.graph, path, m, import_options(a), opt, fixed_shapes || opt.carry_over_to.empty(), why_fixed);
    // Without --fixed-shapes a program that takes only the values optimised for is not
    // written: the model's interface would narrow. The original is, as when nothing paid off.
    if (!symbolic && !fixed_shapes && !opt.carry_over_to.empty()) {
      std::string dims;
      for (const auto& p : all_dims(m)) dims += cat(dims.empty() ? "" : ", ", p);
      narrowed = true;
      rep.kept_original = true;
      rep.why_original = cat("the optimized program does not carry over to every value of ", dims, " (", why_fixed,
                             "); the original is written (--fixed-shapes writes the optimized program at ", binding_text(m.dims), ")");
      rep.speedup = 1;
      r.graph = m.graph;
      r.graph.name = m.graph.name;
    }
  }
  if (symbolic) {
    onnx::write_file(symbolic->bytes, *out, external, symbolic->weights.get());
    written = "optimized program for every value of";
    for (const auto& p : symbolic->dims) written += cat(p == *symbolic->dims.begin() ? " " : ", ", p);
  } else if (rep.kept_original && m.specialised && !external && (self_contained = onnx::self_contained(path))) {
    std::error_code ec;
    if (!std::filesystem::equivalent(path, *out, ec) &&
        !std::filesystem::copy_file(path, *out, std::filesystem::copy_options::overwrite_existing, ec))
      throw InvalidInput(cat("-o: cannot write '", *out, "': ", ec.message()));
    written = "original file";
  } else if (rep.kept_original && m.specialised && onnx::write_original(path, *out, external)) {
    written = "original file";  // its weights read in from its external data, or moved out to OUT.data
  } else {
    onnx::export_file(r.graph, *out, external, &m);
    if (rep.kept_original) written = "original program";
  }
  // A float16 or bfloat16 model's weights that are still values of that type are stored so
  // (the file is about as large as the original's, not twice).
  const bool narrowed_weights = written != "original file" && !external && onnx::narrow_weights(*out, m);

  nlohmann::json j;
  j["model"] = path;
  j["output"] = *out;
  j["backend"] = opt.backend;
  j["options"] = {{"depth", opt.depth}, {"rounds", opt.rounds}, {"top_k", opt.top_k}, {"window", opt.window},
                  {"policy", optimize::policy_name(opt.policy)}, {"budget_s", opt.budget_s}};
  j["search_seconds"] = rep.search_seconds;
  j["total_seconds"] = rep.total_seconds;
  j["baseline_compile_seconds"] = rep.baseline_compile_seconds;
  j["original_ms"] = rep.original_ms;
  j["optimized_ms"] = rep.optimized_ms;
  j["speedup"] = rep.speedup;
  j["timing_rounds"] = rep.timing_rounds;
  j["timing_rounds_won"] = rep.timing_rounds_won;
  j["kept_original"] = rep.kept_original;
  j["written"] = written;
  if (external) j["external_data"] = *out + ".data";
  j["narrow_weights"] = narrowed_weights;
  if (symbolic) {
    j["symbolic_dims"] = symbolic->dims;
    j["symbolic_dims_checked_at"] = symbolic->checked;
  }
  if (!why_fixed.empty()) j["why_fixed_shapes"] = why_fixed;
  j["notes"] = m.notes;
  if (rep.kept_original) j["why_original"] = rep.why_original;
  j["check"] = rep.check;
  j["stop_reason"] = rep.stop_reason;
  j["cache"] = {{"profiler_measured", rep.profiler_measured}, {"profiler_hits", rep.profiler_hits}, {"profiler_skipped", rep.profiler_skipped}, {"reused_windows", rep.reused_windows}, {"decisions_cached", rep.decisions_cached}, {"searches_cached", rep.searches_cached}};
  j["windows"] = nlohmann::json::array();
  for (const auto& w : rep.windows) {
    nlohmann::json e{{"index", w.index},
                     {"nodes", w.nodes},
                     {"ops", w.ops},
                     {"applied", w.applied},
                     {"equivalence", w.verdict.empty() ? "original" : w.verdict},
                     {"corrected_fraction", w.corrected_fraction},
                     {"correction_kernels", w.correction_kernels},
                     {"est_original_ms", w.est_original_ms},
                     {"est_chosen_ms", w.est_chosen_ms},
                     {"measured_original_ms", w.measured_original_ms},
                     {"measured_chosen_ms", w.measured_chosen_ms},
                     {"rounds", w.rounds},
                     {"candidates", w.candidates},
                     {"search_seconds", {{"total", w.times.total}, {"generate", w.times.generate}, {"verify", w.times.verify},
                                         {"cost", w.times.cost}, {"unexamined_candidates", w.times.unexamined}}},
                     {"measure_seconds", w.measure_seconds},
                     {"carry_over_seconds", w.carry_seconds},
                     {"decision_cached", w.decision_cached},
                     {"search_cached", w.search_cached},
                     {"reused", w.reused}};
    if (!w.why_kept.empty()) e["why_kept"] = w.why_kept;
    if (!w.summary.empty()) e["program"] = w.summary;
    j["windows"].push_back(e);
  }
  j["passes"] = nlohmann::json::array();
  for (const auto& p : rep.passes)
    j["passes"].push_back({{"name", p.name}, {"skipped", p.skipped}, {"changed", p.stats.changed}, {"seconds", p.seconds}});
  if (!rep.passes_left_out.empty()) j["post_passes_left_out"] = rep.passes_left_out;
  if (auto jf = a.get("json")) {
    std::ofstream f(*jf);
    if (!f) throw InvalidInput(cat("--json: cannot write '", *jf, "'"));
    f << j.dump(2) << "\n";
  }
  if (!quiet) {
    int applied = 0;
    for (const auto& w : rep.windows) applied += w.applied != "original";
    std::printf("pet optimize: %s -> %s\n", path.c_str(), out->c_str());
    std::printf("  search %.1f s: %zu windows, %d rewritten, %d reused from identical windows; profiler %lld ops measured, %lld from cache\n",
                rep.search_seconds, rep.windows.size(), applied, rep.reused_windows, (long long)rep.profiler_measured, (long long)rep.profiler_hits);
    if (rep.searches_cached)
      std::printf("  %d window searches from an earlier run (decision cache; their candidates verified again)\n", rep.searches_cached);
    if (rep.decisions_cached) std::printf("  in-context decisions from an earlier run (decision cache)\n");
    if (rep.original_ms <= 0)
      std::printf("  end to end on %s: not timed (%s)\n", opt.backend.c_str(), rep.why_original.c_str());
    else
      std::printf("  end to end on %s: original %.3f ms, optimized %.3f ms (medians, interleaved; faster in %d of %d rounds): %.2fx%s\n",
                  opt.backend.c_str(), rep.original_ms, rep.optimized_ms, rep.timing_rounds_won, rep.timing_rounds,
                  rep.original_ms / std::max(1e-9, rep.optimized_ms),
                  narrowed ? " -- not for every value of the symbolic dims: the original is written" : rep.kept_original ? " -- not faster: the original is written" : "");
    if (narrowed) std::printf("  %s\n", rep.why_original.c_str());
    for (const auto& l : rep.passes_left_out) std::printf("  post-optimisation pass left out: %s\n", l.c_str());
    std::printf("  check against the original: %s\n", rep.check.c_str());
    if (written == "original file")
      std::printf("  written: the original file, %s (its shapes as declared)\n", external ? "its weights as external data" : self_contained ? "unchanged" : "as it is");
    else if (symbolic) {
      std::string dims, fixed;
      for (const auto& [p, v] : m.dims) {
        std::string& list = symbolic->dims.count(p) ? dims : fixed;
        list += cat(list.empty() ? "" : ", ", p, symbolic->dims.count(p) ? "" : cat("=", v));
      }
      std::printf("  written: the optimized program for every value of %s (checked against the original at %s)%s\n", dims.c_str(), symbolic->checked.c_str(),
                  fixed.empty() ? "" : cat("; ", fixed, " as optimised: ", why_fixed).c_str());
    }
    else if (!m.notes.empty())
      std::printf("  written: the %s at the shapes it was optimised for (the notes above; --dim and --shape choose others)%s\n", written.c_str(),
                  why_fixed.empty() ? "" : cat(": not for every shape, ", why_fixed).c_str());
    if (external) std::printf("  weights: %s.data (ONNX external data, beside it)\n", out->c_str());
    if (narrowed_weights)
      std::printf("  weights: those that are %s values stored so, each read through a Cast to float32\n",
                  m.narrow_float == onnx::kFloat16 ? "float16" : "float16 or bfloat16");
    for (const auto& w : rep.windows) {
      if (w.applied == "original" && !a.flag("explain")) continue;
      std::printf("  window %d (%s at '%s')%s: ", w.index, w.ops.c_str(), w.nodes.front().c_str(), w.reused ? " [reused]" : w.search_cached ? " [search cached]" : "");
      if (a.flag("explain") && !w.reused)
        std::printf("[search %.1f s: verification %.1f s, profiling %.1f s%s; in context %.1f s%s] ", w.times.total, w.times.verify, w.times.cost,
                    w.times.unexamined ? cat(", ", w.times.unexamined, " candidates unexamined").c_str() : "", w.measure_seconds,
                    w.carry_seconds >= 0.05 ? cat("; carry-over checks ", std::round(w.carry_seconds * 10) / 10, " s").c_str() : "");
      if (w.applied == "original") {
        std::printf("original form: %s\n", w.why_kept.c_str());
      } else {
        std::printf("%s, %s", w.applied.c_str(), w.verdict.c_str());
        if (w.correction_kernels) std::printf(" (%d correction kernels, %.2f %% corrected)", w.correction_kernels, 100 * w.corrected_fraction);
        std::printf("; estimated %.3f -> %.3f ms", w.est_original_ms, w.est_chosen_ms);
        if (w.measured_original_ms > 0)
          std::printf(", measured %.3f -> %.3f ms\n", w.measured_original_ms, w.measured_chosen_ms);
        else  // taken from the decision cache or with --apply-candidates: not measured in place by this run
          std::printf(", %s\n", w.decision_cached ? "kept in place by an earlier run (decision cache)" : "not measured in place");
      }
    }
  }
  return 0;
}

}  // namespace pet::cli
