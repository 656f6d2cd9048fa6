#include "z3_check.hpp"

#include <z3++.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "pet/verify/point_eval.hpp"

namespace pet::lab {

namespace {

/// A polynomial term over the current thread's Z3 context (an element type for the ops'
/// formulas: at<Sym> builds the symbolic value of an output element).
struct Sym {
  static z3::context*& ctx() {
    thread_local z3::context* c = nullptr;
    return c;
  }
  z3::expr e;
  Sym() : Sym(int64_t(0)) {}
  Sym(int64_t v) : e(ctx()->real_val(v)) {}
  Sym(int v) : Sym(int64_t(v)) {}
  Sym(double v) : e(ctx()->real_val(int64_t(v))) {
    if (double(int64_t(v)) != v) e = ctx()->real_val(std::to_string(v).c_str());
  }
  explicit Sym(z3::expr x) : e(std::move(x)) {}
  friend Sym operator+(const Sym& a, const Sym& b) { return Sym(a.e + b.e); }
  friend Sym operator-(const Sym& a, const Sym& b) { return Sym(a.e - b.e); }
  friend Sym operator*(const Sym& a, const Sym& b) { return Sym(a.e * b.e); }
  friend Sym operator/(const Sym& a, const Sym& b) { return Sym(a.e / b.e); }
  friend Sym operator-(const Sym& a) { return Sym(-a.e); }
  Sym& operator+=(const Sym& b) { return *this = *this + b; }
  Sym& operator-=(const Sym& b) { return *this = *this - b; }
  Sym& operator*=(const Sym& b) { return *this = *this * b; }
};

/// Interrupts a context when a deadline passes (Z3's own timeout is not used).
class Watchdog {
 public:
  Watchdog(z3::context& c, double seconds) : thread_([this, &c, seconds] {
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) {
        fired_ = true;
        c.interrupt();
      }
    }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  bool fired() const { return fired_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::atomic<bool> fired_{false};
  std::thread thread_;
};

enum class Answer { Proved, Refuted, Unknown };

/// Symbolic leaves: input i element k is "x<i>_<k>", weight w element k is "<w>_<k>".
std::vector<std::optional<Tensor<Sym>>> sym_leaves(const Graph& g, const verify::LeafNames& names, z3::context& c) {
  std::vector<std::optional<Tensor<Sym>>> l(size_t(g.num_tensors()));
  auto make = [&](const Shape& s, const std::string& prefix) {
    Tensor<Sym> t(s);
    for (int64_t k = 0; k < t.size(); ++k) t[k] = Sym(c.real_const(cat(prefix, "_", k).c_str()));
    return t;
  };
  for (size_t i = 0; i < g.inputs().size(); ++i) l[size_t(g.inputs()[i])] = make(g.type(g.inputs()[i]).shape, cat("x", i));
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    const auto& info = g.tensor(t);
    if (info.is_constant() && is_float(info.type.dtype)) l[size_t(t)] = make(info.type.shape, "w:" + info.name);
  }
  return l;
}

/// Decides P1(v) == P2(v) for all inputs: normal form first, then a counterexample search.
Answer decide(z3::context& c, const z3::expr& a, const z3::expr& b, const Z3Options& opt) {
  Watchdog dog(c, opt.timeout_s);
  try {
    z3::params p(c);
    p.set("som", true);
    z3::expr d = (a - b).simplify(p);
    if (d.is_numeral()) return z3::eq(d, c.real_val(0)) ? Answer::Proved : Answer::Refuted;
    z3::solver s(c, "QF_NRA");
    s.add(a != b);
    switch (s.check()) {
      case z3::sat: return Answer::Refuted;
      case z3::unsat: return Answer::Proved;
      default: return Answer::Unknown;
    }
  } catch (const z3::exception&) {
    return Answer::Unknown;  // interrupted by the watchdog, or resource limits
  }
}

}  // namespace

Z3Result z3_cross_check(const Graph& a, const Graph& b, const verify::Report& report, const Z3Options& opt) {
  auto t0 = std::chrono::steady_clock::now();
  Z3Result res;
  unsigned major, minor, build, rev;
  Z3_get_version(&major, &minor, &build, &rev);
  res.version = cat(major, ".", minor, ".", build);
  if (opt.memory_limit_bytes > 0) {
    // Every input and weight element of both programs becomes a named Z3 constant.
    int64_t symbols = 0;
    for (const Graph* g : {&a, &b})
      for (TensorId t = 0; t < g->num_tensors(); ++t)
        if (g->tensor(t).producer < 0 && is_float(g->type(t).dtype)) symbols += numel(g->type(t).shape);
    const int64_t need = symbols * Z3Options::kBytesPerSymbol;
    if (need > opt.memory_limit_bytes)
      throw Unsupported(cat("--z3 would make ", symbols, " input and weight elements Z3 constants (about ", need / 1000000, " MB), more than the memory limit of ",
                            opt.memory_limit_bytes / 1000000, " MB (--memory-limit); cross-check a smaller program (a batch of 1, fewer channels)"));
    z3::set_param("memory_max_size", int(std::min<int64_t>(opt.memory_limit_bytes / 1000000, INT32_MAX)));
  }
  verify::LeafNames names = verify::shared_leaves(a, b);
  for (size_t o = 0; o < report.outputs.size(); ++o) {
    const auto& out = report.outputs[o];
    for (const auto& cell : out.cells) {
      // A fresh context per intersection keeps queries independent.
      z3::context c;
      Sym::ctx() = &c;
      verify::PointEvaluator<Sym> ea(a, sym_leaves(a, names, c)), eb(b, sym_leaves(b, names, c));
      std::vector<Index> positions = cell.positions;
      if (opt.all_positions) {
        positions.clear();
        Shape ext;
        for (const auto& d : cell.box.dims) ext.push_back(d.count());
        Index r(int(ext.size()));
        do {
          Index v = cell.box.origin();
          for (int i = 0; i < v.rank; ++i) v[i] += r[i] * cell.box.dims[size_t(i)].step;
          positions.push_back(v);
        } while (next_index(r, ext));
      }
      bool any_refuted = false, all_proved = true;
      for (const Index& v : positions) {
        Answer ans = decide(c, ea.at(a.outputs()[o], v).e, eb.at(b.outputs()[o], v).e, opt);
        res.proved += ans == Answer::Proved;
        res.refuted += ans == Answer::Refuted;
        res.unknown += ans == Answer::Unknown;
        any_refuted = any_refuted || ans == Answer::Refuted;
        all_proved = all_proved && ans == Answer::Proved;
      }
      if (!any_refuted && !all_proved) ++res.undecided;
      else if (all_proved == cell.equal) ++res.agree;
      else ++res.disagree;
      Sym::ctx() = nullptr;
    }
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace pet::lab
