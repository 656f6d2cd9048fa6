// The cuda backend: a graph compiled into steps on one CUDA stream. Convolutions through
// cuDNN (the legacy API: its Find call measures every algorithm - implicit GEMM, FFT,
// Winograd, ... - on the real shapes, which is the choice by measurement the cost model
// needs; the v9 graph API would add engine heuristics this backend does not use yet), with
// bias, a residual Add and ReLU fused into one cudnnConvolutionBiasActivationForward where
// the graph allows; matrix products through cuBLAS (strided batched, row-major by the
// transposed-product identity); softmax and pooling through cuDNN; data movement,
// element-wise ops and layer normalisation through pet's kernels (kernels.cu). Ops without a
// GPU path run on the host with the reference interpreter, named in the plan. Device memory
// is planned by lifetime (pet/backend/buffer_plan.hpp) once every step is known: a buffer is
// reused once its last reader has run; inputs and outputs keep their own. timed_run times the
// steps alone with CUDA events (inputs placed first, outputs left on the device), which is
// what the profiler and the optimizer's races measure. TF32 is off unless the backend is made
// with BackendOptions::tf32 (pet run/optimize --tf32), so results match the reference.
// Every executable of one backend shares a CudaContext (stream, library handles, the
// convolution workspace): the profiler compiles a program per op it times, and a cuDNN handle
// per compile would cost more than most ops. cuDNN's algorithm choice per convolution
// configuration is kept in the shared algorithm cache (pet/backend/algorithm_cache.hpp), keyed
// by the device and library versions, so a configuration is measured once per GPU.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <climits>
#include <functional>
#include <map>
#include <mutex>

#include "kernels.hpp"
#include "pet/backend/algorithm_cache.hpp"
#include "pet/backend/buffer_plan.hpp"
#include "pet/backend/cuda.hpp"
#include "pet/eval/interpreter.hpp"
#include "pet/transform/pass.hpp"

namespace pet::backend {
namespace {

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Unsupported(cat("CUDA: ", what, ": ", cudaGetErrorString(e)));
}
void cublas_ok(cublasStatus_t e, const char* what) {
  if (e != CUBLAS_STATUS_SUCCESS) throw Unsupported(cat("cuBLAS: ", what, ": status ", int(e)));
}
void cudnn_ok(cudnnStatus_t e, const char* what) {
  if (e != CUDNN_STATUS_SUCCESS) throw Unsupported(cat("cuDNN: ", what, ": ", cudnnGetErrorString(e)));
}

/// The device this process uses; Unsupported with the reason when there is none.
void require_device() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0)
    throw Unsupported(cat("no CUDA device (", e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports 0 devices",
                          "); run on a machine with an NVIDIA GPU, or use --backend cpu"));
}

/// cuDNN's forward convolution algorithms, with the names pet's plans and caches use.
constexpr std::pair<cudnnConvolutionFwdAlgo_t, std::string_view> kConvAlgos[] = {
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, "implicit-gemm"},
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, "implicit-precomp-gemm"},
    {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, "gemm"},
    {CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, "direct"},
    {CUDNN_CONVOLUTION_FWD_ALGO_FFT, "fft"},
    {CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, "fft-tiling"},
    {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, "winograd"},
    {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, "winograd-nonfused"},
};

std::string_view conv_algo_name(cudnnConvolutionFwdAlgo_t a) {
  for (const auto& [algo, name] : kConvAlgos)
    if (algo == a) return name;
  return "other";
}
std::optional<cudnnConvolutionFwdAlgo_t> conv_algo_named(std::string_view n) {
  for (const auto& [algo, name] : kConvAlgos)
    if (name == n) return algo;
  return std::nullopt;
}

/// A device buffer of floats (owned, or a view of another).
struct DevBuf {
  std::shared_ptr<float> mem;
  float* ptr = nullptr;
};

DevBuf dev_alloc(int64_t n) {
  float* p = nullptr;
  cuda_ok(cudaMalloc(reinterpret_cast<void**>(&p), size_t(std::max<int64_t>(n, 1)) * sizeof(float)), "cudaMalloc");
  return {std::shared_ptr<float>(p, [](float* q) { cudaFree(q); }), p};
}

/// What every executable of one backend shares (see the top of this file). Steps run one
/// at a time on the one stream, so one convolution workspace serves them all; it grows to
/// the largest a step asks for, and a step asks for it when it runs.
class CudaContext {
 public:
  explicit CudaContext(bool tf32) : tf32(tf32) {
    require_device();
    int dev = 0;
    cudaDeviceProp prop{};
    cuda_ok(cudaGetDevice(&dev), "cudaGetDevice");
    cuda_ok(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
    int rt = 0;
    cuda_ok(cudaRuntimeGetVersion(&rt), "cudaRuntimeGetVersion");
    int blas_version = 0;
    cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate");
    cuda_ok(cudaEventCreate(&start), "cudaEventCreate");
    cuda_ok(cudaEventCreate(&stop), "cudaEventCreate");
    cublas_ok(cublasCreate(&blas), "cublasCreate");
    cublas_ok(cublasSetStream(blas, stream), "cublasSetStream");
    cublas_ok(cublasSetMathMode(blas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
    cublas_ok(cublasGetVersion(blas, &blas_version), "cublasGetVersion");
    cudnn_ok(cudnnCreate(&dnn), "cudnnCreate");
    cudnn_ok(cudnnSetStream(dnn, stream), "cudnnSetStream");
    // The timings and algorithm choices of one GPU are not another's: the device is part of
    // the version (and so of every cache key), with the libraries and pet's kernel revision.
    version = cat("cuda-rt ", rt, ", cudnn ", cudnnGetVersion(), ", cublas ", blas_version, ", ", prop.name, " sm_", prop.major, prop.minor,
                  ", pet-cuda-kernels 2", tf32 ? ", tf32" : "");
  }
  ~CudaContext() {
    if (stream) cudaStreamSynchronize(stream);
    ws_ = {};
    if (dnn) cudnnDestroy(dnn);
    if (blas) cublasDestroy(blas);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (stream) cudaStreamDestroy(stream);
  }
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  /// The shared workspace, at least `bytes` large. Growing it waits for the stream first
  /// (queued steps may still use the old one).
  void* workspace(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes > ws_bytes_) {
      cuda_ok(cudaStreamSynchronize(stream), "workspace");
      ws_ = {};
      ws_ = dev_alloc(int64_t(bytes / sizeof(float)) + 1);
      ws_bytes_ = bytes;
    }
    return ws_.ptr;
  }

  const bool tf32;
  std::string version;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  cublasHandle_t blas = nullptr;
  cudnnHandle_t dnn = nullptr;

 private:
  std::mutex mu_;
  DevBuf ws_;
  size_t ws_bytes_ = 0;
};

class CudaExecutable final : public Executable {
 public:
  CudaExecutable(std::shared_ptr<CudaContext> ctx, const Graph& original, const CompileOptions& opt)
      : ctx_(std::move(ctx)), stream_(ctx_->stream), blas_(ctx_->blas), dnn_(ctx_->dnn), algorithm_cache_(opt.algorithm_cache) {
    g_ = original;
    transform::PipelineOptions po;
    po.disabled = transform::pass_list(opt.disabled_passes);
    po.print_after = transform::pass_list(opt.print_after);
    transform::backend_pipeline().run(g_, po);
    sid_.assign(size_t(g_.num_tensors()), -1);
    host_.resize(size_t(g_.num_tensors()));
    consumers_ = g_.consumers();
    absorbed_.assign(size_t(g_.num_nodes()), false);
    for (TensorId t = 0; t < g_.num_tensors(); ++t) {
      const TensorInfo& info = g_.tensor(t);
      if (!info.is_constant()) continue;
      if (is_float(info.type.dtype)) {
        const auto& v = std::get<Tensor<float>>(*info.value);
        const int s = new_storage(v.size());
        store_[size_t(s)].constant = true;
        store_[size_t(s)].buf = dev_alloc(v.size());
        sid_[size_t(t)] = s;
        cuda_ok(cudaMemcpy(sptr(s), v.data(), size_t(v.size()) * sizeof(float), cudaMemcpyHostToDevice), "upload a constant");
      } else {
        host_[size_t(t)] = const_ints(*info.value);
      }
    }
    for (TensorId t : g_.inputs())
      if (is_float(g_.type(t).dtype)) store_[size_t(define(t))].pinned = true;
    for (NodeId n : g_.topo_order()) lower(n);
    for (TensorId t : g_.outputs())
      if (sid_[size_t(t)] >= 0) store_[size_t(sid_[size_t(t)])].pinned = true;
    plan_memory();
  }

  ~CudaExecutable() override {
    cudaStreamSynchronize(stream_);  // nothing queued may outlive the buffers
    steps_.clear();
  }

  std::vector<Value<float>> run(std::span<const Value<float>> inputs) override {
    place_inputs(inputs);
    run_steps();
    std::vector<Value<float>> out;
    for (TensorId t : g_.outputs()) {
      if (is_float(g_.type(t).dtype)) {
        Tensor<float> y(g_.type(t).shape);
        cuda_ok(cudaMemcpyAsync(y.data(), dptr(t), size_t(y.size()) * sizeof(float), cudaMemcpyDeviceToHost, stream_), "output");
        out.emplace_back(y);
      } else {
        out.emplace_back(host_[size_t(t)].value());
      }
    }
    cuda_ok(cudaStreamSynchronize(stream_), "run");
    return out;
  }

  double timed_run(std::span<const Value<float>> inputs) override {
    place_inputs(inputs);
    cuda_ok(cudaStreamSynchronize(stream_), "inputs");
    cuda_ok(cudaEventRecord(ctx_->start, stream_), "cudaEventRecord");
    run_steps();
    cuda_ok(cudaEventRecord(ctx_->stop, stream_), "cudaEventRecord");
    cuda_ok(cudaEventSynchronize(ctx_->stop), "run");
    float ms = 0;
    cuda_ok(cudaEventElapsedTime(&ms, ctx_->start, ctx_->stop), "cudaEventElapsedTime");
    return double(ms);
  }

  std::string describe() const override {
    std::string s;
    for (const auto& st : steps_) s += st.text + "\n";
    s += cat("device memory: ", buffers_, " buffers, ", planned_bytes_ / 1024, " KiB (", requested_bytes_ / 1024, " KiB without reuse), constants ",
             constant_bytes_ / 1024, " KiB, convolution workspace ", workspace_bytes_ / 1024, " KiB (shared)\n");
    return s;
  }

 private:
  struct Step {
    std::string text;
    std::function<void()> fn;
    std::vector<int> reads, writes;  ///< storages
  };
  /// A float tensor's device memory (tensors that are views share one), placed by plan_memory.
  struct Storage {
    int64_t floats = 0;
    bool constant = false, pinned = false;
    DevBuf buf;
  };
  std::shared_ptr<CudaContext> ctx_;
  cudaStream_t stream_;
  cublasHandle_t blas_;
  cudnnHandle_t dnn_;
  std::string algorithm_cache_;
  Graph g_;
  std::vector<Storage> store_;
  std::vector<int> sid_;                           ///< float tensor -> storage (-1: none)
  std::vector<std::optional<Tensor<int64_t>>> host_;  ///< integer tensors, on the host
  std::vector<std::vector<NodeId>> consumers_;
  std::vector<bool> absorbed_;                     ///< nodes computed by an earlier step (fused)
  std::vector<Step> steps_;
  std::vector<std::shared_ptr<void>> keep_;        ///< descriptors and workspaces the steps use
  size_t buffers_ = 0, planned_bytes_ = 0, requested_bytes_ = 0, constant_bytes_ = 0, workspace_bytes_ = 0;

  int new_storage(int64_t floats) {
    store_.push_back({floats, false, false, {}});
    return int(store_.size()) - 1;
  }
  float* sptr(int s) { return store_[size_t(s)].buf.ptr; }
  float* dptr(TensorId t) { return sptr(sid_[size_t(t)]); }
  int sid(TensorId t) const { return sid_[size_t(t)]; }
  /// A storage for tensor t (placed later, by plan_memory).
  int define(TensorId t) {
    sid_[size_t(t)] = new_storage(numel(g_.type(t).shape));
    return sid_[size_t(t)];
  }
  /// Memory to run a step once at compile time (cuDNN's Find, a trial of a fused call):
  /// the storage's own when placed (constants), else a scratch buffer of its size.
  DevBuf trial_buffer(int s) {
    if (store_[size_t(s)].buf.ptr) return store_[size_t(s)].buf;
    return dev_alloc(store_[size_t(s)].floats);
  }
  void add_step(std::string text, std::vector<int> reads, std::vector<int> writes, std::function<void()> fn) {
    steps_.push_back({std::move(text), std::move(fn), std::move(reads), std::move(writes)});
  }
  std::vector<int> sids(std::initializer_list<TensorId> ts) const {
    std::vector<int> r;
    for (TensorId t : ts)
      if (t >= 0 && sid_[size_t(t)] >= 0) r.push_back(sid_[size_t(t)]);
    return r;
  }

  /// Every step in order; a launch that failed (pet's kernels report nothing themselves: a
  /// bad configuration, no kernel image for this GPU) is an error naming its step, not a
  /// silently unwritten buffer. cudaGetLastError costs no synchronisation.
  void run_steps() {
    for (auto& s : steps_) {
      s.fn();
      if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) throw Unsupported(cat("CUDA: ", s.text, ": ", cudaGetErrorString(e)));
    }
  }

  void place_inputs(std::span<const Value<float>> inputs) {
    PET_CHECK(inputs.size() == g_.inputs().size(), "cuda: ", inputs.size(), " inputs for ", g_.inputs().size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const TensorId t = g_.inputs()[i];
      if (const auto* f = std::get_if<Tensor<float>>(&inputs[i]))
        cuda_ok(cudaMemcpyAsync(dptr(t), f->data(), size_t(f->size()) * sizeof(float), cudaMemcpyHostToDevice, stream_), "input");
      else host_[size_t(t)] = std::get<Tensor<int64_t>>(inputs[i]);
    }
  }

  /// Every non-constant storage gets a device buffer by lifetime: live from the first step
  /// that writes it to the last that reads it; the program's inputs and outputs are pinned.
  void plan_memory() {
    std::vector<BufferRequest> req(store_.size());
    for (size_t s = 0; s < store_.size(); ++s) req[s] = {size_t(std::max<int64_t>(store_[s].floats, 1)) * sizeof(float), INT_MAX, -1, store_[s].pinned};
    for (size_t i = 0; i < steps_.size(); ++i) {
      for (int s : steps_[i].writes) req[size_t(s)].first = std::min(req[size_t(s)].first, int(i)), req[size_t(s)].last = std::max(req[size_t(s)].last, int(i));
      for (int s : steps_[i].reads) req[size_t(s)].last = std::max(req[size_t(s)].last, int(i));
    }
    std::vector<BufferRequest> planned;
    std::vector<size_t> which;
    for (size_t s = 0; s < store_.size(); ++s) {
      if (store_[s].constant) {
        constant_bytes_ += req[s].bytes;
        continue;
      }
      if (req[s].first == INT_MAX) req[s].first = 0;  // read but never written: an input
      planned.push_back(req[s]);
      which.push_back(s);
    }
    const BufferPlan plan = plan_buffers(planned);
    std::vector<DevBuf> bufs;
    for (size_t bytes : plan.buffer_bytes) bufs.push_back(dev_alloc(int64_t(bytes / sizeof(float))));
    for (size_t i = 0; i < which.size(); ++i) store_[which[i]].buf = bufs[size_t(plan.buffer_of[i])];
    buffers_ = bufs.size();
    planned_bytes_ = plan.planned_bytes;
    requested_bytes_ = plan.requested_bytes;
  }

  bool all_float(NodeId n) const {
    for (TensorId t : g_.node(n).inputs)
      if (!is_float(g_.type(t).dtype)) return false;
    for (TensorId t : g_.node(n).outputs)
      if (!is_float(g_.type(t).dtype)) return false;
    return true;
  }
  std::string who(NodeId n) const { return cat(op_name(g_.node(n).op), " '", g_.node(n).name, "'"); }
  /// The node that alone reads t, when t is not a program output.
  std::optional<NodeId> sole_consumer(TensorId t) const {
    if (g_.is_output(t) || consumers_[size_t(t)].size() != 1) return std::nullopt;
    return consumers_[size_t(t)][0];
  }

  void lower(NodeId n) {
    const Node& node = g_.node(n);
    const Op& op = node.op;
    if (absorbed_[size_t(n)]) return;
    if (holds_any<ops::Reshape, ops::Flatten, ops::Squeeze, ops::Unsqueeze, ops::Identity>(op) && is_float(g_.type(node.inputs[0]).dtype)) {
      sid_[size_t(node.outputs[0])] = sid(node.inputs[0]);  // a view
      add_step(cat(who(n), ": view"), {}, {}, [] {});
      return;
    }
    const Types in = g_.input_types(n), out = g_.output_types(n);
    if (!in.empty() && !out.empty() && is_float(out[0].dtype) && is_float(in[0].dtype)) {
      if (auto plan = copy_plan(op, in, out)) return lower_copies(n, *plan);
      if (all_float(n) && in.size() == 1 && out.size() == 1 && cuda::has_unary_kernel(op)) {
        const TensorId x = node.inputs[0], y = node.outputs[0];
        define(y);
        const int64_t cnt = numel(out[0].shape);
        add_step(cat(who(n), ": pet element-wise kernel"), sids({x}), sids({y}),
                 [this, op, x, y, cnt] { cuda::launch_unary(op, dptr(x), dptr(y), cnt, stream_); });
        return;
      }
      if (auto k = cuda::binary_kind(op); k && all_float(n)) {
        const cuda::DevBroadcast br = cuda::make_dev_broadcast(in[0].shape, in[1].shape, out[0].shape);
        const TensorId a = node.inputs[0], b = node.inputs[1], y = node.outputs[0];
        define(y);
        add_step(cat(who(n), ": pet broadcasting kernel"), sids({a, b}), sids({y}),
                 [this, k = *k, br, a, b, y] { cuda::launch_binary(k, br, dptr(a), dptr(b), dptr(y), stream_); });
        return;
      }
      if (const auto* m = std::get_if<ops::MatMul>(&op); m && all_float(n) && lower_matmul(n)) return;
      if (const auto* gm = std::get_if<ops::Gemm>(&op); gm && all_float(n) && lower_gemm(n, *gm)) return;
      if (const auto* c = std::get_if<ops::Conv>(&op); c && all_float(n) && lower_conv(n, *c)) return;
      if (const auto* s = std::get_if<ops::Softmax>(&op); s && lower_softmax(n, *s)) return;
      if (const auto* l = std::get_if<ops::LayerNormalization>(&op); l && lower_layer_norm(n, *l)) return;
      if (lower_pool(n)) return;
    }
    lower_on_host(n);
  }

  void lower_copies(NodeId n, const std::vector<BoxCopy>& plan) {
    const Node& node = g_.node(n);
    for (TensorId t : node.outputs) define(t);
    for (const BoxCopy& c : plan) {
      const TensorId dst = node.outputs[size_t(c.dst)];
      add_copy_step(who(n), c, sid(node.inputs[size_t(c.src)]), sid(dst), numel(g_.type(dst).shape));
    }
  }

  /// One box copy of a plan from storage src into dst (filled first where the copy says).
  void add_copy_step(const std::string& who_text, const BoxCopy& c, int src, int dst, int64_t dst_count) {
    const cuda::DevBox box = cuda::make_dev_box(c);
    const auto tile = cuda::make_dev_tile(box);
    add_step(cat(who_text, ": pet ", tile ? "tiled " : "", c.what), {src}, {dst}, [this, c, src, dst, dst_count, box, tile] {
      if (c.fill_first) cuda::launch_fill(sptr(dst), dst_count, c.fill_value, stream_);
      if (tile) cuda::launch_tile_copy(*tile, sptr(src), sptr(dst), stream_);
      else cuda::launch_box_copy(box, sptr(src), sptr(dst), stream_);
    });
  }

  /// Row-major C[b] = A[b] B[b] as the column-major C^T = B^T A^T; a batch operand is either
  /// full or broadcast (stride 0).
  bool lower_matmul(NodeId n) {
    const Node& node = g_.node(n);
    Shape a = g_.type(node.inputs[0]).shape, b = g_.type(node.inputs[1]).shape;
    if (a.size() < 2 || b.size() < 2) return false;
    const Shape& ys = g_.type(node.outputs[0]).shape;
    int64_t m = a[a.size() - 2], k = a.back(), nn = b.back();
    const int64_t batch = numel(ys) / (ys[ys.size() - 2] * ys.back());
    const int64_t a_batch = numel(a) / (m * k), b_batch = numel(b) / (k * nn);
    if (b_batch == 1 && a_batch > 1) m *= a_batch;  // A's leading dims are rows: one GEMM
    const bool one = b_batch == 1 && (a_batch == batch || a_batch == 1);
    if (!one && !((a_batch == batch || a_batch == 1) && (b_batch == batch || b_batch == 1))) return false;
    const int64_t count = one ? 1 : batch;
    const long long sa = a_batch == 1 ? 0 : m * k, sb = b_batch == 1 ? 0 : k * nn, sc = m * nn;
    const TensorId ta = node.inputs[0], tb = node.inputs[1], y = node.outputs[0];
    define(y);
    add_step(cat(who(n), " ", a, "x", b, ": cuBLAS sgemm", count > 1 ? " strided batched" : ""), sids({ta, tb}), sids({y}), [=, this] {
      const float one_f = 1.f, zero_f = 0.f;
      cublas_ok(cublasSgemmStridedBatched(blas_, CUBLAS_OP_N, CUBLAS_OP_N, int(nn), int(m), int(k), &one_f, dptr(tb), int(nn), sb, dptr(ta), int(k), sa,
                                          &zero_f, dptr(y), int(nn), sc, int(count)),
                "sgemm");
    });
    return true;
  }

  bool lower_gemm(NodeId n, const ops::Gemm& gm) {
    const Node& node = g_.node(n);
    const Shape &a = g_.type(node.inputs[0]).shape, &b = g_.type(node.inputs[1]).shape;
    const int64_t m = gm.trans_a ? a[1] : a[0], k = gm.trans_a ? a[0] : a[1], nn = gm.trans_b ? b[0] : b[1];
    const TensorId ta = node.inputs[0], tb = node.inputs[1], y = node.outputs[0];
    define(y);
    std::optional<cuda::DevBox> bias;
    TensorId tc = -1;
    if (node.inputs.size() == 3) {  // C broadcast into Y first; the GEMM adds to it with beta
      tc = node.inputs[2];
      const Shape& cs = g_.type(tc).shape;
      BoxCopy c;
      c.shape = {m, nn};
      c.dst_strides = {nn, 1};
      const auto own = strides_of(cs);
      c.src_strides.assign(2, 0);
      for (size_t i = 0; i < cs.size(); ++i) c.src_strides[2 - cs.size() + i] = cs[i] == 1 ? 0 : own[i];
      bias = cuda::make_dev_box(c);
    }
    const float alpha = gm.alpha, beta = bias ? gm.beta : 0.f;
    add_step(cat(who(n), ": cuBLAS sgemm", bias ? " + C" : ""), sids({ta, tb, tc}), sids({y}), [=, this] {
      if (bias) cuda::launch_box_copy(*bias, dptr(tc), dptr(y), stream_);
      cublas_ok(cublasSgemm(blas_, gm.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, gm.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, int(nn), int(m), int(k), &alpha,
                            dptr(tb), int(gm.trans_b ? k : nn), dptr(ta), int(gm.trans_a ? m : k), &beta, dptr(y), int(nn)),
                "sgemm");
    });
    return true;
  }

  /// An N-d descriptor of a plain tensor (rank >= 4: cuDNN's minimum; 1-D convs gain a unit dim).
  std::shared_ptr<cudnnTensorStruct> tensor_desc(Shape s) {
    while (s.size() < 4) s.push_back(1);
    cudnnTensorDescriptor_t d;
    cudnn_ok(cudnnCreateTensorDescriptor(&d), "tensor descriptor");
    std::shared_ptr<cudnnTensorStruct> p(d, [](cudnnTensorDescriptor_t q) { cudnnDestroyTensorDescriptor(q); });
    std::vector<int> dims(s.begin(), s.end()), st(s.size());
    for (int i = int(s.size()) - 1, acc = 1; i >= 0; --i) st[size_t(i)] = acc, acc *= dims[size_t(i)];
    cudnn_ok(cudnnSetTensorNdDescriptor(d, CUDNN_DATA_FLOAT, int(dims.size()), dims.data(), st.data()), "tensor descriptor");
    keep_.push_back(p);
    return p;
  }

  /// What follows a conv that its one cuDNN call can compute too: y = relu(conv + bias + z),
  /// with z the other operand of an Add of the same shape (already computed, a residual) and
  /// the Relu reading the Add (or the conv) alone. cuDNN's fused call takes ReLU with every
  /// algorithm (an identity activation only with implicit precomputed GEMM), so only chains
  /// that end in a Relu are fused.
  struct ConvTail {
    NodeId add = -1, relu = -1;
    TensorId z = -1, out = -1;
  };
  std::optional<ConvTail> conv_tail(TensorId y) const {
    ConvTail t;
    auto c = sole_consumer(y);
    if (!c) return std::nullopt;
    if (std::holds_alternative<ops::Add>(g_.node(*c).op)) {
      const Node& add = g_.node(*c);
      const TensorId z = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
      if (add.inputs[0] == add.inputs[1] || !is_float(g_.type(z).dtype) || g_.type(z).shape != g_.type(y).shape || sid(z) < 0) return std::nullopt;
      t.add = *c, t.z = z;
      c = sole_consumer(add.outputs[0]);
      if (!c) return std::nullopt;
    }
    if (!std::holds_alternative<ops::Relu>(g_.node(*c).op)) return std::nullopt;
    t.relu = *c;
    t.out = g_.node(*c).outputs[0];
    return t;
  }

  bool lower_conv(NodeId n, const ops::Conv& c) {
    const Node& node = g_.node(n);
    const Shape &xs0 = g_.type(node.inputs[0]).shape, &ws = g_.type(node.inputs[1]).shape, &ys = g_.type(node.outputs[0]).shape;
    const size_t sp = xs0.size() - 2;
    if (sp < 1 || sp > 3) return false;
    const TensorId w = node.inputs[1], y = node.outputs[0];
    int xsid = sid(node.inputs[0]);
    Shape xs = xs0;
    std::vector<int> pad(sp), stride(sp), dil(sp);
    bool asymmetric = false;
    for (size_t i = 0; i < sp; ++i) asymmetric = asymmetric || c.pads[i] != c.pads[i + sp];
    std::string padded;
    if (asymmetric) {  // cuDNN pads symmetrically: a zero Pad into a scratch tensor first (its copy plan)
      ops::Pad po;
      po.pads.assign(2 * xs0.size(), 0);
      Shape ps = xs0;
      for (size_t i = 0; i < sp; ++i) {
        po.pads[2 + i] = c.pads[i], po.pads[xs0.size() + 2 + i] = c.pads[i + sp];
        ps[2 + i] += c.pads[i] + c.pads[i + sp];
      }
      const auto plan = copy_plan(po, Types{{DType::Float32, xs0}}, Types{{DType::Float32, ps}});
      if (!plan) return false;
      const int psid = new_storage(numel(ps));
      for (const BoxCopy& bc : *plan) add_copy_step(cat(who(n), " (asymmetric pads)"), bc, xsid, psid, numel(ps));
      xsid = psid;
      xs = ps;
      padded = ", input padded";
    }
    for (size_t i = 0; i < sp; ++i) pad[i] = asymmetric ? 0 : int(c.pads[i]), stride[i] = int(c.strides[i]), dil[i] = int(c.dilations[i]);
    Shape wshape = ws;
    if (sp == 1) pad.push_back(0), stride.push_back(1), dil.push_back(1), wshape.push_back(1);
    auto xd = tensor_desc(xs), yd = tensor_desc(ys);
    cudnnFilterDescriptor_t wd;
    cudnn_ok(cudnnCreateFilterDescriptor(&wd), "filter descriptor");
    keep_.push_back(std::shared_ptr<cudnnFilterStruct>(wd, [](cudnnFilterDescriptor_t q) { cudnnDestroyFilterDescriptor(q); }));
    std::vector<int> wdims(wshape.begin(), wshape.end());
    cudnn_ok(cudnnSetFilterNdDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, int(wdims.size()), wdims.data()), "filter descriptor");
    cudnnConvolutionDescriptor_t cd;
    cudnn_ok(cudnnCreateConvolutionDescriptor(&cd), "convolution descriptor");
    keep_.push_back(std::shared_ptr<cudnnConvolutionStruct>(cd, [](cudnnConvolutionDescriptor_t q) { cudnnDestroyConvolutionDescriptor(q); }));
    cudnn_ok(cudnnSetConvolutionNdDescriptor(cd, int(pad.size()), pad.data(), stride.data(), dil.data(), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
             "convolution descriptor");
    cudnn_ok(cudnnSetConvolutionGroupCount(cd, int(c.group)), "group count");
    cudnn_ok(cudnnSetConvolutionMathType(cd, ctx_->tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH), "math type");
    const int ysid = define(y);
    // cuDNN's algorithm by measurement (its Find times each on the real shapes), once per
    // configuration and GPU: the choice is kept in the algorithm cache.
    const std::string cache_key = cat("cuda@", ctx_->version, "|", op_signature(node.op), "|", xs, ws, ys);
    std::optional<cudnnConvolutionFwdAlgo_t> algo;
    size_t wsize = 0;
    std::string chosen_how;
    if (auto kept = AlgorithmCache::instance().get(algorithm_cache_, cache_key)) {
      algo = conv_algo_named(*kept);
      // A kept algorithm this cuDNN no longer runs on these shapes is chosen again.
      if (algo && cudnnGetConvolutionForwardWorkspaceSize(dnn_, xd.get(), wd, cd, yd.get(), *algo, &wsize) != CUDNN_STATUS_SUCCESS) algo.reset();
      if (algo) chosen_how = "cached choice";
    }
    if (!algo) {
      // Scratch buffers of the real shapes (their values do not matter), and a Find
      // workspace of up to 1 GiB, less on a GPU with less free memory.
      DevBuf tx = trial_buffer(xsid), tw = trial_buffer(sid(w)), ty = trial_buffer(ysid);
      size_t free_bytes = 0, total_bytes = 0;
      cuda_ok(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
      const size_t ws_limit = std::min(size_t(1) << 30, free_bytes / 4);
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      int found = 0;
      {
        DevBuf scratch = dev_alloc(int64_t(ws_limit / sizeof(float)));
        cudnn_ok(cudnnFindConvolutionForwardAlgorithmEx(dnn_, xd.get(), tx.ptr, wd, tw.ptr, cd, yd.get(), ty.ptr, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found,
                                                        perf, scratch.ptr, ws_limit),
                 cat(who(n), ": find a convolution algorithm").c_str());
      }
      for (int i = 0; i < found && !algo; ++i)
        if (perf[i].status == CUDNN_STATUS_SUCCESS) algo = perf[i].algo, wsize = perf[i].memory, chosen_how = cat(perf[i].time, " ms when chosen");
      if (!algo) return false;
      AlgorithmCache::instance().put(algorithm_cache_, cache_key, std::string(conv_algo_name(*algo)));
    }
    const cudnnConvolutionFwdAlgo_t a = *algo;
    ctx_->workspace(wsize);
    workspace_bytes_ = std::max(workspace_bytes_, wsize);
    CudaContext* ctx = ctx_.get();
    Shape bs(std::max<size_t>(xs.size(), 4), 1);
    bs[1] = ws[0];
    const TensorId b = node.inputs.size() == 3 ? node.inputs[2] : -1;
    auto bd = tensor_desc(bs);
    std::vector<int> reads{xsid, sid(w)};
    if (b >= 0) reads.push_back(sid(b));

    // Bias, residual and ReLU in the same call, when cuDNN accepts it on these shapes (tried once here).
    if (auto tail = conv_tail(y)) {
      cudnnActivationDescriptor_t ad;
      cudnn_ok(cudnnCreateActivationDescriptor(&ad), "activation descriptor");
      keep_.push_back(std::shared_ptr<cudnnActivationStruct>(ad, [](cudnnActivationDescriptor_t q) { cudnnDestroyActivationDescriptor(q); }));
      cudnn_ok(cudnnSetActivationDescriptor(ad, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0), "activation descriptor");
      DevBuf zero_bias;
      if (b < 0) {
        zero_bias = dev_alloc(ws[0]);
        cuda_ok(cudaMemset(zero_bias.ptr, 0, size_t(ws[0]) * sizeof(float)), "zero bias");
        keep_.push_back(zero_bias.mem);
        constant_bytes_ += size_t(ws[0]) * sizeof(float);
      }
      DevBuf tx = trial_buffer(xsid), tw = trial_buffer(sid(w)), ty = trial_buffer(ysid);
      DevBuf tb = b >= 0 ? trial_buffer(sid(b)) : zero_bias;
      DevBuf tz = tail->z >= 0 ? trial_buffer(sid(tail->z)) : ty;
      const float one = 1.f, zero = 0.f;
      const cudnnStatus_t st = cudnnConvolutionBiasActivationForward(dnn_, &one, xd.get(), tx.ptr, wd, tw.ptr, cd, a, ctx_->workspace(wsize), wsize,
                                                                     tail->z >= 0 ? &one : &zero, yd.get(), tz.ptr, bd.get(), tb.ptr, ad, yd.get(), ty.ptr);
      cuda_ok(cudaStreamSynchronize(stream_), "fused convolution trial");
      if (st == CUDNN_STATUS_SUCCESS) {
        absorbed_[size_t(tail->relu)] = true;
        if (tail->add >= 0) absorbed_[size_t(tail->add)] = true;
        // The chain's tensors are the conv's output: the Add's (if any) and the Relu's.
        if (tail->add >= 0) sid_[size_t(g_.node(tail->add).outputs[0])] = ysid;
        sid_[size_t(tail->out)] = ysid;
        const TensorId z = tail->z;
        const float* zb = zero_bias.ptr;
        if (z >= 0) reads.push_back(sid(z));
        add_step(cat(who(n), ": cuDNN fused convolution ", conv_algo_name(a), " (", chosen_how, ")", padded, b >= 0 ? " + bias" : "",
                     z >= 0 ? cat(" + ", who(tail->add)) : std::string(), " + ", who(tail->relu)),
                 reads, {ysid}, [=, this] {
                   const float one_f = 1.f, alpha2 = z >= 0 ? 1.f : 0.f;
                   cudnn_ok(cudnnConvolutionBiasActivationForward(dnn_, &one_f, xd.get(), sptr(xsid), wd, dptr(w), cd, a, ctx->workspace(wsize), wsize, &alpha2,
                                                                  yd.get(), z >= 0 ? dptr(z) : sptr(ysid), bd.get(), b >= 0 ? dptr(b) : zb, ad, yd.get(),
                                                                  sptr(ysid)),
                            "fused convolution");
                 });
        return true;
      }
    }
    add_step(cat(who(n), ": cuDNN convolution ", conv_algo_name(a), " (", chosen_how, ")", padded, b >= 0 ? " + bias" : ""), reads,
             {ysid}, [=, this] {
               const float one = 1.f, zero = 0.f;
               cudnn_ok(cudnnConvolutionForward(dnn_, &one, xd.get(), sptr(xsid), wd, dptr(w), cd, a, ctx->workspace(wsize), wsize, &zero, yd.get(), sptr(ysid)),
                        "convolution");
               if (b >= 0) cudnn_ok(cudnnAddTensor(dnn_, &one, bd.get(), dptr(b), &one, yd.get(), sptr(ysid)), "bias");
             });
    return true;
  }

  /// MaxPool (without indices or dilation), AveragePool and GlobalAveragePool through cuDNN,
  /// where cuDNN's window arithmetic gives the op's output shape (symmetric pads; ceil_mode
  /// only where it changes nothing): else the host.
  bool lower_pool(NodeId n) {
    const Node& node = g_.node(n);
    const Op& op = node.op;
    const Shape& xs = g_.type(node.inputs[0]).shape;
    const Shape& ys = g_.type(node.outputs[0]).shape;
    const size_t sp = xs.size() - 2;
    if (xs.size() < 3 || sp > 3 || node.outputs.size() != 1) return false;
    std::vector<int> win(sp), pad(sp), stride(sp);
    cudnnPoolingMode_t mode;
    if (const auto* m = std::get_if<ops::MaxPool>(&op)) {
      if (m->num_outputs != 1) return false;
      for (int64_t d : m->dilations)
        if (d != 1) return false;
      mode = CUDNN_POOLING_MAX_DETERMINISTIC;
      for (size_t i = 0; i < sp; ++i) {
        if (m->pads[i] != m->pads[i + sp]) return false;
        win[i] = int(m->kernel_shape[i]), pad[i] = int(m->pads[i]), stride[i] = int(m->strides[i]);
      }
    } else if (const auto* a = std::get_if<ops::AveragePool>(&op)) {
      for (int64_t d : a->dilations)
        if (d != 1) return false;
      mode = a->count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
      for (size_t i = 0; i < sp; ++i) {
        if (a->pads[i] != a->pads[i + sp]) return false;
        win[i] = int(a->kernel_shape[i]), pad[i] = int(a->pads[i]), stride[i] = int(a->strides[i]);
      }
    } else if (std::holds_alternative<ops::GlobalAveragePool>(op)) {
      mode = CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
      for (size_t i = 0; i < sp; ++i) win[i] = int(xs[2 + i]), pad[i] = 0, stride[i] = 1;
    } else {
      return false;
    }
    if (sp == 1) win.push_back(1), pad.push_back(0), stride.push_back(1);
    cudnnPoolingDescriptor_t pd;
    cudnn_ok(cudnnCreatePoolingDescriptor(&pd), "pooling descriptor");
    keep_.push_back(std::shared_ptr<cudnnPoolingStruct>(pd, [](cudnnPoolingDescriptor_t q) { cudnnDestroyPoolingDescriptor(q); }));
    cudnn_ok(cudnnSetPoolingNdDescriptor(pd, mode, CUDNN_PROPAGATE_NAN, int(win.size()), win.data(), pad.data(), stride.data()), "pooling descriptor");
    auto xd = tensor_desc(xs);
    Shape ys4 = ys;
    while (ys4.size() < 4) ys4.push_back(1);
    std::vector<int> got(ys4.size());
    if (cudnnGetPoolingNdForwardOutputDim(pd, xd.get(), int(got.size()), got.data()) != CUDNN_STATUS_SUCCESS) return false;
    for (size_t i = 0; i < got.size(); ++i)
      if (int64_t(got[i]) != ys4[i]) return false;  // ceil_mode that adds a window: the host
    auto yd = tensor_desc(ys);
    const TensorId x = node.inputs[0], y = node.outputs[0];
    define(y);
    add_step(cat(who(n), ": cuDNN pooling"), sids({x}), sids({y}), [=, this] {
      const float one = 1.f, zero = 0.f;
      cudnn_ok(cudnnPoolingForward(dnn_, pd, &one, xd.get(), dptr(x), &zero, yd.get(), dptr(y)), "pooling");
    });
    return true;
  }

  bool lower_softmax(NodeId n, const ops::Softmax& s) {
    const Node& node = g_.node(n);
    const Shape& xs = g_.type(node.inputs[0]).shape;
    const size_t ax = size_t(s.axis);
    int64_t outer = 1, mid = 1, inner = 1;
    for (size_t i = 0; i < xs.size(); ++i) (i < ax ? outer : i == ax || s.flatten_tail ? mid : inner) *= xs[i];
    auto d = tensor_desc({outer, mid, inner, 1});
    const TensorId x = node.inputs[0], y = node.outputs[0];
    define(y);
    add_step(cat(who(n), ": cuDNN softmax"), sids({x}), sids({y}), [=, this] {
      const float one = 1.f, zero = 0.f;
      cudnn_ok(cudnnSoftmaxForward(dnn_, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one, d.get(), dptr(x), &zero, d.get(), dptr(y)), "softmax");
    });
    return true;
  }

  bool lower_layer_norm(NodeId n, const ops::LayerNormalization& l) {
    const Node& node = g_.node(n);
    if (node.outputs.size() != 1) return false;
    const Shape& xs = g_.type(node.inputs[0]).shape;
    int64_t cols = 1;
    const int64_t axis = l.axis < 0 ? l.axis + int64_t(xs.size()) : l.axis;
    for (size_t i = size_t(axis); i < xs.size(); ++i) cols *= xs[i];
    if (numel(g_.type(node.inputs[1]).shape) != cols) return false;
    if (node.inputs.size() > 2 && numel(g_.type(node.inputs[2]).shape) != cols) return false;
    const int64_t rows = numel(xs) / cols;
    const TensorId x = node.inputs[0], gamma = node.inputs[1], beta = node.inputs.size() > 2 ? node.inputs[2] : -1, y = node.outputs[0];
    define(y);
    const float eps = l.epsilon;
    add_step(cat(who(n), ": pet layer-norm kernel"), sids({x, gamma, beta}), sids({y}), [=, this] {
      cuda::launch_layer_norm(dptr(x), dptr(gamma), beta >= 0 ? dptr(beta) : nullptr, dptr(y), rows, cols, eps, stream_);
    });
    return true;
  }

  /// The op on the host: its inputs copied down, the reference interpreter, the outputs up.
  void lower_on_host(NodeId n) {
    const Node& node = g_.node(n);
    auto one = std::make_shared<Graph>();
    std::vector<TensorId> ids;
    std::vector<int> reads, writes;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const TensorInfo& info = g_.tensor(node.inputs[i]);
      if (info.is_constant() && !is_float(info.type.dtype)) ids.push_back(one->add_constant(cat("c", i), info.type.dtype, *info.value));
      else ids.push_back(one->add_input(cat("x", i), info.type));
      if (is_float(info.type.dtype)) reads.push_back(sid(node.inputs[i]));
    }
    for (TensorId t : one->add_node(node.name, node.op, ids)) one->add_output(t);
    for (TensorId t : node.outputs)
      if (is_float(g_.type(t).dtype)) writes.push_back(define(t));
    auto interp = std::make_shared<Interpreter<float>>(*one);
    keep_.push_back(one);
    add_step(cat(who(n), ": reference kernel on the host (no GPU path)"), reads, writes, [this, n, one, interp] {
      const Node& nd = g_.node(n);
      std::vector<Value<float>> in;
      for (size_t i = 0; i < nd.inputs.size(); ++i) {
        const TensorId t = nd.inputs[i];
        const TensorInfo& info = g_.tensor(t);
        if (info.is_constant() && !is_float(info.type.dtype)) continue;
        if (is_float(info.type.dtype)) {
          Tensor<float> v(info.type.shape);
          cuda_ok(cudaMemcpyAsync(v.data(), dptr(t), size_t(v.size()) * sizeof(float), cudaMemcpyDeviceToHost, stream_), "to host");
          in.emplace_back(v);
        } else {
          in.emplace_back(host_[size_t(t)].value());
        }
      }
      cuda_ok(cudaStreamSynchronize(stream_), "to host");
      auto out = interp->run(in);
      for (size_t k = 0; k < nd.outputs.size(); ++k) {
        const TensorId t = nd.outputs[k];
        if (const auto* f = std::get_if<Tensor<float>>(&out[k])) {
          cuda_ok(cudaMemcpyAsync(dptr(t), f->data(), size_t(f->size()) * sizeof(float), cudaMemcpyHostToDevice, stream_), "to device");
          cuda_ok(cudaStreamSynchronize(stream_), "to device");
        } else {
          host_[size_t(t)] = std::get<Tensor<int64_t>>(out[k]);
        }
      }
    });
  }
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const BackendOptions& opt) : ctx_(std::make_shared<CudaContext>(opt.tf32)) {}
  std::string_view name() const override { return "cuda"; }
  std::string version() const override { return ctx_->version; }
  std::unique_ptr<Executable> compile(const Graph& g, const CompileOptions& opt) override { return std::make_unique<CudaExecutable>(ctx_, g, opt); }

 private:
  std::shared_ptr<CudaContext> ctx_;
};
}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& opt) { return std::make_unique<CudaBackend>(opt); }

}  // namespace pet::backend
