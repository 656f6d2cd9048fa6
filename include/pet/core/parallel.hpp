#pragma once
/// Data-parallel loops on OpenMP (all cores by default). Exceptions thrown by the body are
/// captured and the first one is rethrown on the calling thread.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <exception>
#include <mutex>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace pet {

inline int num_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

/// Physical cores this process may run on: distinct (package, core) pairs of the CPUs in
/// its affinity mask (Linux sysfs); SMT siblings share a core's units, and a 2-thread
/// primitive on siblings is slower than on cores. Falls back to the CPUs it may use.
inline int physical_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return std::max(1, int(std::thread::hardware_concurrency()));
  std::set<std::pair<int, int>> cores;
  int cpus = 0;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    ++cpus;
    auto read = [&](const char* what) {
      std::ifstream f("/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/" + what);
      int v = -1;
      f >> v;
      return f ? v : -1;
    };
    int pkg = read("physical_package_id"), core = read("core_id");
    if (pkg < 0 || core < 0) return std::max(1, cpus);  // no topology: every CPU counts
    cores.insert({pkg, core});
  }
  return std::max(1, int(cores.size()));
}

inline void set_num_threads(int n) {
#ifdef _OPENMP
  if (n > 0) omp_set_num_threads(n);
#else
  (void)n;
#endif
}

/// Calls f(i) for i in [0, n), in parallel when `parallel` and n > 1.
template <class F>
void parallel_for(int64_t n, F&& f, bool parallel = true) {
  if (n <= 0) return;
  if (!parallel || n == 1) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  std::exception_ptr err;
  std::atomic<bool> failed{false};
  std::mutex mu;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    if (failed.load(std::memory_order_relaxed)) continue;
    try {
      f(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!err) err = std::current_exception();
      failed = true;
    }
  }
  if (err) std::rethrow_exception(err);
}

/// Splits [0, n) into chunks of at least `grain` and calls f(begin, end) per chunk in parallel.
template <class F>
void parallel_chunks(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(n / std::max<int64_t>(grain, 1), 16 * num_threads()));
  int64_t per = (n + chunks - 1) / chunks;
  parallel_for(chunks, [&](int64_t c) {
    int64_t b = c * per, e = std::min(n, b + per);
    if (b < e) f(b, e);
  }, chunks > 1);
}

}  // namespace pet
