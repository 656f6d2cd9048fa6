#!/usr/bin/env python3
"""The profiler's ranking of known mutants, quiet and while busy processes hold every core.

The CSRNet case: a 3x3 dilation-2 conv (N x 512 x 14 x 14) and its rule mutants (among them
the dense conv over the four phase images, where Winograd applies). `pet mutate` ranks them
by measured cost with an empty cache, once on the quiet machine and once while one spinning
process per core competes; the pairs whose quiet costs differ by more than 1.67x must keep
their order. Timings belong here, not in unit tests: they depend on the machine.

usage: profiler_under_load.py PET OUT_JSON [--batch N] [--rounds R]
Runs with /usr/bin/python3 (numpy and onnx from Debian); progress on stderr.
"""
import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def subprogram(path, batch):
    rng = np.random.default_rng(3001)
    w = (rng.standard_normal((512, 512, 3, 3)) * 0.02).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[2, 2, 2, 2], dilations=[2, 2], kernel_shape=[3, 3], name="conv")
    g = helper.make_graph([node], "csrnet_dilated", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 512, 14, 14])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 512, 14, 14])], [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def spin():
    x = 0
    while True:
        x += 1


def ranking(pet, sub, tmp, tag):
    out = os.path.join(tmp, tag)
    js = os.path.join(tmp, tag + ".json")
    subprocess.run([pet, "mutate", sub, "--out-dir", out, "--depth", "0", "--profile-cache", "none", "--json", js, "--quiet"], check=True)
    j = json.load(open(js))
    costs = {"original": j["original_est_ms"]}
    for m in j["mutants"]:
        costs[f'{m.get("rule", "generated")}: {m["ops"]}'] = m["est_ms"]
    return costs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pet")
    ap.add_argument("out_json")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        sub = os.path.join(tmp, "sub.onnx")
        subprogram(sub, a.batch)
        for r in range(a.rounds):
            print(f"round {r + 1}/{a.rounds}: quiet ...", file=sys.stderr)
            quiet = ranking(a.pet, sub, tmp, f"quiet{r}")
            print(f"round {r + 1}/{a.rounds}: busy ({os.cpu_count()} spinning processes) ...", file=sys.stderr)
            spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(os.cpu_count())]
            for p in spinners:
                p.start()
            try:
                busy = ranking(a.pet, sub, tmp, f"busy{r}")
            finally:
                for p in spinners:
                    p.kill()
            common = sorted(set(quiet) & set(busy))
            clear = [(x, y) for x in common for y in common if quiet[x] * 1.67 < quiet[y]]
            kept = [(x, y) for x, y in clear if busy[x] < busy[y]]
            results.append({"quiet_ms": quiet, "busy_ms": busy, "clear_pairs": len(clear), "kept_order": len(kept),
                            "flipped": [f"{x} < {y}" for x, y in clear if (x, y) not in kept]})
            print(json.dumps({k: results[-1][k] for k in ("clear_pairs", "kept_order", "flipped")}), file=sys.stderr)
    json.dump({"batch": a.batch, "rounds": results}, open(a.out_json, "w"), indent=1)
    for i, r in enumerate(results):
        print(f"round {i + 1}: {r['kept_order']} of {r['clear_pairs']} clear quiet orderings kept under load")
        for k in sorted(r["quiet_ms"], key=r["quiet_ms"].get):
            print(f"  {r['quiet_ms'][k]:8.3f} ms quiet  {r['busy_ms'].get(k, float('nan')):8.3f} ms busy  {k}")
    return 0 if all(not r["flipped"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
