// Top-K search over rounds on one window (paper Algorithm 2, lines 4-11).
#include <chrono>
#include <map>

#include "pet/optimize/optimize.hpp"

namespace pet::optimize {

Policy parse_policy(const std::string& s) {
  if (s == "both") return Policy::Both;
  if (s == "equivalent") return Policy::Equivalent;
  if (s == "partial") return Policy::Partial;
  if (s == "none") return Policy::None;
  throw InvalidInput(cat("--policy '", s, "': choose both, equivalent, partial or none"));
}
std::string_view policy_name(Policy p) {
  switch (p) {
    case Policy::Both: return "both";
    case Policy::Equivalent: return "equivalent";
    case Policy::Partial: return "partial";
    case Policy::None: return "none";
  }
  return "?";
}

namespace {
std::string ops_of(const Graph& g) {
  std::string s;
  for (NodeId n : g.topo_order()) s += cat(s.empty() ? "" : " ", op_name(g.node(n).op));
  return s;
}
}  // namespace

std::vector<Candidate> search(const Graph& window, const Options& opt, const std::function<double(const Graph&)>& cost, int* rounds_done,
                              std::string* stop, SearchTimes* times) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  Candidate orig;
  orig.graph = window;
  orig.est_ms = cost(window);
  orig.summary = ops_of(window);
  std::vector<Candidate> pool{orig};
  std::map<std::string, size_t> by_key{{structure_key(window), 0}};
  std::vector<size_t> frontier{0};
  std::vector<bool> expanded{false};
  int rounds = 0;
  std::string why = "rounds done";
  if (opt.policy == Policy::None) why = "policy none";
  mutate::Options mo;
  mo.depth = opt.depth;
  mo.rule_set = opt.rule_set;
  mo.cost = cost;
  if (!opt.only_rules.empty()) mo.rules = opt.only_rules;
  const mutate::RuleSet& rules = opt.rule_set ? *opt.rule_set : mutate::builtin_rules();
  if (!opt.disable_rules.empty()) {
    for (const auto& d : opt.disable_rules)
      if (!rules.find(d)) throw InvalidInput(cat("--disable: no rule named '", d, "' (pet mutate --list-rules lists them)"));
    mo.rules.clear();
    for (const auto& r : rules.rules()) {
      const std::string n(r->name());
      const bool only_ok = opt.only_rules.empty() || std::find(opt.only_rules.begin(), opt.only_rules.end(), n) != opt.only_rules.end();
      if (only_ok && std::find(opt.disable_rules.begin(), opt.disable_rules.end(), n) == opt.disable_rules.end()) mo.rules.push_back(n);
    }
    if (mo.rules.empty()) mo.rules = {"none"};
  }
  for (int r = 1; r <= opt.rounds && opt.policy != Policy::None; ++r) {
    std::vector<size_t> fresh;
    bool out_of_time = false;
    for (size_t f : frontier) {
      if (expanded[f]) continue;
      const double left = opt.window_budget_s - elapsed();
      if (left <= 0) {
        out_of_time = true;
        break;
      }
      expanded[f] = true;
      mo.seconds = std::max(1.0, left);
      mutate::MutateResult res;
      try {
        res = mutate::run(pool[f].graph, mo);
      } catch (const Unsupported&) {
        continue;  // a candidate the mutator cannot take apart further
      }
      if (times) {
        times->generate += res.generate_seconds;
        times->verify += res.verify_seconds;
        times->cost += res.cost_seconds;
        times->unexamined += res.unexamined;
      }
      for (auto& m : res.mutants) {
        const bool partial = m.verdict == verify::Verdict::PartiallyEquivalent || pool[f].verdict == "partially equivalent";
        if ((opt.policy == Policy::Equivalent && partial) || (opt.policy == Policy::Partial && !partial)) continue;
        std::string key = structure_key(m.graph);
        if (by_key.count(key)) continue;
        Candidate c;
        c.est_ms = m.est_ms;
        c.origin = pool[f].origin == "original" ? m.origin : cat(pool[f].origin, " + ", m.origin);
        c.verdict = partial ? "partially equivalent" : "equivalent";
        c.corrected_fraction = pool[f].corrected_fraction + m.corrections.fraction();
        c.correction_kernels = pool[f].correction_kernels + m.corrections.kernels;
        c.summary = m.summary;
        c.graph = std::move(m.graph);
        by_key.emplace(std::move(key), pool.size());
        fresh.push_back(pool.size());
        pool.push_back(std::move(c));
        expanded.push_back(false);
      }
    }
    rounds = r;
    if (out_of_time) {
      why = cat("window budget (", opt.window_budget_s, " s) spent in round ", r);
      break;
    }
    if (fresh.empty()) {
      why = cat("no new candidates in round ", r);
      break;
    }
    // The next round mutates the best K not yet mutated (the heap of the paper), among the
    // promising ones: within 10 % of the best estimate so far (the rest would take the
    // window's budget for mutants of mutants that are slower to begin with).
    std::vector<size_t> all(pool.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    std::stable_sort(all.begin(), all.end(), [&](size_t a, size_t b) { return pool[a].est_ms < pool[b].est_ms; });
    const double promising = 1.1 * pool[all[0]].est_ms;
    frontier.clear();
    for (size_t i : all)
      if (!expanded[i] && int(frontier.size()) < opt.top_k && pool[i].est_ms <= promising) frontier.push_back(i);
    if (frontier.empty()) {
      why = cat("no promising candidate left after round ", r);
      break;
    }
  }
  if (times) times->total = elapsed();
  if (rounds_done) *rounds_done = rounds;
  if (stop) *stop = why;
  std::stable_sort(pool.begin(), pool.end(), [](const Candidate& a, const Candidate& b) { return a.est_ms < b.est_ms; });
  return pool;
}

}  // namespace pet::optimize
