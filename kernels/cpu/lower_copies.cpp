// Views and pet's strided copies on the cpu backend; the reference fallback.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "executable.hpp"
#include "algorithm_cache.hpp"
#include "copy.hpp"
#include "pet/core/parallel.hpp"
#include "pet/eval/interpreter.hpp"

namespace pet::backend::cpu_detail {

bool CpuExecutable::lower_view(NodeId n) {
  const Node& node = g_.node(n);
  int x = plain_slot(int(node.inputs[0]));
  const TensorId y = node.outputs[0];
  if (is_const(x)) {
    slots_[size_t(y)].owned = slots_[size_t(x)].owned;
    slots_[size_t(y)].md = plain_md(g_.type(y).shape);
    return true;
  }
  alias(int(y), x, plain_md(g_.type(y).shape));
  // a step that does nothing but keeps the source alive as long as the view is used
  add_step(cat(op_name(node.op), " '", node.name, "': view"), {x}, {int(y)}).fn = [] {};
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::Reshape&, const std::string&) { return lower_view(n); }

bool CpuExecutable::lower_op(NodeId n, const ops::Flatten&, const std::string&) { return lower_view(n); }

bool CpuExecutable::lower_op(NodeId n, const ops::Squeeze&, const std::string&) { return lower_view(n); }

bool CpuExecutable::lower_op(NodeId n, const ops::Unsqueeze&, const std::string&) { return lower_view(n); }

bool CpuExecutable::lower_op(NodeId n, const ops::Identity&, const std::string&) { return lower_view(n); }

bool CpuExecutable::lower_op(NodeId n, const ops::Dropout&, const std::string&) { return g_.node(n).outputs.size() == 1 && lower_view(n); }

void CpuExecutable::copy_step(NodeId n, int src, std::vector<int64_t> src_strides, int64_t src_offset, int dst, std::vector<int64_t> dst_strides,
               int64_t dst_offset, Shape shape, const std::string& text, bool first_fill, float fill_value) {
  auto& st = add_step(text, {src}, {dst});
  st.fn = [this, src, dst, src_strides, dst_strides, shape, src_offset, dst_offset, first_fill, fill_value] {
    float* d = ptr(dst);
    if (first_fill) cpu::fill(d, numel(slots_[size_t(dst)].type.shape), fill_value);
    cpu::box_copy(ptr(src) + src_offset, src_strides, d + dst_offset, dst_strides, shape);
  };
  (void)n;
}

bool CpuExecutable::lower_rt(NodeId n, const Shape& split, const std::vector<int64_t>& perm, const std::string& who) {
  const Node& node = g_.node(n);
  int x = plain_slot(int(node.inputs[0]));
  Shape tshape;
  std::vector<int64_t> st;
  cpu::rt_view(split, perm, tshape, st);
  define(node.outputs[0], plain_md(g_.type(node.outputs[0]).shape));
  copy_step(n, x, st, 0, int(node.outputs[0]), strides_of(tshape), 0, tshape, cat(who, ": pet strided copy"));
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::Transpose& t, const std::string& who) {
  return lower_rt(n, g_.type(g_.node(n).inputs[0]).shape, t.perm, who);
}

bool CpuExecutable::lower_op(NodeId n, const ops::RT& t, const std::string& who) { return lower_rt(n, t.split_shape, t.perm, who); }

bool CpuExecutable::lower_op(NodeId n, const ops::Slice& s, const std::string& who) {
  const Node& node = g_.node(n);
  int x = plain_slot(int(node.inputs[0]));
  const Shape& xs = g_.type(node.inputs[0]).shape;
  auto xst = strides_of(xs);
  std::vector<int64_t> st(xs.size());
  int64_t off = 0;
  for (size_t d = 0; d < xs.size(); ++d) st[d] = xst[d] * s.step[d], off += s.begin[d] * xst[d];
  const Shape& ys = g_.type(node.outputs[0]).shape;
  define(node.outputs[0], plain_md(ys));
  copy_step(n, x, st, off, int(node.outputs[0]), strides_of(ys), 0, ys, cat(who, ": pet strided copy"));
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::Split& s, const std::string& who) {
  const Node& node = g_.node(n);
  int x = plain_slot(int(node.inputs[0]));
  auto xst = strides_of(g_.type(node.inputs[0]).shape);
  int64_t off = 0;
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    const Shape& ys = g_.type(node.outputs[k]).shape;
    define(node.outputs[k], plain_md(ys));
    copy_step(n, x, xst, off * xst[size_t(s.axis)], int(node.outputs[k]), strides_of(ys), 0, ys, cat(who, ": pet copy of part ", k));
    off += s.split[k];
  }
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::Pad& p, const std::string& who) {
  if (p.mode != ops::PadMode::Constant) return false;
  const Node& node = g_.node(n);
  int x = plain_slot(int(node.inputs[0]));
  const Shape &xs = g_.type(node.inputs[0]).shape, &ys = g_.type(node.outputs[0]).shape;
  auto xst = strides_of(xs), yst = strides_of(ys);
  Shape ext(xs.size());
  int64_t xoff = 0, yoff = 0;
  for (size_t d = 0; d < xs.size(); ++d) {
    int64_t lo = std::max<int64_t>(0, -p.pads[d]), hi = std::min(xs[d], ys[d] - p.pads[d]);
    ext[d] = std::max<int64_t>(0, hi - lo);
    xoff += lo * xst[d];
    yoff += (lo + p.pads[d]) * yst[d];
  }
  define(node.outputs[0], plain_md(ys));
  copy_step(n, x, xst, xoff, int(node.outputs[0]), yst, yoff, ext, cat(who, ": pet fill + copy"), true, float(p.value));
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::Patch& p, const std::string& who) {
  const Node& node = g_.node(n);
  int base = plain_slot(int(node.inputs[0])), patch = plain_slot(int(node.inputs[1]));
  const Shape &ys = g_.type(node.outputs[0]).shape, &ps = g_.type(node.inputs[1]).shape;
  auto yst = strides_of(ys);
  int64_t off = 0;
  for (size_t d = 0; d < ys.size(); ++d) off += p.offsets[d] * yst[d];
  define(node.outputs[0], plain_md(ys));
  copy_step(n, base, yst, 0, int(node.outputs[0]), yst, 0, ys, cat(who, ": pet copy of the base"));
  copy_step(n, patch, strides_of(ps), 0, int(node.outputs[0]), yst, off, ps, cat(who, ": pet patch copy"));
  steps_.back().reads.push_back(int(node.outputs[0]));
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::Expand&, const std::string& who) {
  const Node& node = g_.node(n);
  int x = plain_slot(int(node.inputs[0]));
  const Shape &xs = g_.type(node.inputs[0]).shape, &ys = g_.type(node.outputs[0]).shape;
  auto own = strides_of(xs);
  std::vector<int64_t> st(ys.size(), 0);
  for (size_t i = 0; i < xs.size(); ++i) st[ys.size() - xs.size() + i] = xs[i] == 1 ? 0 : own[i];
  define(node.outputs[0], plain_md(ys));
  copy_step(n, x, st, 0, int(node.outputs[0]), strides_of(ys), 0, ys, cat(who, ": pet broadcast copy"));
  return true;
}

void CpuExecutable::fallback(NodeId n, const std::string& who, const std::string& why) {
  const Node& node = g_.node(n);
  std::vector<int> ins;
  for (TensorId t : node.inputs) ins.push_back(slots_[size_t(t)].is_float() ? plain_slot(int(t)) : int(t));
  std::vector<int> outs;
  for (TensorId t : node.outputs) {
    if (slots_[size_t(t)].is_float()) define(t, plain_md(g_.type(t).shape));
    outs.push_back(int(t));
  }
  Types out_types = g_.output_types(n);
  Op op = node.op;
  auto& st = add_step(cat(who, ": reference kernel", why.empty() ? "" : cat(" (", why, ")")), ins, outs);
  st.fn = [this, ins, outs, out_types, op, who] {
    std::vector<Value<float>> vals;
    for (int s : ins) {
      const Slot& sl = slots_[size_t(s)];
      if (!sl.is_float()) {
        vals.push_back(*sl.host);
        continue;
      }
      Tensor<float> t(sl.type.shape);
      std::memcpy(t.data(), ptr(s), size_t(t.size()) * sizeof(float));
      vals.push_back(t);
    }
    std::vector<Value<float>> res;
    try {
      res = evaluate_op<float>(op, vals, out_types);
    } catch (const InvalidInput& e) {
      throw InvalidInput(cat(who, ": ", e.what()));
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      Slot& sl = slots_[size_t(outs[k])];
      if (sl.is_float()) {
        const auto& t = std::get<Tensor<float>>(res[k]);
        std::memcpy(ptr(outs[k]), t.data(), size_t(t.size()) * sizeof(float));
      } else {
        sl.host = res[k];
      }
    }
  };
}

}  // namespace pet::backend::cpu_detail
