#!/usr/bin/env python3
"""Quantized models, as users make them: each float ONNX model given is quantized by ONNX
Runtime's own tool, in one of its three formats (--format):
  qdq        quantize_static, QDQ format: uint8 activations, int8 weights per output channel,
             int32 biases, calibrated on seeded random inputs (the default);
  qoperator  quantize_static, QOperator format, Conv and MatMul only (QLinearConv,
             QLinearMatMul: the standard ONNX ops of that format);
  qoperator-all  the same with every op ONNX Runtime quantizes (its default): also its
             com.microsoft ops (QLinearAdd, QLinearMul, QLinearConcat, QLinearSigmoid,
             QLinearSoftmax, QLinearGlobalAveragePool, QGemm) and int8 MaxPool;
  dynamic    quantize_dynamic (DynamicQuantizeLinear, MatMulInteger, ConvInteger; uint8
             weights where the model has convs, as ORT's ConvInteger takes only those), then
  - ONNX Runtime (graph optimisations off: the plain QDQ semantics) computes the oracle,
  - `pet run --check` on cpu and reference compares pet with it,
  - `pet run --repeat` (int8 convs where the CPU has VNNI; and with --no-int8, all in float)
    and ONNX Runtime (all optimisations: its int8 kernels) are timed,
  - with --optimize S, `pet optimize --budget S` writes a file that is checked again and
    compared in ONNX Runtime with the quantized original (tests/ort_compare.py).
Writes OUT/quantized.json and prints one line per model; progress on stderr.

usage (.venv's interpreter, with onnxruntime):
  .venv/bin/python experiments/zoo/quantized.py build/pet OUT MODEL.onnx... [--optimize S] [--format F]
    (float models, for example experiments/zoo/check.py's OUT/NAME/model.onnx)
exit: 0 every model passed, 1 otherwise, 77 without onnxruntime.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic, quantize_static
except ImportError as e:  # pragma: no cover
    print(f"SKIPPED: {e}")
    sys.exit(77)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# Tolerance of the checks, relative to max|ref|: float kernels that sum in another order move
# a value across a rounding midpoint now and then, and the quantized layers after it carry
# that step on (a quantized MobileNet-v2: 25 % of the outputs differ, by up to 0.7 % of the
# largest); ONNX Runtime's int8 kernels against its plain QDQ execution differ as much
# (reported per model as ort_int8_vs_plain, relative to max|ref|).
RTOL = 0.02


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def feeds(sess, seed):
    rng = np.random.default_rng(seed)
    return {i.name: rng.uniform(-1, 1, [d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32) for i in sess.get_inputs()}


class Reader(CalibrationDataReader):
    def __init__(self, model, n=4):
        s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        self.data = iter([feeds(s, 100 + k) for k in range(n)])

    def get_next(self):
        return next(self.data, None)


def ort_median_ms(path, x, repeat=10):
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for _ in range(3):
        s.run(None, x)
    t = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        s.run(None, x)
        t.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(t))


def run(cmd, timeout=1800):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout + r.stderr


def quantize(src, q, fmt):
    if fmt == "dynamic":
        convs = any(n.op_type == "Conv" for n in onnx.load(src).graph.node)
        quantize_dynamic(src, q, weight_type=QuantType.QUInt8 if convs else QuantType.QInt8)
    elif fmt in ("qoperator", "qoperator-all"):
        only = {"op_types_to_quantize": ["Conv", "MatMul"]} if fmt == "qoperator" else {}
        quantize_static(src, q, Reader(src), quant_format=QuantFormat.QOperator, per_channel=True, activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8, **only)
    else:
        quantize_static(src, q, Reader(src), quant_format=QuantFormat.QDQ, per_channel=True, activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8)


QOPS = ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv", "QLinearAdd",
        "QLinearMul", "QLinearConcat", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax", "QLinearGlobalAveragePool", "QLinearAveragePool", "QGemm")


def one(pet, src, d, optimize, fmt):
    os.makedirs(d, exist_ok=True)
    q = os.path.join(d, "q.onnx")
    res = {"model": src}
    t0 = time.time()
    quantize(src, q, fmt)
    res["quantize_s"] = round(time.time() - t0, 1)
    m = onnx.load(q)
    res["format"] = fmt
    res["quant_nodes"] = {op: sum(n.op_type == op for n in m.graph.node) for op in QOPS if any(n.op_type == op for n in m.graph.node)}
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(q, so, providers=["CPUExecutionProvider"])
    x = feeds(s, 7)
    td = os.path.join(d, "ort")
    os.makedirs(td, exist_ok=True)
    for k, i in enumerate(s.get_inputs()):
        open(os.path.join(td, f"input_{k}.pb"), "wb").write(numpy_helper.from_array(x[i.name], i.name).SerializeToString())
    for k, (o, y) in enumerate(zip(s.get_outputs(), s.run(None, x))):  # the oracle
        open(os.path.join(td, f"output_{k}.pb"), "wb").write(numpy_helper.from_array(y, o.name).SerializeToString())
    ref = s.run(None, x)
    # ONNX Runtime's int8 kernels (all optimisations) against its own plain QDQ execution: how
    # far two correct executions of a quantized model lie apart (whole quantization steps
    # wherever float rounding differs), the scale of the tolerance below.
    fast = ort.InferenceSession(q, providers=["CPUExecutionProvider"]).run(None, x)
    res["ort_int8_vs_plain"] = max(float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) / max(1e-12, float(np.max(np.abs(b))))
                                   for a, b in zip(fast, ref))
    # Transformers carry a flipped step further (LayerNorm, Softmax): where ONNX Runtime's own two
    # executions lie further apart than RTOL, pet is held to 1.5 times their distance.
    rtol = max(RTOL, 1.5 * res["ort_int8_vs_plain"])
    # ONNX Runtime's contrib ops (QLinearAdd, ...) compute their documented formula in another
    # order (fixed point on x86): ONNX Runtime on the same program in standard ops (pet's import,
    # written back by `pet optimize`) measures how far the two lie apart in ONNX Runtime itself.
    if any(n.domain == "com.microsoft" for n in m.graph.node):
        std = os.path.join(d, "standard_ops.onnx")
        rc, out = run([pet, "optimize", q, "-o", std, "--budget", "1", "--quiet", "--profile-cache", "none"])
        if rc == 0:
            ys = ort.InferenceSession(std, so, providers=["CPUExecutionProvider"]).run(None, x)
            res["ort_contrib_vs_standard"] = max(float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) / max(1e-12, float(np.max(np.abs(b))))
                                                 for a, b in zip(ys, ref))
            rtol = max(rtol, 1.5 * res["ort_contrib_vs_standard"])
        else:
            res["check_standard_ops"] = out.strip().splitlines()[-1][:300] if out.strip() else f"exit {rc}"
    res["rtol"] = rtol
    ok = "check_standard_ops" not in res
    for be in ("cpu", "reference"):
        rc, out = run([pet, "run", q, "--backend", be, "--check", td, "--atol", "1e-4", "--rtol", str(rtol)])
        m_err = re.search(r"max\|out-ref\| ([0-9.eE+-]+)", out)
        res[f"check_{be}"] = "pass" if rc == 0 else out.strip().splitlines()[-1][:300] if out.strip() else f"exit {rc}"
        if m_err:
            res[f"max_error_{be}"] = float(m_err.group(1))
        ok = ok and rc == 0
    if ok:
        rc, out = run([pet, "run", q, "--repeat", "10"])
        m_t = re.search(r"median ([0-9.]+) ms", out)
        res["pet_ms"] = float(m_t.group(1)) if m_t else None
        rc, out = run([pet, "run", q, "--repeat", "10", "--no-int8"])  # convs in float, as before int8 kernels
        m_t = re.search(r"median ([0-9.]+) ms", out)
        res["pet_float_ms"] = float(m_t.group(1)) if m_t else None
        res["ort_ms"] = round(ort_median_ms(q, x), 3)
    if ok and optimize:
        o = os.path.join(d, "opt.onnx")
        rc, out = run([pet, "optimize", q, "-o", o, "--budget", str(optimize), "--quiet", "--json", os.path.join(d, "report.json")])
        res["optimize"] = "ok" if rc == 0 else out.strip().splitlines()[-1][:300]
        ok = ok and rc == 0
        if rc == 0:
            rep = json.load(open(os.path.join(d, "report.json")))
            res["speedup"] = rep.get("speedup")
            rc, out = run([pet, "run", o, "--check", td, "--atol", "1e-4", "--rtol", str(rtol)])
            res["check_optimized"] = "pass" if rc == 0 else out.strip().splitlines()[-1][:300]
            rc2, out2 = run([sys.executable, os.path.join(ROOT, "tests", "ort_compare.py"), q, o, "--rtol", str(rtol)])
            res["ort_compare"] = "ok" if rc2 == 0 else out2.strip().splitlines()[-1][:300]
            ok = ok and rc == 0 and rc2 == 0
    res["ok"] = ok
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pet")
    ap.add_argument("out")
    ap.add_argument("models", nargs="+")
    ap.add_argument("--optimize", type=int, default=0)
    ap.add_argument("--format", choices=["qdq", "qoperator", "qoperator-all", "dynamic"], default="qdq")
    a = ap.parse_args()
    results = []
    for k, src in enumerate(a.models):
        name = os.path.basename(os.path.dirname(os.path.abspath(src))) if os.path.basename(src) == "model.onnx" else os.path.splitext(os.path.basename(src))[0]
        log(f"[{k + 1}/{len(a.models)}] {name}: quantizing and checking")
        try:
            r = one(a.pet, src, os.path.join(a.out, name), a.optimize, a.format)
        except Exception as e:  # a model ORT's quantizer or runtime refuses
            r = {"model": src, "ok": False, "error": str(e).splitlines()[0][:300]}
        r["name"] = name
        results.append(r)
        timing = f"pet {r['pet_ms']:.2f} ms (all float {r.get('pet_float_ms') or 0:.2f} ms), ORT int8 {r['ort_ms']:.2f} ms" if r.get("pet_ms") and r.get("ort_ms") else ""
        errs = ", ".join(f"max error {r[k]:.3g} ({k[10:]})" for k in ("max_error_cpu", "max_error_reference") if k in r)
        if "ort_int8_vs_plain" in r:
            errs += f", ORT int8 vs plain {100 * r['ort_int8_vs_plain']:.2f} % of max|ref|"
        if "ort_contrib_vs_standard" in r:
            errs += f", ORT contrib ops vs standard ops {100 * r['ort_contrib_vs_standard']:.2f} %"
        nodes = ", ".join(f"{v} {k}" for k, v in r.get("quant_nodes", {}).items())
        print(f"{name}: {'ok' if r['ok'] else 'FAIL'} ({nodes}) {errs} {timing} "
              f"{'' if r['ok'] else json.dumps({k: v for k, v in r.items() if k.startswith(('check', 'error', 'optimize', 'ort_compare'))})}", flush=True)
    os.makedirs(a.out, exist_ok=True)
    json.dump(results, open(os.path.join(a.out, "quantized.json"), "w"), indent=1)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
