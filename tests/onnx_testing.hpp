#pragma once
// Building small ONNX models directly as protobuf messages (for import tests and fuzzing).
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "pet/onnx/onnx.hpp"

namespace pet::testing {

struct OnnxBuilder {
  ::onnx::ModelProto m;
  explicit OnnxBuilder(int64_t opset = 13) {
    m.set_ir_version(8);
    auto* os = m.add_opset_import();
    os->set_domain("");
    os->set_version(opset);
    m.mutable_graph()->set_name("t");
  }
  ::onnx::GraphProto& g() { return *m.mutable_graph(); }
  static void set_type(::onnx::ValueInfoProto* v, const std::string& name, int elem, const std::vector<std::string>& dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem);
    auto* s = t->mutable_shape();
    for (const auto& d : dims) {
      auto* dim = s->add_dim();
      if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0]))) dim->set_dim_value(std::stoll(d));
      else if (!d.empty()) dim->set_dim_param(d);
    }
  }
  OnnxBuilder& input(const std::string& name, const std::vector<std::string>& dims, int elem = ::onnx::TensorProto::FLOAT) {
    set_type(g().add_input(), name, elem, dims);
    return *this;
  }
  OnnxBuilder& output(const std::string& name) {
    auto* o = g().add_output();
    o->set_name(name);
    return *this;
  }
  OnnxBuilder& floats(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& v) {
    auto* t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float x : v) t->add_float_data(x);
    return *this;
  }
  OnnxBuilder& ints(const std::string& name, const std::vector<int64_t>& v) { return ints(name, {int64_t(v.size())}, v); }
  OnnxBuilder& ints(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int64_t>& v) {
    auto* t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t x : v) t->add_int64_data(x);
    return *this;
  }
  /// An int32, int8, uint8 or bool initializer (values in int32_data, as ONNX stores them).
  OnnxBuilder& small_ints(const std::string& name, int elem, const std::vector<int64_t>& dims, const std::vector<int64_t>& v) {
    auto* t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(elem);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t x : v) t->add_int32_data(int32_t(x));
    return *this;
  }
  ::onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& in, const std::vector<std::string>& out,
                          const std::string& name = "") {
    auto* n = g().add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? out.at(0) : name);
    for (const auto& s : in) n->add_input(s);
    for (const auto& s : out) n->add_output(s);
    return n;
  }
  static void attr(::onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr(::onnx::NodeProto* n, const std::string& name, const char* v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void attrf(::onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr(::onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  std::string bytes() const { return m.SerializeAsString(); }
  onnx::Model import(const onnx::ImportOptions& o = {}) const { return onnx::import_bytes(bytes(), "m.onnx", o); }
};

}  // namespace pet::testing
