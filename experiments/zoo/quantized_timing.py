#!/usr/bin/env python3
"""pet's cpu backend against ONNX Runtime's int8 kernels on quantized (QDQ) models, interleaved:
for each model, ROUNDS rounds of `pet run --repeat 20` (its median) then 20 ONNX Runtime runs
in this process (their median), so that both see the same machine state. Prints the medians
of the rounds and the ratio pet / ONNX Runtime of each round; progress on stderr.

usage (.venv's interpreter, with onnxruntime):
  .venv/bin/python experiments/zoo/quantized_timing.py build/pet Q.onnx... [--rounds N] [--json FILE] [--pet-env K=V ...]
    (Q.onnx: experiments/zoo/quantized.py's OUT/NAME/q.onnx; --pet-env ONEDNN_MAX_CPU_ISA=AVX2 times
    pet as on a CPU without VNNI, ONNX Runtime unchanged)
exit: 0, 77 without onnxruntime.
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


def pet_median_ms(pet, model, env=None):
    out = subprocess.run([pet, "run", model, "--repeat", "20"], capture_output=True, text=True, check=True, env=env).stdout
    return float(re.search(r"median ([0-9.]+) ms", out).group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pet")
    ap.add_argument("models", nargs="+")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--pet-env", action="append", default=[], metavar="K=V", help="environment of pet's runs")
    a = ap.parse_args()
    env = dict(os.environ)
    for kv in a.pet_env:
        if "=" not in kv:
            ap.error(f"--pet-env {kv!r}: expected K=V")
        k, v = kv.split("=", 1)
        env[k] = v
    rows = []
    for model in a.models:
        print(f"timing {model}", file=sys.stderr, flush=True)
        so = ort.SessionOptions()
        so.log_severity_level = 3
        s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(7)
        x = {i.name: rng.uniform(-1, 1, [d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32) for i in s.get_inputs()}
        for _ in range(3):
            s.run(None, x)
        pet, peer = [], []
        for _ in range(a.rounds):
            pet.append(pet_median_ms(a.pet, model, env))
            t = []
            for _ in range(20):
                t0 = time.perf_counter()
                s.run(None, x)
                t.append((time.perf_counter() - t0) * 1e3)
            peer.append(float(np.median(t)))
        row = {"model": model, "pet_ms": statistics.median(pet), "ort_ms": statistics.median(peer),
               "ratio_per_round": [round(p / o, 3) for p, o in zip(pet, peer)]}
        rows.append(row)
        print(f"{model}: pet {row['pet_ms']:.2f} ms, ONNX Runtime int8 {row['ort_ms']:.2f} ms, pet / ORT per round {row['ratio_per_round']}",
              flush=True)
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
