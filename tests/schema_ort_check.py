#!/usr/bin/env python3
"""Runs the schema family of fuzz_import against ONNX Runtime: each single-node variant pet
imported (NAME.orig, its symbolic and unknown dims taken as 2, as the fuzzer imports it) and
pet's program of it (NAME.onnx) run in ONNX Runtime (graph optimisations off) on the same
random inputs; every output must agree in shape, in NaN and infinity, and within pet's
tolerance (float16: --atol 1e-3 --rtol 1e-2). Variants ONNX Runtime refuses (or crashes on:
each chunk runs in a child process, and the run resumes past the file) are counted, not
failed.

  PET_FUZZ_KEEP=/tmp/keep build/tests/fuzz_import 12000 DIR MODEL SEED
  .venv/bin/python tests/schema_ort_check.py /tmp/keep

exit: 0 all agree, 1 a difference or a file of pet's ONNX Runtime refuses, 77 onnxruntime missing.
"""
import glob
import json
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
except ImportError as e:
    print(f"SKIPPED: {e} (run scripts/setup.sh to make .venv)")
    sys.exit(77)

NP = {1: np.float32, 10: np.float16, 11: np.float64, 7: np.int64, 6: np.int32, 3: np.int8, 2: np.uint8, 9: np.bool_}


def compare(orig_path, new_path):
    """'ok', 'refused' (ONNX Runtime cannot run the variant) or what differs."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    m = onnx.load(orig_path)
    for vi in m.graph.input:
        for dim in vi.type.tensor_type.shape.dim:
            if not dim.HasField("dim_value"):
                dim.dim_value = 2
    try:
        s0 = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    except Exception:
        return "refused"
    try:
        s1 = ort.InferenceSession(new_path, so, providers=["CPUExecutionProvider"])
    except Exception as e:
        return f"ONNX Runtime refuses pet's file: {str(e)[:200]}"
    rng = np.random.default_rng(0)
    feeds0, feeds1 = {}, {}
    wants = {i.name: i.type for i in s1.get_inputs()}
    init = {t.name for t in m.graph.initializer}
    for vi in m.graph.input:
        if vi.name in init:
            continue
        t = NP.get(vi.type.tensor_type.elem_type)
        if t is None:
            return "refused"
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if t in (np.float32, np.float16, np.float64):
            a = rng.uniform(-2, 2, shape).astype(t)
        else:
            a = rng.integers(0, 2 if t == np.bool_ else 3, shape).astype(t)
        feeds0[vi.name] = a
        if vi.name in wants:
            feeds1[vi.name] = a.astype(np.float32) if wants[vi.name] == "tensor(float)" else a
    try:
        r0 = s0.run(None, feeds0)
    except Exception:
        return "refused"
    try:
        r1 = s1.run(None, feeds1)
    except Exception as e:
        return f"pet's file fails in ONNX Runtime: {str(e)[:200]}"
    for k, (a, b) in enumerate(zip(r0, r1)):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return f"output {k}: shape {a.shape}, pet's {b.shape}"
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        if a.dtype.kind in "biu":
            if not np.array_equal(a64, b64):
                return f"output {k}: {a.ravel()[:6]}, pet's {b.ravel()[:6]}"
            continue
        fin = np.isfinite(a64) & np.isfinite(b64)
        if not np.array_equal(np.isnan(a64), np.isnan(b64)) or not np.array_equal(np.isinf(a64), np.isinf(b64)) or \
                not np.array_equal(a64[np.isinf(a64)], b64[np.isinf(a64)]):
            return f"output {k}: NaN or infinity differ: {a.ravel()[:6]}, pet's {b.ravel()[:6]}"
        atol, rtol = (1e-3, 1e-2) if a.dtype == np.float16 else (1e-4, 1e-3)
        if fin.any():
            err, ref = np.abs(a64[fin] - b64[fin]).max(), np.abs(a64[fin]).max()
            if err > atol + rtol * ref:
                return f"output {k}: max error {err:.3g} (max |ref| {ref:.3g}): {a.ravel()[:6]}, pet's {b.ravel()[:6]}"
    return "ok"


def child(files, start, progress):
    ort.set_default_logger_severity(4)
    results = {}
    for i in range(start, len(files)):
        with open(progress, "w") as f:
            f.write(str(i))
        results[files[i]] = compare(files[i][:-5] + ".orig", files[i])
        with open(progress + ".json", "a") as f:
            f.write(json.dumps([files[i], results[files[i]]]) + "\n")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        d, start = sys.argv[2], int(sys.argv[3])
        child(sorted(glob.glob(os.path.join(d, "*.onnx"))), start, os.path.join(d, ".progress"))
        return 0
    d = sys.argv[1]
    files = sorted(glob.glob(os.path.join(d, "*.onnx")))
    progress = os.path.join(d, ".progress")
    if os.path.exists(progress + ".json"):
        os.remove(progress + ".json")
    start, crashed = 0, []
    while start < len(files):
        print(f"{start}/{len(files)} files", file=sys.stderr)
        r = subprocess.run([sys.executable, __file__, "--child", d, str(start)])
        if r.returncode == 0:
            break
        at = int(open(progress).read())
        crashed.append(os.path.basename(files[at]))
        start = at + 1
    outcome = {}
    if os.path.exists(progress + ".json"):
        for line in open(progress + ".json"):
            f, o = json.loads(line)
            outcome[f] = o
    ok = sum(o == "ok" for o in outcome.values())
    refused = sum(o == "refused" for o in outcome.values())
    bad = {os.path.basename(f): o for f, o in outcome.items() if o not in ("ok", "refused")}
    for f, o in sorted(bad.items()):
        print(f"DIFF {f}: {o}")
    print(f"{len(files)} programs: {ok} agree with ONNX Runtime, {refused} variants ONNX Runtime refuses, "
          f"{len(crashed)} it crashes on ({', '.join(crashed) or 'none'}), {len(bad)} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
