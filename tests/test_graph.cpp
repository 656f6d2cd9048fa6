// Graph construction, topological order, cycles, multilinear subprograms, interpreter runs
// in float, double and the finite field.
#include "op_testing.hpp"

using namespace pet;
using namespace pet::testing;

namespace {
/// x -> Conv -> Relu -> Conv -> Add(residual) -> output
Graph small_resnet_block() {
  Graph g;
  Builder b(g);
  Rng rng(3);
  auto weight = [&](Shape s) {
    Tensor<float> w(s);
    for (int64_t i = 0; i < w.size(); ++i) w[i] = float(rng.range(-2, 2));
    return w;
  };
  TensorId x = b.input("x", {1, 2, 5, 5});
  TensorId w1 = b.constant("w1", weight({2, 2, 3, 3}));
  TensorId w2 = b.constant("w2", weight({2, 2, 3, 3}));
  TensorId c1 = b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {x, w1}, "conv1");
  TensorId r = b.add(ops::Relu{}, {c1}, "relu");
  TensorId c2 = b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {r, w2}, "conv2");
  TensorId y = b.add(ops::Add{}, {c2, x}, "add");
  b.output(y);
  return g;
}
}  // namespace

TEST_CASE("builder type-checks as it builds and names nodes") {
  Graph g;
  Builder b(g);
  TensorId x = b.input("x", {1, 3, 8, 8});
  TensorId w = b.constant("w", Tensor<float>({4, 3, 3, 3}));
  TensorId y = b.add(ops::Conv{}, {x, w});
  CHECK(g.type(y).shape == Shape{1, 4, 6, 6});
  CHECK(g.node(0).name == "Conv");
  TensorId y2 = b.add(ops::Conv{}, {x, w});
  CHECK(g.node(1).name != g.node(0).name);
  CHECK(g.find("x") == x);
  CHECK_FALSE(g.find("nope"));
  TensorId bad = b.constant("w8", Tensor<float>({4, 8, 3, 3}));
  CHECK_THROWS_WITH_AS(b.add(ops::Conv{}, {x, bad}, "c3"),
                       "Conv 'c3': input has 3 channels but weight expects 8 (weight shape [4,8,3,3], group 1)", InvalidInput);
  CHECK_THROWS_WITH_AS(g.add_input("x", {DType::Float32, {1}}), "tensor name 'x' is defined twice", InvalidInput);
  CHECK_THROWS_WITH_AS(b.add(ops::Split{.axis = 1, .num_outputs = 2}, {y2}), "Builder::add: op has 2 outputs; use add_multi", InvalidInput);
  // an empty tensor has 0 elements whatever its other dims: those are bounded by 2^36 too
  TensorId e = b.input("e", {0, 1});
  CHECK_THROWS_WITH_AS(b.add(ops::Expand{.shape = {0, int64_t(1) << 40}}, {e}, "huge"),
                       "Expand 'huge': output shape [0,1099511627776] has a dimension over 2^36 (the most pet supports)", Unsupported);
}

TEST_CASE("topological order follows dependencies, multilinear subprograms are cut at non-linear ops") {
  Graph g = small_resnet_block();
  auto order = g.topo_order();
  REQUIRE(order.size() == 4);
  std::vector<int> pos(4);
  for (size_t i = 0; i < order.size(); ++i) pos[size_t(order[i])] = int(i);
  CHECK(pos[0] < pos[1]);
  CHECK(pos[1] < pos[2]);
  CHECK(pos[2] < pos[3]);
  auto subs = multilinear_subprograms(g);
  REQUIRE(subs.size() == 2);  // {conv1} and {conv2, add}: Relu cuts them apart
  CHECK(subs[0] == std::vector<NodeId>{0});
  CHECK(subs[1] == std::vector<NodeId>{2, 3});
}

TEST_CASE("multilinear subprograms leave out integer arithmetic (an Add of int32 sums)") {
  Graph g;
  Builder b(g);
  const TensorId a = g.add_input("a", {DType::UInt8, {2, 4}});
  const TensorId w = g.add_constant("w", DType::Int8, Tensor<int64_t>({4, 3}, int64_t(1)));
  const TensorId s = b.add(ops::MatMulInteger{}, {a, w});
  const TensorId c = b.add(ops::Add{}, {s, g.add_constant("c", DType::Int32, Tensor<int64_t>({3}, int64_t(5)))});
  const TensorId f = b.add(ops::Cast{.to = DType::Float32}, {c});
  b.output(b.add(ops::Mul{}, {f, b.constant("m", Tensor<float>(Shape{}, 0.5f))}));
  const auto subs = multilinear_subprograms(g);
  REQUIRE(subs.size() == 1);
  CHECK(subs[0] == std::vector<NodeId>{3});  // the float Mul; not the int32 Add
}

TEST_CASE("topological_order reports the nodes of a cycle") {
  std::vector<int> cyc;
  auto order = topological_order(4, {{0, 1}, {1, 2}, {2, 1}, {2, 3}}, &cyc);
  CHECK(order.empty());
  std::sort(cyc.begin(), cyc.end());
  CHECK(cyc == std::vector<int>{1, 2});
  CHECK(topological_order(3, {{2, 0}, {0, 1}}, nullptr) == std::vector<int>{2, 0, 1});
}

TEST_CASE("the interpreter runs the same program in float, double and F31") {
  Graph g = small_resnet_block();
  // Integer inputs and weights: float and double are exact, so all three agree. Relu is not
  // multilinear, so the field run must refuse it.
  Tensor<float> x({1, 2, 5, 5});
  Rng rng(5);
  for (int64_t i = 0; i < x.size(); ++i) x[i] = float(rng.range(-3, 3));
  auto yf = Interpreter<float>(g).run(std::vector<Value<float>>{x});
  auto yd = Interpreter<double>(g).run(std::vector<Value<double>>{lift_tensor<double>(x, "x")});
  const auto& tf = std::get<Tensor<float>>(yf[0]);
  const auto& td = std::get<Tensor<double>>(yd[0]);
  for (int64_t i = 0; i < tf.size(); ++i) CHECK(double(tf[i]) == td[i]);
  std::vector<Value<F31>> xf{lift_tensor<F31>(x, "x")};
  CHECK_THROWS_WITH_AS(Interpreter<F31>(g).run(xf),
                       "Relu 'relu': Relu is not multilinear and cannot be evaluated over a finite field", Unsupported);

  // The multilinear part (conv2 + residual add) alone agrees exactly in the field.
  Graph m;
  Builder b(m);
  TensorId in = b.input("r", {1, 2, 5, 5});
  TensorId w = b.constant("w2", std::get<Tensor<float>>(*g.tensor(*g.find("w2")).value));
  b.output(b.add(ops::Add{}, {b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {in, w}), in}));
  auto md = Interpreter<double>(m).run(std::vector<Value<double>>{lift_tensor<double>(x, "x")});
  auto mf = Interpreter<F31>(m).run(xf);
  const auto& a = std::get<Tensor<double>>(md[0]);
  const auto& f = std::get<Tensor<F31>>(mf[0]);
  for (int64_t i = 0; i < a.size(); ++i) CHECK(f[i] == F31(int64_t(a[i])));
}

TEST_CASE("interpreter checks its inputs") {
  Graph g = small_resnet_block();
  Interpreter<float> it(g);
  CHECK_THROWS_WITH_AS(it.run(std::vector<Value<float>>{}), "the model has 1 inputs but 0 values were given", InvalidInput);
  CHECK_THROWS_WITH_AS(it.run(std::vector<Value<float>>{Tensor<float>({1, 2, 5, 4})}),
                       "input 'x' has shape [1,2,5,4] but the model expects [1,2,5,5]", InvalidInput);
  CHECK_THROWS_WITH_AS(it.run(std::vector<Value<float>>{Tensor<int64_t>({1, 2, 5, 5})}),
                       "input 'x' must be float32 but an integer tensor was given", InvalidInput);
}

TEST_CASE("constants are lifted once, a custom lifter makes weights field variables") {
  Graph g;
  Builder b(g);
  TensorId x = b.input("x", {2});
  TensorId w = b.constant("w", Tensor<float>({2}, {0.5f, 0.25f}));  // not integers
  b.output(b.add(ops::Mul{}, {x, w}));
  std::vector<Value<F31>> in{Tensor<F31>({2}, F31(3))};
  CHECK_THROWS_WITH_AS(Interpreter<F31>{g}, "constant 'w' = 0.5 is not an integer and has no exact value in the finite field",
                       Unsupported);
  Interpreter<F31> it(g, [](TensorId, const Tensor<float>& t) { return Tensor<F31>(t.shape(), F31(7)); });
  CHECK(std::get<Tensor<F31>>(it.run(in)[0]).vec() == std::vector<F31>{F31(21), F31(21)});
}

TEST_CASE("multi-output nodes, outputs that are inputs or constants") {
  Graph g;
  Builder b(g);
  TensorId x = b.input("x", {4, 2});
  auto parts = b.add_multi(ops::Split{.split = {1, 3}, .num_outputs = 2}, {x});
  TensorId c = b.constant("c", Tensor<float>({1}, {9.0f}));
  b.output(parts[1]);
  b.output(x);
  b.output(c);
  Tensor<float> xv({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  auto y = Interpreter<float>(g).run(std::vector<Value<float>>{xv});
  CHECK(std::get<Tensor<float>>(y[0]).vec() == std::vector<float>{2, 3, 4, 5, 6, 7});
  CHECK(std::get<Tensor<float>>(y[1]).vec() == xv.vec());
  CHECK(std::get<Tensor<float>>(y[2]).vec() == std::vector<float>{9});
}
