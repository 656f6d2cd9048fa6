#pragma once
// Algorithm choices of the cpu backend (kernels/cpu), kept per configuration.
#include <map>
#include <memory>
#include <mutex>

#include "pet/backend/cache_store.hpp"
#include <optional>
#include <string>

namespace pet::backend::cpu_detail {

/// oneDNN's version and pet's cpu-kernel revision (bump it when a kernel changes): part of
/// every cache key, so that timings and choices of older kernels are never reused.
std::string cpu_backend_version();

/// Algorithm choices made by measurement, per configuration: in memory for the process, and
/// in a pet cache database when a file is named (read once; each new choice is one row
/// written, so processes sharing the file lose nothing; see pet/backend/cache_store.hpp).
class AlgorithmCache {
 public:
  static AlgorithmCache& instance();
  std::optional<std::string> get(const std::string& file, const std::string& key);
  /// Records a choice; with `persist` false (timed on a busy machine) it is used by this
  /// process only and never written to the file.
  void put(const std::string& file, const std::string& key, const std::string& value, bool persist = true);
  /// Every choice known for `file`, written or in memory only (for tests and `--plan`).
  std::map<std::string, std::string> entries(const std::string& file);

 private:
  struct Entries {
    std::map<std::string, std::string> saved, unsaved;
    std::unique_ptr<CacheStore> store;
  };
  Entries& load(const std::string& file);
  std::mutex mu_;
  std::map<std::string, Entries> files_;
};

}  // namespace pet::backend::cpu_detail
