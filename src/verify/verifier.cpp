// The verifier: box intersections x Theorem 1 positions x Theorem 2 random draws.
#include "pet/verify/verifier.hpp"

#include <pthread.h>

#include <atomic>
#include <exception>
#include <functional>
#include <chrono>
#include <map>
#include <sstream>

#include "pet/core/rng.hpp"

namespace pet::verify {

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Equivalent: return "equivalent";
    case Verdict::PartiallyEquivalent: return "partially_equivalent";
    case Verdict::NotEquivalent: return "not_equivalent";
  }
  return "?";
}

LeafNames shared_leaves(const Graph& a, const Graph& b) {
  LeafNames l;
  if (a.inputs().size() != b.inputs().size())
    throw InvalidInput(cat("the original has ", a.inputs().size(), " inputs but the mutant has ", b.inputs().size()));
  for (size_t i = 0; i < a.inputs().size(); ++i) {
    const auto &ta = a.type(a.inputs()[i]), &tb = b.type(b.inputs()[i]);
    if (ta != tb)
      throw InvalidInput(cat("input ", i, " is ", to_string(ta), " in the original but ", to_string(tb), " in the mutant"));
    l.inputs.push_back(a.tensor(a.inputs()[i]).name);
  }
  std::map<std::string, Shape> w;
  for (const Graph* g : {&a, &b})
    for (TensorId t = 0; t < g->num_tensors(); ++t) {
      const auto& info = g->tensor(t);
      if (!info.is_constant() || !is_float(info.type.dtype)) continue;
      auto [it, fresh] = w.emplace(info.name, info.type.shape);
      if (!fresh && it->second != info.type.shape)
        throw InvalidInput(cat("weight '", info.name, "' has shape ", it->second, " in one program and ", info.type.shape,
                               " in the other"));
    }
  l.weights.assign(w.begin(), w.end());
  return l;
}

namespace {

/// One random draw of every leaf: small leaves as tensors, large ones (kLazyLeafFrom
/// elements or more) drawn element by element when read.
template <class F>
struct Draw {
  std::vector<std::optional<Tensor<F>>> inputs;
  std::vector<LazyLeaf<F>> lazy_inputs;
  std::map<std::string, std::optional<Tensor<F>>> weights;
  std::map<std::string, LazyLeaf<F>> lazy_weights;
};

/// Runs fn(0) ... fn(n-1) at once, each on a thread of its own with a 256 MB stack (reserved,
/// touched only as deep as it goes): point evaluation recurses once per op on a path, up to
/// PointEvaluator::kMaxDepth ops, deeper than a default 8 MB thread stack holds in a
/// sanitizer build. The first exception thrown is rethrown here.
void on_big_stacks(int64_t n, const std::function<void(int64_t)>& fn) {
  struct Job {
    const std::function<void(int64_t)>* fn;
    int64_t k;
    std::exception_ptr error;
  };
  std::vector<Job> jobs;
  for (int64_t k = 0; k < n; ++k) jobs.push_back({&fn, k, nullptr});
  auto body = [](void* p) -> void* {
    auto* j = static_cast<Job*>(p);
    try {
      (*j->fn)(j->k);
    } catch (...) {
      j->error = std::current_exception();
    }
    return nullptr;
  };
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, size_t(256) << 20);
  std::vector<pthread_t> threads;
  for (auto& j : jobs) {
    pthread_t t;
    if (pthread_create(&t, &attr, body, &j) == 0) threads.push_back(t);
    else body(&j);  // no thread to be had: run it here
  }
  pthread_attr_destroy(&attr);
  for (pthread_t t : threads) pthread_join(t, nullptr);
  for (const auto& j : jobs)
    if (j.error) std::rethrow_exception(j.error);
}

template <class F>
LazyLeaf<F> lazy_draw(uint64_t seed, uint64_t leaf, uint64_t p) {
  return [seed, leaf, p](int64_t i) { return F::raw(uint32_t(leaf_hash(seed, leaf, uint64_t(i)) % p)); };
}

template <class F>
Tensor<F> random_tensor(const Shape& s, Rng& rng, uint64_t p) {
  Tensor<F> t(s);
  for (int64_t i = 0; i < t.size(); ++i) t[i] = F::raw(uint32_t(rng.below(p)));
  return t;
}

template <class F>
Draw<F> make_draw(const LeafNames& names, const Graph& a, uint64_t seed, uint64_t p) {
  Rng rng(seed);
  Draw<F> d;
  for (size_t i = 0; i < a.inputs().size(); ++i) {
    const Shape& s = a.type(a.inputs()[i]).shape;
    const bool lazy = numel(s) >= kLazyLeafFrom;
    d.inputs.push_back(lazy ? std::nullopt : std::optional(random_tensor<F>(s, rng, p)));
    d.lazy_inputs.push_back(lazy ? lazy_draw<F>(seed, i, p) : LazyLeaf<F>());
  }
  for (const auto& [name, shape] : names.weights) {
    const bool lazy = numel(shape) >= kLazyLeafFrom;
    d.weights.emplace(name, lazy ? std::nullopt : std::optional(random_tensor<F>(shape, rng, p)));
    d.lazy_weights.emplace(name, lazy ? lazy_draw<F>(seed, leaf_key(name), p) : LazyLeaf<F>());
  }
  return d;
}

/// The evaluator of g on draw d (leaves copied: the two programs' evaluators run apart).
template <class F>
PointEvaluator<F> evaluator(const Graph& g, const Draw<F>& d) {
  std::vector<std::optional<Tensor<F>>> l(size_t(g.num_tensors()));
  std::vector<LazyLeaf<F>> lazy(size_t(g.num_tensors()));
  for (size_t i = 0; i < g.inputs().size(); ++i) l[size_t(g.inputs()[i])] = d.inputs[i], lazy[size_t(g.inputs()[i])] = d.lazy_inputs[i];
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    const auto& info = g.tensor(t);
    if (info.is_constant() && is_float(info.type.dtype)) l[size_t(t)] = d.weights.at(info.name), lazy[size_t(t)] = d.lazy_weights.at(info.name);
  }
  return PointEvaluator<F>(g, std::move(l), std::move(lazy));
}

/// The Theorem 1 positions of a box: its origin and one step along every dim it spans.
std::vector<Index> theorem1_positions(const Box& b) {
  std::vector<Index> v{b.origin()};
  for (int d = 0; d < b.rank(); ++d)
    if (b.dims[size_t(d)].count() >= 2) {
      Index p = b.origin();
      p[d] += b.dims[size_t(d)].step;
      v.push_back(p);
    }
  return v;
}

template <class F>
Report run(const Graph& a, const Graph& b, const Options& opt) {
  auto t0 = std::chrono::steady_clock::now();
  if (opt.tests < 1) throw InvalidInput(cat("the number of tests must be positive, got ", opt.tests));
  require_multilinear(a, "original");
  require_multilinear(b, "mutant");
  LeafNames names = shared_leaves(a, b);
  if (a.outputs().size() != b.outputs().size())
    throw InvalidInput(cat("the original has ", a.outputs().size(), " outputs but the mutant has ", b.outputs().size()));
  Report r;
  r.tests = opt.tests;
  r.prime = opt.prime;
  auto sa = propagate_boxes(a), sb = propagate_boxes(b);
  for (size_t o = 0; o < a.outputs().size(); ++o) {
    const TensorType &ta = a.type(a.outputs()[o]), &tb = b.type(b.outputs()[o]);
    if (ta != tb) throw InvalidInput(cat("output ", o, " is ", to_string(ta), " in the original but ", to_string(tb), " in the mutant"));
    OutputResult out;
    out.name = a.tensor(a.outputs()[o]).name;
    out.shape = ta.shape;
    out.splits_a = sa[size_t(a.outputs()[o])];
    out.splits_b = sb[size_t(b.outputs()[o])];
    for (const Box& box : unite(out.splits_a, out.splits_b, ta.shape).boxes(ta.shape)) {
      if (box.empty()) continue;
      out.cells.push_back(Cell{box, theorem1_positions(box), true});
      r.positions_tested += int64_t(out.cells.back().positions.size());
    }
    r.boxes_checked += int64_t(out.cells.size());
    r.outputs.push_back(std::move(out));
  }
  // One thread per random draw; each has its own memoised evaluators.
  std::vector<std::vector<std::vector<uint8_t>>> equal(size_t(opt.tests));
  std::vector<std::vector<std::vector<int64_t>>> differ(size_t(opt.tests));
  std::vector<int64_t> evals(size_t(opt.tests), 0);
  std::atomic<int64_t> positions_done{0};
  int64_t positions_total = 0;
  for (TensorId y : a.outputs()) positions_total += opt.exhaustive ? numel(a.type(y).shape) * opt.tests : 0;
  on_big_stacks(opt.tests, [&](int64_t k) {
    std::optional<FpRt::Scope> scope;
    if constexpr (std::is_same_v<F, FpRt>) scope.emplace(opt.prime);
    Draw<F> d = make_draw<F>(names, a, opt.seed * 1000003 + uint64_t(k), opt.prime);
    PointEvaluator<F> ea = evaluator(a, d), eb = evaluator(b, d);
    auto& eq = equal[size_t(k)];
    for (size_t o = 0; o < r.outputs.size(); ++o) {
      const auto& out = r.outputs[o];
      const TensorId ya = a.outputs()[o], yb = b.outputs()[o];
      eq.emplace_back(out.cells.size(), 1);
      for (size_t c = 0; c < out.cells.size(); ++c)
        for (const Index& p : out.cells[c].positions)
          if (!(ea.at(ya, p) == eb.at(yb, p))) {
            eq.back()[c] = 0;
            break;
          }
      if (opt.exhaustive) {
        differ[size_t(k)].emplace_back();
        Index p(int(out.shape.size()));
        if (numel(out.shape) > 0) {
          int64_t flat = 0;
          do {
            if (!(ea.at(ya, p) == eb.at(yb, p))) differ[size_t(k)].back().push_back(flat);
            ++flat;
            if ((flat & 0xffff) == 0) {
              int64_t done = positions_done.fetch_add(0x10000) + 0x10000;
              if (k == 0 && opt.progress) opt.progress(done, positions_total);
            }
          } while (next_index(p, out.shape));
        }
      }
    }
    evals[size_t(k)] = ea.evaluations() + eb.evaluations();
  });

  int64_t failing = 0, total = 0;
  for (size_t o = 0; o < r.outputs.size(); ++o) {
    auto& out = r.outputs[o];
    std::vector<Box> bad;
    for (size_t c = 0; c < out.cells.size(); ++c) {
      for (int k = 0; k < opt.tests; ++k) out.cells[c].equal = out.cells[c].equal && equal[size_t(k)][o][c];
      if (!out.cells[c].equal) {
        bad.push_back(out.cells[c].box);
        out.corrected_elements += out.cells[c].box.volume();
      }
    }
    failing += int64_t(bad.size());
    total += int64_t(out.cells.size());
    out.correction = merge_boxes(std::move(bad));
    if (opt.exhaustive) {
      std::vector<int64_t> all;
      for (int k = 0; k < opt.tests; ++k) all.insert(all.end(), differ[size_t(k)][o].begin(), differ[size_t(k)][o].end());
      std::sort(all.begin(), all.end());
      all.erase(std::unique(all.begin(), all.end()), all.end());
      out.differing = std::move(all);
    }
  }
  for (int64_t e : evals) r.evaluations += e;
  r.verdict = failing == 0 ? Verdict::Equivalent : failing == total ? Verdict::NotEquivalent : Verdict::PartiallyEquivalent;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string cuts_text(const SplitPoints& s) {
  std::string t;
  for (size_t d = 0; d < s.dims.size(); ++d) {
    t += d ? " " : "";
    if (s.dims[d].size() > 8) t += cat("[", s.dims[d].size(), " cuts]");
    else t += cat(s.dims[d]);
  }
  return t;
}
int64_t grid_size(const SplitPoints& s) {
  int64_t n = 1;
  for (const auto& d : s.dims) n *= int64_t(d.size()) + 1;
  return n;
}

}  // namespace

Report verify(const Graph& original, const Graph& mutant, const Options& opt) {
  if (opt.prime == 2147483647) return run<F31>(original, mutant, opt);
  FpRt::Scope check(opt.prime);  // validates the prime on the calling thread
  return run<FpRt>(original, mutant, opt);
}

std::string format_report(const Report& r, const Graph& a, const Graph& b, bool list_cells) {
  std::ostringstream os;
  for (const auto& out : r.outputs) {
    int64_t n = numel(out.shape);
    os << "output '" << out.name << "' " << to_string(out.shape) << "\n";
    os << "  original: " << grid_size(out.splits_a) << " boxes, cuts per dim " << cuts_text(out.splits_a) << "\n";
    os << "  mutant:   " << grid_size(out.splits_b) << " boxes, cuts per dim " << cuts_text(out.splits_b) << "\n";
    int64_t bad = 0;
    for (const auto& c : out.cells) bad += !c.equal;
    os << "  intersections: " << out.cells.size() << " (" << bad << " failing)\n";
    if (list_cells)
      for (const auto& c : out.cells) {
        os << "    " << to_string(c.box) << "  " << (c.equal ? "equal" : "DIFFERENT") << "  positions";
        for (const auto& p : c.positions) {
          os << " (";
          for (int i = 0; i < p.rank; ++i) os << (i ? "," : "") << p[i];
          os << ")";
        }
        os << "\n";
      }
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.2f", n ? 100.0 * double(out.corrected_elements) / double(n) : 0.0);
    os << "  correction region: " << out.correction.size() << " boxes, " << out.corrected_elements << " of " << n
       << " elements (" << pct << " %)\n";
    for (size_t i = 0; i < out.correction.size() && i < 32; ++i) os << "    " << to_string(out.correction[i]) << "\n";
    if (out.correction.size() > 32) os << "    ... " << out.correction.size() - 32 << " more\n";
  }
  os << "verdict: " << verdict_name(r.verdict) << "\n";
  char tail[200];
  std::snprintf(tail, sizeof tail, "checked %lld box intersections, %lld positions x %d tests over F_%llu in %.3f s (%lld element evaluations)\n",
                (long long)r.boxes_checked, (long long)r.positions_tested, r.tests, (unsigned long long)r.prime, r.seconds,
                (long long)r.evaluations);
  os << tail;
  (void)a;
  (void)b;
  return os.str();
}

}  // namespace pet::verify
