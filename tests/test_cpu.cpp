// The oneDNN cpu backend against the reference interpreter: every kernel on random shapes
// (odd sizes, groups, dilation, asymmetric pads, 1-D and 3-D), the fusions (activations,
// residual sums, biases, batch norm folding), layouts and buffer reuse across a program.
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cfloat>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "pairs.hpp"
#include "op_testing.hpp"
#include "pet/backend/backend.hpp"
#include "pet/backend/cpu.hpp"
#include "pet/core/parallel.hpp"
#include "pet/eval/compare.hpp"
#include "pet/mutate/mutate.hpp"
#include <nlohmann/json.hpp>

#include "cpu/algorithm_cache.hpp"
#include "cpu/broadcast.hpp"
#include "cpu/norm.hpp"
#include "cpu/convert.hpp"
#include "cpu/copy.hpp"
#include "cpu/winograd.hpp"
#include "pet/backend/copy_plan.hpp"

using namespace pet;
using namespace pet::testing;

namespace {

/// Runs g on the reference and the cpu backend with the same random inputs; every output
/// must agree to float rounding.
void same_as_reference(const Graph& g, uint64_t seed, const std::string& what, const backend::CompileOptions& opt = {},
                       const std::string& plan_must_say = "") {
  Rng rng(seed);
  std::vector<Value<float>> in;
  for (TensorId t : g.inputs()) {
    InputSpec spec;
    if (!is_float(g.type(t).dtype)) spec.ints = [](Rng& r) { return r.range(0, 2); };
    in.push_back(random_inputs({g.type(t)}, rng, spec)[0]);
  }
  auto ref = backend::make_backend("reference")->compile(g)->run(in);
  auto exe = backend::make_backend("cpu")->compile(g, opt);
  if (!plan_must_say.empty()) {
    INFO(what, " plan:\n", exe->describe());
    CHECK(exe->describe().find(plan_must_say) != std::string::npos);
  }
  for (int round = 0; round < 2; ++round) {  // twice: buffers are reused between runs
    auto got = exe->run(in);
    REQUIRE(got.size() == ref.size());
    for (size_t k = 0; k < got.size(); ++k) {
      Comparison c = compare(got[k], ref[k], 1e-4, 1e-4);
      INFO(what, " output ", k, ": ", c.problem, " max error ", c.max_abs_err, " max |ref| ", c.max_abs_ref, "\nplan:\n", exe->describe());
      CHECK(c.pass);
    }
  }
}

Graph one_op(Op op, const Types& in, const std::vector<bool>& constant = {}, uint64_t seed = 1) {
  Graph g;
  Rng rng(seed);
  std::vector<TensorId> ids;
  for (size_t i = 0; i < in.size(); ++i) {
    if (i < constant.size() && constant[i]) ids.push_back(g.add_constant(cat("c", i), lab::random_weight(in[i].shape, rng)));
    else ids.push_back(g.add_input(cat("x", i), in[i]));
  }
  for (TensorId t : g.add_node("op", std::move(op), ids)) g.add_output(t);
  return g;
}

/// Direct convs only: tests that compare exactly (Winograd's transforms round, and which
/// algorithm wins the timing depends on the machine and its load).
backend::CompileOptions direct_convs() {
  backend::CompileOptions opt;
  opt.conv_algorithm = "direct";
  return opt;
}

/// g compiled on cpu with the int8 kernels allowed or not, its plan, and whether they should
/// appear in it (allowed, and the CPU has VNNI: not under ONEDNN_MAX_CPU_ISA=AVX2, say).
struct Int8Compiled {
  std::unique_ptr<backend::Executable> exe;
  std::string plan;
  bool want = false;
};
Int8Compiled compile_int8(const Graph& g, bool int8) {
  backend::CompileOptions opt = direct_convs();
  opt.int8 = int8;
  Int8Compiled c{backend::make_backend("cpu")->compile(g, opt)};
  c.plan = c.exe->describe();
  c.want = int8 && backend::cpu_int8_available();
  return c;
}

std::string plan_of(const Graph& g) { return backend::make_backend("cpu")->compile(g)->describe(); }

void moves_exactly(const Graph& g, const std::vector<Value<float>>& in, const std::string& what, const std::string& kernel, double tol = 0);

}  // namespace

TEST_CASE("cpu convs: 1-D, 2-D, 3-D, strides, asymmetric pads, dilations, groups, bias") {
  using ops::Conv;
  struct C {
    Conv op;
    Shape x, w;
  };
  std::vector<C> cases = {
      {Conv{.pads = {1, 1, 1, 1}}, {1, 3, 7, 9}, {8, 3, 3, 3}},
      {Conv{.strides = {2, 2}, .pads = {0, 1, 2, 0}}, {2, 5, 11, 10}, {7, 5, 3, 2}},
      {Conv{.pads = {2, 2, 2, 2}, .dilations = {2, 2}}, {1, 16, 14, 14}, {16, 16, 3, 3}},
      {Conv{.pads = {1, 1, 1, 1}, .group = 4}, {1, 8, 9, 9}, {12, 2, 3, 3}},
      {Conv{.pads = {1, 1, 1, 1}, .group = 16}, {1, 16, 8, 8}, {16, 1, 3, 3}},  // depthwise
      {Conv{}, {1, 32, 7, 7}, {24, 32, 1, 1}},
      {Conv{.strides = {2}, .pads = {3, 0}}, {2, 4, 31}, {6, 4, 5}},            // 1-D
      {Conv{.pads = {1, 1, 1, 1, 1, 1}}, {1, 3, 4, 6, 5}, {5, 3, 3, 3, 3}},     // 3-D
      {Conv{.strides = {1, 2, 2}, .pads = {1, 3, 3, 1, 3, 3}}, {1, 3, 4, 14, 14}, {8, 3, 3, 7, 7}},
  };
  uint64_t seed = 1;
  for (const auto& c : cases) {
    for (bool bias : {false, true}) {
      Types t{f32(c.x), f32(c.w)};
      if (bias) t.push_back(f32({c.w[0]}));
      same_as_reference(one_op(c.op, t, {false, true, true}, seed), seed, cat("conv x", c.x, " w", c.w));
      ++seed;
    }
  }
  // A weight that is an input (not a constant) works too.
  same_as_reference(one_op(Conv{.pads = {1, 1, 1, 1}}, {f32({1, 3, 6, 6}), f32({4, 3, 3, 3})}), 99, "conv with input weight");
}

TEST_CASE("cpu transposed convs on oneDNN's deconvolution: 1-D, 2-D, 3-D, strides, pads, output padding, dilations, groups, bias, activations after") {
  using ops::ConvTranspose;
  struct C {
    ConvTranspose op;
    Shape x, w;
  };
  std::vector<C> cases = {
      {ConvTranspose{.strides = {2, 2}, .pads = {1, 1, 1, 1}}, {1, 16, 8, 8}, {16, 8, 4, 4}},                    // DCGAN's
      {ConvTranspose{.strides = {2, 2}}, {2, 8, 5, 6}, {8, 4, 2, 2}},                                             // U-Net's
      {ConvTranspose{.strides = {2, 2}, .pads = {1, 1, 1, 1}, .output_padding = {1, 1}}, {1, 6, 7, 5}, {6, 5, 3, 3}},  // end pad 0
      {ConvTranspose{.strides = {3, 2}, .pads = {0, 1, 2, 0}, .output_padding = {2, 1}}, {1, 4, 4, 6}, {4, 3, 3, 2}},  // below 0
      {ConvTranspose{.pads = {2, 2, 2, 2}, .dilations = {2, 3}}, {1, 5, 9, 9}, {5, 7, 3, 3}},
      {ConvTranspose{.strides = {2, 2}, .pads = {1, 1, 1, 1}, .group = 4}, {1, 8, 6, 6}, {8, 3, 3, 3}},
      {ConvTranspose{.strides = {2, 2}, .pads = {0, 0, 1, 1}, .group = 6}, {1, 6, 5, 5}, {6, 1, 3, 3}},  // depthwise
      {ConvTranspose{.strides = {4}, .pads = {2, 2}, .output_padding = {3}}, {2, 12, 17}, {12, 6, 8}},      // 1-D (a vocoder's)
      {ConvTranspose{.strides = {1, 2, 2}, .pads = {0, 1, 1, 0, 0, 0}, .output_padding = {0, 1, 1}}, {1, 3, 3, 5, 4}, {3, 4, 3, 3, 3}},  // 3-D
  };
  uint64_t seed = 300;
  for (const auto& c : cases) {
    for (bool bias : {false, true}) {
      Types t{f32(c.x), f32(c.w)};
      if (bias) t.push_back(f32({c.w[1] * c.op.group}));
      same_as_reference(one_op(c.op, t, {false, true, true}, seed), seed, cat("deconv x", c.x, " w", c.w), {}, "oneDNN deconvolution");
      ++seed;
    }
  }
  // A weight that is an input; the bias as a binary add in the deconvolution's layout, with
  // activations after it (oneDNN 2.6 applies a deconvolution's bias and post-ops in a slow
  // reference pass).
  same_as_reference(one_op(ConvTranspose{.strides = {2, 2}}, {f32({1, 3, 4, 4}), f32({3, 5, 2, 2})}), 320, "deconv with input weight",
                    {}, "oneDNN deconvolution");
  for (int act = 0; act < 3; ++act) {
    Graph g;
    Builder b(g);
    Rng rng(321);
    TensorId x = b.input("x", {1, 6, 5, 5});
    TensorId y = b.add(ConvTranspose{.strides = {2, 2}, .pads = {1, 1, 1, 1}, .output_padding = {1, 1}},
                       {x, b.constant("w", lab::random_weight({6, 4, 3, 3}, rng)), b.constant("b", lab::random_weight({4}, rng))});
    if (act == 0) y = b.add(ops::Relu{}, {y});
    if (act == 1) y = b.add(ops::LeakyRelu{.alpha = 0.2f}, {y});
    if (act == 2) y = b.add(ops::Tanh{}, {b.add(ops::Mul{}, {y, b.constant("two", Tensor<float>({}, 2.f))})});
    b.output(y);
    same_as_reference(g, 322 + uint64_t(act), cat("deconv + activation ", act), {}, "its bias, oneDNN binary");
  }
}

TEST_CASE("cpu fusions: conv + BN + residual add + relu, matmul + bias + relu, gemm") {
  Graph g;
  {
    Builder b(g);
    Rng rng(5);
    auto w = [&](Shape s) { return b.constant(cat("w", g.num_tensors()), lab::random_weight(s, rng)); };
    TensorId x = b.input("x", {1, 16, 10, 10});
    TensorId c1 = b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {x, w({16, 16, 3, 3})});
    Tensor<float> var = lab::random_weight({16}, rng);
    for (int64_t i = 0; i < 16; ++i) var[i] = std::abs(var[i]) + 0.5f;
    TensorId bn = b.add(ops::BatchNormalization{}, {c1, w({16}), w({16}), w({16}), b.constant("var", var)});
    TensorId r = b.add(ops::Relu{}, {bn});
    TensorId c2 = b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {r, w({16, 16, 3, 3}), w({16})});
    TensorId s = b.add(ops::Add{}, {c2, x});  // residual
    b.output(b.add(ops::Relu{}, {s}));
  }
  std::string plan = plan_of(g);
  CHECK(plan.find("+ Relu") != std::string::npos);
  CHECK(plan.find("residual add") != std::string::npos);
  CHECK(plan.find("BatchNormalization") == std::string::npos);  // folded into the conv
  same_as_reference(g, 1, "resnet block");

  Graph m;
  {
    Builder b(m);
    Rng rng(6);
    TensorId x = b.input("x", {2, 5, 12});
    TensorId y = b.add(ops::MatMul{}, {x, b.constant("w", lab::random_weight({12, 7}, rng))});
    TensorId z = b.add(ops::Add{}, {y, b.constant("bias", lab::random_weight({7}, rng))});
    b.output(b.add(ops::Relu{}, {z}));
  }
  CHECK(plan_of(m).find("+ bias + Relu") != std::string::npos);
  same_as_reference(m, 2, "matmul + bias + relu");

  // A scalar constant added after a matmul (log(x W + eps)) is the bias, written out over N:
  // oneDNN's gemm ran its reference kernel for a bias broadcast over every dim (525 ms for
  // [2998, 201] x [201, 80], 0.25 with the bias over N). Also Gemm's scalar C.
  for (Shape bias : {Shape{}, Shape{1}, Shape{1, 1, 1}}) {
    Graph sb;
    Builder b(sb);
    Rng rng(8);
    TensorId x = b.input("x", {1, 30, 21});
    TensorId y = b.add(ops::MatMul{}, {x, b.constant("w", lab::random_weight({21, 8}, rng))});
    b.output(b.add(ops::Add{}, {y, b.constant("eps", Tensor<float>(bias, std::vector<float>{0.25f}))}));
    const std::string sp = plan_of(sb);
    INFO(sp);
    CHECK(sp.find("ref:") == std::string::npos);  // fused as the bias or a binary post-op
    same_as_reference(sb, 2, cat("matmul + scalar ", bias));
  }
  {
    const Graph gs = one_op(ops::Gemm{.alpha = 0.5f, .beta = 2.0f}, {f32({30, 21}), f32({21, 8}), f32({})}, {false, true, true});
    CHECK(plan_of(gs).find("ref:") == std::string::npos);
    same_as_reference(gs, 5, "gemm with a scalar constant C");
  }

  // bert_simple's FFN end: relu(x W + b) + x. oneDNN's gemm matmul has only its reference
  // implementation for a residual add after an activation (71 s instead of 0.2 s for the
  // model), so the add stays a separate step; no reference primitive in the plan.
  Graph f;
  {
    Builder b(f);
    Rng rng(7);
    TensorId x = b.input("x", {1, 64, 96});
    TensorId y = b.add(ops::MatMul{}, {x, b.constant("w", lab::random_weight({96, 96}, rng))});
    TensorId z = b.add(ops::Relu{}, {b.add(ops::Add{}, {y, b.constant("bias", lab::random_weight({96}, rng))})});
    b.output(b.add(ops::Add{}, {z, x}));
  }
  const std::string fp = plan_of(f);
  INFO(fp);
  CHECK(fp.find("ref:") == std::string::npos);
  CHECK(fp.find("+ bias + Relu") != std::string::npos);
  same_as_reference(f, 3, "matmul + bias + relu + residual add");

  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (Shape c : {Shape{}, Shape{6}, Shape{4, 6}}) {
        Shape a = ta ? Shape{5, 4} : Shape{4, 5}, bb = tb ? Shape{6, 5} : Shape{5, 6};
        Types t{f32(a), f32(bb)};
        if (!c.empty()) t.push_back(f32(c));
        same_as_reference(one_op(ops::Gemm{.alpha = 0.5f, .beta = 1.0f, .trans_a = ta, .trans_b = tb}, t, {false, true, true}), 3,
                          cat("gemm ", ta, tb, " C", c));
        same_as_reference(one_op(ops::Gemm{.alpha = 1.0f, .beta = 2.0f, .trans_a = ta, .trans_b = tb}, t, {false, false, false}), 4,
                          cat("gemm beta 2 ", ta, tb, " C", c));
      }
}

TEST_CASE("cpu residual add in place: the block's input buffer takes the sum when the add is its last reader, copied otherwise") {
  // x (computed in the program) is read by the block's first conv and by the add: after the
  // first conv ran, the second conv can accumulate into x's own buffer. Not when the conv
  // reads x itself (conv(x) + x), nor when a later node reads x again. Plain convs: x and the
  // sum in one layout on every CPU (in place needs that too).
  backend::CompileOptions plain;
  plain.conv_layout = "plain";
  plain.choose_algorithms = false;
  for (int variant = 0; variant < 4; ++variant) {
    CAPTURE(variant);
    Graph g;
    Builder b(g);
    Rng rng(uint64_t(40 + variant));
    auto w = [&](Shape s) { return b.constant(cat("w", g.num_tensors()), lab::random_weight(s, rng)); };
    TensorId x = b.add(ops::Relu{}, {b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {b.input("in", {1, 16, 9, 10}), w({16, 16, 3, 3})})});
    TensorId h = variant == 1 ? x : b.add(ops::Relu{}, {b.add(ops::Conv{}, {x, w({32, 16, 1, 1}), w({32})})});
    if (variant == 3) h = b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {x, w({32, 16, 3, 3})});  // the first conv's own algorithm
    TensorId y = b.add(ops::Conv{}, {h, w({16, variant == 1 ? 16 : 32, 1, 1}), w({16})});
    TensorId s = b.add(ops::Add{}, {y, x});
    if (variant == 2) s = b.add(ops::Mul{}, {s, x});  // x read after the add
    b.output(b.add(ops::Relu{}, {s}));
    const std::string plan = backend::make_backend("cpu")->compile(g, plain)->describe();
    INFO(plan);
    CHECK(plan.find("residual add") != std::string::npos);
    CHECK((plan.find("copy residual") == std::string::npos) == (variant == 0 || variant == 3));
    same_as_reference(g, uint64_t(60 + variant), cat("residual block, variant ", variant), plain);
    same_as_reference(g, uint64_t(60 + variant), cat("residual block, variant ", variant));
  }
  // Two blocks in a row: the first sum is accumulated in x's buffer, the second in that same
  // buffer again, unless a view of x (a Flatten) is read at the end.
  for (bool view_read_late : {false, true}) {
    CAPTURE(view_read_late);
    Graph g;
    Builder b(g);
    Rng rng(45);
    auto w = [&](Shape s) { return b.constant(cat("w", g.num_tensors()), lab::random_weight(s, rng)); };
    TensorId x = b.add(ops::Relu{}, {b.add(ops::Conv{}, {b.input("in", {1, 16, 6, 7}), w({16, 16, 1, 1})})});
    TensorId flat = view_read_late ? b.add(ops::Flatten{}, {x}) : -1;
    for (int block = 0; block < 2; ++block) {
      TensorId h = b.add(ops::Relu{}, {b.add(ops::Conv{}, {x, w({24, 16, 1, 1})})});
      x = b.add(ops::Add{}, {b.add(ops::Conv{}, {h, w({16, 24, 1, 1}), w({16})}), x});
    }
    if (view_read_late) b.output(b.add(ops::Sub{}, {b.add(ops::Flatten{}, {x}), flat}));  // after the blocks
    b.output(b.add(ops::Relu{}, {x}));
    const std::string plan = backend::make_backend("cpu")->compile(g, plain)->describe();
    INFO(plan);
    CHECK((plan.find("copy residual") == std::string::npos) == !view_read_late);
    same_as_reference(g, 70, "two residual blocks", plain);
    same_as_reference(g, 71, "two residual blocks");
  }
}

TEST_CASE("cpu matmuls: batched, broadcasting, 1-D operands") {
  for (auto [a, b] : std::vector<std::pair<Shape, Shape>>{{{3, 4}, {4, 5}},
                                                          {{2, 3, 4}, {2, 4, 5}},
                                                          {{2, 3, 4}, {4, 5}},
                                                          {{5, 1, 3, 4}, {2, 4, 6}},
                                                          {{4}, {4, 5}},
                                                          {{3, 4}, {4}},
                                                          {{12, 128, 64}, {12, 64, 128}}}) {
    same_as_reference(one_op(ops::MatMul{}, {f32(a), f32(b)}), 7, cat("matmul ", a, " x ", b));
    same_as_reference(one_op(ops::MatMul{}, {f32(a), f32(b)}, {false, true}), 8, cat("matmul const ", a, " x ", b));
  }
}

TEST_CASE("cpu matmuls sharing one constant weight (an unrolled LSTM's steps) share its converted copy, results unchanged") {
  Graph g;
  Rng rng(11);
  TensorId w = g.add_constant("w", lab::random_weight({64, 64}, rng));
  TensorId h = g.add_input("x", f32({3, 64}));
  for (int k = 0; k < 4; ++k) {
    h = g.add_node(cat("mm", k), ops::MatMul{}, {h, w})[0];
    h = g.add_node(cat("tanh", k), ops::Tanh{}, {h})[0];
  }
  // the same constant read transposed (another source layout): its own copy
  g.add_output(g.add_node("gemm_t", ops::Gemm{.trans_b = true}, {h, w})[0]);
  g.add_output(h);
  same_as_reference(g, 12, "shared weight");
}

TEST_CASE("cpu fused element-wise groups: an LSTM cell's gates and state update as one pet step, large tensors left to oneDNN") {
  // the cell of an unrolled LSTM: i, o, f, c gates in, C and H out (H read by a MatMul after)
  auto cell = [](Shape s, bool scalar_clip) {
    Graph g;
    Rng rng(31);
    TensorId i = g.add_input("i", f32(s)), o = g.add_input("o", f32(s)), f = g.add_input("f", f32(s));
    TensorId c = g.add_input("c", f32(s)), cp = g.add_input("c_prev", f32(s));
    auto add = [&](const std::string& name, Op op, std::vector<TensorId> in) { return g.add_node(name, std::move(op), in)[0]; };
    if (scalar_clip) i = add("scale", ops::Mul{}, {i, g.add_constant("k", Tensor<float>(Shape{}, std::vector<float>{0.5f}))});
    TensorId C = add("C", ops::Add{}, {add("fC", ops::Mul{}, {add("sf", ops::Sigmoid{}, {f}), cp}),
                                       add("ic", ops::Mul{}, {add("si", ops::Sigmoid{}, {i}), add("tc", ops::Tanh{}, {c})})});
    TensorId H = add("H", ops::Mul{}, {add("so", ops::Sigmoid{}, {o}), add("tC", ops::Tanh{}, {C})});
    TensorId d = add("div", ops::Div{}, {add("exp", ops::Exp{}, {add("neg", ops::Neg{}, {H})}), add("absC", ops::Abs{}, {C})});
    g.add_output(C);
    g.add_output(g.add_node("next", ops::MatMul{}, {H, g.add_constant("r", lab::random_weight({s.back(), 8}, rng))})[0]);
    g.add_output(d);
    return g;
  };
  for (bool scalar : {false, true}) {
    CAPTURE(scalar);
    same_as_reference(cell({1, 2, 256}, scalar), 32, "LSTM cell", {}, "pet fused element-wise");
    same_as_reference(cell({3, 5, 7}, scalar), 33, "odd-size cell", {}, "pet fused element-wise");
  }
  const std::string big = plan_of(cell({2, 256, 256}, false));  // 131,072 elements: oneDNN's kernels
  CHECK(big.find("pet fused element-wise") == std::string::npos);
  CHECK(big.find("oneDNN eltwise") != std::string::npos);
}

TEST_CASE("cpu pools, element-wise, binary, softmax, norms, reductions") {
  using ops::AveragePool, ops::MaxPool;
  std::vector<std::pair<Op, Shape>> cases = {
      {MaxPool{{.kernel_shape = {3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}}}, {1, 8, 11, 11}},
      {MaxPool{{.kernel_shape = {3, 3}, .strides = {2, 2}, .ceil_mode = true}}, {1, 3, 8, 8}},
      {MaxPool{{.kernel_shape = {2, 2}, .dilations = {2, 2}}}, {1, 2, 7, 7}},
      {MaxPool{{.kernel_shape = {3, 3, 3}, .strides = {2, 2, 2}, .pads = {1, 1, 1, 1, 1, 1}}}, {1, 2, 5, 6, 7}},
      {AveragePool{{.kernel_shape = {3, 3}, .pads = {1, 0, 2, 1}}, false}, {2, 3, 7, 6}},
      {AveragePool{{.kernel_shape = {3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}}, true}, {1, 3, 9, 9}},
      {AveragePool{{.kernel_shape = {3, 3}, .strides = {2, 2}, .ceil_mode = true}, false}, {1, 3, 8, 8}},
      {AveragePool{{.kernel_shape = {2}}}, {1, 3, 9}},
      {ops::GlobalAveragePool{}, {2, 5, 7, 3}},
      {ops::Relu{}, {2, 3, 5}},
      {ops::LeakyRelu{.alpha = 0.1f}, {7, 3}},
      {ops::Sigmoid{}, {4, 4}},
      {ops::Tanh{}, {9}},
      {ops::Exp{}, {3, 3}},
      {ops::Clip{.min = -0.2, .max = 0.3}, {2, 8}},
      {ops::Neg{}, {5}},
      {ops::Erf{}, {6, 2}},
      {ops::Softmax{{.axis = 1}}, {2, 5, 3}},
      {ops::Softmax{{.axis = -1}}, {2, 3, 7}},
      {ops::Softmax{{.axis = 1, .flatten_tail = true}}, {2, 3, 4}},
      {ops::ReduceMean{{.axes = {1}, .keepdims = true}}, {2, 3, 4}},
      {ops::ReduceSum{{.axes = {0, 2}, .keepdims = false}}, {2, 3, 4}},
      {ops::ReduceMax{{.axes = {2}}}, {2, 3, 4}},
      {ops::Abs{}, {3, 4}},
      {ops::Round{}, {3, 4}},
      {ops::Softplus{}, {3, 4}},
      {ops::Mish{}, {3, 4}},
      {ops::HardSwish{}, {3, 4}},
      {ops::Elu{.alpha = 0.6f}, {3, 4}},
      {ops::Floor{}, {3, 4}},
      {ops::Ceil{}, {3, 4}},
      {ops::Sign{}, {3, 4}},
      {ops::Softsign{}, {3, 4}},
      {ops::Selu{}, {3, 4}},
      {ops::HardSigmoid{}, {3, 4}},
      {ops::ReduceMin{{.axes = {1}}}, {2, 3, 4}},
      {ops::ReduceProd{{.axes = {0, 2}, .keepdims = false}}, {2, 3, 4}},
      {ops::ReduceL1{{.axes = {2}}}, {2, 3, 4}},
      {ops::ReduceL2{{.axes = {1, 2}}}, {2, 3, 4}},
      {ops::ReduceSumSquare{{.axes = {0}}}, {2, 3, 4}},
      {ops::ReduceLogSumExp{{.axes = {2}}}, {2, 3, 4}},
  };
  uint64_t seed = 10;
  for (const auto& [op, s] : cases) same_as_reference(one_op(op, {f32(s)}), seed++, std::string(op_name(op)));
  same_as_reference(one_op(ops::Sqrt{}, {f32({4, 4})}), 30, "Sqrt");  // on |x| below
  same_as_reference(one_op(ops::Log{}, {f32({4, 4})}), 31, "Log");  // NaN where x < 0 on both
  same_as_reference(one_op(ops::Reciprocal{}, {f32({4, 4})}), 32, "Reciprocal");
  same_as_reference(one_op(ops::PRelu{}, {f32({2, 3, 4}), f32({3, 1})}), 33, "PRelu");
  same_as_reference(one_op(ops::ArgMax{{.axis = 1}}, {f32({2, 3, 4})}), 34, "ArgMax");
  same_as_reference(one_op(ops::ConvTranspose{.strides = {2, 2}, .pads = {1, 0, 0, 1}, .output_padding = {1, 0}},
                           {f32({1, 4, 5, 5}), f32({4, 3, 3, 3}), f32({3})}, {false, true, true}),
                    37, "ConvTranspose");
  same_as_reference(one_op(ops::Tile{.repeats = {1, 2, 2}}, {f32({2, 3, 4})}), 35, "Tile");
  same_as_reference(one_op(ops::InstanceNormalization{}, {f32({2, 3, 4, 5}), f32({3}), f32({3})}, {false, true, true}), 36, "InstanceNormalization");
  // 3-D pools of a plain input: on the channel-blocked layout (oneDNN's jit kernel), not simple_nchw
  same_as_reference(one_op(ops::MaxPool{{.kernel_shape = {3, 3, 3}, .pads = {1, 1, 1, 1, 1, 1}}}, {f32({1, 5, 4, 6, 7})}), 35, "3-D max pool, plain input", {},
                    "pooling jit");
  same_as_reference(one_op(ops::AveragePool{{.kernel_shape = {2, 2, 2}, .strides = {2, 2, 2}}}, {f32({2, 3, 4, 6, 8})}), 36, "3-D average pool, plain input",
                    {}, "pooling jit");
  // an end pad no window reaches (MaxViT's folded Pad: 3x3 stride 2 over an even extent)
  same_as_reference(one_op(AveragePool{{.kernel_shape = {3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}}, true}, {f32({1, 4, 8, 8})}), 34,
                    "average pool counting pads, last end pad unread", {}, "oneDNN pooling");
  same_as_reference(one_op(ops::LogSoftmax{{.axis = 1}}, {f32({2, 5, 3})}), 37, "LogSoftmax", {}, "pet log-softmax");
  // along rows: pet's row kernel (oneDNN's logsoftmax takes its log from the eltwise log that is off near 1)
  same_as_reference(one_op(ops::LogSoftmax{{.axis = -1}}, {f32({2, 5, 3})}), 137, "LogSoftmax, last axis", {}, "pet log-softmax over rows of 3");
  same_as_reference(one_op(ops::LogSoftmax{{.axis = -1}}, {f32({3, 5000})}), 237, "LogSoftmax, rows of 5000", {}, "pet log-softmax over rows");
  same_as_reference(one_op(ops::LogSoftmax{{.axis = -1}}, {f32({2, 7, 50, 57})}), 238, "LogSoftmax, many rows of 57", {}, "pet log-softmax over rows");
  // over a dim before the last: pet's kernel (blocks of 256 positions and a rest)
  for (int64_t axis : {0, 1, 2}) {
    same_as_reference(one_op(ops::Softmax{{.axis = axis}}, {f32({2, 7, 5, 300})}), 138 + uint64_t(axis), cat("Softmax axis ", axis), {}, "pet softmax over");
    same_as_reference(one_op(ops::LogSoftmax{{.axis = axis}}, {f32({2, 7, 5, 300})}), 148 + uint64_t(axis), cat("LogSoftmax axis ", axis), {}, "pet log-softmax over");
  }
  {  // large logits (e^x overflows without the maximum), -inf and NaN entries, as the formula
    Tensor<float> x(Shape{2, 4, 3});
    const std::vector<float> v = {90.f, 95.f, -INFINITY, 100.f, 88.f, 1.f, 99.f, NAN, 2.f, 97.f, 90.f, 3.f};
    for (int64_t i = 0; i < x.size(); ++i) x[i] = v[size_t(i % 12)];
    for (bool log : {false, true}) {
      Graph g = log ? one_op(ops::LogSoftmax{{.axis = 1}}, {f32({2, 4, 3})}) : one_op(ops::Softmax{{.axis = 1}}, {f32({2, 4, 3})});
      moves_exactly(g, {x}, log ? "LogSoftmax of large logits" : "Softmax of large logits", log ? "pet log-softmax" : "pet softmax", 1e-5);
    }
    moves_exactly(one_op(ops::LogSoftmax{{.axis = 2}}, {f32({2, 4, 3})}), {x}, "LogSoftmax of large logits along rows", "pet log-softmax over rows", 1e-5);
  }
  same_as_reference(one_op(ops::LogSoftmax{{.axis = 1, .flatten_tail = true}}, {f32({2, 3, 4})}), 38, "LogSoftmax, opset < 13", {}, "pet log-softmax over rows of 12");
  {  // a dominant class: its log-probability -2.2e-8 (rounding to 0 in float), not oneDNN's -1.4e-6
    Tensor<float> x(Shape{2, 1000});
    Rng r(40);
    for (int64_t i = 0; i < x.size(); ++i) x[i] = i % 1000 == 7 ? 25.f : float(r.uniform() - 0.5);
    auto y = std::get<Tensor<float>>(backend::make_backend("cpu")->compile(one_op(ops::LogSoftmax{{.axis = 1}}, {f32({2, 1000})}))->run(std::vector<Value<float>>{Value<float>(x)})[0]);
    CHECK(std::fabs(y[7]) < 5e-8);
    CHECK(std::fabs(y[1007]) < 5e-8);
  }
  same_as_reference(one_op(ops::LRN{.size = 5, .alpha = 1e-3f}, {f32({2, 7, 4, 4})}), 39, "LRN", {}, "oneDNN lrn");
  same_as_reference(one_op(ops::LRN{.size = 4, .alpha = 1e-3f}, {f32({2, 7, 4, 4})}), 40, "LRN, even size", {}, "pet LRN (window 4)");
  same_as_reference(one_op(ops::LRN{.size = 2, .alpha = 0.5f, .beta = 0.6f, .bias = 2.f}, {f32({3, 9, 300})}), 140, "LRN, size 2, rows of 300", {}, "pet LRN");
  same_as_reference(one_op(ops::LRN{.size = 3, .alpha = 0.1f}, {f32({5, 6})}), 141, "LRN of rank 2", {}, "pet LRN");
  same_as_reference(one_op(ops::Hardmax{{.axis = -1}}, {f32({2, 3, 4})}), 41, "Hardmax");
  same_as_reference(one_op(ops::CumSum{.axis = 1, .reverse = true}, {f32({2, 3, 4})}), 42, "CumSum");
  same_as_reference(one_op(ops::TopK{.k = 2, .axis = 1}, {f32({2, 5, 3})}), 43, "TopK");
  same_as_reference(one_op(ops::GatherElements{.axis = 2}, {f32({2, 3, 4}), i64({2, 3, 5})}), 44, "GatherElements");
  same_as_reference(one_op(ops::Trilu{.upper = false}, {f32({2, 4, 4})}), 45, "Trilu");
  same_as_reference(one_op(ops::OneHot{.depth = 3}, {i64({2, 4}), f32({2})}), 46, "OneHot");
  same_as_reference(one_op(ops::Celu{.alpha = 0.5f}, {f32({3, 4})}), 47, "Celu");
  same_as_reference(one_op(ops::GridSample{.mode = ops::GridSample::Mode::Cubic, .padding = ops::GridSample::Padding::Reflection},
                           {f32({2, 3, 5, 6}), f32({2, 4, 7, 2})}), 48, "GridSample");
  // Einsum: lowered to ReduceSum / Transpose / Reshape / MatMul and strided Slices for
  // diagonals (einsum-lowering) or, for a broadcast summed label, the reference kernel.
  struct E {
    const char* eq;
    Types in;
    const char* plan;
  };
  for (const E& e : std::vector<E>{{"bhid,bhjd->bhij", {f32({2, 3, 4, 8}), f32({2, 3, 5, 8})}, "oneDNN matmul"},
                                   {"ij,jk->ik", {f32({6, 7}), f32({7, 5})}, "oneDNN matmul"},
                                   {"...ij,...jk", {f32({2, 1, 3, 4}), f32({3, 4, 2})}, "oneDNN matmul"},
                                   {"bn,anm,bm->ba", {f32({2, 3}), f32({4, 3, 5}), f32({2, 5})}, "oneDNN matmul"},
                                   {"i,i", {f32({9}), f32({9})}, "oneDNN matmul"},
                                   {"ijk->kj", {f32({3, 4, 5})}, "pet reduction"},
                                   {"ji", {f32({3, 4})}, "pet strided copy"},
                                   {"ii->i", {f32({4, 4})}, "Slice"},
                                   {"bii->b", {f32({3, 6, 6})}, "Slice"},
                                   {"ibi,bi->b", {f32({5, 3, 5}), f32({3, 5})}, "Slice"},
                                   {"...i,...i->i", {f32({2, 1, 4}), f32({3, 4})}, "reference kernel"}})
    same_as_reference(one_op(ops::Einsum{.equation = e.eq}, e.in), seed++, cat("Einsum ", e.eq), {}, e.plan);
  using R = ops::Resize;
  struct Rs {
    R op;
    const char* plan;
  };
  for (const Rs& r : std::vector<Rs>{{R{.mode = R::Mode::Linear, .scales = {1, 1, 2, 2}}, "oneDNN resampling"},
                                     {R{.mode = R::Mode::Linear, .coord = R::Coord::PytorchHalfPixel, .sizes = {2, 3, 9, 4}}, "oneDNN resampling"},
                                     {R{.mode = R::Mode::Linear, .scales = {1, 1, 1.5, 0.5}}, "oneDNN resampling"},
                                     {R{.mode = R::Mode::Linear, .scales = {1, 1, 1.7, 1}}, "pet resize tables (linear)"},  // 1.7 is not 10 / 6
                                     {R{.coord = R::Coord::Asymmetric, .nearest_mode = R::Round::Floor, .scales = {1, 1, 2, 2}}, "pet resize tables (nearest)"},
                                     {R{.mode = R::Mode::Linear, .coord = R::Coord::AlignCorners, .sizes = {2, 3, 7, 3}}, "pet resize tables (linear)"},
                                     {R{.scales = {1, 1, 0.5, 0.5}}, "pet resize tables (nearest)"},
                                     {R{.mode = R::Mode::Cubic, .exclude_outside = true, .scales = {1, 1, 2.5, 1.5}}, "pet resize tables (cubic)"},
                                     {R{.coord = R::Coord::TfCropAndResize, .sizes = {2, 3, 5, 9}, .roi = {0, 0, -0.2, 0.1, 1, 1, 1.1, 0.7}, .extrapolation_value = 3},
                                      "pet resize tables (nearest)"},
                                     {R{.mode = R::Mode::Linear, .sizes = {1, 2, 8, 8}}, "pet resize tables (linear)"}})  // batch and channels too
    same_as_reference(one_op(r.op, {f32({2, 3, 6, 6})}), seed++, "Resize", {}, r.plan);
  same_as_reference(one_op(R{.mode = R::Mode::Linear, .sizes = {1, 2, 5, 7, 3}}, {f32({1, 2, 3, 4, 5})}), seed++, "Resize 3-D", {}, "oneDNN resampling");
  // DeepLabV3's last op: a 16x bilinear upsampling into a 4 MB output, which oneDNN 2.6
  // writes with aligned non-temporal stores. It crashed pet (SIGSEGV) while outputs were
  // std::vectors aligned to 16 bytes; tensors are 64-byte aligned now.
  same_as_reference(one_op(R{.mode = R::Mode::Linear, .sizes = {1, 21, 224, 224}}, {f32({1, 21, 14, 14})}), seed++, "Resize x16, large output", {},
                    "oneDNN resampling");
  for (Op op : {Op(ops::Add{}), Op(ops::Sub{}), Op(ops::Mul{}), Op(ops::Div{}), Op(ops::Max{}), Op(ops::Min{})}) {
    same_as_reference(one_op(op, {f32({2, 3, 4}), f32({2, 3, 4})}), seed++, cat(op_name(op), " same shape"));
    same_as_reference(one_op(op, {f32({2, 3, 4}), f32({3, 1})}), seed++, cat(op_name(op), " broadcast second"));
    same_as_reference(one_op(op, {f32({4}), f32({2, 3, 4})}), seed++, cat(op_name(op), " broadcast first"));
  }
  same_as_reference(one_op(ops::LayerNormalization{.axis = -1}, {f32({2, 5, 8}), f32({8}), f32({8})}, {false, true, true}), 40, "layer norm");
  same_as_reference(one_op(ops::LayerNormalization{.axis = 1}, {f32({2, 3, 4}), f32({3, 4})}, {false, true}), 41, "layer norm 2 axes");
  same_as_reference(one_op(ops::LayerNormalization{.axis = -1, .num_outputs = 3}, {f32({3, 6}), f32({6}), f32({6})}, {false, true, true}), 42,
                    "layer norm with statistics");
  same_as_reference(one_op(ops::BatchNormalization{}, {f32({2, 3, 4, 4}), f32({3}), f32({3}), f32({3}), f32({3})}, {false, true, true, true, false}), 43,
                    "batch norm alone");
}

TEST_CASE("cpu: unary ops without a oneDNN eltwise on pet's element-wise kernel (plain, or a blocked layout without padding), PRelu on oneDNN's prelu, InstanceNormalization on pet's row kernel") {
  uint64_t seed = 700;
  const std::vector<Op> unary = {ops::Floor{}, ops::Ceil{}, ops::Sign{}, ops::Softsign{}, ops::Selu{}, ops::HardSigmoid{.alpha = 0.3f, .beta = 0.4f},
                                 ops::Celu{.alpha = 0.7f}, ops::ThresholdedRelu{.alpha = 0.2f}, ops::Shrink{.bias = 0.1f, .lambd = 0.3f},
                                 ops::Sin{}, ops::Cos{}, ops::Atan{}, ops::Sinh{}, ops::Asinh{}};
  for (const Op& op : unary) {
    // alone, on a large plain tensor (chunks over two threads)
    same_as_reference(one_op(op, {f32({3, 70, 50})}), seed++, cat(op_name(op), " plain"), {}, "pet element-wise kernel (plain)");
    // after convs: 16 channels fill oneDNN's blocks (the kernel runs on them), 5 do not (plain)
    for (int64_t ch : {16, 5}) {
      Graph g;
      Builder b(g);
      Rng rng(seed);
      TensorId y = b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {b.input("x", {1, 8, 9, 9}), b.constant("w", lab::random_weight({ch, 8, 3, 3}, rng))});
      y = b.add(op, {y});
      b.output(b.add(ops::Conv{}, {y, b.constant("w2", lab::random_weight({4, ch, 1, 1}, rng))}));
      same_as_reference(g, seed++, cat(op_name(op), " between convs, ", ch, " channels"), direct_convs(), "pet element-wise kernel");
    }
  }
  // PRelu's slope: per channel, scalar, along the last dim, full
  for (const Shape& slope : std::vector<Shape>{{16, 1, 1}, {1}, {9}, {16, 7, 9}, {2, 16, 7, 9}})
    same_as_reference(one_op(ops::PRelu{}, {f32({2, 16, 7, 9}), f32(slope)}, {false, true}), seed++, cat("PRelu slope ", slope), {},
                      slope.size() == 3 && slope[1] == 1 ? "oneDNN prelu" : "PRelu");  // (others: oneDNN's or pet's broadcasting kernel)
  CHECK(plan_of(one_op(ops::PRelu{}, {f32({2, 16, 7, 9}), f32({1})}, {false, true})).find("reference kernel") == std::string::npos);
  same_as_reference(one_op(ops::PRelu{}, {f32({2, 16, 7, 9}), f32({16, 1, 1})}), seed++, "PRelu, slope an input");
  // InstanceNormalization: 1-D, 2-D, 3-D spatial, rows of very different scale
  for (const Shape& xs : std::vector<Shape>{{2, 3, 50}, {2, 6, 31, 17}, {1, 4, 3, 5, 6}})
    same_as_reference(one_op(ops::InstanceNormalization{.epsilon = 1e-3f}, {f32(xs), f32({xs[1]}), f32({xs[1]})}, {false, true, true}), seed++,
                      cat("InstanceNormalization ", xs), {}, "pet instance norm");
}

TEST_CASE("cpu binary broadcasts oneDNN's binary does not take, on pet's broadcasting kernel") {
  // Swin's window-mask add: an operand broadcast over a middle dim (oneDNN 2.6 runs it with its
  // reference kernel on some ISAs, which pet replaces; the result must match either way)
  for (const auto& [op, a, b] : std::vector<std::tuple<Op, Shape, Shape>>{
           {ops::Add{}, {1, 64, 3, 49, 49}, {1, 64, 1, 49, 49}},
           {ops::Mul{}, {4, 3, 5, 6}, {4, 1, 5, 1}},
           {ops::Max{}, {2, 3, 4}, {2, 1, 4}},
           {ops::Min{}, {2, 3, 4}, {1, 3, 1}}}) {
    CAPTURE(a);
    same_as_reference(one_op(op, {{DType::Float32, a}, {DType::Float32, b}}), 31, cat(op_name(op), " ", a, " ", b));
  }
  // a broadcast first operand of a non-commutative op (1 - x, 1 / x), and both operands
  // broadcast: pet's kernel always (oneDNN's binary reads a full first operand)
  for (const auto& [op, a, b] : std::vector<std::tuple<Op, Shape, Shape>>{
           {ops::Sub{}, {1}, {3, 7}},
           {ops::Div{}, {7}, {2, 3, 7}},
           {ops::Sub{}, {3, 1, 5}, {1, 4, 1}},
           {ops::Add{}, {3, 1}, {1, 9}}}) {
    CAPTURE(a);
    same_as_reference(one_op(op, {{DType::Float32, a}, {DType::Float32, b}}), 32, cat(op_name(op), " ", a, " ", b), {},
                      "pet broadcasting kernel");
  }
  // NaN wins in Max and Min, as in the ops' formula (oneDNN's binary max returns the other operand)
  for (const Op& op : {Op(ops::Max{}), Op(ops::Min{})})
    for (const Shape& b : {Shape{1, 2}, Shape{2, 2}}) {
      CAPTURE(b);
      Graph g = one_op(op, {{DType::Float32, {2, 2}}, {DType::Float32, b}});
      std::vector<float> bv{0, NAN, 0, NAN};
      bv.resize(size_t(numel(b)));
      std::vector<Value<float>> in{Tensor<float>({2, 2}, {NAN, 1, 2, 3}), Tensor<float>(b, bv)};
      auto got = std::get<Tensor<float>>(backend::make_backend("cpu")->compile(g)->run(in)[0]).vec();
      CHECK(std::isnan(got[0]));
      CHECK(std::isnan(got[1]));
      CHECK(got[2] == (std::holds_alternative<ops::Max>(op) ? 2 : 0));
      CHECK(std::isnan(got[3]));
    }
}

TEST_CASE("cpu layout ops: R/T, transpose, reshape views, slice, pad, split, concat, patch, expand") {
  same_as_reference(one_op(ops::RT{.split_shape = {1, 4, 3, 2, 3, 2}, .perm = {3, 5, 0, 1, 2, 4}, .out_shape = {4, 4, 3, 3}}, {f32({1, 4, 6, 6})}), 50,
                    "R/T");
  same_as_reference(one_op(ops::Transpose{.perm = {0, 2, 1, 3}}, {f32({2, 17, 12, 33})}), 51, "transpose");
  same_as_reference(one_op(ops::Transpose{.perm = {1, 0}}, {f32({67, 45})}), 52, "2-D transpose");
  same_as_reference(one_op(ops::Reshape{.shape = {6, -1}}, {f32({2, 3, 4})}), 53, "reshape");
  same_as_reference(one_op(ops::Slice{.starts = {-1, 1}, .ends = {INT64_MIN, 9}, .axes = {0, 2}, .steps = {-1, 3}}, {f32({4, 3, 10})}), 54,
                    "slice");
  same_as_reference(one_op(ops::Pad{.pads = {0, 2, -1, 1, 3, 0}, .value = 1.5}, {f32({3, 4, 5})}), 55, "pad");
  same_as_reference(one_op(ops::Pad{.pads = {1, 1, 1, 1}, .mode = ops::PadMode::Reflect}, {f32({4, 5})}), 56, "reflect pad", {}, "pet copy of a mirrored border");
  same_as_reference(one_op(ops::Pad{.pads = {0, 3, 0, 2, 0, 1, 4, 0}, .mode = ops::PadMode::Reflect}, {f32({2, 4, 5, 3})}), 158, "reflect pad, several dims", {},
                    "pet copy of a mirrored border");
  same_as_reference(one_op(ops::Pad{.pads = {2, 0, -1, 1, 3, 2}, .mode = ops::PadMode::Edge}, {f32({3, 4, 5})}), 156, "edge pad", {}, "pet copy of an edge");
  same_as_reference(one_op(ops::Pad{.pads = {0, 0, 6, 6, 0, 0, 6, 6}, .mode = ops::PadMode::Edge}, {f32({1, 3, 9, 8})}), 157, "edge pad wider than the input", {}, "pet copy of the input");
  same_as_reference(one_op(ops::Split{.axis = 1, .split = {2, 0, 3}, .num_outputs = 3}, {f32({2, 5, 3})}), 57, "split");
  same_as_reference(one_op(ops::Concat{.axis = 1}, {f32({2, 3, 4}), f32({2, 1, 4}), f32({2, 5, 4})}), 58, "concat");
  same_as_reference(one_op(ops::Patch{.offsets = {0, 2, 1}}, {f32({2, 5, 4}), f32({2, 2, 3})}), 59, "patch");
  same_as_reference(one_op(ops::Expand{.shape = {2, 3, 4}}, {f32({3, 1})}), 60, "expand");
  // Concat of blocked conv outputs (Inception's pattern).
  Graph g;
  {
    Builder b(g);
    Rng rng(9);
    TensorId x = b.input("x", {1, 8, 6, 6});
    TensorId a = b.add(ops::Conv{}, {x, b.constant("wa", lab::random_weight({8, 8, 1, 1}, rng))});
    TensorId c = b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {x, b.constant("wc", lab::random_weight({16, 8, 3, 3}, rng))});
    TensorId p = b.add(ops::MaxPool{{.kernel_shape = {3, 3}, .pads = {1, 1, 1, 1}}}, {x});
    b.output(b.add(ops::Concat{.axis = 1}, {a, c, p}));
  }
  same_as_reference(g, 61, "inception-style concat");
}

namespace {
/// cpu vs reference on explicit inputs: equal to the last bit (pet's gather, select and
/// tiling kernels only move values; comparisons, conversions and arg-reductions compute what
/// the formula does), or within `tol`; the plan must name `kernel`.
void moves_exactly(const Graph& g, const std::vector<Value<float>>& in, const std::string& what, const std::string& kernel, double tol) {
  auto ref = backend::make_backend("reference")->compile(g)->run(in);
  auto exe = backend::make_backend("cpu")->compile(g);
  INFO(what, " plan:\n", exe->describe());
  CHECK(exe->describe().find(kernel) != std::string::npos);
  for (int round = 0; round < 2; ++round) {
    auto got = exe->run(in);
    REQUIRE(got.size() == ref.size());
    for (size_t k = 0; k < got.size(); ++k) {
      Comparison c = compare(got[k], ref[k], tol, tol);
      INFO(what, " output ", k, ": ", c.problem, " max error ", c.max_abs_err);
      CHECK(c.pass);
    }
  }
}

Tensor<float> counting(const Shape& s) {
  Tensor<float> t(s);
  for (int64_t i = 0; i < t.size(); ++i) t[i] = float(i) * 0.5f - 3.f;
  return t;
}
}  // namespace

TEST_CASE("cpu: Gather and GatherElements on pet's kernels, indices constant or at run time, negative ones counted from the end") {
  const Shape xs{4, 5, 6};
  for (int64_t axis = -1; axis < 3; ++axis) {
    const int64_t extent = xs[size_t(axis < 0 ? axis + 3 : axis)];
    const std::vector<std::pair<Shape, std::vector<int64_t>>> index_sets = {
        {{}, {-1}}, {{3}, {0, extent - 1, -2}}, {{2, 3}, {1, 1, 0, -extent, 2, extent - 3}}};
    for (const auto& [is, vals] : index_sets)
      for (bool constant : {true, false}) {
        Graph g;
        Builder b(g);
        TensorId x = b.input("x", xs);
        Tensor<int64_t> idx(is, vals);
        TensorId i = constant ? g.add_constant("idx", DType::Int64, idx) : b.input("idx", is, DType::Int64);
        b.output(b.add(ops::Gather{.axis = axis}, {x, i}));
        std::vector<Value<float>> in{counting(xs)};
        if (!constant) in.push_back(idx);
        // a constant scalar index is a Slice (gather-to-slice) before the backend sees it
        moves_exactly(g, in, cat("axis ", axis, ", indices ", is, constant ? " constant" : " input"),
                      constant && is.empty() ? "pet strided copy" : "pet gather");
      }
  }
  // GatherElements: indices smaller than the data in the other dims, negative ones, constant or not.
  for (int64_t axis : {0, 1, 2})
    for (bool constant : {true, false}) {
      const Shape is{3, 4, 5};
      Tensor<int64_t> idx(is);
      for (int64_t k = 0; k < idx.size(); ++k) idx[k] = (k * 7) % (2 * xs[size_t(axis)]) - xs[size_t(axis)];
      Graph g;
      Builder b(g);
      TensorId x = b.input("x", xs);
      TensorId i = constant ? g.add_constant("idx", DType::Int64, idx) : b.input("idx", is, DType::Int64);
      b.output(b.add(ops::GatherElements{.axis = axis}, {x, i}));
      std::vector<Value<float>> in{counting(xs)};
      if (!constant) in.push_back(idx);
      moves_exactly(g, in, cat("GatherElements axis ", axis, constant ? " constant" : " input"), "pet element gather");
    }
  {
    Graph g;
    Builder b(g);
    b.output(b.add(ops::GatherElements{.axis = 1}, {b.input("x", {2, 3}), b.input("idx", {2, 2}, DType::Int64)}));
    auto exe = backend::make_backend("cpu")->compile(g);
    CHECK_THROWS_WITH_AS(exe->run(std::vector<Value<float>>{counting({2, 3}), Tensor<int64_t>(Shape{2, 2}, std::vector<int64_t>{0, 1, 2, 3})}),
                         doctest::Contains("index 3 is out of range for axis 1 of size 3"), InvalidInput);
  }
  // An embedding table (a constant) looked up with run-time ids, then a layer's Add.
  Graph g;
  {
    Builder b(g);
    Rng rng(3);
    TensorId ids = b.input("ids", {2, 7}, DType::Int64);
    TensorId e = b.add(ops::Gather{.axis = 0}, {b.constant("table", lab::random_weight({50, 16}, rng)), ids});
    b.output(b.add(ops::Add{}, {e, b.constant("pos", lab::random_weight({7, 16}, rng))}));
  }
  Tensor<int64_t> ids(Shape{2, 7});
  for (int64_t k = 0; k < ids.size(); ++k) ids[k] = (k * 17) % 50 - 10;
  moves_exactly(g, {ids}, "embedding", "pet gather (rows of 16)");
  // Out of range: a run-time index fails the run naming the node, a constant one the compile.
  auto exe = backend::make_backend("cpu")->compile(g);
  ids[3] = 50;
  CHECK_THROWS_WITH_AS(exe->run(std::vector<Value<float>>{ids}), doctest::Contains("index 50 is out of range for axis 0 of size 50"), InvalidInput);
  ids[3] = -51;
  CHECK_THROWS_WITH_AS(exe->run(std::vector<Value<float>>{ids}), doctest::Contains("Gather '"), InvalidInput);
  Graph bad;
  {
    Builder b(bad);
    b.output(b.add(ops::Gather{.axis = 1}, {b.input("x", {2, 3}), b.ints("idx", {0, 3})}));
  }
  CHECK_THROWS_WITH_AS(backend::make_backend("cpu")->compile(bad), doctest::Contains("index 3 is out of range for axis 1 of size 3"), InvalidInput);
}

TEST_CASE("cpu: ScatterND and ScatterElements on pet's kernel: every reduction, duplicate indices in order, negative ones, constant or run-time indices") {
  using R = ops::ScatterReduction;
  const Shape xs{4, 5, 6};
  struct Nd {
    Shape is;
    std::vector<int64_t> idx;  // (a duplicate tuple: the later update wins, or combines)
  };
  for (const Nd& c : std::vector<Nd>{{{3, 2}, {0, 1, -1, 2, 0, 1}}, {{2, 3}, {1, 2, 3, -4, -5, -6}}, {{2, 1}, {3, -4}}, {{2, 2, 1}, {1, 1, 0, 1}}})
    for (R r : {R::None, R::Add, R::Mul, R::Max, R::Min})
      for (bool constant : {true, false}) {
        Shape us(c.is.begin(), c.is.end() - 1);
        us.insert(us.end(), xs.begin() + c.is.back(), xs.end());
        Graph g;
        Builder b(g);
        const Tensor<int64_t> idx(c.is, c.idx);
        const TensorId x = b.input("x", xs);
        const TensorId i = constant ? g.add_constant("idx", DType::Int64, idx) : b.input("idx", c.is, DType::Int64);
        b.output(b.add(ops::ScatterND{.reduction = r}, {x, i, b.input("u", us)}));
        std::vector<Value<float>> in{counting(xs)};
        if (!constant) in.push_back(idx);
        Tensor<float> u = counting(us);
        for (int64_t k = 0; k < u.size(); ++k) u[k] = u[k] * 0.25f + 1.f;
        in.push_back(u);
        moves_exactly(g, in, cat("ScatterND indices ", c.is, " reduction ", int(r), constant ? " constant" : " input"), "pet scatter");
      }
  for (int64_t axis : {0, 1, -1})
    for (R r : {R::None, R::Add, R::Max})
      for (bool constant : {true, false}) {
        const Shape is{3, 4, 5};
        const int64_t n = xs[size_t(axis < 0 ? axis + 3 : axis)];
        Tensor<int64_t> idx(is);
        for (int64_t k = 0; k < idx.size(); ++k) idx[k] = (k * 7) % (2 * n) - n;  // negative ones and duplicates
        Graph g;
        Builder b(g);
        const TensorId x = b.input("x", xs);
        const TensorId i = constant ? g.add_constant("idx", DType::Int64, idx) : b.input("idx", is, DType::Int64);
        b.output(b.add(ops::ScatterElements{.axis = axis, .reduction = r}, {x, i, b.input("u", is)}));
        std::vector<Value<float>> in{counting(xs)};
        if (!constant) in.push_back(idx);
        in.push_back(counting(is));
        moves_exactly(g, in, cat("ScatterElements axis ", axis, " reduction ", int(r), constant ? " constant" : " input"), "pet scatter");
      }
  // an index out of range names the node, at compile time (constant) or when it runs
  Graph g;
  Builder b(g);
  b.output(b.add(ops::ScatterND{}, {b.input("x", {4, 3}), b.input("idx", {1, 1}, DType::Int64), b.input("u", {1, 3})}, "kv_update"));
  auto exe = backend::make_backend("cpu")->compile(g);
  CHECK_THROWS_WITH_AS(exe->run(std::vector<Value<float>>{counting({4, 3}), Tensor<int64_t>(Shape{1, 1}, std::vector<int64_t>{4}), counting({1, 3})}),
                       doctest::Contains("'kv_update'"), InvalidInput);
  CHECK_THROWS_WITH_AS(exe->run(std::vector<Value<float>>{counting({4, 3}), Tensor<int64_t>(Shape{1, 1}, std::vector<int64_t>{-5}), counting({1, 3})}),
                       doctest::Contains("index -5 is out of range"), InvalidInput);
}

TEST_CASE("cpu: Where on pet's broadcasting select, every operand broadcast or not, constant or not") {
  struct C {
    Shape c, a, b;
  };
  const std::vector<C> cases = {
      {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}, {{3, 4}, {2, 3, 4}, {}},     {{1, 1, 4, 4}, {2, 3, 4, 4}, {1}}, {{2, 1, 4}, {3, 1}, {2, 3, 4}},
      {{4}, {2, 3, 1}, {3, 4}},          {{2, 3, 1}, {1}, {1, 1, 5}}, {{}, {2, 2}, {2, 2}},              {{1, 3, 1, 5}, {2, 1, 4, 1}, {2, 3, 4, 5}}};
  uint64_t seed = 80;
  for (const C& k : cases)
    for (int constant = 0; constant < 4; ++constant) {  // bit 0: the condition constant, bit 1: b constant
      Graph g;
      Builder b(g);
      Rng rng(seed++);
      TensorId c;
      if (constant & 1) {
        Tensor<int64_t> m(k.c);
        for (int64_t i = 0; i < m.size(); ++i) m[i] = rng.range(0, 2);
        c = g.add_constant("mask", DType::Bool, m);
      } else {
        c = b.input("c", k.c, DType::Bool);
      }
      TensorId a = b.input("a", k.a);
      TensorId bb = constant & 2 ? b.constant("b", lab::random_weight(k.b, rng)) : b.input("b", k.b);
      b.output(b.add(ops::Where{}, {c, a, bb}));
      std::vector<Value<float>> in;
      if (!(constant & 1)) {
        Tensor<int64_t> m(k.c);
        for (int64_t i = 0; i < m.size(); ++i) m[i] = rng.range(0, 2);
        in.push_back(m);
      }
      in.push_back(counting(k.a));
      if (!(constant & 2)) in.push_back(lab::random_weight(k.b, rng));
      moves_exactly(g, in, cat("cond ", k.c, " a ", k.a, " b ", k.b, " constants ", constant), "pet broadcasting select");
    }
  // The causal mask of a decoder: scores where the mask holds, -inf elsewhere, then Softmax.
  Graph g;
  {
    Builder b(g);
    Tensor<int64_t> tri(Shape{6, 6});
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 6; ++j) tri[i * 6 + j] = j <= i;
    TensorId s = b.input("scores", {1, 2, 6, 6});
    TensorId w = b.add(ops::Where{}, {g.add_constant("tri", DType::Bool, tri), s,
                                      b.constant("ninf", Tensor<float>(Shape{}, std::vector<float>{-INFINITY}))});
    b.output(b.add(ops::Softmax{{.axis = -1}}, {w}));
  }
  same_as_reference(g, 90, "causal mask", {}, "pet broadcasting select");
}

namespace {
/// Values that stress comparisons, conversions and arg-reductions: NaN, infinities, ties,
/// signed zeros, halves, values beyond int32.
Tensor<float> awkward(const Shape& s, uint64_t seed) {
  static const std::vector<float> special = {NAN, INFINITY, -INFINITY, 0.f, -0.f, 2.5f, -2.5f, 1.f, 1.f, 3e9f, -3e9f, 1e20f, 255.7f, -128.9f};
  Rng rng(seed);
  Tensor<float> t(s);
  for (int64_t i = 0; i < t.size(); ++i) t[i] = rng.uniform() < 0.4 ? special[size_t(rng.below(special.size()))] : float(int(rng.range(-4, 4)));
  return t;
}
}  // namespace

TEST_CASE("cpu: MaxPool with Indices on pet's kernel: 1-D to 3-D, pads, strides, dilations, ceil_mode, storage_order, NaN and ties as the formula says") {
  using ops::MaxPool;
  struct C {
    MaxPool op;
    Shape x;
  };
  uint64_t seed = 900;
  for (const C& c : std::vector<C>{
           {MaxPool{{.kernel_shape = {2, 2}, .strides = {2, 2}}}, {2, 3, 6, 8}},
           {MaxPool{{.kernel_shape = {3, 3}, .strides = {2, 2}, .pads = {1, 0, 2, 1}}}, {1, 4, 7, 9}},
           {MaxPool{{.kernel_shape = {2, 3}, .strides = {2, 1}, .dilations = {2, 2}}}, {1, 2, 9, 8}},
           {MaxPool{{.kernel_shape = {3, 3}, .strides = {2, 2}, .ceil_mode = true}}, {1, 3, 8, 8}},
           {MaxPool{{.kernel_shape = {2, 2}, .pads = {1, 1, 1, 1}, .dilations = {2, 2}}}, {1, 2, 1, 1}},  // windows of padding only
           {MaxPool{{.kernel_shape = {3}, .strides = {2}, .pads = {1, 1}}}, {2, 3, 10}},
           {MaxPool{{.kernel_shape = {2, 2, 2}, .strides = {2, 2, 2}, .pads = {0, 1, 0, 1, 0, 1}}}, {1, 2, 4, 5, 6}}})
    for (int64_t order : {0, 1}) {
      MaxPool op = c.op;
      op.num_outputs = 2;
      op.storage_order = order;
      Graph g = one_op(op, {f32(c.x)});
      moves_exactly(g, {awkward(c.x, seed++)}, cat("MaxPool ", c.x, " kernel ", op.kernel_shape, " storage_order ", order), "pet max pool with indices");
    }
}

TEST_CASE("cpu: rounding to float16 (F16C and portable) and bfloat16 gives narrow_round's bits, NaN, ties, overflow and subnormals included") {
  std::vector<uint32_t> bits = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fbfffffu,
                                0x477fefffu, 0x477ff000u, 0x477ff001u, 0x33000000u, 0x33000001u, 0x387fc000u, 0x387fe000u, 0x3f801000u,
                                0x3f803000u, 0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x00000001u, 0x807fffffu};
  Rng rng(4242);
  while (bits.size() < (1u << 20)) bits.push_back(uint32_t(rng.next()));
  std::vector<float> x(bits.size());
  std::memcpy(x.data(), bits.data(), bits.size() * 4);
  auto same_bits = [&](const std::vector<float>& got, int32_t narrow, const char* what) {
    int64_t wrong = 0;
    std::string first;
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = narrow_round(x[i], narrow);
      if (std::memcmp(&want, &got[i], 4) != 0 && wrong++ < 3) first += cat(" ", x[i], " (bits ", bits[i], ") gives ", got[i], ", not ", want, ";");
    }
    CHECK_MESSAGE(wrong == 0, what, ": ", wrong, " values differ:", first);
  };
  for (const bool hardware : {false, true}) {
    std::vector<float> y(x.size());
    cpu::round_to_narrow(x.data(), y.data(), int64_t(x.size()) - 3, kFloat16, hardware);  // (a tail the vector loop leaves)
    for (size_t i = x.size() - 3; i < x.size(); ++i) y[i] = narrow_round(x[i], kFloat16);
    same_bits(y, kFloat16, hardware ? (cpu::has_f16c() ? "float16, F16C" : "float16 (no F16C here: portable)") : "float16, portable");
  }
  std::vector<float> yb(x.size());
  cpu::round_to_narrow(x.data(), yb.data(), int64_t(x.size()), kBFloat16);
  same_bits(yb, kBFloat16, "bfloat16");
}

TEST_CASE("cpu: comparisons, Cast, ArgMax, ArgMin and TopK of floats on pet's kernels, NaN and ties as the formulas say") {
  const std::vector<std::pair<Shape, Shape>> shapes = {{{3, 4, 5}, {3, 4, 5}}, {{3, 4, 5}, {}}, {{3, 1, 5}, {4, 1}}, {{5}, {2, 3, 5}}};
  uint64_t seed = 200;
  for (const auto& [as, bs] : shapes) {
    const std::vector<Op> cmps = {ops::Equal{}, ops::Less{}, ops::LessOrEqual{}, ops::Greater{}, ops::GreaterOrEqual{}};
    for (const Op& op : cmps) {
      Graph g = one_op(op, {f32(as), f32(bs)});
      moves_exactly(g, {awkward(as, seed), awkward(bs, seed + 1)}, cat(op_name(op), " ", as, " vs ", bs), "pet broadcasting comparison");
      ++seed;
    }
  }
  // A comparison whose result masks a float tensor (x > 0.5 chooses between two tensors).
  Graph m;
  {
    Builder b(m);
    TensorId x = b.input("x", {2, 3, 4});
    TensorId c = b.add(ops::Greater{}, {x, b.constant("h", Tensor<float>(Shape{}, std::vector<float>{0.5f}))});
    b.output(b.add(ops::Where{}, {c, x, b.add(ops::Neg{}, {x})}));
  }
  moves_exactly(m, {awkward({2, 3, 4}, 9)}, "Greater then Where", "pet broadcasting comparison");
  for (DType to : {DType::Int64, DType::Int32, DType::Int8, DType::UInt8, DType::Bool}) {
    Graph g = one_op(ops::Cast{.to = to}, {f32({4, 7})});
    moves_exactly(g, {awkward({4, 7}, 300 + uint64_t(to))}, cat("Cast to ", dtype_name(to)), "pet conversion");
  }
  for (const int64_t narrow : {int64_t(kFloat16), int64_t(kBFloat16)}) {  // each value rounded as ops::Cast rounds it
    Graph g = one_op(ops::Cast{.narrow = narrow}, {f32({4, 7})});
    Tensor<float> x = awkward({4, 7}, 320 + uint64_t(narrow));
    const std::vector<float> edges = {1e5f, 1 + std::ldexp(1.f, -11), 1 + std::ldexp(1.f, -8), 3e-8f, -65520.f, 0.1f, 3.4e38f, std::ldexp(1.f, -130)};
    for (size_t i = 0; i < edges.size(); ++i) x[int64_t(3 * i)] = edges[i];
    moves_exactly(g, {x}, cat("Cast to ", narrow_float_name(narrow)), cat("pet rounding to ", narrow_float_name(narrow)));
  }
  {  // RoiAlign (the reference kernel) of a conv's output, its rois and batch indices graph inputs
    Graph g;
    Builder b(g);
    Rng rng(77);
    TensorId x = b.input("x", {2, 8, 9, 11});
    TensorId c = b.add(ops::Conv{.kernel_shape = {3, 3}, .pads = {1, 1, 1, 1}}, {x, b.constant("w", lab::random_weight({8, 8, 3, 3}, rng))});
    const TensorId rois_in = b.input("rois", {3, 4}), batch_in = b.input("batch", {3}, DType::Int64);
    for (auto mode : {ops::RoiAlign::Mode::Avg, ops::RoiAlign::Mode::Max})
      b.output(b.add(ops::RoiAlign{.mode = mode, .output_height = 3, .output_width = 4, .spatial_scale = 0.5f}, {c, rois_in, batch_in}));
    Tensor<float> rois(Shape{3, 4}, std::vector<float>{0, 0, 20, 16, 3.5f, 2, 9, 30, -4, -4, 25, 25});
    moves_exactly(g, {random_inputs({f32({2, 8, 9, 11})}, rng, {})[0], rois, Tensor<int64_t>(Shape{3}, std::vector<int64_t>{1, 0, 1})}, "RoiAlign of a conv",
                  "reference kernel", 1e-5);
  }
  {  // Det (the reference kernel) of a MatMul's 5 x 5 results
    Graph g;
    Builder b(g);
    Rng rng(78);
    TensorId m = b.add(ops::MatMul{}, {b.input("x", {2, 3, 5, 5}), b.constant("w", lab::random_weight({5, 5}, rng))});
    b.output(b.add(ops::Det{}, {m}));
    moves_exactly(g, {random_inputs({f32({2, 3, 5, 5})}, rng, {})[0]}, "Det of a MatMul", "reference kernel", 1e-5);
  }
  {  // int64 to float16: rounded too
    Graph g = one_op(ops::Cast{.narrow = kFloat16}, {TensorType{DType::Int64, {5}}});
    moves_exactly(g, {Tensor<int64_t>(Shape{5}, std::vector<int64_t>{2049, 2051, -70000, 3, 1 << 20})}, "Cast of int64 to float16", "pet conversion");
  }
  {  // an integer mask to float (attention_mask.float()), and float to float (a view)
    Graph g;
    Builder b(g);
    TensorId i = b.input("mask", {2, 6}, DType::Int64);
    TensorId f = b.add(ops::Cast{.to = DType::Float32}, {i});
    b.output(b.add(ops::Cast{.to = DType::Float32}, {b.add(ops::Mul{}, {f, b.input("x", {2, 6})})}));
    Tensor<int64_t> mask(Shape{2, 6}, std::vector<int64_t>{1, 1, 0, 0, -3, 1 << 30, 1, 0, 7, 1, 1, 0});
    moves_exactly(g, {mask, awkward({2, 6}, 5)}, "Cast of an int64 mask", "pet conversion");
  }
  for (int64_t axis : {0, 1, 2, -1})
    for (bool keep : {true, false})
      for (bool last : {false, true}) {
        Graph g = one_op(ops::ArgMax{{.axis = axis, .keepdims = keep, .select_last_index = last}}, {f32({3, 300, 4})});
        moves_exactly(g, {awkward({3, 300, 4}, 400 + uint64_t(axis + 1))}, cat("ArgMax axis ", axis, keep ? " keepdims" : "", last ? " last" : ""),
                      "pet arg-reduction");
        Graph h = one_op(ops::ArgMin{{.axis = axis, .keepdims = keep, .select_last_index = last}}, {f32({5, 2, 9})});
        moves_exactly(h, {awkward({5, 2, 9}, 500 + uint64_t(axis + 1))}, cat("ArgMin axis ", axis), "pet arg-reduction");
      }
  for (int64_t axis : {0, 1, 2})
    for (int64_t k : {int64_t(0), int64_t(1), int64_t(3)})
      for (bool largest : {true, false}) {
        Graph g = one_op(ops::TopK{.k = k, .axis = axis, .largest = largest}, {f32({4, 5, 6})});
        moves_exactly(g, {awkward({4, 5, 6}, 800 + uint64_t(axis * 10 + k))}, cat("TopK k ", k, " axis ", axis, largest ? " largest" : " smallest"),
                      "pet partial sort");
      }
  {
    Graph g = one_op(ops::TopK{.k = 7, .axis = -1}, {f32({3, 7})});  // k the whole row: a sort
    moves_exactly(g, {awkward({3, 7}, 850)}, "TopK of a whole row", "pet partial sort");
  }
  for (const Op& op : std::vector<Op>{ops::IsNaN{}, ops::IsInf{}, ops::IsInf{.detect_negative = false}, ops::IsInf{.detect_positive = false}}) {
    Graph g = one_op(op, {f32({6, 7})});
    moves_exactly(g, {awkward({6, 7}, 870)}, cat(op_name(op), " ", op_signature(op)), "pet element test");
  }
  {  // an empty axis: index 0 at every position
    Graph g = one_op(ops::ArgMax{{.axis = 1}}, {f32({2, 0, 3})});
    auto got = backend::make_backend("cpu")->compile(g)->run(std::vector<Value<float>>{Tensor<float>(Shape{2, 0, 3})});
    CHECK(std::get<Tensor<int64_t>>(got[0]).vec() == std::vector<int64_t>(6, 0));
  }
  {  // rows all NaN, NaN first then numbers
    Tensor<float> x(Shape{3, 3}, std::vector<float>{NAN, NAN, NAN, NAN, 1.f, 1.f, 2.f, NAN, 2.f});
    auto got = backend::make_backend("cpu")->compile(one_op(ops::ArgMax{{.axis = 1, .keepdims = false}}, {f32({3, 3})}))->run(std::vector<Value<float>>{x});
    CHECK(std::get<Tensor<int64_t>>(got[0]).vec() == std::vector<int64_t>{0, 1, 0});
  }
}

TEST_CASE("cpu: Log, Softplus and Mish within a few ulp of the exact values, near 1, subnormal and at the ends too") {
  // oneDNN 2.6's eltwise log gave log(1) = -1.4e-6 and 30 % errors just above 1, and its
  // soft_relu Softplus(-79) = 7.6e-6; pet's kernels are held to the exact values in ulps.
  Rng rng(5);
  std::vector<float> xs = {1.f, 2.f, 0.5f, 1e-45f, 1e-40f, FLT_MIN, FLT_MAX, 1.0000001f, 0.99999994f};
  for (int i = 0; i < 3000; ++i) xs.push_back(float(1 + 1e-2 * (rng.uniform() - 0.5)));
  for (int i = 0; i < 3000; ++i) xs.push_back(float(std::exp(rng.uniform() * 170 - 85)));
  const int64_t n = int64_t(xs.size());
  auto ulps = [](float got, double exact) {
    const float e = float(exact);
    const double ulp = double(std::nextafter(std::max(std::fabs(e), FLT_MIN), INFINITY)) - double(std::max(std::fabs(e), FLT_MIN));
    return std::fabs(double(got) - exact) / ulp;
  };
  auto run = [&](Op op, const std::vector<float>& in) {
    auto exe = backend::make_backend("cpu")->compile(one_op(op, {f32({int64_t(in.size())})}));
    Tensor<float> t(Shape{int64_t(in.size())});
    std::copy(in.begin(), in.end(), t.data());
    INFO(exe->describe());
    CHECK(exe->describe().find("pet element-wise kernel") != std::string::npos);
    return std::get<Tensor<float>>(exe->run(std::vector<Value<float>>{Value<float>(t)})[0]);
  };
  {
    const auto y = run(ops::Log{}, xs);
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) worst = std::max(worst, ulps(y[i], std::log(double(xs[size_t(i)]))));
    CHECK(worst <= 2);
    CHECK(y[0] == 0.f);  // log 1
    const auto special = run(ops::Log{}, {0.f, -0.f, -1.f, INFINITY, NAN, -INFINITY});
    CHECK(special[0] == -INFINITY);
    CHECK(special[1] == -INFINITY);
    CHECK(std::isnan(special[2]));
    CHECK(special[3] == INFINITY);
    CHECK(std::isnan(special[4]));
    CHECK(std::isnan(special[5]));
  }
  std::vector<float> zs;
  for (int i = 0; i < 6000; ++i) zs.push_back(float((rng.uniform() - 0.5) * 200));
  for (float z : {0.f, -0.f, 1e-30f, -1e-30f, -20.f, -79.f, -87.f, -100.f, 100.f, 88.8f}) zs.push_back(z);
  const auto sp = run(ops::Softplus{}, zs), mi = run(ops::Mish{}, zs);
  double worst_sp = 0, worst_mi = 0;
  for (size_t i = 0; i < zs.size(); ++i) {
    const double z = zs[i], s = std::max(z, 0.) + std::log1p(std::exp(-std::fabs(z)));
    // (Eigen's vectorised exp, like oneDNN's, gives 0 below the smallest normal float:
    // Softplus(-90) = 0 for 8e-40, Mish(-90) = 0 for -7e-38, an absolute error below 1e-36)
    const double m = z * std::tanh(s);
    if (std::fabs(sp[int64_t(i)] - s) > 1e-36) worst_sp = std::max(worst_sp, ulps(sp[int64_t(i)], s));
    if (std::fabs(mi[int64_t(i)] - m) > 1e-36) worst_mi = std::max(worst_mi, ulps(mi[int64_t(i)], m));
  }
  CHECK(worst_sp <= 8);
  CHECK(worst_mi <= 8);
  // and on a blocked layout with padding (Softplus(0) = log 2 is not 0): plain, same values
  Graph g;
  Builder b(g);
  Rng wr(6);
  TensorId y = b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {b.input("x", {1, 8, 9, 9}), b.constant("w", lab::random_weight({5, 8, 3, 3}, wr))});
  for (Op op : {Op(ops::Softplus{}), Op(ops::Log{}), Op(ops::Mish{})}) y = b.add(op, {y});
  b.output(b.add(ops::Conv{}, {y, b.constant("w2", lab::random_weight({4, 5, 1, 1}, wr))}));
  same_as_reference(g, 9, "Softplus, Log and Mish between convs", direct_convs(), "pet element-wise kernel");
}

TEST_CASE("cpu: CumSum and ReduceLogSumExp on pet's kernels") {
  for (int64_t axis : {0, 1, 2})
    for (bool ex : {false, true})
      for (bool rev : {false, true}) {
        Graph g = one_op(ops::CumSum{.axis = axis, .exclusive = ex, .reverse = rev}, {f32({3, 40, 300})});
        Rng rng(uint64_t(600 + axis));
        // forward sums are the formula's own additions; reversed ones run from the end (as
        // ONNX Runtime), another order
        moves_exactly(g, {lab::random_weight({3, 40, 300}, rng)}, cat("CumSum axis ", axis, ex ? " exclusive" : "", rev ? " reverse" : ""),
                      "pet running sum", rev ? 1e-5 : 0);
      }
  const std::vector<std::vector<int64_t>> axes_sets = {{2}, {1, 2}, {0}, {0, 1, 2}, {1}};
  for (const auto& axes : axes_sets)
    for (bool keep : {true, false}) {
      Graph g = one_op(ops::ReduceLogSumExp{{.axes = axes, .keepdims = keep}}, {f32({4, 6, 50})});
      Rng rng(700 + axes.size());
      Tensor<float> x = lab::random_weight({4, 6, 50}, rng);
      for (int64_t i = 0; i < 50; ++i) x[i] = 80.f + float(i);  // e^x beyond float: the maximum taken out first
      x[60] = INFINITY;
      moves_exactly(g, {x}, cat("ReduceLogSumExp axes ", axes, keep ? " keepdims" : ""), "pet log-sum-exp");
    }
  // over dims apart: by offset, the formula's order, so exactly its result
  for (const auto& axes : std::vector<std::vector<int64_t>>{{0, 2}, {0, 2, 3}, {1, 3}})
    for (bool keep : {true, false}) {
      Graph g = one_op(ops::ReduceLogSumExp{{.axes = axes, .keepdims = keep}}, {f32({4, 6, 5, 7})});
      Rng rng(710);
      Tensor<float> x = lab::random_weight({4, 6, 5, 7}, rng);
      x[3] = 90.f, x[40] = -INFINITY, x[77] = INFINITY;
      moves_exactly(g, {x}, cat("ReduceLogSumExp over dims apart ", axes, keep ? " keepdims" : ""), "pet log-sum-exp over");
    }
}

TEST_CASE("cpu: Hardmax, Trilu, Mod, ReduceLogSum, OneHot, GatherND and the integer ops on pet's kernels, as their formulas say") {
  for (int64_t axis : {0, 1, 2})
    for (bool flat : {false, true}) {
      Graph g = one_op(ops::Hardmax{{.axis = axis, .flatten_tail = flat}}, {f32({3, 4, 300})});
      moves_exactly(g, {awkward({3, 4, 300}, 900 + uint64_t(axis))}, cat("Hardmax axis ", axis, flat ? " flattened" : ""), "pet row maxima");
    }
  {  // ties and NaN: the first maximum wins, NaN never does
    Tensor<float> x(Shape{4, 3}, std::vector<float>{1.f, 3.f, 3.f, NAN, NAN, NAN, NAN, -1.f, -1.f, -INFINITY, -INFINITY, -INFINITY});
    auto got = backend::make_backend("cpu")->compile(one_op(ops::Hardmax{{.axis = 1}}, {f32({4, 3})}))->run(std::vector<Value<float>>{x});
    CHECK(std::get<Tensor<float>>(got[0]).vec() == std::vector<float>{0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0});
  }
  for (bool upper : {true, false})
    for (int64_t k : {int64_t(-100), int64_t(-3), int64_t(-1), int64_t(0), int64_t(2), int64_t(6), int64_t(100), std::numeric_limits<int64_t>::max()})
      for (const Shape& s : {Shape{2, 5, 7}, Shape{7, 5}, Shape{3, 0, 4}}) {
        Graph g = one_op(ops::Trilu{.upper = upper, .k = k}, {f32(s)});
        moves_exactly(g, {awkward(s, 950 + uint64_t(k & 63))}, cat("Trilu ", upper ? "upper" : "lower", " k ", k, " ", s), "pet band copy");
      }
  for (const auto& [as, bs] : std::vector<std::pair<Shape, Shape>>{{{4, 5}, {4, 5}}, {{4, 5}, {}}, {{1, 5}, {4, 1}}}) {
    Graph g = one_op(ops::Mod{.fmod = 1}, {f32(as), f32(bs)});
    moves_exactly(g, {awkward(as, 970), awkward(bs, 971)}, cat("Mod ", as, " by ", bs), "pet broadcasting kernel (C's fmod)");
  }
  {  // pet's fmod (a double quotient, corrected) against C's on random bit patterns and edges
    Rng rng(975);
    const std::vector<float> edge = {0.f, -0.f, INFINITY, -INFINITY, NAN, 1.f, -1.f, 3.f, 1e-45f, 1e38f, 0.1f, 16777216.f, 16777217.f};
    const int64_t count = 1 << 20;
    std::vector<float> a(static_cast<size_t>(count)), b(static_cast<size_t>(count)), y(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      auto any = [&] {
        if (rng.uniform() < 0.1) return edge[size_t(rng.below(edge.size()))];
        const uint32_t bits = uint32_t(rng.next());
        float f;
        std::memcpy(&f, &bits, 4);
        return f;
      };
      a[size_t(i)] = any();
      // quotients of every size: b near a's magnitude as often as far from it
      b[size_t(i)] = rng.uniform() < 0.5 ? any() : a[size_t(i)] / float(rng.range(1, 1 << 20)) * (rng.uniform() < 0.5 ? 1.f : -1.01f);
    }
    cpu::broadcast_binary(cpu::BinaryKind::Fmod, a.data(), {1}, b.data(), {1}, y.data(), Shape{count});
    int64_t wrong = 0;
    for (int64_t i = 0; i < count; ++i) {
      const float want = std::fmod(a[size_t(i)], b[size_t(i)]);
      const bool same = std::isnan(want) ? std::isnan(y[size_t(i)]) : std::memcmp(&want, &y[size_t(i)], 4) == 0;
      if (!same && wrong++ < 5) MESSAGE("fmod(", a[size_t(i)], ", ", b[size_t(i)], ") = ", want, ", pet ", y[size_t(i)]);
    }
    CHECK(wrong == 0);
  }
  // Reductions over neighbouring dims before the last, dims apart, or the last dims in runs
  // under 512: pet's kernels, the formulas in their order (exact) but sums of runs of 16 and
  // more, in 16 lanes; longer runs of the last dims go to oneDNN where it has a jit kernel.
  for (const std::vector<int64_t>& axes : {std::vector<int64_t>{0}, std::vector<int64_t>{1}, std::vector<int64_t>{1, 2}, std::vector<int64_t>{0, 1, 2},
                                           std::vector<int64_t>{0, 2}, std::vector<int64_t>{1, 3}, std::vector<int64_t>{0, 2, 3}, std::vector<int64_t>{3}}) {
    const Shape xs{3, 40, 5, 300};
    Tensor<float> x(xs);
    Rng rng(976);
    for (int64_t i = 0; i < x.size(); ++i) x[i] = float(rng.uniform(0.2, 1.4)) * (i % 7 == 3 ? -1.f : 1.f);
    const std::vector<Op> reductions = {ops::ReduceSum{{.axes = axes}},  ops::ReduceMean{{.axes = axes, .keepdims = false}}, ops::ReduceMax{{.axes = axes}},
                                        ops::ReduceMin{{.axes = axes}},  ops::ReduceProd{{.axes = axes}},                      ops::ReduceL1{{.axes = axes}},
                                        ops::ReduceL2{{.axes = axes}},   ops::ReduceSumSquare{{.axes = axes}}};
    // reduced dims ending with the last: sums in 16 lanes (rounded otherwise)
    const bool lanes = axes.back() == 3;
    for (const Op& op : reductions) {
      // squares: the compiler may fuse x * x + acc into one rounding on one side only
      const bool squares = std::holds_alternative<ops::ReduceL2>(op) || std::holds_alternative<ops::ReduceSumSquare>(op);
      const bool extreme = std::holds_alternative<ops::ReduceMax>(op) || std::holds_alternative<ops::ReduceMin>(op);
      moves_exactly(one_op(op, {f32(xs)}), {x}, cat(op_name(op), " axes ", axes.size(), " from ", axes[0]), "pet reduction (",
                    lanes && !extreme ? 1e-5 : squares ? 1e-6 : 0);
    }
    Tensor<float> pos = x.clone();
    for (int64_t i = 0; i < pos.size(); ++i) pos[i] = std::abs(pos[i]);
    moves_exactly(one_op(ops::ReduceLogSum{{.axes = axes}}, {f32(xs)}), {pos}, cat("ReduceLogSum axes ", axes.size(), " from ", axes[0]), "pet reduction (log of the sum",
                  lanes ? 1e-5 : 0);
  }
  // The last dim in runs of 2 (a power spectrum's real and imaginary parts): oneDNN 2.6's jit
  // kernel took 37 ms for 600,000 of them, its reference kernel (sums of squares) 27 ms; pet's 0.6.
  CHECK(plan_of(one_op(ops::ReduceMean{{.axes = {3}}}, {f32({3, 4, 5, 6})})).find("pet reduction (mean over 6 elements apart for each of 60") != std::string::npos);
  CHECK(plan_of(one_op(ops::ReduceSumSquare{{.axes = {2}, .keepdims = false}}, {f32({1, 2998, 2})})).find("pet reduction (sum of squares over 2") != std::string::npos);
  // Max and Min over runs of 40 in 16 lanes: a NaN first gives NaN, a later one is passed
  // over, as the formula's order does (ops::detail::reduce_extreme)
  for (bool max : {true, false}) {
    Tensor<float> x({3, 40});
    for (int64_t i = 0; i < x.size(); ++i) x[i] = float((i * 37) % 23) - 11.f;
    x[0] = std::numeric_limits<float>::quiet_NaN();  // row 0: first
    x[40 + 21] = std::numeric_limits<float>::quiet_NaN();  // row 1: later
    const Graph g = max ? one_op(ops::ReduceMax{{.axes = {1}}}, {f32({3, 40})}) : one_op(ops::ReduceMin{{.axes = {1}}}, {f32({3, 40})});
    const auto ref = backend::make_backend("reference")->compile(g)->run(std::vector<Value<float>>{x});
    const auto exe = backend::make_backend("cpu")->compile(g);
    CHECK(exe->describe().find("pet reduction") != std::string::npos);
    const auto got = std::get<Tensor<float>>(exe->run(std::vector<Value<float>>{x})[0]), want = std::get<Tensor<float>>(ref[0]);
    CHECK(std::isnan(got[0]));
    CHECK(std::isnan(want[0]));
    CHECK(got[1] == want[1]);
    CHECK(got[2] == want[2]);
  }
  // runs of 600 (oneDNN's jit kernel where it has one, else pet's): the same results
  for (const Op& op : std::vector<Op>{ops::ReduceSum{{.axes = {1}}}, ops::ReduceMax{{.axes = {1}}}, ops::ReduceMin{{.axes = {1}}}, ops::ReduceL2{{.axes = {1}}},
                                      ops::ReduceSumSquare{{.axes = {1}}}, ops::ReduceMean{{.axes = {1}, .keepdims = false}}})
    same_as_reference(one_op(op, {f32({7, 600})}), 981, cat(op_name(op), " over runs of 600"));
  CHECK(plan_of(one_op(ops::ReduceMean{{.axes = {1, 3}}}, {f32({3, 4, 5, 6})})).find("pet reduction (mean over 24 elements apart for each of 15") != std::string::npos);
  for (const std::vector<int64_t>& axes : {std::vector<int64_t>{1}, std::vector<int64_t>{0, 2}, std::vector<int64_t>{}}) {
    Graph g = one_op(ops::ReduceLogSum{{.axes = axes, .keepdims = axes.size() != 1}}, {f32({6, 50, 7})});
    Tensor<float> x(Shape{6, 50, 7});
    for (int64_t i = 0; i < x.size(); ++i) x[i] = 0.25f + float(i % 37) * 0.5f;
    moves_exactly(g, {x}, cat("ReduceLogSum axes ", axes.size()), "log of the sum", 1e-5);
  }
  // GridSample: every mode, padding and alignment; points inside, outside, far away, NaN.
  for (auto mode : {ops::GridSample::Mode::Linear, ops::GridSample::Mode::Nearest, ops::GridSample::Mode::Cubic})
    for (auto pad : {ops::GridSample::Padding::Zeros, ops::GridSample::Padding::Border, ops::GridSample::Padding::Reflection})
      for (bool align : {false, true}) {
        Tensor<float> grid(Shape{2, 4, 6, 2});
        Rng rng(990);
        const std::vector<float> special = {NAN, INFINITY, -INFINITY, 1e10f, -7.3f, 1.f, -1.f, 0.f};
        for (int64_t i = 0; i < grid.size(); ++i) grid[i] = rng.uniform() < 0.15 ? special[size_t(rng.below(special.size()))] : float(rng.uniform(-1.4, 1.4));
        Graph g = one_op(ops::GridSample{.mode = mode, .padding = pad, .align_corners = align}, {f32({2, 3, 5, 7}), f32({2, 4, 6, 2})});
        // cubic: 16 products a point, where the compiler may fuse a product and a sum on one side only
        moves_exactly(g, {counting({2, 3, 5, 7}), grid}, cat("GridSample mode ", int(mode), " padding ", int(pad), align ? " aligned" : ""), "pet grid sampling",
                      mode == ops::GridSample::Mode::Cubic ? 1e-6 : 0);
      }
  // OneHot: integer indices (constant or not) and float ones, every axis; out of range and
  // non-finite indices match nothing, negative ones count from the end.
  for (int64_t axis : {0, 1, -1})
    for (int kind = 0; kind < 3; ++kind) {
      const Shape is{3, 4};
      Graph g;
      Builder b(g);
      Tensor<int64_t> ii(is, std::vector<int64_t>{0, 4, -1, -5, 5, -6, 2, 3, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(), 1, 1});
      Tensor<float> fi(is, std::vector<float>{NAN, INFINITY, -INFINITY, 2.7f, -2.7f, -0.5f, 4.99f, 1e20f, -1e20f, 0.f, -0.f, 3.f});
      TensorId i = kind == 0 ? g.add_constant("idx", DType::Int64, ii) : b.input("idx", is, kind == 1 ? DType::Int64 : DType::Float32);
      b.output(b.add(ops::OneHot{.depth = 5, .axis = axis}, {i, b.input("values", {2})}));
      std::vector<Value<float>> in;
      if (kind == 1) in.push_back(ii);
      if (kind == 2) in.push_back(fi);
      in.push_back(Tensor<float>(Shape{2}, std::vector<float>{-1.5f, 2.f}));
      moves_exactly(g, in, cat("OneHot axis ", axis, kind == 0 ? " constant indices" : kind == 1 ? " integer indices" : " float indices"), "pet one-hot");
    }
  // GatherND: batch dims, tuples of 1 to 3 coordinates, negative ones, constant or not.
  struct Nd {
    int64_t batch_dims;
    Shape is;
  };
  const Shape xs{3, 4, 5, 6};
  for (const Nd& c : {Nd{0, {2, 2}}, Nd{0, {4, 1}}, Nd{1, {3, 2, 2}}, Nd{2, {3, 4, 1}}, Nd{1, {3, 3}}, Nd{0, {2, 3, 4}}})
    for (bool constant : {true, false}) {
      Tensor<int64_t> idx(c.is);
      const int64_t m = c.is.back();
      for (int64_t k = 0; k < idx.size(); ++k) {
        const int64_t n = xs[size_t(c.batch_dims + k % m)];
        idx[k] = (k * 5) % (2 * n) - n;
      }
      Graph g;
      Builder b(g);
      TensorId x = b.input("x", xs);
      TensorId i = constant ? g.add_constant("idx", DType::Int64, idx) : b.input("idx", c.is, DType::Int64);
      b.output(b.add(ops::GatherND{.batch_dims = c.batch_dims}, {x, i}));
      std::vector<Value<float>> in{counting(xs)};
      if (!constant) in.push_back(idx);
      moves_exactly(g, in, cat("GatherND batch_dims ", c.batch_dims, " indices ", c.is, constant ? " constant" : " input"), "pet gather (slices of");
    }
  {
    Graph g;
    Builder b(g);
    b.output(b.add(ops::GatherND{}, {b.input("x", {2, 3}), b.input("idx", {2, 2}, DType::Int64)}, "lookup"));
    auto exe = backend::make_backend("cpu")->compile(g);
    CHECK_THROWS_WITH_AS(exe->run(std::vector<Value<float>>{counting({2, 3}), Tensor<int64_t>(Shape{2, 2}, std::vector<int64_t>{0, 1, 1, -4})}),
                         doctest::Contains("index -4 is out of range for data dim 1 of size 3"), InvalidInput);
    CHECK_THROWS_WITH_AS(exe->run(std::vector<Value<float>>{counting({2, 3}), Tensor<int64_t>(Shape{2, 2}, std::vector<int64_t>{2, 0, 0, 0})}),
                         doctest::Contains("GatherND 'lookup'"), InvalidInput);
  }
  // Integer to integer: logical ops on bools, comparisons of int64 beyond 2^53, casts that wrap.
  const std::vector<int64_t> big = {0, 1, -1, 5, 255, 256, -129, int64_t(1) << 40, (int64_t(1) << 53) + 1, (int64_t(1) << 53), std::numeric_limits<int64_t>::max(),
                                    std::numeric_limits<int64_t>::min()};
  auto ints = [&](const Shape& s, uint64_t seed, bool boolean) {
    Rng rng(seed);
    Tensor<int64_t> t(s);
    for (int64_t i = 0; i < t.size(); ++i) t[i] = boolean ? int64_t(rng.below(2)) : big[size_t(rng.below(big.size()))];
    return t;
  };
  for (const auto& [as, bs] : std::vector<std::pair<Shape, Shape>>{{{3, 4}, {3, 4}}, {{3, 1}, {1, 4}}, {{3, 4}, {}}}) {
    for (const Op& op : std::vector<Op>{ops::And{}, ops::Or{}, ops::Xor{}}) {
      Graph g = one_op(op, {TensorType{DType::Bool, as}, TensorType{DType::Bool, bs}});
      moves_exactly(g, {ints(as, 980, true), ints(bs, 981, true)}, cat(op_name(op), " ", as, " ", bs), "pet logical op");
    }
    for (const Op& op : std::vector<Op>{ops::Equal{}, ops::Less{}, ops::LessOrEqual{}, ops::Greater{}, ops::GreaterOrEqual{}}) {
      Graph g = one_op(op, {i64(as), i64(bs)});
      moves_exactly(g, {ints(as, 982, false), ints(bs, 983, false)}, cat(op_name(op), " of int64 ", as, " ", bs), "pet integer comparison");
    }
  }
  {
    Graph g = one_op(ops::Not{}, {TensorType{DType::Bool, {5, 3}}});
    moves_exactly(g, {ints({5, 3}, 984, true)}, "Not", "pet logical op");
  }
  // The bitwise ops on every integer type (values wrapped to it), broadcast; BitShift of uint8
  for (DType t : {DType::Int8, DType::UInt8, DType::Int32, DType::Int64}) {
    auto typed = [&](const Shape& s, uint64_t seed) {
      Tensor<int64_t> v = ints(s, seed, false);
      for (int64_t i = 0; i < v.size(); ++i) v[i] = wrap_to(t, v[i]);
      return v;
    };
    for (const Op& op : std::vector<Op>{ops::BitwiseAnd{}, ops::BitwiseOr{}, ops::BitwiseXor{}}) {
      Graph g = one_op(op, {TensorType{t, {3, 1}}, TensorType{t, {1, 4}}});
      moves_exactly(g, {typed({3, 1}, 985), typed({1, 4}, 986)}, cat(op_name(op), " of ", dtype_name(t)), "pet bitwise op");
    }
    Graph g = one_op(ops::BitwiseNot{}, {TensorType{t, {3, 4}}});
    moves_exactly(g, {typed({3, 4}, 987)}, cat("BitwiseNot of ", dtype_name(t)), "pet bitwise op");
  }
  for (auto dir : {ops::BitShift::Direction::Left, ops::BitShift::Direction::Right}) {
    ops::BitShift op;
    op.direction = dir;
    Graph g = one_op(op, {TensorType{DType::UInt8, {2, 4}}, TensorType{DType::UInt8, {4}}});
    const Tensor<int64_t> a(Shape{2, 4}, std::vector<int64_t>{1, 255, 128, 7, 200, 3, 64, 255}), by(Shape{4}, std::vector<int64_t>{0, 1, 7, 8});
    moves_exactly(g, {a, by}, "BitShift", "pet bitwise op");
    const auto y = std::get<Tensor<int64_t>>(backend::make_backend("cpu")->compile(g)->run(std::vector<Value<float>>{a, by})[0]).vec();
    CHECK(y == (dir == ops::BitShift::Direction::Left ? std::vector<int64_t>{1, 254, 0, 0, 200, 6, 0, 0} : std::vector<int64_t>{1, 127, 1, 0, 200, 1, 0, 0}));
  }
  // Div and Mod of integers: signs, the lowest value by -1 (the machine's division traps: pet
  // run died of SIGFPE on it), division by zero named
  {
    const int64_t lo = std::numeric_limits<int64_t>::min();
    const Tensor<int64_t> a(Shape{8}, std::vector<int64_t>{lo, 7, -7, 7, -7, lo, 0, std::numeric_limits<int64_t>::max()});
    const Tensor<int64_t> b(Shape{8}, std::vector<int64_t>{-1, 3, 3, -3, -3, 3, -5, -1});
    for (const Op& op : std::vector<Op>{ops::Div{}, ops::Mod{}, ops::Mod{.fmod = 1}}) {
      Graph g = one_op(op, {i64({8}), i64({8})});
      moves_exactly(g, {a, b}, cat(op_name(op), " of int64"), std::holds_alternative<ops::Div>(op) ? "pet integer division" : "pet integer remainder");
    }
    auto y = [&](Op op) { return std::get<Tensor<int64_t>>(backend::make_backend("cpu")->compile(one_op(op, {i64({8}), i64({8})}))->run(std::vector<Value<float>>{a, b})[0]).vec(); };
    CHECK(y(ops::Div{}) == std::vector<int64_t>{lo, 2, -2, -2, 2, lo / 3, 0, -std::numeric_limits<int64_t>::max()});
    CHECK(y(ops::Mod{}) == std::vector<int64_t>{0, 1, 2, -2, -1, 1, 0, 0});
    CHECK(y(ops::Mod{.fmod = 1}) == std::vector<int64_t>{0, 1, -1, 1, -1, lo % 3, 0, 0});
    Graph g;
    Builder bb(g);
    bb.output(bb.add(ops::Div{}, {bb.input("a", {8}, DType::Int64), bb.input("b", {8}, DType::Int64)}, "ratio"));
    Tensor<int64_t> z = b;
    z[3] = 0;
    CHECK_THROWS_WITH_AS(backend::make_backend("cpu")->compile(g)->run(std::vector<Value<float>>{a, z}), doctest::Contains("'ratio': integer division by zero"),
                         InvalidInput);
    CHECK_THROWS_WITH_AS(backend::make_backend("reference")->compile(g)->run(std::vector<Value<float>>{a, z}), doctest::Contains("integer division by zero"),
                         InvalidInput);
  }
  for (DType from : {DType::Int64, DType::Int32, DType::Bool})
    for (DType to : {DType::Int64, DType::Int32, DType::Int8, DType::UInt8, DType::Bool}) {
      Graph g = one_op(ops::Cast{.to = to}, {TensorType{from, {4, 6}}});
      Tensor<int64_t> x = ints({4, 6}, 985, from == DType::Bool);
      if (from == DType::Int32)
        for (int64_t i = 0; i < x.size(); ++i) x[i] = wrap_to(DType::Int32, x[i]);
      moves_exactly(g, {x}, cat("Cast ", dtype_name(from), " to ", dtype_name(to)), "pet integer conversion");
    }
}

TEST_CASE("cpu: a matmul of a few rows with a constant weight: oneDNN's weight layout or the padded rows, whichever times faster") {
  struct C {
    Shape a, w;
    bool bias, residual, tanh;
  };
  for (const C& c : {C{{1, 256}, {256, 1024}, true, true, false}, C{{4, 64}, {64, 96}, false, false, true}, C{{2, 1, 48}, {48, 33}, true, false, true},
                     C{{16, 32}, {32, 64}, false, true, false}}) {
    Graph g;
    {
      Builder b(g);
      Rng rng(900 + uint64_t(c.w[1]));
      TensorId x = b.input("x", c.a);
      TensorId y = b.add(ops::MatMul{}, {x, b.constant("w", lab::random_weight(c.w, rng))});
      if (c.bias) y = b.add(ops::Add{}, {y, b.constant("bias", lab::random_weight({c.w[1]}, rng))});
      Shape ys = c.a;
      ys.back() = c.w[1];
      if (c.residual) y = b.add(ops::Add{}, {y, b.input("r", ys)});
      if (c.tanh) y = b.add(ops::Tanh{}, {y});
      b.output(y);
    }
    backend::CompileOptions untimed;
    untimed.choose_algorithms = false;  // the padded rows, untimed
    same_as_reference(g, 91, cat("few-row matmul ", c.a, " x ", c.w, ", padded rows"), untimed);
    CHECK(backend::make_backend("cpu")->compile(g, untimed)->describe().find("weights in oneDNN's layout") == std::string::npos);
    backend::CompileOptions timed;
    timed.algorithm_cache = "";  // this process's choices only
    same_as_reference(g, 92, cat("few-row matmul ", c.a, " x ", c.w, ", timed"), timed);
  }
}

TEST_CASE("cpu: Tile as one strided copy (pet's copy plans)") {
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
      {{2, 3, 4}, {1, 2, 2}}, {{5}, {3}}, {{1, 3}, {4, 1}}, {{2, 1, 3, 2}, {2, 3, 2, 2}}, {{2, 3}, {0, 2}}, {{3, 2, 2}, {1, 1, 1}}};
  for (const auto& [xs, r] : cases) {
    Graph g = one_op(ops::Tile{.repeats = r}, {f32(xs)});
    moves_exactly(g, {counting(xs)}, cat("Tile ", xs, " by ", r), "pet tiling copy");
  }
  // Five dims each repeated: a box of rank 10, over a backend's limit; the reference kernel.
  Graph g = one_op(ops::Tile{.repeats = {2, 2, 2, 2, 2}}, {f32({2, 2, 2, 2, 3})});
  moves_exactly(g, {counting({2, 2, 2, 2, 3})}, "Tile of rank 5", "reference kernel");
}

TEST_CASE("cpu: integer tensors, fallbacks and buffer reuse over a long program") {
  Graph g;
  {
    Builder b(g);
    TensorId x = b.input("x", {3, 4});
    TensorId idx = b.input("idx", {2}, DType::Int64);
    TensorId gth = b.add(ops::Gather{.axis = 0}, {x, idx});
    TensorId e = b.add(ops::Erf{}, {gth});
    TensorId cond = b.add(ops::Reshape{.shape = {2, 1}}, {b.add(ops::Cast{.to = DType::Bool}, {idx})});
    TensorId w = b.add(ops::Where{}, {cond, b.add(ops::ReduceMean{{.axes = {1}}}, {e}), e});
    b.output(w);
    b.output(b.add(ops::Pow{}, {x, b.constant("two", Tensor<float>(Shape{}, std::vector<float>{2.0f}))}));
  }
  same_as_reference(g, 70, "gather/erf/where/pow");
  // A deep chain: buffers must be reused, results unchanged.
  Graph chain;
  {
    Builder b(chain);
    Rng rng(11);
    TensorId t = b.input("x", {1, 8, 16, 16});
    for (int i = 0; i < 12; ++i) {
      t = b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {t, b.constant(cat("w", i), lab::random_weight({8, 8, 3, 3}, rng))});
      if (i % 3 == 2) t = b.add(ops::Transpose{.perm = {0, 1, 3, 2}}, {t});
      t = b.add(ops::Relu{}, {t});
    }
    b.output(t);
  }
  auto exe = backend::make_backend("cpu")->compile(chain);
  std::string d = exe->describe();
  CHECK(d.find("memory:") != std::string::npos);
  same_as_reference(chain, 71, "deep chain");
}

TEST_CASE("cpu: a run's outputs are the caller's: a later run leaves the ones kept alone and reuses the storage of the ones dropped") {
  Graph g;
  {
    Builder b(g);
    TensorId x = b.input("x", {6, 7});
    b.output(b.add(ops::Relu{}, {x}));                   // float, written in place into the output
    b.output(b.add(ops::Reshape{.shape = {7, 6}}, {x}));  // float, a view of the input: copied out
    TensorId gt = b.add(ops::Greater{}, {x, b.constant("z", Tensor<float>(Shape{}, std::vector<float>{0.f}))});
    b.output(gt);                                                 // integer, pet's comparison
    b.output(b.add(ops::Reshape{.shape = {42}}, {gt}));           // integer, sharing gt's storage
    b.output(b.add(ops::ArgMax{{.axis = 1}}, {x}));               // integer, pet's arg-reduction
    b.output(b.add_multi(ops::TopK{.k = 2, .axis = 1}, {x})[1]);  // integer, pet's partial sort
  }
  auto ref = backend::make_backend("reference")->compile(g);
  auto exe = backend::make_backend("cpu")->compile(g);
  INFO("plan:\n", exe->describe());
  auto data_of = [](const Value<float>& v) -> const void* {
    if (const auto* f = std::get_if<Tensor<float>>(&v)) return f->data();
    return std::get<Tensor<int64_t>>(v).data();
  };
  auto check_all = [&](const std::vector<Value<float>>& got, const Value<float>& x, const std::string& when) {
    auto want = ref->run(std::vector<Value<float>>{x});
    REQUIRE(got.size() == want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      Comparison c = compare(got[k], want[k], 0, 0);
      INFO(when, ", output ", k, ": ", c.problem, " max error ", c.max_abs_err);
      CHECK(c.pass);
    }
  };
  Rng rng(91);
  std::vector<Value<float>> xs;
  for (int i = 0; i < 4; ++i) xs.push_back(random_inputs({f32({6, 7})}, rng, InputSpec{})[0]);
  // Kept: run 2 must not write what run 1 gave.
  auto first = exe->run(std::vector<Value<float>>{xs[0]});
  auto second = exe->run(std::vector<Value<float>>{xs[1]});
  check_all(first, xs[0], "run 1, kept over run 2");
  check_all(second, xs[1], "run 2");
  for (size_t k = 0; k < first.size(); ++k) CHECK(data_of(first[k]) != data_of(second[k]));
  // Dropped: run 3 writes into run 2's storage again, except where a kept view still shares it.
  std::vector<const void*> was;
  for (const auto& v : second) was.push_back(data_of(v));
  second.clear();
  auto third = exe->run(std::vector<Value<float>>{xs[2]});
  check_all(third, xs[2], "run 3");
  check_all(first, xs[0], "run 1, kept over run 3");
  CHECK(data_of(third[0]) == was[0]);  // Relu: the output's own storage
  CHECK(data_of(third[1]) == was[1]);  // the copied-out view
  CHECK(data_of(third[4]) == was[4]);  // ArgMax
  CHECK(data_of(third[5]) == was[5]);  // TopK's indices
  // Keeping only the Reshape of the comparison keeps the comparison's storage too.
  Value<float> kept = third[3];
  third.clear();
  auto fourth = exe->run(std::vector<Value<float>>{xs[3]});
  check_all(fourth, xs[3], "run 4");
  CHECK(data_of(fourth[2]) != data_of(kept));
  CHECK(compare(kept, ref->run(std::vector<Value<float>>{xs[2]})[3], 0, 0).pass);
}

TEST_CASE("backend registry and the op profiler's cache") {
  auto names = backend::available_backends();
  CHECK(std::find(names.begin(), names.end(), "cpu") != names.end());
  CHECK_THROWS_WITH_AS(backend::make_backend("tpu"), "unknown backend 'tpu' (choose reference, cpu or cuda)", InvalidInput);
  CHECK_THROWS_WITH_AS(backend::make_backend("cpu", {.tf32 = true}), "TF32 (--tf32) is an option of the cuda backend only, not of 'cpu'", InvalidInput);
  CHECK_THROWS_WITH_AS(backend::make_backend("reference", {.tf32 = true}), "TF32 (--tf32) is an option of the cuda backend only, not of 'reference'",
                       InvalidInput);
  std::string file = (std::filesystem::temp_directory_path() / cat("pet_opcache_", ::getpid(), ".db")).string();
  auto cpu = backend::make_backend("cpu");
  Op conv = ops::Conv{.pads = {1, 1, 1, 1}};
  Types in{f32({1, 8, 14, 14}), f32({8, 8, 3, 3})};
  // A measurement that stays disturbed (other tests busy on both cores) is never written to
  // disk, so the disk half needs a trusted one: a fresh profiler measures again, a few times.
  bool trusted = false;
  for (int attempt = 0; attempt < 5 && !trusted; ++attempt) {
    backend::Profiler p(*cpu, file, 3, 0);
    auto t = p.time_op(conv, in);
    CHECK(t.median_ms > 0);
    CHECK(!t.cached);
    CHECK(p.measured() == 1);
    auto again = p.time_op(conv, in);
    CHECK(again.median_ms == t.median_ms);  // this process keeps even a doubtful timing
    CHECK(p.hits() == 1);
    trusted = t.trusted;
    if (trusted) CHECK(t.runs >= 3);
    else CHECK(p.untrusted() == 1);
  }
  if (!trusted) {
    MESSAGE("every measurement was disturbed (a busy machine): the disk cache is not checked this time");
    std::filesystem::remove(file);
    return;
  }
  {
    auto rows = backend::CacheStore(file, "opcache").all();
    REQUIRE(rows.size() == 1);
    CHECK(rows.begin()->first.rfind(cat("cpu@", cpu->version(), "|"), 0) == 0);  // older kernels' timings never match
  }
  backend::Profiler q(*cpu, file, 3, 0);  // a second optimizer run reads the file
  auto t = q.time_op(conv, in);
  CHECK(t.cached);
  CHECK(q.measured() == 0);
  std::filesystem::remove(file);
}

TEST_CASE("profiled program cost: ops on constants are free, shapes are real, results cached") {
  auto cpu = backend::make_backend("cpu");
  Graph g;
  Builder b(g);
  Rng rng(5);
  TensorId x = b.input("x", {1, 8, 12, 12});
  // The weight is a Concat of two constants: computed once at compile time, free.
  TensorId w = b.add(ops::Concat{.axis = 0}, {b.constant("w1", lab::random_weight({4, 8, 3, 3}, rng)),
                                               b.constant("w2", lab::random_weight({4, 8, 3, 3}, rng))});
  TensorId y = b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {x, w});
  b.output(b.add(ops::Gather{.axis = 3}, {y, b.ints("idx", {0, 11, 5})}));  // an integer constant with its real values
  backend::Profiler p(*cpu, "", 3, 0);
  double ms = p.program_cost_ms(g);
  CHECK(ms > 0);
  CHECK(p.measured() == 2);  // Conv and Gather; not the Concat
  CHECK(p.program_cost_ms(g) == ms);
  CHECK(p.measured() == 2);
  CHECK(p.hits() == 2);
  // The same op with different index values is a different configuration.
  Graph h;
  Builder c(h);
  c.output(c.add(ops::Gather{.axis = 3}, {c.input("x", {1, 8, 12, 12}), c.ints("idx", {1, 2, 3})}));
  CHECK(p.program_cost_ms(h) > 0);
  CHECK(p.measured() == 3);
}

TEST_CASE("profiler deadline: past it, known ops are still answered, new ones are not measured (infinite cost)") {
  auto cpu = backend::make_backend("cpu");
  backend::Profiler p(*cpu, "", 3, 0);
  const Graph g = one_op(ops::Conv{.pads = {1, 1, 1, 1}}, {f32({1, 8, 10, 10}), f32({8, 8, 3, 3})}, {false, true}, 8);
  const double known = p.program_cost_ms(g);
  REQUIRE(std::isfinite(known));
  p.set_deadline(std::chrono::steady_clock::now() - std::chrono::seconds(1));
  CHECK(p.program_cost_ms(g) == known);  // cached: answered
  Graph h;
  Builder c(h);
  c.output(c.add(ops::Relu{}, {c.input("x", {1, 8, 10, 10})}));
  CHECK(std::isinf(p.program_cost_ms(h)));
  CHECK(p.skipped() == 1);
  CHECK(p.measured() == 1);
  p.set_deadline(std::nullopt);
  CHECK(std::isfinite(p.program_cost_ms(h)));  // not cached as infinite: measured once the deadline is lifted
  CHECK(p.measured() == 2);
}

TEST_CASE("mutants ranked by the profiler's cost") {
  auto cpu = backend::make_backend("cpu");
  backend::Profiler p(*cpu, "", 3, 0);
  const Graph g = one_op(ops::Conv{.pads = {1, 1, 1, 1}}, {f32({2, 8, 10, 10}), f32({8, 8, 3, 3})}, {false, true}, 6);
  mutate::Options opt;
  opt.depth = 1;
  int calls = 0;
  opt.cost = [&](const Graph& m) {
    ++calls;
    return p.program_cost_ms(m);
  };
  auto r = mutate::run(g, opt);
  REQUIRE(r.mutants.size() >= 2);
  CHECK(calls >= 1 + int(r.mutants.size()));
  CHECK(r.original_est_ms == p.program_cost_ms(g));
  for (size_t i = 0; i < r.mutants.size(); ++i) {
    CHECK(r.mutants[i].est_ms > 0);
    CHECK(r.mutants[i].uncorrected_ms > 0);
    CHECK(r.mutants[i].est_ms == std::min(p.program_cost_ms(r.mutants[i].graph), r.mutants[i].est_ms));
    if (i) CHECK(r.mutants[i - 1].est_ms <= r.mutants[i].est_ms);
  }
}

TEST_CASE("strided copy kernel: every path (rows, tiles, transposes, parity regroups, gathers) against a plain loop") {
  Rng rng(77);
  const int64_t extents[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 24, 65};
  auto check = [](const Shape& split, const std::vector<int64_t>& perm) {
    const int r = int(split.size());
    const Shape x{numel(split)};
    const backend::BoxCopy c = backend::copy_plan(ops::RT{.split_shape = split, .perm = perm, .out_shape = x}, Types{f32(x)}, Types{f32(x)})->at(0);
    const Shape& t = c.shape;
    const std::vector<int64_t>& st = c.src_strides;
    const int64_t n = numel(split);
    std::vector<float> src(static_cast<size_t>(n)), got(static_cast<size_t>(n), -1.f), want(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) src[size_t(i)] = float(i);
    Index idx(r);
    for (int64_t q = 0; q < n; ++q, next_index(idx, t)) {
      int64_t so = 0;
      for (int i = 0; i < r; ++i) so += idx[i] * st[size_t(i)];
      want[size_t(q)] = src[size_t(so)];
    }
    cpu::strided_copy(src.data(), st, got.data(), t);
    INFO("split ", split, " perm ", perm);
    CHECK(got == want);
  };
  // The benchmark's shapes: parity regroups (rows of 7, 13, 14 pairs), tiles, head splits.
  check({512, 7, 2, 7, 2}, {2, 4, 0, 1, 3});
  check({64, 14, 2, 14, 2}, {2, 4, 0, 1, 3});
  check({3, 5, 2, 13, 2}, {2, 4, 0, 1, 3});
  check({16, 2, 9, 2, 9}, {1, 3, 0, 2, 4});
  check({16, 4, 5, 4, 5}, {1, 3, 0, 2, 4});
  check({128, 12, 64}, {1, 0, 2});
  check({67, 45}, {1, 0});
  for (int trial = 0; trial < 600; ++trial) {
    const int r = int(rng.range(1, 5));
    Shape split;
    for (int i = 0; i < r; ++i) split.push_back(extents[rng.range(0, 12)]);
    while (numel(split) > 200000) split[size_t(rng.range(0, r - 1))] = 2;
    std::vector<int64_t> perm(static_cast<size_t>(r));
    for (int i = 0; i < r; ++i) perm[size_t(i)] = i;
    for (int i = r - 1; i > 0; --i) std::swap(perm[size_t(i)], perm[size_t(rng.range(0, i))]);
    check(split, perm);
  }
}

TEST_CASE("pet's Winograd F(4x4,3x3) convs: pads, odd sizes, batches, bias, fused activations and residual sums") {
  backend::CompileOptions wino;
  wino.conv_algorithm = "winograd";
  struct Case {
    Shape x;
    int64_t k;
    std::vector<int64_t> pads;
    bool bias;
    int post;  // 0 none, 1 relu, 2 residual add + relu, 3 leaky relu, 4 residual add
  };
  const Case cases[] = {
      {{1, 8, 8, 8}, 8, {1, 1, 1, 1}, false, 0},     {{1, 16, 13, 11}, 24, {1, 1, 1, 1}, true, 1},
      {{2, 8, 9, 10}, 16, {0, 0, 0, 0}, true, 0},    {{1, 8, 7, 5}, 8, {2, 0, 1, 3}, false, 1},
      {{3, 32, 17, 19}, 8, {1, 1, 1, 1}, true, 2},   {{1, 24, 6, 6}, 32, {1, 1, 1, 1}, true, 3},
      {{1, 64, 28, 28}, 64, {1, 1, 1, 1}, true, 4},  {{1, 8, 3, 3}, 8, {0, 0, 0, 0}, false, 0},
  };
  int i = 0;
  for (const Case& c : cases) {
    Graph g;
    Builder b(g);
    Rng rng(900 + uint64_t(i));
    TensorId x = b.input("x", c.x);
    std::vector<TensorId> in{x, b.constant("w", lab::random_weight({c.k, c.x[1], 3, 3}, rng))};
    if (c.bias) in.push_back(b.constant("b", lab::random_weight({c.k}, rng)));
    TensorId y = b.add(ops::Conv{.pads = c.pads}, in);
    const Shape ys = g.type(y).shape;
    if (c.post == 2 || c.post == 4) y = b.add(ops::Add{}, {y, b.input("r", ys)});
    if (c.post == 1 || c.post == 2) y = b.add(ops::Relu{}, {y});
    if (c.post == 3) y = b.add(ops::LeakyRelu{.alpha = 0.1f}, {y});
    b.output(y);
    same_as_reference(g, 950 + uint64_t(i), cat("winograd case ", i, " x ", c.x, " k ", c.k, " pads ", c.pads), wino, "pet winograd");
    ++i;
  }
  // 3-D: Winograd in H and W, the depth taps summed in the matmul.
  struct Case3 {
    Shape x;
    int64_t k, kd;
    std::vector<int64_t> pads;
    bool residual;
  };
  const Case3 cases3[] = {{{1, 8, 4, 6, 7}, 8, 3, {1, 1, 1, 1, 1, 1}, false},
                          {{2, 16, 3, 9, 5}, 8, 3, {0, 1, 0, 2, 0, 1}, true},
                          {{1, 8, 2, 5, 5}, 16, 1, {0, 1, 1, 0, 1, 1}, false},
                          {{1, 8, 5, 6, 6}, 8, 2, {1, 0, 1, 0, 1, 2}, true}};
  for (const Case3& c : cases3) {
    Graph g;
    Builder b(g);
    Rng rng(900 + uint64_t(i));
    TensorId y = b.add(ops::Conv{.pads = c.pads}, {b.input("x", c.x), b.constant("w", lab::random_weight({c.k, c.x[1], c.kd, 3, 3}, rng)),
                                                   b.constant("b", lab::random_weight({c.k}, rng))});
    if (c.residual) y = b.add(ops::Add{}, {y, b.input("r", g.type(y).shape)});
    b.output(b.add(ops::Relu{}, {y}));
    same_as_reference(g, 950 + uint64_t(i), cat("3-D winograd case ", i, " x ", c.x, " kd ", c.kd, " pads ", c.pads), wino, "pet winograd");
    ++i;
  }
  // Where it does not apply (channels not a multiple of 8, strides, dilations), the direct conv runs.
  Graph g;
  Builder b(g);
  Rng rng(960);
  b.output(b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {b.input("x", {1, 5, 9, 9}), b.constant("w", lab::random_weight({8, 5, 3, 3}, rng))}));
  backend::CompileOptions direct;
  direct.conv_algorithm = "direct";
  same_as_reference(g, 961, "5 input channels", wino, "direct");
  same_as_reference(g, 962, "forced direct", direct, "direct");
}

TEST_CASE("pet's Winograd kernel on 8-channel blocks and on channels-last tensors: the same conv, relu and residual sum") {
  // The kernel alone, on both layouts whatever this CPU's oneDNN picks elsewhere, against the
  // reference interpreter's conv.
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  struct Case {
    Shape x;  // [n, c, (d,) h, w]
    int64_t k, kd;
    std::vector<int64_t> pads;
  };
  const Case cases[] = {{{2, 16, 9, 7}, 24, 1, {1, 0, 2, 1}}, {{1, 8, 6, 6}, 8, 1, {1, 1, 1, 1}}, {{1, 16, 3, 5, 6}, 8, 2, {1, 1, 0, 0, 1, 1}}};
  uint64_t seed = 1970;
  for (const Case& c : cases) {
    const bool three_d = c.x.size() == 5;
    Shape ws{c.k, c.x[1]};
    if (three_d) ws.push_back(c.kd);
    ws.insert(ws.end(), {3, 3});
    Graph g;
    Builder b(g);
    Rng rng(seed++);
    Tensor<float> w = lab::random_weight(ws, rng), bias = lab::random_weight({c.k}, rng);
    TensorId y = b.add(ops::Conv{.pads = c.pads}, {b.input("x", c.x), b.constant("w", w), b.constant("b", bias)});
    const Shape ys = g.type(y).shape;
    b.output(b.add(ops::Relu{}, {b.add(ops::Add{}, {y, b.input("r", ys)})}));
    Types types;
    for (TensorId i : g.inputs()) types.push_back(g.type(i));
    const auto in = random_inputs(types, rng, InputSpec{});
    const auto outs = backend::make_backend("reference")->compile(g)->run(in);
    const auto& want = std::get<Tensor<float>>(outs[0]);
    const auto& x = std::get<Tensor<float>>(in[0]);
    const auto& r = std::get<Tensor<float>>(in[1]);
    cpu::WinogradShape sh;
    sh.n = c.x[0], sh.c = c.x[1], sh.k = c.k;
    const size_t k = c.x.size() - 2;  // spatial dims
    sh.h = c.x[k], sh.w = c.x[k + 1];
    sh.pad_top = c.pads[k - 2], sh.pad_left = c.pads[k - 1], sh.pad_bottom = c.pads[2 * k - 2], sh.pad_right = c.pads[2 * k - 1];
    if (three_d) sh.d = c.x[2], sh.kd = c.kd, sh.pad_front = c.pads[0], sh.pad_back = c.pads[3];
    // element [i, ch, (z,) y, x] of a tensor of shape s at its place in layout l
    auto place = [&](const cpu::Block8Layout& l, const Shape& s, int64_t flat) {
      std::vector<int64_t> ix(s.size());
      for (size_t d = s.size(); d-- > 0;) ix[d] = flat % s[d], flat /= s[d];
      const int64_t z = three_d ? ix[2] : 0;
      return l.at(ix[0], ix[1] / 8, z, ix[k], ix[k + 1]) + ix[1] % 8;
    };
    for (bool last : {false, true}) {
      CAPTURE(last);
      CAPTURE(c.x);
      sh.channels_last = last;
      const cpu::Block8Layout lx(last, c.x[1], three_d ? c.x[2] : 1, c.x[k], c.x[k + 1]);
      const cpu::Block8Layout ly(last, c.k, three_d ? ys[2] : 1, ys[k], ys[k + 1]);
      std::vector<float> src(size_t(numel(c.x))), dst(size_t(numel(ys)));
      for (int64_t i = 0; i < numel(c.x); ++i) src[size_t(place(lx, c.x, i))] = x.data()[i];
      for (int64_t i = 0; i < numel(ys); ++i) dst[size_t(place(ly, ys, i))] = r.data()[i];  // the residual, summed
      std::vector<cpu::Epilogue> epi{{.kind = cpu::Epilogue::Sum}, {.alg = dnnl::algorithm::eltwise_relu}};
      cpu::Winograd4x3 wg(eng, sh, w.data(), bias.data(), epi);
      wg.run(strm, src.data(), dst.data());
      double worst = 0, scale = 0;
      for (int64_t i = 0; i < numel(ys); ++i) {
        worst = std::max(worst, std::abs(double(dst[size_t(place(ly, ys, i))]) - double(want.data()[i])));
        scale = std::max(scale, std::abs(double(want.data()[i])));
      }
      INFO("max error ", worst, " of max ", scale);
      CHECK(scale > 0);
      CHECK(worst <= 1e-4 * std::max(1.0, scale));
    }
  }
  // In a program: a 1x1 conv's output (channels-last where this CPU's oneDNN picks so) read
  // by pet's Winograd conv, whose output another 1x1 conv reads.
  Graph g;
  Builder b(g);
  Rng rng(1980);
  TensorId t = b.add(ops::Relu{}, {b.add(ops::Conv{}, {b.input("x", {1, 32, 10, 10}), b.constant("w1", lab::random_weight({16, 32, 1, 1}, rng))})});
  t = b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {t, b.constant("w3", lab::random_weight({16, 16, 3, 3}, rng))});
  b.output(b.add(ops::Conv{}, {t, b.constant("w2", lab::random_weight({8, 16, 1, 1}, rng))}));
  backend::CompileOptions wino;
  wino.conv_algorithm = "winograd";
  same_as_reference(g, 1981, "1x1, winograd 3x3, 1x1", wino, "pet winograd");
}

TEST_CASE("convs at layout boundaries (pet copies in and out): plain or blocked by measurement, same results") {
  for (int64_t kk : {1, 3}) {
    Graph g;
    Builder b(g);
    Rng rng(980 + uint64_t(kk));
    TensorId x = b.input("x", {1, 32, 14, 14});
    // phases of a dilation-2 conv in the batch, as the dilated-to-dense mutant builds them
    TensorId ph = b.rt(x, {32, 7, 2, 7, 2}, {2, 4, 0, 1, 3}, {4, 32, 7, 7});
    TensorId y = b.add(ops::Conv{.pads = {kk / 2, kk / 2, kk / 2, kk / 2}},
                       {ph, b.constant("w", lab::random_weight({16, 32, kk, kk}, rng)), b.constant("b", lab::random_weight({16}, rng))});
    y = b.add(ops::Relu{}, {y});
    b.output(b.rt(y, {2, 2, 16, 7, 7}, {2, 3, 0, 4, 1}, {1, 16, 14, 14}));
    same_as_reference(g, 990 + uint64_t(kk), cat("boundary conv ", kk, "x", kk));
  }
}

TEST_CASE("algorithm choices are cached on disk and reused without timing") {
  const std::string file = (std::filesystem::temp_directory_path() / cat("pet_algos_", ::getpid(), ".db")).string();
  std::filesystem::remove(file);
  Graph g;
  {
    Builder b(g);
    Rng rng(1001);
    TensorId y = b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {b.input("x", {1, 16, 12, 12}), b.constant("w", lab::random_weight({16, 16, 3, 3}, rng))});
    b.output(b.add(ops::Relu{}, {y}));
  }
  backend::CompileOptions opt;
  opt.algorithm_cache = file;
  auto cpu = backend::make_backend("cpu");
  const std::string first = cpu->compile(g, opt)->describe();
  CHECK(first.find("cached choice") == std::string::npos);
  const auto known = backend::AlgorithmCache::instance().entries(file);
  REQUIRE(known.size() == 2);  // at this layout boundary, and for any boundary
  // A choice timed while other work preempted the runs is used, never written.
  const bool busy = first.find("timed on a busy machine") != std::string::npos;
  CHECK((backend::CacheStore(file, "algorithms").size() > 0) == !busy);  // a choice timed on a busy machine is not written
  // A new executable reads the choice instead of timing.
  const std::string second = cpu->compile(g, opt)->describe();
  CHECK(second.find("cached choice") != std::string::npos);
  // The same conv twice in a row (its output, then its input, blocked: other boundaries)
  // takes the choice timed at the first boundary instead of timing again.
  {
    Graph h;
    Builder b(h);
    Rng rng(1001);
    const Tensor<float> w = lab::random_weight({16, 16, 3, 3}, rng);
    TensorId y = b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {b.input("x", {1, 16, 12, 12}), b.constant("w", w)});
    y = b.add(ops::Relu{}, {y});
    y = b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {y, b.constant("w2", w)});
    b.output(b.add(ops::Relu{}, {y}));
    const std::string twice = cpu->compile(h, opt)->describe();
    CHECK(twice.find("timed at another layout boundary") != std::string::npos);
    same_as_reference(h, 1003, "convs with choices from another boundary", opt);
  }
  // The conv timed alone (as the profiler times a window's conv) decides for the same conv
  // with its ReLU fused (as the whole program compiles it), under a file of its own.
  {
    const std::string alone_file = file + ".alone.db";
    std::filesystem::remove(alone_file);
    backend::CompileOptions o = opt;
    o.algorithm_cache = alone_file;
    Graph a;
    Builder b(a);
    Rng rng(1004);
    const Tensor<float> w = lab::random_weight({16, 16, 3, 3}, rng);
    TensorId x = b.input("x", {1, 16, 12, 12});
    b.output(b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {x, b.constant("w", w)}));
    CHECK(cpu->compile(a, o)->describe().find("cached choice") == std::string::npos);
    Graph r;
    Builder br(r);
    TensorId y = br.add(ops::Conv{.pads = {1, 1, 1, 1}}, {br.input("x", {1, 16, 12, 12}), br.constant("w", w)});
    br.output(br.add(ops::Relu{}, {y}));
    const std::string fused = cpu->compile(r, o)->describe();
    CHECK(fused.find("+ Relu") != std::string::npos);
    CHECK(fused.find("timed at another layout boundary or epilogue") != std::string::npos);
    same_as_reference(r, 1005, "conv + relu with the choice of the conv alone", o);
    std::filesystem::remove(alone_file);
  }
  // The file decides: a file with every choice pet's Winograd, under a fresh name (the
  // process keeps what it read), and the conv follows it.
  const std::string forced = file + ".forced.db";
  std::filesystem::remove(forced);
  {
    backend::CacheStore f(forced, "algorithms");
    for (const auto& [k, v] : known) f.put(k, "pet-winograd");
  }
  opt.algorithm_cache = forced;
  const std::string third = cpu->compile(g, opt)->describe();
  CHECK(third.find("pet winograd") != std::string::npos);
  CHECK(third.find("cached choice") != std::string::npos);
  same_as_reference(g, 1002, "conv with a cached choice", opt);
  // A damaged cache is set aside: choices are measured again.
  const std::string damaged = file + ".damaged.db";
  {
    std::ifstream in(forced, std::ios::binary);
    std::string bytes(std::istreambuf_iterator<char>(in), {});
    std::ofstream(damaged, std::ios::binary) << bytes.substr(0, 200);
  }
  opt.algorithm_cache = damaged;
  CHECK(cpu->compile(g, opt)->describe().find("cached choice") == std::string::npos);
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(file).parent_path()))
    if (e.path().string().rfind(damaged + ".damaged-", 0) == 0) std::filesystem::remove(e.path());
  for (const auto& f : {file, forced, damaged}) std::filesystem::remove(f);
}

namespace {
/// same_as_reference under every conv algorithm and layout the backend can be forced to,
/// on 1 and 2 threads (the differential test's configurations).
/// A batch norm's variance: random, at least 0.25.
Tensor<float> bn_variance(int64_t ch, Rng& rng) {
  Tensor<float> var = lab::random_weight({ch}, rng);
  for (int64_t i = 0; i < ch; ++i) var[i] = std::abs(var[i]) + 0.25f;
  return var;
}

void on_every_path(const Graph& g, uint64_t seed, const std::string& what, const std::string& plan_must_say = "") {
  for (const char* alg : {"auto", "direct", "winograd", "onednn-winograd"})
    for (const char* layout : {"auto", "blocked", "plain"})
      for (int threads : {1, 2}) {
        backend::CompileOptions opt;
        opt.conv_algorithm = alg;
        opt.conv_layout = layout;
        opt.threads = threads;
        same_as_reference(g, seed, cat(what, " [", alg, ", ", layout, ", ", threads, " threads]"), opt, plan_must_say);
      }
}
}  // namespace

TEST_CASE("cpu batch norm that no conv absorbs: pet's kernel on plain layouts, oneDNN's on blocked ones, a following Relu fused") {
  auto bn_graph = [](const Shape& xs, bool relu, bool after_concat) {
    Graph g;
    Builder b(g);
    Rng rng(9);
    auto w = [&](Shape s) { return b.constant(cat("w", g.num_tensors()), lab::random_weight(s, rng)); };
    const int64_t c = xs[1];
    TensorId x = b.input("x", xs);
    if (after_concat) {  // DenseNet: conv outputs (blocked where the backend chooses) joined, then BN
      TensorId a = b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {x, w({8, c, 3, 3})});
      TensorId d = b.add(ops::Conv{}, {x, w({8, c, 1, 1})});
      x = b.add(ops::Concat{.axis = 1}, {a, d});
    }
    const int64_t ch = after_concat ? 16 : c;
    TensorId y = b.add(ops::BatchNormalization{.epsilon = 1e-3f}, {x, w({ch}), w({ch}), w({ch}), b.constant("var", bn_variance(ch, rng))});
    if (relu) y = b.add(ops::Relu{}, {y});
    if (after_concat) y = b.add(ops::Conv{}, {y, w({4, 16, 1, 1})});
    b.output(y);
    return g;
  };
  for (const Shape& xs : {Shape{2, 3, 4, 4}, Shape{4, 5}, Shape{2, 3, 7}, Shape{1, 2, 3, 4, 5}})
    for (bool relu : {false, true}) {
      CAPTURE(xs);
      same_as_reference(bn_graph(xs, relu, false), 51, cat("batch norm ", xs), {}, relu ? "pet batch norm (plain) + Relu" : "pet batch norm (plain)");
    }
  on_every_path(bn_graph({1, 8, 9, 9}, true, true), 52, "concat -> batch norm -> relu -> conv");
}

TEST_CASE("cpu DenseNet joins share their block's buffer: each input copied once, the shorter joins views of it") {
  // A dense block: each layer joins the block's input and every earlier layer's output,
  // normalises the join (BN + Relu) and adds 16 channels; the block's last join takes them
  // all. The joins are prefixes of the last one, so they share its buffer.
  auto block = [](int64_t n, int layers, bool middle_output, bool reordered) {
    Graph g;
    Builder b(g);
    Rng rng(31);
    auto w = [&](Shape s) { return b.constant(cat("w", g.num_tensors()), lab::random_weight(s, rng)); };
    auto bn_relu = [&](TensorId t) {
      const int64_t ch = g.type(t).shape[1];
      const TensorId var = b.constant(cat("var", g.num_tensors()), bn_variance(ch, rng));
      return b.add(ops::Relu{}, {b.add(ops::BatchNormalization{}, {t, w({ch}), w({ch}), w({ch}), var})});
    };
    TensorId x0 = b.add(ops::Relu{}, {b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {b.input("x", {n, 4, 6, 7}), w({16, 4, 3, 3})})});
    std::vector<TensorId> feats{x0};
    for (int l = 0; l < layers; ++l) {
      std::vector<TensorId> in = feats;
      if (reordered && l == layers - 1) std::swap(in[1], in[2]);  // not a prefix of the last join: copied on its own
      TensorId j = b.add(ops::Concat{.axis = 1}, in, cat("join", l));
      if (middle_output && l == 1) b.output(j);
      TensorId h = b.add(ops::Relu{}, {b.add(ops::Conv{}, {bn_relu(j), w({32, 16 * int64_t(l + 1), 1, 1})})});
      feats.push_back(b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {h, w({16, 32, 3, 3})}));
    }
    TensorId all = b.add(ops::Concat{.axis = 1}, feats, "all");
    b.output(b.add(ops::Conv{}, {bn_relu(all), w({8, 16 * int64_t(layers + 1), 1, 1})}));
    return g;
  };
  auto count = [](const std::string& text, const std::string& what) {
    int k = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++k;
    return k;
  };
  for (const char* layout : {"plain", "blocked"})
    for (int variant = 0; variant < 5; ++variant) {
      const int64_t n = variant == 3 ? 2 : 1;
      const bool middle_output = variant == 1, reordered = variant == 2;
      const std::string layout_name = layout;
      CAPTURE(layout_name);
      CAPTURE(variant);
      const Graph g = block(n, variant == 4 ? 1 : 3, middle_output, reordered);
      backend::CompileOptions forced;
      forced.conv_layout = layout;
      forced.choose_algorithms = false;
      const std::string plan = backend::make_backend("cpu")->compile(g, forced)->describe();
      INFO(plan);
      // batch 1: the joins are dense views of the buffer's first channels. Batch 2: strided
      // views, taken only in a channels-last layout (where oneDNN's convs pick one on this
      // CPU), read by pet's row kernel; in NCHW or blocked layouts each join copies.
      const int shared = count(plan, "into slices of the buffer shared with 'all'");
      if (middle_output) {
        CHECK(shared == 0);  // a join the caller gets is its own tensor
      } else if (n == 2) {
        CHECK((shared == 0 || count(plan, "pet batch norm (channels-last rows of 64 read") == 3));
      } else if (reordered) {
        CHECK(shared == 3);  // join0, join1 and the last; join2 copies its three inputs itself
        const bool own_copies = plan.find("Concat 'join2': pet copies of 3 inputs") != std::string::npos ||
                                plan.find("Concat 'join2': 3 oneDNN reorders") != std::string::npos;
        CHECK(own_copies);
      } else {
        CHECK(shared == (variant == 4 ? 2 : 4));
        CHECK(count(plan, "oneDNN reorder into slices of the buffer") == shared);  // one new input each
      }
      same_as_reference(g, uint64_t(80 + variant), cat("dense block variant ", variant, " [", layout, "]"), forced);
      same_as_reference(g, uint64_t(80 + variant), cat("dense block variant ", variant));  // this CPU's layouts (channels-last: strided views)
    }
}

TEST_CASE("cpu shared join buffers: a view of a shorter join that is a program output is copied out, not handed over") {
  // The difftest's (seed 4, program 17 with --optimize): Reshape(join(x, x)) and
  // Flatten(join(x, x, c)) are outputs, both views of one 35-channel buffer. Handing the
  // buffer to the caller as the 32-channel output's storage overflowed it.
  Graph g;
  Builder b(g);
  TensorId x = b.input("x", {1, 16, 4, 4, 6}), c = b.input("c", {1, 3, 4, 4, 6});
  TensorId all = b.add(ops::Concat{.axis = 1}, {x, x, c}, "all");
  TensorId some = b.add(ops::Concat{.axis = 1}, {x, x}, "some");
  b.output(b.add(ops::Reshape{.shape = {128, 24}}, {some}));
  b.output(b.add(ops::Flatten{.axis = 3}, {all}));
  backend::CompileOptions forced;
  forced.conv_layout = "plain";
  same_as_reference(g, 90, "views of a shared join buffer as outputs", forced, "shared with 'all'");
  same_as_reference(g, 91, "views of a shared join buffer as outputs");
}

TEST_CASE("cpu batch norm rows: channels-last rows read at a stride wider than the channels, written densely") {
  const int64_t rows = 7, ch = 5, stride = 9;
  Rng rng(3);
  std::vector<float> x(size_t(rows * stride)), mean(ch), mul(ch), add(ch), y(size_t(rows * ch), -7.f);
  for (auto* v : {&x, &mean, &mul, &add})
    for (float& e : *v) e = float(rng.uniform(-1, 1));
  for (bool relu : {false, true}) {
    cpu::batch_norm_rows(x.data(), stride, y.data(), rows, ch, mean.data(), mul.data(), add.data(), relu);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < ch; ++c) {
        float want = (x[size_t(r * stride + c)] - mean[size_t(c)]) * mul[size_t(c)] + add[size_t(c)];
        if (relu) want = std::max(want, 0.f);
        CHECK(y[size_t(r * ch + c)] == want);
      }
  }
}

TEST_CASE("cpu SiLU (x * sigmoid(x)) as oneDNN swish: fused into convs, matmuls and binaries, alone as one eltwise") {
  // EfficientNet's blocks: conv -> SiLU, depthwise conv -> SiLU, then the squeeze-and-
  // excitation scaling: x * sigmoid(fc(pool(x))) broadcast per channel over x's own layout.
  auto block = [](int64_t n, int64_t c, bool swap_mul, bool silu_output) {
    Graph g;
    Builder b(g);
    Rng rng(21);
    auto w = [&](Shape s) { return b.constant(cat("w", g.num_tensors()), lab::random_weight(s, rng)); };
    auto silu = [&](TensorId t) {
      TensorId s = b.add(ops::Sigmoid{}, {t});
      return b.add(ops::Mul{}, swap_mul ? std::vector{s, t} : std::vector{t, s});
    };
    TensorId x = b.input("x", {n, c, 9, 8});
    TensorId y = silu(b.add(ops::Conv{}, {x, w({2 * c, c, 1, 1}), w({2 * c})}));
    TensorId d = b.add(ops::Conv{.pads = {1, 1, 1, 1}, .group = 2 * c}, {y, w({2 * c, 1, 3, 3})});
    if (silu_output) b.output(d);  // read by the graph too: not fused
    y = silu(d);
    TensorId se = b.add(ops::GlobalAveragePool{}, {y});
    se = silu(b.add(ops::Conv{}, {se, w({4, 2 * c, 1, 1}), w({4})}));
    se = b.add(ops::Sigmoid{}, {b.add(ops::Conv{}, {se, w({2 * c, 4, 1, 1}), w({2 * c})})});
    y = b.add(ops::Mul{}, swap_mul ? std::vector{se, y} : std::vector{y, se});
    y = b.add(ops::Conv{}, {y, w({c, 2 * c, 1, 1})});
    // alone (after an eltwise, which takes no post-ops), and after a matmul
    y = silu(b.add(ops::Abs{}, {b.add(ops::Add{}, {y, x})}));
    b.output(silu(b.add(ops::MatMul{}, {y, w({8, 5})})));
    return g;
  };
  for (bool swap_mul : {false, true})
    for (bool silu_output : {false, true}) {
      CAPTURE(swap_mul);
      CAPTURE(silu_output);
      on_every_path(block(1, 8, swap_mul, silu_output), 55, cat("SiLU block, swap ", swap_mul, ", output ", silu_output), "+ SiLU (Sigmoid, Mul)");
      same_as_reference(block(2, 3, swap_mul, silu_output), 56, "SiLU block, 2x3", {}, "as SiLU (with Mul");
    }
  // a per-channel scaling of a channels-last or blocked tensor, and of a plain one, computed alike
  for (const char* layout : {"auto", "blocked", "plain"}) {
    Graph g;
    Builder b(g);
    Rng rng(22);
    TensorId x = b.add(ops::Conv{.pads = {1, 1, 1, 1}, .group = 16}, {b.input("x", {2, 16, 7, 7}), b.constant("w", lab::random_weight({16, 1, 3, 3}, rng))});
    TensorId s = b.input("s", {1, 16, 1, 1});
    b.output(b.add(ops::Mul{}, {x, s}));
    b.output(b.add(ops::Add{}, {b.constant("k", lab::random_weight({16, 1, 1}, rng)), x}));
    backend::CompileOptions opt;
    opt.conv_layout = layout;
    same_as_reference(g, 57, cat("per-channel binary over a ", layout, " conv output"), opt);
    // in the conv's own layout: no reorder between the conv and the two binaries
    const std::string plan = backend::make_backend("cpu")->compile(g, opt)->describe();
    INFO(plan);
    const size_t conv = plan.find("Conv 'Conv'"), add = plan.find("Add 'Add'");
    REQUIRE(add != std::string::npos);
    CHECK(plan.substr(conv, add - conv).find("reorder") == std::string::npos);
  }
}

TEST_CASE("cpu concat: every input copied into its slice, the output in the layout of the most input bytes") {
  // DenseNet's pattern: a block's input and the growing list of conv outputs, joined again
  // for every layer, each join read by a batch norm and a 1x1 conv; the convs' outputs take
  // blocked layouts (8 or 16 channels a block) or channels-last, the joins mix them.
  auto dense_block = [](int64_t n, int64_t c0, int64_t growth, int layers, int64_t axis) {
    Graph g;
    Builder b(g);
    Rng rng(11);
    auto w = [&](Shape s) { return b.constant(cat("w", g.num_tensors()), lab::random_weight(s, rng)); };
    std::vector<TensorId> feats = {b.add(ops::MaxPool{{.kernel_shape = {3, 3}, .pads = {1, 1, 1, 1}}}, {b.input("x", {n, c0, 7, 6})})};
    int64_t c = c0;
    for (int l = 0; l < layers; ++l) {
      TensorId x = feats.size() == 1 ? feats[0] : b.add(ops::Concat{.axis = 1}, feats);
      x = b.add(ops::Relu{}, {b.add(ops::Mul{}, {x, b.constant(cat("s", l), Tensor<float>({}, 0.5f))})});
      x = b.add(ops::Relu{}, {b.add(ops::Conv{}, {x, w({16, c, 1, 1})})});
      feats.push_back(b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {x, w({growth, 16, 3, 3})}));
      c += growth;
    }
    // a last join along another axis (spatial, or the batch), then a graph output
    std::vector<TensorId> same;
    for (size_t i = 1; i < feats.size(); ++i) same.push_back(feats[i]);
    TensorId joined = b.add(ops::Concat{.axis = axis}, same);
    b.output(b.add(ops::Concat{.axis = 1}, feats));
    b.output(b.add(ops::Relu{}, {joined}));
    return g;
  };
  for (auto [n, c0, growth, axis] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{1, 16, 16, 2}, {2, 8, 8, 0}, {1, 5, 3, 3}, {3, 12, 20, 1}}) {
    CAPTURE(n);
    CAPTURE(axis);
    on_every_path(dense_block(n, c0, growth, 4, axis), 53, cat("dense block ", n, "x", c0, " +", growth, " axis ", axis), "into slices");
  }
  // a concat of blocked conv outputs keeps their layout when the slices fall on whole blocks
  Graph g;
  {
    Builder b(g);
    Rng rng(12);
    TensorId x = b.input("x", {1, 16, 8, 8});
    TensorId a = b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {x, b.constant("wa", lab::random_weight({32, 16, 3, 3}, rng))});
    TensorId c = b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {x, b.constant("wc", lab::random_weight({32, 16, 3, 3}, rng))});
    TensorId y = b.add(ops::Concat{.axis = 1}, {a, c});
    b.output(b.add(ops::Conv{}, {y, b.constant("wy", lab::random_weight({8, 64, 1, 1}, rng))}));
  }
  for (const char* layout : {"blocked", "plain"}) {
    backend::CompileOptions opt;
    opt.conv_algorithm = "direct";
    opt.conv_layout = layout;
    same_as_reference(g, 54, cat("concat of two conv outputs, ", layout), opt);
    // whichever layout this CPU's convs chose, the join is in it: no reorder changes it
    const std::string plan = backend::make_backend("cpu")->compile(g, opt)->describe();
    INFO(plan);
    // (oneDNN reorders, or pet's copies where every layout is plain)
    size_t at = plan.find("Concat 'Concat': 2 oneDNN reorders into slices (");
    if (at == std::string::npos) at = plan.find("Concat 'Concat': pet copies of 2 inputs into slices (");
    REQUIRE(at != std::string::npos);
    const std::string layouts = plan.substr(at, plan.find(')', at) - at);
    const size_t arrow = layouts.find(" -> ");
    REQUIRE(arrow != std::string::npos);
    CHECK(layouts.substr(layouts.find('(') + 1, arrow - layouts.find('(') - 1) == layouts.substr(arrow + 4));
  }
}

// Regressions of the defects the differential test found (tests/difftest): each program here
// gave wrong answers or crashed before the fix.
TEST_CASE("cpu constants: read in place from the graph, their reorders shared by the executables alive, the results alike") {
  Graph g;
  Builder b(g);
  TensorId x = b.input("x", {1, 32, 12, 12});
  Tensor<float> w({32, 32, 3, 3});
  for (int64_t i = 0; i < w.size(); ++i) w.data()[i] = float(i % 11) * 0.02f - 0.1f;
  b.output(b.add(ops::Relu{}, {b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {x, b.constant("w", w)})}));
  backend::CompileOptions opt;
  opt.conv_algorithm = "direct";
  opt.conv_layout = "blocked";  // oneDNN's blocked weights: a reorder of w (on every ISA)
  opt.threads = 1;
  const auto be = backend::make_backend("cpu");
  Rng rng(3);
  const std::vector<Value<float>> in = random_inputs({g.type(g.inputs()[0])}, rng, {});
  auto first = be->compile(g, opt);
  const std::string p1 = first->describe();
  CAPTURE(p1);
  CHECK(p1.find("constants reordered for kernels: 36 KiB, of them 0 KiB shared with another executable") != std::string::npos);
  {
    auto second = be->compile(g, opt);  // while the first is alive: its reorder is taken
    CHECK(second->describe().find("constants reordered for kernels: 36 KiB, of them 36 KiB shared with another executable") != std::string::npos);
    CHECK(compare(first->run(in)[0], second->run(in)[0], 0, 0).pass);
  }
  first.reset();
  // None alive: reordered again. A graph whose constant has other values at another address
  // never takes another's reorder.
  Graph h = g;
  auto third = be->compile(h, opt);
  CHECK(third->describe().find("of them 0 KiB shared") != std::string::npos);
  Graph other;
  Builder ob(other);
  TensorId y = ob.input("x", {1, 32, 12, 12});
  Tensor<float> w2 = w.clone();
  w2.data()[0] = 5.f;
  ob.output(ob.add(ops::Relu{}, {ob.add(ops::Conv{.pads = {1, 1, 1, 1}}, {y, ob.constant("w", w2)})}));
  auto fourth = be->compile(other, opt);
  CHECK(fourth->describe().find("of them 0 KiB shared") != std::string::npos);
  same_as_reference(other, 4, "the conv with its own weights", opt);
  // The graph's constants are what they were.
  CHECK(std::get<Tensor<float>>(*g.tensor(*g.find("w")).value).vec() == w.vec());
}

TEST_CASE("fusion defect A: two post-ops of one kind keep their own parameters") {
  Rng rng(2001);
  {  // Mul(a, b) * 0.5 * 0.689 on a binary primitive
    Graph g;
    Builder b(g);
    TensorId x = b.add(ops::Mul{}, {b.input("a", {2, 3, 5}), b.input("b", {2, 3, 5})});
    x = b.add(ops::Mul{}, {x, b.constant("h", Tensor<float>({}, 0.5f))});
    b.output(b.add(ops::Mul{}, {x, b.constant("k", Tensor<float>({}, 0.689f))}));
    on_every_path(g, 1, "binary * 0.5 * 0.689");
  }
  {  // conv + bias, then * 2 and * 3 (once 4x)
    Graph g;
    Builder b(g);
    TensorId x = b.add(ops::Conv{.pads = {1, 1, 1, 1}},
                       {b.input("x", {1, 16, 9, 9}), b.constant("w", lab::random_weight({16, 16, 3, 3}, rng)), b.constant("b", lab::random_weight({16}, rng))});
    x = b.add(ops::Mul{}, {x, b.constant("two", Tensor<float>({}, 2.f))});
    x = b.add(ops::Mul{}, {b.constant("three", Tensor<float>({1}, 3.f)), x});
    x = b.add(ops::Sub{}, {x, b.constant("one", Tensor<float>({}, 1.f))});
    b.output(x);
    on_every_path(g, 2, "conv * 2 * 3 - 1", "+ Mul by a constant + Mul by a constant + Sub by a constant");
  }
  {  // LeakyRelu(0.3) then Relu; Clip(Clip(x)) with other bounds; a linear, a relu, a linear
    Graph g;
    Builder b(g);
    TensorId x = b.add(ops::Conv{}, {b.input("x", {1, 8, 6, 6}), b.constant("w", lab::random_weight({16, 8, 1, 1}, rng))});
    x = b.add(ops::LeakyRelu{.alpha = 0.3f}, {x});
    x = b.add(ops::Relu{}, {x});
    TensorId y = b.add(ops::MatMul{}, {b.input("m", {4, 7}), b.constant("v", lab::random_weight({7, 9}, rng))});
    y = b.add(ops::Clip{.min = -0.5, .max = 0.5}, {y});
    y = b.add(ops::Clip{.min = -0.1, .max = 0.2}, {y});
    TensorId z = b.add(ops::Mul{}, {b.input("a", {3, 5}), b.input("c", {3, 5})});
    z = b.add(ops::Add{}, {z, b.constant("s", Tensor<float>({}, 0.25f))});
    z = b.add(ops::Relu{}, {z});
    z = b.add(ops::Mul{}, {z, b.constant("t", Tensor<float>({}, -3.f))});
    b.output(x);
    b.output(y);
    b.output(z);
    on_every_path(g, 3, "repeated activations", "not fused: oneDNN 2.6 keeps one set of parameters per post-op kind");
  }
}

TEST_CASE("fusion defect B: a conv whose output rows see only padding, with a residual add") {
  // input 2x3x1x1, weights 3x3x3x1 with bias, dilation [2,1], pads [1,0,3,0]: output row 0
  // reads rows -1, 1 and 3 of a 1-row input; then Clip, then Add of the conv's input.
  Rng rng(2002);
  Graph g;
  Builder b(g);
  TensorId x = b.input("x", {2, 3, 1, 1});
  TensorId y = b.add(ops::Conv{.pads = {1, 0, 3, 0}, .dilations = {2, 1}},
                     {x, b.constant("w", lab::random_weight({3, 3, 3, 1}, rng)), b.constant("b", lab::random_weight({3}, rng))});
  REQUIRE(g.type(y).shape == Shape{2, 3, 1, 1});
  y = b.add(ops::Clip{.min = -0.3, .max = 0.4}, {y});
  b.output(b.add(ops::Add{}, {y, x}));
  on_every_path(g, 4, "all-padding conv row + clip + residual");
  // a graph input seen through a view as the residual: its buffer is the caller's
  Graph h;
  Builder c(h);
  TensorId in = c.input("x", {1, 8, 5, 5});
  TensorId flat = c.input("r", {200});
  TensorId r = c.add(ops::Reshape{.shape = {1, 8, 5, 5}}, {flat});
  TensorId z = c.add(ops::Conv{.pads = {1, 1, 1, 1}}, {in, c.constant("w", lab::random_weight({8, 8, 3, 3}, rng))});
  c.output(c.add(ops::Add{}, {z, r}));
  on_every_path(h, 5, "residual that is a view of a graph input");
}

TEST_CASE("fusion defect C: binary ops on blocked layouts with a post-op") {
  Rng rng(2003);
  {  // grouped 1x1 conv (nChw4c) -> Mul(conv, conv input) -> Clip
    Graph g;
    Builder b(g);
    TensorId x = b.input("x", {1, 8, 11, 8});
    TensorId y = b.add(ops::Conv{.group = 2}, {x, b.constant("w", lab::random_weight({8, 4, 1, 1}, rng))});
    y = b.add(ops::Mul{}, {y, x});
    b.output(b.add(ops::Clip{.min = -0.2, .max = 0.3}, {y}));
    on_every_path(g, 6, "grouped conv * input, clip");
  }
  {  // pet's Winograd (nChw8c) -> Add(y, y) -> Sigmoid; -> Sub -> Relu
    Graph g;
    Builder b(g);
    TensorId x = b.input("x", {2, 8, 6, 9});
    TensorId y = b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {x, b.constant("w", lab::random_weight({8, 8, 3, 3}, rng))});
    b.output(b.add(ops::Sigmoid{}, {b.add(ops::Add{}, {y, y})}));
    b.output(b.add(ops::Relu{}, {b.add(ops::Sub{}, {y, x})}));
    on_every_path(g, 7, "winograd output + itself, sigmoid; - input, relu");
  }
}

TEST_CASE("defect D: a max-pool window of padding only gives the lowest float on every backend") {
  Graph g;
  Builder b(g);
  // kernel 2, dilation 2, pads 1: output 0 reads positions -1 and 1 of a 1-wide input
  TensorId y = b.add(ops::MaxPool{{.kernel_shape = {2, 2}, .pads = {1, 1, 1, 1}, .dilations = {2, 2}}}, {b.input("x", {1, 2, 1, 1})});
  b.output(y);
  Rng rng(2004);
  std::vector<Value<float>> in{backend::random_value(g.type(g.inputs()[0]), rng)};
  auto ref = backend::make_backend("reference")->compile(g)->run(in);
  const auto& t = std::get<Tensor<float>>(ref[0]);
  REQUIRE(t.size() > 0);
  for (int64_t i = 0; i < t.size(); ++i) CHECK(t[i] == std::numeric_limits<float>::lowest());
  on_every_path(g, 8, "max pool over padding");
}

TEST_CASE("cache keys: ops that differ in any attribute never share a profiler or algorithm-cache entry") {
  const Types one{f32({2, 8, 6, 6})};
  auto key = [&](Op op) { return backend::Profiler::key("cpu@v", op, one, {false}); };
  CHECK(key(ops::LeakyRelu{.alpha = 0.2f}) != key(ops::LeakyRelu{.alpha = 0.01f}));
  CHECK(key(ops::Pad{.pads = {0, 0, 1, 1, 0, 0, 1, 1}, .mode = ops::PadMode::Constant}) !=
        key(ops::Pad{.pads = {0, 0, 1, 1, 0, 0, 1, 1}, .mode = ops::PadMode::Reflect}));
  CHECK(key(ops::Clip{.min = 0, .max = 1}) != key(ops::Clip{.min = 0, .max = 6}));
  CHECK(key(ops::AveragePool{{.kernel_shape = {3, 3}, .ceil_mode = true}, false}) !=
        key(ops::AveragePool{{.kernel_shape = {3, 3}, .ceil_mode = false}, false}));
  CHECK(key(ops::BatchNormalization{.epsilon = 1e-5f}) != key(ops::BatchNormalization{.epsilon = 1e-3f}));
  CHECK(key(ops::LeakyRelu{.alpha = 0.2f}) == key(ops::LeakyRelu{.alpha = 0.2f}));
  // The algorithm cache: convs that differ only in an attribute get their own choice.
  const std::string file = (std::filesystem::temp_directory_path() / cat("pet_algos_attr_", ::getpid(), ".json")).string();
  std::filesystem::remove(file);
  backend::CompileOptions opt;
  opt.algorithm_cache = file;
  Rng rng(3);
  for (int64_t d : {1, 2}) {
    Graph g;
    Builder b(g);
    b.output(b.add(ops::Conv{.pads = {d, d, d, d}, .dilations = {d, d}}, {b.input("x", {1, 8, 12, 12}), b.constant("w", lab::random_weight({8, 8, 3, 3}, rng))}));
    backend::make_backend("cpu")->compile(g, opt);
  }
  // Choices timed on a busy machine are kept in memory only, so look at both.
  std::string keys;
  for (const auto& [k, v] : backend::AlgorithmCache::instance().entries(file)) keys += k + "\n";
  CHECK(keys.find("dilations=[1,1]") != std::string::npos);
  CHECK(keys.find("dilations=[2,2]") != std::string::npos);
  std::filesystem::remove(file);
}

namespace {
/// Runs f() with this thread and a spinning child process pinned to one CPU, so that the
/// scheduler must preempt f's thread (two runnable tasks, one CPU) within a time slice.
template <class F>
void sharing_one_cpu(F&& f) {
  cpu_set_t old_mask, one;
  REQUIRE(sched_getaffinity(0, sizeof old_mask, &old_mask) == 0);
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &old_mask)) ++cpu;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  const pid_t spinner = fork();
  if (spinner == 0) {
    volatile unsigned long x = 0;
    for (;;) x = x + 1;
  }
  f();
  kill(spinner, SIGKILL);
  waitpid(spinner, nullptr, 0);
  sched_setaffinity(0, sizeof old_mask, &old_mask);
}
}  // namespace

TEST_CASE("profiler on a busy machine: preempted runs are detected and dropped, doubtful timings never cached") {
  // Whether a run was disturbed is read from its threads' run-queue delay (schedstat);
  // with a busy process on the same CPU, a stretch longer than the scheduler's slice is.
  sharing_one_cpu([] {
    backend::DisturbanceProbe probe;
    const auto t0 = std::chrono::steady_clock::now();
    volatile double x = 0;
    while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(200)) x = x + 1;
    CHECK(probe.disturbed());
  });
  // A conv whose runs (tens of ms on one thread) each span a slice: every run is disturbed, so
  // the profiler retries, then uses the timing for this process only and never saves it.
  Rng rng(3001);
  Graph g;
  {
    Builder b(g);
    b.output(b.add(ops::Conv{.pads = {1, 1, 1, 1}}, {b.input("x", {1, 256, 56, 56}), b.constant("w", lab::random_weight({256, 256, 3, 3}, rng))}));
  }
  auto cpu = backend::make_backend("cpu");
  const std::string file = (std::filesystem::temp_directory_path() / cat("pet_busy_", ::getpid(), ".json")).string();
  std::filesystem::remove(file);
  const int threads = num_threads();
  set_num_threads(1);
  sharing_one_cpu([&] {
    backend::Profiler p(*cpu, file, 2, 0.0, 1.0);
    backend::OpTiming t = p.time_node(g, g.topo_order()[0], {false, true});
    INFO("runs ", t.runs, ", dropped ", t.dropped, ", trusted ", t.trusted, ", min ", t.min_ms, " ms");
    CHECK(t.dropped > 0);
    CHECK(t.min_ms > 0);
    if (!t.trusted) CHECK(p.untrusted() == 1);
    p.save();
    if (!t.trusted) {
      std::ifstream f(file);
      const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      CHECK(text.find("Conv") == std::string::npos);
    }
    // Within the process, the same node is not measured again.
    const int64_t measured = p.measured();
    p.time_node(g, g.topo_order()[0], {false, true});
    CHECK(p.measured() == measured);
  });
  set_num_threads(threads);
  std::filesystem::remove(file);
}

TEST_CASE("cache store: processes sharing a cache lose no entries, foreign files are never overwritten, damage is set aside") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / cat("pet_store_", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string file = (dir / "shared.db").string();
  backend::CacheStore(file, "algorithms");  // created by the parent, as a first pet run would
  // Two processes write 300 entries each, one transaction per entry, at the same time (what
  // two pet searches sharing ~/.cache/pet do); every entry must be there afterwards.
  std::vector<pid_t> kids;
  for (int p = 0; p < 2; ++p) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int rc = 0;
      try {
        backend::CacheStore s(file, "algorithms");
        for (int i = 0; i < 300; ++i) s.put(cat("p", p, "-k", i), cat("v", i));
      } catch (...) {
        rc = 1;
      }
      ::_exit(rc);
    }
    kids.push_back(pid);
  }
  for (pid_t k : kids) {
    int status = 0;
    ::waitpid(k, &status, 0);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  backend::CacheStore s(file, "algorithms");
  CHECK(s.size() == 600);
  CHECK(s.get("p1-k299") == std::optional<std::string>("v299"));
  CHECK(backend::CacheStore::kind_of(file) == "algorithms");
  CHECK_THROWS_WITH_AS(backend::CacheStore(file, "opcache"), doctest::Contains("is a pet algorithms cache, not a pet opcache cache"), InvalidInput);

  // A file pet did not write is refused and left as it was.
  const std::string foreign = (dir / "README.md").string();
  std::ofstream(foreign) << "# a user's notes\n";
  CHECK_THROWS_WITH_AS(backend::CacheStore(foreign, "opcache"), doctest::Contains("not an SQLite database); pet does not overwrite files"), InvalidInput);
  std::ifstream f(foreign);
  CHECK(std::string(std::istreambuf_iterator<char>(f), {}) == "# a user's notes\n");
  CHECK(backend::CacheStore::kind_of(foreign).empty());

  // A damaged pet cache (truncated) is moved aside with a warning, and a new one works.
  const std::string damaged = (dir / "damaged.db").string();
  {
    std::ifstream in(file, std::ios::binary);
    std::string bytes(std::istreambuf_iterator<char>(in), {});
    std::ofstream(damaged, std::ios::binary) << bytes.substr(0, 3000);
  }
  backend::CacheStore fresh(damaged, "algorithms");
  CHECK(fresh.size() == 0);
  fresh.put("k", "v");
  CHECK(fresh.get("k") == std::optional<std::string>("v"));
  int aside = 0;
  for (const auto& e : fs::directory_iterator(dir)) aside += e.path().filename().string().rfind("damaged.db.damaged-", 0) == 0;
  CHECK(aside == 1);
  fs::remove_all(dir);
}

TEST_CASE("cpu QDQ pairs: one quantize-and-dequantize step per DequantizeLinear (per tensor, per axis), the int8 tensor written where it is read") {
  using VI = std::vector<int64_t>;
  auto model = [](bool q_is_output, bool per_axis, bool second_reader) {
    Graph g;
    const TensorId x = g.add_input("x", f32({2, 3, 5, 7}));
    const TensorId s = per_axis ? g.add_constant("s", Tensor<float>({3}, std::vector<float>{0.02f, 0.05f, 0.1f}))
                                : g.add_constant("s", Tensor<float>(Shape{}, 0.03f));
    const TensorId z = g.add_constant("z", DType::Int8, per_axis ? Tensor<int64_t>({3}, VI{0, -5, 7}) : Tensor<int64_t>(Shape{}, int64_t(-3)));
    const TensorId q = g.add_node("q", ops::QuantizeLinear{.axis = 1, .to = DType::Int8}, {x, s, z})[0];
    const TensorId y = g.add_node("dq", ops::DequantizeLinear{.axis = 1}, {q, s, z})[0];
    g.add_output(g.add_node("relu", ops::Relu{}, {y})[0]);
    if (q_is_output) g.add_output(q);
    if (second_reader) g.add_output(g.add_node("cast", ops::Cast{.to = DType::Float32}, {q})[0]);
    return g;
  };
  same_as_reference(model(false, false, false), 1, "QDQ per tensor", {}, "quantize and dequantize in one step");
  same_as_reference(model(false, true, false), 2, "QDQ per axis", {}, "quantize and dequantize in one step");
  // The int8 tensor is a graph output, or read by another op: QuantizeLinear runs as a step.
  for (auto [out, other] : {std::pair{true, false}, std::pair{false, true}}) {
    CHECK(plan_of(model(out, false, other)).find("quantize and dequantize in one step") == std::string::npos);
    same_as_reference(model(out, false, other), 3, "QDQ with the int8 tensor read elsewhere");
  }
  // After a conv (blocked layouts): integer inputs and weights and a power-of-two scale keep
  // every value exact in any summation order, so cpu and reference agree exactly.
  {
    Graph g;
    const TensorId x = g.add_input("x", f32({1, 16, 6, 6}));
    Rng rng(7);
    Tensor<float> w({16, 16, 3, 3});
    for (int64_t i = 0; i < w.size(); ++i) w[i] = float(rng.range(-2, 2));
    const TensorId c = g.add_node("conv", ops::Conv{.pads = {1, 1, 1, 1}}, {x, g.add_constant("w", w)})[0];
    const TensorId s = g.add_constant("s", Tensor<float>(Shape{}, 0.5f));
    const TensorId z = g.add_constant("z", DType::UInt8, Tensor<int64_t>(Shape{}, int64_t(0)));
    const TensorId q = g.add_node("q", ops::QuantizeLinear{}, {c, s, z})[0];
    const TensorId y = g.add_node("dq", ops::DequantizeLinear{}, {q, s, z})[0];
    g.add_output(g.add_node("conv2", ops::Conv{.pads = {1, 1, 1, 1}}, {y, g.add_constant("w2", w)})[0]);
    Tensor<float> in({1, 16, 6, 6});
    for (int64_t i = 0; i < in.size(); ++i) in[i] = float(rng.range(-3, 3));
    const std::vector<Value<float>> inputs{in};
    auto exe = backend::make_backend("cpu")->compile(g, direct_convs());
    INFO(exe->describe());
    CHECK(exe->describe().find("quantize and dequantize in one step") != std::string::npos);
    const auto got = std::get<Tensor<float>>(exe->run(inputs)[0]).vec();
    const auto want = std::get<Tensor<float>>(backend::make_backend("reference")->compile(g)->run(inputs)[0]).vec();
    CHECK(got == want);
  }
  // --check's rule for quantized outputs: one step within the tolerance passes, other integers must match.
  {
    const Value<float> a = Tensor<int64_t>({3}, VI{0, 128, 255}), b = Tensor<int64_t>({3}, VI{0, 129, 255});
    CHECK_FALSE(compare(a, b, 1e-4, 1e-3).pass);
    CHECK_FALSE(compare(a, b, 1e-4, 1e-3, Tolerance::WholeTensor, true).pass);  // 1 > 0.255
    CHECK(compare(a, b, 1e-4, 0.005, Tolerance::WholeTensor, true).pass);        // 1 <= 1.275
    CHECK_FALSE(compare(a, b, 1e-4, 0.005).pass);
  }
  // Scatter ops of float data on pet's kernel (more in their own test case).
  same_as_reference(one_op(ops::ScatterElements{.axis = 1, .reduction = ops::ScatterReduction::Add}, {f32({2, 6}), i64({2, 4}), f32({2, 4})}), 4,
                    "ScatterElements");
  same_as_reference(one_op(ops::ScatterND{}, {f32({4, 3}), i64({1, 1}), f32({1, 3})}), 5, "ScatterND");
}

TEST_CASE("cpu int8 convs on every conv shape: 1-D, 2-D, 3-D, strides, dilations, groups, asymmetric pads, zero points") {
  using ops::Conv;
  struct C {
    Conv op;
    Shape x, w;
  };
  const std::vector<C> cases = {
      {Conv{.pads = {1, 1, 1, 1}}, {1, 3, 7, 9}, {8, 3, 3, 3}},
      {Conv{.strides = {2, 2}, .pads = {0, 1, 2, 0}}, {2, 5, 11, 10}, {7, 5, 3, 2}},
      {Conv{.pads = {2, 2, 2, 2}, .dilations = {2, 2}}, {1, 16, 14, 14}, {16, 16, 3, 3}},
      {Conv{.pads = {1, 1, 1, 1}, .group = 4}, {1, 8, 9, 9}, {12, 2, 3, 3}},
      {Conv{.pads = {1, 1, 1, 1}, .group = 16}, {1, 16, 8, 8}, {16, 1, 3, 3}},  // depthwise
      {Conv{.strides = {2, 2}, .pads = {1, 1, 1, 1}, .group = 24}, {1, 24, 9, 9}, {24, 1, 3, 3}},
      {Conv{}, {1, 32, 7, 7}, {24, 32, 1, 1}},
      {Conv{.strides = {2}, .pads = {3, 0}}, {2, 4, 31}, {6, 4, 5}},            // 1-D
      {Conv{.pads = {1, 1, 1, 1, 1, 1}}, {1, 3, 4, 6, 5}, {5, 3, 3, 3, 3}},     // 3-D
      {Conv{.strides = {1, 2, 2}, .pads = {1, 3, 3, 1, 3, 3}}, {1, 3, 4, 14, 14}, {8, 3, 3, 7, 7}},
  };
  // x -> Q (zero point zx) -> DQ -> conv (int8 weights per channel, int32 bias) -> [Q (odd
  // zero point) -> DQ] -> output. Powers of two as scales and small integers: exact in float,
  // so the int8 kernel must give exactly the reference's result.
  uint64_t seed = 1;
  size_t int8_convs = 0;
  for (const auto& c : cases)
    for (const bool signed_x : {false, true})
      for (const bool requantize : {false, true}) {
        Graph g;
        Rng rng(seed++);
        const TensorId x = g.add_input("x", f32(c.x));
        const DType act = signed_x ? DType::Int8 : DType::UInt8;
        const TensorId sx = g.add_constant("sx", Tensor<float>(Shape{}, 0.5f));
        const TensorId zx = g.add_constant("zx", act, Tensor<int64_t>(Shape{}, int64_t(signed_x ? -5 : 131)));
        const TensorId dx = g.add_node("dqx", ops::DequantizeLinear{}, {g.add_node("qx", ops::QuantizeLinear{.to = act}, {x, sx, zx})[0], sx, zx})[0];
        const int64_t O = c.w[0];
        Tensor<int64_t> w(c.w), b({O});
        for (int64_t i = 0; i < w.size(); ++i) w[i] = rng.range(-3, 3);
        for (int64_t i = 0; i < O; ++i) b[i] = rng.range(-50, 50);
        std::vector<float> sw(static_cast<size_t>(O)), sb(static_cast<size_t>(O));
        for (size_t i = 0; i < sw.size(); ++i) sw[i] = std::ldexp(1.f, int(i % 3) - 1), sb[i] = 0.5f * sw[i];
        const TensorId dw = g.add_node("dqw", ops::DequantizeLinear{.axis = 0}, {g.add_constant("w", DType::Int8, w), g.add_constant("sw", Tensor<float>({O}, sw))})[0];
        const TensorId db = g.add_node("dqb", ops::DequantizeLinear{.axis = 0}, {g.add_constant("b", DType::Int32, b), g.add_constant("sb", Tensor<float>({O}, sb))})[0];
        TensorId y = g.add_node("conv", c.op, {dx, dw, db})[0];
        if (requantize) {
          const TensorId sy = g.add_constant("sy", Tensor<float>(Shape{}, 4.f));
          const TensorId zy = g.add_constant("zy", DType::Int8, Tensor<int64_t>(Shape{}, int64_t(-9)));
          y = g.add_node("dqy", ops::DequantizeLinear{}, {g.add_node("qy", ops::QuantizeLinear{.to = DType::Int8}, {y, sy, zy})[0], sy, zy})[0];
        }
        g.add_output(y);
        Tensor<float> in(c.x);
        for (int64_t i = 0; i < in.size(); ++i) in[i] = 0.5f * float(rng.range(-6, 6));
        const std::vector<Value<float>> inputs{in};
        auto exe = backend::make_backend("cpu")->compile(g, direct_convs());
        const std::string plan = exe->describe();
        INFO("conv x", c.x, " w", c.w, " ", op_signature(c.op), ", ", dtype_name(act), " source", requantize ? ", requantized" : "", "\nplan:\n", plan);
        const bool int8 = plan.find("oneDNN int8 conv") != std::string::npos;
        int8_convs += int8;
        if (int8 && requantize) CHECK(plan.find("+ QuantizeLinear 'qy' (writes int8)") != std::string::npos);
        const auto want = std::get<Tensor<float>>(backend::make_backend("reference")->compile(g)->run(inputs)[0]).vec();
        CHECK(std::get<Tensor<float>>(exe->run(inputs)[0]).vec() == want);
      }
  // where the CPU has VNNI, oneDNN has int8 kernels for these shapes
  MESSAGE(int8_convs, " of ", 4 * cases.size(), " convs ran int8");
  if (backend::cpu_int8_available()) CHECK(int8_convs == 4 * cases.size());
  else CHECK(int8_convs == 0);
}

TEST_CASE("cpu int8 element-wise steps: Add, Sub and Mul of dequantized int8 tensors, unary ops by table, MaxPool, Concat, views and Transpose, requantized, from int8 to int8") {
  // x -> Q (uint8, zero point 3) -> DQ -> conv (int8) -> Q (uint8) -> DQ = c; then
  // Q(c + x) (int8, zero point -1), Q(c - x) (uint8, 5), Q(c * x) (int8, -4), each dequantized to
  // an output. No float tensor between the int8 ones, where the CPU has VNNI.
  Graph g;
  Rng rng(21);
  const TensorId x = g.add_input("x", f32({1, 8, 5, 5}));
  auto scalar = [&](const std::string& n, float v) { return g.add_constant(n, Tensor<float>(Shape{}, v)); };
  auto zero = [&](const std::string& n, DType t, int64_t v) { return g.add_constant(n, t, Tensor<int64_t>(Shape{}, v)); };
  auto qdq = [&](const std::string& n, TensorId t, DType type, float scale, int64_t z) {
    const TensorId s = scalar("s_" + n, scale), zp = zero("z_" + n, type, z);
    return g.add_node("dq_" + n, ops::DequantizeLinear{}, {g.add_node("q_" + n, ops::QuantizeLinear{.to = type}, {t, s, zp})[0], s, zp})[0];
  };
  const TensorId dx = qdq("x", x, DType::UInt8, 0.5f, 3);
  Tensor<int64_t> w({8, 8, 1, 1});
  for (int64_t i = 0; i < w.size(); ++i) w[i] = rng.range(-2, 2);
  const TensorId dw = g.add_node("dqw", ops::DequantizeLinear{}, {g.add_constant("w", DType::Int8, w), scalar("sw", 0.5f)})[0];
  const TensorId c = qdq("c", g.add_node("conv", ops::Conv{}, {dx, dw})[0], DType::UInt8, 0.25f, 0);
  g.add_output(qdq("add", g.add_node("add", ops::Add{}, {c, dx})[0], DType::Int8, 0.5f, -1));
  g.add_output(qdq("sub", g.add_node("sub", ops::Sub{}, {c, dx})[0], DType::UInt8, 0.25f, 5));
  g.add_output(qdq("mul", g.add_node("mul", ops::Mul{}, {c, dx})[0], DType::Int8, 2.f, -4));
  // unary ops: one table of the 256 int8 values (a uint8 source, and an int8 one)
  g.add_output(qdq("sigmoid", g.add_node("sigmoid", ops::Sigmoid{}, {c})[0], DType::UInt8, 1.f / 256, 0));
  const TensorId s8 = qdq("s8", x, DType::Int8, 0.25f, 7);
  g.add_output(qdq("tanh", g.add_node("tanh", ops::Tanh{}, {s8})[0], DType::Int8, 1.f / 128, -2));
  // MaxPool with c's own scale and zero point: on the int8 tensor; Concat of c and x into c's
  // scale: x requantized by a table, c copied as it is
  g.add_output(qdq("pool", g.add_node("pool", ops::MaxPool{{.kernel_shape = {3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}}}, {c})[0], DType::UInt8, 0.25f, 0));
  g.add_output(qdq("concat", g.add_node("concat", ops::Concat{.axis = 1}, {c, dx, s8})[0], DType::UInt8, 0.25f, 0));
  // a channel shuffle (Reshape, Transpose, Reshape, each quantized with c's scale): on int8
  const TensorId r1 = qdq("r1", g.add_node("r1", ops::Reshape{.shape = {1, 2, 4, 5, 5}}, {c})[0], DType::UInt8, 0.25f, 0);
  const TensorId tr = qdq("tr", g.add_node("tr", ops::Transpose{.perm = {0, 2, 1, 3, 4}}, {r1})[0], DType::UInt8, 0.25f, 0);
  g.add_output(qdq("r2", g.add_node("r2", ops::Reshape{.shape = {1, 8, 5, 5}}, {tr})[0], DType::UInt8, 0.25f, 0));
  Tensor<float> in({1, 8, 5, 5});
  for (int64_t i = 0; i < in.size(); ++i) in[i] = 0.5f * float(rng.range(-6, 6));
  const std::vector<Value<float>> inputs{in};
  const auto ref = backend::make_backend("reference")->compile(g)->run(inputs);
  for (bool int8 : {true, false}) {
    const auto [exe, plan, want] = compile_int8(g, int8);
    INFO("int8 allowed ", int8, "\nplan:\n", plan);
    for (const char* op : {"Add 'add'", "Sub 'sub'", "Mul 'mul'"})
      CHECK((plan.find(cat(op, ": int8 element-wise step")) != std::string::npos) == want);
    for (const char* op : {"Sigmoid 'sigmoid'", "Tanh 'tanh'"}) CHECK((plan.find(cat(op, ": int8 table lookup")) != std::string::npos) == want);
    CHECK((plan.find("MaxPool 'pool' (with QuantizeLinear 'q_pool'): oneDNN int8 pooling") != std::string::npos) == want);
    CHECK((plan.find("(2 of 3 inputs requantized; QuantizeLinear 'q_concat' absorbed)") != std::string::npos) == want);
    CHECK((plan.find("Reshape 'r1' (with QuantizeLinear 'q_r1'): int8 view") != std::string::npos) == want);
    CHECK((plan.find("Transpose 'tr' (with QuantizeLinear 'q_tr'): int8 transpose") != std::string::npos) == want);
    if (want) {  // x and c are never dequantized: only int8 kernels read them
      CHECK(plan.find("DequantizeLinear 'dq_x'") == std::string::npos);
      CHECK(plan.find("DequantizeLinear 'dq_c'") == std::string::npos);
    }
    const auto got = exe->run(inputs);
    REQUIRE(got.size() == 8);
    for (size_t k = 0; k < 8; ++k) CHECK(std::get<Tensor<float>>(got[k]).vec() == std::get<Tensor<float>>(ref[k]).vec());
  }
}

TEST_CASE("cpu int8: a weight scale of 0 or an output scale of 1e-45 keeps the op in float (the int8 kernel would divide by them)") {
  for (int which : {0, 1}) {
    Graph g;
    const TensorId x = g.add_input("x", f32({1, 4, 5, 5}));
    const TensorId sx = g.add_constant("sx", Tensor<float>(Shape{}, 0.5f)), zx = g.add_constant("zx", DType::UInt8, Tensor<int64_t>(Shape{}, int64_t(10)));
    const TensorId dx = g.add_node("dqx", ops::DequantizeLinear{}, {g.add_node("qx", ops::QuantizeLinear{}, {x, sx, zx})[0], sx, zx})[0];
    Tensor<int64_t> w({4, 4, 3, 3});
    for (int64_t i = 0; i < w.size(); ++i) w[i] = i % 5 - 2;
    const std::vector<float> sw = which == 0 ? std::vector<float>{0.5f, 0.f, 1.f, 0.25f} : std::vector<float>{0.5f, 0.5f, 1.f, 0.25f};
    const TensorId dw = g.add_node("dqw", ops::DequantizeLinear{.axis = 0}, {g.add_constant("w", DType::Int8, w), g.add_constant("sw", Tensor<float>({4}, sw))})[0];
    const TensorId b = g.add_constant("b", Tensor<float>({4}, std::vector<float>{1, 2, 3, 4}));
    TensorId y = g.add_node("conv", ops::Conv{.pads = {1, 1, 1, 1}}, {dx, dw, b})[0];
    if (which == 1) {
      const TensorId sy = g.add_constant("sy", Tensor<float>(Shape{}, 1e-45f)), zy = g.add_constant("zy", DType::UInt8, Tensor<int64_t>(Shape{}, int64_t(0)));
      y = g.add_node("dqy", ops::DequantizeLinear{}, {g.add_node("qy", ops::QuantizeLinear{}, {y, sy, zy})[0], sy, zy})[0];
    }
    g.add_output(y);
    Tensor<float> in({1, 4, 5, 5});
    for (int64_t i = 0; i < in.size(); ++i) in[i] = 0.5f * float(i % 9 - 4);
    const std::vector<Value<float>> inputs{in};
    auto exe = backend::make_backend("cpu")->compile(g, direct_convs());
    const std::string plan = exe->describe();
    INFO(plan);
    if (which == 0) CHECK(plan.find("oneDNN int8 conv") == std::string::npos);
    else CHECK(plan.find("QuantizeLinear 'qy' (writes") == std::string::npos);
    CHECK(std::get<Tensor<float>>(exe->run(inputs)[0]).vec() == std::get<Tensor<float>>(backend::make_backend("reference")->compile(g)->run(inputs)[0]).vec());
  }
}

TEST_CASE("cpu int8 matrix products: QDQ Gemm and MatMul on oneDNN's int8 matmul where the CPU has VNNI, exactly the reference's result") {
  // x [10, 16] -> Q -> DQ -> Gemm (trans_b, int8 weight [8, 16] per channel, int32 bias) -> Q
  // (uint8, odd zero point 7) -> DQ -> MatMul (int8 weight [8, 4] per tensor) + Add [4] ->
  // Relu -> output; powers of two and small integers keep every value exact.
  auto model = [] {
    Graph g;
    Rng rng(5);
    const TensorId x = g.add_input("x", f32({10, 16}));
    auto scalar = [&](const char* n, float v) { return g.add_constant(n, Tensor<float>(Shape{}, v)); };
    auto zero = [&](const char* n, DType t, int64_t v) { return g.add_constant(n, t, Tensor<int64_t>(Shape{}, v)); };
    const TensorId sx = scalar("sx", 0.25f), zx = zero("zx", DType::UInt8, 100);
    const TensorId qx = g.add_node("qx", ops::QuantizeLinear{}, {x, sx, zx})[0];
    const TensorId dx = g.add_node("dqx", ops::DequantizeLinear{}, {qx, sx, zx})[0];
    Tensor<int64_t> w1({8, 16}), b1({8}), w2({8, 4});
    for (int64_t i = 0; i < w1.size(); ++i) w1[i] = rng.range(-4, 4);
    for (int64_t i = 0; i < b1.size(); ++i) b1[i] = rng.range(-30, 30);
    for (int64_t i = 0; i < w2.size(); ++i) w2[i] = rng.range(-3, 3);
    std::vector<float> sw(8), sb(8);
    for (size_t c = 0; c < 8; ++c) sw[c] = std::ldexp(1.f, int(c % 3) - 1), sb[c] = 0.25f * sw[c];
    const TensorId dw1 = g.add_node("dqw1", ops::DequantizeLinear{.axis = 0},
                                    {g.add_constant("w1", DType::Int8, w1), g.add_constant("sw1", Tensor<float>({8}, sw))})[0];
    const TensorId db1 = g.add_node("dqb1", ops::DequantizeLinear{.axis = 0},
                                    {g.add_constant("b1", DType::Int32, b1), g.add_constant("sb1", Tensor<float>({8}, sb))})[0];
    const TensorId y1 = g.add_node("gemm", ops::Gemm{.trans_b = true}, {dx, dw1, db1})[0];
    const TensorId sy = scalar("sy", 2.f), zy = zero("zy", DType::UInt8, 7);
    const TensorId qy = g.add_node("qy", ops::QuantizeLinear{}, {y1, sy, zy})[0];
    const TensorId dy = g.add_node("dqy", ops::DequantizeLinear{}, {qy, sy, zy})[0];
    const TensorId dw2 = g.add_node("dqw2", ops::DequantizeLinear{}, {g.add_constant("w2", DType::Int8, w2), scalar("sw2", 0.5f)})[0];
    const TensorId m = g.add_node("matmul", ops::MatMul{}, {dy, dw2})[0];
    const TensorId a = g.add_node("bias", ops::Add{}, {m, g.add_constant("b2", Tensor<float>({4}, std::vector<float>{1, -2, 0.5f, 3}))})[0];
    g.add_output(g.add_node("relu", ops::Relu{}, {a})[0]);
    return g;
  };
  Tensor<float> in({10, 16});
  Rng rng(9);
  for (int64_t i = 0; i < in.size(); ++i) in[i] = 0.25f * float(rng.range(-60, 60));
  const std::vector<Value<float>> inputs{in};
  const Graph g = model();
  const auto ref = std::get<Tensor<float>>(backend::make_backend("reference")->compile(g)->run(inputs)[0]).vec();
  for (bool int8 : {true, false}) {
    const auto [exe, plan, want] = compile_int8(g, int8);
    INFO("int8 allowed ", int8, "\nplan:\n", plan);
    CHECK((plan.find("Gemm 'gemm': oneDNN int8 matmul") != std::string::npos) == want);
    CHECK((plan.find("MatMul 'matmul': oneDNN int8 matmul") != std::string::npos) == want);
    if (want) {
      CHECK(plan.find("+ QuantizeLinear 'qy' (writes uint8)") != std::string::npos);
      CHECK(plan.find("+ bias + Relu") != std::string::npos);
    }
    for (int round = 0; round < 2; ++round) CHECK(std::get<Tensor<float>>(exe->run(inputs)[0]).vec() == ref);
  }
}

TEST_CASE("cpu int8 convs: QDQ convs on oneDNN's int8 kernels where the CPU has VNNI, exactly the reference's result") {
  using VI = std::vector<int64_t>;
  // x -> Q -> DQ -> conv1 (int8 weights per channel, int32 bias) -> Relu -> Q -> DQ -> conv2
  // (depthwise, weights per tensor) -> Q (int8, zero point -3) -> DQ -> output, and DQ's result
  // also read by an Add (so dequantized from the int8 tensor conv1 wrote). Powers of two as
  // scales and small integers keep every value exact in float, in any summation order, so
  // the int8 kernels and the reference agree exactly (ties round to even in both).
  auto model = [](bool signed_input, bool bn_after_conv1) {
    Graph g;
    Rng rng(11);
    const TensorId x = g.add_input("x", f32({1, 16, 7, 7}));
    auto scalar = [&](const char* n, float v) { return g.add_constant(n, Tensor<float>(Shape{}, v)); };
    auto zero = [&](const char* n, DType t, int64_t v) { return g.add_constant(n, t, Tensor<int64_t>(Shape{}, v)); };
    const DType act = signed_input ? DType::Int8 : DType::UInt8;
    const TensorId sx = scalar("sx", 0.5f), zx = zero("zx", act, signed_input ? 5 : 128);
    const TensorId qx = g.add_node("qx", ops::QuantizeLinear{.to = act}, {x, sx, zx})[0];
    const TensorId dx = g.add_node("dqx", ops::DequantizeLinear{}, {qx, sx, zx})[0];
    Tensor<int64_t> w1({16, 16, 3, 3}), b1({16}), w2({16, 1, 3, 3});
    for (int64_t i = 0; i < w1.size(); ++i) w1[i] = rng.range(-3, 3);
    for (int64_t i = 0; i < b1.size(); ++i) b1[i] = rng.range(-40, 40);
    for (int64_t i = 0; i < w2.size(); ++i) w2[i] = rng.range(-2, 2);
    std::vector<float> sw(16), sb(16);
    for (size_t c = 0; c < 16; ++c) sw[c] = std::ldexp(1.f, int(c % 3) - 2), sb[c] = 0.5f * sw[c];
    const TensorId dw1 = g.add_node("dqw1", ops::DequantizeLinear{.axis = 0},
                                    {g.add_constant("w1", DType::Int8, w1), g.add_constant("sw1", Tensor<float>({16}, sw)),
                                     g.add_constant("zw1", DType::Int8, Tensor<int64_t>({16}, VI(16, 0)))})[0];
    const TensorId db1 = g.add_node("dqb1", ops::DequantizeLinear{.axis = 0},
                                    {g.add_constant("b1", DType::Int32, b1), g.add_constant("sb1", Tensor<float>({16}, sb))})[0];
    TensorId c1 = g.add_node("conv1", ops::Conv{.pads = {1, 1, 1, 1}}, {dx, dw1, db1})[0];
    if (bn_after_conv1) {  // folded into conv1's weight: no longer its int8 weight
      auto v = [&](const char* n, float a) { return g.add_constant(n, Tensor<float>({16}, std::vector<float>(16, a))); };
      c1 = g.add_node("bn", ops::BatchNormalization{.epsilon = 0}, {c1, v("g", 2), v("be", 0), v("m", 0), v("var", 1)})[0];
    }
    const TensorId r1 = g.add_node("relu1", ops::Relu{}, {c1})[0];
    const TensorId sy = scalar("sy", 4.f), zy = zero("zy", DType::UInt8, 0);
    const TensorId q1 = g.add_node("q1", ops::QuantizeLinear{}, {r1, sy, zy})[0];
    const TensorId d1 = g.add_node("dq1", ops::DequantizeLinear{}, {q1, sy, zy})[0];
    const TensorId dw2 = g.add_node("dqw2", ops::DequantizeLinear{},
                                    {g.add_constant("w2", DType::Int8, w2), scalar("sw2", 0.25f)})[0];
    const TensorId c2 = g.add_node("conv2", ops::Conv{.pads = {1, 1, 1, 1}, .group = 16}, {d1, dw2})[0];
    const TensorId sz = scalar("sz", 2.f), zz = zero("zz", DType::Int8, -3);
    const TensorId q2 = g.add_node("q2", ops::QuantizeLinear{.to = DType::Int8}, {c2, sz, zz})[0];
    g.add_output(g.add_node("dq2", ops::DequantizeLinear{}, {q2, sz, zz})[0]);
    g.add_output(g.add_node("add", ops::Add{}, {d1, dx})[0]);
    return g;
  };
  Tensor<float> in({1, 16, 7, 7});
  Rng rng(3);
  for (int64_t i = 0; i < in.size(); ++i) in[i] = 0.5f * float(rng.range(-12, 12));
  const std::vector<Value<float>> inputs{in};
  for (bool signed_input : {false, true})
    for (bool bn : {false, true})
      for (bool int8 : {true, false}) {
        const Graph g = model(signed_input, bn);
        const auto [exe, plan, allowed] = compile_int8(g, int8);
        INFO("signed input ", signed_input, ", batch norm after conv1 ", bn, ", int8 allowed ", int8, "\nplan:\n", plan);
        auto count = [&](const std::string& what) {
          size_t n = 0;
          for (size_t p = plan.find(what); p != std::string::npos; p = plan.find(what, p + 1)) ++n;
          return n;
        };
        // Where the CPU has VNNI (not under ONEDNN_MAX_CPU_ISA=AVX2, say), both convs run
        // int8, conv1 writing the uint8 tensor and conv2 the int8 one; a conv whose weight a
        // pass changed (the batch norm folded into conv1) runs in float.
        const size_t want = !allowed ? 0 : bn ? 1 : 2;
        CHECK(count("oneDNN int8 conv") == want);
        if (want == 2) {
          CHECK(count("+ Relu + QuantizeLinear 'q1' (writes uint8)") == 1);
          CHECK(count("+ QuantizeLinear 'q2' (writes int8)") == 1);
          CHECK(count("dequantize (") >= 2);  // dq1 for the Add, dq2 for the output
        }
        const auto ref = backend::make_backend("reference")->compile(g)->run(inputs);
        for (int round = 0; round < 2; ++round) {
          const auto got = exe->run(inputs);
          for (size_t k = 0; k < 2; ++k) {
            const auto a = std::get<Tensor<float>>(got[k]).vec(), b = std::get<Tensor<float>>(ref[k]).vec();
            size_t bad = 0, first = a.size();
            for (size_t i = 0; i < a.size(); ++i)
              if (a[i] != b[i]) bad += 1, first = std::min(first, i);
            INFO("output ", k, ": ", bad, " of ", a.size(), " differ", bad ? cat(", first at ", first, ": ", a[first], " vs ", b[first]) : "");
            CHECK(bad == 0);
          }
        }
      }
}

TEST_CASE("cpu: ONNX's integer ops (DynamicQuantizeLinear, ConvInteger, MatMulInteger, QLinearConv, QLinearMatMul) on int8 kernels where the CPU has VNNI, else on f32 kernels, bit for bit the reference's result") {
  Graph g;
  Rng rng(11);
  const TensorId x = g.add_input("x", f32({2, 3, 9, 9}));
  auto ints = [&](const char* n, DType t, Shape s, int64_t lo, int64_t hi) {
    Tensor<int64_t> v(std::move(s));
    for (int64_t i = 0; i < v.size(); ++i) v[i] = rng.range(lo, hi);
    return g.add_constant(n, t, v);
  };
  auto scalar = [&](const char* n, float v) { return g.add_constant(n, Tensor<float>(Shape{}, v)); };
  auto zero = [&](const char* n, DType t, int64_t v) { return g.add_constant(n, t, Tensor<int64_t>(Shape{}, v)); };
  const DType U8 = DType::UInt8, I8 = DType::Int8;
  const auto dq = g.add_node("dq", ops::DynamicQuantizeLinear{}, {x});
  const TensorId xq = dq[0], xs = dq[1], xz = dq[2];
  // ConvInteger, uint8 weight with zero point 128 (less it, it fits int8)
  const TensorId ci = g.add_node("ci", ops::ConvInteger{.pads = {1, 1, 1, 1}, .x_zero = true, .w_zero = true},
                                 {xq, ints("cw", U8, {4, 3, 3, 3}, 0, 255), xz, zero("cwz", U8, 128)})[0];
  g.add_output(g.add_node("ci_f", ops::Cast{.to = DType::Float32}, {ci})[0]);
  // ONNX Runtime's dynamic quantization after a ConvInteger: Cast, Mul by the scales' product,
  // Add of the bias [1, C, 1, 1], Relu: computed by the step after the kernel
  const TensorId cs = g.add_node("cs", ops::Mul{}, {xs, scalar("cws", 0.02f)})[0];
  const TensorId ci2 = g.add_node("ci2", ops::ConvInteger{.strides = {2, 2}, .x_zero = true}, {xq, ints("cw4", I8, {5, 3, 3, 3}, -100, 100), xz})[0];
  const TensorId ci2f = g.add_node("ci2_f", ops::Cast{.to = DType::Float32}, {ci2})[0];
  const TensorId ci2m = g.add_node("ci2_m", ops::Mul{}, {ci2f, cs})[0];
  const TensorId ci2b = g.add_node("ci2_b", ops::Add{}, {ci2m, g.add_constant("cb4", Tensor<float>({1, 5, 1, 1}, std::vector<float>{0.5f, -1.f, 2.f, 0.f, -3.25f}))})[0];
  g.add_output(g.add_node("ci2_r", ops::Relu{}, {ci2b})[0]);
  // uint8 weights that do not fit int8 less their zero points: w - 128 and a channel of sums
  // (per group)
  g.add_output(g.add_node("ci_wide", ops::ConvInteger{.pads = {0, 1, 2, 0}, .x_zero = true}, {xq, ints("cw2", U8, {2, 3, 2, 2}, 200, 255), xz})[0]);
  g.add_output(g.add_node("ci_grouped", ops::ConvInteger{.pads = {1, 1, 1, 1}, .group = 3, .x_zero = true}, {xq, ints("cw3", U8, {6, 1, 3, 3}, 200, 255), xz})[0]);
  g.add_output(g.add_node("mi_u8", ops::MatMulInteger{.a_zero = true, .b_zero = true},
                          {xq, ints("bw8", U8, {9, 4}, 0, 255), xz, ints("bwz8", U8, {4}, 0, 255)})[0]);
  // QLinearConv chain: per-channel scales, bias, odd zero point; then depthwise with per-channel
  // weight zero points (folded into the weight)
  std::vector<float> ws(4);
  for (size_t c = 0; c < 4; ++c) ws[c] = 0.002f * float(c + 1);
  const TensorId qc = g.add_node("qc", ops::QLinearConv{.strides = {2, 2}, .pads = {1, 1, 1, 1}},
                                 {xq, xs, xz, ints("qw", I8, {4, 3, 3, 3}, -127, 127), g.add_constant("qws", Tensor<float>({4}, ws)),
                                  ints("qwz", I8, {4}, 0, 0), scalar("ys", 0.05f), zero("yz", U8, 101), ints("qb", DType::Int32, {4}, -3000, 3000)})[0];
  const TensorId qd = g.add_node("qd", ops::QLinearConv{.pads = {1, 1, 1, 1}, .group = 4},
                                 {qc, scalar("ys_", 0.05f), zero("yz_", U8, 101), ints("dw", I8, {4, 1, 3, 3}, -100, 100), scalar("dws", 0.01f),
                                  ints("dwz", I8, {4}, -5, 5), scalar("ys2", 0.3f), zero("yz2", U8, 4)})[0];
  g.add_output(qd);
  // QLinearMatMul reading the channels-last int8 result; per-column scales
  std::vector<float> ms(6);
  for (size_t c = 0; c < 6; ++c) ms[c] = 0.01f + 0.003f * float(c);
  g.add_output(g.add_node("qm", ops::QLinearMatMul{.to = I8},
                          {qd, scalar("ys2_", 0.3f), zero("yz2_", U8, 4), ints("mw", I8, {5, 6}, -128, 127), g.add_constant("mws", Tensor<float>({6}, ms)),
                           ints("mwz", I8, {6}, 0, 0), scalar("qms", 0.7f), zero("qmz", I8, -7)})[0]);
  // QOperator models' float ops between the integer ops: DequantizeLinear, Sigmoid,
  // QuantizeLinear as a table on the int8 tensor; DequantizeLinear twice, Add, QuantizeLinear
  // as one int8 step (lower_quant.cpp's, reading the QLinearConv results)
  const TensorId dqd = g.add_node("dqd", ops::DequantizeLinear{}, {qd, scalar("s_dq", 0.3f), zero("z_dq", U8, 4)})[0];
  const TensorId sig = g.add_node("sig", ops::Sigmoid{}, {dqd})[0];
  const TensorId qsig = g.add_node("qsig", ops::QuantizeLinear{}, {sig, scalar("s_sig", 1.f / 256), zero("z_sig", U8, 0)})[0];
  const TensorId added = g.add_node("add", ops::Add{}, {dqd, g.add_node("dqsig", ops::DequantizeLinear{}, {qsig, scalar("s_sig_", 1.f / 256), zero("z_sig_", U8, 0)})[0]})[0];
  const TensorId qadd = g.add_node("qadd", ops::QuantizeLinear{}, {added, scalar("s_add", 0.1f), zero("z_add", U8, 9)})[0];
  g.add_output(g.add_node("qc2", ops::QLinearConv{.pads = {1, 1, 1, 1}},
                          {qadd, scalar("s_add_", 0.1f), zero("z_add_", U8, 9), ints("qw2", I8, {2, 4, 3, 3}, -127, 127), scalar("qws2", 0.01f),
                           zero("qwz2", I8, 0), scalar("ys3", 0.2f), zero("yz3", U8, 50)})[0]);
  // QLinearMatMul of two activations (attention's): uint8 B (less 128 at run time) and int8 B
  // with a zero point; the zero points' share added per row
  g.add_output(g.add_node("qaa", ops::QLinearMatMul{},
                          {qd, scalar("s_a", 0.3f), zero("z_a", U8, 3), qd, scalar("s_b", 0.3f), zero("z_b", U8, 3), scalar("s_y", 0.9f), zero("z_y", U8, 77)})[0]);
  // MatMulInteger with per-column weight zero points
  g.add_output(g.add_node("mi", ops::MatMulInteger{.a_zero = true, .b_zero = true}, {xq, ints("bw", I8, {9, 7}, -100, 100), xz, ints("bwz", I8, {7}, -20, 20)})[0]);
  // ONNX Runtime's QGemm as pet imports it: an int32 bias Add after MatMulInteger, then Cast
  // (or the int32 result itself)
  const TensorId mb = g.add_node("mb", ops::MatMulInteger{.a_zero = true}, {xq, ints("mbw", I8, {9, 4}, -100, 100), xz})[0];
  g.add_output(g.add_node("mb_f", ops::Cast{.to = DType::Float32}, {g.add_node("mb_add", ops::Add{}, {mb, ints("mbb", DType::Int32, {4}, -5000, 5000)})[0]})[0]);
  const TensorId mb2 = g.add_node("mb2", ops::MatMulInteger{.a_zero = true}, {xq, ints("mbw2", I8, {9, 3}, -100, 100), xz})[0];
  g.add_output(g.add_node("mb2_add", ops::Add{}, {ints("mbb2", DType::Int32, {3}, -5000, 5000), mb2})[0]);
  // int8 activations: QuantizeLinear to int8, a dilated QLinearConv int8 to int8
  const TensorId sq = g.add_node("sq", ops::QuantizeLinear{.to = I8}, {x, scalar("ss", 0.03f), zero("sz", I8, -3)})[0];
  g.add_output(g.add_node("qs", ops::QLinearConv{.pads = {2, 2, 2, 2}, .dilations = {2, 2}, .to = I8},
                          {sq, scalar("ss_", 0.03f), zero("sz_", I8, -3), ints("sw", I8, {4, 3, 3, 3}, -127, 127), g.add_constant("sws", Tensor<float>({4}, ws)),
                           ints("swz", I8, {4}, 0, 0), scalar("sy", 0.1f), zero("syz", I8, 5)})[0]);
  g.add_output(g.add_node("qss", ops::QLinearMatMul{.to = I8},
                          {sq, scalar("s_c", 0.03f), zero("z_c", I8, -3), sq, scalar("s_d", 0.03f), zero("z_d", I8, 5), scalar("s_e", 0.05f), zero("z_e", I8, 0)})[0]);
  g.add_output(xs);
  g.add_output(xz);
  Tensor<float> in({2, 3, 9, 9});
  for (int64_t i = 0; i < in.size(); ++i) in[i] = float(rng.uniform(-3, 5));
  const std::vector<Value<float>> inputs{in};
  const auto ref = backend::make_backend("reference")->compile(g)->run(inputs);
  for (bool int8 : {true, false}) {
    const auto [exe, plan, want] = compile_int8(g, int8);
    INFO("int8 allowed ", int8, "\nplan:\n", plan);
    CHECK(plan.find("DynamicQuantizeLinear 'dq': range, scale and uint8 tensor in one pet step") != std::string::npos);
    // every integer op on oneDNN's int8 kernels (VNNI) or its f32 kernels, never the reference's
    for (const char* op : {"ConvInteger 'ci'", "QLinearConv 'qc'", "QLinearConv 'qd'", "QLinearMatMul 'qm'", "MatMulInteger 'mi'", "QLinearConv 'qs'",
                           "ConvInteger 'ci_wide'", "MatMulInteger 'mi_u8'", "ConvInteger 'ci_grouped'", "QLinearMatMul 'qaa'", "QLinearMatMul 'qss'"}) {
      const std::string k = cat(op, ": oneDNN ", want ? "int8 " : "f32 ");
      CHECK_MESSAGE(plan.find(k) != std::string::npos, k);
    }
    for (const char* k : {"QuantizeLinear 'sq': quantize to int8", "ConvInteger 'ci': int32 sums to float (with Cast 'ci_f')",
                          "int32 sums to float (with int32 Add 'mb_add', with Cast 'mb_f')", "int32 sums to host values (with int32 Add 'mb2_add')",
                          "int32 sums to float (with Cast 'ci2_f', Mul 'ci2_m', Add 'ci2_b', Relu 'ci2_r')"})
      CHECK_MESSAGE(plan.find(k) != std::string::npos, k);
    CHECK(plan.find("reference kernel") == std::string::npos);
    for (const char* k : {"mi_u8: int32 sums to host values (with the weight's zero point)", "ci_grouped: int32 sums to host values (with the weight's zero point)"})
      CHECK_MESSAGE((plan.find(k) != std::string::npos) == want, k);
    // the int8 steps between QLinear results: whatever their kernels, where int8 is allowed
    for (const char* k : {"Sigmoid 'sig': int8 table lookup", "Add 'add': int8"}) CHECK_MESSAGE((plan.find(k) != std::string::npos) == int8, k);
    for (int round = 0; round < 2; ++round) {
      const auto out = exe->run(inputs);
      REQUIRE(out.size() == ref.size());
      for (size_t k = 0; k < out.size(); ++k) {
        CAPTURE(k);
        REQUIRE(out[k].index() == ref[k].index());
        std::visit([&](const auto& t) { CHECK(std::get<std::decay_t<decltype(t)>>(out[k]).vec() == t.vec()); }, ref[k]);
      }
    }
  }
}

TEST_CASE("cpu: ConvInteger and MatMulInteger with a run-time weight or zero point run (ONNX's node tests feed them as inputs)") {
  // a run-time conv weight used to be read as a constant (std::get on no value: pet run
  // exited 4 on ONNX's test_basic_convinteger)
  const TensorType x{DType::UInt8, {1, 2, 5, 5}}, w{DType::UInt8, {3, 2, 2, 2}}, z{DType::UInt8, {}};
  same_as_reference(one_op(ops::ConvInteger{.x_zero = true}, {x, w, z}), 31, "ConvInteger, weight and zero point inputs");
  same_as_reference(one_op(ops::ConvInteger{.pads = {1, 1, 1, 1}}, {x, w}), 32, "ConvInteger, weight an input");
  same_as_reference(one_op(ops::MatMulInteger{.a_zero = true, .b_zero = true}, {TensorType{DType::UInt8, {4, 3}}, TensorType{DType::UInt8, {3, 2}}, z, z}),
                    33, "MatMulInteger, every operand an input");
}

TEST_CASE("cpu: integer ops on f32 kernels are exact: within 2^24, K in chunks or weights split in halves beyond it, the reference kernel where neither holds") {
  Graph g;
  Rng rng(23);
  // large weights (|w| 100..127, random signs): 255 sum |w| passes 2^24 from about 580 taps
  auto big = [&](const char* n, Shape s) {
    Tensor<int64_t> v(std::move(s));
    for (int64_t i = 0; i < v.size(); ++i) v[i] = rng.range(100, 127) * (rng.range(0, 1) ? 1 : -1);
    return g.add_constant(n, DType::Int8, v);
  };
  auto scalar = [&](const char* n, float v) { return g.add_constant(n, Tensor<float>(Shape{}, v)); };
  auto zero = [&](const char* n, DType t, int64_t v) { return g.add_constant(n, t, Tensor<int64_t>(Shape{}, v)); };
  const DType U8 = DType::UInt8;
  const TensorId x = g.add_input("x", TensorType{U8, {1, 144, 5, 5}});
  const TensorId xp = g.add_input("xp", TensorType{U8, {1, 13, 6, 6}});
  const TensorId xw = g.add_input("xw", TensorType{U8, {2, 600, 3, 2}});
  const TensorId m = g.add_input("m", TensorType{U8, {3, 600}});
  const TensorId mp = g.add_input("mp", TensorType{U8, {2, 3, 601}});
  const TensorId l = g.add_input("l", TensorType{U8, {1, 70000}});
  const TensorId q = g.add_input("q", TensorType{U8, {2, 300}});
  // convs of 1296 taps (144 channels), grouped 648 (72 per group, less a zero point of 7): the
  // input channels in chunks; a matmul of 600 taps: K in 2 chunks of 300 (one batched matmul);
  // where no equal chunks hold (13 channels of 7 x 7 taps, 601 taps: primes), the weight split
  // in halves, 2^s hi + lo
  g.add_output(g.add_node("conv", ops::ConvInteger{.pads = {1, 1, 1, 1}, .x_zero = true}, {x, big("cw", {3, 144, 3, 3}), zero("xz", U8, 0)})[0]);
  g.add_output(g.add_node("gconv", ops::QLinearConv{.group = 2},
                          {x, scalar("xs", 0.1f), zero("xz2", U8, 7), big("gw", {4, 72, 3, 3}), scalar("gws", 0.01f), zero("gwz", DType::Int8, 0),
                           scalar("gys", 90.f), zero("gyz", U8, 128)})[0]);
  g.add_output(g.add_node("pconv", ops::ConvInteger{.pads = {3, 3, 3, 3}}, {xp, big("pw", {4, 13, 7, 7})})[0]);
  // a pointwise conv of 600 channels: the chunked matmul on its channels-last source
  g.add_output(g.add_node("pwconv", ops::ConvInteger{}, {xw, big("pww", {6, 600, 1, 1})})[0]);
  g.add_output(g.add_node("mm", ops::MatMulInteger{}, {m, big("mw", {600, 5})})[0]);
  g.add_output(g.add_node("mmp", ops::MatMulInteger{}, {mp, big("mpw", {601, 7})})[0]);
  // 70000 taps: no split holds (the low halves alone pass 2^24): the reference kernel
  g.add_output(g.add_node("long", ops::MatMulInteger{}, {l, big("lw", {70000, 1})})[0]);
  // two activations, 300 taps (255 x 255 x 300 > 2^24): the reference kernel; 200 taps: f32
  const TensorId qt = g.add_node("qt", ops::Transpose{.perm = {1, 0}}, {q})[0];
  g.add_output(g.add_node("aa", ops::QLinearMatMul{}, {q, scalar("s1", 0.1f), zero("z1", U8, 0), qt, scalar("s2", 0.1f), zero("z2", U8, 0), scalar("s3", 500.f), zero("z3", U8, 0)})[0]);
  const TensorId qs = g.add_node("qs", ops::Slice{.starts = {0}, .ends = {200}, .axes = {1}}, {q})[0];
  const TensorId qst = g.add_node("qst", ops::Transpose{.perm = {1, 0}}, {qs})[0];
  g.add_output(g.add_node("aa2", ops::QLinearMatMul{}, {qs, scalar("s4", 0.1f), zero("z4", U8, 0), qst, scalar("s5", 0.1f), zero("z5", U8, 0), scalar("s6", 500.f), zero("z6", U8, 0)})[0]);
  std::vector<Value<float>> inputs;
  for (TensorId t : {x, xp, xw, m, mp, l, q}) {
    Tensor<int64_t> v(g.type(t).shape);
    for (int64_t i = 0; i < v.size(); ++i) v[i] = rng.range(0, 1) ? 255 : rng.range(0, 255);  // many at the top: sums near the bound
    inputs.push_back(v);
  }
  const auto ref = backend::make_backend("reference")->compile(g)->run(inputs);
  for (bool int8 : {false, true}) {
    const auto [exe, plan, want] = compile_int8(g, int8);
    INFO("int8 allowed ", int8, "\nplan:\n", plan);
    if (!want) {
      for (const char* k : {"ConvInteger 'pconv': oneDNN f32 conv", "MatMulInteger 'mmp': oneDNN f32 matmul"}) {
        CHECK_MESSAGE(plan.find(k) != std::string::npos, k);
        const size_t at = plan.find(k);
        CHECK(plan.substr(at, plan.find('\n', at) - at).find("the weight split into 2^") != std::string::npos);
      }
      CHECK(plan.find("MatMulInteger 'mm': oneDNN f32 matmul") != std::string::npos);
      CHECK(plan.find("K in 2 chunks of 300") != std::string::npos);
      CHECK(plan.find("ConvInteger 'conv': oneDNN f32 conv") != std::string::npos);
      CHECK(plan.find("input channels in 3 chunks of 48 per group") != std::string::npos);
      CHECK(plan.find("QLinearConv 'gconv': oneDNN f32 conv") != std::string::npos);
      CHECK(plan.find("input channels in 2 chunks of 36 per group") != std::string::npos);
      CHECK(plan.find("ConvInteger 'pwconv': oneDNN f32 matmul") != std::string::npos);
      CHECK(plan.find("input channels in 2 chunks of 300, a pointwise conv") != std::string::npos);
      CHECK(plan.find("QLinearMatMul 'aa2': oneDNN f32 matmul") != std::string::npos);
      CHECK(plan.find("MatMulInteger 'long': reference kernel") != std::string::npos);
      CHECK(plan.find("QLinearMatMul 'aa': reference kernel") != std::string::npos);
    }
    const auto out = exe->run(inputs);
    REQUIRE(out.size() == ref.size());
    for (size_t k = 0; k < out.size(); ++k) {
      CAPTURE(k);
      CHECK(std::get<Tensor<int64_t>>(out[k]).vec() == std::get<Tensor<int64_t>>(ref[k]).vec());
    }
  }
}

TEST_CASE("cpu: QLinearConv and QLinearMatMul on int8 kernels round ties as the op does (half to even before an odd zero point is added)") {
  // sums 8 x (0..31) (+ bias 4) times m = 0.5 * 0.25 / 2 = 1/16: every other value a tie
  for (int64_t zy : {0, 100, 101, -3, 6})
    for (bool with_bias : {false, true}) {
      CAPTURE(zy);
      CAPTURE(with_bias);
      const DType to = zy < 0 ? DType::Int8 : DType::UInt8;
      Graph g;
      const TensorId x = g.add_input("x", TensorType{DType::UInt8, {1, 1, 1, 32}});
      auto scalar = [&](const char* n, float v) { return g.add_constant(n, Tensor<float>(Shape{}, v)); };
      auto zero = [&](const char* n, DType t, int64_t v) { return g.add_constant(n, t, Tensor<int64_t>(Shape{}, v)); };
      std::vector<TensorId> in{x, scalar("xs", 0.5f), zero("xz", DType::UInt8, 0), g.add_constant("w", DType::Int8, Tensor<int64_t>({1, 1, 1, 1}, int64_t(8))),
                               scalar("ws", 0.25f), zero("wz", DType::Int8, 0), scalar("ys", 2.f), zero("yz", to, zy)};
      if (with_bias) in.push_back(g.add_constant("b", DType::Int32, Tensor<int64_t>({1}, int64_t(4))));
      g.add_output(g.add_node("qc", ops::QLinearConv{.to = to}, in)[0]);
      const TensorId xr = g.add_node("r", ops::Reshape{.shape = {32, 1}}, {x})[0];
      g.add_output(g.add_node("qm", ops::QLinearMatMul{.to = to},
                              {xr, scalar("xs2", 0.5f), zero("xz2", DType::UInt8, 0), g.add_constant("w2", DType::Int8, Tensor<int64_t>({1, 1}, int64_t(8))),
                               scalar("ws2", 0.25f), zero("wz2", DType::Int8, 0), scalar("ys2", 2.f), zero("yz2", to, zy)})[0]);
      Tensor<int64_t> xv({1, 1, 1, 32});
      for (int64_t i = 0; i < 32; ++i) xv[i] = i;
      const std::vector<Value<float>> inputs{xv};
      const auto ref = backend::make_backend("reference")->compile(g)->run(inputs);
      const auto [exe, plan, want] = compile_int8(g, true);
      INFO(plan);
      CHECK((plan.find("QLinearConv 'qc': oneDNN int8 conv") != std::string::npos) == want);
      CHECK((plan.find("QLinearConv 'qc': oneDNN f32 conv") != std::string::npos) == !want);
      CHECK(plan.find("QLinearConv 'qc': requantize to") != std::string::npos);
      const auto out = exe->run(inputs);
      for (size_t k = 0; k < 2; ++k) CHECK(std::get<Tensor<int64_t>>(out[k]).vec() == std::get<Tensor<int64_t>>(ref[k]).vec());
      // and the ties are there: x = 1 gives 0.5, which rounds to 0 (+ the zero point)
      if (!with_bias) CHECK(std::get<Tensor<int64_t>>(ref[0])[1] == zy);
    }
}

TEST_CASE("cpu: QLinearConv and QLinearMatMul requantize many rows of few channels exactly: tiles of rows, the rows left over, per-channel multipliers") {
  // 37 x 43 = 1591 rows of 3 channels (tiles of 170 rows, 61 left over) and 1591 rows of 5
  // columns (102 rows a tile); the multipliers are powers of two, so ties are common
  Graph g;
  Rng rng(41);
  auto scalar = [&](const char* n, float v) { return g.add_constant(n, Tensor<float>(Shape{}, v)); };
  auto zero = [&](const char* n, DType t, int64_t v) { return g.add_constant(n, t, Tensor<int64_t>(Shape{}, v)); };
  auto ints = [&](const char* n, DType t, Shape sh, int64_t lo, int64_t hi) {
    Tensor<int64_t> v(std::move(sh));
    for (int64_t i = 0; i < v.size(); ++i) v[i] = rng.range(lo, hi);
    return g.add_constant(n, t, v);
  };
  const TensorId x = g.add_input("x", TensorType{DType::UInt8, {1, 4, 37, 43}});
  g.add_output(g.add_node("qc", ops::QLinearConv{.to = DType::UInt8},
                          {x, scalar("xs", 0.5f), zero("xz", DType::UInt8, 3), ints("w", DType::Int8, {3, 4, 1, 1}, -9, 9),
                           g.add_constant("ws", Tensor<float>({3}, std::vector<float>{0.25f, 0.5f, 0.125f})), zero("wz", DType::Int8, 0), scalar("ys", 2.f),
                           zero("yz", DType::UInt8, 101), ints("b", DType::Int32, {3}, -40, 40)})[0]);
  const TensorId xr = g.add_node("r", ops::Reshape{.shape = {1591, 4}}, {x})[0];
  g.add_output(g.add_node("qm", ops::QLinearMatMul{.to = DType::Int8},
                          {xr, scalar("xs2", 0.5f), zero("xz2", DType::UInt8, 7), ints("w2", DType::Int8, {4, 5}, -20, 20),
                           g.add_constant("ws2", Tensor<float>({5}, std::vector<float>{0.25f, 0.5f, 1.f, 0.125f, 0.0625f})), zero("wz2", DType::Int8, 0),
                           scalar("ys2", 1.f), zero("yz2", DType::Int8, -5)})[0]);
  Tensor<int64_t> xv(g.type(x).shape);
  for (int64_t i = 0; i < xv.size(); ++i) xv[i] = rng.range(0, 255);
  const std::vector<Value<float>> inputs{xv};
  const auto ref = backend::make_backend("reference")->compile(g)->run(inputs);
  for (bool int8 : {false, true}) {
    const auto [exe, plan, want] = compile_int8(g, int8);
    INFO("int8 allowed ", int8, "\nplan:\n", plan);
    CHECK(plan.find("QLinearConv 'qc': requantize to uint8") != std::string::npos);
    CHECK(plan.find("QLinearMatMul 'qm': requantize to int8") != std::string::npos);
    const auto out = exe->run(inputs);
    for (size_t k = 0; k < 2; ++k) CHECK(std::get<Tensor<int64_t>>(out[k]).vec() == std::get<Tensor<int64_t>>(ref[k]).vec());
  }
}

TEST_CASE("cpu 1-byte integer constants (held one byte an element): a bool mask, int8 and uint8 weights of integer and dequantized matmuls agree with the reference") {
  Graph g;
  Rng rng(77);
  const TensorId x = g.add_input("x", f32({4, 6}));
  Tensor<int64_t> m({4, 6}), w({6, 5}), u({6, 5});
  for (int64_t i = 0; i < m.size(); ++i) m[i] = rng.range(0, 1);
  for (int64_t i = 0; i < w.size(); ++i) w[i] = rng.range(-128, 127), u[i] = rng.range(0, 255);
  const TensorId mask = g.add_constant("mask", DType::Bool, m);
  const TensorId wq = g.add_constant("w", DType::Int8, w), uq = g.add_constant("u", DType::UInt8, u);
  REQUIRE(std::holds_alternative<Tensor<uint8_t>>(*g.tensor(mask).value));
  REQUIRE(std::holds_alternative<Tensor<int8_t>>(*g.tensor(wq).value));
  g.add_output(g.add_node("where", ops::Where{}, {mask, x, g.add_node("neg", ops::Neg{}, {x})[0]})[0]);
  const TensorId s = g.add_constant("s", Tensor<float>(Shape{}, 0.5f));
  g.add_output(g.add_node("mm", ops::MatMul{}, {x, g.add_node("dqw", ops::DequantizeLinear{}, {wq, s})[0]})[0]);
  const auto dq = g.add_node("dql", ops::DynamicQuantizeLinear{}, {x});
  g.add_output(g.add_node("mmi", ops::MatMulInteger{.a_zero = true}, {dq[0], wq, dq[2]})[0]);
  g.add_output(g.add_node("mmu", ops::MatMulInteger{.a_zero = true, .b_zero = true}, {dq[0], uq, dq[2], g.add_constant("uz", DType::UInt8, Tensor<int64_t>(Shape{}, int64_t(200)))})[0]);
  Tensor<float> in({4, 6});
  for (int64_t i = 0; i < in.size(); ++i) in[i] = 0.25f * float(rng.range(-20, 20));
  const std::vector<Value<float>> inputs{in};
  const auto want = backend::make_backend("reference")->compile(g)->run(inputs);
  for (const char* isa : {"", "the f32 kernels"}) {
    INFO(isa);
    backend::CompileOptions o;
    if (*isa) o.int8 = false;
    const auto got = backend::make_backend("cpu")->compile(g, o)->run(inputs);
    REQUIRE(got.size() == want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      INFO("output ", k);
      CHECK(compare(got[k], want[k], 1e-5, 1e-5).pass);
    }
  }
  // the graph's constants are still held narrow, with their values
  CHECK(std::get<Tensor<int8_t>>(*g.tensor(wq).value)[0] == int8_t(w[0]));
  CHECK(const_ints(*g.tensor(uq).value).vec() == u.vec());
}
