// The verifier: known pairs with known answers, box soundness by brute force (symbolic
// polynomials), Theorem 1 against exhaustive checking, Fp against float.
#include <set>

#include "pairs.hpp"
#include "pet/ir/builder.hpp"
#include "op_testing.hpp"
#include "pet/verify/verifier.hpp"
#include "poly.hpp"

using namespace pet;
using namespace pet::testing;
using lab::Poly;
using verify::Verdict;

namespace {

/// Positions (flat) where the two programs differ in float64 on random inputs and weights.
std::set<int64_t> float_differences(const lab::Pair& p, size_t output, uint64_t seed) {
  Rng rng(seed);
  std::vector<Value<double>> in;
  for (TensorId t : p.original.inputs()) in.push_back(lift_inputs<double>(random_inputs({p.original.type(t)}, rng, {}))[0]);
  auto a = Interpreter<double>(p.original).run(in);
  auto b = Interpreter<double>(p.mutant).run(in);
  const auto &ya = std::get<Tensor<double>>(a[output]), &yb = std::get<Tensor<double>>(b[output]);
  std::set<int64_t> d;
  for (int64_t i = 0; i < ya.size(); ++i)
    if (std::abs(ya[i] - yb[i]) > 1e-9 * (1 + std::abs(ya[i]))) d.insert(i);
  return d;
}

/// The correction region contains every differing position, and every box of it contains
/// one (it is no larger than needed at box granularity).
void check_region(const lab::Pair& p, const verify::Report& r) {
  for (size_t o = 0; o < r.outputs.size(); ++o) {
    const auto& out = r.outputs[o];
    auto diff = float_differences(p, o, 99);
    int64_t inside = 0;
    for (int64_t f : diff) {
      Index v = unflatten(f, out.shape);
      bool covered = false;
      for (const Box& b : out.correction) covered = covered || b.contains(v);
      INFO(p.name, ": differing position ", f, " is outside the correction region");
      CHECK(covered);
      inside += covered;
    }
    for (const auto& c : out.cells) {
      if (c.equal) continue;
      bool has = false;
      for (int64_t f : diff) has = has || c.box.contains(unflatten(f, out.shape));
      INFO(p.name, ": failing box ", to_string(c.box), " holds no differing position");
      CHECK(has);
    }
  }
}

std::set<int64_t> region_positions(const verify::OutputResult& out) {
  std::set<int64_t> s;
  for (const Box& b : out.correction) {
    Index v(b.rank());
    Shape ext;
    for (const auto& d : b.dims) ext.push_back(d.count());
    do {
      Index p(b.rank());
      for (int i = 0; i < b.rank(); ++i) p[i] = b.dims[size_t(i)].lo + v[i] * b.dims[size_t(i)].step;
      s.insert(flat_offset(p, out.shape));
    } while (next_index(v, ext));
  }
  return s;
}

}  // namespace

TEST_CASE("known pair: conv on a batch of 2 vs one conv over the images side by side") {
  lab::ConvSpec s{.n = 2, .c = 3, .h = 5, .w = 6, .f = 4};
  auto p = lab::conv_batch_to_width(s, 1);
  auto r = verify::verify(p.original, p.mutant);
  CHECK(verify::verdict_name(r.verdict) == "partially_equivalent");
  // Exactly the seam columns: image 0's last column and image 1's first.
  std::set<int64_t> expect;
  for (int64_t f = 0; f < 4; ++f)
    for (int64_t h = 0; h < 5; ++h) {
      expect.insert(flat_offset(Index{0, f, h, 5}, {2, 4, 5, 6}));
      expect.insert(flat_offset(Index{1, f, h, 0}, {2, 4, 5, 6}));
    }
  CHECK(region_positions(r.outputs[0]) == expect);
  CHECK(r.outputs[0].corrected_elements == 40);
  check_region(p, r);
}

TEST_CASE("known pair: dilation-2 conv vs parity regrouping with a dense conv") {
  lab::ConvSpec s{.n = 1, .c = 3, .h = 8, .w = 8, .f = 2, .k = 3, .pad = 2, .dil = 2};
  auto blocks = lab::dilated_to_dense(s, true, 2);
  auto r = verify::verify(blocks.original, blocks.mutant);
  CHECK(verify::verdict_name(r.verdict) == "partially_equivalent");
  std::set<int64_t> expect;  // rows 1 and H-2, columns 1 and W-2 (the block seams)
  for (int64_t f = 0; f < 2; ++f)
    for (int64_t h = 0; h < 8; ++h)
      for (int64_t w = 0; w < 8; ++w)
        if (h == 1 || h == 6 || w == 1 || w == 6) expect.insert(flat_offset(Index{0, f, h, w}, {1, 2, 8, 8}));
  CHECK(region_positions(r.outputs[0]) == expect);
  check_region(blocks, r);

  auto batch = lab::dilated_to_dense(s, false, 3);
  auto r2 = verify::verify(batch.original, batch.mutant);
  CHECK(verify::verdict_name(r2.verdict) == "equivalent");
  CHECK(r2.outputs[0].correction.empty());
  check_region(batch, r2);
}


TEST_CASE("large leaves are drawn lazily: the same values whatever is read first, and the known verdicts at batch 16") {
  // A lazy leaf equals the tensor of the same draws.
  Graph g;
  Builder b(g);
  TensorId x = b.input("x", {2, 3, 4});
  b.output(b.add(ops::Transpose{.perm = {2, 0, 1}}, {x}));
  Tensor<F31> t({2, 3, 4});
  for (int64_t i = 0; i < t.size(); ++i) t[i] = F31::raw(uint32_t(verify::leaf_hash(9, 0, uint64_t(i)) % 2147483647u));
  std::vector<verify::LazyLeaf<F31>> lazy(size_t(g.num_tensors()));
  lazy[size_t(x)] = [](int64_t i) { return F31::raw(uint32_t(verify::leaf_hash(9, 0, uint64_t(i)) % 2147483647u)); };
  std::vector<std::optional<Tensor<F31>>> none(size_t(g.num_tensors())), full(size_t(g.num_tensors()));
  full[size_t(x)] = t;
  verify::PointEvaluator<F31> el(g, none, lazy), ef(g, full);
  for (Index p : {Index{3, 1, 2}, Index{0, 0, 0}, Index{2, 1, 1}}) CHECK(el.at(g.outputs()[0], p) == ef.at(g.outputs()[0], p));
  CHECK(verify::leaf_hash(1, 2, 3) != verify::leaf_hash(1, 3, 2));
  CHECK(verify::leaf_key("w1") != verify::leaf_key("w2"));
  // A batch-16 ResNet layer (16 x 64 x 56 x 56 = 3.2 M input elements, drawn lazily) keeps its
  // verdicts: batch-to-width is partially equivalent at the seams, dilated-to-dense exact.
  auto p = lab::conv_batch_to_width(lab::ConvSpec{.n = 16, .c = 64, .h = 56, .w = 56, .f = 64}, 4);
  auto r = verify::verify(p.original, p.mutant);
  CHECK(verify::verdict_name(r.verdict) == "partially_equivalent");
  CHECK(r.outputs[0].corrected_elements == 16 * 64 * 56 * 2 - 64 * 56 * 2);  // the columns at the 15 seams, both sides
  auto d = lab::dilated_to_dense(lab::ConvSpec{.n = 16, .c = 64, .h = 56, .w = 56, .f = 64, .k = 3, .pad = 2, .dil = 2}, false, 5);
  CHECK(verify::verdict_name(verify::verify(d.original, d.mutant).verdict) == "equivalent");
}
TEST_CASE("known pair: two matmuls vs one batched matmul (equivalent)") {
  auto p = lab::matmuls_to_batched(5, 6, 7, 4);
  auto r = verify::verify(p.original, p.mutant);
  CHECK(verify::verdict_name(r.verdict) == "equivalent");
  REQUIRE(r.outputs.size() == 2);
  CHECK(r.outputs[1].corrected_elements == 0);
  check_region(p, r);
}

TEST_CASE("known pair: conv vs conv with a transposed kernel (not equivalent)") {
  auto p = lab::conv_transposed_kernel(lab::ConvSpec{.c = 2, .h = 6, .w = 6, .f = 3}, 5);
  auto r = verify::verify(p.original, p.mutant);
  CHECK(verify::verdict_name(r.verdict) == "not_equivalent");
  CHECK(r.outputs[0].corrected_elements == numel(r.outputs[0].shape));
  check_region(p, r);
}

TEST_CASE("the verdict does not depend on the prime, the seed or the number of tests") {
  auto p = lab::conv_batch_to_width(lab::ConvSpec{.n = 3, .c = 2, .h = 4, .w = 5, .f = 2}, 6);
  auto ref = verify::verify(p.original, p.mutant);
  for (uint64_t prime : {65521ull, 4294967291ull, 2147483647ull})
    for (int tests : {1, 3}) {
      auto r = verify::verify(p.original, p.mutant, {.tests = tests, .prime = prime, .seed = prime + 7});
      CHECK(r.verdict == ref.verdict);
      CHECK(region_positions(r.outputs[0]) == region_positions(ref.outputs[0]));
      CHECK(r.prime == prime);
    }
  CHECK_THROWS_WITH_AS(verify::verify(p.original, p.mutant, {.prime = 65535}), "65535 is not a prime (divisible by 3)", InvalidInput);
  CHECK_THROWS_WITH_AS(verify::verify(p.original, p.mutant, {.tests = 0}), "the number of tests must be positive, got 0", InvalidInput);
}

TEST_CASE("verifier errors: non-multilinear ops and mismatched programs") {
  Graph a, b;
  Builder ba(a), bb(b);
  TensorId x = ba.input("x", {2, 3});
  ba.output(ba.add(ops::Relu{}, {x}, "relu1"));
  TensorId y = bb.input("x", {2, 3});
  bb.output(bb.add(ops::Neg{}, {y}));
  CHECK_THROWS_WITH_AS(verify::verify(a, b), "original: node 'relu1' (Relu) is not multilinear; only multilinear programs can be verified",
                       InvalidInput);
  Graph c;
  Builder bc(c);
  bc.output(bc.add(ops::Neg{}, {bc.input("x", {3, 2})}));
  CHECK_THROWS_WITH_AS(verify::verify(b, c), "input 0 is float32[2,3] in the original but float32[3,2] in the mutant", InvalidInput);
}

TEST_CASE("Theorem 1 in practice: exhaustive checking finds nothing outside the box method's region") {
  std::vector<lab::Pair> pairs;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    pairs.push_back(lab::conv_batch_to_width(lab::ConvSpec{.n = 2, .c = 2, .h = 4, .w = 5, .f = 2}, seed));
    pairs.push_back(lab::dilated_to_dense(lab::ConvSpec{.c = 2, .h = 6, .w = 8, .f = 2, .pad = 2, .dil = 2}, seed % 2, seed));
    pairs.push_back(lab::conv_transposed_kernel(lab::ConvSpec{.c = 2, .h = 5, .w = 5, .f = 2}, seed));
  }
  for (const auto& p : pairs) {
    auto r = verify::verify(p.original, p.mutant, {.exhaustive = true});
    CHECK(verify::verdict_name(r.verdict) == p.expected);
    auto region = region_positions(r.outputs[0]);
    for (int64_t f : r.outputs[0].differing) CHECK(region.count(f));
    CHECK(region.size() == r.outputs[0].differing.size());  // and on these pairs, nothing more
  }
}

// ---------------------------------------------------------------- box soundness
namespace {

/// Symbolic leaves: element i of the j-th input or weight is the variable (j, i); `tensor_of`
/// records which tensor each j is.
std::vector<std::optional<Tensor<Poly>>> poly_leaves(const Graph& g, std::map<int, TensorId>* tensor_of = nullptr) {
  std::vector<std::optional<Tensor<Poly>>> leaves(size_t(g.num_tensors()));
  int leaf = 0;
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    const auto& info = g.tensor(t);
    if (info.producer >= 0 || !is_float(info.type.dtype)) continue;
    Tensor<Poly> v(info.type.shape);
    for (int64_t i = 0; i < v.size(); ++i) v[i] = Poly::var(leaf, i);
    leaves[size_t(t)] = v;
    if (tensor_of) (*tensor_of)[leaf] = t;
    ++leaf;
  }
  return leaves;
}

/// Checks that in every box of every tensor, each position's polynomial is the box origin's
/// polynomial with each input's variables shifted by one affine function of the position.
void check_boxes_sound(const Graph& g, uint64_t seed) {
  verify::PointEvaluator<Poly> ev(g, poly_leaves(g));
  auto splits = verify::propagate_boxes(g);
  for (NodeId n = 0; n < g.num_nodes(); ++n)
    for (TensorId t : g.node(n).outputs) {
      const Shape& shape = g.type(t).shape;
      for (const Box& box : splits[size_t(t)].boxes(shape)) {
        if (box.empty()) continue;
        Index v0 = box.origin();
        Poly p0 = ev.at(t, v0);
        auto base = p0.min_index();
        std::vector<std::map<int, int64_t>> step(shape.size());
        for (int d = 0; d < int(shape.size()); ++d) {
          if (box.dims[size_t(d)].count() < 2) continue;
          Index v1 = v0;
          v1[d] += 1;
          auto m1 = ev.at(t, v1).min_index();
          for (auto [l, i] : base) step[size_t(d)][l] = m1.count(l) ? m1[l] - i : 0;
        }
        Shape ext;
        for (const auto& d : box.dims) ext.push_back(d.count());
        Index r(int(ext.size()));
        do {
          Index v = v0;
          std::map<int, int64_t> shift;
          for (int d = 0; d < r.rank; ++d) {
            v[d] += r[d];
            for (auto [l, s] : step[size_t(d)]) shift[l] += s * r[d];
          }
          bool ok = ev.at(t, v) == p0.shifted(shift);
          INFO("seed ", seed, ": tensor '", g.tensor(t).name, "' (", op_name(g.node(n).op), ") box ", to_string(box), " position ", v.v[0], ",",
               v.v[1], ",", v.v[2], ",", v.v[3], " is not an affine shift of the box origin");
          REQUIRE(ok);
        } while (next_index(r, ext));
      }
    }
}

}  // namespace

TEST_CASE("box soundness: every box reads its inputs through one affine map (random programs)") {
  int programs = 0, nodes = 0;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    Rng rng(seed);
    Graph g = lab::random_program(rng);
    nodes += g.num_nodes();
    ++programs;
    check_boxes_sound(g, seed);
  }
  MESSAGE("checked ", programs, " random programs with ", nodes, " ops");
  CHECK(nodes > 600);
}

TEST_CASE("box soundness of Einsum: cuts of padded operands reach the output through each label") {
  struct Operand {
    Shape shape;
    std::vector<int64_t> pads;
  };
  struct Case {
    const char* eq;
    std::vector<Operand> in;
  };
  for (const Case& c : std::vector<Case>{{"ij,jk->ik", {{{3, 4}, {1, 0, 0, 0}}, {{4, 3}, {0, 0, 0, 2}}}},
                                         {"bij,bkj->bki", {{{2, 3, 4}, {0, 1, 0, 0, 0, 0}}, {{2, 2, 4}, {0, 0, 0, 0, 1, 0}}}},
                                         {"ij->ji", {{{3, 4}, {1, 0, 0, 1}}}},
                                         {"...i,i", {{{2, 2, 4}, {1, 0, 0, 0, 0, 0}}, {{3}, {1, 0}}}},
                                         {"ij,j->i", {{{3, 4}, {1, 0, 0, 0}}, {{4}, {0, 0}}}}}) {
    CAPTURE(c.eq);
    Graph g;
    Builder b(g);
    std::vector<TensorId> ins;
    for (size_t k = 0; k < c.in.size(); ++k) ins.push_back(b.pad(b.input(cat("x", k), c.in[k].shape), c.in[k].pads));
    b.output(b.add(ops::Einsum{.equation = c.eq}, ins));
    check_boxes_sound(g, 0);
    auto splits = verify::propagate_boxes(g);
    CHECK(splits[size_t(g.outputs()[0])].boxes(g.type(g.outputs()[0]).shape).size() > 1);  // the pads' cuts reach the output
  }
}

TEST_CASE("box soundness of the known pairs' mutants and the field evaluator vs float") {
  for (const auto& p : {lab::conv_batch_to_width(lab::ConvSpec{.n = 2, .c = 2, .h = 4, .w = 4, .f = 2}, 1),
                        lab::dilated_to_dense(lab::ConvSpec{.c = 1, .h = 6, .w = 6, .f = 1, .pad = 2, .dil = 2}, true, 1),
                        lab::dilated_to_dense(lab::ConvSpec{.c = 1, .h = 6, .w = 6, .f = 1, .pad = 2, .dil = 2}, false, 1),
                        lab::matmuls_to_batched(2, 3, 2, 1)}) {
    check_boxes_sound(p.original, 0);
    check_boxes_sound(p.mutant, 0);
  }
  // Point evaluation over F_p agrees with the float interpreter on integer data.
  auto p = lab::conv_batch_to_width(lab::ConvSpec{.n = 2, .c = 2, .h = 4, .w = 4, .f = 2}, 1);
  Graph& g = p.mutant;
  Rng rng(3);
  Tensor<float> x(g.type(g.inputs()[0]).shape);
  for (int64_t i = 0; i < x.size(); ++i) x[i] = float(rng.range(-5, 5));
  std::vector<std::optional<Tensor<F31>>> leaves(size_t(g.num_tensors()));
  leaves[size_t(g.inputs()[0])] = lift_tensor<F31>(x, "x");
  std::vector<std::optional<Tensor<double>>> dleaves(size_t(g.num_tensors()));
  dleaves[size_t(g.inputs()[0])] = lift_tensor<double>(x, "x");
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (g.tensor(t).is_constant()) {
      Tensor<float> w = std::get<Tensor<float>>(*g.tensor(t).value);
      Tensor<float> wi = map_tensor<float>(w, [](float v) { return std::round(v * 4); });
      leaves[size_t(t)] = lift_tensor<F31>(wi, "w");
      dleaves[size_t(t)] = lift_tensor<double>(wi, "w");
    }
  verify::PointEvaluator<F31> ef(g, leaves);
  verify::PointEvaluator<double> ed(g, dleaves);
  TensorId y = g.outputs()[0];
  Index i(4);
  do CHECK(ef.at(y, i) == F31(int64_t(ed.at(y, i))));
  while (next_index(i, g.type(y).shape));
}

TEST_CASE("backward propagation: a box's required input regions hold every input element it reads") {
  int checked = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    Rng rng(seed);
    Graph g = lab::random_program(rng);
    std::map<int, TensorId> leaf_tensor;
    verify::PointEvaluator<Poly> ev(g, poly_leaves(g, &leaf_tensor));
    TensorId y = g.outputs()[0];
    const Shape& ys = g.type(y).shape;
    if (numel(ys) == 0) continue;
    // A random sub-box of the output.
    Box box;
    for (int64_t n : ys) {
      int64_t lo = rng.range(0, n - 1), hi = rng.range(lo + 1, n);
      box.dims.push_back({lo, hi, 1});
    }
    auto need = verify::required_regions(g, y, box);
    Shape ext;
    for (const auto& d : box.dims) ext.push_back(d.count());
    Index r(int(ext.size()));
    do {
      Index v = box.origin();
      for (int i = 0; i < v.rank; ++i) v[i] += r[i];
      for (const auto& [m, c] : ev.at(y, v).terms)
        for (const auto& var : m) {
          TensorId t = leaf_tensor.at(var.leaf);
          Index at = unflatten(var.index, g.type(t).shape);
          INFO("seed ", seed, ": output box ", to_string(box), " reads element ", var.index, " of '", g.tensor(t).name,
               "' outside its required region");
          REQUIRE(need[size_t(t)].has_value());
          CHECK(need[size_t(t)]->contains(at));
          ++checked;
        }
    } while (next_index(r, ext));
  }
  MESSAGE("checked ", checked, " input reads");
  CHECK(checked > 1000);
}
