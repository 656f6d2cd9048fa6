// Algorithm 1: DFS over programs built from the multilinear operator set.
#include "pet/mutate/generator.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <unordered_set>

#include "pet/core/rng.hpp"
#include "pet/verify/point_eval.hpp"

namespace pet::mutate {

namespace {

using Clock = std::chrono::steady_clock;

/// A value available to the search: an original leaf or an output of an earlier step.
struct Val {
  TensorType type;
  TensorId leaf = -1;  ///< original tensor id (inputs, weights)
  int step = -1, k = 0;
  bool weight = false;
};
struct Step {
  Op op;
  std::vector<int> in;  ///< indices into the value list
  NodeId source = -1;   ///< the original compute node it instantiates
  bool prelude = false; ///< reads original weights only (folded at compile time; not counted in the depth)
};

struct Search {
  const Graph& orig;
  GeneratorOptions opt;
  GeneratorResult res;
  Clock::time_point t0 = Clock::now();
  std::vector<Val> vals;
  std::vector<Step> steps;
  std::vector<int> leaf_vals;
  Types out_types;
  std::vector<NodeId> compute;  ///< original conv / matmul / gemm nodes
  std::vector<int64_t> factors; ///< derived split factors
  std::vector<int64_t> dilations;
  std::multiset<std::string> orig_ops;
  // fingerprinting
  std::vector<std::optional<Tensor<F31>>> orig_leaves;
  /// The fingerprint's draw of each leaf: a tensor, or for a large one (verify::kLazyLeafFrom
  /// elements or more) a lazy draw (a candidate's evaluation reads a few elements of it).
  struct Leaf {
    std::optional<Tensor<F31>> tensor;
    verify::LazyLeaf<F31> lazy;
  };
  std::map<std::string, Leaf> weights_by_name;
  std::vector<Leaf> input_values;
  std::vector<std::vector<Index>> sample;
  std::vector<std::vector<F31>> orig_print;
  std::set<std::vector<uint32_t>> seen;  // fingerprints (with the compute ops' shapes)
  int depth_limit = 1;
  bool stop = false;
  static constexpr int kSample = 24;
  std::set<std::string> structures;  // programs already built (same ops, attributes and wiring)

  explicit Search(const Graph& g, const GeneratorOptions& o) : orig(g), opt(o) {
    for (TensorId t : g.inputs()) {
      leaf_vals.push_back(int(vals.size()));
      vals.push_back({g.type(t), t, -1, 0, false});
    }
    for (TensorId t = 0; t < g.num_tensors(); ++t)
      if (g.tensor(t).is_constant() && is_float(g.type(t).dtype)) {
        leaf_vals.push_back(int(vals.size()));
        vals.push_back({g.type(t), t, -1, 0, true});
      }
    for (TensorId t : g.outputs()) out_types.push_back(g.type(t));
    std::set<int64_t> f{2};
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
      const Op& op = g.node(n).op;
      orig_ops.insert(std::string(op_name(op)));
      if (auto* c = std::get_if<ops::Conv>(&op)) {
        compute.push_back(n);
        for (int64_t d : c->dilations)
          if (d > 1) f.insert(d), dilations.push_back(d);
        int64_t batch = g.type(g.node(n).inputs[0]).shape[0];
        if (batch > 1) f.insert(batch);
      } else if (std::holds_alternative<ops::MatMul>(op) || std::holds_alternative<ops::Gemm>(op)) {
        compute.push_back(n);
      }
    }
    factors.assign(f.begin(), f.end());
    prepare_fingerprint();
  }

  bool out_of_budget() {
    if (stop) return true;
    if (res.states >= opt.max_states) return finish("state budget reached (" + std::to_string(opt.max_states) + " partial programs)");
    if (res.candidates >= opt.max_candidates)
      return finish("candidate budget reached (" + std::to_string(opt.max_candidates) + " complete programs)");
    if ((res.states & 255) == 0) {
      const double t = std::chrono::duration<double>(Clock::now() - t0).count();
      if (t > opt.seconds) return finish(cat("time budget reached (", opt.seconds, " s)"));
      if (opt.progress && t >= next_report && res.states > reported_states) {
        next_report = t + opt.progress_every;
        reported_states = res.states;
        opt.progress(cat("generating: ", res.states, " partial and ", res.candidates, " complete programs, ", res.mutants.size(), " mutants kept, ",
                         int(t), " of at most ", int(opt.seconds), " s"));
      }
    }
    return false;
  }
  double next_report = opt.progress_every;  ///< seconds into the search of the next progress line
  int64_t reported_states = 0;
  bool finish(std::string why) {
    if (!stop) res.stop_reason = std::move(why);
    stop = true;
    return true;
  }

  // ---------------------------------------------------------------- fingerprints
  void prepare_fingerprint() {
    Rng rng(opt.seed);
    orig_leaves.resize(size_t(orig.num_tensors()));
    auto draw = [&](const Shape& s, uint64_t key) {
      Leaf l;
      if (numel(s) >= verify::kLazyLeafFrom) {
        const uint64_t seed = opt.seed;
        l.lazy = [seed, key](int64_t i) { return F31::raw(uint32_t(verify::leaf_hash(seed, key, uint64_t(i)) % 2147483647u)); };
        return l;
      }
      Tensor<F31> t(s);
      for (int64_t i = 0; i < t.size(); ++i) t[i] = F31::raw(uint32_t(rng.below(2147483647u)));
      l.tensor = std::move(t);
      return l;
    };
    for (TensorId t : orig.inputs()) input_values.push_back(draw(orig.type(t).shape, input_values.size())), orig_leaves[size_t(t)] = input_values.back().tensor;
    for (TensorId t = 0; t < orig.num_tensors(); ++t)
      if (orig.tensor(t).is_constant() && is_float(orig.type(t).dtype)) {
        weights_by_name.emplace(orig.tensor(t).name, draw(orig.type(t).shape, verify::leaf_key(orig.tensor(t).name)));
        orig_leaves[size_t(t)] = weights_by_name.at(orig.tensor(t).name).tensor;
      }
    // Half the sample near the borders (where partially equivalent mutants differ), half anywhere.
    for (const auto& ot : out_types) {
      std::vector<Index> pos;
      for (int i = 0; i < kSample; ++i) {
        Index v(int(ot.shape.size()));
        for (int d = 0; d < v.rank; ++d) {
          const int64_t n = ot.shape[size_t(d)];
          if (n == 0) continue;
          const int64_t edge[] = {0, std::min<int64_t>(1, n - 1), n / 2, std::max<int64_t>(n - 2, 0), n - 1};
          v[d] = i % 2 ? edge[rng.below(5)] : int64_t(rng.below(uint64_t(n)));
        }
        pos.push_back(v);
      }
      sample.push_back(pos);
    }
    orig_print = evaluate(orig);
  }
  std::vector<std::vector<F31>> evaluate(const Graph& g) {
    std::vector<std::optional<Tensor<F31>>> leaves(size_t(g.num_tensors()));
    std::vector<verify::LazyLeaf<F31>> lazy(size_t(g.num_tensors()));
    auto set = [&](TensorId t, const Leaf& l) { leaves[size_t(t)] = l.tensor, lazy[size_t(t)] = l.lazy; };
    for (size_t i = 0; i < g.inputs().size(); ++i) set(g.inputs()[i], input_values[i]);
    for (TensorId t = 0; t < g.num_tensors(); ++t)
      if (g.tensor(t).is_constant() && is_float(g.type(t).dtype)) set(t, weights_by_name.at(g.tensor(t).name));
    verify::PointEvaluator<F31> ev(g, std::move(leaves), std::move(lazy));
    std::vector<std::vector<F31>> r;
    for (size_t o = 0; o < g.outputs().size(); ++o) {
      r.emplace_back();
      for (const Index& v : sample[o]) r.back().push_back(ev.at(g.outputs()[o], v));
    }
    return r;
  }

  int prelude_count() const {
    int n = 0;
    for (const auto& s : steps) n += s.prelude;
    return n;
  }
  /// The last step that reads data (not only weights), or -1.
  int last_chain() const {
    for (int i = int(steps.size()) - 1; i >= 0; --i)
      if (!steps[size_t(i)].prelude) return i;
    return -1;
  }

  /// A key for the program's structure (ops with their attributes and wiring).
  std::string structure() const {
    std::string k;
    for (const auto& s : steps) {
      k += op_name(s.op);
      std::visit([&](const auto& o) {
        if constexpr (requires { o.perm; }) k += cat(o.perm);
        if constexpr (requires { o.split_shape; }) k += cat(o.split_shape, o.out_shape);
        if constexpr (requires { o.pads; }) k += cat(o.pads);
        if constexpr (requires { o.dilations; }) k += cat(o.dilations);
        if constexpr (requires { o.axis; }) k += cat(o.axis);
        if constexpr (requires { o.ends; }) k += cat(o.ends, o.axes);
      }, s.op);
      k += cat(s.in, ";");
    }
    return k;
  }

  // ---------------------------------------------------------------- building a candidate
  Graph build() const {
    Graph g;
    g.name = orig.name + "-generated";
    Builder b(g);
    std::vector<TensorId> ids(vals.size(), -1);
    for (int v : leaf_vals) {
      const auto& info = orig.tensor(vals[size_t(v)].leaf);
      ids[size_t(v)] = vals[size_t(v)].weight ? g.add_constant(info.name, info.type.dtype, *info.value) : g.add_input(info.name, info.type);
    }
    size_t next = leaf_vals.size();
    for (const Step& s : steps) {
      std::vector<TensorId> in;
      for (int i : s.in) in.push_back(ids[size_t(i)]);
      auto outs = b.add_multi(s.op, in, std::string(op_name(s.op)));
      for (TensorId o : outs) ids[next++] = o;
    }
    const Step& last = steps.back();
    (void)last;
    for (size_t k = 0; k < out_types.size(); ++k) {
      TensorId t = ids[vals.size() - out_types.size() + k];
      const std::string& name = orig.tensor(orig.outputs()[k]).name;
      if (g.tensor(t).name != name) {
        if (auto other = g.find(name)) g.rename(*other, g.unique_name(name + "_0"));
        g.rename(t, name);
      }
      g.add_output(t);
    }
    return g;
  }

  void complete() {
    // The last step's outputs must be the original's outputs, and every leaf must be used.
    if (steps.empty()) return;
    const size_t nout = out_types.size();
    size_t last_outs = 0;
    for (const auto& v : vals)
      if (v.step == int(steps.size()) - 1) ++last_outs;
    if (last_outs != nout) return;
    for (size_t k = 0; k < nout; ++k)
      if (vals[vals.size() - nout + k].type != out_types[k]) return;
    if (steps.back().prelude) return;
    std::vector<bool> used(vals.size(), false);
    for (const auto& s : steps)
      for (int i : s.in) used[size_t(i)] = true;
    for (int v : leaf_vals)
      if (!used[size_t(v)]) return;
    for (size_t i = leaf_vals.size(); i + nout < vals.size(); ++i)
      if (!used[i]) return;  // a dead intermediate
    ++res.candidates;
    if (!structures.insert(structure()).second) {
      ++res.duplicates;
      return;
    }
    std::multiset<std::string> ops;
    for (const auto& s : steps) ops.insert(std::string(op_name(s.op)));
    if (ops == orig_ops && steps.size() == size_t(orig.num_nodes())) {
      Graph g = build();
      if (evaluate(g) == orig_print) {  // the original itself, rebuilt
        ++res.identical;
        return;
      }
    }
    Graph g;
    try {
      g = build();
    } catch (const InvalidInput&) {
      return;
    }
    auto print = evaluate(g);
    // Same function and same compute work (op types and output shapes of the compute ops)
    // is a duplicate; equal functions reached with different work are distinct mutants.
    std::vector<uint32_t> key;
    for (const auto& st : steps)
      if (st.source >= 0) {
        key.push_back(uint32_t(st.op.index()));
        for (const auto& v : vals)
          if (v.step >= 0 && &steps[size_t(v.step)] == &st)
            for (int64_t d : v.type.shape) key.push_back(uint32_t(d));
      }
    int64_t same = 0, total = 0;
    for (size_t o = 0; o < print.size(); ++o)
      for (size_t i = 0; i < print[o].size(); ++i) {
        key.push_back(print[o][i].v);
        same += print[o][i] == orig_print[o][i];
        ++total;
      }
    if (!seen.insert(key).second) {
      ++res.duplicates;
      return;
    }
    res.mutants.push_back(std::move(g));
    res.agreement.push_back(total ? double(same) / double(total) : 1.0);
  }

  // ---------------------------------------------------------------- the operator set
  /// Adds op on inputs if it type-checks; recurses; removes it again.
  void try_op(Op op, std::vector<int> in, int depth, NodeId source = -1) {
    bool prelude = true;
    for (int i : in) prelude = prelude && (vals[size_t(i)].weight || (vals[size_t(i)].step >= 0 && steps[size_t(vals[size_t(i)].step)].prelude));
    if (prelude && prelude_count() >= 3) return;
    if (out_of_budget()) return;
    Types it;
    for (int i : in) it.push_back(vals[size_t(i)].type);
    Types ot;
    try {
      ot = infer_types(op, it);
    } catch (const Error&) {
      return;
    }
    for (const auto& t : ot)
      if (numel(t.shape) == 0) return;
    ++res.states;
    const size_t mark = vals.size();
    steps.push_back({std::move(op), std::move(in), source, prelude});
    for (size_t k = 0; k < ot.size(); ++k) vals.push_back({ot[k], -1, int(steps.size()) - 1, int(k), false});
    const int d = depth + (prelude ? 0 : 1);
    if (d == depth_limit) complete();
    else dfs(d);
    steps.pop_back();
    vals.resize(mark);
  }

  /// Whether an R/T op keeps every element in place (its permutation only moves unit dims).
  static bool is_identity(const ops::RT& rt) {
    int64_t last = -1;
    for (int64_t p : rt.perm) {
      if (rt.split_shape[size_t(p)] == 1) continue;
      if (p < last) return false;
      last = p;
    }
    return true;
  }

  /// R/T moves on a rank-4-or-less tensor: merge one dim into another, split a dim by a
  /// derived factor into another, split/merge H and W jointly with the batch, swap two dims.
  std::vector<ops::RT> rt_moves(const Shape& s) const {
    std::vector<ops::RT> r;
    const int rank = int(s.size());
    auto make = [&](Shape split, std::vector<int64_t> perm, Shape out) {
      r.push_back(ops::RT{.split_shape = std::move(split), .perm = std::move(perm), .out_shape = std::move(out)});
    };
    for (int a = 0; a < rank; ++a)
      for (int b = 0; b < rank; ++b) {
        if (a == b) continue;
        if (s[size_t(a)] > 1)
          for (bool outer : {true, false}) {  // merge dim a into dim b
            std::vector<int64_t> perm;
            for (int d = 0; d < rank; ++d) {
              if (d == a) continue;
              if (d == b && outer) perm.push_back(a);
              perm.push_back(d);
              if (d == b && !outer) perm.push_back(a);
            }
            Shape out = s;
            out[size_t(b)] *= s[size_t(a)];
            out[size_t(a)] = 1;
            make(s, perm, out);
          }
        for (int64_t k : factors) {  // split dim b by k into dim a
          if (s[size_t(b)] % k || s[size_t(b)] == k) continue;
          for (bool k_outer_of_b : {true, false})
            for (bool k_outer_of_a : {true, false}) {
              if (s[size_t(a)] == 1 && !k_outer_of_a) continue;
              Shape split;
              std::vector<int> src;  // split dim -> meaning
              int kpos = -1;
              for (int d = 0; d < rank; ++d) {
                if (d == b) {
                  if (k_outer_of_b) kpos = int(split.size()), split.push_back(k), split.push_back(s[size_t(b)] / k);
                  else split.push_back(s[size_t(b)] / k), kpos = int(split.size()), split.push_back(k);
                } else {
                  split.push_back(s[size_t(d)]);
                }
              }
              // position of dim a in split
              int apos = 0;
              for (int d = 0; d < a; ++d) apos += d == b ? 2 : 1;
              std::vector<int64_t> perm;
              for (int d = 0; d < int(split.size()); ++d) {
                if (d == kpos) continue;
                if (d == apos && k_outer_of_a) perm.push_back(kpos);
                perm.push_back(d);
                if (d == apos && !k_outer_of_a) perm.push_back(kpos);
              }
              Shape out = s;
              out[size_t(a)] *= k;
              out[size_t(b)] /= k;
              make(split, perm, out);
            }
        }
        if (a < b) {  // swap
          std::vector<int64_t> perm(static_cast<size_t>(rank));
          for (int d = 0; d < rank; ++d) perm[size_t(d)] = d;
          std::swap(perm[size_t(a)], perm[size_t(b)]);
          Shape out = s;
          std::swap(out[size_t(a)], out[size_t(b)]);
          make(s, perm, out);
        }
      }
    if (rank == 4)
      for (int64_t k : factors) {
        if (s[2] % k == 0 && s[3] % k == 0)  // H and W residues (or blocks) into the batch
          for (bool residue : {true, false}) {
            Shape split = residue ? Shape{s[0], s[1], s[2] / k, k, s[3] / k, k} : Shape{s[0], s[1], k, s[2] / k, k, s[3] / k};
            std::vector<int64_t> perm = residue ? std::vector<int64_t>{3, 5, 0, 1, 2, 4} : std::vector<int64_t>{2, 4, 0, 1, 3, 5};
            make(split, perm, {k * k * s[0], s[1], s[2] / k, s[3] / k});
          }
        if (s[0] % (k * k) == 0)  // and back
          for (bool residue : {true, false}) {
            int64_t n = s[0] / (k * k);
            Shape split{k, k, n, s[1], s[2], s[3]};
            std::vector<int64_t> perm = residue ? std::vector<int64_t>{2, 3, 4, 0, 5, 1} : std::vector<int64_t>{2, 3, 0, 4, 1, 5};
            make(split, perm, {n, s[1], s[2] * k, s[3] * k});
          }
      }
    return r;
  }

  /// Variants of an original compute op (its attributes; dense versions of dilated convs;
  /// the same conv without padding, for explicitly padded inputs).
  std::vector<Op> compute_variants(NodeId n) const {
    std::vector<Op> v{orig.node(n).op};
    if (const auto* c = std::get_if<ops::Conv>(&orig.node(n).op)) {
      bool dil = false, div = true, padded = false;
      for (size_t i = 0; i < c->dilations.size(); ++i) dil = dil || c->dilations[i] > 1;
      for (size_t i = 0; i < c->pads.size(); ++i) {
        padded = padded || c->pads[i];
        div = div && c->pads[i] % c->dilations[i % c->dilations.size()] == 0;
      }
      if (dil && div) {
        ops::Conv d = *c;
        for (size_t i = 0; i < d.pads.size(); ++i) d.pads[i] /= c->dilations[i % c->dilations.size()];
        d.dilations.assign(c->dilations.size(), 1);
        v.push_back(d);
      }
      if (padded) {
        ops::Conv z = *c;
        z.pads.assign(c->pads.size(), 0);
        v.push_back(z);
      }
    }
    return v;
  }

  void dfs(int depth) {
    if (out_of_budget()) return;
    // A chain: every data op reads the previous data op's output (the first one reads an
    // original input); ops on weights only form a prelude before the chain.
    const int last = last_chain();
    const bool in_prelude = last < 0;
    std::vector<int> prev;
    for (size_t i = 0; i < vals.size(); ++i)
      if (last >= 0 && vals[i].step == last) prev.push_back(int(i));
    auto allowed = [&](const std::vector<int>& in) {
      bool reads_prev = false, reads_data_leaf = false, weights_only = true;
      for (int i : in) {
        const Val& v = vals[size_t(i)];
        reads_prev = reads_prev || (last >= 0 && v.step == last);
        reads_data_leaf = reads_data_leaf || (v.step < 0 && !v.weight);
        weights_only = weights_only && (v.weight || (v.step >= 0 && steps[size_t(v.step)].prelude));
      }
      if (weights_only) return in_prelude;
      return in_prelude ? reads_data_leaf : reads_prev;
    };
    std::vector<int> data;  // candidate data operands
    for (size_t i = 0; i < vals.size(); ++i)
      if (in_prelude ? (vals[i].step < 0 && !vals[i].weight) : vals[i].step == last) data.push_back(int(i));
    const bool prelude = in_prelude;

    // try_op grows `vals` (and shrinks it back): a reference into it does not survive a call
    // (the shapes below are copies; references were read after reallocation, found by
    // difftest --optimize under AddressSanitizer).
    // 1. R/T moves on a data value (never on an R/T output).
    for (int x : data) {
      const Val& v = vals[size_t(x)];
      if (v.step >= 0 && std::holds_alternative<ops::RT>(steps[size_t(v.step)].op)) continue;
      if (v.type.shape.size() > 4 || !allowed({x})) continue;
      const Shape shape = v.type.shape;
      for (auto& rt : rt_moves(shape))
        if (rt.out_shape != shape || !is_identity(rt)) try_op(rt, {x}, depth);
    }
    // 2. Compute ops: an original conv / matmul with an operand from the search; each
    //    original compute op is used at most once (mutants do its work, not more).
    for (NodeId n : compute) {
      const Node& node = orig.node(n);
      bool used = false;
      for (const auto& st : steps) used = used || st.source == n;
      if (used) continue;
      for (const Op& op : compute_variants(n)) {
        // operand 0: a data value; operand 1.. : the original weights or a previous concat of them
        for (int x : data) {
          std::vector<std::vector<int>> choices{{x}};
          for (size_t i = 1; i < node.inputs.size(); ++i) {
            std::vector<std::vector<int>> next;
            std::vector<int> cands;
            for (size_t j = 0; j < vals.size(); ++j) {
              const Val& v = vals[j];
              bool original_weight = v.leaf == node.inputs[i];
              bool derived_weight = v.step >= 0 && steps[size_t(v.step)].prelude;
              if (original_weight || derived_weight) cands.push_back(int(j));
            }
            for (const auto& c : choices)
              for (int w : cands) {
                auto e = c;
                e.push_back(w);
                next.push_back(e);
              }
            choices = next;
          }
          for (auto& in : choices)
            if (allowed(in)) try_op(op, in, depth, n);
        }
      }
    }
    // 3. Concats of original weights of equal shape (prelude only): every axis, in order.
    if (prelude) {
      std::map<Shape, std::vector<int>> by_shape;
      for (int v : leaf_vals)
        if (vals[size_t(v)].weight) by_shape[vals[size_t(v)].type.shape].push_back(v);
      std::vector<std::vector<int>> groups;
      for (auto& [s, vs] : by_shape)
        if (vs.size() >= 2) groups.push_back(vs);
      // weights that differ along one axis only (e.g. 192 and 160 filters)
      std::vector<int> ws;
      for (int v : leaf_vals)
        if (vals[size_t(v)].weight) ws.push_back(v);
      for (size_t i = 0; i < ws.size(); ++i)
        for (size_t j = i + 1; j < ws.size(); ++j) {
          const Shape &a = vals[size_t(ws[i])].type.shape, &b = vals[size_t(ws[j])].type.shape;
          int diff = 0;
          for (size_t d = 0; a.size() == b.size() && d < a.size(); ++d) diff += a[d] != b[d];
          if (a.size() == b.size() && diff == 1) groups.push_back({ws[i], ws[j]});
        }
      for (const auto& g : groups) {
        bool fresh = true;  // each weight group is concatenated once per program
        for (const auto& s : steps)
          if (std::holds_alternative<ops::Concat>(s.op) && s.in == g) fresh = false;
        if (!fresh) continue;
        for (int64_t axis = 0; axis < int64_t(vals[size_t(g[0])].type.shape.size()); ++axis) try_op(ops::Concat{.axis = axis}, g, depth);
      }
    }
    // 4. Splits of the previous output into the original outputs' sizes along one axis.
    if (out_types.size() > 1)
      for (int x : prev) {
        const Shape s = vals[size_t(x)].type.shape;
        for (size_t axis = 0; axis < s.size(); ++axis) {
          std::vector<int64_t> sizes;
          bool ok = true;
          for (const auto& t : out_types) {
            ok = ok && t.shape.size() == s.size();
            for (size_t d = 0; ok && d < s.size(); ++d) ok = d == axis || t.shape[d] == s[d];
            if (ok) sizes.push_back(t.shape[axis]);
          }
          if (ok) try_op(ops::Split{.axis = int64_t(axis), .split = sizes, .num_outputs = int(sizes.size())}, {x}, depth);
        }
      }
    // 5. Explicit padding by an original conv's pads; slicing back to the output shape.
    for (int x : data) {
      const Shape s = vals[size_t(x)].type.shape;
      if (!allowed({x})) continue;
      for (NodeId n : compute)
        if (const auto* c = std::get_if<ops::Conv>(&orig.node(n).op); c && s.size() == c->pads.size() / 2 + 2) {
          const size_t k = c->pads.size() / 2;
          std::vector<int64_t> pads(2 * s.size(), 0);
          bool any = false;
          for (size_t i = 0; i < k; ++i) pads[2 + i] = c->pads[i], pads[s.size() + 2 + i] = c->pads[i + k], any = any || c->pads[i] || c->pads[i + k];
          if (any) try_op(ops::Pad{.pads = pads}, {x}, depth);
        }
    }
    for (int x : prev)
      if (out_types.size() == 1) {
        const Shape &s = vals[size_t(x)].type.shape, &o = out_types[0].shape;
        bool bigger = s.size() == o.size() && s != o;
        for (size_t d = 0; bigger && d < s.size(); ++d) bigger = s[d] >= o[d];
        if (bigger) {
          ops::Slice sl;
          for (size_t d = 0; d < s.size(); ++d)
            if (s[d] != o[d]) sl.starts.push_back(0), sl.ends.push_back(o[d]), sl.axes.push_back(int64_t(d));
          try_op(sl, {x}, depth);
        }
      }
  }
};

}  // namespace

GeneratorResult generate(const Graph& original, const GeneratorOptions& opt) {
  Search s(original, opt);
  for (s.depth_limit = 1; s.depth_limit <= opt.depth && !s.stop; ++s.depth_limit) s.dfs(0);
  if (!s.stop) s.res.stop_reason = cat("search space exhausted at depth ", opt.depth);
  s.res.seconds = std::chrono::duration<double>(Clock::now() - s.t0).count();
  return std::move(s.res);
}

}  // namespace pet::mutate
