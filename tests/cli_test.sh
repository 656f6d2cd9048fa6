#!/usr/bin/env bash
# End-to-end checks of the `pet` command: exit codes and messages for good and bad input.
# Usage: cli_test.sh PET_BINARY SOURCE_DIR
set -u
PET=$1
SRC=$2
TMP=$(mktemp -d)
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
expect 3 "backend 'cpu' is not available in this build" -- "$PET" run "$model" --backend cpu
expect 2 "unknown backend 'gpu'" -- "$PET" run "$model" --backend gpu
expect 2 "unknown option '--frob' for 'pet run'" -- "$PET" run "$model" --frob
expect 2 "option '--repeat' needs a value" -- "$PET" run "$model" --repeat
expect 2 "--repeat needs a positive count" -- "$PET" run "$model" --repeat 0
expect 2 "test-data folder '$TMP/nodir' does not exist" -- "$PET" run "$model" --inputs "$TMP/nodir"

# Save a run's inputs and outputs, then check against them (pass), then against altered
# references (fail, exit 1).
expect 0 "median" -- "$PET" run "$model" --dim N=2 --save "$TMP/data" --seed 5
expect 0 "check probs +pass" -- "$PET" run "$model" --check "$TMP/data" --repeat 3 --json "$TMP/run.json"
for key in '"model"' '"backend": "reference"' '"median_ms"' '"min_ms"' '"runs": 3' '"outputs"' '"check": "pass"'; do
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

if [ "$fails" -ne 0 ]; then
  echo "$fails CLI check(s) failed"
  exit 1
fi
echo "all CLI checks passed"
