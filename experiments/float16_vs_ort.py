#!/usr/bin/env python3
"""float16 models on the CPU: pet computes them in float32 (onnx::Model::narrow_float), ONNX
Runtime in float16 where it has kernels and with Casts around the others. For torchvision's
ResNet-18 and MobileNet-v2 (random weights, batch 1), converted to float16 (weights, inputs
and outputs), it times, interleaved round by round (pet_vs_ort.interleaved, 2 threads):
pet's cpu backend on the float16 model, ONNX Runtime on that model, ONNX Runtime on the
float32 model it came from, and ONNX Runtime on the program `pet optimize --keep-slower`
writes for the float16 model (float16 interface and weights, computed in float32). Every
file is checked against ONNX Runtime's outputs at float16's tolerance first.
usage: .venv/bin/python experiments/float16_vs_ort.py [OUT.json] [--rounds 5] [--repeat 20]
(needs /usr/bin/python3 with torch and torchvision to export the models)"""
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pet_vs_ort import ORT_CHILD, cli, interleaved, write_rows  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PET = os.path.join(ROOT, "build", "pet")
EXPORT = r'''
import sys, torch, torchvision
torch.manual_seed(0)
m = getattr(torchvision.models, sys.argv[1])().eval()
torch.onnx.export(m, (torch.randn(1, 3, 224, 224),), sys.argv[2], opset_version=17, input_names=["x"], output_names=["y"])
'''


def to_float16(src, dst):
    """The float32 model with its float initializers, Constants, inputs and outputs as float16."""
    import numpy as np
    import onnx
    from onnx import TensorProto, numpy_helper
    m = onnx.load(src)
    for i, t in enumerate(m.graph.initializer):
        if t.data_type == TensorProto.FLOAT:
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))
    for n in m.graph.node:
        for a in n.attribute:
            if n.op_type == "Constant" and a.name == "value" and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float16), a.t.name))
    for v in list(m.graph.input) + list(m.graph.output):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.FLOAT16
    del m.graph.value_info[:]
    onnx.checker.check_model(m)
    onnx.save(m, dst)


def ort_ms(path, rounds, repeat, label):
    t = []
    for r in range(rounds):
        print(f"{label}, round {r + 1} of {rounds}", file=sys.stderr)
        t.append(float(subprocess.run([sys.executable, "-c", ORT_CHILD, path, str(repeat)], check=True, capture_output=True, text=True).stdout))
    return statistics.median(t), t


def main():
    out, rounds, repeat = cli()
    rows, failed = [], False
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("resnet18", "mobilenet_v2"):
            f32, f16, written = (os.path.join(tmp, f"{name}{s}.onnx") for s in ("_f32", "_f16", "_f16.pet"))
            print(f"float16_vs_ort: exporting {name}", file=sys.stderr)
            subprocess.run(["/usr/bin/python3", "-c", EXPORT, name, f32], check=True, capture_output=True)
            to_float16(f32, f16)
            data = os.path.join(tmp, f"{name}_data")
            subprocess.run([sys.executable, os.path.join(ROOT, "tests", "hardening", "ort_testdata.py"), f16, data], check=True)
            chk = subprocess.run([PET, "run", f16, "--check", data], capture_output=True, text=True)
            print(f"float16_vs_ort: pet optimize {name} --keep-slower", file=sys.stderr)
            subprocess.run([PET, "optimize", f16, "-o", written, "--keep-slower", "--quiet"], check=True)
            cmp = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "ort_compare.py"), f16, written, "--atol", "1e-3", "--rtol", "1e-2"],
                                 capture_output=True, text=True)
            ok = chk.returncode == 0 and cmp.returncode == 0
            failed = failed or not ok
            if not ok:
                print(chk.stdout[-2000:] + cmp.stdout[-2000:], file=sys.stderr)
            row = {"model": name, "batch": 1, "check": "pass" if ok else "FAIL",
                   "bytes": {"float32": os.path.getsize(f32), "float16": os.path.getsize(f16), "pet_written": os.path.getsize(written)}}
            pair = interleaved(PET, f16, rounds, repeat, tmp, f"float16_vs_ort: {name} float16, pet and ONNX Runtime")
            row.update({"pet_ms": pair["pet_ms"], "ort_float16_ms": pair["ort_ms"], "pet_rounds": pair["pet_rounds"], "ort_float16_rounds": pair["ort_rounds"]})
            row["ort_float32_ms"], row["ort_float32_rounds"] = ort_ms(f32, rounds, repeat, f"float16_vs_ort: {name} float32 in ONNX Runtime")
            row["ort_pet_written_ms"], row["ort_pet_written_rounds"] = ort_ms(written, rounds, repeat, f"float16_vs_ort: {name} pet's file in ONNX Runtime")
            rows.append(row)
            print(f"{name:12} check {row['check']}  pet {row['pet_ms']:7.2f} ms  ORT float16 {row['ort_float16_ms']:7.2f} ms  "
                  f"ORT float32 {row['ort_float32_ms']:7.2f} ms  ORT on pet's file {row['ort_pet_written_ms']:7.2f} ms  "
                  f"(files {row['bytes']['float16'] / 1e6:.1f} MB float16, {row['bytes']['pet_written'] / 1e6:.1f} MB pet's)")
    write_rows(out, rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
