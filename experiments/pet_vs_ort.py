"""Interleaved timing of one model on pet's cpu backend and on ONNX Runtime, shared by the
experiments that compare them (decoders_vs_ort.py, recurrent_vs_ort.py, float16_vs_ort.py): each round times the
median of `repeat` runs after a warm-up, each system in its own process (2 threads), pet and
ONNX Runtime alternating round by round. Inputs: seeded uniform in [-1, 1], or both systems
read the same ONNX test data (input_0.pb, ...) from a directory (token ids, masks)."""
import json
import os
import statistics
import subprocess
import sys

ORT_CHILD = r'''
import os, sys, time, statistics, numpy as np, onnx, onnxruntime as ort
from onnx import numpy_helper
so = ort.SessionOptions(); so.intra_op_num_threads = 2; so.inter_op_num_threads = 1
s = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
rng = np.random.default_rng(0)
if len(sys.argv) > 3:
    feed = {}
    for k, i in enumerate(s.get_inputs()):
        t = onnx.TensorProto()
        with open(os.path.join(sys.argv[3], f"input_{k}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        feed[i.name] = numpy_helper.to_array(t)
else:
    feed = {i.name: rng.uniform(-1, 1, i.shape).astype(np.float16 if i.type == "tensor(float16)" else np.float32) for i in s.get_inputs()}
for _ in range(3): s.run(None, feed)
t = []
for _ in range(int(sys.argv[2])):
    t0 = time.perf_counter(); s.run(None, feed); t.append((time.perf_counter() - t0) * 1e3)
print(statistics.median(t))
'''


def interleaved(pet, path, rounds, repeat, tmp, label, inputs=None):
    """{pet_ms, ort_ms (medians of the rounds), pet_rounds, ort_rounds, pet_over_ort}; progress on
    stderr. `inputs`: a directory of ONNX test data both systems read (default: random floats)."""
    pet_ms, ort_ms = [], []
    for r in range(rounds):
        print(f"{label}, round {r + 1} of {rounds}", file=sys.stderr)
        js = os.path.join(tmp, "pet.json")
        subprocess.run([pet, "run", path, "--repeat", str(repeat), "--json", js] + (["--inputs", inputs] if inputs else []), check=True,
                       capture_output=True)
        with open(js) as f:
            pet_ms.append(json.load(f)["median_ms"])
        ort_ms.append(float(subprocess.run([sys.executable, "-c", ORT_CHILD, path, str(repeat)] + ([inputs] if inputs else []), check=True,
                                           capture_output=True, text=True).stdout))
    row = {"pet_ms": statistics.median(pet_ms), "ort_ms": statistics.median(ort_ms), "pet_rounds": pet_ms, "ort_rounds": ort_ms}
    row["pet_over_ort"] = row["pet_ms"] / row["ort_ms"]
    return row


def cli(default_rounds=5, default_repeat=20):
    """(OUT.json or None, rounds, repeat) from `[OUT.json] [--rounds R] [--repeat N]`."""
    args = sys.argv[1:]
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else default_rounds
    repeat = int(args[args.index("--repeat") + 1]) if "--repeat" in args else default_repeat
    return (args[0] if args and not args[0].startswith("--") else None), rounds, repeat


def write_rows(out, rows):
    """The rows as JSON at `out` (when given)."""
    if out:
        with open(out, "w") as f:
            json.dump(rows, f, indent=1)
