#!/usr/bin/env bash
# End-to-end checks of the `pet` command: exit codes and messages for good and bad input.
# Usage: cli_test.sh PET_BINARY SOURCE_DIR LAB_PAIRS_BINARY
set -u
PET=$1
SRC=$2
LAB_PAIRS=$3
TMP=$(mktemp -d)
export XDG_CACHE_HOME="$TMP/cache"  # the profiler cache of this test only
trap 'rm -rf "$TMP"' EXIT
fails=0
model="$SRC/models/tiny_cnn.onnx"

# expect CODE PATTERN -- command...: runs the command, checks its exit code and that its
# output (stdout+stderr) matches the extended regex PATTERN.
expect() {
  local code=$1 pattern=$2
  shift 3
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$code" ] || ! grep -Eq -- "$pattern" <<<"$out"; then
    echo "FAIL: $* -> exit $rc (expected $code), output:"
    echo "$out" | head -20
    echo "  (expected pattern: $pattern)"
    fails=$((fails + 1))
  else
    echo "ok:   $*"
  fi
}

expect 2 "usage: pet <command>" -- "$PET"
expect 0 "info MODEL.onnx" -- "$PET" --help
expect 2 "unknown command 'frobnicate'" -- "$PET" frobnicate
expect 0 "multilinear subprograms \(cut at non-linear ops\): 3" -- "$PET" info "$model"
expect 0 "float32\[4,3,16,16\]" -- "$PET" info "$model" --dim N=4
expect 2 "$TMP/none.onnx: no such model file" -- "$PET" info "$TMP/none.onnx"
printf 'this is not a model' > "$TMP/garbage.onnx"
expect 2 "garbage.onnx: not a valid ONNX model" -- "$PET" run "$TMP/garbage.onnx"
head -c 3000 "$model" > "$TMP/truncated.onnx"
expect 2 "truncated.onnx: not a valid ONNX model" -- "$PET" run "$TMP/truncated.onnx"
# Same-length byte edit: the Softmax node becomes an unknown op.
LC_ALL=C sed 's/Softmax/Softmix/g' "$model" > "$TMP/unknown_op.onnx"
expect 3 "node 'softmax' \(Softmix, opset 13\): op 'Softmix' is not supported" -- "$PET" run "$TMP/unknown_op.onnx"
expect 2 "node 'conv1' \(Conv, opset 13\): input has 4 channels but weight expects 3" -- "$PET" run "$model" --shape x=1x4x16x16
expect 2 "'1x3xfoo' is not a list of non-negative sizes" -- "$PET" run "$model" --shape x=1x3xfoo
expect 0 "on cpu: median" -- "$PET" run "$model" --backend cpu --threads 1
expect 0 "oneDNN conv" -- "$PET" run "$model" --backend cpu --plan
# cuda: runs where a GPU is; elsewhere a clear refusal (not built, or built with no device).
expect 2 "TF32 \(--tf32\) is an option of the cuda backend only, not of 'cpu'" -- "$PET" run "$model" --backend cpu --tf32
if nvidia-smi -L >/dev/null 2>&1; then
  expect 0 "on cuda: median" -- "$PET" run "$model" --backend cuda
  expect 0 "on cuda: median" -- "$PET" run "$model" --backend cuda --tf32
else
  expect 3 "backend 'cuda' is not in this build|no CUDA device \\(.*\\); run on a machine with an NVIDIA GPU, or use --backend cpu" -- "$PET" run "$model" --backend cuda
  expect 3 "backend 'cuda' is not in this build|no CUDA device \\(.*\\); run on a machine with an NVIDIA GPU, or use --backend cpu" -- "$PET" optimize "$model" -o "$TMP/cuda.onnx" --backend cuda
  test ! -e "$TMP/cuda.onnx" || { echo "FAIL: pet optimize --backend cuda without a device wrote $TMP/cuda.onnx"; exit 1; }
fi
expect 0 "pet imports [0-9]+ ONNX op types" -- "$PET" ops
expect 0 " DeformConv DepthToSpace( |$)" -- "$PET" ops
expect 0 " BitShift BitwiseAnd BitwiseNot BitwiseOr BitwiseXor " -- "$PET" ops
expect 0 "" -- "$PET" ops --json "$TMP/ops.json" --quiet
grep -q '"DeformConv"' "$TMP/ops.json" || { echo "FAIL: pet ops --json does not list DeformConv"; fails=$((fails + 1)); }
expect 2 "unexpected argument .extra.; usage: pet ops \[options\]" -- "$PET" ops extra
expect 2 "unknown backend 'gpu'" -- "$PET" run "$model" --backend gpu
expect 2 "unknown option '--frob' for 'pet run'" -- "$PET" run "$model" --frob
expect 2 "option '--repeat' needs a value" -- "$PET" run "$model" --repeat
expect 2 "--repeat needs a positive count" -- "$PET" run "$model" --repeat 0
expect 2 "test-data folder '$TMP/nodir' does not exist" -- "$PET" run "$model" --inputs "$TMP/nodir"
# Help and options come from one table per command.
for c in info run verify mutate; do expect 0 "usage: pet $c" -- "$PET" $c --help; done
expect 0 "--conv-layout auto\|blocked\|plain" -- "$PET" run --help
expect 0 "--no-int8 +cpu: run a quantized model's convs and matrix products in float" -- "$PET" run --help
expect 0 "--time-budget SECONDS" -- "$PET" mutate --help
expect 0 "layer-norm-canonicalization" -- "$PET" run --list-passes
expect 2 "--disable-pass: no pass named 'bogus'" -- "$PET" run "$model" --disable-pass bogus
expect 0 "// after bn-folding" -- "$PET" run "$model" --print-after bn-folding
expect 0 "on cpu: median" -- "$PET" run "$model" --disable-pass bn-folding,pad-folding,constant-folding
expect 2 "option '--rtol' needs a number, got 'abc'" -- "$PET" run "$model" --rtol abc
expect 2 "option '--time-budget' needs a number, got 'abc'" -- "$PET" mutate "$model" --out-dir "$TMP/m" --time-budget abc

# Save a run's inputs and outputs, then check against them (pass), then against altered
# references (fail, exit 1).
expect 0 "median" -- "$PET" run "$model" --dim N=2 --save "$TMP/data" --seed 5
expect 0 "check probs +pass" -- "$PET" run "$model" --check "$TMP/data" --repeat 3 --json "$TMP/run.json"
for key in '"model"' '"backend": "cpu"' '"median_ms"' '"min_ms"' '"runs": 3' '"outputs"' '"check": "pass"'; do
  if ! grep -q -- "$key" "$TMP/run.json"; then echo "FAIL: run.json lacks $key"; fails=$((fails + 1)); fi
done
cp "$TMP/data/input_0.pb" "$TMP/data/output_0.pb"
expect 1 "check probs +FAIL: shape \[2,10\] differs from the reference.s \[2,3,16,16\]" -- "$PET" run "$model" --check "$TMP/data"
mkdir -p "$TMP/wrong"
cp "$TMP/data/input_0.pb" "$TMP/wrong/input_0.pb"
"$PET" run "$model" --dim N=2 --save "$TMP/other" --seed 6 >/dev/null
cp "$TMP/other/output_0.pb" "$TMP/wrong/output_0.pb"
expect 1 "check probs +FAIL" -- "$PET" run "$model" --check "$TMP/wrong"
"$PET" info "$model" --json "$TMP/info.json" --quiet
for key in '"flops"' '"parameters"' '"multilinear_subprograms"' '"op_counts"'; do
  if ! grep -q -- "$key" "$TMP/info.json"; then echo "FAIL: info.json lacks $key"; fails=$((fails + 1)); fi
done

# pet verify on the lab's known pairs (written as ONNX files).
"$LAB_PAIRS" "$TMP/pairs" > /dev/null
P="$TMP/pairs"
expect 0 "verdict: partially_equivalent" -- "$PET" verify "$P/conv-batch-to-width.original.onnx" "$P/conv-batch-to-width.mutant.onnx" --json "$TMP/v.json"
for key in '"verdict": "partially_equivalent"' '"boxes_checked": 18' '"positions_tested"' '"tests": 2' '"prime": 2147483647' '"correction"' '"lo"' '"hi"' '"seconds"'; do
  if ! grep -q -- "$key" "$TMP/v.json"; then echo "FAIL: verify json lacks $key"; fails=$((fails + 1)); fi
done
expect 0 "correction region: 2 boxes, 40 of 240 elements" -- "$PET" verify "$P/conv-batch-to-width.original.onnx" "$P/conv-batch-to-width.mutant.onnx" --tests 3 --prime 8191
expect 0 "verdict: equivalent" -- "$PET" verify "$P/matmuls-to-batched.original.onnx" "$P/matmuls-to-batched.mutant.onnx"
expect 0 "verdict: not_equivalent" -- "$PET" verify "$P/conv-transposed-kernel.original.onnx" "$P/conv-transposed-kernel.mutant.onnx"
expect 0 "64 intersections agree with the field verdict, 0 disagree, 0 undecided" -- "$PET" verify "$P/dilated-to-dense-blocks.original.onnx" "$P/dilated-to-dense-blocks.mutant.onnx" --z3 --json "$TMP/z.json"
if ! grep -q '"agree": true' "$TMP/z.json"; then echo "FAIL: z3 json lacks agree"; fails=$((fails + 1)); fi
expect 0 "all inside the correction region: yes" -- "$PET" verify "$P/dilated-to-dense-blocks.original.onnx" "$P/dilated-to-dense-blocks.mutant.onnx" --exhaustive
expect 3 "node 'bn1' \(BatchNormalization\) is not multilinear; pet verify takes one multilinear program" -- "$PET" verify "$model" "$model"
expect 2 "the original has 1 inputs but the mutant has 2" -- "$PET" verify "$P/conv-batch-to-width.original.onnx" "$P/matmuls-to-batched.mutant.onnx"
expect 2 "65535 is not a prime" -- "$PET" verify "$P/conv-batch-to-width.original.onnx" "$P/conv-batch-to-width.mutant.onnx" --prime 65535
expect 2 "usage: pet verify" -- "$PET" verify "$P/conv-batch-to-width.original.onnx"

# pet mutate: every corrected mutant it writes computes the original's outputs.
expect 0 "conv-batch-to-width +images of a batch side by side" -- "$PET" mutate --list-rules
for sub in conv-batch-to-width dilated-to-dense-blocks matmuls-to-batched; do
  orig="$P/$sub.original.onnx"
  expect 0 "corrected mutants" -- "$PET" mutate "$orig" --out-dir "$TMP/mut_$sub" --json "$TMP/mut_$sub.json"
  for key in '"mutants"' '"file"' '"verdict"' '"corrected_elements"' '"est_ms"' '"correction_ms"' '"seconds"' '"stop_reason"'; do
    if ! grep -q -- "$key" "$TMP/mut_$sub.json"; then echo "FAIL: mutate json lacks $key"; fails=$((fails + 1)); fi
  done
  "$PET" run "$orig" --save "$TMP/ref_$sub" --seed 3 > /dev/null
  n=0
  for m in "$TMP/mut_$sub"/mutant_*.onnx; do
    n=$((n + 1))
    if ! "$PET" run "$m" --check "$TMP/ref_$sub" > "$TMP/check.txt" 2>&1; then
      echo "FAIL: $m does not compute the original's outputs:"; cat "$TMP/check.txt"; fails=$((fails + 1))
    fi
  done
  echo "ok:   $n mutants of $sub pass pet run --check"
  [ "$n" -gt 0 ] || { echo "FAIL: no mutants for $sub"; fails=$((fails + 1)); }
done
expect 0 '"rule": "conv-batch-to-width"' -- cat "$TMP/mut_conv-batch-to-width.json"
expect 0 '"generated": true' -- cat "$TMP/mut_conv-batch-to-width.json"
expect 3 "node 'bn1' \(BatchNormalization\) is not multilinear; pet mutate takes one multilinear program. This model has 3 multilinear subprograms: #1 Conv from 'conv1'.*--extract K -o SUB.onnx" -- "$PET" mutate "$model" --out-dir "$TMP/m_bad"
expect 2 "unknown rule 'nope'" -- "$PET" mutate "$P/conv-batch-to-width.original.onnx" --out-dir "$TMP/m_bad" --rules nope
expect 2 "usage: pet mutate" -- "$PET" mutate "$P/conv-batch-to-width.original.onnx"
expect 0 "corrected mutants" -- "$PET" mutate "$P/conv-batch-to-width.original.onnx" --out-dir "$TMP/m_rules" --rules conv-batch-to-width --depth 0
# Cost model: the cpu profiler by default (cached in $XDG_CACHE_HOME), or the roofline.
if "$PET" run "$P/conv-batch-to-width.original.onnx" --backend cpu > /dev/null 2>&1; then
  expect 0 '"cost_model": "cpu op profiler' -- cat "$TMP/mut_conv-batch-to-width.json"
  test -s "$XDG_CACHE_HOME/pet/opcache.db" || { echo "FAIL: no profiler cache written"; fails=$((fails + 1)); }
  # A run on a busy machine leaves disturbed measurements out of the cache; within three runs
  # every op is cached and a run measures nothing.
  for attempt in 1 2 3; do
    "$PET" mutate "$P/conv-batch-to-width.original.onnx" --out-dir "$TMP/m_again" --json "$TMP/m_again.json" > /dev/null
    grep -q '"measured": 0' "$TMP/m_again.json" && break
  done
  expect 0 '"measured": 0' -- cat "$TMP/m_again.json"
fi
expect 0 '"cost_model": "roofline' -- "$PET" mutate "$P/conv-batch-to-width.original.onnx" --out-dir "$TMP/m_roof" --cost roofline --json /dev/stdout
expect 2 "--cost 'nope': choose profile or roofline" -- "$PET" mutate "$P/conv-batch-to-width.original.onnx" --out-dir "$TMP/m_bad" --cost nope

if [ "$fails" -ne 0 ]; then
  echo "$fails CLI check(s) failed"
  exit 1
fi
echo "all CLI checks passed"
