// The cuda backend: a graph compiled into steps on one CUDA stream. Convolutions through
// cuDNN (the legacy API: its Find call measures every algorithm - implicit GEMM, FFT,
// Winograd, ... - on the real buffers, which is the choice by measurement the cost model
// needs; the v9 graph API would add engine heuristics this backend does not use yet), matrix
// products through cuBLAS (strided batched, row-major by the transposed-product identity),
// softmax through cuDNN, data movement, element-wise ops and layer normalisation through
// pet's kernels (kernels.cu). Ops without a GPU path run on the host with the reference
// interpreter, named in the plan. TF32 is off unless PET_CUDA_TF32=1, so results match the
// reference.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdlib>
#include <functional>
#include <map>

#include "kernels.hpp"
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

bool tf32_allowed() {
  const char* v = std::getenv("PET_CUDA_TF32");
  return v && std::string(v) == "1";
}

/// The device this process uses; Unsupported with the reason when there is none.
void require_device() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0)
    throw Unsupported(cat("no CUDA device (", e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports 0 devices",
                          "); run on a machine with an NVIDIA GPU, or use --backend cpu"));
}

std::string_view conv_algo_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "implicit-gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "implicit-precomp-gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "direct";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "fft";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "fft-tiling";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "winograd";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "winograd-nonfused";
    default: return "other";
  }
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

class CudaExecutable final : public Executable {
 public:
  CudaExecutable(const Graph& original, const CompileOptions& opt) {
    require_device();
    g_ = original;
    transform::PipelineOptions po;
    po.disabled = transform::pass_list(opt.disabled_passes);
    po.print_after = transform::pass_list(opt.print_after);
    transform::backend_pipeline().run(g_, po);
    cuda_ok(cudaStreamCreate(&stream_), "cudaStreamCreate");
    cublas_ok(cublasCreate(&blas_), "cublasCreate");
    cublas_ok(cublasSetStream(blas_, stream_), "cublasSetStream");
    cublas_ok(cublasSetMathMode(blas_, tf32_allowed() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
    cudnn_ok(cudnnCreate(&dnn_), "cudnnCreate");
    cudnn_ok(cudnnSetStream(dnn_, stream_), "cudnnSetStream");
    dev_.resize(size_t(g_.num_tensors()));
    host_.resize(size_t(g_.num_tensors()));
    for (TensorId t = 0; t < g_.num_tensors(); ++t) {
      const TensorInfo& info = g_.tensor(t);
      if (!info.is_constant()) continue;
      if (is_float(info.type.dtype)) {
        const auto& v = std::get<Tensor<float>>(*info.value);
        dev_[size_t(t)] = dev_alloc(v.size());
        cuda_ok(cudaMemcpy(dev_[size_t(t)].ptr, v.data(), size_t(v.size()) * sizeof(float), cudaMemcpyHostToDevice), "upload a constant");
      } else {
        host_[size_t(t)] = *info.value;
      }
    }
    for (TensorId t : g_.inputs())
      if (is_float(g_.type(t).dtype)) dev_[size_t(t)] = dev_alloc(numel(g_.type(t).shape));
    for (NodeId n : g_.topo_order()) lower(n);
  }

  ~CudaExecutable() override {
    steps_.clear();
    if (dnn_) cudnnDestroy(dnn_);
    if (blas_) cublasDestroy(blas_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  std::vector<Value<float>> run(std::span<const Value<float>> inputs) override {
    PET_CHECK(inputs.size() == g_.inputs().size(), "cuda: ", inputs.size(), " inputs for ", g_.inputs().size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const TensorId t = g_.inputs()[i];
      if (const auto* f = std::get_if<Tensor<float>>(&inputs[i]))
        cuda_ok(cudaMemcpyAsync(dev_[size_t(t)].ptr, f->data(), size_t(f->size()) * sizeof(float), cudaMemcpyHostToDevice, stream_), "input");
      else host_[size_t(t)] = std::get<Tensor<int64_t>>(inputs[i]);
    }
    for (auto& s : steps_) s.fn();
    std::vector<Value<float>> out;
    for (TensorId t : g_.outputs()) {
      if (is_float(g_.type(t).dtype)) {
        Tensor<float> y(g_.type(t).shape);
        cuda_ok(cudaMemcpyAsync(y.data(), dev_[size_t(t)].ptr, size_t(y.size()) * sizeof(float), cudaMemcpyDeviceToHost, stream_), "output");
        out.emplace_back(y);
      } else {
        out.emplace_back(std::get<Tensor<int64_t>>(host_[size_t(t)].value()));
      }
    }
    cuda_ok(cudaStreamSynchronize(stream_), "run");
    return out;
  }

  std::string describe() const override {
    std::string s;
    for (const auto& st : steps_) s += st.text + "\n";
    return s;
  }

 private:
  struct Step {
    std::string text;
    std::function<void()> fn;
  };
  Graph g_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  cudnnHandle_t dnn_ = nullptr;
  std::vector<DevBuf> dev_;                        ///< float tensors, on the device
  std::vector<std::optional<ConstValue>> host_;    ///< integer tensors, on the host
  std::vector<Step> steps_;
  std::vector<std::shared_ptr<void>> keep_;        ///< descriptors and workspaces the steps use

  float* dptr(TensorId t) { return dev_[size_t(t)].ptr; }
  float* define(TensorId t) {
    dev_[size_t(t)] = dev_alloc(numel(g_.type(t).shape));
    return dptr(t);
  }
  bool all_float(NodeId n) const {
    for (TensorId t : g_.node(n).inputs)
      if (!is_float(g_.type(t).dtype)) return false;
    for (TensorId t : g_.node(n).outputs)
      if (!is_float(g_.type(t).dtype)) return false;
    return true;
  }
  std::string who(NodeId n) const { return cat(op_name(g_.node(n).op), " '", g_.node(n).name, "'"); }

  void lower(NodeId n) {
    const Node& node = g_.node(n);
    const Op& op = node.op;
    if (holds_any<ops::Reshape, ops::Flatten, ops::Squeeze, ops::Unsqueeze, ops::Identity>(op) && is_float(g_.type(node.inputs[0]).dtype)) {
      dev_[size_t(node.outputs[0])] = dev_[size_t(node.inputs[0])];  // a view
      steps_.push_back({cat(who(n), ": view"), [] {}});
      return;
    }
    const Types in = g_.input_types(n), out = g_.output_types(n);
    if (is_float(out.at(0).dtype) && is_float(in.at(0).dtype)) {
      if (auto plan = copy_plan(op, in, out)) return lower_copies(n, *plan);
      if (all_float(n) && in.size() == 1 && out.size() == 1 && cuda::has_unary_kernel(op)) {
        const TensorId x = node.inputs[0], y = node.outputs[0];
        float* yp = define(y);
        const int64_t cnt = numel(out[0].shape);
        steps_.push_back({cat(who(n), ": pet element-wise kernel"), [this, op, x, yp, cnt] { cuda::launch_unary(op, dptr(x), yp, cnt, stream_); }});
        return;
      }
      if (auto k = cuda::binary_kind(op); k && all_float(n)) {
        const cuda::DevBroadcast br = cuda::make_dev_broadcast(in[0].shape, in[1].shape, out[0].shape);
        const TensorId a = node.inputs[0], b = node.inputs[1];
        float* yp = define(node.outputs[0]);
        steps_.push_back({cat(who(n), ": pet broadcasting kernel"), [this, k = *k, br, a, b, yp] { cuda::launch_binary(k, br, dptr(a), dptr(b), yp, stream_); }});
        return;
      }
      if (const auto* m = std::get_if<ops::MatMul>(&op); m && all_float(n) && lower_matmul(n)) return;
      if (const auto* gm = std::get_if<ops::Gemm>(&op); gm && all_float(n) && lower_gemm(n, *gm)) return;
      if (const auto* c = std::get_if<ops::Conv>(&op); c && all_float(n) && lower_conv(n, *c)) return;
      if (const auto* s = std::get_if<ops::Softmax>(&op); s && lower_softmax(n, *s)) return;
      if (const auto* l = std::get_if<ops::LayerNormalization>(&op); l && lower_layer_norm(n, *l)) return;
    }
    lower_on_host(n);
  }

  void lower_copies(NodeId n, const std::vector<BoxCopy>& plan) {
    const Node& node = g_.node(n);
    for (TensorId t : node.outputs) define(t);
    for (const BoxCopy& c : plan) {
      const TensorId src = node.inputs[size_t(c.src)], dst = node.outputs[size_t(c.dst)];
      const int64_t dst_count = numel(g_.type(dst).shape);
      const cuda::DevBox box = cuda::make_dev_box(c);
      const auto tile = cuda::make_dev_tile(box);
      steps_.push_back({cat(who(n), ": pet ", tile ? "tiled " : "", c.what), [this, c, src, dst, dst_count, box, tile] {
                          if (c.fill_first) cuda::launch_fill(dptr(dst), dst_count, c.fill_value, stream_);
                          if (tile) cuda::launch_tile_copy(*tile, dptr(src), dptr(dst), stream_);
                          else cuda::launch_box_copy(box, dptr(src), dptr(dst), stream_);
                        }});
    }
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
    const TensorId ta = node.inputs[0], tb = node.inputs[1];
    float* yp = define(node.outputs[0]);
    steps_.push_back({cat(who(n), " ", a, "x", b, ": cuBLAS sgemm", count > 1 ? " strided batched" : ""), [=, this] {
                        const float one_f = 1.f, zero_f = 0.f;
                        cublas_ok(cublasSgemmStridedBatched(blas_, CUBLAS_OP_N, CUBLAS_OP_N, int(nn), int(m), int(k), &one_f, dptr(tb), int(nn), sb,
                                                            dptr(ta), int(k), sa, &zero_f, yp, int(nn), sc, int(count)),
                                  "sgemm");
                      }});
    return true;
  }

  bool lower_gemm(NodeId n, const ops::Gemm& gm) {
    const Node& node = g_.node(n);
    const Shape &a = g_.type(node.inputs[0]).shape, &b = g_.type(node.inputs[1]).shape;
    const int64_t m = gm.trans_a ? a[1] : a[0], k = gm.trans_a ? a[0] : a[1], nn = gm.trans_b ? b[0] : b[1];
    const TensorId ta = node.inputs[0], tb = node.inputs[1], y = node.outputs[0];
    float* yp = define(y);
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
    steps_.push_back({cat(who(n), ": cuBLAS sgemm", bias ? " + C" : ""), [=, this] {
                        if (bias) cuda::launch_box_copy(*bias, dptr(tc), yp, stream_);
                        cublas_ok(cublasSgemm(blas_, gm.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, gm.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, int(nn), int(m),
                                              int(k), &alpha, dptr(tb), int(gm.trans_b ? k : nn), dptr(ta), int(gm.trans_a ? m : k), &beta, yp, int(nn)),
                                  "sgemm");
                      }});
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

  bool lower_conv(NodeId n, const ops::Conv& c) {
    const Node& node = g_.node(n);
    const Shape &xs = g_.type(node.inputs[0]).shape, &ws = g_.type(node.inputs[1]).shape, &ys = g_.type(node.outputs[0]).shape;
    const size_t sp = xs.size() - 2;
    if (sp < 1 || sp > 3) return false;
    for (size_t i = 0; i < sp; ++i)
      if (c.pads[i] != c.pads[i + sp]) return false;  // cuDNN pads symmetrically (asymmetric: host, for now)
    std::vector<int> pad(sp), stride(sp), dil(sp);
    for (size_t i = 0; i < sp; ++i) pad[i] = int(c.pads[i]), stride[i] = int(c.strides[i]), dil[i] = int(c.dilations[i]);
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
    cudnn_ok(cudnnSetConvolutionMathType(cd, tf32_allowed() ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH), "math type");
    const TensorId x = node.inputs[0], w = node.inputs[1], y = node.outputs[0];
    float* yp = define(y);
    // Choose by measurement on the real buffers (inputs hold whatever they hold: timing only).
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int found = 0;
    size_t ws_limit = size_t(1) << 30;
    DevBuf scratch = dev_alloc(int64_t(ws_limit / sizeof(float)));
    cudnn_ok(cudnnFindConvolutionForwardAlgorithmEx(dnn_, xd.get(), dptr(x), wd, dptr(w), cd, yd.get(), yp, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found,
                                                    perf, scratch.ptr, ws_limit),
             "find algorithm");
    int pick = -1;
    for (int i = 0; i < found && pick < 0; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS) pick = i;
    if (pick < 0) return false;
    const cudnnConvolutionFwdAlgo_t algo = perf[pick].algo;
    DevBuf work = dev_alloc(int64_t(perf[pick].memory / sizeof(float)) + 1);
    keep_.push_back(work.mem);
    std::shared_ptr<cudnnTensorStruct> bd;
    TensorId b = -1;
    if (node.inputs.size() == 3) {
      b = node.inputs[2];
      Shape bs(xs.size(), 1);
      bs[1] = ws[0];
      bd = tensor_desc(bs);
    }
    const size_t wsize = perf[pick].memory;
    steps_.push_back({cat(who(n), ": cuDNN convolution ", conv_algo_name(algo), " (", perf[pick].time, " ms when chosen)", b >= 0 ? " + bias" : ""),
                      [=, this] {
                        const float one = 1.f, zero = 0.f;
                        cudnn_ok(cudnnConvolutionForward(dnn_, &one, xd.get(), dptr(x), wd, dptr(w), cd, algo, work.ptr, wsize, &zero, yd.get(), yp),
                                 "convolution");
                        if (b >= 0) cudnn_ok(cudnnAddTensor(dnn_, &one, bd.get(), dptr(b), &one, yd.get(), yp), "bias");
                      }});
    return true;
  }

  bool lower_softmax(NodeId n, const ops::Softmax& s) {
    const Node& node = g_.node(n);
    const Shape& xs = g_.type(node.inputs[0]).shape;
    const size_t ax = size_t(s.axis);
    int64_t outer = 1, mid = 1, inner = 1;
    for (size_t i = 0; i < xs.size(); ++i) (i < ax ? outer : i == ax || s.flatten_tail ? mid : inner) *= xs[i];
    auto d = tensor_desc({outer, mid, inner, 1});
    const TensorId x = node.inputs[0];
    float* yp = define(node.outputs[0]);
    steps_.push_back({cat(who(n), ": cuDNN softmax"), [=, this] {
                        const float one = 1.f, zero = 0.f;
                        cudnn_ok(cudnnSoftmaxForward(dnn_, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one, d.get(), dptr(x), &zero, d.get(), yp),
                                 "softmax");
                      }});
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
    const TensorId x = node.inputs[0], gamma = node.inputs[1], beta = node.inputs.size() > 2 ? node.inputs[2] : -1;
    float* yp = define(node.outputs[0]);
    const float eps = l.epsilon;
    steps_.push_back({cat(who(n), ": pet layer-norm kernel"), [=, this] {
                        cuda::launch_layer_norm(dptr(x), dptr(gamma), beta >= 0 ? dptr(beta) : nullptr, yp, rows, cols, eps, stream_);
                      }});
    return true;
  }

  /// The op on the host: its inputs copied down, the reference interpreter, the outputs up.
  void lower_on_host(NodeId n) {
    const Node& node = g_.node(n);
    auto one = std::make_shared<Graph>();
    std::vector<TensorId> ids;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const TensorInfo& info = g_.tensor(node.inputs[i]);
      if (info.is_constant() && !is_float(info.type.dtype)) ids.push_back(one->add_constant(cat("c", i), info.type.dtype, *info.value));
      else ids.push_back(one->add_input(cat("x", i), info.type));
    }
    for (TensorId t : one->add_node(node.name, node.op, ids)) one->add_output(t);
    for (TensorId t : node.outputs)
      if (is_float(g_.type(t).dtype)) define(t);
    auto interp = std::make_shared<Interpreter<float>>(*one);
    keep_.push_back(one);
    steps_.push_back({cat(who(n), ": reference kernel on the host (no GPU path)"), [this, n, one, interp] {
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
                            in.emplace_back(std::get<Tensor<int64_t>>(host_[size_t(t)].value()));
                          }
                        }
                        cuda_ok(cudaStreamSynchronize(stream_), "to host");
                        auto out = interp->run(in);
                        for (size_t k = 0; k < nd.outputs.size(); ++k) {
                          const TensorId t = nd.outputs[k];
                          if (const auto* f = std::get_if<Tensor<float>>(&out[k])) {
                            cuda_ok(cudaMemcpy(dptr(t), f->data(), size_t(f->size()) * sizeof(float), cudaMemcpyHostToDevice), "to device");
                          } else {
                            host_[size_t(t)] = std::get<Tensor<int64_t>>(out[k]);
                          }
                        }
                      }});
  }
};

class CudaBackend final : public Backend {
 public:
  std::string_view name() const override { return "cuda"; }
  std::string version() const override {
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    return cat("cuda-rt ", rt, ", cudnn ", cudnnGetVersion(), ", pet-cuda-kernels 1", tf32_allowed() ? ", tf32" : "");
  }
  std::unique_ptr<Executable> compile(const Graph& g, const CompileOptions& opt) override { return std::make_unique<CudaExecutable>(g, opt); }
};
}  // namespace

std::unique_ptr<Backend> make_cuda_backend() {
  require_device();
  return std::make_unique<CudaBackend>();
}

}  // namespace pet::backend
