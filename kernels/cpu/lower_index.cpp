// Ops with integer tensors on the cpu backend. Gather, GatherND (embedding lookups),
// GatherElements, Where (attention masks), OneHot, ScatterND and ScatterElements (a KV
// cache's update) read an integer tensor into a float result; comparisons, ArgMax / ArgMin, TopK's indices, IsNaN, IsInf and Cast to an integer
// type write one from float buffers; Cast from an integer type writes a float buffer; the
// logical ops, integer comparisons, Div, Mod and casts between integer types go from integer
// tensors to one. Integer tensors live as host values (Slot::host): read when the step runs (a
// constant's checked once, here); a result is written into last run's storage when nothing
// else holds it (host_result), else into a fresh tensor (callers keep the outputs they were
// given).
#include "broadcast.hpp"
#include "convert.hpp"
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

/// GatherND's source offset, in elements of data, for each index tuple of `ix` (its last dim
/// m coordinates into data's dims [b, b + m) after b batch dims), each coordinate checked
/// and made non-negative as ops::GatherND says; `slice` is the element count of data's
/// dims after b + m.
std::vector<int64_t> gather_nd_offsets(const Tensor<int64_t>& ix, const Shape& xs, int64_t b, int64_t slice, const std::string& who) {
  const Shape& is = ix.shape();
  const int64_t m = is.back(), tuples = ix.size() / m;
  int64_t batches = 1;
  for (int64_t d = 0; d < b; ++d) batches *= is[size_t(d)];
  const int64_t per_batch = batches ? tuples / batches : 0;
  std::vector<int64_t> stride(static_cast<size_t>(m));
  int64_t st = slice;
  for (int64_t j = m; j-- > 0;) stride[size_t(j)] = st, st *= xs[size_t(b + j)];
  std::vector<int64_t> off(static_cast<size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t o = (t / per_batch) * st;  // st: the element count of data's dims from b on
    for (int64_t j = 0; j < m; ++j) {
      const int64_t k = ix[t * m + j], n = xs[size_t(b + j)];
      if (k < -n || k >= n) throw InvalidInput(cat(who, ": index ", k, " is out of range for data dim ", b + j, " of size ", n));
      o += (k < 0 ? k + n : k) * stride[size_t(j)];
    }
    off[size_t(t)] = o;
  }
  return off;
}

/// ScatterElements' destination offset, in elements of data, for each position of `ix` (in
/// its row-major order): the position with dim `a` replaced by its index, checked and made
/// non-negative as ops::ScatterElements says.
std::vector<int64_t> scatter_elements_offsets(const Tensor<int64_t>& ix, const Shape& xs, int64_t a, const std::string& who) {
  std::vector<int64_t> off(static_cast<size_t>(ix.size()));
  if (ix.size() == 0) return off;
  const std::vector<int64_t> st = strides_of(xs);
  const int64_t n = xs[size_t(a)];
  Index j(int(xs.size()));
  int64_t k = 0;
  do {
    const int64_t v = ix[k];
    if (v < -n || v >= n) throw InvalidInput(cat(who, ": index ", v, " is out of range for axis ", a, " of size ", n));
    int64_t o = 0;
    for (int d = 0; d < j.rank; ++d) o += (d == a ? (v < 0 ? v + n : v) : j[d]) * st[size_t(d)];
    off[size_t(k++)] = o;
  } while (next_index(j, ix.shape()));
  return off;
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
    if (sp.len == 0) {  // an empty axis: index 0 everywhere, as the formula
      std::fill(y, y + sp.outer * sp.inner, int64_t(0));
      return;
    }
    const float* src = ptr(x);
    if (sp.inner == 1) {  // contiguous rows
      parallel_chunks(sp.outer, std::max<int64_t>(1, 16384 / sp.len), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) y[o] = best_in_row<O>(src + o * sp.len, sp.len, last);
      });
      return;
    }
    // each block walks the axis once, with ops::ArgReduce's rule
    for_axis_blocks(sp, [&](int64_t o, int64_t i0, int64_t w) {
      best_in_block<O>(sp, src + o * sp.len * sp.inner + i0, w, last, y + o * sp.inner + i0);
    });
  });
  return true;
}

void CpuExecutable::host_result_step(std::string text, std::vector<int> reads, TensorId t, std::function<void(int64_t*)> fill) {
  const Shape shape = g_.type(t).shape;
  add_step(std::move(text), std::move(reads), {int(t)}).fn = [this, t, shape, fill = std::move(fill)] {
    fill(host_result(t, shape));
  };
}

int64_t* CpuExecutable::host_result(TensorId t, const Shape& shape) {
  // Not in place while anything else holds the storage: a program output goes to the caller,
  // who may keep it, and the reference kernels hand an input's storage on (a Reshape's
  // result shares it).
  std::optional<Value<float>>& h = slots_[size_t(t)].host;
  Tensor<int64_t>* v = h ? std::get_if<Tensor<int64_t>>(&*h) : nullptr;
  if (!v || !v->sole_owner() || v->shape() != shape) {
    h = Tensor<int64_t>(shape);
    v = &std::get<Tensor<int64_t>>(*h);
  }
  return v->data();
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
    const float* src = ptr(x);
    float* vals = ptr(v);
    int64_t* ids = host_result(it, is);
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
    const int64_t* idx = host_ints(int(it)).data();
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
  if (const auto* mp = std::get_if<ops::MaxPool>(&node.op)) return lower_op(n, *mp, who);  // with Indices (lower_ops.cpp)
  if (node.outputs.size() != 1) return false;
  const TensorId yt = node.outputs[0];
  const bool float_out = slots_[size_t(yt)].is_float();
  if (lower_integer_elementwise(n, who)) return true;
  if (const auto* g = std::get_if<ops::GatherND>(&node.op); g && float_out) return lower_gather_nd(n, *g, who);
  if (const auto* sc = std::get_if<ops::ScatterND>(&node.op); sc && float_out) return lower_scatter(n, sc->reduction, std::nullopt, who);
  if (const auto* sc = std::get_if<ops::ScatterElements>(&node.op); sc && float_out) return lower_scatter(n, sc->reduction, sc->axis, who);  // (axis < 0 counted from the end below)
  if (const auto* o = std::get_if<ops::OneHot>(&node.op)) return lower_one_hot(n, *o, who);
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
  const int32_t narrow = int32_t(op.narrow);
  if (from_float && to_float && !narrow) return lower_view(n);
  const int64_t count = numel(g_.type(yt).shape);
  if (from_float && to_float) {  // ONNX's Cast to float16 or bfloat16: each value rounded to the type
    const int x = plain_slot(int(xt)), y = int(yt);
    define(yt, plain_md(g_.type(yt).shape));
    add_step(cat(who, ": pet rounding to ", narrow_float_name(narrow)), {x}, {y}).fn = [this, x, y, count, narrow] {
      const float* src = ptr(x);
      float* dst = ptr(y);
      parallel_chunks(count, 16384, [&](int64_t b, int64_t e) { cpu::round_to_narrow(src + b, dst + b, e - b, narrow); });
    };
    return true;
  }
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
  add_step(cat(who, ": pet conversion"), {int(xt)}, {y}).fn = [this, xt, y, count, narrow] {
    const int64_t* src = host_ints(int(xt)).data();
    float* dst = ptr(y);
    parallel_chunks(count, 16384, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dst[i] = float(src[i]);
      if (narrow) cpu::round_to_narrow(dst + b, dst + b, e - b, narrow);
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
  if (is_const(int(it))) fixed = std::make_shared<const std::vector<int64_t>>(gather_indices(host_ints(int(it)), extent, op.axis, who));
  const int x = plain_slot(int(xt)), y = int(yt);
  define(yt, plain_md(ys));
  Step& st = add_step(cat(who, ": pet gather (rows of ", inner, fixed ? ", constant indices" : "", ")"), {x, int(it)}, {y});
  st.fn = [this, x, y, it, fixed, outer, inner, extent, q, axis = op.axis, who] {
    std::vector<int64_t> now;
    if (!fixed) now = gather_indices(host_ints(int(it)), extent, axis, who);
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
    cpu::broadcast_where(host_ints(int(c)).data(), sc, ptr(a), sa, ptr(b), sb, ptr(y), ys);
  };
  return true;
}

bool CpuExecutable::lower_gather_nd(NodeId n, const ops::GatherND& op, const std::string& who) {
  const Node& node = g_.node(n);
  const TensorId xt = node.inputs[0], it = node.inputs[1], yt = node.outputs[0];
  if (!slots_[size_t(xt)].is_float()) return false;
  const Shape &xs = g_.type(xt).shape, &is = g_.type(it).shape;
  const int64_t b = op.batch_dims, m = is.back();
  int64_t slice = 1;
  for (size_t d = size_t(b + m); d < xs.size(); ++d) slice *= xs[d];
  const int64_t tuples = numel(is) / m;
  std::shared_ptr<const std::vector<int64_t>> fixed;
  if (is_const(int(it))) fixed = std::make_shared<const std::vector<int64_t>>(gather_nd_offsets(host_ints(int(it)), xs, b, slice, who));
  const int x = plain_slot(int(xt)), y = int(yt);
  define(yt, plain_md(g_.type(yt).shape));
  Step& st = add_step(cat(who, ": pet gather (slices of ", slice, fixed ? ", constant indices" : "", ")"), {x, int(it)}, {y});
  st.fn = [this, x, y, it, fixed, xs, b, slice, tuples, who] {
    std::vector<int64_t> now;
    if (!fixed) now = gather_nd_offsets(host_ints(int(it)), xs, b, slice, who);
    const int64_t* off = fixed ? fixed->data() : now.data();
    const float* src = ptr(x);
    float* dst = ptr(y);
    const size_t bytes = size_t(slice) * sizeof(float);
    parallel_chunks(tuples, std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(slice, 1)), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) std::memcpy(dst + t * slice, src + off[t], bytes);
    });
  };
  return true;
}

bool CpuExecutable::lower_scatter(NodeId n, ops::ScatterReduction reduction, std::optional<int64_t> elements_axis, const std::string& who) {
  const Node& node = g_.node(n);
  const TensorId xt = node.inputs[0], it = node.inputs[1], ut = node.inputs[2], yt = node.outputs[0];
  if (!slots_[size_t(xt)].is_float() || !slots_[size_t(ut)].is_float()) return false;
  const Shape &xs = g_.type(xt).shape, &is = g_.type(it).shape;
  const bool nd = !elements_axis;
  const int64_t axis = nd ? 0 : *elements_axis < 0 ? *elements_axis + int64_t(xs.size()) : *elements_axis;
  // ScatterND: each index tuple's slice of `slice` elements; ScatterElements: one element
  const int64_t slice = nd ? numel(xs) / std::max<int64_t>(1, numel(Shape(xs.begin(), xs.begin() + is.back()))) : 1;
  auto offsets = [xs, is, nd, axis, slice, who](const Tensor<int64_t>& ix) {
    return nd ? gather_nd_offsets(ix, xs, 0, slice, who) : scatter_elements_offsets(ix, xs, axis, who);
  };
  std::shared_ptr<const std::vector<int64_t>> fixed;
  if (is_const(int(it))) fixed = std::make_shared<const std::vector<int64_t>>(offsets(host_ints(int(it))));
  const int x = plain_slot(int(xt)), u = plain_slot(int(ut)), y = int(yt);
  define(yt, plain_md(xs));
  const int64_t total = numel(xs);
  Step& st = add_step(cat(who, ": pet scatter (data copied, then ", nd ? cat("slices of ", slice) : std::string("elements"),
                          reduction == ops::ScatterReduction::None ? " written" : " combined", " in the indices' order",
                          fixed ? ", constant indices" : "", ")"),
                      {x, int(it), u}, {y});
  st.fn = [this, x, u, y, it, fixed, offsets, slice, total, reduction] {
    std::vector<int64_t> now;
    if (!fixed) now = offsets(host_ints(int(it)));
    const std::vector<int64_t>& off = fixed ? *fixed : now;
    const float* src = ptr(x);
    const float* up = ptr(u);
    float* dst = ptr(y);
    parallel_chunks(total, int64_t(1) << 16, [&](int64_t b, int64_t e) { std::memcpy(dst + b, src + b, size_t(e - b) * sizeof(float)); });
    // in order: a later duplicate index overwrites (or combines with) an earlier one, as the formula
    if (reduction == ops::ScatterReduction::None && slice == 1) {  // ScatterElements: one element each
      for (size_t t = 0; t < off.size(); ++t) dst[off[t]] = up[t];
    } else if (reduction == ops::ScatterReduction::None) {
      for (size_t t = 0; t < off.size(); ++t) std::memcpy(dst + off[t], up + int64_t(t) * slice, size_t(slice) * sizeof(float));
    } else {
      for (size_t t = 0; t < off.size(); ++t)
        for (int64_t k = 0; k < slice; ++k) dst[off[t] + k] = ops::detail::scatter_combine(reduction, dst[off[t] + k], up[int64_t(t) * slice + k]);
    }
  };
  return true;
}

bool CpuExecutable::lower_one_hot(NodeId n, const ops::OneHot& op, const std::string& who) {
  const Node& node = g_.node(n);
  const TensorId it = node.inputs[0], vt = node.inputs[1], yt = node.outputs[0];
  if (!slots_[size_t(vt)].is_float() || !slots_[size_t(yt)].is_float()) return false;
  const Shape& ys = g_.type(yt).shape;
  const AxisSplit sp(ys, op.axis < 0 ? op.axis + int64_t(ys.size()) : op.axis);  // [outer, depth, inner]
  const bool float_indices = slots_[size_t(it)].is_float();
  const int i = float_indices ? plain_slot(int(it)) : int(it), v = plain_slot(int(vt)), y = int(yt);
  define(yt, plain_md(ys));
  add_step(cat(who, ": pet one-hot"), {i, v}, {y}).fn = [this, i, v, y, sp, float_indices] {
    const float off = ptr(v)[0], on = ptr(v)[1];
    const float* fi = float_indices ? ptr(i) : nullptr;
    const int64_t* ii = float_indices ? nullptr : host_ints(int(i)).data();
    float* dst = ptr(y);
    const int64_t depth = sp.len, block = depth * sp.inner;
    parallel_chunks(sp.outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(block, 1)), [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        float* out = dst + o * block;
        std::fill(out, out + block, off);
        for (int64_t q = 0; q < sp.inner; ++q) {
          // ops::OneHot's index: the value as a real, truncated; negative ones from the end;
          // NaN, infinities and values beyond int64 match no position
          const double val = float_indices ? double(fi[o * sp.inner + q]) : double(ii[o * sp.inner + q]);
          if (!(std::abs(val) < 9.2e18)) continue;
          int64_t k = int64_t(val);
          if (k < 0) k += depth;
          if (k >= 0 && k < depth) out[k * sp.inner + q] = on;
        }
      }
    });
  };
  return true;
}

namespace {
/// An integer element rule over host values: y = f(a, b) with broadcasting (f(a) for one operand).
template <size_t N, class F>
void integer_rows(const std::array<const int64_t*, N>& in, const std::array<std::vector<int64_t>, N>& strides, int64_t* y, const Shape& ys, F f) {
  cpu::broadcast_rows<N>(ys, strides, [&](const std::array<int64_t, N>& o, int64_t yo, int64_t len, const std::array<int64_t, N>& st) {
    for (int64_t i = 0; i < len; ++i) {
      if constexpr (N == 1) y[yo + i] = f(in[0][o[0] + i * st[0]]);
      else y[yo + i] = f(in[0][o[0] + i * st[0]], in[1][o[1] + i * st[1]]);
    }
  });
}
}  // namespace

bool CpuExecutable::lower_integer_elementwise(NodeId n, const std::string& who) {
  const Node& node = g_.node(n);
  if (node.outputs.size() != 1 || slots_[size_t(node.outputs[0])].is_float() || node.inputs.empty() || node.inputs.size() > 2) return false;
  for (TensorId t : node.inputs)
    if (slots_[size_t(t)].is_float()) return false;
  const TensorId yt = node.outputs[0];
  const Shape ys = g_.type(yt).shape;
  const DType dt = g_.type(yt).dtype;
  std::vector<int> reads;
  for (TensorId t : node.inputs) reads.push_back(int(t));
  auto host = [this](int t) { return host_ints(int(t)).data(); };
  auto binary = [&](const char* what, auto f) {
    if (node.inputs.size() != 2) return false;
    const int a = int(node.inputs[0]), b = int(node.inputs[1]);
    std::array<std::vector<int64_t>, 2> st = {cpu::broadcast_strides(g_.type(node.inputs[0]).shape, ys), cpu::broadcast_strides(g_.type(node.inputs[1]).shape, ys)};
    host_result_step(cat(who, ": ", what), reads, yt, [=](int64_t* y) { integer_rows<2>({host(a), host(b)}, st, y, ys, f); });
    return true;
  };
  auto unary = [&](const char* what, auto f) {
    const int a = int(node.inputs[0]);
    std::array<std::vector<int64_t>, 1> st = {cpu::broadcast_strides(g_.type(node.inputs[0]).shape, ys)};
    host_result_step(cat(who, ": ", what), reads, yt, [=](int64_t* y) { integer_rows<1>({host(a)}, st, y, ys, f); });
    return true;
  };
  return std::visit([&](const auto& op) -> bool {
    using O = std::decay_t<decltype(op)>;
    if constexpr (is_one_of<O, ops::And, ops::Or, ops::Xor>) {
      return binary("pet logical op", [](int64_t a, int64_t b) -> int64_t { return O::f(a != 0, b != 0) ? 1 : 0; });
    } else if constexpr (is_one_of<O, ops::Equal, ops::Less, ops::LessOrEqual, ops::Greater, ops::GreaterOrEqual>) {
      // integers compare exactly (ops::detail::Compare)
      return binary("pet integer comparison", [](int64_t a, int64_t b) -> int64_t { return O::holds(a < b ? -1 : a > b ? 1 : 0) ? 1 : 0; });
    } else if constexpr (std::is_same_v<O, ops::Div> || std::is_same_v<O, ops::Mod>) {
      // the ops' integer rules (ops::Div::integer, ops::Mod::integer); a zero divisor names the node
      return binary(std::is_same_v<O, ops::Div> ? "pet integer division" : "pet integer remainder", [op, who](int64_t a, int64_t b) -> int64_t {
        if (b == 0) throw InvalidInput(cat(who, ": integer division by zero"));
        if constexpr (std::is_same_v<O, ops::Div>) return ops::Div::integer(a, b);
        else return op.integer(a, b);
      });
    } else if constexpr (is_one_of<O, ops::BitwiseAnd, ops::BitwiseOr, ops::BitwiseXor, ops::BitShift>) {
      // the ops' bit rules on int64 values, wrapped to the type (ops::detail::Bitwise)
      return binary("pet bitwise op", [op, dt](int64_t a, int64_t b) -> int64_t { return wrap_to(dt, op.f(a, b)); });
    } else if constexpr (std::is_same_v<O, ops::BitwiseNot>) {
      return unary("pet bitwise op", [dt](int64_t a) -> int64_t { return wrap_to(dt, ops::BitwiseNot::f(a)); });
    } else if constexpr (std::is_same_v<O, ops::Not>) {
      return unary("pet logical op", [](int64_t a) -> int64_t { return a != 0 ? 0 : 1; });
    } else if constexpr (std::is_same_v<O, ops::Cast>) {
      // ops::Cast between integer types: to bool nonzero, to int32 and the 8-bit types wrapped
      const DType to = op.to;
      return unary("pet integer conversion", [to](int64_t a) -> int64_t {
        return to == DType::Bool ? int64_t(a != 0) : to == DType::Int32 || is_int8(to) ? wrap_to(to, a) : a;
      });
    } else {
      return false;
    }
  }, node.op);
}

}  // namespace pet::backend::cpu_detail
