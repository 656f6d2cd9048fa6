#pragma once
// The cpu backend's version, the key of its algorithm choices (kept in the shared
// pet/backend/algorithm_cache.hpp) and of the profiler's timings.
#include <string>

#include "pet/backend/algorithm_cache.hpp"

namespace pet::backend::cpu_detail {

/// oneDNN's version and pet's cpu-kernel revision (bump it when a kernel changes): part of
/// every cache key, so that timings and choices of older kernels are never reused.
std::string cpu_backend_version();

}  // namespace pet::backend::cpu_detail
