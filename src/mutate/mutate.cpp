// The mutation pipeline: rules + generator -> verify -> correct -> fuse -> rank.
#include "pet/mutate/mutate.hpp"

#include <chrono>
#include <set>

namespace pet::mutate {

namespace {
std::string op_list(const Graph& g) {
  std::string s;
  for (NodeId n : g.topo_order()) s += cat(s.empty() ? "" : " ", op_name(g.node(n).op));
  return s;
}
/// Structure key: ops with their attributes and output shapes, in order.
std::string structure(const Graph& g) {
  std::string s;
  for (NodeId n : g.topo_order()) s += cat(op_signature(g.node(n).op), g.type(g.node(n).outputs[0]).shape, ";");
  return s;
}
}  // namespace

namespace {
/// The order in which a budgeted run examines candidates: the roofline estimate, with the
/// multiplies of dense 3x3 (and kx3x3) unit-stride convs counted at half (Winograd applies to them, the
/// reason why dilated-to-dense and similar rewrites pay off).
double promise_ms(const Graph& g) {
  double ms = estimate_ms(g);
  for (NodeId n : g.topo_order())
    if (const auto* c = std::get_if<ops::Conv>(&g.node(n).op)) {
      const Shape& ws = g.type(g.node(n).inputs[1]).shape;
      // 3x3 in H and W: Winograd runs 2-D convs and 3-D ones (as depth taps of 2-D tiles)
      bool winograd = c->group == 1 && ws.size() >= 4 && ws[ws.size() - 2] == 3 && ws.back() == 3;
      for (int64_t v : c->strides) winograd = winograd && v == 1;
      for (int64_t v : c->dilations) winograd = winograd && v == 1;
      if (winograd) ms -= 0.5 * double(op_flops(g.node(n).op, g.input_types(n), g.output_types(n))) / (200.0 * 1e6);
    }
  return ms;
}
}  // namespace

MutateResult run(const Graph& sub, const Options& opt) {
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  auto since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  verify::require_multilinear(sub, "subprogram");
  MutateResult res;
  auto cost = [&](const Graph& g) {
    const auto c0 = clock::now();
    const double ms = opt.cost ? opt.cost(g) : estimate_ms(g);
    res.cost_seconds += since(c0);
    return ms;
  };
  res.original_est_ms = cost(sub);
  std::vector<std::pair<Graph, std::string>> candidates;

  // 1. Rules, at every node they match.
  const RuleSet& rule_set = opt.rule_set ? *opt.rule_set : builtin_rules();
  const bool all = opt.rules.size() == 1 && opt.rules[0] == "all";
  const bool none = opt.rules.size() == 1 && opt.rules[0] == "none";
  if (!none)
    for (const auto& rule : rule_set.rules()) {
      if (!all && std::find(opt.rules.begin(), opt.rules.end(), std::string(rule->name())) == opt.rules.end()) continue;
      for (NodeId n = 0; n < sub.num_nodes(); ++n) {
        ++res.rule_attempts;
        auto r = rule->apply_at(sub, n);
        if (auto* why = std::get_if<std::string>(&r)) {
          if (why->rfind("node is ", 0) != 0) res.rule_refusals.push_back(cat(rule->name(), " at '", sub.node(n).name, "': ", *why));
          continue;
        }
        ++res.rule_matches;
        candidates.emplace_back(std::move(std::get<Graph>(r)), std::string(rule->name()));
      }
    }
  if (!all && !none)
    for (const auto& name : opt.rules)
      if (!rule_set.find(name)) throw InvalidInput(cat("unknown rule '", name, "' (see pet mutate --list-rules)"));

  // 2. The generic generator.
  if (opt.depth > 0) {
    GeneratorOptions go = opt.generator;
    go.depth = opt.depth;
    if (opt.progress) go.progress = opt.progress;
    if (opt.seconds > 0) go.seconds = std::max(0.1, std::min(go.seconds, opt.seconds / 2 - since(t0)));
    GeneratorResult gr = generate(sub, go);
    res.stop_reason = gr.stop_reason;
    for (size_t i = 0; i < gr.mutants.size(); ++i) {
      ++res.generated;
      if (gr.agreement[i] >= opt.min_agreement) candidates.emplace_back(std::move(gr.mutants[i]), "generated");
    }
  } else {
    res.stop_reason = "generator disabled (depth 0)";
  }

  res.generate_seconds = since(t0) - res.cost_seconds;

  // 3. Verify, correct, fuse; keep the equivalent results. The rules' mutants first (few,
  // and each an expert's rewrite), then the generated ones; most promising first (promise_ms).
  {
    std::vector<std::pair<std::pair<bool, double>, size_t>> order;
    for (size_t i = 0; i < candidates.size(); ++i) order.push_back({{candidates[i].second == "generated", promise_ms(candidates[i].first)}, i});
    std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::pair<Graph, std::string>> sorted;
    for (const auto& [e, i] : order) sorted.push_back(std::move(candidates[i]));
    candidates = std::move(sorted);
  }
  std::set<std::string> seen;
  if (opt.progress)
    opt.progress(cat(candidates.size(), " candidates to verify (of ", res.rule_matches, " rule matches and ", res.generated, " generated programs), ",
                     int(since(t0)), " s"));
  for (size_t ci = 0; ci < candidates.size(); ++ci) {
    auto& [m, origin] = candidates[ci];
    if (opt.progress)
      opt.progress(cat("verifying candidate ", ci + 1, " of ", candidates.size(), ", ", res.mutants.size(), " mutants so far, ", int(since(t0)), " s",
                       opt.seconds > 0 ? cat(" of ", opt.seconds) : std::string()));
    if (opt.seconds > 0 && since(t0) > opt.seconds) {
      res.unexamined = int64_t(candidates.size() - ci);
      res.stop_reason = cat("time budget (", opt.seconds, " s) spent with ", res.unexamined, " of ", candidates.size(), " candidates unexamined");
      break;
    }
    if (!seen.insert(structure(m)).second) {
      ++res.duplicates;
      continue;
    }
    ++res.verified;
    auto v0 = clock::now();
    verify::Report rep = verify::verify(sub, m, opt.verify);
    res.verify_seconds += since(v0);
    if (rep.verdict == verify::Verdict::NotEquivalent) {
      ++res.rejected;
      continue;
    }
    Mutant mu;
    mu.origin = origin;
    mu.verdict = rep.verdict;
    Graph corrected = add_corrections(sub, m, rep, &mu.corrections);
    Graph fused = corrected;
    mu.corrections.fused_convs = fuse(fused);
    double c = cost(corrected), f = cost(fused);
    mu.fused = f < c;
    mu.graph = mu.fused ? std::move(fused) : std::move(corrected);
    mu.est_ms = std::min(c, f);
    mu.uncorrected_ms = mu.corrections.kernels ? cost(m) : mu.est_ms;
    // The corrected program must be equivalent as a whole; a failure here is pet's bug.
    v0 = clock::now();
    verify::Report check = verify::verify(sub, mu.graph, opt.verify);
    res.verify_seconds += since(v0);
    PET_CHECK(check.verdict == verify::Verdict::Equivalent, "the corrected ", origin, " mutant (", op_list(m), ") is ",
              verify::verdict_name(check.verdict));
    mu.summary = cat(op_list(m), mu.corrections.kernels ? cat(" + ", mu.corrections.kernels, " correction kernels") : "",
                     mu.fused ? " (fused)" : "");
    mu.graph.name = sub.name + "-" + origin;
    res.mutants.push_back(std::move(mu));
  }
  std::stable_sort(res.mutants.begin(), res.mutants.end(), [](const Mutant& a, const Mutant& b) { return a.est_ms < b.est_ms; });
  if (res.verified == 0) {
    std::string rules = none ? "no rule was applied (--rules none)"
                        : res.rule_matches == 0 ? cat("no rule matched (", res.rule_refusals.size(), " refusals; --explain lists them)")
                                                : cat(res.rule_matches, " rule matches");
    std::string gen = opt.depth == 0 ? "the generator is off (--depth 0)"
                      : res.generated == 0 ? cat("the generator found no program (", res.stop_reason, ")")
                                           : cat("none of its ", res.generated, " generated programs agreed with the original at ",
                                                 int(100 * opt.min_agreement), " % of the sampled outputs");
    res.nothing_verified = res.unexamined > 0 ? res.stop_reason : cat(rules, " and ", gen);
  }
  res.seconds = since(t0);
  return res;
}

}  // namespace pet::mutate
