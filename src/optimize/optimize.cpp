// The whole-model optimizer (include/pet/optimize/optimize.hpp).
#include "pet/optimize/optimize.hpp"

#include <chrono>
#include <cmath>
#include <map>
#include <set>

#include "pet/core/parallel.hpp"
#include "pet/eval/interpreter.hpp"
#include "post_passes.hpp"

namespace pet::optimize {

transform::Pipeline canonicalization_pipeline() {
  return transform::Pipeline({"constant-folding", "bn-folding", "pad-folding", "layer-norm-canonicalization", "gelu-canonicalization", "dead-code"});
}

namespace {
/// A shared pass in a pipeline (which owns its passes).
class Shared final : public transform::Pass {
 public:
  explicit Shared(std::shared_ptr<transform::Pass> p) : p_(std::move(p)) {}
  std::string_view name() const override { return p_->name(); }
  std::string_view description() const override { return p_->description(); }
  transform::PassStats run(Graph& g) override { return p_->run(g); }

 private:
  std::shared_ptr<transform::Pass> p_;
};
}  // namespace

transform::Pipeline post_optimization_pipeline(const std::vector<std::shared_ptr<transform::Pass>>& extra) {
  transform::Pipeline p;
  p.add(make_rt_through_activation());
  p.add(transform::make_pass("rt-folding"));
  p.add(make_inverse_rt_elimination());
  p.add(transform::make_pass("conv-merging"));
  p.add(transform::make_pass("constant-folding"));
  p.add(transform::make_pass("dead-code"));
  for (const auto& e : extra) p.add(std::make_unique<Shared>(e));
  return p;
}

namespace {

using clock = std::chrono::steady_clock;
double since(clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); }

/// The pipeline options restricted to the passes `p` has (the user's --disable-pass and
/// --print-after name passes of either pipeline).
transform::PipelineOptions for_pipeline(const transform::Pipeline& p, const transform::PipelineOptions& o) {
  transform::PipelineOptions r;
  r.log = o.log;
  auto names = p.names();
  auto has = [&](const std::string& n) { return n == "all" || std::find(names.begin(), names.end(), n) != names.end(); };
  for (const auto& n : o.disabled)
    if (has(n)) r.disabled.insert(n);
  for (const auto& n : o.print_after)
    if (has(n)) r.print_after.insert(n);
  return r;
}

void check_pass_names(const transform::PipelineOptions& o, const Options& opt) {
  std::set<std::string> known;
  for (const auto& p : {canonicalization_pipeline(), post_optimization_pipeline(opt.extra_passes)})
    for (const auto& n : p.names()) known.insert(n);
  for (const auto* set : {&o.disabled, &o.print_after})
    for (const auto& n : *set)
      if (n != "all" && !known.count(n))
        throw InvalidInput(cat("no pass named '", n, "' in pet optimize (its passes: ", std::vector<std::string>(known.begin(), known.end()), ")"));
}

/// The window's inputs again, from its nodes as they read now (earlier substitutions
/// redirected some of them), in order of first use as partition() lists them.
void refresh_inputs(const Graph& g, Window& w) {
  std::set<TensorId> produced, seen;
  for (NodeId n : w.nodes)
    for (TensorId t : g.node(n).outputs) produced.insert(t);
  w.inputs.clear();
  for (NodeId n : w.nodes)
    for (TensorId t : g.node(n).inputs)
      if (!produced.count(t) && !g.tensor(t).is_constant() && seen.insert(t).second) w.inputs.push_back(t);
}

/// Random inputs for a program (seeded), floats in [-1, 1].
std::vector<Value<float>> inputs_for(const Graph& g, uint64_t seed) {
  Rng rng(seed);
  std::vector<Value<float>> in;
  for (TensorId t : g.inputs()) in.push_back(backend::random_value(g.type(t), rng));
  return in;
}

struct Outputs {
  std::vector<std::vector<Value<float>>> per_seed;
};

Outputs reference_outputs(const Graph& g, int seeds) {
  Outputs o;
  auto ref = backend::make_backend("reference")->compile(g);
  for (int s = 0; s < seeds; ++s) o.per_seed.push_back(ref->run(inputs_for(g, 1000 + uint64_t(s))));
  return o;
}

/// "" if g computes `want` (outputs by position, tolerance per output), else what differs.
std::string differs(const Graph& g, const Outputs& want, double atol, double rtol) {
  Outputs got;
  try {
    got = reference_outputs(g, int(want.per_seed.size()));
  } catch (const Error& e) {
    return cat("it does not run: ", e.what());
  }
  for (size_t s = 0; s < want.per_seed.size(); ++s) {
    if (got.per_seed[s].size() != want.per_seed[s].size()) return cat(got.per_seed[s].size(), " outputs instead of ", want.per_seed[s].size());
    for (size_t k = 0; k < got.per_seed[s].size(); ++k) {
      const auto* a = std::get_if<Tensor<float>>(&got.per_seed[s][k]);
      const auto* b = std::get_if<Tensor<float>>(&want.per_seed[s][k]);
      if (!a || !b) {
        const auto* x = std::get_if<Tensor<int64_t>>(&got.per_seed[s][k]);
        const auto* y = std::get_if<Tensor<int64_t>>(&want.per_seed[s][k]);
        if (!x || !y || x->vec() != y->vec()) return cat("integer output ", k, " differs");
        continue;
      }
      if (a->shape() != b->shape()) return cat("output ", k, " has shape ", a->shape(), " instead of ", b->shape());
      double err = 0, mx = 0;
      for (int64_t i = 0; i < b->size(); ++i) {
        mx = std::max(mx, double(std::abs((*b)[i])));
        double d = std::abs(double((*a)[i]) - double((*b)[i]));
        if (std::isnan(d) && !(std::isnan((*a)[i]) && std::isnan((*b)[i]))) d = INFINITY;
        if (!std::isnan(d)) err = std::max(err, d);
      }
      if (err > atol + rtol * mx) return cat("output ", k, " ('", g.tensor(g.outputs()[k]).name, "'): max|opt-orig| ", err, " with max|orig| ", mx);
    }
  }
  return "";
}

/// Interleaved end-to-end timing of two programs on the backend: medians (ms).
std::pair<double, double> time_pair(backend::Backend& be, const Graph& a, const Graph& b, const Options& opt) {
  backend::CompileOptions co;
  co.threads = opt.threads;
  co.algorithm_cache = opt.algorithm_cache;
  auto ea = be.compile(a, co), eb = be.compile(b, co);
  auto in = inputs_for(a, 7);
  std::vector<double> ta, tb;
  for (int r = 0; r < opt.time_rounds; ++r) {
    auto x = backend::time_runs(*ea, in, opt.time_runs);
    auto y = backend::time_runs(*eb, in, opt.time_runs);
    ta.insert(ta.end(), x.begin(), x.end());
    tb.insert(tb.end(), y.begin(), y.end());
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  };
  return {median(ta), median(tb)};
}

std::string ops_of(const Graph& g, const Window& w) {
  std::string s;
  for (NodeId n : w.nodes) s += cat(s.empty() ? "" : " ", op_name(g.node(n).op));
  return s;
}

struct Choice {
  std::optional<Graph> program;  ///< nullopt: the original form
  WindowReport report;
};

}  // namespace

Result optimize(const Graph& model, const Options& opt) {
  const auto t0 = clock::now();
  check_pass_names(opt.passes, opt);
  if (opt.threads > 0) set_num_threads(opt.threads);
  Result res;
  Report& rep = res.report;
  rep.model = model.name;
  auto progress = [&](Progress p) {
    p.elapsed_s = since(t0);
    if (opt.progress) opt.progress(p);
  };

  // 1. Canonicalisation (fully equivalent graph rewrites).
  Graph g = model;
  {
    auto p = canonicalization_pipeline();
    auto rec = p.run(g, for_pipeline(p, opt.passes));
    rep.passes.insert(rep.passes.end(), rec.begin(), rec.end());
  }
  const Graph canonical = g;

  // 2. Windows; 3-4. search and measurement per window, identical windows once.
  auto be = backend::make_backend(opt.backend);
  backend::Profiler prof(*be, opt.profile_cache, 8, 0.04);
  auto cost = [&](const Graph& p) { return prof.program_cost_ms(p); };
  std::vector<Window> windows = partition(g, opt.window);
  std::map<std::string, Choice> memo;
  std::vector<std::pair<size_t, Graph>> chosen;  // (window, program) to substitute
  double est_before = 0, est_after = 0;
  rep.stop_reason = "every window searched";
  for (size_t i = 0; i < windows.size(); ++i) {
    const Window& w = windows[i];
    WindowReport wr;
    wr.index = int(i);
    for (NodeId n : w.nodes) wr.nodes.push_back(g.node(n).name);
    wr.ops = ops_of(g, w);
    if (opt.budget_s > 0 && since(t0) > opt.budget_s) {
      wr.why_kept = "the search budget was spent before this window";
      rep.stop_reason = cat("search budget (", opt.budget_s, " s) spent after ", i, " of ", windows.size(), " windows");
      rep.windows.push_back(wr);
      continue;
    }
    progress({int(i) + 1, int(windows.size()), 0, est_after > 0 ? est_before / est_after : 1.0, 0, "searching"});
    const Graph program = extract(g, w);
    const std::string key = structure_key(program);
    if (auto it = memo.find(key); it != memo.end()) {
      WindowReport r = it->second.report;
      r.index = wr.index;
      r.nodes = wr.nodes;
      r.reused = true;
      ++rep.reused_windows;
      if (it->second.program) chosen.push_back({i, *it->second.program});
      est_before += r.est_original_ms;
      est_after += it->second.program ? r.est_chosen_ms : r.est_original_ms;
      rep.windows.push_back(r);
      continue;
    }
    Options wopt = opt;
    if (opt.budget_s > 0) wopt.window_budget_s = std::min(opt.window_budget_s, std::max(1.0, opt.budget_s - since(t0)));
    std::string stop;
    std::vector<Candidate> cands;
    try {
      cands = search(program, wopt, cost, &wr.rounds, &stop);
    } catch (const Unsupported& e) {
      wr.why_kept = cat("the mutator cannot take it: ", e.what());
      rep.windows.push_back(wr);
      memo[key] = Choice{std::nullopt, wr};
      continue;
    }
    wr.candidates = int(cands.size()) - 1;
    const auto orig_it = std::find_if(cands.begin(), cands.end(), [](const Candidate& c) { return c.origin == "original"; });
    wr.est_original_ms = orig_it->est_ms;
    // The best few by the cost model, timed as compiled programs against the original.
    Choice choice;
    std::vector<const Candidate*> best;
    for (const auto& c : cands)
      if (c.origin != "original" && c.est_ms < orig_it->est_ms && int(best.size()) < opt.measure_best) best.push_back(&c);
    if (best.empty()) {
      wr.why_kept = cands.size() == 1 ? cat("no verified mutant (", stop, ")")
                                      : cat("no mutant is estimated faster (best ", cands[0].origin == "original" && cands.size() > 1 ? cands[1].est_ms : cands[0].est_ms,
                                            " ms vs ", orig_it->est_ms, " ms)");
    } else {
      progress({int(i) + 1, int(windows.size()), wr.rounds, est_after > 0 ? est_before / est_after : 1.0, 0, "measuring"});
      wr.measured_original_ms = prof.time_program(program).min_ms;
      const Candidate* win = nullptr;
      double win_ms = wr.measured_original_ms;
      for (const Candidate* c : best) {
        double ms = prof.time_program(c->graph).min_ms;
        if (ms < win_ms) win_ms = ms, win = c;
      }
      if (win && win_ms < 0.97 * wr.measured_original_ms) {
        wr.applied = win->origin;
        wr.verdict = win->verdict;
        wr.corrected_fraction = win->corrected_fraction;
        wr.correction_kernels = win->correction_kernels;
        wr.summary = win->summary;
        wr.est_chosen_ms = win->est_ms;
        wr.measured_chosen_ms = win_ms;
        choice.program = win->graph;
      } else {
        wr.why_kept = cat("the best estimated mutants (", best[0]->origin, ", est ", best[0]->est_ms, " ms vs ", orig_it->est_ms,
                          " ms) measure no faster than the original (", wr.measured_original_ms, " ms)");
      }
    }
    est_before += wr.est_original_ms;
    est_after += choice.program ? wr.est_chosen_ms : wr.est_original_ms;
    choice.report = wr;
    if (choice.program) chosen.push_back({i, *choice.program});
    memo[key] = choice;
    rep.windows.push_back(wr);
  }
  rep.search_seconds = since(t0);
  rep.profiler_measured = prof.measured();
  rep.profiler_hits = prof.hits();
  prof.save();

  // 5. Stitching, post-optimisations.
  auto stitch = [&](size_t upto) {
    Graph h = canonical;
    std::vector<Window> ws = windows;
    for (size_t k = 0; k < upto; ++k) {
      Window& w = ws[chosen[k].first];
      refresh_inputs(h, w);
      substitute(h, w, chosen[k].second);
    }
    h.compact();
    return h;
  };
  progress({int(windows.size()), int(windows.size()), 0, est_after > 0 ? est_before / est_after : 1.0, 0, "checking"});
  g = stitch(chosen.size());
  std::vector<transform::PassRecord> post;
  {
    auto p = post_optimization_pipeline(opt.extra_passes);
    post = p.run(g, for_pipeline(p, opt.passes));
    rep.passes.insert(rep.passes.end(), post.begin(), post.end());
  }

  // 6. The end-to-end check; on a mismatch, find the step that broke it.
  const Outputs want = reference_outputs(model, opt.check_seeds);
  if (std::string d = differs(g, want, opt.check_atol, opt.check_rtol); !d.empty()) {
    std::string culprit;
    if (!differs(canonical, want, opt.check_atol, opt.check_rtol).empty()) {
      culprit = "the canonicalisation passes";
    } else {
      for (size_t k = 1; k <= chosen.size() && culprit.empty(); ++k)
        if (!differs(stitch(k), want, opt.check_atol, opt.check_rtol).empty()) {
          const WindowReport& wr = rep.windows[chosen[k - 1].first];
          culprit = cat("window ", wr.index, " (", wr.ops, " at '", wr.nodes.front(), "'): ", wr.applied);
        }
      if (culprit.empty()) {  // the post-optimisations, one at a time
        Graph h = stitch(chosen.size());
        auto p = post_optimization_pipeline(opt.extra_passes);
        const auto base = for_pipeline(p, opt.passes);
        for (const auto& name : p.names()) {
          if (base.disabled.count(name)) continue;
          transform::PipelineOptions one;
          for (const auto& n : p.names())
            if (n != name) one.disabled.insert(n);
          p.run(h, one);
          if (!differs(h, want, opt.check_atol, opt.check_rtol).empty()) {
            culprit = cat("the post-optimisation pass '", name, "'");
            break;
          }
        }
      }
    }
    throw InternalError(cat("the optimized program differs from the original (", d, "); ", culprit.empty() ? "the steps agree one by one" : culprit,
                            " broke it; nothing was written"));
  }
  rep.check = cat("pass (", opt.check_seeds, " random input sets, reference interpreter)");

  // Timing end to end; the optimized program is kept only if it is faster.
  progress({int(windows.size()), int(windows.size()), 0, est_after > 0 ? est_before / est_after : 1.0, 0, "timing"});
  std::tie(rep.original_ms, rep.optimized_ms) = time_pair(*be, model, g, opt);
  rep.speedup = rep.optimized_ms > 0 ? rep.original_ms / rep.optimized_ms : 1;
  if (rep.optimized_ms < rep.original_ms) {
    res.graph = std::move(g);
  } else {
    rep.kept_original = true;
    rep.why_original = cat("the optimized program measured ", rep.optimized_ms, " ms against the original's ", rep.original_ms,
                           " ms; the original is written");
    res.graph = model;
    rep.speedup = 1;
  }
  res.graph.name = model.name;
  rep.total_seconds = since(t0);
  return res;
}

}  // namespace pet::optimize
