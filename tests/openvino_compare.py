#!/usr/bin/env python3
"""Runs an original ONNX model and files pet wrote from it (optimized models, mutants) in
OpenVINO (CPU plugin, f32 inference precision: on a CPU with AVX512_BF16 or AMX OpenVINO's
default is bf16) on the same random inputs, and compares every output of each new file with
the original's under OpenVINO, with pet's tolerance (|new - orig| <= atol + rtol * max|orig|).

What the original computes is taken from ONNX Runtime without graph optimisations where
onnxruntime is installed, else from OpenVINO. A new file passes where OpenVINO computes those
outputs from it. Where it refuses the new file or computes other outputs, the file fails,
unless OpenVINO also refuses the original or computes it otherwise than ONNX Runtime: then it
is OpenVINO's own fault, likely the same one, and the line says so (OpenVINO 2024.6 gives a
ConvTranspose with auto_pad SAME_UPPER, stride 2, over 4x4 a 9x9 output where ONNX says 8x8;
it refuses ONNX Runtime's contrib ops, sequences, ScatterND with a reduction, ...). pet's file
often runs where the original does not: it is then compared with ONNX Runtime's outputs.

With --expected DIR (ONNX test data: input_K.pb named as the inputs, output_K.pb), the
original's outputs are those, on those inputs (for an original ONNX Runtime cannot run).

usage: openvino_compare.py ORIGINAL.onnx NEW.onnx... [--dim N] [--atol A] [--rtol R] [--expected DIR]
exit: 0 all agree, 1 a difference or a file OpenVINO refuses, 77 openvino missing.
"""
import argparse
import sys

try:
    import numpy as np
    import onnx
    import openvino as ov
except ImportError as e:
    print(f"SKIPPED: {e} (run scripts/setup.sh to make .venv with OpenVINO)")
    sys.exit(77)

_core = None


def core():
    global _core
    if _core is None:
        _core = ov.Core()
    return _core


def compile_model(model, dims=None):
    """OpenVINO's CPU plugin on an ONNX file (path) or serialized bytes, in f32 and one
    thread (results that do not depend on the machine's core count). `dims`: the value for
    every dynamic dimension of the inputs (reshaped before compiling)."""
    c = core()
    m = c.read_model(model) if isinstance(model, str) else c.read_model(model, b"")
    if dims is not None:
        m.reshape({i.any_name: [d.get_length() if d.is_static else dims for d in i.get_partial_shape()] for i in m.inputs})
    return c.compile_model(m, "CPU", {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": "1"})


def run(compiled, feeds):
    """Outputs in the model's order for feeds by input name. OpenVINO drops graph inputs
    nothing reads: feeds for names it does not have are left out."""
    names = set()
    for i in compiled.inputs:
        names |= set(i.get_names())
    r = compiled({k: np.array(v) for k, v in feeds.items() if k in names})
    return [np.array(r[o], copy=True) for o in compiled.outputs]


def input_specs(model_path):
    """(name, element type, shape with None for a dynamic dim) of the file's graph inputs,
    initializers left out."""
    m = onnx.load(model_path, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    out = []
    for i in m.graph.input:
        if i.name in inits:
            continue
        t = i.type.tensor_type
        out.append((i.name, t.elem_type, [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]))
    return out


def feeds_for(specs, dim, seed):
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, elem, shape in specs:
        shape = [dim if d is None else d for d in shape]
        if elem in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16):
            feeds[name] = rng.uniform(-1, 1, shape).astype(np.float32 if elem == onnx.TensorProto.FLOAT else np.float16)
        elif elem == onnx.TensorProto.BOOL:
            feeds[name] = np.zeros(shape, np.bool_)
        else:
            feeds[name] = np.zeros(shape, onnx.helper.tensor_dtype_to_np_dtype(elem))
    return feeds


def onnxruntime_outputs(path, feeds):
    """The original's outputs in ONNX Runtime without graph optimisations (the arbiter of
    what the original computes), or None without onnxruntime."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return [np.array(o, copy=True) for o in s.run(None, {i.name: feeds[i.name] for i in s.get_inputs()})]


def worst(got, want):
    """The largest |got - want| over the outputs, and the max|want| of that output."""
    assert len(got) == len(want), f"{len(got)} outputs instead of {len(want)}"
    e, sc = 0.0, 0.0
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"output {k}: shape {g.shape} vs {w.shape}"
        g, w = np.asarray(g, dtype=np.float64), np.asarray(w, dtype=np.float64)
        if w.size == 0:
            continue
        assert np.array_equal(np.isnan(g), np.isnan(w)), f"output {k}: NaN in other places"
        fin = np.isfinite(w) & np.isfinite(g)
        assert np.array_equal(g[~fin & ~np.isnan(w)], w[~fin & ~np.isnan(w)]), f"output {k}: infinities differ"
        if fin.any():
            err, scale = float(np.max(np.abs(g[fin] - w[fin]))), float(np.max(np.abs(w[fin])))
            if err > e:
                e, sc = err, scale
    return e, sc


def first_line(e):
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    return (lines[-1] if lines else repr(e))[:300]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("original")
    ap.add_argument("new", nargs="+")
    ap.add_argument("--dim", type=int, default=1)
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--expected", help="test data of the original's inputs and outputs (ONNX Runtime cannot run the original)")
    a = ap.parse_args()
    tol = lambda scale: a.atol + a.rtol * scale  # noqa: E731
    # What the original computes: the test data given, else ONNX Runtime's outputs where it is
    # installed (OpenVINO's own then have to agree), else OpenVINO's. `own`: what OpenVINO
    # does wrong on the original itself, if anything.
    if a.expected:
        import glob
        import os
        from onnx import numpy_helper
        def load(kind):
            files = sorted(glob.glob(os.path.join(a.expected, f"{kind}_*.pb")), key=lambda f: int(f.rsplit("_", 1)[1][:-3]))
            return [onnx.load_tensor(f) for f in files]
        feeds = {t.name: numpy_helper.to_array(t) for t in load("input")}
        want, own = [numpy_helper.to_array(t) for t in load("output")], None
    else:
        feeds = feeds_for(input_specs(a.original), a.dim, 5)
        want, own = onnxruntime_outputs(a.original, feeds), None
    try:
        ov_orig = run(compile_model(a.original, a.dim), feeds)
    except Exception as e:  # noqa: BLE001 - OpenVINO's own refusal of the model pet was given
        ov_orig, own = None, f"refuses the original itself ({first_line(e)})"
    if ov_orig is not None and want is None:
        want = ov_orig
    elif ov_orig is not None:
        try:
            err, scale = worst(ov_orig, want)
            assert err <= tol(scale), f"max|ov-ort| {err:g} with max|ort| {scale:g}"
        except AssertionError as e:
            own = f"miscomputes the original itself ({first_line(e)}; against ONNX Runtime without graph optimisations)"
    version = f"OpenVINO {ov.__version__}"
    if want is None:
        print(f"openvino_compare: {a.original}: {version} {own}, and ONNX Runtime is not installed: nothing to compare")
        return 0
    bad = 0
    for path in a.new:
        try:
            got = run(compile_model(path, a.dim), feeds)
            err, scale = worst(got, want)
            assert err <= tol(scale), f"max|new-orig| {err:g} with max|orig| {scale:g}"
            print(f"openvino_compare: {path}: ok in {version} (max|new-orig| {err:g})" + (f"; it {own}" if own else ""))
        except Exception as e:  # noqa: BLE001 - every refusal is a finding
            if own:  # the same fault, likely: nothing to tell
                print(f"openvino_compare: {path}: {first_line(e)}; {version} {own}, nothing to tell")
                continue
            bad += 1
            print(f"openvino_compare: {path}: {first_line(e)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
