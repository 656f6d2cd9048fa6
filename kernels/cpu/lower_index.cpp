// Ops between float and integer tensors on the cpu backend: Gather (embedding lookups),
// GatherElements and Where (attention masks) read an integer tensor into a float result; comparisons, ArgMax /
// ArgMin, TopK's indices, IsNaN, IsInf and Cast to an integer type write one from float
// buffers; Cast from
// an integer type writes a float buffer. Integer tensors live as host values (Slot::host): read when the step
// runs (a constant's checked once, here), written as a fresh tensor each run (callers keep
// the outputs they were given).
#include "broadcast.hpp"
#include "executable.hpp"
#include "pet/core/parallel.hpp"
#include "pet/eval/value.hpp"

namespace pet::backend::cpu_detail {

namespace {

/// Gather's indices made non-negative, each checked against the axis' extent (as ops::Gather).
std::vector<int64_t> gather_indices(const Tensor<int64_t>& t, int64_t extent, int64_t axis, const std::string& who) {
  std::vector<int64_t> v(size_t(t.size()));
  for (int64_t i = 0; i < t.size(); ++i) {
    const int64_t k = t[i];
    if (k < -extent || k >= extent) throw InvalidInput(cat(who, ": index ", k, " is out of range for axis ", axis, " of size ", extent));
    v[size_t(i)] = k < 0 ? k + extent : k;
  }
  return v;
}

}  // namespace

template <class O>
bool CpuExecutable::lower_arg_reduce(NodeId n, const O& op, const std::string& who) {
  const Node& node = g_.node(n);
  const TensorId xt = node.inputs[0];
  if (!slots_[size_t(xt)].is_float()) return false;
  const Shape& xs = g_.type(xt).shape;
  const AxisSplit sp(xs, op.axis);
  const int x = plain_slot(int(xt));
  host_result_step(cat(who, ": pet arg-reduction"), {x}, node.outputs[0], [this, x, sp, last = op.select_last_index](int64_t* y) {
    if (sp.len == 0) return;  // an empty axis: index 0 everywhere, as the formula (the tensor is zeros)
    const float* src = ptr(x);
    // each block walks the axis once, with ops::ArgReduce's rule
    for_axis_blocks(sp, [&](int64_t o, int64_t i0, int64_t w) {
      float bv[256];
      const float* base = src + o * sp.len * sp.inner + i0;
      int64_t* best = y + o * sp.inner + i0;
      std::copy(base, base + w, bv);
      std::fill(best, best + w, int64_t(0));
      for (int64_t k = 1; k < sp.len; ++k) {
        const float* row = base + k * sp.inner;
        for (int64_t i = 0; i < w; ++i) {
          const float v = row[i];
          if (O::replaces(v, bv[i], last)) best[i] = k, bv[i] = v;
        }
      }
    });
  });
  return true;
}

void CpuExecutable::host_result_step(std::string text, std::vector<int> reads, TensorId t, std::function<void(int64_t*)> fill) {
  const Shape shape = g_.type(t).shape;
  // Fresh each run: a program output goes to the caller, who keeps it, and the reference
  // kernels may hand an input's storage on (a Reshape's result shares it).
  add_step(std::move(text), std::move(reads), {int(t)}).fn = [this, t, shape, fill = std::move(fill)] {
    Tensor<int64_t> v(shape);
    fill(v.data());
    slots_[size_t(t)].host = std::move(v);
  };
}

bool CpuExecutable::lower_topk(NodeId n, const ops::TopK& op, const std::string& who) {
  const Node& node = g_.node(n);
  const TensorId xt = node.inputs[0], vt = node.outputs[0], it = node.outputs[1];
  if (!slots_[size_t(xt)].is_float() || !slots_[size_t(vt)].is_float()) return false;
  const Shape& xs = g_.type(xt).shape;
  const auto [outer, len, inner] = AxisSplit(xs, op.axis);
  const int64_t k = op.k;
  const int x = plain_slot(int(xt)), v = int(vt);
  define(vt, plain_md(g_.type(vt).shape));
  const Shape is = g_.type(it).shape;
  add_step(cat(who, ": pet partial sort"), {x}, {v, int(it)}).fn = [this, x, v, it, is, outer, inner, len, k, largest = op.largest] {
    Tensor<int64_t> idx(is);
    const float* src = ptr(x);
    float* vals = ptr(v);
    int64_t* ids = idx.data();
    parallel_chunks(outer * inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(len, 1)), [&](int64_t b, int64_t e) {
      std::vector<std::pair<float, int64_t>> row(static_cast<size_t>(len));
      for (int64_t p = b; p < e; ++p) {
        const int64_t o = p / inner, i = p % inner;
        const float* in = src + o * len * inner + i;
        for (int64_t j = 0; j < len; ++j) row[size_t(j)] = {in[j * inner], j};
        std::partial_sort(row.begin(), row.begin() + k, row.end(), [&](const auto& a, const auto& c) { return ops::TopK::before(largest, a, c); });
        for (int64_t r = 0; r < k; ++r) {
          const int64_t at = (o * k + r) * inner + i;
          vals[at] = row[size_t(r)].first, ids[at] = row[size_t(r)].second;
        }
      }
    });
    slots_[size_t(it)].host = std::move(idx);
  };
  return true;
}

bool CpuExecutable::lower_gather_elements(NodeId n, const ops::GatherElements& op, const std::string& who) {
  const Node& node = g_.node(n);
  const TensorId xt = node.inputs[0], it = node.inputs[1], yt = node.outputs[0];
  if (!slots_[size_t(xt)].is_float()) return false;
  const Shape &xs = g_.type(xt).shape, &is = g_.type(it).shape;
  // walked over the indices' shape: the indices contiguously, the data with its own strides
  // except along the axis (0 there: the index says where)
  auto xst = strides_of(xs);
  const int64_t axis_stride = xst[size_t(op.axis)], extent = xs[size_t(op.axis)];
  xst[size_t(op.axis)] = 0;
  const auto ist = strides_of(is);
  const int x = plain_slot(int(xt)), y = int(yt);
  define(yt, plain_md(is));
  add_step(cat(who, ": pet element gather"), {x, int(it)}, {y}).fn = [this, x, y, it, is, ist, xst, axis_stride, extent, axis = op.axis, who] {
    const int64_t* idx = std::get<Tensor<int64_t>>(*slots_[size_t(it)].host).data();
    const float* src = ptr(x);
    float* dst = ptr(y);
    cpu::broadcast_rows<2>(is, {ist, xst}, [&](const std::array<int64_t, 2>& o, int64_t yo, int64_t len, const std::array<int64_t, 2>& st) {
      for (int64_t i = 0; i < len; ++i) {
        int64_t k = idx[o[0] + i * st[0]];
        if (k < -extent || k >= extent) throw InvalidInput(cat(who, ": index ", k, " is out of range for axis ", axis, " of size ", extent));
        if (k < 0) k += extent;
        dst[yo + i] = src[o[1] + i * st[1] + k * axis_stride];
      }
    });
  };
  return true;
}

template <class O>
bool CpuExecutable::lower_float_test(NodeId n, const O& op, const std::string& who) {
  const Node& node = g_.node(n);
  if (!slots_[size_t(node.inputs[0])].is_float()) return false;
  const int x = plain_slot(int(node.inputs[0]));
  const int64_t count = numel(g_.type(node.inputs[0]).shape);
  host_result_step(cat(who, ": pet element test"), {x}, node.outputs[0], [this, x, count, op](int64_t* y) {
    const float* src = ptr(x);
    parallel_chunks(count, 16384, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) y[i] = op.holds(src[i]);
    });
  });
  return true;
}

bool CpuExecutable::lower_mixed(NodeId n, const std::string& who) {
  const Node& node = g_.node(n);
  if (const auto* t = std::get_if<ops::TopK>(&node.op)) return lower_topk(n, *t, who);
  if (node.outputs.size() != 1) return false;
  const TensorId yt = node.outputs[0];
  const bool float_out = slots_[size_t(yt)].is_float();
  if (const auto* gt = std::get_if<ops::Gather>(&node.op); gt && float_out) return lower_gather(n, *gt, who);
  if (const auto* ge = std::get_if<ops::GatherElements>(&node.op); ge && float_out) return lower_gather_elements(n, *ge, who);
  if (std::holds_alternative<ops::Where>(node.op) && float_out) return lower_where(n, who);
  if (const auto* a = std::get_if<ops::ArgMax>(&node.op)) return lower_arg_reduce(n, *a, who);
  if (const auto* a = std::get_if<ops::ArgMin>(&node.op)) return lower_arg_reduce(n, *a, who);
  if (const auto* c = std::get_if<ops::Cast>(&node.op)) return lower_cast(n, *c, who);
  if (const auto* t = std::get_if<ops::IsNaN>(&node.op)) return lower_float_test(n, *t, who);
  if (const auto* t = std::get_if<ops::IsInf>(&node.op)) return lower_float_test(n, *t, who);
  std::optional<cpu::CompareKind> cmp;
  if (std::holds_alternative<ops::Equal>(node.op)) cmp = cpu::CompareKind::Equal;
  if (std::holds_alternative<ops::Less>(node.op)) cmp = cpu::CompareKind::Less;
  if (std::holds_alternative<ops::LessOrEqual>(node.op)) cmp = cpu::CompareKind::LessOrEqual;
  if (std::holds_alternative<ops::Greater>(node.op)) cmp = cpu::CompareKind::Greater;
  if (std::holds_alternative<ops::GreaterOrEqual>(node.op)) cmp = cpu::CompareKind::GreaterOrEqual;
  if (cmp && slots_[size_t(node.inputs[0])].is_float() && slots_[size_t(node.inputs[1])].is_float()) {
    const Shape& ys = g_.type(yt).shape;
    const auto sa = cpu::broadcast_strides(g_.type(node.inputs[0]).shape, ys), sb = cpu::broadcast_strides(g_.type(node.inputs[1]).shape, ys);
    const int a = plain_slot(int(node.inputs[0])), b = plain_slot(int(node.inputs[1]));
    host_result_step(cat(who, ": pet broadcasting comparison"), {a, b}, yt,
                     [this, a, b, sa, sb, ys, k = *cmp](int64_t* y) { cpu::broadcast_compare(k, ptr(a), sa, ptr(b), sb, y, ys); });
    return true;
  }
  return false;
}

bool CpuExecutable::lower_cast(NodeId n, const ops::Cast& op, const std::string& who) {
  const Node& node = g_.node(n);
  const TensorId xt = node.inputs[0], yt = node.outputs[0];
  const bool from_float = slots_[size_t(xt)].is_float(), to_float = slots_[size_t(yt)].is_float();
  if (from_float && to_float) return lower_view(n);
  const int64_t count = numel(g_.type(yt).shape);
  if (from_float) {  // to an integer type: the conversion ops::Cast does (truncation, then wrapped to the type)
    const int x = plain_slot(int(xt));
    host_result_step(cat(who, ": pet conversion"), {x}, yt, [this, x, count, to = op.to](int64_t* y) {
      const float* src = ptr(x);
      parallel_chunks(count, 16384, [&](int64_t b, int64_t e) {
        if (to == DType::Bool)
          for (int64_t i = b; i < e; ++i) y[i] = src[i] != 0.f;
        else
          for (int64_t i = b; i < e; ++i) y[i] = wrap_to(to, pet::detail::convert_element<int64_t>(src[i]));
      });
    });
    return true;
  }
  if (!to_float) return false;  // integer to integer: the reference kernel (host values)
  define(yt, plain_md(g_.type(yt).shape));
  const int y = int(yt);
  add_step(cat(who, ": pet conversion"), {int(xt)}, {y}).fn = [this, xt, y, count] {
    const int64_t* src = std::get<Tensor<int64_t>>(*slots_[size_t(xt)].host).data();
    float* dst = ptr(y);
    parallel_chunks(count, 16384, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dst[i] = float(src[i]);
    });
  };
  return true;
}

bool CpuExecutable::lower_gather(NodeId n, const ops::Gather& op, const std::string& who) {
  const Node& node = g_.node(n);
  const TensorId xt = node.inputs[0], it = node.inputs[1], yt = node.outputs[0];
  if (!slots_[size_t(xt)].is_float()) return false;
  const Shape &xs = g_.type(xt).shape, &ys = g_.type(yt).shape;
  const auto [outer, extent, inner] = AxisSplit(xs, op.axis);
  const int64_t q = numel(g_.type(it).shape);
  std::shared_ptr<const std::vector<int64_t>> fixed;
  if (is_const(int(it))) fixed = std::make_shared<const std::vector<int64_t>>(gather_indices(std::get<Tensor<int64_t>>(*slots_[size_t(it)].host), extent, op.axis, who));
  const int x = plain_slot(int(xt)), y = int(yt);
  define(yt, plain_md(ys));
  Step& st = add_step(cat(who, ": pet gather (rows of ", inner, fixed ? ", constant indices" : "", ")"), {x, int(it)}, {y});
  st.fn = [this, x, y, it, fixed, outer, inner, extent, q, axis = op.axis, who] {
    std::vector<int64_t> now;
    if (!fixed) now = gather_indices(std::get<Tensor<int64_t>>(*slots_[size_t(it)].host), extent, axis, who);
    const int64_t* idx = fixed ? fixed->data() : now.data();
    const float* src = ptr(x);
    float* dst = ptr(y);
    const size_t bytes = size_t(inner) * sizeof(float);
    parallel_chunks(outer * q, std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(inner, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) std::memcpy(dst + r * inner, src + ((r / q) * extent + idx[r % q]) * inner, bytes);
    });
  };
  return true;
}

bool CpuExecutable::lower_where(NodeId n, const std::string& who) {
  const Node& node = g_.node(n);
  const TensorId ct = node.inputs[0], at = node.inputs[1], bt = node.inputs[2], yt = node.outputs[0];
  if (slots_[size_t(ct)].is_float() || !slots_[size_t(at)].is_float() || !slots_[size_t(bt)].is_float()) return false;
  const Shape& ys = g_.type(yt).shape;
  const auto sc = cpu::broadcast_strides(g_.type(ct).shape, ys), sa = cpu::broadcast_strides(g_.type(at).shape, ys),
             sb = cpu::broadcast_strides(g_.type(bt).shape, ys);
  const int a = plain_slot(int(at)), b = plain_slot(int(bt)), c = int(ct), y = int(yt);
  define(yt, plain_md(ys));
  Step& st = add_step(cat(who, ": pet broadcasting select"), {c, a, b}, {y});
  st.fn = [this, c, a, b, y, sc, sa, sb, ys] {
    cpu::broadcast_where(std::get<Tensor<int64_t>>(*slots_[size_t(c)].host).data(), sc, ptr(a), sa, ptr(b), sb, ptr(y), ys);
  };
  return true;
}

}  // namespace pet::backend::cpu_detail
