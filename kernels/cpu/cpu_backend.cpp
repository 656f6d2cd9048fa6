// The oneDNN cpu backend: a graph compiled into a list of steps (oneDNN primitives, pet's copy
// kernels, reference fallbacks) over planned buffers.
//
// Compilation: (1) constant subgraphs are folded and batch norms folded into the convs before
// them; (2) nodes are lowered in order, convs and matmuls absorbing the activations, residual
// adds and biases that follow them as post-ops; (3) every float tensor keeps the layout its
// producer chose (convs pick oneDNN's blocked layouts with format_tag::any), consumers that
// accept any layout read it as is, the others get one cached reorder to the plain layout;
// (4) buffers are assigned by lifetime and reused once dead; views share their source's.
#include <dnnl.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <map>
#include <set>

#include "copy.hpp"
#include "winograd.hpp"
#include "pet/backend/cpu.hpp"
#include "pet/core/parallel.hpp"
#include "pet/eval/interpreter.hpp"

namespace pet::backend {

namespace {

using namespace dnnl;
using md_t = memory::desc;
using dt = memory::data_type;

memory::dims dims_of(const Shape& s) { return s.empty() ? memory::dims{1} : memory::dims(s.begin(), s.end()); }
md_t plain_md(const Shape& s) {
  memory::dims d = dims_of(s), st(d.size());
  int64_t acc = 1;
  for (int i = int(d.size()) - 1; i >= 0; --i) st[size_t(i)] = acc, acc *= d[size_t(i)];
  return md_t(d, dt::f32, st);
}
md_t any_md(const Shape& s) { return md_t(dims_of(s), dt::f32, memory::format_tag::any); }

/// Wraps a oneDNN call: its errors become pet errors naming the node.
template <class F>
auto dnnl_call(const std::string& who, F&& f) {
  try {
    return f();
  } catch (const dnnl::error& e) {
    throw Unsupported(cat(who, ": oneDNN: ", e.what()));
  }
}

struct Slot {
  TensorType type;
  md_t md;                         ///< float layout (empty for integer tensors)
  int request = -1;                ///< buffer request (float, non-constant)
  std::shared_ptr<float[]> owned;  ///< constants: their own storage
  std::optional<Value<float>> host;  ///< integer tensors (and constants, for fallbacks)
  int plain = -1;                  ///< slot with the same tensor in plain layout, once made
  bool is_float() const { return pet::is_float(type.dtype); }
};

struct Step {
  std::string text;
  std::optional<primitive> prim;
  std::vector<std::pair<int, int>> args;  ///< (DNNL_ARG_*, slot)
  std::unordered_map<int, memory> argmap;
  std::function<void()> fn;
  std::vector<int> reads, writes;
};

struct Request {
  size_t bytes = 0;
  int first = INT32_MAX, last = -1;
  int buffer = -1;
  bool pinned = false;  ///< graph input or output: never shared
};

std::shared_ptr<float[]> aligned_floats(size_t n) {
  size_t bytes = std::max<size_t>(64, (n * sizeof(float) + 63) / 64 * 64);
  return std::shared_ptr<float[]>(static_cast<float*>(std::aligned_alloc(64, bytes)), [](float* p) { std::free(p); });
}

// ---------------------------------------------------------------- graph preparation
/// Folds nodes whose inputs are all constants, and batch norms (inference) into the conv
/// before them.
Graph prepare(const Graph& in) {
  Graph g;
  g.name = in.name;
  GraphCopy c(in, g);
  c.leaves();
  auto consumers = in.consumers();
  std::set<TensorId> outputs(in.outputs().begin(), in.outputs().end());
  for (NodeId n : in.topo_order()) {
    const Node& node = in.node(n);
    bool all_const = !node.inputs.empty();
    for (TensorId t : node.inputs) all_const = all_const && g.tensor(c[t]).is_constant();
    if (all_const) {
      std::vector<Value<float>> vals;
      for (TensorId t : node.inputs) vals.push_back(*g.tensor(c[t]).value);
      auto outs = evaluate_op<float>(node.op, vals, in.output_types(n));
      for (size_t k = 0; k < outs.size(); ++k)
        c.map[size_t(node.outputs[k])] =
            g.add_constant(g.unique_name(in.tensor(node.outputs[k]).name), in.type(node.outputs[k]).dtype, outs[k]);
      continue;
    }
    // Conv -> BatchNormalization (inference, constant statistics): scale the filters.
    if (const auto* bn = std::get_if<ops::BatchNormalization>(&node.op); bn && !bn->training_mode && node.outputs.size() == 1) {
      TensorId x = node.inputs[0];
      NodeId p = in.tensor(x).producer;
      bool stats_const = true;
      for (size_t i = 1; i < 5; ++i) stats_const = stats_const && in.tensor(node.inputs[i]).is_constant();
      if (p >= 0 && std::holds_alternative<ops::Conv>(in.node(p).op) && consumers[size_t(x)].size() == 1 && !outputs.count(x) && stats_const &&
          in.tensor(in.node(p).inputs[1]).is_constant() && (in.node(p).inputs.size() < 3 || in.tensor(in.node(p).inputs[2]).is_constant())) {
        const Node& conv = in.node(p);
        auto get = [&](TensorId t) { return std::get<Tensor<float>>(*in.tensor(t).value); };
        Tensor<float> w = get(conv.inputs[1]).clone(), sc = get(node.inputs[1]), sh = get(node.inputs[2]), mu = get(node.inputs[3]),
                      var = get(node.inputs[4]);
        const int64_t f = w.shape()[0], per = w.size() / f;
        Tensor<float> b({f}, 0.0f);
        if (conv.inputs.size() == 3) b = get(conv.inputs[2]).clone();
        for (int64_t o = 0; o < f; ++o) {
          double a = double(sc[o]) / std::sqrt(double(var[o]) + bn->epsilon);
          for (int64_t i = 0; i < per; ++i) w[o * per + i] = float(w[o * per + i] * a);
          b[o] = float((double(b[o]) - mu[o]) * a + sh[o]);
        }
        // The conv was copied already; add a new conv reading the folded constants.
        std::vector<TensorId> ins{c[conv.inputs[0]], g.add_constant(g.unique_name(conv.name + "_w_bn"), w),
                                  g.add_constant(g.unique_name(conv.name + "_b_bn"), b)};
        auto outs = g.add_node(g.unique_name(conv.name + "_bn"), conv.op, ins, {g.unique_name(in.tensor(node.outputs[0]).name)});
        c.map[size_t(node.outputs[0])] = outs[0];
        continue;
      }
    }
    // Pad (zeros, spatial dims only) -> Conv or AveragePool: the padding moves into the op, which
    // then reads the unpadded tensor in its own layout (an explicitly padded AveragePool counts
    // the zeros: count_include_pad).
    if (node.inputs.size() >= 1 && (std::holds_alternative<ops::Conv>(node.op) || std::holds_alternative<ops::AveragePool>(node.op))) {
      TensorId x = node.inputs[0];
      NodeId p = in.tensor(x).producer;
      const ops::Pad* pad = p >= 0 ? std::get_if<ops::Pad>(&in.node(p).op) : nullptr;
      if (pad && pad->mode == ops::PadMode::Constant && pad->value == 0.0 && consumers[size_t(x)].size() == 1 && !outputs.count(x)) {
        const size_t r = in.type(x).shape.size(), k = r - 2;
        bool spatial = pad->pads[0] == 0 && pad->pads[1] == 0 && pad->pads[r] == 0 && pad->pads[r + 1] == 0;
        for (int64_t v : pad->pads) spatial = spatial && v >= 0;
        std::vector<int64_t> extra;
        for (size_t i = 0; i < k; ++i) extra.push_back(pad->pads[2 + i]);
        for (size_t i = 0; i < k; ++i) extra.push_back(pad->pads[r + 2 + i]);
        Op merged = node.op;
        bool ok = spatial;
        if (auto* cv = std::get_if<ops::Conv>(&merged); ok && cv) {
          for (size_t i = 0; i < extra.size(); ++i) cv->pads[i] += extra[i];
        } else if (auto* ap = std::get_if<ops::AveragePool>(&merged); ok && ap) {
          bool unpadded = true;
          for (int64_t v : ap->pads) unpadded = unpadded && v == 0;
          ok = unpadded && !ap->ceil_mode;
          if (ok) ap->pads = extra, ap->count_include_pad = true;
        }
        if (ok) {
          std::vector<TensorId> ins{c[in.node(p).inputs[0]]};
          for (size_t i = 1; i < node.inputs.size(); ++i) ins.push_back(c[node.inputs[i]]);
          auto outs = g.add_node(g.unique_name(node.name), merged, ins, {g.unique_name(in.tensor(node.outputs[0]).name)});
          c.map[size_t(node.outputs[0])] = outs[0];
          continue;
        }
      }
    }
    c.node(n, false);
  }
  std::vector<TensorId> outs;
  for (TensorId t : in.outputs()) outs.push_back(c[t]);
  for (size_t i = 0; i < outs.size(); ++i) g.add_output(outs[i]);
  return remove_dead_nodes(g);
}

// ---------------------------------------------------------------- the executable
/// oneDNN's version and pet's cpu-kernel revision (bump it when a kernel changes): part of
/// every cache key, so that timings and choices of older kernels are never reused.
std::string cpu_backend_version() {
  const dnnl_version_t* v = dnnl_version();
  return cat("onednn", v->major, ".", v->minor, ".", v->patch, "+pet8");
}

/// Algorithm choices made by measurement, per configuration: in memory for the process, and
/// in a JSON file when one is named (read once, rewritten on every new choice). A damaged
/// file is ignored, never trusted.
class AlgorithmCache {
 public:
  static AlgorithmCache& instance() {
    static AlgorithmCache c;
    return c;
  }
  std::optional<std::string> get(const std::string& file, const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& m = load(file);
    if (auto it = m.find(key); it != m.end()) return it->second;
    return std::nullopt;
  }
  void put(const std::string& file, const std::string& key, const std::string& value) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& m = load(file);
    m[key] = value;
    if (file.empty()) return;
    try {
      nlohmann::json j(m);
      std::filesystem::create_directories(std::filesystem::path(file).parent_path());
      const std::string tmp = cat(file, ".tmp", ::getpid());
      std::ofstream(tmp) << j.dump(1) << "\n";
      std::filesystem::rename(tmp, file);
    } catch (const std::exception&) {
      // an unwritable cache only costs time
    }
  }

 private:
  std::map<std::string, std::string>& load(const std::string& file) {
    auto [it, fresh] = files_.try_emplace(file);
    if (fresh && !file.empty() && std::filesystem::exists(file)) {
      try {
        std::ifstream f(file);
        it->second = nlohmann::json::parse(f).get<std::map<std::string, std::string>>();
      } catch (const std::exception&) {
        it->second.clear();
      }
    }
    return it->second;
  }
  std::mutex mu_;
  std::map<std::string, std::map<std::string, std::string>> files_;
};

class CpuExecutable final : public Executable {
 public:
  CpuExecutable(const Graph& original, const CompileOptions& opt) : opt_(opt), g_(prepare(original)) {
    if (opt.threads > 0) set_num_threads(opt.threads);
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
        s.host = *g_.tensor(t).value;
        if (s.is_float()) {
          const auto& v = std::get<Tensor<float>>(*s.host);
          s.owned = aligned_floats(size_t(v.size()));
          std::memcpy(s.owned.get(), v.data(), size_t(v.size()) * sizeof(float));
          s.md = plain_md(s.type.shape);
        }
      }
    for (NodeId n : g_.topo_order())
      if (!absorbed_.count(n)) lower(n);
    for (TensorId t : g_.outputs()) output_slots_.push_back(slots_[size_t(t)].is_float() ? plain_slot(int(t)) : int(t));
    for (int s : output_slots_)
      if (slots_[size_t(s)].request >= 0) requests_[size_t(slots_[size_t(s)].request)].pinned = true;
    plan_memory();
  }

  std::vector<Value<float>> run(std::span<const Value<float>> inputs) override {
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
      if (!sl.is_float() || sl.owned || input_requests.count(sl.request) || !bound.insert(sl.request).second) continue;
      direct[k] = Tensor<float>(sl.type.shape);
      bind(sl.request, direct[k]->data());
    }
    if (opt_.profile) step_ms_.resize(steps_.size(), 0.0), ++runs_;
    for (size_t i = 0; i < steps_.size(); ++i) {
      auto& st = steps_[i];
      auto t0 = opt_.profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      if (st.prim) st.prim->execute(strm_, st.argmap);
      else st.fn();
      if (opt_.profile) {
        strm_.wait();
        step_ms_[i] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      }
    }
    strm_.wait();
    std::vector<Value<float>> out;
    for (size_t k = 0; k < output_slots_.size(); ++k) {
      const int s = output_slots_[k];
      const Slot& sl = slots_[size_t(s)];
      if (!sl.is_float()) {
        out.push_back(*sl.host);
        continue;
      }
      if (direct[k]) {
        out.push_back(std::move(*direct[k]));
        continue;
      }
      Tensor<float> t(sl.type.shape);
      std::memcpy(t.data(), ptr(s), size_t(t.size()) * sizeof(float));
      out.push_back(t);
    }
    // The caller's tensors are not ours to keep pointing at.
    for (size_t q = 0; q < override_.size(); ++q)
      if (override_[q]) bind(int(q), nullptr);
    return out;
  }

  std::string describe() const override {
    std::string s;
    for (size_t i = 0; i < steps_.size(); ++i) {
      if (runs_) {
        char t[32];
        std::snprintf(t, sizeof t, "%9.3f ms  ", step_ms_[i] / runs_);
        s += t;
      }
      s += steps_[i].text + "\n";
    }
    s += cat("memory: ", buffers_.size(), " buffers, ", planned_bytes_ / 1024, " KiB (", requested_bytes_ / 1024, " KiB without reuse)\n");
    return s;
  }

 private:
  // ------------------------------------------------------------ slots and buffers
  int new_request(TensorId for_tensor, size_t bytes = 0) {
    Request r;
    r.bytes = bytes ? bytes : size_t(numel(g_.type(for_tensor).shape)) * sizeof(float);
    requests_.push_back(r);
    return int(requests_.size()) - 1;
  }
  int new_slot(const TensorType& t, const md_t& md) {
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
  /// Gives tensor t (a node output) a fresh buffer in layout md.
  void define(TensorId t, const md_t& md) {
    Slot& s = slots_[size_t(t)];
    s.md = md;
    Request r;
    r.bytes = std::max(md.get_size(), size_t(4));
    requests_.push_back(r);
    s.request = int(requests_.size()) - 1;
  }
  /// Makes slot `view` share slot `src`'s buffer with another layout (same bytes).
  void alias(int view, int src, const md_t& md) {
    slots_[size_t(view)].md = md;
    slots_[size_t(view)].request = slots_[size_t(src)].request;
    slots_[size_t(view)].owned = slots_[size_t(src)].owned;
    slots_[size_t(view)].host = slots_[size_t(src)].host;
  }
  float* ptr(int s) {
    const Slot& sl = slots_[size_t(s)];
    if (sl.owned) return sl.owned.get();
    if (float* o = override_[size_t(sl.request)]) return o;
    return buffers_[size_t(requests_[size_t(sl.request)].buffer)].get();
  }
  /// Points request q at external memory (the caller's input, a fresh output tensor) or, with
  /// nullptr, back at its planned buffer: every primitive argument on it follows.
  void bind(int q, float* p) {
    if (override_[size_t(q)] == p) return;
    override_[size_t(q)] = p;
    float* target = p ? p : buffers_[size_t(requests_[size_t(q)].buffer)].get();
    for (auto& m : request_memories_[size_t(q)]) m.set_data_handle(target);
  }
  bool is_plain(int s) const { return slots_[size_t(s)].md == plain_md(slots_[size_t(s)].type.shape); }
  bool is_const(int s) const { return bool(slots_[size_t(s)].owned) || (s < g_.num_tensors() && g_.tensor(TensorId(s)).is_constant()); }

  Step& add_step(std::string text, std::vector<int> reads, std::vector<int> writes) {
    Step st;
    st.text = std::move(text);
    st.reads = std::move(reads);
    st.writes = std::move(writes);
    steps_.push_back(std::move(st));
    return steps_.back();
  }

  /// A slot holding s in layout md (a reorder step, cached for the plain layout; constants
  /// are reordered once here).
  int as_layout(int s, const md_t& md, const std::string& why) {
    if (slots_[size_t(s)].md == md) return s;
    const bool to_plain = md == plain_md(slots_[size_t(s)].type.shape);
    if (to_plain && slots_[size_t(s)].plain >= 0) return slots_[size_t(s)].plain;
    if (is_const(s)) {
      Slot c;
      c.type = slots_[size_t(s)].type;
      c.md = md;
      c.owned = aligned_floats(md.get_size() / sizeof(float) + 1);
      memory src(slots_[size_t(s)].md, eng_, ptr(s)), dst(md, eng_, c.owned.get());
      dnnl_call(why, [&] { reorder(src, dst).execute(strm_, src, dst); });
      strm_.wait();
      slots_.push_back(c);
      int r = int(slots_.size()) - 1;
      if (to_plain) slots_[size_t(s)].plain = r;
      return r;
    }
    int r = new_slot(slots_[size_t(s)].type, md);
    Step& st = add_step(cat("  reorder for ", why, " (", layout_name(slots_[size_t(s)].md), " -> ", layout_name(md), ")"), {s}, {r});
    st.prim = dnnl_call(why, [&] { return primitive(reorder(reorder::primitive_desc(eng_, slots_[size_t(s)].md, eng_, md))); });
    st.args = {{DNNL_ARG_FROM, s}, {DNNL_ARG_TO, r}};
    if (to_plain) slots_[size_t(s)].plain = r;
    return r;
  }
  int plain_slot(int s) { return as_layout(s, plain_md(slots_[size_t(s)].type.shape), "a plain-layout consumer"); }

  static std::string layout_name(const md_t& md) {
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

  // ------------------------------------------------------------ memory planning
  void plan_memory() {
    for (size_t i = 0; i < steps_.size(); ++i) {
      for (int s : steps_[i].writes)
        if (slots_[size_t(s)].request >= 0) {
          auto& r = requests_[size_t(slots_[size_t(s)].request)];
          r.first = std::min(r.first, int(i));
          r.last = std::max(r.last, int(i));
        }
      for (int s : steps_[i].reads)
        if (slots_[size_t(s)].request >= 0) requests_[size_t(slots_[size_t(s)].request)].last = std::max(requests_[size_t(slots_[size_t(s)].request)].last, int(i));
    }
    // Greedy by start time: a buffer is free again after its last reader.
    std::vector<int> order(requests_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return requests_[size_t(a)].first < requests_[size_t(b)].first; });
    std::vector<size_t> size;
    std::vector<int> busy_until;  // step index after which the buffer is free
    for (int q : order) {
      Request& r = requests_[size_t(q)];
      requested_bytes_ += r.bytes;
      if (r.last < 0 && !r.pinned) r.last = r.first;
      int best = -1;
      if (!r.pinned)
        for (size_t b = 0; b < size.size(); ++b)
          if (busy_until[b] < r.first && size[b] >= r.bytes && (best < 0 || size[b] < size[size_t(best)])) best = int(b);
      if (best < 0) {
        buffers_.push_back(aligned_floats(r.bytes / sizeof(float) + 1));
        size.push_back(r.bytes);
        busy_until.push_back(r.pinned ? INT32_MAX : r.last);
        planned_bytes_ += r.bytes;
        best = int(size.size()) - 1;
      } else {
        busy_until[size_t(best)] = r.last;
      }
      r.buffer = best;
    }
    override_.assign(requests_.size(), nullptr);
    request_memories_.resize(requests_.size());
    for (auto& st : steps_)
      for (auto& [arg, s] : st.args) {
        memory m(slots_[size_t(s)].md, eng_, ptr(s));
        st.argmap.emplace(arg, m);
        if (slots_[size_t(s)].request >= 0 && !slots_[size_t(s)].owned) request_memories_[size_t(slots_[size_t(s)].request)].push_back(m);
      }
  }

  // ------------------------------------------------------------ fusion helpers
  bool single_use(TensorId t) const { return consumers_[size_t(t)].size() == 1 && !is_output_.count(t); }
  NodeId sole_consumer(TensorId t) const { return single_use(t) ? consumers_[size_t(t)][0] : -1; }

  /// An activation node's oneDNN eltwise form, if any.
  static std::optional<std::tuple<algorithm, float, float>> eltwise_of(const Op& op) {
    if (std::holds_alternative<ops::Relu>(op)) return std::tuple{algorithm::eltwise_relu, 0.f, 0.f};
    if (auto* l = std::get_if<ops::LeakyRelu>(&op)) return std::tuple{algorithm::eltwise_relu, l->alpha, 0.f};
    if (std::holds_alternative<ops::Sigmoid>(op)) return std::tuple{algorithm::eltwise_logistic, 0.f, 0.f};
    if (std::holds_alternative<ops::Tanh>(op)) return std::tuple{algorithm::eltwise_tanh, 0.f, 0.f};
    if (std::holds_alternative<ops::Exp>(op)) return std::tuple{algorithm::eltwise_exp, 0.f, 0.f};
    if (std::holds_alternative<ops::Sqrt>(op)) return std::tuple{algorithm::eltwise_sqrt, 0.f, 0.f};
    if (std::holds_alternative<ops::Neg>(op)) return std::tuple{algorithm::eltwise_linear, -1.f, 0.f};
    // min > max: ONNX (and the reference) give max everywhere; oneDNN's clip does not
    if (auto* c = std::get_if<ops::Clip>(&op); c && c->min <= c->max)
      return std::tuple{algorithm::eltwise_clip, float(std::max(c->min, -3.4e38)), float(std::min(c->max, 3.4e38))};
    return std::nullopt;
  }

  static bool fusable_activation(const Op& op) {
    return std::holds_alternative<ops::Relu>(op) || std::holds_alternative<ops::Clip>(op) || std::holds_alternative<ops::Sigmoid>(op) ||
           std::holds_alternative<ops::Tanh>(op) || std::holds_alternative<ops::LeakyRelu>(op);
  }

  /// Appends the activations (and, when allowed, one residual add) that follow tensor t as
  /// post-ops; returns the last tensor absorbed and the residual's tensor id (or -1).
  /// A float scalar constant operand of a binary node (the other being t), or nullopt.
  std::optional<float> scalar_operand(const Node& node, TensorId t) const {
    if (node.inputs.size() != 2) return std::nullopt;
    TensorId o = node.inputs[0] == t ? node.inputs[1] : node.inputs[0];
    if (o == t || !g_.tensor(o).is_constant() || !is_float(g_.type(o).dtype) || numel(g_.type(o).shape) != 1) return std::nullopt;
    if (g_.type(node.outputs[0]).shape != g_.type(t).shape) return std::nullopt;
    return std::get<Tensor<float>>(*g_.tensor(o).value)[0];
  }
  /// GELU as PyTorch exports it: x * (erf(x / sqrt 2) + 1) * 0.5. Returns its nodes and output.
  std::optional<std::pair<std::vector<NodeId>, TensorId>> match_gelu(TensorId x) const {
    const auto& cs = consumers_[size_t(x)];
    if (cs.size() != 2 || is_output_.count(x)) return std::nullopt;
    for (NodeId d : cs) {
      const Node& dn = g_.node(d);
      auto c = scalar_operand(dn, x);
      if (!c || dn.inputs[0] != x) continue;
      bool div = std::holds_alternative<ops::Div>(dn.op) && std::abs(*c - 1.41421356f) < 1e-6f;
      bool mul = std::holds_alternative<ops::Mul>(dn.op) && std::abs(*c - 0.70710678f) < 1e-6f;
      if (!div && !mul) continue;
      NodeId e = sole_consumer(dn.outputs[0]);
      if (e < 0 || !std::holds_alternative<ops::Erf>(g_.node(e).op)) continue;
      NodeId a = sole_consumer(g_.node(e).outputs[0]);
      if (a < 0 || !std::holds_alternative<ops::Add>(g_.node(a).op)) continue;
      auto one = scalar_operand(g_.node(a), g_.node(e).outputs[0]);
      if (!one || *one != 1.f) continue;
      NodeId m1 = sole_consumer(g_.node(a).outputs[0]);
      NodeId other = cs[0] == d ? cs[1] : cs[0];
      if (m1 != other || !std::holds_alternative<ops::Mul>(g_.node(m1).op)) continue;
      NodeId m2 = sole_consumer(g_.node(m1).outputs[0]);
      if (m2 < 0 || !std::holds_alternative<ops::Mul>(g_.node(m2).op)) continue;
      auto half = scalar_operand(g_.node(m2), g_.node(m1).outputs[0]);
      if (!half || *half != 0.5f) continue;
      return std::pair{std::vector<NodeId>{d, e, a, m1, m2}, g_.node(m2).outputs[0]};
    }
    return std::nullopt;
  }

  /// The post-ops of one primitive, kept to what oneDNN 2.6 computes exactly: scalings and
  /// shifts that follow each other compose into one linear post-op, and no eltwise kind
  /// appears twice. (Its jit kernels -- brgconv, binary, matmul -- keep one set of parameters
  /// per eltwise kind, so a second Clip, linear or relu in one chain computed with the
  /// first one's: `x * 0.5 * 0.689` came out as `x * 0.5 * 0.5`.) A chain stops where that
  /// would happen; the rest runs as the next primitives, and the plan says why.
  struct PostOpChain {
    struct Entry {
      bool sum = false;
      algorithm alg = algorithm::eltwise_linear;
      float alpha = 0, beta = 0;
    };
    std::vector<Entry> entries;
    bool has_sum() const {
      return std::any_of(entries.begin(), entries.end(), [](const Entry& e) { return e.sum; });
    }
    /// Whether an eltwise of this kind can be appended (or, for a linear right after a
    /// linear, composed).
    bool accepts(algorithm alg) const {
      if (alg == algorithm::eltwise_linear && !entries.empty() && !entries.back().sum && entries.back().alg == alg) return true;
      return std::none_of(entries.begin(), entries.end(), [&](const Entry& e) { return !e.sum && e.alg == alg; });
    }
    void eltwise(algorithm alg, float a, float b) {
      if (alg == algorithm::eltwise_linear && !entries.empty() && !entries.back().sum && entries.back().alg == alg) {
        Entry& l = entries.back();  // a2 (a1 x + b1) + b2
        l.beta = a * l.beta + b;
        l.alpha = a * l.alpha;
        return;
      }
      entries.push_back({false, alg, a, b});
    }
    void sum() { entries.push_back({true}); }
    post_ops build() const {
      post_ops po;
      for (const Entry& e : entries) {
        if (e.sum) po.append_sum(1.f);
        else po.append_eltwise(1.f, e.alg, e.alpha, e.beta);
      }
      return po;
    }
  };

  static std::string split_note(const Op& op) {
    return cat(" (", op_name(op), " not fused: oneDNN 2.6 keeps one set of parameters per post-op kind in a primitive)");
  }

  std::pair<TensorId, TensorId> absorb_post_ops(TensorId t, PostOpChain& po, std::string& text, bool allow_sum) {
    TensorId residual = -1;
    while (true) {
      if (auto gelu = match_gelu(t)) {
        if (!po.accepts(algorithm::eltwise_gelu_erf)) {
          text += " (GELU not fused: a second GELU post-op)";
          break;
        }
        po.eltwise(algorithm::eltwise_gelu_erf, 0.f, 0.f);
        text += " + GELU";
        for (NodeId q : gelu->first) absorbed_.insert(q);
        t = gelu->second;
        continue;
      }
      NodeId c = sole_consumer(t);
      if (c < 0) break;
      if (auto k = scalar_operand(g_.node(c), t)) {  // scaling and shifting by constants
        const Op& op = g_.node(c).op;
        bool lhs = g_.node(c).inputs[0] == t;
        std::optional<std::pair<float, float>> lin;
        if (std::holds_alternative<ops::Mul>(op)) lin = std::pair{*k, 0.f};
        else if (std::holds_alternative<ops::Div>(op) && lhs) lin = std::pair{1.f / *k, 0.f};
        else if (std::holds_alternative<ops::Add>(op)) lin = std::pair{1.f, *k};
        else if (std::holds_alternative<ops::Sub>(op)) lin = lhs ? std::pair{1.f, -*k} : std::pair{-1.f, *k};
        if (lin) {
          if (!po.accepts(algorithm::eltwise_linear)) {
            text += split_note(op);
            break;
          }
          po.eltwise(algorithm::eltwise_linear, lin->first, lin->second);
          text += cat(" + ", op_name(op), " by a constant");
          absorbed_.insert(c);
          t = g_.node(c).outputs[0];
          continue;
        }
      }
      const Node& node = g_.node(c);
      if (!is_float(g_.type(node.outputs[0]).dtype) || node.outputs.size() != 1) break;
      if (auto e = eltwise_of(node.op); e && fusable_activation(node.op)) {
        auto [alg, a, b] = *e;
        if (!po.accepts(alg)) {
          text += split_note(node.op);
          break;
        }
        po.eltwise(alg, a, b);
        text += cat(" + ", op_name(node.op));
        absorbed_.insert(c);
        t = node.outputs[0];
        continue;
      }
      if (allow_sum && residual < 0 && std::holds_alternative<ops::Add>(node.op) && g_.type(node.inputs[0]) == g_.type(node.inputs[1])) {
        TensorId other = node.inputs[0] == t ? node.inputs[1] : node.inputs[0];
        if (other == t) break;
        // The residual must already exist (computed before this node).
        NodeId p = g_.tensor(other).producer;
        if (p >= 0 && !lowered_.count(p)) break;
        po.sum();
        text += " + residual add";
        absorbed_.insert(c);
        residual = other;
        t = node.outputs[0];
        continue;
      }
      break;
    }
    return {t, residual};
  }

  /// Fills the destination with the residual before a primitive with a sum post-op: in place
  /// when the residual dies here in the right layout, else a reorder (copy).
  void prepare_residual(TensorId dst_t, TensorId residual, const md_t& dst_md, const std::string& who) {
    int r = int(residual);
    // In place only when the buffer is the residual's alone: not a graph input's (the
    // caller's memory) and not shared with a tensor it is a view of, which may be read later.
    const int q = slots_[size_t(r)].request;
    bool dies = consumers_[size_t(residual)].size() == 1 && !is_output_.count(residual) && !g_.tensor(residual).is_constant() && q >= 0 &&
                !requests_[size_t(q)].pinned && !slots_[size_t(r)].owned;
    for (TensorId t = 0; t < g_.num_tensors() && dies; ++t) dies = t == residual || slots_[size_t(t)].request != q;
    if (dies && slots_[size_t(r)].md == dst_md) {
      alias(int(dst_t), r, dst_md);  // in place: the conv accumulates into the residual's buffer
      return;
    }
    define(dst_t, dst_md);
    Step& st = add_step(cat("  copy residual into the output of ", who), {r}, {int(dst_t)});
    st.prim = dnnl_call(who, [&] { return primitive(reorder(reorder::primitive_desc(eng_, slots_[size_t(r)].md, eng_, dst_md))); });
    st.args = {{DNNL_ARG_FROM, r}, {DNNL_ARG_TO, int(dst_t)}};
  }

  // ------------------------------------------------------------ lowering
  void lower(NodeId n) {
    const Node& node = g_.node(n);
    const std::string who = cat(op_name(node.op), " '", node.name, "'");
    bool all_float = true;
    for (TensorId t : node.inputs) all_float = all_float && slots_[size_t(t)].is_float();
    for (TensorId t : node.outputs) all_float = all_float && slots_[size_t(t)].is_float();
    bool done = false;
    std::string why;
    if (all_float) {
      try {
        done = std::visit([&](const auto& op) { return lower_op(n, op, who); }, node.op);
      } catch (const Unsupported& e) {
        done = false;  // a configuration oneDNN does not implement: the reference kernel does it
        why = e.what();
      }
    }
    if (!done) fallback(n, who, why);
    lowered_.insert(n);
    for (NodeId a : absorbed_) lowered_.insert(a);
  }

  template <class O>
  bool lower_op(NodeId, const O&, const std::string&) {
    return false;
  }

  bool lower_op(NodeId n, const ops::Conv& c, const std::string& who) {
    const Node& node = g_.node(n);
    const TensorId x = node.inputs[0], w = node.inputs[1];
    const Shape &xs = g_.type(x).shape, &ws = g_.type(w).shape;
    const size_t k = xs.size() - 2;
    memory::dims strides(c.strides.begin(), c.strides.end()), dil, pl(c.pads.begin(), c.pads.begin() + long(k)),
        pr(c.pads.begin() + long(k), c.pads.end());
    for (int64_t d : c.dilations) dil.push_back(d - 1);
    Shape wdims = ws;
    if (c.group > 1) {
      wdims[0] = ws[0] / c.group;
      wdims.insert(wdims.begin(), c.group);
    }
    PostOpChain chain;
    std::string text;
    // oneDNN 2.6's brgconv loses the bias in output rows that see only padding when a sum
    // post-op is fused (and crashes with an eltwise before the sum): such convs add their
    // residual in a separate step.
    const bool pad_rows = sees_only_padding(c, xs);
    auto [out, residual] = absorb_post_ops(node.outputs[0], chain, text, !pad_rows);
    if (pad_rows && text.find("residual") == std::string::npos) {
      NodeId a = sole_consumer(out);
      if (a >= 0 && std::holds_alternative<ops::Add>(g_.node(a).op)) text += " (residual add not fused: output rows that see only padding)";
    }
    const post_ops po = chain.build();
    primitive_attr attr;
    attr.set_post_ops(po);
    const Shape& ys = g_.type(node.outputs[0]).shape;
    const bool bias = node.inputs.size() == 3;
    auto make_with = [&](algorithm alg, const md_t& src_md, const md_t& dst_md) {
      auto d = bias ? convolution_forward::desc(prop_kind::forward_inference, alg, src_md, any_md(wdims), plain_md({ws[0]}), dst_md, strides,
                                                dil, pl, pr)
                    : convolution_forward::desc(prop_kind::forward_inference, alg, src_md, any_md(wdims), dst_md, strides, dil, pl, pr);
      return convolution_forward::primitive_desc(d, attr, eng_);
    };
    auto make = [&](algorithm alg) { return make_with(alg, any_md(xs), any_md(ys)); };
    auto pd = dnnl_call(who, [&] { return make(algorithm::convolution_direct); });
    // The candidates: oneDNN's direct conv on its blocked layouts or on plain ones, oneDNN's
    // Winograd (AVX-512 only in 2.x) and pet's Winograd F(4x4,3x3). A forced algorithm or
    // layout (CompileOptions) is taken where it applies; "auto" times the candidates (with the
    // reorders each needs at a layout boundary: a plain input from a graph input or a pet
    // copy, a plain consumer) and keeps the fastest, remembered per configuration.
    const std::string &want_alg = opt_.conv_algorithm, &want_layout = opt_.conv_layout;
    const bool plain_in = is_plain(int(x)), plain_out = wants_plain(out);
    auto boundary = [&](const md_t& src_md, const md_t& dst_md) {
      double t = 0;
      if (plain_in && src_md != plain_md(xs)) t += time_reorder(plain_md(xs), src_md);
      if (plain_out && dst_md != plain_md(ys)) t += time_reorder(dst_md, plain_md(ys));
      return t;
    };
    const bool measure = opt_.choose_algorithms && want_alg == "auto";
    std::vector<std::string> names;  // candidates in order of preference when nothing is timed
    if (want_alg == "winograd") names.push_back("pet-winograd");
    if (want_alg == "onednn-winograd") names.push_back("onednn-winograd");
    if (want_layout == "plain") names.push_back("plain");
    names.push_back("blocked");
    if (measure) {
      if (want_layout == "auto" && plain_in) names.push_back("plain");
      if (want_layout == "auto") names.push_back("onednn-winograd"), names.push_back("pet-winograd");
    }
    std::optional<convolution_forward::primitive_desc> plain_pd, owino_pd;
    std::shared_ptr<cpu::Winograd4x3> wg_cand;
    md_t xs8, ys8;  // nChw8c / nCdhw8c, the layouts pet's transforms read and write
    const bool three_by_three = (k == 2 || (k == 3 && ws[2] <= 3)) && ws[k] == 3 && ws[k + 1] == 3;
    const bool unit = std::all_of(c.strides.begin(), c.strides.end(), [](int64_t v) { return v == 1; }) &&
                      std::all_of(c.dilations.begin(), c.dilations.end(), [](int64_t v) { return v == 1; });
    std::vector<cpu::Epilogue> epi;
    // Builds candidate `n` if it applies here; false if not.
    auto available = [&](const std::string& n) -> bool {
      if (n == "blocked") return true;
      if (n == "plain") {
        if (pd.src_desc() == plain_md(xs) && pd.dst_desc() == plain_md(ys)) return false;  // blocked is plain already
        try {
          plain_pd = make_with(algorithm::convolution_direct, plain_md(xs), plain_md(ys));
          return true;
        } catch (const dnnl::error&) {
          return false;  // no plain-layout implementation
        }
      }
      if (n == "onednn-winograd") {
        if (k != 2 || c.group != 1 || !three_by_three || !unit) return false;
        try {
          owino_pd = make(algorithm::convolution_winograd);
          return true;
        } catch (const dnnl::error&) {
          return false;  // no Winograd implementation for this CPU / shape
        }
      }
      if (n == "pet-winograd") {
        if (!three_by_three || c.group != 1 || !unit || !cpu::Winograd4x3::applies(ws[1], ws[0]) || !g_.tensor(w).is_constant() ||
            (bias && !g_.tensor(node.inputs[2]).is_constant()) || !cpu::epilogue_of(po, epi))
          return false;
        const auto tag8 = k == 2 ? memory::format_tag::nChw8c : memory::format_tag::nCdhw8c;
        xs8 = md_t(dims_of(xs), dt::f32, tag8);
        ys8 = md_t(dims_of(ys), dt::f32, tag8);
        cpu::WinogradShape sh;
        sh.n = xs[0], sh.c = xs[1], sh.k = ws[0];
        sh.h = xs[k], sh.w = xs[k + 1];
        sh.pad_top = c.pads[k - 2], sh.pad_left = c.pads[k - 1], sh.pad_bottom = c.pads[2 * k - 2], sh.pad_right = c.pads[2 * k - 1];
        if (k == 3) sh.d = xs[2], sh.kd = ws[2], sh.pad_front = c.pads[0], sh.pad_back = c.pads[3];
        const float* bptr = bias ? std::get<Tensor<float>>(*g_.tensor(node.inputs[2]).value).data() : nullptr;
        wg_cand = std::make_shared<cpu::Winograd4x3>(eng_, sh, std::get<Tensor<float>>(*g_.tensor(w).value).data(), bptr, epi);
        return true;
      }
      return false;
    };
    std::vector<std::string> cands;
    for (const auto& n : names)
      if (std::find(cands.begin(), cands.end(), n) == cands.end() && available(n)) cands.push_back(n);
    const std::string cache_key = cat("cpu@", cpu_backend_version(), "|", num_threads(), "|", op_signature(node.op), "|", xs, wdims,
                                      ys, bias ? "b" : "", "|", text, "|", plain_in ? "plain-in" : "", plain_out ? "plain-out" : "");
    std::string decision = cands.front();
    std::optional<std::string> chosen;
    if (measure && cands.size() > 1) {
      chosen = AlgorithmCache::instance().get(opt_.algorithm_cache, cache_key);
      if (chosen && std::find(cands.begin(), cands.end(), *chosen) != cands.end()) {
        decision = *chosen;
      } else {
        chosen.reset();
        double best = 1e30;
        for (const auto& n : cands) {
          double t = n == "pet-winograd" ? time_winograd(*wg_cand, xs8, ys8) + boundary(xs8, ys8)
                     : n == "plain"      ? time_pd(*plain_pd)
                     : n == "onednn-winograd" ? time_pd(*owino_pd) + boundary(owino_pd->src_desc(), owino_pd->dst_desc())
                                              : time_pd(pd) + boundary(pd.src_desc(), pd.dst_desc());
          if (t < best) best = t, decision = n;
        }
        AlgorithmCache::instance().put(opt_.algorithm_cache, cache_key, decision);
      }
    }
    std::string alg = "direct";
    std::shared_ptr<cpu::Winograd4x3> wg;
    if (decision == "plain") pd = *plain_pd;
    if (decision == "onednn-winograd") pd = *owino_pd, alg = "winograd";
    if (decision == "pet-winograd") {
      wg = wg_cand;
      alg = cat("pet winograd F(4x4,3x3)", k == 3 ? cat(" x ", ws[2], " depth taps") : "", ", ", wg->chunks(), "x", wg->chunk_tiles(), " tiles");
    }
    if (want_alg != "auto" && want_alg != "direct" && decision != "pet-winograd" && decision != "onednn-winograd")
      alg += cat(" (", want_alg, " does not apply)");
    if (chosen) alg += " (cached choice)";
    if (wg) {
      int xs_slot = as_layout(int(x), xs8, who);
      if (residual >= 0) prepare_residual(out, residual, ys8, who);
      else define(out, ys8);
      std::vector<int> reads{xs_slot};
      if (residual >= 0) reads.push_back(int(residual));
      Step& st = add_step(cat(who, ": ", alg, " (", layout_name(xs8), ")", text), reads, {int(out)});
      st.fn = [this, wg, xs_slot, o = int(out)] { wg->run(strm_, ptr(xs_slot), ptr(o)); };
      return true;
    }
    int xs_slot = as_layout(int(x), pd.src_desc(), who);
    int w_slot = int(w);
    if (c.group > 1) {
      // view the [F, C/G, K..] weight as [G, F/G, C/G, K..] first
      Slot v = slots_[size_t(w)];
      v.md = plain_md(wdims);
      v.type.shape = wdims;
      v.plain = -1;
      slots_.push_back(v);
      w_slot = int(slots_.size()) - 1;
    }
    w_slot = as_layout(w_slot, pd.weights_desc(), who);
    if (residual >= 0) prepare_residual(out, residual, pd.dst_desc(), who);
    else define(out, pd.dst_desc());
    std::vector<int> reads{xs_slot, w_slot};
    Step& st = add_step(cat(who, ": oneDNN conv ", pd.impl_info_str(), " (", alg, ", ", layout_name(pd.src_desc()), ")", text), reads, {int(out)});
    st.prim = primitive(convolution_forward(pd));
    st.args = {{DNNL_ARG_SRC, xs_slot}, {DNNL_ARG_WEIGHTS, w_slot}, {DNNL_ARG_DST, int(out)}};
    if (bias) {
      int b = as_layout(int(node.inputs[2]), plain_md({ws[0]}), who);
      st.args.push_back({DNNL_ARG_BIAS, b});
      st.reads.push_back(b);
    }
    if (residual >= 0) st.reads.push_back(int(residual));
    return true;
  }

  /// Whether some output position of the conv reads only padding along a spatial dim (its
  /// window lies wholly in the pads).
  static bool sees_only_padding(const ops::Conv& c, const Shape& xs) {
    const size_t k = xs.size() - 2;
    for (size_t i = 0; i < k; ++i) {
      const int64_t n = xs[2 + i], s = c.strides[i], d = c.dilations[i], pb = c.pads[i], kk = c.kernel_shape[i];
      const int64_t out = (n + pb + c.pads[i + k] - ((kk - 1) * d + 1)) / s + 1;
      for (int64_t o = 0; o < out; ++o) {
        bool any = false;
        for (int64_t r = 0; r < kk && !any; ++r) {
          const int64_t p = o * s - pb + r * d;
          any = p >= 0 && p < n;
        }
        if (!any) return true;
      }
    }
    return false;
  }

  /// Whether t (in a blocked layout) would need a reorder: a graph output, or read by an op
  /// that works on plain layouts only (pet copies, matmuls, reshapes).
  bool wants_plain(TensorId t) const {
    if (is_output_.count(t)) return true;
    for (NodeId c : consumers_[size_t(t)]) {
      const Op& op = g_.node(c).op;
      if (std::holds_alternative<ops::RT>(op) || std::holds_alternative<ops::Transpose>(op) || std::holds_alternative<ops::Slice>(op) ||
          std::holds_alternative<ops::Split>(op) || std::holds_alternative<ops::Pad>(op) || std::holds_alternative<ops::Patch>(op) ||
          std::holds_alternative<ops::MatMul>(op) || std::holds_alternative<ops::Gemm>(op) || std::holds_alternative<ops::Reshape>(op) ||
          std::holds_alternative<ops::Flatten>(op))
        return true;
    }
    return false;
  }
  /// Fastest of five runs of f (and the stream) after one warm-up, in seconds: the
  /// compile-time algorithm choices. The minimum, because other tenants of a shared machine
  /// only ever add time (medians of five runs picked the slower layout here).
  template <class F>
  double best_seconds(F&& f) {
    double best = 1e30;
    for (int i = 0; i < 6; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      f();
      strm_.wait();
      if (i) best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  }
  /// Best time of a reorder between two layouts (scratch buffers).
  double time_reorder(const md_t& from, const md_t& to) {
    auto a = aligned_floats(from.get_size() / sizeof(float) + 1), b = aligned_floats(to.get_size() / sizeof(float) + 1);
    std::memset(a.get(), 0, from.get_size());
    memory ma(from, eng_, a.get()), mb(to, eng_, b.get());
    reorder r(ma, mb);
    return best_seconds([&] { r.execute(strm_, ma, mb); });
  }

  /// Best time of pet's Winograd conv on scratch buffers with the direct conv's layouts.
  double time_winograd(cpu::Winograd4x3& wg, const md_t& src_md, const md_t& dst_md) {
    auto src = aligned_floats(src_md.get_size() / sizeof(float) + 1), dst = aligned_floats(dst_md.get_size() / sizeof(float) + 1);
    std::memset(src.get(), 0, src_md.get_size());
    std::memset(dst.get(), 0, dst_md.get_size());
    return best_seconds([&] { wg.run(strm_, src.get(), dst.get()); });
  }

  /// Best time of a primitive on scratch buffers (algorithm choice at compile time).
  double time_pd(const convolution_forward::primitive_desc& pd) {
    std::vector<std::shared_ptr<float[]>> keep;
    auto mem = [&](const md_t& md) {
      keep.push_back(aligned_floats(md.get_size() / sizeof(float) + 1));
      std::memset(keep.back().get(), 0, md.get_size());
      return memory(md, eng_, keep.back().get());
    };
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(pd.src_desc())}, {DNNL_ARG_WEIGHTS, mem(pd.weights_desc())},
                                         {DNNL_ARG_DST, mem(pd.dst_desc())}};
    if (pd.bias_desc().get_size()) args.emplace(DNNL_ARG_BIAS, mem(pd.bias_desc()));
    convolution_forward prim(pd);
    return best_seconds([&] { prim.execute(strm_, args); });
  }

  /// Matrix products (MatMul, Gemm) as oneDNN matmul on plain layouts; constant right
  /// operands are reordered once into the layout the primitive prefers.
  bool lower_matmul(NodeId n, TensorId a, TensorId b, md_t amd, md_t bmd, const Shape& ys, const std::string& who, float alpha,
                    std::optional<TensorId> bias_t, float beta) {
    const Node& node = g_.node(n);
    PostOpChain chain;
    std::string text;
    // A following Add of a constant vector over the last dim becomes the matmul's bias.
    TensorId out = node.outputs[0];
    std::optional<int> bias_slot;
    md_t bias_md;
    const size_t r = ys.size();
    auto bias_dims = [&](const Shape& s) -> std::optional<memory::dims> {
      if (s.size() > r || !broadcasts_to(s, ys)) return std::nullopt;
      memory::dims d(r, 1);
      for (size_t i = 0; i < s.size(); ++i) d[r - s.size() + i] = s[i];
      for (size_t i = 0; i + 1 < r; ++i)
        if (d[i] != 1) return std::nullopt;
      return d;
    };
    if (bias_t) {
      // oneDNN computes scale * (A B + bias): a constant C becomes bias = beta * C / alpha.
      auto d = bias_dims(g_.type(*bias_t).shape);
      if (!d || (!g_.tensor(*bias_t).is_constant() && (alpha != 1.f || beta != 1.f))) return false;
      bias_md = md_t(*d, dt::f32, memory::format_tag::any);
      bias_slot = int(*bias_t);
      if (alpha != 1.f || beta != 1.f) {
        Slot sc = slots_[size_t(*bias_t)];
        const int64_t cnt = numel(sc.type.shape);
        sc.owned = aligned_floats(size_t(cnt));
        for (int64_t i = 0; i < cnt; ++i) sc.owned[size_t(i)] = ptr(int(*bias_t))[i] * beta / alpha;
        sc.plain = -1;
        slots_.push_back(sc);
        bias_slot = int(slots_.size()) - 1;
      }
    } else if (NodeId c = sole_consumer(out); c >= 0 && alpha == 1.f && std::holds_alternative<ops::Add>(g_.node(c).op)) {
      // (with alpha != 1 oneDNN would scale the bias too: alpha (A B + bias))
      const Node& add = g_.node(c);
      TensorId other = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
      if (g_.tensor(other).is_constant() && g_.type(add.outputs[0]).shape == g_.type(out).shape)
        if (auto d = bias_dims(g_.type(other).shape)) {
          bias_md = md_t(*d, dt::f32, memory::format_tag::any);
          bias_slot = int(other);
          absorbed_.insert(c);
          text += " + bias";
          out = add.outputs[0];
        }
    }
    auto [last, residual] = absorb_post_ops(out, chain, text, true);
    out = last;
    Shape bias_shape;
    if (bias_slot) {
      memory::dims bd = bias_md.dims();
      bias_shape.assign(bd.begin(), bd.end());
    }
    primitive_attr attr;
    attr.set_post_ops(chain.build());
    if (alpha != 1.f) attr.set_output_scales(0, {alpha});
    const bool bconst = g_.tensor(b).is_constant();
    // Constant right operands are stored once in a row-major layout whose rows are padded by
    // 64 bytes: with rows a multiple of 4 KiB apart (N = 3072 floats, BERT's FFN) the jit gemm
    // ran at half speed here (measured: 75 vs 120-150 GFLOP/s for 128x768x3072).
    md_t wmd = bmd;
    if (bconst) {
      memory::dims d = bmd.dims(), st(d.size());
      const int64_t ld = d.back() + (d.back() >= 64 ? 16 : 0);
      int64_t acc = ld * d[d.size() - 2];
      st[d.size() - 1] = 1;
      st[d.size() - 2] = ld;
      for (int i = int(d.size()) - 3; i >= 0; --i) st[size_t(i)] = acc, acc *= d[size_t(i)];
      wmd = md_t(d, dt::f32, st);
    }
    auto pd = dnnl_call(who, [&] {
      auto d = bias_slot ? matmul::desc(amd, wmd, plain_md(bias_shape), plain_md(ys)) : matmul::desc(amd, wmd, plain_md(ys));
      return matmul::primitive_desc(d, attr, eng_);
    });
    int as = plain_slot(int(a));
    int bs = plain_slot(int(b));
    // view the plain operands with the (possibly transposed or rank-padded) descriptors
    auto view = [&](int s, const md_t& md) {
      Slot v = slots_[size_t(s)];
      v.md = md;
      v.plain = -1;
      slots_.push_back(v);
      return int(slots_.size()) - 1;
    };
    int av = view(as, amd);
    int bv = view(bs, bmd);
    if (bconst) bv = as_layout(bv, pd.weights_desc(), who);
    if (residual >= 0) prepare_residual(out, residual, plain_md(g_.type(out).shape), who);
    else define(out, plain_md(g_.type(out).shape));
    Step& st = add_step(cat(who, ": oneDNN matmul ", pd.impl_info_str(), text), {av, bv}, {int(out)});
    if (residual >= 0) st.reads.push_back(int(residual));
    st.prim = primitive(matmul(pd));
    // the output's md for the primitive has the matmul's rank
    int ov = int(out);
    if (g_.type(out).shape != ys) ov = reshaped(int(out), ys);
    st.args = {{DNNL_ARG_SRC, av}, {DNNL_ARG_WEIGHTS, bv}, {DNNL_ARG_DST, ov}};
    if (bias_slot) {
      int bb = view(*bias_slot, plain_md(bias_shape));
      st.args.push_back({DNNL_ARG_BIAS, bb});
      st.reads.push_back(bb);
    }
    return true;
  }

  static Shape with_rank(const Shape& s, size_t r) {
    Shape o(r - s.size(), 1);
    o.insert(o.end(), s.begin(), s.end());
    return o;
  }

  bool lower_op(NodeId n, const ops::MatMul&, const std::string& who) {
    const Node& node = g_.node(n);
    Shape a = g_.type(node.inputs[0]).shape, b = g_.type(node.inputs[1]).shape;
    if (a.size() == 1) a = {1, a[0]};
    if (b.size() == 1) b = {b[0], 1};
    if (b.size() == 2 && a.size() > 2) {
      // A [.., M, K] x B [K, N]: A's leading dims are rows too (one GEMM, not a batch of GEMVs).
      int64_t rows = numel(a) / a.back();
      return lower_matmul(n, node.inputs[0], node.inputs[1], plain_md({rows, a.back()}), plain_md(b), {rows, b[1]},
                          cat(who, " ", g_.type(node.inputs[0]).shape, "x", b), 1.f, std::nullopt, 1.f);
    }
    const size_t r = std::max(a.size(), b.size());
    a = with_rank(a, r);
    b = with_rank(b, r);
    Shape ys(r);
    for (size_t i = 0; i + 2 < r; ++i) ys[i] = std::max(a[i], b[i]);
    ys[r - 2] = a[r - 2];
    ys[r - 1] = b[r - 1];
    if (r > 12) return false;
    return lower_matmul(n, node.inputs[0], node.inputs[1], plain_md(a), plain_md(b), ys, cat(who, " ", a, "x", b), 1.f, std::nullopt, 1.f);
  }

  bool lower_op(NodeId n, const ops::Gemm& gm, const std::string& who) {
    const Node& node = g_.node(n);
    if (gm.alpha == 0.f) return false;  // the bias is folded as beta * C / alpha
    const Shape &a = g_.type(node.inputs[0]).shape, &b = g_.type(node.inputs[1]).shape;
    const int64_t m = gm.trans_a ? a[1] : a[0], kk = gm.trans_a ? a[0] : a[1], nn = gm.trans_b ? b[0] : b[1];
    md_t amd = gm.trans_a ? md_t({m, kk}, dt::f32, memory::dims{1, m}) : plain_md({m, kk});
    md_t bmd = gm.trans_b ? md_t({kk, nn}, dt::f32, memory::dims{1, kk}) : plain_md({kk, nn});
    std::optional<TensorId> c;
    if (node.inputs.size() == 3) c = node.inputs[2];
    return lower_matmul(n, node.inputs[0], node.inputs[1], amd, bmd, {m, nn}, who, gm.alpha, c, gm.beta);
  }

  /// Pools: oneDNN pooling on the input's own layout.
  template <class W>
  bool lower_pool(NodeId n, const W& p, algorithm alg, const std::string& who) {
    const Node& node = g_.node(n);
    if (node.outputs.size() != 1) return false;
    const TensorId x = node.inputs[0];
    const Shape &xs = g_.type(x).shape, &ys = g_.type(node.outputs[0]).shape;
    const size_t k = xs.size() - 2;
    memory::dims strides(p.strides.begin(), p.strides.end()), kernel(p.kernel_shape.begin(), p.kernel_shape.end()), dil,
        pl(p.pads.begin(), p.pads.begin() + long(k)), pr(k);
    for (size_t i = 0; i < k; ++i) {
      dil.push_back(p.dilations[i] - 1);
      // the right padding that yields ONNX's output size (ceil_mode extends it)
      pr[i] = (ys[2 + i] - 1) * p.strides[i] + (p.kernel_shape[i] - 1) * p.dilations[i] + 1 - xs[2 + i] - p.pads[i];
      if (pr[i] < 0) pr[i] = 0;
      if (alg == algorithm::pooling_avg_include_padding && pr[i] != p.pads[i + k]) return false;
    }
    auto pd = dnnl_call(who, [&] {
      return pooling_v2_forward::primitive_desc(
          pooling_v2_forward::desc(prop_kind::forward_inference, alg, slots_[size_t(x)].md, any_md(ys), strides, kernel, dil, pl, pr), eng_);
    });
    define(node.outputs[0], pd.dst_desc());
    Step& st = add_step(cat(who, ": oneDNN pooling ", pd.impl_info_str()), {int(x)}, {int(node.outputs[0])});
    st.prim = primitive(pooling_v2_forward(pd));
    st.args = {{DNNL_ARG_SRC, int(x)}, {DNNL_ARG_DST, int(node.outputs[0])}};
    return true;
  }
  bool lower_op(NodeId n, const ops::MaxPool& p, const std::string& who) { return lower_pool(n, p, algorithm::pooling_max, who); }
  bool lower_op(NodeId n, const ops::AveragePool& p, const std::string& who) {
    return lower_pool(n, p, p.count_include_pad ? algorithm::pooling_avg_include_padding : algorithm::pooling_avg_exclude_padding, who);
  }
  bool lower_op(NodeId n, const ops::GlobalAveragePool&, const std::string& who) {
    const Node& node = g_.node(n);
    const Shape& xs = g_.type(node.inputs[0]).shape;
    ops::AveragePool p;
    p.kernel_shape.assign(xs.begin() + 2, xs.end());
    p.strides.assign(xs.size() - 2, 1);
    p.dilations.assign(xs.size() - 2, 1);
    p.pads.assign(2 * (xs.size() - 2), 0);
    return lower_pool(n, p, algorithm::pooling_avg_exclude_padding, who);
  }

  /// Element-wise activations standalone (when nothing absorbed them), on any layout.
  bool lower_eltwise(NodeId n, const std::string& who) {
    const Node& node = g_.node(n);
    auto e = eltwise_of(node.op);
    if (!e) return false;
    auto [alg, a, b] = *e;
    const TensorId x = node.inputs[0];
    auto pd = dnnl_call(who, [&] {
      return eltwise_forward::primitive_desc(eltwise_forward::desc(prop_kind::forward_inference, alg, slots_[size_t(x)].md, a, b), eng_);
    });
    define(node.outputs[0], pd.dst_desc());
    Step& st = add_step(cat(who, ": oneDNN eltwise ", pd.impl_info_str()), {int(x)}, {int(node.outputs[0])});
    st.prim = primitive(eltwise_forward(pd));
    st.args = {{DNNL_ARG_SRC, int(x)}, {DNNL_ARG_DST, int(node.outputs[0])}};
    return true;
  }
  bool lower_op(NodeId n, const ops::Relu&, const std::string& who) { return lower_eltwise(n, who); }
  bool lower_op(NodeId n, const ops::LeakyRelu&, const std::string& who) { return lower_eltwise(n, who); }
  bool lower_op(NodeId n, const ops::Sigmoid&, const std::string& who) { return lower_eltwise(n, who); }
  bool lower_op(NodeId n, const ops::Tanh&, const std::string& who) { return lower_eltwise(n, who); }
  bool lower_op(NodeId n, const ops::Exp&, const std::string& who) { return lower_eltwise(n, who); }
  bool lower_op(NodeId n, const ops::Sqrt&, const std::string& who) { return lower_eltwise(n, who); }
  bool lower_op(NodeId n, const ops::Neg&, const std::string& who) { return lower_eltwise(n, who); }
  bool lower_op(NodeId n, const ops::Clip&, const std::string& who) { return lower_eltwise(n, who); }
  /// x ^ c for a scalar constant c: oneDNN's eltwise pow.
  bool lower_op(NodeId n, const ops::Pow&, const std::string& who) {
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

  /// Add/Sub/Mul/Div: same shapes keep the first operand's layout; broadcasts run plain with
  /// the broadcast operand second (operands of Add and Mul swap when needed).
  bool lower_binary(NodeId n, algorithm alg, bool commutative, const std::string& who) {
    const Node& node = g_.node(n);
    TensorId a = node.inputs[0], b = node.inputs[1];
    const Shape& ys = g_.type(node.outputs[0]).shape;
    if (g_.type(a).shape != ys) {
      if (!commutative || g_.type(b).shape != ys) return false;
      std::swap(a, b);
    }
    int as, bs;
    md_t amd, bmd;
    if (g_.type(b).shape == ys) {
      as = int(a);
      amd = slots_[size_t(a)].md;
      bs = as_layout(int(b), amd, who);
      bmd = amd;
    } else {
      as = plain_slot(int(a));
      amd = plain_md(ys);
      int p = plain_slot(int(b));
      Slot v = slots_[size_t(p)];
      v.md = plain_md(with_rank(g_.type(b).shape, ys.size()));
      v.plain = -1;
      slots_.push_back(v);
      bs = int(slots_.size()) - 1;
      bmd = slots_[size_t(bs)].md;
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
  bool lower_op(NodeId n, const ops::Add&, const std::string& who) { return lower_binary(n, algorithm::binary_add, true, who); }
  bool lower_op(NodeId n, const ops::Mul&, const std::string& who) { return lower_binary(n, algorithm::binary_mul, true, who); }
  bool lower_op(NodeId n, const ops::Sub&, const std::string& who) { return lower_binary(n, algorithm::binary_sub, false, who); }
  bool lower_op(NodeId n, const ops::Div&, const std::string& who) { return lower_binary(n, algorithm::binary_div, false, who); }

  bool lower_op(NodeId n, const ops::Softmax& s, const std::string& who) {
    const Node& node = g_.node(n);
    const Shape& xs = g_.type(node.inputs[0]).shape;
    Shape view = xs;
    int axis = int(s.axis);
    if (s.flatten_tail && axis != int(xs.size()) - 1) {
      int64_t outer = 1, row = 1;
      for (size_t i = 0; i < xs.size(); ++i) (int64_t(i) < s.axis ? outer : row) *= xs[i];
      view = {outer, row};
      axis = 1;
    }
    int x = plain_slot(int(node.inputs[0]));
    auto pd = dnnl_call(who, [&] {
      return softmax_forward::primitive_desc(softmax_forward::desc(prop_kind::forward_inference, plain_md(view), axis), eng_);
    });
    define(node.outputs[0], plain_md(xs));
    Step& st = add_step(cat(who, ": oneDNN softmax ", pd.impl_info_str()), {x}, {int(node.outputs[0])});
    st.prim = primitive(softmax_forward(pd));
    int xv = reshaped(x, view), ov = reshaped(int(node.outputs[0]), view);
    st.args = {{DNNL_ARG_SRC, xv}, {DNNL_ARG_DST, ov}};
    return true;
  }

  /// A plain view of slot s with another shape (same bytes).
  int reshaped(int s, const Shape& shape) {
    Slot v = slots_[size_t(s)];
    v.md = plain_md(shape);
    v.type.shape = shape;
    v.plain = -1;
    slots_.push_back(v);
    return int(slots_.size()) - 1;
  }

  /// Layer normalization over the last dim as PyTorch exports it before opset 17:
  /// m = mean(x); d = x - m; v = mean(d^2); y = d / sqrt(v + eps) * gamma + beta.
  bool lower_op(NodeId n, const ops::ReduceMean& r, const std::string& who) {
    if (lower_decomposed_layer_norm(n, r, who)) return true;
    return lower_reduce(n, r, algorithm::reduction_mean, who);
  }
  bool lower_decomposed_layer_norm(NodeId n, const ops::ReduceMean& r, const std::string& who) {
    const Node& node = g_.node(n);
    const TensorId x = node.inputs[0];
    const Shape& xs = g_.type(x).shape;
    if (xs.empty() || r.axes != std::vector<int64_t>{int64_t(xs.size()) - 1} || !r.keepdims) return false;
    const TensorId m = node.outputs[0];
    if (!single_use(m)) return false;
    NodeId sub = sole_consumer(m);
    const Node& sn = g_.node(sub);
    if (!std::holds_alternative<ops::Sub>(sn.op) || sn.inputs[0] != x || sn.inputs[1] != m) return false;
    const auto& xc = consumers_[size_t(x)];
    if (std::find(xc.begin(), xc.end(), sub) == xc.end()) return false;
    const TensorId d = sn.outputs[0];
    const auto& dc = consumers_[size_t(d)];
    if (dc.size() != 2 || is_output_.count(d)) return false;
    NodeId pw = -1, dv = -1;
    for (NodeId c : dc) {
      if (std::holds_alternative<ops::Pow>(g_.node(c).op)) pw = c;
      if (std::holds_alternative<ops::Div>(g_.node(c).op)) dv = c;
    }
    if (pw < 0 || dv < 0 || g_.node(dv).inputs[0] != d) return false;
    auto two = scalar_operand(g_.node(pw), d);
    if (!two || *two != 2.f) return false;
    NodeId m2 = sole_consumer(g_.node(pw).outputs[0]);
    if (m2 < 0) return false;
    const auto* r2 = std::get_if<ops::ReduceMean>(&g_.node(m2).op);
    if (!r2 || r2->axes != r.axes || !r2->keepdims) return false;
    NodeId add = sole_consumer(g_.node(m2).outputs[0]);
    if (add < 0 || !std::holds_alternative<ops::Add>(g_.node(add).op)) return false;
    auto eps = scalar_operand(g_.node(add), g_.node(m2).outputs[0]);
    if (!eps) return false;
    NodeId sq = sole_consumer(g_.node(add).outputs[0]);
    if (sq < 0 || !std::holds_alternative<ops::Sqrt>(g_.node(sq).op) || g_.node(dv).inputs[1] != g_.node(sq).outputs[0]) return false;
    if (!single_use(g_.node(sq).outputs[0])) return false;
    std::vector<NodeId> nodes{n, sub, pw, m2, add, sq, dv};
    TensorId y = g_.node(dv).outputs[0];
    std::optional<TensorId> gamma, beta;
    const int64_t len = xs.back();
    auto vector_const = [&](const Node& nd, TensorId t) -> std::optional<TensorId> {
      if (nd.inputs.size() != 2) return std::nullopt;
      TensorId o = nd.inputs[0] == t ? nd.inputs[1] : nd.inputs[0];
      if (!g_.tensor(o).is_constant() || g_.type(o).shape != Shape{len}) return std::nullopt;
      return o;
    };
    if (NodeId mul = sole_consumer(y); mul >= 0 && std::holds_alternative<ops::Mul>(g_.node(mul).op))
      if ((gamma = vector_const(g_.node(mul), y))) {
        nodes.push_back(mul);
        y = g_.node(mul).outputs[0];
        if (NodeId ad = sole_consumer(y); ad >= 0 && std::holds_alternative<ops::Add>(g_.node(ad).op))
          if ((beta = vector_const(g_.node(ad), y))) {
            nodes.push_back(ad);
            y = g_.node(ad).outputs[0];
          }
      }
    for (NodeId q : nodes) absorbed_.insert(q);
    lower_layer_norm(x, y, int64_t(xs.size()) - 1, *eps, gamma, beta, cat(who, " (decomposed layer norm)"));
    return true;
  }

  bool lower_op(NodeId n, const ops::LayerNormalization& ln, const std::string& who) {
    const Node& node = g_.node(n);
    if (node.outputs.size() != 1) return false;
    for (size_t i = 1; i < node.inputs.size(); ++i)
      if (!g_.tensor(node.inputs[i]).is_constant()) return false;
    lower_layer_norm(node.inputs[0], node.outputs[0], ln.axis, ln.epsilon, node.inputs[1],
                     node.inputs.size() == 3 ? std::optional<TensorId>(node.inputs[2]) : std::nullopt, who);
    return true;
  }

  void lower_layer_norm(TensorId xt, TensorId yt, int64_t axis, float epsilon, std::optional<TensorId> scale_t,
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
    auto pd = dnnl_call(who, [&] {
      return layer_normalization_forward::primitive_desc(
          layer_normalization_forward::desc(prop_kind::forward_inference, plain_md({rows, len}), epsilon,
                                            normalization_flags::use_scale | normalization_flags::use_shift),
          eng_);
    });
    define(yt, plain_md(g_.type(yt).shape));
    Step& st = add_step(cat(who, ": oneDNN layer norm ", pd.impl_info_str()), {x, sc, sh}, {int(yt)});
    st.prim = primitive(layer_normalization_forward(pd));
    st.args = {{DNNL_ARG_SRC, reshaped(x, {rows, len})}, {DNNL_ARG_DST, reshaped(int(yt), {rows, len})}, {DNNL_ARG_SCALE, sc},
               {DNNL_ARG_SHIFT, sh}};
  }

  template <class R>
  bool lower_reduce(NodeId n, const R& r, algorithm alg, const std::string& who) {
    const Node& node = g_.node(n);
    const Shape& xs = g_.type(node.inputs[0]).shape;
    if (r.axes.empty()) return lower_view(n);
    Shape keep = xs;
    for (int64_t a : r.axes) keep[size_t(a)] = 1;
    int x = plain_slot(int(node.inputs[0]));
    auto pd = dnnl_call(who, [&] {
      return reduction::primitive_desc(reduction::desc(alg, plain_md(xs), plain_md(keep), 0.f, 0.f), eng_);
    });
    define(node.outputs[0], plain_md(g_.type(node.outputs[0]).shape));
    Step& st = add_step(cat(who, ": oneDNN reduction ", pd.impl_info_str()), {x}, {int(node.outputs[0])});
    st.prim = primitive(reduction(pd));
    st.args = {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, reshaped(int(node.outputs[0]), keep)}};
    return true;
  }
  bool lower_op(NodeId n, const ops::ReduceSum& r, const std::string& who) { return lower_reduce(n, r, algorithm::reduction_sum, who); }
  bool lower_op(NodeId n, const ops::ReduceMax& r, const std::string& who) { return lower_reduce(n, r, algorithm::reduction_max, who); }

  bool lower_op(NodeId n, const ops::Concat& c, const std::string& who) {
    const Node& node = g_.node(n);
    // Inputs with one common layout are joined in it (e.g. blocked conv outputs), else plain.
    md_t first = slots_[size_t(node.inputs[0])].md;
    bool same = true;
    for (TensorId t : node.inputs) {
      const md_t& m = slots_[size_t(t)].md;
      same = same && m.data.format_kind == first.data.format_kind &&
             m.data.format_desc.blocking.inner_nblks == first.data.format_desc.blocking.inner_nblks &&
             std::equal(m.data.format_desc.blocking.inner_blks, m.data.format_desc.blocking.inner_blks + m.data.format_desc.blocking.inner_nblks,
                        first.data.format_desc.blocking.inner_blks);
    }
    std::vector<int> ins;
    std::vector<md_t> mds;
    for (TensorId t : node.inputs) {
      int s = same ? int(t) : plain_slot(int(t));
      ins.push_back(s);
      mds.push_back(slots_[size_t(s)].md);
    }
    auto pd = dnnl_call(who, [&] { return concat::primitive_desc(int(c.axis), mds, eng_); });
    define(node.outputs[0], pd.dst_desc());
    Step& st = add_step(cat(who, ": oneDNN concat ", pd.impl_info_str()), ins, {int(node.outputs[0])});
    st.prim = primitive(concat(pd));
    st.args = {{DNNL_ARG_DST, int(node.outputs[0])}};
    for (size_t i = 0; i < ins.size(); ++i) st.args.push_back({DNNL_ARG_MULTIPLE_SRC + int(i), ins[i]});
    return true;
  }

  /// Reshape-like ops: the plain input's buffer seen with the output's shape.
  bool lower_view(NodeId n) {
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
  bool lower_op(NodeId n, const ops::Reshape&, const std::string&) { return lower_view(n); }
  bool lower_op(NodeId n, const ops::Flatten&, const std::string&) { return lower_view(n); }
  bool lower_op(NodeId n, const ops::Squeeze&, const std::string&) { return lower_view(n); }
  bool lower_op(NodeId n, const ops::Unsqueeze&, const std::string&) { return lower_view(n); }
  bool lower_op(NodeId n, const ops::Identity&, const std::string&) { return lower_view(n); }
  bool lower_op(NodeId n, const ops::Dropout&, const std::string&) { return g_.node(n).outputs.size() == 1 && lower_view(n); }

  /// Strided copies (pet's kernels).
  void copy_step(NodeId n, int src, std::vector<int64_t> src_strides, int64_t src_offset, int dst, std::vector<int64_t> dst_strides,
                 int64_t dst_offset, Shape shape, const std::string& text, bool first_fill = false, float fill_value = 0) {
    auto& st = add_step(text, {src}, {dst});
    st.fn = [this, src, dst, src_strides, dst_strides, shape, src_offset, dst_offset, first_fill, fill_value] {
      float* d = ptr(dst);
      if (first_fill) cpu::fill(d, numel(slots_[size_t(dst)].type.shape), fill_value);
      cpu::box_copy(ptr(src) + src_offset, src_strides, d + dst_offset, dst_strides, shape);
    };
    (void)n;
  }
  bool lower_rt(NodeId n, const Shape& split, const std::vector<int64_t>& perm, const std::string& who) {
    const Node& node = g_.node(n);
    int x = plain_slot(int(node.inputs[0]));
    Shape tshape;
    std::vector<int64_t> st;
    cpu::rt_view(split, perm, tshape, st);
    define(node.outputs[0], plain_md(g_.type(node.outputs[0]).shape));
    copy_step(n, x, st, 0, int(node.outputs[0]), strides_of(tshape), 0, tshape, cat(who, ": pet strided copy"));
    return true;
  }
  bool lower_op(NodeId n, const ops::Transpose& t, const std::string& who) {
    return lower_rt(n, g_.type(g_.node(n).inputs[0]).shape, t.perm, who);
  }
  bool lower_op(NodeId n, const ops::RT& t, const std::string& who) { return lower_rt(n, t.split_shape, t.perm, who); }

  bool lower_op(NodeId n, const ops::Slice& s, const std::string& who) {
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
  bool lower_op(NodeId n, const ops::Split& s, const std::string& who) {
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
  bool lower_op(NodeId n, const ops::Pad& p, const std::string& who) {
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
  bool lower_op(NodeId n, const ops::Patch& p, const std::string& who) {
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
  bool lower_op(NodeId n, const ops::Expand&, const std::string& who) {
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

  /// Any other op: the reference interpreter's kernel on plain copies of its inputs.
  void fallback(NodeId n, const std::string& who, const std::string& why) {
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

  CompileOptions opt_;
  Graph g_;
  engine eng_{engine::kind::cpu, 0};
  stream strm_{eng_};
  std::vector<std::vector<NodeId>> consumers_;
  std::set<TensorId> is_output_;
  std::vector<Slot> slots_;
  std::vector<Request> requests_;
  std::vector<std::shared_ptr<float[]>> buffers_;
  std::vector<Step> steps_;
  std::set<NodeId> absorbed_, lowered_;
  std::vector<int> output_slots_;
  size_t planned_bytes_ = 0, requested_bytes_ = 0;
  std::vector<double> step_ms_;
  int runs_ = 0;
  std::vector<float*> override_;
  std::vector<std::vector<memory>> request_memories_;
};

class CpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }
  std::string version() const override { return cpu_backend_version(); }
  std::unique_ptr<Executable> compile(const Graph& g, const CompileOptions& opt) override {
    return std::make_unique<CpuExecutable>(g, opt);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace pet::backend
