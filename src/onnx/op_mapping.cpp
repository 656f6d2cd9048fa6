// ONNX <-> pet op mapping, one block per op family (import left, export right).
#include "op_mapping.hpp"

#include <cmath>
#include <numeric>

#include "pet/eval/value.hpp"

namespace pet::onnx::detail {

/// Most elements of a constant an import-time op (ConstantOfShape, Range) may make: 2^28
/// (1 GiB of floats); a model asking for more is refused, not allocated.
constexpr int64_t kMaxMadeConstant = int64_t(1) << 28;

using ::onnx::AttributeProto;
using ::onnx::NodeProto;

// ---------------------------------------------------------------- NodeCtx
int NodeCtx::num_outputs() const {
  int n = node.output_size();
  while (n > 0 && node.output(n - 1).empty()) --n;
  return n;
}

const AttributeProto* NodeCtx::attr(std::string_view name) const {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

namespace {
void expect_attr_type(const AttributeProto& a, AttributeProto::AttributeType t, std::string_view what) {
  if (a.type() != t && !(a.type() == AttributeProto::UNDEFINED))
    throw InvalidInput(cat("attribute '", a.name(), "' must be ", what, " but has type ",
                           AttributeProto::AttributeType_Name(a.type())));
}
}  // namespace

int64_t NodeCtx::i(std::string_view name, int64_t def) const {
  const auto* a = attr(name);
  if (!a) return def;
  expect_attr_type(*a, AttributeProto::INT, "an int");
  return a->i();
}
bool NodeCtx::flag(std::string_view name, bool def) const {
  const int64_t v = i(name, def ? 1 : 0);
  if (v != 0 && v != 1) throw InvalidInput(cat("attribute '", name, "' must be 0 or 1, got ", v));
  return v == 1;
}
float NodeCtx::f(std::string_view name, float def) const {
  const auto* a = attr(name);
  if (!a) return def;
  expect_attr_type(*a, AttributeProto::FLOAT, "a float");
  return a->f();
}
std::string NodeCtx::s(std::string_view name, const std::string& def) const {
  const auto* a = attr(name);
  if (!a) return def;
  expect_attr_type(*a, AttributeProto::STRING, "a string");
  return a->s();
}
std::vector<int64_t> NodeCtx::ints(std::string_view name, std::vector<int64_t> def) const {
  const auto* a = attr(name);
  if (!a) return def;
  expect_attr_type(*a, AttributeProto::INTS, "a list of ints");
  return {a->ints().begin(), a->ints().end()};
}
std::vector<int64_t> NodeCtx::const_ints(int idx, std::string_view what) const {
  if (!present(idx)) throw InvalidInput(cat(what, " (input ", idx, ") is missing"));
  const auto* c = computed(idx);
  if (!c)
    throw Unsupported(cat(what, " (input ", idx, " '", node.input(idx),
                          "') must be a constant: pet needs static shapes and attributes"));
  if (is_float(c->first)) throw InvalidInput(cat(what, " (input ", idx, ") must be an integer tensor"));
  const Tensor<int64_t> t = pet::const_ints(c->second);
  if (t.rank() > 1) throw InvalidInput(cat(what, " (input ", idx, ") must be 1-D, got shape ", t.shape()));
  return t.vec();
}
double NodeCtx::const_scalar(int idx, std::string_view what) const {
  if (!present(idx)) throw InvalidInput(cat(what, " (input ", idx, ") is missing"));
  const auto* c = computed(idx);
  if (!c)
    throw Unsupported(cat(what, " (input ", idx, " '", node.input(idx), "') must be a constant"));
  return std::visit([&](const auto& t) -> double {
    if (t.size() != 1) throw InvalidInput(cat(what, " (input ", idx, ") must hold one value, got shape ", t.shape()));
    return double(t[0]);
  }, c->second);
}

// ---------------------------------------------------------------- ExportCtx
std::string ExportCtx::unique(const std::string& base) {
  std::string n = base;
  for (int i = 1; names->count(n); ++i) n = cat(base, "_", i);
  names->insert(n);
  return n;
}
std::string ExportCtx::initializer(const std::string& base, DType dtype, const ConstValue& v) {
  auto* t = g->add_initializer();
  t->set_name(unique(base));
  tensor_to_proto(dtype, v, t);
  return t->name();
}
std::string ExportCtx::ints(const std::string& base, const std::vector<int64_t>& v) {
  return initializer(base, DType::Int64, Tensor<int64_t>({int64_t(v.size())}, v));
}
std::string ExportCtx::scalar(const std::string& base, float v) {
  return initializer(base, DType::Float32, Tensor<float>(Shape{}, std::vector<float>{v}));
}
NodeProto* ExportCtx::add(std::string_view op_type, const std::string& name, const std::vector<std::string>& in,
                          const std::vector<std::string>& out) {
  auto* n = g->add_node();
  n->set_op_type(std::string(op_type));
  // Node names must be unique in a file (ONNX Runtime refuses "two nodes with same node
  // name"; onnx.checker does not check it): a repeated one gets a suffix.
  std::string nm = name;
  for (int i = 1; !node_names.insert(nm).second; ++i) nm = cat(name, "_", i);
  n->set_name(nm);
  for (const auto& s : in) n->add_input(s);
  for (const auto& s : out) n->add_output(s);
  return n;
}

namespace {
void set(NodeProto* n, const char* name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::INT);
  a->set_i(v);
}
void set(NodeProto* n, const char* name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::FLOAT);
  a->set_f(v);
}
void set(NodeProto* n, const char* name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::STRING);
  a->set_s(v);
}
void set(NodeProto* n, const char* name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

AutoPad auto_pad_of(const NodeCtx& c) {
  std::string s = c.s("auto_pad", "NOTSET");
  if (s == "NOTSET") return AutoPad::NotSet;
  if (c.attr("pads"))
    throw InvalidInput(cat("has both auto_pad '", s, "' and explicit pads; ONNX allows pads only with auto_pad NOTSET"));
  if (s == "SAME_UPPER") return AutoPad::SameUpper;
  if (s == "SAME_LOWER") return AutoPad::SameLower;
  if (s == "VALID") return AutoPad::Valid;
  throw InvalidInput(cat("auto_pad '", s, "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID"));
}

std::vector<int> first_inputs(const NodeCtx& c, int n) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i)
    if (c.present(i)) v.push_back(i);
  return v;
}
std::vector<int> all_inputs(const NodeCtx& c) { return first_inputs(c, c.node.input_size()); }

/// The sliding-window attributes pools and convs share.
template <class W>
void window_attrs(const NodeCtx& c, W& w) {
  w.kernel_shape = c.ints("kernel_shape");
  w.strides = c.ints("strides");
  w.pads = c.ints("pads");
  w.dilations = c.ints("dilations");
  w.auto_pad = auto_pad_of(c);
}
template <class W>
void import_window(const NodeCtx& c, W& w) {
  window_attrs(c, w);
  w.ceil_mode = c.flag("ceil_mode", false);
  // ceil_mode beside auto_pad: ONNX's shape inference rounds up after the SAME or VALID pads,
  // ONNX Runtime 1.20 gives SAME its ceil(n / stride) and VALID a last window of garbage, and
  // ONNX's reference refuses it or answers otherwise. Where rounding up changes no extent it
  // is dropped; where it does, the model is refused rather than answered one of those ways.
  if (!w.ceil_mode || w.auto_pad == AutoPad::NotSet) return;
  const auto t = c.type(0);
  if (!t || t->shape.size() < 3 || w.kernel_shape.size() != t->shape.size() - 2) return;  // infer says what is wrong
  for (size_t i = 0; i < w.kernel_shape.size(); ++i) {
    const int64_t n = t->shape[2 + i], k = w.kernel_shape[i];
    const int64_t s = i < w.strides.size() ? w.strides[i] : 1, d = i < w.dilations.size() ? w.dilations[i] : 1;
    if (n < 1 || k < 1 || s < 1 || d < 1 || n > (int64_t(1) << 40) || k > (int64_t(1) << 24) || s > (int64_t(1) << 24) || d > (int64_t(1) << 24))
      return;  // (infer refuses these)
    const int64_t dk = (k - 1) * d + 1;
    const int64_t pad = w.auto_pad == AutoPad::Valid ? 0 : std::max<int64_t>(0, ((n + s - 1) / s - 1) * s + dk - n);
    if (ops::detail::window_out(n, k, s, d, 0, pad, true) != ops::detail::window_out(n, k, s, d, 0, pad, false))
      throw Unsupported(cat("ceil_mode 1 with auto_pad ", c.s("auto_pad", ""), " rounds spatial dim ", i, " (", n, ", kernel ", k,
                            ", stride ", s, ") up to another extent; ONNX's shape inference, its reference and ONNX Runtime "
                            "disagree on that output: give explicit pads instead"));
  }
  w.ceil_mode = false;
}

DType cast_target(int64_t to) {
  if (to < INT32_MIN || to > INT32_MAX) throw InvalidInput(cat("Cast 'to' = ", to, " is not an ONNX type"));
  return dtype_from_onnx(int32_t(to), "Cast target");
}

template <class R>
Mapped import_reduce(const NodeCtx& c, bool axes_as_input) {
  R r;
  r.keepdims = c.flag("keepdims", true);
  if (axes_as_input) {
    r.noop_with_empty_axes = c.flag("noop_with_empty_axes", false);
    if (c.present(1)) r.axes = c.const_ints(1, "axes");
  } else {
    r.axes = c.ints("axes");
  }
  return {r, {0}};
}

/// The attributes of Conv, ConvInteger and QLinearConv.
template <class O>
void conv_attrs(const NodeCtx& c, O& o) {
  window_attrs(c, o);
  o.group = c.i("group", 1);
}

}  // namespace

ops::Resize resize_attrs(const NodeCtx& c) {
  if (c.opset < 11) throw Unsupported("Resize before opset 11 (Upsample semantics, no coordinate_transformation_mode)");
  ops::Resize o;
  const std::string mode = c.s("mode", "nearest");
  if (mode == "linear") o.mode = ops::Resize::Mode::Linear;
  else if (mode == "cubic") o.mode = ops::Resize::Mode::Cubic;
  else if (mode != "nearest") throw InvalidInput(cat("mode '", mode, "' is not nearest, linear or cubic"));
  o.cubic_coeff_a = c.f("cubic_coeff_a", -0.75f);
  o.exclude_outside = c.flag("exclude_outside", false);
  using C = ops::Resize::Coord;
  const std::string ct = c.s("coordinate_transformation_mode", "half_pixel");
  static const std::map<std::string, C, std::less<>> coords{{"half_pixel", C::HalfPixel}, {"half_pixel_symmetric", C::HalfPixelSymmetric},
                                                           {"pytorch_half_pixel", C::PytorchHalfPixel}, {"align_corners", C::AlignCorners},
                                                           {"asymmetric", C::Asymmetric}, {"tf_half_pixel_for_nn", C::TfHalfPixelForNN},
                                                           {"tf_crop_and_resize", C::TfCropAndResize}};
  if (auto it = coords.find(ct); it != coords.end()) o.coord = it->second;
  else throw InvalidInput(cat("coordinate_transformation_mode '", ct, "' is not one of half_pixel, half_pixel_symmetric, pytorch_half_pixel, ",
                              "align_corners, asymmetric, tf_half_pixel_for_nn, tf_crop_and_resize"));
  if (o.coord == C::TfCropAndResize) {  // the region of interest (input 1), and the value outside it
    if (!c.present(1)) throw InvalidInput("tf_crop_and_resize needs roi (input 1)");
    const auto* v = c.constant(1);
    if (!v) throw Unsupported(cat("roi (input 1 '", c.node.input(1), "') must be a constant"));
    if (!is_float(v->first)) throw InvalidInput("roi (input 1) must be a float tensor");
    for (float f : std::get<Tensor<float>>(v->second).vec()) o.roi.push_back(double(f));
    o.extrapolation_value = c.f("extrapolation_value", 0.f);
  }
  using R = ops::Resize::Round;
  const std::string nm = c.s("nearest_mode", "round_prefer_floor");
  static const std::map<std::string, R, std::less<>> rounds{{"round_prefer_floor", R::PreferFloor}, {"round_prefer_ceil", R::PreferCeil},
                                                           {"floor", R::Floor}, {"ceil", R::Ceil}};
  if (auto it = rounds.find(nm); it != rounds.end()) o.nearest_mode = it->second;
  else throw InvalidInput(cat("nearest_mode '", nm, "' is not one of round_prefer_floor, round_prefer_ceil, floor, ceil"));
  o.axes = c.ints("axes");
  auto has_values = [&](int i) {
    if (!c.present(i)) return false;
    const auto* v = c.constant(i);
    if (!v) throw Unsupported(cat(i == 2 ? "scales" : "sizes", " (input ", i, " '", c.node.input(i), "') must be a constant"));
    return std::visit([](const auto& t) { return t.size() > 0; }, v->second);
  };
  const bool scales = has_values(2), sizes = c.node.input_size() > 3 && has_values(3);
  if (scales == sizes) throw InvalidInput(scales ? "both scales and sizes are given" : "neither scales nor sizes is given");
  if (sizes) {
    o.sizes = c.const_ints(3, "sizes");
  } else {
    const auto* v = c.constant(2);
    if (!is_float(v->first)) throw InvalidInput("scales (input 2) must be a float tensor");
    for (float f : std::get<Tensor<float>>(v->second).vec()) o.scales.push_back(double(f));
  }
  return o;
}

namespace {

std::map<std::string, ImportFn, std::less<>> make_table() {
  std::map<std::string, ImportFn, std::less<>> t;
  t["Conv"] = [](const NodeCtx& c) {
    ops::Conv o;
    conv_attrs(c, o);
    return Mapped{o, first_inputs(c, 3)};
  };
  t["ConvTranspose"] = [](const NodeCtx& c) {
    ops::ConvTranspose o;
    o.auto_pad = auto_pad_of(c);
    o.output_shape = c.ints("output_shape");
    o.kernel_shape = c.ints("kernel_shape");
    o.strides = c.ints("strides");
    o.pads = c.ints("pads");
    o.dilations = c.ints("dilations");
    o.output_padding = c.ints("output_padding");
    o.group = c.i("group", 1);
    return Mapped{o, first_inputs(c, 3)};
  };
  t["MatMul"] = [](const NodeCtx& c) { return Mapped{ops::MatMul{}, {0, 1}}; };
  t["Gemm"] = [](const NodeCtx& c) {
    ops::Gemm o;
    o.alpha = c.f("alpha", 1.0f);
    o.beta = c.f("beta", 1.0f);
    o.trans_a = c.flag("transA", false);
    o.trans_b = c.flag("transB", false);
    if (c.opset < 7 && !c.flag("broadcast", false) && c.present(2)) {  // no broadcasting then: C is [M, N]
      const auto a = c.type(0), b = c.type(1), cc = c.type(2);
      if (!a || !b || !cc || a->shape.size() != 2 || b->shape.size() != 2) throw Unsupported("Gemm before opset 7 without broadcast, operands of unknown shape");
      const Shape mn{a->shape[o.trans_a ? 1 : 0], b->shape[o.trans_b ? 0 : 1]};
      if (cc->shape != mn) throw InvalidInput(cat("Gemm before opset 7 without broadcast needs C of shape ", mn, " (M, N), got ", cc->shape));
    }
    return Mapped{o, first_inputs(c, 3)};
  };
  auto binary = [](Op op) {
    return [op](const NodeCtx& c) {
      if (c.attr("axis")) throw Unsupported("legacy broadcasting with an 'axis' attribute (opset < 7)");
      return Mapped{op, {0, 1}};
    };
  };
  t["Equal"] = binary(ops::Equal{});
  t["Less"] = binary(ops::Less{});
  t["LessOrEqual"] = binary(ops::LessOrEqual{});
  t["Greater"] = binary(ops::Greater{});
  t["GreaterOrEqual"] = binary(ops::GreaterOrEqual{});
  t["And"] = binary(ops::And{});
  t["Or"] = binary(ops::Or{});
  t["Xor"] = binary(ops::Xor{});
  t["Not"] = [](const NodeCtx&) { return Mapped{ops::Not{}, {0}}; };
  t["BitwiseAnd"] = binary(ops::BitwiseAnd{});  // opset 18
  t["BitwiseOr"] = binary(ops::BitwiseOr{});
  t["BitwiseXor"] = binary(ops::BitwiseXor{});
  t["BitwiseNot"] = [](const NodeCtx&) { return Mapped{ops::BitwiseNot{}, {0}}; };
  t["BitShift"] = [](const NodeCtx& c) {  // opset 11
    const std::string d = c.s("direction", "");
    if (d != "LEFT" && d != "RIGHT") throw InvalidInput(cat("direction '", d, "' (LEFT or RIGHT)"));
    ops::BitShift o;
    o.direction = d == "LEFT" ? ops::BitShift::Direction::Left : ops::BitShift::Direction::Right;
    return Mapped{o, {0, 1}};
  };
  t["Det"] = [](const NodeCtx&) { return Mapped{ops::Det{}, {0}}; };  // opset 11
  t["Mod"] = [](const NodeCtx& c) { return Mapped{ops::Mod{.fmod = c.i("fmod", 0)}, {0, 1}}; };
  // ConstantOfShape and Range make tensors whose shape is an input's value: pet's shapes are
  // static, so that value must be known at import (a constant, or folded from the model's
  // bound shapes), and the result is a constant.
  t["ConstantOfShape"] = [](const NodeCtx& c) {
    const std::vector<int64_t> shape = c.const_ints(0, "input (the output's shape)");
    int64_t n = 1;
    for (int64_t d : shape) {
      if (d < 0) throw InvalidInput(cat("output shape ", Shape(shape), " has a negative dim"));
      if (d > 0 && n > kMaxMadeConstant / d) throw Unsupported(cat("output shape ", Shape(shape), " holds over 2^28 elements: too large a constant"));
      n *= d;
    }
    // The fill: attribute 'value' (one element of any type), else float 0.
    std::pair<DType, ConstValue> fill{DType::Float32, Tensor<float>({1}, 0.f)};
    if (const auto* a = c.attr("value")) {
      expect_attr_type(*a, AttributeProto::TENSOR, "a tensor");
      fill = tensor_from_proto(a->t(), ".", "value");
    }
    ops::Constant o;
    o.dtype = fill.first;
    o.value = std::visit([&](const auto& t) -> Value<float> {
      using E = std::decay_t<decltype(t[0])>;
      if (t.size() != 1) throw InvalidInput(cat("attribute 'value' must hold one element, got shape ", t.shape()));
      if constexpr (std::is_same_v<E, float>) return Tensor<float>(Shape(shape), t[0]);
      else return Tensor<int64_t>(Shape(shape), int64_t(t[0]));
    }, fill.second);
    return Mapped{o, {}};
  };
  t["Range"] = [](const NodeCtx& c) {
    const auto *start = c.computed(0), *limit = c.computed(1), *delta = c.computed(2);
    for (int i = 0; i < 3; ++i)
      if (!c.present(i)) throw InvalidInput(cat("input ", i, " is missing (start, limit and delta are all required)"));
    if (!start || !limit || !delta) throw Unsupported("start, limit and delta must be constants: the output's length depends on them and pet needs static shapes");
    if (start->first != limit->first || start->first != delta->first)
      throw InvalidInput(cat("start, limit and delta must have one type, got ", dtype_name(start->first), ", ", dtype_name(limit->first), " and ",
                             dtype_name(delta->first)));
    const double s0 = c.const_scalar(0, "start"), l = c.const_scalar(1, "limit"), d = c.const_scalar(2, "delta");
    if (d == 0) throw InvalidInput("delta is 0");
    const double count = std::max(std::ceil((l - s0) / d), 0.0);
    if (!(count <= double(kMaxMadeConstant))) throw Unsupported(cat("Range(", s0, ", ", l, ", ", d, ") holds over 2^28 elements: too large a constant"));
    const int64_t n = int64_t(count);
    ops::Constant o;
    o.dtype = start->first;
    if (is_float(o.dtype)) {
      Tensor<float> v({n});
      for (int64_t i = 0; i < n; ++i) v[i] = float(s0 + double(i) * d);  // ONNX: start + i * delta
      o.value = v;
    } else {
      const int64_t si = int64_t(s0), di = int64_t(d);
      Tensor<int64_t> v({n});
      for (int64_t i = 0; i < n; ++i) v[i] = si + i * di;
      o.value = v;
    }
    return Mapped{o, {}};
  };
  // ScatterND, ScatterElements and the deprecated Scatter (opsets 9-10: ScatterElements
  // without reduction). Reductions from opset 16 (add, mul) and 18 (max, min).
  auto scatter_reduction = [](const NodeCtx& c) {
    for (int i = 0; i < 3; ++i)
      if (!c.present(i)) throw InvalidInput(cat("input ", i, " is missing (data, indices and updates are all required)"));
    const std::string r = c.s("reduction", "none");
    using R = ops::ScatterReduction;
    if (r == "none") return R::None;
    if (r == "add") return R::Add;
    if (r == "mul") return R::Mul;
    if (r == "max") return R::Max;
    if (r == "min") return R::Min;
    throw InvalidInput(cat("reduction '", r, "' is not one of none, add, mul, max, min"));
  };
  t["ScatterND"] = [scatter_reduction](const NodeCtx& c) { return Mapped{ops::ScatterND{.reduction = scatter_reduction(c)}, {0, 1, 2}}; };
  t["ScatterElements"] = [scatter_reduction](const NodeCtx& c) {
    return Mapped{ops::ScatterElements{.axis = c.i("axis", 0), .reduction = scatter_reduction(c)}, {0, 1, 2}};
  };
  t["Scatter"] = [scatter_reduction](const NodeCtx& c) {
    if (c.opset >= 11) throw InvalidInput("Scatter is deprecated from opset 11 (ScatterElements replaces it)");
    return Mapped{ops::ScatterElements{.axis = c.i("axis", 0), .reduction = scatter_reduction(c)}, {0, 1, 2}};
  };
  // QuantizeLinear and DequantizeLinear: opsets 10 (per tensor), 13 (per axis), 19 (float8
  // types: refused by type), 21 (output_dtype; blocked: expand.cpp's form_table).
  auto no_blocks = [](const NodeCtx& c) {
    if (c.i("block_size", 0) != 0)
      throw Unsupported(cat("blocked quantization (block_size ", c.i("block_size", 0), "); pet quantizes per tensor or per axis"));
  };
  t["QuantizeLinear"] = [no_blocks](const NodeCtx& c) {
    no_blocks(c);
    ops::QuantizeLinear o;
    o.axis = c.i("axis", 1);
    if (c.present(2)) {
      const auto zt = c.type(2);
      if (!zt) throw InvalidInput("y_zero_point (input 2) has no type");
      o.to = zt->dtype;
    }
    if (c.attr("output_dtype") && c.i("output_dtype", 0) != 0) {
      const int64_t od = c.i("output_dtype", 0);
      if (od < INT32_MIN || od > INT32_MAX) throw InvalidInput(cat("output_dtype ", od, " is not an ONNX type"));
      const DType d = dtype_from_onnx(int32_t(od), "output_dtype");
      if (c.present(2) && d != o.to)
        throw InvalidInput(cat("output_dtype is ", dtype_name(d), " but y_zero_point is ", dtype_name(o.to)));
      o.to = d;
    }
    if (!is_int8(o.to)) throw Unsupported(cat("quantization to ", dtype_name(o.to), "; pet quantizes to int8 and uint8"));
    return Mapped{o, c.present(2) ? std::vector<int>{0, 1, 2} : std::vector<int>{0, 1}};
  };
  t["DequantizeLinear"] = [no_blocks](const NodeCtx& c) {
    no_blocks(c);
    return Mapped{ops::DequantizeLinear{.axis = c.i("axis", 1)}, c.present(2) ? std::vector<int>{0, 1, 2} : std::vector<int>{0, 1}};
  };
  // ONNX Runtime's quantizers' integer ops: dynamic quantization (DynamicQuantizeLinear,
  // MatMulInteger, ConvInteger) and the QOperator format (QLinearMatMul, QLinearConv).
  t["DynamicQuantizeLinear"] = [](const NodeCtx&) { return Mapped{ops::DynamicQuantizeLinear{}, {0}}; };
  auto required = [](const NodeCtx& c, std::initializer_list<const char*> names) {
    int i = 0;
    for (const char* name : names) {
      if (!c.present(i)) throw InvalidInput(cat("input ", i, " (", name, ") is required"));
      ++i;
    }
  };
  auto output_type = [](const NodeCtx& c, int zero) {
    const auto zt = c.type(zero);
    if (!zt) throw InvalidInput(cat("input ", zero, " (y_zero_point) has no type"));
    if (!is_int8(zt->dtype)) throw InvalidInput(cat("y_zero_point must be int8 or uint8, got ", dtype_name(zt->dtype)));
    return zt->dtype;
  };
  t["MatMulInteger"] = [required](const NodeCtx& c) {
    required(c, {"A", "B"});
    return Mapped{ops::MatMulInteger{.a_zero = c.present(2), .b_zero = c.present(3)}, first_inputs(c, 4)};
  };
  t["ConvInteger"] = [required](const NodeCtx& c) {
    required(c, {"x", "w"});
    ops::ConvInteger o{.x_zero = c.present(2), .w_zero = c.present(3)};
    conv_attrs(c, o);
    return Mapped{o, first_inputs(c, 4)};
  };
  t["QLinearMatMul"] = [required, output_type](const NodeCtx& c) {
    required(c, {"a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point"});
    return Mapped{ops::QLinearMatMul{.to = output_type(c, 7)}, first_inputs(c, 8)};
  };
  t["QLinearConv"] = [required, output_type](const NodeCtx& c) {
    required(c, {"x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point"});
    ops::QLinearConv o{.to = output_type(c, 7)};
    conv_attrs(c, o);
    return Mapped{o, first_inputs(c, 9)};
  };
  // DepthToSpace and SpaceToDepth are reshape-transpose-reshape: pet's R/T op.
  auto block_rt = [](bool to_space) {
    return [to_space](const NodeCtx& c) {
      const auto x = c.type(0);
      if (!x) throw InvalidInput("input 0 is missing");
      if (x->shape.size() != 4) throw InvalidInput(cat("input must have rank 4 (N, C, H, W), got shape ", x->shape));
      if (!c.attr("blocksize")) throw InvalidInput("attribute 'blocksize' is required");
      const int64_t b = c.i("blocksize", 0);
      if (b < 1) throw InvalidInput(cat("blocksize must be positive, got ", b));
      pet::detail::expect_bounded({b}, "blocksize");
      const int64_t n = x->shape[0], ch = x->shape[1], h = x->shape[2], w = x->shape[3];
      ops::RT rt;
      if (to_space) {
        if (ch % (b * b)) throw InvalidInput(cat("channels (", ch, ") must be a multiple of blocksize^2 (", b * b, ")"));
        const std::string mode = c.s("mode", "DCR");
        if (mode == "DCR") rt.split_shape = {n, b, b, ch / (b * b), h, w}, rt.perm = {0, 3, 4, 1, 5, 2};
        else if (mode == "CRD") rt.split_shape = {n, ch / (b * b), b, b, h, w}, rt.perm = {0, 1, 4, 2, 5, 3};
        else throw InvalidInput(cat("mode '", mode, "': DCR or CRD"));
        rt.out_shape = {n, ch / (b * b), h * b, w * b};
      } else {
        if (h % b || w % b) throw InvalidInput(cat("height and width (", h, ", ", w, ") must be multiples of blocksize (", b, ")"));
        rt.split_shape = {n, ch, h / b, b, w / b, b};
        rt.perm = {0, 3, 5, 1, 2, 4};
        rt.out_shape = {n, ch * b * b, h / b, w / b};
      }
      return Mapped{rt, {0}};
    };
  };
  t["DepthToSpace"] = block_rt(true);
  t["SpaceToDepth"] = block_rt(false);
  t["Add"] = binary(ops::Add{});
  t["Sub"] = binary(ops::Sub{});
  t["Mul"] = binary(ops::Mul{});
  t["Div"] = binary(ops::Div{});
  t["Pow"] = binary(ops::Pow{});
  auto unary = [](Op op) { return [op](const NodeCtx&) { return Mapped{op, {0}}; }; };
  t["Sqrt"] = unary(ops::Sqrt{});
  t["Erf"] = unary(ops::Erf{});
  t["Exp"] = unary(ops::Exp{});
  t["Sin"] = unary(ops::Sin{});
  t["Cos"] = unary(ops::Cos{});
  t["Tan"] = unary(ops::Tan{});
  t["Asin"] = unary(ops::Asin{});
  t["Acos"] = unary(ops::Acos{});
  t["Atan"] = unary(ops::Atan{});
  t["Sinh"] = unary(ops::Sinh{});
  t["Cosh"] = unary(ops::Cosh{});
  t["Asinh"] = unary(ops::Asinh{});
  t["Acosh"] = unary(ops::Acosh{});
  t["Atanh"] = unary(ops::Atanh{});
  t["Neg"] = unary(ops::Neg{});
  t["Relu"] = unary(ops::Relu{});
  t["Sigmoid"] = unary(ops::Sigmoid{});
  t["Tanh"] = unary(ops::Tanh{});
  t["Gelu"] = [](const NodeCtx& c) {  // opset 20
    if (const std::string a = c.s("approximate", "none"); a != "none")  // 'tanh': expand.cpp's form_table
      throw InvalidInput(cat("Gelu's approximate is '", a, "'; it must be 'none' or 'tanh'"));
    return Mapped{ops::Gelu{}, {0}};
  };
  t["Identity"] = unary(ops::Identity{});
  t["Abs"] = unary(ops::Abs{});
  t["Log"] = unary(ops::Log{});
  t["Reciprocal"] = unary(ops::Reciprocal{});
  t["Floor"] = unary(ops::Floor{});
  t["Ceil"] = unary(ops::Ceil{});
  t["Round"] = unary(ops::Round{});
  t["Sign"] = unary(ops::Sign{});
  t["Softsign"] = unary(ops::Softsign{});
  t["Softplus"] = unary(ops::Softplus{});
  t["Mish"] = unary(ops::Mish{});
  t["HardSwish"] = unary(ops::HardSwish{});
  t["Elu"] = [](const NodeCtx& c) { return Mapped{ops::Elu{.alpha = c.f("alpha", 1.0f)}, {0}}; };
  t["Celu"] = [](const NodeCtx& c) {
    ops::Celu o;
    o.alpha = c.f("alpha", 1.0f);
    if (o.alpha == 0) throw InvalidInput("alpha must not be 0");
    return Mapped{o, {0}};
  };
  t["ThresholdedRelu"] = [](const NodeCtx& c) {
    ops::ThresholdedRelu o;
    o.alpha = c.f("alpha", 1.0f);
    return Mapped{o, {0}};
  };
  t["Shrink"] = [](const NodeCtx& c) {
    ops::Shrink o;
    o.bias = c.f("bias", 0.0f);
    o.lambd = c.f("lambd", 0.5f);
    return Mapped{o, {0}};
  };
  t["IsNaN"] = [](const NodeCtx&) { return Mapped{ops::IsNaN{}, {0}}; };
  t["IsInf"] = [](const NodeCtx& c) {
    ops::IsInf o;
    o.detect_negative = c.flag("detect_negative", true);
    o.detect_positive = c.flag("detect_positive", true);
    return Mapped{o, {0}};
  };
  t["Selu"] = [](const NodeCtx& c) {
    ops::Selu o;
    o.alpha = c.f("alpha", o.alpha);
    o.gamma = c.f("gamma", o.gamma);
    return Mapped{o, {0}};
  };
  t["HardSigmoid"] = [](const NodeCtx& c) { return Mapped{ops::HardSigmoid{.alpha = c.f("alpha", 0.2f), .beta = c.f("beta", 0.5f)}, {0}}; };
  t["PRelu"] = [](const NodeCtx& c) {
    // ONNX's PRelu broadcasts the slope one way, to X's shape (pet's op both ways); before
    // opset 7, a 1-D slope of X's channel count is per channel (the importer views it so)
    if (const auto x = c.type(0), slope = c.type(1); x && slope && !broadcasts_to(slope->shape, x->shape) &&
                                                      !(c.opset < 7 && x->shape.size() >= 3 && slope->shape == Shape{x->shape[1]}))
      throw InvalidInput(cat("slope shape ", slope->shape, " does not broadcast to X's shape ", x->shape));
    return Mapped{ops::PRelu{}, {0, 1}};
  };
  // Variadic Max, Min, Sum (and Mean): one input is the identity; more are a chain of binary ops.
  auto variadic = [](Op two, const char* type) {
    return [two, type](const NodeCtx& c) {
      auto ins = all_inputs(c);
      if (c.opset < 8)  // no broadcasting then: inputs of one shape, which the ops here take as they are
        for (int i : ins) {
          const auto t0 = c.type(ins[0]), ti = c.type(i);
          if (!t0 || !ti) throw Unsupported(cat(type, " before opset 8 with an input of unknown shape"));
          if (ti->shape != t0->shape)
            throw InvalidInput(cat(type, " before opset 8 takes inputs of one shape (no broadcasting): input ", i, " is ", ti->shape, ", input ", ins[0], " ", t0->shape));
        }
      if (ins.empty()) throw InvalidInput("needs at least one input");
      Mapped m{ins.size() == 1 ? Op(ops::Identity{}) : two, ins};
      return m;
    };
  };
  t["Max"] = variadic(ops::Max{}, "Max");
  t["Min"] = variadic(ops::Min{}, "Min");
  t["Sum"] = variadic(ops::Add{}, "Sum");
  // Mean: the chain of Adds, then one Div by the count (the importer adds it); floats only.
  t["Mean"] = [variadic](const NodeCtx& c) {
    for (int i : all_inputs(c))
      if (auto t = c.type(i); t && !is_float(t->dtype)) throw InvalidInput(cat("input ", i, " must be float32, got ", dtype_name(t->dtype)));
    return variadic(ops::Add{}, "Mean")(c);
  };
  t["LeakyRelu"] = [](const NodeCtx& c) { return Mapped{ops::LeakyRelu{.alpha = c.f("alpha", 0.01f)}, {0}}; };
  t["Clip"] = [](const NodeCtx& c) {
    ops::Clip o;
    if (c.opset < 11) {
      o.min = c.f("min", -INFINITY);
      o.max = c.f("max", INFINITY);
    } else {
      if (c.present(1)) o.min = c.const_scalar(1, "min");
      if (c.present(2)) o.max = c.const_scalar(2, "max");
    }
    return Mapped{o, {0}};
  };
  t["Where"] = [](const NodeCtx&) { return Mapped{ops::Where{}, {0, 1, 2}}; };
  t["Cast"] = [](const NodeCtx& c) {
    if (!c.attr("to")) throw InvalidInput("attribute 'to' is required");
    const int64_t to = c.i("to", 0);
    ops::Cast o{.to = cast_target(to)};
    if (is_narrow_float(to)) o.narrow = to;  // float32 rounded to the type
    return Mapped{o, {0}};
  };
  t["Dropout"] = [](const NodeCtx& c) {
    ops::Dropout o;
    o.num_outputs = std::max(1, c.num_outputs());
    if (c.opset < 12) {
      o.ratio = c.f("ratio", 0.5f);
      if (c.opset < 7 && !c.flag("is_test", false)) throw Unsupported("Dropout before opset 7 without is_test");
    } else {
      if (c.present(1)) o.ratio = float(c.const_scalar(1, "ratio"));
      if (c.present(2)) o.training_mode = c.const_scalar(2, "training_mode") != 0;
    }
    return Mapped{o, {0}};
  };
  // Softmax, LogSoftmax, Hardmax: before opset 13 one row over dims [axis, rank), axis 1 by
  // default; from 13 the single dim axis, -1 by default.
  auto row_op = [](auto op) {
    return [op](const NodeCtx& c) {
      auto o = op;
      o.flatten_tail = c.opset < 13;
      o.axis = c.i("axis", c.opset < 13 ? 1 : -1);
      return Mapped{o, {0}};
    };
  };
  t["Softmax"] = row_op(ops::Softmax{});
  t["LogSoftmax"] = row_op(ops::LogSoftmax{});
  t["Hardmax"] = row_op(ops::Hardmax{});
  t["LRN"] = [](const NodeCtx& c) {
    if (!c.attr("size")) throw InvalidInput("attribute 'size' is required");
    return Mapped{ops::LRN{.size = c.i("size", 0), .alpha = c.f("alpha", 1e-4f), .beta = c.f("beta", 0.75f), .bias = c.f("bias", 1.0f)}, {0}};
  };
  // GlobalMaxPool is the maximum over every spatial dim: ReduceMax over dims [2, rank).
  t["GlobalMaxPool"] = [](const NodeCtx& c) {
    const auto t = c.type(0);
    if (!t) throw InvalidInput("input 0 is missing");
    if (t->shape.size() < 3) throw InvalidInput(cat("input must be N x C x D1 x ..., got ", t->shape));
    ops::ReduceMax o;
    for (size_t d = 2; d < t->shape.size(); ++d) o.axes.push_back(int64_t(d));
    return Mapped{o, {0}};
  };
  t["CumSum"] = [](const NodeCtx& c) {
    ops::CumSum o;
    o.axis = int64_t(c.const_scalar(1, "axis"));
    o.exclusive = c.flag("exclusive", false);
    o.reverse = c.flag("reverse", false);
    return Mapped{o, {0}};
  };
  t["TopK"] = [](const NodeCtx& c) {
    ops::TopK o;
    o.k = c.opset < 10 ? c.i("k", -1) : int64_t(c.const_scalar(1, "K"));
    if (c.opset < 10 && !c.attr("k")) throw InvalidInput("attribute 'k' is required");
    o.axis = c.i("axis", -1);
    o.largest = c.flag("largest", true);
    o.sorted = c.flag("sorted", true);
    return Mapped{o, {0}};
  };
  t["GatherElements"] = [](const NodeCtx& c) { return Mapped{ops::GatherElements{.axis = c.i("axis", 0)}, {0, 1}}; };
  t["GatherND"] = [](const NodeCtx& c) { return Mapped{ops::GatherND{.batch_dims = c.i("batch_dims", 0)}, {0, 1}}; };
  t["Trilu"] = [](const NodeCtx& c) {
    ops::Trilu o;
    o.upper = c.flag("upper", true);
    if (c.present(1)) o.k = int64_t(c.const_scalar(1, "k"));
    return Mapped{o, {0}};
  };
  t["OneHot"] = [](const NodeCtx& c) {
    ops::OneHot o;
    const double depth = c.const_scalar(1, "depth");
    if (!(depth >= 1 && depth <= double(kMaxMadeConstant))) throw InvalidInput(cat("depth ", depth, " must be in [1, 2^28]"));
    o.depth = int64_t(depth);
    o.axis = c.i("axis", -1);
    return Mapped{o, {0, 2}};
  };
  // Size and EyeLike depend only on the input's static shape and type: constants.
  t["Size"] = [](const NodeCtx& c) {
    const auto t = c.type(0);
    if (!t) throw InvalidInput("input 0 is missing");
    return Mapped{ops::Constant{.dtype = DType::Int64, .value = Tensor<int64_t>(Shape{}, std::vector<int64_t>{numel(t->shape)})}, {}};
  };
  t["EyeLike"] = [](const NodeCtx& c) {
    const auto t = c.type(0);
    if (!t) throw InvalidInput("input 0 is missing");
    if (t->shape.size() != 2) throw InvalidInput(cat("input must be 2-D, got shape ", t->shape));
    if (numel(t->shape) > kMaxMadeConstant) throw Unsupported(cat("output shape ", t->shape, " holds over 2^28 elements: too large a constant"));
    const DType dt = c.attr("dtype") ? cast_target(c.i("dtype", 0)) : t->dtype;
    const int64_t k = c.i("k", 0), rows = t->shape[0], cols = t->shape[1];
    auto fill = [&](auto v) {
      for (int64_t i = 0; i < rows; ++i)
        if (i + k >= 0 && i + k < cols) v[i * cols + i + k] = 1;
      return v;
    };
    ops::Constant o;
    o.dtype = dt;
    if (is_float(dt)) o.value = fill(Tensor<float>(t->shape, 0.f));
    else o.value = fill(Tensor<int64_t>(t->shape, int64_t(0)));
    return Mapped{o, {}};
  };
  // CastLike casts to the second input's type.
  t["CastLike"] = [](const NodeCtx& c) {
    const auto t = c.type(1);
    if (!t) throw InvalidInput("input 1 (target_type) is missing");
    ops::Cast o{.to = t->dtype};
    if (o.to == DType::Float32) o.narrow = c.narrow(1);
    return Mapped{o, {0}};
  };
  t["BatchNormalization"] = [](const NodeCtx& c) {
    ops::BatchNormalization o;
    o.epsilon = c.f("epsilon", 1e-5f);
    o.momentum = c.f("momentum", 0.9f);
    if (c.opset < 9 && !c.flag("spatial", true)) throw Unsupported("BatchNormalization with spatial=0");
    o.training_mode = c.opset >= 14 && c.flag("training_mode", false);
    o.num_outputs = std::max(1, c.num_outputs());
    if (!o.training_mode && o.num_outputs > 1)
      throw Unsupported(cat("BatchNormalization with ", o.num_outputs, " outputs outside training_mode (opset ", c.opset, ")"));
    return Mapped{o, {0, 1, 2, 3, 4}};
  };
  t["LayerNormalization"] = [](const NodeCtx& c) {
    ops::LayerNormalization o;
    o.axis = c.i("axis", -1);
    o.epsilon = c.f("epsilon", 1e-5f);
    o.num_outputs = std::max(1, c.num_outputs());
    return Mapped{o, first_inputs(c, 3)};
  };
  t["MaxPool"] = [](const NodeCtx& c) {
    ops::MaxPool o;
    import_window(c, o);
    o.storage_order = c.i("storage_order", 0);
    o.num_outputs = std::max(1, c.num_outputs());
    return Mapped{o, {0}};
  };
  t["AveragePool"] = [](const NodeCtx& c) {
    ops::AveragePool o;
    import_window(c, o);
    o.count_include_pad = c.flag("count_include_pad", false);
    return Mapped{o, {0}};
  };
  t["GlobalAveragePool"] = unary(ops::GlobalAveragePool{});
  t["ReduceMean"] = [](const NodeCtx& c) { return import_reduce<ops::ReduceMean>(c, c.opset >= 18); };
  t["ReduceMax"] = [](const NodeCtx& c) { return import_reduce<ops::ReduceMax>(c, c.opset >= 18); };
  t["ReduceSum"] = [](const NodeCtx& c) { return import_reduce<ops::ReduceSum>(c, c.opset >= 13); };
  auto arg = [](auto op) {
    return [op](const NodeCtx& c) {
      auto o = op;
      o.axis = c.i("axis", 0);
      o.keepdims = c.flag("keepdims", true);
      o.select_last_index = c.flag("select_last_index", false);
      return Mapped{o, {0}};
    };
  };
  t["ArgMax"] = arg(ops::ArgMax{});
  t["ArgMin"] = arg(ops::ArgMin{});
  t["Tile"] = [](const NodeCtx& c) {
    if (c.opset < 6) throw Unsupported("Tile before opset 6 (tiles and axis inputs)");
    return Mapped{ops::Tile{.repeats = c.const_ints(1, "repeats")}, {0}};
  };
  t["Einsum"] = [](const NodeCtx& c) {
    const auto* a = c.attr("equation");
    if (!a) throw InvalidInput("attribute 'equation' is required");
    return Mapped{ops::Einsum{.equation = c.s("equation", "")}, all_inputs(c)};
  };
  t["GridSample"] = [](const NodeCtx& c) {  // opset 16 (bilinear, bicubic), 20 (linear, cubic; N-D)
    using G = ops::GridSample;
    G o;
    const std::string mode = c.s("mode", c.opset >= 20 ? "linear" : "bilinear");
    if (mode == "bilinear" || mode == "linear") o.mode = G::Mode::Linear;
    else if (mode == "nearest") o.mode = G::Mode::Nearest;
    else if (mode == "bicubic" || mode == "cubic") o.mode = G::Mode::Cubic;
    else throw InvalidInput(cat("mode '", mode, "' (bilinear, nearest or bicubic; linear or cubic from opset 20)"));
    const std::string pad = c.s("padding_mode", "zeros");
    if (pad == "zeros") o.padding = G::Padding::Zeros;
    else if (pad == "border") o.padding = G::Padding::Border;
    else if (pad == "reflection") o.padding = G::Padding::Reflection;
    else throw InvalidInput(cat("padding_mode '", pad, "' (zeros, border or reflection)"));
    o.align_corners = c.flag("align_corners", false);
    if (const auto t = c.type(0); t && t->shape.size() != 4)
      throw Unsupported(cat("X has rank ", t->shape.size(), "; pet samples 4-D inputs (N, C, H, W), the form pet's opset-17 files can write"));
    return Mapped{o, {0, 1}};
  };
  // RoiAlign: opset 10 (its regions as opset 16's output_half_pixel), 16 (coordinate_transformation_mode)
  t["RoiAlign"] = [](const NodeCtx& c) {
    using A = ops::RoiAlign;
    A o;
    const std::string mode = c.s("mode", "avg");
    if (mode == "avg") o.mode = A::Mode::Avg;
    else if (mode == "max") o.mode = A::Mode::Max;
    else throw InvalidInput(cat("mode '", mode, "' (avg or max)"));
    const std::string coord = c.opset < 16 ? "output_half_pixel" : c.s("coordinate_transformation_mode", "half_pixel");
    if (coord == "half_pixel") o.half_pixel = true;
    else if (coord == "output_half_pixel") o.half_pixel = false;
    else throw InvalidInput(cat("coordinate_transformation_mode '", coord, "' (half_pixel or output_half_pixel)"));
    o.output_height = c.i("output_height", 1);
    o.output_width = c.i("output_width", 1);
    o.sampling_ratio = c.i("sampling_ratio", 0);
    o.spatial_scale = c.f("spatial_scale", 1.f);
    return Mapped{o, {0, 1, 2}};
  };
  t["Resize"] = [](const NodeCtx& c) {
    // antialias (linear and cubic) and keep_aspect_ratio_policy: expand.cpp's form_table
    if (c.i("antialias", 0) && c.s("mode", "nearest") != "nearest") throw Unsupported("antialias = 1");
    if (const std::string k = c.s("keep_aspect_ratio_policy", "stretch"); k != "stretch") throw Unsupported(cat("keep_aspect_ratio_policy '", k, "'"));
    return Mapped{resize_attrs(c), {0}};
  };
  // Upsample (opsets 7 to 9; Resize's predecessor): asymmetric coordinates and, for nearest,
  // truncation when enlarging and rounding up when shrinking, as ONNX Runtime runs it.
  t["Upsample"] = [](const NodeCtx& c) {
    if (c.opset < 7) throw Unsupported("Upsample before opset 7 (height_scale and width_scale attributes)");
    ops::Resize o;
    const std::string mode = c.s("mode", "nearest");
    if (mode == "linear" || mode == "bilinear") o.mode = ops::Resize::Mode::Linear;
    else if (mode != "nearest") throw InvalidInput(cat("mode '", mode, "' is not nearest or linear"));
    o.coord = ops::Resize::Coord::Asymmetric;
    if (c.opset < 9) {
      const auto* a = c.attr("scales");
      if (!a) throw InvalidInput("attribute 'scales' is required");
      for (float f : a->floats()) o.scales.push_back(double(f));
    } else {
      const auto* v = c.constant(1);
      if (!c.present(1)) throw InvalidInput("scales (input 1) is missing");
      if (!v) throw Unsupported(cat("scales (input 1 '", c.node.input(1), "') must be a constant"));
      if (!is_float(v->first)) throw InvalidInput("scales (input 1) must be a float tensor");
      for (float f : std::get<Tensor<float>>(v->second).vec()) o.scales.push_back(double(f));
    }
    bool up = false, down = false;
    for (double f : o.scales) up = up || f > 1, down = down || f < 1;
    if (up && down && o.mode == ops::Resize::Mode::Nearest)
      throw Unsupported(cat("nearest Upsample that enlarges some dims and shrinks others (scales ", o.scales, ")"));
    o.nearest_mode = down ? ops::Resize::Round::Ceil : ops::Resize::Round::Floor;
    return Mapped{o, {0}};
  };
  t["InstanceNormalization"] = [](const NodeCtx& c) {
    return Mapped{ops::InstanceNormalization{.epsilon = c.f("epsilon", 1e-5f)}, {0, 1, 2}};
  };
  t["ReduceMin"] = [](const NodeCtx& c) { return import_reduce<ops::ReduceMin>(c, c.opset >= 18); };
  t["ReduceProd"] = [](const NodeCtx& c) { return import_reduce<ops::ReduceProd>(c, c.opset >= 18); };
  t["ReduceL1"] = [](const NodeCtx& c) { return import_reduce<ops::ReduceL1>(c, c.opset >= 18); };
  t["ReduceL2"] = [](const NodeCtx& c) { return import_reduce<ops::ReduceL2>(c, c.opset >= 18); };
  t["ReduceSumSquare"] = [](const NodeCtx& c) { return import_reduce<ops::ReduceSumSquare>(c, c.opset >= 18); };
  t["ReduceLogSumExp"] = [](const NodeCtx& c) { return import_reduce<ops::ReduceLogSumExp>(c, c.opset >= 18); };
  t["ReduceLogSum"] = [](const NodeCtx& c) { return import_reduce<ops::ReduceLogSum>(c, c.opset >= 18); };
  t["Transpose"] = [](const NodeCtx& c) { return Mapped{ops::Transpose{.perm = c.ints("perm")}, {0}}; };
  t["Reshape"] = [](const NodeCtx& c) {
    if (c.opset < 5) throw Unsupported("Reshape before opset 5 (shape as an attribute)");
    ops::Reshape r;  // (filled member by member: GCC 12 warns "maybe uninitialized" on the aggregate)
    r.shape = c.const_ints(1, "shape");
    r.allowzero = c.flag("allowzero", false);
    return Mapped{std::move(r), {0}};
  };
  t["Flatten"] = [](const NodeCtx& c) { return Mapped{ops::Flatten{.axis = c.i("axis", 1)}, {0}}; };
  t["Squeeze"] = [](const NodeCtx& c) {
    ops::Squeeze o;
    if (c.opset < 13) o.axes = c.ints("axes");
    else if (c.present(1)) o.axes = c.const_ints(1, "axes");
    return Mapped{o, {0}};
  };
  t["Unsqueeze"] = [](const NodeCtx& c) {
    ops::Unsqueeze o;
    o.axes = c.opset < 13 ? c.ints("axes") : c.const_ints(1, "axes");
    return Mapped{o, {0}};
  };
  t["Concat"] = [](const NodeCtx& c) {
    if (c.opset >= 4 && !c.attr("axis")) throw InvalidInput("attribute 'axis' is required");
    return Mapped{ops::Concat{.axis = c.i("axis", 1)}, all_inputs(c)};
  };
  t["Split"] = [](const NodeCtx& c) {
    ops::Split o;
    o.axis = c.i("axis", 0);
    o.num_outputs = c.node.output_size();
    if (c.opset < 13) o.split = c.ints("split");
    else if (c.present(1)) o.split = c.const_ints(1, "split");
    if (c.opset >= 18 && c.attr("num_outputs")) {
      if (c.present(1)) throw InvalidInput("has both a 'split' input and a 'num_outputs' attribute");
      if (c.i("num_outputs", 0) != o.num_outputs)
        throw InvalidInput(cat("num_outputs is ", c.i("num_outputs", 0), " but the node has ", o.num_outputs, " outputs"));
      o.uneven = true;  // opset 18: the last part may be smaller
    } else if (c.opset >= 18 && !c.present(1)) {
      throw InvalidInput("needs a 'split' input or a 'num_outputs' attribute (opset 18)");
    }
    return Mapped{o, {0}};
  };
  t["Slice"] = [](const NodeCtx& c) {
    ops::Slice o;
    if (c.opset < 10) {
      o.starts = c.ints("starts");
      o.ends = c.ints("ends");
      o.axes = c.ints("axes");
    } else {
      o.starts = c.const_ints(1, "starts");
      o.ends = c.const_ints(2, "ends");
      if (c.present(3)) o.axes = c.const_ints(3, "axes");
      if (c.present(4)) o.steps = c.const_ints(4, "steps");
    }
    return Mapped{o, {0}};
  };
  t["Pad"] = [](const NodeCtx& c) {
    ops::Pad o;
    std::string mode = c.s("mode", "constant");
    if (mode == "constant") o.mode = ops::PadMode::Constant;
    else if (mode == "reflect") o.mode = ops::PadMode::Reflect;
    else if (mode == "edge") o.mode = ops::PadMode::Edge;
    else throw InvalidInput(cat("Pad mode '", mode, "' is not one of constant, reflect, edge, wrap"));
    if (c.opset < 11) {
      if (c.opset < 2) throw Unsupported("Pad before opset 2 ('paddings' attribute)");
      o.pads = c.ints("pads");
      o.value = c.f("value", 0.0f);
    } else {
      o.pads = c.const_ints(1, "pads");
      if (c.present(2)) o.value = c.const_scalar(2, "constant_value");
      if (c.present(3)) o.axes = c.const_ints(3, "axes");
    }
    return Mapped{o, {0}};
  };
  t["Gather"] = [](const NodeCtx& c) { return Mapped{ops::Gather{.axis = c.i("axis", 0)}, {0, 1}}; };
  t["Shape"] = [](const NodeCtx& c) {
    ops::ShapeOf o;
    o.start = c.i("start", 0);
    o.end = c.i("end", std::numeric_limits<int64_t>::max());
    return Mapped{o, {0}};
  };
  t["Expand"] = [](const NodeCtx& c) { return Mapped{ops::Expand{.shape = c.const_ints(1, "shape")}, {0}}; };
  t["Constant"] = [](const NodeCtx& c) {
    ops::Constant o;
    if (c.node.attribute_size() != 1) throw InvalidInput("must have exactly one value attribute");
    const auto& a = c.node.attribute(0);
    if (a.name() == "value") {
      expect_attr_type(a, AttributeProto::TENSOR, "a tensor");
      auto [dt, v] = tensor_from_proto(a.t(), ".", "value");
      o.dtype = dt;
      o.value = const_value(v);
    } else if (a.name() == "value_float") {
      o.value = Tensor<float>(Shape{}, std::vector<float>{c.f("value_float", 0)});
    } else if (a.name() == "value_floats") {
      expect_attr_type(a, AttributeProto::FLOATS, "a list of floats");
      o.value = Tensor<float>({a.floats_size()}, std::vector<float>(a.floats().begin(), a.floats().end()));
    } else if (a.name() == "value_int") {
      o.dtype = DType::Int64;
      o.value = Tensor<int64_t>(Shape{}, std::vector<int64_t>{c.i("value_int", 0)});
    } else if (a.name() == "value_ints") {
      o.dtype = DType::Int64;
      auto v = c.ints("value_ints");
      o.value = Tensor<int64_t>({int64_t(v.size())}, v);
    } else {
      throw Unsupported(cat("Constant with attribute '", a.name(), "'"));
    }
    return Mapped{o, {}};
  };
  return t;
}
}  // namespace

const std::map<std::string, ImportFn, std::less<>>& import_table() {
  static const auto t = make_table();
  return t;
}

// ---------------------------------------------------------------- export
namespace {
struct Exporter {
  const Graph& g;
  const Node& n;
  ExportCtx& ctx;

  std::vector<std::string> in() const {
    std::vector<std::string> v;
    for (TensorId t : n.inputs) v.push_back(g.tensor(t).name);
    return v;
  }
  std::vector<std::string> out() const {
    std::vector<std::string> v;
    for (TensorId t : n.outputs) v.push_back(g.tensor(t).name);
    return v;
  }
  NodeProto* simple(std::string_view type) { return ctx.add(type, n.name, in(), out()); }
  /// Data inputs followed by extra (attribute-carrying) inputs.
  NodeProto* with_inputs(std::string_view type, std::vector<std::string> extra) {
    auto v = in();
    v.insert(v.end(), extra.begin(), extra.end());
    return ctx.add(type, n.name, v, out());
  }
  std::string ints(const char* what, const std::vector<int64_t>& v) { return ctx.ints(n.name + "_" + what, v); }

  template <class W>
  void window(NodeProto* p, const W& w) {
    set(p, "kernel_shape", w.kernel_shape);
    set(p, "strides", w.strides);
    set(p, "pads", w.pads);
    if (w.ceil_mode) set(p, "ceil_mode", int64_t(1));
  }

  /// The attributes Conv and ConvTranspose share.
  template <class C>
  NodeProto* conv_like(const char* type, const C& o) { return conv_attrs(simple(type), o); }
  template <class C>
  NodeProto* conv_attrs(NodeProto* p, const C& o) {
    set(p, "kernel_shape", o.kernel_shape);
    set(p, "strides", o.strides);
    set(p, "pads", o.pads);
    set(p, "dilations", o.dilations);
    set(p, "group", o.group);
    return p;
  }
  void operator()(const ops::Conv& o) { conv_like("Conv", o); }
  void operator()(const ops::MatMul&) { simple("MatMul"); }
  void operator()(const ops::ConvTranspose& o) { set(conv_like("ConvTranspose", o), "output_padding", o.output_padding); }
  void operator()(const ops::Gemm& o) {
    auto* p = simple("Gemm");
    set(p, "alpha", o.alpha);
    set(p, "beta", o.beta);
    set(p, "transA", int64_t(o.trans_a));
    set(p, "transB", int64_t(o.trans_b));
  }
  /// Gelu is opset 20; at opset 17 it is written as PyTorch exports it:
  /// x * (erf(x / sqrt 2) + 1) * 0.5.
  void operator()(const ops::Gelu&) {
    const std::string x = in()[0], d = ctx.unique(n.name + "_scaled"), e = ctx.unique(n.name + "_erf"), a = ctx.unique(n.name + "_plus1"),
                      m = ctx.unique(n.name + "_times_x");
    ctx.add("Div", ctx.unique(n.name + "_div"), {x, ctx.scalar(n.name + "_sqrt2", 1.41421356f)}, {d});
    ctx.add("Erf", ctx.unique(n.name + "_erf"), {d}, {e});
    ctx.add("Add", ctx.unique(n.name + "_add"), {e, ctx.scalar(n.name + "_one", 1.f)}, {a});
    ctx.add("Mul", ctx.unique(n.name + "_mul"), {x, a}, {m});
    ctx.add("Mul", n.name, {m, ctx.scalar(n.name + "_half", 0.5f)}, out());
  }
  void operator()(const ops::LeakyRelu& o) { set(simple("LeakyRelu"), "alpha", o.alpha); }
  void operator()(const ops::Elu& o) { set(simple("Elu"), "alpha", o.alpha); }
  /// The bitwise ops are opset 18: at opset 17 they are integer arithmetic in int64. ~a is
  /// -1 - a (255 - a for uint8). And, Or and Xor take the operands in chunks of 16 bits (8 for
  /// the 8-bit types), low to high: chunk = Mod(rest, 2^w), rest = (rest - chunk) / 2^w
  /// (exact); a chunk u in [0, 2^w) gives its bits as Mod(Div(u[..., None], [1, 2, ...,
  /// 2^(w-1)]), 2), combined (and: xy, or: x + y - xy, xor: x + y - 2xy) and summed back with
  /// the same weights; the chunks are joined from the top one, made signed for a signed type.
  /// No intermediate value leaves the type's range or reaches 2^31 for int8 and int32 (runtimes
  /// that compute int64 in 32 bits, as OpenVINO's CPU plugin does, still get them right).
  void bitwise(char kind) {
    const DType t = g.type(n.outputs[0]).dtype;
    const int64_t width = is_int8(t) ? 8 : t == DType::Int32 ? 32 : 64;
    NodeProto* last = nullptr;
    auto op = [&](const char* type, const std::vector<std::string>& ins, const char* what) {
      const std::string o = ctx.unique(cat(n.name, "_", what));
      last = ctx.add(type, o, ins, {o});
      return o;
    };
    auto num = [&](int64_t v) { return ctx.ints(n.name + "_k", {v}); };
    std::vector<std::string> xs = in();
    if (t != DType::Int64)
      for (auto& x : xs) {
        x = op("Cast", {x}, "int64");
        set(last, "to", int64_t(dtype_to_onnx(DType::Int64)));
      }
    std::string r;
    if (kind == '~') {
      r = op("Sub", {num(t == DType::UInt8 ? 255 : -1), xs[0]}, "not");
    } else {
      const int64_t w = std::min<int64_t>(width, 16), chunks = width / w;
      const std::string last_axis = ctx.ints(n.name + "_last_axis", {-1}), two = num(2), base = num(int64_t(1) << w);
      std::vector<int64_t> p(size_t(w), 1);
      for (size_t i = 1; i < p.size(); ++i) p[i] = p[i - 1] * 2;
      const std::string weights = ctx.ints(n.name + "_bit_weights", p);
      auto split = [&](const std::string& x) {  // chunks low to high, each in [0, 2^w)
        std::vector<std::string> c;
        std::string rest = x;
        for (int64_t k = 0; k < chunks; ++k) {
          c.push_back(t == DType::UInt8 ? rest : op("Mod", {rest, base}, "chunk"));
          if (k + 1 < chunks) rest = op("Div", {op("Sub", {rest, c.back()}, "upper"), base}, "rest");
        }
        return c;
      };
      auto bits = [&](const std::string& u) {
        return op("Mod", {op("Div", {op("Unsqueeze", {u, last_axis}, "column"), weights}, "shifted"), two}, "bits");
      };
      auto combine = [&](const std::string& ua, const std::string& ub) {
        const std::string x = bits(ua), y = bits(ub), xy = op("Mul", {x, y}, "both");
        const std::string z = kind == '&' ? xy : op("Sub", {op("Add", {x, y}, "either"), kind == '|' ? xy : op("Mul", {xy, two}, "both_twice")}, "bits_out");
        const std::string sum = op("ReduceSum", {op("Mul", {z, weights}, "weighed"), last_axis}, "sum");
        set(last, "keepdims", int64_t(0));
        return sum;
      };
      const std::vector<std::string> ca = split(xs[0]), cb = split(xs[1]);
      std::vector<std::string> rc;
      for (int64_t k = 0; k < chunks; ++k) rc.push_back(combine(ca[size_t(k)], cb[size_t(k)]));
      r = rc.back();
      if (t != DType::UInt8)  // the top chunk signed: r - 2^w where r >= 2^(w-1)
        r = op("Where", {op("Less", {r, num(int64_t(1) << (w - 1))}, "low"), r, op("Sub", {r, base}, "wrapped")}, "signed");
      for (int64_t k = chunks - 2; k >= 0; --k) r = op("Add", {op("Mul", {r, base}, "up"), rc[size_t(k)]}, "joined");
    }
    set(ctx.add("Cast", n.name, {r}, out()), "to", int64_t(dtype_to_onnx(t)));
  }
  void operator()(const ops::BitwiseAnd&) { bitwise('&'); }
  void operator()(const ops::BitwiseOr&) { bitwise('|'); }
  void operator()(const ops::BitwiseXor&) { bitwise('^'); }
  void operator()(const ops::BitwiseNot&) { bitwise('~'); }
  void operator()(const ops::BitShift& o) { set(simple("BitShift"), "direction", std::string(o.direction == ops::BitShift::Direction::Left ? "LEFT" : "RIGHT")); }
  /// Mish is opset 18: at opset 17 it is x * tanh(softplus(x)).
  void operator()(const ops::Mish&) {
    const std::string x = in()[0], sp = ctx.unique(n.name + "_softplus"), th = ctx.unique(n.name + "_tanh");
    ctx.add("Softplus", ctx.unique(n.name + "_sp"), {x}, {sp});
    ctx.add("Tanh", ctx.unique(n.name + "_th"), {sp}, {th});
    ctx.add("Mul", n.name, {x, th}, out());
  }
  void operator()(const ops::Selu& o) {
    auto* p = simple("Selu");
    set(p, "alpha", o.alpha);
    set(p, "gamma", o.gamma);
  }
  void operator()(const ops::HardSigmoid& o) {
    auto* p = simple("HardSigmoid");
    set(p, "alpha", o.alpha);
    set(p, "beta", o.beta);
  }
  void operator()(const ops::Clip& o) {
    std::string lo = std::isinf(o.min) ? "" : ctx.scalar(n.name + "_min", float(o.min));
    std::string hi = std::isinf(o.max) ? "" : ctx.scalar(n.name + "_max", float(o.max));
    std::vector<std::string> extra{lo};
    if (!hi.empty()) extra.push_back(hi);
    if (lo.empty() && hi.empty()) extra.clear();
    with_inputs("Clip", extra);
  }
  /// A Cast to float16 or bfloat16 (o.narrow) is ONNX's Cast to it and a Cast back to float32,
  /// the type pet holds its result in.
  void operator()(const ops::Cast& o) {
    if (!o.narrow) {
      set(simple("Cast"), "to", int64_t(dtype_to_onnx(o.to)));
      return;
    }
    const std::string mid = ctx.unique(cat(n.name, "_", narrow_float_name(o.narrow)));
    set(ctx.add("Cast", ctx.unique(n.name + "_narrow"), in(), {mid}), "to", o.narrow);
    set(ctx.add("Cast", n.name, {mid}, out()), "to", int64_t(dtype_to_onnx(DType::Float32)));
  }
  void operator()(const ops::Dropout& o) {
    std::vector<std::string> extra{ctx.scalar(n.name + "_ratio", o.ratio)};
    if (o.training_mode)
      extra.push_back(ctx.initializer(n.name + "_training", DType::Bool, Tensor<int64_t>(Shape{}, std::vector<int64_t>{1})));
    with_inputs("Dropout", extra);
  }
  /// Softmax, LogSoftmax, Hardmax at opset 17.
  template <class O>
  void row_op(const char* type, const O& o) {
    const Shape& s = g.type(n.inputs[0]).shape;
    if (!o.flatten_tail || o.axis == int64_t(s.size()) - 1) {
      set(simple(type), "axis", o.axis);
      return;
    }
    // Opset < 13 semantics (one row over dims [axis, rank)) as Reshape -> op -> Reshape.
    int64_t outer = 1, row = 1;
    for (size_t i = 0; i < s.size(); ++i) (int64_t(i) < o.axis ? outer : row) *= s[i];
    std::string a = ctx.unique(n.name + "_2d"), b = ctx.unique(n.name + "_sm");
    ctx.add("Reshape", ctx.unique(n.name + "_flat"), {in()[0], ints("rows", {outer, row})}, {a});
    set(ctx.add(type, ctx.unique(n.name + "_rows"), {a}, {b}), "axis", int64_t(1));
    ctx.add("Reshape", n.name, {b, ints("shape", s)}, out());
  }
  void operator()(const ops::Softmax& o) { row_op("Softmax", o); }
  void operator()(const ops::LogSoftmax& o) { row_op("LogSoftmax", o); }
  void operator()(const ops::Hardmax& o) { row_op("Hardmax", o); }
  void operator()(const ops::LRN& o) {
    auto* p = simple("LRN");
    set(p, "size", o.size);
    set(p, "alpha", o.alpha);
    set(p, "beta", o.beta);
    set(p, "bias", o.bias);
  }
  void operator()(const ops::Celu& o) { set(simple("Celu"), "alpha", o.alpha); }
  void operator()(const ops::ThresholdedRelu& o) { set(simple("ThresholdedRelu"), "alpha", o.alpha); }
  void operator()(const ops::Shrink& o) {
    auto* p = simple("Shrink");
    set(p, "bias", o.bias);
    set(p, "lambd", o.lambd);
  }
  void operator()(const ops::IsNaN&) { simple("IsNaN"); }
  void operator()(const ops::IsInf& o) {
    auto* p = simple("IsInf");
    set(p, "detect_negative", int64_t(o.detect_negative));
    set(p, "detect_positive", int64_t(o.detect_positive));
  }
  void operator()(const ops::CumSum& o) {
    auto* p = with_inputs("CumSum", {ctx.initializer(n.name + "_axis", DType::Int64, Tensor<int64_t>(Shape{}, std::vector<int64_t>{o.axis}))});
    set(p, "exclusive", int64_t(o.exclusive));
    set(p, "reverse", int64_t(o.reverse));
  }
  void operator()(const ops::TopK& o) {
    auto* p = with_inputs("TopK", {ints("k", {o.k})});
    set(p, "axis", o.axis);
    set(p, "largest", int64_t(o.largest));
    set(p, "sorted", int64_t(o.sorted));
  }
  void operator()(const ops::GatherElements& o) { set(simple("GatherElements"), "axis", o.axis); }
  static const char* reduction_name(ops::ScatterReduction r) {
    using R = ops::ScatterReduction;
    return r == R::Add ? "add" : r == R::Mul ? "mul" : r == R::Max ? "max" : r == R::Min ? "min" : "none";
  }
  // Written at opset 17: reductions max and min (opset 18) are refused by export.
  void reduction(::onnx::NodeProto* p, ops::ScatterReduction r) {
    if (r == ops::ScatterReduction::Max || r == ops::ScatterReduction::Min)
      throw Unsupported(cat("node '", n.name, "': Scatter reduction ", reduction_name(r), " needs opset 18; pet writes opset 17"));
    if (r != ops::ScatterReduction::None) set(p, "reduction", std::string(reduction_name(r)));
  }
  void operator()(const ops::ScatterElements& o) {
    auto* p = simple("ScatterElements");
    set(p, "axis", o.axis);
    reduction(p, o.reduction);
  }
  void operator()(const ops::ScatterND& o) { reduction(simple("ScatterND"), o.reduction); }
  void operator()(const ops::QuantizeLinear& o) {
    // Without a zero point ONNX's output is uint8 (opset 17 has no output_dtype): an int8 one
    // gets an explicit zero.
    auto* p = o.to == DType::Int8 && n.inputs.size() == 2
                  ? with_inputs("QuantizeLinear", {ctx.initializer(n.name + "_zero", DType::Int8, Tensor<int64_t>(Shape{}, int64_t(0)))})
                  : simple("QuantizeLinear");
    set(p, "axis", o.axis);
  }
  void operator()(const ops::DequantizeLinear& o) { set(simple("DequantizeLinear"), "axis", o.axis); }
  void operator()(const ops::DynamicQuantizeLinear&) { simple("DynamicQuantizeLinear"); }
  /// An absent first zero point is written as "" when the second is present.
  void operator()(const ops::MatMulInteger& o) {
    auto v = in();
    if (!o.a_zero && o.b_zero) v.insert(v.begin() + 2, "");
    ctx.add("MatMulInteger", n.name, v, out());
  }
  void operator()(const ops::ConvInteger& o) {
    auto v = in();
    if (!o.x_zero && o.w_zero) v.insert(v.begin() + 2, "");
    conv_attrs(ctx.add("ConvInteger", n.name, v, out()), o);
  }
  void operator()(const ops::QLinearMatMul&) { simple("QLinearMatMul"); }
  void operator()(const ops::QLinearConv& o) { conv_like("QLinearConv", o); }
  void operator()(const ops::GatherND& o) { set(simple("GatherND"), "batch_dims", o.batch_dims); }
  void operator()(const ops::Trilu& o) {
    auto* p = with_inputs("Trilu", {ctx.initializer(n.name + "_k", DType::Int64, Tensor<int64_t>(Shape{}, std::vector<int64_t>{o.k}))});
    set(p, "upper", int64_t(o.upper));
  }
  void operator()(const ops::OneHot& o) {
    const auto v = in();
    auto* p = ctx.add("OneHot", n.name, {v[0], ctx.initializer(n.name + "_depth", DType::Int64, Tensor<int64_t>(Shape{}, std::vector<int64_t>{o.depth})), v[1]},
                      out());
    set(p, "axis", o.axis);
  }
  void operator()(const ops::BatchNormalization& o) {
    auto o_names = out();
    // ONNX's inference requires all three outputs in training mode; pet's program may use
    // only Y, so the running statistics are written as outputs nothing reads.
    if (o.training_mode && o_names.size() == 1)
      for (const char* what : {"_running_mean", "_running_var"}) o_names.push_back(ctx.unique(n.name + what));
    auto* p = ctx.add("BatchNormalization", n.name, in(), o_names);
    set(p, "epsilon", o.epsilon);
    set(p, "momentum", o.momentum);
    if (o.training_mode) set(p, "training_mode", int64_t(1));
  }
  void operator()(const ops::LayerNormalization& o) {
    // ONNX Runtime requires scale and bias of the normalized shape; pet (like ONNX's function
    // body) broadcasts them, so smaller ones are expanded first.
    const Shape& x = g.type(n.inputs[0]).shape;
    const Shape norm(x.begin() + o.axis, x.end());
    auto v = in();
    for (size_t i = 1; i < v.size(); ++i)
      if (g.type(n.inputs[i]).shape != norm) {
        std::string e = ctx.unique(n.name + (i == 1 ? "_scale" : "_bias"));
        ctx.add("Expand", ctx.unique(n.name + "_expand"), {v[i], ints("normalized_shape", norm)}, {e});
        v[i] = e;
      }
    auto* p = ctx.add("LayerNormalization", n.name, v, out());
    set(p, "axis", o.axis);
    set(p, "epsilon", o.epsilon);
  }
  void operator()(const ops::MaxPool& o) {
    auto* p = simple("MaxPool");
    window(p, o);
    set(p, "dilations", o.dilations);
    if (o.storage_order) set(p, "storage_order", o.storage_order);
  }
  void operator()(const ops::AveragePool& o) {
    for (int64_t d : o.dilations)
      if (d != 1) throw Unsupported(cat("AveragePool '", n.name, "' with dilations ", o.dilations, " has no opset-17 form"));
    auto* p = simple("AveragePool");
    window(p, o);
    if (o.count_include_pad) set(p, "count_include_pad", int64_t(1));
  }
  template <class R>
  void reduce(const char* type, const R& o, bool axes_input) {
    NodeProto* p;
    if (axes_input) {
      p = o.axes.empty() ? simple(type) : with_inputs(type, {ints("axes", o.axes)});
      if (o.axes.empty()) set(p, "noop_with_empty_axes", int64_t(1));
    } else {
      p = simple(type);
      set(p, "axes", o.axes);  // never empty here: empty axes means no-op only for ReduceSum
    }
    set(p, "keepdims", int64_t(o.keepdims));
  }
  void operator()(const ops::ReduceMean& o) {
    if (o.axes.empty()) return void(simple("Identity"));
    reduce("ReduceMean", o, false);
  }
  void operator()(const ops::ReduceMax& o) {
    if (o.axes.empty()) return void(simple("Identity"));
    reduce("ReduceMax", o, false);
  }
  void operator()(const ops::ReduceSum& o) { reduce("ReduceSum", o, true); }
  template <class A>
  void arg(const char* type, const A& o) {
    auto* p = simple(type);
    set(p, "axis", o.axis);
    set(p, "keepdims", int64_t(o.keepdims));
    if (o.select_last_index) set(p, "select_last_index", int64_t(1));
  }
  void operator()(const ops::ArgMax& o) { arg("ArgMax", o); }
  void operator()(const ops::ArgMin& o) { arg("ArgMin", o); }
  void operator()(const ops::Tile& o) { with_inputs("Tile", {ints("repeats", o.repeats)}); }
  void operator()(const ops::Mod& o) { set(simple("Mod"), "fmod", o.fmod); }
  void operator()(const ops::Einsum& o) { set(simple("Einsum"), "equation", o.equation); }
  void operator()(const ops::Resize& o) {
    using C = ops::Resize::Coord;
    C coord = o.coord;
    const Shape& x = g.type(n.inputs[0]).shape;
    if (coord == C::HalfPixelSymmetric) {  // opset 19; the same as half_pixel where m = c n exactly
      for (size_t d = 0; d < x.size(); ++d)
        if (!o.symmetric_is_half_pixel(x, d))
          throw Unsupported(cat("Resize '", n.name, "' with half_pixel_symmetric and a scale that is not m / n has no opset-17 form"));
      coord = C::HalfPixel;
    }
    static const char* coords[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn",
                                   "tf_crop_and_resize"};
    static const char* rounds[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    std::vector<std::string> extra{coord == C::TfCropAndResize
                                       ? ctx.initializer(n.name + "_roi", DType::Float32,
                                                         Tensor<float>({int64_t(o.roi.size())}, std::vector<float>(o.roi.begin(), o.roi.end())))
                                       : std::string()};
    if (o.by_sizes) {
      extra.push_back("");
      extra.push_back(ints("sizes", o.sizes));
    } else {
      std::vector<float> f(o.scales.begin(), o.scales.end());
      extra.push_back(ctx.initializer(n.name + "_scales", DType::Float32, Tensor<float>({int64_t(f.size())}, f)));
    }
    auto* p = with_inputs("Resize", extra);
    static const char* modes[] = {"nearest", "linear", "cubic"};
    set(p, "mode", std::string(modes[int(o.mode)]));
    if (o.mode == ops::Resize::Mode::Cubic) {
      set(p, "cubic_coeff_a", o.cubic_coeff_a);
      if (o.exclude_outside) set(p, "exclude_outside", int64_t(1));
    }
    set(p, "coordinate_transformation_mode", std::string(coords[int(coord)]));
    if (o.mode == ops::Resize::Mode::Nearest) set(p, "nearest_mode", std::string(rounds[int(o.nearest_mode)]));
    if (coord == C::TfCropAndResize) set(p, "extrapolation_value", o.extrapolation_value);
  }
  void operator()(const ops::GridSample& o) {
    static const char* modes[] = {"bilinear", "nearest", "bicubic"};
    static const char* pads[] = {"zeros", "border", "reflection"};
    auto* p = simple("GridSample");
    set(p, "mode", std::string(modes[int(o.mode)]));
    set(p, "padding_mode", std::string(pads[int(o.padding)]));
    set(p, "align_corners", int64_t(o.align_corners));
  }
  void operator()(const ops::RoiAlign& o) {
    auto* p = simple("RoiAlign");
    set(p, "mode", std::string(o.mode == ops::RoiAlign::Mode::Avg ? "avg" : "max"));
    set(p, "coordinate_transformation_mode", std::string(o.half_pixel ? "half_pixel" : "output_half_pixel"));
    set(p, "output_height", o.output_height);
    set(p, "output_width", o.output_width);
    set(p, "sampling_ratio", o.sampling_ratio);
    set(p, "spatial_scale", o.spatial_scale);
  }
  void operator()(const ops::InstanceNormalization& o) { set(simple("InstanceNormalization"), "epsilon", o.epsilon); }
  /// Reductions whose axes are an attribute at opset 17. Over no axes (a scalar's, or
  /// noop_with_empty_axes) each is its function of one element: |x|, sqrt(x*x), x*x, ln x,
  /// and x for the others.
  template <class R>
  void reduce17(const char* type, const R& o) {
    if (!o.axes.empty()) return reduce(type, o, false);
    const std::string_view t = type;
    const std::string x = in()[0];
    if (t == "ReduceL1") return void(simple("Abs"));
    if (t == "ReduceLogSum") return void(simple("Log"));
    if (t == "ReduceSumSquare") return void(ctx.add("Mul", n.name, {x, x}, out()));
    if (t == "ReduceL2") {
      const std::string sq = ctx.unique(n.name + "_square");
      ctx.add("Mul", sq, {x, x}, {sq});
      return void(ctx.add("Sqrt", n.name, {sq}, out()));
    }
    simple("Identity");
  }
  void operator()(const ops::ReduceMin& o) { reduce17("ReduceMin", o); }
  void operator()(const ops::ReduceProd& o) { reduce17("ReduceProd", o); }
  void operator()(const ops::ReduceL1& o) { reduce17("ReduceL1", o); }
  void operator()(const ops::ReduceL2& o) { reduce17("ReduceL2", o); }
  void operator()(const ops::ReduceSumSquare& o) { reduce17("ReduceSumSquare", o); }
  void operator()(const ops::ReduceLogSumExp& o) { reduce17("ReduceLogSumExp", o); }
  void operator()(const ops::ReduceLogSum& o) { reduce17("ReduceLogSum", o); }
  void operator()(const ops::Transpose& o) {  // (an empty perm is a scalar's: ONNX's default)
    auto* n = simple("Transpose");
    if (!o.perm.empty()) set(n, "perm", o.perm);
  }
  void operator()(const ops::Reshape& o) {
    // To a scalar: a Squeeze of every (size-1) axis. OpenVINO 2024.6 refuses a Reshape whose
    // shape is the empty list ("The value of scalar shape pattern should be equal to 1").
    if (o.shape.empty()) {
      const int64_t rank = int64_t(g.type(n.inputs[0]).shape.size());
      if (rank == 0) return void(simple("Identity"));
      std::vector<int64_t> axes(static_cast<size_t>(rank), 0);
      std::iota(axes.begin(), axes.end(), int64_t(0));
      return void(with_inputs("Squeeze", {ints("axes", axes)}));
    }
    with_inputs("Reshape", {ints("shape", o.shape)});
  }
  void operator()(const ops::Flatten& o) { set(simple("Flatten"), "axis", o.axis); }
  void operator()(const ops::Squeeze& o) { with_inputs("Squeeze", {ints("axes", o.axes)}); }
  void operator()(const ops::Unsqueeze& o) { with_inputs("Unsqueeze", {ints("axes", o.axes)}); }
  void operator()(const ops::RT& o) {
    std::string a = ctx.unique(n.name + "_split"), b = ctx.unique(n.name + "_perm");
    ctx.add("Reshape", ctx.unique(n.name + "_r1"), {in()[0], ints("split_shape", o.split_shape)}, {a});
    set(ctx.add("Transpose", ctx.unique(n.name + "_t"), {a}, {b}), "perm", o.perm);
    ctx.add("Reshape", n.name, {b, ints("out_shape", o.out_shape)}, out());
  }
  void operator()(const ops::Expand& o) { with_inputs("Expand", {ints("shape", o.shape)}); }
  void operator()(const ops::Concat& o) { set(simple("Concat"), "axis", o.axis); }
  void operator()(const ops::Split& o) { set(with_inputs("Split", {ints("split", o.split)}), "axis", o.axis); }
  void operator()(const ops::Slice& o) {
    const Shape& os = g.type(n.outputs[0]).shape;
    std::vector<int64_t> starts, ends, axes, steps;
    for (size_t d = 0; d < o.begin.size(); ++d) {
      int64_t e = o.begin[d] + os[d] * o.step[d];
      if (e < 0) e = std::numeric_limits<int64_t>::min();  // "through index 0" for negative steps
      starts.push_back(o.begin[d]);
      ends.push_back(e);
      axes.push_back(int64_t(d));
      steps.push_back(o.step[d]);
    }
    with_inputs("Slice", {ints("starts", starts), ints("ends", ends), ints("axes", axes), ints("steps", steps)});
  }
  void operator()(const ops::Pad& o) {
    const char* mode = o.mode == ops::PadMode::Constant ? "constant" : o.mode == ops::PadMode::Reflect ? "reflect" : "edge";
    std::vector<std::string> extra{ints("pads", o.pads)};
    if (o.value != 0.0) {
      DType dt = g.type(n.inputs[0]).dtype;
      extra.push_back(is_float(dt) ? ctx.scalar(n.name + "_value", float(o.value))
                                   : ctx.initializer(n.name + "_value", dt, Tensor<int64_t>(Shape{}, std::vector<int64_t>{int64_t(o.value)})));
    }
    set(with_inputs("Pad", extra), "mode", std::string(mode));
  }
  void operator()(const ops::Gather& o) { set(simple("Gather"), "axis", o.axis); }
  /// base with patch written at offsets, as Slice and Concat: along the first dim the patch
  /// does not span, concat(base[..lo], inner, base[hi..]); inner recurses on the slab.
  void operator()(const ops::Patch& o) {
    const Shape &b = g.type(n.inputs[0]).shape, &p = g.type(n.inputs[1]).shape;
    std::string base = in()[0], patch = in()[1];
    std::function<std::string(std::string, size_t, Shape, const std::string&)> build =
        [&](std::string slab, size_t d, Shape shape, const std::string& out_name) -> std::string {
      while (d < shape.size() && o.offsets[d] == 0 && p[d] == shape[d]) ++d;
      if (d == shape.size()) {
        ctx.add("Identity", ctx.unique(n.name + "_patch"), {patch}, {out_name});
        return out_name;
      }
      std::vector<std::string> parts;
      auto slice = [&](int64_t lo, int64_t hi) {
        std::string t = ctx.unique(n.name + "_part");
        ctx.add("Slice", ctx.unique(n.name + "_slice"),
                {slab, ints("starts", {lo}), ints("ends", {hi}), ints("axes", {int64_t(d)})}, {t});
        return t;
      };
      if (o.offsets[d] > 0) parts.push_back(slice(0, o.offsets[d]));
      Shape mid = shape;
      mid[d] = p[d];
      std::string inner = ctx.unique(n.name + "_inner");
      build(slice(o.offsets[d], o.offsets[d] + p[d]), d + 1, mid, inner);
      parts.push_back(inner);
      if (o.offsets[d] + p[d] < shape[d]) parts.push_back(slice(o.offsets[d] + p[d], shape[d]));
      set(ctx.add("Concat", ctx.unique(n.name + "_concat"), parts, {out_name}), "axis", int64_t(d));
      return out_name;
    };
    build(base, 0, b, out()[0]);
  }
  void operator()(const ops::ShapeOf& o) {
    auto* p = simple("Shape");
    set(p, "start", o.start);
    set(p, "end", o.end);
  }
  void operator()(const ops::Constant& o) {
    auto* p = simple("Constant");
    auto* a = p->add_attribute();
    a->set_name("value");
    a->set_type(AttributeProto::TENSOR);
    tensor_to_proto(o.dtype, to_constant(o.value), a->mutable_t());
  }
  /// Ops without attributes map to the ONNX op of their name; an op with attributes needs
  /// its own case above (a missing one does not compile).
  template <class O>
    requires(attr_count<O> == 0)
  void operator()(const O&) {
    simple(O::name);
  }
};
}  // namespace

void export_node(const Graph& g, const Node& n, ExportCtx& ctx) { std::visit(Exporter{g, n, ctx}, n.op); }

}  // namespace pet::onnx::detail
