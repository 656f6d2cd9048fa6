#pragma once
/// How much tensor memory running a program holds at once: the estimate every command makes
/// before it allocates (`--memory-limit`), and that the fuzz test checks variants against.
#include <algorithm>
#include <vector>

#include "pet/ir/graph.hpp"

namespace pet {

inline int64_t tensor_bytes(const TensorType& t) { return numel(t.shape) * (is_float(t.dtype) ? 4 : 8); }

struct MemoryEstimate {
  int64_t peak_bytes = 0;  ///< tensors alive at once, at the worst point of program order
  TensorId largest = -1;   ///< the largest tensor of the program
};

/// Peak of the tensors alive at once in program order, with inputs, constants and outputs
/// held all the way through: what the reference interpreter and the cpu plan hold at most.
inline MemoryEstimate estimate_memory(const Graph& g) {
  MemoryEstimate e;
  auto uses = g.consumers();
  auto order = g.topo_order();
  std::vector<int64_t> last(size_t(g.num_tensors()), -1);
  std::vector<bool> done(size_t(g.num_tensors()), false);  // pinned, or already released
  int64_t live = 0;
  auto note = [&](TensorId t) {
    if (e.largest < 0 || tensor_bytes(g.type(t)) > tensor_bytes(g.type(e.largest))) e.largest = t;
  };
  for (TensorId t : g.outputs()) done[size_t(t)] = true;
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (g.tensor(t).producer < 0) {
      done[size_t(t)] = true;
      live += tensor_bytes(g.type(t));
      note(t);
    }
  for (size_t i = 0; i < order.size(); ++i)
    for (TensorId t : g.node(order[i]).inputs) last[size_t(t)] = int64_t(i);
  e.peak_bytes = live;
  for (size_t i = 0; i < order.size(); ++i) {
    for (TensorId t : g.node(order[i]).outputs) {
      live += tensor_bytes(g.type(t));
      note(t);
    }
    e.peak_bytes = std::max(e.peak_bytes, live);
    for (TensorId t : g.node(order[i]).inputs)
      if (!done[size_t(t)] && last[size_t(t)] == int64_t(i)) live -= tensor_bytes(g.type(t)), done[size_t(t)] = true;
    for (TensorId t : g.node(order[i]).outputs)
      if (!done[size_t(t)] && uses[size_t(t)].empty()) live -= tensor_bytes(g.type(t)), done[size_t(t)] = true;
  }
  return e;
}

}  // namespace pet
