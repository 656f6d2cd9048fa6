#include <cmath>
#include <cstdio>

#include "cli.hpp"

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
  if (positionals >= 0 && int(positional.size()) != positionals)
    throw InvalidInput(cat("usage: pet ", spec.name, " ", spec.positional, " [options] (pet ", spec.name, " --help lists them)"));
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

std::string format_count(double v) {
  const char* units[] = {"", " K", " M", " G", " T"};
  int u = 0;
  while (std::abs(v) >= 1000 && u < 4) v /= 1000, ++u;
  char buf[64];
  std::snprintf(buf, sizeof buf, u ? "%.2f%s" : "%.0f%s", v, units[u]);
  return buf;
}

}  // namespace pet::cli
