// Memory planning of the cpu executable: buffers assigned by lifetime, reused once dead.
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

void CpuExecutable::plan_memory() {
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

}  // namespace pet::backend::cpu_detail
