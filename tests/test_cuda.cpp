// The cuda backend on a GPU: every lowering path (pet's copy, element-wise and layer-norm
// kernels, cuBLAS matrix products, cuDNN convolutions and softmax, the host fallback) against
// the reference interpreter. Without a CUDA device each case prints "skipped: no CUDA device"
// and ctest reports it skipped; the index arithmetic is tested on every machine in
// test_cuda_host.
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "op_testing.hpp"
#include "pet/backend/algorithm_cache.hpp"
#include "pet/backend/backend.hpp"

using namespace pet;
using namespace pet::testing;

namespace {
std::unique_ptr<backend::Backend> cuda_or_skip() {
  try {
    return backend::make_backend("cuda");
  } catch (const Unsupported& e) {
    std::printf("skipped: %s\n", e.what());
    return nullptr;
  }
}

/// Every float output within tol * (1 + max |reference|) of the reference's.
void expect_close(const std::vector<Value<float>>& got, const std::vector<Value<float>>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    const auto& a = std::get<Tensor<float>>(got[k]);
    const auto& b = std::get<Tensor<float>>(want[k]);
    REQUIRE(a.shape() == b.shape());
    double err = 0, ref = 0;
    for (int64_t i = 0; i < a.size(); ++i) err = std::max(err, double(std::abs(a[i] - b[i]))), ref = std::max(ref, double(std::abs(b[i])));
    CHECK(err <= tol * (1 + ref));
  }
}

/// One op on random inputs (constants where `constant` says), on cuda and the reference.
void same_on_cuda(backend::Backend& be, const Op& op, const Types& in, std::vector<bool> constant, const std::string& what, double tol = 1e-4) {
  INFO(what);
  Graph g;
  Rng rng(7);
  std::vector<TensorId> ids;
  std::vector<Value<float>> inputs;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!is_float(in[i].dtype)) {
      ids.push_back(g.add_input(cat("x", i), in[i]));
      inputs.emplace_back(Tensor<int64_t>(in[i].shape, int64_t(0)));
      continue;
    }
    Tensor<float> v(in[i].shape);
    for (int64_t k = 0; k < v.size(); ++k) v[k] = float(rng.uniform(-1, 1));
    if (i < constant.size() && constant[i]) {
      ids.push_back(g.add_constant(cat("c", i), v));
    } else {
      ids.push_back(g.add_input(cat("x", i), in[i]));
      inputs.emplace_back(v);
    }
  }
  for (TensorId t : g.add_node("op", op, ids)) g.add_output(t);
  auto exe = be.compile(g);
  INFO(exe->describe());
  const auto got = exe->run(inputs);
  const auto want = Interpreter<float>(g).run(inputs);
  expect_close(got, want, tol);
}

/// A whole program on cuda and on the reference (random inputs), with the plan for the log.
std::string graph_same_on_cuda(backend::Backend& be, const Graph& g, const std::string& what, double tol = 1e-4) {
  INFO(what);
  Rng rng(5);
  std::vector<Value<float>> inputs;
  for (TensorId t : g.inputs()) inputs.push_back(backend::random_value(g.type(t), rng));
  auto exe = be.compile(g);
  const std::string plan = exe->describe();
  INFO(plan);
  const auto got = exe->run(inputs);
  const auto want = Interpreter<float>(g).run(inputs);
  expect_close(got, want, tol);
  // The same outputs again: buffers reused across steps must not leak between runs.
  const auto again = exe->run(inputs);
  for (size_t k = 0; k < got.size(); ++k) {
    const auto& a = std::get<Tensor<float>>(got[k]);
    const auto& b = std::get<Tensor<float>>(again[k]);
    for (int64_t i = 0; i < a.size(); ++i) REQUIRE(a[i] == b[i]);
  }
  const double ms = exe->timed_run(inputs);
  CHECK(ms > 0);
  CHECK(ms < 10000);
  return plan;
}

Tensor<float> random_tensor(const Shape& s, Rng& rng, double scale = 0.3) {
  Tensor<float> v(s);
  for (int64_t k = 0; k < v.size(); ++k) v[k] = float(rng.uniform(-scale, scale));
  return v;
}
}  // namespace

TEST_CASE("cuda: data movement, element-wise ops and layer norm on pet's kernels") {
  auto be = cuda_or_skip();
  if (!be) return;
  same_on_cuda(*be, ops::Transpose{.perm = {0, 2, 3, 1}}, {f32({2, 16, 9, 7})}, {}, "transpose (tiled)");
  same_on_cuda(*be, ops::RT{.split_shape = {1, 16, 6, 2, 6, 2}, .perm = {0, 1, 3, 2, 5, 4}, .out_shape = {1, 16, 12, 12}}, {f32({1, 16, 12, 12})},
               {}, "R/T");
  same_on_cuda(*be, ops::Slice{.starts = {-1}, .ends = {-100}, .axes = {1}, .steps = {-1}}, {f32({3, 11})}, {}, "reversing slice");
  same_on_cuda(*be, ops::Pad{.pads = {0, 1, 2, 0, 0, 3, 1, 0}, .value = 0.5}, {f32({2, 3, 4, 5})}, {}, "pad");
  same_on_cuda(*be, ops::Patch{.offsets = {0, 2, 1}}, {f32({2, 7, 5}), f32({2, 3, 4})}, {}, "patch");
  same_on_cuda(*be, ops::Concat{.axis = 1}, {f32({2, 3, 4}), f32({2, 1, 4})}, {}, "concat");
  for (const Op& op : std::vector<Op>{ops::Relu{}, ops::Gelu{}, ops::Sigmoid{}, ops::Tanh{}, ops::Clip{.min = -0.5f, .max = 0.5f}, ops::Mish{}, ops::Round{}})
    same_on_cuda(*be, op, {f32({3, 1000})}, {}, std::string(op_name(op)), 1e-6);
  for (const Op& op : std::vector<Op>{ops::Add{}, ops::Mul{}, ops::Div{}, ops::Max{}, ops::PRelu{}})
    same_on_cuda(*be, op, {f32({2, 3, 40}), f32({40})}, {}, std::string(op_name(op)), 1e-6);
  same_on_cuda(*be, ops::LayerNormalization{.axis = -1}, {f32({64, 768}), f32({768}), f32({768})}, {false, true, true}, "layer norm", 1e-5);
}

TEST_CASE("cuda: matrix products on cuBLAS, convolutions and softmax on cuDNN, the host fallback") {
  auto be = cuda_or_skip();
  if (!be) return;
  same_on_cuda(*be, ops::MatMul{}, {f32({2, 64, 96}), f32({96, 80})}, {false, true}, "matmul, rows merged");
  same_on_cuda(*be, ops::MatMul{}, {f32({2, 12, 64, 32}), f32({2, 12, 32, 64})}, {}, "batched matmul");
  same_on_cuda(*be, ops::MatMul{}, {f32({64, 32}), f32({3, 32, 16})}, {}, "broadcast left operand");
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      same_on_cuda(*be, ops::Gemm{.alpha = 0.5f, .beta = 2.f, .trans_a = ta, .trans_b = tb}, {f32(ta ? Shape{24, 16} : Shape{16, 24}), f32(tb ? Shape{8, 24} : Shape{24, 8}), f32({8})},
                   {false, true, true}, cat("gemm ", ta, tb));
  same_on_cuda(*be, ops::Conv{.pads = {1, 1, 1, 1}}, {f32({2, 16, 14, 14}), f32({32, 16, 3, 3}), f32({32})}, {false, true, true}, "conv 3x3 + bias", 1e-4);
  same_on_cuda(*be, ops::Conv{.pads = {2, 2, 2, 2}, .dilations = {2, 2}}, {f32({1, 32, 14, 14}), f32({32, 32, 3, 3})}, {false, true}, "dilated conv");
  same_on_cuda(*be, ops::Conv{.pads = {1, 1, 1, 1}, .group = 8}, {f32({1, 16, 9, 9}), f32({16, 2, 3, 3})}, {false, true}, "grouped conv");
  same_on_cuda(*be, ops::Conv{.strides = {2}, .pads = {3, 3}}, {f32({2, 4, 31}), f32({6, 4, 7})}, {false, true}, "1-D conv");
  same_on_cuda(*be, ops::Conv{.pads = {1, 1, 1, 1, 1, 1}}, {f32({1, 3, 4, 6, 5}), f32({5, 3, 3, 3, 3})}, {false, true}, "3-D conv");
  same_on_cuda(*be, ops::Conv{.pads = {0, 1, 2, 0}}, {f32({1, 3, 8, 8}), f32({4, 3, 3, 3})}, {false, true}, "asymmetric pads: padded by pet's copy");
  same_on_cuda(*be, ops::Softmax{{.axis = 1}}, {f32({4, 10, 6})}, {}, "softmax over a middle axis", 1e-6);
  ops::ReduceMean mean;
  mean.axes = {1};
  same_on_cuda(*be, mean, {f32({4, 10, 6})}, {}, "reduce mean: host fallback", 1e-6);
}

TEST_CASE("cuda: pooling on cuDNN (max with padding, average with and without the pads counted, global, 1-D and 3-D), ceil_mode on the host") {
  auto be = cuda_or_skip();
  if (!be) return;
  same_on_cuda(*be, ops::MaxPool{{.kernel_shape = {3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}}}, {f32({2, 8, 15, 15})}, {}, "max pool 3x3/2 pad 1", 0);
  same_on_cuda(*be, ops::AveragePool{{.kernel_shape = {3, 3}, .strides = {1, 1}, .pads = {1, 1, 1, 1}}}, {f32({1, 6, 9, 9})}, {}, "average pool, pads not counted",
               1e-6);
  ops::AveragePool inc{{.kernel_shape = {3, 3}, .strides = {1, 1}, .pads = {1, 1, 1, 1}}};
  inc.count_include_pad = true;
  same_on_cuda(*be, inc, {f32({1, 6, 9, 9})}, {}, "average pool, pads counted", 1e-6);
  same_on_cuda(*be, ops::GlobalAveragePool{}, {f32({2, 64, 7, 7})}, {}, "global average pool", 1e-5);
  same_on_cuda(*be, ops::MaxPool{{.kernel_shape = {3}, .strides = {2}, .pads = {1, 1}}}, {f32({2, 4, 17})}, {}, "1-D max pool", 0);
  same_on_cuda(*be, ops::MaxPool{{.kernel_shape = {1, 3, 3}, .strides = {1, 2, 2}, .pads = {0, 1, 1, 0, 1, 1}}}, {f32({1, 4, 3, 9, 9})}, {}, "3-D max pool", 0);
  ops::MaxPool ceil{{.kernel_shape = {2, 2}, .strides = {2, 2}}};
  ceil.ceil_mode = true;
  same_on_cuda(*be, ceil, {f32({1, 3, 7, 7})}, {}, "max pool ceil_mode (host)", 0);
}

TEST_CASE("cuda: conv + bias + residual Add + ReLU fused into one cuDNN call, device buffers reused along a chain") {
  auto be = cuda_or_skip();
  if (!be) return;
  Rng rng(9);
  {  // ResNet's basic block: relu(conv(relu(conv(x))) + x)
    Graph g;
    const TensorId x = g.add_input("x", f32({2, 32, 14, 14}));
    const TensorId w1 = g.add_constant("w1", random_tensor({32, 32, 3, 3}, rng)), b1 = g.add_constant("b1", random_tensor({32}, rng));
    const TensorId w2 = g.add_constant("w2", random_tensor({32, 32, 3, 3}, rng));
    const TensorId c1 = g.add_node("conv1", ops::Conv{.pads = {1, 1, 1, 1}}, {x, w1, b1}).at(0);
    const TensorId r1 = g.add_node("relu1", ops::Relu{}, {c1}).at(0);
    const TensorId c2 = g.add_node("conv2", ops::Conv{.pads = {1, 1, 1, 1}}, {r1, w2}).at(0);
    const TensorId s = g.add_node("add", ops::Add{}, {c2, x}).at(0);
    g.add_output(g.add_node("relu2", ops::Relu{}, {s}).at(0));
    const std::string plan = graph_same_on_cuda(*be, g, "basic block");
    CHECK(plan.find("fused convolution") != std::string::npos);
    CHECK(plan.find("+ Add 'add' + Relu 'relu2'") != std::string::npos);
  }
  {  // a conv whose output is also a program output is not fused with its Relu
    Graph g;
    const TensorId x = g.add_input("x", f32({1, 8, 10, 10}));
    const TensorId w = g.add_constant("w", random_tensor({8, 8, 3, 3}, rng));
    const TensorId c = g.add_node("conv", ops::Conv{.pads = {1, 1, 1, 1}}, {x, w}).at(0);
    g.add_output(c);
    g.add_output(g.add_node("relu", ops::Relu{}, {c}).at(0));
    const std::string plan = graph_same_on_cuda(*be, g, "conv output read twice");
    CHECK(plan.find("fused") == std::string::npos);
  }
  {  // a chain of eight convs: the memory plan ping-pongs between two buffers
    Graph g;
    TensorId t = g.add_input("x", f32({1, 16, 28, 28}));
    for (int i = 0; i < 8; ++i) {
      const TensorId w = g.add_constant(cat("w", i), random_tensor({16, 16, 3, 3}, rng, 0.25));
      t = g.add_node(cat("conv", i), ops::Conv{.pads = {1, 1, 1, 1}}, {t, w}).at(0);
      t = g.add_node(cat("tanh", i), ops::Tanh{}, {t}).at(0);
    }
    g.add_output(t);
    const std::string plan = graph_same_on_cuda(*be, g, "conv chain");
    // 16 intermediate tensors, the pinned input and output, and at most 3 reused buffers
    const auto at = plan.find("device memory: ");
    REQUIRE(at != std::string::npos);
    CHECK(std::stoi(plan.substr(at + 15)) <= 5);
  }
}

TEST_CASE("cuda: executables share one context, a conv's algorithm is chosen once per configuration and GPU, then read from the cache") {
  auto be = cuda_or_skip();
  if (!be) return;
  const std::string version = be->version();
  INFO(version);
  CHECK(version.find(" sm_") != std::string::npos);  // the device is part of every cache key
  CHECK(version.find("tf32") == std::string::npos);
  const std::string file = (std::filesystem::temp_directory_path() / cat("pet_cuda_algorithms_", ::getpid(), ".db")).string();
  std::filesystem::remove(file);
  Rng rng(3);
  Graph g;
  const TensorId x = g.add_input("x", f32({2, 16, 20, 20}));
  const TensorId w = g.add_constant("w", random_tensor({24, 16, 3, 3}, rng));
  g.add_output(g.add_node("conv", ops::Conv{.pads = {1, 1, 1, 1}}, {x, w}).at(0));
  backend::CompileOptions opt;
  opt.algorithm_cache = file;
  const std::string first = graph_same_on_cuda(*be, g, "first compile: cuDNN's Find");
  CHECK(first.find("ms when chosen") != std::string::npos);
  {
    auto exe = be->compile(g, opt);  // measured, then written to the file
    CHECK(exe->describe().find("ms when chosen") != std::string::npos);
  }
  const auto kept = backend::AlgorithmCache::instance().entries(file);
  REQUIRE(kept.size() == 1);
  CHECK(kept.begin()->first.find(version) != std::string::npos);
  // A second executable (and a second backend, as another process would) reads the choice.
  auto again = be->compile(g, opt);
  CHECK(again->describe().find("cached choice") != std::string::npos);
  auto other = backend::make_backend("cuda");
  const std::string plan = other->compile(g, opt)->describe();
  CHECK(plan.find("cached choice") != std::string::npos);
  CHECK(plan.find("convolution workspace") != std::string::npos);
  // Both backends' executables run on their shared contexts, alive after the others are gone.
  graph_same_on_cuda(*other, g, "second backend");
  std::filesystem::remove(file);
}

TEST_CASE("cuda: TF32 is a backend option, part of its version, results stay close") {
  auto be = cuda_or_skip();
  if (!be) return;
  auto tf = backend::make_backend("cuda", {.tf32 = true});
  CHECK(tf->version().find("tf32") != std::string::npos);
  CHECK(tf->version() != be->version());
  same_on_cuda(*tf, ops::MatMul{}, {f32({64, 256}), f32({256, 64})}, {false, true}, "matmul with TF32", 1e-2);
  same_on_cuda(*tf, ops::Conv{.pads = {1, 1, 1, 1}}, {f32({1, 32, 14, 14}), f32({32, 32, 3, 3})}, {false, true}, "conv with TF32", 1e-2);
}
