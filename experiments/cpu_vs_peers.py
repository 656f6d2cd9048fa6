#!/usr/bin/env python3
"""pet's cpu backend side by side with PyTorch and ONNX Runtime on the five models, batch 1
and a larger batch, in one run (issue: CPU backend). Every system runs in its own process,
interleaved round by round, each timing the median of repeated runs after a warm-up.

  PyTorch 1.13 (Debian's python3-torch): torch.jit.freeze + optimize_for_inference, 2 threads;
           the better of the default environment and OMP_WAIT_POLICY=PASSIVE is reported.
  ONNX Runtime (pip, optional): all graph optimisations, 2 intra-op threads.
  pet:     build/pet run MODEL --backend cpu (unoptimised programs).

Usage: /usr/bin/python3 experiments/cpu_vs_peers.py [OUT.csv] [--models a,b] [--rounds N]
Models come from build/models (models/export_models.py); ORT runs with a python3 that has it.
"""
import csv, json, os, platform, shutil, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = {  # name: (exported model, larger batch)
    "resnet18": ("resnet18", 16),
    "inception_v3": ("inception_v3", 16),
    "r3d_18": ("r3d_18", 4),
    "csrnet": ("csrnet", 8),
    "bert_base": ("bert_hand_op17", 16),
}

TORCH_CHILD = r'''
import os, sys, time, statistics
sys.path.insert(0, os.path.join(sys.argv[1], "models"))
import torch
from export_models import MODELS, randomise
torch.set_num_threads(2)
name, batch, reps = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ctor, shape, _ = MODELS[name]
model = randomise(ctor(), 1000 + 17 * list(MODELS).index(name))
x = torch.randn(batch, *shape[1:])
with torch.no_grad():
    m = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.trace(model, x)))
    for _ in range(3): m(x)
    t = []
    for _ in range(reps):
        t0 = time.perf_counter(); m(x); t.append((time.perf_counter() - t0) * 1e3)
print(statistics.median(t))
'''

ORT_CHILD = r'''
import sys, time, statistics
import numpy as np, onnxruntime as ort
path, batch, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
so.intra_op_num_threads = 2
so.inter_op_num_threads = 1
s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
inp = s.get_inputs()[0]
shape = [batch if not isinstance(d, int) else d for d in inp.shape]
x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
for _ in range(3): s.run(None, {inp.name: x})
t = []
for _ in range(reps):
    t0 = time.perf_counter(); s.run(None, {inp.name: x}); t.append((time.perf_counter() - t0) * 1e3)
print(statistics.median(t))
'''


def ort_python():
    for py in [shutil.which("python3"), "/usr/bin/python3"]:
        if py and subprocess.run([py, "-c", "import onnxruntime"], capture_output=True).returncode == 0:
            return py
    return None


def run(cmd, env=None, timeout=900):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])}... failed: {p.stderr.strip()[-400:]}")
    return p.stdout


def main():
    args = sys.argv[1:]
    out = args[0] if args and not args[0].startswith("--") else os.path.join(ROOT, "results/studies/cpu_vs_peers.csv")
    names = list(MODELS)
    rounds = 2
    if "--models" in args:
        names = args[args.index("--models") + 1].split(",")
    if "--rounds" in args:
        rounds = int(args[args.index("--rounds") + 1])
    pet = os.path.join(ROOT, "build/pet")
    models = os.path.join(ROOT, "build/models")
    ortpy = ort_python()
    env = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor()),
        "cores": os.cpu_count(),
        "pet": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip(),
        "torch": run(["/usr/bin/python3", "-c", "import torch; print(torch.__version__)"]).strip(),
        "onnxruntime": run([ortpy, "-c", "import onnxruntime; print(onnxruntime.__version__)"]).strip() if ortpy else "not installed",
    }
    print(json.dumps(env), file=sys.stderr)
    rows = []
    tmp = tempfile.mkdtemp()
    for name in names:
        model_dir, big = MODELS[name]
        path = os.path.join(models, model_dir, "model.onnx")
        torch_name = model_dir
        for batch in (1, big):
            reps = 10 if batch == 1 else 5
            times = {"pet": [], "torch": [], "torch_passive": [], "ort": []}
            for r in range(rounds):
                print(f"\r{name} batch {batch} round {r + 1}/{rounds}", end="", file=sys.stderr)
                j = os.path.join(tmp, "r.json")
                run([pet, "run", path, "--backend", "cpu", "--dim", f"batch={batch}", "--repeat", str(reps), "--json", j])
                times["pet"].append(json.load(open(j))["median_ms"])
                for key, extra in (("torch", {}), ("torch_passive", {"OMP_WAIT_POLICY": "PASSIVE"})):
                    e = dict(os.environ, **extra)
                    times[key].append(float(run(["/usr/bin/python3", "-c", TORCH_CHILD, ROOT, torch_name, str(batch), str(reps)], env=e).split()[-1]))
                if ortpy:
                    times["ort"].append(float(run([ortpy, "-c", ORT_CHILD, path, str(batch), str(reps)]).split()[-1]))
            med = {k: statistics.median(v) if v else None for k, v in times.items()}
            best_torch = min(med["torch"], med["torch_passive"])
            row = {"model": name, "batch": batch, "pet_ms": round(med["pet"], 2), "torch_ms": round(med["torch"], 2),
                   "torch_passive_ms": round(med["torch_passive"], 2), "torch_best_ms": round(best_torch, 2),
                   "ort_ms": round(med["ort"], 2) if med["ort"] else "", "pet_vs_torch": round(best_torch / med["pet"], 3),
                   "pet_vs_ort": round(med["ort"] / med["pet"], 3) if med["ort"] else ""}
            rows.append(row)
            print(f"\r{name:14s} batch {batch:2d}: pet {row['pet_ms']:8.2f} ms  torch {best_torch:8.2f} ms  ort {row['ort_ms']} ms  "
                  f"(pet {row['pet_vs_torch']:.2f}x torch)", file=sys.stderr)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", newline="") as f:
        f.write("# " + json.dumps(env) + "\n")
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
