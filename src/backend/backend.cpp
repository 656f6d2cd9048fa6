// Backend registry, the reference backend, run timing and the op profiler with its cache.
#include "pet/backend/backend.hpp"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>

#include "pet/core/parallel.hpp"
#include "pet/core/stats.hpp"
#include "pet/core/rng.hpp"
#include "pet/eval/interpreter.hpp"
#ifdef PET_WITH_DNNL
#include "pet/backend/cpu.hpp"
#endif
#ifdef PET_CUDA_MODULE
#include <dlfcn.h>

#include <mutex>

#include "pet/backend/cuda.hpp"
#endif

namespace pet::backend {

namespace {
class ReferenceExecutable final : public Executable {
 public:
  explicit ReferenceExecutable(const Graph& g) : g_(g), interp_(g_) {}
  std::vector<Value<float>> run(std::span<const Value<float>> inputs) override { return interp_.run(inputs); }
  std::string describe() const override {
    std::string s;
    for (NodeId n : g_.topo_order()) s += cat(op_name(g_.node(n).op), " '", g_.node(n).name, "': reference interpreter\n");
    return s;
  }

 private:
  Graph g_;
  Interpreter<float> interp_;
};

class ReferenceBackend final : public Backend {
 public:
  std::string_view name() const override { return "reference"; }
  std::string version() const override { return "1"; }
  std::unique_ptr<Executable> compile(const Graph& g, const CompileOptions& opt) override {
    if (opt.threads > 0) set_num_threads(opt.threads);
    return std::make_unique<ReferenceExecutable>(g);
  }
};
}  // namespace

#ifdef PET_CUDA_MODULE
namespace {
/// The cuda backend lives in a module, libpet_cuda.so, loaded on first use: linking the CUDA
/// runtime, cuBLAS and cuDNN into pet cost every process 215 MB of memory and 80 ms before
/// its first step (their load-time relocations and initializers), GPU or not, and pet would
/// not start at all where those libraries are missing. Looked for where PET_CUDA_MODULE
/// says, else beside the executable (and one folder up: tests), where the build wrote it,
/// and where it is installed.
std::unique_ptr<Backend> load_cuda_backend(const BackendOptions& opt) {
  using Make = Backend* (*)(const BackendOptions*);
  using Abi = long (*)();
  static std::mutex mu;
  static Make make = nullptr;
  std::lock_guard lock(mu);
  if (!make) {
    std::vector<std::string> where;
    if (const char* env = std::getenv("PET_CUDA_MODULE"); env && *env) {
      where.push_back(env);
    } else {
      std::error_code ec;
      const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
      if (!ec) where.push_back((exe / "libpet_cuda.so").string()), where.push_back((exe.parent_path() / "libpet_cuda.so").string());
      where.push_back(PET_CUDA_MODULE);
      where.push_back(PET_CUDA_MODULE_INSTALLED);
    }
    std::string looked;
    for (const std::string& path : where) {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(path, ec)) {
        looked += cat(looked.empty() ? "" : ", ", path);
        continue;
      }
      void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!h)
        throw Unsupported(cat("backend 'cuda': its module '", path, "' does not load (", ::dlerror(),
                              "): the CUDA runtime, cuBLAS and cuDNN libraries must be installed"));
      auto abi = reinterpret_cast<Abi>(::dlsym(h, "pet_cuda_module_abi"));
      auto m = reinterpret_cast<Make>(::dlsym(h, "pet_make_cuda_backend"));
      if (!abi || !m) throw Unsupported(cat("backend 'cuda': '", path, "' is not a pet cuda module"));
      if (abi() != cuda_module_abi())
        throw Unsupported(cat("backend 'cuda': the module '", path, "' was built from another version of pet (rebuild it, or set PET_CUDA_MODULE)"));
      make = m;
      break;
    }
    if (!make) throw Unsupported(cat("backend 'cuda': its module libpet_cuda.so was not found (looked for ", looked, "; PET_CUDA_MODULE names it)"));
  }
  return std::unique_ptr<Backend>(make(&opt));
}
}  // namespace
#endif

std::unique_ptr<Backend> make_backend(std::string_view name, const BackendOptions& opt) {
  if (opt.tf32 && (name == "reference" || name == "cpu"))
    throw InvalidInput(cat("TF32 (--tf32) is an option of the cuda backend only, not of '", name, "'"));
  if (name == "reference") return std::make_unique<ReferenceBackend>();
  if (name == "cpu") {
#ifdef PET_WITH_DNNL
    return make_cpu_backend();
#else
    throw Unsupported("backend 'cpu' is not in this build (configure with -DPET_WITH_DNNL=ON and libdnnl-dev)");
#endif
  }
  if (name == "cuda") {
#ifdef PET_CUDA_MODULE
    return load_cuda_backend(opt);
#else
    throw Unsupported("backend 'cuda' is not in this build (configure with -DPET_WITH_CUDA=ON, nvcc and cuDNN)");
#endif
  }
  throw InvalidInput(cat("unknown backend '", name, "' (choose reference, cpu or cuda)"));
}

std::vector<std::string> available_backends() {
  std::vector<std::string> v{"reference"};
#ifdef PET_WITH_DNNL
  v.insert(v.begin(), "cpu");
#endif
#ifdef PET_CUDA_MODULE
  v.push_back("cuda");
#endif
  return v;
}

namespace {
long involuntary_switches() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);  // all threads of the process
  return r.ru_nivcsw;
}
}  // namespace

/// Time the hypervisor gave this virtual machine's CPUs to other guests (the "steal" column
/// of /proc/stat, in clock ticks, all CPUs); 0 where there is no such file. A guest does not
/// see it as a context switch: on this project's shared machines the steal ran at 66 %
/// while a batch-16 CSRNet run went from 1.8 s to 2.8 s.
long long stolen_ticks() {
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return 0;
  char line[512];
  long long v[8] = {0};
  if (std::fgets(line, sizeof line, f))
    std::sscanf(line, "cpu %lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
  std::fclose(f);
  return v[7];
}

long long run_queue_delay_ns() {
  DIR* d = ::opendir("/proc/self/task");
  if (!d) return -1;
  long long total = 0;
  bool any = false;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    char path[96];
    std::snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
    std::FILE* f = std::fopen(path, "r");
    if (!f) continue;  // the thread ended meanwhile
    long long on_cpu = 0, waited = 0;
    if (std::fscanf(f, "%lld %lld", &on_cpu, &waited) == 2) total += waited, any = true;
    std::fclose(f);
  }
  ::closedir(d);
  return any ? total : -1;
}

DisturbanceProbe::DisturbanceProbe()
    : switches_(involuntary_switches()), stolen_(stolen_ticks()), delay_ns_(run_queue_delay_ns()), t0_(std::chrono::steady_clock::now()) {}

long long DisturbanceProbe::allowed_delay_ns(double seconds) { return (long long)(1e5 + 0.05 * seconds * 1e9); }

long long DisturbanceProbe::allowed_steal(double seconds) {
  static const double ticks_per_cpu_second = double(sysconf(_SC_CLK_TCK)) * double(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  return (long long)(0.05 * seconds * ticks_per_cpu_second);  // 5 % of the machine's CPU time
}

bool DisturbanceProbe::disturbed() const {
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  if (stolen_ticks() - stolen_ > allowed_steal(s)) return true;
  const long long delay = delay_ns_ >= 0 ? run_queue_delay_ns() : -1;
  // A thread that ended during the stretch takes its delay along: a drop reads as none.
  if (delay >= 0) return delay - delay_ns_ > allowed_delay_ns(s);
  return involuntary_switches() != switches_;  // no schedstat: any preemption counts
}

std::vector<double> time_runs(Executable& exe, std::span<const Value<float>> inputs, int repeats, double min_seconds, RunStats* stats,
                              double max_seconds, bool warm_up) {
  using clock = std::chrono::steady_clock;
  if (warm_up) exe.run(inputs);
  std::vector<double> clean, all;
  auto start = clock::now();
  const size_t cap = std::max<size_t>(size_t(10 * repeats), 20);
  while ((int(clean.size()) < repeats || std::chrono::duration<double>(clock::now() - start).count() < min_seconds) && all.size() < 100000) {
    const DisturbanceProbe probe;
    const double ms = exe.timed_run(inputs);
    all.push_back(ms);
    if (!probe.disturbed()) clean.push_back(ms);
    const double spent = std::chrono::duration<double>(clock::now() - start).count();
    if (max_seconds > 0 && spent >= max_seconds && clean.size() >= 3 && spent >= min_seconds) {
      repeats = int(clean.size());  // enough for an op this large
      break;
    }
    if (max_seconds > 0 && spent >= 4 * max_seconds && all.size() >= 3) break;  // long runs on a busy machine: give up on clean ones
    if (all.size() >= cap && int(clean.size()) < repeats &&
        std::chrono::duration<double>(clock::now() - start).count() >= min_seconds)
      break;  // the machine stays busy: give up on clean runs
  }
  RunStats st;
  st.clean = int(clean.size());
  st.disturbed = int(all.size() - clean.size());
  st.trusted = st.clean >= repeats;
  const bool use_clean = st.trusted || clean.size() >= 3;
  if (stats) *stats = st;
  std::vector<double>& t = use_clean ? clean : all;
  std::sort(t.begin(), t.end());
  return t;
}

// ---------------------------------------------------------------- profiler
Value<float> random_value(const TensorType& t, Rng& rng) {
  if (is_float(t.dtype)) {
    Tensor<float> x(t.shape);
    for (int64_t i = 0; i < x.size(); ++i) x[i] = float(rng.uniform(-1, 1));
    return x;
  }
  return Tensor<int64_t>(t.shape, int64_t(0));
}

namespace {
OpTiming summarize(const std::vector<double>& t, std::string algorithm, const RunStats& st) {
  OpTiming r;
  r.runs = int(t.size());
  r.min_ms = t.front();
  r.median_ms = median_of_sorted(t);
  r.spread = r.min_ms > 0 ? (r.median_ms - r.min_ms) / r.min_ms : 0;
  r.dropped = st.disturbed;
  r.trusted = st.trusted;
  r.algorithm = std::move(algorithm);
  return r;
}

/// Times exe; when too few runs were undisturbed, waits a little and tries again (twice).
OpTiming timed(Executable& exe, std::span<const Value<float>> inputs, int repeats, double min_seconds, double max_seconds,
               std::string algorithm) {
  OpTiming best;
  for (int attempt = 0; attempt < 3; ++attempt) {
    RunStats st;
    auto t = time_runs(exe, inputs, repeats, min_seconds, &st, max_seconds);
    OpTiming r = summarize(t, algorithm, st);
    r.dropped += best.dropped;
    if (r.trusted) return r;
    if (attempt == 0 || r.min_ms < best.min_ms) best = r;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the other tenant may be done
  }
  return best;
}
}  // namespace

Profiler::Profiler(Backend& b, std::string cache_file, int repeats, double min_seconds, double max_seconds)
    : b_(b), file_(std::move(cache_file)), repeats_(repeats), min_seconds_(min_seconds), max_seconds_(max_seconds) {
  if (file_.empty()) return;
  store_ = std::make_unique<CacheStore>(file_, "opcache");
  for (const auto& [k, text] : store_->all()) {
    try {
      nlohmann::json v = nlohmann::json::parse(text);
      OpTiming t;
      t.median_ms = v.at("median_ms").get<double>();
      t.min_ms = v.at("min_ms").get<double>();
      t.runs = v.at("runs").get<int>();
      t.dropped = v.value("dropped", 0);
      t.spread = v.value("spread", 0.0);
      t.algorithm = v.at("algorithm").get<std::string>();
      t.cached = true;
      cache_[k] = t;
    } catch (const std::exception&) {
      // an entry that does not parse is measured again, never trusted
    }
  }
}

Profiler::~Profiler() {
  try {
    save();
  } catch (...) {
  }
}

std::string Profiler::default_cache_file() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  std::filesystem::path base = xdg && *xdg ? std::filesystem::path(xdg) : std::filesystem::path(home ? home : "/tmp") / ".cache";
  return (base / "pet" / "opcache.db").string();
}

std::string Profiler::default_algorithm_cache_file() {
  return (std::filesystem::path(default_cache_file()).parent_path() / "algorithms.db").string();
}

std::string Profiler::key(std::string_view backend, const Op& op, const Types& in, const std::vector<bool>& constant) {
  std::string k = cat(backend, "|", num_threads(), "|", op_signature(op));  // backend: name@version
  for (size_t i = 0; i < in.size(); ++i) k += cat("|", to_string(in[i]), i < constant.size() && constant[i] ? "c" : "");
  return k;
}

OpTiming Profiler::time_op(const Op& op, const Types& in, std::vector<bool> constant) {
  if (constant.empty()) {
    constant.assign(in.size(), false);
    if (std::holds_alternative<ops::Conv>(op) || std::holds_alternative<ops::Gemm>(op))
      for (size_t i = 1; i < in.size(); ++i) constant[i] = true;
  }
  return measure(key(cat(b_.name(), "@", b_.version()), op, in, constant), op, in, constant, {});
}

OpTiming Profiler::time_node(const Graph& src, NodeId n, const std::vector<bool>& constant) {
  const Node& node = src.node(n);
  Types in = src.input_types(n);
  std::vector<bool> c(node.inputs.size());
  std::vector<const ConstValue*> values(node.inputs.size(), nullptr);
  std::string k = key(cat(b_.name(), "@", b_.version()), node.op, in, {});
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    TensorId t = node.inputs[i];
    c[i] = constant.at(size_t(t));
    k += c[i] ? "c" : "";
    if (!c[i] || is_float(in[i].dtype)) continue;
    // Integer constants are shape data: their values decide what the op does.
    const auto& v = src.tensor(t).value;
    if (!v) throw InvalidInput(cat(op_name(node.op), " '", node.name, "': integer input ", i, " is computed, not a constant; cannot time the node alone"));
    values[i] = &*v;
    k += "=" + ints_key(ConstInts(*v));
  }
  for (const auto& t : src.output_types(n)) k += cat("->", to_string(t));
  return measure(k, node.op, in, c, values);
}

OpTiming Profiler::measure(const std::string& k, const Op& op, const Types& in, const std::vector<bool>& constant,
                           const std::vector<const ConstValue*>& values) {
  if (auto it = cache_.find(k); it != cache_.end()) {
    ++hits_;
    return it->second;
  }
  if (auto it = doubtful_.find(k); it != doubtful_.end()) {
    ++hits_;  // answered from this process's memory: a hit like any other (only never saved)
    return it->second;
  }
  if (deadline_ && std::chrono::steady_clock::now() > *deadline_) {
    ++skipped_;
    OpTiming r;
    r.median_ms = r.min_ms = std::numeric_limits<double>::infinity();
    r.trusted = false;
    r.algorithm = "not measured (search budget spent)";
    return r;
  }
  Graph g;
  Rng rng(1);
  std::vector<TensorId> ids;
  std::vector<Value<float>> inputs;
  for (size_t i = 0; i < in.size(); ++i) {
    const ConstValue* fixed = i < values.size() ? values[i] : nullptr;
    if (constant[i]) {
      ids.push_back(g.add_constant(cat("c", i), in[i].dtype, fixed ? *fixed : to_constant(random_value(in[i], rng))));
    } else {
      ids.push_back(g.add_input(cat("x", i), in[i]));
      inputs.push_back(random_value(in[i], rng));
    }
  }
  for (TensorId t : g.add_node("op", op, ids)) g.add_output(t);
  auto exe = b_.compile(g, co_);
  std::string desc = exe->describe();
  OpTiming r = timed(*exe, inputs, repeats_, min_seconds_, max_seconds_, desc.substr(0, desc.find('\n')));
  ++measured_;
  if (r.trusted) {
    cache_[k] = r;
    unsaved_.push_back(k);
  } else {
    ++untrusted_;
    doubtful_[k] = r;  // used for this process only; measured again by the next one
  }
  return r;
}

double Profiler::program_cost_ms(const Graph& g) {
  std::vector<bool> constant(size_t(g.num_tensors()), false);
  for (TensorId t = 0; t < g.num_tensors(); ++t) constant[size_t(t)] = g.tensor(t).is_constant();
  double ms = 0;
  for (NodeId n : g.topo_order()) {
    const Node& node = g.node(n);
    bool all_const = true;
    for (TensorId t : node.inputs) all_const = all_const && constant[size_t(t)];
    if (all_const) {
      for (TensorId t : node.outputs) constant[size_t(t)] = true;
      continue;
    }
    ms += time_node(g, n, constant).min_ms;  // contention only adds time: the minimum is the stable estimate
  }
  return ms;
}

OpTiming Profiler::time_program(const Graph& g) {
  Rng rng(1);
  std::vector<Value<float>> inputs;
  for (TensorId t : g.inputs()) inputs.push_back(random_value(g.type(t), rng));
  auto exe = b_.compile(g, co_);
  ++measured_;
  return timed(*exe, inputs, repeats_, min_seconds_, max_seconds_, "program");
}

void Profiler::save() {
  if (!store_ || unsaved_.empty()) return;
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& k : unsaved_) {
    const OpTiming& v = cache_.at(k);
    rows.emplace_back(k, nlohmann::json{{"median_ms", v.median_ms}, {"min_ms", v.min_ms}, {"runs", v.runs}, {"dropped", v.dropped},
                                        {"spread", v.spread}, {"algorithm", v.algorithm}}
                             .dump());
  }
  try {
    store_->put(rows);
    unsaved_.clear();
  } catch (const Error& e) {
    std::fprintf(stderr, "pet: warning: %s (timings not saved)\n", e.what());
    unsaved_.clear();
  }
}

}  // namespace pet::backend
