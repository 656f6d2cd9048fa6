#pragma once
// Algorithm choices of the cpu backend (kernels/cpu), kept per configuration.
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace pet::backend::cpu_detail {

/// oneDNN's version and pet's cpu-kernel revision (bump it when a kernel changes): part of
/// every cache key, so that timings and choices of older kernels are never reused.
std::string cpu_backend_version();

/// Algorithm choices made by measurement, per configuration: in memory for the process, and
/// in a JSON file when one is named (read once, rewritten on every new choice). A damaged
/// file is ignored, never trusted.
class AlgorithmCache {
 public:
  static AlgorithmCache& instance();
  std::optional<std::string> get(const std::string& file, const std::string& key);
  void put(const std::string& file, const std::string& key, const std::string& value);

 private:
  std::map<std::string, std::string>& load(const std::string& file);
  std::mutex mu_;
  std::map<std::string, std::map<std::string, std::string>> files_;
};

}  // namespace pet::backend::cpu_detail
