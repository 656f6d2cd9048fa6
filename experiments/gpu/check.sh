#!/usr/bin/env bash
# The cuda backend's device check, in two halves (issue 13; see README "CUDA backend").
#
#   bash experiments/gpu/check.sh --prepare      here (no GPU needed): builds a GPU bundle in
#                                                .gpu-bundle/ (pet and test_cuda without
#                                                -march=native and without oneDNN, so it runs
#                                                on any x86-64 CPU and stays small, plus the
#                                                shared libraries they need that the device
#                                                image lacks)
#   bash experiments/gpu/check.sh                on the device machine (its image has nvcc,
#                                                PyTorch with CUDA, onnx and onnxruntime, but
#                                                none of Debian's -dev packages), with
#                                                .gpu-bundle carried: runs the CUDA tests,
#                                                exports the five models with that PyTorch,
#                                                times original vs `pet optimize --backend
#                                                cuda` on pet's cuda backend at batch 1 and
#                                                16, PyTorch eager and torch.compile, and ONNX
#                                                Runtime's CUDA provider where it loads; writes
#                                                $OUT/gpu_check.csv and $OUT/gpu_check.log.
#
# Everything is bounded to fit 8 minutes (budgets per step; a step past its time is stopped
# and recorded). Without a GPU the device half stops at its first GPU call with the reason
# (that is the dry run: `bash experiments/gpu/check.sh --dry-run` here).
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
BUNDLE=${PET_GPU_BUNDLE:-$ROOT/.gpu-bundle}
OUT=${OUT:-$ROOT/build/gpu-check}
mode=${1:-device}

if [ "$mode" = --prepare ]; then
  set -e
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DPET_NATIVE=OFF -DPET_WITH_DNNL=OFF -DPET_WITH_CUDA=ON \
        -DPET_WITH_Z3=OFF -DPET_FUZZ_SANITIZE=OFF -DPET_BUILD_BENCH=OFF -DCMAKE_CUDA_RUNTIME_LIBRARY=Static
  cmake --build build-gpu -j"${PET_JOBS:-2}" --target pet test_cuda test_cuda_host difftest
  rm -rf "$BUNDLE" && mkdir -p "$BUNDLE/lib"
  cp build-gpu/pet build-gpu/libpet_cuda.so build-gpu/tests/test_cuda build-gpu/tests/test_cuda_host build-gpu/tests/difftest "$BUNDLE/"
  # the shared libraries that are neither the C library's nor CUDA's (the device has those)
  ldd "$BUNDLE/pet" "$BUNDLE/libpet_cuda.so" "$BUNDLE/test_cuda" "$BUNDLE/difftest" | awk '/=> \//{print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux|libstdc\+\+|libgcc_s)[.-]|/libcu(dnn|blas|blasLt|dart)[._-]|/libnv' |
    xargs -r cp -L -t "$BUNDLE/lib/"
  du -sh "$BUNDLE"
  # the device tool carries at most 64 MiB with the working tree (libcublasLt alone is 540 MB)
  size_mb=$(du -sm "$BUNDLE" | cut -f1)
  [ "$size_mb" -le 60 ] || { echo "the bundle is ${size_mb} MB, over what the device tool carries (64 MiB): see which library in $BUNDLE/lib should come from the device's CUDA"; exit 1; }
  echo "prepared $BUNDLE; on the device: bash experiments/gpu/check.sh (carry .gpu-bundle)"
  exit 0
fi

mkdir -p "$OUT"
LOG=$OUT/gpu_check.log
CSV=$OUT/gpu_check.csv
exec > >(tee -a "$LOG") 2>&1
t0=$(date +%s)
since() { echo $(( $(date +%s) - t0 )); }
step() { echo "== [$(since) s] $*"; }
if [ "$mode" = --dry-run ]; then BUNDLE=${PET_GPU_BUNDLE:-$ROOT/build}; fi
PET=$BUNDLE/pet
[ -x "$PET" ] || { echo "no pet in $BUNDLE: run 'bash experiments/gpu/check.sh --prepare' first (and carry .gpu-bundle)"; exit 2; }
# CUDA libraries: the toolkit's, else the ones PyTorch's wheels bring.
PY=$(command -v python3)
for d in /usr/local/cuda/lib64 $("$PY" -c 'import nvidia, os; p = os.path.dirname(nvidia.__path__[0]); print(" ".join(os.path.join(r, "lib") for r, _, _ in os.walk(p + "/nvidia") if r.count("/") == p.count("/") + 2))' 2>/dev/null); do
  [ -d "$d" ] && LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done
export LD_LIBRARY_PATH="$BUNDLE/lib:${LD_LIBRARY_PATH:-}"
echo "model,batch,runtime,median_ms,note" > "$CSV"

step "device"
nvidia-smi -L || echo "(no nvidia-smi)"
step "pet's CUDA tests"
bin() { if [ -x "$BUNDLE/$1" ]; then echo "$BUNDLE/$1"; else echo "$BUNDLE/tests/$1"; fi; }
timeout 120 "$(bin test_cuda_host)" | tail -3
if ! timeout 180 "$(bin test_cuda)" -s 2>&1 | tee "$OUT/test_cuda.txt" | tail -5; then echo "test_cuda FAILED"; fi
if ! grep -q "test cases" "$OUT/test_cuda.txt" || grep -q "skipped: no CUDA device" "$OUT/test_cuda.txt"; then
  echo "no CUDA device here: stopping before the first GPU timing (dry run ends here)"
  "$PET" run models/tiny_cnn.onnx --backend cuda; echo "pet run --backend cuda: exit $?"
  exit 0
fi

step "differential test on cuda: random programs against the reference (90 s at most)"
timeout 90 "$(bin difftest)" run --backend cuda --count 400 --seed 3 --workers 4 --max-shrink 3 --timeout 60 \
  --out "$OUT/difftest_cuda" --json "$OUT/difftest_cuda.json" 2>&1 | tail -15
echo "difftest exit: ${PIPESTATUS[0]} (0 all agree, 1 failures: see $OUT/difftest_cuda, 124 stopped at 90 s)"

step "models (PyTorch $("$PY" -c 'import torch; print(torch.__version__)'))"
MODELS=${PET_GPU_MODELS:-resnet18 csrnet inception_v3 r3d_18 bert_hand_op17}
timeout 150 "$PY" models/export_models.py "$OUT/models" $MODELS || echo "export stopped"

for m in $MODELS; do
  f=$OUT/models/$m/model.onnx
  [ -f "$f" ] || continue
  for b in 1 16; do
    [ "$(since)" -gt 420 ] && { echo "time budget reached"; break 2; }
    step "$m batch $b"
    o=$OUT/$m-b$b.pet.onnx
    if timeout 60 "$PET" optimize "$f" -o "$o" --backend cuda --dim batch=$b --budget 30 --json "$OUT/$m-b$b.json" --quiet; then
      for which in original optimized; do
        src=$f; [ $which = optimized ] && src=$o
        ms=$(timeout 30 "$PET" run "$src" --backend cuda --dim batch=$b --repeat 20 --json "$OUT/run.json" >/dev/null 2>&1 &&
             "$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["median_ms"])' "$OUT/run.json" 2>/dev/null)
        echo "$m,$b,pet-cuda-$which,${ms:-},"
        echo "$m,$b,pet-cuda-$which,${ms:-}," >> "$CSV"
      done
    else
      echo "$m,$b,pet-cuda,,optimize failed or timed out" >> "$CSV"
    fi
    timeout 60 "$PY" - "$f" "$b" "$m" >> "$CSV" <<'PYEOF' || echo "$m,$b,torch,,failed" >> "$CSV"
import sys, time, onnx, torch
from onnx import numpy_helper
path, batch, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sys.path.insert(0, "models")
import export_models as em
ctor, shape, _ = em.MODELS[name]
model = em.randomise(ctor(), 0).cuda().eval()
x = torch.randn(batch, *shape[1:], device="cuda")
def med(f, n=20):
    with torch.no_grad():
        for _ in range(3): f()
        torch.cuda.synchronize()
        ts = []
        for _ in range(n):
            t = time.perf_counter(); f(); torch.cuda.synchronize(); ts.append((time.perf_counter() - t) * 1e3)
    return sorted(ts)[n // 2]
print(f"{name},{batch},torch-eager,{med(lambda: model(x)):.3f},")
try:
    c = torch.compile(model)
    print(f"{name},{batch},torch-compile,{med(lambda: c(x)):.3f},")
except Exception as e:
    print(f"{name},{batch},torch-compile,,{type(e).__name__}")
PYEOF
    timeout 60 "$PY" - "$f" "$b" "$m" >> "$CSV" <<'PYEOF' || echo "$m,$b,onnxruntime-cuda,,failed" >> "$CSV"
import sys, time, numpy as np, onnxruntime as ort
path, batch, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if "CUDAExecutionProvider" not in ort.get_available_providers():
    print(f"{name},{batch},onnxruntime-cuda,,no CUDA provider in this onnxruntime"); sys.exit(0)
s = ort.InferenceSession(path, providers=["CUDAExecutionProvider"])
i = s.get_inputs()[0]
x = np.random.rand(batch, *i.shape[1:]).astype(np.float32)
for _ in range(3): s.run(None, {i.name: x})
ts = []
for _ in range(20):
    t = time.perf_counter(); s.run(None, {i.name: x}); ts.append((time.perf_counter() - t) * 1e3)
print(f"{name},{batch},onnxruntime-cuda,{sorted(ts)[10]:.3f},")
PYEOF
  done
done
step "done"
cat "$CSV"
