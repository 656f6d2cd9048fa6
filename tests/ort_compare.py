#!/usr/bin/env python3
"""Runs an original ONNX model and files pet wrote from it (optimized models, mutants) in
ONNX Runtime on the same random inputs and compares every output with pet's tolerance
(|new - orig| <= atol + rtol * max|orig|); every file must pass onnx.checker and load in
ONNX Runtime (no duplicate node names, ...).

usage: ort_compare.py ORIGINAL.onnx NEW.onnx... [--dim N] [--atol A] [--rtol R]
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


def session(path):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def feeds_for(sess, dim, seed):
    rng = np.random.default_rng(seed)
    out = []
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else dim for d in i.shape]
        if "float" in i.type:
            out.append(rng.uniform(-1, 1, shape).astype(np.float32))
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
    a = ap.parse_args()
    ref = session(a.original)
    inputs = feeds_for(ref, a.dim, 5)
    want = ref.run(None, {i.name: v for i, v in zip(ref.get_inputs(), inputs)})
    bad = 0
    for path in a.new:
        try:
            onnx.checker.check_model(onnx.load(path), full_check=True)
            s = session(path)
            got = s.run(None, {i.name: v for i, v in zip(s.get_inputs(), inputs)})
            assert len(got) == len(want), f"{len(got)} outputs instead of {len(want)}"
            for k, (g, w) in enumerate(zip(got, want)):
                assert g.shape == w.shape, f"output {k}: shape {g.shape} vs {w.shape}"
                err, scale = float(np.max(np.abs(g - w))), float(np.max(np.abs(w)))
                assert err <= a.atol + a.rtol * scale, f"output {k}: max|new-orig| {err:g} with max|orig| {scale:g}"
            print(f"ort_compare: {path}: ok in ONNX Runtime {ort.__version__}")
        except Exception as e:  # noqa: BLE001
            bad += 1
            print(f"ort_compare: {path}: {str(e).splitlines()[0][:300]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
