// Fuzz-style robustness test of the ONNX importer (built with AddressSanitizer and UBSan):
// mutates real model files at the byte level and at the field level (dims, data types,
// attributes, op types, inputs, opsets) and imports every variant; variants that import are
// also executed when small. Any crash, sanitizer report, leak, non-pet exception or variant
// slower than 2 s fails the test. Every variant that imports gets the memory estimate the CLI
// makes before it allocates, and only variants under a limit are executed.
// A second family is built on purpose rather than by chance: zero-size tensors (inputs,
// initializers, and ops that would produce an empty tensor), programs up to 120,000 ops deep
// (run by the interpreter and given to the verifier, which must refuse past its depth bound
// instead of overflowing the stack) and huge shapes (the estimate must refuse them).
// A third family takes each ONNX schema libonnx knows (every version up to opset 17) as one
// node of inputs of random types, ranks and dims and random attributes, or of the shapes and
// attributes a conv, pool, norm, matmul or recurrent op takes, float16 in half of
// them: pet runs libonnx's type inference on float16 models, and its inference functions of
// some ops read dims and attributes without checking them (they crashed on such nodes). A
// variant that imports is given to check_bytes too, as pet optimize checks an original file
// it writes back unchanged.
// PET_FUZZ_KEEP=DIR writes pet's program of each schema variant that imports and runs there
// (`difftest replay DIR` runs them on the cpu backend against the reference), and the
// variant beside it as NAME.orig.
// PET_FUZZ_SCHEMA=NAME builds only the schema family of that op, `variants` of each version
// of it; PET_FUZZ_VERBOSE=1 prints why each schema variant (and each structured program)
// was refused.
// PET_FUZZ_DUMP=DIR writes each variant that fails with a non-pet exception there, and the one
// being run as DIR/current.onnx (after a sanitizer's abort, the variant that caused it).
// Usage: fuzz_import [variants] [node-test-dir] [extra-model.onnx] [seed] [all: every model of node-test-dir a seed,
// not a fixed list]
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "pet/core/narrow_float.hpp"
#include "pet/core/rng.hpp"
#include "pet/eval/interpreter.hpp"
#include "pet/eval/memory.hpp"
#include "pet/onnx/onnx.hpp"
#include "pet/verify/verifier.hpp"
#include "onnx_testing.hpp"
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
/// Memory the fuzzer lets a variant use when it executes it (the CLI's --memory-limit).
constexpr int64_t kMemoryLimit = int64_t(1) << 30;

/// The structured family: variant k of it, as (what it is, bytes, deepest ops).
struct Built {
  std::string what, bytes;
  int64_t depth = 0;
};
Built structured(int k, Rng& r) {
  using testing::OnnxBuilder;
  Built b;
  switch (k % 3) {
    case 0: {  // a chain of element-wise ops, sometimes past the verifier's depth bound
      static const int64_t depths[] = {1, 2, 100, 9999, 10000, 10001, 30000, 120000};
      const int64_t d = r.below(2) ? depths[r.below(8)] : int64_t(1 + r.below(15000));
      OnnxBuilder m;
      m.input("x", {"2", "3"}).output("y" + std::to_string(d));
      static const char* ops[] = {"Neg", "Identity", "Neg", "Relu"};  // mostly multilinear: verified too
      const char* op = ops[r.below(4)];
      for (int64_t i = 1; i <= d; ++i) m.node(op, {i == 1 ? "x" : "y" + std::to_string(i - 1)}, {"y" + std::to_string(i)});
      b.what = cat("chain of ", d, " ", op);
      b.bytes = m.m.SerializeAsString();
      b.depth = d;
      break;
    }
    case 1: {  // zero-size tensors, declared or produced
      OnnxBuilder m;
      const std::string n = std::to_string(r.below(3));  // a dimension that may be 0
      switch (r.below(6)) {
        case 0:
          m.input("x", {"0", "3"}).output("y").node("Relu", {"x"}, {"y"});
          b.what = "input [0,3]";
          break;
        case 1:
          m.input("x", {"2", "3"}).floats("w", {3, 0}, {}).output("y").node("MatMul", {"x", "w"}, {"y"});
          b.what = "MatMul by a [3,0] weight";
          break;
        case 2:
          m.input("x", {"4", "3"}).ints("s", {1}).ints("e", {1}).ints("a", {0}).output("y").node("Slice", {"x", "s", "e", "a"}, {"y"});
          b.what = "Slice to an empty range";
          break;
        case 3:
          m.input("x", {"3", "1"}).ints("sh", {2, 3, std::stoll(n)}).output("y").node("Expand", {"x", "sh"}, {"y"});
          b.what = "Expand to [2,3," + n + "]";
          break;
        case 4:
          m.input("x", {"2", "3"}).ints("p", {0, 0, 0, -3 + std::stoll(n)}).output("y").node("Pad", {"x", "p"}, {"y"});
          b.what = "Pad to [2," + n + "]";
          break;
        default: {
          m.input("x", {"N", "3", "8", "8"}).floats("w", {4, 3, 3, 3}, std::vector<float>(108, 0.5f)).output("y");
          m.node("Conv", {"x", "w"}, {"y"});
          b.what = "Conv with batch N";
          break;
        }
      }
      b.bytes = m.m.SerializeAsString();
      break;
    }
    default: {  // huge shapes: the estimate must say no before anything is allocated
      const int64_t big = int64_t(1) << (10 + r.below(26));
      OnnxBuilder m;
      switch (r.below(3)) {
        case 0:
          m.input("x", {"1", "3", std::to_string(big), std::to_string(big)}).output("y").node("Relu", {"x"}, {"y"});
          b.what = cat("input [1,3,", big, ",", big, "]");
          break;
        case 1:
          m.input("x", {"1", "1"}).ints("sh", {big, big, 10}).output("y").node("Expand", {"x", "sh"}, {"y"});
          b.what = cat("Expand to [", big, ",", big, ",10]");
          break;
        default:
          m.input("x", {std::to_string(big), "1"}).input("z", {"1", std::to_string(big)}).output("y").node("MatMul", {"x", "z"}, {"y"});
          b.what = cat("MatMul [", big, ",1]x[1,", big, "]");
          break;
      }
      b.bytes = m.m.SerializeAsString();
      break;
    }
  }
  return b;
}

/// Shapes that fit the weighted and windowed ops (the "shaped" mode of the schema family):
/// X is [N, C, spatial...], a conv's W [M, C/group, k...] (a transposed conv's [C, M/group,
/// k...]), a bias or a norm's statistics [M] or [C], a matmul's B [K, M], a recurrent op's
/// inputs as its hidden size says, scales and zero points scalars; the attributes that go
/// with them (kernel_shape, strides, pads, dilations, group, transA/B, hidden_size) agree.
struct Shaped {
  int sp = 1;
  int64_t n = 1, c = 1, m = 1, g = 1, h = 2;
  bool ta = false, tb = false;  // Gemm's transA, transB
  std::vector<int64_t> x, k, strides, dilations;
  explicit Shaped(Rng& r) {
    sp = 1 + int(r.below(3));
    g = 1 + int64_t(r.below(2));
    n = 1 + int64_t(r.below(2));
    ta = r.below(3) == 0;
    tb = r.below(2) == 0;
    c = g * int64_t(1 + r.below(3));
    m = g * int64_t(1 + r.below(3));
    x = {n, c};
    for (int i = 0; i < sp; ++i) {
      x.push_back(int64_t(sp == 3 ? 3 + r.below(2) : 3 + r.below(4)));
      k.push_back(int64_t(1 + r.below(3)));
      strides.push_back(int64_t(1 + r.below(2)));
      dilations.push_back(int64_t(1 + r.below(5) / 4));
    }
  }
  static bool is(const std::string& a, std::initializer_list<const char*> names) {
    for (const char* b : names)
      if (a == b) return true;
    return false;
  }
  std::vector<int64_t> input(const std::string& op, const std::string& formal) const {
    const bool transposed = op == "ConvTranspose", conv = is(op, {"Conv", "ConvInteger", "QLinearConv"}) || transposed;
    const bool recurrent = is(op, {"RNN", "GRU", "LSTM"});
    if (formal.size() > 6 && (formal.ends_with("_scale") || formal.ends_with("_zero_point"))) return {};
    if (conv && is(formal, {"W", "w"})) {
      std::vector<int64_t> w = transposed ? std::vector<int64_t>{c, m / g} : std::vector<int64_t>{m, c / g};
      w.insert(w.end(), k.begin(), k.end());
      return w;
    }
    if (conv && is(formal, {"B"})) return {m};
    if (recurrent) {
      const int64_t gates = op == "RNN" ? 1 : op == "GRU" ? 3 : 4;
      if (formal == "X") return {x.back(), n, c};
      if (formal == "W") return {1, gates * h, c};
      if (formal == "R") return {1, gates * h, h};
      if (formal == "B") return {1, 2 * gates * h};
      if (formal == "P") return {1, 3 * h};
      if (formal == "sequence_lens") return {n};
      return {1, n, h};  // initial_h, initial_c
    }
    if (op == "Gemm") {
      if (formal == "A") return ta ? std::vector<int64_t>{c, n} : std::vector<int64_t>{n, c};
      if (formal == "B") return tb ? std::vector<int64_t>{m, c} : std::vector<int64_t>{c, m};
      return {m};
    }
    if (is(op, {"MatMul", "MatMulInteger", "QLinearMatMul"}) && is(formal, {"B", "b"})) return {x.back(), m};
    if (op == "LayerNormalization" && is(formal, {"Scale", "B"})) return {x.back()};
    if (is(formal, {"scale", "bias", "mean", "var", "input_mean", "input_var", "B", "slope"})) return {c};
    return x;
  }
};

/// The schema family: one node of schema s at its opset, with inputs of types it takes,
/// random ranks and dims (some unknown) and random attributes, or (coherent) shapes that
/// go together, or (shaped) the shapes and attributes of a conv, pool, norm, matmul or
/// recurrent op. A `half` model takes float16
/// where it can and has one more float16 input (a float16 model); the others no float16.
std::string schema_variant(const ::onnx::OpSchema& s, bool half_model, Rng& r) {
  testing::OnnxBuilder m(s.SinceVersion());
  auto* n = m.g().add_node();
  n->set_op_type(s.Name());
  const int inputs = std::min(s.max_input(), s.min_input() + int(r.below(3)));
  // coherent: the inputs' shapes are one base shape, a dim of it or a scalar, integer inputs
  // mostly constants of small values, few attributes (more of them import)
  const uint64_t mode = r.below(3);
  const bool coherent = mode == 1, shaped = mode == 2;
  n->set_name(shaped ? "shaped" : coherent ? "coherent" : "random");  // (the mode, in pet's messages)
  const Shaped sh(r);
  std::map<std::string, int> same_type;  // type variable (T, T1, ...) -> the element type chosen for it
  std::vector<int64_t> base(1 + r.below(5));
  for (auto& d : base) d = int64_t(1 + r.below(4));
  for (int i = 0; i < inputs; ++i) {
    if (r.below(10) == 0 && !(shaped && i < s.min_input())) {
      n->add_input("");
      continue;
    }
    const std::string name = "i" + std::to_string(i);
    n->add_input(name);
    std::vector<int> allowed;
    std::string formal, type_str;
    if (!s.inputs().empty()) {
      const auto& f = s.inputs()[std::min(size_t(i), s.inputs().size() - 1)];
      formal = f.GetName();
      type_str = f.GetTypeStr();
      for (const auto* t : f.GetTypes()) {
        const ::onnx::TypeProto tp = ::onnx::Utils::DataTypeUtils::ToTypeProto(t);
        if (tp.has_tensor_type()) allowed.push_back(tp.tensor_type().elem_type());
      }
    }
    if (!half_model)
      allowed.erase(std::remove_if(allowed.begin(), allowed.end(), [](int e) { return pet::is_narrow_float(e); }), allowed.end());
    int elem = half_model ? ::onnx::TensorProto::FLOAT16 : ::onnx::TensorProto::FLOAT;
    const bool half = std::find(allowed.begin(), allowed.end(), elem) != allowed.end();
    if (!allowed.empty() && !(half && r.below(2)) && r.below(3)) elem = allowed[r.below(allowed.size())];
    if (shaped && half && r.below(4)) elem = half_model ? ::onnx::TensorProto::FLOAT16 : ::onnx::TensorProto::FLOAT;
    if (coherent || shaped) elem = same_type.try_emplace(type_str, elem).first->second;  // inputs of one type variable: one type
    const bool integer = elem == ::onnx::TensorProto::INT64 || elem == ::onnx::TensorProto::INT32;
    if (shaped && formal == "sequence_lens" && elem == ::onnx::TensorProto::INT32) {  // every sequence at full length, or one shorter
      std::vector<int64_t> v(size_t(sh.n), sh.x.back());
      v[0] -= int64_t(r.below(2));
      m.small_ints(name, elem, {sh.n}, v);
      continue;
    }
    if ((coherent || shaped) && integer && r.below(10) < 7) {  // axes, shapes, pads, indices: a constant of small values
      std::vector<int64_t> v(r.below(base.size() + 1));
      for (auto& x : v) x = int64_t(r.below(2 * base.size() + 1)) - int64_t(base.size());
      if (elem == ::onnx::TensorProto::INT64) m.ints(name, v);
      else m.small_ints(name, elem, {int64_t(v.size())}, v);
      continue;
    }
    auto* vi = m.g().add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* shape = tt->mutable_shape();
    if (shaped) {
      const std::vector<int64_t> dims = sh.input(s.Name(), formal);
      if (Shaped::is(s.Name(), {"RNN", "GRU", "LSTM"}) && Shaped::is(formal, {"W", "R", "B", "P"}) && !pet::is_narrow_float(elem)) {
        // pet unrolls these with constant weights: an initializer of small values
        m.g().mutable_input()->RemoveLast();
        std::vector<float> v(size_t(numel(Shape{dims})));
        for (auto& x : v) x = float(int(r.below(9)) - 4) * 0.125f;
        m.floats(name, dims, v);
        continue;
      }
      for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
      continue;
    }
    if (coherent) {  // X's shape, a channel or last dim's, or a scalar
      const uint64_t pick = r.below(5);
      std::vector<int64_t> dims = pick < 3 ? base : pick == 3 ? std::vector<int64_t>{base[base.size() > 1 ? 1 : 0]} : std::vector<int64_t>{};
      for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
      continue;
    }
    if (r.below(8) == 0) {  // rank unknown
      tt->clear_shape();
      continue;
    }
    for (int d = int(r.below(6)); d > 0; --d) {
      auto* dim = shape->add_dim();
      switch (r.below(6)) {
        case 0: dim->set_dim_param("N"); break;
        case 1: break;  // unknown
        default: dim->set_dim_value(int64_t(r.below(5)));
      }
    }
  }
  if (half_model) m.input("h", {"2"}, ::onnx::TensorProto::FLOAT16);
  for (int o = 0; o < std::max(1, s.min_output()); ++o) {
    n->add_output("o" + std::to_string(o));
    m.output("o" + std::to_string(o));
  }
  static const char* strings[] = {"", "NOTSET", "SAME_UPPER", "VALID", "constant", "linear", "nearest", "DCR", "x"};
  static const char* auto_pads[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
  bool auto_padded = false;  // (attributes come in name order: auto_pad before pads)
  std::set<std::string> left_out;  // chosen first: output_padding depends on strides and dilations
  for (const auto& [name, a] : s.attributes())
    if (shaped ? !a.required && !Shaped::is(name, {"group", "transA", "transB"}) && r.below(2) : coherent ? r.below(4) != 0 : r.below(2)) left_out.insert(name);
  if (shaped) left_out.insert("output_shape");
  for (const auto& [name, a] : s.attributes()) {
    if (left_out.count(name)) continue;
    auto* at = n->add_attribute();
    at->set_name(name);
    at->set_type(a.type);
    if (shaped) {  // the attributes that go with the shapes
      const std::vector<int64_t>* fixed = name == "kernel_shape" ? &sh.k : name == "strides" ? &sh.strides : name == "dilations" ? &sh.dilations : nullptr;
      if (fixed && a.type == ::onnx::AttributeProto::INTS) {
        for (int64_t x : *fixed) at->add_ints(x);
        continue;
      }
      if (name == "pads" && a.type == ::onnx::AttributeProto::INTS) {
        if (auto_padded) {  // ONNX allows pads only with auto_pad NOTSET
          n->mutable_attribute()->RemoveLast();
          continue;
        }
        for (int e = 0; e < 2; ++e)
          for (int64_t kk : sh.k) at->add_ints(int64_t(r.below(uint64_t(kk))));
        continue;
      }
      if (name == "output_padding" && a.type == ::onnx::AttributeProto::INTS) {
        for (size_t d = 0; d < sh.strides.size(); ++d)  // below the stride or the dilation, where they are given
          at->add_ints(int64_t(r.below(uint64_t(std::max(left_out.count("strides") ? 1 : sh.strides[d],
                                                          left_out.count("dilations") ? 1 : sh.dilations[d])))));
        continue;
      }
      if (name == "auto_pad") {
        const uint64_t pick = r.below(4);
        at->set_s(auto_pads[pick]);
        auto_padded = pick != 0;
        continue;
      }
      if (a.type == ::onnx::AttributeProto::INT) {
        if (name == "group") at->set_i(sh.g);
        else if (name == "hidden_size") at->set_i(sh.h);
        else if (name == "transA") at->set_i(sh.ta);
        else if (name == "transB") at->set_i(sh.tb);
        else if (name == "axis") at->set_i(int64_t(r.below(2 * sh.x.size())) - int64_t(sh.x.size()));
        else if (name == "size") at->set_i(int64_t(1 + 2 * r.below(2)));  // LRN
        else if (name == "p") at->set_i(int64_t(1 + r.below(2)));
        else at->set_i(int64_t(r.below(2)));  // the 0/1 flags (ceil_mode, count_include_pad, storage_order, trans*)
        continue;
      }
      if (name == "direction") {  // one direction's weights
        at->set_s(r.below(2) ? "forward" : "reverse");
        continue;
      }
      if (a.type == ::onnx::AttributeProto::FLOAT) {
        at->set_f(name == "epsilon" ? 1e-5f : name == "momentum" ? 0.9f : float(1 + r.below(3)) * 0.5f);
        continue;
      }
    }
    switch (a.type) {
      case ::onnx::AttributeProto::INT: at->set_i(int64_t(r.below(13)) - 6); break;
      case ::onnx::AttributeProto::FLOAT: at->set_f(float(int(r.below(5)) - 2) * 0.5f); break;
      case ::onnx::AttributeProto::STRING: at->set_s(strings[r.below(9)]); break;
      case ::onnx::AttributeProto::INTS:
        for (int k = int(r.below(7)); k > 0; --k) at->add_ints(int64_t(r.below(11)) - 4);
        break;
      case ::onnx::AttributeProto::FLOATS:
        for (int k = int(r.below(5)); k > 0; --k) at->add_floats(float(r.below(5)) - 2);
        break;
      case ::onnx::AttributeProto::STRINGS:
        for (int k = int(r.below(4)); k > 0; --k) at->add_strings(r.below(2) ? "Relu" : "Tanh");
        break;
      case ::onnx::AttributeProto::TENSOR: {
        auto* t = at->mutable_t();
        const bool half = half_model && r.below(2);
        t->set_data_type(half ? ::onnx::TensorProto::FLOAT16 : ::onnx::TensorProto::INT64);
        int64_t k = int64_t(r.below(4));
        if (r.below(2)) t->add_dims(k);
        else k = 1;
        for (int64_t j = 0; j < k; ++j)
          if (half) t->add_int32_data(0x3c00);  // 1.0
          else t->add_int64_data(int64_t(r.below(9)) - 3);
        break;
      }
      default: n->mutable_attribute()->RemoveLast();  // graphs and the rest: left out (a required one makes it invalid)
    }
  }
  return m.m.SerializeAsString();
}

/// Runs a variant that imported: the memory estimate first, then (when it is small enough)
/// the interpreter, and for multilinear programs the verifier.
enum class Ran { No, Executed, Verified };
Ran exercise(const Graph& g, uint64_t seed, bool verify_too) {
  const MemoryEstimate est = estimate_memory(g);
  if (est.peak_bytes > kMemoryLimit || work(g) >= 2e7) return Ran::No;
  std::vector<Value<float>> in;
  Rng vr{seed};
  for (TensorId t : g.inputs()) {
    const auto& ty = g.type(t);
    if (is_float(ty.dtype)) in.emplace_back(Tensor<float>(ty.shape, float(vr.uniform(-1, 1))));
    else in.emplace_back(Tensor<int64_t>(ty.shape, int64_t(0)));
  }
  Interpreter<float>(g).run(in);
  if (verify_too) {
    bool multilinear = true;
    for (NodeId n = 0; n < g.num_nodes(); ++n) multilinear = multilinear && is_multilinear(g.node(n).op);
    if (multilinear) {
      verify::verify(g, g);
      return Ran::Verified;
    }
  }
  return Ran::Executed;
}
}  // namespace

int main(int argc, char** argv) {
  const int variants = argc > 1 ? std::atoi(argv[1]) : 4000;
  std::vector<std::pair<std::string, std::string>> seeds;  // name, bytes
  seeds.emplace_back("zoo", pet::onnx::export_bytes(testing::zoo()));
  if (argc > 2 && fs::is_directory(argv[2]))
    for (const char* t : {"test_conv_with_strides_padding", "test_reshape_negative_dim", "test_slice_neg_steps", "test_gather_2d_indices",
                          "test_maxpool_2d_ceil", "test_layer_normalization_4d_axis1", "test_split_variable_parts_2d", "test_constant_pad",
                          "test_expand_dim_changed", "test_where_example", "test_softmax_example_expanded", "test_mvn_expanded",
                          "test_loop11", "test_scan9_sum", "test_scan_sum", "test_if", "test_quantizelinear_axis", "test_dequantizelinear_axis",
                          "test_scatter_elements_with_negative_indices", "test_scatternd_add"})
      if (fs::exists(fs::path(argv[2]) / t / "model.onnx")) seeds.emplace_back(t, read_file(fs::path(argv[2]) / t / "model.onnx"));
  if (argc > 5 && std::string_view(argv[5]) == "all" && fs::is_directory(argv[2]))  // every model of the folder (one op's tests)
    for (const auto& e : fs::directory_iterator(argv[2]))
      if (fs::exists(e.path() / "model.onnx")) seeds.emplace_back(e.path().filename().string(), read_file(e.path() / "model.onnx"));
  if (argc > 3) seeds.emplace_back("bundled", read_file(argv[3]));

  const uint64_t seed0 = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 20261129;
  Rng rng(seed0);
  int invalid = 0, unsupported = 0, imported = 0, executed = 0, failures = 0;
  double slowest = 0;
  const char* only_schema = std::getenv("PET_FUZZ_SCHEMA");  // that schema's family alone, `variants` of it
  for (int i = 0; i < (only_schema ? 0 : variants); ++i) {
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
    if (const char* dir = std::getenv("PET_FUZZ_DUMP"))  // the variant being run: what a sanitizer abort leaves behind
      std::ofstream(fs::path(dir) / "current.onnx", std::ios::binary) << bytes;
    auto t0 = std::chrono::steady_clock::now();
    try {
      pet::onnx::ImportOptions opt;
      opt.default_dim = 2;
      pet::onnx::Model m = pet::onnx::import_bytes(bytes, name, opt);
      ++imported;
      if (exercise(m.graph, uint64_t(i), false) != Ran::No) ++executed;
    } catch (const InvalidInput&) {
      ++invalid;
    } catch (const Unsupported&) {
      ++unsupported;
    } catch (const std::exception& e) {
      ++failures;
      std::printf("FAIL variant %d of '%s': non-pet exception: %s\n", i, name.c_str(), e.what());
      if (const char* dir = std::getenv("PET_FUZZ_DUMP"))  // the variant, to replay with pet run
        std::ofstream(fs::path(dir) / ("variant_" + std::to_string(i) + ".onnx"), std::ios::binary) << bytes;
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    slowest = std::max(slowest, s);
    if (s > 2.0) {
      ++failures;
      std::printf("FAIL variant %d of '%s' took %.1f s\n", i, name.c_str(), s);
    }
  }
  // The structured family: zero-size, deep and huge programs.
  const int built = only_schema ? 0 : std::max(30, variants / 25);
  int b_refused = 0, b_executed = 0, b_deep_refused = 0;
  for (int k = 0; k < built; ++k) {
    Built b = structured(k, rng);
    auto t0 = std::chrono::steady_clock::now();
    std::string outcome;
    try {
      pet::onnx::ImportOptions opt;
      opt.default_dim = int64_t(rng.below(2));  // a symbolic dimension bound to 0 or 1
      pet::onnx::Model m = pet::onnx::import_bytes(b.bytes, b.what, opt);
      for (NodeId n = 0; n < m.graph.num_nodes(); ++n) {  // empty tensors only as graph inputs and outputs
        std::vector<TensorId> ts = m.graph.node(n).inputs;
        ts.insert(ts.end(), m.graph.node(n).outputs.begin(), m.graph.node(n).outputs.end());
        for (TensorId t : ts)
          if (numel(m.graph.type(t).shape) == 0) {
            ++failures;
            std::printf("FAIL structured '%s': node '%s' reads or writes the empty tensor '%s'\n", b.what.c_str(),
                        m.graph.node(n).name.c_str(), m.graph.tensor(t).name.c_str());
          }
      }
      const Ran ran = exercise(m.graph, uint64_t(k), true);
      outcome = ran == Ran::No ? "over the memory limit, not run" : ran == Ran::Executed ? "ran" : "ran and verified";
      if (ran != Ran::No) {
        ++b_executed;
        if (ran == Ran::Verified && b.depth > verify::PointEvaluator<float>::kMaxDepth) {
          ++failures;
          std::printf("FAIL structured '%s': verified past the depth bound\n", b.what.c_str());
        }
      } else {
        ++b_refused;  // over the memory limit: the CLI refuses these with a sentence
      }
    } catch (const Unsupported& e) {
      ++b_refused;
      outcome = e.what();
      if (b.depth > verify::PointEvaluator<float>::kMaxDepth && outcome.find("ops deep") != std::string::npos) ++b_deep_refused;
    } catch (const InvalidInput& e) {
      ++b_refused;
      outcome = e.what();
    } catch (const std::exception& e) {
      ++failures;
      std::printf("FAIL structured '%s': non-pet exception: %s\n", b.what.c_str(), e.what());
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (std::getenv("PET_FUZZ_VERBOSE")) std::printf("  %s: %s (%.2f s)\n", b.what.c_str(), outcome.c_str(), s);
    slowest = std::max(slowest, s);
    if (s > 2.0 + 3e-4 * double(b.depth)) {  // deep chains: time in proportion to their length (ASan, a busy machine)
      ++failures;
      std::printf("FAIL structured '%s' took %.1f s\n", b.what.c_str(), s);
    }
  }
  // The schema family: each schema of the default domain up to opset 17, a few times.
  const int per_schema = only_schema ? variants : std::max(2, variants / 1000);
  int s_invalid = 0, s_unsupported = 0, s_imported = 0, s_schemas = 0;
  for (const auto& schema : ::onnx::OpSchemaRegistry::get_all_schemas_with_history()) {
    if (!schema.domain().empty() || schema.SinceVersion() > pet::onnx::kExportOpset || schema.Deprecated()) continue;
    if (only_schema && schema.Name() != only_schema) continue;
    ++s_schemas;
    for (int k = 0; k < per_schema; ++k) {
      const std::string bytes = schema_variant(schema, k % 2 == 0, rng);
      const std::string what = cat(schema.Name(), "-", schema.SinceVersion(), " #", k);
      if (const char* dir = std::getenv("PET_FUZZ_DUMP")) std::ofstream(fs::path(dir) / "current.onnx", std::ios::binary) << bytes;
      auto t0 = std::chrono::steady_clock::now();
      try {
        pet::onnx::ImportOptions opt;
        opt.default_dim = 2;
        pet::onnx::Model m = pet::onnx::import_bytes(bytes, what, opt);
        ++s_imported;
        if (exercise(m.graph, uint64_t(k), false) != Ran::No)
          if (const char* keep = std::getenv("PET_FUZZ_KEEP")) {  // pet's program of it, for difftest replay
            std::string program;
            try {
              program = pet::onnx::export_bytes(m.graph);
            } catch (const std::exception& e) {
              std::printf("not kept: '%s': %s\n", what.c_str(), e.what());
            }
            if (!program.empty()) {
              const fs::path stem = fs::path(keep) / (schema.Name() + "_" + std::to_string(schema.SinceVersion()) + "_" + std::to_string(k));
              std::ofstream(stem.string() + ".onnx", std::ios::binary) << program;
              std::ofstream(stem.string() + ".orig", std::ios::binary) << bytes;  // the variant (symbolic dims 2)
            }
          }
        try {  // what pet optimize does to an original it writes back as it is
          pet::onnx::check_bytes(bytes, what);
        } catch (const InvalidInput&) {
        }
      } catch (const InvalidInput& e) {
        ++s_invalid;
        if (std::getenv("PET_FUZZ_VERBOSE")) std::printf("  %s: invalid: %s\n", what.c_str(), e.what());
      } catch (const Unsupported& e) {
        ++s_unsupported;
        if (std::getenv("PET_FUZZ_VERBOSE")) std::printf("  %s: unsupported: %s\n", what.c_str(), e.what());
      } catch (const std::exception& e) {
        ++failures;
        std::printf("FAIL schema variant '%s': non-pet exception: %s\n", what.c_str(), e.what());
        if (const char* dir = std::getenv("PET_FUZZ_DUMP"))
          std::ofstream(fs::path(dir) / (schema.Name() + "_" + std::to_string(k) + ".onnx"), std::ios::binary) << bytes;
      }
      const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      slowest = std::max(slowest, sec);
      if (sec > 2.0) {
        ++failures;
        std::printf("FAIL schema variant '%s' took %.1f s\n", what.c_str(), sec);
      }
    }
  }
  std::printf("built %d single-node models of %d ONNX schemas: %d invalid, %d unsupported, %d imported\n", s_schemas * per_schema,
              s_schemas, s_invalid, s_unsupported, s_imported);
  if (!only_schema && (b_deep_refused == 0 || b_executed == 0)) {
    ++failures;
    std::printf("FAIL the structured family refused no program for its depth, or ran none: too few variants (%d)\n", built);
  }
  std::printf("built %d zero-size, deep and huge programs: %d refused or over the memory limit (%d too deep to verify), %d executed\n",
              built, b_refused, b_deep_refused, b_executed);
  std::printf("fuzzed %d variants of %zu seed models: %d rejected as invalid, %d unsupported, %d imported (%d executed), "
              "%d failures, slowest %.3f s\n",
              variants, seeds.size(), invalid, unsupported, imported, executed, failures, slowest);
  return failures ? 1 : 0;
}
