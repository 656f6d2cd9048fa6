#pragma once
/// pet's on-disk caches (op profiler timings, cpu algorithm choices, optimizer decisions):
/// one SQLite database per file (WAL mode), a `meta` table naming the kind of cache and the
/// schema version, an `entries` table of key -> value (JSON text) with the time written.
///
/// - Never overwrites a file pet did not write: a file that is not an SQLite database, or a
///   database without pet's `meta` of this kind, is refused (InvalidInput naming the file).
/// - A damaged pet cache (unreadable, or another schema version) is moved aside to
///   FILE.damaged-<seconds since 1970> with a warning on stderr, and a new one is made.
/// - Several pet processes share one cache without losing entries: each write is one
///   transaction of INSERT OR REPLACE rows (not a rewrite of the whole file), and readers and
///   writers wait for each other (busy timeout) instead of failing.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

struct sqlite3;

namespace pet::backend {

class CacheStore {
 public:
  static constexpr int kSchemaVersion = 1;
  /// Opens (creating it and its folder when missing) the cache `file` of `kind`
  /// ("opcache", "algorithms", "decisions").
  CacheStore(std::string file, std::string kind);
  ~CacheStore();
  CacheStore(const CacheStore&) = delete;
  CacheStore& operator=(const CacheStore&) = delete;

  const std::string& file() const { return file_; }
  const std::string& kind() const { return kind_; }
  std::optional<std::string> get(const std::string& key);
  std::map<std::string, std::string> all();
  /// Writes the rows in one transaction.
  void put(const std::vector<std::pair<std::string, std::string>>& rows);
  void put(const std::string& key, const std::string& value) { put({{key, value}}); }
  /// Removes every entry; returns how many there were.
  int64_t clear();
  int64_t size();

  /// The kind of the pet cache in `file` ("" when it is not one), without changing it.
  static std::string kind_of(const std::string& file);

 private:
  void open();
  void exec(const char* sql);
  [[noreturn]] void fail(const std::string& what);
  std::string file_, kind_;
  sqlite3* db_ = nullptr;
};

}  // namespace pet::backend
