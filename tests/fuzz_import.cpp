// Fuzz-style robustness test of the ONNX importer (built with AddressSanitizer and UBSan):
// mutates real model files at the byte level and at the field level (dims, data types,
// attributes, op types, inputs, opsets) and imports every variant; variants that import are
// also executed when small. Any crash, sanitizer report, leak, non-pet exception or variant
// slower than 2 s fails the test.
// Usage: fuzz_import [variants] [node-test-dir] [extra-model.onnx] [seed]
#include <onnx/onnx_pb.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "pet/core/rng.hpp"
#include "pet/eval/interpreter.hpp"
#include "pet/onnx/onnx.hpp"
#include "zoo.hpp"

namespace fs = std::filesystem;
using namespace pet;

namespace {
std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const std::vector<std::string> kOpTypes = {"Conv", "MatMul", "Gemm", "Add", "Relu", "Reshape", "Transpose", "Concat", "Split", "Slice",
                                           "Pad", "Gather", "MaxPool", "AveragePool", "Softmax", "LayerNormalization", "Squeeze",
                                           "Unsqueeze", "Expand", "Where", "Cast", "ReduceSum", "Shape", "Constant", "Flatten", "Foo"};

int64_t wild_int(Rng& r) {
  switch (r.below(8)) {
    case 0: return -int64_t(r.below(5));
    case 1: return int64_t(r.below(1u << 31)) * int64_t(r.below(1u << 31));
    case 2: return std::numeric_limits<int64_t>::min();
    case 3: return std::numeric_limits<int64_t>::max();
    default: return int64_t(r.below(9));
  }
}

void mutate_fields(::onnx::ModelProto& m, Rng& r) {
  auto* g = m.mutable_graph();
  int edits = 1 + int(r.below(3));
  for (int e = 0; e < edits; ++e) {
    switch (r.below(11)) {
      case 0:  // a dim of an initializer
        if (g->initializer_size()) {
          auto* t = g->mutable_initializer(int(r.below(uint64_t(g->initializer_size()))));
          if (t->dims_size()) t->set_dims(int(r.below(uint64_t(t->dims_size()))), wild_int(r));
          else t->add_dims(wild_int(r));
        }
        break;
      case 1:  // a dim of an input
        if (g->input_size()) {
          auto* s = g->mutable_input(int(r.below(uint64_t(g->input_size()))))->mutable_type()->mutable_tensor_type()->mutable_shape();
          if (s->dim_size()) s->mutable_dim(int(r.below(uint64_t(s->dim_size()))))->set_dim_value(wild_int(r));
        }
        break;
      case 2:  // an element type
        if (g->initializer_size()) g->mutable_initializer(int(r.below(uint64_t(g->initializer_size()))))->set_data_type(int(r.below(17)));
        break;
      case 3:  // an attribute value
        if (g->node_size()) {
          auto* n = g->mutable_node(int(r.below(uint64_t(g->node_size()))));
          if (n->attribute_size()) {
            auto* a = n->mutable_attribute(int(r.below(uint64_t(n->attribute_size()))));
            if (a->ints_size()) a->set_ints(int(r.below(uint64_t(a->ints_size()))), wild_int(r));
            else if (r.below(2)) a->set_i(wild_int(r));
            else a->add_ints(wild_int(r));
            if (r.below(4) == 0) a->set_type(static_cast<::onnx::AttributeProto::AttributeType>(r.below(14)));
          }
        }
        break;
      case 4:  // an op type
        if (g->node_size()) g->mutable_node(int(r.below(uint64_t(g->node_size()))))->set_op_type(kOpTypes[r.below(kOpTypes.size())]);
        break;
      case 5:  // an input reference
        if (g->node_size() > 1) {
          auto* n = g->mutable_node(int(r.below(uint64_t(g->node_size()))));
          const auto& other = g->node(int(r.below(uint64_t(g->node_size()))));
          if (n->input_size() && other.output_size()) n->set_input(int(r.below(uint64_t(n->input_size()))), other.output(0));
          else n->add_input(other.output_size() ? other.output(0) : "zz");
        }
        break;
      case 6:  // drop or duplicate an input
        if (g->node_size()) {
          auto* n = g->mutable_node(int(r.below(uint64_t(g->node_size()))));
          if (n->input_size() && r.below(2)) n->mutable_input()->RemoveLast();
          else if (n->input_size()) n->add_input(n->input(0));
        }
        break;
      case 7:  // the opset
        m.mutable_opset_import(0)->set_version(int64_t(r.below(20)));
        break;
      case 8:  // remove an initializer
        if (g->initializer_size()) g->mutable_initializer()->DeleteSubrange(int(r.below(uint64_t(g->initializer_size()))), 1);
        break;
      case 9:  // raw data length
        if (g->initializer_size()) {
          auto* t = g->mutable_initializer(int(r.below(uint64_t(g->initializer_size()))));
          std::string d = t->raw_data();
          d.resize(size_t(r.below(d.size() + 9)));
          t->set_raw_data(d);
        }
        break;
      case 10:  // an output name
        if (g->output_size()) g->mutable_output(0)->set_name(r.below(2) ? "missing" : (g->input_size() ? g->input(0).name() : ""));
        break;
    }
  }
}

std::string mutate_bytes(std::string s, Rng& r) {
  int edits = 1 + int(r.below(8));
  for (int e = 0; e < edits && !s.empty(); ++e) {
    size_t at = size_t(r.below(s.size()));
    switch (r.below(4)) {
      case 0: s[at] = char(r.below(256)); break;
      case 1: s.erase(at, size_t(r.below(16))); break;
      case 2: s.insert(at, std::string(size_t(r.below(8)), char(r.below(256)))); break;
      case 3: s.resize(at); break;
    }
  }
  return s;
}

/// Work of running a graph (elements written + flops); used to skip huge variants.
double work(const Graph& g) {
  double w = 0;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    Types out = g.output_types(n);
    w += double(op_flops(g.node(n).op, g.input_types(n), out));
    for (const auto& t : out) w += double(numel(t.shape));
  }
  return w;
}
}  // namespace

int main(int argc, char** argv) {
  const int variants = argc > 1 ? std::atoi(argv[1]) : 4000;
  std::vector<std::pair<std::string, std::string>> seeds;  // name, bytes
  seeds.emplace_back("zoo", pet::onnx::export_bytes(testing::zoo()));
  if (argc > 2 && fs::is_directory(argv[2]))
    for (const char* t : {"test_conv_with_strides_padding", "test_reshape_negative_dim", "test_slice_neg_steps", "test_gather_2d_indices",
                          "test_maxpool_2d_ceil", "test_layer_normalization_4d_axis1", "test_split_variable_parts_2d", "test_constant_pad",
                          "test_expand_dim_changed", "test_where_example", "test_softmax_example_expanded", "test_mvn_expanded"})
      if (fs::exists(fs::path(argv[2]) / t / "model.onnx")) seeds.emplace_back(t, read_file(fs::path(argv[2]) / t / "model.onnx"));
  if (argc > 3) seeds.emplace_back("bundled", read_file(argv[3]));

  const uint64_t seed0 = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 20261129;
  Rng rng(seed0);
  int invalid = 0, unsupported = 0, imported = 0, executed = 0, failures = 0;
  double slowest = 0;
  for (int i = 0; i < variants; ++i) {
    const auto& [name, seed] = seeds[size_t(i) % seeds.size()];
    std::string bytes;
    if (i % 2) {
      bytes = mutate_bytes(seed, rng);
    } else {
      ::onnx::ModelProto m;
      m.ParseFromString(seed);
      mutate_fields(m, rng);
      bytes = m.SerializeAsString();
    }
    auto t0 = std::chrono::steady_clock::now();
    try {
      pet::onnx::ImportOptions opt;
      opt.default_dim = 2;
      pet::onnx::Model m = pet::onnx::import_bytes(bytes, name, opt);
      ++imported;
      if (work(m.graph) < 2e7) {
        std::vector<Value<float>> in;
        Rng vr{uint64_t(i)};
        for (TensorId t : m.graph.inputs()) {
          const auto& ty = m.graph.type(t);
          if (is_float(ty.dtype)) in.emplace_back(Tensor<float>(ty.shape, float(vr.uniform(-1, 1))));
          else in.emplace_back(Tensor<int64_t>(ty.shape, int64_t(0)));
        }
        Interpreter<float>(m.graph).run(in);
        ++executed;
      }
    } catch (const InvalidInput&) {
      ++invalid;
    } catch (const Unsupported&) {
      ++unsupported;
    } catch (const std::exception& e) {
      ++failures;
      std::printf("FAIL variant %d of '%s': non-pet exception: %s\n", i, name.c_str(), e.what());
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    slowest = std::max(slowest, s);
    if (s > 2.0) {
      ++failures;
      std::printf("FAIL variant %d of '%s' took %.1f s\n", i, name.c_str(), s);
    }
  }
  std::printf("fuzzed %d variants of %zu seed models: %d rejected as invalid, %d unsupported, %d imported (%d executed), "
              "%d failures, slowest %.3f s\n",
              variants, seeds.size(), invalid, unsupported, imported, executed, failures, slowest);
  return failures ? 1 : 0;
}
