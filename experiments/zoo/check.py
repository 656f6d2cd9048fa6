#!/usr/bin/env python3
"""Model-zoo check: torchvision models beyond the paper's five, exported with seeded random
weights (models/export_models.py's randomise), run through pet and compared with PyTorch.
What a user importing their own model meets first: unsupported ops, crashes, wrong answers.

For each model: `pet run --check` on the cpu backend against PyTorch's output; with
--optimize S also `pet optimize --budget S`, the written file checked against PyTorch again
and in ONNX Runtime against the original (tests/ort_compare.py, with .venv's interpreter),
and a rewritten file (not the original kept) in OpenVINO against the original
(tests/openvino_compare.py; skipped without openvino).
Writes OUT/zoo.json and prints one line per model; progress on stderr.

usage (Debian's interpreter, for torch):
  /usr/bin/python3 experiments/zoo/check.py build/pet OUT [--optimize SECONDS] [names...]
exit: 0 every model passed what was asked, 1 otherwise, 77 without torch.
"""
import json
import os
import subprocess
import sys
import time

try:
    import torch
    import torchvision
except ImportError as e:  # pragma: no cover
    print(f"SKIPPED: {e}")
    sys.exit(77)
from onnx import numpy_helper

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "models"))
import export_models as em  # noqa: E402

tv = torchvision.models


class Out(torch.nn.Module):
    """The tensor of a model that returns a dict (segmentation)."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        y = self.m(x)
        return y["out"] if isinstance(y, dict) else y


class TwoFrames(torch.nn.Module):
    """RAFT on two frames stacked along the channels: its last flow estimate."""

    def __init__(self, m, updates=2):
        super().__init__()
        self.m, self.updates = m, updates

    def forward(self, x):
        return self.m(x[:, :3], x[:, 3:], num_flow_updates=self.updates)[-1]


IMG = (1, 3, 224, 224)
ZOO = {
    "alexnet": (lambda: tv.alexnet(), IMG),
    "squeezenet": (lambda: tv.squeezenet1_1(), IMG),
    "googlenet": (lambda: tv.googlenet(aux_logits=False, init_weights=False), IMG),
    "densenet121": (lambda: tv.densenet121(), IMG),
    "mobilenet_v2": (lambda: tv.mobilenet_v2(), IMG),
    "mobilenet_v3_small": (lambda: tv.mobilenet_v3_small(), IMG),
    "mnasnet": (lambda: tv.mnasnet0_5(), IMG),
    "shufflenet": (lambda: tv.shufflenet_v2_x1_0(), IMG),
    "efficientnet_b0": (lambda: tv.efficientnet_b0(), IMG),
    "regnet_x_400mf": (lambda: tv.regnet_x_400mf(), IMG),
    "resnext50": (lambda: tv.resnext50_32x4d(), IMG),
    "convnext_tiny": (lambda: tv.convnext_tiny(), IMG),
    "vit_b_16": (lambda: tv.vit_b_16(), IMG),
    "swin_t": (lambda: tv.swin_t(), IMG),
    "deeplabv3_mnv3": (lambda: tv.segmentation.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, aux_loss=False), IMG),
    "fcn_resnet50": (lambda: tv.segmentation.fcn_resnet50(weights=None, weights_backbone=None, aux_loss=False), IMG),
    "mc3_18": (lambda: tv.video.mc3_18(), (1, 3, 8, 112, 112)),
    "maxvit_t": (lambda: tv.maxvit_t(), IMG),
    "efficientnet_v2_s": (lambda: tv.efficientnet_v2_s(), IMG),
    "regnet_y_400mf": (lambda: tv.regnet_y_400mf(), IMG),
    "r2plus1d_18": (lambda: tv.video.r2plus1d_18(), (1, 3, 8, 112, 112)),
    "s3d": (lambda: tv.video.s3d(), (1, 3, 16, 224, 224)),
    # exports Loop, If and sequence ops (its pooling's shape arithmetic), inlined at import
    "mvit_v1_b": (lambda: tv.video.mvit_v1_b(), (1, 3, 16, 224, 224)),
    "lraspp_mnv3": (lambda: tv.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None), IMG),
    # optical flow: GridSample looks up its correlation pyramid
    "raft_small": (lambda: TwoFrames(tv.optical_flow.raft_small()), (1, 6, 128, 128)),
}


def export(name, d):
    if os.path.exists(os.path.join(d, "test_data_set_0", "output_0.pb")):
        return
    ctor, shape = ZOO[name]
    torch.manual_seed(1)
    m = Out(em.randomise(ctor(), 1)).eval()
    x = torch.rand(shape, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        y = m(x)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    torch.onnx.export(m, (x,), os.path.join(d, "model.onnx"), opset_version=17, input_names=["x"], output_names=["y"])
    for file, name, t in (("input_0", "x", x), ("output_0", "y", y)):
        with open(os.path.join(d, "test_data_set_0", file + ".pb"), "wb") as f:
            f.write(numpy_helper.from_array(t.numpy(), name).SerializeToString())


def run(cmd, timeout):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, (p.stdout + p.stderr).strip().splitlines()
    except subprocess.TimeoutExpired:
        return 124, [f"timed out after {timeout} s"]


def main():
    args = sys.argv[1:]
    budget = None
    if "--optimize" in args:
        i = args.index("--optimize")
        budget = int(args[i + 1])
        del args[i:i + 2]
    if len(args) < 2:
        print(__doc__)
        sys.exit(2)
    pet, out, names = args[0], args[1], args[2:] or list(ZOO)
    venv_py = os.path.join(ROOT, ".venv", "bin", "python")
    rows, ok_all = [], True
    for n in names:
        if n not in ZOO:
            sys.exit(f"unknown model '{n}' (known: {', '.join(ZOO)})")
        d = os.path.join(out, n)
        t0 = time.time()
        print(f"zoo: {n}: exporting", file=sys.stderr, flush=True)
        row = {"model": n}
        try:
            export(n, d)
        except Exception as e:  # torch cannot export it: not pet's to answer
            row["export"] = f"{type(e).__name__}: {str(e)[:200]}"
            rows.append(row)
            print(f"{n:20s} export failed in torch: {row['export']}")
            continue
        model, data = os.path.join(d, "model.onnx"), os.path.join(d, "test_data_set_0")
        print(f"zoo: {n}: pet run --check", file=sys.stderr, flush=True)
        rc, lines = run([pet, "run", model, "--check", data], 600)
        row["run_exit"], row["run"] = rc, lines[-1] if lines else ""
        ok = rc == 0
        if budget is not None and rc == 0:
            opt = os.path.join(d, "opt.onnx")
            print(f"zoo: {n}: pet optimize --budget {budget}", file=sys.stderr, flush=True)
            rc, lines = run([pet, "optimize", model, "-o", opt, "--budget", str(budget), "--quiet", "--json", os.path.join(d, "opt.json")], 30 * budget + 600)
            row["optimize_exit"] = rc
            if rc == 0:
                rep = json.load(open(os.path.join(d, "opt.json")))
                row.update(speedup=rep["speedup"], kept_original=rep["kept_original"], search_s=round(rep["search_seconds"], 1))
                rc, lines = run([pet, "run", opt, "--check", data], 600)
                row["optimized_check_exit"] = rc
                ok = ok and rc == 0
                if os.path.exists(venv_py):
                    rc, lines = run([venv_py, os.path.join(ROOT, "tests", "ort_compare.py"), model, opt], 900)
                    row["onnxruntime_exit"], row["onnxruntime"] = rc, lines[-1] if lines else ""
                    ok = ok and rc == 0
                    if not rep["kept_original"]:  # OpenVINO runs the rewritten file as it runs the original (77: no openvino)
                        rc, lines = run([venv_py, os.path.join(ROOT, "tests", "openvino_compare.py"), model, opt], 900)
                        row["openvino_exit"], row["openvino"] = rc, lines[-1] if lines else ""
                        ok = ok and rc in (0, 77)
            else:
                row["optimize"] = lines[-1] if lines else ""
                ok = False
        row["ok"], row["seconds"] = ok, round(time.time() - t0, 1)
        ok_all = ok_all and ok
        rows.append(row)
        extra = ""
        if "speedup" in row:
            extra = f"; optimize {row['speedup']:.3f}x{' (original kept)' if row['kept_original'] else ''}, search {row['search_s']} s, " \
                    f"check exit {row['optimized_check_exit']}, onnxruntime exit {row.get('onnxruntime_exit', 'n/a')}, " \
                    f"openvino exit {row.get('openvino_exit', 'n/a')}"
        elif "optimize_exit" in row:
            extra = f"; optimize exit {row['optimize_exit']}: {row.get('optimize', '')}"
        print(f"{n:20s} {'ok  ' if ok else 'FAIL'} run exit {row['run_exit']}: {row['run']}{extra}", flush=True)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "zoo.json"), "w") as f:
        json.dump(rows, f, indent=1)
    sys.exit(0 if ok_all else 1)


if __name__ == "__main__":
    main()
