#pragma once
/// Backends: compile a program into an executable plan, run it, and time single op
/// configurations (the optimizer's cost model asks backends how long candidate ops take).
///   reference  the interpreter (always available)
///   cpu        oneDNN 2.x (kernels/cpu), the default
///   cuda       cuDNN / cuBLAS (kernels/cuda), when built with CUDA
/// The API is the same in every build; a backend that is not built says so (Unsupported).
#include <chrono>
#include <map>
#include <optional>
#include <memory>
#include <string>

#include "pet/backend/cache_store.hpp"
#include "pet/core/rng.hpp"
#include "pet/eval/value.hpp"
#include "pet/ir/graph.hpp"

namespace pet::backend {

struct CompileOptions {
  int threads = 0;  ///< 0: all cores
  /// Let the backend time alternative algorithms (e.g. Winograd vs direct convs) while
  /// compiling and keep the faster (results go to the profiler's cache).
  bool choose_algorithms = true;
  /// Conv algorithm: "auto" (time the candidates and keep the fastest), "direct", "winograd"
  /// (pet's F(4x4,3x3) wherever it applies, else direct) or "onednn-winograd" (oneDNN's own,
  /// where the library implements it on this CPU, else direct). Lets the cost model price
  /// each choice and tests force each path.
  std::string conv_algorithm = "auto";
  /// Layout of direct convs: "auto" (oneDNN's blocked layout; at a layout boundary the plain
  /// one is timed too), "blocked" or "plain" (NCHW as the graph stores it, where oneDNN has
  /// an implementation).
  std::string conv_layout = "auto";
  /// Where the algorithm choices made by measurement are kept (JSON, keyed by backend
  /// version, threads, op, shapes, fused ops and layout boundary), so that compiling the same
  /// configuration again does not time it again. Empty: kept for this process only.
  std::string algorithm_cache;
  /// Time every step of every run; describe() then reports the time per step.
  bool profile = false;
  /// Graph passes to leave out before lowering ("a,b"; see transform::backend_pipeline), and
  /// passes after which to print the graph to stderr ("all" for every one).
  std::string disabled_passes, print_after;
  /// cpu: convs of quantized (QDQ) programs on oneDNN's int8 kernels where the CPU has VNNI
  /// (false: in float, as the program's DequantizeLinear results say).
  bool int8 = true;
};

/// A compiled program. run() takes values for the graph's inputs (in order) and returns the
/// outputs; it may be called many times.
class Executable {
 public:
  virtual ~Executable() = default;
  virtual std::vector<Value<float>> run(std::span<const Value<float>> inputs) = 0;
  /// One run, timed (ms), its outputs dropped: by default the wall clock around run(). A
  /// device backend times its computation alone (the inputs placed first, the outputs left
  /// on the device, device events around the steps), so transfers are never timed.
  virtual double timed_run(std::span<const Value<float>> inputs) {
    const auto t0 = std::chrono::steady_clock::now();
    run(inputs);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  /// One line per step of the plan (kernels, fused ops, layouts, algorithms), for people.
  virtual std::string describe() const = 0;
};

/// A measured op configuration.
struct OpTiming {
  double median_ms = 0, min_ms = 0;
  int runs = 0;           ///< undisturbed runs the figures come from
  int dropped = 0;        ///< runs dropped as disturbed (see time_runs)
  double spread = 0;      ///< (median - min) / min of the undisturbed runs
  bool trusted = true;    ///< enough undisturbed runs were found (untrusted ones are never cached on disk)
  std::string algorithm;  ///< the backend's choice ("direct", "winograd", "pet-copy", ...)
  bool cached = false;    ///< came from the on-disk cache
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  /// The library and kernel versions behind the timings: part of the profiler's cache key,
  /// so measurements of older kernels are never reused.
  virtual std::string version() const = 0;
  virtual std::unique_ptr<Executable> compile(const Graph& g, const CompileOptions& opt = {}) = 0;
};

/// How a backend is made: settings that change what its kernels compute, for every program
/// it compiles. They are part of its version(), and so of every cache key.
struct BackendOptions {
  /// cuda: cuDNN convolutions and cuBLAS products may use TF32 tensor cores (a 10-bit
  /// mantissa for the products: faster, but results then differ from the reference by more
  /// than pet run --check allows). Off by default; the other backends refuse it.
  bool tf32 = false;
};

/// The backend named `name` ("reference", "cpu", "cuda"); Unsupported when not built (or,
/// for cuda, without a CUDA device); InvalidInput for an unknown name or an option the
/// backend does not have.
std::unique_ptr<Backend> make_backend(std::string_view name, const BackendOptions& opt = {});
/// Names of the backends in this build.
std::vector<std::string> available_backends();

/// Times single op configurations on a backend: a one-node program is compiled and run
/// (warm-up, then the median of repeated runs), and the result is kept in an on-disk cache
/// keyed by backend, op and attributes, input types and algorithm, so that a second
/// optimization does not measure again.
class Profiler {
 public:
  /// `cache_file` empty: no disk cache. Default location: $XDG_CACHE_HOME/pet/opcache.db
  /// (or ~/.cache/pet/opcache.db), chosen by the caller (see default_cache_file()); an
  /// SQLite database (cache_store.hpp) that several processes share.
  /// Each measurement: `repeats` undisturbed runs and at least `min_seconds`, but no more
  /// than `max_seconds` once 3 undisturbed runs are in.
  Profiler(Backend& b, std::string cache_file, int repeats = 10, double min_seconds = 0.02, double max_seconds = 0.25);
  ~Profiler();
  /// Median time of `op` on inputs of the given types, with random values; inputs whose
  /// `constant` flag is set are constants of the program (weights), so backends may
  /// preprocess them (default: the weights and biases of convs and Gemms).
  OpTiming time_op(const Op& op, const Types& in, std::vector<bool> constant = {});
  /// Median time of node `n` of `g` run alone: inputs flagged in `constant` are constants
  /// (integer initializers keep their values, so Reshape shapes and Gather indices are
  /// real; float constants are random), the others random inputs. Cached like time_op.
  OpTiming time_node(const Graph& g, NodeId n, const std::vector<bool>& constant);
  /// The cost model's estimate of a whole program: the sum of the minimum times of its
  /// nodes, each timed alone (and cached); nodes that read only constants are computed once
  /// at compile time and cost nothing. The minimum, not the median: on a shared machine
  /// other tenants only ever add time, and medians of near-equal alternatives swung by
  /// +-30 % between runs here.
  double program_cost_ms(const Graph& g);
  /// Median time of a whole program.
  OpTiming time_program(const Graph& g);
  /// Writes the new entries to the cache (also done by the destructor).
  void save();
  int64_t measured() const { return measured_; }
  /// Measurements that stayed disturbed after retries (kept for this process, never saved).
  int64_t untrusted() const { return untrusted_; }
  int64_t hits() const { return hits_; }
  /// Past `d`, an op that is neither cached nor measured yet is not measured: its time is
  /// +infinity (not cached), so a program made with it is never chosen. The search's budgets
  /// are kept this way: profiling a batch-16 conv takes seconds, and one window's candidates
  /// bring dozens of new op configurations. nullopt (the default): no deadline.
  void set_deadline(std::optional<std::chrono::steady_clock::time_point> d) { deadline_ = d; }
  /// How ops are compiled for measuring (default: CompileOptions{}). The optimizer passes its
  /// algorithm cache, so the choices timed here serve its whole-program compiles too.
  void set_compile_options(CompileOptions co) { co_ = std::move(co); }
  /// Ops left unmeasured because of the deadline.
  int64_t skipped() const { return skipped_; }
  static std::string default_cache_file();
  /// The default algorithm-choice cache, beside the op cache (algorithms.db).
  static std::string default_algorithm_cache_file();
  static std::string key(std::string_view backend, const Op& op, const Types& in, const std::vector<bool>& constant);

 private:
  /// The cached timing under key k, or a measurement of op alone: inputs flagged constant
  /// become constants (values[i] when given, else random), the others random inputs.
  OpTiming measure(const std::string& k, const Op& op, const Types& in, const std::vector<bool>& constant,
                   const std::vector<const ConstValue*>& values);
  Backend& b_;
  std::string file_;
  int repeats_;
  double min_seconds_, max_seconds_;
  std::map<std::string, OpTiming> cache_, doubtful_;
  std::vector<std::string> unsaved_;  ///< keys measured since the last save
  std::unique_ptr<CacheStore> store_;
  int64_t measured_ = 0, hits_ = 0, untrusted_ = 0, skipped_ = 0;
  std::optional<std::chrono::steady_clock::time_point> deadline_;
  CompileOptions co_;
};

/// A random value of type t: floats uniform in [-1, 1], integers zero (seeded inputs).
Value<float> random_value(const TensorType& t, Rng& rng);

/// Whether a timed stretch of this process was disturbed by other work on the machine: its
/// threads waited, runnable, for a CPU that something else held (the run-queue delay the
/// kernel keeps per thread, /proc/self/task/*/schedstat) for more than 0.1 ms plus 5 % of the
/// stretch, or, in a virtual machine, the hypervisor ran another guest on its CPUs for more
/// than 5 % of the machine's CPU time (steal). Measured on this project's 2-core guests: idle,
/// two busy threads wait 0.1-1.7 % of the time; beside one busy process, 60-100 %. Counting
/// involuntary context switches, as the probe first did, cannot tell the two apart for long
/// runs (an idle guest preempts two busy threads about 35 times a second, so every batch-16
/// conv was called disturbed, none was cached, each was timed for seconds); that count
/// remains only as the fallback where the kernel keeps no schedstat. Construct it just before
/// the run and ask after.
class DisturbanceProbe {
 public:
  DisturbanceProbe();
  bool disturbed() const;
  /// Run-queue delay (ns) and steal ticks an undisturbed stretch of `seconds` may show.
  static long long allowed_delay_ns(double seconds);
  static long long allowed_steal(double seconds);

 private:
  long switches_;
  long long stolen_, delay_ns_;
  std::chrono::steady_clock::time_point t0_;
};
/// Time the threads of this process spent runnable but waiting for a CPU, so far (ns, all
/// live threads); -1 where the kernel does not say.
long long run_queue_delay_ns();
/// Steal time of the machine so far (clock ticks, all CPUs; 0 outside a virtual machine).
long long stolen_ticks();

/// How a set of timed runs went (time_runs).
struct RunStats {
  int clean = 0, disturbed = 0;
  bool trusted = true;  ///< at least `repeats` undisturbed runs
};
/// Runs `exe` after one warm-up until `repeats` undisturbed runs (and `min_seconds`) are
/// timed, and returns their sorted times (ms). A run is disturbed when DisturbanceProbe says
/// so (this process's threads waited for a CPU held by other work): on a shared
/// machine a 2-thread primitive then waits at its barrier for the descheduled thread and the
/// run measures the scheduler, not the kernel. Disturbed runs are dropped and retried, up to
/// 10 x repeats runs; if too few stay clean, all runs are returned and stats->trusted is false.
/// With max_seconds > 0, timing stops once that long has passed and 3 clean runs were timed
/// (large ops need fewer runs to be measured well), and in any case after 4 x max_seconds
/// and 3 runs (a busy machine preempts nearly every long run; stats->trusted is then false).
/// Agreement between preempted runs proves nothing: under steady load every run is slowed
/// alike (experiments/profiler_under_load.py measured 3.5x on a conv with a spinner per core).
/// One untimed run comes first unless `warm_up` is false (the executable ran just before:
/// the optimizer's later rounds of a race between programs that run seconds each).
std::vector<double> time_runs(Executable& exe, std::span<const Value<float>> inputs, int repeats, double min_seconds = 0,
                              RunStats* stats = nullptr, double max_seconds = 0, bool warm_up = true);

}  // namespace pet::backend
