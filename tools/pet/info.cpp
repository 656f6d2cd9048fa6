// pet info MODEL: inputs, outputs, op counts, FLOPs, parameters, multilinear subprograms.
// pet ops: the ONNX op types the importer maps.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>
#include <nlohmann/json.hpp>

#include "cli.hpp"

namespace pet::cli {

int cmd_info(const std::vector<std::string>& argv) {
  Args a(command_spec("info"), argv, 1);
  const std::string path = a.positional[0];
  if (auto jf = a.get("json")) check_writable_file(*jf, "--json");
  if (a.get("extract") && !a.get("output")) throw InvalidInput("--extract K needs -o SUB.onnx (where the subprogram goes)");
  if (auto o = a.get("output")) check_writable_file(*o, "-o");
  onnx::Model m = load_model(a, path, import_options(a));
  const Graph& g = m.graph;
  if (a.get("extract")) {
    const int64_t k = a.get_int("extract", 0);
    Graph sub = subprogram(g, size_t(std::max<int64_t>(k, 0)));
    onnx::export_file(sub, *a.get("output"));
    std::printf("%s: multilinear subprogram #%lld (%d ops, inputs", a.get("output")->c_str(), (long long)k, sub.num_nodes());
    for (TensorId t : sub.inputs()) std::printf(" %s", to_string(sub.type(t)).c_str());
    std::printf(") written; try pet mutate %s --out-dir DIR\n", a.get("output")->c_str());
    return 0;
  }

  std::map<std::string, int> op_counts;
  int64_t flops = 0, params = 0, param_bytes = 0;
  std::vector<int64_t> node_flops(size_t(g.num_nodes()));
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    op_counts[std::string(op_name(g.node(n).op))]++;
    node_flops[size_t(n)] = op_flops(g.node(n).op, g.input_types(n), g.output_types(n));
    flops = flop_add(flops, node_flops[size_t(n)]);
  }
  int constants = 0;
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (g.tensor(t).is_constant()) {
      ++constants;
      int64_t n = numel(g.type(t).shape);
      const DType dt = g.type(t).dtype;
      if (is_float(dt) || is_int8(dt)) params += n;  // weights, quantized ones included
      // bytes as the file stores them (pet holds every integer as int64)
      param_bytes += n * (is_float(dt) || dt == DType::Int32 ? 4 : dt == DType::Int64 ? 8 : 1);
    }
  auto subs = multilinear_subprograms(g);
  // A subprogram whose inputs are all constants (PyTorch's Identity on a shared weight) is
  // folded before any backend runs: counted, not listed.
  auto constant_only = [&](const std::vector<NodeId>& s) {
    std::set<TensorId> inside;
    for (NodeId n : s)
      for (TensorId t : g.node(n).outputs) inside.insert(t);
    for (NodeId n : s)
      for (TensorId t : g.node(n).inputs)
        if (!inside.count(t) && !g.tensor(t).is_constant()) return false;
    return true;
  };

  nlohmann::json j;
  j["model"] = path;
  j["graph"] = g.name;
  j["opset"] = m.opset;
  // the type the file declares where pet computes it as another (float16, bfloat16: float32)
  auto declared = [&](TensorId t) -> std::string {
    auto it = m.narrow_io.find(g.tensor(t).name);
    return it == m.narrow_io.end() ? "" : it->second == onnx::kFloat16 ? "float16" : "bfloat16";
  };
  for (const auto& [key, list] : {std::pair{"inputs", &g.inputs()}, std::pair{"outputs", &g.outputs()}})
    for (TensorId t : *list) {
      nlohmann::json e{{"name", g.tensor(t).name}, {"dtype", dtype_name(g.type(t).dtype)}, {"shape", g.type(t).shape}};
      if (const std::string d = declared(t); !d.empty()) e["declared_dtype"] = d;
      j[key].push_back(e);
    }
  j["nodes"] = g.num_nodes();
  j["constants"] = constants;
  j["parameters"] = params;
  j["flops"] = flops;
  j["op_counts"] = op_counts;
  j["notes"] = m.notes;
  j["multilinear_subprograms"] = nlohmann::json::array();
  for (const auto& s : subs) {
    nlohmann::json sj;
    int64_t f = 0;
    for (NodeId n : s) {
      sj["nodes"].push_back(g.node(n).name);
      sj["ops"].push_back(std::string(op_name(g.node(n).op)));
      f = flop_add(f, node_flops[size_t(n)]);
    }
    sj["flops"] = f;
    sj["constant_inputs_only"] = constant_only(s);
    j["multilinear_subprograms"].push_back(sj);
  }

  if (auto jf = a.get("json")) {
    std::ofstream f(*jf);
    if (!f) throw InvalidInput(cat("cannot write '", *jf, "'"));
    f << j.dump(2) << "\n";
  }
  if (a.flag("quiet")) return 0;

  std::printf("model    %s (graph '%s', opset %lld)\n", path.c_str(), g.name.c_str(), (long long)m.opset);
  for (const auto& [what, list] : {std::pair{"input ", &g.inputs()}, std::pair{"output", &g.outputs()}})
    for (TensorId t : *list) {
      const std::string d = declared(t);
      std::printf("%s   %-24s %s%s\n", what, g.tensor(t).name.c_str(), to_string(g.type(t)).c_str(),
                  d.empty() ? "" : cat(" (", d, " in the file)").c_str());
    }
  for (const auto& note : m.notes) std::printf("note     %s\n", note.c_str());
  std::printf("nodes    %d\n", g.num_nodes());
  std::printf("params   %s (%s bytes in %d constants)\n", format_count(double(params)).c_str(), format_count(double(param_bytes)).c_str(), constants);
  std::printf("FLOPs    %s\n", format_count(double(flops)).c_str());
  std::string ops;
  std::vector<std::pair<int, std::string>> sorted;
  for (const auto& [k, v] : op_counts) sorted.emplace_back(-v, k);
  std::sort(sorted.begin(), sorted.end());
  for (const auto& [v, k] : sorted) ops += cat(ops.empty() ? "" : ", ", k, " ", -v);
  std::printf("ops      %s\n", ops.c_str());
  std::printf("multilinear subprograms (cut at non-linear ops): %zu\n", subs.size());
  size_t folded = 0;
  for (size_t i = 0; i < subs.size(); ++i) {
    if (constant_only(subs[i])) {
      ++folded;
      continue;
    }
    std::string list;
    int64_t f = 0;
    for (size_t k = 0; k < subs[i].size(); ++k) {
      if (k < 6) list += cat(k ? ", " : "", op_name(g.node(subs[i][k]).op));
      f = flop_add(f, node_flops[size_t(subs[i][k])]);
    }
    if (subs[i].size() > 6) list += cat(", ... (", subs[i].size(), " ops)");
    std::printf("  #%-3zu %-44s %9s FLOPs  first node '%s'\n", i + 1, list.c_str(), format_count(double(f)).c_str(),
                g.node(subs[i][0]).name.c_str());
  }
  if (folded) std::printf("  (%zu more read only constants: folded before a backend runs them)\n", folded);
  return 0;
}

int cmd_ops(const std::vector<std::string>& argv) {
  Args a(command_spec("ops"), argv, 0);
  if (auto jf = a.get("json")) check_writable_file(*jf, "--json");
  const std::vector<std::string> ops = onnx::supported_ops();
  if (auto jf = a.get("json")) {
    std::ofstream f(*jf);
    if (!f) throw InvalidInput(cat("--json: cannot write '", *jf, "'"));
    f << nlohmann::json{{"domain", "ai.onnx"}, {"ops", ops}}.dump(2) << "\n";
  }
  if (a.flag("quiet")) return 0;
  std::printf("pet imports %zu ONNX op types (the default domain; ONNX Runtime's quantized ops of com.microsoft too):\n", ops.size());
  std::string line;
  for (const auto& op : ops) {
    if (!line.empty() && line.size() + op.size() + 1 > 96) std::printf("  %s\n", line.c_str()), line.clear();
    line += (line.empty() ? "" : " ") + op;
  }
  if (!line.empty()) std::printf("  %s\n", line.c_str());
  return 0;
}

}  // namespace pet::cli
