#!/usr/bin/env python3
"""Runs MODEL in ONNX Runtime (no graph optimisations: a plain oracle) on seeded random
float inputs and writes them and its outputs as ONNX test data (input_K.pb, output_K.pb),
for `pet run --check`.  usage: ort_testdata.py MODEL.onnx DIR   exit 77: no onnxruntime."""
import os
import sys

try:
    import numpy as np
    import onnxruntime as ort
    from onnx import numpy_helper
except ImportError as e:
    print(f"SKIPPED: {e}")
    sys.exit(77)

model, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
rng = np.random.default_rng(7)
feeds = {}
for k, i in enumerate(s.get_inputs()):
    x = rng.uniform(-2, 2, [d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32)
    feeds[i.name] = x
    open(os.path.join(out, f"input_{k}.pb"), "wb").write(numpy_helper.from_array(x, i.name).SerializeToString())
for k, (o, y) in enumerate(zip(s.get_outputs(), s.run(None, feeds))):
    open(os.path.join(out, f"output_{k}.pb"), "wb").write(numpy_helper.from_array(y, o.name).SerializeToString())
