#!/usr/bin/env python3
"""pet's unrolled recurrent nodes (LSTM, GRU; import-time unrolling, cpu backend) side by side
with ONNX Runtime's fused RNN kernels, on single-layer models with seeded random weights:
sequence 50, input 128, hidden 256, batch 1 and 16. Interleaved round by round; each round
times the median of --repeat runs after a warm-up, in its own process; prints the median of the
rounds and the ratio, and writes JSON.

Usage: .venv/bin/python experiments/recurrent_vs_ort.py [OUT.json] [--rounds N] [--repeat N]
(needs onnx, numpy and onnxruntime: the project's .venv has them). Progress on stderr.
"""
import json
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pet_vs_ort import interleaved  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PET = os.path.join(ROOT, "build", "pet")
CASES = [("lstm", "LSTM", 4, 1), ("lstm", "LSTM", 4, 16), ("gru", "GRU", 3, 1), ("gru", "GRU", 3, 16)]
T, I, H = 50, 128, 256

def model(path, op, gates, batch):
    rng = np.random.default_rng(1)
    def w(name, *shape):
        return numpy_helper.from_array(rng.uniform(-0.1, 0.1, shape).astype(np.float32), name)
    node = helper.make_node(op, ["x", "W", "R", "B"], ["y", "y_h"], hidden_size=H)
    g = helper.make_graph([node], f"{op}_b{batch}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, batch, I])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("y_h", TensorProto.FLOAT, None)],
                          [w("W", 1, gates * H, I), w("R", 1, gates * H, H), w("B", 1, 2 * gates * H)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def main():
    args = sys.argv[1:]
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 5
    repeat = int(args[args.index("--repeat") + 1]) if "--repeat" in args else 30
    out = args[0] if args and not args[0].startswith("--") else None
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, op, gates, batch in CASES:
            path = os.path.join(tmp, f"{name}_b{batch}.onnx")
            model(path, op, gates, batch)
            row = {"model": f"{op} T={T} I={I} H={H}", "batch": batch}
            row.update(interleaved(PET, path, rounds, repeat, tmp, f"recurrent_vs_ort: {name} batch {batch}"))
            rows.append(row)
            print(f"{row['model']:28} batch {batch:2}: pet {row['pet_ms']:7.3f} ms  ORT {row['ort_ms']:7.3f} ms  "
                  f"pet/ORT {row['pet_over_ort']:.2f}")
    if out:
        with open(out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
