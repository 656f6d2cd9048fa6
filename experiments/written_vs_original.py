#!/usr/bin/env python3
"""The file `pet optimize` writes against the model it read, both under `pet run`, in
interleaved rounds (one `pet run` process each per round, the median of its repeats), so that
a reading like E1's "kept the original, yet its written file ran 8 % slower" can be told apart
from process-to-process noise: where the optimizer kept the original, the two files hold the
same program and every difference is noise.

usage: written_vs_original.py [--pet build/pet] [--rounds 6] [--repeat 10] [--budget 120] MODEL:BATCH ...
  MODEL: a folder under build/models (models/export_models.py exports it when missing).
Prints one JSON object per model on stdout (medians, per-round ratios, what the optimizer
decided); progress on stderr.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def sh(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.strip()[-400:]}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--pet", default=os.path.join(ROOT, "build", "pet"))
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--budget", default="120")
    a = ap.parse_args()
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        for entry in a.models:
            name, _, batch = entry.partition(":")
            batch = batch or "1"
            model = os.path.join(ROOT, "build", "models", name, "model.onnx")
            if not os.path.exists(model):
                sh(["/usr/bin/python3", os.path.join(ROOT, "models", "export_models.py"), os.path.join(ROOT, "build", "models"), name])
            out, rep_path, alg = os.path.join(tmp, f"{name}.pet.onnx"), os.path.join(tmp, f"{name}.json"), os.path.join(tmp, f"{name}.alg.db")
            log(f"{entry}: pet optimize (cold caches, --budget {a.budget}) ...")
            sh([a.pet, "optimize", model, "-o", out, "--dim", f"batch={batch}", "--json", rep_path, "--quiet", "--budget", a.budget,
                "--profile-cache", os.path.join(tmp, f"{name}.op.db"), "--algorithm-cache", alg,
                "--decision-cache", os.path.join(tmp, f"{name}.decisions.db")])
            rep = json.load(open(rep_path))
            times = {"original": [], "written": []}
            for r in range(a.rounds):
                log(f"{entry}: round {r + 1}/{a.rounds}")
                # the written file takes --dim where its batch stayed symbolic (an unchanged
                # original, or an optimized program written for every batch)
                symbolic = rep.get("written") == "original file" or "batch" in rep.get("symbolic_dims", [])
                batch_dim = ["--dim", f"batch={batch}"]
                for k, (path, dim) in {"original": (model, batch_dim), "written": (out, batch_dim if symbolic else [])}.items():
                    j = os.path.join(tmp, "run.json")
                    # both with the optimizer's algorithm choices (its cache), as E1 runs them
                    sh([a.pet, "run", path, *dim, "--repeat", str(a.repeat), "--json", j, "--algorithm-cache", alg])
                    times[k].append(json.load(open(j))["median_ms"])
            ratios = [o / w for o, w in zip(times["original"], times["written"])]
            print(json.dumps({
                "model": name, "batch": int(batch), "kept_original": rep["kept_original"], "optimizer_speedup": round(rep["speedup"], 3),
                "original_ms": round(statistics.median(times["original"]), 3), "written_ms": round(statistics.median(times["written"]), 3),
                "speedup_median": round(statistics.median(times["original"]) / statistics.median(times["written"]), 3),
                "round_ratios": [round(x, 3) for x in ratios], "original_runs_ms": [round(x, 2) for x in times["original"]],
                "written_runs_ms": [round(x, 2) for x in times["written"]], "commit": commit,
                "command": f"experiments/written_vs_original.py --rounds {a.rounds} --repeat {a.repeat} --budget {a.budget} {entry}"}), flush=True)


if __name__ == "__main__":
    main()
