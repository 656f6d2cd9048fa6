#!/usr/bin/env python3
"""Transformers as PyTorch exports them, with their embeddings and masks, on pet's cpu backend
side by side with ONNX Runtime (seeded random weights, vocabulary 5000, width 256, 4 heads,
4 layers, 128 tokens):

  gpt   a GPT-2-like decoder: token and position embeddings (Gather), per layer LayerNorm,
        one QKV MatMul split in three, the causal mask as masked_fill (Where on a constant
        lower-triangular mask, -inf elsewhere), Softmax, exact GELU (Erf), residual adds;
        a final LayerNorm and the vocabulary projection. Input: token ids [N,128].
  bert  a BERT-like encoder: nn.TransformerEncoder (post-norm, ReLU) under a key padding mask
        given at run time (Equal, Expand, Cast and Where on the scores), token embedding plus
        a learned position table. Inputs: token ids [N,128], attention mask [N,128] (the last
        28 positions padding).

Batch 1 and 4. The models are exported by Debian's interpreter (torch), in a child process.
Each is first checked: ONNX Runtime's outputs on seeded token ids become ONNX test data, and
`pet run --check` must pass on them. Then both are timed on the same inputs, interleaved round
by round, each round the median of --repeat runs after a warm-up in its own process (2 threads);
prints the median of the rounds and the ratio, and writes JSON.

Usage: [PET=binary] .venv/bin/python experiments/transformers_vs_ort.py [OUT.json] [--rounds N] [--repeat N]
(needs onnx, numpy and onnxruntime here and torch in /usr/bin/python3). Progress on stderr.
exit: 0 all checks passed, 1 a check failed, 77 without torch.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pet_vs_ort import interleaved  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PET = os.environ.get("PET", os.path.join(ROOT, "build", "pet"))
VOCAB, WIDTH, HEADS, LAYERS, TOKENS = 5000, 256, 4, 4, 128

EXPORT = r'''
import math, sys, torch, torch.nn as nn
V, D, H, L, T = (int(a) for a in sys.argv[2:7])
torch.manual_seed(0)


class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln1, s.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        s.qkv, s.proj, s.fc, s.out = nn.Linear(D, 3 * D), nn.Linear(D, D), nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(s, x, mask):
        B, T_, _ = x.shape
        q, k, v = (t.view(B, T_, H, D // H).transpose(1, 2) for t in s.qkv(s.ln1(x)).split(D, dim=2))
        a = (q @ k.transpose(-2, -1)) / math.sqrt(D // H)
        a = a.masked_fill(mask == 0, float("-inf")).softmax(-1)
        x = x + s.proj((a @ v).transpose(1, 2).reshape(B, T_, D))
        return x + s.out(nn.functional.gelu(s.fc(s.ln2(x))))


class GPT(nn.Module):
    def __init__(s):
        super().__init__()
        s.wte, s.wpe = nn.Embedding(V, D), nn.Embedding(T, D)
        s.blocks = nn.ModuleList([Block() for _ in range(L)])
        s.ln, s.head = nn.LayerNorm(D), nn.Linear(D, V, bias=False)
        s.register_buffer("tri", torch.tril(torch.ones(T, T)))

    def forward(s, ids):
        x = s.wte(ids) + s.wpe(torch.arange(ids.shape[1]).unsqueeze(0))
        for b in s.blocks:
            x = b(x, s.tri[: ids.shape[1], : ids.shape[1]])
        return s.head(s.ln(x))


class Bert(nn.Module):
    def __init__(s):
        super().__init__()
        s.emb, s.pos, s.ln = nn.Embedding(V, D), nn.Embedding(T, D), nn.LayerNorm(D)
        layer = nn.TransformerEncoderLayer(D, H, 4 * D, dropout=0.0, batch_first=True)
        s.enc = nn.TransformerEncoder(layer, L, enable_nested_tensor=False)

    def forward(s, ids, am):
        x = s.ln(s.emb(ids) + s.pos.weight[: ids.shape[1]])
        return s.enc(x, src_key_padding_mask=(am == 0))


name, batch, out = sys.argv[1], int(sys.argv[7]), sys.argv[8]
ids = torch.zeros(batch, T, dtype=torch.int64)
if name == "gpt":
    torch.onnx.export(GPT().eval(), (ids,), out, opset_version=17, input_names=["ids"], output_names=["logits"])
else:
    am = torch.ones(batch, T, dtype=torch.int64)
    torch.onnx.export(Bert().eval(), (ids, am), out, opset_version=17, input_names=["ids", "attention_mask"], output_names=["hidden"])
'''


def test_data(path, data, batch):
    """Seeded token ids (and a mask: the last 28 positions padding) as ONNX test data in `data`,
    with ONNX Runtime's outputs on them."""
    os.makedirs(data, exist_ok=True)
    rng = np.random.default_rng(7)
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feed = {}
    for k, i in enumerate(s.get_inputs()):
        if i.name == "ids":
            v = rng.integers(0, VOCAB, (batch, TOKENS)).astype(np.int64)
        else:
            v = np.ones((batch, TOKENS), np.int64)
            v[:, TOKENS - 28:] = 0
        feed[i.name] = v
        with open(os.path.join(data, f"input_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v, i.name).SerializeToString())
    for k, v in enumerate(s.run(None, feed)):
        with open(os.path.join(data, f"output_{k}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v).SerializeToString())


def main():
    args = sys.argv[1:]
    out = args[0] if args and not args[0].startswith("--") else None
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 5
    repeat = int(args[args.index("--repeat") + 1]) if "--repeat" in args else 30
    if subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode != 0:
        print("SKIPPED: torch is not importable by /usr/bin/python3")
        return 77
    rows, ok = [], True
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("gpt", "bert"):
            for batch in (1, 4):
                print(f"transformers_vs_ort: exporting {name} batch {batch}", file=sys.stderr)
                path = os.path.join(tmp, f"{name}_b{batch}.onnx")
                subprocess.run(["/usr/bin/python3", "-c", EXPORT, name, str(VOCAB), str(WIDTH), str(HEADS), str(LAYERS), str(TOKENS), str(batch), path],
                               check=True, capture_output=True)
                onnx.checker.check_model(path)
                data = os.path.join(tmp, f"{name}_b{batch}")
                test_data(path, data, batch)
                chk = subprocess.run([PET, "run", path, "--inputs", data, "--check", data], capture_output=True, text=True)
                check = "pass" if chk.returncode == 0 else "FAIL"
                row = {"model": name, "batch": batch, "check_vs_ort": check}
                row.update(interleaved(PET, path, rounds, repeat, tmp, f"transformers_vs_ort: {name} batch {batch}", inputs=data))
                rows.append(row)
                print(f"{name:5} batch {batch}: check {check}  pet {row['pet_ms']:7.3f} ms  ORT {row['ort_ms']:7.3f} ms  "
                      f"pet/ORT {row['pet_over_ort']:.2f}", flush=True)
                if check != "pass":
                    ok = False
                    print(chk.stdout + chk.stderr)
    if out:
        with open(out, "w") as f:
            json.dump({"rounds": rounds, "repeat": repeat, "threads": 2, "models": rows}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
