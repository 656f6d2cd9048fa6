#!/usr/bin/env bash
# Mutation generator on the four test subprograms (CSRNet dilated conv 1x512x14x14; Inception's
# parallel 1x1 convs 768->192/160 on 17x17; BERT's Q/K/V 128x768 x 768x768; a batch-2 3x3 conv
# 2x64x56x56) at depth 3 and 4: time, mutants found, and `pet run --check` of every mutant
# against the original's outputs. Results in results/studies/mutate/ (or $1).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/studies/mutate}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
build/lab_pairs "$work/subs" subprograms > /dev/null
summary="$out/summary.csv"
echo "subprogram,depth,seconds,mutants,equivalent,partially_equivalent,best_origin,best_ops,best_corrected_fraction,best_est_speedup,checked,check_failures" > "$summary"
for sub in csrnet_dilated_conv inception_parallel_1x1 bert_qkv conv3x3_batch2; do
  model="$work/subs/$sub.onnx"
  build/pet run "$model" --save "$work/ref_$sub" --seed 11 > /dev/null
  for depth in 3 4; do
    echo "== $sub depth $depth" >&2
    dir="$work/mut_${sub}_$depth"
    build/pet mutate "$model" --depth "$depth" --out-dir "$dir" --json "$out/${sub}_depth$depth.json" | tee "$out/${sub}_depth$depth.txt" >&2
    checked=0 failures=0
    if [ "$depth" = 3 ]; then
      for m in "$dir"/mutant_*.onnx; do
        checked=$((checked + 1))
        build/pet run "$m" --check "$work/ref_$sub" > "$work/check.txt" 2>&1 || { failures=$((failures + 1)); cat "$work/check.txt" >&2; }
      done
    fi
    /usr/bin/python3 - "$out/${sub}_depth$depth.json" "$sub" "$depth" "$checked" "$failures" >> "$summary" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
m = d["mutants"]
eq = sum(x["verdict"] == "equivalent" for x in m)
pe = sum(x["verdict"] == "partially_equivalent" for x in m)
b = m[0] if m else {}
origin = b.get("rule", "generated") if b else ""
print(f'{sys.argv[2]},{sys.argv[3]},{d["seconds"]:.2f},{len(m)},{eq},{pe},{origin},"{b.get("ops", "")}",{b.get("corrected_fraction", 0):.4f},{b.get("est_speedup", 0):.3f},{sys.argv[4]},{sys.argv[5]}')
PY
  done
done
cat "$summary"
