#pragma once
// Shared pieces of the `pet` command: option parsing and model loading.
#include <map>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "pet/onnx/onnx.hpp"

namespace pet::cli {

/// One option of a command: its name, the placeholder of its value (empty: a flag) and one
/// line of help.
struct Option {
  std::string name, value, help;
};
/// A command's option table (tools/pet/commands.cpp): parsing, --help and the overview come
/// from it.
struct CommandSpec {
  std::string name, positional, summary;
  std::vector<Option> options;
};
const std::vector<CommandSpec>& commands();
const CommandSpec& command_spec(std::string_view name);
std::string help_text(const CommandSpec& c);
std::string usage_text();

/// `--help` was given: the command's help text was printed (exit 0).
struct HelpShown {};

/// Parsed command line of one subcommand: positionals and --options (with or without '=').
struct Args {
  std::string command;
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> options;

  /// Parses against the command's option table; `--help` prints its help and throws HelpShown;
  /// `positionals` is how many positional arguments it needs (-1: any number).
  Args(const CommandSpec& spec, const std::vector<std::string>& argv, int positionals = -1);
  bool flag(const std::string& name) const { return options.count(name) > 0; }
  std::optional<std::string> get(const std::string& name) const;
  std::vector<std::string> all(const std::string& name) const;
  int64_t get_int(const std::string& name, int64_t def) const;
  double get_double(const std::string& name, double def) const;
};

/// Import options from --shape NAME=AxBxC, --dim NAME=N, --default-dim N.
onnx::ImportOptions import_options(const Args& a);
/// Imports `path` and refuses (Unsupported, exit 3) a program whose tensors would not fit
/// in --memory-limit (default 80 % of RAM) before anything is allocated.
onnx::Model load_model(const Args& a, const std::string& path, const onnx::ImportOptions& opt);
/// Bytes of --memory-limit (SIZE: 512M, 8G, ...; default 80 % of physical memory).
int64_t memory_limit(const Args& a);
/// --threads N: 0 when absent (all cores), else 1 to a sane maximum; anything else is an error.
int threads_option(const Args& a);
/// A cache-file option: "none" -> "", absent -> `def`; the path is checked to be usable
/// (not a folder, its folder creatable) with an error naming the option (or the
/// environment variable behind the default) and the path, and opened as a pet cache of
/// `kind` (a file that is not one is refused here, before any work).
std::string cache_option(const Args& a, const std::string& name, const std::string& def, const std::string& kind);
/// Checks that a file option's path can be written (before any long work), naming the option.
void check_writable_file(const std::string& path, const std::string& option);
/// Creates a folder option's folder; errors name the option and the path.
void prepare_dir(const std::string& dir, const std::string& option);
/// Seconds option: a number >= 0 (> 0 unless `zero_ok`).
double seconds_option(const Args& a, const std::string& name, double def, bool zero_ok);
std::string format_count(double v);  ///< 1.23 K / M / G
/// Multilinear subprogram `k` (1-based, as `pet info` lists them) of g as a standalone program.
Graph subprogram(const Graph& g, size_t k);
/// Throws Unsupported (exit 3) when g is not one multilinear program, saying which
/// subprograms it has and how to write one out (for pet mutate / pet verify).
void require_multilinear_model(const Graph& g, const std::string& path, const std::string& command);

int cmd_info(const std::vector<std::string>& argv);
int cmd_run(const std::vector<std::string>& argv);
int cmd_verify(const std::vector<std::string>& argv);
int cmd_mutate(const std::vector<std::string>& argv);
int cmd_optimize(const std::vector<std::string>& argv);
int cmd_cache(const std::vector<std::string>& argv);
int cmd_ops(const std::vector<std::string>& argv);

}  // namespace pet::cli
