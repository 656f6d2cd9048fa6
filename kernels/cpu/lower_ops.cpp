// Pools, element-wise and binary ops, softmax, layer norm, reductions and concat on the cpu backend.
#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>

#include "executable.hpp"
#include "algorithm_cache.hpp"
#include "broadcast.hpp"
#include "copy.hpp"
#include "norm.hpp"
#include "pet/backend/copy_plan.hpp"
#include "pet/core/parallel.hpp"
#include "pet/eval/interpreter.hpp"
#include "pet/eval/resize_tables.hpp"

namespace pet::backend::cpu_detail {

bool CpuExecutable::lower_op(NodeId n, const ops::MaxPool& p, const std::string& who) {
  const Node& node = g_.node(n);
  if (node.outputs.size() != 2) return lower_pool(n, p, algorithm::pooling_max, who);
  // With Indices (MaxPool's second output, as MaxUnpool and PyTorch's return_indices read
  // it), which oneDNN's pooling does not give: pet's kernel, plane by plane, with
  // ops::MaxPool's rule: the first maximum in window order (a NaN first stays), the lowest
  // float and index -1 for a window of padding only; the index row-major over X, or
  // column-major over the spatial dims (storage_order 1).
  const TensorId xt = node.inputs[0], yt = node.outputs[0], it = node.outputs[1];
  if (!slots_[size_t(xt)].is_float()) return false;
  const Shape &xs = g_.type(xt).shape, &ys = g_.type(yt).shape;
  const size_t k = xs.size() - 2;
  if (k < 1 || k > 3) return false;
  // spatial dims padded in front to 3 (extent 1, kernel 1): the same offsets either way
  std::array<int64_t, 3> X{1, 1, 1}, Y{1, 1, 1}, K{1, 1, 1}, S{1, 1, 1}, D{1, 1, 1}, P{0, 0, 0};
  for (size_t i = 0; i < k; ++i) {
    const size_t j = 3 - k + i;
    X[j] = xs[2 + i], Y[j] = ys[2 + i], K[j] = p.kernel_shape[i], S[j] = p.strides[i], D[j] = p.dilations[i], P[j] = p.pads[i];
  }
  const int64_t planes = xs[0] * xs[1], xplane = X[0] * X[1] * X[2], yplane = Y[0] * Y[1] * Y[2];
  const bool column_major = p.storage_order == 1;
  const int x = plain_slot(int(xt)), y = int(yt);
  define(yt, plain_md(ys));
  const Shape is = g_.type(it).shape;
  // per dim and output position, the window's positions inside X: from [0] to before [1] in
  // steps of the dilation (its taps o * s - p + r * d, r < k, that land in [0, n))
  std::array<std::vector<std::array<int64_t, 2>>, 3> span;
  for (size_t j = 0; j < 3; ++j)
    for (int64_t o = 0; o < Y[j]; ++o) {
      const int64_t b = o * S[j] - P[j];
      int64_t lo = 0, hi = K[j];
      while (lo < hi && b + lo * D[j] < 0) ++lo;
      while (hi > lo && b + (hi - 1) * D[j] >= X[j]) --hi;
      span[j].push_back({b + lo * D[j], b + hi * D[j]});
    }
  add_step(cat(who, ": pet max pool with indices"), {x}, {y, int(it)}).fn = [this, x, y, it, is, X, Y, D, span, planes, xplane, yplane, column_major] {
    const float* src = ptr(x);
    float* vals = ptr(y);
    int64_t* ids = host_result(it, is);
    parallel_chunks(planes, std::max<int64_t>(1, 4096 / std::max<int64_t>(yplane, 1)), [&](int64_t b, int64_t e) {
      for (int64_t pl = b; pl < e; ++pl) {
        const float* in = src + pl * xplane;
        float* ov = vals + pl * yplane;
        int64_t* oi = ids + pl * yplane;
        for (int64_t o0 = 0; o0 < Y[0]; ++o0)
          for (int64_t o1 = 0; o1 < Y[1]; ++o1)
            for (int64_t o2 = 0; o2 < Y[2]; ++o2) {
              const auto &t0 = span[0][size_t(o0)], &t1 = span[1][size_t(o1)], &t2 = span[2][size_t(o2)];
              const int64_t at = (o0 * Y[1] + o1) * Y[2] + o2;
              if (t0[0] >= t0[1] || t1[0] >= t1[1] || t2[0] >= t2[1]) {
                ov[at] = std::numeric_limits<float>::lowest(), oi[at] = -1;
                continue;
              }
              // from the first tap on, a later one replaces only a smaller maximum (without
              // branches: random data's maxima fall anywhere)
              int64_t arg = (t0[0] * X[1] + t1[0]) * X[2] + t2[0];  // offset in the plane
              float best = in[arg];
              for (int64_t a = t0[0]; a < t0[1]; a += D[0])
                for (int64_t h = t1[0]; h < t1[1]; h += D[1]) {
                  const int64_t row = (a * X[1] + h) * X[2];
                  for (int64_t w = t2[0]; w < t2[1]; w += D[2]) {
                    const float v = in[row + w];
                    const bool more = v > best;
                    best = more ? v : best;
                    arg = more ? row + w : arg;
                  }
                }
              ov[at] = best;
              int64_t off = arg;
              if (column_major) {  // the first spatial dim fastest
                const int64_t a = arg / (X[1] * X[2]), h = arg / X[2] % X[1], w = arg % X[2];
                off = (w * X[1] + h) * X[0] + a;
              }
              oi[at] = pl * xplane + off;
            }
      }
    });
  };
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::AveragePool& p, const std::string& who) {
  return lower_pool(n, p, p.count_include_pad ? algorithm::pooling_avg_include_padding : algorithm::pooling_avg_exclude_padding, who);
}

bool CpuExecutable::lower_op(NodeId n, const ops::GlobalAveragePool&, const std::string& who) {
  const Node& node = g_.node(n);
  const Shape& xs = g_.type(node.inputs[0]).shape;
  ops::AveragePool p;
  p.kernel_shape.assign(xs.begin() + 2, xs.end());
  p.strides.assign(xs.size() - 2, 1);
  p.dilations.assign(xs.size() - 2, 1);
  p.pads.assign(2 * (xs.size() - 2), 0);
  return lower_pool(n, p, algorithm::pooling_avg_exclude_padding, who);
}

bool CpuExecutable::lower_eltwise(NodeId n, const std::string& who) {
  const Node& node = g_.node(n);
  auto e = eltwise_of(node.op);
  if (!e) return false;
  auto [alg, a, b] = *e;
  const TensorId x = node.inputs[0];
  TensorId y = node.outputs[0];
  std::string text;
  if (auto silu = silu_after(x); silu && silu->first == n) {  // x * sigmoid(x) that no producer absorbed
    std::tie(alg, a, b) = std::tuple{algorithm::eltwise_swish, 1.f, 0.f};
    absorbed_.insert(silu->second);
    y = g_.node(silu->second).outputs[0];
    text = " as SiLU (with Mul '" + g_.node(silu->second).name + "')";
  }
  auto pd = dnnl_call(who, [&] {
    return eltwise_forward::primitive_desc(eltwise_forward::desc(prop_kind::forward_inference, alg, slots_[size_t(x)].md, a, b), eng_);
  });
  define(y, pd.dst_desc());
  Step& st = add_step(cat(who, ": oneDNN eltwise ", pd.impl_info_str(), text), {int(x)}, {int(y)});
  st.prim = primitive(eltwise_forward(pd));
  st.args = {{DNNL_ARG_SRC, int(x)}, {DNNL_ARG_DST, int(y)}};
  return true;
}

namespace {

/// Ops a fused element-wise group evaluates: unary ops (their own formula) and the four
/// arithmetic binaries. 0: not fusable, 1: unary, 2..5: Add, Sub, Mul, Div.
int fused_kind(const Op& op) {
  return std::visit([](const auto& o) -> int {
    using O = std::decay_t<decltype(o)>;
    if constexpr (std::is_same_v<O, ops::Add>) return 2;
    else if constexpr (std::is_same_v<O, ops::Sub>) return 3;
    else if constexpr (std::is_same_v<O, ops::Mul>) return 4;
    else if constexpr (std::is_same_v<O, ops::Div>) return 5;
    else if constexpr (std::is_base_of_v<ops::detail::Unary<O>, O> && requires { o.template apply<float>(1.f); }) return 1;
    else return 0;
  }, op);
}

/// Largest tensor a fused group computes: for large tensors the steps' overhead matters little
/// and oneDNN's kernels (vectorised for every op, threaded) stay.
constexpr int64_t kFuseMaxElements = int64_t(1) << 16;
/// Up to this size two ops fuse too (a GRU's reset gate and its product with the state, 256
/// elements a step: two oneDNN calls cost more than the arithmetic); above it, three.
constexpr int64_t kFusePairElements = 4096;
constexpr int64_t kFuseBlock = 256;
constexpr size_t kFuseMaxOps = 64;

}  // namespace

bool CpuExecutable::fuse_elementwise(NodeId n, const std::string& who) {
  if (!fused_kind(g_.node(n).op)) return false;
  const Shape shape = g_.type(g_.node(n).outputs[0]).shape;
  const int64_t count = numel(shape);
  if (count < 1 || count > kFuseMaxElements) return false;
  std::set<NodeId> group;
  auto produced_in = [&](TensorId t) { return g_.tensor(t).producer >= 0 && group.count(g_.tensor(t).producer); };
  // A node joins when its other inputs are computed already (a step before this one) or by
  // fusable nodes that join first (the LSTM gates feeding the state update).
  std::function<bool(NodeId, int)> joins = [&](NodeId m, int depth) {
    if (group.count(m)) return true;
    const Node& node = g_.node(m);
    if (depth > 8 || lowered_.count(m) || absorbed_.count(m) || fused_.count(m) || !fused_kind(node.op)) return false;
    if (node.outputs.size() != 1 || g_.type(node.outputs[0]).shape != shape || !is_float(g_.type(node.outputs[0]).dtype)) return false;
    if (std::holds_alternative<ops::Sigmoid>(node.op))
      if (auto silu = silu_after(node.inputs[0]); silu && silu->first == m) return false;  // oneDNN's swish
    for (TensorId t : node.inputs) {
      if (produced_in(t)) continue;
      const NodeId p = g_.tensor(t).producer;
      if (p >= 0 && !lowered_.count(p)) {
        if (joins(p, depth + 1)) continue;
        return false;
      }
      const Shape& ts = g_.type(t).shape;
      if (!slots_[size_t(t)].is_float() || (ts != shape && numel(ts) != 1) || !(slots_[size_t(t)].md == plain_md(ts))) return false;
    }
    group.insert(m);
    return true;
  };
  if (!joins(n, 0)) return false;
  // grow through consumers, breadth first, up to kFuseMaxOps (a 100,000-op chain is many groups)
  for (std::vector<NodeId> todo(group.begin(), group.end()); !todo.empty() && group.size() < kFuseMaxOps;) {
    const NodeId m = todo.back();
    todo.pop_back();
    for (NodeId c : consumers_[size_t(g_.node(m).outputs[0])])
      if (group.size() < kFuseMaxOps && !group.count(c) && joins(c, 0)) todo.push_back(c);
  }
  if (group.size() < (count <= kFusePairElements ? 2u : 3u)) return false;
  // The program, in topological order; registers hold the group's values block by block.
  struct Ref {
    int slot = -1, reg = -1;
    bool scalar = false;
  };
  struct Instr {
    Op op;
    int kind;
    Ref a, b;
    int reg;
  };
  std::vector<Instr> code;
  std::map<TensorId, int> reg_of;
  std::vector<int> reads, writes;
  std::vector<std::pair<int, int>> outs;  // (register, slot)
  std::string names;
  std::vector<NodeId> order;  // the group in dependency order (Kahn's, within the group)
  for (std::set<NodeId> left = group; !left.empty();)
    for (NodeId m : std::vector<NodeId>(left.begin(), left.end())) {
      bool ready = true;
      for (TensorId t : g_.node(m).inputs) ready = ready && !(g_.tensor(t).producer >= 0 && left.count(g_.tensor(t).producer));
      if (ready) order.push_back(m), left.erase(m);
    }
  for (NodeId m : order) {
    const Node& node = g_.node(m);
    auto ref = [&](TensorId t) {
      Ref r;
      if (auto it = reg_of.find(t); it != reg_of.end()) r.reg = it->second;
      else {
        r.slot = int(t);
        r.scalar = numel(g_.type(t).shape) == 1 && count > 1;
        if (std::find(reads.begin(), reads.end(), int(t)) == reads.end()) reads.push_back(int(t));
      }
      return r;
    };
    Instr in{node.op, fused_kind(node.op), ref(node.inputs[0]), {}, int(code.size())};
    if (in.kind > 1) in.b = ref(node.inputs[1]);
    const TensorId y = node.outputs[0];
    reg_of[y] = in.reg;
    code.push_back(in);
    if (code.size() <= 8) names += cat(names.empty() ? "" : ", ", code.size() == 8 ? "..." : op_name(node.op));
    bool outside = is_output_.count(y) > 0;
    for (NodeId c : consumers_[size_t(y)]) outside = outside || !group.count(c);
    if (outside) {
      define(y, plain_md(shape));
      writes.push_back(int(y));
      outs.emplace_back(in.reg, int(y));
    }
  }
  for (NodeId m : group)  // kept out of absorbed_, which lower() copies per node
    if (m != n) fused_.insert(m), lowered_.insert(m);
  Step& st = add_step(cat(who, ": pet fused element-wise, ", group.size(), " ops (", names, ")"), reads, writes);
  st.fn = [this, code, outs, count] {
    // scalars first: an output may reuse a dead input's buffer, so every read of a block
    // happens before that block's writes
    std::vector<float> scalar(code.size() * 2, 0.f);
    for (size_t i = 0; i < code.size(); ++i) {
      if (code[i].a.scalar) scalar[2 * i] = ptr(code[i].a.slot)[0];
      if (code[i].kind > 1 && code[i].b.scalar) scalar[2 * i + 1] = ptr(code[i].b.slot)[0];
    }
    auto block = [&](int64_t lo, int64_t hi) {
      std::vector<float> regs(code.size() * size_t(kFuseBlock));
      for (int64_t b0 = lo; b0 < hi; b0 += kFuseBlock) {
        const int64_t len = std::min(kFuseBlock, hi - b0);
        auto src = [&](const Ref& r, const float* sc) -> std::pair<const float*, int64_t> {
          if (r.reg >= 0) return {regs.data() + size_t(r.reg) * size_t(kFuseBlock), 1};
          if (r.scalar) return {sc, 0};
          return {ptr(r.slot) + b0, 1};
        };
        for (size_t i = 0; i < code.size(); ++i) {
          const Instr& in = code[i];
          float* out = regs.data() + size_t(in.reg) * size_t(kFuseBlock);
          auto [a, sa] = src(in.a, &scalar[2 * i]);
          if (in.kind == 1) {
            // Sigmoid, Tanh and Exp of a block on Eigen's vectorised functions (a few ulp from
            // std::); the rest by their own formula
            Eigen::Map<Eigen::ArrayXf> y(out, len);
            if (sa == 1 && std::holds_alternative<ops::Sigmoid>(in.op)) y = Eigen::Map<const Eigen::ArrayXf>(a, len).logistic();
            else if (sa == 1 && std::holds_alternative<ops::Tanh>(in.op)) y = Eigen::Map<const Eigen::ArrayXf>(a, len).tanh();
            else if (sa == 1 && std::holds_alternative<ops::Exp>(in.op)) y = Eigen::Map<const Eigen::ArrayXf>(a, len).exp();
            else
              std::visit([&](const auto& o) {
                if constexpr (requires { o.template apply<float>(1.f); })
                  for (int64_t k = 0; k < len; ++k) out[k] = o.template apply<float>(a[k * sa]);
              }, in.op);
            continue;
          }
          auto [b, sb] = src(in.b, &scalar[2 * i + 1]);
          switch (in.kind) {
            case 2: for (int64_t k = 0; k < len; ++k) out[k] = a[k * sa] + b[k * sb]; break;
            case 3: for (int64_t k = 0; k < len; ++k) out[k] = a[k * sa] - b[k * sb]; break;
            case 4: for (int64_t k = 0; k < len; ++k) out[k] = a[k * sa] * b[k * sb]; break;
            default: for (int64_t k = 0; k < len; ++k) out[k] = a[k * sa] / b[k * sb]; break;
          }
        }
        for (const auto& [reg, slot] : outs)
          std::memcpy(ptr(slot) + b0, regs.data() + size_t(reg) * size_t(kFuseBlock), size_t(len) * sizeof(float));
      }
    };
    if (count >= 4 * 4096) parallel_chunks(count, 4096, block);
    else block(0, count);
  };
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::Relu&, const std::string& who) { return lower_eltwise(n, who); }

bool CpuExecutable::lower_op(NodeId n, const ops::LeakyRelu&, const std::string& who) { return lower_eltwise(n, who); }

bool CpuExecutable::lower_op(NodeId n, const ops::Sigmoid&, const std::string& who) { return lower_eltwise(n, who); }

bool CpuExecutable::lower_op(NodeId n, const ops::Tanh&, const std::string& who) { return lower_eltwise(n, who); }

bool CpuExecutable::lower_op(NodeId n, const ops::Gelu&, const std::string& who) { return lower_eltwise(n, who); }

bool CpuExecutable::lower_op(NodeId n, const ops::Exp&, const std::string& who) { return lower_eltwise(n, who); }

bool CpuExecutable::lower_op(NodeId n, const ops::Sqrt&, const std::string& who) { return lower_eltwise(n, who); }

bool CpuExecutable::lower_op(NodeId n, const ops::Erf&, const std::string& who) {
  const Node& node = g_.node(n);
  int x = int(node.inputs[0]);
  if (slots_[size_t(x)].md.data.format_kind != dnnl_blocked || slots_[size_t(x)].md.data.offset0 != 0) x = plain_slot(x);
  const int y = int(node.outputs[0]);
  define(TensorId(y), slots_[size_t(x)].md);
  Step& st = add_step(cat(who, ": Eigen's vectorised erf (", layout_name(slots_[size_t(x)].md), ")"), {x}, {y});
  const int64_t total = int64_t(slots_[size_t(x)].md.get_size() / sizeof(float));
  st.fn = [this, x, y, total] {
    const float* a = ptr(x);
    float* o = ptr(y);
    parallel_chunks(total, 16384, [a, o](int64_t b, int64_t e) {
      Eigen::Map<Eigen::ArrayXf>(o + b, e - b) = Eigen::Map<const Eigen::ArrayXf>(a + b, e - b).erf();
    });
  };
  return true;
}

namespace {
/// log x over a block of at most 1024, on Eigen's vectorised log. Eigen's raises subnormal
/// inputs to the smallest normal (log 1e-40 would be -87.3 for -92.1): those are scaled by
/// 2^24 first and 24 ln 2 taken off after (within about 1 ulp).
void log_block(const float* a, float* o, int64_t len) {
  alignas(64) float t[1024], c[1024];
  for (int64_t i = 0; i < len; ++i) {
    const bool sub = a[i] < FLT_MIN;  // (0 and negative x too: -inf and NaN either way)
    t[i] = sub ? a[i] * 16777216.f : a[i];
    c[i] = sub ? 16.6355323f : 0.f;
  }
  Eigen::Map<Eigen::ArrayXf>(o, len) = Eigen::Map<const Eigen::ArrayXf>(t, len).log() - Eigen::Map<const Eigen::ArrayXf>(c, len);
}
}  // namespace

bool CpuExecutable::lower_op(NodeId n, const ops::Log&, const std::string& who) {
  return lower_pet_unary(n, cat(who, " (Eigen's log)"), [](const float* a, float* o, int64_t len) {
    for (int64_t b = 0; b < len; b += 1024) log_block(a + b, o + b, std::min<int64_t>(1024, len - b));
  });
}

bool CpuExecutable::lower_op(NodeId n, const ops::Softplus&, const std::string& who) {
  return lower_pet_unary(n, cat(who, " (Eigen's exp and log1p)"), [](const float* a, float* o, int64_t len) {
    const Eigen::Map<const Eigen::ArrayXf> x(a, len);  // the op's formula, max(x, 0) + log1p(e^-|x|)
    Eigen::Map<Eigen::ArrayXf>(o, len) = x.max(0.f) + (-x.abs()).exp().log1p();
  });
}

bool CpuExecutable::lower_op(NodeId n, const ops::Mish&, const std::string& who) {
  // tanh(log(1 + e^x)) = n (n + 2) / (n (n + 2) + 2) with n = e^x: one exp and a quotient,
  // without the cancellation of ((1 + n)^2 - 1) that oneDNN's mish has for small n; above
  // x = 20 the quotient is 1 in float (and n (n + 2) would overflow past 44).
  return lower_pet_unary(n, cat(who, " (Eigen's exp)"), [](const float* a, float* o, int64_t len) {
    const Eigen::Map<const Eigen::ArrayXf> x(a, len);
    const Eigen::ArrayXf e = x.min(20.f).exp(), p = e * (e + 2.f);
    Eigen::Map<Eigen::ArrayXf>(o, len) = x * p / (p + 2.f);
  });
}

bool CpuExecutable::lower_op(NodeId n, const ops::Neg&, const std::string& who) { return lower_eltwise(n, who); }

bool CpuExecutable::lower_op(NodeId n, const ops::Clip&, const std::string& who) { return lower_eltwise(n, who); }

bool CpuExecutable::lower_op(NodeId n, const ops::Pow&, const std::string& who) {
  const Node& node = g_.node(n);
  TensorId e = node.inputs[1];
  if (!g_.tensor(e).is_constant() || !is_float(g_.type(e).dtype) || numel(g_.type(e).shape) != 1 ||
      g_.type(node.outputs[0]).shape != g_.type(node.inputs[0]).shape)
    return false;
  float k = std::get<Tensor<float>>(*g_.tensor(e).value)[0];
  const TensorId x = node.inputs[0];
  auto pd = dnnl_call(who, [&] {
    return eltwise_forward::primitive_desc(
        eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_pow, slots_[size_t(x)].md, 1.f, k), eng_);
  });
  define(node.outputs[0], pd.dst_desc());
  Step& st = add_step(cat(who, ": oneDNN eltwise pow ", pd.impl_info_str()), {int(x)}, {int(node.outputs[0])});
  st.prim = primitive(eltwise_forward(pd));
  st.args = {{DNNL_ARG_SRC, int(x)}, {DNNL_ARG_DST, int(node.outputs[0])}};
  return true;
}

bool CpuExecutable::lower_binary(NodeId n, algorithm alg, bool commutative, const std::string& who) {
  const Node& node = g_.node(n);
  TensorId a = node.inputs[0], b = node.inputs[1];
  const Shape& ys = g_.type(node.outputs[0]).shape;
  if (g_.type(a).shape != ys && commutative && g_.type(b).shape == ys) std::swap(a, b);
  if (g_.type(a).shape != ys) return lower_pet_binary(n, alg, who, "the first operand is broadcast");
  int as, bs;
  md_t amd, bmd;
  if (g_.type(b).shape == ys) {
    as = int(a);
    amd = slots_[size_t(a)].md;
    bs = as_layout(int(b), amd, who);
    bmd = amd;
  } else {
    int p = plain_slot(int(b));
    Slot v = slots_[size_t(p)];
    v.md = plain_md(with_rank(g_.type(b).shape, ys.size()));
    v.plain = -1;
    slots_.push_back(v);
    bs = int(slots_.size()) - 1;
    bmd = slots_[size_t(bs)].md;
    as = int(a);
    amd = slots_[size_t(a)].md;
    // A per-channel (or per-sample-and-channel, or scalar) operand over a channels-last or
    // blocked tensor (the squeeze-and-excitation scaling after a depthwise conv) is applied
    // in that layout when oneDNN has a jit kernel for it; otherwise both go plain.
    const Shape bs_full = with_rank(g_.type(b).shape, ys.size());
    bool per_channel = ys.size() >= 2;
    for (size_t d = 0; d < ys.size(); ++d) per_channel = per_channel && (bs_full[d] == 1 || d < 2);
    if (amd != plain_md(ys) && per_channel) {
      // On a channel-blocked layout oneDNN's jit kernel wants the operand blocked alike; with
      // whole blocks and no spatial extent that is the same memory as the plain operand.
      const auto& blk = amd.data.format_desc.blocking;
      const int64_t block = blk.inner_nblks == 1 && blk.inner_idxs[0] == 1 ? blk.inner_blks[0] : 0;
      using tag = memory::format_tag;
      const std::map<std::pair<size_t, int64_t>, tag> blocked_tags = {{{3, 8}, tag::nCw8c},   {{4, 8}, tag::nChw8c},   {{5, 8}, tag::nCdhw8c},
                                                                       {{3, 16}, tag::nCw16c}, {{4, 16}, tag::nChw16c}, {{5, 16}, tag::nCdhw16c}};
      if (auto it = blocked_tags.find({ys.size(), block}); it != blocked_tags.end() && bs_full[1] % block == 0 && amd == md_t(amd.dims(), dt::f32, it->second))
        bmd = md_t(dims_of(bs_full), dt::f32, it->second), slots_[size_t(bs)].md = bmd;
      auto probe = dnnl_call(who, [&] { return binary::primitive_desc(binary::desc(alg, amd, bmd, md_t(amd.dims(), dt::f32, memory::format_tag::any)), eng_); });
      if (std::string(probe.impl_info_str()).rfind("ref", 0) == 0) amd = plain_md(ys), bmd = plain_md(bs_full), slots_[size_t(bs)].md = bmd;
    } else {
      amd = plain_md(ys);
    }
    if (amd == plain_md(ys)) as = plain_slot(int(a));
  }
  if (amd == plain_md(ys) && g_.type(b).shape != ys) {  // oneDNN 2.6 has only its reference kernel for some broadcasts
    auto probe = dnnl_call(who, [&] { return binary::primitive_desc(binary::desc(alg, amd, bmd, md_t(amd.dims(), dt::f32, memory::format_tag::any)), eng_); });
    if (std::string(probe.impl_info_str()).rfind("ref", 0) == 0) return lower_pet_binary(n, alg, who, "oneDNN has only its reference kernel for this broadcast");
  }
  // Activations and scalings fuse into the binary primitive on plain layouts only: on
  // blocked ones (nChw8c from pet's Winograd, nChw4c from a grouped conv) oneDNN 2.6's
  // binary kernel with post-ops computed wrong values and wrote past its buffers.
  PostOpChain chain;
  std::string text;
  TensorId out = node.outputs[0];
  if (amd == plain_md(ys)) out = absorb_post_ops(out, chain, text, false).first;
  else if (sole_consumer(out) >= 0 && eltwise_of(g_.node(sole_consumer(out)).op)) text += " (activation not fused on a blocked layout)";
  primitive_attr attr;
  attr.set_post_ops(chain.build());
  auto pd = dnnl_call(who, [&] { return binary::primitive_desc(binary::desc(alg, amd, bmd, md_t(amd.dims(), dt::f32, memory::format_tag::any)), attr, eng_); });
  define(out, pd.dst_desc());
  Step& st = add_step(cat(who, ": oneDNN binary ", pd.impl_info_str(), text), {as, bs}, {int(out)});
  st.prim = primitive(binary(pd));
  st.args = {{DNNL_ARG_SRC_0, as}, {DNNL_ARG_SRC_1, bs}, {DNNL_ARG_DST, int(out)}};
  return true;
}

bool CpuExecutable::lower_pet_binary(NodeId n, algorithm alg, const std::string& who, const std::string& why) {
  cpu::BinaryKind kind;
  switch (alg) {
    case algorithm::binary_add: kind = cpu::BinaryKind::Add; break;
    case algorithm::binary_sub: kind = cpu::BinaryKind::Sub; break;
    case algorithm::binary_mul: kind = cpu::BinaryKind::Mul; break;
    case algorithm::binary_div: kind = cpu::BinaryKind::Div; break;
    case algorithm::binary_max: kind = cpu::BinaryKind::Max; break;
    case algorithm::binary_min: kind = cpu::BinaryKind::Min; break;
    default: return false;
  }
  return lower_pet_binary(n, kind, who, why);
}

bool CpuExecutable::lower_pet_binary(NodeId n, cpu::BinaryKind kind, const std::string& who, const std::string& why) {
  const Node& node = g_.node(n);
  const TensorId a = node.inputs[0], b = node.inputs[1], y = node.outputs[0];
  const Shape& ys = g_.type(y).shape;
  const int as = plain_slot(int(a)), bs = plain_slot(int(b));
  define(y, plain_md(ys));
  auto sa = cpu::broadcast_strides(g_.type(a).shape, ys), sb = cpu::broadcast_strides(g_.type(b).shape, ys);
  Step& st = add_step(cat(who, ": pet broadcasting kernel (", why, ")"), {as, bs}, {int(y)});
  st.fn = [this, kind, as, bs, sa, sb, ys, y] { cpu::broadcast_binary(kind, ptr(as), sa, ptr(bs), sb, ptr(int(y)), ys); };
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::Add&, const std::string& who) { return lower_binary(n, algorithm::binary_add, true, who); }

bool CpuExecutable::lower_op(NodeId n, const ops::Mul&, const std::string& who) { return lower_binary(n, algorithm::binary_mul, true, who); }

bool CpuExecutable::lower_op(NodeId n, const ops::Sub&, const std::string& who) { return lower_binary(n, algorithm::binary_sub, false, who); }

bool CpuExecutable::lower_op(NodeId n, const ops::Div&, const std::string& who) { return lower_binary(n, algorithm::binary_div, false, who); }

bool CpuExecutable::lower_op(NodeId n, const ops::Mod& m, const std::string& who) {
  if (m.fmod != 1) return false;  // integers only (Python's %): not a float op
  return lower_pet_binary(n, cpu::BinaryKind::Fmod, who, "C's fmod");
}

namespace {
/// The 2-D view softmax-like primitives see: opset < 13's one row over dims [axis, rank) as
/// outer x row; else the tensor itself with its axis.
template <class S>
std::pair<Shape, int> row_view(const S& s, const Shape& xs) {
  if (!s.flatten_tail || s.axis == int64_t(xs.size()) - 1) return {xs, int(s.axis)};
  int64_t outer = 1, row = 1;
  for (size_t i = 0; i < xs.size(); ++i) (int64_t(i) < s.axis ? outer : row) *= xs[i];
  return {Shape{outer, row}, 1};
}
}  // namespace

bool CpuExecutable::lower_op(NodeId n, const ops::Softmax& s, const std::string& who) {
  auto [view, axis] = row_view(s, g_.type(g_.node(n).inputs[0]).shape);
  return lower_softmax(n, false, view, axis, who);
}

bool CpuExecutable::lower_op(NodeId n, const ops::LogSoftmax& s, const std::string& who) {
  auto [view, axis] = row_view(s, g_.type(g_.node(n).inputs[0]).shape);
  return lower_softmax(n, true, view, axis, who);
}

bool CpuExecutable::lower_softmax(NodeId n, bool log, const Shape& view, int axis, const std::string& who) {
  const Node& node = g_.node(n);
  const Shape& xs = g_.type(node.inputs[0]).shape;
  int x = plain_slot(int(node.inputs[0]));
  const AxisSplit sp(view, axis);
  if (sp.inner > 1) {
    // Rows along a dim before the last (a softmax over channels): oneDNN 2.6 has only its
    // reference kernel there (54 ms on [8,64,56,56]). pet's: blocks of up to 256 contiguous
    // positions, the formula's passes (the maximum, e^(x - max) and its sum in order, then
    // the quotient or x - max - log(sum)), e^ on Eigen's vectorised exp.
    const int y = int(node.outputs[0]);
    define(node.outputs[0], plain_md(xs));
    add_step(cat(who, ": pet ", log ? "log-softmax" : "softmax", " over ", sp.len, " of each ", sp.inner, " contiguous positions"), {x}, {y}).fn =
        [this, x, y, sp, log] {
          const float* src = ptr(x);
          float* dst = ptr(y);
          for_axis_blocks(sp, [&](int64_t o, int64_t i0, int64_t w) {
            float mx[256], sum[256];
            const int64_t at = o * sp.len * sp.inner + i0;
            std::fill(mx, mx + w, -std::numeric_limits<float>::infinity());
            std::fill(sum, sum + w, 0.f);
            for (int64_t k = 0; k < sp.len; ++k)
              for (int64_t i = 0; i < w; ++i) mx[i] = std::max(mx[i], src[at + k * sp.inner + i]);
            Eigen::Map<const Eigen::ArrayXf> m(mx, w);
            for (int64_t k = 0; k < sp.len; ++k) {
              Eigen::Map<Eigen::ArrayXf> e(dst + at + k * sp.inner, w);
              e = (Eigen::Map<const Eigen::ArrayXf>(src + at + k * sp.inner, w) - m).exp();
              Eigen::Map<Eigen::ArrayXf>(sum, w) += e;
            }
            if (log)
              for (int64_t i = 0; i < w; ++i) sum[i] = std::log(sum[i]);
            for (int64_t k = 0; k < sp.len; ++k) {
              float* d = dst + at + k * sp.inner;
              const float* s = src + at + k * sp.inner;
              if (log)
                for (int64_t i = 0; i < w; ++i) d[i] = s[i] - mx[i] - sum[i];
              else
                for (int64_t i = 0; i < w; ++i) d[i] /= sum[i];
            }
          });
        };
    return true;
  }
  if (log) {
    // Along contiguous rows: pet's rows too. oneDNN 2.6's logsoftmax takes its log from the
    // eltwise log that is off near 1 (see lower_op(Log)): a dominant class's log-probability,
    // -2.2e-8, came out -1.4e-6. Per row: the maximum, the sum of e^(x - max) (Eigen's exp),
    // then x - max - log(sum), rows in parallel.
    const int y = int(node.outputs[0]);
    define(node.outputs[0], plain_md(xs));
    add_step(cat(who, ": pet log-softmax over rows of ", sp.len), {x}, {y}).fn = [this, x, y, sp] {
      const float* src = ptr(x);
      float* dst = ptr(y);
      const int64_t len = sp.len, R = std::max<int64_t>(1, 4096 / std::max<int64_t>(len, 1));  // rows at a time
      parallel_chunks(sp.outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(len, 1)), [&](int64_t b, int64_t e) {
        // R rows at once, so that short rows' exps run as one vectorised pass: x - max
        // written out, its e^ into a buffer, each row's sum and log, then - log(sum)
        std::vector<float> buf(static_cast<size_t>(std::min(R, e - b) * len));
        for (int64_t o0 = b; o0 < e; o0 += R) {
          const int64_t r = std::min(R, e - o0);
          float* d = dst + o0 * len;
          for (int64_t i = 0; i < r; ++i) {
            const float* row = src + (o0 + i) * len;
            const float mx = row_extreme<true>(row, len);  // (NaN never wins, as in the formula)
            for (int64_t k = 0; k < len; ++k) d[i * len + k] = row[k] - mx;
          }
          Eigen::Map<Eigen::ArrayXf>(buf.data(), r * len) = Eigen::Map<const Eigen::ArrayXf>(d, r * len).exp();
          for (int64_t i = 0; i < r; ++i) {
            const float* ex = buf.data() + i * len;
            float lanes[16] = {}, sum = 0;  // (16 running sums: short rows vectorise too)
            int64_t k = 0;
            for (; k + 16 <= len; k += 16)
              for (int j = 0; j < 16; ++j) lanes[j] += ex[k + j];
            for (; k < len; ++k) sum += ex[k];
            for (int j = 0; j < 16; ++j) sum += lanes[j];
            const float l = std::log(sum);
            for (int64_t k = 0; k < len; ++k) d[i * len + k] -= l;
          }
        }
      });
    };
    return true;
  }
  auto pd = dnnl_call(who, [&] {
    return softmax_forward::primitive_desc(softmax_forward::desc(prop_kind::forward_inference, plain_md(view), axis), eng_);
  });
  primitive prim = softmax_forward(pd);
  const std::string impl = pd.impl_info_str();
  define(node.outputs[0], plain_md(xs));
  Step& st = add_step(cat(who, ": oneDNN softmax ", impl), {x}, {int(node.outputs[0])});
  st.prim = prim;
  int xv = reshaped(x, view), ov = reshaped(int(node.outputs[0]), view);
  st.args = {{DNNL_ARG_SRC, xv}, {DNNL_ARG_DST, ov}};
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::LRN& l, const std::string& who) {
  const Node& node = g_.node(n);
  const Shape& xs = g_.type(node.inputs[0]).shape;
  int x = plain_slot(int(node.inputs[0]));
  if (l.size % 2 == 0 || xs.size() < 3 || xs.size() > 5) {
    // an even window (not centred as oneDNN's), or a rank oneDNN does not take: pet's kernel,
    // the op's window and formula (ops::LRN::window, scaled), the squares summed in double in
    // channel order for 256 positions at a time
    const AxisSplit sp(xs, 1);  // [N, C, positions]
    const int y = int(node.outputs[0]);
    define(node.outputs[0], plain_md(xs));
    add_step(cat(who, ": pet LRN (window ", l.size, ")"), {x}, {y}).fn = [this, x, y, sp, l] {
      const float* src = ptr(x);
      float* dst = ptr(y);
      const int64_t C = sp.len;
      parallel_chunks(sp.outer * C, std::max<int64_t>(1, 4096 / std::max<int64_t>(sp.inner * l.size, 1)), [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p) {
          const int64_t nb = p / C, c = p % C;
          const auto [lo, hi] = l.window(c, C);
          for (int64_t i0 = 0; i0 < sp.inner; i0 += 256) {
            const int64_t w = std::min<int64_t>(256, sp.inner - i0);
            double sq[256] = {};
            for (int64_t k = lo; k <= hi; ++k) {
              const float* row = src + (nb * C + k) * sp.inner + i0;
              for (int64_t i = 0; i < w; ++i) sq[i] += double(row[i]) * double(row[i]);
            }
            const float* xr = src + p * sp.inner + i0;
            float* yr = dst + p * sp.inner + i0;
            for (int64_t i = 0; i < w; ++i) yr[i] = float(l.scaled(double(xr[i]), sq[i]));
          }
        }
      });
    };
    return true;
  }
  auto pd = dnnl_call(who, [&] {
    return lrn_forward::primitive_desc(lrn_forward::desc(prop_kind::forward_inference, algorithm::lrn_across_channels, plain_md(xs), l.size,
                                                         l.alpha, l.beta, l.bias), eng_);
  });
  define(node.outputs[0], plain_md(xs));
  Step& st = add_step(cat(who, ": oneDNN lrn ", pd.impl_info_str()), {x}, {int(node.outputs[0])});
  st.prim = primitive(lrn_forward(pd));
  st.args = {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, int(node.outputs[0])}};
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::ReduceMean& r, const std::string& who) { return lower_reduce(n, r, algorithm::reduction_mean, who); }

bool CpuExecutable::lower_op(NodeId n, const ops::BatchNormalization& bn, const std::string& who) {
  const Node& node = g_.node(n);
  const Shape& xs = g_.type(node.inputs[0]).shape;
  if (bn.training_mode || node.outputs.size() != 1 || xs.size() < 2 || xs.size() > 5) return false;
  for (size_t i = 1; i < 5; ++i)
    if (!g_.tensor(node.inputs[i]).is_constant()) return false;
  const int x = int(node.inputs[0]);
  auto flags = normalization_flags::use_global_stats | normalization_flags::use_scale | normalization_flags::use_shift;
  // a following Relu is fused (marked absorbed only once the BN is lowered: a primitive
  // oneDNN refuses leaves both nodes to the reference kernel)
  const NodeId next = sole_consumer(node.outputs[0]);
  const NodeId relu = next >= 0 && std::holds_alternative<ops::Relu>(g_.node(next).op) ? next : -1;
  const TensorId out = relu >= 0 ? g_.node(relu).outputs[0] : node.outputs[0];
  const std::string text = relu >= 0 ? " + Relu" : "";
  if (relu >= 0) flags = flags | normalization_flags::fuse_norm_relu;
  const md_t md = slots_[size_t(x)].md;
  // a strided channels-last view (a DenseNet join in its block's shared buffer): oneDNN 2.6
  // has only its generic kernel for it
  std::optional<int64_t> row = md == plain_md(xs) ? std::nullopt : channels_last_stride(md);
  if (row && *row == xs[1]) row.reset();  // dense channels-last: oneDNN's jit kernel
  if (md == plain_md(xs) || row) {  // pet's kernel (norm.hpp says why)
    auto owned = [&](auto f) {
      Slot s;
      s.type = {DType::Float32, {xs[1]}};
      s.md = plain_md({xs[1]});
      s.owned = aligned_floats(size_t(xs[1]));
      for (int64_t c = 0; c < xs[1]; ++c) s.owned[size_t(c)] = float(f(c));
      slots_.push_back(s);
      return int(slots_.size()) - 1;
    };
    auto v = [&](size_t i, int64_t c) { return double(std::get<Tensor<float>>(*g_.tensor(node.inputs[i]).value)[c]); };
    const int mean = owned([&](int64_t c) { return v(3, c); });
    const int mul = owned([&](int64_t c) { return v(1, c) / std::sqrt(v(4, c) + double(bn.epsilon)); });
    const int add = owned([&](int64_t c) { return v(2, c); });
    if (row) {
      define(out, channels_last_md(g_.type(out).shape));
      Step& st = add_step(cat(who, ": pet batch norm (channels-last rows of ", *row, " read, ", xs[1], " kept)", text), {x, mean, mul, add}, {int(out)});
      st.fn = [this, x, y = int(out), mean, mul, add, fuse = relu >= 0, rows = numel(xs) / xs[1], ch = xs[1], stride = *row] {
        cpu::batch_norm_rows(ptr(x), stride, ptr(y), rows, ch, ptr(mean), ptr(mul), ptr(add), fuse);
      };
      if (relu >= 0) absorbed_.insert(relu);
      return true;
    }
    define(out, plain_md(g_.type(out).shape));
    const int64_t inner = numel(xs) / (xs[0] * xs[1]);
    Step& st = add_step(cat(who, ": pet batch norm (plain)", text), {x, mean, mul, add}, {int(out)});
    st.fn = [this, x, y = int(out), mean, mul, add, fuse = relu >= 0, n0 = xs[0], ch = xs[1], inner] {
      cpu::batch_norm_plain(ptr(x), ptr(y), n0, ch, inner, ptr(mean), ptr(mul), ptr(add), fuse);
    };
    if (relu >= 0) absorbed_.insert(relu);
    return true;
  }
  std::vector<int> p;  // scale, bias, mean, variance: [C] each
  for (size_t i = 1; i < 5; ++i) p.push_back(as_layout(int(node.inputs[i]), plain_md({xs[1]}), who));
  auto pd = dnnl_call(who, [&] {
    return batch_normalization_forward::primitive_desc(batch_normalization_forward::desc(prop_kind::forward_inference, md, bn.epsilon, flags), eng_);
  });
  define(out, pd.dst_desc());
  Step& st = add_step(cat(who, ": oneDNN batch norm ", pd.impl_info_str(), " (", layout_name(md), ")", text), {x, p[0], p[1], p[2], p[3]}, {int(out)});
  st.prim = primitive(batch_normalization_forward(pd));
  st.args = {{DNNL_ARG_SRC, x}, {DNNL_ARG_SCALE, p[0]}, {DNNL_ARG_SHIFT, p[1]}, {DNNL_ARG_MEAN, p[2]}, {DNNL_ARG_VARIANCE, p[3]}, {DNNL_ARG_DST, int(out)}};
  if (relu >= 0) absorbed_.insert(relu);
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::LayerNormalization& ln, const std::string& who) {
  const Node& node = g_.node(n);
  if (node.outputs.size() != 1) return false;
  for (size_t i = 1; i < node.inputs.size(); ++i)
    if (!g_.tensor(node.inputs[i]).is_constant()) return false;
  lower_layer_norm(node.inputs[0], node.outputs[0], ln.axis, ln.epsilon, node.inputs[1],
                   node.inputs.size() == 3 ? std::optional<TensorId>(node.inputs[2]) : std::nullopt, who);
  return true;
}

void CpuExecutable::lower_layer_norm(TensorId xt, TensorId yt, int64_t axis, float epsilon, std::optional<TensorId> scale_t,
                      std::optional<TensorId> shift_t, const std::string& who) {
  const Shape& xs = g_.type(xt).shape;
  int64_t len = 1;
  for (size_t i = size_t(axis); i < xs.size(); ++i) len *= xs[i];
  const int64_t rows = numel(xs) / std::max<int64_t>(len, 1);
  // Scale and shift expanded to [len] once.
  auto expanded = [&](std::optional<TensorId> t, float dflt) {
    Slot s;
    s.type = {DType::Float32, {len}};
    s.md = plain_md({len});
    s.owned = aligned_floats(size_t(len));
    if (!t) {
      std::fill(s.owned.get(), s.owned.get() + len, dflt);
    } else {
      const auto& v = std::get<Tensor<float>>(*g_.tensor(*t).value);
      Shape norm(xs.begin() + axis, xs.end());
      Index i(int(norm.size()));
      for (int64_t j = 0; j < len; ++j, next_index(i, norm)) s.owned[size_t(j)] = v.at(broadcast_index(i, v.shape()));
    }
    slots_.push_back(s);
    return int(slots_.size()) - 1;
  };
  int sc = expanded(scale_t, 1.f);
  int sh = expanded(shift_t, 0.f);
  int x = plain_slot(int(xt));
  define(yt, plain_md(g_.type(yt).shape));
  // pet's kernel, not oneDNN's: see norm.hpp for why.
  Step& st = add_step(cat(who, ": pet layer norm (two-pass, double accumulation)"), {x, sc, sh}, {int(yt)});
  st.fn = [this, x, y = int(yt), sc, sh, rows, len, epsilon] { cpu::layer_norm_rows(ptr(x), ptr(y), rows, len, ptr(sc), ptr(sh), epsilon); };
}

bool CpuExecutable::lower_op(NodeId n, const ops::Resize& r, const std::string& who) {
  const Node& node = g_.node(n);
  const Shape& xs = g_.type(node.inputs[0]).shape;
  const Shape& ys = g_.type(node.outputs[0]).shape;
  using R = ops::Resize;
  // oneDNN's resampling: linear, half-pixel over the spatial dims at scales out / in (the
  // TensorFlow modes move unresized dims too).
  bool onednn = r.mode == R::Mode::Linear && xs.size() >= 3 && xs.size() <= 5 && ys[0] == xs[0] && ys[1] == xs[1] &&
                r.coord != R::Coord::TfHalfPixelForNN && r.coord != R::Coord::TfCropAndResize;
  for (size_t d = 2; d < xs.size() && onednn; ++d) {
    const bool half = r.coord == R::Coord::HalfPixel || (r.coord == R::Coord::PytorchHalfPixel && ys[d] > 1) ||
                      (r.coord == R::Coord::HalfPixelSymmetric && r.symmetric_is_half_pixel(xs, d));
    onednn = float(r.scales[d]) == float(ys[d]) / float(xs[d]) &&  // oneDNN's factor is out / in
             (half || ys[d] == xs[d]);                              // an unresized dim maps o to o in every mode
  }
  int x = plain_slot(int(node.inputs[0]));
  define(node.outputs[0], plain_md(ys));
  if (!onednn) {  // every other mode: pet's tables (the interpreter's kernel), built once here
    auto tables = std::make_shared<kernels::ResizeTables<float>>(r, xs, ys);
    static const char* modes[] = {"nearest", "linear", "cubic"};
    Step& st = add_step(cat(who, ": pet resize tables (", modes[int(r.mode)], ")"), {x}, {int(node.outputs[0])});
    st.fn = [this, tables, x, y = int(node.outputs[0])] { tables->run(ptr(x), ptr(y)); };
    return true;
  }
  auto pd = dnnl_call(who, [&] {
    return resampling_forward::primitive_desc(
        resampling_forward::desc(prop_kind::forward_inference, algorithm::resampling_linear, plain_md(xs), plain_md(ys)), eng_);
  });
  Step& st = add_step(cat(who, ": oneDNN resampling ", pd.impl_info_str()), {x}, {int(node.outputs[0])});
  st.prim = primitive(resampling_forward(pd));
  st.args = {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, int(node.outputs[0])}};
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::ReduceSum& r, const std::string& who) { return lower_reduce(n, r, algorithm::reduction_sum, who); }

bool CpuExecutable::lower_op(NodeId n, const ops::ReduceMax& r, const std::string& who) { return lower_reduce(n, r, algorithm::reduction_max, who); }

namespace {
std::vector<int64_t> offsets_over(const Shape& shape, const std::vector<int64_t>& dims);
std::optional<std::vector<int64_t>> kept_dims_within(const Shape& shape, const std::vector<int64_t>& axes);
/// ReduceLogSumExp of the elements at base + offs[k] (the formula, in its order).
inline float log_sum_exp_at(const float* base, const std::vector<int64_t>& offs) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t o : offs) m = std::max(m, base[o]);
  if (!std::isfinite(m)) return m;
  float acc = 0;
  for (int64_t o : offs) acc += std::exp(base[o] - m);
  return m + std::log(acc);
}
}  // namespace

bool CpuExecutable::lower_op(NodeId n, const ops::ReduceLogSumExp& r, const std::string& who) {
  const Node& node = g_.node(n);
  const Shape& xs = g_.type(node.inputs[0]).shape;
  if (r.axes.empty()) return lower_view(n);
  bool one_block = true;
  for (size_t i = 1; i < r.axes.size(); ++i) one_block = one_block && r.axes[i] == r.axes[i - 1] + 1;
  const int y = int(node.outputs[0]);
  if (!one_block) {  // dims apart: each output position's elements by offset, in the formula's order
    std::vector<int64_t> axes = r.axes;
    for (int64_t& a : axes) a = a < 0 ? a + int64_t(xs.size()) : a;
    std::sort(axes.begin(), axes.end());
    const auto kept_dims = kept_dims_within(xs, axes);
    if (!kept_dims) return false;
    auto kept = std::make_shared<const std::vector<int64_t>>(offsets_over(xs, *kept_dims));
    auto reduced = std::make_shared<const std::vector<int64_t>>(offsets_over(xs, axes));
    const int64_t reduced_count = int64_t(reduced->size()), kept_count = int64_t(kept->size());
    const int x = plain_slot(int(node.inputs[0]));
    define(node.outputs[0], plain_md(g_.type(node.outputs[0]).shape));
    add_step(cat(who, ": pet log-sum-exp over ", reduced_count, " elements apart for each of ", kept_count, " positions"), {x}, {y}).fn =
        [this, x, y, kept, reduced] {
          const float* src = ptr(x);
          float* dst = ptr(y);
          parallel_chunks(int64_t(kept->size()), std::max<int64_t>(1, 4096 / std::max<int64_t>(int64_t(reduced->size()), 1)), [&](int64_t b, int64_t e) {
            for (int64_t p = b; p < e; ++p) dst[p] = log_sum_exp_at(src + (*kept)[size_t(p)], *reduced);
          });
        };
    return true;
  }
  const auto [outer, len, inner] = AxisSplit(xs, r.axes.front(), r.axes.back());
  const int x = plain_slot(int(node.inputs[0]));
  define(node.outputs[0], plain_md(g_.type(node.outputs[0]).shape));
  add_step(cat(who, ": pet log-sum-exp"), {x}, {y}).fn = [this, x, y, outer, len, inner] {
    const float* src = ptr(x);
    float* dst = ptr(y);
    parallel_chunks(outer * inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(len, 1)), [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        const float* row = src + (p / inner) * len * inner + p % inner;
        float m = -std::numeric_limits<float>::infinity();  // as ops::ReduceLogSumExp, in its order
        for (int64_t k = 0; k < len; ++k) m = std::max(m, row[k * inner]);
        if (!std::isfinite(m)) {
          dst[p] = m;
          continue;
        }
        float acc = 0;
        for (int64_t k = 0; k < len; ++k) acc += std::exp(row[k * inner] - m);
        dst[p] = m + std::log(acc);
      }
    });
  };
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::CumSum& c, const std::string& who) {
  const Node& node = g_.node(n);
  const Shape& xs = g_.type(node.inputs[0]).shape;
  const AxisSplit sp(xs, c.axis);
  const int x = plain_slot(int(node.inputs[0])), y = int(node.outputs[0]);
  define(node.outputs[0], plain_md(xs));
  add_step(cat(who, ": pet running sum"), {x}, {y}).fn = [this, x, y, sp, ex = c.exclusive, rev = c.reverse] {
    const float* src = ptr(x);
    float* dst = ptr(y);
    for_axis_blocks(sp, [&](int64_t o, int64_t i0, int64_t w) {
      float acc[256];
      std::fill(acc, acc + w, 0.f);
      for (int64_t j = 0; j < sp.len; ++j) {
        const int64_t k = rev ? sp.len - 1 - j : j, at = (o * sp.len + k) * sp.inner + i0;
        if (ex)
          for (int64_t i = 0; i < w; ++i) dst[at + i] = acc[i], acc[i] += src[at + i];
        else
          for (int64_t i = 0; i < w; ++i) acc[i] += src[at + i], dst[at + i] = acc[i];
      }
    });
  };
  return true;
}

namespace {
/// The reductions of pet's kernel, each its op's formula: the accumulator starts at the
/// first element's term (Max, Min: the element itself) or the identity, each further element
/// in order adds (multiplies) its term, a final map (Mean: / count; L2: sqrt; LogSum: log).
enum class ReduceKind { Sum, Mean, Prod, L1, L2, SumSquare, LogSum, Max, Min };

template <ReduceKind K>
struct ReduceRule {
  static constexpr bool extreme = K == ReduceKind::Max || K == ReduceKind::Min;
  static constexpr float identity = K == ReduceKind::Prod ? 1.f : 0.f;
  static float step(float acc, float x) {
    if constexpr (K == ReduceKind::Max) return x > acc ? x : acc;  // ops::detail::reduce_extreme
    else if constexpr (K == ReduceKind::Min) return x < acc ? x : acc;
    else if constexpr (K == ReduceKind::Prod) return acc * x;
    else if constexpr (K == ReduceKind::L1) return acc + std::abs(x);
    else if constexpr (K == ReduceKind::L2 || K == ReduceKind::SumSquare) return acc + x * x;
    else return acc + x;
  }
  /// Two partial accumulators joined (the lanes of reduce_offsets).
  static float join(float a, float b) { return K == ReduceKind::Prod ? a * b : a + b; }
  static float post(float acc, int64_t count) {
    if constexpr (K == ReduceKind::Mean) return acc / float(count);
    else if constexpr (K == ReduceKind::L2) return std::sqrt(acc);
    else if constexpr (K == ReduceKind::LogSum) return std::log(acc);
    else return acc;
  }
};

/// One block of neighbouring reduced dims with contiguous positions after it: [outer, len,
/// inner], blocks of up to 256 positions accumulated row by row.
template <ReduceKind K>
void reduce_blocks(const AxisSplit& sp, const float* src, float* dst) {
  using R = ReduceRule<K>;
  for_axis_blocks(sp, [&](int64_t o, int64_t i0, int64_t w) {
    float acc[256];
    const float* base = src + o * sp.len * sp.inner + i0;
    int64_t k0 = 0;
    if (R::extreme && sp.len > 0) std::copy(base, base + w, acc), k0 = 1;  // the first element, then better ones
    else std::fill(acc, acc + w, R::identity);
    for (int64_t k = k0; k < sp.len; ++k) {
      const float* row = base + k * sp.inner;
      for (int64_t i = 0; i < w; ++i) acc[i] = R::step(acc[i], row[i]);
    }
    float* out = dst + o * sp.inner + i0;
    for (int64_t i = 0; i < w; ++i) out[i] = R::post(acc[i], sp.len);
  });
}

/// Reduced dims apart (a mean over N, H and W of NCHW): each output position's elements at
/// offsets `reduced` from its own offset in `kept`, each the start of `run` contiguous
/// elements (the reduced dims at the end). Runs under 16 in the formula's (row-major) order;
/// longer ones in 16 lanes joined at the end (a vectorised loop instead of one dependent
/// chain: 5 times faster; sums and products rounded differently, Max and Min the same).
template <ReduceKind K>
void reduce_offsets(const std::vector<int64_t>& kept, const std::vector<int64_t>& reduced, int64_t run, const float* src, float* dst) {
  using R = ReduceRule<K>;
  const int64_t n = int64_t(reduced.size()), count = n * run;
  constexpr int64_t L = 16;
  parallel_chunks(int64_t(kept.size()), std::max<int64_t>(1, 16384 / std::max<int64_t>(count, 1)), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const float* base = src + kept[size_t(p)];
      float acc = R::identity;
      if (R::extreme && run >= L && n > 0) {
        // Max, Min in 16 lanes, each from one of the first 16 elements: exact, and the same
        // value as in order (a NaN first stays, a later one is passed over, as the formula's)
        float lane[L];
        std::copy(base + reduced[0], base + reduced[0] + L, lane);
        for (int64_t r = 0; r < n; ++r) {
          const float* x = base + reduced[size_t(r)];
          int64_t j = r == 0 ? L : 0;
          for (; j + L <= run; j += L)
            for (int64_t l = 0; l < L; ++l) lane[l] = R::step(lane[l], x[j + l]);
          for (int64_t l = 0; j < run; ++j, ++l) lane[l] = R::step(lane[l], x[j]);
        }
        acc = lane[0];
        for (int64_t l = 1; l < L; ++l) acc = R::step(acc, lane[l]);
      } else if (!R::extreme && run >= L) {
        float lane[L];
        std::fill(lane, lane + L, R::identity);
        for (int64_t r = 0; r < n; ++r) {
          const float* x = base + reduced[size_t(r)];
          int64_t j = 0;
          for (; j + L <= run; j += L)
            for (int64_t l = 0; l < L; ++l) lane[l] = R::step(lane[l], x[j + l]);
          for (; j < run; ++j) acc = R::step(acc, x[j]);
        }
        for (int64_t l = 0; l < L; ++l) acc = R::join(acc, lane[l]);
      } else {
        bool first = R::extreme && count > 0;  // Max, Min: the first element, then better ones
        for (int64_t r = 0; r < n; ++r) {
          const float* x = base + reduced[size_t(r)];
          for (int64_t j = 0; j < run; ++j) {
            if (first) acc = x[j], first = false;
            else acc = R::step(acc, x[j]);
          }
        }
      }
      dst[p] = R::post(acc, count);
    }
  });
}

/// Element offsets (row-major strides of `shape`) of every position of the dims `dims`, in
/// row-major order over them.
std::vector<int64_t> offsets_over(const Shape& shape, const std::vector<int64_t>& dims) {
  std::vector<int64_t> stride(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) stride[d - 1] = stride[d] * shape[d];
  std::vector<int64_t> out = {0};
  for (int64_t d : dims) {
    std::vector<int64_t> next;
    next.reserve(out.size() * size_t(shape[size_t(d)]));
    for (int64_t o : out)
      for (int64_t i = 0; i < shape[size_t(d)]; ++i) next.push_back(o + i * stride[size_t(d)]);
    out.swap(next);
  }
  return out;
}

/// The dims of `shape` not in `axes` (sorted), when both they and the axes hold at most 2^22
/// positions (the reductions over dims apart keep a list of offsets for each); nullopt otherwise.
std::optional<std::vector<int64_t>> kept_dims_within(const Shape& shape, const std::vector<int64_t>& axes) {
  std::vector<int64_t> kept;
  int64_t kept_count = 1, reduced_count = 1;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    const bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    (reduced ? reduced_count : kept_count) *= shape[size_t(d)];
    if (!reduced) kept.push_back(d);
  }
  if (kept_count > (int64_t(1) << 22) || reduced_count > (int64_t(1) << 22)) return std::nullopt;
  return kept;
}

template <template <ReduceKind> class Kernel, class F>
F* reduce_kernel(algorithm alg, float p, bool log_of_sum, const char*& what) {
  switch (alg) {
    case algorithm::reduction_sum: return what = log_of_sum ? "log of the sum" : "sum", log_of_sum ? Kernel<ReduceKind::LogSum>::f : Kernel<ReduceKind::Sum>::f;
    case algorithm::reduction_mean: return what = "mean", Kernel<ReduceKind::Mean>::f;
    case algorithm::reduction_mul: return what = "product", Kernel<ReduceKind::Prod>::f;
    case algorithm::reduction_max: return what = "maximum", Kernel<ReduceKind::Max>::f;
    case algorithm::reduction_min: return what = "minimum", Kernel<ReduceKind::Min>::f;
    case algorithm::reduction_norm_lp_sum:
      if (p == 1.f) return what = "L1 norm", Kernel<ReduceKind::L1>::f;
      if (p == 2.f) return what = "L2 norm", Kernel<ReduceKind::L2>::f;
      return nullptr;
    case algorithm::reduction_norm_lp_power_p_sum:
      if (p == 2.f) return what = "sum of squares", Kernel<ReduceKind::SumSquare>::f;
      return nullptr;
    default: return nullptr;
  }
}
template <ReduceKind K>
struct BlockKernel {
  static constexpr auto f = reduce_blocks<K>;
};
template <ReduceKind K>
struct OffsetKernel {
  static constexpr auto f = reduce_offsets<K>;
};
}  // namespace

bool CpuExecutable::lower_pet_reduce(NodeId n, const std::vector<int64_t>& axes, algorithm alg, float p, bool log_of_sum, const std::string& who) {
  const Node& node = g_.node(n);
  const Shape& xs = g_.type(node.inputs[0]).shape;
  if (axes.empty()) return false;
  bool one_block = true;
  for (size_t i = 1; i < axes.size(); ++i) one_block = one_block && axes[i] == axes[i - 1] + 1;
  const AxisSplit sp(xs, axes.front(), axes.back());
  if (one_block && sp.inner == 1) {
    // The last dims: oneDNN's jit kernel for long runs, where it has one; else pet's over runs
    // (the dims-apart kernel below). Measured here (AVX-512, 2 threads, 1.2M to 4.8M floats):
    // oneDNN's jit kernel took 37 ms for runs of 2 (pet's: 0.6), 1.4 ms for runs of 64 (0.08 to
    // 0.6) and was level for sums from 128 and faster for maxima from 1024 (0.66 against 1.1);
    // for L1, L2 and sums of squares oneDNN 2.6 has only its reference kernel, 13 to 27 ms at
    // every length (pet's: 0.06 to 0.6).
    constexpr int64_t kOneDnnFromRun = 512;
    bool onednn_jit = false;
    if (sp.len >= kOneDnnFromRun) try {
        Shape keep = xs;
        for (int64_t a : axes) keep[size_t(a)] = 1;
        const reduction::primitive_desc pd(reduction::desc(alg, plain_md(xs), plain_md(keep), p, 0.f), eng_);
        onednn_jit = std::string_view(pd.impl_info_str()).substr(0, 3) != "ref";
      } catch (const dnnl::error&) {
      }
    if (onednn_jit) return false;
    one_block = false;
  }
  const char* what = "";
  const int x = plain_slot(int(node.inputs[0])), y = int(node.outputs[0]);
  if (one_block) {
    auto* kernel = reduce_kernel<BlockKernel, void(const AxisSplit&, const float*, float*)>(alg, p, log_of_sum, what);
    if (!kernel) return false;
    define(node.outputs[0], plain_md(g_.type(node.outputs[0]).shape));
    add_step(cat(who, ": pet reduction (", what, " over ", sp.len, " of each ", sp.inner, " contiguous positions)"), {x}, {y}).fn = [this, x, y, sp, kernel] {
      kernel(sp, ptr(x), ptr(y));
    };
    return true;
  }
  // dims apart: each output position's elements by offset (both lists held; kept small)
  const auto kept_dims = kept_dims_within(xs, axes);
  if (!kept_dims) return false;
  int64_t kept_count = 1, reduced_count = 1;
  for (int64_t d : *kept_dims) kept_count *= xs[size_t(d)];
  for (int64_t d : axes) reduced_count *= xs[size_t(d)];
  auto* kernel = reduce_kernel<OffsetKernel, void(const std::vector<int64_t>&, const std::vector<int64_t>&, int64_t, const float*, float*)>(alg, p, log_of_sum, what);
  if (!kernel) return false;
  // the reduced dims at the end are one contiguous run at each offset
  std::vector<int64_t> outer_axes = axes;
  int64_t run = 1;
  for (int64_t d = int64_t(xs.size()) - 1; d >= 0 && !outer_axes.empty() && outer_axes.back() == d; --d) run *= xs[size_t(d)], outer_axes.pop_back();
  auto kept = std::make_shared<const std::vector<int64_t>>(offsets_over(xs, *kept_dims));
  auto reduced = std::make_shared<const std::vector<int64_t>>(offsets_over(xs, outer_axes));
  define(node.outputs[0], plain_md(g_.type(node.outputs[0]).shape));
  add_step(cat(who, ": pet reduction (", what, " over ", reduced_count, " elements apart for each of ", kept_count, " positions)"), {x}, {y}).fn =
      [this, x, y, kept, reduced, run, kernel] { kernel(*kept, *reduced, run, ptr(x), ptr(y)); };
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::ReduceLogSum& r, const std::string& who) {
  if (r.axes.empty()) return false;  // no axes: the formula's log of each element, the reference kernel
  if (lower_pet_reduce(n, r.axes, algorithm::reduction_sum, 0.f, true, who)) return true;
  if (!lower_reduce(n, r, algorithm::reduction_sum, who)) return false;
  const int y = int(g_.node(n).outputs[0]);
  const int64_t count = numel(g_.type(g_.node(n).outputs[0]).shape);
  add_step(cat(who, ": pet log of the sums, in place"), {y}, {y}).fn = [this, y, count] {
    float* p = ptr(y);
    parallel_chunks(count, 16384, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) p[i] = std::log(p[i]);
    });
  };
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::Hardmax& h, const std::string& who) {
  const Node& node = g_.node(n);
  const Shape& xs = g_.type(node.inputs[0]).shape;
  const AxisSplit sp(xs, h.axis, h.row_end(int(xs.size())) - 1);
  const int x = plain_slot(int(node.inputs[0])), y = int(node.outputs[0]);
  define(node.outputs[0], plain_md(xs));
  add_step(cat(who, ": pet row maxima"), {x}, {y}).fn = [this, x, y, sp] {
    const float* src = ptr(x);
    float* dst = ptr(y);
    if (sp.inner == 1) {  // contiguous rows: ArgMax's position in two passes (best_in_row)
      parallel_chunks(sp.outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(sp.len, 1)), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
          float* out = dst + o * sp.len;
          std::fill(out, out + sp.len, 0.f);
          if (sp.len > 0) out[best_in_row<ops::ArgMax>(src + o * sp.len, sp.len, false)] = 1.f;
        }
      });
      return;
    }
    for_axis_blocks(sp, [&](int64_t o, int64_t i0, int64_t w) {
      int64_t best[256];
      float* out = dst + o * sp.len * sp.inner + i0;
      // a row's first maximum, NaN never winning: ArgMax's rule (ops::ArgMax::replaces)
      if (sp.len > 0) best_in_block<ops::ArgMax>(sp, src + o * sp.len * sp.inner + i0, w, false, best);
      if (w == sp.inner) std::fill(out, out + sp.len * sp.inner, 0.f);  // the block's rows are contiguous
      else
        for (int64_t k = 0; k < sp.len; ++k) std::fill(out + k * sp.inner, out + k * sp.inner + w, 0.f);
      if (sp.len > 0)
        for (int64_t i = 0; i < w; ++i) out[best[i] * sp.inner + i] = 1.f;
    });
  };
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::GridSample& op, const std::string& who) {
  const Node& node = g_.node(n);
  const Shape &xs = g_.type(node.inputs[0]).shape, &ys = g_.type(node.outputs[0]).shape;
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], P = ys[2] * ys[3];
  const int x = plain_slot(int(node.inputs[0])), grid = plain_slot(int(node.inputs[1])), y = int(node.outputs[0]);
  define(node.outputs[0], plain_md(ys));
  struct Taps {
    int ny = 0, nx = 0;
    std::array<int64_t, 4> yi{}, xi{};
    std::array<float, 4> yw{}, xw{};
  };
  auto taps = std::make_shared<std::vector<Taps>>(static_cast<size_t>(N * P));  // kept between runs
  add_step(cat(who, ": pet grid sampling (each point's taps once for its ", C, " channels)"), {x, grid}, {y}).fn = [this, op, x, grid, y, N, C, H, W, P, taps] {
    const float* g = ptr(grid);
    Taps* t = taps->data();
    parallel_chunks(N * P, 1024, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p)
        t[p].ny = op.taps<float>(op.source(g[2 * p + 1], H), H, t[p].yi, t[p].yw), t[p].nx = op.taps<float>(op.source(g[2 * p], W), W, t[p].xi, t[p].xw);
    });
    const float* src = ptr(x);
    float* dst = ptr(y);
    parallel_chunks(N * C, 1, [&](int64_t b, int64_t e) {
      for (int64_t nc = b; nc < e; ++nc) {
        const float* plane = src + nc * H * W;
        const Taps* tp = t + (nc / C) * P;
        float* out = dst + nc * P;
        for (int64_t p = 0; p < P; ++p) {
          const Taps& q = tp[p];
          float acc = 0;  // as ops::GridSample: each tap row's sum, weighted, in order
          for (int a = 0; a < q.ny; ++a) {
            if (q.yi[size_t(a)] < 0) continue;
            const float* row_p = plane + q.yi[size_t(a)] * W;
            float row = 0;
            for (int c = 0; c < q.nx; ++c)
              if (q.xi[size_t(c)] >= 0) row += q.xw[size_t(c)] * row_p[q.xi[size_t(c)]];
            acc += q.yw[size_t(a)] * row;
          }
          out[p] = acc;
        }
      }
    });
  };
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::Trilu& t, const std::string& who) {
  const Node& node = g_.node(n);
  const Shape& xs = g_.type(node.inputs[0]).shape;
  const int64_t rows = xs[xs.size() - 2], cols = xs.back(), count = numel(xs);
  const int x = plain_slot(int(node.inputs[0])), y = int(node.outputs[0]);
  define(node.outputs[0], plain_md(xs));
  // k beyond every diagonal of the matrix acts as the nearest one beyond it (no overflow)
  const int64_t k = std::clamp<int64_t>(t.k, -(rows + 1), cols + 1);
  add_step(cat(who, ": pet band copy"), {x}, {y}).fn = [this, x, y, rows, cols, count, upper = t.upper, k] {
    const float* src = ptr(x);
    float* dst = ptr(y);
    if (cols == 0) return;
    parallel_chunks(count / cols, std::max<int64_t>(1, 16384 / cols), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        // row i keeps columns j with j - i >= k (upper) or j - i <= k (lower), ops::Trilu
        const int64_t i = r % rows;
        const int64_t edge = std::clamp<int64_t>(upper ? i + k : i + k + 1, 0, cols);  // first column of the second part
        const float* a = src + r * cols;
        float* b = dst + r * cols;
        if (upper) {
          std::fill(b, b + edge, 0.f);
          std::copy(a + edge, a + cols, b + edge);
        } else {
          std::copy(a, a + edge, b);
          std::fill(b + edge, b + cols, 0.f);
        }
      }
    });
  };
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::Concat& c, const std::string& who) {
  const Node& node = g_.node(n);
  // Every input is copied by one oneDNN reorder (jit, multi-threaded) into its slice of the
  // output, whatever its layout. oneDNN 2.6's concat primitive copied plain joins at 2 GB/s
  // (DenseNet-121: 62 concats, 17.6 ms of 54), joined mixed layouts only with its reference
  // kernel and failed to run a join of a few thousand inputs. The output takes the layout of
  // the most input bytes among those whose slices it can hold (blocked layouts: slices on
  // whole blocks); plain when a consumer wants plain anyway.
  const int axis = int(c.axis);
  const Shape& ys = g_.type(node.outputs[0]).shape;
  std::vector<int64_t> offsets;
  int64_t at = 0;
  for (TensorId t : node.inputs) offsets.push_back(at), at += g_.type(t).shape[size_t(axis)];
  // The slices of output layout `out`, or nothing when one does not fall on whole blocks. The
  // last one too: oneDNN 2.6's reorder into a slice that ends inside a block (a 4-channel
  // constant after three 16-channel ones, 52 channels in 16-blocks) zeroes the block's
  // padding at the wrong places, over other slices' channels (difftest seed 43, 2738).
  auto slices_of = [&](const md_t& out) -> std::optional<std::vector<md_t>> {
    const auto& b = out.data.format_desc.blocking;
    int64_t block = 1;
    for (int k = 0; k < b.inner_nblks; ++k)
      if (b.inner_idxs[k] == axis) block *= b.inner_blks[k];
    std::vector<md_t> subs;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const Shape& xs = g_.type(node.inputs[i]).shape;
      if (offsets[i] % block || xs[size_t(axis)] % block) return std::nullopt;
      memory::dims off(ys.size(), 0);
      off[size_t(axis)] = offsets[i];
      try {
        subs.push_back(out.submemory_desc(dims_of(xs), off));
      } catch (const dnnl::error&) {
        return std::nullopt;
      }
    }
    return subs;
  };
  if (auto it = concat_families_.find(n); it != concat_families_.end()) return lower_family_concat(n, *it->second, who);
  md_t out_md = plain_md(ys);
  std::vector<md_t> subs = *slices_of(out_md);
  if (!wants_plain(node.outputs[0])) {
    // candidate layouts: each input's, the output built by oneDNN's concat from that input
    // followed by a plain rest (it keeps the first blocked layout, else the first input's)
    std::vector<std::pair<md_t, size_t>> bytes_by_layout;
    for (TensorId t : node.inputs) {
      const md_t& m = slots_[size_t(t)].md;
      const Shape& xs = g_.type(t).shape;
      md_t cand = m;
      if (xs != ys) {
        Shape rest = ys;
        rest[size_t(axis)] -= xs[size_t(axis)];
        try {
          cand = concat::primitive_desc(axis, {m, plain_md(rest)}, eng_).dst_desc();
        } catch (const dnnl::error&) {
          continue;
        }
      }
      auto it = std::find_if(bytes_by_layout.begin(), bytes_by_layout.end(), [&](const auto& e) { return e.first == cand; });
      if (it == bytes_by_layout.end()) it = bytes_by_layout.insert(it, {cand, 0});
      it->second += m.get_size();
    }
    size_t best = 0;
    for (auto& [cand, bytes] : bytes_by_layout)
      if (bytes > best)
        if (auto s = slices_of(cand)) best = bytes, out_md = cand, subs = std::move(*s);
  }
  if (auto f = concat_family(n, out_md)) return lower_family_concat(n, *f, who);
  define(node.outputs[0], out_md);
  const bool all_plain = is_plain(int(node.outputs[0])) &&
                         std::all_of(node.inputs.begin(), node.inputs.end(), [&](TensorId t) { return is_plain(int(t)); });
  if (all_plain) {  // pet's box copies, all in one step: no oneDNN memory objects made per input and run (an unrolled LSTM joins 50 rows)
    auto plan = copy_plan(node.op, g_.input_types(n), g_.output_types(n));
    if (plan) {
      std::vector<int> ins;
      for (TensorId t : node.inputs) ins.push_back(int(t));
      Step& st = add_step(cat(who, ": pet copies of ", ins.size(), " inputs into slices (plain -> plain)"), ins, {int(node.outputs[0])});
      st.fn = [this, ins, plan = std::move(*plan), y = int(node.outputs[0])] {
        float* d = ptr(y);
        for (const BoxCopy& c : plan) cpu::box_copy(ptr(ins[size_t(c.src)]) + c.src_offset, c.src_strides, d + c.dst_offset, c.dst_strides, c.shape);
      };
      return true;
    }
  }
  SliceCopies copies;
  for (size_t i = 0; i < node.inputs.size(); ++i) add_slice_copy(copies, int(node.inputs[i]), subs[i], who);
  const std::string text = cat(who, ": ", copies.ins.size(), " oneDNN reorders into slices (", copies.layouts, " -> ", layout_name(out_md), ")");
  slice_copy_step(text, std::move(copies), int(node.outputs[0]));
  return true;
}

void CpuExecutable::add_slice_copy(SliceCopies& c, int s, const md_t& sub, const std::string& who) {
  c.copies.push_back(dnnl_call(who, [&] { return reorder(reorder::primitive_desc(eng_, slots_[size_t(s)].md, eng_, sub)); }));
  c.subs.push_back(sub);
  c.ins.push_back(s);
  const std::string from = layout_name(slots_[size_t(s)].md);
  if (c.layouts.find(from) == std::string::npos) c.layouts += (c.layouts.empty() ? "" : ", ") + from;
}

void CpuExecutable::slice_copy_step(const std::string& text, SliceCopies c, int y) {
  Step& st = add_step(text, c.ins, {y});
  st.fn = [this, c = std::move(c), y] {
    for (size_t i = 0; i < c.ins.size(); ++i) {
      memory from(slots_[size_t(c.ins[i])].md, eng_, ptr(c.ins[i])), to(c.subs[i], eng_, ptr(y));
      c.copies[i].execute(strm_, from, to);
    }
  };
}

std::optional<int64_t> CpuExecutable::channels_last_stride(const md_t& md) {
  const auto& d = md.data;
  if (d.format_kind != dnnl_blocked || d.format_desc.blocking.inner_nblks != 0 || d.ndims < 3 || d.offset0 != 0) return std::nullopt;
  const auto* st = d.format_desc.blocking.strides;
  if (d.dims[1] > 1 && st[1] != 1) return std::nullopt;
  // the row stride: the innermost spatial dim's (the dims of one there step as they please)
  int64_t row = -1, expect = -1;
  for (int i = d.ndims - 1; i >= 2; --i) {
    if (d.dims[i] == 1) continue;
    if (row < 0) row = expect = st[i];
    if (st[i] != expect) return std::nullopt;
    expect *= d.dims[i];
  }
  if (row < 0) row = expect = d.dims[0] > 1 ? st[0] : d.dims[1];  // no spatial extent: one row per sample
  if (d.dims[0] > 1 && st[0] != expect) return std::nullopt;
  if (row < d.dims[1]) return std::nullopt;
  return row;
}

md_t CpuExecutable::channels_last_md(const Shape& s) {
  using tag = memory::format_tag;
  const tag t = s.size() == 3 ? tag::acb : s.size() == 4 ? tag::acdb : tag::acdeb;
  PET_CHECK(s.size() >= 3 && s.size() <= 5, "channels-last layout of rank ", s.size());
  return md_t(dims_of(s), dt::f32, t);
}

namespace {
/// Whether layouts a and b put every element at the same offset (strides compared only along
/// dims of more than one element: a batch-1 view of a wider buffer is the dense layout).
bool same_offsets(const md_t& a, const md_t& b) {
  const auto &x = a.data, &y = b.data;
  if (x.ndims != y.ndims || x.format_kind != dnnl_blocked || y.format_kind != dnnl_blocked || x.offset0 != y.offset0) return false;
  const auto &bx = x.format_desc.blocking, &by = y.format_desc.blocking;
  if (bx.inner_nblks != by.inner_nblks) return false;
  for (int k = 0; k < bx.inner_nblks; ++k)
    if (bx.inner_blks[k] != by.inner_blks[k] || bx.inner_idxs[k] != by.inner_idxs[k]) return false;
  for (int i = 0; i < x.ndims; ++i) {
    if (x.dims[i] != y.dims[i] || x.padded_dims[i] != y.padded_dims[i]) return false;
    int64_t block = 1;  // elements of dim i inside the inner blocks
    for (int k = 0; k < bx.inner_nblks; ++k)
      if (bx.inner_idxs[k] == i) block *= bx.inner_blks[k];
    if (x.padded_dims[i] / block > 1 && bx.strides[i] != by.strides[i]) return false;
  }
  return true;
}
}  // namespace

std::shared_ptr<CpuExecutable::ConcatFamily> CpuExecutable::concat_family(NodeId n, const md_t& out_md) {
  const Node& node = g_.node(n);
  const int axis = int(std::get<ops::Concat>(node.op).axis);
  const TensorId x0 = node.inputs[0];
  std::vector<NodeId> cands;
  for (NodeId m : consumers_[size_t(x0)]) {
    const Node& mn = g_.node(m);
    const auto* mc = std::get_if<ops::Concat>(&mn.op);
    if (mc && int(mc->axis) == axis && mn.inputs[0] == x0 && std::find(cands.begin(), cands.end(), m) == cands.end()) cands.push_back(m);
  }
  if (cands.size() < 2) return nullptr;
  NodeId last = cands[0];
  for (NodeId m : cands)
    if (g_.node(m).inputs.size() > g_.node(last).inputs.size()) last = m;
  const auto& all = g_.node(last).inputs;
  std::vector<NodeId> members;
  for (NodeId m : cands)
    if (std::equal(g_.node(m).inputs.begin(), g_.node(m).inputs.end(), all.begin())) members.push_back(m);
  if (members.size() < 2 || std::find(members.begin(), members.end(), n) == members.end()) return nullptr;
  for (NodeId m : members) {
    const TensorId y = g_.node(m).outputs[0];
    if (m != n && (lowered_.count(m) || absorbed_.count(m) || fused_.count(m))) return nullptr;
    if (g_.type(y).dtype != DType::Float32 || is_output_.count(y) || qconcat_output_q(m) >= 0) return nullptr;
  }
  for (TensorId t : all)
    if (g_.type(t).dtype != DType::Float32) return nullptr;
  // the buffer: this join's layout, at the longest join's shape
  const Shape& ys = g_.type(node.outputs[0]).shape;
  std::optional<memory::format_tag> tag;  // none: plain
  if (!(out_md == plain_md(ys))) {
    using ft = memory::format_tag;
    const std::vector<ft> tags = ys.size() == 3   ? std::vector<ft>{ft::acb, ft::aBc8b, ft::aBc16b}
                                 : ys.size() == 4 ? std::vector<ft>{ft::acdb, ft::aBcd8b, ft::aBcd16b}
                                 : ys.size() == 5 ? std::vector<ft>{ft::acdeb, ft::aBcde8b, ft::aBcde16b}
                                                  : std::vector<ft>{};
    for (ft t : tags)
      if (md_t(dims_of(ys), dt::f32, t) == out_md) tag = t;
    if (!tag) return nullptr;
  }
  auto layout = [&](const Shape& s) { return tag ? md_t(dims_of(s), dt::f32, *tag) : plain_md(s); };
  auto f = std::make_shared<ConcatFamily>();
  f->last = last;
  f->md = layout(g_.type(g_.node(last).outputs[0]).shape);
  const auto& b = f->md.data.format_desc.blocking;
  int64_t block = 1;
  for (int k = 0; k < b.inner_nblks; ++k)
    if (b.inner_idxs[k] == axis) block *= b.inner_blks[k];
  int64_t at = 0;
  for (TensorId t : all) {  // every slice on whole blocks (as a plain Concat's; see lower_op)
    const int64_t len = g_.type(t).shape[size_t(axis)];
    if (at % block || len % block) return nullptr;
    at += len;
  }
  for (NodeId m : members) {
    if (m == last) continue;
    const TensorId y = g_.node(m).outputs[0];
    const Shape& ms = g_.type(y).shape;
    md_t sub;
    try {
      sub = f->md.submemory_desc(dims_of(ms), memory::dims(ms.size(), 0));
    } catch (const dnnl::error&) {
      return nullptr;
    }
    if (const md_t dense = layout(ms); same_offsets(sub, dense)) {
      f->views[m] = dense;
      continue;
    }
    // a strided view: only where batch norms (pet's row kernel) alone read it
    if (!channels_last_stride(sub) || consumers_[size_t(y)].empty()) return nullptr;
    for (NodeId c : consumers_[size_t(y)]) {
      const Node& cn = g_.node(c);
      const auto* bn = std::get_if<ops::BatchNormalization>(&cn.op);
      if (!bn || bn->training_mode || cn.outputs.size() != 1 || cn.inputs[0] != y) return nullptr;
      for (size_t i = 1; i < cn.inputs.size(); ++i)
        if (!g_.tensor(cn.inputs[i]).is_constant()) return nullptr;
    }
    f->views[m] = sub;
  }
  for (NodeId m : members) concat_families_[m] = f;
  return f;
}

bool CpuExecutable::lower_family_concat(NodeId n, ConcatFamily& f, const std::string& who) {
  const Node& node = g_.node(n);
  const size_t axis = size_t(std::get<ops::Concat>(node.op).axis);
  const TensorId buf = g_.node(f.last).outputs[0];
  SliceCopies copies;
  int64_t at = 0;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const Shape& xs = g_.type(node.inputs[i]).shape;
    if (i >= f.copied) {
      memory::dims off(xs.size(), 0);
      off[axis] = at;
      add_slice_copy(copies, int(node.inputs[i]), f.md.submemory_desc(dims_of(xs), off), who);
    }
    at += xs[axis];
  }
  if (!f.defined) define(buf, f.md), f.defined = true;
  const int y = int(node.outputs[0]);
  if (n != f.last) alias(y, int(buf), f.views.at(n));
  const size_t before = f.copied;
  f.copied = std::max(f.copied, node.inputs.size());
  if (copies.ins.empty()) return true;  // its inputs are in the buffer already: a view
  const std::string view = n == f.last ? "" : cat(", seen as ", layout_name(f.views.at(n)));
  const size_t k = copies.ins.size();
  const std::string text = cat(who, ": ", k, " oneDNN reorder", k == 1 ? "" : "s", " into slices of the buffer shared with '", g_.node(f.last).name,
                               "' (", before, " inputs there already; ", copies.layouts, " -> ", layout_name(f.md), view, ")");
  slice_copy_step(text, std::move(copies), y);
  return true;
}

bool CpuExecutable::lower_pet_unary(NodeId n, const std::string& who, std::function<void(const float*, float*, int64_t)> kernel) {
  const Node& node = g_.node(n);
  int x = int(node.inputs[0]);
  const auto& d = slots_[size_t(x)].md.data;
  bool unpadded = d.format_kind == dnnl_blocked && d.offset0 == 0;
  for (int i = 0; i < d.ndims && unpadded; ++i) unpadded = d.padded_dims[i] == d.dims[i];
  if (!unpadded) x = plain_slot(x);
  const int y = int(node.outputs[0]);
  define(TensorId(y), slots_[size_t(x)].md);
  Step& st = add_step(cat(who, ": pet element-wise kernel (", layout_name(slots_[size_t(x)].md), ")"), {x}, {y});
  const int64_t total = int64_t(slots_[size_t(x)].md.get_size() / sizeof(float));
  st.fn = [this, x, y, total, kernel = std::move(kernel)] {
    const float* a = ptr(x);
    float* o = ptr(y);
    parallel_chunks(total, 16384, [&](int64_t b, int64_t e) { kernel(a + b, o + b, e - b); });
  };
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::PRelu&, const std::string& who) {
  const Node& node = g_.node(n);
  const Shape& xs = g_.type(node.inputs[0]).shape;
  if (g_.type(node.outputs[0]).shape != xs || xs.empty()) return false;  // the slope broadcast beyond x: the formula
  const int x = plain_slot(int(node.inputs[0])), s = plain_slot(int(node.inputs[1]));
  const Shape slope = with_rank(g_.type(node.inputs[1]).shape, xs.size());  // oneDNN's weights: x's rank, 1 where broadcast
  auto pd = dnnl_call(who, [&] {
    return prelu_forward::primitive_desc(prelu_forward::desc(prop_kind::forward_inference, plain_md(xs), plain_md(slope)), eng_);
  });
  if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) {  // oneDNN's generic kernel (a scalar slope, say): pet's broadcasting one
    const int y = int(node.outputs[0]);
    define(node.outputs[0], plain_md(xs));
    auto sx = cpu::broadcast_strides(xs, xs), ss = cpu::broadcast_strides(g_.type(node.inputs[1]).shape, xs);
    Step& st = add_step(cat(who, ": pet broadcasting kernel (oneDNN has only its reference prelu for this slope)"), {x, s}, {y});
    st.fn = [this, x, s, y, sx, ss, xs] { cpu::broadcast_binary(cpu::BinaryKind::PRelu, ptr(x), sx, ptr(s), ss, ptr(y), xs); };
    return true;
  }
  Slot v = slots_[size_t(s)];  // the slope viewed at x's rank
  v.type.shape = slope;
  v.md = plain_md(slope);
  v.plain = -1;
  slots_.push_back(v);
  const int w = int(slots_.size()) - 1;
  define(node.outputs[0], pd.dst_desc());
  Step& st = add_step(cat(who, ": oneDNN prelu ", pd.impl_info_str()), {x, w}, {int(node.outputs[0])});
  st.prim = primitive(prelu_forward(pd));
  st.args = {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, int(node.outputs[0])}};
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::InstanceNormalization& op, const std::string& who) {
  const Node& node = g_.node(n);
  const Shape& xs = g_.type(node.inputs[0]).shape;
  const int x = plain_slot(int(node.inputs[0])), sc = plain_slot(int(node.inputs[1])), sh = plain_slot(int(node.inputs[2]));
  define(node.outputs[0], plain_md(xs));
  const int64_t channels = xs[1], rows = xs[0] * xs[1], len = numel(xs) / std::max<int64_t>(rows, 1);
  Step& st = add_step(cat(who, ": pet instance norm (two-pass, double accumulation)"), {x, sc, sh}, {int(node.outputs[0])});
  st.fn = [this, x, sc, sh, y = int(node.outputs[0]), rows, len, channels, eps = op.epsilon] {
    cpu::instance_norm_rows(ptr(x), ptr(y), rows, len, channels, ptr(sc), ptr(sh), eps);
  };
  return true;
}

}  // namespace pet::backend::cpu_detail
