#pragma once
// Shared pieces of the `pet` command: option parsing and model loading.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pet/onnx/onnx.hpp"

namespace pet::cli {

/// Parsed command line of one subcommand: positionals and --options (with or without '=').
struct Args {
  std::string command;
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> options;

  /// `spec` lists the options the command accepts; flags (no value) end with '!'.
  Args(const std::string& command, const std::vector<std::string>& argv, const std::vector<std::string>& spec);
  bool flag(const std::string& name) const { return options.count(name) > 0; }
  std::optional<std::string> get(const std::string& name) const;
  std::vector<std::string> all(const std::string& name) const;
  int64_t get_int(const std::string& name, int64_t def) const;
};

/// Import options from --shape NAME=AxBxC, --dim NAME=N, --default-dim N.
onnx::ImportOptions import_options(const Args& a);
std::string format_count(double v);  ///< 1.23 K / M / G

int cmd_info(const std::vector<std::string>& argv);
int cmd_run(const std::vector<std::string>& argv);
int cmd_verify(const std::vector<std::string>& argv);
int cmd_mutate(const std::vector<std::string>& argv);

}  // namespace pet::cli
