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
# Every step's time limit is cut to what is left of PET_GPU_DEADLINE (seconds, default 420):
# the script ends inside it whatever a step does.
DEADLINE=${PET_GPU_DEADLINE:-420}
since() { echo $(( $(date +%s) - t0 )); }
left() { local l=$(( DEADLINE - $(since) )); echo $(( l > 0 ? l : 0 )); }
cap() { local l; l=$(left); echo $(( $1 < l ? $1 : l )); }
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
# Models, optimized files and reports stay outside $OUT (the device tool brings back at most 8
# files of at most 16 MB); the reports come back packed.
WORK=${PET_GPU_WORK:-/tmp/pet-gpu-work}
mkdir -p "$WORK"

step "device (deadline ${DEADLINE} s)"
nvidia-smi -L || echo "(no nvidia-smi)"
step "pet's CUDA tests"
bin() { if [ -x "$BUNDLE/$1" ]; then echo "$BUNDLE/$1"; else echo "$BUNDLE/tests/$1"; fi; }
timeout "$(cap 60)" "$(bin test_cuda_host)" | tail -3
if ! timeout "$(cap 150)" "$(bin test_cuda)" 2>&1 | tee "$OUT/test_cuda.txt" | tail -40; then echo "test_cuda FAILED"; fi
if ! grep -q "test cases" "$OUT/test_cuda.txt" || grep -q "skipped: no CUDA device" "$OUT/test_cuda.txt"; then
  echo "no CUDA device here: stopping before the first GPU timing (dry run ends here)"
  "$PET" run models/tiny_cnn.onnx --backend cuda; echo "pet run --backend cuda: exit $?"
  exit 0
fi

# pet's own kernels under compute-sanitizer's memcheck (out-of-bounds and misaligned accesses,
# launch errors), where the machine's runtime lets it read the GPU (Firecracker; not gVisor)
if command -v compute-sanitizer >/dev/null; then
  step "pet's kernels under compute-sanitizer memcheck"
  timeout "$(cap 60)" compute-sanitizer --tool memcheck --error-exitcode 9 "$(bin test_cuda)" -tc='*pet*kernels*' > "$OUT/memcheck.txt" 2>&1
  echo "memcheck exit: $? (0 clean, 9 errors found: see memcheck.txt, 124 stopped at its time)"; tail -4 "$OUT/memcheck.txt"
fi

step "differential test on cuda: random programs against the reference"
timeout "$(cap ${PET_GPU_DIFFTEST_S:-60})" "$(bin difftest)" run --backend cuda --count 400 --seed 3 --workers 4 --max-shrink 3 --timeout 60 \
  --out "$OUT/difftest_cuda" --json "$OUT/difftest_cuda.json" 2>&1 | tail -15
echo "difftest exit: ${PIPESTATUS[0]} (0 all agree, 1 failures: see $OUT/difftest_cuda, 124 stopped at its time)"
(cd "$OUT" && tar czf difftest_cuda.tgz difftest_cuda 2>/dev/null && rm -rf difftest_cuda)

step "models (PyTorch $("$PY" -c 'import torch; print(torch.__version__)'))"
MODELS=${PET_GPU_MODELS:-resnet18 csrnet inception_v3 r3d_18 bert_hand_op17}
timeout "$(cap 150)" "$PY" models/export_models.py "$WORK/models" --batch 16 $MODELS || echo "export stopped"

# pet: the original and `pet optimize --backend cuda`'s program, each checked against
# PyTorch's output on the exported inputs, then timed (20 runs after a warm-up, CUDA events).
for b in 1 16; do
  for m in $MODELS; do
    f=$WORK/models/$m/model.onnx
    data=$WORK/models/$m/test_data_set_0; [ $b = 16 ] && data=$WORK/models/$m/test_data_set_b16
    [ -f "$f" ] && [ -d "$data" ] || continue
    [ "$(left)" -lt 30 ] && { echo "time budget reached before $m batch $b"; break 2; }
    step "$m batch $b"
    o=$WORK/$m-b$b.pet.onnx
    timeout "$(cap 60)" "$PET" optimize "$f" -o "$o" --backend cuda --dim batch=$b --budget "${PET_GPU_SEARCH_S:-10}" --json "$WORK/$m-b$b.optimize.json" --quiet
    echo "optimize exit $?"
    for which in original optimized; do
      src=$f; [ $which = optimized ] && src=$o
      [ -f "$src" ] || { echo "$m,$b,pet-cuda-$which,,no file" >> "$CSV"; continue; }
      rm -f "$WORK/run.json"
      timeout "$(cap 40)" "$PET" run "$src" --backend cuda --inputs "$data" --check "$data" --repeat 20 --json "$WORK/$m-b$b-$which.run.json" | grep -E "check|median"
      line=$("$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); print(f"{j[\"median_ms\"]:.3f},check {j[\"check\"]} max err " + " ".join(f"{e[\"max_abs_err\"]:.3g}/{e[\"max_abs_ref\"]:.3g}" for e in j.get("errors", [])))' "$WORK/$m-b$b-$which.run.json" 2>/dev/null)
      echo "$m,$b,pet-cuda-$which,${line:-,failed}" | tee -a "$CSV"
    done
  done
done
(cd "$WORK" && tar czf "$OUT/reports.tgz" ./*.json 2>/dev/null)

step "PyTorch eager and torch.compile, ONNX Runtime's CUDA provider (one process, until the deadline)"
timeout "$(cap 200)" "$PY" - "$WORK/models" "$(left)" $MODELS >> "$CSV" <<'PYEOF' || echo "peers stopped" 
import os, sys, time
import numpy as np, torch
sys.path.insert(0, "models")
import export_models as em
root, budget, names = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
t_end = time.time() + budget - 5
torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
def med(f, n=20):
    with torch.no_grad():
        for _ in range(3): f()
        torch.cuda.synchronize()
        ts = []
        for _ in range(n):
            t = time.perf_counter(); f(); torch.cuda.synchronize(); ts.append((time.perf_counter() - t) * 1e3)
    return sorted(ts)[n // 2]
def out(*a):
    print(",".join(str(x) for x in a), flush=True)
try:
    import onnxruntime as ort
    has_ort = "CUDAExecutionProvider" in ort.get_available_providers()
except ImportError:
    has_ort = False
for name in names:
    if not os.path.exists(os.path.join(root, name, "model.onnx")):
        continue
    ctor, shape, _ = em.MODELS[name]
    model = em.build(ctor, 1000 + 17 * list(em.MODELS).index(name)).cuda().eval()
    for batch in (1, 16):
        if time.time() > t_end: sys.exit(0)
        x = torch.randn(batch, *shape[1:], device="cuda")
        out(name, batch, "torch-eager", f"{med(lambda: model(x)):.3f}", "fp32 no TF32")
        if not has_ort:
            out(name, batch, "onnxruntime-cuda", "", "no CUDA provider in this onnxruntime")
        else:
            s = ort.InferenceSession(os.path.join(root, name, "model.onnx"), providers=["CUDAExecutionProvider"])
            i = s.get_inputs()[0]
            xn = x.cpu().numpy()
            for _ in range(3): s.run(None, {i.name: xn})
            ts = []
            for _ in range(20):
                t = time.perf_counter(); s.run(None, {i.name: xn}); ts.append((time.perf_counter() - t) * 1e3)
            out(name, batch, "onnxruntime-cuda", f"{sorted(ts)[10]:.3f}", "host-to-device copies included")
    if time.time() + 60 < t_end:
        try:
            c = torch.compile(model)
            for batch in (1, 16):
                x = torch.randn(batch, *shape[1:], device="cuda")
                out(name, batch, "torch-compile", f"{med(lambda: c(x)):.3f}", "fp32 no TF32")
        except Exception as e:
            out(name, 1, "torch-compile", "", type(e).__name__)
    del model
    torch.cuda.empty_cache()
PYEOF
step "done"
cat "$CSV"
