#!/usr/bin/env bash
# pet optimize end to end on the bundled model: the optimized file runs in pet (and agrees
# with the original there), passes onnx.checker and runs in ONNX Runtime with the original's
# outputs; the mutants pet mutate writes run in ONNX Runtime with their subprogram's outputs.
# usage: optimize_test.sh PET SOURCE_DIR LAB_PAIRS
set -euo pipefail
pet=$1 src=$2 lab_pairs=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=$src/.venv/bin/python
"$pet" optimize "$src/models/dilated_demo.onnx" -o "$tmp/demo.pet.onnx" --json "$tmp/report.json" --profile-cache none \
  --algorithm-cache none --budget 120 2> "$tmp/progress.txt" | tee "$tmp/report.txt"
grep -q "check against the original: pass" "$tmp/report.txt"
grep -q '"speedup"' "$tmp/report.json"
grep -q "pet optimize: window 2 of 2" "$tmp/progress.txt"  # progress on stderr
"$pet" run "$tmp/demo.pet.onnx" --repeat 3 | grep -q "median"
"$pet" run "$src/models/dilated_demo.onnx" --save "$tmp/ref" --seed 3 > /dev/null
"$pet" run "$tmp/demo.pet.onnx" --check "$tmp/ref" | grep -q "pass"
# bad options are user errors
set +e
"$pet" optimize "$src/models/dilated_demo.onnx" -o "$tmp/x.onnx" --policy sometimes > /dev/null 2> "$tmp/err.txt"; rc=$?
set -e
test $rc -eq 2 && grep -q "choose both, equivalent, partial or none" "$tmp/err.txt"
if [ ! -x "$py" ] || ! "$py" -c "import onnxruntime" 2> /dev/null; then
  echo "optimize: pet checks passed; ONNX Runtime checks SKIPPED (no .venv with onnxruntime; run scripts/setup.sh)"
  exit 0
fi
"$py" "$src/tests/ort_compare.py" "$src/models/dilated_demo.onnx" "$tmp/demo.pet.onnx"
# every mutant pet mutate writes loads and runs in ONNX Runtime with the subprogram's outputs
"$lab_pairs" "$tmp/pairs" > /dev/null
for sub in dilated-to-dense-blocks conv-batch-to-width matmuls-to-batched; do
  "$pet" mutate "$tmp/pairs/$sub.original.onnx" --out-dir "$tmp/m_$sub" --depth 2 --cost roofline --quiet
  "$py" "$src/tests/ort_compare.py" "$tmp/pairs/$sub.original.onnx" "$tmp/m_$sub"/mutant_*.onnx
done
echo "optimize: the optimized model and every mutant run in ONNX Runtime with the original's outputs"
