#!/usr/bin/env python3
"""Accuracy of pet's cpu backend and ONNX Runtime against exact values, op by op.

Each case is a one-node model over inputs chosen where float kernels go wrong (near 1 for
log, large negative for softplus, subnormal, a dominant class for log-softmax, ...). Both
systems run the same float32 inputs; the exact value is the op's formula in float64 (numpy).
Reported per case: the largest error in ulps of the float32 exact value (an error below the
smallest normal float counted against its spacing) and the largest relative error, for pet
and for ONNX Runtime, and pet's worst input.

Usage: .venv/bin/python experiments/accuracy_vs_ort.py [OUT.json] [--only NAME,...]
PET=/path/to/pet checks another binary. Progress on stderr.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PET = os.environ.get("PET", os.path.join(ROOT, "build", "pet"))


def cases():
    rng = np.random.default_rng(1)

    def mags(lo, hi, n):
        return np.exp(rng.uniform(np.log(lo), np.log(hi), n))

    def both(v):
        return np.concatenate([v, -v])

    erf = np.vectorize(math.erf)

    def lse(x, ax):
        m = x.max(ax, keepdims=True)
        return m + np.log(np.exp(x - m).sum(ax, keepdims=True))

    def softplus(x):
        return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)

    def wide(lo, hi):  # small to large magnitudes of both signs
        return lambda: both(mags(lo, hi, 20000))

    # name: (op, attrs, opset, input generator, exact formula)
    return {
        "Log": ("Log", {}, 13, lambda: np.concatenate([1 + rng.uniform(-1e-2, 1e-2, 20000), mags(1e-44, 1e38, 20000), [1.0, 2.0, 0.5]]), np.log),
        "Exp": ("Exp", {}, 13, lambda: rng.uniform(-87, 88, 40000), np.exp),
        "Tanh": ("Tanh", {}, 13, wide(1e-8, 20), np.tanh),
        "Sigmoid": ("Sigmoid", {}, 13, wide(1e-8, 80), lambda x: 1 / (1 + np.exp(-x))),
        "Sqrt": ("Sqrt", {}, 13, lambda: mags(1e-30, 1e30, 40000), np.sqrt),
        "Reciprocal": ("Reciprocal", {}, 13, wide(1e-30, 1e30), lambda x: 1 / x),
        "Softplus": ("Softplus", {}, 13, wide(1e-8, 80), softplus),
        "Mish": ("Mish", {}, 18, wide(1e-8, 80), lambda x: x * np.tanh(softplus(x))),
        "Elu": ("Elu", {}, 13, wide(1e-8, 80), lambda x: np.where(x > 0, x, np.expm1(x))),
        "Gelu": ("Gelu", {}, 20, wide(1e-8, 10), lambda x: 0.5 * x * (1 + erf(x / np.sqrt(2)))),
        "Erf": ("Erf", {}, 13, wide(1e-8, 6), erf),
        "Sin": ("Sin", {}, 13, wide(1e-8, 1e4), np.sin),
        "Softsign": ("Softsign", {}, 13, wide(1e-8, 1e8), lambda x: x / (1 + np.abs(x))),
        "Softmax rows": ("Softmax", {"axis": 1}, 13, lambda: rng.normal(0, 8, [8, 1000]), lambda x: np.exp(x - lse(x, 1))),
        "LogSoftmax, a dominant class": ("LogSoftmax", {"axis": 1}, 13,
                                         lambda: np.concatenate([rng.normal(0, 1, [8, 999]), np.full([8, 1], 25.0)], 1), lambda x: x - lse(x, 1)),
        "LogSoftmax rows": ("LogSoftmax", {"axis": 1}, 13, lambda: rng.normal(0, 3, [64, 1000]), lambda x: x - lse(x, 1)),
        "LogSoftmax channels": ("LogSoftmax", {"axis": 1}, 13, lambda: rng.normal(0, 3, [2, 64, 8, 8]), lambda x: x - lse(x, 1)),
        "ReduceLogSumExp": ("ReduceLogSumExp", {"axes": [1], "keepdims": 0}, 13, lambda: rng.normal(0, 3, [64, 1000]), lambda x: lse(x, 1)[:, 0]),
    }


def ulps(y, exact):
    e32 = exact.astype(np.float32)
    spacing = np.spacing(np.maximum(np.abs(e32), np.float32(np.finfo(np.float32).tiny))).astype(np.float64)
    err = np.abs(y.astype(np.float64) - exact) / spacing
    err[~np.isfinite(exact) & (y == e32)] = 0
    return err


def main():
    args = sys.argv[1:]
    only = None
    if "--only" in args:
        i = args.index("--only")
        only = args[i + 1].split(",")
        del args[i:i + 2]
    out = args[0] if args else None
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
        print("onnxruntime not installed: pet only (bash scripts/setup.sh installs it into .venv)", file=sys.stderr)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (op, attrs, opset, gen, exact_of) in cases().items():
            if only and name not in only:
                continue
            print(f"{name} ...", file=sys.stderr)
            x = gen().astype(np.float32)
            exact = exact_of(x.astype(np.float64))
            g = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], "g",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(exact.shape))])
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
            stem = os.path.join(tmp, "".join(c if c.isalnum() else "_" for c in name))
            onnx.save(m, stem + ".onnx")
            os.makedirs(stem + ".in")
            with open(os.path.join(stem + ".in", "input_0.pb"), "wb") as f:
                f.write(numpy_helper.from_array(x, "x").SerializeToString())
            subprocess.run([PET, "run", stem + ".onnx", "--inputs", stem + ".in", "--save", stem + ".out"], check=True, capture_output=True)
            yp = numpy_helper.to_array(onnx.load_tensor(os.path.join(stem + ".out", "output_0.pb")))
            row = {"case": name, "op": op, "elements": int(x.size)}
            up = ulps(yp, exact)
            k = int(np.nanargmax(up))
            rel = lambda y: float(np.nanmax(np.abs(y.astype(np.float64) - exact) / np.maximum(np.abs(exact), 1e-30)))
            row.update(pet_max_ulp=float(np.nanmax(up)), pet_max_rel=rel(yp),
                       pet_worst={"x": float(x.flat[k]) if x.size == exact.size else None, "got": float(yp.flat[k]), "exact": float(exact.flat[k])})
            if ort is not None:
                try:
                    yo = ort.InferenceSession(stem + ".onnx", providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
                    row.update(ort_max_ulp=float(np.nanmax(ulps(yo, exact))), ort_max_rel=rel(yo))
                except Exception as e:  # e.g. no kernel for the op at this opset
                    row["ort_error"] = str(e).splitlines()[0][:120]
            rows.append(row)
    print(f"{'case':30s} {'pet ulp':>12s} {'ORT ulp':>12s} {'pet rel':>10s} {'ORT rel':>10s}")
    for r in rows:
        o = f"{r['ort_max_ulp']:12.1f}" if "ort_max_ulp" in r else f"{'-':>12s}"
        orl = f"{r['ort_max_rel']:10.2g}" if "ort_max_rel" in r else f"{'-':>10s}"
        print(f"{r['case']:30s} {r['pet_max_ulp']:12.1f} {o} {r['pet_max_rel']:10.2g} {orl}")
    if out:
        with open(out, "w") as f:
            json.dump({"pet": PET, "cases": rows}, f, indent=1)


if __name__ == "__main__":
    main()
