#!/usr/bin/env python3
"""Writes models/dilated_demo.onnx, the model of the README's first command: a CSRNet-style
back end (two 3x3 dilation-2 convs with ReLUs, 96 channels on 1x96x28x28, symbolic batch
'N'), where pet optimize turns each dilated conv into a dense conv over the phase images
(Winograd applies then) and the R/T ops between the layers cancel out.
Run: /usr/bin/python3 models/make_dilated_demo.py [OUT] [--symbolic-spatial]   (needs python3-onnx and python3-numpy)
--symbolic-spatial: height and width are symbolic too ('H', 'W'; tests/optimize_test.sh: a
rewrite for one height that pet cannot write for every height).
--volume: 3-D convs instead (3x3x3, dilation 2, 16 channels on Nx16x8x16x16), the output's
batch declared as an exporter does, with a name of its own ('relu1_dim_0')."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

VOLUME = "--volume" in sys.argv[1:]
C, HW, LAYERS = (16, 16, 2) if VOLUME else (96, 28, 2)
K = 3 if VOLUME else 2  # spatial dims
rng = np.random.default_rng(11)
nodes, inits, x = [], [], "x"
for i in range(LAYERS):
    w = (rng.uniform(-1, 1, (C, C) + (3,) * K) * (3.0 / (C * 3**K)) ** 0.5).astype(np.float32)
    b = rng.uniform(-0.1, 0.1, C).astype(np.float32)
    inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
    nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"conv{i}"], name=f"conv{i}", kernel_shape=[3] * K, pads=[2] * 2 * K,
                                  dilations=[2] * K))
    nodes.append(helper.make_node("Relu", [f"conv{i}"], [f"relu{i}"], name=f"relu{i}"))
    x = f"relu{i}"
args = [a for a in sys.argv[1:] if a not in ("--symbolic-spatial", "--volume")]
spatial = ["H", "W"] if "--symbolic-spatial" in sys.argv[1:] else [8, HW, HW] if VOLUME else [HW, HW]
graph = helper.make_graph(nodes, "dilated_demo", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", C] + spatial)],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [f"{x}_dim_0" if VOLUME else "N", C] + spatial)], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="pet make_dilated_demo.py")
onnx.checker.check_model(model)
out = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "dilated_demo.onnx")
onnx.save(model, out)
print(f"wrote {out} ({os.path.getsize(out) // 1024} KB)")
