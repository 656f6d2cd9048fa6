// The pass pipeline (include/pet/transform/pass.hpp).
#include "pet/transform/pass.hpp"

#include <chrono>
#include <cstdio>

#include "passes.hpp"

namespace pet::transform {

Pipeline::Pipeline(const std::vector<std::string>& names) {
  for (const auto& n : names) add(make_pass(n));
}

Pipeline& Pipeline::add(std::unique_ptr<Pass> p) {
  passes_.push_back(std::move(p));
  return *this;
}

std::vector<std::string> Pipeline::names() const {
  std::vector<std::string> v;
  for (const auto& p : passes_) v.emplace_back(p->name());
  return v;
}

std::vector<PassRecord> Pipeline::run(Graph& g, const PipelineOptions& opt) const {
  auto known = [&](std::string_view n) {
    for (const auto& p : passes_)
      if (p->name() == n) return true;
    return false;
  };
  auto check = [&](const auto& set, const char* option) {
    for (const auto& n : set)
      if (n != "all" && !known(n))
        throw InvalidInput(cat(option, ": no pass named '", n, "' in this pipeline (it has ", names(), ")"));
  };
  check(opt.disabled, "--disable-pass");
  check(opt.print_after, "--print-after");
  auto log = opt.log ? opt.log : [](const std::string& s) { std::fputs(s.c_str(), stderr); };
  std::vector<PassRecord> out;
  for (const auto& p : passes_) {
    PassRecord r;
    r.name = std::string(p->name());
    if (opt.disabled.count(r.name)) {
      r.skipped = true;
      out.push_back(r);
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    r.stats = p->run(g);
    g.compact();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (opt.print_after.count(r.name) || opt.print_after.count("all"))
      log(cat("// after ", r.name, ": ", r.stats.changed, " changed", r.stats.note.empty() ? "" : " (" + r.stats.note + ")", "\n", to_text(g)));
    out.push_back(r);
  }
  return out;
}

std::unique_ptr<Pass> make_pass(std::string_view name) {
  for (auto& make : detail::builtin_passes()) {
    auto p = make();
    if (p->name() == name) return p;
  }
  std::vector<std::string> names;
  for (const auto& [n, d] : pass_catalog()) names.push_back(n);
  throw InvalidInput(cat("no pass named '", name, "' (passes: ", names, ")"));
}

std::vector<std::pair<std::string, std::string>> pass_catalog() {
  std::vector<std::pair<std::string, std::string>> v;
  for (auto& make : detail::builtin_passes()) {
    auto p = make();
    v.emplace_back(std::string(p->name()), std::string(p->description()));
  }
  return v;
}

Pipeline backend_pipeline() {
  return Pipeline({"einsum-lowering", "constant-folding", "gather-to-slice", "bn-folding", "pad-folding", "channel-scale-folding", "layer-norm-canonicalization", "gelu-canonicalization", "dead-code"});
}

std::set<std::string, std::less<>> pass_list(const std::string& text) {
  std::set<std::string, std::less<>> s;
  size_t a = 0;
  while (a <= text.size()) {
    size_t b = text.find(',', a);
    if (b == std::string::npos) b = text.size();
    if (b > a) s.insert(text.substr(a, b - a));
    a = b + 1;
  }
  return s;
}

}  // namespace pet::transform
