// pet run MODEL: execute (and time, and check) a model on a backend.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "pet/core/stats.hpp"
#include "pet/core/parallel.hpp"
#include "pet/core/rng.hpp"
#include "pet/eval/compare.hpp"
#include "pet/backend/backend.hpp"
#include "pet/transform/pass.hpp"

namespace pet::cli {

int cmd_run(const std::vector<std::string>& argv) {
  Args a(command_spec("run"), argv);
  if (a.flag("list-passes")) {
    for (const auto& [name, what] : transform::pass_catalog()) std::printf("%-29s %s\n", name.c_str(), what.c_str());
    return 0;
  }
  if (a.positional.size() != 1) throw InvalidInput("usage: pet run MODEL.onnx [options] (pet run --help lists them)");
  const std::string path = a.positional[0];
  const std::string backend = a.get("backend").value_or(backend::available_backends().front());
  backend::BackendOptions bopt;
  bopt.tf32 = a.flag("tf32");
  auto be = backend::make_backend(backend, bopt);
  const int64_t repeat = a.get_int("repeat", 1);
  if (repeat < 1) throw InvalidInput("--repeat needs a positive count");
  const int threads = threads_option(a);
  if (threads > 0) set_num_threads(threads);

  auto check_dir = a.get("check");
  auto inputs_dir = a.get("inputs");
  if (check_dir && !inputs_dir) inputs_dir = check_dir;
  if (auto jf = a.get("json")) check_writable_file(*jf, "--json");
  if (auto dir = a.get("save")) prepare_dir(*dir, "--save");
  onnx::ImportOptions opt = import_options(a);
  std::vector<onnx::NamedTensor> given;
  if (inputs_dir) {
    given = onnx::read_test_data(*inputs_dir, "input");
    for (size_t k = 0; k < given.size(); ++k) {
      opt.ordered_input_values.push_back({given[k].dtype, to_constant(given[k].value)});
      opt.ordered_input_sources.push_back((std::filesystem::path(*inputs_dir) / cat("input_", k, ".pb")).string());
      opt.ordered_input_names.push_back(given[k].name);
    }
  }
  onnx::Model m = load_model(a, path, opt);
  const Graph& g = m.graph;
  if (inputs_dir && given.size() != m.declared_inputs.size())
    throw InvalidInput(cat(*inputs_dir, " holds ", given.size(), " inputs but ", path, " declares ", m.declared_inputs.size()));

  // A float16 or bfloat16 model is computed in float32 (onnx::Model::narrow_float): its
  // results differ from a computation rounded to that type (ONNX Runtime's) by more than
  // float32's, and --check's default tolerance is that type's.
  const onnx::Tolerances tol = onnx::narrow_tolerance(m.narrow_float, {1e-4, 1e-3});
  const double atol = a.get_double("atol", tol.atol), rtol = a.get_double("rtol", tol.rtol);
  auto declared_narrow = [&](const std::string& name) {
    auto it = m.narrow_io.find(name);
    return it == m.narrow_io.end() ? 0 : it->second;
  };
  auto narrow_of = [&](TensorId t) { return declared_narrow(g.tensor(t).name); };
  // float16, bfloat16 and float32 are all float32 here; an input file of another of them than
  // the model declares is refused, as ONNX Runtime refuses it
  for (size_t k = 0; k < given.size(); ++k) {
    const int32_t want = declared_narrow(m.declared_inputs[k]);
    if (given[k].dtype == DType::Float32 && given[k].narrow_float != want) {
      auto type_name = [](int32_t narrow) { return narrow ? narrow_float_name(narrow) : std::string_view("float32"); };
      throw InvalidInput(cat(opt.ordered_input_sources[k], " holds ", type_name(given[k].narrow_float), " values but ", path, " declares input '",
                             m.declared_inputs[k], "' as ", type_name(want)));
    }
  }
  std::vector<Value<float>> inputs;
  Rng rng(uint64_t(a.get_int("seed", 1)));
  for (TensorId t : g.inputs()) {
    const std::string& name = g.tensor(t).name;
    if (inputs_dir) {
      auto pos = std::find(m.declared_inputs.begin(), m.declared_inputs.end(), name) - m.declared_inputs.begin();
      inputs.push_back(given[size_t(pos)].value);
    } else {  // (a float16 or bfloat16 input: values of that type, as --save writes them)
      inputs.push_back(onnx::round_to_narrow(backend::random_value(g.type(t), rng), narrow_of(t)));
    }
  }

  backend::CompileOptions copt;
  copt.threads = threads;
  copt.profile = a.flag("profile");
  copt.conv_algorithm = a.get("conv-algorithm").value_or("auto");
  copt.algorithm_cache = cache_option(a, "algorithm-cache", backend::Profiler::default_algorithm_cache_file(), "algorithms");
  copt.conv_layout = a.get("conv-layout").value_or("auto");
  copt.int8 = !a.flag("no-int8");
  copt.disabled_passes = a.get("disable-pass").value_or("");
  copt.print_after = a.get("print-after").value_or("");
  if (copt.conv_algorithm != "auto" && copt.conv_algorithm != "direct" && copt.conv_algorithm != "winograd" &&
      copt.conv_algorithm != "onednn-winograd")
    throw InvalidInput(cat("--conv-algorithm '", copt.conv_algorithm, "': choose auto, direct, winograd or onednn-winograd"));
  if (copt.conv_layout != "auto" && copt.conv_layout != "blocked" && copt.conv_layout != "plain")
    throw InvalidInput(cat("--conv-layout '", copt.conv_layout, "': choose auto, blocked or plain"));
  using clock = std::chrono::steady_clock;
  auto c0 = clock::now();
  // Errors found while compiling or running (a Gather index out of range, ...) name the file.
  auto with_file = [&](auto&& f) {
    try {
      return f();
    } catch (const InvalidInput& e) {
      throw InvalidInput(cat(path, ": ", e.what()));
    } catch (const Unsupported& e) {
      throw Unsupported(cat(path, ": ", e.what()));
    }
  };
  auto exe = with_file([&] { return be->compile(g, copt); });
  const double compile_ms = std::chrono::duration<double, std::milli>(clock::now() - c0).count();
  if (a.flag("plan")) std::fputs(exe->describe().c_str(), stdout);
  std::vector<double> times;
  std::vector<bool> disturbed;
  std::vector<Value<float>> outputs;
  if (repeat > 1) outputs = with_file([&] { return exe->run(inputs); });  // warm-up
  for (int64_t r = 0; r < repeat; ++r) {
    backend::DisturbanceProbe probe;  // was a thread of pet preempted during the run?
    if (repeat > 1) {  // the outputs came from the warm-up; the backend times its computation (cuda: no transfers)
      times.push_back(with_file([&] { return exe->timed_run(inputs); }));
    } else {
      auto t0 = clock::now();
      outputs = with_file([&] { return exe->run(inputs); });
      times.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
    }
    disturbed.push_back(probe.disturbed());
  }
  // On a busy machine a preempted run measures the scheduler (a 2-thread primitive waits at
  // its barrier for the descheduled thread): the median is of the undisturbed runs.
  std::vector<double> sorted;
  for (size_t r = 0; r < times.size(); ++r)
    if (!disturbed[r]) sorted.push_back(times[r]);
  const int64_t n_disturbed = int64_t(times.size() - sorted.size());
  if (sorted.empty()) sorted = times;
  std::sort(sorted.begin(), sorted.end());
  if (a.flag("profile")) std::fputs(exe->describe().c_str(), stdout);
  const double median = median_of_sorted(sorted);

  for (const auto& note : m.notes) std::fprintf(stderr, "note: %s\n", note.c_str());
  std::printf("%s on %s: median %.3f ms, min %.3f ms over %lld run%s (%d thread%s)\n", path.c_str(), backend.c_str(), median,
              sorted.front(), (long long)sorted.size(), sorted.size() == 1 ? "" : "s", num_threads(), num_threads() == 1 ? "" : "s");
  if (n_disturbed > 0 && n_disturbed < repeat)
    std::printf("  %lld of %lld runs were preempted by other work on the machine and are left out of the median\n", (long long)n_disturbed,
                (long long)repeat);
  else if (n_disturbed > 0 && repeat > 1)
    std::printf("  warning: every run was preempted by other work on the machine; these times measure the scheduler, not pet\n");
  nlohmann::json j;
  j["model"] = path;
  j["backend"] = backend;
  j["median_ms"] = median;
  j["min_ms"] = sorted.front();
  j["runs"] = repeat;
  j["times_ms"] = times;
  j["disturbed_runs"] = n_disturbed;
  j["undisturbed_runs"] = int64_t(times.size()) - n_disturbed;
  j["threads"] = num_threads();
  j["compile_ms"] = compile_ms;
  j["outputs"] = nlohmann::json::array();
  for (size_t k = 0; k < outputs.size(); ++k)
    j["outputs"].push_back({{"name", g.tensor(g.outputs()[k]).name}, {"shape", value_shape(outputs[k])}});

  bool ok = true;
  j["check"] = nullptr;
  if (check_dir) {
    auto refs = onnx::read_test_data(*check_dir, "output");
    if (refs.size() != outputs.size())
      throw InvalidInput(cat(*check_dir, " holds ", refs.size(), " reference outputs but the model has ", outputs.size()));
    for (size_t k = 0; k < outputs.size(); ++k) {
      Comparison c = compare(outputs[k], refs[k].value, atol, rtol, Tolerance::WholeTensor, is_int8(g.type(g.outputs()[k]).dtype));
      const std::string& name = g.tensor(g.outputs()[k]).name;
      if (!c.problem.empty())
        std::printf("check %-20s FAIL: %s\n", name.c_str(), c.problem.c_str());
      else if (c.nan_out != c.nan_ref || (c.nan_out && !c.pass))
        std::printf("check %-20s FAIL: NaN in %lld elements of the output and %lld of the reference (%lld elements differ)\n", name.c_str(),
                    (long long)c.nan_out, (long long)c.nan_ref, (long long)c.mismatches);
      else
        std::printf("check %-20s %s  max|out-ref| %.3g  max|ref| %.3g  tolerance %.3g%s\n", name.c_str(), c.pass ? "pass" : "FAIL",
                    c.max_abs_err, c.max_abs_ref, atol + rtol * c.max_abs_ref,
                    c.pass ? "" : cat("  (", c.mismatches, " elements outside)").c_str());
      j["errors"].push_back({{"name", name}, {"max_abs_err", c.max_abs_err}, {"max_abs_ref", c.max_abs_ref}, {"pass", c.pass}});
      ok = ok && c.pass;
    }
    j["check"] = ok ? "pass" : "fail";
  }
  if (auto dir = a.get("save")) {
    std::filesystem::create_directories(*dir);
    for (size_t k = 0; k < outputs.size(); ++k) {
      TensorId t = g.outputs()[k];
      onnx::write_tensor_file((std::filesystem::path(*dir) / cat("output_", k, ".pb")).string(),
                              {g.tensor(t).name, g.type(t).dtype, outputs[k], narrow_of(t)});
    }
    for (size_t k = 0; k < inputs.size(); ++k) {
      TensorId t = g.inputs()[k];
      onnx::write_tensor_file((std::filesystem::path(*dir) / cat("input_", k, ".pb")).string(),
                              {g.tensor(t).name, g.type(t).dtype, inputs[k], narrow_of(t)});
    }
  }
  if (auto jf = a.get("json")) {
    std::ofstream f(*jf);
    if (!f) throw InvalidInput(cat("cannot write '", *jf, "'"));
    f << j.dump(2) << "\n";
  }
  return ok ? 0 : 1;
}

}  // namespace pet::cli
