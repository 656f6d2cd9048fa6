// Memory planning of the cpu executable: buffers assigned by lifetime, reused once dead.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "executable.hpp"
#include "algorithm_cache.hpp"
#include "copy.hpp"
#include "pet/backend/buffer_plan.hpp"
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
  // Buffers by lifetime (pet/backend/buffer_plan.hpp): free again after the last reader.
  std::vector<BufferRequest> reqs(requests_.size());
  for (size_t q = 0; q < requests_.size(); ++q) {
    const Request& r = requests_[q];
    reqs[q] = {r.bytes, r.first, r.last, r.pinned};
  }
  const BufferPlan plan = plan_buffers(reqs);
  for (size_t q = 0; q < requests_.size(); ++q) requests_[q].buffer = plan.buffer_of[q];
  for (size_t bytes : plan.buffer_bytes) buffers_.push_back(aligned_floats(bytes / sizeof(float) + 1));
  requested_bytes_ += plan.requested_bytes;
  planned_bytes_ += plan.planned_bytes;
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
