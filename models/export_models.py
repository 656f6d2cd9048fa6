#!/usr/bin/env python3
"""Exports the real test models with randomised weights, each with one reference
input/output pair in ONNX's backend-test layout:

    OUT/<name>/model.onnx
    OUT/<name>/test_data_set_0/input_0.pb, output_0.pb

Models: resnet18, inception_v3, r3d_18 (torchvision), csrnet (VGG-16 front end + six
dilation-2 convs), bert_hand (hand-written BERT-base encoder layers) and bert_torch
(nn.TransformerEncoder), the BERT variants at opsets 13 and 17, sequence 128;
deeplabv3_mnv3 and vit_small (torchvision, opset 17); and, when
named, the paper artifact's csrnet_backend (N x 512 x 14 x 14), bert_simple (N x 512 x 768)
and inception_v3_330.
Run with Debian's interpreter: /usr/bin/python3 models/export_models.py OUT [--batch N] [names...]
--batch N (N > 1) also writes OUT/<name>/test_data_set_b<N>/ (a batch-N input and PyTorch's
output), from the model rebuilt with the same seed and checked first against the stored batch-1
pair, so that `pet run --check` can compare the model optimized at batch N with PyTorch.
Exit code 77 when torch is not installed (the tests that need these models then skip).
Existing models are kept (delete a folder to re-export it).
"""
import inspect
import os
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torchvision
except ImportError as e:  # pragma: no cover
    print(f"SKIPPED: {e} (apt install python3-torch python3-torchvision)")
    sys.exit(77)

from onnx import numpy_helper  # python3-onnx


def randomise(model, seed):
    """Random weights everywhere, including the ones torch initialises to constants
    (norm scales and shifts, running statistics), so no two initializers coincide."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in list(model.named_parameters()) + list(model.named_buffers()):
            if not p.dtype.is_floating_point:
                continue
            if name.endswith("running_var"):
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
            elif name.endswith("running_mean"):
                p.copy_((torch.rand(p.shape, generator=g) - 0.5) * 0.2)
            elif p.dim() <= 1:  # norm weights/biases and biases
                base = 1.0 if name.endswith("weight") else 0.0
                p.copy_(base + (torch.rand(p.shape, generator=g) - 0.5) * 0.2)
            else:
                fan_in = p[0].numel()
                p.copy_((torch.rand(p.shape, generator=g) * 2 - 1) * (3.0 / fan_in) ** 0.5)
    return model.eval()


class CSRNet(nn.Module):
    """CSRNet: VGG-16's first ten convs (three max-pools) + six 3x3 dilation-2 convs."""

    def __init__(self):
        super().__init__()
        layers, c = [], 3
        for v in [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512]:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(c, v, 3, padding=1), nn.ReLU(inplace=True)]
                c = v
        self.frontend = nn.Sequential(*layers)
        back = []
        for v in [512, 512, 512, 256, 128, 64]:
            back += [nn.Conv2d(c, v, 3, padding=2, dilation=2), nn.ReLU(inplace=True)]
            c = v
        self.backend = nn.Sequential(*back)
        self.output_layer = nn.Conv2d(64, 1, 1)

    def forward(self, x):
        return self.output_layer(self.backend(self.frontend(x)))


class BertLayer(nn.Module):
    """One BERT-base encoder layer written out op by op (Q/K/V projections, 12 heads of 64,
    softmax(QK^T/8)V, output projection, residual + LayerNorm, GELU FFN 768->3072->768)."""

    def __init__(self, d=768, heads=12, ff=3072):
        super().__init__()
        self.h, self.dk = heads, d // heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x):
        b, s, d = x.shape
        split = lambda t: t.view(b, s, self.h, self.dk).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        att = torch.softmax(q @ k.transpose(-1, -2) / self.dk ** 0.5, dim=-1)
        ctx = (att @ v).transpose(1, 2).reshape(b, s, d)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.ff2(torch.nn.functional.gelu(self.ff1(x))))


class BertHand(nn.Module):
    def __init__(self, layers=12):
        super().__init__()
        self.layers = nn.ModuleList(BertLayer() for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class CSRNetBackend(nn.Module):
    """The paper artifact's CSRNet back end: six 3x3 dilation-2 convs (512, 512, 512, 256, 128,
    64 channels), pad 2, ReLU after each, no bias, on N x 512 x 14 x 14."""

    def __init__(self):
        super().__init__()
        layers, c = [], 512
        for v in [512, 512, 512, 256, 128, 64]:
            layers += [nn.Conv2d(c, v, 3, padding=2, dilation=2, bias=False), nn.ReLU()]
            c = v
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return self.body(x)


class BertSimpleLayer(nn.Module):
    """The paper artifact's simplified BERT layer: Q/K/V 768->768 without bias, 12 heads of 64,
    softmax(QK^T)V, two 768->768 ReLU FFN layers, residual add."""

    def __init__(self, d=768, heads=12):
        super().__init__()
        self.h, self.dk = heads, d // heads
        self.q, self.k, self.v = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.f1, self.f2 = nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x):
        b, s, d = x.shape
        split = lambda t: t.view(b, s, self.h, self.dk).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        ctx = (torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v).transpose(1, 2).reshape(b, s, d)
        return x + torch.relu(self.f2(torch.relu(self.f1(ctx))))


class BertSimple(nn.Module):
    def __init__(self, layers=12):
        super().__init__()
        self.layers = nn.ModuleList(BertSimpleLayer() for _ in range(layers))

    def condition(self):
        """The layer has no normalisation and no 1/sqrt(d_k): with uniform random weights its
        attention logits grow to saturate the softmax within a few layers, and the output then
        depends chaotically on rounding (ONNX Runtime 1.6 and pet's reference 3.4 away from
        PyTorch, max 43). Query weights scaled by 1/8 (= 1/sqrt(64)) and the FFN's by 1/2 keep
        it well-conditioned; the structure is the artifact's."""
        with torch.no_grad():
            for layer in self.layers:
                layer.q.weight.mul_(0.125)
                layer.f2.weight.mul_(0.5)
        return self

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def bert_torch(layers=12):
    layer = nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, activation="gelu", batch_first=True)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


class SegmentationOut(nn.Module):
    """torchvision's segmentation models return {"out": ...}: the tensor alone."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def deeplabv3_mnv3():
    """DeepLabV3 on MobileNetV3-Large (HardSwish, squeeze-excitation, dilated depthwise convs,
    a 16x bilinear upsampling to the input's size: pet crashed on it once)."""
    return SegmentationOut(torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None,
                                                                                         aux_loss=False))


def vit_small():
    """torchvision's VisionTransformer, small: its export builds the class token's expand from
    Shape, ConstantOfShape, Equal and Where (pet once refused ConstantOfShape)."""
    return torchvision.models.VisionTransformer(image_size=64, patch_size=16, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128)


MODELS = {
    # name: (constructor, input shape, opset)
    "resnet18": (lambda: torchvision.models.resnet18(), (1, 3, 224, 224), 13),
    "inception_v3": (lambda: torchvision.models.inception_v3(aux_logits=False, init_weights=False), (1, 3, 299, 299), 13),
    "r3d_18": (lambda: torchvision.models.video.r3d_18(), (1, 3, 16, 112, 112), 13),
    "csrnet": (CSRNet, (1, 3, 224, 224), 13),
    "bert_hand_op13": (BertHand, (1, 128, 768), 13),
    "bert_hand_op17": (BertHand, (1, 128, 768), 17),
    "bert_torch_op13": (bert_torch, (1, 128, 768), 13),
    "bert_torch_op17": (bert_torch, (1, 128, 768), 17),
    # The paper artifact's shapes (experiments/optimize_models.py; not exported by default).
    "csrnet_backend": (CSRNetBackend, (1, 512, 14, 14), 13),
    "bert_simple": (BertSimple, (1, 512, 768), 13),
    "inception_v3_330": (lambda: torchvision.models.inception_v3(aux_logits=False, init_weights=False), (1, 3, 330, 330), 13),
    # Models beyond the paper's, for what importing and running them exercises.
    "deeplabv3_mnv3": (deeplabv3_mnv3, (1, 3, 224, 224), 17),
    "vit_small": (vit_small, (1, 3, 64, 64), 17),
}
DEFAULT = ["resnet18", "inception_v3", "r3d_18", "csrnet", "bert_hand_op13", "bert_hand_op17", "bert_torch_op13", "bert_torch_op17",
           "deeplabv3_mnv3", "vit_small"]


def save_pb(t, path, name):
    proto = numpy_helper.from_array(t.detach().numpy(), name)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def build(ctor, seed):
    """The model with its seeded random weights (the same weights on every call)."""
    torch.manual_seed(seed)
    model = randomise(ctor(), seed)
    return model.condition() if hasattr(model, "condition") else model


def export(name, out_dir, seed):
    ctor, shape, opset = MODELS[name]
    d = os.path.join(out_dir, name)
    if os.path.exists(os.path.join(d, "test_data_set_0", "output_0.pb")):
        print(f"{name}: exists", file=sys.stderr)
        return
    t0 = time.time()
    model = build(ctor, seed)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed + 1))
    with torch.no_grad():
        y = model(x)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    path = os.path.join(d, "model.onnx")
    # Exported with grad enabled on purpose: nn.TransformerEncoderLayer's inference fast path
    # (aten::_transformer_encoder_layer_fwd, no ONNX form) is skipped when weights need grad.
    # PyTorch 2.9 and later export through torch.export (dynamo) by default, which ignores
    # opset_version below 18 and writes other graphs; the TorchScript exporter is the one these
    # models were made with (Debian's PyTorch 1.13 has no other).
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    axes = {"input": {0: "batch"}, "output": {0: "batch"}}
    try:
        torch.onnx.export(model, x, path, opset_version=opset, input_names=["input"], output_names=["output"], dynamic_axes=axes,
                          do_constant_folding=True, **legacy)
    except Exception as e:  # a PyTorch whose TorchScript exporter is gone: torch.export's, at opset 18 at least
        if not legacy:
            raise
        print(f"{name}: the TorchScript exporter failed ({type(e).__name__}: {e}); exporting through torch.export", file=sys.stderr)
        torch.onnx.export(model, (x,), path, opset_version=max(opset, 18), input_names=["input"], output_names=["output"], dynamic_axes=axes,
                          dynamo=True, **({"external_data": False} if "external_data" in inspect.signature(torch.onnx.export).parameters else {}))
    save_pb(x, os.path.join(d, "test_data_set_0", "input_0.pb"), "input")
    save_pb(y, os.path.join(d, "test_data_set_0", "output_0.pb"), "output")
    size = os.path.getsize(path) / 1e6
    print(f"{name}: exported {size:.1f} MB in {time.time() - t0:.1f} s", file=sys.stderr)


def load_pb(path):
    import onnx
    return torch.from_numpy(numpy_helper.to_array(onnx.load_tensor(path)).copy())


def export_batch(name, out_dir, seed, batch):
    """PyTorch's output on a batch-`batch` input, from the exported model's own weights."""
    ctor, shape, _ = MODELS[name]
    d = os.path.join(out_dir, name)
    t = os.path.join(d, f"test_data_set_b{batch}")
    if os.path.exists(os.path.join(t, "output_0.pb")):
        print(f"{name}: batch {batch} data exists", file=sys.stderr)
        return
    t0 = time.time()
    model = build(ctor, seed)
    x1, y1 = load_pb(os.path.join(d, "test_data_set_0", "input_0.pb")), load_pb(os.path.join(d, "test_data_set_0", "output_0.pb"))
    with torch.no_grad():
        err = (model(x1) - y1).abs().max().item()
        if err > 1e-4 * (1 + y1.abs().max().item()):
            sys.exit(f"{name}: the rebuilt model is not the exported one (batch-1 output differs by {err:g}); re-export it")
        x = torch.randn(batch, *shape[1:], generator=torch.Generator().manual_seed(seed + 2))
        y = model(x)
    os.makedirs(t, exist_ok=True)
    save_pb(x, os.path.join(t, "input_0.pb"), "input")
    save_pb(y, os.path.join(t, "output_0.pb"), "output")
    print(f"{name}: batch {batch} data in {time.time() - t0:.1f} s", file=sys.stderr)


def main():
    args = sys.argv[1:]
    batch = 1
    if "--batch" in args:
        i = args.index("--batch")
        try:
            batch = int(args[i + 1])
        except (IndexError, ValueError):
            sys.exit("--batch needs a positive count")
        if batch < 1:
            sys.exit("--batch needs a positive count")
        del args[i:i + 2]
    if not args:
        print(__doc__)
        sys.exit(2)
    out = args[0]
    names = args[1:] or DEFAULT
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    for n in names:
        if n not in MODELS:
            sys.exit(f"unknown model '{n}' (known: {', '.join(MODELS)})")
        export(n, out, 1000 + 17 * list(MODELS).index(n))
        if batch > 1:
            export_batch(n, out, 1000 + 17 * list(MODELS).index(n), batch)


if __name__ == "__main__":
    main()
