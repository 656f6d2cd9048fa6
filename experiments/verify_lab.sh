#!/usr/bin/env bash
# Runs the verification lab's four experiments and the speed check, writing CSV/JSON into
# results/verify_lab/ (or $1). Build first (scripts/build.sh). Takes about 4 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/verify_lab}
mkdir -p "$out"
b=build
echo "== experiment 1: Theorem 2 (false passes vs prime)" >&2
"$b/exp_theorem2" 4000 "$out/theorem2.csv" | tee "$out/theorem2.txt"
echo "== experiment 2: Theorem 1 (box method vs exhaustive) on random pairs" >&2
"$b/exp_theorem1" 500 "$out/theorem1.csv" | tee "$out/theorem1.txt"
echo "== experiment 3: Table 2 (verification work)" >&2
"$b/exp_table2" "$out/table2.csv" | tee "$out/table2.txt"
echo "== experiment 4: Z3 vs finite field on 1000 random pairs" >&2
"$b/exp_z3" 1000 "$out/z3_agreement.csv" | tee "$out/z3_agreement.txt"
echo "== speed: CSRNet dilated layer and ResNet-18 batch-16 conv" >&2
"$b/exp_speed" 7 "$out/speed.jsonl" > /dev/null
cat "$out/speed.jsonl"
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  /usr/bin/python3 paper-figures/verify_theorem2.py "$out/theorem2.csv" "$out/theorem2"
fi
