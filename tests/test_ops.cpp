// Per-operator tests: shape tables, every error message, fast kernel vs element formula,
// float vs finite field, attribute edge cases.
#include <functional>
#include <map>

#include "difftest/program_gen.hpp"
#include "op_testing.hpp"

using namespace pet;
using namespace pet::testing;
using ops::AveragePool, ops::Conv, ops::MaxPool;

TEST_CASE("Conv: shapes over 1-D, 2-D, 3-D, strides, pads, dilations, groups, auto_pad") {
  struct C {
    Conv op;
    Shape x, w, out;
  };
  std::vector<C> cases = {
      {Conv{}, {1, 3, 7, 7}, {4, 3, 3, 3}, {1, 4, 5, 5}},
      {Conv{.pads = {1, 1, 1, 1}}, {1, 3, 7, 7}, {4, 3, 3, 3}, {1, 4, 7, 7}},
      {Conv{.strides = {2, 2}, .pads = {1, 1, 1, 1}}, {2, 3, 7, 8}, {4, 3, 3, 3}, {2, 4, 4, 4}},
      {Conv{.pads = {2, 2, 2, 2}, .dilations = {2, 2}}, {1, 2, 9, 9}, {3, 2, 3, 3}, {1, 3, 9, 9}},
      {Conv{.pads = {0, 1, 2, 0}}, {1, 2, 5, 6}, {3, 2, 3, 2}, {1, 3, 5, 6}},  // asymmetric
      {Conv{.group = 2}, {2, 4, 5, 6}, {6, 2, 3, 1}, {2, 6, 3, 6}},
      {Conv{.group = 4}, {1, 4, 6, 6}, {4, 1, 3, 3}, {1, 4, 4, 4}},  // depthwise
      {Conv{.strides = {2}}, {1, 2, 9}, {3, 2, 4}, {1, 3, 3}},       // 1-D
      {Conv{.pads = {1, 1, 1, 1, 1, 1}}, {1, 2, 4, 5, 6}, {3, 2, 2, 3, 3}, {1, 3, 5, 5, 6}},  // 3-D
      {Conv{.strides = {2, 2}, .auto_pad = AutoPad::SameUpper}, {1, 1, 7, 6}, {1, 1, 3, 3}, {1, 1, 4, 3}},
      {Conv{.auto_pad = AutoPad::SameLower}, {1, 1, 5, 5}, {1, 1, 2, 2}, {1, 1, 5, 5}},
      {Conv{.strides = {3, 3}, .auto_pad = AutoPad::Valid}, {1, 1, 8, 8}, {1, 1, 2, 2}, {1, 1, 3, 3}},
      {Conv{.pads = {0, 0, 1, 2}, .dilations = {2, 1}}, {2, 1, 4, 3}, {3, 1, 1, 1}, {2, 3, 5, 5}},  // 1x1 with end pads
      {Conv{.pads = {2, 0, 1, 2}, .dilations = {2, 1}}, {2, 1, 4, 3}, {3, 1, 1, 1}, {2, 3, 7, 5}},
  };
  uint64_t seed = 1;
  for (const auto& c : cases) {
    CAPTURE(c.x);
    CAPTURE(c.w);
    CHECK(out_shape(c.op, {f32(c.x), f32(c.w)}) == c.out);
    check_op(c.op, {f32(c.x), f32(c.w)}, seed++);
    check_op(c.op, {f32(c.x), f32(c.w), f32({c.w[0]})}, seed++);  // with bias
  }
}

TEST_CASE("Conv: auto_pad resolves to explicit pads (SAME_UPPER puts the extra at the end)") {
  auto [op, out] = resolve(Conv{.strides = {2, 2}, .auto_pad = AutoPad::SameUpper}, {f32({1, 1, 6, 6}), f32({1, 1, 3, 3})});
  CHECK(std::get<Conv>(op).pads == std::vector<int64_t>{0, 0, 1, 1});
  auto [op2, out2] = resolve(Conv{.strides = {2, 2}, .auto_pad = AutoPad::SameLower}, {f32({1, 1, 6, 6}), f32({1, 1, 3, 3})});
  CHECK(std::get<Conv>(op2).pads == std::vector<int64_t>{1, 1, 0, 0});
}

TEST_CASE("Conv: error messages") {
  CHECK_THROWS_WITH_AS(infer(Conv{}, {f32({1, 3, 8, 8}), f32({8, 4, 3, 3})}),
                       "Conv 'n': input has 3 channels but weight expects 4 (weight shape [8,4,3,3], group 1)", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(Conv{.group = 2}, {f32({1, 3, 8, 8}), f32({8, 1, 3, 3})}),
                       "Conv 'n': input has 3 channels, not divisible by group 2", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(Conv{.group = 2}, {f32({1, 4, 8, 8}), f32({3, 2, 3, 3})}),
                       "Conv 'n': weight has 3 filters, not divisible by group 2", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(Conv{}, {f32({1, 3, 8, 8}), f32({8, 3, 3, 3}), f32({4})}),
                       "Conv 'n': bias shape [4] must be [8]", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(Conv{}, {f32({1, 3, 8, 8}), f32({8, 3, 3})}),
                       "Conv 'n': weight shape [8,3,3] has rank 3 but input shape [1,3,8,8] has rank 4", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(Conv{}, {f32({1, 3, 2, 2}), f32({8, 3, 3, 3})}),
                       "Conv 'n': output would be empty: spatial input [2,2] is smaller than the dilated kernel [3,3] with pads [0,0,0,0]",
                       InvalidInput);
  CHECK_THROWS_WITH_AS(infer(Conv{.pads = {1, 1}}, {f32({1, 3, 8, 8}), f32({8, 3, 3, 3})}),
                       "Conv 'n': pads has 2 values but 4 are needed", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(Conv{.pads = {-1, 0, 0, 0}}, {f32({1, 3, 8, 8}), f32({8, 3, 3, 3})}),
                       "Conv 'n': pads [-1,0,0,0] must be non-negative", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(Conv{.strides = {0, 1}}, {f32({1, 3, 8, 8}), f32({8, 3, 3, 3})}),
                       "Conv 'n': strides [0,1] must be positive", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(Conv{.kernel_shape = {5, 5}}, {f32({1, 3, 8, 8}), f32({8, 3, 3, 3})}),
                       "Conv 'n': kernel_shape [5,5] does not match weight shape [8,3,3,3]", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(Conv{}, {f32({1, 3}), f32({8, 3})}), "Conv 'n': input X must have rank 3 to 5, got shape [1,3]",
                       InvalidInput);
  CHECK_THROWS_WITH_AS(infer(Conv{}, {i64({1, 3, 8, 8}), f32({8, 3, 3, 3})}), "Conv 'n': input X must be float32, got int64",
                       InvalidInput);
  CHECK_THROWS_WITH_AS(infer(Conv{}, {f32({1, 3, 8, 8})}), "Conv 'n': expects 2 to 3 inputs, got 1", InvalidInput);
}

TEST_CASE("MatMul: numpy broadcasting and 1-D operands") {
  struct C {
    Shape a, b, out;
  };
  std::vector<C> cases = {{{2, 3}, {3, 4}, {2, 4}},          {{3}, {3, 4}, {4}},
                          {{2, 3}, {3}, {2}},                {{3}, {3}, {}},
                          {{5, 1, 2, 3}, {4, 3, 2}, {5, 4, 2, 2}}, {{2, 7, 3, 5}, {5, 6}, {2, 7, 3, 6}},
                          {{1, 4}, {2, 4, 3}, {2, 1, 3}}};
  uint64_t seed = 100;
  for (const auto& c : cases) {
    CAPTURE(c.a);
    CAPTURE(c.b);
    CHECK(out_shape(ops::MatMul{}, {f32(c.a), f32(c.b)}) == c.out);
    check_op(ops::MatMul{}, {f32(c.a), f32(c.b)}, seed++);
  }
  CHECK_THROWS_WITH_AS(infer(ops::MatMul{}, {f32({2, 3}), f32({4, 5})}),
                       "MatMul 'n': A [2,3] has 3 columns but B [4,5] has 4 rows", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::MatMul{}, {f32({2, 2, 3}), f32({3, 3, 4})}),
                       "MatMul 'n': batch dimensions: shapes [2] and [3] cannot be broadcast (dimension 0 is 2 vs 3)", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::MatMul{}, {f32({}), f32({3})}), "MatMul 'n': inputs must have rank >= 1, got [] and [3]",
                       InvalidInput);
}

TEST_CASE("Gemm: transposes, alpha/beta, C broadcasting") {
  using ops::Gemm;
  uint64_t seed = 200;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (Shape c : {Shape{}, Shape{5}, Shape{1, 5}, Shape{3, 1}, Shape{3, 5}}) {
        Gemm op{.alpha = 2.0f, .beta = 3.0f, .trans_a = ta, .trans_b = tb};
        Shape a = ta ? Shape{4, 3} : Shape{3, 4}, b = tb ? Shape{5, 4} : Shape{4, 5};
        CHECK(out_shape(op, {f32(a), f32(b), f32(c)}) == Shape{3, 5});
        check_op(op, {f32(a), f32(b), f32(c)}, seed++);
      }
  check_op(Gemm{}, {f32({3, 4}), f32({4, 5})}, seed++);
  CHECK_THROWS_WITH_AS(infer(Gemm{.trans_a = true}, {f32({3, 4}), f32({4, 5})}),
                       "Gemm 'n': A^T of shape [3,4] has 3 columns but B of shape [4,5] has 4 rows", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(Gemm{}, {f32({3, 4}), f32({4, 5}), f32({2, 5})}),
                       "Gemm 'n': C of shape [2,5] cannot be broadcast to [3,5]", InvalidInput);
  // Non-integer alpha has no exact value in the field.
  auto [op, out] = resolve(Gemm{.alpha = 0.5f}, {f32({2, 2}), f32({2, 2})});
  std::vector<Value<F31>> in{Tensor<F31>({2, 2}, F31(1)), Tensor<F31>({2, 2}, F31(1))};
  CHECK_THROWS_WITH_AS(evaluate_op<F31>(op, in, out), "Gemm alpha = 0.5 is not an integer and has no exact value in the finite field",
                       Unsupported);
}

TEST_CASE("element-wise binary ops broadcast like numpy") {
  uint64_t seed = 300;
  for (Op op : {Op(ops::Add{}), Op(ops::Sub{}), Op(ops::Mul{}), Op(ops::Div{})}) {
    CHECK(out_shape(op, {f32({2, 1, 4}), f32({3, 1})}) == Shape{2, 3, 4});
    CHECK(out_shape(op, {f32({}), f32({3})}) == Shape{3});
    InputSpec spec{.lo = 0.5, .hi = 2.0};
    check_op(op, {f32({2, 1, 4}), f32({3, 1})}, seed++, spec);
    check_op(op, {f32({5}), f32({})}, seed++, spec);
    check_op(op, {f32({2, 3}), f32({2, 3})}, seed++, spec);
  }
  CHECK_THROWS_WITH_AS(infer(ops::Add{}, {f32({2, 3}), f32({4})}),
                       "Add 'n': inputs: shapes [2,3] and [4] cannot be broadcast (dimension 1 is 3 vs 4)", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::Mul{}, {f32({2}), i64({2})}), "Mul 'n': input 0 is float32 but input 1 is int64", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::Add{}, {TensorType{DType::Bool, {2}}, TensorType{DType::Bool, {2}}}),
                       "Add 'n': does not take bool inputs (got bool and bool)", InvalidInput);
  // Integer arithmetic (shape computations) and its errors.
  auto [div, out] = resolve(ops::Div{}, {i64({2}), i64({2})});
  std::vector<Value<float>> in{Tensor<int64_t>({2}, {7, -7}), Tensor<int64_t>({2}, {2, 0})};
  CHECK_THROWS_WITH_AS(evaluate_op<float>(div, in, out), "Div: integer division by zero", InvalidInput);
  in[1] = Tensor<int64_t>({2}, {2, 2});
  CHECK(std::get<Tensor<int64_t>>(evaluate_op<float>(div, in, out)[0]).vec() == std::vector<int64_t>{3, -3});
}

TEST_CASE("Pow: float and integer types, integer exponents in the field") {
  check_fast_vs_formula(ops::Pow{}, {f32({3, 4}), f32({4})}, 400, {.lo = 0.5, .hi = 2});
  auto [op, out] = resolve(ops::Pow{}, {f32({3}), i64({3})});
  CHECK(out[0].dtype == DType::Float32);
  std::vector<Value<F31>> in{Tensor<F31>({3}, {F31(2), F31(3), F31(-1)}), Tensor<int64_t>({3}, {3, 2, 5})};
  auto y = std::get<Tensor<F31>>(evaluate_op<F31>(op, in, out)[0]);
  CHECK(y.vec() == std::vector<F31>{F31(8), F31(9), F31(-1)});
  in[1] = Tensor<int64_t>({3}, {1, -1, 1});
  CHECK_THROWS_WITH_AS(evaluate_op<F31>(op, in, out), "Pow: exponent -1 has no meaning in the finite field", Unsupported);
}

TEST_CASE("unary ops: fast kernels agree with formulas, non-multilinear ones refuse the field") {
  uint64_t seed = 500;
  std::vector<Op> real_ops = {ops::Sqrt{}, ops::Erf{}, ops::Exp{}, ops::Relu{}, ops::LeakyRelu{.alpha = 0.2f},
                              ops::Sigmoid{}, ops::Tanh{}, ops::Clip{.min = -0.3, .max = 0.4}, ops::Neg{}};
  for (const Op& op : real_ops) {
    CAPTURE(op_name(op));
    InputSpec spec = std::holds_alternative<ops::Sqrt>(op) ? InputSpec{.lo = 0.0, .hi = 4.0} : InputSpec{};
    check_fast_vs_formula(op, {f32({3, 5})}, seed++, spec);
    if (!is_multilinear(op)) {
      auto [r, out] = resolve(op, {f32({2})});
      std::vector<Value<F31>> in{Tensor<F31>({2}, F31(1))};
      CHECK_THROWS_WITH_AS(evaluate_op<F31>(r, in, out),
                           cat(op_name(op), " is not multilinear and cannot be evaluated over a finite field").c_str(), Unsupported);
    }
  }
  check_float_vs_field(ops::Neg{}, {f32({4})}, seed++);
  CHECK_THROWS_WITH_AS(infer(ops::Sqrt{}, {i64({2})}), "Sqrt 'n': input must be float32, got int64", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::Relu{}, {TensorType{DType::Bool, {2}}}), "Relu 'n': does not take bool input", InvalidInput);
}

TEST_CASE("ONNX coverage ops: formulas, exact values, shape errors, field refusal") {
  uint64_t seed = 700;
  std::vector<Op> unary = {ops::Abs{}, ops::Log{}, ops::Reciprocal{}, ops::Floor{}, ops::Ceil{}, ops::Round{}, ops::Sign{},
                           ops::Softsign{}, ops::Softplus{}, ops::Mish{}, ops::HardSwish{}, ops::Elu{.alpha = 0.7f}, ops::Selu{},
                           ops::HardSigmoid{.alpha = 0.3f, .beta = 0.4f}, ops::Sin{}, ops::Cos{}, ops::Tan{}, ops::Asin{}, ops::Acos{},
                           ops::Atan{}, ops::Sinh{}, ops::Cosh{}, ops::Asinh{}, ops::Acosh{}, ops::Atanh{},
                           ops::Celu{.alpha = 1.5f}, ops::ThresholdedRelu{.alpha = 0.5f}, ops::Shrink{.bias = 0.2f, .lambd = 0.7f}};
  for (const Op& op : unary) {
    CAPTURE(op_name(op));
    InputSpec spec = holds_any<ops::Log, ops::Reciprocal>(op)               ? InputSpec{.lo = 0.1, .hi = 3.0}
                     : holds_any<ops::Asin, ops::Acos, ops::Atanh>(op)      ? InputSpec{.lo = -0.9, .hi = 0.9}
                     : holds_any<ops::Acosh>(op)                            ? InputSpec{.lo = 1.1, .hi = 4.0}
                     : holds_any<ops::Tan>(op)                              ? InputSpec{.lo = -1.2, .hi = 1.2}
                                                                            : InputSpec{.lo = -4, .hi = 4};
    check_fast_vs_formula(op, {f32({3, 5})}, seed++, spec);
    auto [r, out] = resolve(op, {f32({2})});
    std::vector<Value<F31>> in{Tensor<F31>({2}, F31(1))};
    CHECK_THROWS_AS(evaluate_op<F31>(r, in, out), Unsupported);
    CHECK_THROWS_WITH_AS(infer(op, {i64({2})}), cat(op_name(op), " 'n': input must be float32, got int64").c_str(), InvalidInput);
  }
  auto eval1 = [](Op op, std::vector<float> x) {
    auto [r, out] = resolve(op, {f32({int64_t(x.size())})});
    std::vector<Value<float>> in{Tensor<float>({int64_t(x.size())}, x)};
    return std::get<Tensor<float>>(evaluate_op<float>(r, in, out)[0]).vec();
  };
  CHECK(eval1(ops::Round{}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 0.6f}) == std::vector<float>{0, 2, 2, -0.f, -2, 1});
  CHECK(eval1(ops::Sin{}, {0.f, float(M_PI / 2)}) == std::vector<float>{0.f, 1.f});
  CHECK(eval1(ops::Cos{}, {0.f}) == std::vector<float>{1.f});
  CHECK(std::isnan(eval1(ops::Asin{}, {2.f})[0]));  // outside the domain: NaN, as ONNX Runtime gives
  CHECK(eval1(ops::Floor{}, {-1.5f, 1.5f}) == std::vector<float>{-2, 1});
  CHECK(eval1(ops::Ceil{}, {-1.5f, 1.5f}) == std::vector<float>{-1, 2});
  CHECK(eval1(ops::Sign{}, {-3.f, 0.f, 2.f}) == std::vector<float>{-1, 0, 1});
  CHECK(eval1(ops::Softplus{}, {100.f, -100.f})[0] == doctest::Approx(100.0));  // no overflow
  CHECK(eval1(ops::HardSigmoid{}, {-10.f, 0.f, 10.f}) == std::vector<float>{0, 0.5f, 1});
  CHECK(eval1(ops::HardSwish{}, {-4.f, 4.f}) == std::vector<float>{-0.f, 4});
  CHECK(eval1(ops::Selu{}, {1.f})[0] == doctest::Approx(1.0507009873554805));
  {
    auto celu = eval1(ops::Celu{.alpha = 2.f}, {-1.f, 1.f});
    CHECK(celu[0] == doctest::Approx(2.0 * (std::exp(-0.5) - 1.0)));
    CHECK(celu[1] == 1.f);
  }
  CHECK(eval1(ops::ThresholdedRelu{}, {0.5f, 1.f, 2.f}) == std::vector<float>{0, 0, 2});
  CHECK(eval1(ops::Shrink{.bias = 1.f, .lambd = 1.5f}, {-2.f, 0.f, 1.5f, 2.f}) == std::vector<float>{-1, 0, 0, 1});

  for (Op op : {Op(ops::Max{}), Op(ops::Min{}), Op(ops::PRelu{})}) {
    CAPTURE(op_name(op));
    check_fast_vs_formula(op, {f32({2, 3, 4}), f32({3, 1})}, seed++);
    CHECK(out_shape(op, {f32({2, 1, 4}), f32({3, 1})}) == Shape{2, 3, 4});
    CHECK_THROWS_WITH_AS(infer(op, {f32({2, 3}), f32({4})}), doctest::Contains("cannot be broadcast"), InvalidInput);
  }
  {
    auto [r, out] = resolve(ops::Max{}, {f32({3}), f32({3})});
    std::vector<Value<float>> in{Tensor<float>({3}, {1.f, NAN, -2.f}), Tensor<float>({3}, {NAN, 5.f, -3.f})};
    auto y = std::get<Tensor<float>>(evaluate_op<float>(r, in, out)[0]).vec();
    CHECK((std::isnan(y[0]) && std::isnan(y[1]) && y[2] == -2.f));  // NaN propagates, as in numpy and ONNX Runtime
  }
  using R = ops::ReduceMin;
  std::vector<Op> reds = {R{{.axes = {1}}}, ops::ReduceProd{{.axes = {0, 2}, .keepdims = false}}, ops::ReduceL1{{.axes = {2}}},
                          ops::ReduceL2{{.axes = {1, 2}}}, ops::ReduceSumSquare{{.axes = {0}}}, ops::ReduceLogSumExp{{.axes = {2}}}};
  for (const Op& op : reds) {
    CAPTURE(op_name(op));
    check_fast_vs_formula(op, {f32({2, 3, 4})}, seed++, InputSpec{.lo = -2, .hi = 2});
    CHECK_THROWS_WITH_AS(infer(op, {TensorType{DType::Bool, {2}}}), doctest::Contains("does not take bool input"), InvalidInput);
  }
  CHECK(out_shape(ops::ReduceProd{{.axes = {0, 2}, .keepdims = false}}, {f32({2, 3, 4})}) == Shape{3});
  CHECK(out_shape(ops::ReduceL2{{.axes = {1}}}, {f32({2, 3, 4})}) == Shape{2, 1, 4});
  for (Op op : {Op(ops::ArgMax{{.axis = 1}}), Op(ops::ArgMin{{.axis = -1, .keepdims = false}}), Op(ops::ArgMax{{.axis = 0, .select_last_index = true}})}) {
    CAPTURE(op_name(op));
    auto [r, out] = resolve(op, {f32({2, 3, 4})});
    CHECK(out[0].dtype == DType::Int64);
    check_fast_vs_formula(op, {f32({2, 3, 4})}, seed++);
  }
  CHECK(out_shape(ops::ArgMax{{.axis = 1}}, {f32({2, 3, 4})}) == Shape{2, 1, 4});
  CHECK(out_shape(ops::ArgMin{{.axis = -1, .keepdims = false}}, {f32({2, 3, 4})}) == Shape{2, 3});
  {
    auto [r, out] = resolve(ops::ArgMax{{.axis = 0, .keepdims = false}}, {f32({4})});
    std::vector<Value<float>> ties{Tensor<float>({4}, {1.f, 3.f, 3.f, 2.f})};
    CHECK(std::get<Tensor<int64_t>>(evaluate_op<float>(r, ties, out)[0])[0] == 1);
    auto [rl, outl] = resolve(ops::ArgMax{{.axis = 0, .keepdims = false, .select_last_index = true}}, {f32({4})});
    CHECK(std::get<Tensor<int64_t>>(evaluate_op<float>(rl, ties, outl)[0])[0] == 2);
  }
  check_fast_vs_formula(ops::Tile{.repeats = {2, 1, 3}}, {f32({2, 3, 4})}, seed++);
  CHECK(out_shape(ops::Tile{.repeats = {2, 1, 3}}, {f32({2, 3, 4})}) == Shape{4, 3, 12});
  CHECK_THROWS_WITH_AS(infer(ops::Tile{.repeats = {2}}, {f32({2, 3})}), doctest::Contains("one value per input dim"), InvalidInput);
  check_fast_vs_formula(ops::InstanceNormalization{}, {f32({2, 3, 4, 5}), f32({3}), f32({3})}, seed++);
  CHECK_THROWS_WITH_AS(infer(ops::InstanceNormalization{}, {f32({2, 3, 4}), f32({4}), f32({3})}),
                       doctest::Contains("scale must have shape [3] (the channels)"), InvalidInput);
  {  // ConvTranspose: x = [1, 2], W = [1, 1, 1]: stride 1 -> [1, 3, 3, 2]; stride 2 -> [1, 1, 3, 2, 2]
    std::vector<Value<float>> in{Tensor<float>({1, 1, 2}, {1.f, 2.f}), Tensor<float>({1, 1, 3}, {1.f, 1.f, 1.f})};
    auto [t1, o1] = resolve(ops::ConvTranspose{}, {f32({1, 1, 2}), f32({1, 1, 3})});
    CHECK(std::get<Tensor<float>>(evaluate_op<float>(t1, in, o1)[0]).vec() == std::vector<float>{1, 3, 3, 2});
    auto [t2, o2] = resolve(ops::ConvTranspose{.strides = {2}}, {f32({1, 1, 2}), f32({1, 1, 3})});
    CHECK(std::get<Tensor<float>>(evaluate_op<float>(t2, in, o2)[0]).vec() == std::vector<float>{1, 1, 3, 2, 2});
    auto [t3, o3] = resolve(ops::ConvTranspose{.strides = {2}, .pads = {1, 0}, .output_padding = {1}}, {f32({1, 1, 2}), f32({1, 1, 3})});
    CHECK(std::get<Tensor<float>>(evaluate_op<float>(t3, in, o3)[0]).vec() == std::vector<float>{1, 3, 2, 2, 0});
  }
  CHECK(out_shape(ops::ConvTranspose{.strides = {2, 2}, .pads = {1, 1, 1, 1}, .output_padding = {1, 1}, .group = 2},
                  {f32({1, 4, 5, 5}), f32({4, 3, 3, 3})}) == Shape{1, 6, 10, 10});
  check_fast_vs_formula(ops::ConvTranspose{.strides = {2, 1}, .dilations = {1, 2}, .group = 2}, {f32({2, 4, 3, 4}), f32({4, 3, 2, 3}), f32({6})}, seed++);
  // the GEMM + col2im kernel: pads cutting taps off both ends, output padding, 1-D and 3-D
  check_fast_vs_formula(ops::ConvTranspose{.strides = {3}, .pads = {2, 1}, .output_padding = {2}}, {f32({2, 3, 7}), f32({3, 2, 5})}, seed++);
  check_fast_vs_formula(ops::ConvTranspose{.strides = {2, 2}, .pads = {1, 1, 1, 1}, .output_padding = {1, 1}, .group = 3},
                        {f32({1, 6, 4, 5}), f32({6, 2, 3, 3}), f32({6})}, seed++);
  check_fast_vs_formula(ops::ConvTranspose{.strides = {1, 2, 2}, .pads = {1, 0, 1, 0, 1, 0}, .dilations = {2, 1, 1}},
                        {f32({1, 2, 3, 4, 3}), f32({2, 3, 2, 3, 2}), f32({3})}, seed++);
  {  // output_shape and auto_pad become explicit pads (ONNX's formula); the op is then as given
    auto [t, o] = resolve(ops::ConvTranspose{.strides = {3, 2}, .output_padding = {1, 1}, .output_shape = {10, 8}}, {f32({1, 1, 3, 3}), f32({1, 2, 3, 3})});
    CHECK(o[0].shape == Shape{1, 2, 10, 8});
    CHECK(std::get<ops::ConvTranspose>(t).pads == std::vector<int64_t>{0, 0, 0, 0});
    auto [u, uo] = resolve(ops::ConvTranspose{.strides = {2, 2}, .auto_pad = AutoPad::SameUpper}, {f32({1, 1, 3, 3}), f32({1, 2, 3, 3})});
    CHECK(uo[0].shape == Shape{1, 2, 6, 6});
    CHECK(std::get<ops::ConvTranspose>(u).pads == std::vector<int64_t>{0, 0, 1, 1});  // total 1: the larger half at the end
    auto [l, lo] = resolve(ops::ConvTranspose{.strides = {2, 2}, .auto_pad = AutoPad::SameLower}, {f32({1, 1, 3, 3}), f32({1, 2, 3, 3})});
    CHECK(std::get<ops::ConvTranspose>(l).pads == std::vector<int64_t>{1, 1, 0, 0});
    const Types again{f32({1, 1, 3, 3}), f32({1, 2, 3, 3})};
    CHECK(infer_types(t, again)[0].shape == Shape{1, 2, 10, 8});  // inferring again keeps it
    auto [p, po] = resolve(ops::ConvTranspose{.strides = {3}, .output_shape = {8}}, {f32({1, 1, 2}), f32({1, 1, 3})});  // 6 made, 2 more
    CHECK(po[0].shape == Shape{1, 1, 8});
    CHECK(std::get<ops::ConvTranspose>(p).output_padding == std::vector<int64_t>{2});
    CHECK_THROWS_WITH_AS(infer(ops::ConvTranspose{.output_shape = {9}}, {f32({1, 1, 3}), f32({1, 1, 3})}),
                         doctest::Contains("is more than the stride beyond what the transposed conv makes (5)"), Unsupported);
    CHECK_THROWS_WITH_AS(infer(ops::ConvTranspose{.pads = {1, 1}, .output_shape = {3}}, {f32({1, 1, 3}), f32({1, 1, 3})}), doctest::Contains("give one of them"),
                         InvalidInput);
  }
  CHECK_THROWS_WITH_AS(infer(ops::ConvTranspose{}, {f32({1, 3, 4, 4}), f32({4, 2, 3, 3})}), doctest::Contains("input has 3 channels but weight shape"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::ConvTranspose{.strides = {2}, .output_padding = {2}}, {f32({1, 1, 4}), f32({1, 1, 3})}),
                       doctest::Contains("must be below the stride"), InvalidInput);
  // (fuzz_import: output_padding INT64_MIN with output_shape overflowed the pads' arithmetic)
  CHECK_THROWS_WITH_AS(infer(ops::ConvTranspose{.strides = {3, 2}, .output_padding = {INT64_MIN, 1}, .output_shape = {10, 8}},
                             {f32({1, 1, 3, 3}), f32({1, 2, 3, 3})}),
                       doctest::Contains("output_padding [-9223372036854775808,1] has a value beyond +-2^24"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::ConvTranspose{.strides = {3, 2}, .output_shape = {-9223372036854775799, 8}}, {f32({1, 1, 3, 3}), f32({1, 2, 3, 3})}),
                       doctest::Contains("output_shape [-9223372036854775799,8] has a value beyond +-2^24"), InvalidInput);
  auto [lse, lo] = resolve(ops::ReduceLogSumExp{{.axes = {0}}}, {f32({2})});
  std::vector<Value<float>> big{Tensor<float>({2}, {1000.f, 1000.f})};
  CHECK(std::get<Tensor<float>>(evaluate_op<float>(lse, big, lo)[0])[0] == doctest::Approx(1000.0 + std::log(2.0)));  // no overflow
}

TEST_CASE("Einsum: numpy's equations, implicit output, ellipsis broadcast, diagonal, float vs field, errors") {
  uint64_t seed = 900;
  struct Case {
    const char* eq;
    Types in;
    Shape out;
  };
  for (const Case& c : std::vector<Case>{{"ij,jk->ik", {f32({3, 4}), f32({4, 5})}, {3, 5}},
                                         {"bij,bjk->bik", {f32({2, 3, 4}), f32({2, 4, 5})}, {2, 3, 5}},
                                         {"bhid,bhjd->bhij", {f32({2, 2, 3, 4}), f32({2, 2, 5, 4})}, {2, 2, 3, 5}},
                                         {"...ij,...jk", {f32({2, 1, 3, 4}), f32({3, 4, 2})}, {2, 3, 3, 2}},
                                         {"i,i", {f32({5}), f32({5})}, {}},
                                         {"i,j->ij", {f32({3}), f32({4})}, {3, 4}},
                                         {"ij->ji", {f32({3, 4})}, {4, 3}},
                                         {"ji", {f32({3, 4})}, {4, 3}},
                                         {"ij->i", {f32({3, 4})}, {3}},
                                         {"ii->i", {f32({4, 4})}, {4}},
                                         {"ij,jk,kl->il", {f32({2, 3}), f32({3, 4}), f32({4, 2})}, {2, 2}},
                                         {"bn,anm,bm->ba", {f32({2, 3}), f32({4, 3, 5}), f32({2, 5})}, {2, 4}},
                                         {"Ab,b", {f32({2, 3}), f32({3})}, {2}}}) {
    CAPTURE(c.eq);
    CHECK(out_shape(ops::Einsum{.equation = c.eq}, c.in) == c.out);
    check_op(ops::Einsum{.equation = c.eq}, c.in, seed++);
  }
  {  // exact: ij,jk->ik is MatMul; ii->i the diagonal
    std::vector<Value<float>> in{Tensor<float>({2, 2}, {1, 2, 3, 4}), Tensor<float>({2, 2}, {5, 6, 7, 8})};
    auto [e, o] = resolve(ops::Einsum{.equation = "ij,jk->ik"}, {f32({2, 2}), f32({2, 2})});
    CHECK(std::get<Tensor<float>>(evaluate_op<float>(e, in, o)[0]).vec() == std::vector<float>{19, 22, 43, 50});
    auto [d, od] = resolve(ops::Einsum{.equation = "ii->i"}, {f32({2, 2})});
    std::vector<Value<float>> one{in[0]};
    CHECK(std::get<Tensor<float>>(evaluate_op<float>(d, one, od)[0]).vec() == std::vector<float>{1, 4});
  }
  CHECK_THROWS_WITH_AS(infer(ops::Einsum{.equation = "ij,jk->ik"}, {f32({3, 4})}), doctest::Contains("2 input terms for 1 inputs"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::Einsum{.equation = "ij,jk->ik"}, {f32({3, 4}), f32({5, 6})}), doctest::Contains("has size 5 but the same label has size 4"),
                       InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::Einsum{.equation = "ij->ik"}, {f32({3, 4})}), doctest::Contains("output label 'k' is in no input term"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::Einsum{.equation = "ij->ii"}, {f32({3, 3})}), doctest::Contains("output label 'i' is repeated"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::Einsum{.equation = "i1->i"}, {f32({3, 3})}), doctest::Contains("'1' in input term 0 is not a letter"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::Einsum{.equation = "ijk->i"}, {f32({3, 3})}), doctest::Contains("does not fit input 0 of rank 2"), InvalidInput);
}

TEST_CASE("Resize: coordinate modes, nearest rounding, N-linear, shapes from scales or sizes, errors") {
  using R = ops::Resize;
  auto run = [](R op, Shape xs, std::vector<float> x) {
    auto [r, out] = resolve(op, {f32(xs)});
    std::vector<Value<float>> in{Tensor<float>(xs, x)};
    return std::get<Tensor<float>>(evaluate_op<float>(r, in, out)[0]).vec();
  };
  const std::vector<float> x{1, 2, 3, 4};
  // ONNX's reference (onnx/reference/ops/op_resize.py) on [1, 2, 3, 4] (shape [1, 4]) to 8 columns:
  CHECK(run(R{.mode = R::Mode::Nearest, .scales = {1, 2}}, {1, 4}, x) == std::vector<float>{1, 1, 2, 2, 3, 3, 4, 4});
  CHECK(run(R{.mode = R::Mode::Linear, .scales = {1, 2}}, {1, 4}, x) ==
        std::vector<float>{1, 1.25f, 1.75f, 2.25f, 2.75f, 3.25f, 3.75f, 4});
  CHECK(run(R{.mode = R::Mode::Linear, .coord = R::Coord::AlignCorners, .sizes = {1, 7}}, {1, 4}, x) ==
        std::vector<float>{1, 1.5f, 2, 2.5f, 3, 3.5f, 4});
  CHECK(run(R{.mode = R::Mode::Linear, .coord = R::Coord::Asymmetric, .scales = {1, 2}}, {1, 4}, x) ==
        std::vector<float>{1, 1.5f, 2, 2.5f, 3, 3.5f, 4, 4});
  // Downsampling by 2: half_pixel maps to 0.5 and 2.5, ties rounded down (default) or up.
  CHECK(run(R{.scales = {1, 0.5}}, {1, 4}, x) == std::vector<float>{1, 3});
  CHECK(run(R{.nearest_mode = R::Round::PreferCeil, .scales = {1, 0.5}}, {1, 4}, x) == std::vector<float>{2, 4});
  CHECK(run(R{.coord = R::Coord::Asymmetric, .nearest_mode = R::Round::Floor, .scales = {1, 0.5}}, {1, 4}, x) == std::vector<float>{1, 3});
  CHECK(run(R{.coord = R::Coord::AlignCorners, .nearest_mode = R::Round::Ceil, .sizes = {1, 3}}, {1, 4}, x) == std::vector<float>{1, 3, 4});
  CHECK(run(R{.mode = R::Mode::Linear, .coord = R::Coord::PytorchHalfPixel, .sizes = {1, 1}}, {1, 4}, x) == std::vector<float>{1});
  // Bilinear on 2 x 2 -> 4 x 4 (half_pixel): the corners stay, the middle is the mean.
  auto b = run(R{.mode = R::Mode::Linear, .scales = {2, 2}}, {2, 2}, x);
  CHECK(b.size() == 16);
  CHECK(b[0] == 1);
  CHECK(b[15] == 4);
  CHECK(b[5] == doctest::Approx(1.75));  // (0.75 * 0.75) 1 + (0.75 * 0.25) (2 + 3) + 0.0625 4
  CHECK(out_shape(R{.scales = {1, 1, 1.5, 2.5}}, {f32({1, 3, 5, 5})}) == Shape{1, 3, 7, 12});
  CHECK(out_shape(R{.sizes = {8}, .axes = {-1}}, {f32({1, 3, 5, 5})}) == Shape{1, 3, 5, 8});
  uint64_t seed = 950;
  // Cubic (Keys, a = -0.75) at integer coordinates is the identity; on 1..4 (asymmetric) the
  // middle of 2 and 3 is 2.5 by symmetry.
  auto cu = run(R{.mode = R::Mode::Cubic, .coord = R::Coord::Asymmetric, .scales = {1, 2}}, {1, 4}, x);
  CHECK(cu[0] == 1);
  CHECK(cu[2] == 2);
  CHECK(cu[3] == doctest::Approx(2.5));
  auto cx = run(R{.mode = R::Mode::Cubic, .exclude_outside = true, .scales = {1, 2}}, {1, 4}, x);
  CHECK(cx.size() == 8);
  for (R op : {R{.mode = R::Mode::Cubic, .scales = {1, 1, 2, 3}}, R{.mode = R::Mode::Cubic, .cubic_coeff_a = -0.5f, .exclude_outside = true, .scales = {1, 1, 0.8, 1.3}},
               R{.mode = R::Mode::Linear, .scales = {1, 1, 2, 3}}, R{.mode = R::Mode::Linear, .coord = R::Coord::HalfPixelSymmetric, .scales = {1, 1, 1.7, 0.6}},
               R{.coord = R::Coord::Asymmetric, .nearest_mode = R::Round::Ceil, .sizes = {2, 3, 3, 9}}})
    check_fast_vs_formula(op, {f32({2, 3, 4, 5})}, seed++);
  // The table kernel sums the formula's products in the formula's order: its float result
  // to the last bit or two (the compiler fuses some multiply-adds in one and not the other),
  // nearest exactly; for every mode, coordinate mode and rounding, up and down, on ranks 1
  // to 5, resizing outer dims too, tf_crop_and_resize with points outside the input.
  {
    Rng rng(seed++);
    int cases = 0;
    for (auto mode : {R::Mode::Nearest, R::Mode::Linear, R::Mode::Cubic})
      for (auto coord : {R::Coord::HalfPixel, R::Coord::HalfPixelSymmetric, R::Coord::PytorchHalfPixel, R::Coord::AlignCorners, R::Coord::Asymmetric,
                         R::Coord::TfHalfPixelForNN, R::Coord::TfCropAndResize})
        for (int shape = 0; shape < 4; ++shape) {
          const std::vector<Shape> xs = {{9}, {2, 3, 5, 7}, {1, 2, 3, 4, 5}, {3, 4, 6}};
          const std::vector<std::vector<double>> sc = {{2.5}, {1, 1, 2, 0.6}, {1, 1, 1.5, 2, 0.7}, {2, 0.5, 3}};
          R op{.mode = mode, .coord = coord, .scales = sc[size_t(shape)]};
          op.nearest_mode = std::array{R::Round::PreferFloor, R::Round::PreferCeil, R::Round::Floor, R::Round::Ceil}[size_t(shape)];
          op.exclude_outside = shape % 2 == 1;
          if (coord == R::Coord::TfCropAndResize) {
            const size_t r = xs[size_t(shape)].size();
            // odd dims reach outside the input; even ones crop inside it where that leaves an extent
            auto inside = [&](size_t d) { return double(xs[size_t(shape)][d]) * 0.8 * sc[size_t(shape)][d] >= 1; };
            for (size_t d = 0; d < r; ++d) op.roi.push_back(d % 2 ? -0.2 : inside(d) ? 0.1 : 0.0);
            for (size_t d = 0; d < r; ++d) op.roi.push_back(d % 2 ? 1.3 : inside(d) ? 0.9 : 1.0);
            op.extrapolation_value = 7.f;
          }
          auto [rop, out] = resolve(op, {f32(xs[size_t(shape)])});
          auto in = random_inputs({f32(xs[size_t(shape)])}, rng, {});
          auto fast = std::get<Tensor<float>>(evaluate_op<float>(rop, in, out)[0]).vec();
          auto slow = std::get<Tensor<float>>(evaluate_by_formula<float>(rop, in, out)[0]).vec();
          REQUIRE(fast.size() == slow.size());
          float worst = 0, scale = 0;
          for (size_t i = 0; i < fast.size(); ++i) worst = std::max(worst, std::abs(fast[i] - slow[i])), scale = std::max(scale, std::abs(slow[i]));
          INFO("mode ", int(mode), " coord ", int(coord), " shape ", xs[size_t(shape)], ": max difference ", worst, " of max ", scale);
          if (mode == R::Mode::Nearest) CHECK(fast == slow);
          else CHECK(worst <= 4e-7f * scale);
          ++cases;
        }
    CHECK(cases == 84);
  }
  // Dims of scale 1 read their own position (ONNX Runtime skips them): tf_half_pixel_for_nn
  // with ceil maps o to ceil(o + 0.5) = o + 1 by the formula, which would shift the rows.
  // ONNX Runtime 1.20.1 on x = 0..24 as [1, 5, 5], scales [1, 1, 2]: row 0 is 1 1 2 2 3 3 4 4 4 4.
  {
    std::vector<float> x25(25);
    for (int i = 0; i < 25; ++i) x25[size_t(i)] = float(i);
    for (auto round : {R::Round::Ceil, R::Round::PreferCeil}) {
      auto y = run(R{.coord = R::Coord::TfHalfPixelForNN, .nearest_mode = round, .scales = {1, 1, 2}}, {1, 5, 5}, x25);
      REQUIRE(y.size() == 50);
      const std::vector<float> row0(y.begin(), y.begin() + 10), row4(y.begin() + 40, y.end());
      CHECK(row0 == (round == R::Round::Ceil ? std::vector<float>{1, 1, 2, 2, 3, 3, 4, 4, 4, 4} : std::vector<float>{0, 1, 1, 2, 2, 3, 3, 4, 4, 4}));
      CHECK(row4[0] == (round == R::Round::Ceil ? 21.f : 20.f));
    }
  }
  CHECK_THROWS_WITH_AS(infer(R{}, {f32({2, 3})}), doctest::Contains("needs scales or sizes"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(R{.scales = {1, 0}}, {f32({2, 3})}), doctest::Contains("must be positive"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(R{.sizes = {2}}, {f32({2, 3})}), doctest::Contains("sizes has 1 values for an input of rank 2"), InvalidInput);
  auto [r, out] = resolve(R{.scales = {1, 2}}, {f32({1, 2})});
  std::vector<Value<F31>> in{Tensor<F31>({1, 2}, F31(1))};
  CHECK_THROWS_AS(evaluate_op<F31>(r, in, out), Unsupported);
}

TEST_CASE("Where, Cast, Identity, Dropout") {
  Types t{TensorType{DType::Bool, {2, 1}}, f32({3}), f32({2, 3})};
  CHECK(out_shape(ops::Where{}, t) == Shape{2, 3});
  check_fast_vs_formula(ops::Where{}, t, 600);
  CHECK_THROWS_WITH_AS(infer(ops::Where{}, {f32({2}), f32({2}), f32({2})}), "Where 'n': condition must be bool, got float32",
                       InvalidInput);

  auto [cast, out] = resolve(ops::Cast{.to = DType::Int64}, {f32({4})});
  std::vector<Value<float>> in{Tensor<float>({4}, {1.7f, -1.7f, 0.0f, 3.0f})};
  CHECK(std::get<Tensor<int64_t>>(evaluate_op<float>(cast, in, out)[0]).vec() == std::vector<int64_t>{1, -1, 0, 3});
  auto [tobool, outb] = resolve(ops::Cast{.to = DType::Bool}, {f32({4})});
  CHECK(outb[0].dtype == DType::Bool);
  CHECK(std::get<Tensor<int64_t>>(evaluate_op<float>(tobool, in, outb)[0]).vec() == std::vector<int64_t>{1, 1, 0, 1});

  // a Cast to float16 or bfloat16 (held as float32): rounded to the type, ties to even,
  // overflow to infinity; not over a finite field (rounding is not a field operation)
  const float inf = std::numeric_limits<float>::infinity();
  auto [half, outh] = resolve(ops::Cast{.narrow = kFloat16}, {f32({6})});
  CHECK(outh[0].dtype == DType::Float32);
  std::vector<Value<float>> hin{Tensor<float>({6}, {1 + std::ldexp(1.f, -11), 1 + 3 * std::ldexp(1.f, -11), 1e5f, -65520.f, 3e-8f, 0.1f})};
  CHECK(std::get<Tensor<float>>(evaluate_op<float>(half, hin, outh)[0]).vec() ==
        std::vector<float>{1.f, 1 + std::ldexp(1.f, -9), inf, -inf, std::ldexp(1.f, -24), 0.0999755859375f});
  std::vector<Value<double>> hind{Tensor<double>({6}, {1 + std::ldexp(1., -11), 1 + 3 * std::ldexp(1., -11), 1e5, -65520., 3e-8, 0.1})};
  CHECK(std::get<Tensor<double>>(evaluate_op<double>(half, hind, outh)[0]).vec() ==
        std::vector<double>{1., 1 + std::ldexp(1., -9), inf, -inf, std::ldexp(1., -24), 0.0999755859375});
  auto [bf, outbf] = resolve(ops::Cast{.narrow = kBFloat16}, {TensorType{DType::Int64, {3}}});
  std::vector<Value<float>> bin{Tensor<int64_t>({3}, std::vector<int64_t>{257, 259, -1000})};
  CHECK(std::get<Tensor<float>>(evaluate_op<float>(bf, bin, outbf)[0]).vec() == std::vector<float>{256.f, 260.f, -1000.f});
  std::vector<Value<F31>> fin{Tensor<F31>({6}, F31(3))};
  CHECK_THROWS_WITH_AS(evaluate_op<F31>(half, fin, outh), doctest::Contains("Cast is not multilinear and cannot be evaluated over a finite field"), Unsupported);
  CHECK_THROWS_WITH_AS(infer(ops::Cast{.narrow = 11}, {f32({2})}), "Cast 'n': narrow must be 0, 10 (float16) or 16 (bfloat16), got 11", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::Cast{.to = DType::Int32, .narrow = kFloat16}, {f32({2})}),
                       "Cast 'n': a Cast to float16 gives float32, not int32", InvalidInput);
  check_fast_vs_formula(ops::Cast{.narrow = kFloat16}, {f32({3, 5})}, 604);

  check_op(ops::Identity{}, {f32({2, 3})}, 601);
  check_op(ops::Dropout{.num_outputs = 2}, {f32({2, 3})}, 602);
  CHECK(infer(ops::Dropout{.num_outputs = 2}, {f32({2, 3})})[1].dtype == DType::Bool);
  CHECK_THROWS_WITH_AS(infer(ops::Dropout{.ratio = 0.5f, .training_mode = true}, {f32({2})}),
                       "Dropout 'n': training mode with ratio 0.5 draws random numbers; pet executes inference graphs", Unsupported);
  check_op(ops::Dropout{.ratio = 0.0f, .training_mode = true}, {f32({2, 3})}, 603);
}

TEST_CASE("pools: ceil_mode, pads, strides, dilations, count_include_pad, 1-D and 3-D") {
  struct C {
    Op op;
    Shape x, out;
  };
  std::vector<C> cases = {
      {MaxPool{{.kernel_shape = {3, 3}, .strides = {2, 2}, .ceil_mode = true}}, {1, 2, 4, 4}, {1, 2, 2, 2}},
      {MaxPool{{.kernel_shape = {3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}}}, {1, 2, 7, 7}, {1, 2, 4, 4}},
      {MaxPool{{.kernel_shape = {2, 2}, .dilations = {2, 2}}}, {1, 1, 5, 5}, {1, 1, 3, 3}},
      {MaxPool{{.kernel_shape = {2}}}, {1, 3, 7}, {1, 3, 6}},
      {MaxPool{{.kernel_shape = {2, 2, 2}, .strides = {2, 2, 2}}}, {1, 2, 4, 5, 6}, {1, 2, 2, 2, 3}},
      {MaxPool{{.kernel_shape = {3, 3}, .strides = {2, 2}, .auto_pad = AutoPad::SameUpper}}, {1, 1, 5, 5}, {1, 1, 3, 3}},
      {AveragePool{{.kernel_shape = {3, 3}, .strides = {2, 2}, .ceil_mode = true}}, {1, 2, 6, 6}, {1, 2, 3, 3}},
      {AveragePool{{.kernel_shape = {3, 3}, .pads = {1, 0, 2, 1}}}, {1, 2, 5, 5}, {1, 2, 6, 4}},
      {AveragePool{{.kernel_shape = {3, 3}, .pads = {1, 1, 1, 1}}, true}, {1, 2, 5, 5}, {1, 2, 5, 5}},
      {AveragePool{{.kernel_shape = {3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}, .ceil_mode = true}, true}, {1, 1, 6, 6}, {1, 1, 4, 4}},
      {AveragePool{{.kernel_shape = {2, 3, 2}}}, {1, 1, 3, 4, 5}, {1, 1, 2, 2, 4}},
      {ops::GlobalAveragePool{}, {2, 3, 4, 5}, {2, 3, 1, 1}},
      {ops::GlobalAveragePool{}, {1, 2, 3, 4, 2}, {1, 2, 1, 1, 1}},
  };
  uint64_t seed = 700;
  for (const auto& c : cases) {
    CAPTURE(op_name(c.op));
    CAPTURE(c.x);
    CHECK(out_shape(c.op, {f32(c.x)}) == c.out);
    check_op(c.op, {f32(c.x)}, seed++);
  }
  // ceil_mode as ONNX (and ONNX Runtime 1.20) compute it: the last window may start past the
  // input and the begin padding; with count_include_pad the divisor is the whole window.
  // Values of x = 1..n as ONNX Runtime gives them.
  auto pool1d = [](Op op, int64_t n) {
    auto [o, out] = resolve(op, {f32({1, 1, n})});
    Tensor<float> x({1, 1, n});
    for (int64_t i = 0; i < n; ++i) x[i] = float(i + 1);
    std::vector<Value<float>> in{x};
    return std::get<Tensor<float>>(evaluate_op<float>(o, in, out)[0]).vec();
  };
  using V = std::vector<float>;
  for (bool include : {false, true})
    CHECK(pool1d(AveragePool{{.kernel_shape = {2}, .strides = {3}, .pads = {0, 1}, .ceil_mode = true}, include}, 5) == V{1.5f, 4.5f, 0.f});
  CHECK(pool1d(MaxPool{{.kernel_shape = {2}, .strides = {3}, .pads = {0, 1}, .ceil_mode = true}}, 5) ==
        V{2.f, 5.f, std::numeric_limits<float>::lowest()});
  CHECK(pool1d(AveragePool{{.kernel_shape = {3}, .strides = {2}, .pads = {1, 1}, .ceil_mode = true}, true}, 10) ==
        V{1.f, 3.f, 5.f, 7.f, 9.f, 10.f / 3.f});
  CHECK(pool1d(AveragePool{{.kernel_shape = {3}, .strides = {2}, .pads = {1, 1}, .ceil_mode = true}, false}, 10) ==
        V{1.5f, 3.f, 5.f, 7.f, 9.f, 10.f});
  CHECK(pool1d(MaxPool{{.kernel_shape = {2}, .pads = {1, 1}, .dilations = {2}}}, 1) == V{std::numeric_limits<float>::lowest()});
  // MaxPool's Indices output (row-major flat positions in X).
  MaxPool mp{{.kernel_shape = {2, 2}, .strides = {2, 2}}};
  mp.num_outputs = 2;
  auto [op, out] = resolve(mp, {f32({1, 1, 2, 4})});
  std::vector<Value<float>> in{Tensor<float>({1, 1, 2, 4}, {1, 9, 3, 4, 5, 6, 8, 7})};
  auto y = evaluate_op<float>(op, in, out);
  CHECK(std::get<Tensor<float>>(y[0]).vec() == std::vector<float>{9, 8});
  CHECK(std::get<Tensor<int64_t>>(y[1]).vec() == std::vector<int64_t>{1, 6});
  CHECK_THROWS_WITH_AS(infer(MaxPool{{.kernel_shape = {3}}}, {f32({1, 1, 5, 5})}),
                       "MaxPool 'n': kernel_shape [3] must have 2 values for input shape [1,1,5,5]", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(AveragePool{{.kernel_shape = {6, 6}}}, {f32({1, 1, 5, 5})}),
                       "AveragePool 'n': output would be empty for input [1,1,5,5] and kernel [6,6]", InvalidInput);
}

TEST_CASE("BatchNormalization, LayerNormalization, Softmax") {
  Types bn{f32({2, 3, 4, 5}), f32({3}), f32({3}), f32({3}), f32({3})};
  check_fast_vs_formula(ops::BatchNormalization{}, bn, 800, {.lo = 0.1, .hi = 2});
  check_fast_vs_formula(ops::BatchNormalization{.training_mode = true, .num_outputs = 3}, bn, 801, {.lo = 0.1, .hi = 2});
  CHECK_THROWS_WITH_AS(infer(ops::BatchNormalization{}, {f32({2, 3, 4}), f32({3}), f32({4}), f32({3}), f32({3})}),
                       "BatchNormalization 'n': B has shape [4] but X has 3 channels", InvalidInput);

  for (int64_t axis : {-1, 1, 0, -3}) {
    ops::LayerNormalization ln{.axis = axis, .num_outputs = 3};
    check_fast_vs_formula(ln, {f32({2, 3, 4}), f32({4}), f32({4})}, 810 + uint64_t(axis + 3));
  }
  check_fast_vs_formula(ops::LayerNormalization{.axis = 1}, {f32({2, 3, 4}), f32({3, 1})}, 815);
  CHECK(infer(ops::LayerNormalization{.axis = 1, .num_outputs = 2}, {f32({2, 3, 4}), f32({3, 4})})[1].shape == Shape{2, 1, 1});
  CHECK_THROWS_WITH_AS(infer(ops::LayerNormalization{}, {f32({2, 3, 4}), f32({3})}),
                       "LayerNormalization 'n': Scale of shape [3] does not broadcast to the normalised shape [4]", InvalidInput);

  for (int64_t axis : {-1, 0, 1, 2}) {
    check_fast_vs_formula(ops::Softmax{{.axis = axis}}, {f32({2, 3, 4})}, 820 + uint64_t(axis + 1), {.lo = -5, .hi = 5});
    check_fast_vs_formula(ops::Softmax{{.axis = axis, .flatten_tail = true}}, {f32({2, 3, 4})}, 830 + uint64_t(axis + 1));
  }
  CHECK_THROWS_WITH_AS(infer(ops::Softmax{{.axis = 3}}, {f32({2, 3, 4})}), "Softmax 'n': axis: axis 3 is out of range for rank 3",
                       InvalidInput);
}

TEST_CASE("reductions: axes, keepdims, empty axes") {
  uint64_t seed = 900;
  for (Op op : {Op(ops::ReduceSum{}), Op(ops::ReduceMean{}), Op(ops::ReduceMax{})}) {
    auto with = [&](std::vector<int64_t> axes, bool keep) {
      return std::visit([&](auto o) -> Op {
        if constexpr (requires { o.axes; o.keepdims; }) {
          o.axes = axes;
          o.keepdims = keep;
        }
        return o;
      }, op);
    };
    CHECK(out_shape(with({1}, true), {f32({2, 3, 4})}) == Shape{2, 1, 4});
    CHECK(out_shape(with({-1, 0}, false), {f32({2, 3, 4})}) == Shape{3});
    CHECK(out_shape(with({}, true), {f32({2, 3, 4})}) == Shape{1, 1, 1});
    check_op(with({1}, true), {f32({2, 3, 4})}, seed++);
    check_op(with({0, 2}, false), {f32({2, 3, 4})}, seed++);
    check_op(with({}, false), {f32({2, 3})}, seed++);
  }
  ops::ReduceSum noop{{.noop_with_empty_axes = true}};
  CHECK(out_shape(noop, {f32({2, 3})}) == Shape{2, 3});
  CHECK_THROWS_WITH_AS(infer(ops::ReduceSum{{.axes = {1, -1}}}, {f32({2, 3})}), "ReduceSum 'n': axes: axis -1 is repeated in [1,-1]",
                       InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::ReduceMax{{.axes = {0}}}, {f32({0, 3})}), "ReduceMax 'n': cannot reduce the empty dimension 0 of shape [0,3]",
                       InvalidInput);
}

TEST_CASE("layout ops: Transpose, Reshape, Flatten, Squeeze, Unsqueeze, Expand") {
  check_op(ops::Transpose{.perm = {2, 0, 1}}, {f32({2, 3, 4})}, 1000);
  CHECK(out_shape(ops::Transpose{}, {f32({2, 3, 4})}) == Shape{4, 3, 2});
  CHECK_THROWS_WITH_AS(infer(ops::Transpose{.perm = {0, 0, 1}}, {f32({2, 3, 4})}),
                       "Transpose 'n': perm: axis 0 is repeated in [0,0,1]", InvalidInput);

  CHECK(out_shape(ops::Reshape{.shape = {0, -1}}, {f32({2, 3, 4})}) == Shape{2, 12});
  CHECK(out_shape(ops::Reshape{.shape = {4, 0, 0}, .allowzero = true}, {f32({0, 3, 4})}) == Shape{4, 0, 0});
  check_op(ops::Reshape{.shape = {3, -1, 2}}, {f32({2, 3, 4})}, 1001);
  CHECK_THROWS_WITH_AS(infer(ops::Reshape{.shape = {5, -1}}, {f32({2, 3, 4})}),
                       "Reshape 'n': cannot reshape [2,3,4] (24 elements) into [5,-1]", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::Reshape{.shape = {-1, -1}}, {f32({2, 3})}), "Reshape 'n': shape [-1,-1] has more than one -1",
                       InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::Reshape{.shape = {0, 0, 0}}, {f32({6})}),
                       "Reshape 'n': shape [0,0,0] copies dimension 1 which input [6] lacks", InvalidInput);

  CHECK(out_shape(ops::Flatten{.axis = 0}, {f32({2, 3, 4})}) == Shape{1, 24});
  CHECK(out_shape(ops::Flatten{.axis = -1}, {f32({2, 3, 4})}) == Shape{6, 4});
  check_op(ops::Flatten{.axis = 2}, {f32({2, 3, 4})}, 1002);

  CHECK(out_shape(ops::Squeeze{}, {f32({1, 3, 1, 4})}) == Shape{3, 4});
  check_op(ops::Squeeze{.axes = {-2}}, {f32({1, 3, 1, 4})}, 1003);
  CHECK_THROWS_WITH_AS(infer(ops::Squeeze{.axes = {1}}, {f32({1, 3})}), "Squeeze 'n': cannot squeeze dimension 1 of size 3 in shape [1,3]",
                       InvalidInput);
  CHECK(out_shape(ops::Unsqueeze{.axes = {0, -1}}, {f32({3, 4})}) == Shape{1, 3, 4, 1});
  check_op(ops::Unsqueeze{.axes = {1, 3}}, {f32({3, 4})}, 1004);

  CHECK(out_shape(ops::Expand{.shape = {2, 1, 4}}, {f32({3, 1})}) == Shape{2, 3, 4});
  check_op(ops::Expand{.shape = {2, 3, 4}}, {f32({3, 1})}, 1005);
  CHECK_THROWS_WITH_AS(infer(ops::Expand{.shape = {4}}, {f32({3})}),
                       "Expand 'n': input and shape: shapes [3] and [4] cannot be broadcast (dimension 0 is 3 vs 4)", InvalidInput);
}

TEST_CASE("R/T composite op equals Reshape -> Transpose -> Reshape") {
  // Regroup a 1x4x6x6 tensor by row/column parity into batch 4 (the dilated->dense layout).
  ops::RT rt{.split_shape = {1, 4, 3, 2, 3, 2}, .perm = {3, 5, 0, 1, 2, 4}, .out_shape = {4, 4, 3, 3}};
  Types in{f32({1, 4, 6, 6})};
  check_op(rt, in, 1100);
  Graph g;
  Builder b(g);
  TensorId x = b.input("x", {1, 4, 6, 6});
  TensorId a = b.add(ops::Reshape{.shape = {1, 4, 3, 2, 3, 2}}, {x});
  TensorId t = b.add(ops::Transpose{.perm = {3, 5, 0, 1, 2, 4}}, {a});
  TensorId chain = b.add(ops::Reshape{.shape = {4, 4, 3, 3}}, {t});
  TensorId one = b.add(rt, {x});
  b.output(chain);
  b.output(one);
  Rng rng(7);
  auto xs = random_inputs({f32({1, 4, 6, 6})}, rng, {});
  auto ys = Interpreter<float>(g).run(xs);
  CHECK(std::get<Tensor<float>>(ys[0]).vec() == std::get<Tensor<float>>(ys[1]).vec());
  CHECK_THROWS_WITH_AS(infer(ops::RT{.split_shape = {2, 2}, .perm = {1, 0}, .out_shape = {4}}, {f32({5})}),
                       "PetRT 'n': split shape [2,2] does not hold the 5 elements of [5]", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::RT{.split_shape = {2, 2}, .perm = {1}, .out_shape = {4}}, {f32({4})}),
                       "PetRT 'n': perm [1] has 1 entries for split shape [2,2]", InvalidInput);
}

TEST_CASE("Concat, Split, Slice, Pad, Gather") {
  CHECK(out_shape(ops::Concat{.axis = -1}, {f32({2, 3}), f32({2, 1}), f32({2, 4})}) == Shape{2, 8});
  check_op(ops::Concat{.axis = 1}, {f32({2, 3}), f32({2, 1}), f32({2, 4})}, 1200);
  CHECK_THROWS_WITH_AS(infer(ops::Concat{.axis = 1}, {f32({2, 3}), f32({3, 1})}),
                       "Concat 'n': input 1 has shape [3,1] but input 0 has [2,3] (only axis 1 may differ)", InvalidInput);

  Types sp = infer(ops::Split{.axis = 1, .split = {1, 3}, .num_outputs = 2}, {f32({2, 4})});
  CHECK(sp[0].shape == Shape{2, 1});
  CHECK(sp[1].shape == Shape{2, 3});
  CHECK(infer(ops::Split{.num_outputs = 3, .uneven = true}, {f32({7})})[2].shape == Shape{1});  // opset 18
  CHECK_THROWS_WITH_AS(infer(ops::Split{.num_outputs = 3}, {f32({7})}), doctest::Contains("does not split into 3 equal parts"), InvalidInput);
  check_op(ops::Split{.axis = 1, .split = {1, 0, 3}, .num_outputs = 3}, {f32({2, 4})}, 1201);
  CHECK_THROWS_WITH_AS(infer(ops::Split{.split = {1, 2}, .num_outputs = 2}, {f32({4})}),
                       "Split 'n': split [1,2] sums to 3 but axis 0 of [4] has size 4", InvalidInput);

  struct S {
    ops::Slice op;
    Shape x, out;
  };
  std::vector<S> slices = {
      {{.starts = {1}, .ends = {3}}, {5, 2}, {2, 2}},
      {{.starts = {-1}, .ends = {INT64_MIN}, .axes = {0}, .steps = {-1}}, {5}, {5}},  // full reverse
      {{.starts = {20}, .ends = {0}, .axes = {1}, .steps = {-2}}, {2, 7}, {2, 3}},      // clamped start
      {{.starts = {0, 1}, .ends = {INT64_MAX, -1}, .axes = {-1, 0}, .steps = {3, 1}}, {4, 8}, {2, 3}},
      {{.starts = {10}, .ends = {20}}, {5}, {0}},
  };
  uint64_t seed = 1210;
  for (const auto& s : slices) {
    CAPTURE(s.x);
    CHECK(out_shape(s.op, {f32(s.x)}) == s.out);
    check_op(s.op, {f32(s.x)}, seed++);
  }
  CHECK_THROWS_WITH_AS(infer(ops::Slice{.starts = {0}, .ends = {1}, .axes = {0}, .steps = {0}}, {f32({3})}),
                       "Slice 'n': steps [0] contain 0 or INT64_MIN", InvalidInput);

  using ops::PadMode;
  for (PadMode m : {PadMode::Constant, PadMode::Reflect, PadMode::Edge}) {
    ops::Pad p{.pads = {1, 2, 2, 0}, .mode = m, .value = m == PadMode::Constant ? 3.0 : 0.0};
    CHECK(out_shape(p, {f32({3, 4})}) == Shape{6, 6});
    check_op(p, {f32({3, 4})}, seed++);
  }
  check_op(ops::Pad{.pads = {-1, 1, 0, -2}}, {f32({3, 4})}, seed++);  // negative pads crop
  CHECK_THROWS_WITH_AS(infer(ops::Pad{.pads = {1, 1}}, {f32({3, 4})}), "Pad 'n': pads [1,1] must have 4 values for input shape [3,4]",
                       InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::Pad{.pads = {3, 0}, .mode = PadMode::Reflect}, {f32({3})}),
                       "Pad 'n': reflect pads [3,0] must be smaller than dimension 0 (3)", InvalidInput);

  CHECK(out_shape(ops::Gather{.axis = 1}, {f32({2, 5, 3}), i64({4, 2})}) == Shape{2, 4, 2, 3});
  check_fast_vs_formula(ops::Gather{.axis = 1}, {f32({2, 5, 3}), i64({4, 2})}, seed++,
                        {.ints = [](Rng& r) { return r.range(-5, 4); }});
  auto [g, out] = resolve(ops::Gather{}, {f32({3}), i64({1})});
  std::vector<Value<float>> in{Tensor<float>({3}, {1, 2, 3}), Tensor<int64_t>({1}, {3})};
  CHECK_THROWS_WITH_AS(evaluate_op<float>(g, in, out), "Gather: index 3 is out of range for axis 0 of size 3", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::Gather{}, {f32({3}), f32({1})}), "Gather 'n': indices must be int64 or int32, got float32",
                       InvalidInput);
}

TEST_CASE("Shape and Constant") {
  auto [s, out] = resolve(ops::ShapeOf{.start = 1, .end = -1}, {f32({2, 3, 4, 5})});
  std::vector<Value<float>> in{Tensor<float>({2, 3, 4, 5})};
  CHECK(std::get<Tensor<int64_t>>(evaluate_op<float>(s, in, out)[0]).vec() == std::vector<int64_t>{3, 4});
  ops::Constant c{.dtype = DType::Float32, .value = Tensor<float>({2}, {1.5f, -2.0f})};
  CHECK(out_shape(c, {}) == Shape{2});
  CHECK_THROWS_WITH_AS(infer(ops::Constant{.dtype = DType::Int64, .value = Tensor<float>({1})}, {}),
                       "Constant 'n': value storage does not match dtype int64", InvalidInput);
}

TEST_CASE("multilinear classification matches the paper's operator set") {
  for (Op op : {Op(Conv{}), Op(ops::MatMul{}), Op(ops::Gemm{}), Op(ops::Add{}), Op(ops::Sub{}), Op(ops::Mul{}), Op(ops::Neg{}),
                Op(ops::Transpose{}), Op(ops::Reshape{}), Op(ops::RT{}), Op(ops::Concat{}), Op(ops::Split{}), Op(ops::Slice{}),
                Op(ops::Pad{}), Op(AveragePool{}), Op(ops::GlobalAveragePool{}), Op(ops::ReduceSum{}), Op(ops::ReduceMean{})})
    CHECK_MESSAGE(is_multilinear(op), op_name(op));
  for (Op op : {Op(ops::Relu{}), Op(ops::Sigmoid{}), Op(ops::Softmax{}), Op(MaxPool{}), Op(ops::LayerNormalization{}),
                Op(ops::BatchNormalization{}), Op(ops::ReduceMax{}), Op(ops::Div{}), Op(ops::Exp{}), Op(ops::Where{})})
    CHECK_MESSAGE(!is_multilinear(op), op_name(op));
}

namespace {
/// A value different from v, of its type.
void perturb(bool& v) { v = !v; }
void perturb(int& v) { v += 1; }
void perturb(int64_t& v) { v += 1; }
void perturb(float& v) { v = std::isinf(v) ? 1.f : v + 0.5f; }
void perturb(double& v) { v = std::isinf(v) ? 1.0 : v + 0.5; }
template <class E>
  requires std::is_enum_v<E>
void perturb(E& v) {
  v = E(int(v) + 1);
}
void perturb(std::vector<int64_t>& v) {
  if (v.empty()) v.push_back(3);
  else v[0] += 1;
}
void perturb(std::vector<double>& v) {
  if (v.empty()) v.push_back(2.0);
  else v[0] += 1;
}
void perturb(std::string& v) { v += "x"; }
void perturb(std::variant<Tensor<float>, Tensor<int64_t>>& v) { v = Tensor<float>({1}, 2.f); }

template <class O>
void every_attribute_counts() {
  const O base{};
  for (size_t i = 0; i < attr_count<O>; ++i) {
    O changed = base;
    std::apply([&](auto&... a) {
      size_t k = 0;
      ((k++ == i ? perturb(a) : void()), ...);
    }, changed.attr_refs());
    CAPTURE(O::name);
    CAPTURE(detail::attr_name(O::attr_list, i));
    CHECK_FALSE(Op(changed) == Op(base));
    CHECK(op_signature(changed) != op_signature(base));
    CHECK(op_hash(changed) != op_hash(base));
  }
}
template <size_t... I>
void every_attribute_of_every_op(std::index_sequence<I...>) {
  (every_attribute_counts<std::variant_alternative_t<I, Op>>(), ...);
}
}  // namespace

TEST_CASE("op attributes: each one changes ==, the signature and the hash, signatures are equal exactly when ops are") {
  every_attribute_of_every_op(std::make_index_sequence<std::variant_size_v<Op>>{});
  // Examples the first review found colliding.
  CHECK(op_signature(ops::Pad{.pads = {1, 1}, .mode = ops::PadMode::Constant}) != op_signature(ops::Pad{.pads = {1, 1}, .mode = ops::PadMode::Reflect}));
  CHECK(op_signature(ops::LeakyRelu{.alpha = 0.2f}) != op_signature(ops::LeakyRelu{.alpha = 0.01f}));
  CHECK(op_signature(ops::Clip{.min = 0, .max = 1}) != op_signature(ops::Clip{.min = 0, .max = 6}));
  CHECK(op_signature(ops::AveragePool{{.kernel_shape = {2}}, true}) != op_signature(ops::AveragePool{{.kernel_shape = {2}}, false}));
  CHECK(op_signature(ops::Conv{.strides = {1, 1}}) == op_signature(ops::Conv{.strides = {1, 1}}));
  CHECK(op_signature(ops::Gemm{.alpha = 0.5f}) == "Gemm{alpha=0x1p-1,beta=0x1p+0,trans_a=0,trans_b=0}");
  // Over the ops of random programs (the differential test's generator): signatures match
  // exactly when the ops compare equal (a member missing from PET_ATTRS breaks this).
  std::vector<Op> seen;
  for (uint64_t p = 0; p < 300; ++p) {
    Graph g = difftest::random_program(difftest::program_seed(77, p));
    for (const Node& n : g.nodes()) seen.push_back(n.op);
  }
  REQUIRE(seen.size() > 1000);
  std::map<std::string, Op> by_sig;
  int same = 0;
  for (const Op& op : seen) {
    auto [it, fresh] = by_sig.emplace(op_signature(op), op);
    if (!fresh) {
      ++same;
      CHECK(it->second == op);
    }
  }
  for (size_t i = 0; i + 1 < seen.size(); ++i)
    if (seen[i] == seen[i + 1]) CHECK(op_signature(seen[i]) == op_signature(seen[i + 1]));
  CHECK(same > 0);
}

TEST_CASE("comparisons, logical ops and Mod: exact values, broadcasting, errors, no finite-field meaning") {
  auto run1 = [](Op op, std::vector<Value<float>> in) {
    Types t;
    for (const auto& v : in) t.push_back({std::holds_alternative<Tensor<float>>(v) ? DType::Float32 : DType::Int64, value_shape(v)});
    auto [r, out] = resolve(op, t);
    return std::make_pair(evaluate_op<float>(r, in, out)[0], out[0]);
  };
  auto ints = [](const Value<float>& v) { return std::get<Tensor<int64_t>>(v).vec(); };
  const Tensor<float> a({2, 3}, {1.f, 2.f, NAN, -1.f, 5.f, 2.f}), b({3}, {2.f, 2.f, 1.f});
  {
    auto [y, t] = run1(ops::Equal{}, {a, b});
    CHECK(t.dtype == DType::Bool);
    CHECK(t.shape == Shape{2, 3});
    CHECK(ints(y) == std::vector<int64_t>{0, 1, 0, 0, 0, 0});
  }
  CHECK(ints(run1(ops::Less{}, {a, b}).first) == std::vector<int64_t>{1, 0, 0, 1, 0, 0});
  CHECK(ints(run1(ops::LessOrEqual{}, {a, b}).first) == std::vector<int64_t>{1, 1, 0, 1, 0, 0});
  CHECK(ints(run1(ops::Greater{}, {a, b}).first) == std::vector<int64_t>{0, 0, 0, 0, 1, 1});
  CHECK(ints(run1(ops::GreaterOrEqual{}, {a, b}).first) == std::vector<int64_t>{0, 1, 0, 0, 1, 1});  // NaN: unordered
  // int64 beyond 2^53 (one double) still compares exactly
  const int64_t big = (int64_t(1) << 60);
  CHECK(ints(run1(ops::Equal{}, {Tensor<int64_t>({2}, {big, big}), Tensor<int64_t>({2}, {big, big + 1})}).first) == std::vector<int64_t>{1, 0});
  CHECK(ints(run1(ops::Less{}, {Tensor<int64_t>({2}, {big, big}), Tensor<int64_t>({2}, {big, big + 1})}).first) == std::vector<int64_t>{0, 1});
  const Tensor<int64_t> p({4}, {1, 1, 0, 0}), q({4}, {1, 0, 1, 0});
  const Types bools{TensorType{DType::Bool, {4}}, TensorType{DType::Bool, {4}}};
  auto logical = [&](Op op) {
    auto [r, out] = resolve(op, bools);
    std::vector<Value<float>> in{p, q};
    return ints(evaluate_op<float>(r, in, out)[0]);
  };
  CHECK(logical(ops::And{}) == std::vector<int64_t>{1, 0, 0, 0});
  CHECK(logical(ops::Or{}) == std::vector<int64_t>{1, 1, 1, 0});
  CHECK(logical(ops::Xor{}) == std::vector<int64_t>{0, 1, 1, 0});
  {
    auto [r, out] = resolve(ops::Not{}, {bools[0]});
    std::vector<Value<float>> in{p};
    CHECK(ints(evaluate_op<float>(r, in, out)[0]) == std::vector<int64_t>{0, 0, 1, 1});
  }
  // Mod: the divisor's sign (fmod = 0, integers), the dividend's (fmod = 1)
  const Tensor<int64_t> n({4}, {7, -7, 7, -7}), d({4}, {3, 3, -3, -3});
  CHECK(ints(run1(ops::Mod{}, {n, d}).first) == std::vector<int64_t>{1, 2, -2, -1});
  CHECK(ints(run1(ops::Mod{.fmod = 1}, {n, d}).first) == std::vector<int64_t>{1, -1, 1, -1});
  CHECK(std::get<Tensor<float>>(run1(ops::Mod{.fmod = 1}, {Tensor<float>({2}, {5.5f, -5.5f}), Tensor<float>({1}, {2.f})}).first).vec() ==
        std::vector<float>{1.5f, -1.5f});
  CHECK_THROWS_WITH_AS(run1(ops::Mod{}, {Tensor<int64_t>({1}, std::vector<int64_t>{1}), Tensor<int64_t>({1}, std::vector<int64_t>{0})}),
                       doctest::Contains("integer division by zero"), InvalidInput);
  // the lowest int64 by -1: the machine's division and remainder trap (SIGFPE); Div wraps to
  // itself, Mod gives 0
  const int64_t lo = std::numeric_limits<int64_t>::min();
  const Tensor<int64_t> lows({2}, {lo, 5}), minus1({2}, {-1, -1});
  CHECK(ints(run1(ops::Mod{}, {lows, minus1}).first) == std::vector<int64_t>{0, 0});
  CHECK(ints(run1(ops::Mod{.fmod = 1}, {lows, minus1}).first) == std::vector<int64_t>{0, 0});
  CHECK(ints(run1(ops::Div{}, {lows, minus1}).first) == std::vector<int64_t>{lo, -5});
  CHECK_THROWS_WITH_AS(run1(ops::Div{}, {lows, Tensor<int64_t>({2}, {1, 0})}), doctest::Contains("integer division by zero"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::Mod{}, {f32({2}), f32({2})}), "Mod 'n': fmod must be 1 for float inputs (ONNX)", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::Mod{.fmod = 2}, {i64({2}), i64({2})}), "Mod 'n': fmod must be 0 or 1, got 2", InvalidInput);
  // shape and type errors
  CHECK_THROWS_WITH_AS(infer(ops::Equal{}, {f32({2}), i64({2})}), "Equal 'n': input 0 is float32 but input 1 is int64", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::Less{}, {f32({2}), f32({3})}), doctest::Contains("broadcast"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::And{}, {f32({2}), TensorType{DType::Bool, {2}}}), "And 'n': input 0 must be bool, got float32", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::Not{}, {i64({2})}), "Not 'n': input 0 must be bool, got int64", InvalidInput);
  // none of them has a meaning in F_p (the verifier cuts programs at them)
  for (Op op : {Op(ops::Less{}), Op(ops::Mod{.fmod = 1})}) {
    CHECK_FALSE(is_multilinear(op));
    auto [r, out] = resolve(op, {f32({2}), f32({2})});
    std::vector<Value<F31>> in{Tensor<F31>({2}, F31(3)), Tensor<F31>({2}, F31(2))};
    CHECK_THROWS_AS(evaluate_op<F31>(r, in, out), Unsupported);
  }
  check_fast_vs_formula(ops::Greater{}, {f32({3, 4}), f32({4})}, 700);
  check_fast_vs_formula(ops::Mod{.fmod = 1}, {f32({3, 4}), f32({1})}, 701, {.lo = 0.5, .hi = 2});
}

namespace {
/// One op on float and int64 values (their types from the values), evaluated.
std::vector<Value<float>> run(Op op, std::vector<Value<float>> in) {
  Types t;
  for (const auto& v : in) t.push_back({std::holds_alternative<Tensor<float>>(v) ? DType::Float32 : DType::Int64, value_shape(v)});
  auto [r, out] = resolve(op, t);
  return evaluate_op<float>(r, in, out);
}
}  // namespace

TEST_CASE("ONNX coverage, second batch: LogSoftmax, Hardmax, LRN, IsNaN, IsInf, ReduceLogSum, CumSum, TopK, GatherElements, GatherND, Trilu, OneHot") {
  uint64_t seed = 3100;
  auto floats = [](const Value<float>& v) { return std::get<Tensor<float>>(v).vec(); };
  auto ints = [](const Value<float>& v) { return std::get<Tensor<int64_t>>(v).vec(); };
  using VF = std::vector<float>;
  using VI = std::vector<int64_t>;

  // LogSoftmax and Hardmax share Softmax's rows (one dim, or opset < 13's flattened tail).
  for (int64_t axis = -3; axis < 3; ++axis) {
    CAPTURE(axis);
    check_fast_vs_formula(ops::LogSoftmax{{.axis = axis}}, {f32({2, 3, 4})}, seed++, {.lo = -5, .hi = 5});
    check_fast_vs_formula(ops::LogSoftmax{{.axis = axis, .flatten_tail = true}}, {f32({2, 3, 4})}, seed++);
    check_fast_vs_formula(ops::Hardmax{{.axis = axis}}, {f32({2, 3, 4})}, seed++);
  }
  {
    auto y = floats(run(ops::LogSoftmax{}, {Tensor<float>({2}, VF{1000.f, 1000.f})})[0]);  // no overflow
    CHECK(y[0] == doctest::Approx(-std::log(2.0)));
    CHECK(floats(run(ops::Hardmax{}, {Tensor<float>({5}, VF{1.f, NAN, 3.f, 3.f, 2.f})})[0]) == VF{0, 0, 1, 0, 0});  // the first maximum
    CHECK(floats(run(ops::Hardmax{{.axis = 1, .flatten_tail = true}}, {Tensor<float>({1, 2, 2}, VF{1.f, 5.f, 7.f, 2.f})})[0]) == VF{0, 0, 1, 0});
  }
  CHECK_THROWS_WITH_AS(infer(ops::LogSoftmax{}, {i64({2})}), "LogSoftmax 'n': input must be float32, got int64", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::Hardmax{{.axis = 2}}, {f32({2, 3})}), doctest::Contains("axis 2 is out of range for rank 2"), InvalidInput);

  // LRN: an odd window is centred, an even one reaches one further up.
  {
    Tensor<float> x({1, 3, 1, 1}, VF{1.f, 2.f, 3.f});
    auto odd = floats(run(ops::LRN{.size = 3, .alpha = 3.f, .beta = 1.f, .bias = 1.f}, {x})[0]);  // alpha / size = 1
    CHECK(odd[0] == doctest::Approx(1.0 / 6));   // 1 / (1 + 1 + 4)
    CHECK(odd[1] == doctest::Approx(2.0 / 15));  // 2 / (1 + 1 + 4 + 9)
    CHECK(odd[2] == doctest::Approx(3.0 / 14));  // 3 / (1 + 4 + 9)
    auto even = floats(run(ops::LRN{.size = 2, .alpha = 2.f, .beta = 1.f, .bias = 1.f}, {x})[0]);
    CHECK(even[0] == doctest::Approx(1.0 / 6));   // channels 0, 1
    CHECK(even[1] == doctest::Approx(2.0 / 14));  // channels 1, 2
    CHECK(even[2] == doctest::Approx(3.0 / 10));  // channel 2
  }
  check_fast_vs_formula(ops::LRN{.size = 5}, {f32({2, 7, 3, 3})}, seed++, {.lo = -3, .hi = 3});
  CHECK_THROWS_WITH_AS(infer(ops::LRN{.size = 0}, {f32({1, 3, 2, 2})}), "LRN 'n': size must be at least 1, got 0", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::LRN{.size = 3}, {f32({3})}), doctest::Contains("input must be N x C x ..."), InvalidInput);

  // IsNaN, IsInf: float in, bool out.
  {
    Tensor<float> x({4}, VF{NAN, INFINITY, -INFINITY, 1.f});
    CHECK(ints(run(ops::IsNaN{}, {x})[0]) == VI{1, 0, 0, 0});
    CHECK(ints(run(ops::IsInf{}, {x})[0]) == VI{0, 1, 1, 0});
    CHECK(ints(run(ops::IsInf{.detect_negative = false}, {x})[0]) == VI{0, 1, 0, 0});
    CHECK(ints(run(ops::IsInf{.detect_positive = false}, {x})[0]) == VI{0, 0, 1, 0});
    CHECK(infer(ops::IsNaN{}, {f32({2, 3})})[0].dtype == DType::Bool);
    CHECK_THROWS_WITH_AS(infer(ops::IsInf{}, {i64({2})}), "IsInf 'n': input must be float32, got int64", InvalidInput);
  }

  // ReduceLogSum = ln(ReduceSum).
  check_fast_vs_formula(ops::ReduceLogSum{{.axes = {1}}}, {f32({2, 3, 4})}, seed++, {.lo = 0.1, .hi = 2});
  CHECK(floats(run(ops::ReduceLogSum{}, {Tensor<float>({3}, VF{1.f, 2.f, 4.f})})[0])[0] == doctest::Approx(std::log(7.0)));

  // CumSum: inclusive, exclusive, reversed; integers; the field agrees (it only adds).
  {
    Tensor<float> x({4}, VF{1.f, 2.f, 3.f, 4.f});
    CHECK(floats(run(ops::CumSum{}, {x})[0]) == VF{1, 3, 6, 10});
    CHECK(floats(run(ops::CumSum{.exclusive = true}, {x})[0]) == VF{0, 1, 3, 6});
    CHECK(floats(run(ops::CumSum{.reverse = true}, {x})[0]) == VF{10, 9, 7, 4});
    CHECK(floats(run(ops::CumSum{.exclusive = true, .reverse = true}, {x})[0]) == VF{9, 7, 4, 0});
    CHECK(ints(run(ops::CumSum{.axis = -1}, {Tensor<int64_t>({2, 2}, VI{1, 2, 3, 4})})[0]) == VI{1, 3, 3, 7});
  }
  for (Op op : {Op(ops::CumSum{.axis = 1}), Op(ops::CumSum{.axis = 0, .exclusive = true, .reverse = true})}) {
    check_fast_vs_formula(op, {f32({3, 4})}, seed++);
    check_float_vs_field(op, {f32({3, 4})}, seed++);
  }
  CHECK_THROWS_WITH_AS(infer(ops::CumSum{.axis = 2}, {f32({3, 4})}), doctest::Contains("axis 2 is out of range for rank 2"), InvalidInput);

  // TopK: sorted values and their indices; ties go to the lower index.
  {
    Tensor<float> x({5}, VF{1.f, 3.f, 3.f, 2.f, 0.f});
    auto top = run(ops::TopK{.k = 3}, {x});
    CHECK(floats(top[0]) == VF{3, 3, 2});
    CHECK(ints(top[1]) == VI{1, 2, 3});
    auto low = run(ops::TopK{.k = 2, .largest = false}, {x});
    CHECK(floats(low[0]) == VF{0, 1});
    CHECK(ints(low[1]) == VI{4, 0});
    auto t = infer(ops::TopK{.k = 2, .axis = 1}, {f32({2, 3, 4})});
    CHECK(t[0].shape == Shape{2, 2, 4});
    CHECK(t[1].dtype == DType::Int64);
  }
  check_fast_vs_formula(ops::TopK{.k = 2, .axis = 1}, {f32({2, 5, 3})}, seed++);
  CHECK_THROWS_WITH_AS(infer(ops::TopK{.k = 4, .axis = 1}, {f32({2, 3})}), "TopK 'n': k = 4 is not in [0, 3] (the size of axis 1)", InvalidInput);

  // GatherElements and GatherND (ONNX's examples); the field agrees (they only move data).
  {
    Tensor<float> d({2, 2}, VF{1.f, 2.f, 3.f, 4.f});
    CHECK(floats(run(ops::GatherElements{.axis = 1}, {d, Tensor<int64_t>({2, 2}, VI{0, 0, 1, 0})})[0]) == VF{1, 1, 4, 3});
    CHECK(floats(run(ops::GatherElements{.axis = 0}, {d, Tensor<int64_t>({1, 2}, VI{-1, 0})})[0]) == VF{3, 2});
    CHECK_THROWS_WITH_AS(run(ops::GatherElements{.axis = 1}, {d, Tensor<int64_t>({1, 1}, VI{2})}),
                         "GatherElements: index 2 is out of range for axis 1 of size 2", InvalidInput);
    CHECK_THROWS_WITH_AS(infer(ops::GatherElements{}, {f32({2, 2}), i64({3})}), doctest::Contains("must have the rank of data"), InvalidInput);
    CHECK_THROWS_WITH_AS(infer(ops::GatherElements{.axis = 1}, {f32({2, 2}), i64({3, 1})}), doctest::Contains("larger than data"), InvalidInput);
    Tensor<float> m({2, 2}, VF{0.f, 1.f, 2.f, 3.f});
    CHECK(floats(run(ops::GatherND{}, {m, Tensor<int64_t>({2, 2}, VI{0, 0, 1, 1})})[0]) == VF{0, 3});
    CHECK(floats(run(ops::GatherND{}, {m, Tensor<int64_t>({2, 1}, VI{1, 0})})[0]) == VF{2, 3, 0, 1});
    Tensor<float> b({2, 2, 2}, VF{0.f, 1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f});
    CHECK(floats(run(ops::GatherND{.batch_dims = 1}, {b, Tensor<int64_t>({2, 1}, VI{1, 0})})[0]) == VF{2, 3, 4, 5});
    CHECK(infer(ops::GatherND{}, {f32({2, 3, 4}), i64({5, 6, 2})})[0].shape == Shape{5, 6, 4});
    CHECK_THROWS_WITH_AS(infer(ops::GatherND{}, {f32({2, 3}), i64({5, 3})}), doctest::Contains("indices' last dim 3 must be in [1, 2]"), InvalidInput);
    CHECK_THROWS_WITH_AS(infer(ops::GatherND{.batch_dims = 1}, {f32({2, 3}), i64({3, 1})}), doctest::Contains("differ in batch dim 0"), InvalidInput);
    CHECK_THROWS_WITH_AS(run(ops::GatherND{}, {m, Tensor<int64_t>({1, 2}, VI{0, 2})}), "GatherND: index 2 is out of range for data dim 1 of size 2", InvalidInput);
  }
  {
    InputSpec idx{.ints = [](Rng& r) { return r.range(-3, 2); }};
    check_fast_vs_formula(ops::GatherElements{.axis = 1}, {f32({3, 3, 2}), i64({3, 4, 2})}, seed++, idx);
    check_float_vs_field(ops::GatherElements{.axis = 1}, {f32({3, 3, 2}), i64({3, 4, 2})}, seed++, idx);
    check_float_vs_field(ops::GatherND{.batch_dims = 1}, {f32({3, 3, 2}), i64({3, 4, 1})}, seed++, idx);
  }

  // Trilu: the upper or lower triangle from diagonal k of each matrix.
  {
    Tensor<float> x({3, 3}, VF{1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f, 9.f});
    CHECK(floats(run(ops::Trilu{}, {x})[0]) == VF{1, 2, 3, 0, 5, 6, 0, 0, 9});
    CHECK(floats(run(ops::Trilu{.upper = false, .k = -1}, {x})[0]) == VF{0, 0, 0, 4, 0, 0, 7, 8, 0});
    CHECK(floats(run(ops::Trilu{.k = 1}, {x})[0]) == VF{0, 2, 3, 0, 0, 6, 0, 0, 0});
    check_float_vs_field(ops::Trilu{.upper = false, .k = 1}, {f32({2, 3, 4})}, seed++);
    CHECK_THROWS_WITH_AS(infer(ops::Trilu{}, {f32({3})}), doctest::Contains("input must have rank >= 2"), InvalidInput);
  }

  // OneHot: negative indices count from depth; outside [-depth, depth) is all off.
  {
    auto y = run(ops::OneHot{.depth = 3}, {Tensor<int64_t>({4}, VI{0, 2, -1, 5}), Tensor<float>({2}, VF{-1.f, 7.f})});
    CHECK(floats(y[0]) == VF{7, -1, -1, -1, -1, 7, -1, -1, 7, -1, -1, -1});
    CHECK(infer(ops::OneHot{.depth = 5, .axis = 0}, {i64({2, 3}), f32({2})})[0].shape == Shape{5, 2, 3});
    CHECK(infer(ops::OneHot{.depth = 5, .axis = 1}, {f32({2, 3}), i64({2})})[0].dtype == DType::Int64);
    CHECK_THROWS_WITH_AS(infer(ops::OneHot{.depth = 3}, {i64({2}), f32({3})}), "OneHot 'n': values must have shape [2] (off, on), got [3]", InvalidInput);
    check_float_vs_field(ops::OneHot{.depth = 4, .axis = 0}, {i64({3}), f32({2})}, seed++, {.ints = [](Rng& r) { return r.range(-5, 5); }});
  }
}

TEST_CASE("GridSample: each mode and padding at hand-computed points, half to even, far points and NaN, shape errors") {
  using G = ops::GridSample;
  using VF = std::vector<float>;
  const Tensor<float> x({1, 1, 2, 2}, VF{1, 2, 3, 4});
  // one output point per grid entry: grid [1, 1, k, 2] of (x, y) pairs
  auto sample = [&](G op, VF grid) {
    const int64_t k = int64_t(grid.size() / 2);
    auto [r, out] = resolve(op, {f32({1, 1, 2, 2}), f32({1, 1, k, 2})});
    CHECK(out[0].shape == Shape{1, 1, 1, k});
    return std::get<Tensor<float>>(evaluate_op<float>(r, std::vector<Value<float>>{x, Tensor<float>({1, 1, k, 2}, grid)}, out)[0]).vec();
  };
  // align_corners: the corners are the pixel centres; the middle averages all four
  CHECK(sample(G{.align_corners = true}, {-1, -1, 1, 1, 0, 0, 1, -1}) == VF{1, 4, 2.5f, 2});
  // not aligned: (-1, -1) is the outer corner of pixel (0, 0), half of its extent is padding
  CHECK(sample(G{}, {-1, -1, 0, 0}) == VF{0.25f, 2.5f});
  CHECK(sample(G{.padding = G::Padding::Border}, {-1, -1, 3, 0}) == VF{1, 3});  // (3, 0): x clamped to 1, y = 0.5
  CHECK(sample(G{.padding = G::Padding::Reflection}, {-1, -1, -2, -1}) == VF{1, 1.5f});  // x = -1.5 reflects to 0.5
  // nearest rounds half to even: x = y = 0.5 reads pixel (0, 0); x = 0.6, y = 0.4 reads (0, 1)
  CHECK(sample(G{.mode = G::Mode::Nearest}, {0, 0, 0.1f, -0.1f, 5, 5}) == VF{1, 2, 0});
  CHECK(sample(G{.mode = G::Mode::Nearest, .padding = G::Padding::Border}, {5, 5, -5, 5}) == VF{4, 3});
  // cubic on a ramp: x = 0.92 / 2 * 5 = 2.3 weighs pixels 1..4 by Keys' kernel (a = -0.75),
  // which overshoots a line: 2.342; x = 2 reads pixel 2 alone
  {
    const Tensor<float> ramp({1, 1, 1, 6}, VF{0, 1, 2, 3, 4, 5});
    auto [r, out] = resolve(G{.mode = G::Mode::Cubic, .align_corners = true}, {f32({1, 1, 1, 6}), f32({1, 1, 2, 2})});
    const auto v = std::get<Tensor<float>>(evaluate_op<float>(r, std::vector<Value<float>>{ramp, Tensor<float>({1, 1, 2, 2}, VF{-0.08f, 0, -0.2f, 0})}, out)[0]).vec();
    CHECK(v[0] == doctest::Approx(2.342).epsilon(1e-4));
    CHECK(v[1] == doctest::Approx(2.0).epsilon(1e-6));
  }
  // the kernel (taps once per point for all channels) agrees with the formula, every mode,
  // padding and alignment, on grids reaching outside the image
  uint64_t seed = 4100;
  for (auto mode : {G::Mode::Linear, G::Mode::Nearest, G::Mode::Cubic})
    for (auto pad : {G::Padding::Zeros, G::Padding::Border, G::Padding::Reflection})
      for (bool align : {false, true})
        check_fast_vs_formula(G{.mode = mode, .padding = pad, .align_corners = align}, {f32({2, 3, 4, 5}), f32({2, 3, 6, 2})}, seed++,
                              {.lo = -1.4, .hi = 1.4});
  // Cubic with Border padding clamps each neighbour, not the point (ONNX Runtime, PyTorch):
  // x = 5.3 on the ramp reads 4, 5, 5, 5 with weights far(1.3) = -0.11025, ...: 5.11025
  {
    const Tensor<float> ramp({1, 1, 1, 6}, VF{0, 1, 2, 3, 4, 5});
    auto [r, out] = resolve(G{.mode = G::Mode::Cubic, .padding = G::Padding::Border, .align_corners = true}, {f32({1, 1, 1, 6}), f32({1, 1, 1, 2})});
    const auto v = std::get<Tensor<float>>(evaluate_op<float>(r, std::vector<Value<float>>{ramp, Tensor<float>({1, 1, 1, 2}, VF{1.12f, 0})}, out)[0]).vec();
    CHECK(v[0] == doctest::Approx(5.11025).epsilon(1e-4));
  }
  // Reflection is periodic: a point 1,000 periods away reads what the near one reads
  {
    const auto near = sample(G{.padding = G::Padding::Reflection}, {0.3f, -0.2f, -0.7f, 0.9f});
    const auto far = sample(G{.padding = G::Padding::Reflection}, {4000.3f, -0.2f, -0.7f, 4000.9f});
    for (size_t k = 0; k < 2; ++k) CHECK(far[k] == doctest::Approx(near[k]).epsilon(1e-3));
  }
  // far outside and NaN read zeros; nothing reads out of bounds
  CHECK(sample(G{}, {1e30f, -1e30f, std::nanf(""), 0}) == VF{0, 0});
  CHECK(sample(G{.mode = G::Mode::Cubic}, {1e30f, 1e30f}) == VF{0});
  CHECK(infer(G{}, {f32({2, 3, 5, 6}), f32({2, 4, 7, 2})})[0].shape == Shape{2, 3, 4, 7});
  CHECK_THROWS_WITH_AS(infer(G{}, {f32({2, 3, 5}), f32({2, 4, 7, 2})}), doctest::Contains("X [2,3,5] must have rank 4 (N, C, H, W)"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(G{}, {f32({2, 3, 5, 6}), f32({2, 4, 7, 3})}), doctest::Contains("grid [2,4,7,3] must have shape [N, H_out, W_out, 2]"),
                       InvalidInput);
  CHECK_THROWS_WITH_AS(infer(G{}, {f32({2, 3, 5, 6}), f32({1, 4, 7, 2})}), doctest::Contains("differ in batch"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(G{}, {f32({2, 3, 5, 6}), i64({2, 4, 7, 2})}), doctest::Contains("grid"), InvalidInput);
}

TEST_CASE("RoiAlign: hand-computed bins, both coordinate modes, max, clamping, points outside, errors, fast vs formula") {
  using A = ops::RoiAlign;
  using VF = std::vector<float>;
  Tensor<float> x({2, 1, 4, 4});
  for (int64_t i = 0; i < 32; ++i) x[i] = float(i);
  // one roi [x1, y1, x2, y2] of image b, pooled to oh x ow
  auto pool = [&](A op, VF roi, int64_t b = 0) {
    auto [r, out] = resolve(op, {f32({2, 1, 4, 4}), f32({1, 4}), i64({1})});
    CHECK(out[0].shape == Shape{1, 1, op.output_height, op.output_width});
    return std::get<Tensor<float>>(evaluate_op<float>(r, std::vector<Value<float>>{x, Tensor<float>({1, 4}, roi), Tensor<int64_t>({1}, std::vector<int64_t>{b})}, out)[0]).vec();
  };
  // output_half_pixel (opset 10): the region [0, 3] has one point at 1.5, between pixels 5, 6, 9, 10
  CHECK(pool(A{.sampling_ratio = 1, .half_pixel = false}, {0, 0, 3, 3}) == VF{7.5f});
  CHECK(pool(A{.sampling_ratio = 1, .half_pixel = false}, {0, 0, 3, 3}, 1) == VF{23.5f});  // the second image
  // half_pixel: [0.5, 2.5] is [0, 2] after the offset; its point at 1 is pixel 5
  CHECK(pool(A{.sampling_ratio = 1}, {0.5f, 0.5f, 2.5f, 2.5f}) == VF{5});
  // spatial_scale 0.5 halves the roi: [0, 6] -> [0, 3]
  CHECK(pool(A{.sampling_ratio = 1, .spatial_scale = 0.5f, .half_pixel = false}, {0, 0, 6, 6}) == VF{7.5f});
  // 2 x 2 bins of one point each (region [0, 4]: points at 1 and 3), and the sampling grid
  // from the region (0: ceil(4 / 2) = 2 points per bin and dim)
  CHECK(pool(A{.output_height = 2, .output_width = 2, .sampling_ratio = 1, .half_pixel = false}, {0, 0, 4, 4}) == VF{5, 7, 13, 15});
  CHECK(pool(A{.output_height = 2, .output_width = 2, .half_pixel = false}, {0, 0, 4, 4}) == VF{5, 6.75f, 12, 13.75f});
  // max: the largest of the point's four weighted neighbours (a quarter of 10)
  CHECK(pool(A{.mode = A::Mode::Max, .sampling_ratio = 1, .half_pixel = false}, {0, 0, 3, 3}) == VF{2.5f});
  // clamped at the far edge (a point at 4 is inside [-1, 4] and reads row and column 3)
  CHECK(pool(A{.sampling_ratio = 1, .half_pixel = false}, {3, 3, 5, 5}) == VF{15});
  // beyond [-1, extent]: zero; a region of zero size (half_pixel) has no points: zero
  CHECK(pool(A{.sampling_ratio = 1}, {100, 100, 101, 101}) == VF{0});
  CHECK(pool(A{}, {1, 1, 1, 1}) == VF{0});
  CHECK(pool(A{.mode = A::Mode::Max}, {1, 1, 1, 1}) == VF{0});
  // a point outside has weight 0 on pixel (0, 0), as in ONNX Runtime: 0 * inf is NaN there
  x[0] = INFINITY;
  CHECK(std::isnan(pool(A{.sampling_ratio = 1}, {100, 100, 101, 101})[0]));
  CHECK(std::isnan(pool(A{.mode = A::Mode::Max, .sampling_ratio = 1}, {100, 100, 101, 101})[0]));
  CHECK(pool(A{.sampling_ratio = 1}, {100, 100, 101, 101}, 1) == VF{0});  // the other image's (0, 0) is finite
  x[0] = 0;
  // errors when it runs: a batch index outside [0, N), a region not finite or too large
  CHECK_THROWS_WITH_AS(pool(A{}, {0, 0, 1, 1}, 2), doctest::Contains("RoiAlign: batch index 2 of roi 0 is outside [0, 2)"), InvalidInput);
  CHECK_THROWS_WITH_AS(pool(A{}, {0, std::nanf(""), 1, 1}), doctest::Contains("RoiAlign: roi 0 (0, nan, 1, 1) is not finite"), InvalidInput);
  CHECK_THROWS_WITH_AS(pool(A{}, {0, 0, 1e7f, 1e7f}), doctest::Contains("sampling points a bin, more than 2^20"), InvalidInput);
  // shapes and attributes
  CHECK(infer(A{.output_height = 7, .output_width = 5}, {f32({2, 8, 30, 40}), f32({6, 4}), i64({6})})[0].shape == Shape{6, 8, 7, 5});
  CHECK_THROWS_WITH_AS(infer(A{}, {f32({2, 8, 30}), f32({6, 4}), i64({6})}), doctest::Contains("X [2,8,30] must have rank 4"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(A{}, {f32({2, 8, 3, 3}), f32({6, 5}), i64({6})}), doctest::Contains("rois [6,5] must have shape [num_rois, 4]"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(A{}, {f32({2, 8, 0, 3}), f32({6, 4}), i64({6})}), doctest::Contains("X [2,8,0,3] has no pixels to sample"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(A{}, {f32({2, 8, 3, 0}), f32({6, 4}), i64({6})}), doctest::Contains("has no pixels to sample"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(A{}, {f32({2, 8, 3, 3}), f32({6, 4}), i64({5})}), doctest::Contains("batch_indices [5] must have shape [num_rois] = [6]"),
                       InvalidInput);
  CHECK_THROWS_WITH_AS(infer(A{}, {f32({2, 8, 3, 3}), f32({6, 4}), f32({6})}), doctest::Contains("batch_indices must be int64, got float32"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(A{.output_height = 0}, {f32({2, 8, 3, 3}), f32({6, 4}), i64({6})}), doctest::Contains("must be in [1, 2^24]"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(A{.sampling_ratio = -1}, {f32({2, 8, 3, 3}), f32({6, 4}), i64({6})}), doctest::Contains("sampling_ratio -1 must be in [0, 1024]"),
                       InvalidInput);
  CHECK_THROWS_WITH_AS(infer(A{.spatial_scale = INFINITY}, {f32({2, 8, 3, 3}), f32({6, 4}), i64({6})}), doctest::Contains("spatial_scale inf is not finite"),
                       InvalidInput);
  // the kernel (each bin's points once for all channels) agrees with the formula: both modes,
  // both coordinate modes, given and derived grids, rois reaching outside the image
  uint64_t seed = 4200;
  for (auto mode : {A::Mode::Avg, A::Mode::Max})
    for (bool half : {false, true})
      for (int64_t ratio : {0, 2})
        check_fast_vs_formula(A{.mode = mode, .output_height = 3, .output_width = 2, .sampling_ratio = ratio, .spatial_scale = 0.75f, .half_pixel = half},
                              {f32({2, 3, 6, 7}), f32({5, 4}), i64({5})}, seed++,
                              {.lo = -2, .hi = 9, .ints = [](Rng& r) { return r.range(0, 1); }});
  // not over a finite field
  auto [r, out] = resolve(A{}, {f32({1, 1, 2, 2}), f32({1, 4}), i64({1})});
  std::vector<Value<F31>> in{Tensor<F31>({1, 1, 2, 2}, F31(1)), Tensor<F31>({1, 4}, F31(1)), Tensor<int64_t>({1}, int64_t(0))};
  CHECK_THROWS_AS(evaluate_op<F31>(r, in, out), Unsupported);
}

TEST_CASE("Det: hand-computed determinants, pivoting, singular and empty matrices, batches, errors, no finite-field meaning") {
  using VF = std::vector<float>;
  auto det = [](const Shape& s, VF v) {
    auto [r, out] = resolve(ops::Det{}, {f32(s)});
    std::vector<Value<double>> in{Tensor<double>(s, std::vector<double>(v.begin(), v.end()))};
    return std::make_pair(std::get<Tensor<double>>(evaluate_op<double>(r, in, out)[0]).vec(), out[0].shape);
  };
  CHECK(det({2, 2}, {1, 2, 3, 4}) == std::make_pair(std::vector<double>{-2}, Shape{}));
  CHECK(det({2, 2}, {0, 1, 1, 0}).first == std::vector<double>{-1});  // a zero pivot: rows swapped
  CHECK(det({3, 3}, {2, 0, 1, 1, 3, 2, 1, 1, 2}).first[0] == doctest::Approx(6).epsilon(1e-12));
  CHECK(det({3, 3}, {1, 2, 3, 2, 4, 6, 1, 0, 1}).first == std::vector<double>{0});  // singular
  CHECK(det({1, 1}, {-7}).first == std::vector<double>{-7});
  CHECK(det({2, 0, 0}, {}) == std::make_pair(std::vector<double>{1, 1}, Shape{2}));  // 0 x 0: 1
  // a batch [2, 3] of 2 x 2 matrices, each against ad - bc
  Rng rng(1170);
  VF v(24);
  for (float& x : v) x = float(rng.range(-5, 5));
  const auto [b, bs] = det({2, 3, 2, 2}, v);
  CHECK(bs == Shape{2, 3});
  for (size_t k = 0; k < 6; ++k) CHECK(b[k] == double(v[4 * k]) * v[4 * k + 3] - double(v[4 * k + 1]) * v[4 * k + 2]);
  // a 6 x 6 against its Laplace expansion along the first row, recursively
  std::function<double(const std::vector<double>&, int)> laplace = [&](const std::vector<double>& a, int m) {
    if (m == 1) return a[0];
    double sum = 0;
    for (int j = 0; j < m; ++j) {
      std::vector<double> minor;
      for (int i = 1; i < m; ++i)
        for (int c = 0; c < m; ++c)
          if (c != j) minor.push_back(a[size_t(i * m + c)]);
      sum += (j % 2 ? -1 : 1) * a[size_t(j)] * laplace(minor, m - 1);
    }
    return sum;
  };
  VF w(36);
  for (float& x : w) x = float(rng.range(-9, 9));
  CHECK(det({6, 6}, w).first[0] == doctest::Approx(laplace(std::vector<double>(w.begin(), w.end()), 6)).epsilon(1e-9));
  // in float32 too (the interpreter's element type)
  auto [r1, o1] = resolve(ops::Det{}, {f32({2, 2})});
  std::vector<Value<float>> fin{Tensor<float>({2, 2}, VF{1, 2, 3, 4})};
  CHECK(std::get<Tensor<float>>(evaluate_op<float>(r1, fin, o1)[0])[0] == doctest::Approx(-2).epsilon(1e-6));
  // the kernel (each matrix copied out whole) agrees with the formula
  check_fast_vs_formula(ops::Det{}, {f32({3, 5, 6, 6})}, 1171);
  check_fast_vs_formula(ops::Det{}, {f32({2, 0, 0})}, 1172);
  // errors; no meaning over a finite field
  CHECK_THROWS_WITH_AS(infer(ops::Det{}, {f32({3})}), doctest::Contains("X [3] must hold square matrices in its last two dims ([..., M, M])"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::Det{}, {f32({2, 3, 4})}), doctest::Contains("must hold square matrices"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::Det{}, {i64({2, 2})}), doctest::Contains("input X must be float32, got int64"), InvalidInput);
  CHECK_FALSE(is_multilinear(Op(ops::Det{})));
  std::vector<Value<F31>> field{Tensor<F31>({2, 2}, F31(3))};
  CHECK_THROWS_AS(evaluate_op<F31>(r1, field, o1), Unsupported);
}

TEST_CASE("bitwise ops and BitShift: types, broadcast shapes, errors") {
  const TensorType b8{DType::Bool, {2}};
  for (DType t : {DType::Int8, DType::UInt8, DType::Int32, DType::Int64}) {
    CHECK(infer(ops::BitwiseAnd{}, {TensorType{t, {2, 3}}, TensorType{t, {3}}})[0] == TensorType{t, {2, 3}});
    CHECK(infer(ops::BitwiseNot{}, {TensorType{t, {4}}})[0] == TensorType{t, {4}});
    CHECK_FALSE(is_multilinear(Op(ops::BitwiseXor{})));
  }
  CHECK_THROWS_WITH_AS(infer(ops::BitwiseOr{}, {b8, b8}), "BitwiseOr 'n': input 0 must be an integer tensor (int8, uint8, int32 or int64), got bool", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::BitwiseNot{}, {f32({2})}), doctest::Contains("must be an integer tensor"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::BitwiseXor{}, {i64({2}), TensorType{DType::Int32, {2}}}), "BitwiseXor 'n': input 0 is int64 but input 1 is int32", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(ops::BitwiseAnd{}, {i64({2}), i64({3})}), doctest::Contains("broadcast"), InvalidInput);
  CHECK(infer(ops::BitShift{}, {TensorType{DType::UInt8, {2, 3}}, TensorType{DType::UInt8, {1}}})[0] == TensorType{DType::UInt8, {2, 3}});
  CHECK_THROWS_WITH_AS(infer(ops::BitShift{}, {TensorType{DType::Int32, {2}}, TensorType{DType::Int32, {2}}}),
                       "BitShift 'n': input 0 must be an unsigned integer tensor (pet holds uint8), got int32", InvalidInput);
  // the bit rules on int64 values (results wrap to the type when they run)
  ops::BitShift right;
  right.direction = ops::BitShift::Direction::Right;
  CHECK(ops::BitShift{}.f(3, 2) == 12);
  CHECK(ops::BitShift{}.f(1, 64) == 0);
  CHECK(right.f(255, 3) == 31);
  CHECK(right.f(255, 200) == 0);
  CHECK(ops::BitwiseNot::f(0) == -1);
}

TEST_CASE("ScatterElements and ScatterND: ONNX's examples, duplicates, reductions, negative indices, errors, fast vs formula") {
  using VF = std::vector<float>;
  using VI = std::vector<int64_t>;
  auto floats = [](const Value<float>& v) { return std::get<Tensor<float>>(v).vec(); };
  using R = ops::ScatterReduction;
  using SE = ops::ScatterElements;
  using SN = ops::ScatterND;
  // ScatterElements, ONNX's two examples.
  CHECK(floats(run(SE{}, {Tensor<float>({3, 3}, 0.f), Tensor<int64_t>({2, 3}, VI{1, 0, 2, 0, 2, 1}),
                          Tensor<float>({2, 3}, VF{1.f, 1.1f, 1.2f, 2.f, 2.1f, 2.2f})})[0]) == VF{2.f, 1.1f, 0.f, 1.f, 0.f, 2.2f, 0.f, 2.1f, 1.2f});
  const Tensor<float> row({1, 5}, VF{1, 2, 3, 4, 5});
  CHECK(floats(run(SE{.axis = 1}, {row, Tensor<int64_t>({1, 2}, VI{1, 3}), Tensor<float>({1, 2}, VF{1.1f, 2.1f})})[0]) == VF{1, 1.1f, 3, 2.1f, 5});
  // Negative index; duplicates: the last update wins, reductions combine all of them.
  CHECK(floats(run(SE{.axis = 1}, {row, Tensor<int64_t>({1, 1}, VI{-1}), Tensor<float>({1, 1}, VF{9})})[0]) == VF{1, 2, 3, 4, 9});
  const Tensor<int64_t> twice({1, 2}, VI{1, 1});
  const Tensor<float> u({1, 2}, VF{10, 20}), v({1, 2}, VF{1, 20});
  CHECK(floats(run(SE{.axis = 1}, {row, twice, u})[0]) == VF{1, 20, 3, 4, 5});
  CHECK(floats(run(SE{.axis = 1, .reduction = R::Add}, {row, twice, u})[0]) == VF{1, 32, 3, 4, 5});
  CHECK(floats(run(SE{.axis = 1, .reduction = R::Mul}, {row, twice, u})[0]) == VF{1, 400, 3, 4, 5});
  CHECK(floats(run(SE{.axis = 1, .reduction = R::Max}, {row, twice, v})[0]) == VF{1, 20, 3, 4, 5});
  CHECK(floats(run(SE{.axis = 1, .reduction = R::Min}, {row, twice, v})[0]) == VF{1, 1, 3, 4, 5});
  // Integer data scatters too.
  CHECK(std::get<Tensor<int64_t>>(run(SE{}, {Tensor<int64_t>({3}, VI{7, 8, 9}), Tensor<int64_t>({1}, VI{2}), Tensor<int64_t>({1}, VI{-5})})[0]).vec() ==
        VI{7, 8, -5});
  CHECK_THROWS_WITH_AS(run(SE{.axis = 1}, {row, Tensor<int64_t>({1, 1}, VI{5}), Tensor<float>({1, 1}, VF{9})}),
                       "ScatterElements: index 5 is out of range for dim 1 of size 5", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(SE{}, {f32({3, 3}), i64({2, 3}), f32({2, 2})}), doctest::Contains("indices [2,3] and updates [2,2] must have the same shape"),
                       InvalidInput);
  CHECK_THROWS_WITH_AS(infer(SE{}, {f32({3, 3}), i64({3}), f32({3})}), doctest::Contains("must have the rank of data"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(SE{}, {f32({3, 3}), i64({2, 4}), f32({2, 4})}), doctest::Contains("larger than data [3,3] in dim 1"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(SE{}, {f32({3, 3}), i64({2, 3}), i64({2, 3})}), doctest::Contains("input 0 is float32 but input 2 is int64"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(SE{}, {f32({3, 3}), f32({2, 3}), f32({2, 3})}), doctest::Contains("indices must be int64 or int32, got float32"), InvalidInput);

  // ScatterND, ONNX's first example; slices of rows; a full index tuple; reductions.
  CHECK(floats(run(SN{}, {Tensor<float>({8}, VF{1, 2, 3, 4, 5, 6, 7, 8}), Tensor<int64_t>({4, 1}, VI{4, 3, 1, 7}),
                          Tensor<float>({4}, VF{9, 10, 11, 12})})[0]) == VF{1, 11, 3, 10, 9, 6, 7, 12});
  const Tensor<float> d({4, 2}, VF{1, 2, 3, 4, 5, 6, 7, 8});
  auto rows = [&](R r, VI idx) {
    return floats(run(SN{.reduction = r}, {d, Tensor<int64_t>({int64_t(idx.size()), 1}, idx), Tensor<float>({int64_t(idx.size()), 2}, 10.f)})[0]);
  };
  CHECK(rows(R::None, {1, -1}) == VF{1, 2, 10, 10, 5, 6, 10, 10});
  CHECK(rows(R::Add, {0, 0}) == VF{21, 22, 3, 4, 5, 6, 7, 8});
  CHECK(rows(R::Mul, {2, 3}) == VF{1, 2, 3, 4, 50, 60, 70, 80});
  CHECK(rows(R::Max, {0, 3}) == VF{10, 10, 3, 4, 5, 6, 10, 10});
  CHECK(rows(R::Min, {0, 3}) == VF{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(floats(run(SN{}, {Tensor<float>({2, 2}, VF{0, 1, 2, 3}), Tensor<int64_t>({1, 2}, VI{1, 0}), Tensor<float>({1}, VF{9})})[0]) == VF{0, 1, 9, 3});
  CHECK_THROWS_WITH_AS(rows(R::None, {4}), "ScatterND: index 4 is out of range for dim 0 of size 4", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(SN{}, {f32({2}), i64({1, 1}), f32({2})}),
                       doctest::Contains("updates [2] must have shape [1] (indices' shape without its last dim, then data's dims after the first 1)"),
                       InvalidInput);
  CHECK_THROWS_WITH_AS(infer(SN{}, {f32({2, 3}), i64({1, 3}), f32({1})}), doctest::Contains("indices' last dim 3 must be in [1, 2]"), InvalidInput);

  // The fast kernels against the formulas (random indices with duplicates and negatives),
  // and the field agrees for none, add and mul.
  uint64_t seed = 5200;
  InputSpec idx{.ints = [](Rng& r) { return r.range(-3, 2); }};
  for (R r : {R::None, R::Add, R::Mul, R::Max, R::Min}) {
    CAPTURE(int(r));
    check_fast_vs_formula(SE{.axis = 1, .reduction = r}, {f32({3, 3, 2}), i64({3, 5, 2}), f32({3, 5, 2})}, seed++, idx);
    check_fast_vs_formula(SE{.axis = -1, .reduction = r}, {f32({2, 4}), i64({1, 6}), f32({1, 6})}, seed++, idx);
    check_fast_vs_formula(SN{.reduction = r}, {f32({3, 3, 2}), i64({4, 2}), f32({4, 2})}, seed++, idx);
    check_fast_vs_formula(SN{.reduction = r}, {f32({3, 4}), i64({2, 3, 1}), f32({2, 3, 4})}, seed++, idx);
    if (r == R::None || r == R::Add || r == R::Mul) {
      check_float_vs_field(SE{.axis = 1, .reduction = r}, {f32({3, 3, 2}), i64({3, 5, 2}), f32({3, 5, 2})}, seed++, idx);
      check_float_vs_field(SN{.reduction = r}, {f32({3, 3, 2}), i64({4, 2}), f32({4, 2})}, seed++, idx);
    }
  }
}

TEST_CASE("QuantizeLinear and DequantizeLinear: half to even, saturation, NaN, per axis, int32 input, errors, and int8 results wrap") {
  using VF = std::vector<float>;
  using VI = std::vector<int64_t>;
  auto run = [](Op op, std::vector<Value<float>> in, std::vector<DType> types) {
    Types t;
    for (size_t i = 0; i < in.size(); ++i) t.push_back({types[i], value_shape(in[i])});
    auto [r, out] = resolve(op, t);
    return evaluate_op<float>(r, in, out);
  };
  const DType F = DType::Float32, I8 = DType::Int8, U8 = DType::UInt8, I32 = DType::Int32;
  using Q = ops::QuantizeLinear;
  using DQ = ops::DequantizeLinear;
  auto ints = [](const Value<float>& v) { return std::get<Tensor<int64_t>>(v).vec(); };
  auto floats = [](const Value<float>& v) { return std::get<Tensor<float>>(v).vec(); };
  const Tensor<float> x({8}, VF{0.f, 1.f, 2.5f, -2.5f, 3.5f, 1000.f, -1000.f, NAN});
  const Tensor<float> one(Shape{}, 1.f), two(Shape{}, 2.f);
  CHECK(ints(run(Q{.to = I8}, {x, one, Tensor<int64_t>(Shape{}, int64_t(0))}, {F, F, I8})[0]) == VI{0, 1, 2, -2, 4, 127, -128, -128});
  CHECK(ints(run(Q{}, {x, two, Tensor<int64_t>(Shape{}, int64_t(128))}, {F, F, U8})[0]) == VI{128, 128, 129, 127, 130, 255, 0, 0});
  CHECK(ints(run(Q{}, {x, one}, {F, F})[0]) == VI{0, 1, 2, 0, 4, 255, 0, 0});  // uint8 without a zero point
  // A one-element scale with a scalar zero point (exporters mix the two forms); axis unread.
  CHECK(ints(run(Q{.axis = 5, .to = I8}, {x, Tensor<float>({1}, 1.f), Tensor<int64_t>(Shape{}, int64_t(-1))}, {F, F, I8})[0]) ==
        VI{-1, 0, 1, -3, 3, 127, -128, -128});
  // Per axis: one scale and zero point per column.
  const Tensor<float> m({2, 3}, VF{1, 2, 3, 4, 5, 6});
  CHECK(ints(run(Q{.axis = 1, .to = I8}, {m, Tensor<float>({3}, VF{1, 2, 4}), Tensor<int64_t>({3}, VI{0, 1, 2})}, {F, F, I8})[0]) == VI{1, 2, 3, 4, 3, 4});
  CHECK(run(Q{.to = I8}, {m, one, Tensor<int64_t>(Shape{}, int64_t(0))}, {F, F, I8}).size() == 1);
  // Dequantize: int8, uint8 per axis, int32 (a bias).
  CHECK(floats(run(DQ{}, {Tensor<int64_t>({3}, VI{-128, 0, 127}), Tensor<float>(Shape{}, 0.5f), Tensor<int64_t>(Shape{}, int64_t(-1))}, {I8, F, I8})[0]) ==
        VF{-63.5f, 0.5f, 64.f});
  CHECK(floats(run(DQ{.axis = 0}, {Tensor<int64_t>({2, 2}, VI{0, 255, 10, 20}), Tensor<float>({2}, VF{1.f, 0.25f}), Tensor<int64_t>({2}, VI{0, 4})},
                   {U8, F, U8})[0]) == VF{0, 255, 1.5f, 4});
  CHECK(floats(run(DQ{}, {Tensor<int64_t>({2}, VI{100, -300}), Tensor<float>(Shape{}, 0.5f)}, {I32, F})[0]) == VF{50, -150});
  // Errors.
  auto types = [](std::vector<std::pair<DType, Shape>> v) {
    Types t;
    for (auto& [d, s] : v) t.push_back({d, s});
    return t;
  };
  CHECK_THROWS_WITH_AS(infer(Q{}, types({{DType::Int64, {3}}, {F, {}}})), "QuantizeLinear 'n': x must be float32, got int64", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(Q{}, types({{F, {3}}, {F, {}}, {I8, {}}})), "QuantizeLinear 'n': y_zero_point is int8 but the output type is uint8",
                       InvalidInput);
  CHECK_THROWS_WITH_AS(infer(Q{.axis = 1}, types({{F, {2, 3}}, {F, {2}}})),
                       "QuantizeLinear 'n': y_scale [2] must have one value per element of the input's dim 1 (3)", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(Q{.axis = 1}, types({{F, {2, 3}}, {F, {3}}, {U8, {1}}})),
                       "QuantizeLinear 'n': y_zero_point [1] must have the shape of y_scale [3]", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(Q{.axis = 2}, types({{F, {2, 3}}, {F, {3}}})), doctest::Contains("axis"), InvalidInput);
  CHECK_THROWS_WITH_AS(infer(DQ{}, types({{F, {3}}, {F, {}}})), "DequantizeLinear 'n': x must be int8, uint8 or int32, got float32", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(DQ{}, types({{I8, {3}}, {F, {}}, {U8, {}}})), "DequantizeLinear 'n': x_zero_point is uint8 but x is int8", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(DQ{}, types({{I8, {3}}, {DType::Int64, {}}})), "DequantizeLinear 'n': x_scale must be float32, got int64", InvalidInput);
  // The fast kernels against the formulas, per tensor and per axis.
  InputSpec q8{.lo = -3, .hi = 3, .ints = [](Rng& r) { return r.range(-128, 127); }};
  check_fast_vs_formula(Q{.axis = 1, .to = I8}, types({{F, {2, 3, 4}}, {F, {3}}, {I8, {3}}}), 5300, q8);
  check_fast_vs_formula(Q{.to = I8}, types({{F, {2, 3, 4}}, {F, {}}, {I8, {}}}), 5301, q8);
  check_fast_vs_formula(DQ{.axis = -1}, types({{I8, {2, 3, 4}}, {F, {4}}, {I8, {4}}}), 5302, q8);
  check_fast_vs_formula(DQ{}, types({{I8, {2, 3, 4}}, {F, {1}}}), 5303, q8);
  // Neither has a finite-field meaning.
  CHECK_THROWS_AS(evaluate_op<F31>(DQ{}, std::vector<Value<F31>>{Tensor<int64_t>({1}, VI{1}), Tensor<F31>(Shape{}, F31(1))}, types({{F, {1}}})),
                  Unsupported);

  // int8 and uint8 arithmetic and casts wrap as the types do.
  CHECK(ints(run(ops::Add{}, {Tensor<int64_t>({2}, VI{100, -100}), Tensor<int64_t>({2}, VI{100, -100})}, {I8, I8})[0]) == VI{-56, 56});
  CHECK(ints(run(ops::Mul{}, {Tensor<int64_t>({1}, VI{16}), Tensor<int64_t>({1}, VI{17})}, {U8, U8})[0]) == VI{16});
  CHECK(ints(run(ops::Add{}, {Tensor<int64_t>({1}, VI{INT32_MAX}), Tensor<int64_t>({1}, VI{1})}, {I32, I32})[0]) == VI{INT32_MIN});
  CHECK(ints(run(ops::Cast{.to = I8}, {Tensor<float>({4}, VF{200.f, -1.9f, 127.f, -129.f})}, {F})[0]) == VI{-56, -1, 127, 127});
  CHECK(ints(run(ops::Cast{.to = U8}, {Tensor<int64_t>({3}, VI{-1, 256, 300})}, {DType::Int64})[0]) == VI{255, 0, 44});
  CHECK(ints(run(ops::Cast{.to = DType::Int64}, {Tensor<float>({3}, VF{NAN, 1e30f, -2.7f})}, {F})[0]) == VI{INT64_MIN, INT64_MIN, -2});
}

TEST_CASE("DynamicQuantizeLinear: ONNX Runtime's parameters (empty range, NaN skipped, infinities, underflow, zero point ties to even)") {
  using D = ops::DynamicQuantizeLinear;
  using VI = std::vector<int64_t>;
  auto run = [](std::vector<float> x) {
    const Types t{{DType::Float32, {int64_t(x.size())}}};
    auto [r, out] = resolve(D{}, t);
    CHECK(out == Types{{DType::UInt8, {int64_t(x.size())}}, {DType::Float32, {}}, {DType::UInt8, {}}});
    return evaluate_op<float>(r, std::vector<Value<float>>{Tensor<float>({int64_t(x.size())}, x)}, out);
  };
  struct C {
    std::vector<float> x;
    VI y;
    float scale;
    int64_t zero;
  };
  // Each row is what ONNX Runtime 1.20 returns for x.
  const float tie = -0x1.958b68p-5f;  // 0 - tie / scale is 2.5 exactly in float
  const std::vector<C> cases = {
      {{0, 0, 0, 0}, {0, 0, 0, 0}, 1.f, 0},
      {{1, 2, 3}, {85, 170, 255}, 3.f / 255.f, 0},
      {{-1, -2, -3}, {170, 85, 0}, 3.f / 255.f, 255},
      {{-1, 0.5f, 3}, {0, 96, 255}, 4.f / 255.f, 64},
      {{NAN, -1, 1}, {0, 0, 254}, 2.f / 255.f, 127},
      {{-1, 1, NAN}, {0, 254, 0}, 2.f / 255.f, 127},
      {{-INFINITY, 1, 2}, {0, 255, 255}, INFINITY, 255},
      {{1e-45f, 0, 0}, {255, 0, 0}, 0.f, 255},
      {{-3e38f, 3e38f, 0}, {0, 0, 0}, INFINITY, 0},
      {{tie, 5.f}, {0, 254}, (5.f - tie) / 255.f, 2},
  };
  for (const auto& c : cases) {
    CAPTURE(c.x);
    const auto r = run(c.x);
    CHECK(std::get<Tensor<int64_t>>(r[0]).vec() == c.y);
    CHECK(std::get<Tensor<float>>(r[1]).vec() == std::vector<float>{c.scale});
    CHECK(std::get<Tensor<int64_t>>(r[2]).vec() == VI{c.zero});
  }
  const Types t{{DType::Float32, {2, 3, 4}}};
  check_fast_vs_formula(D{}, t, 5400);
  check_fast_vs_formula(D{}, t, 5401, InputSpec{.lo = 0.5, .hi = 3});
  CHECK_THROWS_WITH_AS(infer(D{}, Types{{DType::Int8, {3}}}), "DynamicQuantizeLinear 'n': x must be float32, got int8", InvalidInput);
  CHECK_THROWS_AS(evaluate_op<F31>(D{}, std::vector<Value<F31>>{Tensor<F31>({1}, F31(1))}, t), Unsupported);
}

namespace {
Types qtypes(std::vector<std::pair<DType, Shape>> v) {
  Types t;
  for (auto& [d, s] : v) t.push_back({d, s});
  return t;
}
std::vector<int64_t> int_result(const Op& op, const std::vector<Value<float>>& in, std::vector<DType> types) {
  Types t;
  for (size_t i = 0; i < in.size(); ++i) t.push_back({types[i], value_shape(in[i])});
  auto [r, out] = resolve(op, t);
  return std::get<Tensor<int64_t>>(evaluate_op<float>(r, in, out)[0]).vec();
}
Tensor<int64_t> ints_of(Shape s, std::vector<int64_t> v) { return Tensor<int64_t>(std::move(s), std::move(v)); }
Tensor<float> scalar_f(float v) { return Tensor<float>(Shape{}, v); }
Tensor<int64_t> scalar_i(int64_t v) { return Tensor<int64_t>(Shape{}, v); }
// int8 and uint8 operands alike: values 0..127 fit both
const InputSpec kQ{.lo = 0.01, .hi = 0.1, .ints = [](Rng& r) { return r.range(0, 127); }};
}  // namespace

TEST_CASE("MatMulInteger: zero points (none, A's, B's per column), batch broadcasting, int32 results, errors") {
  using M = ops::MatMulInteger;
  const DType U8 = DType::UInt8, I8 = DType::Int8, F = DType::Float32;
  const auto a = ints_of({2, 3}, {1, 2, 3, 4, 5, 6});
  const auto b = ints_of({3, 2}, {1, -1, 0, 2, -3, 4});
  // (A - 1) x (B - [0, 1]): rows [0 1 2], [3 4 5]; columns [1 0 -3], [-2 1 3]
  CHECK(int_result(M{.a_zero = true, .b_zero = true}, {a, b, scalar_i(1), ints_of({2}, {0, 1})}, {U8, I8, U8, I8}) == std::vector<int64_t>{-6, 7, -12, 13});
  CHECK(int_result(M{}, {a, b}, {U8, I8}) == std::vector<int64_t>{-8, 15, -14, 30});
  CHECK(int_result(M{.b_zero = true}, {a, b, ints_of({1}, {1})}, {U8, I8, I8}) == std::vector<int64_t>{-14, 9, -29, 15});
  CHECK(out_shape(M{}, qtypes({{U8, {2, 1, 3, 4}}, {I8, {5, 4, 2}}})) == Shape{2, 5, 3, 2});
  CHECK(infer(M{}, qtypes({{U8, {3, 4}}, {U8, {4, 2}}}))[0].dtype == DType::Int32);
  check_fast_vs_formula(M{.a_zero = true, .b_zero = true}, qtypes({{U8, {2, 1, 3, 4}}, {I8, {5, 4, 2}}, {U8, {}}, {I8, {2}}}), 5410, kQ);
  check_fast_vs_formula(M{.b_zero = true}, qtypes({{I8, {4}}, {I8, {4, 3}}, {I8, {3}}}), 5411, kQ);
  check_fast_vs_formula(M{.a_zero = true}, qtypes({{U8, {3, 5}}, {U8, {5}}, {U8, {1}}}), 5412, kQ);
  CHECK_THROWS_WITH_AS(infer(M{}, qtypes({{F, {2, 3}}, {I8, {3, 2}}})), "MatMulInteger 'n': A must be int8 or uint8, got float32", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(M{.a_zero = true}, qtypes({{U8, {2, 3}}, {I8, {3, 2}}, {I8, {}}})),
                       "MatMulInteger 'n': a_zero_point is int8 but A is uint8", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(M{.a_zero = true}, qtypes({{U8, {2, 3}}, {I8, {3, 2}}, {U8, {2}}})),
                       "MatMulInteger 'n': a_zero_point [2] has several values; pet (as ONNX Runtime) takes one zero point for A", Unsupported);
  CHECK_THROWS_WITH_AS(infer(M{.b_zero = true}, qtypes({{U8, {2, 3}}, {I8, {3, 2}}, {I8, {3}}})),
                       "MatMulInteger 'n': b_zero_point [3] must be one value or one per column of B (2)", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(M{}, qtypes({{U8, {2, 3}}, {I8, {4, 2}}})), "MatMulInteger 'n': A [2,3] has 3 columns but B [4,2] has 4 rows", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(M{.b_zero = true}, qtypes({{U8, {2, 3}}, {I8, {3, 2}}})), "MatMulInteger 'n': expects 3 inputs, got 2", InvalidInput);
  // integer arithmetic, the same in every interpreter (as an int8 Add's)
  CHECK(std::get<Tensor<int64_t>>(evaluate_op<F31>(M{}, std::vector<Value<F31>>{ints_of({1, 2}, {3, 4}), ints_of({2, 1}, {5, -6})},
                                                   qtypes({{DType::Int32, {1, 1}}}))[0]).vec() == std::vector<int64_t>{-9});
}

TEST_CASE("ConvInteger: zero points (x's, w's per output channel), padding contributes 0, Conv's geometry and errors") {
  using CI = ops::ConvInteger;
  const DType U8 = DType::UInt8, I8 = DType::Int8;
  const auto x = ints_of({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  const auto w = ints_of({1, 1, 2, 2}, {1, 0, 0, 1});
  // x - 1 = [[0 1 2] [3 4 5] [6 7 8]]; the kernel adds two diagonal neighbours
  CHECK(int_result(CI{.x_zero = true}, {x, w, scalar_i(1)}, {U8, U8, U8}) == std::vector<int64_t>{4, 6, 10, 12});
  // padded reads contribute 0 (not -x_zero_point): with a zero point of 1, pad 1 at the top-left only
  CHECK(int_result(CI{.pads = {1, 1, 0, 0}, .x_zero = true}, {x, w, scalar_i(1)}, {U8, U8, U8}) ==
        std::vector<int64_t>{0, 1, 2, 3, 4, 6, 6, 10, 12});
  // w's zero point: w - 1 = [[0 -1] [-1 0]]
  CHECK(int_result(CI{.w_zero = true}, {x, w, scalar_i(1)}, {U8, U8, U8}) == std::vector<int64_t>{-6, -8, -12, -14});
  struct G {
    CI op;
    Shape x, w;
  };
  const std::vector<G> geo = {
      {CI{.pads = {1, 1, 1, 1}, .x_zero = true, .w_zero = true}, {2, 3, 5, 6}, {4, 3, 3, 3}},
      {CI{.strides = {2, 1}, .dilations = {1, 2}, .group = 2, .x_zero = true, .w_zero = true}, {1, 4, 7, 7}, {6, 2, 3, 2}},
      {CI{.pads = {2, 0}, .x_zero = true}, {1, 2, 9}, {3, 2, 3}},
      {CI{.pads = {1, 0, 1, 0, 1, 1}, .w_zero = true}, {1, 2, 3, 4, 4}, {2, 2, 2, 2, 2}},
      {CI{.group = 3, .auto_pad = AutoPad::SameUpper, .x_zero = true, .w_zero = true}, {1, 3, 5, 5}, {3, 1, 3, 3}},
  };
  uint64_t seed = 5420;
  for (const auto& g : geo) {
    Types t = qtypes({{U8, g.x}, {I8, g.w}});
    if (g.op.x_zero) t.push_back({U8, {}});
    if (g.op.w_zero) t.push_back({I8, {g.w[0]}});
    CAPTURE(g.x);
    CHECK(out_shape(g.op, t) == out_shape(ops::Conv{.strides = g.op.strides, .pads = g.op.pads, .dilations = g.op.dilations, .group = g.op.group,
                                                     .auto_pad = g.op.auto_pad},
                                          qtypes({{DType::Float32, g.x}, {DType::Float32, g.w}})));
    check_fast_vs_formula(g.op, t, seed++, kQ);
  }
  CHECK_THROWS_WITH_AS(infer(CI{}, qtypes({{U8, {1, 3, 5, 5}}, {U8, {4, 2, 3, 3}}})),
                       "ConvInteger 'n': input has 3 channels but weight expects 2 (weight shape [4,2,3,3], group 1)", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(CI{.w_zero = true}, qtypes({{U8, {1, 3, 5, 5}}, {U8, {4, 3, 3, 3}}, {U8, {3}}})),
                       "ConvInteger 'n': w_zero_point [3] must be one value or one per output channel (4)", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(CI{.x_zero = true}, qtypes({{U8, {1, 3, 5, 5}}, {U8, {4, 3, 3, 3}}, {U8, {2}}})),
                       "ConvInteger 'n': x_zero_point [2] must be one value", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(CI{}, qtypes({{U8, {1, 3, 5, 5}}, {DType::Int32, {4, 3, 3, 3}}})), "ConvInteger 'n': w must be int8 or uint8, got int32",
                       InvalidInput);
}

TEST_CASE("QLinearMatMul and QLinearConv: ONNX Runtime's requantization (m = (s_a * s_b) / s_y in float, ties to even, saturation), per-channel weights, bias, errors") {
  using QM = ops::QLinearMatMul;
  using QC = ops::QLinearConv;
  const DType U8 = DType::UInt8, I8 = DType::Int8, F = DType::Float32, I32 = DType::Int32;
  // a - 10 = [0 10], b = [3 4]: sum 40; m = 0.5 * 0.25 / 2 = 0.0625: 2.5 rounds to 2, + 100
  const auto a = ints_of({1, 2}, {10, 20});
  const auto b = ints_of({2, 1}, {3, 4});
  auto qm = [&](Tensor<int64_t> bb, Tensor<float> bs, float ys, int64_t yz, DType to) {
    return int_result(QM{.to = to}, {a, scalar_f(0.5f), scalar_i(10), bb, bs, ints_of({bb.shape().back()}, std::vector<int64_t>(size_t(bb.shape().back()), 0)),
                                     scalar_f(ys), scalar_i(yz)},
                      {U8, F, U8, I8, F, I8, F, to});
  };
  CHECK(qm(b, scalar_f(0.25f), 2.f, 100, U8) == std::vector<int64_t>{102});
  CHECK(qm(b, scalar_f(0.25f), 2.f, 101, U8) == std::vector<int64_t>{103});  // the tie rounds before the zero point is added
  CHECK(qm(b, scalar_f(0.25f), 0.001f, 0, U8) == std::vector<int64_t>{255});  // saturates
  CHECK(qm(b, scalar_f(0.25f), 0.001f, 0, I8) == std::vector<int64_t>{127});
  CHECK(qm(ints_of({2, 2}, {3, -3, 4, -4}), Tensor<float>({2}, std::vector<float>{0.25f, 1.f}), 2.f, -5, I8) == std::vector<int64_t>{-3, -15});
  // The multiplier is (s_a * s_b) / s_y in float, not s_a * (s_b / s_y): found against ONNX Runtime,
  // whose output at these scales and this sum is 214 where the other orders give 215.
  {
    const float sa = 0x1.41299cp-6f, sb = 0x1.a754b2p-8f, sy = 0x1.ce6382p-6f;
    // a = [255 121 57], b = [127 127 1]: sum 47809
    CHECK(int_result(QM{}, {ints_of({1, 3}, {255, 121, 57}), scalar_f(sa), scalar_i(0), ints_of({3, 1}, {127, 127, 1}), scalar_f(sb), scalar_i(0),
                            scalar_f(sy), scalar_i(0)},
                     {U8, F, U8, I8, F, I8, F, U8}) == std::vector<int64_t>{214});
  }
  check_fast_vs_formula(QM{}, qtypes({{U8, {2, 3, 4}}, {F, {}}, {U8, {}}, {I8, {4, 5}}, {F, {5}}, {I8, {5}}, {F, {}}, {U8, {}}}), 5430, kQ);
  check_fast_vs_formula(QM{.to = I8}, qtypes({{I8, {3, 4}}, {F, {1}}, {I8, {1}}, {U8, {2, 4, 2}}, {F, {}}, {U8, {}}, {F, {}}, {I8, {}}}), 5431, kQ);
  // QLinearConv: per-channel weight scales, bias, groups
  check_fast_vs_formula(QC{.pads = {1, 1, 1, 1}},
                        qtypes({{U8, {1, 3, 5, 5}}, {F, {}}, {U8, {}}, {I8, {4, 3, 3, 3}}, {F, {4}}, {I8, {4}}, {F, {}}, {U8, {}}, {I32, {4}}}), 5432, kQ);
  check_fast_vs_formula(QC{.strides = {2, 2}, .group = 2, .to = I8},
                        qtypes({{I8, {2, 4, 6, 6}}, {F, {1}}, {I8, {1}}, {I8, {6, 2, 3, 3}}, {F, {}}, {I8, {}}, {F, {}}, {I8, {}}}), 5433, kQ);
  check_fast_vs_formula(QC{.dilations = {2}}, qtypes({{U8, {1, 2, 9}}, {F, {}}, {U8, {}}, {U8, {3, 2, 3}}, {F, {3}}, {U8, {3}}, {F, {}}, {U8, {}}}), 5434, kQ);
  // a hand-computed QLinearConv: 1x1 kernel, sum (x - 2) * 3 + bias 4, m = 1 * 0.5 / 1
  CHECK(int_result(QC{}, {ints_of({1, 1, 1, 3}, {2, 5, 9}), scalar_f(1.f), scalar_i(2), ints_of({1, 1, 1, 1}, {3}), scalar_f(0.5f), scalar_i(0), scalar_f(1.f),
                          scalar_i(7), ints_of({1}, {4})},
                   {U8, F, U8, I8, F, I8, F, U8, I32}) == std::vector<int64_t>{9, 13, 19});  // sums 4, 13, 25; halves 2, 6.5, 12.5 round to even
  // errors
  CHECK_THROWS_WITH_AS(infer(QM{}, qtypes({{U8, {2, 3}}, {F, {}}, {U8, {}}, {I8, {3, 2}}, {F, {}}, {I8, {}}, {F, {}}, {I8, {}}})),
                       "QLinearMatMul 'n': y_zero_point is int8 but the output type is uint8", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(QM{}, qtypes({{U8, {2, 3}}, {F, {2}}, {U8, {}}, {I8, {3, 2}}, {F, {}}, {I8, {}}, {F, {}}, {U8, {}}})),
                       "QLinearMatMul 'n': a_scale [2] must be one value", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(QM{}, qtypes({{U8, {2, 3}}, {I32, {}}, {U8, {}}, {I8, {3, 2}}, {F, {}}, {I8, {}}, {F, {}}, {U8, {}}})),
                       "QLinearMatMul 'n': a_scale must be float32, got int32", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(QC{}, qtypes({{U8, {1, 3, 5, 5}}, {F, {}}, {U8, {}}, {I8, {4, 3, 3, 3}}, {F, {3}}, {I8, {}}, {F, {}}, {U8, {}}})),
                       "QLinearConv 'n': w_scale [3] must be one value or one per output channel (4)", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(QC{}, qtypes({{U8, {1, 3, 5, 5}}, {F, {}}, {U8, {}}, {I8, {4, 3, 3, 3}}, {F, {}}, {I8, {}}, {F, {}}, {U8, {}}, {F, {4}}})),
                       "QLinearConv 'n': bias B must be int32, got float32", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(QC{}, qtypes({{U8, {1, 3, 5, 5}}, {F, {}}, {U8, {}}, {I8, {4, 3, 3, 3}}, {F, {}}, {I8, {}}, {F, {}}, {U8, {}}, {I32, {3}}})),
                       "QLinearConv 'n': bias shape [3] must be [4]", InvalidInput);
  CHECK_THROWS_WITH_AS(infer(QC{}, qtypes({{U8, {1, 3, 5, 5}}, {F, {}}, {I8, {}}, {I8, {4, 3, 3, 3}}, {F, {}}, {I8, {}}, {F, {}}, {U8, {}}})),
                       "QLinearConv 'n': x_zero_point is int8 but x is uint8", InvalidInput);
}

TEST_CASE("FLOP counts of the huge shapes a model may declare saturate at kMaxFlops instead of overflowing") {
  auto flops = [](Op op, const Types& in) {
    auto [r, out] = resolve(op, in);
    return op_flops(r, in, out);
  };
  // LRN counts the channels its window really covers: size 2^63-1 (fuzz seed 86) over 5 channels.
  CHECK(flops(ops::LRN{.size = std::numeric_limits<int64_t>::max()}, {f32({5, 5, 5, 5})}) == (2 * 5 + 4) * 625);
  CHECK(flops(ops::LRN{.size = 3}, {f32({5, 5, 5, 5})}) == (2 * 3 + 4) * 625);
  // A conv whose output (4 x 131071^2) and weights (4 x 2^34) are each under 2^36 elements,
  // but whose product is about 2^71.
  const int64_t k = int64_t(1) << 17, p = k - 1;
  CHECK(flops(Conv{.pads = {p, p, p, p}}, {f32({1, 1, 1, 1}), f32({4, 1, k, k})}) == kMaxFlops);
  CHECK(flops(Conv{}, {f32({1, 3, 8, 8}), f32({4, 3, 3, 3})}) == 2 * (4 * 6 * 6) * 27);
  // A pool window of 2^17 x 2^17 x 2^17 (2^51) over 64^3 outputs.
  const int64_t q = k / 2 + 31;
  CHECK(flops(MaxPool{{.kernel_shape = {k, k, k}, .pads = {q, q, q, q, q, q}}}, {f32({1, 1, 1, 1, 1})}) == kMaxFlops);
  CHECK(flop_mul(3, 5, 7) == 105);
  CHECK(flop_mul(kMaxFlops, 2) == kMaxFlops);
  CHECK(flop_add(kMaxFlops, kMaxFlops) == kMaxFlops);
  CHECK(flop_add(2, 3) == 5);
}
