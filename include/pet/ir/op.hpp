#pragma once
/// The operator list: adding an op is one line here (plus its header, its ONNX mapping and
/// its test). Anything that visits Op must handle every alternative, so a missing case is a
/// compile error.
#include <cstdio>
#include <tuple>
#include <type_traits>
#include <variant>

#include "pet/ir/ops/constant.hpp"
#include "pet/ir/ops/conv.hpp"
#include "pet/ir/ops/elementwise.hpp"
#include "pet/ir/ops/layout.hpp"
#include "pet/ir/ops/matmul.hpp"
#include "pet/ir/ops/normalization.hpp"
#include "pet/ir/ops/pool.hpp"
#include "pet/ir/ops/quantize.hpp"
#include "pet/ir/ops/reduce.hpp"
#include "pet/ir/ops/slicing.hpp"

namespace pet {

using Op = std::variant<
    ops::Conv, ops::MatMul, ops::Gemm,                                           //
    ops::Add, ops::Sub, ops::Mul, ops::Div, ops::Pow,                            //
    ops::Sqrt, ops::Erf, ops::Exp, ops::Neg, ops::Relu, ops::LeakyRelu,          //
    ops::Sigmoid, ops::Tanh, ops::Gelu, ops::Clip, ops::Where, ops::Cast, ops::Identity,    //
    ops::Dropout, ops::Softmax, ops::BatchNormalization, ops::LayerNormalization,  //
    ops::MaxPool, ops::AveragePool, ops::GlobalAveragePool,                      //
    ops::ReduceMean, ops::ReduceSum, ops::ReduceMax,                             //
    ops::Transpose, ops::Reshape, ops::Flatten, ops::Squeeze, ops::Unsqueeze,    //
    ops::RT, ops::Expand, ops::Concat, ops::Split, ops::Slice, ops::Pad,         //
    ops::Gather, ops::ShapeOf, ops::Constant, ops::Patch,                        //
    ops::Abs, ops::Log, ops::Reciprocal, ops::Floor, ops::Ceil, ops::Round,      //
    ops::Sign, ops::Softsign, ops::Softplus, ops::Mish, ops::HardSwish,          //
    ops::Elu, ops::Selu, ops::HardSigmoid, ops::Max, ops::Min, ops::PRelu,       //
    ops::ReduceMin, ops::ReduceProd, ops::ReduceL1, ops::ReduceL2,               //
    ops::ReduceSumSquare, ops::ReduceLogSumExp, ops::ArgMax, ops::ArgMin,        //
    ops::Tile, ops::InstanceNormalization, ops::ConvTranspose, ops::Einsum, ops::Resize,   //
    ops::Equal, ops::Less, ops::LessOrEqual, ops::Greater, ops::GreaterOrEqual,  //
    ops::And, ops::Or, ops::Xor, ops::Not, ops::Mod,                              //
    ops::Sin, ops::Cos, ops::Tan, ops::Asin, ops::Acos, ops::Atan,               //
    ops::Sinh, ops::Cosh, ops::Asinh, ops::Acosh, ops::Atanh,                    //
    ops::Celu, ops::ThresholdedRelu, ops::Shrink, ops::IsNaN, ops::IsInf,        //
    ops::LogSoftmax, ops::Hardmax, ops::LRN, ops::ReduceLogSum, ops::CumSum,     //
    ops::TopK, ops::GatherElements, ops::GatherND, ops::Trilu, ops::OneHot, ops::GridSample, ops::RoiAlign,   //
    ops::ScatterElements, ops::ScatterND, ops::QuantizeLinear, ops::DequantizeLinear,  //
    ops::DynamicQuantizeLinear, ops::MatMulInteger, ops::ConvInteger, ops::QLinearMatMul, ops::QLinearConv, ops::Det,  //
    ops::BitwiseAnd, ops::BitwiseOr, ops::BitwiseXor, ops::BitwiseNot, ops::BitShift>;

/// Whether O is one of Ts (visitors list the ops each branch handles; a final
/// static_assert(always_false<O>) makes a forgotten op a compile error).
template <class O, class... Ts>
constexpr bool is_one_of = (std::is_same_v<O, Ts> || ...);
template <class>
constexpr bool always_false = false;
/// Whether op holds one of the op types Ts.
template <class... Ts, class V>
bool holds_any(const V& op) {
  return (std::holds_alternative<Ts>(op) || ...);
}

/// The op's stable name (its ONNX op_type; "PetRT" for the composite R/T op).
inline std::string_view op_name(const Op& op) {
  return std::visit([](const auto& o) -> std::string_view { return o.name; }, op);
}

/// Whether the op is multilinear (the verifier and mutator look only inside such ops).
inline bool is_multilinear(const Op& op) {
  return std::visit([](const auto& o) { return o.multilinear; }, op);
}

/// Whether the op only moves data (layout, slicing, constants).
inline bool is_layout(const Op& op) {
  return std::visit([](const auto& o) {
    if constexpr (requires { o.layout; }) return bool(o.layout);
    else return false;
  }, op);
}

/// Checks the inputs and returns the output types; resolves shape-dependent attributes in
/// place (see op_base.hpp).
inline Types infer_types(Op& op, InTypes in) {
  return std::visit([&](auto& o) -> Types { return o.infer(in); }, op);
}

namespace detail {
/// Name i of an attribute list written as "a, b, c".
constexpr std::string_view attr_name(std::string_view list, size_t i) {
  for (; i > 0; --i) list = list.substr(list.find(',') + 1);
  while (!list.empty() && list.front() == ' ') list.remove_prefix(1);
  return list.substr(0, list.find(','));
}
inline void attr_text(std::string& s, bool v) { s += v ? "1" : "0"; }
inline void attr_text(std::string& s, int v) { s += std::to_string(v); }
inline void attr_text(std::string& s, int64_t v) { s += std::to_string(v); }
inline void attr_text(std::string& s, const std::string& v) {
  s += '"';
  s += v;
  s += '"';
}
inline void attr_text(std::string& s, float v) {  // exact: hexadecimal
  char b[32];
  std::snprintf(b, sizeof b, "%a", double(v));
  s += b;
}
inline void attr_text(std::string& s, double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%a", v);
  s += b;
}
template <class E>
  requires std::is_enum_v<E>
void attr_text(std::string& s, E v) {
  s += std::to_string(int(v));
}
inline void attr_text(std::string& s, const std::vector<int64_t>& v) {
  s += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  s += ']';
}
inline void attr_text(std::string& s, const std::vector<double>& v) {
  s += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    attr_text(s, v[i]);
  }
  s += ']';
}
inline uint64_t fnv1a(const void* p, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  const auto* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 0x100000001b3ull;
  return h;
}
/// A constant's value: its shape and a hash of its elements.
template <class E>
void attr_text(std::string& s, const Tensor<E>& t) {
  attr_text(s, t.shape());
  s += cat("#", fnv1a(t.data(), size_t(t.size()) * sizeof(E)));
}
inline void attr_text(std::string& s, const std::variant<Tensor<float>, Tensor<int64_t>>& v) {
  s += v.index() ? "i64" : "f32";
  std::visit([&](const auto& t) { attr_text(s, t); }, v);
}
}  // namespace detail

/// Number of attributes of op type O (its PET_ATTRS list).
template <class O>
constexpr size_t attr_count = std::tuple_size_v<decltype(std::declval<const O&>().attr_refs())>;

/// Calls f(name, value) for every attribute of o, in the order of its PET_ATTRS list.
template <class O, class F>
void for_each_attr(O&& o, F&& f) {
  using T = std::remove_cvref_t<O>;
  std::apply([&](auto&... v) {
    size_t i = 0;
    (f(detail::attr_name(T::attr_list, i++), v), ...);
  }, o.attr_refs());
}

/// The op's name with every attribute, as text: "Conv{kernel_shape=[3,3],strides=[1,1],...}".
/// Derived from the attribute lists, so two ops have the same signature exactly when they
/// are equal; it keys the profiler's and the algorithm cache and compares programs.
inline std::string op_signature(const Op& op) {
  return std::visit([](const auto& o) {
    std::string k(o.name);
    k += '{';
    bool first = true;
    for_each_attr(o, [&](std::string_view name, const auto& v) {
      if (!first) k += ',';
      first = false;
      k += name;
      k += '=';
      detail::attr_text(k, v);
    });
    return k + '}';
  }, op);
}

/// A 64-bit hash of the signature (stable across runs and machines).
inline uint64_t op_hash(const Op& op) {
  const std::string s = op_signature(op);
  return detail::fnv1a(s.data(), s.size());
}

/// Floating-point operations of one execution (multiply-add = 2; data movement = 0).
inline int64_t op_flops(const Op& op, InTypes in, InTypes out) {
  return std::visit([&](const auto& o) -> int64_t {
    if constexpr (requires { o.flops(in, out); }) return o.flops(in, out);
    else if constexpr (requires { o.layout; }) return 0;
    else return out.empty() ? 0 : numel(out[0].shape);
  }, op);
}

}  // namespace pet
