#!/usr/bin/env python3
"""pet's cpu backend against ONNX Runtime (and OpenVINO) on ONNX files, interleaved: for each
model, ROUNDS rounds of `pet run --repeat 20` (its median) then 20 runs of each peer in this
process (their medians), so that all see the same machine state. Float models as
experiments/zoo/check.py exports them, quantized ones as experiments/zoo/quantized.py makes
them (ONNX Runtime then runs its int8 kernels). Prints the medians of the rounds and the
ratio pet / peer of each round; progress on stderr.

Peers: ONNX Runtime's CPU provider (default threads: the physical cores, as pet) and, with
--peers ort,openvino, OpenVINO's CPU plugin in f32 (on a CPU with AVX512_BF16 its default is
bf16: other numbers) with as many threads as pet, latency hint. Every input gets the same
seeded values in [-1, 1) (float) or 0 (integer); symbolic dims are 1.

usage (.venv's interpreter, with onnxruntime and openvino):
  .venv/bin/python experiments/zoo/timing.py build/pet MODEL.onnx... [--rounds N] [--json FILE]
      [--peers ort[,openvino]] [--pet-env K=V ...]
    (--pet-env ONEDNN_MAX_CPU_ISA=AVX2 times pet as on a CPU without AVX-512 and VNNI, the
    peers unchanged)
exit: 0, 77 without onnxruntime (or openvino when asked for).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

try:
    import numpy as np
    import onnxruntime as ort
except ImportError as e:  # pragma: no cover
    print(f"SKIPPED: {e}")
    sys.exit(77)

PEER_NAMES = {"ort": "ONNX Runtime", "openvino": "OpenVINO"}


def pet_median_ms(pet, model, env=None):
    out = subprocess.run([pet, "run", model, "--repeat", "20"], capture_output=True, text=True, check=True, env=env).stdout
    return float(re.search(r"median ([0-9.]+) ms", out).group(1))


ORT_TYPES = {"float": np.float32, "float16": np.float16, "double": np.float64, "int64": np.int64, "int32": np.int32,
             "int8": np.int8, "uint8": np.uint8, "bool": np.bool_}


def feeds_for(session):
    """Seeded inputs for ONNX Runtime's view of the graph inputs: floats in [-1, 1), integers 0."""
    rng = np.random.default_rng(7)
    out = {}
    for i in session.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        dtype = ORT_TYPES[i.type[len("tensor("):-1]]
        out[i.name] = rng.uniform(-1, 1, shape).astype(dtype) if np.issubdtype(dtype, np.floating) else np.zeros(shape, dtype)
    return out


def ort_runner(model, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    return lambda: s.run(None, feeds)


def openvino_runner(model, feeds, threads):
    import openvino as ov
    core = ov.Core()
    m = core.read_model(model)
    m.reshape({i.any_name: list(feeds[i.any_name].shape) for i in m.inputs if i.any_name in feeds})
    c = core.compile_model(m, "CPU", {"INFERENCE_NUM_THREADS": str(threads), "PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"})
    req = c.create_infer_request()
    names = {n for i in c.inputs for n in i.get_names()}
    x = {k: v for k, v in feeds.items() if k in names}
    return lambda: req.infer(x)


def physical_cores():
    try:
        cores = set()
        with open("/proc/cpuinfo") as f:
            phys = core = None
            for line in f:
                if line.startswith("physical id"):
                    phys = line.split(":")[1].strip()
                elif line.startswith("core id"):
                    core = line.split(":")[1].strip()
                    cores.add((phys, core))
        return max(1, len(cores))
    except OSError:
        return os.cpu_count() or 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pet")
    ap.add_argument("models", nargs="+")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--peers", default="ort", help="comma-separated: ort, openvino (default ort)")
    ap.add_argument("--pet-env", action="append", default=[], metavar="K=V", help="environment of pet's runs")
    a = ap.parse_args()
    env = dict(os.environ)
    for kv in a.pet_env:
        if "=" not in kv:
            ap.error(f"--pet-env {kv!r}: expected K=V")
        k, v = kv.split("=", 1)
        env[k] = v
    peers = [p for p in a.peers.split(",") if p]
    for p in peers:
        if p not in PEER_NAMES:
            ap.error(f"--peers: unknown peer {p!r} (known: {', '.join(PEER_NAMES)})")
    if "openvino" in peers:
        try:
            import openvino  # noqa: F401
        except ImportError as e:
            print(f"SKIPPED: {e} (run scripts/setup.sh to make .venv with OpenVINO)")
            sys.exit(77)
    if "ort" not in peers:
        peers.insert(0, "ort")  # its session also reads the inputs' types
    rows = []
    for model in a.models:
        print(f"timing {model}", file=sys.stderr, flush=True)
        so = ort.SessionOptions()
        so.log_severity_level = 3
        feeds = feeds_for(ort.InferenceSession(model, so, providers=["CPUExecutionProvider"]))
        row = {"model": model}
        runners = {}
        for p in peers:
            try:
                runners[p] = ort_runner(model, feeds) if p == "ort" else openvino_runner(model, feeds, physical_cores())
                for _ in range(3):
                    runners[p]()
            except Exception as e:  # the peer refuses the model: timed against the others
                lines = [x.strip() for x in str(e).splitlines() if x.strip()]
                row[f"{p}_error"] = f"{type(e).__name__}: {lines[-1][:200] if lines else ''}"
                runners.pop(p, None)
                print(f"  {PEER_NAMES[p]} cannot run it: {row[f'{p}_error']}", file=sys.stderr, flush=True)
        pet = []
        times = {p: [] for p in runners}
        for _ in range(a.rounds):
            time.sleep(0.5)  # the peers' worker threads spin a while after a run: let them go idle
            pet.append(pet_median_ms(a.pet, model, env))
            for p, f in runners.items():
                time.sleep(0.5)
                t = []
                for _ in range(20):
                    t0 = time.perf_counter()
                    f()
                    t.append((time.perf_counter() - t0) * 1e3)
                times[p].append(float(np.median(t)))
        row["pet_ms"] = statistics.median(pet)
        text = [f"{model}: pet {row['pet_ms']:.2f} ms"]
        for p in runners:
            row[f"{p}_ms"] = statistics.median(times[p])
            row[f"pet_vs_{p}_per_round"] = [round(x / y, 3) for x, y in zip(pet, times[p])]
            text.append(f"{PEER_NAMES[p]} {row[f'{p}_ms']:.2f} ms (pet / it per round {row[f'pet_vs_{p}_per_round']})")
        rows.append(row)
        print(", ".join(text), flush=True)
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
