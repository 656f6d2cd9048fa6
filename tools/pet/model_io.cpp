#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "cli.hpp"
#include "pet/backend/cache_store.hpp"
#include "pet/eval/memory.hpp"
#include "pet/optimize/optimize.hpp"

namespace pet::cli {

Args::Args(const CommandSpec& spec, const std::vector<std::string>& argv, int positionals) : command(spec.name) {
  std::map<std::string, bool> takes_value;
  for (const auto& o : spec.options) takes_value[o.name] = !o.value.empty();
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(help_text(spec).c_str(), stdout);
      throw HelpShown{};
    }
    if (a == "-o" && takes_value.count("output")) {  // -o OUT: short for --output OUT
      if (i + 1 >= argv.size()) throw InvalidInput("option '-o' needs a value");
      options["output"].push_back(argv[++i]);
      continue;
    }
    if (a.rfind("--", 0) != 0 || a == "--") {
      positional.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    bool has_eq = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_eq = true;
    }
    auto it = takes_value.find(name);
    if (it == takes_value.end()) throw InvalidInput(cat("unknown option '--", name, "' for 'pet ", spec.name, "' (pet ", spec.name, " --help lists them)"));
    if (it->second && !has_eq) {
      if (i + 1 >= argv.size()) throw InvalidInput(cat("option '--", name, "' needs a value"));
      value = argv[++i];
    } else if (!it->second && has_eq) {
      throw InvalidInput(cat("option '--", name, "' takes no value"));
    }
    options[name].push_back(value);
  }
  if (positionals >= 0 && int(positional.size()) != positionals) {
    const std::string usage = cat("usage: pet ", spec.name, spec.positional.empty() ? "" : " ", spec.positional, " [options] (pet ", spec.name, " --help lists them)");
    if (int(positional.size()) > positionals) throw InvalidInput(cat("unexpected argument '", positional[size_t(positionals)], "'; ", usage));
    throw InvalidInput(usage);
  }
}

std::optional<std::string> Args::get(const std::string& name) const {
  auto it = options.find(name);
  if (it == options.end()) return std::nullopt;
  return it->second.back();
}
std::vector<std::string> Args::all(const std::string& name) const {
  auto it = options.find(name);
  return it == options.end() ? std::vector<std::string>{} : it->second;
}
int64_t Args::get_int(const std::string& name, int64_t def) const {
  auto v = get(name);
  if (!v) return def;
  try {
    size_t pos = 0;
    int64_t x = std::stoll(*v, &pos);
    if (pos != v->size()) throw std::invalid_argument("trailing");
    return x;
  } catch (const std::exception&) {
    throw InvalidInput(cat("option '--", name, "' needs an integer, got '", *v, "'"));
  }
}

double Args::get_double(const std::string& name, double def) const {
  auto v = get(name);
  if (!v) return def;
  try {
    size_t pos = 0;
    double x = std::stod(*v, &pos);
    if (pos != v->size() || !std::isfinite(x)) throw std::invalid_argument("trailing");
    return x;
  } catch (const std::exception&) {
    throw InvalidInput(cat("option '--", name, "' needs a number, got '", *v, "'"));
  }
}

namespace {
std::pair<std::string, std::string> split_eq(const std::string& s, const char* opt) {
  auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0) throw InvalidInput(cat("option '--", opt, "' expects NAME=VALUE, got '", s, "'"));
  return {s.substr(0, eq), s.substr(eq + 1)};
}
int64_t parse_dim(const std::string& s, const std::string& whole) {
  try {
    size_t pos = 0;
    int64_t v = std::stoll(s, &pos);
    if (pos == s.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw InvalidInput(cat("'", whole, "' is not a list of non-negative sizes like 1x3x224x224"));
}
}  // namespace

onnx::ImportOptions import_options(const Args& a) {
  onnx::ImportOptions o;
  for (const auto& s : a.all("shape")) {
    auto [name, val] = split_eq(s, "shape");
    Shape sh;
    size_t start = 0;
    while (true) {
      size_t x = val.find('x', start);
      sh.push_back(parse_dim(val.substr(start, x - start), val));
      if (x == std::string::npos) break;
      start = x + 1;
    }
    o.input_shapes[name] = sh;
  }
  for (const auto& s : a.all("dim")) {
    auto [name, val] = split_eq(s, "dim");
    o.dims[name] = parse_dim(val, val);
  }
  o.default_dim = a.get_int("default-dim", 1);
  return o;
}

namespace {
std::string format_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (b >= 1000 && u < 5) b /= 1000, ++u;
  char buf[64];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", b, units[u]);
  return buf;
}
}  // namespace

int64_t memory_limit(const Args& a) {
  if (auto v = a.get("memory-limit")) {
    std::string s = *v;
    double mult = 1;
    if (!s.empty()) {
      char u = char(std::toupper(static_cast<unsigned char>(s.back())));
      if (u == 'K' || u == 'M' || u == 'G' || u == 'T') {
        mult = u == 'K' ? 1e3 : u == 'M' ? 1e6 : u == 'G' ? 1e9 : 1e12;
        s.pop_back();
      }
    }
    try {
      size_t pos = 0;
      double x = std::stod(s, &pos);
      if (pos == s.size() && x > 0 && std::isfinite(x)) return int64_t(x * mult);
    } catch (const std::exception&) {
    }
    throw InvalidInput(cat("option '--memory-limit' needs a size like 512M or 8G, got '", *v, "'"));
  }
  const double ram = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGE_SIZE));
  return int64_t(0.8 * ram);
}

onnx::Model load_model(const Args& a, const std::string& path, const onnx::ImportOptions& opt) {
  const int64_t limit = memory_limit(a);
  onnx::Model m = onnx::import_file(path, opt);
  const Graph& g = m.graph;
  const MemoryEstimate est = estimate_memory(g);
  const int64_t peak = est.peak_bytes;
  const TensorId largest = est.largest;
  if (peak > limit) {
    const TensorInfo& big = g.tensor(largest);
    throw Unsupported(cat(path, ": the program needs about ", format_bytes(double(peak)), " of tensors at once (the largest, '", big.name,
                          "', is ", dtype_name(big.type.dtype), big.type.shape, ", ", format_bytes(double(tensor_bytes(big.type))),
                          "), more than the memory limit of ", format_bytes(double(limit)),
                          a.get("memory-limit") ? " (--memory-limit)" : " (80 % of RAM; --memory-limit sets it)"));
  }
  return m;
}

int threads_option(const Args& a) {
  if (!a.get("threads")) return 0;
  const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t most = std::max<int64_t>(64, 4 * hw);
  int64_t t = a.get_int("threads", 0);
  if (t < 1 || t > most)
    throw InvalidInput(cat("--threads ", t, ": choose 1 to ", most, " (this machine has ", hw, " hardware thread", hw == 1 ? "" : "s", ")"));
  return int(t);
}

namespace {
/// Why a file cannot be created (or replaced) at `p`, found by trying: its folder is created
/// and the file opened for writing without truncating it (a new one is removed again).
/// Permission bits alone do not tell (root, /proc, read-only mounts).
std::string unwritable_reason(const std::filesystem::path& p) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(p, ec)) return "is a folder";
  fs::path dir = p.parent_path();
  if (!dir.empty()) {
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir)) return cat("cannot be created: its folder '", dir.string(), "' cannot be made (", ec ? ec.message() : "not a folder", ")");
  }
  const bool existed = fs::exists(p, ec);
  int fd = ::open(p.c_str(), O_WRONLY | (existed ? O_APPEND : O_CREAT | O_EXCL), 0644);
  if (fd < 0) return cat(existed ? "cannot be written (" : "cannot be created (", std::strerror(errno), ")");
  ::close(fd);
  if (!existed) fs::remove(p, ec);
  return "";
}
}  // namespace

void check_writable_file(const std::string& path, const std::string& option) {
  if (path.empty()) throw InvalidInput(cat(option, " needs a file name"));
  std::string why = unwritable_reason(path);
  if (!why.empty()) throw InvalidInput(cat(option, " '", path, "' ", why));
}

std::string cache_option(const Args& a, const std::string& name, const std::string& def, const std::string& kind) {
  auto v = a.get(name);
  std::string path = v.value_or(def);
  if (path == "none") return "";
  std::string why = unwritable_reason(path);
  if (why.empty()) {
    try {
      backend::CacheStore check(path, kind);
    } catch (const InvalidInput& e) {
      throw InvalidInput(cat("--", name, " ", e.what()));
    }
    return path;
  }
  if (v) throw InvalidInput(cat("--", name, " '", path, "' ", why));
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  throw InvalidInput(cat("the default cache file '", path, "' (from ", xdg && *xdg ? "XDG_CACHE_HOME" : "HOME", ") ", why,
                         "; set --", name, " FILE or --", name, " none"));
}

void prepare_dir(const std::string& dir, const std::string& option) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) throw InvalidInput(cat(option, " '", dir, "' is a file, not a folder"));
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) throw InvalidInput(cat(option, " '", dir, "' cannot be created: ", ec.message()));
  if (::access(dir.c_str(), W_OK) != 0) throw InvalidInput(cat(option, " '", dir, "' is not writable"));
}

double seconds_option(const Args& a, const std::string& name, double def, bool zero_ok) {
  double s = a.get_double(name, def);
  if (s < 0 || (!zero_ok && s == 0))
    throw InvalidInput(cat("--", name, " needs ", zero_ok ? "zero or more" : "a positive number of", " seconds, got ", *a.get(name)));
  return s;
}

Graph subprogram(const Graph& g, size_t k) {
  auto subs = multilinear_subprograms(g);
  if (k < 1 || k > subs.size())
    throw InvalidInput(cat("--extract ", k, ": the model has ", subs.size(), " multilinear subprograms (1 to ", subs.size(), "; pet info lists them)"));
  const optimize::Window w = optimize::make_window(g, subs[k - 1]);
  Graph p = optimize::extract(g, w);
  p.name = cat(g.name, "-subprogram", k);
  return p;
}

void require_multilinear_model(const Graph& g, const std::string& path, const std::string& command) {
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (is_multilinear(g.node(n).op)) continue;
    auto subs = multilinear_subprograms(g);
    std::string list;
    for (size_t i = 0; i < subs.size() && i < 8; ++i) {
      std::string ops;
      for (size_t j = 0; j < subs[i].size() && j < 3; ++j) ops += cat(j ? " " : "", op_name(g.node(subs[i][j]).op));
      if (subs[i].size() > 3) ops += cat(" ... (", subs[i].size(), " ops)");
      list += cat(i ? "; " : "", "#", i + 1, " ", ops, " from '", g.node(subs[i][0]).name, "'");
    }
    if (subs.size() > 8) list += cat("; ... (", subs.size(), " in all)");
    throw Unsupported(cat(path, ": node '", g.node(n).name, "' (", op_name(g.node(n).op), ") is not multilinear; pet ", command,
                          " takes one multilinear program. This model has ", subs.size(), " multilinear subprograms", subs.empty() ? "" : ": ",
                          list, subs.empty() ? "" : cat(". Write one out with: pet info ", path, " --extract K -o SUB.onnx")));
  }
  for (TensorId t : g.outputs())  // point evaluation computes outputs from inputs and weights
    if (g.tensor(t).is_constant())
      throw Unsupported(cat(path, ": output '", g.tensor(t).name, "' is a constant (",
                            numel(g.type(t).shape) == 0 ? cat("empty, shape ", g.type(t).shape) : "computed from shapes or constants alone",
                            "); pet ", command, " takes a program whose outputs are computed from its inputs and weights"));
}

std::string format_count(double v) {
  const char* units[] = {"", " K", " M", " G", " T"};
  int u = 0;
  while (std::abs(v) >= 1000 && u < 4) v /= 1000, ++u;
  char buf[64];
  std::snprintf(buf, sizeof buf, u ? "%.2f%s" : "%.0f%s", v, units[u]);
  return buf;
}

}  // namespace pet::cli
