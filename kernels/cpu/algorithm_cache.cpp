// Algorithm choices of the cpu backend, kept per configuration (algorithm_cache.hpp).
#include "algorithm_cache.hpp"

#include <dnnl.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "pet/core/error.hpp"

namespace pet::backend::cpu_detail {

std::string cpu_backend_version() {
  const dnnl_version_t* v = dnnl_version();
  return cat("onednn", v->major, ".", v->minor, ".", v->patch, "+pet9");
}

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
  auto e = load(file);
  e.saved.insert(e.unsaved.begin(), e.unsaved.end());
  return e.saved;
}

void AlgorithmCache::put(const std::string& file, const std::string& key, const std::string& value, bool persist) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& e = load(file);
  if (!persist || file.empty()) {
    e.unsaved[key] = value;
    return;
  }
  e.unsaved.erase(key);
  e.saved[key] = value;
  try {
    nlohmann::json j(e.saved);
    std::filesystem::create_directories(std::filesystem::path(file).parent_path());
    const std::string tmp = cat(file, ".tmp", ::getpid());
    std::ofstream(tmp) << j.dump(1) << "\n";
    std::filesystem::rename(tmp, file);
  } catch (const std::exception&) {
    // an unwritable cache only costs time
  }
}

AlgorithmCache::Entries& AlgorithmCache::load(const std::string& file) {
  auto [it, fresh] = files_.try_emplace(file);
  if (fresh && !file.empty() && std::filesystem::exists(file)) {
    try {
      std::ifstream f(file);
      it->second.saved = nlohmann::json::parse(f).get<std::map<std::string, std::string>>();
    } catch (const std::exception&) {
      it->second.saved.clear();
    }
  }
  return it->second;
}

}  // namespace pet::backend::cpu_detail
