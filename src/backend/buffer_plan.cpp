// Buffer assignment by lifetime (buffer_plan.hpp).
#include "pet/backend/buffer_plan.hpp"

#include <algorithm>
#include <climits>
#include <numeric>

namespace pet::backend {

BufferPlan plan_buffers(std::span<const BufferRequest> requests) {
  BufferPlan p;
  p.buffer_of.assign(requests.size(), -1);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return requests[a].first < requests[b].first; });
  std::vector<int> busy_until;  // per buffer: the step after which it is free again
  for (size_t q : order) {
    const BufferRequest& r = requests[q];
    const int last = std::max(r.last, r.first);
    p.requested_bytes += r.bytes;
    int best = -1;
    if (!r.pinned)
      for (size_t b = 0; b < p.buffer_bytes.size(); ++b)
        if (busy_until[b] < r.first && p.buffer_bytes[b] >= r.bytes && (best < 0 || p.buffer_bytes[b] < p.buffer_bytes[size_t(best)])) best = int(b);
    if (best < 0) {
      p.buffer_bytes.push_back(r.bytes);
      busy_until.push_back(r.pinned ? INT_MAX : last);
      p.planned_bytes += r.bytes;
      best = int(p.buffer_bytes.size()) - 1;
    } else {
      busy_until[size_t(best)] = last;
    }
    p.buffer_of[q] = best;
  }
  return p;
}

}  // namespace pet::backend
