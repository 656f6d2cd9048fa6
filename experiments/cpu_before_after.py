#!/usr/bin/env python3
"""Times two builds of `pet run` side by side on the same models (interleaved rounds, each a
median of --repeat runs after a warm-up, fresh algorithm choices), e.g. before and after a
refactoring of the cpu backend, and prints the per-model medians and their ratio.

usage: cpu_before_after.py OLD_PET NEW_PET MODEL_DIR [--rounds R] [--repeat N] [--models a,b] [--csv FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(pet, model, repeat):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([pet, "run", model, "--repeat", str(repeat), "--json", f.name, "--algorithm-cache", "none"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return json.load(open(f.name))["median_ms"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("models_dir")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--models", default="resnet18,inception_v3,csrnet,bert_hand_op17,bert_torch_op13,r3d_18")
    ap.add_argument("--csv")
    a = ap.parse_args()
    rows = []
    for m in a.models.split(","):
        path = os.path.join(a.models_dir, m, "model.onnx")
        old, new = [], []
        for r in range(a.rounds):
            old.append(run(a.old, path, a.repeat))
            new.append(run(a.new, path, a.repeat))
            print(f"{m}: round {r + 1}: old {old[-1]:.2f} ms, new {new[-1]:.2f} ms", file=sys.stderr)
        mo, mn = statistics.median(old), statistics.median(new)
        rows.append((m, mo, mn, mo / mn))
        print(f"{m:18s} old {mo:9.2f} ms  new {mn:9.2f} ms  old/new {mo / mn:5.2f}")
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("model,old_ms,new_ms,old_over_new\n")
            for r in rows:
                f.write(f"{r[0]},{r[1]:.3f},{r[2]:.3f},{r[3]:.3f}\n")


if __name__ == "__main__":
    main()
