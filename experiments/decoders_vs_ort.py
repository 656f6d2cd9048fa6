#!/usr/bin/env python3
"""Decoders, the ops that grow images (ConvTranspose, Resize), on pet's cpu backend side by
side with ONNX Runtime, on five models with seeded random weights:

  dcgan    PyTorch's DCGAN generator: z [N,100,1,1] -> five ConvTranspose 4x4 (the first
           stride 1, then stride 2 pad 1), BatchNormalization + Relu between, Tanh at the end
           -> [N,3,64,64]; batch 1 and 16.
  unet_up  a U-Net's expanding path: three stages of ConvTranspose 2x2 stride 2 (with bias),
           Concat with the skip connection, two 3x3 convs + Relu; [1,256,16,16] -> [1,32,128,128].
  vocoder  a HiFi-GAN-like 1-D upsampler: ConvTranspose1d 16/8/4/4 taps, strides 8/8/2/2, each
           + LeakyRelu(0.1), then a 7-tap conv and Tanh; [1,512,100] -> [1,1,25600].
  fpn      a YOLO-like neck: two stages of 1x1 conv, Resize nearest x2 as PyTorch exports
           F.interpolate(scale_factor=2) (asymmetric, floor), Concat with the lateral input,
           3x3 conv + SiLU; [1,512,20,20] -> [1,32,80,80].
  seg_head a segmentation head: 3x3 conv + Relu, 1x1 conv to 21 classes, Resize linear x8 with
           align_corners (F.interpolate(..., align_corners=True)); [1,256,64,64] -> [1,21,512,512].

Each model is first checked: ONNX Runtime's outputs on seeded inputs become ONNX test data,
and `pet run --check` must pass on them. Then both are timed, interleaved round by round, each
round the median of --repeat runs after a warm-up in its own process (2 threads); prints the
median of the rounds and the ratio, and writes JSON.

Usage: [PET=binary] .venv/bin/python experiments/decoders_vs_ort.py [OUT.json] [--rounds N] [--repeat N]
(needs onnx, numpy and onnxruntime: the project's .venv has them). Progress on stderr.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pet_vs_ort import cli, interleaved, write_rows  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PET = os.environ.get("PET", os.path.join(ROOT, "build", "pet"))

class Net:
    """A small ONNX graph builder: seeded weights, one running tensor name."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.inputs, self.n = [], [], [], 0

    def name(self, base):
        self.n += 1
        return f"{base}{self.n}"

    def const(self, arr):
        nm = self.name("w")
        self.inits.append(numpy_helper.from_array(arr.astype(np.float32), nm))
        return nm

    def input(self, shape):
        nm = self.name("x")
        self.inputs.append(helper.make_tensor_value_info(nm, TensorProto.FLOAT, shape))
        return nm

    def node(self, op, ins, **attrs):
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def weight(self, shape, fan_in):
        return self.const(self.rng.uniform(-1, 1, shape) * np.sqrt(3.0 / fan_in))

    def deconv(self, x, cin, cout, k, bias=True, **attrs):
        ks = list(k)
        w = self.weight([cin, cout] + ks, cin * int(np.prod(ks)) / max(1, attrs.get("strides", [1])[0] ** len(ks)))
        ins = [x, w] + ([self.const(self.rng.uniform(-0.1, 0.1, [cout]))] if bias else [])
        return self.node("ConvTranspose", ins, kernel_shape=ks, **attrs)

    def conv(self, x, cin, cout, k, **attrs):
        ks = list(k)
        w = self.weight([cout, cin] + ks, cin * int(np.prod(ks)))
        return self.node("Conv", [x, w, self.const(self.rng.uniform(-0.1, 0.1, [cout]))], kernel_shape=ks, **attrs)

    def bn(self, x, c):
        r = self.rng
        return self.node("BatchNormalization", [x, self.const(r.uniform(0.5, 1.5, [c])), self.const(r.uniform(-0.2, 0.2, [c])),
                                                self.const(r.uniform(-0.2, 0.2, [c])), self.const(r.uniform(0.5, 2, [c]))])

    def save(self, path, out):
        g = helper.make_graph(self.nodes, os.path.basename(path), self.inputs,
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], self.inits)
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def dcgan(path, batch):
    m = Net(1)
    x = m.input([batch, 100, 1, 1])
    chans = [100, 512, 256, 128, 64]
    for i in range(4):
        x = m.deconv(x, chans[i], chans[i + 1], (4, 4), bias=False, strides=[1 if i == 0 else 2] * 2, pads=[0 if i == 0 else 1] * 4)
        x = m.node("Relu", [m.bn(x, chans[i + 1])])
    x = m.node("Tanh", [m.deconv(x, 64, 3, (4, 4), bias=False, strides=[2, 2], pads=[1, 1, 1, 1])])
    m.save(path, x)


def unet_up(path, batch):
    m = Net(2)
    x = m.input([batch, 256, 16, 16])
    c, hw = 256, 16
    for _ in range(3):
        skip = m.input([batch, c // 2, hw * 2, hw * 2])
        x = m.deconv(x, c, c // 2, (2, 2), strides=[2, 2])
        x = m.node("Concat", [x, skip], axis=1)
        x = m.node("Relu", [m.conv(x, c, c // 2, (3, 3), pads=[1] * 4)])
        x = m.node("Relu", [m.conv(x, c // 2, c // 2, (3, 3), pads=[1] * 4)])
        c, hw = c // 2, hw * 2
    m.save(path, x)


def vocoder(path, batch):
    m = Net(3)
    x = m.input([batch, 512, 100])
    c = 512
    for k, s in [(16, 8), (16, 8), (4, 2), (4, 2)]:
        x = m.deconv(x, c, c // 2, (k,), strides=[s], pads=[(k - s) // 2] * 2)
        x = m.node("LeakyRelu", [x], alpha=0.1)
        c //= 2
    x = m.node("Tanh", [m.conv(x, c, 1, (7,), pads=[3, 3])])
    m.save(path, x)


def resize(m, x, mode, scale, **attrs):
    sc = m.const(np.array([1, 1, scale, scale], np.float32))
    return m.node("Resize", [x, "", sc], mode=mode, **attrs)


def silu(m, x):
    return m.node("Mul", [x, m.node("Sigmoid", [x])])


def fpn(path, batch):
    m = Net(4)
    x = m.input([batch, 512, 20, 20])
    c = 512
    for _ in range(2):
        lateral = m.input([batch, c // 2, 0, 0])  # shape filled below
        x = silu(m, m.conv(x, c, c // 2, (1, 1)))
        x = resize(m, x, "nearest", 2.0, coordinate_transformation_mode="asymmetric", nearest_mode="floor")
        x = m.node("Concat", [x, lateral], axis=1)
        x = silu(m, m.conv(x, c, c // 4, (3, 3), pads=[1] * 4))
        c //= 4
    hw = 40
    for vi in m.inputs[1:]:
        dims = vi.type.tensor_type.shape.dim
        dims[2].dim_value = dims[3].dim_value = hw
        hw *= 2
    m.save(path, x)


def seg_head(path, batch):
    m = Net(5)
    x = m.input([batch, 256, 64, 64])
    x = m.node("Relu", [m.conv(x, 256, 256, (3, 3), pads=[1] * 4)])
    x = m.conv(x, 256, 21, (1, 1))
    m.save(path, resize(m, x, "linear", 8.0, coordinate_transformation_mode="align_corners"))


CASES = [("dcgan", dcgan, 1), ("dcgan", dcgan, 16), ("unet_up", unet_up, 1), ("vocoder", vocoder, 1), ("fpn", fpn, 1),
         ("seg_head", seg_head, 1)]


def test_data(model_path, data_dir):
    """ONNX Runtime's outputs on seeded inputs, in ONNX's test-data layout."""
    import onnxruntime as ort
    s = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(5)
    feed = {i.name: rng.uniform(-1, 1, i.shape).astype(np.float32) for i in s.get_inputs()}
    os.makedirs(data_dir, exist_ok=True)
    for k, (nm, v) in enumerate(feed.items()):
        with open(os.path.join(data_dir, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v, nm).SerializeToString())
    for k, (o, v) in enumerate(zip(s.get_outputs(), s.run(None, feed))):
        with open(os.path.join(data_dir, f"output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v, o.name).SerializeToString())


def main():
    out, rounds, repeat = cli()
    rows, failed = [], False
    with tempfile.TemporaryDirectory() as tmp:
        for name, make, batch in CASES:
            path = os.path.join(tmp, f"{name}_b{batch}.onnx")
            make(path, batch)
            data = os.path.join(tmp, f"{name}_b{batch}_data")
            test_data(path, data)
            chk = subprocess.run([PET, "run", path, "--check", data], capture_output=True, text=True)
            check = "pass" if chk.returncode == 0 else "FAIL"
            failed = failed or chk.returncode != 0
            row = {"model": name, "batch": batch, "check_vs_ort": check}
            row.update(interleaved(PET, path, rounds, repeat, tmp, f"decoders_vs_ort: {name} batch {batch}"))
            rows.append(row)
            print(f"{name:9} batch {batch:2}: check {check}  pet {row['pet_ms']:8.3f} ms  ORT {row['ort_ms']:8.3f} ms  "
                  f"pet/ORT {row['pet_over_ort']:.2f}")
            if check != "pass":
                print(chk.stdout[-2000:] + chk.stderr[-2000:], file=sys.stderr)
    write_rows(out, rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
