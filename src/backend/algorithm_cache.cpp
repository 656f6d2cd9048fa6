// Algorithm choices kept per configuration, for every backend (algorithm_cache.hpp).
#include "pet/backend/algorithm_cache.hpp"

#include <cstdio>

#include "pet/core/error.hpp"

namespace pet::backend {

AlgorithmCache& AlgorithmCache::instance() {
  static AlgorithmCache c;
  return c;
}

std::optional<std::string> AlgorithmCache::get(const std::string& file, const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& e = load(file);
  if (auto it = e.saved.find(key); it != e.saved.end()) return it->second;
  if (auto it = e.unsaved.find(key); it != e.unsaved.end()) return it->second;
  return std::nullopt;
}

std::map<std::string, std::string> AlgorithmCache::entries(const std::string& file) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto& e = load(file);
  auto all = e.saved;
  all.insert(e.unsaved.begin(), e.unsaved.end());
  return all;
}

void AlgorithmCache::put(const std::string& file, const std::string& key, const std::string& value, bool persist) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& e = load(file);
  if (!persist || !e.store) {
    e.unsaved[key] = value;
    return;
  }
  e.unsaved.erase(key);
  e.saved[key] = value;
  try {
    e.store->put(key, value);
  } catch (const Error& err) {
    std::fprintf(stderr, "pet: warning: %s (algorithm choice not saved)\n", err.what());
  }
}

AlgorithmCache::Entries& AlgorithmCache::load(const std::string& file) {
  auto [it, fresh] = files_.try_emplace(file);
  if (fresh && !file.empty()) {
    try {
      it->second.store = std::make_unique<CacheStore>(file, "algorithms");
      it->second.saved = it->second.store->all();
    } catch (...) {
      files_.erase(it);  // a file that is not a pet cache: the error reaches the user
      throw;
    }
  }
  return it->second;
}

}  // namespace pet::backend
