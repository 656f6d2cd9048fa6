#!/usr/bin/env python3
"""Writes the small ONNX models of tests/hardening_test.sh: bad inputs a user may hand pet
(deep chains, huge declared shapes, conflicting attributes) and models of newer opsets.
Usage: make_models.py OUT_DIR   (needs the onnx Python package; /usr/bin/python3 has it)"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
F = TensorProto.FLOAT


def save(name, nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, os.path.join(out, name + ".onnx"))


def vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


# A chain of 100,000 Neg nodes (verify/mutate evaluate points recursively).
n = 100000
nodes = [helper.make_node("Neg", ["x" if i == 0 else f"t{i}"], [f"t{i+1}" if i + 1 < n else "y"], name=f"neg{i}") for i in range(n)]
save("deep_neg", nodes, [vi("x", [2, 3])], [vi("y", [2, 3])])

# Concat of 4,000 inputs (oneDNN 2.6's concat primitive fails to run that many).
save("concat4000", [helper.make_node("Concat", ["x"] * 4000, ["y"], axis=0, name="cat")], [vi("x", [1, 4])], [vi("y", [4000, 4])])

# A weight shared as PyTorch exports it (an Identity of the initializer, here a LayerNorm's
# scale) and a MatMul: `pet info` counts the Identity's subprogram as folded, lists the MatMul's.
save("shared_weight", [helper.make_node("Identity", ["s"], ["s2"], name="share"),
                       helper.make_node("LayerNormalization", ["a", "s2"], ["n"], name="ln", axis=-1),
                       helper.make_node("MatMul", ["n", "w"], ["y"], name="mm")],
     [vi("a", [2, 3])], [vi("y", [2, 4])], [const("s", np.ones(3, np.float32)), const("w", np.ones((3, 4), np.float32))], opset=17)

# Declared shapes far beyond memory.
save("huge_input", [helper.make_node("Relu", ["x"], ["y"], name="relu")], [vi("x", [1, 3, 100000, 100000])], [vi("y", [1, 3, 100000, 100000])])
save("expand_huge", [helper.make_node("Expand", ["x", "shape"], ["y"], name="expand")], [vi("x", [1, 1, 1])], [vi("y", [60000, 60000, 10])],
     [const("shape", np.array([60000, 60000, 10], dtype=np.int64))])

# MatMul with an inner zero dimension given by --shape, and a plain MatMul.
save("matmul", [helper.make_node("MatMul", ["a", "w"], ["y"], name="mm")], [vi("a", ["M", 16])], [vi("y", ["M", 10])],
     [const("w", np.ones((16, 10), dtype=np.float32))])

# An output listed twice.
save("output_twice", [helper.make_node("Relu", ["x"], ["y"], name="relu")], [vi("x", [2, 3])], [vi("y", [2, 3]), vi("y", [2, 3])])

# auto_pad together with explicit pads.
w = np.ones((4, 3, 3, 3), dtype=np.float32)
save("autopad_and_pads", [helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", pads=[1, 1, 1, 1], name="conv")],
     [vi("x", [1, 3, 8, 8])], [vi("y", [1, 4, 8, 8])], [const("w", w)])

# Opset-13 Split of 4 into 3 equal parts (there are none).
save("split_uneven13", [helper.make_node("Split", ["x"], ["a", "b", "c"], axis=0, name="split")], [vi("x", [4, 2])],
     [vi("a", None), vi("b", None), vi("c", None)])

# Gather with an index out of range (found only at run time: the index is an input).
save("gather_oob", [helper.make_node("Gather", ["x", "i"], ["y"], axis=0, name="gather")], [vi("x", [3, 2]), vi("i", [2], TensorProto.INT64)],
     [vi("y", [2, 2])])

# Newer opsets: attributes that became inputs, num_outputs, Gelu (20).
save("opset18", [
    helper.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=1, name="mean"),
    helper.make_node("Pad", ["x", "pads", "", "pad_axes"], ["p"], mode="constant", name="pad"),
    helper.make_node("Split", ["p"], ["s0", "s1", "s2"], axis=1, num_outputs=3, name="split"),
    helper.make_node("Add", ["s0", "m"], ["y0"], name="add"),
], [vi("x", [2, 5])], [vi("y0", None), vi("s1", None), vi("s2", None)],
   [const("axes", np.array([1], dtype=np.int64)), const("pads", np.array([1, 2], dtype=np.int64)), const("pad_axes", np.array([1], dtype=np.int64))], opset=18)
save("opset21", [helper.make_node("Gelu", ["x"], ["g"], name="gelu"), helper.make_node("ReduceMax", ["g", "axes"], ["y"], keepdims=0, name="max")],
     [vi("x", [2, 3, 4])], [vi("y", None)], [const("axes", np.array([2], dtype=np.int64))], opset=21)
print("models in", out)

# The ONNX coverage ops in one model (opset 17), for pet vs ONNX Runtime on both backends and
# for export -> ONNX Runtime.
ops17 = [("Abs", {}), ("Floor", {}), ("Ceil", {}), ("Round", {}), ("Sign", {}), ("Softsign", {}), ("Softplus", {}),
         ("HardSwish", {}), ("Elu", {"alpha": 0.7}), ("Selu", {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4})]
nodes, prev = [], "x"
outs = []
for k, (op, at) in enumerate(ops17):
    nodes.append(helper.make_node(op, [prev], [f"u{k}"], name=f"{op.lower()}{k}", **at))
    outs.append(f"u{k}")
nodes.append(helper.make_node("Abs", ["x"], ["ax"], name="abs_for_log"))
nodes.append(helper.make_node("Add", ["ax", "one"], ["ax1"], name="plus_one"))
nodes.append(helper.make_node("Log", ["ax1"], ["log"], name="log"))
nodes.append(helper.make_node("Reciprocal", ["ax1"], ["rec"], name="reciprocal"))
nodes.append(helper.make_node("Max", ["x", "u3", "log"], ["mx"], name="max3"))
nodes.append(helper.make_node("Min", ["x", "rec"], ["mn"], name="min2"))
nodes.append(helper.make_node("Sum", ["x", "u1", "u2", "rec"], ["sm"], name="sum4"))
nodes.append(helper.make_node("PRelu", ["x", "slope"], ["pr"], name="prelu"))
reds = []
for op in ["ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"]:
    nodes.append(helper.make_node(op, ["x"], [op.lower()], axes=[1], keepdims=1, name=op.lower()))
    reds.append(op.lower())
g_outs = [vi(o, None) for o in outs + ["log", "rec", "mx", "mn", "sm", "pr"] + reds]
save("coverage17", nodes, [vi("x", [2, 3, 4])], g_outs,
     [const("one", np.array(1.0, dtype=np.float32)), const("slope", np.array([[0.1], [0.2], [0.3]], dtype=np.float32))], opset=17)
save("mish18", [helper.make_node("Mish", ["x"], ["y"], name="mish")], [vi("x", [2, 3])], [vi("y", None)], opset=18)

# A conv whose Z3 cross-check names 475,136 input and weight elements (about 570 MB).
save("conv64", [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], name="conv")], [vi("x", [1, 64, 56, 56])],
     [vi("y", [1, 64, 56, 56])], [const("w", np.zeros((64, 64, 3, 3), dtype=np.float32))])
save("coverage17b", [
    helper.make_node("ArgMax", ["x"], ["amax"], axis=1, name="argmax"),
    helper.make_node("ArgMin", ["x"], ["amin"], axis=2, keepdims=0, name="argmin"),
    helper.make_node("Tile", ["x", "reps"], ["tiled"], name="tile"),
    helper.make_node("Unsqueeze", ["x", "ax3"], ["x4"], name="to4d"),
    helper.make_node("InstanceNormalization", ["x4", "scale", "bias"], ["inorm"], epsilon=1e-4, name="inorm"),
    helper.make_node("ConvTranspose", ["x", "wt", "bt"], ["deconv"], strides=[2], pads=[1, 0], output_padding=[1], group=1, name="deconv"),
], [vi("x", [2, 3, 4])], [vi("amax", None, TensorProto.INT64), vi("amin", None, TensorProto.INT64), vi("tiled", None), vi("inorm", None),
                          vi("deconv", None)],
   [const("reps", np.array([1, 2, 1], dtype=np.int64)), const("ax3", np.array([3], dtype=np.int64)),
    const("scale", np.array([0.5, 1.0, 2.0], dtype=np.float32)), const("bias", np.array([0.1, 0.0, -0.2], dtype=np.float32)),
    const("wt", np.random.default_rng(3).uniform(-1, 1, (3, 2, 3)).astype(np.float32)), const("bt", np.array([0.3, -0.1], dtype=np.float32))], opset=17)

# Einsum (lowered to MatMul where it maps; a diagonal on the reference kernel) and Resize.
rng = np.random.default_rng(5)
save("einsum_resize13", [
    helper.make_node("Einsum", ["q", "k"], ["att"], equation="bhid,bhjd->bhij", name="attention_scores"),
    helper.make_node("Einsum", ["q", "w"], ["proj"], equation="...d,de", name="projection"),
    helper.make_node("Einsum", ["sq"], ["diag"], equation="ii->i", name="diagonal"),
    helper.make_node("Einsum", ["img"], ["colsum"], equation="nchw->nw", name="column_sums"),
    helper.make_node("Resize", ["img", "", "sc2"], ["up_nearest"], mode="nearest", name="up_nearest"),
    helper.make_node("Resize", ["img", "", "sc2"], ["up_linear"], mode="linear", name="up_linear"),
    helper.make_node("Resize", ["img", "", "", "sz"], ["down_linear_ac"], mode="linear", coordinate_transformation_mode="align_corners", name="down_ac"),
    helper.make_node("Resize", ["img", "", "sc2"], ["up_cubic"], mode="cubic", coordinate_transformation_mode="asymmetric", name="up_cubic"),
    helper.make_node("Resize", ["img", "", "", "sz"], ["down_nearest_ceil"], mode="nearest", nearest_mode="ceil",
                     coordinate_transformation_mode="pytorch_half_pixel", name="down_nearest"),
], [vi("q", [2, 2, 5, 4]), vi("k", [2, 2, 6, 4]), vi("sq", [3, 3]), vi("img", [1, 2, 5, 6])],
   [vi(o, None) for o in ["att", "proj", "diag", "colsum", "up_nearest", "up_linear", "down_linear_ac", "up_cubic", "down_nearest_ceil"]],
   [const("w", rng.uniform(-1, 1, (4, 3)).astype(np.float32)), const("sc2", np.array([1, 1, 2, 1.5], dtype=np.float32)),
    const("sz", np.array([1, 2, 3, 4], dtype=np.int64))], opset=13)
save("resize19", [
    helper.make_node("Resize", ["img", "", "", "sz"], ["sym"], mode="linear", coordinate_transformation_mode="half_pixel_symmetric",
                     axes=[2, 3], name="symmetric"),
    helper.make_node("Resize", ["img", "", "sc"], ["cubic_ex"], mode="cubic", exclude_outside=1, cubic_coeff_a=-0.5, axes=[3], name="cubic_ex"),  # ORT 1.20 refuses axes=[-1]
], [vi("img", [1, 2, 5, 6])], [vi("sym", None), vi("cubic_ex", None)],
   [const("sz", np.array([8, 9], dtype=np.int64)), const("sc", np.array([1.5], dtype=np.float32))], opset=19)

# Resize's TensorFlow coordinate modes: tf_crop_and_resize (a region of interest partly
# outside the input, an extrapolation value) and tf_half_pixel_for_nn.
save("resize_tf13", [
    helper.make_node("Resize", ["img", "roi", "", "sz"], ["crop_linear"], mode="linear", coordinate_transformation_mode="tf_crop_and_resize",
                     extrapolation_value=-3.0, name="crop_linear"),
    helper.make_node("Resize", ["img", "roi", "", "sz"], ["crop_nearest"], mode="nearest", coordinate_transformation_mode="tf_crop_and_resize",
                     name="crop_nearest"),
    helper.make_node("Resize", ["img", "", "", "sz2"], ["tf_nn"], mode="nearest", coordinate_transformation_mode="tf_half_pixel_for_nn",
                     name="tf_nn"),
    # ceil and round_prefer_ceil round o + 0.5 up: the unresized batch and channel dims must
    # still read their own positions (ONNX Runtime skips dims of scale 1)
    helper.make_node("Resize", ["img", "", "sc"], ["tf_nn_ceil"], mode="nearest", coordinate_transformation_mode="tf_half_pixel_for_nn",
                     nearest_mode="ceil", name="tf_nn_ceil"),
    helper.make_node("Resize", ["img", "", "sc"], ["tf_nn_prefer_ceil"], mode="nearest", coordinate_transformation_mode="tf_half_pixel_for_nn",
                     nearest_mode="round_prefer_ceil", name="tf_nn_prefer_ceil"),
], [vi("img", [1, 2, 5, 6])], [vi("crop_linear", None), vi("crop_nearest", None), vi("tf_nn", None), vi("tf_nn_ceil", None),
                              vi("tf_nn_prefer_ceil", None)],
   [const("roi", np.array([0, 0, 0.1, -0.2, 1, 1, 0.8, 1.3], dtype=np.float32)), const("sz", np.array([1, 2, 4, 5], dtype=np.int64)),
    const("sz2", np.array([1, 2, 3, 4], dtype=np.int64)), const("sc", np.array([1, 1, 1.5, 2], dtype=np.float32))], opset=13)

# ConvTranspose with implicit padding: auto_pad SAME_UPPER / SAME_LOWER / VALID and output_shape.
wt = rng.uniform(-1, 1, (2, 3, 3, 3)).astype(np.float32)
save("convtranspose_implicit13", [
    helper.make_node("ConvTranspose", ["x", "wt"], ["same_upper"], strides=[2, 2], auto_pad="SAME_UPPER", name="same_upper"),
    helper.make_node("ConvTranspose", ["x", "wt"], ["same_lower"], strides=[2, 2], auto_pad="SAME_LOWER", name="same_lower"),
    helper.make_node("ConvTranspose", ["x", "wt"], ["valid"], strides=[2, 1], auto_pad="VALID", name="valid"),
    helper.make_node("ConvTranspose", ["x", "wt"], ["shaped"], strides=[3, 2], output_shape=[14, 10], name="shaped"),
], [vi("x", [1, 2, 4, 4])], [vi(o, None) for o in ["same_upper", "same_lower", "valid", "shaped"]], [const("wt", wt)], opset=13)

# The second batch of ONNX coverage ops, on one input (indices made by TopK from it).
I64, B = TensorProto.INT64, TensorProto.BOOL
save("coverage17c", [
    helper.make_node("LogSoftmax", ["x"], ["logsm"], axis=1, name="logsoftmax"),
    helper.make_node("Hardmax", ["x"], ["hmax"], axis=-1, name="hardmax"),
    helper.make_node("Unsqueeze", ["x", "ax3"], ["x4"], name="to4d"),
    helper.make_node("LRN", ["x4"], ["lrn"], size=3, alpha=0.5, beta=0.75, bias=2.0, name="lrn_odd"),
    helper.make_node("GlobalMaxPool", ["x"], ["gmp"], name="gmp"),
    helper.make_node("Celu", ["x"], ["celu"], alpha=0.8, name="celu"),
    helper.make_node("ThresholdedRelu", ["x"], ["thr"], alpha=0.3, name="thr"),
    helper.make_node("Shrink", ["x"], ["shr"], bias=0.1, lambd=0.4, name="shrink"),
    helper.make_node("Abs", ["x"], ["ax"], name="abs"),
    helper.make_node("ReduceLogSum", ["ax"], ["rls"], axes=[2], keepdims=0, name="reducelogsum"),
    helper.make_node("CumSum", ["x", "axis1"], ["cs"], exclusive=1, reverse=1, name="cumsum"),
    helper.make_node("TopK", ["x", "k2"], ["topv", "topi"], axis=2, name="topk"),
    helper.make_node("TopK", ["x", "k1"], ["minv", "mini"], axis=2, largest=0, name="bottom1"),
    helper.make_node("GatherElements", ["x", "topi"], ["ge"], axis=2, name="gatherelements"),
    helper.make_node("GatherND", ["x", "mini"], ["gnd"], batch_dims=2, name="gathernd"),
    helper.make_node("Trilu", ["x", "kdiag"], ["tri"], upper=0, name="trilu"),
    helper.make_node("OneHot", ["mini", "depth", "onoff"], ["oh"], axis=-1, name="onehot"),
    helper.make_node("Log", ["x"], ["lg"], name="log"),
    helper.make_node("IsNaN", ["lg"], ["nan"], name="isnan"),
    helper.make_node("Floor", ["x"], ["fl"], name="floor"),
    helper.make_node("Reciprocal", ["fl"], ["rf"], name="reciprocal"),
    helper.make_node("IsInf", ["rf"], ["inf"], detect_negative=0, name="isinf"),
    helper.make_node("Size", ["x"], ["size"], name="size"),
    helper.make_node("Reshape", ["x", "rows"], ["x2"], name="to2d"),
    helper.make_node("EyeLike", ["x2"], ["eye"], k=1, name="eyelike"),
    helper.make_node("Add", ["x2", "eye"], ["x2eye"], name="plus_eye"),
    helper.make_node("CastLike", ["topi", "x"], ["topif"], name="castlike"),
    helper.make_node("Mean", ["x", "celu", "thr"], ["mean3"], name="mean3"),
    helper.make_node("Mean", ["x", "shr"], ["mean2"], name="mean2"),
], [vi("x", [2, 3, 4])],
   [vi(o, None) for o in ["logsm", "hmax", "lrn", "gmp", "celu", "thr", "shr", "rls", "cs", "topv"]] +
   [vi("topi", None, I64), vi("mini", None, I64)] + [vi(o, None) for o in ["ge", "gnd", "tri", "oh"]] +
   [vi("nan", None, B), vi("inf", None, B), vi("size", None, I64), vi("x2eye", None), vi("topif", None), vi("mean3", None), vi("mean2", None)],
   [const("axis1", np.array(1, dtype=np.int64)), const("k2", np.array([2], dtype=np.int64)), const("k1", np.array([1], dtype=np.int64)),
    const("kdiag", np.array(1, dtype=np.int64)), const("depth", np.array(4, dtype=np.int64)),
    const("onoff", np.array([0.5, 5.0], dtype=np.float32)), const("rows", np.array([6, 4], dtype=np.int64)),
    const("ax3", np.array([3], dtype=np.int64))], opset=17)
# Upsample (opset 9, before Resize): nearest and linear, scales as an input.
save("upsample9", [
    helper.make_node("Upsample", ["img", "sc"], ["near"], mode="nearest", name="up_nearest"),
    helper.make_node("Upsample", ["img", "sc"], ["lin"], mode="linear", name="up_linear"),
], [vi("img", [1, 2, 3, 3])], [vi("near", None), vi("lin", None)], [const("sc", np.array([1, 1, 2, 1.5], dtype=np.float32))], opset=9)

# Empty tensors (a zero dimension): a KV cache at its first step (past of length 0 Concat-ed
# with the new keys, as GPT-style decoders export it), Slices past the end, a Split with empty
# parts, a variadic Sum that broadcasts to empty, an empty input passed through, and a
# non-empty result read from empty tensors (refused).
save("empty17", [
    helper.make_node("Concat", ["past", "k"], ["present"], axis=2, name="kv_concat"),
    helper.make_node("Relu", ["present"], ["act"], name="relu"),
    helper.make_node("Slice", ["act", "s_start", "s_end", "s_axes"], ["gone"], name="slice_past_end"),
    helper.make_node("Concat", ["gone", "act", "gone"], ["again"], axis=2, name="concat_empty_slices"),
    helper.make_node("Split", ["k", "parts"], ["p0", "p_empty", "p2"], axis=3, name="split_empty_part"),
    helper.make_node("Sum", ["b4", "past", "b4"], ["sum_empty"], name="sum_empty"),
    helper.make_node("Identity", ["past"], ["past_out"], name="pass_past"),
], [vi("past", [1, 2, 0, 4]), vi("k", [1, 2, 3, 4])],
   [vi("present", [1, 2, 3, 4]), vi("again", [1, 2, 3, 4]), vi("gone", [1, 2, 0, 4]), vi("p0", [1, 2, 3, 1]),
    vi("p_empty", [1, 2, 3, 0]), vi("p2", [1, 2, 3, 3]), vi("sum_empty", None), vi("past_out", [1, 2, 0, 4])],
   [const("s_start", np.array([5], np.int64)), const("s_end", np.array([9], np.int64)),
    const("s_axes", np.array([2], np.int64)), const("parts", np.array([1, 0, 3], np.int64)),
    const("b4", np.ones((1, 1, 1, 4), np.float32))], opset=17)
save("empty_matmul", [helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")], [vi("a", [2, 0]), vi("b", [0, 3])],
     [vi("y", [2, 3])], opset=17)

# Recurrent nodes (unrolled at import): every direction, initial states, peepholes,
# clip, linear_before_reset, activations with alpha/beta, a constant sequence_lens (ONNX Runtime
# has no layout = 1: the node suite's *_batchwise tests cover it).
rng = np.random.default_rng(3)
T, Bt, In, Hd = 5, 2, 3, 4
def w(*s):
    return rng.uniform(-0.5, 0.5, s).astype(np.float32)
save("recurrent17", [
    helper.make_node("LSTM", ["x", "lw", "lr", "lb", "lens", "lh0", "lc0", "lp"], ["ly", "lyh", "lyc"], direction="bidirectional",
                     hidden_size=Hd, clip=1.5, name="lstm_bidir"),
    helper.make_node("GRU", ["x", "gw", "gr", "gb", "", "gh0"], ["gy", "gyh"], direction="reverse", hidden_size=Hd,
                     linear_before_reset=1, activations=["HardSigmoid", "LeakyRelu"], activation_alpha=[0.3, 0.2],
                     activation_beta=[0.4], name="gru_reverse"),
    helper.make_node("GRU", ["x", "g2w", "g2r", "g2b"], ["g2y"], direction="bidirectional", hidden_size=Hd, name="gru_bidir"),
    helper.make_node("RNN", ["x", "rw", "rr", "rb", "", "rh0"], ["ry", "ryh"], direction="bidirectional", hidden_size=Hd,
                     activations=["Relu", "Tanh"], name="rnn_bidir"),
], [vi("x", [T, Bt, In]), vi("lh0", [2, Bt, Hd]), vi("lc0", [2, Bt, Hd]), vi("gh0", [1, Bt, Hd]), vi("rh0", [2, Bt, Hd])],
   [vi("ly", [T, 2, Bt, Hd]), vi("lyh", [2, Bt, Hd]), vi("lyc", [2, Bt, Hd]), vi("gy", [T, 1, Bt, Hd]), vi("gyh", [1, Bt, Hd]),
    vi("g2y", [T, 2, Bt, Hd]), vi("ry", [T, 2, Bt, Hd]), vi("ryh", [2, Bt, Hd])],
   [const("lw", w(2, 4 * Hd, In)), const("lr", w(2, 4 * Hd, Hd)), const("lb", w(2, 8 * Hd)), const("lens", np.full(Bt, T, np.int32)),
    const("lp", w(2, 3 * Hd)), const("gw", w(1, 3 * Hd, In)), const("gr", w(1, 3 * Hd, Hd)), const("gb", w(1, 6 * Hd)),
    const("g2w", w(2, 3 * Hd, In)), const("g2r", w(2, 3 * Hd, Hd)), const("g2b", w(2, 6 * Hd)),
    const("rw", w(2, Hd, In)), const("rr", w(2, Hd, Hd)), const("rb", w(2, 2 * Hd))], opset=17)

# MeanVarianceNormalization (its function body in pet ops): default axes and axes [1, 2].
save("mvn13", [helper.make_node("MeanVarianceNormalization", ["x"], ["y"], name="mvn"),
               helper.make_node("MeanVarianceNormalization", ["x"], ["y12"], axes=[1, 2], name="mvn12")],
     [vi("x", [2, 3, 4, 5])], [vi("y", [2, 3, 4, 5]), vi("y12", [2, 3, 4, 5])])

# Control flow and sequences (inlined at import): a Loop whose trip count is x's first
# dimension (shape arithmetic), carrying a tensor and a sequence, with a scan output and an If
# on the iteration number in its body; a while-loop (no trip count, the body's condition
# ends it); a Scan over axis 1 in reverse with its outputs stacked on axis 1; an If whose
# condition depends on x (known only at run time: both branches and a Where); and the
# sequence ops around them.
mk = helper.make_node
B2, C2 = 3, 4
ib = helper.make_tensor_value_info
then_b = helper.make_graph([mk("Mul", ["acc_in", "two"], ["t_out"], name="double")], "then", [], [vi("t_out", None)])
else_b = helper.make_graph([mk("Sub", ["acc_in", "row"], ["e_out"], name="minus_row")], "else", [], [vi("e_out", None)])
loop_body = helper.make_graph([
    mk("Gather", ["x", "i"], ["row"], axis=0, name="row_i"),
    mk("Less", ["i", "two_i"], ["early"], name="early"),
    mk("If", ["early"], ["picked"], then_branch=then_b, else_branch=else_b, name="pick"),
    mk("Add", ["picked", "row"], ["acc_out"], name="accumulate"),
    mk("SequenceInsert", ["seq_in", "acc_out"], ["seq_out"], name="remember"),
    mk("Identity", ["c_in"], ["c_out"], name="keep_going"),
    mk("Mul", ["row", "row"], ["sq"], name="square"),
], "loop_body", [ib("i", TensorProto.INT64, []), ib("c_in", TensorProto.BOOL, []), vi("acc_in", None),
                 helper.make_tensor_sequence_value_info("seq_in", F, None)],
   [ib("c_out", TensorProto.BOOL, []), vi("acc_out", None), helper.make_tensor_sequence_value_info("seq_out", F, None), vi("sq", None)])
while_body = helper.make_graph([
    mk("Add", ["w_i", "one_i"], ["w_next"], name="w_next"),
    mk("Less", ["w_next", "three_i"], ["w_c"], name="w_cond"),
    mk("Mul", ["w_in", "half"], ["w_out"], name="halve"),
], "while_body", [ib("w_i", TensorProto.INT64, []), ib("w_cin", TensorProto.BOOL, []), vi("w_in", None)],
   [ib("w_c", TensorProto.BOOL, []), vi("w_out", None)])
scan_body = helper.make_graph([
    mk("Add", ["s_in", "col"], ["s_out"], name="running"),
    mk("Tanh", ["s_out"], ["s_y"], name="squash"),
], "scan_body", [vi("s_in", None), vi("col", None)], [vi("s_out", None), vi("s_y", None)])
big_b = helper.make_graph([mk("Relu", ["x"], ["b_out"], name="relu_x")], "big", [], [vi("b_out", None)])
small_b = helper.make_graph([mk("Neg", ["x"], ["s_neg"], name="neg_x")], "small", [], [vi("s_neg", None)])
save("control17", [
    mk("Shape", ["x"], ["xs"], name="shape_x"),
    mk("Gather", ["xs", "zero_i"], ["trips"], axis=0, name="trips"),
    mk("SequenceEmpty", [], ["seq0"], dtype=F, name="seq0"),
    mk("Loop", ["trips", "", "init", "seq0"], ["acc", "seq", "squares"], body=loop_body, name="loop"),
    mk("SequenceErase", ["seq", "zero_i"], ["seq_tail"], name="drop_first"),
    mk("SequenceAt", ["seq", "minus1_i"], ["last"], name="last"),
    mk("ConcatFromSequence", ["seq_tail"], ["stacked"], axis=0, new_axis=1, name="stacked"),
    mk("SequenceLength", ["seq_tail"], ["n_tail"], name="n_tail"),
    mk("Cast", ["n_tail"], ["n_tail_f"], to=F, name="n_tail_f"),
    mk("Mul", ["last", "n_tail_f"], ["last_scaled"], name="last_scaled"),
    mk("SplitToSequence", ["x"], ["cols"], axis=1, keepdims=0, name="cols"),
    mk("SequenceConstruct", ["acc", "last_scaled"], ["pair"], name="pair"),
    mk("ConcatFromSequence", ["pair"], ["pair_cat"], axis=0, name="pair_cat"),
    mk("SequenceAt", ["cols", "one_i"], ["col1"], name="col1"),
    mk("Loop", ["", "true_b", "x"], ["halved"], body=while_body, name="while"),
    mk("Scan", ["init3", "x"], ["scan_last", "scan_ys"], body=scan_body, num_scan_inputs=1, scan_input_axes=[1],
       scan_input_directions=[1], scan_output_axes=[1], name="scan"),
    mk("ReduceSum", ["x"], ["total"], keepdims=0, name="total"),
    mk("Greater", ["total", "zero_f"], ["positive"], name="positive"),
    mk("If", ["positive"], ["chosen"], then_branch=big_b, else_branch=small_b, name="runtime_if"),
], [vi("x", [B2, C2])],
   [vi("acc", [C2]), vi("stacked", [B2 - 1, C2]), vi("pair_cat", [2 * C2]), vi("col1", [B2]), vi("squares", [B2, C2]),
    vi("halved", [B2, C2]), vi("scan_last", [B2]), vi("scan_ys", [B2, C2]), vi("chosen", [B2, C2])],
   [const("init", np.linspace(-1, 1, C2).astype(np.float32)), const("init3", np.float32([0.5, -0.25, 1])), const("two", np.float32(2)), const("half", np.float32(0.5)),
    const("zero_f", np.float32(0)), const("zero_i", np.int64(0)), const("one_i", np.int64(1)), const("two_i", np.int64(2)),
    const("three_i", np.int64(3)), const("minus1_i", np.int64(-1)), const("true_b", np.bool_(True))], opset=17)

# GridSample (opset 16): every mode, padding and align_corners on one grid that reaches
# outside the image (ort_testdata's inputs lie in [-2, 2]).
gs_nodes, gs_outs = [], []
for mode in ("bilinear", "nearest", "bicubic"):
    for pad in ("zeros", "border", "reflection"):
        for align in (0, 1):
            o = f"{mode}_{pad}_{align}"
            gs_nodes.append(mk("GridSample", ["x", "grid"], [o], mode=mode, padding_mode=pad, align_corners=align, name=o))
            gs_outs.append(vi(o, [2, 3, 4, 6]))
save("gridsample16", gs_nodes, [vi("x", [2, 3, 5, 7]), vi("grid", [2, 4, 6, 2])], gs_outs, opset=16)

# RoiAlign (opset 16) of a conv's output, regions reaching outside the image: avg with
# half_pixel and a fixed sampling grid, max with output_half_pixel and the grid from the
# region's size; its rois and batch indices constants (ort_testdata draws float inputs)
ra = np.random.default_rng(10)
save("roialign16", [
    mk("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
    mk("RoiAlign", ["c", "rois", "idx"], ["avg"], output_height=3, output_width=4, sampling_ratio=2, spatial_scale=0.5, name="roi_avg"),
    mk("RoiAlign", ["c", "rois", "idx"], ["max"], mode="max", coordinate_transformation_mode="output_half_pixel", output_height=2,
       output_width=2, name="roi_max"),
], [vi("x", [2, 4, 12, 12])], [vi("avg", [4, 4, 3, 4]), vi("max", [4, 4, 2, 2])],
   [const("w", ra.uniform(-0.5, 0.5, [4, 4, 3, 3]).astype(np.float32)),
    const("rois", np.float32([[0, 0, 24, 24], [3.5, 2, 9, 20], [-6, -6, 30, 30], [10, 12, 11, 13]])),
    const("idx", np.int64([0, 1, 1, 0]))], opset=16)

# Det (opset 11) of a batch of 4 x 4 matrices, before and after a MatMul with a constant
# that mixes their columns, and of 1 x 1 matrices
dt = np.random.default_rng(12)
save("det11", [
    mk("Add", ["x", "eye"], ["a"], name="shift"),
    mk("Det", ["a"], ["d"], name="det_a"),
    mk("MatMul", ["a", "mix"], ["m"], name="mix_cols"),
    mk("Det", ["m"], ["dm"], name="det_m"),
    mk("Slice", ["x", "s0", "s1", "s_axes"], ["one"], name="corner"),
    mk("Det", ["one"], ["d1"], name="det_1x1"),
], [vi("x", [2, 3, 4, 4])], [vi("d", [2, 3]), vi("dm", [2, 3]), vi("d1", [2, 3])],
   [const("eye", (2 * np.eye(4)).astype(np.float32)), const("mix", dt.uniform(-1, 1, [4, 4]).astype(np.float32)),
    const("s0", np.int64([0, 0])), const("s1", np.int64([1, 1])), const("s_axes", np.int64([2, 3]))], opset=11)

# The bitwise ops (opset 18) on each integer type, from a float input scaled to the type's
# range (int64 up to 8e18), against constants of the type's extreme bit patterns, broadcast;
# pet writes them at opset 17 as integer arithmetic. int64 results also modulo 2^24 (their low
# bits exactly, where a float comparison of the whole values would round them). BitShift of
# uint8 both ways, by up to 9 bits.
TP = onnx.TensorProto
bw_nodes, bw_outs, bw_inits = [], [], []
for tname, elem, scale, shift, consts in (
        ("i8", TP.INT8, 60, 0, np.int8([-128, 127, -1, 85])),
        ("u8", TP.UINT8, 60, 2, np.uint8([0, 255, 170, 15])),
        ("i32", TP.INT32, 1e9, 0, np.int32([-2**31, 2**31 - 1, -1, 0x55555555])),
        ("i64", TP.INT64, 4e18, 0, np.int64([-2**63, 2**63 - 1, -1, 0x5555555555555555]))):
    bw_inits += [const(f"{tname}_scale", np.float32(scale)), const(f"{tname}_shift", np.float32(shift)), const(f"{tname}_c", consts)]
    bw_nodes += [mk("Add", ["x", f"{tname}_shift"], [f"{tname}_xs"], name=f"{tname}_add"),
                 mk("Mul", [f"{tname}_xs", f"{tname}_scale"], [f"{tname}_xf"], name=f"{tname}_mul"),
                 mk("Cast", [f"{tname}_xf"], [f"{tname}_x" if scale < 1e9 else f"{tname}_hi"], to=elem, name=f"{tname}_cast")]
    if scale >= 1e9:  # low bits too (float32 has 24): plus x * 1000 as the type
        bw_inits.append(const(f"{tname}_lscale", np.float32(1000)))
        bw_nodes += [mk("Mul", ["x", f"{tname}_lscale"], [f"{tname}_lf"], name=f"{tname}_lmul"),
                     mk("Cast", [f"{tname}_lf"], [f"{tname}_lo"], to=elem, name=f"{tname}_lcast"),
                     mk("Add", [f"{tname}_hi", f"{tname}_lo"], [f"{tname}_x"], name=f"{tname}_join")]
    for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
        o = f"{tname}_{op[7:].lower()}"
        bw_nodes.append(mk(op, [f"{tname}_x", f"{tname}_c"], [o], name=o))
        bw_outs.append(helper.make_tensor_value_info(o, elem, [2, 3, 4]))
        if tname == "i64":
            bw_nodes.append(mk("Mod", [o, "low_bits"], [o + "_low"], name=o + "_low"))
            bw_outs.append(helper.make_tensor_value_info(o + "_low", elem, [2, 3, 4]))
    bw_nodes.append(mk("BitwiseNot", [f"{tname}_x"], [f"{tname}_not"], name=f"{tname}_not"))
    bw_outs.append(helper.make_tensor_value_info(f"{tname}_not", elem, [2, 3, 4]))
bw_inits += [const("low_bits", np.int64(1 << 24)), const("shifts", np.uint8([0, 1, 7, 9]))]
for d in ("LEFT", "RIGHT"):
    bw_nodes.append(mk("BitShift", ["u8_x", "shifts"], [f"shift_{d.lower()}"], direction=d, name=f"shift_{d.lower()}"))
    bw_outs.append(helper.make_tensor_value_info(f"shift_{d.lower()}", TP.UINT8, [2, 3, 4]))
save("bitwise18", bw_nodes, [vi("x", [2, 3, 4])], bw_outs, bw_inits, opset=18)

# A QDQ model (opset 16): a uint8-quantized input, a conv with int8 weights quantized per
# output channel and an int32 bias, requantized after Relu (a uint8 output too), an int8
# path with a negative zero point, and ScatterElements and ScatterND on data with and
# without reductions (no duplicate indices without one: ONNX leaves their order open).
rq = np.random.default_rng(16)
qw = rq.integers(-127, 128, [4, 3, 3, 3]).astype(np.int8)
qws = np.float32([0.004, 0.006, 0.005, 0.003])
save("quant16", [
    mk("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="quant_x"),
    mk("DequantizeLinear", ["xq", "xs", "xz"], ["xd"], name="dequant_x"),
    mk("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0, name="dequant_w"),
    mk("DequantizeLinear", ["b", "bs"], ["bd"], axis=0, name="dequant_b"),
    mk("Conv", ["xd", "wd", "bd"], ["c"], pads=[1, 1, 1, 1], name="conv"),
    mk("Relu", ["c"], ["r"], name="relu"),
    mk("QuantizeLinear", ["r", "rs", "rz"], ["rq"], name="quant_r"),
    mk("DequantizeLinear", ["rq", "rs", "rz"], ["rd"], name="dequant_r"),
    mk("QuantizeLinear", ["x", "ss", "sz"], ["sq"], name="quant_s8"),
    mk("Cast", ["sq"], ["sq_f"], to=F, name="cast_s8"),
    mk("ScatterElements", ["a", "ia", "ua"], ["se"], axis=1, name="scatter_el"),
    mk("ScatterElements", ["a", "ia_dup", "ua"], ["se_add"], axis=1, reduction="add", name="scatter_el_add"),
    mk("ScatterND", ["m", "im", "um"], ["sn"], name="scatter_nd"),
    mk("ScatterND", ["m", "im_dup", "um"], ["sn_mul"], reduction="mul", name="scatter_nd_mul"),
], [vi("x", [1, 3, 8, 8]), vi("a", [2, 5]), vi("ua", [2, 2]), vi("m", [4, 3]), vi("um", [2, 3])],
   [vi("rd", [1, 4, 8, 8]), vi("rq", [1, 4, 8, 8], TensorProto.UINT8), vi("sq_f", [1, 3, 8, 8]), vi("se", [2, 5]),
    vi("se_add", [2, 5]), vi("sn", [4, 3]), vi("sn_mul", [4, 3])],
   [const("xs", np.float32(0.02)), const("xz", np.uint8(128)), const("w", qw), const("ws", qws), const("wz", np.zeros(4, np.int8)),
    const("b", np.int32([1000, -2000, 0, 500])), const("bs", (qws * np.float32(0.02)).astype(np.float32)),
    const("rs", np.float32(0.01)), const("rz", np.uint8(0)), const("ss", np.float32(0.03)), const("sz", np.int8(-3)),
    const("ia", np.int64([[1, -2], [0, 4]])), const("ia_dup", np.int64([[1, 1], [-1, 4]])),
    const("im", np.int64([[2], [0]])), const("im_dup", np.int64([[3], [-1]]))], opset=16)

# ONNX Runtime's integer quantization ops (dynamic quantization and the QOperator format),
# in the type combinations ONNX Runtime's CPU kernels take; pet must match it exactly.
rq = np.random.default_rng(17)
save("qops13", [
    mk("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"], name="dynq"),
    mk("ConvInteger", ["xq", "cw", "xz", "cwz"], ["ci"], pads=[1, 1, 1, 1], name="conv_int"),
    mk("Cast", ["ci"], ["ci_f"], to=F, name="cast_ci"),
    mk("MatMulInteger", ["xq", "mw", "xz", "mwz"], ["mi"], name="matmul_int"),
    mk("Cast", ["mi"], ["mi_f"], to=F, name="cast_mi"),
    mk("QLinearConv", ["xq", "xs", "xz", "qw", "qws", "qwz", "ys", "yz", "qb"], ["qc"], strides=[2, 2], pads=[1, 1, 1, 1], name="qconv"),
    mk("QLinearConv", ["qc", "ys", "yz", "dw", "dws", "dwz", "ys2", "yz2"], ["qd"], group=4, pads=[1, 1, 1, 1], name="qconv_dw"),
    mk("QuantizeLinear", ["x", "ss", "sz"], ["sq"], name="quant_s8"),
    mk("QLinearConv", ["sq", "ss", "sz", "qw", "qws", "qwz", "ys", "sz2"], ["qs"], dilations=[2, 2], pads=[2, 2, 2, 2], name="qconv_s8"),
    mk("QLinearMatMul", ["xq", "xs", "xz", "mw", "mws", "mwz0", "ys", "yz"], ["qm"], name="qmatmul"),
    mk("Cast", ["xs"], ["xs_out"], to=F, name="scale_out"),
    mk("QLinearMatMul", ["qc", "ys", "yz", "qc", "ys", "yz", "ys2", "yz2"], ["qaa"], name="qmatmul_act"),
], [vi("x", [2, 3, 8, 8])],
   [vi("ci_f", [2, 4, 8, 8]), vi("mi_f", [2, 3, 8, 5]), vi("qc", [2, 4, 4, 4], TensorProto.UINT8), vi("qd", [2, 4, 4, 4], TensorProto.UINT8),
    vi("qs", [2, 4, 8, 8], TensorProto.INT8), vi("qm", [2, 3, 8, 5], TensorProto.UINT8), vi("xs_out", []), vi("xz", [], TensorProto.UINT8),
    vi("qaa", [2, 4, 4, 4], TensorProto.UINT8)],
   [const("cw", rq.integers(0, 256, [4, 3, 3, 3]).astype(np.uint8)), const("cwz", np.uint8(131)),
    const("mw", rq.integers(-128, 128, [8, 5]).astype(np.int8)), const("mwz", rq.integers(-3, 4, [5]).astype(np.int8)),
    const("mws", np.float32([0.01, 0.02, 0.015, 0.03, 0.005])), const("mwz0", np.zeros(5, np.int8)),
    const("qw", rq.integers(-127, 128, [4, 3, 3, 3]).astype(np.int8)), const("qws", np.float32([0.004, 0.006, 0.005, 0.003])),
    const("qwz", np.zeros(4, np.int8)), const("ys", np.float32(0.05)), const("yz", np.uint8(100)), const("qb", np.int32([1000, -2000, 0, 500])),
    const("dw", rq.integers(-127, 128, [4, 1, 3, 3]).astype(np.int8)), const("dws", np.float32(0.01)), const("dwz", np.int8(0)),
    const("ys2", np.float32(0.2)), const("yz2", np.uint8(3)),
    const("ss", np.float32(0.03)), const("sz", np.int8(-3)), const("sz2", np.int8(5))], opset=13)

# ONNX Runtime's quantized contrib ops (com.microsoft), as its QOperator quantizer writes them
# for the ops other than Conv and MatMul, and int8 MaxPool: pet imports them as standard ops
# (DequantizeLinear, the float op, QuantizeLinear; QGemm as MatMulInteger and a
# requantization). qcontrib13 matches ONNX Runtime bit for bit; qaddmul13's QLinearAdd and
# QLinearMul, which ONNX Runtime computes in fixed point on x86, lie one quantization step
# from it where a value is near a rounding midpoint.
rq = np.random.default_rng(18)
MS = "com.microsoft"
U8 = TensorProto.UINT8
q_inits = [const("xs", np.float32(0.02)), const("xz", np.uint8(128)), const("ys", np.float32(0.015)), const("yz", np.uint8(120)),
           const("as", np.float32(0.03)), const("az", np.uint8(100)), const("ms", np.float32(0.004)), const("mz", np.uint8(128)),
           const("ss", np.float32(1 / 256)), const("sz", np.uint8(0)), const("smx", np.float32(1 / 256)), const("smz", np.uint8(0)),
           const("gw", rq.integers(-127, 128, [5, 4]).astype(np.int8)), const("gws", np.float32([0.01, 0.02, 0.015, 0.03, 0.005])),
           const("gwz", np.zeros(5, np.int8)), const("gb", np.int32([100, -200, 0, 50, 7])), const("gys", np.float32(0.05)),
           const("gyz", np.uint8(90)), const("shape", np.int64([8, 36]))]
q_in = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="quant_x"),
        helper.make_node("QuantizeLinear", ["y", "ys", "yz"], ["yq"], name="quant_y")]


def save_ms(name, nodes, outputs):
    g = helper.make_graph(q_in + nodes, name, [vi("x", [2, 4, 6, 6]), vi("y", [2, 4, 6, 6])], outputs, initializer=q_inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    onnx.save(m, os.path.join(out, name + ".onnx"))


save_ms("qcontrib13", [
    helper.make_node("QLinearSigmoid", ["xq", "xs", "xz", "ss", "sz"], ["sig"], name="qsigmoid", domain=MS),
    helper.make_node("QLinearLeakyRelu", ["xq", "xs", "xz", "as", "az"], ["lrelu"], alpha=0.1, name="qleaky", domain=MS),
    helper.make_node("QLinearGlobalAveragePool", ["xq", "xs", "xz", "as", "az"], ["gap"], channels_last=0, name="qgap", domain=MS),
    helper.make_node("QLinearAveragePool", ["xq", "xs", "xz", "as", "az"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2],
                     count_include_pad=0, name="qavgpool", domain=MS),
    helper.make_node("QLinearConcat", ["as", "az", "xq", "xs", "xz", "yq", "ys", "yz"], ["cat"], axis=1, name="qconcat", domain=MS),
    helper.make_node("MaxPool", ["xq"], ["mp"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2], name="maxpool_u8"),
    helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
    helper.make_node("QGemm", ["flat", "as", "az", "gw", "gws", "gwz", "gb", "gys", "gyz"], ["gemm"], transB=1, name="qgemm", domain=MS),
    helper.make_node("QGemm", ["flat", "as", "az", "gw", "gws", "gwz", "gb"], ["gemm_f"], transB=1, alpha=0.5, name="qgemm_float", domain=MS),
    helper.make_node("Reshape", ["xq", "shape"], ["rows"], name="rows"),
    helper.make_node("QLinearSoftmax", ["rows", "xs", "xz", "smx", "smz"], ["smax"], axis=-1, opset=13, name="qsoftmax", domain=MS),
], [vi("sig", [2, 4, 6, 6], U8), vi("lrelu", [2, 4, 6, 6], U8), vi("ap", [2, 4, 3, 3], U8), vi("cat", [2, 8, 6, 6], U8), vi("mp", [2, 4, 3, 3], U8),
    vi("gemm", [2, 5], U8), vi("gemm_f", [2, 5]), vi("smax", [8, 36], U8)])
save_ms("qaddmul13", [
    helper.make_node("QLinearAdd", ["xq", "xs", "xz", "yq", "ys", "yz", "as", "az"], ["add"], name="qadd", domain=MS),
    helper.make_node("QLinearMul", ["xq", "xs", "xz", "yq", "ys", "yz", "ms", "mz"], ["mul"], name="qmul", domain=MS),
], [vi("add", [2, 4, 6, 6], U8), vi("mul", [2, 4, 6, 6], U8)])

# Integer Div and Mod of the lowest int64 by -1 (the machine's division traps: pet died of
# SIGFPE folding them at import and running them), folded from constants and at run time.
I64 = TensorProto.INT64
save("int_edges13", [
    helper.make_node("Div", ["lo", "m1"], ["q"], name="div_folded"),
    helper.make_node("Mod", ["lo", "m1"], ["r"], name="mod_folded", fmod=1),
    helper.make_node("Div", ["a", "m1"], ["qa"], name="div_run"),
    helper.make_node("Mod", ["a", "m1"], ["ra"], name="mod_run"),
    helper.make_node("Add", ["q", "r"], ["qr"], name="add"),
], [vi("a", [4], I64)], [vi("qr", [1], I64), vi("qa", [4], I64), vi("ra", [4], I64)],
    [const("lo", np.array([np.iinfo(np.int64).min], np.int64)), const("m1", np.array([-1], np.int64))])

# Signal ops (opset 17), as an audio front end writes them: a log-mel spectrogram (STFT with a
# HannWindow, power, MelWeightMatrix, Log), an STFT whose window is a graph input, complex DFTs
# (forward along axis 2 with a longer dft_length, inverse, onesided), and a real one cut short.
mk = helper.make_node
i64 = lambda n, v: helper.make_tensor(n, TensorProto.INT64, [], [v])
save("signal17", [
    mk("HannWindow", ["n400"], ["hann"], name="hann"),
    mk("STFT", ["audio", "hop", "hann", "n400"], ["spec"], name="stft"),
    mk("ReduceSumSquare", ["spec"], ["power"], axes=[-1], keepdims=0, name="power"),
    mk("MelWeightMatrix", ["mels", "n400", "rate", "lo", "hi"], ["melw"], name="melw"),
    mk("MatMul", ["power", "melw"], ["mel"], name="mel"),
    mk("Add", ["mel", "eps"], ["mel_eps"], name="mel_eps"),
    mk("Log", ["mel_eps"], ["logmel"], name="logmel"),
    mk("HammingWindow", ["n64"], ["hamming"], periodic=0, name="hamming"),
    mk("BlackmanWindow", ["n64"], ["blackman"], name="blackman"),
    mk("Mul", ["hamming", "blackman"], ["windows"], name="windows"),
    mk("STFT", ["audio", "hop", "win"], ["spec_w"], onesided=0, name="stft_data_window"),
    mk("DFT", ["cx", "n12"], ["cx_f"], axis=2, name="dft_axis2"),
    mk("DFT", ["cx"], ["cx_i"], axis=1, inverse=1, name="idft"),
    mk("DFT", ["cx"], ["cx_h"], onesided=1, name="dft_onesided"),
    mk("DFT", ["rx", "n5"], ["rx_f"], name="dft_cut"),
], [vi("audio", [2, 1600, 1]), vi("win", [64]), vi("cx", [2, 8, 10, 2]), vi("rx", [3, 8, 1])],
   [vi("logmel", None), vi("windows", None), vi("spec_w", None), vi("cx_f", None), vi("cx_i", None), vi("cx_h", None), vi("rx_f", None)],
   [i64("n400", 400), i64("hop", 160), i64("mels", 40), i64("rate", 16000), const("lo", np.array(20.0, np.float32)),
    const("hi", np.array(7600.0, np.float32)), const("eps", np.array(1e-6, np.float32)), i64("n64", 64), i64("n12", 12), i64("n5", 5)], opset=17)

# LpPool (opset 18: dilations, ceil_mode), GlobalLpPool, ReverseSequence, Compress.
save("pool_seq18", [
    mk("LpPool", ["x"], ["lp2"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], name="lp2"),
    mk("LpPool", ["x"], ["lp3"], kernel_shape=[2, 3], strides=[2, 2], dilations=[2, 1], ceil_mode=1, p=3, name="lp3_ceil"),
    mk("LpPool", ["x"], ["lp1"], kernel_shape=[3, 3], auto_pad="SAME_UPPER", p=1, name="lp1_same"),
    mk("GlobalLpPool", ["x"], ["g2"], name="glp2"),
    mk("GlobalLpPool", ["x"], ["g3"], p=3, name="glp3"),
    mk("ReverseSequence", ["seq", "lens"], ["rev_tb"], name="reverse_time_major"),
    mk("ReverseSequence", ["seq_bt", "lens_bt"], ["rev_bt"], batch_axis=0, time_axis=1, name="reverse_batch_major"),
    mk("Compress", ["x", "cond"], ["cmp_axis"], axis=1, name="compress_axis"),
    mk("Compress", ["seq", "cond_flat"], ["cmp_flat"], name="compress_flat"),
], [vi("x", [2, 3, 7, 9]), vi("seq", [5, 4, 3]), vi("seq_bt", [3, 6, 2])],
   [vi("lp2", None), vi("lp3", None), vi("lp1", None), vi("g2", None), vi("g3", None), vi("rev_tb", None), vi("rev_bt", None),
    vi("cmp_axis", None), vi("cmp_flat", None)],
   [const("lens", np.array([5, 1, 3, 2], np.int64)), const("lens_bt", np.array([6, 2, 4], np.int64)),
    helper.make_tensor("cond", TensorProto.BOOL, [2], [0, 1]), helper.make_tensor("cond_flat", TensorProto.BOOL, [7], [1, 0, 1, 1, 0, 0, 1])], opset=18)

# GroupNormalization at opset 18 (scale and bias per group) and 21 (per channel), AffineGrid
# (opset 20) into GridSample, both corner conventions, 2-D and 3-D.
gn_s, gn_b = np.random.default_rng(3).uniform(0.5, 1.5, 6).astype(np.float32), np.random.default_rng(4).uniform(-1, 1, 6).astype(np.float32)
save("groupnorm18", [mk("GroupNormalization", ["x", "s3", "b3"], ["y"], num_groups=3, epsilon=1e-3, name="gn18")], [vi("x", [2, 6, 5, 4])], [vi("y", None)],
     [const("s3", gn_s[:3]), const("b3", gn_b[:3])], opset=18)
save("groupnorm21", [mk("GroupNormalization", ["x", "s6", "b6"], ["y"], num_groups=2, name="gn21"),
                     mk("GroupNormalization", ["x", "s6", "b6"], ["y6"], num_groups=6, name="gn21_per_channel")],
     [vi("x", [2, 6, 5, 4])], [vi("y", None), vi("y6", None)], [const("s6", gn_s), const("b6", gn_b)], opset=21)
save("affinegrid20", [mk("AffineGrid", ["theta", "size"], ["grid"], name="grid"),
                      mk("GridSample", ["img", "grid"], ["y"], name="sample"),
                      mk("AffineGrid", ["theta", "size"], ["grid_c"], align_corners=1, name="grid_corners"),
                      mk("AffineGrid", ["theta3", "size3"], ["grid3"], name="grid3d")],
     [vi("theta", [2, 2, 3]), vi("img", [2, 3, 6, 7]), vi("theta3", [1, 3, 4])], [vi("y", None), vi("grid_c", None), vi("grid3", None)],
     [const("size", np.array([2, 3, 4, 5], np.int64)), const("size3", np.array([1, 1, 2, 3, 4], np.int64))], opset=20)

# Forms of opsets 18-21 that import as several pet ops: Gelu's tanh approximation, Pad's wrap
# mode (negative pads crop first, as ONNX Runtime), ReduceMax/ReduceMin of bool, Resize with
# antialias (linear and cubic, several coordinate modes, exclude_outside; gathered taps, one
# strided Conv, a strided Conv per axis) and keep_aspect_ratio_policy.
save("forms21", [
    mk("Gelu", ["x"], ["gelu"], approximate="tanh", name="gelu_tanh"),
    mk("Pad", ["x", "wrap_pads"], ["wrapped"], mode="wrap", name="pad_wrap"),
    mk("Pad", ["x", "wrap_pads_axes", "", "wrap_axes"], ["wrapped_axes"], mode="wrap", name="pad_wrap_axes"),
    mk("Greater", ["x", "zero"], ["positive"], name="positive"),
    mk("ReduceMax", ["positive", "ax3"], ["any_positive"], keepdims=0, name="any"),
    mk("ReduceMin", ["positive", "ax3"], ["all_positive"], keepdims=1, name="all"),
    mk("Cast", ["any_positive"], ["any_f"], to=TensorProto.FLOAT, name="any_f"),
    mk("Cast", ["all_positive"], ["all_f"], to=TensorProto.FLOAT, name="all_f"),
    mk("Resize", ["img", "", "half"], ["aa_linear"], mode="linear", antialias=1, name="aa_linear"),
    mk("Resize", ["img", "", "", "small"], ["aa_cubic"], mode="cubic", antialias=1, axes=[2, 3], name="aa_cubic"),
    mk("Resize", ["img", "", "", "small"], ["aa_cubic_excl"], mode="cubic", antialias=1, exclude_outside=1, axes=[2, 3],
       coordinate_transformation_mode="pytorch_half_pixel", name="aa_cubic_exclude"),
    mk("Resize", ["img", "", "third"], ["aa_linear_ac"], mode="linear", antialias=1, coordinate_transformation_mode="align_corners",
       name="aa_linear_corners"),
    mk("Resize", ["img", "", "quarter"], ["aa_cubic_quarter"], mode="cubic", antialias=1, name="aa_cubic_quarter"),
    mk("Resize", ["img", "", "", "box"], ["fit_nearest"], keep_aspect_ratio_policy="not_larger", axes=[2, 3], name="not_larger"),
    mk("Resize", ["img", "", "", "box"], ["fill_linear"], mode="linear", keep_aspect_ratio_policy="not_smaller", axes=[2, 3], name="not_smaller"),
], [vi("x", [2, 3, 5, 6]), vi("img", [1, 3, 17, 23])],
   [vi("gelu", None), vi("wrapped", None), vi("wrapped_axes", None), vi("any_f", None), vi("all_f", None), vi("aa_linear", None),
    vi("aa_cubic", None), vi("aa_cubic_excl", None), vi("aa_linear_ac", None), vi("aa_cubic_quarter", None), vi("fit_nearest", None),
    vi("fill_linear", None)],
   [const("wrap_pads", np.array([0, 0, 2, -1, 0, 1, 3, 4], np.int64)), const("wrap_pads_axes", np.array([1, -2, 3, 2], np.int64)),
    const("wrap_axes", np.array([2, -1], np.int64)), const("zero", np.array(0.0, np.float32)), const("ax3", np.array([3], np.int64)),
    const("half", np.array([1, 1, 0.5, 0.5], np.float32)), const("small", np.array([7, 9], np.int64)),
    const("third", np.array([1, 1, 0.34, 0.3], np.float32)), const("quarter", np.array([1, 1, 0.25, 0.25], np.float32)), const("box", np.array([10, 8], np.int64))], opset=21)

# Ops that import as a few pet ops (expand_layout.cpp, expand_loss.cpp): CenterCropPad (crop,
# pad, odd differences, axes), Col2Im (2-D, with strides, pads and dilations and without; ONNX
# Runtime 1.20 reads garbage for 1-D: test_onnx checks that against ONNX's reference), MaxUnpool of
# MaxPool's indices (inferred shape, and output_shape where the pool dropped a row and a
# column), NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (weights, ignore_index, every
# reduction, log_prob), the targets constants so that they name classes.
tg = np.random.default_rng(5).integers(0, 5, [2, 3, 4]).astype(np.int64)
tg[0, 1, 2] = tg[1, 0, 0] = 2  # ignore_index 2 is hit; class 2's weight is then unused there
save("layout_loss18", [
    mk("CenterCropPad", ["img", "crop_shape"], ["cropped"], name="crop_pad"),
    mk("CenterCropPad", ["img", "crop_axes_shape"], ["cropped_axes"], axes=[-1, 2], name="crop_pad_axes"),
    mk("Col2Im", ["cols", "image", "block"], ["im"], strides=[2, 1], pads=[1, 0, 2, 1], dilations=[1, 2], name="col2im"),
    mk("Col2Im", ["cols1", "image1", "block1"], ["im1"], name="col2im_plain"),
    mk("MaxPool", ["pool_in"], ["pooled", "where"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
    mk("MaxUnpool", ["pooled", "where"], ["unpooled"], kernel_shape=[2, 2], strides=[2, 2], name="unpool"),
    mk("MaxPool", ["pool_odd"], ["pooled_odd", "where_odd"], kernel_shape=[2, 2], strides=[2, 2], name="pool_odd"),
    mk("MaxUnpool", ["pooled_odd", "where_odd", "odd_shape"], ["unpooled_odd"], kernel_shape=[2, 2], strides=[2, 2], name="unpool_shape"),
    mk("LogSoftmax", ["scores"], ["logp"], axis=1, name="logp"),
    mk("NegativeLogLikelihoodLoss", ["logp", "target", "class_w"], ["nll_mean_w_ii"], ignore_index=2, name="nll_mean"),
    mk("NegativeLogLikelihoodLoss", ["logp", "target"], ["nll_none"], reduction="none", name="nll_none"),
    mk("NegativeLogLikelihoodLoss", ["logp", "target"], ["nll_sum_ii"], reduction="sum", ignore_index=2, name="nll_sum"),
    mk("SoftmaxCrossEntropyLoss", ["scores", "target"], ["sce_mean", "sce_logp"], name="sce_mean"),
    mk("SoftmaxCrossEntropyLoss", ["scores", "target", "class_w"], ["sce_none_w"], reduction="none", name="sce_none"),
    mk("SoftmaxCrossEntropyLoss", ["scores2", "target2"], ["sce_mean_ii"], ignore_index=0, name="sce_2d"),
], [vi("img", [2, 3, 7, 8]), vi("cols", [2, 12, 30]), vi("cols1", [1, 4, 20]), vi("pool_in", [2, 3, 6, 8]), vi("pool_odd", [1, 2, 7, 9]),
    vi("scores", [2, 5, 3, 4]), vi("scores2", [6, 4])],
   [vi("cropped", None), vi("cropped_axes", None), vi("im", None), vi("im1", None), vi("unpooled", None), vi("unpooled_odd", None),
    vi("nll_mean_w_ii", None), vi("nll_none", None), vi("nll_sum_ii", None), vi("sce_mean", None), vi("sce_logp", None),
    vi("sce_none_w", None), vi("sce_mean_ii", None)],
   [const("crop_shape", np.array([1, 4, 4, 11], np.int64)), const("crop_axes_shape", np.array([5, 9], np.int64)),
    const("image", np.array([9, 8], np.int64)), const("block", np.array([2, 3], np.int64)),
    const("image1", np.array([5, 6], np.int64)), const("block1", np.array([2, 2], np.int64)),
    const("odd_shape", np.array([1, 2, 7, 9], np.int64)), const("class_w", np.array([0.5, 1, 2, 1.5, 0.25], np.float32)),
    const("target", tg), const("target2", np.array([0, 3, 1, 0, 2, 3], np.int64))], opset=18)

# DeformConv (opset 19; expand_layout.cpp: a GridSample of every kernel tap, then a MatMul):
# groups, offset groups, strides, dilations, asymmetric pads, a mask and a bias; offsets and
# mask are inputs (random in [-2, 2]: taps fall outside X too), X of 7 x 9 (padded to 8 x 16
# for exact coordinates).
dw_rng = np.random.default_rng(6)
save("deformconv19", [
    mk("DeformConv", ["x", "w", "offset", "b", "mask"], ["y"], group=2, offset_group=2, strides=[2, 1], dilations=[1, 2],
       pads=[1, 2, 0, 1], name="deform"),
    mk("DeformConv", ["x", "w1", "offset1"], ["y1"], kernel_shape=[2, 2], name="deform_plain"),
], [vi("x", [2, 4, 7, 9]), vi("offset", [2, 2 * 9 * 2, 3, 8]), vi("mask", [2, 2 * 9, 3, 8]), vi("offset1", [2, 8, 6, 8])],
   [vi("y", None), vi("y1", None)],
   [const("w", dw_rng.uniform(-1, 1, [6, 2, 3, 3]).astype(np.float32)), const("b", dw_rng.uniform(-1, 1, [6]).astype(np.float32)),
    const("w1", dw_rng.uniform(-1, 1, [3, 4, 2, 2]).astype(np.float32))], opset=19)

# float16 and bfloat16 (computed as float32; onnx::Model::narrow_float): a float16 CNN with a
# float16 interface (weights raw, a Constant's values as bits in int32_data, a ConstantOfShape
# of float16), a float16 output beside a float32 one (a Cast), and a mixed-precision branch
# as converters write it (float32 in, Cast to float16, float16 MatMul, Cast back); its batch
# N is symbolic, so pet optimize writes it through onnx::generalise.
H = TensorProto.FLOAT16
h_rng = np.random.default_rng(11)
hw = lambda *s: const(f"h{len(s)}_{'x'.join(map(str, s))}", h_rng.uniform(-0.5, 0.5, s).astype(np.float16))
cw, cb, gw, mw = hw(8, 3, 3, 3), hw(8), hw(10, 128), hw(16, 12)
save("float16_17", [
    mk("Conv", ["x", cw.name, cb.name], ["c"], pads=[1, 1, 1, 1], name="conv"),
    mk("Relu", ["c"], ["r"], name="relu"),
    mk("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], strides=[3, 3], name="pool"),
    mk("Flatten", ["p"], ["f"], name="flat"),
    mk("Gemm", ["f", gw.name], ["g"], transB=1, name="fc"),
    mk("Constant", [], ["shift"], value=helper.make_tensor("shift", H, [10], np.linspace(-1, 1, 10).astype(np.float16)), name="shift"),
    mk("Add", ["g", "shift"], ["gs"], name="add_shift"),
    mk("Softmax", ["gs"], ["y"], axis=1, name="softmax"),
    mk("ReduceMean", ["c"], ["cm"], axes=[2, 3], keepdims=0, name="mean"),
    mk("Cast", ["cm"], ["feat"], to=F, name="to_float"),
    mk("ConstantOfShape", ["ones_shape"], ["ones"], value=helper.make_tensor("one", H, [1], [0.5]), name="ones"),
    mk("Cast", ["t"], ["t16"], to=H, name="to_half"),
    mk("MatMul", ["t16", mw.name], ["tm"], name="matmul"),
    mk("Add", ["tm", "ones"], ["ta"], name="add_ones"),
    mk("Sigmoid", ["ta"], ["ts"], name="sigmoid"),
    mk("Cast", ["ts"], ["u"], to=F, name="to_float_u"),
], [vi("x", ["N", 3, 12, 12], H), vi("t", [4, 16])], [vi("y", ["N", 10], H), vi("feat", ["N", 8]), vi("u", [4, 12])],
   [cw, cb, gw, mw, const("ones_shape", np.array([4, 12], np.int64))], opset=17)
# bfloat16 weights read through Casts (ONNX Runtime's CPU kernels take bfloat16 in Cast only)
save("bfloat16_17", [
    mk("Cast", ["wb"], ["wf"], to=F, name="w_to_float"),
    mk("MatMul", ["x", "wf"], ["m"], name="matmul"),
    mk("Cast", ["m"], ["mb"], to=TensorProto.BFLOAT16, name="to_bf16"),
    mk("Cast", ["mb"], ["y"], to=F, name="back"),
], [vi("x", [3, 8])], [vi("y", [3, 5])],
   [helper.make_tensor("wb", TensorProto.BFLOAT16, [8, 5], h_rng.uniform(-1, 1, 40).astype(np.float32))], opset=17)
