#!/usr/bin/env python3
"""pet optimize on real models: search time with cold and warm caches, the optimized model's
time against the original's on pet's cpu backend (end to end, interleaved medians, from the
optimizer's own report), and correctness: `pet run --check` against PyTorch's outputs (batch 1:
the exported test data; batch N: `models/export_models.py MODEL_DIR --batch N NAME`'s, "n/a"
where absent) and the optimized file against the original in ONNX Runtime (every batch).

usage: optimize_models.py PET MODEL_DIR OUT_CSV [--models m:b,m:b,...] [--budget S] [--python VENV_PY]
(--budget: pet optimize's, default its own 120 s; peak_rss_mb is the larger of the two runs')
Models are those of models/export_models.py (export the artifact ones by name first); each
entry is name:batch. Results: OUT_CSV, and OUT_CSV's folder /optimize/<name>_b<batch>.json.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time

DEFAULT = ("resnet18:1,resnet18:16,csrnet:1,csrnet:16,csrnet_backend:1,csrnet_backend:16,bert_hand_op17:1,bert_hand_op17:16,"
           "bert_simple:1,r3d_18:1,r3d_18:4,inception_v3:1,inception_v3_330:1,inception_v3:16")


def optimize(pet, model, batch, out, caches, budget, report):
    cmd = [pet, "optimize", model, "-o", out, "--dim", f"batch={batch}", "--json", report, "--profile-cache",
           os.path.join(caches, "op.db"), "--algorithm-cache", os.path.join(caches, "alg.db"), "--quiet"]
    if budget:
        cmd += ["--budget", str(budget)]
    t0 = time.time()
    with tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, text=True)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode:
            err.seek(0)
            raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {err.read().strip()[-400:]}")
    j = json.load(open(report))
    j["wall_s"] = time.time() - t0
    j["peak_rss_mb"] = usage.ru_maxrss / 1024  # Linux: kilobytes
    return j


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pet")
    ap.add_argument("models_dir")
    ap.add_argument("out_csv")
    ap.add_argument("--models", default=DEFAULT)
    ap.add_argument("--budget", type=float, default=0, help="pet optimize --budget (default: pet's own)")
    ap.add_argument("--python", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".venv", "bin", "python"))
    a = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    ort_compare = os.path.join(here, "..", "tests", "ort_compare.py")
    jdir = os.path.join(os.path.dirname(os.path.abspath(a.out_csv)), "optimize")
    os.makedirs(jdir, exist_ok=True)
    # Rows of earlier runs for other entries stay in the CSV (a rerun of some entries replaces
    # theirs), with the commit that produced each.
    commit = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    wanted = {tuple(e.split(":")) for e in a.models.split(",")}
    kept = []
    if os.path.exists(a.out_csv):
        with open(a.out_csv) as f:
            kept = [r for r in csv.DictReader(f) if (r["model"], r["batch"]) not in wanted]
    rows = []

    def write():
        keys = []
        for r in kept + rows:
            keys += [k for k in r if k not in keys]
        with open(a.out_csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys, restval="")
            w.writeheader()
            w.writerows(kept + rows)

    for entry in a.models.split(","):
        name, batch = entry.split(":")
        model = os.path.join(a.models_dir, name, "model.onnx")
        with tempfile.TemporaryDirectory() as tmp:
            caches = os.path.join(tmp, "caches")
            os.makedirs(caches)
            out = os.path.join(tmp, "opt.onnx")
            print(f"{name} batch {batch}: cold search ...", file=sys.stderr)
            try:
                cold = optimize(a.pet, model, batch, out, caches, a.budget, os.path.join(tmp, "cold.json"))
                print(f"{name} batch {batch}: warm search ...", file=sys.stderr)
                warm = optimize(a.pet, model, batch, out, caches, a.budget, os.path.join(tmp, "warm.json"))
            except RuntimeError as e:  # recorded, and the next model still runs
                print(f"{name} batch {batch}: FAILED: {e}", file=sys.stderr)
                rows.append({"model": name, "batch": batch, "commit": commit, "error": str(e)[-300:]})
                write()
                continue
            check = "n/a"
            # batch 1: the exported pair; batch N: models/export_models.py --batch N's
            data = os.path.join(a.models_dir, name, "test_data_set_0" if batch == "1" else f"test_data_set_b{batch}")
            if os.path.isdir(data):
                r = subprocess.run([a.pet, "run", out, "--check", data], capture_output=True, text=True)
                check = "pass" if r.returncode == 0 else f"FAIL: {r.stdout.strip()[-200:]}{r.stderr.strip()[-200:]}"
            ort = "skipped (no onnxruntime)"
            if os.path.exists(a.python):
                r = subprocess.run([a.python, ort_compare, model, out, "--dim", batch], capture_output=True, text=True)
                ort = "pass" if r.returncode == 0 else ("skipped" if r.returncode == 77 else f"FAIL: {r.stdout.strip()[-300:]}")
            applied = [w for w in warm["windows"] if w["applied"] != "original"]
            row = {
                "model": name, "batch": batch, "commit": commit,
                # 0: not timed (no rewrite was kept: the program is the original)
                "original_ms": round(warm["original_ms"], 3) or "", "optimized_ms": round(warm["optimized_ms"], 3) or "",
                "speedup": round(warm["speedup"], 3), "kept_original": warm["kept_original"],
                "search_cold_s": round(cold["search_seconds"], 1), "search_warm_s": round(warm["search_seconds"], 1),
                "warm_searches_cached": warm["cache"].get("searches_cached", 0),
                "total_cold_s": round(cold["wall_s"], 1), "peak_rss_mb": round(max(cold["peak_rss_mb"], warm["peak_rss_mb"])),
                "windows": len(warm["windows"]), "rewritten": len(applied),
                "reused": warm["cache"]["reused_windows"], "check_vs_torch": check, "onnxruntime": ort,
                "transformations": ";".join(sorted({w["applied"] for w in applied})),
            }
            json.dump({"cold": cold, "warm": warm, "row": row}, open(os.path.join(jdir, f"{name}_b{batch}.json"), "w"), indent=1)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
            write()
    for r in rows:
        if "error" in r:
            print(f"{r['model']:18s} b{r['batch']:>2}  FAILED: {r['error']}")
            continue
        ms = f"{r['original_ms']:9.2f} -> {r['optimized_ms']:9.2f} ms" if r['original_ms'] != "" else f"{'not timed (original kept)':>25s}"
        # kept: the times are the original against the best candidate, which lost the race
        kept = "  (original kept)" if r["kept_original"] else ""
        print(f"{r['model']:18s} b{r['batch']:>2}  {ms}  {r['speedup']:.2f}x  "
              f"search cold {r['search_cold_s']:6.1f} s warm {r['search_warm_s']:6.1f} s  torch {r['check_vs_torch']}  ort {r['onnxruntime']}{kept}")


if __name__ == "__main__":
    main()
