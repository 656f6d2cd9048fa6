#!/usr/bin/env python3
"""Runs the programs `difftest run --optimize --emit DIR` wrote in OpenVINO (CPU plugin, f32)
and compares with pet's reference outputs, with pet's tolerance (|ov - pet| <= atol +
rtol * max|pet| per output). Each DIR/p<index> holds model.onnx (the optimized program),
original.onnx (the random program it was optimized from: same inputs and outputs) and
test_data_set_0 (inputs, pet's reference outputs).

OpenVINO refuses or miscomputes some random programs that are valid ONNX: negative indices in
GatherND and OneHot, out-of-range float-to-uint8 Casts, GatherElements whose indices are
smaller than the data on other axes, ScatterND with a reduction. So a program fails only where
pet's rewrite is what OpenVINO gets wrong: OpenVINO computes the original's outputs, but
refuses the optimized file or computes other outputs from it; or it runs the original (with
some outputs wrong) but refuses the optimized file. A program whose original OpenVINO refuses
or gets wrong is otherwise counted as OpenVINO's own, not a failure. OpenVINO runs in child processes, since it crashes
on some programs (2024.6 segfaults on a MaxPool, ReduceMin, Pad, AveragePool chain over a
2x12x1 input): a crash is a verdict like a refusal.

usage: openvino_check.py DIR [--json FILE] [--atol A] [--rtol R]
exit: 0 no failure, 1 a failure (or no programs), 77 openvino missing.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
try:
    import onnx
    import openvino_compare as ovc  # exits 77 (skip) without openvino
    from ort_check import disagreements, load
except ImportError as e:
    print(f"SKIPPED: {e} (run scripts/setup.sh to make .venv with OpenVINO)")
    sys.exit(77)


def verdict(model, data, atol, rtol):
    """None where OpenVINO computes pet's reference outputs from `model`; else {"refused":
    why} or {"outputs": {index: what differs}}."""
    m = onnx.load(model)
    feeds = {inp.name: load(os.path.join(data, f"input_{k}.pb"))[1] for k, inp in enumerate(m.graph.input)}
    try:
        outs = ovc.run(ovc.compile_model(model), feeds)
    except Exception as e:  # noqa: BLE001 - a refusal is a verdict
        return {"refused": ovc.first_line(e)}
    found = disagreements(outs, data, atol, rtol, who="ov")
    return {"outputs": {str(k): what for k, what in found}} if found else None


def text(v):
    return f"refused: {v['refused']}" if "refused" in v else "; ".join(v["outputs"].values())


def introduced(optimized, original):
    """What OpenVINO gets wrong on the optimized file where it gets the original right, or
    None. Where it refuses the original, or gets any of its outputs wrong, there is nothing
    to tell: one op it miscomputes (a GatherElements with negative indices) leaves garbage
    that reaches an output within tolerance in one program and not in the other."""
    if original is None:
        return text(optimized)
    if "refused" in original:
        return None
    if "refused" in optimized:
        return text(optimized)  # it computes the original (if not all of it right) but refuses pet's file
    return None


def child(tasks, atol, rtol):
    """--child: for each "DIR FILE" line on stdin, "B" before and a JSON verdict after."""
    for line in tasks:
        d, f = line.split()
        print(f"B {d} {f}", flush=True)
        v = verdict(os.path.join(d, f), os.path.join(d, "test_data_set_0"), atol, rtol)
        print("R " + json.dumps({"dir": d, "file": f, "problem": v}), flush=True)


def verdicts(tasks, a):
    """{(dir, file): problem or None} for every task, each run in a child process; where
    OpenVINO crashes the child, that task's verdict says so and a new child takes the rest."""
    out, pending = {}, list(tasks)
    while pending:
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", "-", "--atol", str(a.atol), "--rtol", str(a.rtol)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        feed = threading.Thread(target=lambda: (p.stdin.write("".join(f"{d} {f}\n" for d, f in pending)), p.stdin.close()))
        feed.start()
        begun = None
        for line in p.stdout:
            if line.startswith("B "):
                begun = tuple(line.split()[1:3])
            elif line.startswith("R "):
                r = json.loads(line[2:])
                out[(r["dir"], r["file"])] = r["problem"]
                begun = None
        rc = p.wait()
        feed.join()
        if begun is None and rc:
            raise SystemExit(f"openvino_check: a child process failed (exit {rc}) between programs")
        if begun is not None:
            out[begun] = {"refused": f"OpenVINO crashed (exit {rc})"}
        pending = [t for t in pending if t not in out]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--json")
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child((ln for ln in sys.stdin if ln.strip()), a.atol, a.rtol)
    dirs = sorted(glob.glob(os.path.join(a.dir, "p*")), key=lambda d: int(os.path.basename(d)[1:]))
    if not dirs:
        print(f"openvino_check: no programs under {a.dir}")
        return 1
    failures, own, t0 = [], [], time.time()
    for d in dirs:
        if not os.path.exists(os.path.join(d, "original.onnx")):
            print(f"openvino_check: {d}: no original.onnx (written by difftest run --optimize --emit)")
            failures.append({"program": os.path.basename(d), "error": "no original.onnx"})
    checked = [d for d in dirs if os.path.exists(os.path.join(d, "original.onnx"))]
    print(f"openvino_check: {len(checked)} optimized programs in OpenVINO", file=sys.stderr)
    optimized = verdicts([(d, "model.onnx") for d in checked], a)
    wrong = [d for d in checked if optimized[(d, "model.onnx")] is not None]
    print(f"openvino_check: {len(wrong)} differ or are refused; their originals in OpenVINO", file=sys.stderr)
    originals = verdicts([(d, "original.onnx") for d in wrong], a)
    for d in wrong:
        after, before = optimized[(d, "model.onnx")], originals[(d, "original.onnx")]
        problem = introduced(after, before)
        if problem:
            failures.append({"program": os.path.basename(d), "error": problem, "original": text(before) if before else None})
            print(f"openvino_check: {d}: OpenVINO gets the optimized file wrong where it gets the original right: {problem}")
        else:
            own.append({"program": os.path.basename(d), "optimized": text(after), "original": text(before)})
    summary = {"programs": len(dirs), "failures": failures, "openvino": ovc.ov.__version__, "openvino_own": own,
               "seconds": round(time.time() - t0, 1)}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)
    print(f"openvino_check: {len(dirs)} programs in OpenVINO {ovc.ov.__version__} (f32): {len(failures)} failing, "
          f"{len(own)} OpenVINO's own (it refuses or miscomputes the original program too)")
    return 1 if failures or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
