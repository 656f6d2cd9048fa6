// Graph edits (use lists, replace-all-uses, erase, compact), the pass pipeline (order,
// disabling, printing, errors) and every built-in pass: what it rewrites, what it must leave
// alone, and that the rewritten program computes what the original computes.
#include "op_testing.hpp"
#include <map>

#include "pet/transform/pass.hpp"
#include "pet/transform/rebind.hpp"

using namespace pet;
using namespace pet::testing;

namespace {

Tensor<float> rand_t(const Shape& s, Rng& rng, float lo = -1, float hi = 1) {
  Tensor<float> t(s);
  for (int64_t i = 0; i < t.size(); ++i) t[i] = float(rng.uniform(lo, hi));
  return t;
}

/// Runs g and h (same inputs) on the reference interpreter; outputs must agree.
void same_results(const Graph& g, const Graph& h, uint64_t seed, double tol = 1e-5) {
  REQUIRE(g.inputs().size() == h.inputs().size());
  REQUIRE(g.outputs().size() == h.outputs().size());
  Rng rng(seed);
  std::vector<Value<float>> in;
  for (TensorId t : g.inputs()) in.push_back(random_inputs({g.type(t)}, rng, {})[0]);
  auto a = Interpreter<float>(g).run(in), b = Interpreter<float>(h).run(in);
  for (size_t k = 0; k < a.size(); ++k) {
    const auto& x = std::get<Tensor<float>>(a[k]);
    const auto& y = std::get<Tensor<float>>(b[k]);
    REQUIRE(x.shape() == y.shape());
    double err = 0, mx = 0;
    for (int64_t i = 0; i < x.size(); ++i) err = std::max(err, double(std::abs(x[i] - y[i]))), mx = std::max(mx, double(std::abs(x[i])));
    CHECK(err <= tol * (1 + mx));
  }
  for (size_t k = 0; k < g.outputs().size(); ++k) CHECK(g.tensor(g.outputs()[k]).name == h.tensor(h.outputs()[k]).name);
}

int count_op(const Graph& g, std::string_view name) {
  int n = 0;
  for (NodeId i : g.topo_order()) n += op_name(g.node(i).op) == name;
  return n;
}

transform::PassStats run_pass(Graph& g, const std::string& name) {
  auto r = transform::Pipeline({name}).run(g);
  return r[0].stats;
}

}  // namespace

TEST_CASE("graph edits: use lists follow every edit, erase refuses a read node, compact renumbers") {
  Graph g;
  Builder b(g);
  TensorId x = b.input("x", {2, 3});
  TensorId r = b.add(ops::Relu{}, {x}, "r");
  TensorId n1 = b.add(ops::Neg{}, {r}, "n1");
  TensorId s = b.add(ops::Add{}, {n1, r}, "s");
  b.output(s);
  CHECK(g.uses(r).size() == 2);
  CHECK(g.uses(x).size() == 1);
  CHECK(g.is_output(s));
  CHECK_THROWS_AS(g.erase_node(0), InternalError);  // r is still read
  // Bypass the Neg: s reads r twice.
  CHECK(g.replace_all_uses(n1, r) == 1);
  CHECK(g.uses(r).size() == 3);  // the Neg still reads it
  CHECK(g.uses(n1).empty());
  g.erase_node(g.tensor(n1).producer);
  CHECK(g.uses(r).size() == 2);
  CHECK(g.erased(1));
  CHECK(g.topo_order() == std::vector<NodeId>{0, 2});
  CHECK_THROWS_AS(g.replace_all_uses(r, b.input("y", {3, 2})), InternalError);  // types differ
  auto map = g.compact();
  CHECK(g.num_nodes() == 2);
  CHECK(map[size_t(n1)] == -1);
  CHECK(g.tensor(g.outputs()[0]).name == "s");
  CHECK(g.uses(g.inputs()[0]).size() == 1);
  // set_input moves one use
  Graph h;
  Builder c(h);
  TensorId a = c.input("a", {4}), bb = c.input("b", {4});
  TensorId m = c.add(ops::Mul{}, {a, a});
  c.output(m);
  h.set_input(0, 1, bb);
  CHECK(h.node(0).inputs == std::vector<TensorId>{a, bb});
  CHECK(h.uses(a).size() == 1);
  CHECK(h.uses(bb).size() == 1);
}

TEST_CASE("pipeline: passes in order, left out by name, graphs printed after a pass, unknown names refused") {
  Rng rng(1);
  Graph g;
  Builder b(g);
  TensorId x = b.input("x", {1, 3, 6, 6});
  TensorId c = b.constant("c", rand_t({3}, rng));
  TensorId c2 = b.add(ops::Mul{}, {c, b.constant("two", Tensor<float>({}, 2.f))});  // constant: folds
  TensorId y = b.add(ops::Add{}, {x, b.add(ops::Reshape{.shape = {3, 1, 1}}, {c2})});
  b.add(ops::Relu{}, {y});  // dead
  b.output(y);
  const Graph orig = g;
  std::string printed;
  transform::PipelineOptions po;
  po.print_after = {"constant-folding"};
  po.log = [&](const std::string& s) { printed += s; };
  auto rec = transform::Pipeline({"constant-folding", "dead-code"}).run(g, po);
  REQUIRE(rec.size() == 2);
  CHECK(rec[0].stats.changed == 2);  // Mul and Reshape of constants
  CHECK(rec[1].stats.changed == 1);  // the Relu
  CHECK(printed.find("// after constant-folding: 2 changed") != std::string::npos);
  CHECK(printed.find("Relu") != std::string::npos);  // printed before dead-code ran
  CHECK(g.num_nodes() == 1);
  same_results(orig, g, 2);

  Graph h = orig;
  po.disabled = {"constant-folding"};
  po.print_after.clear();
  rec = transform::Pipeline({"constant-folding", "dead-code"}).run(h, po);
  CHECK(rec[0].skipped);
  CHECK(h.num_nodes() == 3);
  po.disabled = {"no-such-pass"};
  CHECK_THROWS_WITH_AS(transform::Pipeline({"dead-code"}).run(h, po),
                       "--disable-pass: no pass named 'no-such-pass' in this pipeline (it has [dead-code])", InvalidInput);
  CHECK_THROWS_AS(transform::make_pass("constant-fold"), InvalidInput);
  CHECK(transform::pass_catalog().size() == 11);
  CHECK(transform::pass_list("a,b,,c") == std::set<std::string, std::less<>>{"a", "b", "c"});
}

TEST_CASE("einsum-lowering: MatMul forms become ReduceSum / Transpose / Reshape / MatMul, diagonals strided Slices, a broadcast summed label stays an Einsum") {
  auto count = [](const Graph& g, auto pred) {
    int n = 0;
    for (const Node& node : g.nodes()) n += pred(node.op);
    return n;
  };
  const std::map<std::string, std::vector<Shape>> cases = {
      {"bhid,bhjd->bhij", {{2, 3, 4, 8}, {2, 3, 5, 8}}},
      {"ij,jk", {{3, 4}, {4, 2}}},
      {"bn,anm,bm->ba", {{2, 3}, {4, 3, 5}, {2, 5}}},
      {"ijk->kj", {{2, 3, 4}}},
      {"i,i", {{5}, {5}}},
      // diagonals: a trace, a batched trace, a diagonal kept, dims apart, three of one label,
      // two repeated labels, a diagonal then a contraction, extent 1
      {"ii->i", {{4, 4}}},
      {"ii", {{4, 4}}},
      {"bii->b", {{3, 5, 5}}},
      {"ibi->bi", {{4, 3, 4}}},
      {"iii->i", {{3, 3, 3}}},
      {"iijj->ij", {{2, 2, 3, 3}}},
      {"bii,bi->b", {{2, 4, 4}, {2, 4}}},
      {"ii->i ", {{1, 1}}},
      {"...i,...i->...", {{2, 1, 4}, {3, 4}}},  // broadcast batch dims kept: maps
      {"...i,...i->i", {{2, 1, 4}, {3, 4}}},     // a summed (ellipsis) label of extents 1 and 3: left to the reference kernel
  };
  for (const auto& [eq, shapes] : cases) {
    CAPTURE(eq);
    Graph g;
    Builder b(g);
    std::vector<TensorId> in;
    for (size_t k = 0; k < shapes.size(); ++k) in.push_back(b.input(cat("x", k), shapes[k]));
    std::string e = eq;
    if (e.back() == ' ') e.pop_back();
    b.output(b.add(ops::Einsum{.equation = e}, in, "einsum"));
    const Graph orig = g;
    auto rec = transform::Pipeline({"einsum-lowering", "dead-code"}).run(g);
    const bool left = e == "...i,...i->i";
    CHECK(rec[0].stats.changed == (left ? 0 : 1));
    CHECK(count(g, [](const Op& op) { return std::holds_alternative<ops::Einsum>(op); }) == (left ? 1 : 0));
    if (e.find("ii") != std::string::npos)
      CHECK(count(g, [](const Op& op) { return std::holds_alternative<ops::Slice>(op); }) >= 1);
    if (e == "bhid,bhjd->bhij" || e == "ij,jk" || e == "bn,anm,bm->ba" || e == "bii,bi->b")
      CHECK(count(g, [](const Op& op) { return std::holds_alternative<ops::MatMul>(op); }) == int(in.size()) - 1);
    CHECK(g.tensor(g.outputs()[0]).name == orig.tensor(orig.outputs()[0]).name);
    same_results(orig, g, 3);
  }
}

TEST_CASE("constant-folding keeps output names and skips results much larger than their inputs") {
  Graph g;
  Builder b(g);
  TensorId c = b.constant("c", Tensor<float>({1}, 1.f));
  TensorId big = b.add(ops::Expand{.shape = {1024, 512}}, {c}, "big");   // 1 -> 2^19 elements: kept
  TensorId mask = b.add(ops::Expand{.shape = {400, 400}}, {c}, "mask");  // 160,000 (under 2^18): folded
  TensorId n = b.add(ops::Neg{}, {c}, "negated");                      // folded, keeps its name
  b.output(big);
  b.output(n);
  b.output(mask);
  auto s = run_pass(g, "constant-folding");
  CHECK(s.changed == 2);
  CHECK(count_op(g, "Expand") == 1);
  CHECK(g.tensor(g.outputs()[2]).is_constant());
  CHECK(g.tensor(g.outputs()[1]).name == "negated");
  CHECK(g.tensor(g.outputs()[1]).is_constant());
}

TEST_CASE("bn-folding and pad-folding: folded when safe, left alone otherwise, same results") {
  Rng rng(3);
  auto conv_bn = [&](bool shared, bool input_var) {
    Graph g;
    Builder b(g);
    TensorId x = b.input("x", {2, 4, 7, 7});
    TensorId y = b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {x, b.constant("w", rand_t({6, 4, 3, 3}, rng)), b.constant("b", rand_t({6}, rng))});
    TensorId var = input_var ? b.input("var", {6}) : b.constant("var", rand_t({6}, rng, 0.5f, 2.f));
    TensorId z = b.add(ops::BatchNormalization{.epsilon = 1e-3f},
                       {y, b.constant("sc", rand_t({6}, rng)), b.constant("sh", rand_t({6}, rng)), b.constant("mu", rand_t({6}, rng)), var});
    b.output(z);
    if (shared) b.output(y);  // the conv's own result is read too: no folding
    return g;
  };
  Graph g = conv_bn(false, false), orig = g;
  CHECK(run_pass(g, "bn-folding").changed == 1);
  CHECK(count_op(g, "BatchNormalization") == 0);
  same_results(orig, g, 4, 1e-4);
  Graph s = conv_bn(true, false);
  CHECK(run_pass(s, "bn-folding").changed == 0);
  Graph v = conv_bn(false, true);
  CHECK(run_pass(v, "bn-folding").changed == 0);

  // A transposed conv's output channel is group x (C_out/G) + its weight's dim 1.
  for (int64_t group : {1, 3}) {
    Graph t;
    Builder b(t);
    TensorId x = b.input("x", {1, 6, 4, 5});
    TensorId y = b.add(ops::ConvTranspose{.strides = {2, 2}, .pads = {1, 0, 1, 0}, .group = group},
                       {x, b.constant("w", rand_t({6, 4, 3, 3}, rng)), b.constant("b", rand_t({4 * group}, rng))});
    b.output(b.add(ops::BatchNormalization{.epsilon = 1e-3f}, {y, b.constant("sc", rand_t({4 * group}, rng)), b.constant("sh", rand_t({4 * group}, rng)),
                                                                b.constant("mu", rand_t({4 * group}, rng)), b.constant("var", rand_t({4 * group}, rng, 0.5f, 2.f))}));
    Graph before = t;
    CHECK(run_pass(t, "bn-folding").changed == 1);
    CHECK(count_op(t, "BatchNormalization") == 0);
    same_results(before, t, 6 + uint64_t(group), 1e-4);
  }

  // variant 4: a pool's pads must stay smaller than its window (ONNX Runtime refuses to load
  // pools with pads as large as the window).
  for (int variant = 0; variant < 5; ++variant) {
    Graph p;
    Builder b(p);
    TensorId x = b.input("x", {1, 3, 6, 6});
    std::vector<int64_t> pads{0, 0, 1, 2, 0, 0, 2, 1};
    if (variant == 2) pads[1] = 1;  // a channel pad
    ops::Pad pad{.pads = pads};
    if (variant == 3) pad.value = 0.5;  // not zero
    TensorId y = b.add(pad, {x});
    if (variant == 1) b.output(b.add(ops::AveragePool{{.kernel_shape = {3, 3}}}, {y}));
    else if (variant == 4) b.output(b.add(ops::AveragePool{{.kernel_shape = {2, 3}}}, {y}));
    else b.output(b.add(ops::Conv{}, {y, b.constant("w", rand_t({2, variant == 2 ? 4 : 3, 3, 3}, rng))}));
    Graph before = p;
    CHECK(run_pass(p, "pad-folding").changed == (variant < 2 ? 1 : 0));
    same_results(before, p, 5 + uint64_t(variant));
  }
}

TEST_CASE("channel-scale-folding: a per-channel scale of a conv's input moves onto smaller weights, same results, left alone otherwise") {
  Rng rng(31);
  struct Case {
    Shape x, s, w;
    int64_t group = 1;
    bool swap = false, const_s = false, read_twice = false;
    bool folds;
  };
  const std::vector<Case> cases{
      {{1, 8, 10, 10}, {1, 8, 1, 1}, {4, 8, 1, 1}, 1, false, false, false, true},   // squeeze-and-excitation: 64 weights, 800 values
      {{1, 8, 10, 10}, {8, 1, 1}, {4, 8, 3, 3}, 1, true, false, false, true},       // 3x3 with zero pads, s of rank 3, s * x
      {{2, 8, 10, 10}, {1, 8, 1, 1}, {4, 8, 1, 1}, 1, false, false, false, true},   // one scale for the whole batch
      {{1, 6, 20}, {1, 6, 1}, {3, 6, 2}, 1, false, false, false, true},             // 1-D
      {{1, 8, 10, 10}, {1, 1, 1, 1}, {4, 8, 1, 1}, 1, false, false, false, true},   // one scale for every channel
      {{1, 8, 10, 10}, {1, 8, 1, 1}, {64, 8, 1, 1}, 1, false, false, false, false}, // weights larger than half of x
      {{1, 8, 10, 10}, {1, 8, 1, 1}, {64, 8, 1, 1}, 1, false, true, false, true},   // ... but s and W constants: folded
      {{2, 8, 10, 10}, {2, 8, 1, 1}, {4, 8, 1, 1}, 1, false, false, false, false},  // a scale per sample
      {{1, 8, 10, 10}, {1, 8, 10, 1}, {4, 8, 1, 1}, 1, false, false, false, false}, // not per channel
      {{1, 8, 10, 10}, {1, 8, 1, 1}, {4, 4, 1, 1}, 2, false, false, false, false},  // grouped
      {{1, 8, 10, 10}, {1, 8, 1, 1}, {4, 8, 1, 1}, 1, false, false, true, false},   // the scaled x is read again
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    CAPTURE(c);
    const Case& k = cases[c];
    Graph g;
    Builder b(g);
    TensorId x = b.add(ops::Relu{}, {b.input("x", k.x)});
    TensorId s = k.const_s ? b.constant("s", rand_t(k.s, rng)) : b.add(ops::Sigmoid{}, {b.input("s", k.s)});
    TensorId y = b.add(ops::Mul{}, k.swap ? std::vector{s, x} : std::vector{x, s});
    ops::Conv conv{.pads = std::vector<int64_t>(2 * (k.x.size() - 2), 1), .group = k.group};
    b.output(b.add(conv, {y, b.constant("w", rand_t(k.w, rng)), b.constant("b", rand_t({k.w[0]}, rng))}));
    if (k.read_twice) b.output(b.add(ops::Neg{}, {y}));
    Graph before = g;
    CHECK(run_pass(g, "channel-scale-folding").changed == (k.folds ? 1 : 0));
    // folded: the conv reads x; the Mul (if any is left) reads the weights
    for (NodeId n : g.topo_order())
      if (std::holds_alternative<ops::Conv>(g.node(n).op))
        CHECK((g.tensor(g.node(n).inputs[0]).producer >= 0 && std::holds_alternative<ops::Relu>(g.node(g.tensor(g.node(n).inputs[0]).producer).op)) ==
              k.folds);
    CHECK(count_op(g, "Mul") == (k.folds && k.const_s ? 0 : 1));
    same_results(before, g, 40 + c, 1e-5);
  }
}

TEST_CASE("pad-folding drops a conv's end padding that no window reads, and only that") {
  Rng rng(9);
  struct Case {
    Shape x;
    int64_t k;
    ops::Conv conv;
    std::vector<int64_t> pads_after;  // the conv's pads after the pass
  };
  std::vector<Case> cases{
      // 1x1, stride 2 over 11 rows: the last window reads row 10, the end pad row 11 is unread
      {{1, 3, 11, 2}, 1, ops::Conv{.strides = {2, 1}, .pads = {0, 0, 1, 1}}, {0, 0, 0, 1}},
      // 3x3, stride 2 over 12: windows start at -1, 1, ..., 9 and end at 11: the end pad unread
      {{1, 3, 12, 12}, 3, ops::Conv{.strides = {2, 2}, .pads = {1, 1, 1, 1}}, {1, 1, 0, 0}},
      // 3x3, stride 2 over 11: the last window (9..11) reads the end pad: kept
      {{1, 3, 11, 11}, 3, ops::Conv{.strides = {2, 2}, .pads = {1, 1, 1, 1}}, {1, 1, 1, 1}},
      // 3-D, kernel 2: depth 9, stride 3, dilation 2 reads rows 0-8 (end pad 2 -> 0); height 5,
      // stride 1 reads its end pad (1 stays); width 8, stride 3, dilation 2 reads up to 8 (3 -> 1)
      {{1, 2, 9, 5, 8}, 2, ops::Conv{.strides = {3, 1, 3}, .pads = {0, 0, 0, 2, 1, 3}, .dilations = {2, 1, 2}}, {0, 0, 0, 0, 1, 1}},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    CAPTURE(c);
    const Case& k = cases[c];
    Graph g;
    Builder b(g);
    TensorId x = b.input("x", k.x);
    Shape w{4, k.x[1]};
    for (size_t i = 2; i < k.x.size(); ++i) w.push_back(k.k);
    TensorId y = b.add(k.conv, {b.add(ops::Relu{}, {x}), b.constant("w", rand_t(w, rng)), b.constant("b", rand_t({4}, rng))}, "conv");
    b.output(y);
    Graph before = g;
    const bool trimmed = k.pads_after != k.conv.pads;
    CHECK(run_pass(g, "pad-folding").changed == (trimmed ? 1 : 0));
    for (NodeId n : g.topo_order())
      if (const auto* cv = std::get_if<ops::Conv>(&g.node(n).op)) CHECK(cv->pads == k.pads_after);
    CHECK(g.type(g.outputs()[0]).shape == before.type(before.outputs()[0]).shape);
    same_results(before, g, 20 + c);
  }
}

TEST_CASE("layer-norm- and gelu-canonicalization: PyTorch's decomposed forms become one op") {
  Rng rng(7);
  for (int form = 0; form < 3; ++form) {
    Graph g;
    Builder b(g);
    TensorId x = b.input("x", {2, 5, 8});
    TensorId m = b.add(ops::ReduceMean{{.axes = {-1}, .keepdims = true}}, {x});
    TensorId d = b.add(ops::Sub{}, {x, m});
    TensorId v = b.add(ops::ReduceMean{{.axes = {2}, .keepdims = true}}, {b.add(ops::Pow{}, {d, b.constant("two", Tensor<float>({}, 2.f))})});
    TensorId sd = b.add(ops::Sqrt{}, {b.add(ops::Add{}, {v, b.constant("eps", Tensor<float>({}, 1e-5f))})});
    TensorId y = b.add(ops::Div{}, {d, sd}, "normalized");
    if (form >= 1) y = b.add(ops::Mul{}, {y, b.constant("gamma", rand_t({8}, rng))}, "scaled");
    if (form >= 2) y = b.add(ops::Add{}, {b.constant("beta", rand_t({8}, rng)), y}, "shifted");
    b.output(y);
    Graph orig = g;
    CHECK(run_pass(g, "layer-norm-canonicalization").changed == 1);
    CHECK(count_op(g, "LayerNormalization") == 1);
    CHECK(g.num_nodes() == 1);
    same_results(orig, g, 8, 1e-4);
  }
  {  // d read elsewhere too: not a layer norm to rewrite
    Graph g;
    Builder b(g);
    TensorId x = b.input("x", {3, 4});
    TensorId d = b.add(ops::Sub{}, {x, b.add(ops::ReduceMean{{.axes = {1}, .keepdims = true}}, {x})});
    TensorId v = b.add(ops::ReduceMean{{.axes = {1}, .keepdims = true}}, {b.add(ops::Pow{}, {d, b.constant("two", Tensor<float>({}, 2.f))})});
    b.output(b.add(ops::Div{}, {d, b.add(ops::Sqrt{}, {b.add(ops::Add{}, {v, b.constant("eps", Tensor<float>({}, 1e-5f))})})}));
    b.output(d);
    CHECK(run_pass(g, "layer-norm-canonicalization").changed == 0);
  }
  for (bool by_mul : {false, true}) {
    Graph g;
    Builder b(g);
    TensorId x = b.add(ops::MatMul{}, {b.input("x", {4, 6}), b.constant("w", rand_t({6, 5}, rng))});
    TensorId a = by_mul ? b.add(ops::Mul{}, {x, b.constant("r", Tensor<float>({}, 0.70710678f))})
                        : b.add(ops::Div{}, {x, b.constant("s", Tensor<float>({}, 1.41421356f))});
    TensorId e = b.add(ops::Add{}, {b.add(ops::Erf{}, {a}), b.constant("one", Tensor<float>({}, 1.f))});
    b.output(b.add(ops::Mul{}, {b.add(ops::Mul{}, {x, e}), b.constant("half", Tensor<float>({}, 0.5f))}, "gelu_out"));
    Graph orig = g;
    CHECK(run_pass(g, "gelu-canonicalization").changed == 1);
    CHECK(count_op(g, "Gelu") == 1);
    CHECK(g.num_nodes() == 2);
    same_results(orig, g, 9, 1e-5);
  }
}

TEST_CASE("rt-folding and conv-merging keep results") {
  Rng rng(11);
  {
    Graph g;
    Builder b(g);
    TensorId x = b.input("x", {2, 3, 4});
    TensorId r = b.add(ops::Reshape{.shape = {6, 4}}, {x});
    TensorId t = b.add(ops::Transpose{.perm = {1, 0}}, {r});
    b.output(b.add(ops::Reshape{.shape = {2, 2, 6}}, {t}));
    Graph orig = g;
    CHECK(run_pass(g, "rt-folding").changed >= 2);
    CHECK(g.num_nodes() == 1);
    CHECK(count_op(g, "PetRT") == 1);
    same_results(orig, g, 12);
  }
  {
    Graph g;
    Builder b(g);
    TensorId w = b.constant("w", rand_t({4, 3, 3, 3}, rng));
    TensorId a = b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {b.input("a", {1, 3, 6, 6}), w});
    TensorId c = b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {b.input("c", {1, 3, 6, 6}), w});
    b.output(a);
    b.output(c);
    Graph orig = g;
    CHECK(run_pass(g, "conv-merging").changed == 1);
    CHECK(count_op(g, "Conv") == 1);
    same_results(orig, g, 13);
  }
}

TEST_CASE("Gelu: formula, shapes, ONNX-style float-only") {
  check_op(ops::Gelu{}, {f32({3, 7})}, 1401);
  CHECK(out_shape(ops::Gelu{}, {f32({2, 3})}) == Shape{2, 3});
  CHECK_THROWS_WITH_AS(infer(ops::Gelu{}, {i64({2})}), "Gelu 'n': input must be float32, got int64", InvalidInput);
  auto [op, out] = resolve(ops::Gelu{}, {f32({3})});
  std::vector<Value<float>> in{Tensor<float>({3}, {-1.f, 0.f, 2.f})};
  auto y = std::get<Tensor<float>>(evaluate_op<float>(op, in, out)[0]);
  CHECK(y[0] == doctest::Approx(-0.158655254).epsilon(1e-6));
  CHECK(y[1] == 0.f);
  CHECK(y[2] == doctest::Approx(1.954499736).epsilon(1e-6));
}

TEST_CASE("gather-to-slice: constant, evenly stepping indices become a strided Slice (and Reshape), others stay Gathers") {
  struct Case {
    std::vector<int64_t> idx_shape, idx;
    int64_t axis;
    bool rewritten;
  };
  for (const Case& c : std::vector<Case>{{{}, {1}, 0, true},               // qkv[1]
                                         {{}, {-1}, 2, true},              // the last, by a negative index
                                         {{3}, {0, 2, 4}, 2, true},        // step 2
                                         {{2}, {4, 1}, 2, true},           // step -3, down to index 1
                                         {{3}, {4, 3, 2}, 2, true},        // reversed, down to index 2
                                         {{3}, {2, 1, 0}, 2, true},        // reversed down to 0 (end before the start)
                                         {{2, 2}, {0, 1, 2, 3}, 2, true},  // 2-D indices: a Reshape after the Slice
                                         {{3}, {0, 1, 3}, 2, false},       // uneven
                                         {{2}, {1, 1}, 2, false},          // repeated (step 0)
                                         {{1}, {5}, 2, false}}) {          // out of range: the run reports it
    CAPTURE(c.idx);
    CAPTURE(c.axis);
    Graph g;
    Builder b(g);
    TensorId x = b.input("x", {3, 2, 5});
    TensorId i = g.add_constant("i", DType::Int64, Tensor<int64_t>(Shape(c.idx_shape), c.idx));
    b.output(b.add(ops::Gather{.axis = c.axis}, {x, i}, "y"));
    Graph orig = g;
    auto s = run_pass(g, "gather-to-slice");
    CHECK(s.changed == int(c.rewritten));
    CHECK(count_op(g, "Gather") == int(!c.rewritten));
    if (c.rewritten) {
      CHECK(count_op(g, "Slice") == 1);
      same_results(orig, g, 7, 0);
    }
  }
}

TEST_CASE("dead-code drops a Dropout mask nobody reads (the data output becomes a plain view), keeps one that is read") {
  for (bool mask_read : {false, true}) {
    CAPTURE(mask_read);
    Graph g;
    Builder b(g);
    TensorId x = b.input("x", {2, 3});
    auto outs = b.add_multi(ops::Dropout{.ratio = 0.f, .training_mode = true, .num_outputs = 2}, {x}, "drop");
    b.output(b.add(ops::Relu{}, {outs[0]}, "y"));
    if (mask_read) b.output(outs[1]);
    Graph orig = g;
    auto s = run_pass(g, "dead-code");
    CHECK(s.changed == int(!mask_read));
    for (NodeId n : g.topo_order())
      if (const auto* d = std::get_if<ops::Dropout>(&g.node(n).op)) CHECK(d->num_outputs == (mask_read ? 2 : 1));
    CHECK(g.tensor(g.outputs()[0]).name == "y");
    if (!mask_read) same_results(orig, g, 3, 0);
  }
}

TEST_CASE("rebind: a program at other input shapes, extents following the inputs where that is well defined, otherwise refused") {
  using transform::follow_reshape;
  // the same extent at the same position after dims of the same size (ONNX's 0)
  CHECK(follow_reshape({1, 96, 28, 28}, {3, 96, 28, 28}, {1, 96, 14, 2, 14, 2}) == Shape{3, 96, 14, 2, 14, 2});
  // a dim of size 1 joins the outermost target dim that can hold it (a dense conv's phases and batch)
  CHECK(follow_reshape({2, 2, 1, 96, 14, 14}, {2, 2, 3, 96, 14, 14}, {4, 96, 14, 14}) == Shape{12, 96, 14, 14});
  // target dims splitting the changed dim: the one of size 1 grows
  CHECK(follow_reshape({4, 96, 14, 14}, {12, 96, 14, 14}, {2, 2, 1, 96, 14, 14}) == Shape{2, 2, 3, 96, 14, 14});
  // a larger dim has one place: inside a target dim, or as a dim of its own
  CHECK(follow_reshape({3, 4, 6}, {5, 4, 6}, {12, 6}) == Shape{20, 6});
  CHECK(follow_reshape({4, 2}, {4, 5}, {2, 2, 2}) == Shape{2, 2, 5});
  // mixed with other dims, or two dims changing in one target dim: no counterpart
  CHECK_FALSE(follow_reshape({2, 3}, {4, 3}, {3, 2}));
  CHECK_FALSE(follow_reshape({1, 1, 6}, {2, 2, 6}, {6}));
  CHECK_FALSE(follow_reshape({1, 96, 28, 28}, {1, 96, 3, 4}, {1, 96, 14, 2, 14, 2}));

  // A program with every op whose attributes spell out extents, built at batch n.
  auto program = [](int64_t n) {
    Graph g;
    Builder b(g);
    TensorId x = b.input("x", {n, 8, 4, 6});
    TensorId r = b.add(ops::Reshape{.shape = {n, 8, 24}}, {x});
    TensorId s = b.slice(r, 1, 0, 4);                                             // [n, 4, 24]: dim 0 whole
    TensorId e = b.add(ops::Expand{.shape = {n, 4, 24}}, {b.slice(s, 2, 0, 1)});  // [n, 4, 1] -> [n, 4, 24]
    TensorId p = b.add(ops::Patch{.offsets = {0, 0, 3}}, {s, b.slice(e, 2, 0, 5)});
    TensorId t = b.rt(p, {n, 4, 4, 6}, {0, 2, 1, 3}, {n * 4, 4, 6});
    b.output(b.add(ops::Relu{}, {t}));
    return g;
  };
  const Graph g1 = program(1), g3 = program(3);
  const Graph r3 = transform::rebind(g1, {{"x", {3, 8, 4, 6}}});
  REQUIRE(r3.num_nodes() == g3.num_nodes());
  for (NodeId n = 0; n < r3.num_nodes(); ++n) CHECK(r3.type(r3.node(n).outputs[0]) == g3.type(g3.node(n).outputs[0]));
  same_results(r3, g3, 5);
  same_results(transform::rebind(g1, {}), g1, 6);  // no new shapes: the same program

  // Refused, naming the node: extents that do not follow the batch.
  auto refuses = [](auto build, const std::string& what) {
    Graph g;
    Builder b(g);
    b.output(build(b, b.input("x", {2, 4})));
    CHECK_THROWS_WITH_AS(transform::rebind(g, {{"x", {5, 4}}}), doctest::Contains(what.c_str()), Unsupported);
  };
  refuses([](Builder& b, TensorId x) { return b.split(x, 0, {1, 1})[0]; }, "splits dim 0");
  refuses([](Builder& b, TensorId x) { return b.slice(x, 0, 0, 1); }, "takes part of dim 0");
  refuses([](Builder& b, TensorId x) { return b.add(ops::Expand{.shape = {2, 2, 4}}, {b.slice(x, 0, 0, 1)}); }, "takes part of dim 0");
  refuses([](Builder& b, TensorId x) { return b.add(ops::Patch{.offsets = {1, 0}}, {x, b.slice(x, 0, 0, 1)}); }, "takes part of dim 0");
  {  // a reshape that mixes the batch with another dim
    Graph g;
    Builder b(g);
    b.output(b.add(ops::Reshape{.shape = {3, 2}}, {b.input("x", {2, 3})}));
    CHECK_THROWS_WITH_AS(transform::rebind(g, {{"x", {4, 3}}}), doctest::Contains("shape [3,2] of [2,3] has no counterpart for [4,3]"), Unsupported);
  }
  {  // a broadcast of a dim that grows
    Graph g;
    Builder b(g);
    b.output(b.add(ops::Expand{.shape = {3, 4}}, {b.input("x", {1, 4})}));
    CHECK_THROWS_WITH_AS(transform::rebind(g, {{"x", {2, 4}}}), doctest::Contains("broadcasts dim 0"), Unsupported);
  }
  {  // a patch of part of a dim that grows
    Graph g;
    Builder b(g);
    TensorId x = b.input("x", {2, 4}), y = b.input("y", {2, 2});
    b.output(b.add(ops::Patch{.offsets = {0, 1}}, {x, y}));
    CHECK_NOTHROW(transform::rebind(g, {{"x", {5, 4}}, {"y", {5, 2}}}));
    CHECK_THROWS_WITH_AS(transform::rebind(g, {{"x", {5, 4}}}), doctest::Contains("change differently"), Unsupported);
    CHECK_THROWS_WITH_AS(transform::rebind(g, {{"y", {5, 2}}}), doctest::Contains("became"), Unsupported);
  }
}

TEST_CASE("rebind with a guide: what import folded at a batch of one (a Reshape target, a class token) is taken from the model there") {
  // As PyTorch's attention exports it: the batch moves behind the sequence, tokens and batch
  // merge for a matrix product, and split again; a class token expanded to the batch (import
  // folds the Expand into a constant). Built at batch n, with the same names at every n.
  // (`twisted`: the split back through a dim of 1 before the last; `scale`: other token values)
  auto program = [](int64_t n, bool twisted = false, float scale = 0.25f) {
    Rng rng(3);
    Graph g;
    Builder b(g);
    TensorId x = b.input("x", {n, 4, 6});
    TensorId t = b.add(ops::Transpose{.perm = {1, 0, 2}}, {x});                        // [4, n, 6]
    TensorId m = b.add(ops::MatMul{}, {b.add(ops::Reshape{.shape = {4 * n, 6}}, {t}), b.constant("w", rand_t({6, 6}, rng))});
    TensorId split = twisted ? b.add(ops::Reshape{.shape = {4, n, 6}}, {b.add(ops::Reshape{.shape = {4, 6, n}}, {m})})
                             : b.add(ops::Reshape{.shape = {4, n, 6}}, {m});
    TensorId back = b.add(ops::Transpose{.perm = {1, 0, 2}}, {split});
    Tensor<float> cls({n, 1, 6});
    for (int64_t i = 0; i < cls.size(); ++i) cls.data()[i] = float(i % 6) * scale;  // the same token for every image
    b.output(b.concat({b.constant("cls", cls), b.add(ops::Add{}, {back, x})}, 1));
    return g;
  };
  const Graph g1 = program(1), g2 = program(2);
  // By the rules alone the second Reshape puts the grown dim where the batch of one is not.
  CHECK_THROWS_AS(transform::rebind(g1, {{"x", {2, 4, 6}}}), Unsupported);
  const Graph r2 = transform::rebind(g1, {{"x", {2, 4, 6}}}, {{&g1, &g2}});
  REQUIRE(r2.num_nodes() == g2.num_nodes());
  for (NodeId n = 0; n < r2.num_nodes(); ++n) CHECK(r2.type(r2.node(n).outputs[0]) == g2.type(g2.node(n).outputs[0]));
  same_results(r2, g2, 7);
  // Nodes the guide's base does not have as they are (other targets, other names) follow
  // the rules; a constant with other values than the base's is the program's own.
  const Graph twisted = program(1, true);
  CHECK_THROWS_AS(transform::rebind(twisted, {{"x", {2, 4, 6}}}, {{&g1, &g2}}), Unsupported);
  const Graph other_token = program(1, false, 0.5f);
  CHECK_THROWS_WITH_AS(transform::rebind(other_token, {{"x", {2, 4, 6}}}, {{&g1, &g2}}), doctest::Contains("Concat"), Unsupported);
  // Of two guides, the first that knows a node or constant says (one at other shapes, or with
  // other values, does not know it).
  same_results(transform::rebind(g1, {{"x", {2, 4, 6}}}, {{&other_token, &other_token}, {&g1, &g2}}), g2, 8);
  CHECK_THROWS_AS(transform::rebind(g1, {{"x", {2, 4, 6}}}, {{&g1, &g1}, {&g1, &g2}}), Unsupported);
}
