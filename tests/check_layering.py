#!/usr/bin/env python3
"""Checks that pet's libraries follow the folders (docs/architecture.md): every #include of a pet header
goes to the same layer or one below it, and third-party engines (oneDNN, CUDA, protobuf/ONNX,
Z3) appear only where they belong. Exit 1 with the offending lines.

usage: check_layering.py REPO_ROOT
"""
import pathlib
import re
import sys

# layer -> layers it may include (itself included)
ALLOWED = {
    "core": {"core"},
    "ir": {"core", "ir"},
    "eval": {"core", "ir", "eval"},
    "transform": {"core", "ir", "eval", "transform"},
    "verify": {"core", "ir", "eval", "verify"},
    "mutate": {"core", "ir", "eval", "verify", "transform", "mutate"},
    "backend": {"core", "ir", "eval", "transform", "backend"},
    "optimize": {"core", "ir", "eval", "transform", "verify", "mutate", "backend", "optimize"},
    "onnx": {"core", "ir", "eval", "onnx"},  # the importer folds shape arithmetic with the interpreter
}
# where engines may be included (path prefixes relative to the repository root)
ENGINES = {
    r"<dnnl": ("kernels/cpu/", "bench/", "tests/test_cpu"),
    r"<(cuda|cudnn|cublas)": ("kernels/cuda/",),
    r"<(onnx/|google/protobuf)": ("src/onnx/", "tests/test_onnx", "tests/onnx_node_suite", "tests/fuzz_import", "tests/onnx_testing"),
    r"<z3": ("verify/",),
}


def layer_of(rel):
    p = rel.parts
    if p[0] == "include" and len(p) > 2 and p[1] == "pet":
        return p[2]
    if p[0] == "src" and len(p) > 1:
        return p[1]
    if p[0] == "kernels":
        return "backend"
    return None


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    bad = []
    files = [f for d in ("include", "src", "kernels", "tools", "tests", "verify", "bench", "experiments")
             for f in (root / d).rglob("*") if f.suffix in (".hpp", ".cpp", ".h", ".cu", ".cuh")]
    for f in files:
        rel = f.relative_to(root)
        layer = layer_of(rel)
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            m = re.match(r'\s*#\s*include\s+"pet/(\w+)/', line)
            if m and layer in ALLOWED and m.group(1) not in ALLOWED[layer]:
                bad.append(f"{rel}:{n}: layer '{layer}' includes '{m.group(1)}' ({line.strip()})")
            for pat, where in ENGINES.items():
                if re.match(r"\s*#\s*include\s+" + pat, line) and not str(rel).startswith(where):
                    bad.append(f"{rel}:{n}: {line.strip()} outside {', '.join(where)}")
            if re.match(r'\s*#\s*include\s+"\.\./', line):
                bad.append(f"{rel}:{n}: relative include across folders ({line.strip()})")
    for b in bad:
        print(b)
    print(f"check_layering: {len(files)} files, {len(bad)} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
