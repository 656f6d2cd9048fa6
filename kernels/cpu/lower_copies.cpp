// Views and pet's strided copies on the cpu backend; the reference fallback.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "executable.hpp"
#include "algorithm_cache.hpp"
#include "copy.hpp"
#include "pet/backend/copy_plan.hpp"
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

bool CpuExecutable::lower_copies(NodeId n, const std::string& who) {
  const Node& node = g_.node(n);
  const Types in = g_.input_types(n), out = g_.output_types(n);
  auto plan = copy_plan(node.op, in, out);
  if (!plan) return false;
  std::map<int, int> src;  // input -> its plain slot
  for (const BoxCopy& c : *plan)
    if (!src.count(c.src)) src[c.src] = plain_slot(int(node.inputs[size_t(c.src)]));
  for (size_t k = 0; k < out.size(); ++k) define(node.outputs[k], plain_md(out[k].shape));
  for (const BoxCopy& c : *plan) {
    const int dst = int(node.outputs[size_t(c.dst)]);
    copy_step(n, src.at(c.src), c.src_strides, c.src_offset, dst, c.dst_strides, c.dst_offset, c.shape, cat(who, ": pet ", c.what), c.fill_first,
              c.fill_value);
    if (c.over_previous) steps_.back().reads.push_back(dst);
  }
  return true;
}

bool CpuExecutable::lower_op(NodeId n, const ops::Transpose&, const std::string& who) { return lower_copies(n, who); }
bool CpuExecutable::lower_op(NodeId n, const ops::RT&, const std::string& who) { return lower_copies(n, who); }
bool CpuExecutable::lower_op(NodeId n, const ops::Slice&, const std::string& who) { return lower_copies(n, who); }
bool CpuExecutable::lower_op(NodeId n, const ops::Split&, const std::string& who) { return lower_copies(n, who); }
bool CpuExecutable::lower_op(NodeId n, const ops::Pad&, const std::string& who) { return lower_copies(n, who); }
bool CpuExecutable::lower_op(NodeId n, const ops::Patch&, const std::string& who) { return lower_copies(n, who); }
bool CpuExecutable::lower_op(NodeId n, const ops::Expand&, const std::string& who) { return lower_copies(n, who); }
bool CpuExecutable::lower_op(NodeId n, const ops::Tile&, const std::string& who) { return lower_copies(n, who); }

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
        vals.push_back(host_of(s));
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
