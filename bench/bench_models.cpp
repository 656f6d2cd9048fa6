// Whole-model benchmarks of the cpu backend (models exported by models/export_models.py into
// build/models; missing ones are skipped).
#include <benchmark/benchmark.h>

#include <filesystem>

#include "pet/backend/backend.hpp"
#include "pet/core/rng.hpp"
#include "pet/onnx/onnx.hpp"

using namespace pet;

static void BM_model(benchmark::State& st, std::string name) {
  std::string path = std::string(PET_MODEL_DIR) + "/" + name + "/model.onnx";
  if (!std::filesystem::exists(path)) {
    st.SkipWithError("model not exported (run models/export_models.py build/models)");
    return;
  }
  onnx::Model m = onnx::import_file(path);
  auto exe = backend::make_backend("cpu")->compile(m.graph);
  Rng rng(1);
  std::vector<Value<float>> in;
  for (TensorId t : m.graph.inputs()) {
    Tensor<float> x(m.graph.type(t).shape);
    for (int64_t i = 0; i < x.size(); ++i) x[i] = float(rng.uniform(-1, 1));
    in.push_back(x);
  }
  int64_t flops = 0;
  for (NodeId n = 0; n < m.graph.num_nodes(); ++n) flops += op_flops(m.graph.node(n).op, m.graph.input_types(n), m.graph.output_types(n));
  for (auto _ : st) benchmark::DoNotOptimize(exe->run(in));
  st.counters["GFLOP/s"] = benchmark::Counter(double(flops) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK_CAPTURE(BM_model, resnet18, "resnet18")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_model, inception_v3, "inception_v3")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_model, csrnet, "csrnet")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_model, r3d_18, "r3d_18")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_model, bert_base, "bert_hand_op17")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
