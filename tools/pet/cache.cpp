// pet cache show|export|clear [FILE...]: pet's on-disk caches (pet/backend/cache_store.hpp).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "pet/backend/backend.hpp"
#include "pet/backend/cache_store.hpp"

namespace pet::cli {

namespace {
/// The default caches: the op profiler's, the cpu algorithm choices, the optimizer's decisions.
std::vector<std::pair<std::string, std::string>> default_caches() {
  const std::string op = backend::Profiler::default_cache_file();
  return {{op, "opcache"},
          {backend::Profiler::default_algorithm_cache_file(), "algorithms"},
          {(std::filesystem::path(op).parent_path() / "decisions.db").string(), "decisions"}};
}
}  // namespace

int cmd_cache(const std::vector<std::string>& argv) {
  Args a(command_spec("cache"), argv);
  if (a.positional.empty()) throw InvalidInput("usage: pet cache show|export|clear [FILE...] (pet cache --help says more)");
  const std::string action = a.positional[0];
  if (action != "show" && action != "export" && action != "clear")
    throw InvalidInput(cat("pet cache '", action, "': choose show, export or clear"));
  std::vector<std::pair<std::string, std::string>> files;
  if (a.positional.size() == 1) {
    for (const auto& [f, kind] : default_caches())
      if (std::filesystem::exists(f)) files.emplace_back(f, kind);
  } else {
    for (size_t i = 1; i < a.positional.size(); ++i) {
      const std::string& f = a.positional[i];
      if (!std::filesystem::exists(f)) throw InvalidInput(cat(f, ": no such cache file"));
      std::string kind = backend::CacheStore::kind_of(f);
      if (kind.empty()) throw InvalidInput(cat(f, ": not a pet cache (pet writes SQLite databases with a 'meta' table)"));
      files.emplace_back(f, kind);
    }
  }
  nlohmann::json j = nlohmann::json::array();
  for (const auto& [f, kind] : files) {
    backend::CacheStore store(f, kind);
    if (action == "clear") {
      int64_t n = store.clear();
      std::printf("%s: %s cache, %lld entries removed\n", f.c_str(), kind.c_str(), (long long)n);
      continue;
    }
    nlohmann::json e{{"file", f}, {"kind", kind}, {"entries", store.size()}, {"bytes", std::filesystem::file_size(f)}};
    if (action == "export") {
      nlohmann::json rows = nlohmann::json::object();
      for (const auto& [k, v] : store.all()) {
        try {
          rows[k] = nlohmann::json::parse(v);
        } catch (const std::exception&) {
          rows[k] = v;  // algorithm choices are plain text
        }
      }
      e["rows"] = rows;
    }
    j.push_back(e);
    if (action == "show" && !a.get("json"))
      std::printf("%s: %s cache, %lld entries, %s bytes\n", f.c_str(), kind.c_str(), (long long)store.size(),
                  format_count(double(std::filesystem::file_size(f))).c_str());
  }
  if (action == "show" && files.empty() && !a.get("json")) std::printf("no pet caches (looked for %s and beside it)\n", default_caches()[0].first.c_str());
  if (action != "clear" && (a.get("json") || action == "export")) {
    const std::string out = a.get("json").value_or("-");
    if (out == "-") {
      std::printf("%s\n", j.dump(1).c_str());
    } else {
      check_writable_file(out, "--json");
      std::ofstream(out) << j.dump(1) << "\n";
    }
  }
  return 0;
}

}  // namespace pet::cli
