#!/usr/bin/env bash
# Bad input a user may hand pet (issue "Hardening"): each gets a clear error with the right
# exit code (2 invalid, 3 unsupported), never a crash, hang, silent acceptance or exit 4.
# Usage: hardening_test.sh PET_BINARY SOURCE_DIR [PYTHON]
set -u
PET=$1
SRC=$2
PY=${3:-/usr/bin/python3}
ORT_PY=${4:-}  # a python with onnxruntime (the project's .venv), for the opset 18-21 checks
TMP=$(mktemp -d)
export XDG_CACHE_HOME="$TMP/cache"
trap 'rm -rf "$TMP"' EXIT
fails=0
model="$SRC/models/tiny_cnn.onnx"

expect() {
  local code=$1 pattern=$2
  shift 3
  local out rc
  out=$(timeout 120 "$@" 2>&1)
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

if ! "$PY" -c "import onnx" 2>/dev/null; then
  echo "SKIP: $PY cannot import onnx (the models of this test are written with it)"
  exit 77
fi
"$PY" "$SRC/tests/hardening/make_models.py" "$TMP/m" >/dev/null || { echo "FAIL: make_models.py"; exit 1; }
M=$TMP/m

# Zero-size tensors (they used to die with SIGFPE): nodes that compute only empty tensors are
# left out at import (a note says which), empty outputs are empty constants; a non-empty result
# read from empty tensors is refused with a sentence (the ONNX models: empty17, checked against
# ONNX Runtime below).
expect 0 "note: 13 nodes compute only empty tensors \(a zero dimension\) and were left out: \[conv1,bn1" -- "$PET" run "$model" --dim N=0
expect 0 "on reference: median" -- "$PET" run "$model" --dim N=0 --backend reference
expect 0 "check against the original: pass" -- "$PET" optimize "$model" --dim N=0 -o "$TMP/n0.onnx" --budget 5 --profile-cache none
expect 2 "A \[4,0\] has 0 columns but B \[16,10\] has 16 rows" -- "$PET" run "$M/matmul.onnx" --shape a=4x0
expect 3 "output 'y' is a constant \(empty, shape \[0,10\]\); pet mutate takes a program whose outputs are computed" -- "$PET" mutate "$M/matmul.onnx" --dim M=0 --out-dir "$TMP/o0" --cost roofline
expect 3 "output 'y' is a constant \(empty, shape \[0,10\]\); pet verify takes" -- "$PET" verify "$M/matmul.onnx" "$M/matmul.onnx" --dim M=0
expect 3 "node 'mm' \(MatMul, opset 17\): input 0 \('a'\) is empty \(shape \[2,0\]\) but output 0 is not \(shape \[2,3\]\)" -- "$PET" run "$M/empty_matmul.onnx"
# Deep programs: point evaluation is bounded with a clear error (it overflowed the stack).
expect 3 "the program is 100000 ops deep .*supports at most 10000" -- "$PET" verify "$M/deep_neg.onnx" "$M/deep_neg.onnx"
expect 3 "the program is 100000 ops deep" -- "$PET" mutate "$M/deep_neg.onnx" --out-dir "$TMP/odeep" --cost roofline
expect 0 "on cpu: median" -- "$PET" run "$M/deep_neg.onnx" --threads 1  # 100,000 steps: one thread waits at no barriers
# Memory: estimated before anything is allocated.
expect 3 "needs about 240.0 GB .*'x', is float32\[1,3,100000,100000\].*memory limit" -- "$PET" run "$M/huge_input.onnx"
expect 3 "the largest, 'y', is float32\[60000,60000,10\], 144.0 GB" -- "$PET" run "$M/expand_huge.onnx"
expect 3 "more than the memory limit of 1.0 KB \(--memory-limit\)" -- "$PET" run "$model" --memory-limit 1K
expect 2 "option '--memory-limit' needs a size like 512M or 8G, got 'abc'" -- "$PET" info "$model" --memory-limit abc
expect 2 "--tests 1000000000: choose 1 to 64" -- "$PET" verify "$M/matmul.onnx" "$M/matmul.onnx" --tests 1000000000
if "$PET" verify --help | grep -q -- "--z3 "; then
  expect 3 "--z3 would make 475136 input and weight elements Z3 constants \(about 570 MB\), more than the memory limit of 100 MB" -- "$PET" verify "$M/conv64.onnx" "$M/conv64.onnx" --z3 --memory-limit 100M
fi
# verify --exhaustive on a large output says how far it is (stderr).
expect 0 "pet verify: exhaustive, [0-9]+ of [0-9]+ positions" -- "$PET" verify "$M/conv64.onnx" "$M/conv64.onnx" --exhaustive
# pet info: a subprogram that reads only constants (folded before running) is counted, not listed.
expect 0 "  #[12]   MatMul .*first node 'mm'.*\(1 more read only constants: folded before a backend runs them\)" -- bash -c "\"$PET\" info \"$M/shared_weight.onnx\" | tr '\n' ' '"
# A Concat of 4,000 inputs (oneDNN's concat primitive cannot): one step copying each into its slice.
expect 0 "on cpu: median" -- "$PET" run "$M/concat4000.onnx"
expect 0 "pet copies of 4000 inputs into slices" -- "$PET" run "$M/concat4000.onnx" --plan

# Paths: invalid-input errors naming the option and the path.
expect 2 "--save '/proc/x' cannot be created" -- "$PET" run "$model" --save /proc/x
expect 2 "--json '/proc/x/y.json' cannot be created" -- "$PET" run "$model" --json /proc/x/y.json
expect 2 "--out-dir '$model' is a file, not a folder" -- "$PET" mutate "$M/matmul.onnx" --out-dir "$model"
expect 2 "--profile-cache '/proc/x' cannot be created" -- "$PET" mutate "$M/matmul.onnx" --out-dir "$TMP/o1" --profile-cache /proc/x
expect 2 "--algorithm-cache '$TMP' is a folder" -- "$PET" run "$model" --algorithm-cache "$TMP"
expect 2 "-o '/proc/x.onnx' cannot be created" -- "$PET" optimize "$model" -o /proc/x.onnx
expect 2 "the default cache file '/proc/x/.cache/pet/algorithms.db' \(from HOME\) cannot be created.*--algorithm-cache none" -- env HOME=/proc/x XDG_CACHE_HOME= "$PET" run "$model"
expect 0 "on cpu: median" -- env HOME=/proc/x XDG_CACHE_HOME= "$PET" run "$model" --algorithm-cache none
expect 2 "option '--time-budget' needs a number, got 'abc'" -- "$PET" mutate "$M/matmul.onnx" --out-dir "$TMP/o2" --time-budget abc
expect 2 "--time-budget needs a positive number of seconds, got -1" -- "$PET" mutate "$M/matmul.onnx" --out-dir "$TMP/o2" --time-budget -1
expect 2 "--budget needs zero or more seconds, got -5" -- "$PET" optimize "$model" -o "$TMP/x.onnx" --budget -5
# Nothing rewritten (--policy none: the program comes out as it went in) on a model whose
# symbolic dim 'M' pet bound to 1: the user's file is written unchanged, 'M' kept, not the
# program at M = 1 (which it wrote before).
expect 0 "note: input 'a' dimension 0 \\('M'\\) set to 1" -- "$PET" optimize "$M/matmul.onnx" -o "$TMP/kept.onnx" --policy none --budget 5 --profile-cache none
expect 0 "written: the original file, unchanged" -- "$PET" optimize "$M/matmul.onnx" -o "$TMP/kept.onnx" --policy none --budget 5 --profile-cache none
cmp -s "$M/matmul.onnx" "$TMP/kept.onnx" && echo "ok:   the kept original is the model file" || { echo "FAIL: pet optimize that kept the original did not write the original file"; fails=$((fails + 1)); }

# Caches: SQLite databases pet wrote; a file it did not write is never overwritten.
cp "$SRC/README.md" "$TMP/README.copy"
expect 2 "--algorithm-cache $TMP/README.copy: is not a pet algorithms cache \(not an SQLite database\); pet does not overwrite" -- "$PET" run "$model" --algorithm-cache "$TMP/README.copy"
expect 2 "--profile-cache $TMP/README.copy: is not a pet opcache cache" -- "$PET" optimize "$model" -o "$TMP/x.onnx" --profile-cache "$TMP/README.copy"
cmp -s "$SRC/README.md" "$TMP/README.copy" && echo "ok:   README copy untouched" || { echo "FAIL: README copy changed"; fails=$((fails + 1)); }
"$PET" mutate "$M/matmul.onnx" --out-dir "$TMP/oc" --quiet
expect 0 "opcache cache, [0-9]+ entries" -- "$PET" cache show  # timings taken on a busy machine are not saved: 0 is possible
expect 0 "\"kind\": \"opcache\"" -- "$PET" cache export
expect 2 "--profile-cache .*algorithms.db: is a pet algorithms cache, not a pet opcache cache" -- "$PET" mutate "$M/matmul.onnx" --out-dir "$TMP/oc" --profile-cache "$XDG_CACHE_HOME/pet/algorithms.db"
expect 0 "entries removed" -- "$PET" cache clear "$XDG_CACHE_HOME/pet/opcache.db"
expect 0 "opcache cache, 0 entries" -- "$PET" cache show "$XDG_CACHE_HOME/pet/opcache.db"
expect 2 "README.copy: not a pet cache" -- "$PET" cache show "$TMP/README.copy"
expect 2 "pet cache 'frob': choose show, export or clear" -- "$PET" cache frob
head -c 3000 "$XDG_CACHE_HOME/pet/algorithms.db" > "$TMP/damaged.db"
expect 0 "warning: the algorithms cache .*damaged.db is damaged .*moved aside" -- "$PET" run "$model" --algorithm-cache "$TMP/damaged.db"

# Silently accepted before: names the model does not have, thread counts, conflicting attributes.
expect 2 "a shape was given for input 'y', which the model does not have \(its inputs: \[x\]\)" -- "$PET" run "$model" --shape y=1x3x4x4
expect 2 "a value was given for dimension 'Q', which no input of the model has \(its symbolic dimensions: \[N\]\)" -- "$PET" run "$model" --dim Q=4
# given input values bind the symbolic dims; a --dim beside them must agree (it was refused
# as "no symbolic dimensions" before)
"$PET" run "$model" --dim N=2 --save "$TMP/n2" > /dev/null
expect 0 "pass" -- "$PET" run "$model" --dim N=2 --check "$TMP/n2"
expect 2 "dimension 'N' was given as 3 but the value given for input 'x' has 2 there" -- "$PET" run "$model" --dim N=3 --inputs "$TMP/n2"
expect 2 "--threads 0: choose 1 to" -- "$PET" run "$model" --threads 0
expect 2 "--threads 500: choose 1 to" -- "$PET" optimize "$model" -o "$TMP/x.onnx" --threads 500
expect 0 "over 1 run \(1 thread\)" -- "$PET" run "$model" --threads 1
expect 2 "graph output 'y' is listed twice" -- "$PET" run "$M/output_twice.onnx"
expect 2 "node 'conv' \(Conv, opset 13\): has both auto_pad 'SAME_UPPER' and explicit pads" -- "$PET" run "$M/autopad_and_pads.onnx"
expect 2 "node 'split' \(Split, opset 13\): axis 0 of \[4,2\] \(size 4\) does not split into 3 equal parts" -- "$PET" run "$M/split_uneven13.onnx"

# Unclear errors made clear.
: > "$TMP/empty.onnx"
expect 2 "empty.onnx: the file is empty \(0 bytes\), not an ONNX model" -- "$PET" run "$TMP/empty.onnx"
expect 2 "$TMP: is a folder, not a model file" -- "$PET" info "$TMP"
expect 2 "/dev/null: is not a regular file" -- "$PET" info /dev/null
expect 2 "'$model' is a file; a test-data folder \(holding input_0.pb, ...\) is expected" -- "$PET" run "$model" --inputs "$model"
"$PET" run "$model" --dim N=2 --save "$TMP/d2" >/dev/null 2>&1

"$PET" run "$model" --shape x=1x4x16x16 --save "$TMP/d4" >/dev/null 2>&1 || "$PY" - "$TMP/d4" <<'PYEOF'
import sys, os, numpy as np
from onnx import numpy_helper
os.makedirs(sys.argv[1], exist_ok=True)
open(os.path.join(sys.argv[1], "input_0.pb"), "wb").write(numpy_helper.from_array(np.zeros((1, 4, 16, 16), np.float32), "x").SerializeToString())
PYEOF
expect 2 "d4/input_0.pb has shape \[1,4,16,16\] but input 'x' is declared \[N,3,16,16\]" -- "$PET" run "$model" --inputs "$TMP/d4"
"$PY" - "$TMP/dn" <<'PYEOF'
import sys, os, numpy as np
from onnx import numpy_helper
os.makedirs(sys.argv[1], exist_ok=True)
open(os.path.join(sys.argv[1], "input_0.pb"), "wb").write(numpy_helper.from_array(np.zeros((1, 3, 16, 16), np.float32), "not_x").SerializeToString())
nan = np.full((1, 10), np.nan, np.float32)
open(os.path.join(sys.argv[1], "output_0.pb"), "wb").write(numpy_helper.from_array(nan, "probs").SerializeToString())
PYEOF
expect 2 "dn/input_0.pb holds tensor 'not_x' but input 0 of the model is 'x'" -- "$PET" run "$model" --inputs "$TMP/dn"
mkdir -p "$TMP/nan" && cp "$TMP/d2/input_0.pb" "$TMP/nan/" 2>/dev/null
"$PET" run "$model" --save "$TMP/nan" >/dev/null 2>&1
cp "$TMP/dn/output_0.pb" "$TMP/nan/output_0.pb"
expect 1 "FAIL: NaN in 0 elements of the output and 10 of the reference" -- "$PET" run "$model" --check "$TMP/nan"
# Run-time errors name the file.
"$PY" - "$TMP/gi" <<'PYEOF'
import sys, os, numpy as np
from onnx import numpy_helper
os.makedirs(sys.argv[1], exist_ok=True)
open(os.path.join(sys.argv[1], "input_0.pb"), "wb").write(numpy_helper.from_array(np.zeros((3, 2), np.float32), "x").SerializeToString())
open(os.path.join(sys.argv[1], "input_1.pb"), "wb").write(numpy_helper.from_array(np.array([0, 7], np.int64), "i").SerializeToString())
PYEOF
expect 2 "gather_oob.onnx: .*Gather 'gather'.*out of range" -- "$PET" run "$M/gather_oob.onnx" --inputs "$TMP/gi"
# A reused --out-dir keeps no stale mutants of an earlier run.
touch "$TMP/o3/mutant_999.onnx" 2>/dev/null || { mkdir -p "$TMP/o3"; touch "$TMP/o3/mutant_999.onnx"; }
"$PET" mutate "$M/matmul.onnx" --out-dir "$TMP/o3" --cost roofline --quiet
if [ -e "$TMP/o3/mutant_999.onnx" ]; then echo "FAIL: stale mutant_999.onnx left in a reused --out-dir"; fails=$((fails + 1)); else echo "ok:   reused --out-dir cleaned"; fi

# A model's multilinear subprograms, written out for pet mutate and pet verify.
expect 0 "sub2.onnx: multilinear subprogram #2 \(1 ops, inputs float32\[1,8,8,8\]\) written" -- "$PET" info "$model" --extract 2 -o "$TMP/sub2.onnx"
expect 0 "corrected mutants" -- "$PET" mutate "$TMP/sub2.onnx" --out-dir "$TMP/osub" --cost roofline
expect 0 "sub1.onnx: multilinear subprogram #1" -- "$PET" info "$model" --extract 1 -o "$TMP/sub1.onnx"
expect 2 "--extract 9: the model has 3 multilinear subprograms" -- "$PET" info "$model" --extract 9 -o "$TMP/sub9.onnx"
expect 2 "--extract K needs -o SUB.onnx" -- "$PET" info "$model" --extract 1
# pet run --repeat: the median is of undisturbed runs; the JSON says how many were left out.
expect 0 "over [0-9]+ runs? \(2 threads\)" -- "$PET" run "$model" --repeat 5 --threads 2 --json "$TMP/rep.json"
expect 0 "\"disturbed_runs\"" -- cat "$TMP/rep.json"

# pet mutate output that cannot be misread; progress on stderr; --profile steps add up.
expect 0 "nothing verified: no rule was applied \(--rules none\) and the generator is off \(--depth 0\)" -- "$PET" mutate "$TMP/sub2.onnx" --out-dir "$TMP/on" --cost roofline --rules none --depth 0
expect 0 "estimated slower than the original are not listed; --all lists them" -- "$PET" mutate "$M/matmul.onnx" --out-dir "$TMP/os" --cost roofline
expect 0 "mutant_000 .*slower\)  matmul-to-conv1x1 +equivalent" -- "$PET" mutate "$M/matmul.onnx" --out-dir "$TMP/os" --cost roofline --all
expect 0 "\"slower_than_original\": true" -- cat "$TMP/os/index.json"
expect 0 "refused: conv-dilated-to-dense at 'n0': not dilated$" -- "$PET" mutate "$TMP/sub1.onnx" --out-dir "$TMP/oe" --cost roofline --explain
expect 0 "pet mutate: [0-9]+ candidates to verify" -- "$PET" mutate "$TMP/sub2.onnx" --out-dir "$TMP/op" --cost roofline
expect 0 "steps in all \(median of each step over" -- "$PET" run "$model" --profile --repeat 3

# The lowest int64 by -1 in Div and Mod: no trap (SIGFPE before), at import and at run time.
mkdir -p "$TMP/int_edges"
/usr/bin/python3 -c "
import numpy as np, sys
from onnx import numpy_helper
open(sys.argv[1], 'wb').write(numpy_helper.from_array(np.array([np.iinfo(np.int64).min, 7, -7, 0], np.int64), 'a').SerializeToString())" "$TMP/int_edges/input_0.pb"
for be in reference cpu; do
  expect 0 "on $be: median" -- "$PET" run "$M/int_edges13.onnx" --backend $be --inputs "$TMP/int_edges"
done

# Newer opsets (18-21): attributes that became inputs, num_outputs, Gelu.
expect 0 "on reference: median" -- "$PET" run "$M/opset18.onnx" --backend reference
expect 0 "on cpu: median" -- "$PET" run "$M/opset21.onnx"
if [ -n "$ORT_PY" ] && [ -x "$ORT_PY" ] && "$ORT_PY" -c "import onnxruntime" 2>/dev/null; then
  for name in opset18 opset21 coverage17 coverage17b coverage17c upsample9 empty17 recurrent17 mvn13 control17 gridsample16 mish18 einsum_resize13 resize19 resize_tf13 convtranspose_implicit13 quant16 qops13 qcontrib13 qaddmul13 signal17 pool_seq18 groupnorm18 groupnorm21 affinegrid20 forms21 layout_loss18 float16_17 bfloat16_17 roialign16 det11 bitwise18; do
    "$ORT_PY" "$SRC/tests/hardening/ort_testdata.py" "$M/$name.onnx" "$TMP/ort_$name"
    # A quantized model's outputs move by one quantization step where another float conv
    # kernel (oneDNN's, Eigen's, ONNX Runtime's) rounds a value to the other side of a grid
    # midpoint: quant16's last layer has steps 0.01 (rd) and 1 (rq, max 255).
    tol=()
    [ "$name" = quant16 ] && tol=(--atol 1e-4 --rtol 0.005)
    # the integer ops' int32 sums and requantization are exact: bit for bit
    [ "$name" = qops13 ] && tol=(--atol 0 --rtol 0)
    # ONNX Runtime's contrib ops as standard ops: bit for bit, but QLinearAdd and QLinearMul,
    # which ONNX Runtime computes in fixed point: one quantization step
    [ "$name" = qcontrib13 ] && tol=(--atol 0 --rtol 0)
    [ "$name" = bitwise18 ] && tol=(--atol 0 --rtol 0)
    [ "$name" = qaddmul13 ] && tol=(--atol 1 --rtol 0)
    # float16 and bfloat16 models are computed in float32: ONNX Runtime's results, rounded to
    # the narrow type op by op, are that type's rounding away (pet run's defaults for them)
    [ "$name" = float16_17 ] && tol=(--atol 1e-3 --rtol 1e-2)
    [ "$name" = bfloat16_17 ] && tol=(--atol 1e-2 --rtol 5e-2)
    for be in reference cpu; do
      expect 0 "check .* pass" -- "$PET" run "$M/$name.onnx" --backend $be --check "$TMP/ort_$name" "${tol[@]}"
      if grep -q FAIL <<<"$("$PET" run "$M/$name.onnx" --backend $be --check "$TMP/ort_$name" "${tol[@]}" 2>&1)"; then
        echo "FAIL: $name on $be differs from ONNX Runtime"; fails=$((fails + 1)); fi
    done
    # quant16's conv runs on oneDNN's int8 kernel where the CPU has VNNI; in float with --no-int8
    case $name in quant16 | qops13 | qcontrib13 | qaddmul13) expect 0 "check .* pass" -- "$PET" run "$M/$name.onnx" --no-int8 --check "$TMP/ort_$name" "${tol[@]}" ;; esac
    # what pet writes (opset 17: Mish and Gelu spelled out) passes onnx.checker and ONNX Runtime
    expect 0 "" -- "$PET" optimize "$M/$name.onnx" -o "$TMP/$name.pet.onnx" --budget 5 --quiet --profile-cache none
    expect 0 "ok in ONNX Runtime" -- "$ORT_PY" "$SRC/tests/ort_compare.py" "$M/$name.onnx" "$TMP/$name.pet.onnx" "${tol[@]}"
    # and in OpenVINO (where it computes the original as ONNX Runtime does), with its outputs
    if "$ORT_PY" -c "import openvino" 2> /dev/null; then
      expect 0 "ok in OpenVINO|refuses the original itself|miscomputes the original itself" -- "$ORT_PY" "$SRC/tests/openvino_compare.py" "$M/$name.onnx" "$TMP/$name.pet.onnx" "${tol[@]}"
    fi
  done
  # float16: pet run's default tolerance is float16's, the note says how it computes, --save
  # writes float16 outputs as float16; the written file keeps the float16 interface (checked
  # in ONNX Runtime at another batch too: its N stays symbolic)
  expect 0 "note: it uses FLOAT16, which pet computes as float32" -- "$PET" run "$M/float16_17.onnx" --check "$TMP/ort_float16_17" --save "$TMP/save16"
  expect 0 "check y +pass .*max\|ref\| 0.999  tolerance 0.011" -- "$PET" run "$M/float16_17.onnx" --check "$TMP/ort_float16_17"
  expect 0 "input +x +float32\[1,3,12,12\] \(float16 in the file\)" -- "$PET" info "$M/float16_17.onnx"
  # an input file of float32 for the float16 input is refused, as ONNX Runtime refuses it
  mkdir -p "$TMP/in32_float16_17"
  "$ORT_PY" -c "import onnx, numpy as np, sys; [onnx.save_tensor(onnx.numpy_helper.from_array(np.ones(s, np.float32), n), f'{sys.argv[1]}/input_{k}.pb') for k, (n, s) in enumerate([('x', (1, 3, 12, 12)), ('t', (4, 16))])]" "$TMP/in32_float16_17"
  expect 2 "input_0.pb holds float32 values but .*float16_17.onnx declares input 'x' as float16" -- "$PET" run "$M/float16_17.onnx" --inputs "$TMP/in32_float16_17"
  expect 0 "FLOAT16 FLOAT FLOAT FLOAT16" -- "$ORT_PY" -c "import onnx, sys; print(*[onnx.TensorProto.DataType.Name(onnx.load_tensor(f'{sys.argv[1]}/{k}.pb').data_type) for k in ('output_0', 'output_1', 'output_2', 'input_0')])" "$TMP/save16"
  # (--keep-slower: pet's program, not the original file, written for every N by generalise)
  expect 0 "written: the optimized program for every value of N" -- "$PET" optimize "$M/float16_17.onnx" -o "$TMP/f16keep.pet.onnx" --keep-slower --budget 5 --profile-cache none
  # its float16 interface through Casts, and its float16 weight of 1 KiB or more (as float32) stored as float16
  expect 0 "x FLOAT16 Cast x_float32; y FLOAT16 Cast y_float32; \['h2_10x128_float16'\]" -- "$ORT_PY" -c "import onnx, sys; g = onnx.load(sys.argv[1]).graph; f = lambda v: onnx.TensorProto.DataType.Name(v.type.tensor_type.elem_type); c = [n for n in g.node if n.op_type == 'Cast' and n.input[0] == 'x'][0]; print(g.input[0].name, f(g.input[0]), c.op_type, c.output[0] + ';', g.output[0].name, f(g.output[0]), g.node[-1].op_type, g.node[-1].input[0] + ';', [t.name for t in g.initializer if t.data_type == 10])" "$TMP/f16keep.pet.onnx"
  expect 0 "ok in ONNX Runtime" -- "$ORT_PY" "$SRC/tests/ort_compare.py" "$M/float16_17.onnx" "$TMP/f16keep.pet.onnx" --dim 3 --atol 1e-3 --rtol 1e-2
  if "$ORT_PY" -c "import openvino" 2> /dev/null; then
    expect 0 "ok in OpenVINO" -- "$ORT_PY" "$SRC/tests/openvino_compare.py" "$M/float16_17.onnx" "$TMP/f16keep.pet.onnx" --dim 3 --atol 1e-3 --rtol 1e-2
  fi
  # DeformConv (opset 19): ONNX Runtime 1.20 and OpenVINO 2024.6 have no kernel for it, so
  # ONNX's Python reference gives the outputs; pet's file (GridSample, MatMul) runs in both
  "$ORT_PY" "$SRC/tests/hardening/ort_testdata.py" "$M/deformconv19.onnx" "$TMP/ref_deformconv19" --reference
  for be in reference cpu; do
    expect 0 "check y1 +pass" -- "$PET" run "$M/deformconv19.onnx" --backend $be --check "$TMP/ref_deformconv19"
    if grep -q FAIL <<<"$("$PET" run "$M/deformconv19.onnx" --backend $be --check "$TMP/ref_deformconv19" 2>&1)"; then
      echo "FAIL: deformconv19 on $be differs from ONNX's reference"; fails=$((fails + 1)); fi
  done
  expect 0 "" -- "$PET" optimize "$M/deformconv19.onnx" -o "$TMP/deformconv19.pet.onnx" --budget 5 --quiet --profile-cache none
  expect 0 "ok in ONNX Runtime .* against" -- "$ORT_PY" "$SRC/tests/ort_compare.py" "$M/deformconv19.onnx" "$TMP/deformconv19.pet.onnx" --expected "$TMP/ref_deformconv19"
  if "$ORT_PY" -c "import openvino" 2> /dev/null; then
    expect 0 "ok in OpenVINO" -- "$ORT_PY" "$SRC/tests/openvino_compare.py" "$M/deformconv19.onnx" "$TMP/deformconv19.pet.onnx" --expected "$TMP/ref_deformconv19"
  fi
else
  echo "SKIP: no python with onnxruntime given; opset 18-21 outputs not compared with ONNX Runtime"
fi

if [ "$fails" -ne 0 ]; then
  echo "$fails hardening check(s) failed"
  exit 1
fi
echo "all hardening checks passed"
