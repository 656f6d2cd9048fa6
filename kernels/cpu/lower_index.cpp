// Float results that read integer tensors on the cpu backend: Gather (embedding lookups, a
// token picked out of a sequence) and Where (attention masks). The integer tensor is read from
// its host value when the step runs (a constant's is checked once, here).
#include "broadcast.hpp"
#include "executable.hpp"
#include "pet/core/parallel.hpp"

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

bool CpuExecutable::lower_mixed(NodeId n, const std::string& who) {
  const Node& node = g_.node(n);
  if (node.outputs.size() != 1 || !slots_[size_t(node.outputs[0])].is_float()) return false;
  if (const auto* gt = std::get_if<ops::Gather>(&node.op)) return lower_gather(n, *gt, who);
  if (std::holds_alternative<ops::Where>(node.op)) return lower_where(n, who);
  return false;
}

bool CpuExecutable::lower_gather(NodeId n, const ops::Gather& op, const std::string& who) {
  const Node& node = g_.node(n);
  const TensorId xt = node.inputs[0], it = node.inputs[1], yt = node.outputs[0];
  if (!slots_[size_t(xt)].is_float()) return false;
  const Shape &xs = g_.type(xt).shape, &ys = g_.type(yt).shape;
  const size_t a = size_t(op.axis);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < a; ++d) outer *= xs[d];
  for (size_t d = a + 1; d < xs.size(); ++d) inner *= xs[d];
  const int64_t extent = xs[a], q = numel(g_.type(it).shape);
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
