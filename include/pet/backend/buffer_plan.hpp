#pragma once
/// Buffer assignment by lifetime, for every backend: each request (a tensor's storage, live
/// from the step that first writes it to the step that last reads it) gets a buffer that no
/// request live at the same time holds. Greedy by start, best fit among the buffers free
/// again (the smallest large enough). Pinned requests (a program's inputs and outputs) get
/// a buffer of their own, never shared. The cpu backend plans its host memory with it, the
/// cuda backend its device memory; tests check the plan's invariants on the host.
#include <cstddef>
#include <span>
#include <vector>

namespace pet::backend {

struct BufferRequest {
  size_t bytes = 0;
  int first = 0;        ///< first step that writes it
  int last = -1;        ///< last step that reads it (< first: never read, dead after `first`)
  bool pinned = false;  ///< never shared
};

struct BufferPlan {
  std::vector<int> buffer_of;       ///< per request
  std::vector<size_t> buffer_bytes; ///< per buffer
  size_t requested_bytes = 0, planned_bytes = 0;
};

BufferPlan plan_buffers(std::span<const BufferRequest> requests);

}  // namespace pet::backend
