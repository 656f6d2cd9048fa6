// The cpu executable: construction, slots and buffers, layouts, run, the plan text, lowering dispatch, fallbacks.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <unordered_map>

#include "executable.hpp"
#include "pet/core/stats.hpp"
#include "algorithm_cache.hpp"
#include "copy.hpp"
#include "pet/core/parallel.hpp"
#include "pet/eval/interpreter.hpp"
#include "pet/transform/pass.hpp"

namespace pet::backend::cpu_detail {

// ---------------------------------------------------------------- graph preparation
/// The backend-independent passes (constant and BN folding, Pad folding, LayerNorm and GELU
/// as single ops, dead code) before lowering.
Graph prepare(const Graph& in, const CompileOptions& opt) {
  Graph g = in;
  transform::PipelineOptions po;
  po.disabled = transform::pass_list(opt.disabled_passes);
  po.print_after = transform::pass_list(opt.print_after);
  transform::backend_pipeline().run(g, po);
  return g;
}

CpuExecutable::CpuExecutable(const Graph& original, const CompileOptions& opt) : opt_(opt), g_(prepare(original, opt)) {
  if (opt.threads > 0) set_num_threads(opt.threads);
  int8_ = opt.int8 && int8_isa();
  if (int8_) collect_quant_weights(original);
  glue_ = int8_;
  for (NodeId n = 0; n < g_.num_nodes() && opt.int8 && !glue_; ++n) glue_ = holds_any<ops::QLinearConv, ops::QLinearMatMul>(g_.node(n).op);
  consumers_ = g_.consumers();
  for (TensorId t : g_.outputs()) is_output_.insert(t);
  slots_.resize(size_t(g_.num_tensors()));
  for (TensorId t = 0; t < g_.num_tensors(); ++t) slots_[size_t(t)].type = g_.type(t);
  for (TensorId t : g_.inputs()) {
    Slot& s = slots_[size_t(t)];
    if (s.is_float()) {
      s.md = plain_md(s.type.shape);
      s.request = new_request(t);
      requests_[size_t(s.request)].pinned = true;
      requests_[size_t(s.request)].first = -1;
    }
  }
  for (TensorId t = 0; t < g_.num_tensors(); ++t)
    if (g_.tensor(t).is_constant()) {
      Slot& s = slots_[size_t(t)];
      const ConstValue& c = *g_.tensor(t).value;
      if (!std::holds_alternative<Tensor<int8_t>>(c) && !std::holds_alternative<Tensor<uint8_t>>(c)) s.host = const_value(c);
      if (s.is_float()) {
        // The graph's own storage (64-byte aligned), not a copy: an executable adds no copy of
        // the weights but the reorders its kernels ask for. No step writes it (add_step).
        auto held = std::make_shared<Tensor<float>>(std::get<Tensor<float>>(*s.host));
        if (held->size() == 0) {
          s.owned = aligned_floats(1);  // (an empty vector's data() may be null: a slot's storage is not)
        } else {
          s.owned = std::shared_ptr<float[]>(held, held->data());
          graph_constants_.insert(s.owned.get());
        }
        s.md = plain_md(s.type.shape);
      }
    }
  for (NodeId n : g_.topo_order())
    if (!absorbed_.count(n) && !fused_.count(n)) lower(n);
  for (TensorId t : g_.outputs()) ensure_host(t, "the program's output");
  for (TensorId t : g_.outputs()) output_slots_.push_back(slots_[size_t(t)].is_float() ? plain_slot(int(t)) : int(t));
  output_storage_.resize(output_slots_.size());
  for (int s : output_slots_)
    if (slots_[size_t(s)].request >= 0) requests_[size_t(slots_[size_t(s)].request)].pinned = true;
  plan_memory();
}

std::vector<Value<float>> CpuExecutable::run(std::span<const Value<float>> inputs) {
  if (inputs.size() != g_.inputs().size())
    throw InvalidInput(cat("the model has ", g_.inputs().size(), " inputs but ", inputs.size(), " values were given"));
  // Inputs are read in place (no step writes an input's buffer); outputs are written straight
  // into fresh tensors when their buffer belongs to them alone.
  std::set<int> input_requests;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TensorId t = g_.inputs()[i];
    Slot& s = slots_[size_t(t)];
    if (value_shape(inputs[i]) != s.type.shape)
      throw InvalidInput(cat("input '", g_.tensor(t).name, "' has shape ", value_shape(inputs[i]), " but the model expects ", s.type.shape));
    if (s.is_float()) {
      const auto* f = std::get_if<Tensor<float>>(&inputs[i]);
      if (!f) throw InvalidInput(cat("input '", g_.tensor(t).name, "' must be float32"));
      bind(s.request, const_cast<float*>(f->data()));
      input_requests.insert(s.request);
    } else {
      if (!std::holds_alternative<Tensor<int64_t>>(inputs[i])) throw InvalidInput(cat("input '", g_.tensor(t).name, "' must be an integer tensor"));
      s.host = inputs[i];
    }
  }
  std::vector<std::optional<Tensor<float>>> direct(output_slots_.size());
  std::set<int> bound;
  for (size_t k = 0; k < output_slots_.size(); ++k) {
    const Slot& sl = slots_[size_t(output_slots_[k])];
    // (not a view of part of a larger buffer: a Reshape of a shorter join in its block's buffer)
    if (!sl.is_float() || sl.owned || input_requests.count(sl.request) ||
        requests_[size_t(sl.request)].bytes != std::max(size_t(numel(sl.type.shape)) * sizeof(float), size_t(4)) || !bound.insert(sl.request).second)
      continue;
    direct[k] = output_storage_[k].take(sl.type.shape);
    bind(sl.request, direct[k]->data());
  }
  if (opt_.profile) step_ms_.resize(steps_.size()), ++runs_;
  for (size_t i = 0; i < steps_.size(); ++i) {
    auto& st = steps_[i];
    auto t0 = opt_.profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if (st.prim) st.prim->execute(strm_, st.argmap);
    else st.fn();
    if (opt_.profile) {
      strm_.wait();
      step_ms_[i].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  strm_.wait();
  std::vector<Value<float>> out;
  for (size_t k = 0; k < output_slots_.size(); ++k) {
    const int s = output_slots_[k];
    const Slot& sl = slots_[size_t(s)];
    if (!sl.is_float()) {
      out.push_back(host_of(s));
      continue;
    }
    if (direct[k]) {
      out.push_back(std::move(*direct[k]));
      continue;
    }
    Tensor<float> t = output_storage_[k].take(sl.type.shape);
    std::memcpy(t.data(), ptr(s), size_t(t.size()) * sizeof(float));
    out.push_back(t);
  }
  // The caller's tensors are not ours to keep pointing at.
  for (size_t q = 0; q < override_.size(); ++q)
    if (override_[q]) bind(int(q), nullptr);
  return out;
}

std::string CpuExecutable::describe() const {
  std::string s;
  // --profile: each step's median over the runs after the first (which pays for first
  // touches of buffers and caches), so that the steps add up to a run's time.
  double total = 0;
  auto median_of = [&](size_t i) {
    std::vector<double> v(step_ms_[i].begin() + (step_ms_[i].size() > 1 ? 1 : 0), step_ms_[i].end());
    return median(std::move(v));
  };
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (runs_) {
      const double m = median_of(i);
      total += m;
      char t[32];
      std::snprintf(t, sizeof t, "%9.3f ms  ", m);
      s += t;
    }
    s += steps_[i].text + "\n";
  }
  if (runs_) {
    char t[160];
    std::snprintf(t, sizeof t, "%9.3f ms  steps in all (median of each step over %d run%s%s; timing each step adds a wait per step)\n", total,
                  std::max(1, runs_ - 1), runs_ - 1 == 1 ? "" : "s", runs_ > 1 ? " after the first" : ", the first: cold");
    s += t;
  }
  s += cat("memory: ", buffers_.size(), " buffers, ", planned_bytes_ / 1024, " KiB (", requested_bytes_ / 1024, " KiB without reuse)\n");
  if (reordered_bytes_)
    s += cat("constants reordered for kernels: ", reordered_bytes_ / 1024, " KiB, of them ", shared_reorder_bytes_ / 1024,
             " KiB shared with another executable\n");
  return s;
}

int CpuExecutable::new_request(TensorId for_tensor, size_t bytes) {
  Request r;
  r.bytes = bytes ? bytes : size_t(numel(g_.type(for_tensor).shape)) * sizeof(float);
  requests_.push_back(r);
  return int(requests_.size()) - 1;
}

int CpuExecutable::new_slot(const TensorType& t, const md_t& md) {
  Slot s;
  s.type = t;
  s.md = md;
  Request r;
  r.bytes = std::max(md.get_size(), size_t(4));
  requests_.push_back(r);
  s.request = int(requests_.size()) - 1;
  slots_.push_back(s);
  return int(slots_.size()) - 1;
}

void CpuExecutable::define(TensorId t, const md_t& md) {
  Slot& s = slots_[size_t(t)];
  s.md = md;
  Request r;
  r.bytes = std::max(md.get_size(), size_t(4));
  requests_.push_back(r);
  s.request = int(requests_.size()) - 1;
}

void CpuExecutable::alias(int view, int src, const md_t& md) {
  slots_[size_t(view)].md = md;
  slots_[size_t(view)].request = slots_[size_t(src)].request;
  slots_[size_t(view)].owned = slots_[size_t(src)].owned;
  slots_[size_t(view)].host = size_t(src) < size_t(g_.num_tensors()) && g_.tensor(TensorId(src)).is_constant()
                                  ? std::optional<Value<float>>(host_of(src))
                                  : slots_[size_t(src)].host;
}

const Value<float>& CpuExecutable::host_of(int s) {
  Slot& sl = slots_[size_t(s)];
  if (!sl.host && size_t(s) < size_t(g_.num_tensors()) && g_.tensor(TensorId(s)).is_constant())
    sl.host = const_value(*g_.tensor(TensorId(s)).value);
  PET_CHECK(sl.host.has_value(), "slot ", s, " has no host value");
  return *sl.host;
}

float* CpuExecutable::ptr(int s) {
  const Slot& sl = slots_[size_t(s)];
  if (sl.owned) return sl.owned.get();
  if (float* o = override_[size_t(sl.request)]) return o;
  return buffers_[size_t(requests_[size_t(sl.request)].buffer)].get();
}

void CpuExecutable::bind(int q, float* p) {
  if (override_[size_t(q)] == p) return;
  override_[size_t(q)] = p;
  float* target = p ? p : buffers_[size_t(requests_[size_t(q)].buffer)].get();
  for (auto& m : request_memories_[size_t(q)]) m.set_data_handle(target);
}

bool CpuExecutable::is_plain(int s) const { return slots_[size_t(s)].md == plain_md(slots_[size_t(s)].type.shape); }

bool CpuExecutable::is_const(int s) const { return bool(slots_[size_t(s)].owned) || (s < g_.num_tensors() && g_.tensor(TensorId(s)).is_constant()); }

Step& CpuExecutable::add_step(std::string text, std::vector<int> reads, std::vector<int> writes) {
  for (int w : writes)
    if (slots_[size_t(w)].owned && graph_constants_.count(slots_[size_t(w)].owned.get()))
      throw InternalError(cat("cpu backend: step '", text, "' would write a constant of the graph it compiles"));
  Step st;
  st.text = std::move(text);
  st.reads = std::move(reads);
  st.writes = std::move(writes);
  steps_.push_back(std::move(st));
  return steps_.back();
}

namespace {
/// Constants reordered for a kernel, shared by the executables of the process (the original
/// and the optimized program pet optimize times side by side hold one copy of each weight's
/// reorder): by the source's address and the two layouts. An entry is found only while an
/// executable holds it, and that executable holds its source too, so the address still names
/// the same data (constants are never written: add_step).
class SharedReorders {
 public:
  std::shared_ptr<float[]> find(const float* data, const md_t& from, const md_t& to) {
    std::lock_guard<std::mutex> lock(mu_);
    auto [b, e] = map_.equal_range(data);
    for (auto it = b; it != e; ++it)
      if (it->second.from == from && it->second.to == to)
        if (auto p = it->second.buffer.lock()) return p;
    return nullptr;
  }
  void add(const float* data, const md_t& from, const md_t& to, const std::shared_ptr<float[]>& buffer) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = map_.begin(); it != map_.end();) it = it->second.buffer.expired() ? map_.erase(it) : std::next(it);
    map_.emplace(data, Entry{from, to, buffer});
  }

 private:
  struct Entry {
    md_t from, to;
    std::weak_ptr<float[]> buffer;
  };
  std::mutex mu_;
  std::unordered_multimap<const float*, Entry> map_;
};
SharedReorders& shared_reorders() {
  static SharedReorders r;
  return r;
}
}  // namespace

int CpuExecutable::as_layout(int s, const md_t& md, const std::string& why) {
  if (slots_[size_t(s)].md == md) return s;
  const bool to_plain = md == plain_md(slots_[size_t(s)].type.shape);
  if (to_plain && slots_[size_t(s)].plain >= 0) return slots_[size_t(s)].plain;
  if (is_const(s)) {
    for (const auto& k : const_layouts_)
      if (k.data == ptr(s) && k.from == slots_[size_t(s)].md && k.to == md) return k.slot;
    Slot c;
    c.type = slots_[size_t(s)].type;
    c.md = md;
    c.owned = shared_reorders().find(ptr(s), slots_[size_t(s)].md, md);
    reordered_bytes_ += md.get_size();
    if (c.owned) shared_reorder_bytes_ += md.get_size();
    if (!c.owned) {
      c.owned = aligned_floats(md.get_size() / sizeof(float) + 1);
      memory src(slots_[size_t(s)].md, eng_, ptr(s)), dst(md, eng_, c.owned.get());
      dnnl_call(why, [&] { reorder(src, dst).execute(strm_, src, dst); });
      strm_.wait();
      shared_reorders().add(ptr(s), slots_[size_t(s)].md, md, c.owned);
    }
    graph_constants_.insert(c.owned.get());  // (shared: no step writes it either)
    slots_.push_back(c);
    int r = int(slots_.size()) - 1;
    if (to_plain) slots_[size_t(s)].plain = r;
    const_layouts_.push_back({ptr(s), slots_[size_t(s)].md, md, r});
    return r;
  }
  int r = new_slot(slots_[size_t(s)].type, md);
  Step& st = add_step(cat("  reorder for ", why, " (", layout_name(slots_[size_t(s)].md), " -> ", layout_name(md), ")"), {s}, {r});
  st.prim = dnnl_call(why, [&] { return primitive(reorder(reorder::primitive_desc(eng_, slots_[size_t(s)].md, eng_, md))); });
  st.args = {{DNNL_ARG_FROM, s}, {DNNL_ARG_TO, r}};
  if (to_plain) slots_[size_t(s)].plain = r;
  return r;
}

int CpuExecutable::plain_slot(int s) { return as_layout(s, plain_md(slots_[size_t(s)].type.shape), "a plain-layout consumer"); }

std::string CpuExecutable::layout_name(const md_t& md) {
  const auto& d = md.data;
  if (d.format_kind != dnnl_blocked) return "any";
  std::string s;
  for (int i = 0; i < d.format_desc.blocking.inner_nblks; ++i) s += cat(d.format_desc.blocking.inner_blks[i], "b");
  if (!s.empty()) return "blocked " + s;
  // no inner blocks: row-major, or the dims in another order (nhwc: "channels last")
  const auto* st = d.format_desc.blocking.strides;
  for (int i = 1; i < d.ndims; ++i)
    if (st[i] > st[i - 1] && d.dims[i] > 1 && d.dims[i - 1] > 1) return "plain, permuted";
  return "plain";
}

void CpuExecutable::lower(NodeId n) {
  const Node& node = g_.node(n);
  const std::string who = cat(op_name(node.op), " '", node.name, "'");
  if (lower_qdq(n, who) || lower_qconv(n, who) || lower_qmatmul(n, who) || lower_qbinary(n, who) || lower_qunary(n, who) || lower_qpool(n, who) ||
      lower_qconcat(n, who) || lower_qmove(n, who)) {
    lowered_.insert(n);
    for (NodeId a : absorbed_) lowered_.insert(a);
    return;
  }
  if (lower_integer(n, who)) {
    lowered_.insert(n);
    for (NodeId a : absorbed_) lowered_.insert(a);
    return;
  }
  // An int8 tensor an int8 step left in a buffer, read by an op that takes host values.
  for (TensorId t : node.inputs) ensure_host(t, who);
  // A DequantizeLinear's result left to int8 convs, needed after all (oneDNN has no int8
  // kernel for this one): computed now, from the int8 tensor.
  for (TensorId t : node.inputs)
    if (auto it = dq_deferred_.find(t); it != dq_deferred_.end()) {
      const NodeId d = it->second;
      dq_deferred_.erase(it);
      dequantize_step(d, cat(op_name(g_.node(d).op), " '", g_.node(d).name, "'"));
    }
  bool all_float = true;
  for (TensorId t : node.inputs) all_float = all_float && slots_[size_t(t)].is_float();
  for (TensorId t : node.outputs) all_float = all_float && slots_[size_t(t)].is_float();
  bool done = false;
  std::string why;
  if (all_float) {
    const auto absorbed_before = absorbed_;
    try {
      done = fuse_elementwise(n, who) || std::visit([&](const auto& op) { return lower_op(n, op, who); }, node.op);
    } catch (const Unsupported& e) {
      done = false;  // a configuration oneDNN does not implement: the reference kernel does it
      why = e.what();
    }
    if (!done) absorbed_ = absorbed_before;  // what it meant to fuse runs as its own steps
  } else {
    try {
      done = lower_mixed(n, who);
    } catch (const Unsupported& e) {
      why = e.what();
    }
  }
  if (!done) fallback(n, who, why);
  lowered_.insert(n);
  for (NodeId a : absorbed_) lowered_.insert(a);
}

int CpuExecutable::reshaped(int s, const Shape& shape) {
  Slot v = slots_[size_t(s)];
  v.md = plain_md(shape);
  v.type.shape = shape;
  v.plain = -1;
  slots_.push_back(v);
  return int(slots_.size()) - 1;
}

}  // namespace pet::backend::cpu_detail
