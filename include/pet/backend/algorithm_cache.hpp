#pragma once
/// Algorithm choices made by measurement, shared by the backends (the cpu backend's conv
/// algorithm and layout, the cuda backend's cuDNN convolution algorithm): per configuration
/// key, in memory for the process and in a pet cache database ("algorithms",
/// cache_store.hpp) when a file is named. Keys carry the backend's name and version (library
/// versions, the device), so a choice made for other kernels or another GPU is never reused.
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "pet/backend/cache_store.hpp"

namespace pet::backend {

class AlgorithmCache {
 public:
  static AlgorithmCache& instance();
  /// The choice kept for `key` (file empty: this process's choices only).
  std::optional<std::string> get(const std::string& file, const std::string& key);
  /// Records a choice; with `persist` false (timed on a busy machine) it is used by this
  /// process only and never written to the file. The file is read once; each new choice is
  /// one row written, so processes sharing the file lose nothing.
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

}  // namespace pet::backend
