// Random programs for differential testing (see program_gen.hpp).
#include "program_gen.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>

#include "pet/core/rng.hpp"

namespace pet::difftest {

namespace {

class Generator {
 public:
  Generator(uint64_t seed, const GenOptions& opt) : r_(seed), opt_(opt) {}

  Graph run() {
    add_inputs();
    const int target = int(r_.range(opt_.min_ops, opt_.max_ops));
    for (int attempt = 0; g_.num_nodes() < target && attempt < 60 * target; ++attempt) step();
    choose_outputs();
    return std::move(g_);
  }

 private:
  // ------------------------------------------------------------------ helpers
  bool chance(double p) { return r_.uniform() < p; }
  /// Fisher-Yates with pet's Rng (std::shuffle's order differs between libraries).
  template <class T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[size_t(r_.below(i))]);
  }
  template <class T>
  T one_of(const std::vector<T>& v) { return v[size_t(r_.below(v.size()))]; }
  int64_t rank(TensorId t) const { return int64_t(g_.type(t).shape.size()); }
  const Shape& shape(TensorId t) const { return g_.type(t).shape; }

  Tensor<float> values(const Shape& s, double lo, double hi) {
    Tensor<float> t(s);
    for (int64_t i = 0; i < t.size(); ++i) t[i] = float(r_.uniform(lo, hi));
    return t;
  }
  /// Values whose magnitude lies in [lo, hi], either sign.
  Tensor<float> away_from_zero(const Shape& s, double lo, double hi) {
    Tensor<float> t(s);
    for (int64_t i = 0; i < t.size(); ++i) t[i] = float(r_.uniform(lo, hi) * (chance(0.5) ? -1 : 1));
    return t;
  }
  TensorId constant(Tensor<float> v) { return g_.add_constant(g_.unique_name("c"), std::move(v)); }
  TensorId ints(std::vector<int64_t> v, Shape s = {}) {
    if (s.empty() && v.size() != 1) s = {int64_t(v.size())};
    return g_.add_constant(g_.unique_name("i"), DType::Int64, Tensor<int64_t>(s, std::move(v)));
  }
  TensorId new_input(const Shape& s) {
    TensorId t = g_.add_input(g_.unique_name("x"), {DType::Float32, s});
    return t;
  }
  /// A weight: mostly a constant, sometimes a graph input (then nothing may be folded).
  TensorId weight(const Shape& s, double scale, double input_p = 0.08) {
    if (chance(input_p)) return new_input(s);
    return constant(values(s, -scale, scale));
  }

  bool fits(const Types& ts) const {
    for (const auto& t : ts) {
      if (numel(t.shape) > opt_.max_elements) return false;
      for (int64_t d : t.shape)
        if (d < 1) return false;  // no empty tensors (pet rejects or special-cases them)
      if (t.shape.size() > 6) return false;
    }
    return true;
  }
  /// Adds a node if it type-checks and its outputs are small and non-empty; the float
  /// outputs join the pool.
  std::vector<TensorId> add(Op op, std::vector<TensorId> inputs) {
    Types in;
    for (TensorId t : inputs) in.push_back(g_.type(t));
    Op probe = op;
    try {
      if (!fits(infer_types(probe, in))) return {};
      std::string name = g_.unique_name(std::string(op_name(op)));
      auto outs = g_.add_node(name, std::move(op), std::move(inputs));
      for (TensorId o : outs)
        if (is_float(g_.type(o).dtype)) (g_.type(o).shape.empty() ? scalars_ : pool_).push_back(o);
      return outs;
    } catch (const Error&) {
      return {};
    }
  }
  std::optional<TensorId> add1(Op op, std::vector<TensorId> inputs) {
    auto o = add(std::move(op), std::move(inputs));
    if (o.empty()) return std::nullopt;
    return o[0];
  }

  /// A tensor from the pool, most often one of the latest (chains make fusions).
  TensorId pick() {
    if (chance(0.55)) return pool_.back();
    if (chance(0.5) && pool_.size() > 1) return pool_[pool_.size() - 1 - r_.below(std::min<size_t>(3, pool_.size()))];
    return one_of(pool_);
  }
  std::optional<TensorId> pick_rank(int64_t lo, int64_t hi) {
    for (int i = 0; i < 8; ++i) {
      TensorId t = pick();
      if (rank(t) >= lo && rank(t) <= hi) return t;
    }
    std::vector<TensorId> ok;
    for (TensorId t : pool_)
      if (rank(t) >= lo && rank(t) <= hi) ok.push_back(t);
    if (ok.empty()) return std::nullopt;
    return one_of(ok);
  }
  /// Another pool tensor of exactly this shape (not t itself), if any.
  std::optional<TensorId> same_shape(TensorId t) {
    std::vector<TensorId> ok;
    for (TensorId u : pool_)
      if (u != t && shape(u) == shape(t)) ok.push_back(u);
    if (ok.empty()) return std::nullopt;
    return one_of(ok);
  }

  Shape random_shape(int64_t r) {
    Shape s;
    if (r == 2) return {r_.range(1, 24), r_.range(1, 24)};
    s.push_back(r_.range(1, 3));
    s.push_back(chance(0.35) ? one_of<int64_t>({8, 16}) : r_.range(1, 16));
    const int64_t hi = r == 5 ? 6 : r == 4 ? 12 : 20;
    for (int64_t i = 2; i < r; ++i) s.push_back(r_.range(1, hi));
    return s;
  }
  void add_inputs() {
    const int64_t r = one_of<int64_t>({4, 4, 4, 4, 3, 5, 2, 2, 3});
    Shape s = random_shape(r);
    while (numel(s) > opt_.max_elements / 2) s[size_t(r_.below(s.size()))] = 1;
    pool_.push_back(new_input(s));
    if (chance(0.3)) {
      Shape t = s;
      if (chance(0.5))
        for (auto& d : t)
          if (chance(0.3)) d = 1;
      pool_.push_back(new_input(t));
    }
  }

  // ------------------------------------------------------------------ steps
  void step() {
    using F = void (Generator::*)();
    static const std::vector<std::pair<int, F>> steps = {
        {14, &Generator::conv},        {5, &Generator::residual_conv}, {3, &Generator::pad_then_window},
        {4, &Generator::batch_norm},   {15, &Generator::activation},   {12, &Generator::scalar_op},
        {6, &Generator::binary_same},  {8, &Generator::binary_bcast},  {6, &Generator::pool},
        {2, &Generator::global_pool},  {7, &Generator::matmul},        {4, &Generator::gemm},
        {3, &Generator::reshape},      {3, &Generator::transpose},     {2, &Generator::flatten},
        {2, &Generator::squeeze},      {2, &Generator::rt},            {2, &Generator::expand},
        {4, &Generator::concat},       {3, &Generator::split},         {4, &Generator::slice},
        {3, &Generator::pad},          {3, &Generator::softmax},       {4, &Generator::reduce},
        {3, &Generator::layer_norm},   {2, &Generator::decomposed_layer_norm},
        {2, &Generator::gelu},         {1, &Generator::identity},      {1, &Generator::patch},
        {2, &Generator::where},        {2, &Generator::gather},        {1, &Generator::tile},        {4, &Generator::deconv},
        {2, &Generator::resize},       {3, &Generator::pet_elementwise}, {3, &Generator::float_int},
        {3, &Generator::masks_and_indices}, {3, &Generator::channel_scale_conv}, {3, &Generator::dense_block},
    };
    static const int total = [] {
      int s = 0;
      for (auto& [w, f] : steps) s += w;
      return s;
    }();
    int x = int(r_.below(uint64_t(total)));
    for (auto& [w, f] : steps) {
      if (x < w) {
        (this->*f)();
        return;
      }
      x -= w;
    }
  }

  std::vector<int64_t> conv_pads(size_t k, const Shape& kernel, const std::vector<int64_t>& dil) {
    std::vector<int64_t> p(2 * k);
    for (size_t i = 0; i < k; ++i) {
      const int64_t span = (kernel[i] - 1) * dil[i];
      for (size_t side : {i, i + k}) {
        if (chance(0.4)) p[side] = 0;
        else if (chance(0.8)) p[side] = r_.range(0, std::max<int64_t>(span, 1));
        else p[side] = r_.range(span + 1, span + 3);  // rows that see only padding
      }
    }
    return p;
  }

  std::optional<TensorId> make_conv(TensorId x, bool keep_shape) {
    const Shape& xs = shape(x);
    const size_t k = xs.size() - 2;
    const int64_t c = xs[1];
    ops::Conv cv;
    int64_t group = 1;
    if (!keep_shape && chance(0.3)) {
      std::vector<int64_t> divs;
      for (int64_t d = 2; d <= c; ++d)
        if (c % d == 0) divs.push_back(d);
      if (!divs.empty()) group = chance(0.4) ? c : one_of(divs);
    }
    int64_t f = keep_shape ? c : group * r_.range(1, std::max<int64_t>(1, 16 / group));
    const bool wino = chance(0.35);  // 3x3, stride 1, dilation 1: pet's and oneDNN's Winograd
    if (wino && group == 1 && !keep_shape && chance(0.6)) f = one_of<int64_t>({8, 16});
    Shape w{f, c / group};
    Shape kernel;
    std::vector<int64_t> strides, dil;
    for (size_t i = 0; i < k; ++i) {
      int64_t kk = wino ? 3 : one_of<int64_t>({1, 1, 2, 3, 3, 3, 5});
      if (k == 3 && i == 0 && wino) kk = r_.range(1, 3);
      if (keep_shape && kk % 2 == 0) kk = 3;
      kernel.push_back(kk);
      strides.push_back(wino || keep_shape ? 1 : one_of<int64_t>({1, 1, 1, 2, 3}));
      dil.push_back(wino ? 1 : one_of<int64_t>({1, 1, 1, 2, 3}));
    }
    // one dilation along every spatial dim at times: what dilated -> dense regroups (1-D to 3-D)
    if (!wino && chance(0.25)) dil.assign(k, dil[0]);
    w.insert(w.end(), kernel.begin(), kernel.end());
    cv.strides = strides;
    cv.dilations = dil;
    if (keep_shape) {
      for (size_t i = 0; i < k; ++i) cv.pads.push_back((kernel[i] - 1) * dil[i] / 2);
      for (size_t i = 0; i < k; ++i) cv.pads.push_back((kernel[i] - 1) * dil[i] / 2);
    } else if (chance(0.1)) {
      cv.auto_pad = one_of<AutoPad>({AutoPad::SameUpper, AutoPad::SameLower, AutoPad::Valid});
    } else {
      cv.pads = conv_pads(k, kernel, dil);
    }
    cv.group = group;
    const double scale = 1.5 / std::sqrt(double(numel(w) / f));
    std::vector<TensorId> in{x, weight(w, scale)};
    if (chance(0.6)) in.push_back(weight({f}, 0.5, 0.04));
    return add1(cv, in);
  }

  void conv() {
    auto x = pick_rank(3, 5);
    if (!x) return;
    auto y = make_conv(*x, false);
    if (!y || !chance(0.35)) return;
    // A residual add when some tensor happens to have the conv's shape (asymmetric pads
    // keep it with rows that see only padding).
    auto res = same_shape(*y);
    if (!res) res = new_input(shape(*y));
    TensorId t = *y;
    if (chance(0.5))
      if (auto a = add1(random_activation(), {t})) t = *a;
    add1(ops::Add{}, chance(0.5) ? std::vector{t, *res} : std::vector{*res, t});
  }

  /// The ops the cpu backend runs on pet's own element-wise kernels: unary ops without a
  /// oneDNN eltwise or with an inaccurate one (Softplus, Mish; on blocked layouts where a conv
  /// left one without padding), PRelu with
  /// a slope per channel, scalar or full, InstanceNormalization.
  void pet_elementwise() {
    auto x = pick_rank(2, 5);
    if (!x) return;
    const Shape xs = shape(*x);
    switch (r_.below(4)) {
      case 0: {
        const std::vector<Op> ops = {ops::Floor{}, ops::Ceil{}, ops::Sign{}, ops::Softsign{}, ops::Selu{}, ops::HardSigmoid{}, ops::Celu{.alpha = 0.5f},
                                     ops::ThresholdedRelu{.alpha = 0.1f}, ops::Shrink{.bias = 0.2f, .lambd = 0.3f}, ops::Sin{}, ops::Atan{},
                                     ops::Softplus{}, ops::Mish{}};
        add1(one_of(ops), {*x});
        break;
      }
      case 1:
      case 2: {
        Shape slope;
        if (xs.size() >= 3 && chance(0.5)) slope = Shape(xs.size() - 1, 1), slope[0] = xs[1];  // per channel: [C, 1, ...]
        else if (chance(0.5)) slope = {1};
        else slope = Shape(xs.begin() + 1, xs.end());
        add1(ops::PRelu{}, {*x, weight(slope, 0.5)});
        break;
      }
      default:
        if (xs.size() >= 3) add1(ops::InstanceNormalization{.epsilon = 1e-3f}, {*x, weight({xs[1]}, 1.5, 0.03), weight({xs[1]}, 0.5, 0.03)});
    }
  }

  /// Resize of the spatial dims: every mode and coordinate mode, up or down, by scales or
  /// sizes (linear half-pixel at out / in runs on oneDNN's resampling, the rest on pet's
  /// table kernel).
  void resize() {
    auto x = pick_rank(3, 5);
    if (!x) return;
    using R = ops::Resize;
    const Shape& xs = shape(*x);
    R op;
    op.mode = one_of<R::Mode>({R::Mode::Nearest, R::Mode::Linear, R::Mode::Linear, R::Mode::Cubic});
    op.coord = one_of<R::Coord>({R::Coord::HalfPixel, R::Coord::HalfPixel, R::Coord::PytorchHalfPixel, R::Coord::AlignCorners, R::Coord::Asymmetric,
                                 R::Coord::TfHalfPixelForNN});  // (half_pixel_symmetric: no opset-17 form for --emit)
    op.nearest_mode = one_of<R::Round>({R::Round::PreferFloor, R::Round::PreferCeil, R::Round::Floor, R::Round::Ceil});
    if (op.mode == R::Mode::Cubic && xs.size() != 4) op.mode = R::Mode::Linear;  // ONNX Runtime's cubic takes 4-D only
    op.exclude_outside = chance(0.2);
    if (chance(0.5)) {
      op.scales = {1, 1};
      for (size_t d = 2; d < xs.size(); ++d) op.scales.push_back(one_of<double>({0.5, 1, 1.5, 2, 2, 3}));
    } else {
      op.sizes = {xs[0], xs[1]};
      for (size_t d = 2; d < xs.size(); ++d) op.sizes.push_back(r_.range(1, 2 * xs[d] + 1));
    }
    add1(op, {*x});
  }

  /// A transposed conv (strides, pads, output padding, dilations, groups, bias), sometimes
  /// followed by a batch norm (bn-folding folds it) and an activation (fused).
  void deconv() {
    auto x = pick_rank(3, 5);
    if (!x) return;
    const Shape& xs = shape(*x);
    const size_t k = xs.size() - 2;
    const int64_t c = xs[1];
    int64_t group = 1;
    if (chance(0.25)) {
      std::vector<int64_t> divs;
      for (int64_t d = 2; d <= c; ++d)
        if (c % d == 0) divs.push_back(d);
      if (!divs.empty()) group = chance(0.4) ? c : one_of(divs);
    }
    const int64_t fg = r_.range(1, std::max<int64_t>(1, 12 / group));
    ops::ConvTranspose ct;
    ct.group = group;
    Shape w{c, fg};
    for (size_t i = 0; i < k; ++i) {
      const int64_t kk = one_of<int64_t>({1, 2, 2, 3, 3, 4, 5}), s = one_of<int64_t>({1, 2, 2, 3}), d = chance(0.8) ? 1 : 2;
      w.push_back(kk);
      ct.strides.push_back(s);
      ct.dilations.push_back(d);
      // below the stride: PyTorch allows up to max(stride, dilation) - 1 and pet computes
      // that as PyTorch does (test_ops), but ONNX Runtime 1.20.1 gives other values at every
      // row once output_padding >= stride, and ONNX's reference evaluator refuses it
      ct.output_padding.push_back(chance(0.3) ? r_.range(0, s - 1) : 0);
    }
    ct.pads.assign(2 * k, 0);
    for (size_t i = 0; i < k; ++i) {
      const int64_t made = ct.strides[i] * (xs[2 + i] - 1) + ct.output_padding[i] + (w[2 + i] - 1) * ct.dilations[i] + 1;
      for (size_t side : {i, i + k})
        if (chance(0.5)) ct.pads[side] = r_.range(0, std::max<int64_t>(0, std::min<int64_t>((w[2 + i] - 1) * ct.dilations[i], (made - 1) / 2)));
    }
    const double scale = 1.5 / std::sqrt(double(c / group * numel(Shape(w.begin() + 2, w.end()))));
    std::vector<TensorId> in{*x, weight(w, scale)};
    if (chance(0.6)) in.push_back(weight({fg * group}, 0.5, 0.04));
    auto y = add1(ct, in);
    if (!y) return;
    TensorId t = *y;
    if (chance(0.3)) {
      const int64_t f = fg * group;
      ops::BatchNormalization bn;
      bn.epsilon = 1e-5f;
      if (auto b = add1(bn, {t, weight({f}, 1.5, 0.03), weight({f}, 0.5, 0.03), weight({f}, 0.5, 0.03), constant(values({f}, 0.3, 2.0))})) t = *b;
    }
    if (chance(0.5)) add1(random_activation(), {t});
  }

  /// A shape-keeping conv, a few activations, and an Add of a same-shape tensor (a sum
  /// post-op), possibly a view of the residual that stays alive.
  void residual_conv() {
    auto x = pick_rank(3, 5);
    if (!x) return;
    auto y = make_conv(*x, true);
    if (!y) return;
    TensorId t = *y;
    for (int i = int(r_.below(3)); i > 0; --i) {
      if (auto a = add1(random_activation(), {t})) t = *a;
    }
    TensorId res = *x;
    if (auto s = same_shape(t); s && chance(0.3)) res = *s;
    if (chance(0.2)) {  // the residual through a view: its buffer is shared with x
      Shape flat{numel(shape(res))};
      if (auto v = add1(ops::Reshape{.shape = flat}, {res}))
        if (auto back = add1(ops::Reshape{.shape = shape(res)}, {*v})) res = *back;
    }
    auto sum = chance(0.5) ? add1(ops::Add{}, {t, res}) : add1(ops::Add{}, {res, t});
    if (sum && chance(0.5)) add1(random_activation(), {*sum});
  }

  /// Squeeze-and-excitation: x * sigmoid(pool(x)), or x times a per-channel weight, then a
  /// conv (the channel-scale-folding pass moves the scale onto the conv's weights when they
  /// are smaller than x, and the scale is one for the whole batch).
  void channel_scale_conv() {
    auto x = pick_rank(3, 5);
    if (!x) return;
    std::optional<TensorId> s;
    if (chance(0.6)) {
      if (auto p = add1(ops::GlobalAveragePool{}, {*x})) s = add1(ops::Sigmoid{}, {*p});
    } else {
      Shape ss(shape(*x).size(), 1);
      ss[1] = chance(0.8) ? shape(*x)[1] : 1;
      if (chance(0.3)) ss.erase(ss.begin());
      s = weight(ss, 1.0);
    }
    if (!s) return;
    auto y = chance(0.5) ? add1(ops::Mul{}, {*x, *s}) : add1(ops::Mul{}, {*s, *x});
    if (y) make_conv(*y, false);
  }

  /// A DenseNet block: each layer joins the block's input and every earlier layer's output
  /// (BN + Relu most often read the join, at times something else), a conv adds channels,
  /// and the block's last join takes them all (the cpu backend shares one buffer among
  /// joins that are prefixes of the last; strided views only where batch norms read them).
  void dense_block() {
    auto x = pick_rank(3, 5);
    if (!x) return;
    const size_t k = size_t(rank(*x)) - 2;
    std::vector<TensorId> feats{*x};
    const int layers = int(r_.range(1, 3));
    for (int l = 0; l < layers; ++l) {
      auto j = add1(ops::Concat{.axis = 1}, feats);
      if (!j) return;
      const int64_t c = shape(*j)[1];
      std::optional<TensorId> h = *j;
      if (chance(0.8)) {
        Tensor<float> var = values({c}, 0.3, 2.0);
        h = add1(ops::BatchNormalization{}, {*j, weight({c}, 1.5, 0), weight({c}, 0.5, 0), weight({c}, 0.5, 0), constant(var)});
        if (h && chance(0.8)) h = add1(ops::Relu{}, {*h});
      } else if (chance(0.5)) {
        h = add1(random_activation(), {*j});
      }
      if (!h) return;
      const int64_t grow = one_of<int64_t>({8, 16, 3});
      const int64_t kk = chance(0.5) ? 1 : 3;
      Shape w{grow, c};
      for (size_t i = 0; i < k; ++i) w.push_back(kk);
      auto f = add1(ops::Conv{.pads = std::vector<int64_t>(2 * k, kk / 2)}, {*h, weight(w, 1.5 / std::sqrt(double(c * (kk == 3 ? 9 : 1))))});
      if (!f) return;
      feats.push_back(*f);
    }
    add1(ops::Concat{.axis = 1}, feats);
  }

  void pad_then_window() {
    auto x = pick_rank(3, 5);
    if (!x) return;
    const size_t r = size_t(rank(*x)), k = r - 2;
    std::vector<int64_t> pads(2 * r, 0);
    for (size_t i = 0; i < k; ++i) pads[2 + i] = r_.range(0, 2), pads[r + 2 + i] = r_.range(0, 2);
    if (chance(0.15)) pads[1] = 1;  // a channel pad: must not fold
    ops::Pad p{.pads = pads};
    if (chance(0.15)) p.value = 0.5;  // not zero: must not fold
    auto y = add1(p, {*x});
    if (!y) return;
    if (chance(0.7)) {
      make_conv(*y, false);
    } else {
      ops::AveragePool ap;
      for (size_t i = 0; i < k; ++i) ap.kernel_shape.push_back(r_.range(1, 3));
      if (chance(0.3)) ap.pads.assign(2 * k, 0), ap.pads[0] = std::min<int64_t>(1, ap.kernel_shape[0] - 1);
      ap.ceil_mode = chance(0.2) && ceil_is_defined(ap, shape(*y));
      ap.count_include_pad = chance(0.5);
      add1(ap, {*y});
    }
  }

  void batch_norm() {
    auto x = pick_rank(2, 5);
    if (!x) return;
    const int64_t c = shape(*x)[1];
    Tensor<float> var = values({c}, 0.3, 2.0);
    std::vector<TensorId> in{*x, weight({c}, 1.5, 0.03), weight({c}, 0.5, 0.03), weight({c}, 0.5, 0.03),
                             chance(0.97) ? constant(var) : new_input({c})};
    if (g_.tensor(in[4]).producer < 0 && !g_.tensor(in[4]).is_constant()) {
      // an input variance may be negative: keep it a constant after all
      in[4] = constant(var);
    }
    ops::BatchNormalization bn;
    bn.epsilon = float(one_of<double>({1e-5, 1e-3, 0.1}));
    add1(bn, in);
  }

  Op random_activation() {
    switch (r_.below(8)) {
      case 0: case 1: return ops::Relu{};
      case 2: return ops::LeakyRelu{.alpha = float(one_of<double>({0.01, 0.2, -0.3, 1.5, 0.0}))};
      case 3: return ops::Sigmoid{};
      case 4: return ops::Tanh{};
      case 5: {
        ops::Clip c;
        double lo = r_.uniform(-1, 0.3), hi = lo + r_.uniform(0.05, 1.5);
        if (chance(0.05)) std::swap(lo, hi);  // min > max: max everywhere
        switch (r_.below(3)) {
          case 0: c.min = lo; break;
          case 1: c.max = hi; break;
          default: c.min = lo, c.max = hi;
        }
        return c;
      }
      case 6: return ops::Neg{};
      default: return ops::Erf{};
    }
  }

  void activation() {
    TensorId x = pick();
    switch (r_.below(10)) {
      case 0:  // exp of a bounded value
        if (auto t = add1(ops::Tanh{}, {x})) add1(ops::Exp{}, {*t});
        return;
      case 1:  // sqrt or log of a positive value
        if (auto t = add1(ops::Sigmoid{}, {x})) add1(chance(0.5) ? Op(ops::Sqrt{}) : Op(ops::Log{}), {*t});
        return;
      case 2:  // SiLU as PyTorch exports it: x * sigmoid(x), either operand order
        if (auto t = add1(ops::Sigmoid{}, {x})) add1(ops::Mul{}, chance(0.5) ? std::vector{x, *t} : std::vector{*t, x});
        return;
      default: {
        auto y = add1(random_activation(), {x});
        // repeated activations of one kind (oneDNN's post-op chains)
        if (y && chance(0.3)) add1(random_activation(), {*y});
      }
    }
  }

  /// x op c for a scalar constant c (either side), often chained: the scalings and shifts a
  /// backend turns into linear post-ops.
  void scalar_op() {
    TensorId x = pick();
    int n = chance(0.4) ? int(r_.range(2, 3)) : 1;
    for (int i = 0; i < n; ++i) {
      Shape s;
      switch (r_.below(4)) {
        case 0: s = {}; break;
        case 1: s = {1}; break;
        case 2: s = Shape(size_t(rank(x)), 1); break;
        default: s = Shape(size_t(std::min<int64_t>(rank(x) + int64_t(chance(0.3)), 6)), 1);
      }
      const int which = int(r_.below(4));
      TensorId c = constant(which == 3 ? away_from_zero(s, 0.4, 2.5) : values(s, -2, 2));
      std::optional<TensorId> y;
      const bool first = chance(0.3) && which != 3;
      switch (which) {
        case 0: y = add1(ops::Mul{}, first ? std::vector{c, x} : std::vector{x, c}); break;
        case 1: y = add1(ops::Add{}, first ? std::vector{c, x} : std::vector{x, c}); break;
        case 2: y = add1(ops::Sub{}, first ? std::vector{c, x} : std::vector{x, c}); break;
        default: y = add1(ops::Div{}, {x, c});
      }
      if (!y) return;
      x = *y;
      if (chance(0.2)) {
        if (auto a = add1(random_activation(), {x})) x = *a;
      }
    }
  }

  /// Two tensors of one shape: Add/Sub/Mul, and Div by a value kept away from zero.
  void binary_same() {
    TensorId a = pick();
    auto b = same_shape(a);
    if (!b) {
      b = add1(random_activation(), {a});
      if (!b) return;
    }
    TensorId x = a, y = *b;
    if (chance(0.5)) std::swap(x, y);
    std::optional<TensorId> out;
    switch (r_.below(4)) {
      case 0: out = add1(ops::Add{}, {x, y}); break;
      case 1: out = add1(ops::Sub{}, {x, y}); break;
      case 2: out = add1(ops::Mul{}, {x, y}); break;
      default: {
        auto s = add1(ops::Sigmoid{}, {y});
        if (!s) return;
        auto d = add1(ops::Add{}, {*s, constant(Tensor<float>({}, 0.5f))});
        if (!d) return;
        out = add1(ops::Div{}, {x, *d});
      }
    }
    if (out && chance(0.4)) add1(random_activation(), {*out});
  }

  Shape broadcast_shape_for(const Shape& s) {
    const size_t r = s.size();
    switch (r_.below(6)) {
      case 0:  // per channel, trailing ones
        if (r >= 2) {
          Shape b{s[1]};
          for (size_t i = 2; i < r; ++i) b.push_back(1);
          return b;
        }
        [[fallthrough]];
      case 1: return {s.back()};
      case 2: {
        Shape b = s;
        for (auto& d : b)
          if (chance(0.5)) d = 1;
        return b;
      }
      case 3: {  // rank bigger than s: the output grows
        Shape b = s;
        b.insert(b.begin(), r_.range(1, 3));
        for (size_t i = 1; i < b.size(); ++i)
          if (chance(0.5)) b[i] = 1;
        return b;
      }
      case 4: return Shape(r, 1);
      default: {
        Shape b(s.begin() + long(r_.below(r)), s.end());
        return b;
      }
    }
  }

  void binary_bcast() {
    TensorId x = pick();
    Shape bs = broadcast_shape_for(shape(x));
    const int which = int(r_.below(7));
    TensorId c;
    if (which == 3) c = constant(away_from_zero(bs, 0.5, 2));
    else if (which == 4) {
      Tensor<float> e(bs);
      for (int64_t i = 0; i < e.size(); ++i) e[i] = float(r_.range(1, 3));
      c = constant(e);
    } else c = chance(0.15) ? new_input(bs) : constant(values(bs, -1.5, 1.5));
    const bool swap = chance(0.4) && (which < 3 || which > 4);
    std::vector<TensorId> in = swap ? std::vector{c, x} : std::vector{x, c};
    std::optional<TensorId> out;
    switch (which) {
      case 0: out = add1(ops::Add{}, in); break;
      case 1: out = add1(ops::Sub{}, in); break;
      case 2: out = add1(ops::Mul{}, in); break;
      case 3: out = add1(ops::Div{}, in); break;
      case 4: out = add1(ops::Pow{}, in); break;
      case 5: out = add1(ops::Max{}, in); break;
      default: out = add1(ops::Min{}, in);
    }
    if (out && chance(0.3)) add1(random_activation(), {*out});
  }

  /// Whether ceil_mode's last window starts inside the input or the begin padding in every
  /// dim. Past that, runtimes disagree: ONNX Runtime 1.20 averages to NaN or reads past its
  /// buffer, PyTorch drops the window, pet gives 0 (average) or the lowest float (max).
  static bool ceil_is_defined(const ops::detail::Window& w, const Shape& xs) {
    const size_t k = xs.size() - 2;
    if (w.pads.size() != 2 * k) return false;
    for (size_t i = 0; i < k; ++i) {
      const int64_t n = xs[2 + i], st = w.strides.empty() ? 1 : w.strides[i], d = w.dilations.empty() ? 1 : w.dilations[i];
      const int64_t span = n + w.pads[i] + w.pads[i + k] - ((w.kernel_shape[i] - 1) * d + 1);
      if (span < 0) return false;
      const int64_t out = (span + st - 1) / st + 1;
      if ((out - 1) * st >= n + w.pads[i]) return false;
    }
    return true;
  }

  /// Whether some window of max pool `mp` over an input of shape xs sees only padding (its
  /// output is the lowest float), whichever attributes made it so.
  static bool some_window_only_padding(ops::MaxPool mp, const Shape& xs) {
    const std::vector<TensorType> in{{DType::Float32, xs}};
    const Shape ys = mp.infer(in)[0].shape;  // resolves auto_pad into pads
    const size_t k = xs.size() - 2;
    for (size_t i = 0; i < k; ++i)
      for (int64_t o = 0; o < ys[2 + i]; ++o) {
        bool inside = false;
        for (int64_t j = 0; j < mp.kernel_shape[i] && !inside; ++j) {
          const int64_t at = o * mp.strides[i] - mp.pads[i] + j * mp.dilations[i];
          inside = at >= 0 && at < xs[2 + i];
        }
        if (!inside) return true;
      }
    return false;
  }

  void pool() {
    auto x = pick_rank(3, 5);
    if (!x) return;
    const size_t k = size_t(rank(*x)) - 2;
    const bool max = chance(0.5);
    bool edge = false;
    ops::MaxPool mp;
    ops::AveragePool ap;
    auto& w = max ? static_cast<ops::detail::Window&>(mp) : static_cast<ops::detail::Window&>(ap);
    for (size_t i = 0; i < k; ++i) {
      w.kernel_shape.push_back(r_.range(1, 3));
      w.strides.push_back(r_.range(1, 3));
      w.dilations.push_back(max ? one_of<int64_t>({1, 1, 2}) : 1);
    }
    if (chance(0.1)) {
      w.auto_pad = one_of<AutoPad>({AutoPad::SameUpper, AutoPad::SameLower, AutoPad::Valid});
    } else if ((edge = chance(0.15))) {  // dilated windows over small inputs: some see only padding
      for (size_t i = 0; i < k; ++i) w.kernel_shape[i] = r_.range(2, 3), w.dilations[i] = max ? r_.range(2, 3) : 1;
      w.pads.assign(2 * k, 1);
    } else {
      w.pads.resize(2 * k);
      for (size_t i = 0; i < 2 * k; ++i) w.pads[i] = chance(0.5) ? 0 : r_.range(0, w.kernel_shape[i % k] - 1);
    }
    w.ceil_mode = chance(0.25) && ceil_is_defined(w, shape(*x));
    ap.count_include_pad = chance(0.5);
    if (!max) {
      add1(ap, {*x});
      return;
    }
    auto y = add1(mp, {*x});
    // A window of padding only gives the lowest float; read on, it overflows differently in
    // every implementation: such a pool is an output only (also where random pads and
    // dilations made one by chance).
    if (y && (edge || some_window_only_padding(mp, shape(*x)))) pool_.pop_back(), scalars_.push_back(*y);
  }

  void global_pool() {
    if (auto x = pick_rank(3, 5)) add1(ops::GlobalAveragePool{}, {*x});
  }

  void matmul() {
    auto a = pick_rank(1, 4);
    if (!a) return;
    const Shape& as = shape(*a);
    const int64_t kd = as.back();
    const double scale = 1.5 / std::sqrt(double(kd));
    std::vector<TensorId> in;
    switch (r_.below(6)) {
      case 0: case 1: case 2: in = {*a, weight({kd, r_.range(1, 24)}, scale)}; break;
      case 3: {  // batched weights
        Shape b(as.begin(), as.end() - 1);
        if (b.empty()) b = {1};
        if (chance(0.5) && !b.empty()) b[0] = 1;
        b.push_back(kd);
        b.push_back(r_.range(1, 16));
        if (as.size() < 2) b = {kd, r_.range(1, 16)};
        else b.erase(b.end() - 3);  // [.., K, N] for [.., M, K]
        in = {*a, weight(b, scale)};
        break;
      }
      case 4: {  // x times its own transpose (attention scores)
        if (as.size() < 2) return;
        std::vector<int64_t> perm(as.size());
        std::iota(perm.begin(), perm.end(), 0);
        std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
        auto t = add1(ops::Transpose{.perm = perm}, {*a});
        if (!t) return;
        in = {*a, *t};
        break;
      }
      default: in = {*a, weight({kd}, scale)};  // matrix-vector
    }
    auto y = add1(ops::MatMul{}, in);
    if (!y) return;
    if (chance(0.4)) {  // a bias over the last dim
      Shape bs{shape(*y).empty() ? 1 : shape(*y).back()};
      if (auto z = add1(ops::Add{}, chance(0.7) ? std::vector{*y, weight(bs, 0.5)} : std::vector{weight(bs, 0.5), *y})) y = z;
    }
    if (chance(0.4)) add1(random_activation(), {*y});
  }

  void gemm() {
    TensorId x = pick();
    if (rank(x) != 2) {
      auto f = add1(ops::Flatten{.axis = r_.range(0, rank(x))}, {x});
      if (!f) return;
      x = *f;
    }
    ops::Gemm gm;
    gm.trans_a = chance(0.3);
    gm.trans_b = chance(0.4);
    gm.alpha = float(one_of<double>({1, 1, 0.5, -2, 0}));
    gm.beta = float(one_of<double>({1, 1, 0.3, 0}));
    const int64_t m = gm.trans_a ? shape(x)[1] : shape(x)[0], kd = gm.trans_a ? shape(x)[0] : shape(x)[1], n = r_.range(1, 24);
    std::vector<TensorId> in{x, weight(gm.trans_b ? Shape{n, kd} : Shape{kd, n}, 1.5 / std::sqrt(double(kd)))};
    if (chance(0.7)) in.push_back(weight(one_of<Shape>({{n}, {1, n}, {m, n}, {m, 1}, {}, {1}}), 0.5, 0.1));
    auto y = add1(gm, in);
    if (y && chance(0.4)) add1(random_activation(), {*y});
  }

  /// A random factorisation of n into up to `parts` factors.
  Shape factorise(int64_t n, int parts) {
    Shape s;
    for (int i = 0; i + 1 < parts && n > 1; ++i) {
      std::vector<int64_t> divs;
      for (int64_t d = 1; d <= n; ++d)
        if (n % d == 0) divs.push_back(d);
      int64_t d = one_of(divs);
      s.push_back(d);
      n /= d;
    }
    s.push_back(n);
    shuffle(s);
    return s;
  }

  void reshape() {
    TensorId x = pick();
    Shape s = factorise(numel(shape(x)), int(r_.range(1, 5)));
    std::vector<int64_t> spec(s.begin(), s.end());
    if (chance(0.3)) spec[size_t(r_.below(spec.size()))] = -1;
    if (chance(0.2) && spec.size() <= shape(x).size() && spec[0] == shape(x)[0]) spec[0] = 0;
    add1(ops::Reshape{.shape = spec}, {x});
  }
  std::vector<int64_t> random_perm(size_t r) {
    std::vector<int64_t> p(r);
    std::iota(p.begin(), p.end(), 0);
    shuffle(p);
    return p;
  }
  void transpose() {
    TensorId x = pick();
    add1(ops::Transpose{.perm = random_perm(size_t(rank(x)))}, {x});
  }
  void flatten() {
    TensorId x = pick();
    add1(ops::Flatten{.axis = r_.range(-rank(x), rank(x))}, {x});
  }
  void squeeze() {
    TensorId x = pick();
    if (chance(0.5)) {
      std::vector<int64_t> axes;
      for (int64_t i = 0; i < rank(x); ++i)
        if (shape(x)[size_t(i)] == 1 && chance(0.7)) axes.push_back(chance(0.3) ? i - rank(x) : i);
      if (!axes.empty() || chance(0.3)) add1(ops::Squeeze{.axes = axes}, {x});
    } else if (rank(x) < 6) {
      add1(ops::Unsqueeze{.axes = {r_.range(0, rank(x))}}, {x});
    }
  }
  void rt() {
    TensorId x = pick();
    const int64_t n = numel(shape(x));
    Shape split = factorise(n, int(r_.range(2, 5)));
    Shape out = factorise(n, int(r_.range(1, 4)));
    add1(ops::RT{.split_shape = split, .perm = random_perm(split.size()), .out_shape = out}, {x});
  }
  void expand() {
    TensorId x = pick();
    Shape s = shape(x);
    for (auto& d : s)
      if (d == 1 && chance(0.6)) d = r_.range(2, 3);
    if (chance(0.3) && s.size() < 6) s.insert(s.begin(), r_.range(1, 2));
    if (chance(0.2)) s[size_t(r_.below(s.size()))] = 1;  // 1 keeps the input's size
    add1(ops::Expand{.shape = std::vector<int64_t>(s.begin(), s.end())}, {x});
  }
  void concat() {
    TensorId a = pick();
    const int64_t axis = r_.range(0, rank(a) - 1);
    std::vector<TensorId> in{a};
    const int n = int(r_.range(1, 3));
    for (int i = 0; i < n; ++i) {
      Shape s = shape(a);
      switch (r_.below(4)) {
        case 0: in.push_back(a); break;
        case 1:
          if (auto b = same_shape(a)) in.push_back(*b);
          else in.push_back(a);
          break;
        default:
          s[size_t(axis)] = r_.range(1, 4);
          in.push_back(chance(0.7) ? constant(values(s, -1, 1)) : new_input(s));
      }
    }
    shuffle(in);
    add1(ops::Concat{.axis = chance(0.3) ? axis - rank(a) : axis}, in);
  }
  void split() {
    TensorId x = pick();
    const int64_t axis = r_.range(0, rank(x) - 1), n = shape(x)[size_t(axis)];
    if (n < 2) return;
    const int parts = int(r_.range(2, std::min<int64_t>(3, n)));
    ops::Split sp{.axis = axis, .num_outputs = parts};
    if (chance(0.6)) {
      std::vector<int64_t> cut;
      for (int i = 0; i < parts - 1; ++i) cut.push_back(r_.range(1, n - 1));
      std::sort(cut.begin(), cut.end());
      cut.erase(std::unique(cut.begin(), cut.end()), cut.end());
      int64_t prev = 0;
      for (int64_t c : cut) sp.split.push_back(c - prev), prev = c;
      sp.split.push_back(n - prev);
      sp.num_outputs = int(sp.split.size());
    } else if (n % parts) {
      return;
    }
    add(sp, {x});
  }
  void slice() {
    TensorId x = pick();
    ops::Slice s;
    const int na = int(r_.range(1, std::min<int64_t>(2, rank(x))));
    std::vector<int64_t> axes = random_perm(size_t(rank(x)));
    for (int i = 0; i < na; ++i) {
      const int64_t n = shape(x)[size_t(axes[size_t(i)])];
      int64_t step = one_of<int64_t>({1, 1, 1, 2, -1, -2});
      int64_t b = r_.range(-n, n), e = r_.range(-n - 1, n + 1);
      if (step > 0 && chance(0.3)) b = 0, e = one_of<int64_t>({n, INT64_MAX, n - 1});
      if (step < 0 && chance(0.3)) b = -1, e = INT64_MIN;
      s.starts.push_back(b);
      s.ends.push_back(e);
      s.axes.push_back(axes[size_t(i)]);
      s.steps.push_back(step);
    }
    add1(s, {x});
  }
  void pad() {
    TensorId x = pick();
    const size_t r = size_t(rank(x));
    ops::Pad p;
    p.mode = one_of<ops::PadMode>({ops::PadMode::Constant, ops::PadMode::Constant, ops::PadMode::Reflect, ops::PadMode::Edge});
    p.pads.resize(2 * r);
    for (size_t i = 0; i < 2 * r; ++i) {
      const int64_t n = shape(x)[i % r];
      if (chance(0.5)) continue;
      if (p.mode == ops::PadMode::Reflect) p.pads[i] = r_.range(0, std::max<int64_t>(0, n - 1));
      else if (p.mode == ops::PadMode::Constant && chance(0.15) && n > 1) p.pads[i] = -r_.range(1, n / 2);
      else p.pads[i] = r_.range(0, 3);
    }
    if (p.mode == ops::PadMode::Constant && chance(0.4)) p.value = r_.uniform(-1, 1);
    add1(p, {x});
  }
  /// Softmax, LogSoftmax (both over one dim or, as before opset 13, the flattened tail) or,
  /// on N x C x H x W tensors, LRN across channels.
  void softmax() {
    TensorId x = pick();
    if (rank(x) == 4 && chance(0.25)) {  // 4-D and odd sizes: what ONNX Runtime runs
      add1(ops::LRN{.size = one_of<int64_t>({1, 3, 5, 7}), .alpha = float(r_.uniform(1e-4, 1.0)), .beta = float(one_of<double>({0.5, 0.75, 1.0})),
                    .bias = float(one_of<double>({1.0, 2.0}))},
           {x});
      return;
    }
    const int64_t axis = r_.range(-rank(x), rank(x) - 1);
    const bool tail = chance(0.2);
    if (chance(0.35)) add1(ops::LogSoftmax{{.axis = axis, .flatten_tail = tail}}, {x});
    else add1(ops::Softmax{{.axis = axis, .flatten_tail = tail}}, {x});
  }
  void reduce() {
    TensorId x = pick();
    std::vector<int64_t> axes;
    for (int64_t i = 0; i < rank(x); ++i)
      if (chance(0.4)) axes.push_back(chance(0.3) ? i - rank(x) : i);
    if (axes.empty()) axes.push_back(rank(x) - 1);
    const bool keep = chance(0.6);
    switch (r_.below(9)) {
      case 0:
      case 1: add1(ops::ReduceMean{{.axes = axes, .keepdims = keep}}, {x}); break;
      case 2:
      case 3: add1(ops::ReduceSum{{.axes = axes, .keepdims = keep}}, {x}); break;
      case 4: add1(ops::ReduceMin{{.axes = axes, .keepdims = keep}}, {x}); break;
      case 5: add1(ops::ReduceL1{{.axes = axes, .keepdims = keep}}, {x}); break;
      case 6: add1(ops::ReduceL2{{.axes = axes, .keepdims = keep}}, {x}); break;
      case 7: add1(ops::ReduceSumSquare{{.axes = axes, .keepdims = keep}}, {x}); break;
      default: add1(ops::ReduceMax{{.axes = axes, .keepdims = keep}}, {x});
    }
  }
  void layer_norm() {
    TensorId x = pick();
    const int64_t axis = r_.range(0, rank(x) - 1);
    Shape norm(shape(x).begin() + axis, shape(x).end());
    if (chance(0.3)) norm = {norm.back()};
    if (numel(norm) != norm.back() && norm.size() > 1 && chance(0.5)) norm = Shape(shape(x).begin() + axis, shape(x).end());
    std::vector<TensorId> in{x, weight(norm, 1.5, 0.05)};
    if (chance(0.6)) in.push_back(weight(norm, 0.5, 0.05));
    ops::LayerNormalization ln;
    ln.axis = chance(0.5) ? axis : axis - rank(x);
    // epsilon >= 1e-4: a slice that does not depend on the input (a conv row that sees only
    // padding, a clipped constant) has variance 0 in exact arithmetic, and the float rounding
    // of its mean divided by sqrt(epsilon) is noise: 1e-4 keeps it under the tolerance in
    // every runtime (ONNX Runtime's float statistics gave 1.3e-4 with 1e-5).
    ln.epsilon = float(one_of<double>({1e-4, 1e-3}));
    add1(ln, in);
  }
  /// LayerNorm over the last dim as PyTorch exports it before opset 17.
  void decomposed_layer_norm() {
    auto x0 = pick_rank(2, 4);
    if (!x0) return;
    TensorId x = *x0;
    const int64_t last = rank(x) - 1, len = shape(x).back();
    if (len < 2) return;
    auto m = add1(ops::ReduceMean{{.axes = {chance(0.5) ? last : -1}, .keepdims = true}}, {x});
    if (!m) return;
    auto d = add1(ops::Sub{}, {x, *m});
    if (!d) return;
    auto p = add1(ops::Pow{}, {*d, constant(Tensor<float>({}, 2.f))});
    if (!p) return;
    auto v = add1(ops::ReduceMean{{.axes = {last}, .keepdims = true}}, {*p});
    if (!v) return;
    auto e = add1(ops::Add{}, {*v, constant(Tensor<float>({}, float(one_of<double>({1e-4, 1e-3}))))});
    if (!e) return;
    auto s = add1(ops::Sqrt{}, {*e});
    if (!s) return;
    auto y = add1(ops::Div{}, {*d, *s});
    if (!y || chance(0.3)) return;
    auto g = add1(ops::Mul{}, {*y, weight({len}, 1.5, 0.05)});
    if (!g || chance(0.3)) return;
    add1(ops::Add{}, {*g, weight({len}, 0.5, 0.05)});
  }
  /// GELU as PyTorch exports it: x * (erf(x / sqrt 2) + 1) * 0.5.
  void gelu() {
    TensorId x = pick();
    auto a = chance(0.7) ? add1(ops::Div{}, {x, constant(Tensor<float>({}, 1.41421356f))})
                         : add1(ops::Mul{}, {x, constant(Tensor<float>({}, 0.70710678f))});
    if (!a) return;
    auto e = add1(ops::Erf{}, {*a});
    if (!e) return;
    auto p = add1(ops::Add{}, {*e, constant(Tensor<float>({}, 1.f))});
    if (!p) return;
    auto m = add1(ops::Mul{}, {x, *p});
    if (!m) return;
    add1(ops::Mul{}, {*m, constant(Tensor<float>({}, 0.5f))});
  }
  void identity() {
    TensorId x = pick();
    if (chance(0.5)) add1(ops::Identity{}, {x});
    else add1(ops::Dropout{}, {x});
  }
  void patch() {
    TensorId base = pick();
    Shape ps = shape(base);
    std::vector<int64_t> off;
    for (auto& d : ps) {
      int64_t n = d;
      d = r_.range(1, n);
      off.push_back(r_.range(0, n - d));
    }
    TensorId p = chance(0.6) ? constant(values(ps, -1, 1)) : new_input(ps);
    add1(ops::Patch{.offsets = off}, {base, p});
  }
  /// Where with a constant condition (a mask) broadcast over x, the other operand x's shape,
  /// broadcast or a scalar (a mask's fill value); pet's broadcasting select.
  void where() {
    TensorId x = pick();
    Shape cs = broadcast_shape_for(shape(x));
    Tensor<int64_t> c(cs);
    for (int64_t i = 0; i < c.size(); ++i) c[i] = int64_t(chance(0.5));
    TensorId cond = g_.add_constant(g_.unique_name("cond"), DType::Bool, c);
    TensorId y = x;
    switch (r_.below(4)) {
      case 0: y = constant(values(shape(x), -1, 1)); break;
      case 1: y = constant(values(broadcast_shape_for(shape(x)), -1, 1)); break;
      case 2: y = constant(values({}, -30, -10)); break;
      default: break;
    }
    add1(ops::Where{}, chance(0.5) ? std::vector{cond, x, y} : std::vector{cond, y, x});
  }
  /// Gather of constant indices (a scalar, a list or a 2-D block; negative ones too): a
  /// scalar becomes a Slice (gather-to-slice), the others pet's gather kernel; sometimes
  /// GatherElements (indices at most the data's extent in the other dims).
  void gather() {
    TensorId x = pick();
    const int64_t axis = r_.range(0, rank(x) - 1), n = shape(x)[size_t(axis)];
    if (chance(0.25)) {
      Shape is = shape(x);
      for (size_t d = 0; d < is.size(); ++d) is[d] = int64_t(d) == axis ? r_.range(1, n + 2) : r_.range(1, is[d]);
      std::vector<int64_t> idx;
      for (int64_t i = numel(is); i > 0; --i) idx.push_back(r_.range(-n, n - 1));
      add1(ops::GatherElements{.axis = axis}, {x, ints(idx, is)});
    } else if (chance(0.3)) {
      add1(ops::Gather{.axis = axis}, {x, ints({r_.range(-n, n - 1)}, Shape{})});
    } else {
      Shape is = chance(0.7) ? Shape{r_.range(1, 4)} : Shape{r_.range(1, 3), r_.range(1, 3)};
      std::vector<int64_t> idx;
      for (int64_t i = numel(is); i > 0; --i) idx.push_back(r_.range(-n, n - 1));
      add1(ops::Gather{.axis = axis}, {x, ints(idx, is)});
    }
  }
  /// Tile: some dims repeated (one strided copy).
  void tile() {
    TensorId x = pick();
    std::vector<int64_t> rep(size_t(rank(x)), 1);
    for (auto& r : rep)
      if (chance(0.4)) r = r_.range(2, 3);
    add1(ops::Tile{.repeats = rep}, {x});
  }

  /// The ops between float and integer tensors (pet's kernels): a comparison whose mask
  /// chooses between two tensors, a round trip through int32 (Cast truncates) or a Cast to
  /// float16 or bfloat16 (rounds), ArgMax /
  /// ArgMin / TopK / MaxPool indices read back as float, a running sum, a log-sum-exp over a block of dims. The first
  /// three jump where their input crosses a threshold or ties, so they read a graph input
  /// (both sides see the same bits; a computed tensor differs in its last bits between
  /// kernels, and a near-tie of an ArgMax then flips).
  void float_int() {
    const int kind = int(r_.below(5));
    TensorId x = kind < 3 ? one_of(g_.inputs()) : pick();
    const int64_t r = rank(x);
    if (r == 0) return;  // a scalar graph input (a weight made an input)
    switch (kind) {
      case 0: {
        const Shape bs = chance(0.5) ? Shape{} : broadcast_shape_for(shape(x));
        const std::vector<Op> cmps = {ops::Equal{}, ops::Less{}, ops::LessOrEqual{}, ops::Greater{}, ops::GreaterOrEqual{}};
        auto c = add1(one_of(cmps), {x, constant(values(bs, -0.5, 0.5))});
        if (c) add1(ops::Where{}, {*c, x, constant(values(broadcast_shape_for(shape(x)), -1, 1))});
        break;
      }
      case 1: {
        if (chance(0.5)) {  // ONNX's Cast to float16 or bfloat16: rounded to the type, held as float32
          add1(ops::Cast{.narrow = chance(0.5) ? kFloat16 : kBFloat16}, {x});
          break;
        }
        auto scaled = add1(ops::Mul{}, {x, constant(values({}, 2, 6))});
        if (auto i = scaled ? add1(ops::Cast{.to = DType::Int32}, {*scaled}) : std::nullopt) add1(ops::Cast{.to = DType::Float32}, {*i});
        break;
      }
      case 2: {
        const int64_t axis = r_.range(0, r - 1);
        const bool keep = chance(0.5), last = chance(0.3);
        std::optional<TensorId> i;
        switch (r_.below(r >= 3 && r <= 5 ? 4 : 3)) {
          case 0: i = add1(ops::ArgMax{{.axis = axis, .keepdims = keep, .select_last_index = last}}, {x}); break;
          case 1: i = add1(ops::ArgMin{{.axis = axis, .keepdims = keep, .select_last_index = last}}, {x}); break;
          case 3: {  // a max pool's Indices (MaxUnpool's input): values join the pool, indices as float
            ops::MaxPool mp;
            for (int64_t d = 2; d < r; ++d) {
              mp.kernel_shape.push_back(r_.range(1, std::min<int64_t>(3, shape(x)[size_t(d)])));
              mp.strides.push_back(r_.range(1, 2));
            }
            mp.num_outputs = 2;
            mp.storage_order = chance(0.3);
            auto outs = add(mp, {x});
            if (outs.size() == 2) i = outs[1];
            break;
          }
          default: {  // values join the pool, indices as float
            auto outs = add(ops::TopK{.k = r_.range(1, shape(x)[size_t(axis)]), .axis = axis, .largest = chance(0.7)}, {x});
            if (outs.size() == 2) i = outs[1];
          }
        }
        if (i) add1(ops::Cast{.to = DType::Float32}, {*i});
        break;
      }
      case 3: add1(ops::CumSum{.axis = r_.range(0, r - 1), .exclusive = chance(0.3), .reverse = chance(0.3)}, {x}); break;
      default: {
        const int64_t a = r_.range(0, r - 1), b = r_.range(a, r - 1);
        std::vector<int64_t> axes;
        for (int64_t k = a; k <= b; ++k) axes.push_back(k);
        if (r >= 3 && chance(0.3)) axes = {0, r - 1};  // dims apart
        add1(ops::ReduceLogSumExp{{.axes = axes, .keepdims = chance(0.6)}}, {x});
      }
    }
  }

  /// More ops with their own cpu kernels: Hardmax, Trilu, Mod (fmod), ReduceLogSum, masks
  /// joined by logical ops, integer comparisons and casts, OneHot, GatherND. Those that jump
  /// (a maximum's position, a remainder's wrap, a threshold, a truncation) read a graph input,
  /// as in float_int.
  void masks_and_indices() {
    const int kind = int(r_.below(10));
    TensorId x = kind == 0 || kind == 2 || (kind >= 4 && kind <= 7) ? one_of(g_.inputs()) : pick();
    const int64_t r = rank(x);
    if (r == 0) return;  // a scalar graph input (a weight made an input)
    switch (kind) {
      case 0: add1(ops::Hardmax{{.axis = r_.range(0, r - 1), .flatten_tail = chance(0.3)}}, {x}); break;
      case 1: add1(ops::Trilu{.upper = chance(0.5), .k = r_.range(-3, 3)}, {x}); break;
      case 2: add1(ops::Mod{.fmod = 1}, {x, constant(away_from_zero(chance(0.5) ? Shape{} : broadcast_shape_for(shape(x)), 0.3, 1.5))}); break;
      case 3: {
        if (auto s = add1(ops::Sigmoid{}, {x})) {
          const int64_t a = r_.range(0, r - 1);
          std::vector<int64_t> axes = {a};
          if (chance(0.4) && a + 1 < r) axes.push_back(r_.range(a + 1, r - 1));
          add1(ops::ReduceLogSum{{.axes = axes, .keepdims = chance(0.5)}}, {*s});
        }
        break;
      }
      case 4: {  // two thresholds joined: (x < a) op (x > b), or not (x < a)
        auto lo = add1(ops::Less{}, {x, constant(values({}, -0.6, 0.2))});
        auto hi = add1(ops::Greater{}, {x, constant(values(chance(0.5) ? Shape{} : broadcast_shape_for(shape(x)), -0.2, 0.6))});
        if (!lo || !hi) break;
        const std::vector<Op> logic = {ops::And{}, ops::Or{}, ops::Xor{}};
        auto m = chance(0.25) ? add1(ops::Not{}, {*lo}) : add1(one_of(logic), {*lo, *hi});
        if (m) add1(ops::Where{}, {*m, x, constant(values(broadcast_shape_for(shape(x)), -1, 1))});
        break;
      }
      case 5: {  // integers compared and converted: (int(3x) cmp int(3y)) as int64, int8 and back to float
        auto scaled = add1(ops::Mul{}, {x, constant(values({}, 2, 4))});
        auto a = scaled ? add1(ops::Cast{.to = DType::Int64}, {*scaled}) : std::nullopt;
        auto b = a ? add1(ops::Cast{.to = DType::Int32}, {*a}) : std::nullopt;
        const std::vector<Op> cmps = {ops::Equal{}, ops::Less{}, ops::LessOrEqual{}, ops::Greater{}, ops::GreaterOrEqual{}};
        auto c = b ? add1(one_of(cmps), {*b, add1(ops::Cast{.to = DType::Int32}, {ints({r_.range(-2, 2)})}).value_or(*b)}) : std::nullopt;
        auto d = c ? add1(ops::Cast{.to = chance(0.5) ? DType::Int8 : DType::Int64}, {*c}) : std::nullopt;
        if (d) add1(ops::Cast{.to = DType::Float32}, {*d});
        if (b && chance(0.4)) {  // integer Div or Mod by a constant (never 0; -1 included)
          auto k = add1(ops::Cast{.to = DType::Int32}, {ints({one_of<int64_t>({-3, -1, 2, 5})})});
          auto q = k ? add1(chance(0.5) ? Op(ops::Div{}) : Op(ops::Mod{.fmod = int64_t(r_.below(2))}), {*b, *k}) : std::nullopt;
          if (q) add1(ops::Cast{.to = DType::Float32}, {*q});
        }
        if (b && chance(0.5))
          if (auto w = add1(ops::Cast{.to = DType::UInt8}, {*b})) add1(ops::Cast{.to = DType::Float32}, {*w});
        break;
      }
      case 6: {  // OneHot of int(3x) (some out of range, some negative)
        if (r > 4) break;
        auto scaled = add1(ops::Mul{}, {x, constant(values({}, 2, 4))});
        auto idx = scaled ? add1(ops::Cast{.to = DType::Int64}, {*scaled}) : std::nullopt;
        if (idx) add1(ops::OneHot{.depth = r_.range(2, 5), .axis = r_.range(-1, r)}, {*idx, constant(values({2}, -2, 2))});
        break;
      }
      case 8: {  // ScatterND into a pool tensor: constant tuples (duplicates, negative ones), constant updates
        const int64_t m = r_.range(1, r);
        Shape is;
        if (chance(0.5)) is.push_back(r_.range(1, 2));
        is.push_back(r_.range(1, 3));
        is.push_back(m);
        std::vector<int64_t> idx;
        for (int64_t i = 0; i < numel(is); ++i) {
          const int64_t n = shape(x)[size_t(i % m)];
          idx.push_back(r_.range(-n, n - 1));
        }
        Shape us(is.begin(), is.end() - 1);
        us.insert(us.end(), shape(x).begin() + m, shape(x).end());
        // (none, add or mul: max and min need opset 18, and pet writes 17; test_cpu has them)
        const auto red = static_cast<ops::ScatterReduction>(r_.below(3));
        add1(ops::ScatterND{.reduction = red}, {x, ints(idx, is), constant(values(us, -1, 1))});
        break;
      }
      case 9: {  // ScatterElements along one axis: indices no larger than the data elsewhere
        const int64_t a = r_.range(0, r - 1);
        Shape is = shape(x);
        for (int64_t d = 0; d < r; ++d) is[size_t(d)] = d == a ? r_.range(1, 4) : r_.range(1, is[size_t(d)]);
        std::vector<int64_t> idx;
        const int64_t n = shape(x)[size_t(a)];
        for (int64_t i = 0; i < numel(is); ++i) idx.push_back(r_.range(-n, n - 1));
        const auto red = static_cast<ops::ScatterReduction>(r_.below(3));
        add1(ops::ScatterElements{.axis = chance(0.3) ? a - r : a, .reduction = red}, {x, ints(idx, is), constant(values(is, -1, 1))});
        break;
      }
      default: {  // GatherND of a pool tensor with constant tuples
        TensorId d = pick();
        const int64_t dr = rank(d), b = dr > 1 && chance(0.3) ? 1 : 0, m = r_.range(1, dr - b);
        Shape is(shape(d).begin(), shape(d).begin() + b);
        if (chance(0.6)) is.push_back(r_.range(1, 3));
        is.push_back(m);
        std::vector<int64_t> idx;
        for (int64_t i = 0; i < numel(is); ++i) {
          const int64_t n = shape(d)[size_t(b + i % m)];
          idx.push_back(r_.range(-n, n - 1));
        }
        add1(ops::GatherND{.batch_dims = b}, {d, ints(idx, is)});
      }
    }
  }

  /// Every float tensor nobody reads is an output; so are some intermediates (a fusion must
  /// not swallow a tensor the caller sees).
  void choose_outputs() {
    auto consumers = g_.consumers();
    std::vector<TensorId> outs;
    for (TensorId t : pool_) {
      const bool leaf = consumers[size_t(t)].empty();
      const bool input = g_.tensor(t).producer < 0;
      if ((leaf && (!input || g_.num_nodes() == 0)) || (!leaf && chance(0.08))) outs.push_back(t);
    }
    for (TensorId t : scalars_)
      if (consumers[size_t(t)].empty()) outs.push_back(t);
    if (outs.empty()) outs.push_back(pool_.back());
    for (TensorId t : outs) g_.add_output(t);
  }

  Rng r_;
  GenOptions opt_;
  Graph g_;
  std::vector<TensorId> pool_;     ///< float tensors a step may read (inputs and node outputs)
  std::vector<TensorId> scalars_;  ///< results that are outputs only (rank 0, or max pools over padding)
};

}  // namespace

uint64_t program_seed(uint64_t run_seed, uint64_t index) {
  Rng r(run_seed * 0x9e3779b97f4a7c15ull + index);
  return r.next();
}

Graph random_program(uint64_t seed, const GenOptions& opt) {
  Generator gen(seed, opt);
  Graph g = gen.run();
  g.name = cat("difftest_", seed);
  return g;
}

}  // namespace pet::difftest
