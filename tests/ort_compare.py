#!/usr/bin/env python3
"""Runs an original ONNX model and files pet wrote from it (optimized models, mutants) in
ONNX Runtime on the same random inputs and compares every output with pet's tolerance
(|new - orig| <= atol + rtol * max|orig|); every file must pass onnx.checker and load in
ONNX Runtime (no duplicate node names, ...).

Both files run twice: with ONNX Runtime's graph optimisations (what its users get) and
without them (its kernels on the graph as written). A file passes when it agrees with the
original under both; or, when only the optimised runs differ, if ONNX Runtime's optimisations
already change the original's own result by at least as much (ONNX Runtime 1.20.1's basic-level
fusions move Inception-v3's logits by 2.5 % of their range at 330 x 330 and at batch 16, and
pet's reference interpreter, PyTorch and ONNX Runtime without optimisations agree on the
original): that difference is ONNX Runtime's, and the line says so.

With --expected DIR (ONNX test data: input_K.pb, output_K.pb), the original's outputs are
those (for an original ONNX Runtime cannot run: it has no DeformConv kernel), on its inputs;
the new files must agree with them with and without ONNX Runtime's graph optimisations.

usage: ort_compare.py ORIGINAL.onnx NEW.onnx... [--dim N] [--atol A] [--rtol R] [--expected DIR]
exit: 0 all agree, 1 a difference or a file ONNX Runtime refuses, 77 onnxruntime missing.
"""
import argparse
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
except ImportError as e:
    print(f"SKIPPED: {e} (run scripts/setup.sh to make .venv)")
    sys.exit(77)


def session(path, optimise=True):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if not optimise:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def run(sess, inputs):
    return sess.run(None, {i.name: v for i, v in zip(sess.get_inputs(), inputs)})


def worst(got, want):
    """The largest |got - want| over the outputs, and the max|want| of that output."""
    assert len(got) == len(want), f"{len(got)} outputs instead of {len(want)}"
    e, sc = 0.0, 0.0
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"output {k}: shape {g.shape} vs {w.shape}"
        assert g.dtype == w.dtype, f"output {k}: type {g.dtype} vs {w.dtype}"
        g, w = np.asarray(g, dtype=np.float64), np.asarray(w, dtype=np.float64)  # bool outputs too
        if w.size == 0:  # an empty output: its shape is all there is
            continue
        err, scale = float(np.max(np.abs(g - w))), float(np.max(np.abs(w)))
        if err > e:
            e, sc = err, scale
    return e, sc


def feeds_for(sess, dim, seed):
    rng = np.random.default_rng(seed)
    out = []
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else dim for d in i.shape]
        if "float" in i.type:
            out.append(rng.uniform(-1, 1, shape).astype(np.float16 if i.type == "tensor(float16)" else np.float32))
        else:
            out.append(np.zeros(shape, np.int64))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("original")
    ap.add_argument("new", nargs="+")
    ap.add_argument("--dim", type=int, default=1)
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--expected", help="test data of the original's outputs (ONNX Runtime cannot run the original)")
    a = ap.parse_args()
    if a.expected:
        return against_test_data(a)
    ref = session(a.original)
    inputs = feeds_for(ref, a.dim, 5)
    want = run(ref, inputs)
    want_plain = None  # the original without ONNX Runtime's optimisations, when needed
    bad = 0
    for path in a.new:
        try:
            onnx.checker.check_model(path, full_check=True)  # (by path: a model with external data, over 2 GB too)
            got = run(session(path), inputs)
            err, scale = worst(got, want)
            tol = lambda sc: a.atol + a.rtol * sc
            if err <= tol(scale):
                print(f"ort_compare: {path}: ok in ONNX Runtime {ort.__version__}")
                continue
            if want_plain is None:
                want_plain = run(session(a.original, optimise=False), inputs)
            e_plain, s_plain = worst(run(session(path, optimise=False), inputs), want_plain)
            assert e_plain <= tol(s_plain), f"max|new-orig| {e_plain:g} with max|orig| {s_plain:g} (graph optimisations off)"
            e_own, _ = worst(want, want_plain)
            assert e_own >= 0.5 * err, f"max|new-orig| {err:g} with max|orig| {scale:g}"
            print(f"ort_compare: {path}: ok in ONNX Runtime {ort.__version__} without its graph optimisations (max|new-orig| {e_plain:g}); "
                  f"with them the files differ by {err:g}, and the optimisations move the original's own result by {e_own:g}")
        except Exception as e:  # noqa: BLE001
            bad += 1
            print(f"ort_compare: {path}: {str(e).splitlines()[0][:300]}")
    return 1 if bad else 0


def against_test_data(a):
    import glob
    import os
    from onnx import numpy_helper
    load = lambda kind: [numpy_helper.to_array(onnx.load_tensor(f))
                         for f in sorted(glob.glob(os.path.join(a.expected, f"{kind}_*.pb")), key=lambda f: int(f.rsplit("_", 1)[1][:-3]))]
    inputs, want = load("input"), load("output")
    bad = 0
    for path in a.new:
        try:
            onnx.checker.check_model(path, full_check=True)
            for optimise in (True, False):
                err, scale = worst(run(session(path, optimise), inputs), want)
                assert err <= a.atol + a.rtol * scale, f"max|new-expected| {err:g} with max|expected| {scale:g} (graph optimisations {'on' if optimise else 'off'})"
            print(f"ort_compare: {path}: ok in ONNX Runtime {ort.__version__} against {a.expected}")
        except Exception as e:  # noqa: BLE001
            bad += 1
            print(f"ort_compare: {path}: {str(e).splitlines()[0][:300]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
