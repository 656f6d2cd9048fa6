#!/usr/bin/env python3
"""Writes models/tiny_cnn.onnx, the small model bundled with pet (a few KB): a CNN with a
batch-norm, a max-pool, a dilated conv, two parallel 1x1 convs joined by Concat, a global
average pool and a Gemm classifier; symbolic batch dimension 'N'.
Run: /usr/bin/python3 models/make_tiny_cnn.py   (needs python3-onnx and python3-numpy)"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(7)


def w(name, *shape, scale=None):
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    s = scale if scale is not None else (1.0 / fan_in) ** 0.5
    return numpy_helper.from_array((rng.uniform(-1, 1, shape) * s).astype(np.float32), name)


inits = [
    w("c1_w", 8, 3, 3, 3), w("c1_b", 8),
    numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "bn_scale"),
    numpy_helper.from_array(rng.uniform(-0.1, 0.1, 8).astype(np.float32), "bn_bias"),
    numpy_helper.from_array(rng.uniform(-0.1, 0.1, 8).astype(np.float32), "bn_mean"),
    numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "bn_var"),
    w("c2_w", 8, 8, 3, 3),
    w("a_w", 8, 8, 1, 1), w("b_w", 8, 8, 1, 1),
    w("fc_w", 10, 16), w("fc_b", 10),
]
nodes = [
    helper.make_node("Conv", ["x", "c1_w", "c1_b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
    helper.make_node("BatchNormalization", ["c1", "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["bn"], name="bn1"),
    helper.make_node("Relu", ["bn"], ["r1"], name="relu1"),
    helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Conv", ["p1", "c2_w"], ["c2"], name="conv2_dilated", pads=[2, 2, 2, 2], dilations=[2, 2]),
    helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
    helper.make_node("Conv", ["r2", "a_w"], ["a"], name="branch_a"),
    helper.make_node("Conv", ["r2", "b_w"], ["b"], name="branch_b"),
    helper.make_node("Concat", ["a", "b"], ["cat"], name="concat", axis=1),
    helper.make_node("GlobalAveragePool", ["cat"], ["gap"], name="gap"),
    helper.make_node("Flatten", ["gap"], ["flat"], name="flatten", axis=1),
    helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
    helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
]
graph = helper.make_graph(
    nodes, "tiny_cnn",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
    [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 10])],
    inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="pet")
model.ir_version = 8
onnx.checker.check_model(model)
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_cnn.onnx")
onnx.save(model, out)
print(f"wrote {out} ({os.path.getsize(out)} bytes)")
