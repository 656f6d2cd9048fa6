#!/usr/bin/env python3
"""Single-op models on pet's cpu backend side by side with ONNX Runtime: the ops whose cpu
kernels are pet's own rather than oneDNN's (reductions over dims before the last or apart,
softmax over a dim before the last, GridSample, RoiAlign, Det, the bitwise ops, GatherND, OneHot, Trilu, Mod, Hardmax, masks,
arg-reductions, Log, Softplus and Mish on Eigen's functions, reductions over the last dim in
short runs), GroupNormalization, Col2Im and MaxUnpool (imported as several pet ops), a matmul plus a scalar, a log-mel spectrogram (STFT, MelWeightMatrix), antialiased Resize downscales, a 3-D pool of a plain input, and programs with large outputs (a run's outputs reuse the storage of the last run's once the caller dropped them).
Each model reads the same seeded inputs on both sides (ONNX test data in a directory);
interleaved round by round, each round the median of --repeat runs after a warm-up, in its
own process (experiments/pet_vs_ort.py). Prints a table, writes JSON.

Usage: .venv/bin/python experiments/ops_vs_ort.py [OUT.json] [--rounds N] [--repeat N] [--only NAME,...]
PET=/path/to/pet times another binary (before / after). Progress on stderr.
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
PET = os.environ.get("PET", os.path.join(ROOT, "build", "pet"))
F, I64 = TensorProto.FLOAT, TensorProto.INT64


def unary(op, shape, out_shape=None, out_type=F, **attrs):
    return [helper.make_node(op, ["x"], ["y"], **attrs)], [("x", F, shape, None)], [("y", out_type, out_shape or shape)], []


def reduce(op, shape, axes):
    out = [1 if i in axes else d for i, d in enumerate(shape)]
    if op == "ReduceSum":  # axes an input from opset 13
        return ([helper.make_node(op, ["x", "axes"], ["y"])], [("x", F, shape, None)], [("y", F, out)],
                [numpy_helper.from_array(np.array(axes, dtype=np.int64), "axes")])
    return unary(op, shape, out, axes=axes)


def cases():
    rng = np.random.default_rng(7)
    c = {}
    c["relu 32 MiB output"] = unary("Relu", [1, 64, 512, 256])
    c["greater (bool output)"] = ([helper.make_node("Greater", ["x", "z"], ["y"])], [("x", F, [1, 64, 128, 128], None)],
                                  [("y", TensorProto.BOOL, [1, 64, 128, 128])], [numpy_helper.from_array(np.array(0, np.float32), "z")])
    c["cast to int64"] = unary("Cast", [1, 64, 128, 128], out_type=I64, to=I64)
    c["mean over channels"] = reduce("ReduceMean", [8, 64, 56, 56], [1])
    c["sum, middle axis"] = reduce("ReduceSum", [64, 1000, 64], [1])
    c["L2, middle axis"] = reduce("ReduceL2", [64, 1000, 64], [1])
    c["max, first axis"] = reduce("ReduceMax", [1000, 64, 64], [0])
    c["log-sum, middle axis"] = reduce("ReduceLogSum", [64, 1000, 64], [1])
    c["mean over N, H, W"] = reduce("ReduceMean", [8, 64, 56, 56], [0, 2, 3])
    c["softmax over channels"] = unary("Softmax", [8, 64, 56, 56], axis=1)
    c["log-softmax, channels"] = unary("LogSoftmax", [8, 64, 56, 56], axis=1)
    c["3-D max pool, plain"] = unary("MaxPool", [1, 32, 16, 56, 56], kernel_shape=[3, 3, 3], pads=[1, 1, 1, 1, 1, 1])
    c["GatherND"] = ([helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1)],
                     [("x", F, [4, 1000, 256], None), ("i", I64, [4, 500, 1], rng.integers(-1000, 1000, [4, 500, 1]))], [("y", F, [4, 500, 256])], [])
    c["Trilu"] = unary("Trilu", [8, 512, 512], upper=0)
    c["OneHot depth 1000"] = ([helper.make_node("OneHot", ["i", "d", "v"], ["y"])], [("i", I64, [64, 128], rng.integers(-1000, 1000, [64, 128]))],
                              [("y", F, [64, 128, 1000])],
                              [numpy_helper.from_array(np.array(1000, np.int64), "d"), numpy_helper.from_array(np.array([0, 1], np.float32), "v")])
    c["GridSample bilinear"] = ([helper.make_node("GridSample", ["x", "g"], ["y"])],
                                [("x", F, [1, 64, 128, 128], None), ("g", F, [1, 128, 128, 2], rng.uniform(-1.1, 1.1, [1, 128, 128, 2]))],
                                [("y", F, [1, 64, 128, 128])], [])
    # a detector's box head: 512 regions of a stride-16 feature map pooled to 7 x 7, 2 x 2 points a bin
    xy = rng.uniform(0, 900, [512, 2])
    boxes = np.concatenate([xy, xy + rng.uniform(16, 300, [512, 2])], 1).astype(np.float32)
    c["RoiAlign 512 x 7 x 7"] = ([helper.make_node("RoiAlign", ["x", "rois", "b"], ["y"], output_height=7, output_width=7, sampling_ratio=2,
                                                   spatial_scale=1 / 16)],
                                 [("x", F, [1, 256, 64, 64], None), ("rois", F, [512, 4], boxes), ("b", I64, [512], np.zeros(512, np.int64))],
                                 [("y", F, [512, 256, 7, 7])], [])
    c["Det 4096 of 4 x 4"] = unary("Det", [4096, 4, 4], [4096])
    c["Det 16 of 64 x 64"] = unary("Det", [16, 64, 64], [16])
    c["BitwiseXor int32"] = ([helper.make_node("BitwiseXor", ["a", "b"], ["y"])],
                             [("a", TensorProto.INT32, [1, 64, 128, 128], rng.integers(-2**31, 2**31, [1, 64, 128, 128])),
                              ("b", TensorProto.INT32, [1, 64, 128, 128], rng.integers(-2**31, 2**31, [1, 64, 128, 128]))],
                             [("y", TensorProto.INT32, [1, 64, 128, 128])], [], 18)
    c["Mod (fmod)"] = ([helper.make_node("Mod", ["a", "b"], ["y"], fmod=1)], [("a", F, [1, 64, 128, 128], rng.uniform(-100, 100, [1, 64, 128, 128])),
                                                                             ("b", F, [1, 64, 128, 128], rng.uniform(0.5, 3, [1, 64, 128, 128]))],
                       [("y", F, [1, 64, 128, 128])], [])
    c["Hardmax"] = unary("Hardmax", [128, 5000])
    c["ArgMax, last axis"] = unary("ArgMax", [128, 5000], [128, 1], I64, axis=1)
    c["Less, Not, Where"] = ([helper.make_node("Less", ["a", "b"], ["c"]), helper.make_node("Not", ["c"], ["d"]), helper.make_node("Where", ["d", "a", "b"], ["y"])],
                             [("a", F, [1, 64, 128, 128], None), ("b", F, [1, 64, 128, 128], None)], [("y", F, [1, 64, 128, 128])], [])
    c["LogSoftmax, rows of 32000"] = unary("LogSoftmax", [16, 32000], axis=1)
    c["LogSoftmax, rows of 56"] = unary("LogSoftmax", [8, 64, 56, 56], axis=3)
    kv = [1, 16, 512, 64]  # a KV cache written at 8 positions (ScatterND as exported index_put_)
    pos = np.stack(np.meshgrid(np.arange(16), np.arange(500, 508), indexing="ij"), -1).reshape(1, 16, 8, 2)
    pos = np.concatenate([np.zeros([1, 16, 8, 1], np.int64), pos], -1)
    c["ScatterND, KV cache"] = ([helper.make_node("ScatterND", ["x", "i", "u"], ["y"])],
                                [("x", F, kv, None), ("i", I64, [1, 16, 8, 3], pos), ("u", F, [1, 16, 8, 64], None)], [("y", F, kv)], [])
    c["ScatterElements, axis 1"] = ([helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1)],
                                    [("x", F, [64, 1000, 16], None), ("i", I64, [64, 100, 16], rng.integers(0, 1000, [64, 100, 16])),
                                     ("u", F, [64, 100, 16], None)], [("y", F, [64, 1000, 16])], [])
    c["Einsum, bilinear"] = ([helper.make_node("Einsum", ["a", "w", "b"], ["y"], equation="bi,oij,bj->bo")],
                             [("a", F, [64, 128], None), ("w", F, [32, 128, 128], None), ("b", F, [64, 128], None)], [("y", F, [64, 32])], [])
    c["Einsum, outer product"] = ([helper.make_node("Einsum", ["a", "b"], ["y"], equation="bi,bj->bij")],
                                  [("a", F, [64, 256], None), ("b", F, [64, 256], None)], [("y", F, [64, 256, 256])], [])
    c["Einsum, diagonal sum"] = ([helper.make_node("Einsum", ["a"], ["y"], equation="bii->b")],
                                 [("a", F, [256, 256, 256], None)], [("y", F, [256])], [])
    big = [1, 64, 128, 128]
    c["Log"] = ([helper.make_node("Log", ["x"], ["y"])], [("x", F, big, rng.uniform(0.01, 10, big))], [("y", F, big)], [])
    c["Softplus"] = ([helper.make_node("Softplus", ["x"], ["y"])], [("x", F, big, rng.uniform(-10, 10, big))], [("y", F, big)], [])
    c["Mish"] = ([helper.make_node("Mish", ["x"], ["y"])], [("x", F, big, rng.uniform(-10, 10, big))], [("y", F, big)], [], 18)
    # the last dim in short runs: a power spectrum's real and imaginary parts, rows of 64
    c["sum of squares, runs of 2"] = reduce("ReduceSumSquare", [1, 2998, 201, 2], [3])
    c["mean, runs of 64"] = reduce("ReduceMean", [18750, 64], [1])
    c["max, runs of 64"] = reduce("ReduceMax", [18750, 64], [1])
    # a matmul plus a scalar (oneDNN's gemm has a bias along N only)
    c["matmul + scalar"] = ([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "e"], ["y"])],
                            [("x", F, [1, 2998, 201], None)], [("y", F, [1, 2998, 80])],
                            [numpy_helper.from_array(rng.uniform(0, 1, [201, 80]).astype(np.float32), "w"), numpy_helper.from_array(np.array(1e-6, np.float32), "e")])
    # an audio front end, opset 17's signal ops: log-mel spectrogram of 30 s at 16 kHz
    i64 = lambda n, v: numpy_helper.from_array(np.array(v, np.int64), n)
    f32 = lambda n, v: numpy_helper.from_array(np.array(v, np.float32), n)
    c["log-mel, 30 s (STFT)"] = ([helper.make_node("HannWindow", ["n400"], ["hann"]), helper.make_node("STFT", ["x", "hop", "hann", "n400"], ["spec"]),
                                  helper.make_node("ReduceSumSquare", ["spec"], ["power"], axes=[-1], keepdims=0),
                                  helper.make_node("MelWeightMatrix", ["mels", "n400", "rate", "lo", "hi"], ["melw"]),
                                  helper.make_node("MatMul", ["power", "melw"], ["mel"]), helper.make_node("Add", ["mel", "eps"], ["mel_eps"]),
                                  helper.make_node("Log", ["mel_eps"], ["y"])],
                                 [("x", F, [1, 480000, 1], None)], [("y", F, [1, 2998, 80])],
                                 [i64("n400", 400), i64("hop", 160), i64("mels", 80), i64("rate", 16000), f32("lo", 0), f32("hi", 8000), f32("eps", 1e-6)],
                                 17, False)  # onnx 1.17's STFT shape inference ignores onesided (400 bins, not 201): no full check
    # opset 18's antialiased downscales (as torchvision's antialias=True exports them): taps
    # gathered per axis, weighted and summed
    c["resize antialias linear 1/2"] = ([helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear", antialias=1)],
                                        [("x", F, [1, 3, 448, 448], None)], [("y", F, [1, 3, 224, 224])],
                                        [f32("s", [1, 1, 0.5, 0.5])], 18)
    c["resize antialias cubic 1/4"] = ([helper.make_node("Resize", ["x", "", "s"], ["y"], mode="cubic", antialias=1)],
                                       [("x", F, [1, 3, 896, 896], None)], [("y", F, [1, 3, 224, 224])],
                                       [f32("s", [1, 1, 0.25, 0.25])], 18)
    # ops imported as several pet ops: a diffusion UNet's GroupNormalization (32 groups of
    # 320 channels, opset 21's per-channel scale), PyTorch's fold (Col2Im, 3 x 3 blocks), and
    # a SegNet decoder's MaxUnpool of MaxPool's indices
    gn = [1, 320, 64, 64]
    c["GroupNormalization, 32 groups"] = ([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=32)],
                                          [("x", F, gn, None)], [("y", F, gn)],
                                          [f32("s", rng.uniform(0.5, 1.5, 320)), f32("b", rng.uniform(-1, 1, 320))], 21)
    c["Col2Im, 3 x 3 blocks"] = ([helper.make_node("Col2Im", ["x", "img", "blk"], ["y"], pads=[1, 1, 1, 1])],
                                 [("x", F, [1, 64 * 9, 64 * 64], None)], [("y", F, [1, 64, 64, 64])],
                                 [i64("img", [64, 64]), i64("blk", [3, 3])], 18)
    c["MaxUnpool of MaxPool"] = ([helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2]),
                                  helper.make_node("MaxUnpool", ["p", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
                                 [("x", F, [1, 64, 112, 112], None)], [("y", F, [1, 64, 112, 112])], [], 18)
    return c


def write(name, spec, tmp):
    nodes, ins, outs, inits = spec[:4]
    opset = spec[4] if len(spec) > 4 else 17
    rng = np.random.default_rng(1)
    g = helper.make_graph(nodes, name.replace(" ", "_"), [helper.make_tensor_value_info(n, t, s) for n, t, s, _ in ins],
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in outs], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m, full_check=spec[5] if len(spec) > 5 else True)
    stem = os.path.join(tmp, "".join(ch if ch.isalnum() else "_" for ch in name))
    onnx.save(m, stem + ".onnx")
    os.makedirs(stem + ".in", exist_ok=True)
    for k, (n, t, s, v) in enumerate(ins):
        a = v if v is not None else rng.uniform(-1, 1, s)
        a = a.astype(helper.tensor_dtype_to_np_dtype(t))
        with open(os.path.join(stem + ".in", f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())
    return stem + ".onnx", stem + ".in"


def main():
    args = sys.argv[1:]
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 3
    repeat = int(args[args.index("--repeat") + 1]) if "--repeat" in args else 20
    only = args[args.index("--only") + 1].split(",") if "--only" in args else None
    out = args[0] if args and not args[0].startswith("--") else None
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, spec in cases().items():
            if only and not any(o.lower() in name.lower() for o in only):
                continue
            path, inputs = write(name, spec, tmp)
            row = {"op": name, "pet": PET}
            row.update(interleaved(PET, path, rounds, repeat, tmp, f"ops_vs_ort: {name}", inputs=inputs))
            rows.append(row)
            print(f"{name:24} pet {row['pet_ms']:8.3f} ms  ORT {row['ort_ms']:8.3f} ms  pet/ORT {row['pet_over_ort']:6.2f}", flush=True)
    if out:
        with open(out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
