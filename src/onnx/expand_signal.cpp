// ONNX's signal ops (opset 17) in pet ops: DFT and STFT as a MatMul with a constant matrix of
// cosines and sines (the window of an STFT folded into it where the window is constant), the
// frames of an STFT as a Gather of constant indices, and the window functions (HannWindow,
// HammingWindow, BlackmanWindow) and MelWeightMatrix as constants, computed at import from their
// constant inputs. A DFT of length N costs N times its input here (no FFT), which for the
// lengths of audio front ends (N of 512 or 400) is a matrix product oneDNN runs well, and
// multilinear, so the optimizer can rewrite it like any other.
#include <cmath>
#include <numbers>

#include "expand.hpp"

namespace pet::onnx::detail {

namespace {

/// The most elements a DFT matrix may have (256 MB of floats).
constexpr int64_t kMaxDftMatrix = int64_t(1) << 26;

using Data = std::function<TensorId(int)>;

std::vector<TensorId> no_outputs(const NodeCtx& c) { return std::vector<TensorId>(size_t(c.node.output_size()), -1); }

/// A constant scalar input that must be a whole number (a length, a count).
int64_t whole(const NodeCtx& c, int i, std::string_view what) {
  const double v = c.const_scalar(i, what);
  if (v != std::floor(v) || std::abs(v) > 1e15) throw InvalidInput(cat(what, " (input ", i, ") must be an integer, got ", v));
  return int64_t(v);
}

DType float_output(const NodeCtx& c) {
  const int64_t t = c.i("output_datatype", 1);
  if (t != 1) throw Unsupported(cat("output_datatype ", t, ": pet makes float (1) outputs of ", c.node.op_type(), " only"));
  return DType::Float32;
}

/// The matrix M with x M = the DFT of x along its rows: x holds L samples of `parts` floats
/// each (1: real, 2: real and imaginary interleaved), so M has L * parts rows and 2K columns
/// (bin k's real part in column 2k, its imaginary part in 2k + 1). Samples at n >= N are cut
/// off (zero rows); samples beyond L are zeros (ONNX pads). Forward: e^(-2 pi i k n / N);
/// inverse: e^(+2 pi i k n / N) / N. `window` (L values, or empty) scales sample n.
Tensor<float> dft_matrix(int64_t L, int parts, int64_t N, int64_t K, bool inverse, const std::vector<double>& window) {
  const int64_t rows = L * parts, cols = 2 * K;
  if (rows * cols > kMaxDftMatrix)
    throw Unsupported(cat("a DFT of ", L, " samples into ", K, " bins takes a ", rows, " x ", cols,
                          " matrix here (pet computes DFTs as matrix products), over the ", kMaxDftMatrix, " elements allowed"));
  Tensor<float> m(Shape{rows, cols});
  const double scale = inverse ? 1.0 / double(N) : 1.0;
  for (int64_t n = 0; n < std::min(L, N); ++n) {
    const double w = (window.empty() ? 1.0 : window[size_t(n)]) * scale;
    for (int64_t k = 0; k < K; ++k) {
      // k n reduced mod N first: the angle stays accurate for long transforms
      const double theta = 2 * std::numbers::pi * double((k * n) % N) / double(N);
      const double re = std::cos(theta) * w, im = (inverse ? std::sin(theta) : -std::sin(theta)) * w;
      if (parts == 1) {
        m[n * cols + 2 * k] = float(re);
        m[n * cols + 2 * k + 1] = float(im);
      } else {  // (xr + i xi)(re + i im) = xr re - xi im + i (xr im + xi re)
        m[2 * n * cols + 2 * k] = float(re);
        m[2 * n * cols + 2 * k + 1] = float(im);
        m[(2 * n + 1) * cols + 2 * k] = float(-im);
        m[(2 * n + 1) * cols + 2 * k + 1] = float(re);
      }
    }
  }
  return m;
}

/// x of shape [B..., L, parts] times the DFT matrix: [B..., K, 2].
TensorId dft_rows(Graph& g, const std::string& name, TensorId x, const Shape& xs, Tensor<float> m, int64_t K,
                  const std::string& out = "") {
  Shape flat(xs.begin(), xs.end() - 2), res = flat;
  flat.push_back(xs[xs.size() - 2] * xs.back());
  res.push_back(K);
  res.push_back(2);
  const TensorId w = g.add_constant(g.unique_name(cat(name, "/dft_matrix")), std::move(m));
  const TensorId rows = add_part(g, name, "samples", ops::Reshape{.shape = flat}, {x});
  const TensorId bins = add_part(g, name, "dft", ops::MatMul{}, {rows, w});
  return add_part(g, name, "complex", ops::Reshape{.shape = res}, {bins}, out);
}

/// DFT (opset 17: axis an attribute, default 1; opset 20: an input, default -2): the input's
/// last dim holds 1 (real) or 2 (real, imaginary) parts; the transform of dft_length (default:
/// the axis' length) bins runs along `axis`, onesided keeping the first N/2 + 1.
std::vector<TensorId> dft(const NodeCtx& c, const std::string& name, Graph& g, const Data& data) {
  if (!c.present(0)) throw InvalidInput("required input 0 (input) is missing");
  const auto t = c.type(0);
  if (!t || t->dtype != DType::Float32) throw Unsupported("input must be float32");
  const Shape& xs = t->shape;
  const int64_t r = int64_t(xs.size());
  if (r < 2 || (xs.back() != 1 && xs.back() != 2))
    throw InvalidInput(cat("input shape ", xs, " must end in a dim of 1 (real) or 2 (real and imaginary parts)"));
  int64_t axis = c.opset >= 20 ? (c.present(2) ? whole(c, 2, "axis") : -2) : c.i("axis", 1);
  if (axis < -r || axis >= r - 1 || (axis < 0 && axis + r == r - 1))
    throw InvalidInput(cat("axis ", axis, " is out of range for input shape ", xs, " (the last dim holds the complex parts)"));
  if (axis < 0) axis += r;
  const bool inverse = c.flag("inverse", false), onesided = c.flag("onesided", false);
  if (inverse && onesided) throw InvalidInput("inverse and onesided cannot both be set (as ONNX Runtime)");
  const int64_t L = xs[size_t(axis)];
  const int64_t N = c.present(1) ? whole(c, 1, "dft_length") : L;
  if (N < 1) throw InvalidInput(cat("dft_length must be positive, got ", N));
  const int64_t K = onesided ? N / 2 + 1 : N;
  auto out = no_outputs(c);
  if (out.empty() || c.node.output(0).empty()) return out;
  TensorId x = data(0);
  // the transformed axis just before the complex parts
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < r - 1; ++d)
    if (d != axis) perm.push_back(d);
  perm.push_back(axis);
  perm.push_back(r - 1);
  Shape moved;
  for (int64_t d : perm) moved.push_back(xs[size_t(d)]);
  const bool transpose = axis != r - 2;
  if (transpose) x = add_part(g, name, "to_last", ops::Transpose{.perm = perm}, {x});
  auto m = dft_matrix(L, int(xs.back()), N, K, inverse, {});
  if (!transpose) {
    out[0] = dft_rows(g, name, x, moved, std::move(m), K, c.node.output(0));
    return out;
  }
  const TensorId y = dft_rows(g, name, x, moved, std::move(m), K);
  std::vector<int64_t> back(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) back[size_t(perm[i])] = int64_t(i);
  out[0] = add_part(g, name, "from_last", ops::Transpose{.perm = back}, {y}, c.node.output(0));
  return out;
}

/// STFT: signal [batch, length, 1 or 2], frame_step, window [frame_length] and/or
/// frame_length (one of them: ONNX Runtime needs it), onesided (default 1): frames f of
/// frame_length samples from f * frame_step, 1 + (length - frame_length) / frame_step of them,
/// each windowed and transformed: [batch, frames, bins, 2].
std::vector<TensorId> stft(const NodeCtx& c, const std::string& name, Graph& g, const Data& data) {
  if (!c.present(0)) throw InvalidInput("required input 0 (signal) is missing");
  const auto t = c.type(0);
  if (!t || t->dtype != DType::Float32) throw Unsupported("signal must be float32");
  const Shape& xs = t->shape;
  if (xs.size() != 3 || (xs[2] != 1 && xs[2] != 2))
    throw InvalidInput(cat("signal shape ", xs, " must be [batch, length, 1 or 2]"));
  const int64_t step = whole(c, 1, "frame_step");
  if (step < 1) throw InvalidInput(cat("frame_step must be positive, got ", step));
  std::optional<int64_t> wlen;
  if (c.present(2)) {
    const auto wt = c.type(2);
    if (!wt || wt->dtype != DType::Float32 || wt->shape.size() != 1)
      throw InvalidInput(cat("window must be a 1-D float32 tensor", wt ? cat(", got shape ", wt->shape) : std::string()));
    wlen = wt->shape[0];
  }
  std::optional<int64_t> flen;
  if (c.present(3)) flen = whole(c, 3, "frame_length");
  if (!wlen && !flen) throw InvalidInput("needs a window or a frame_length (ONNX Runtime fails without both)");
  if (wlen && flen && *wlen != *flen) throw InvalidInput(cat("window has ", *wlen, " values but frame_length is ", *flen));
  const int64_t F = flen ? *flen : *wlen, L = xs[1];
  if (F < 1) throw InvalidInput(cat("frame_length must be positive, got ", F));
  if (L < F) throw InvalidInput(cat("the signal (", L, " samples) is shorter than one frame (", F, ")"));
  const int64_t frames = 1 + (L - F) / step;
  const int64_t K = c.flag("onesided", true) ? F / 2 + 1 : F;
  auto out = no_outputs(c);
  if (out.empty() || c.node.output(0).empty()) return out;
  Tensor<int64_t> idx(Shape{frames, F});
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t n = 0; n < F; ++n) idx[f * F + n] = f * step + n;
  const TensorId at = g.add_constant(g.unique_name(cat(name, "/frame_indices")), DType::Int64, std::move(idx));
  TensorId x = add_part(g, name, "frames", ops::Gather{.axis = 1}, {data(0), at});  // [batch, frames, F, parts]
  std::vector<double> window;
  if (wlen) {
    if (const auto* w = c.fixed(2)) {  // folded into the matrix
      const Tensor<float>& wv = std::get<Tensor<float>>(w->second);
      window.assign(wv.data(), wv.data() + wv.size());
    } else {
      const TensorId col = add_part(g, name, "window_column", ops::Reshape{.shape = {F, 1}}, {data(2)});
      x = add_part(g, name, "windowed", ops::Mul{}, {x, col});
    }
  }
  out[0] = dft_rows(g, name, x, Shape{xs[0], frames, F, xs[2]}, dft_matrix(F, int(xs[2]), F, K, false, window), K, c.node.output(0));
  return out;
}

/// HannWindow, HammingWindow, BlackmanWindow: `size` values of the window (periodic: the
/// period is size, else size - 1), computed in double as ONNX's reference writes them.
template <int Kind>
std::vector<TensorId> window_fn(const NodeCtx& c, const std::string& name, Graph& g, const Data&) {
  const int64_t size = whole(c, 0, "size");
  if (size < 1 || size > (int64_t(1) << 30)) throw InvalidInput(cat("size must be between 1 and 2^30, got ", size));
  float_output(c);
  const double period = c.flag("periodic", true) ? double(size) : double(size - 1);
  Tensor<float> w(Shape{size});
  const double pi = std::numbers::pi;
  for (int64_t n = 0; n < size; ++n) {
    const double a = double(n) / period;  // NaN for a symmetric window of one value, as ONNX Runtime
    if constexpr (Kind == 0) w[n] = float(std::pow(std::sin(pi * a), 2));
    else if constexpr (Kind == 1) w[n] = float(25.0 / 46.0 - (21.0 / 46.0) * std::cos(2 * pi * a));
    else w[n] = float(0.42 - 0.5 * std::cos(2 * pi * a) + 0.08 * std::cos(4 * pi * a));
  }
  auto out = no_outputs(c);
  if (!out.empty() && !c.node.output(0).empty()) out[0] = g.add_constant(g.unique_name(c.node.output(0)), std::move(w));
  (void)name;
  return out;
}

/// MelWeightMatrix: [dft_length / 2 + 1, num_mel_bins] triangular filters between
/// lower_edge_hertz and upper_edge_hertz on the mel scale (2595 log10(1 + f / 700)), their
/// corners at the spectrogram bins floor((dft_length + 1) f / sample_rate), as ONNX's
/// reference and ONNX Runtime compute them.
std::vector<TensorId> mel_weight_matrix(const NodeCtx& c, const std::string&, Graph& g, const Data&) {
  const int64_t mels = whole(c, 0, "num_mel_bins"), dft_length = whole(c, 1, "dft_length"), rate = whole(c, 2, "sample_rate");
  const double lower = c.const_scalar(3, "lower_edge_hertz"), upper = c.const_scalar(4, "upper_edge_hertz");
  float_output(c);
  if (mels < 1 || dft_length < 1 || rate < 1)
    throw InvalidInput(cat("num_mel_bins (", mels, "), dft_length (", dft_length, ") and sample_rate (", rate, ") must be positive"));
  const int64_t bins = dft_length / 2 + 1;
  if (mels * bins > kMaxDftMatrix) throw Unsupported(cat("a ", bins, " x ", mels, " mel matrix is over the ", kMaxDftMatrix, " elements allowed"));
  if (!(lower >= 0 && lower <= upper)) throw InvalidInput(cat("the edges must satisfy 0 <= lower_edge_hertz (", lower, ") <= upper_edge_hertz (", upper, ")"));
  auto mel = [](double f) { return 2595 * std::log10(1 + f / 700); };
  const double lo = mel(lower), step = (mel(upper) - lo) / double(mels + 2);
  std::vector<int64_t> corner(size_t(mels + 2));
  for (int64_t i = 0; i < mels + 2; ++i) {
    const double hz = 700 * (std::pow(10.0, (double(i) * step + lo) / 2595) - 1);
    corner[size_t(i)] = int64_t(std::floor(double(dft_length + 1) * hz / double(rate)));
  }
  if (corner[size_t(mels)] >= bins || corner.back() > bins)
    throw InvalidInput(cat("upper_edge_hertz ", upper, " lies beyond the spectrogram's ", bins, " bins (dft_length ", dft_length,
                           ") at sample_rate ", rate));
  Tensor<float> m(Shape{bins, mels});
  for (int64_t i = 0; i < mels; ++i) {
    const int64_t l = corner[size_t(i)], ce = corner[size_t(i + 1)], h = corner[size_t(i + 2)];
    if (ce == l) m[ce * mels + i] = 1;
    else
      for (int64_t j = l; j <= ce; ++j) m[j * mels + i] = float(double(j - l) / double(ce - l));
    for (int64_t j = ce; j < h; ++j) m[j * mels + i] = float(double(h - j) / double(h - ce));
  }
  auto out = no_outputs(c);
  if (!out.empty() && !c.node.output(0).empty()) out[0] = g.add_constant(g.unique_name(c.node.output(0)), std::move(m));
  return out;
}

}  // namespace

void add_signal_ops(std::map<std::string, ExpandFn, std::less<>>& t) {
  t["DFT"] = dft;
  t["STFT"] = stft;
  t["HannWindow"] = window_fn<0>;
  t["HammingWindow"] = window_fn<1>;
  t["BlackmanWindow"] = window_fn<2>;
  t["MelWeightMatrix"] = mel_weight_matrix;
}

}  // namespace pet::onnx::detail
