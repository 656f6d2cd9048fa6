// Stable, portable string hashing (the same on every machine and run), for on-disk keys and
// keyed random draws.
#pragma once

#include <cstdint>
#include <string_view>

namespace pet {

/// 64-bit FNV-1a of s.
inline uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace pet
