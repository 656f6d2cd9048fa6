#pragma once
/// The operator list: adding an op is one line here (plus its header, its ONNX mapping and
/// its test). Anything that visits Op must handle every alternative, so a missing case is a
/// compile error.
#include <variant>

#include "pet/ir/ops/constant.hpp"
#include "pet/ir/ops/conv.hpp"
#include "pet/ir/ops/elementwise.hpp"
#include "pet/ir/ops/layout.hpp"
#include "pet/ir/ops/matmul.hpp"
#include "pet/ir/ops/normalization.hpp"
#include "pet/ir/ops/pool.hpp"
#include "pet/ir/ops/reduce.hpp"
#include "pet/ir/ops/slicing.hpp"

namespace pet {

using Op = std::variant<
    ops::Conv, ops::MatMul, ops::Gemm,                                           //
    ops::Add, ops::Sub, ops::Mul, ops::Div, ops::Pow,                            //
    ops::Sqrt, ops::Erf, ops::Exp, ops::Neg, ops::Relu, ops::LeakyRelu,          //
    ops::Sigmoid, ops::Tanh, ops::Clip, ops::Where, ops::Cast, ops::Identity,    //
    ops::Dropout, ops::Softmax, ops::BatchNormalization, ops::LayerNormalization,  //
    ops::MaxPool, ops::AveragePool, ops::GlobalAveragePool,                      //
    ops::ReduceMean, ops::ReduceSum, ops::ReduceMax,                             //
    ops::Transpose, ops::Reshape, ops::Flatten, ops::Squeeze, ops::Unsqueeze,    //
    ops::RT, ops::Expand, ops::Concat, ops::Split, ops::Slice, ops::Pad,         //
    ops::Gather, ops::ShapeOf, ops::Constant, ops::Patch>;

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

/// The op's name with its attributes, as text (structural comparison of programs).
inline std::string op_signature(const Op& op) {
  return std::visit([](const auto& o) {
    std::string k(o.name);
    if constexpr (requires { o.perm; }) k += cat("perm", o.perm);
    if constexpr (requires { o.split_shape; }) k += cat("split", o.split_shape, "out", o.out_shape);
    if constexpr (requires { o.strides; }) k += cat("s", o.strides);
    if constexpr (requires { o.pads; }) k += cat("p", o.pads);
    if constexpr (requires { o.dilations; }) k += cat("d", o.dilations);
    if constexpr (requires { o.group; }) k += cat("g", o.group);
    if constexpr (requires { o.axis; }) k += cat("a", o.axis);
    if constexpr (requires { o.axes; }) k += cat("x", o.axes);
    if constexpr (requires { o.begin; }) k += cat("b", o.begin, o.step);
    if constexpr (requires { o.split; }) k += cat("sp", o.split);
    if constexpr (requires { o.shape; }) k += cat("sh", o.shape);
    if constexpr (requires { o.offsets; }) k += cat("o", o.offsets);
    if constexpr (requires { o.kernel_shape; }) k += cat("k", o.kernel_shape);
    if constexpr (requires { o.trans_a; }) k += cat("t", o.trans_a, o.trans_b, o.alpha, o.beta);
    return k;
  }, op);
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
