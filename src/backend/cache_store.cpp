// pet's on-disk caches as SQLite databases (cache_store.hpp).
#include "pet/backend/cache_store.hpp"

#include <sqlite3.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "pet/core/error.hpp"

namespace pet::backend {

namespace fs = std::filesystem;

namespace {
/// A prepared statement, finalized on scope exit.
struct Stmt {
  sqlite3_stmt* s = nullptr;
  Stmt(sqlite3* db, const char* sql) { sqlite3_prepare_v2(db, sql, -1, &s, nullptr); }
  ~Stmt() { sqlite3_finalize(s); }
  explicit operator bool() const { return s != nullptr; }
  void bind(int i, const std::string& v) { sqlite3_bind_text(s, i, v.data(), int(v.size()), SQLITE_TRANSIENT); }
  std::string text(int i) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
    return p ? std::string(p, size_t(sqlite3_column_bytes(s, i))) : std::string();
  }
};

bool is_sqlite_file(const std::string& file) {
  std::ifstream f(file, std::ios::binary);
  char head[16] = {};
  f.read(head, 16);
  return f.gcount() == 16 && std::memcmp(head, "SQLite format 3", 16) == 0;
}

/// Damage: the database cannot be read as one.
bool damaged_code(int rc) { return rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB; }
}  // namespace

CacheStore::CacheStore(std::string file, std::string kind) : file_(std::move(file)), kind_(std::move(kind)) { open(); }

CacheStore::~CacheStore() {
  if (db_) sqlite3_close(db_);
}

void CacheStore::fail(const std::string& what) {
  throw InvalidInput(cat(file_, ": ", what));
}

void CacheStore::exec(const char* sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  std::string msg = err ? err : "";
  sqlite3_free(err);
  if (rc != SQLITE_OK) throw Unsupported(cat(file_, ": the cache database says: ", msg.empty() ? sqlite3_errstr(rc) : msg));
}

void CacheStore::open() {
  std::error_code ec;
  if (fs::is_directory(file_, ec)) fail(cat("is a folder, not a pet ", kind_, " cache"));
  const bool existed = fs::exists(file_, ec) && fs::file_size(file_, ec) > 0;
  if (existed && !is_sqlite_file(file_))
    fail(cat("is not a pet ", kind_, " cache (not an SQLite database); pet does not overwrite files it did not write: give another file"));
  if (auto dir = fs::path(file_).parent_path(); !dir.empty()) fs::create_directories(dir, ec);
  int rc = sqlite3_open_v2(file_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    if (db_) sqlite3_close(db_), db_ = nullptr;
    fail(cat("cannot open the cache: ", msg));
  }
  sqlite3_busy_timeout(db_, 15000);  // another pet process holds the lock: wait, do not fail
  std::string why_damaged;
  {
    Stmt tables(db_, "SELECT name FROM sqlite_master WHERE type = 'table'");
    if (!tables) {
      why_damaged = sqlite3_errmsg(db_);
    } else {
      bool has_meta = false, any = false;
      int step;
      while ((step = sqlite3_step(tables.s)) == SQLITE_ROW) {
        any = true;
        has_meta = has_meta || tables.text(0) == "meta";
      }
      if (damaged_code(step)) why_damaged = sqlite3_errstr(step);
      else if (any && !has_meta) fail(cat("is an SQLite database but not a pet cache; pet does not overwrite files it did not write: give another file"));
    }
  }
  if (why_damaged.empty()) {
    Stmt meta(db_, "SELECT key, value FROM meta");
    std::string kind, version;
    if (meta) {
      while (sqlite3_step(meta.s) == SQLITE_ROW) {
        if (meta.text(0) == "kind") kind = meta.text(1);
        if (meta.text(0) == "schema_version") version = meta.text(1);
      }
      if (!kind.empty() && kind != "pet-" + kind_)
        fail(cat("is a ", kind.rfind("pet-", 0) == 0 ? "pet " + kind.substr(4) : kind, " cache, not a pet ", kind_, " cache"));
      if (!version.empty() && version != std::to_string(kSchemaVersion))
        why_damaged = cat("schema version ", version, " (this pet writes ", kSchemaVersion, ")");
    }
  }
  if (!why_damaged.empty()) {
    sqlite3_close(db_);
    db_ = nullptr;
    const auto t = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    const std::string aside = cat(file_, ".damaged-", t);
    fs::rename(file_, aside, ec);
    fs::remove(file_ + "-wal", ec);
    fs::remove(file_ + "-shm", ec);
    std::fprintf(stderr, "pet: warning: the %s cache %s is damaged (%s); moved aside to %s, starting a new one\n", kind_.c_str(),
                 file_.c_str(), why_damaged.c_str(), aside.c_str());
    open();
    return;
  }
  sqlite3_exec(db_, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);  // may stay on the rollback journal (network file systems)
  exec("BEGIN IMMEDIATE");
  try {
    exec("CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)");
    exec("CREATE TABLE IF NOT EXISTS entries(key TEXT PRIMARY KEY, value TEXT NOT NULL, written INTEGER NOT NULL)");
    Stmt ins(db_, "INSERT OR IGNORE INTO meta(key, value) VALUES (?1, ?2)");
    for (auto [k, v] : {std::pair<std::string, std::string>{"kind", "pet-" + kind_}, {"schema_version", std::to_string(kSchemaVersion)}}) {
      sqlite3_reset(ins.s);
      ins.bind(1, k);
      ins.bind(2, v);
      sqlite3_step(ins.s);
    }
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

std::optional<std::string> CacheStore::get(const std::string& key) {
  Stmt q(db_, "SELECT value FROM entries WHERE key = ?1");
  if (!q) return std::nullopt;
  q.bind(1, key);
  if (sqlite3_step(q.s) == SQLITE_ROW) return q.text(0);
  return std::nullopt;
}

std::map<std::string, std::string> CacheStore::all() {
  std::map<std::string, std::string> m;
  Stmt q(db_, "SELECT key, value FROM entries");
  if (!q) return m;
  while (sqlite3_step(q.s) == SQLITE_ROW) m[q.text(0)] = q.text(1);
  return m;
}

void CacheStore::put(const std::vector<std::pair<std::string, std::string>>& rows) {
  if (rows.empty()) return;
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  exec("BEGIN IMMEDIATE");
  try {
    Stmt ins(db_, "INSERT OR REPLACE INTO entries(key, value, written) VALUES (?1, ?2, ?3)");
    if (!ins) throw Unsupported(cat(file_, ": ", sqlite3_errmsg(db_)));
    for (const auto& [k, v] : rows) {
      sqlite3_reset(ins.s);
      ins.bind(1, k);
      ins.bind(2, v);
      sqlite3_bind_int64(ins.s, 3, now);
      if (int rc = sqlite3_step(ins.s); rc != SQLITE_DONE) throw Unsupported(cat(file_, ": writing the cache: ", sqlite3_errstr(rc)));
    }
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

int64_t CacheStore::size() {
  Stmt q(db_, "SELECT COUNT(*) FROM entries");
  return q && sqlite3_step(q.s) == SQLITE_ROW ? sqlite3_column_int64(q.s, 0) : 0;
}

int64_t CacheStore::clear() {
  int64_t n = size();
  exec("DELETE FROM entries");
  return n;
}

std::string CacheStore::kind_of(const std::string& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec) || !is_sqlite_file(file)) return "";
  sqlite3* db = nullptr;
  std::string kind;
  if (sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    Stmt q(db, "SELECT value FROM meta WHERE key = 'kind'");
    if (q && sqlite3_step(q.s) == SQLITE_ROW) kind = q.text(0);
  }
  sqlite3_close(db);
  return kind.rfind("pet-", 0) == 0 ? kind.substr(4) : "";
}

}  // namespace pet::backend
