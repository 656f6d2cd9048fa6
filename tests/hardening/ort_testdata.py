#!/usr/bin/env python3
"""Runs MODEL in ONNX Runtime (no graph optimisations: a plain oracle) on seeded random
float inputs and writes them and its outputs as ONNX test data (input_K.pb, output_K.pb),
for `pet run --check`. --reference: ONNX's Python reference computes the outputs instead
(for ops ONNX Runtime 1.20 has no kernel for: DeformConv).
usage: ort_testdata.py MODEL.onnx DIR [--reference]   exit 77: no onnxruntime."""
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
rng = np.random.default_rng(7)
if "--reference" in sys.argv[3:]:
    import onnx
    from onnx.reference import ReferenceEvaluator
    g = onnx.load(model).graph
    inits = {t.name for t in g.initializer}
    ins = [(i.name, [d.dim_value or 1 for d in i.type.tensor_type.shape.dim]) for i in g.input if i.name not in inits]
    half = {i.name for i in g.input if i.type.tensor_type.elem_type == onnx.TensorProto.FLOAT16}
    outs = [o.name for o in g.output]
    run = lambda feeds: ReferenceEvaluator(model).run(None, feeds)
else:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    ins = [(i.name, [d if isinstance(d, int) else 1 for d in i.shape]) for i in s.get_inputs()]
    half = {i.name for i in s.get_inputs() if i.type == "tensor(float16)"}  # (float16 inputs as such)
    outs = [o.name for o in s.get_outputs()]
    run = lambda feeds: s.run(None, feeds)
feeds = {}
for k, (name, shape) in enumerate(ins):
    x = rng.uniform(-2, 2, shape).astype(np.float16 if name in half else np.float32)
    feeds[name] = x
    open(os.path.join(out, f"input_{k}.pb"), "wb").write(numpy_helper.from_array(x, name).SerializeToString())
for k, (name, y) in enumerate(zip(outs, run(feeds))):
    open(os.path.join(out, f"output_{k}.pb"), "wb").write(numpy_helper.from_array(np.asarray(y), name).SerializeToString())
