#pragma once
// A program that touches most ops and every attribute kind export must write (round-trip
// and fuzz seed).
#include "pet/core/rng.hpp"
#include "pet/ir/builder.hpp"

namespace pet::testing {

/// A program touching most ops and every attribute kind that export must write.
inline Graph zoo() {
  Graph g;
  Builder b(g);
  Rng rng(11);
  auto w = [&](Shape s) {
    Tensor<float> t(s);
    for (int64_t i = 0; i < t.size(); ++i) t[i] = float(rng.uniform(-1, 1));
    return t;
  };
  TensorId x = b.input("x", {2, 4, 6, 6});
  TensorId c = b.add(ops::Conv{.pads = {1, 0, 1, 2}, .dilations = {2, 1}, .group = 2}, {x, b.constant("w", w({4, 2, 2, 3})), b.constant("bias", w({4}))});
  TensorId r = b.add(ops::RT{.split_shape = {2, 4, 3, 2, 6}, .perm = {0, 3, 1, 2, 4}, .out_shape = {4, 4, 3, 6}}, {c});
  TensorId p = b.add(ops::Pad{.pads = {0, 0, 1, 0, 0, 0, 0, 1}, .mode = ops::PadMode::Reflect}, {r});
  TensorId pc = b.add(ops::Pad{.pads = {0, 0, 0, 1, 0, 0, 1, 0}, .value = 2.0}, {r});
  TensorId s = b.add(ops::Slice{.starts = {-1, 0}, .ends = {INT64_MIN, 5}, .axes = {2, 3}, .steps = {-1, 2}}, {p});
  TensorId sm = b.add(ops::Softmax{{.axis = 1, .flatten_tail = true}}, {s});
  TensorId sm2 = b.add(ops::Softmax{{.axis = 2}}, {pc});
  TensorId cl = b.add(ops::Clip{.min = -0.5}, {sm});
  TensorId mp = b.add(ops::MaxPool{{.kernel_shape = {2, 2}, .pads = {1, 1, 0, 0}, .dilations = {1, 2}, .ceil_mode = true}}, {sm2});
  TensorId ap = b.add(ops::AveragePool{{.kernel_shape = {3, 2}, .strides = {2, 1}, .pads = {1, 0, 1, 1}}, true}, {mp});
  auto sp = b.add_multi(ops::Split{.axis = 1, .split = {1, 3}, .num_outputs = 2}, {ap});
  TensorId rs = b.add(ops::ReduceSum{{.axes = {2}, .keepdims = false}}, {sp[1]});
  TensorId rm = b.add(ops::ReduceMean{{.axes = {1, 2}}}, {cl});
  TensorId ln = b.add(ops::LayerNormalization{.axis = -1}, {rs, b.constant("g", w({6})), b.constant("be", w({6}))});
  TensorId mm = b.add(ops::MatMul{}, {ln, b.constant("m", w({6, 5}))});
  TensorId ge = b.add(ops::Gemm{.alpha = 0.5f, .trans_b = true}, {b.add(ops::Flatten{.axis = 1}, {mm}), b.constant("gw", w({3, 15})), b.constant("gc", w({3}))});
  TensorId un = b.add(ops::Unsqueeze{.axes = {0, 2}}, {ge});
  TensorId ex = b.add(ops::Expand{.shape = {2, 4, 1, 3}}, {un});
  TensorId sq = b.add(ops::Squeeze{.axes = {2}}, {ex});
  TensorId tr = b.add(ops::Transpose{.perm = {1, 0, 2}}, {sq});
  TensorId bn = b.add(ops::BatchNormalization{}, {b.add(ops::Sigmoid{}, {tr}), b.constant("s1", w({2})), b.constant("s2", w({2})),
                                                  b.constant("s3", w({2})), b.constant("s4", Tensor<float>({2}, 1.0f))});
  b.output(bn);
  b.output(rm);
  b.output(b.add(ops::Concat{.axis = 0}, {sp[0], sp[0]}));
  return g;
}
}  // namespace pet::testing
