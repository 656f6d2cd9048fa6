// Kernel benchmarks of the cpu backend, each beside its peer in the same program:
//   convs:    pet (a one-conv program through the cpu backend) vs oneDNN alone (the same conv
//             as a bare primitive with format_tag::any, input and weights pre-reordered);
//   matmuls:  pet vs oneDNN's matmul primitive;
//   copies:   pet's R/T kernel (transposes) vs memcpy of the same bytes.
// Counters: GFLOP/s for convs and matmuls, GB/s (read + write) for copies.
#include <benchmark/benchmark.h>

#include <cstring>
#include <dnnl.hpp>

#include "cpu/copy.hpp"
#include "pet/backend/copy_plan.hpp"
#include "pet/backend/backend.hpp"
#include "pet/core/rng.hpp"

using namespace pet;

namespace {

Tensor<float> random_tensor(const Shape& s, uint64_t seed) {
  Rng rng(seed);
  Tensor<float> t(s);
  for (int64_t i = 0; i < t.size(); ++i) t[i] = float(rng.uniform(-1, 1));
  return t;
}

struct ConvCase {
  const char* name;
  Shape x, w;
  ops::Conv op;
};
const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> c = {
      {"resnet_3x3_64", {1, 64, 56, 56}, {64, 64, 3, 3}, ops::Conv{.pads = {1, 1, 1, 1}}},
      {"resnet_3x3_256", {1, 256, 14, 14}, {256, 256, 3, 3}, ops::Conv{.pads = {1, 1, 1, 1}}},
      {"csrnet_dilated_512", {1, 512, 14, 14}, {512, 512, 3, 3}, ops::Conv{.pads = {2, 2, 2, 2}, .dilations = {2, 2}}},
      {"inception_1x1_768", {1, 768, 17, 17}, {192, 768, 1, 1}, ops::Conv{}},
      {"r3d_3x3x3_64", {1, 64, 8, 28, 28}, {64, 64, 3, 3, 3}, ops::Conv{.pads = {1, 1, 1, 1, 1, 1}}},
  };
  return c;
}

double conv_flops(const ConvCase& c, const Shape& y) {
  int64_t per = 1;
  for (size_t i = 1; i < c.w.size(); ++i) per *= c.w[i];
  return 2.0 * double(numel(y)) * double(per);
}

void BM_conv_pet(benchmark::State& st) {
  const auto& c = conv_cases()[size_t(st.range(0))];
  Graph g;
  TensorId x = g.add_input("x", {DType::Float32, c.x});
  TensorId w = g.add_constant("w", random_tensor(c.w, 2));
  TensorId y = g.add_node("conv", c.op, {x, w})[0];
  g.add_output(y);
  auto exe = backend::make_backend("cpu")->compile(g);
  std::vector<Value<float>> in{random_tensor(c.x, 1)};
  for (auto _ : st) benchmark::DoNotOptimize(exe->run(in));
  st.SetLabel(c.name);
  st.counters["GFLOP/s"] = benchmark::Counter(conv_flops(c, g.type(y).shape) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

/// Eight identical convs in a row inside one pet program (layouts stay blocked between them,
/// as in a network): the conv path without the one-op program's input/output conversions.
void BM_conv_chain_pet(benchmark::State& st) {
  const auto& c = conv_cases()[size_t(st.range(0))];
  if (c.w[0] != c.x[1]) {
    st.SkipWithError("filters != channels: cannot chain");
    return;
  }
  Graph g;
  TensorId t = g.add_input("x", {DType::Float32, c.x});
  TensorId shared = g.add_constant("w", random_tensor(c.w, 7));
  for (int i = 0; i < 8; ++i) t = g.add_node(cat("conv", i), c.op, {t, st.range(1) ? shared : g.add_constant(cat("w", i), random_tensor(c.w, uint64_t(i)))})[0];
  g.add_output(t);
  auto exe = backend::make_backend("cpu")->compile(g);
  std::vector<Value<float>> in{random_tensor(c.x, 1)};
  for (auto _ : st) benchmark::DoNotOptimize(exe->run(in));
  st.SetLabel(std::string(c.name) + " x8");
  st.counters["GFLOP/s"] = benchmark::Counter(8 * conv_flops(c, g.type(t).shape) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_conv_onednn(benchmark::State& st) {
  using namespace dnnl;
  const auto& c = conv_cases()[size_t(st.range(0))];
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  Graph g;  // for the output shape only
  TensorId x = g.add_input("x", {DType::Float32, c.x});
  TensorId w = g.add_input("w", {DType::Float32, c.w});
  ops::Conv op = c.op;
  TensorId y = g.add_node("conv", op, {x, w})[0];
  op = std::get<ops::Conv>(g.node(0).op);
  const Shape& ys = g.type(y).shape;
  const size_t k = c.x.size() - 2;
  memory::dims strides(op.strides.begin(), op.strides.end()), dil, pl(op.pads.begin(), op.pads.begin() + long(k)),
      pr(op.pads.begin() + long(k), op.pads.end());
  for (int64_t d : op.dilations) dil.push_back(d - 1);
  auto any = [](const Shape& s) { return memory::desc(memory::dims(s.begin(), s.end()), memory::data_type::f32, memory::format_tag::any); };
  convolution_forward::primitive_desc pd(convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct, any(c.x),
                                                                    any(c.w), any(ys), strides, dil, pl, pr),
                                         eng);
  memory src(pd.src_desc(), eng), wt(pd.weights_desc(), eng), dst(pd.dst_desc(), eng);
  std::memset(src.get_data_handle(), 0, pd.src_desc().get_size());
  std::memset(wt.get_data_handle(), 0, pd.weights_desc().get_size());
  convolution_forward conv(pd);
  for (auto _ : st) {
    conv.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wt}, {DNNL_ARG_DST, dst}});
    s.wait();
  }
  st.SetLabel(std::string(c.name) + " " + pd.impl_info_str());
  st.counters["GFLOP/s"] = benchmark::Counter(conv_flops(c, ys) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

struct MatCase {
  const char* name;
  Shape a, b;
};
const std::vector<MatCase>& mat_cases() {
  static const std::vector<MatCase> c = {
      {"512^3", {512, 512}, {512, 512}}, {"bert_ffn1", {128, 768}, {768, 3072}}, {"bert_ffn2", {128, 3072}, {3072, 768}}, {"bert_attn", {12, 128, 64}, {12, 64, 128}}};
  return c;
}
double mat_flops(const MatCase& c) {
  double batch = c.a.size() == 3 ? double(c.a[0]) : 1.0;
  return 2.0 * batch * double(c.a[c.a.size() - 2]) * double(c.a.back()) * double(c.b.back());
}

void BM_matmul_pet(benchmark::State& st) {
  const auto& c = mat_cases()[size_t(st.range(0))];
  Graph g;
  TensorId a = g.add_input("a", {DType::Float32, c.a});
  TensorId b = c.a.size() == 3 ? g.add_input("b", {DType::Float32, c.b}) : g.add_constant("b", random_tensor(c.b, 3));
  g.add_output(g.add_node("mm", ops::MatMul{}, {a, b})[0]);
  auto exe = backend::make_backend("cpu")->compile(g);
  std::vector<Value<float>> in{random_tensor(c.a, 4)};
  if (c.a.size() == 3) in.push_back(random_tensor(c.b, 5));
  for (auto _ : st) benchmark::DoNotOptimize(exe->run(in));
  st.SetLabel(c.name);
  st.counters["GFLOP/s"] = benchmark::Counter(mat_flops(c) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_matmul_onednn(benchmark::State& st) {
  using namespace dnnl;
  const auto& c = mat_cases()[size_t(st.range(0))];
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  auto plain = [](const Shape& sh) {
    memory::dims d(sh.begin(), sh.end()), strides(d.size());
    int64_t acc = 1;
    for (int i = int(d.size()) - 1; i >= 0; --i) strides[size_t(i)] = acc, acc *= d[size_t(i)];
    return memory::desc(d, memory::data_type::f32, strides);
  };
  Shape ys = c.a;
  ys.back() = c.b.back();
  matmul::primitive_desc pd(matmul::desc(plain(c.a), plain(c.b), plain(ys)), eng);
  memory a(pd.src_desc(), eng), b(pd.weights_desc(), eng), y(pd.dst_desc(), eng);
  std::memset(a.get_data_handle(), 0, pd.src_desc().get_size());
  std::memset(b.get_data_handle(), 0, pd.weights_desc().get_size());
  matmul mm(pd);
  for (auto _ : st) {
    mm.execute(s, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, y}});
    s.wait();
  }
  st.SetLabel(std::string(c.name) + " " + pd.impl_info_str());
  st.counters["GFLOP/s"] = benchmark::Counter(mat_flops(c) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

struct CopyCase {
  const char* name;
  Shape shape;
  std::vector<int64_t> perm;
};
const std::vector<CopyCase>& copy_cases() {
  static const std::vector<CopyCase> c = {
      {"bert_heads [128,12,64]->[12,128,64]", {128, 12, 64}, {1, 0, 2}},
      {"nchw->nhwc [64,56,56]", {64, 56 * 56}, {1, 0}},
      {"2-D transpose [2048,2048]", {2048, 2048}, {1, 0}},
      {"parity regroup [512,7,2,7,2]", {512, 7, 2, 7, 2}, {2, 4, 0, 1, 3}},
      {"parity regroup [512,14,2,14,2]", {512, 14, 2, 14, 2}, {2, 4, 0, 1, 3}},
      {"tiles 2x2 [768,2,9,2,9]", {768, 2, 9, 2, 9}, {1, 3, 0, 2, 4}},
      {"tiles 4x4 [768,4,5,4,5]", {768, 4, 5, 4, 5}, {1, 3, 0, 2, 4}},
  };
  return c;
}

void BM_rt_copy(benchmark::State& st) {
  const auto& c = copy_cases()[size_t(st.range(0))];
  Tensor<float> x = random_tensor(c.shape, 6);
  const Shape flat{x.size()};
  const backend::BoxCopy plan =
      backend::copy_plan(ops::RT{.split_shape = c.shape, .perm = c.perm, .out_shape = flat}, Types{{DType::Float32, flat}}, Types{{DType::Float32, flat}})->at(0);
  const Shape& t = plan.shape;
  const std::vector<int64_t>& strides = plan.src_strides;
  std::vector<float> out(size_t(x.size()));
  for (auto _ : st) {
    cpu::strided_copy(x.data(), strides, out.data(), t);
    benchmark::DoNotOptimize(out.data());
  }
  st.SetLabel(c.name);
  st.counters["GB/s"] = benchmark::Counter(2.0 * double(x.size()) * 4 * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_memcpy(benchmark::State& st) {
  const auto& c = copy_cases()[size_t(st.range(0))];
  Tensor<float> x = random_tensor(c.shape, 6);
  std::vector<float> out(size_t(x.size()));
  for (auto _ : st) {
    std::memcpy(out.data(), x.data(), size_t(x.size()) * 4);
    benchmark::DoNotOptimize(out.data());
  }
  st.SetLabel(c.name);
  st.counters["GB/s"] = benchmark::Counter(2.0 * double(x.size()) * 4 * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK(BM_conv_pet)->DenseRange(0, 4)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_conv_chain_pet)->ArgsProduct({{0, 1, 2, 4}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_conv_onednn)->DenseRange(0, 4)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_matmul_pet)->DenseRange(0, 3)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_matmul_onednn)->DenseRange(0, 3)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_rt_copy)->DenseRange(0, 6)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_memcpy)->DenseRange(0, 6)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_MAIN();
