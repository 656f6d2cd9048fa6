#pragma once
/// Element-wise operators with ONNX (numpy) multidirectional broadcasting.
///   binary:  out[v] = f(a[bcast_a(v)], b[bcast_b(v)])
///   unary:   out[v] = f(x[v])
#include <algorithm>
#include <cmath>
#include <limits>

#include "pet/core/narrow_float.hpp"
#include "pet/ir/op_base.hpp"

namespace pet::ops {

namespace detail {

inline bool numeric(DType t) { return t != DType::Bool; }

/// Shared shape/type rule and formula of the broadcasting binary ops.
template <class D>
struct Binary {
  Types infer(InTypes in) const {
    expect_arity(in, 2, 2);
    if (!numeric(in[0].dtype) || !numeric(in[1].dtype))
      throw InvalidInput(cat("does not take bool inputs (got ", dtype_name(in[0].dtype), " and ",
                             dtype_name(in[1].dtype), ")"));
    if (!D::mixed_types) expect_same_dtype(in, 0, 1);
    return {{in[0].dtype, broadcast_shapes(in[0].shape, in[1].shape, "inputs")}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    return static_cast<const D&>(*this).template apply<E>(o, read);
  }
  Splits propagate(InSplits in, InTypes it, InTypes ot) const {
    SplitPoints out = SplitPoints::none(ot[0].shape);
    for (size_t i = 0; i < in.size(); ++i) cuts::add_broadcast(out.dims, ot[0].shape, it[i].shape, in[i].dims);
    return {out};
  }
  std::vector<Box> input_boxes(const Box& out, int, InTypes it, InTypes ot) const {
    std::vector<Box> r;
    for (const auto& t : it) {
      Box b = Box::whole(t.shape);
      size_t off = ot[0].shape.size() - t.shape.size();
      for (size_t d = 0; d < t.shape.size(); ++d)
        if (t.shape[d] != 1) b.dims[d] = Interval{out.dims[off + d].lo, out.dims[off + d].hi, 1};
      r.push_back(b);
    }
    return r;
  }
  bool operator==(const Binary&) const = default;
};

template <class D>
struct Unary {
  Types infer(InTypes in) const {
    expect_arity(in, 1, 1);
    if (D::float_only) expect_float(in, 0, "input");
    else if (!numeric(in[0].dtype)) throw InvalidInput("does not take bool input");
    return {in[0]};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    return static_cast<const D&>(*this).template apply<E>(read(0, o));
  }
  Splits propagate(InSplits in, InTypes, InTypes) const { return {in[0]}; }
  std::vector<Box> input_boxes(const Box& out, int, InTypes, InTypes) const { return {out}; }
  bool operator==(const Unary&) const = default;
};

template <class E, class R>
std::pair<E, E> operands(const Index& o, const R& read) {
  return {read(0, broadcast_index(o, read.shape(0))), read(1, broadcast_index(o, read.shape(1)))};
}
}  // namespace detail

/// out = a + b
struct Add : detail::Binary<Add> {
  static constexpr std::string_view name = "Add";
  PET_ATTRS();
  static constexpr bool multilinear = true, mixed_types = false;
  template <class E, class R>
  E apply(const Index& o, const R& r) const {
    auto [a, b] = detail::operands<E>(o, r);
    return a + b;
  }
};
/// out = a - b
struct Sub : detail::Binary<Sub> {
  static constexpr std::string_view name = "Sub";
  PET_ATTRS();
  static constexpr bool multilinear = true, mixed_types = false;
  template <class E, class R>
  E apply(const Index& o, const R& r) const {
    auto [a, b] = detail::operands<E>(o, r);
    return a - b;
  }
};
/// out = a * b (multilinear: one factor from each input)
struct Mul : detail::Binary<Mul> {
  static constexpr std::string_view name = "Mul";
  PET_ATTRS();
  static constexpr bool multilinear = true, mixed_types = false;
  template <class E, class R>
  E apply(const Index& o, const R& r) const {
    auto [a, b] = detail::operands<E>(o, r);
    return a * b;
  }
};
/// out = a / b (integer division truncates, as in ONNX)
struct Div : detail::Binary<Div> {
  static constexpr std::string_view name = "Div";
  PET_ATTRS();
  static constexpr bool multilinear = false, mixed_types = false;
  template <class E, class R>
  E apply(const Index& o, const R& r) const {
    auto [a, b] = detail::operands<E>(o, r);
    if constexpr (std::is_integral_v<E>) return E(integer(int64_t(a), int64_t(b)));
    else return a / b;
  }
  /// Integer division, truncating; the lowest value by -1 wraps to itself (as two's
  /// complement does; the machine's division would trap).
  static int64_t integer(int64_t a, int64_t b) {
    if (b == 0) throw InvalidInput("Div: integer division by zero");
    return b == -1 ? int64_t(uint64_t(0) - uint64_t(a)) : a / b;
  }
};
/// out = a ^ b; the exponent may have another numeric type; the result has a's type.
/// Over a finite field only non-negative integer exponents are defined.
struct Pow : detail::Binary<Pow> {
  static constexpr std::string_view name = "Pow";
  PET_ATTRS();
  static constexpr bool multilinear = false, mixed_types = true;
  template <class E, class R>
  E apply(const Index& o, const R& r) const {
    E a = r(0, broadcast_index(o, r.shape(0)));
    double e = r.real(1, broadcast_index(o, r.shape(1)));
    if constexpr (is_field_v<E>) {
      if (e < 0 || std::nearbyint(e) != e)
        throw Unsupported(cat("Pow: exponent ", e, " has no meaning in the finite field"));
      return a.pow(uint64_t(e));
    } else if constexpr (std::is_integral_v<E>) {
      return E(std::llround(std::pow(double(a), e)));
    } else {
      return E(std::pow(a, E(e)));
    }
  }
};

/// Float-only unary ops: out = EXPR of x (and of the attributes the struct goes on to
/// declare after the macro, closing with `};`).
#define PET_UNARY_REAL_ATTRS(NAME, EXPR)                          \
  struct NAME : detail::Unary<NAME> {                             \
    static constexpr std::string_view name = #NAME;               \
    static constexpr bool multilinear = false, float_only = true; \
    template <class E>                                            \
    PET_HD E apply(E x) const {                                   \
      if constexpr (detail::is_real_v<E>) {                       \
        return EXPR;                                              \
      } else {                                                    \
        detail::require_ordered<E>(name);                         \
        PET_HD_THROW(Unsupported(cat(name, " takes float input only"))); \
      }                                                           \
    }                                                             \
    bool operator==(const NAME&) const = default;
/// Float-only unary ops without attributes.
#define PET_UNARY_REAL(NAME, EXPR) \
  PET_UNARY_REAL_ATTRS(NAME, EXPR) \
  PET_ATTRS();                     \
  };

/// out = sqrt(x)
PET_UNARY_REAL(Sqrt, std::sqrt(x))
/// out = erf(x)
PET_UNARY_REAL(Erf, std::erf(x))
/// out = exp(x)
PET_UNARY_REAL(Exp, std::exp(x))
/// out = 1 / (1 + exp(-x))
PET_UNARY_REAL(Sigmoid, E(1) / (E(1) + std::exp(-x)))
/// out = tanh(x)
PET_UNARY_REAL(Tanh, std::tanh(x))
/// out = x * (erf(x / sqrt 2) + 1) * 0.5 (ONNX Gelu, approximate "none"; the form PyTorch
/// exports as five ops before opset 20, which gelu-canonicalization turns into this one)
PET_UNARY_REAL(Gelu, x * (std::erf(x / E(1.4142135623730951)) + E(1)) * E(0.5))
/// out = |x|
PET_UNARY_REAL(Abs, std::abs(x))
/// out = ln x
PET_UNARY_REAL(Log, std::log(x))
/// out = 1 / x
PET_UNARY_REAL(Reciprocal, E(1) / x)
/// out = the largest integer <= x
PET_UNARY_REAL(Floor, std::floor(x))
/// out = the smallest integer >= x
PET_UNARY_REAL(Ceil, std::ceil(x))
/// out = x rounded to the nearest integer, halves to even (ONNX Round)
PET_UNARY_REAL(Round, std::nearbyint(x))
/// out = -1, 0 or 1 as x < 0, x == 0, x > 0
PET_UNARY_REAL(Sign, E((x > E(0)) - (x < E(0))))
/// out = x / (1 + |x|)
PET_UNARY_REAL(Softsign, x / (E(1) + std::abs(x)))
/// out = ln(1 + e^x) (evaluated as max(x, 0) + ln(1 + e^-|x|), which does not overflow)
PET_UNARY_REAL(Softplus, std::max(x, E(0)) + std::log1p(std::exp(-std::abs(x))))
/// out = x * tanh(softplus(x))
PET_UNARY_REAL(Mish, x * std::tanh(std::max(x, E(0)) + std::log1p(std::exp(-std::abs(x)))))
/// out = x * max(0, min(1, x / 6 + 1/2))
PET_UNARY_REAL(HardSwish, x * std::max(E(0), std::min(E(1), x / E(6) + E(0.5))))
/// Trigonometric and hyperbolic functions (ONNX Sin ... Atanh; positional encodings, rotary
/// embeddings): out = f(x), NaN outside the domain (Asin, Acos: [-1, 1]; Acosh: >= 1;
/// Atanh: (-1, 1)), as the C library gives it.
PET_UNARY_REAL(Sin, std::sin(x))
PET_UNARY_REAL(Cos, std::cos(x))
PET_UNARY_REAL(Tan, std::tan(x))
PET_UNARY_REAL(Asin, std::asin(x))
PET_UNARY_REAL(Acos, std::acos(x))
PET_UNARY_REAL(Atan, std::atan(x))
PET_UNARY_REAL(Sinh, std::sinh(x))
PET_UNARY_REAL(Cosh, std::cosh(x))
PET_UNARY_REAL(Asinh, std::asinh(x))
PET_UNARY_REAL(Acosh, std::acosh(x))
PET_UNARY_REAL(Atanh, std::atanh(x))
/// out = x >= 0 ? x : alpha (e^x - 1)
PET_UNARY_REAL_ATTRS(Elu, x >= E(0) ? x : E(alpha) * (std::exp(x) - E(1)))
  PET_ATTRS(alpha);
  float alpha = 1.0f;
};
/// out = gamma (x > 0 ? x : alpha (e^x - 1))
PET_UNARY_REAL_ATTRS(Selu, E(gamma) * (x > E(0) ? x : E(alpha) * (std::exp(x) - E(1))))
  PET_ATTRS(alpha, gamma);
  float alpha = 1.67326319217681884765625f;
  float gamma = 1.05070102214813232421875f;
};
/// out = max(0, min(1, alpha x + beta))
PET_UNARY_REAL_ATTRS(HardSigmoid, std::max(E(0), std::min(E(1), E(alpha) * x + E(beta))))
  PET_ATTRS(alpha, beta);
  float alpha = 0.2f;
  float beta = 0.5f;
};
/// out = max(0, x) + min(0, alpha (e^(x / alpha) - 1))
PET_UNARY_REAL_ATTRS(Celu, std::max(E(0), x) + std::min(E(0), E(alpha) * (std::exp(x / E(alpha)) - E(1))))
  PET_ATTRS(alpha);
  float alpha = 1.0f;
};
/// out = x > alpha ? x : 0
PET_UNARY_REAL_ATTRS(ThresholdedRelu, x > E(alpha) ? x : E(0))
  PET_ATTRS(alpha);
  float alpha = 1.0f;
};
/// out = x < -lambd ? x + bias : x > lambd ? x - bias : 0
PET_UNARY_REAL_ATTRS(Shrink, x < E(-lambd) ? x + E(bias) : x > E(lambd) ? x - E(bias) : E(0))
  PET_ATTRS(bias, lambd);
  float bias = 0.0f;
  float lambd = 0.5f;
};
#undef PET_UNARY_REAL_ATTRS
#undef PET_UNARY_REAL

namespace detail {
/// Float -> bool tests of each element (IsNaN, IsInf).
template <class D>
struct FloatTest {
  static constexpr bool multilinear = false;
  Types infer(InTypes in) const {
    expect_arity(in, 1, 1);
    expect_float(in, 0, "input");
    return {{DType::Bool, in[0].shape}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    pet::detail::require_ordered<E>(D::name);
    return E(static_cast<const D&>(*this).holds(read.real(0, o)) ? 1 : 0);
  }
  Splits propagate(InSplits in, InTypes, InTypes) const { return {in[0]}; }
  std::vector<Box> input_boxes(const Box& out, int, InTypes, InTypes) const { return {out}; }
  bool operator==(const FloatTest&) const = default;
};
}  // namespace detail

/// out (bool) = x is NaN
struct IsNaN : detail::FloatTest<IsNaN> {
  static constexpr std::string_view name = "IsNaN";
  PET_ATTRS();
  static bool holds(double x) { return std::isnan(x); }
  bool operator==(const IsNaN&) const = default;
};
/// out (bool) = x is +infinity (when detect_positive) or -infinity (when detect_negative)
struct IsInf : detail::FloatTest<IsInf> {
  static constexpr std::string_view name = "IsInf";
  PET_ATTRS(detect_negative, detect_positive);
  bool detect_negative = true;
  bool detect_positive = true;
  bool holds(double x) const { return std::isinf(x) && (x > 0 ? detect_positive : detect_negative); }
  bool operator==(const IsInf&) const = default;
};

/// out = max(a, b) (ONNX Max with two inputs; more are imported as a chain)
struct Max : detail::Binary<Max> {
  static constexpr std::string_view name = "Max";
  PET_ATTRS();
  static constexpr bool multilinear = false, mixed_types = false;
  template <class E, class R>
  E apply(const Index& o, const R& r) const {
    detail::require_ordered<E>(name);
    auto [a, b] = detail::operands<E>(o, r);
    if constexpr (!is_field_v<E>) return std::isnan(double(a)) || a > b ? a : b;
    else return a;
  }
};
/// out = min(a, b) (ONNX Min with two inputs; more are imported as a chain)
struct Min : detail::Binary<Min> {
  static constexpr std::string_view name = "Min";
  PET_ATTRS();
  static constexpr bool multilinear = false, mixed_types = false;
  template <class E, class R>
  E apply(const Index& o, const R& r) const {
    detail::require_ordered<E>(name);
    auto [a, b] = detail::operands<E>(o, r);
    if constexpr (!is_field_v<E>) return std::isnan(double(a)) || a < b ? a : b;
    else return a;
  }
};
/// out = x < 0 ? slope * x : x (slope broadcast to x)
struct PRelu : detail::Binary<PRelu> {
  static constexpr std::string_view name = "PRelu";
  PET_ATTRS();
  static constexpr bool multilinear = false, mixed_types = false;
  template <class E, class R>
  E apply(const Index& o, const R& r) const {
    detail::require_ordered<E>(name);
    auto [x, s] = detail::operands<E>(o, r);
    if constexpr (!is_field_v<E>) return x < E(0) ? s * x : x;
    else return x;
  }
};

/// out = -x (linear)
struct Neg : detail::Unary<Neg> {
  static constexpr std::string_view name = "Neg";
  PET_ATTRS();
  static constexpr bool multilinear = true, float_only = false;
  template <class E>
  PET_HD E apply(E x) const { return -x; }
  bool operator==(const Neg&) const = default;
};

/// out = max(x, 0)
struct Relu : detail::Unary<Relu> {
  static constexpr std::string_view name = "Relu";
  PET_ATTRS();
  static constexpr bool multilinear = false, float_only = false;
  template <class E>
  PET_HD E apply(E x) const {
    detail::require_ordered<E>(name);
    if constexpr (!is_field_v<E>) return x > E(0) ? x : E(0);
    else return x;
  }
  bool operator==(const Relu&) const = default;
};

/// out = x >= 0 ? x : alpha * x
struct LeakyRelu : detail::Unary<LeakyRelu> {
  static constexpr std::string_view name = "LeakyRelu";
  PET_ATTRS(alpha);
  static constexpr bool multilinear = false, float_only = true;
  float alpha = 0.01f;
  template <class E>
  PET_HD E apply(E x) const {
    detail::require_ordered<E>(name);
    if constexpr (!is_field_v<E>) return x >= E(0) ? x : E(alpha) * x;
    else return x;
  }
  bool operator==(const LeakyRelu&) const = default;
};

/// out = min(max(x, min), max); bounds default to +-infinity (ONNX takes them as inputs
/// since opset 11; pet requires them to be constants and keeps them as attributes).
struct Clip : detail::Unary<Clip> {
  static constexpr std::string_view name = "Clip";
  PET_ATTRS(min, max);
  static constexpr bool multilinear = false, float_only = false;
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  template <class E>
  PET_HD E apply(E x) const {
    detail::require_ordered<E>(name);
    if constexpr (!is_field_v<E>) {
      if (double(x) < min) x = E(min);
      if (double(x) > max) x = E(max);
    }
    return x;
  }
  bool operator==(const Clip&) const = default;
};

/// out = x
struct Identity {
  static constexpr std::string_view name = "Identity";
  PET_ATTRS();
  static constexpr bool multilinear = true, layout = true;
  Types infer(InTypes in) const {
    detail::expect_arity(in, 1, 1);
    return {in[0]};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const { return read(0, o); }
  Splits propagate(InSplits in, InTypes, InTypes) const { return {in[0]}; }
  std::vector<Box> input_boxes(const Box& out, int, InTypes, InTypes) const { return {out}; }
  bool operator==(const Identity&) const = default;
};

/// Inference-mode Dropout: out = x; the optional mask output is all true. Training mode with
/// a non-zero ratio draws random numbers and is Unsupported.
struct Dropout {
  static constexpr std::string_view name = "Dropout";
  PET_ATTRS(ratio, training_mode, num_outputs);
  static constexpr bool multilinear = true, layout = true;
  float ratio = 0.5f;
  bool training_mode = false;
  int num_outputs = 1;
  Types infer(InTypes in) const {
    detail::expect_arity(in, 1, 1);
    if (training_mode && ratio != 0.0f)
      throw Unsupported(cat("training mode with ratio ", ratio,
                            " draws random numbers; pet executes inference graphs"));
    if (ratio < 0.0f || ratio >= 1.0f) throw InvalidInput(cat("ratio ", ratio, " is not in [0, 1)"));
    if (num_outputs < 1 || num_outputs > 2) throw InvalidInput(cat("has ", num_outputs, " outputs; 1 or 2 expected"));
    Types out{in[0]};
    if (num_outputs == 2) out.push_back({DType::Bool, in[0].shape});
    return out;
  }
  template <class E, class R>
  E at(int k, const Index& o, const R& read) const { return k == 0 ? read(0, o) : E(1); }
  Splits propagate(InSplits in, InTypes, InTypes ot) const {
    Splits s{in[0]};
    if (ot.size() == 2) s.push_back(SplitPoints::none(ot[1].shape));
    return s;
  }
  std::vector<Box> input_boxes(const Box& out, int k, InTypes it, InTypes) const {
    if (k == 0) return {out};
    Box none = Box::whole(it[0].shape);
    for (auto& d : none.dims) d.hi = d.lo;
    return {none};
  }
  bool operator==(const Dropout&) const = default;
};

/// out = cond ? x : y (all three broadcast)
struct Where {
  static constexpr std::string_view name = "Where";
  PET_ATTRS();
  static constexpr bool multilinear = false;
  Types infer(InTypes in) const {
    detail::expect_arity(in, 3, 3);
    if (in[0].dtype != DType::Bool) throw InvalidInput(cat("condition must be bool, got ", dtype_name(in[0].dtype)));
    detail::expect_same_dtype(in, 1, 2);
    Shape s = broadcast_shapes(broadcast_shapes(in[0].shape, in[1].shape, "condition and X"), in[2].shape, "inputs");
    return {{in[1].dtype, s}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    return read.ints(0, broadcast_index(o, read.shape(0))) ? read(1, broadcast_index(o, read.shape(1)))
                                                           : read(2, broadcast_index(o, read.shape(2)));
  }
  bool operator==(const Where&) const = default;
};

/// out = x converted to `to`: float -> int truncates toward zero (NaN and values beyond int64
/// give INT64_MIN first), then wraps to int32, int8 or uint8 as a C++ cast does; -> bool is
/// x != 0. With `narrow` (ONNX's 10, float16, or 16, bfloat16; `to` is then float32), ONNX's
/// Cast to that type, whose values pet holds as float32: x (as float32) rounded to its nearest
/// value of the type, ties to even, beyond the type's range infinity, NaN kept.
struct Cast {
  static constexpr std::string_view name = "Cast";
  PET_ATTRS(to, narrow);
  static constexpr bool multilinear = false;
  DType to = DType::Float32;
  int64_t narrow = 0;
  Types infer(InTypes in) const {
    detail::expect_arity(in, 1, 1);
    if (narrow != 0 && !is_narrow_float(narrow))
      throw InvalidInput(cat("narrow must be 0, 10 (float16) or 16 (bfloat16), got ", narrow));
    if (narrow != 0 && to != DType::Float32)
      throw InvalidInput(cat("a Cast to ", narrow_float_name(narrow), " gives float32, not ", dtype_name(to)));
    return {{to, in[0].shape}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    if (to == DType::Bool) return E(read.real(0, o) != 0.0 ? 1 : 0);
    if (to == DType::Int32 || is_int8(to)) return E(wrap_to(to, read.ints(0, o)));
    if (narrow != 0) {
      detail::require_ordered<E>(name);
      if constexpr (detail::is_real_v<E>) return E(narrow_round(float(read.real(0, o)), int32_t(narrow)));
    }
    return read(0, o);
  }
  bool operator==(const Cast&) const = default;
};


namespace detail {
/// Comparisons: out (bool) = a (op) b, both of one type, broadcast. Integers compare exactly
/// (int64 values beyond 2^53 too: equal doubles are compared again as integers); floats as
/// IEEE does (NaN compares unequal and unordered). Over a finite field there is no order.
template <class D>
struct Compare {
  static constexpr bool multilinear = false;
  Types infer(InTypes in) const {
    expect_arity(in, 2, 2);
    expect_same_dtype(in, 0, 1);
    return {{DType::Bool, broadcast_shapes(in[0].shape, in[1].shape, "inputs")}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    const Index ia = broadcast_index(o, read.shape(0)), ib = broadcast_index(o, read.shape(1));
    const double a = read.real(0, ia), b = read.real(1, ib);
    int c = a < b ? -1 : a > b ? 1 : 0;
    const bool unordered = a != a || b != b;
    if (!unordered && c == 0) {
      const int64_t ai = read.ints(0, ia), bi = read.ints(1, ib);
      c = ai < bi ? -1 : ai > bi ? 1 : 0;
    }
    return E(!unordered && D::holds(c) ? 1 : 0);
  }
  bool operator==(const Compare&) const = default;
};

/// Logical ops on bool tensors (broadcast for the binary ones).
inline void expect_bool(InTypes in, size_t i) {
  if (in[i].dtype != DType::Bool) throw InvalidInput(cat("input ", i, " must be bool, got ", dtype_name(in[i].dtype)));
}
template <class D>
struct Logical {
  static constexpr bool multilinear = false;
  Types infer(InTypes in) const {
    expect_arity(in, 2, 2);
    expect_bool(in, 0);
    expect_bool(in, 1);
    return {{DType::Bool, broadcast_shapes(in[0].shape, in[1].shape, "inputs")}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    const bool a = read.ints(0, broadcast_index(o, read.shape(0))) != 0, b = read.ints(1, broadcast_index(o, read.shape(1))) != 0;
    return E(D::f(a, b) ? 1 : 0);
  }
  bool operator==(const Logical&) const = default;
};
}  // namespace detail

/// out = a == b (bool)
struct Equal : detail::Compare<Equal> {
  static constexpr std::string_view name = "Equal";
  PET_ATTRS();
  static bool holds(int c) { return c == 0; }
};
/// out = a < b (bool)
struct Less : detail::Compare<Less> {
  static constexpr std::string_view name = "Less";
  PET_ATTRS();
  static bool holds(int c) { return c < 0; }
};
/// out = a <= b (bool)
struct LessOrEqual : detail::Compare<LessOrEqual> {
  static constexpr std::string_view name = "LessOrEqual";
  PET_ATTRS();
  static bool holds(int c) { return c <= 0; }
};
/// out = a > b (bool)
struct Greater : detail::Compare<Greater> {
  static constexpr std::string_view name = "Greater";
  PET_ATTRS();
  static bool holds(int c) { return c > 0; }
};
/// out = a >= b (bool)
struct GreaterOrEqual : detail::Compare<GreaterOrEqual> {
  static constexpr std::string_view name = "GreaterOrEqual";
  PET_ATTRS();
  static bool holds(int c) { return c >= 0; }
};
/// out = a and b (bool)
struct And : detail::Logical<And> {
  static constexpr std::string_view name = "And";
  PET_ATTRS();
  static bool f(bool a, bool b) { return a && b; }
};
/// out = a or b (bool)
struct Or : detail::Logical<Or> {
  static constexpr std::string_view name = "Or";
  PET_ATTRS();
  static bool f(bool a, bool b) { return a || b; }
};
/// out = a xor b (bool)
struct Xor : detail::Logical<Xor> {
  static constexpr std::string_view name = "Xor";
  PET_ATTRS();
  static bool f(bool a, bool b) { return a != b; }
};
/// out = not x (bool)
struct Not {
  static constexpr std::string_view name = "Not";
  PET_ATTRS();
  static constexpr bool multilinear = false;
  Types infer(InTypes in) const {
    detail::expect_arity(in, 1, 1);
    detail::expect_bool(in, 0);
    return {in[0]};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const { return E(read.ints(0, o) != 0 ? 0 : 1); }
  bool operator==(const Not&) const = default;
};

/// Bitwise ops (opset 18; BitShift opset 11) on integer tensors. pet holds integer values as
/// int64 (two's complement), so the bits of a narrower type are its value's low bits and the
/// result, wrapped to the type as every integer result is, is that type's own.
namespace detail {
inline void expect_bits(InTypes in, size_t i) {
  if (is_float(in[i].dtype) || in[i].dtype == DType::Bool)
    throw InvalidInput(cat("input ", i, " must be an integer tensor (int8, uint8, int32 or int64), got ", dtype_name(in[i].dtype)));
}
template <class D>
struct Bitwise {
  static constexpr bool multilinear = false;
  Types infer(InTypes in) const {
    expect_arity(in, 2, 2);
    expect_bits(in, 0);
    expect_same_dtype(in, 0, 1);
    return {{in[0].dtype, broadcast_shapes(in[0].shape, in[1].shape, "inputs")}};
  }
  template <class E, class R>
  E at(const Index& o, const R& read) const {
    return E(static_cast<const D&>(*this).f(read.ints(0, broadcast_index(o, read.shape(0))), read.ints(1, broadcast_index(o, read.shape(1)))));
  }
  bool operator==(const Bitwise&) const = default;
};
}  // namespace detail

/// out = a & b (integers, broadcast)
struct BitwiseAnd : detail::Bitwise<BitwiseAnd> {
  static constexpr std::string_view name = "BitwiseAnd";
  PET_ATTRS();
  static int64_t f(int64_t a, int64_t b) { return a & b; }
};
/// out = a | b (integers, broadcast)
struct BitwiseOr : detail::Bitwise<BitwiseOr> {
  static constexpr std::string_view name = "BitwiseOr";
  PET_ATTRS();
  static int64_t f(int64_t a, int64_t b) { return a | b; }
};
/// out = a ^ b (integers, broadcast)
struct BitwiseXor : detail::Bitwise<BitwiseXor> {
  static constexpr std::string_view name = "BitwiseXor";
  PET_ATTRS();
  static int64_t f(int64_t a, int64_t b) { return a ^ b; }
};
/// out = ~x (integers; uint8's ~5 is 250, int8's -6)
struct BitwiseNot {
  static constexpr std::string_view name = "BitwiseNot";
  PET_ATTRS();
  static constexpr bool multilinear = false;
  Types infer(InTypes in) const {
    detail::expect_arity(in, 1, 1);
    detail::expect_bits(in, 0);
    return {in[0]};
  }
  static int64_t f(int64_t a) { return ~a; }
  template <class E, class R>
  E at(const Index& o, const R& read) const { return E(f(read.ints(0, o))); }
  bool operator==(const BitwiseNot&) const = default;
};
/// out = a << b (Left) or a >> b (Right), broadcast, of unsigned integers (ONNX's uint types,
/// of which pet holds uint8): shifted in 64 bits, then wrapped to the type, so bits shifted
/// past its width are gone; a shift by 64 or more gives 0.
struct BitShift : detail::Bitwise<BitShift> {
  enum class Direction { Left, Right };
  static constexpr std::string_view name = "BitShift";
  PET_ATTRS(direction);
  Direction direction = Direction::Left;
  Types infer(InTypes in) const {
    detail::expect_arity(in, 2, 2);
    if (in[0].dtype != DType::UInt8)
      throw InvalidInput(cat("input 0 must be an unsigned integer tensor (pet holds uint8), got ", dtype_name(in[0].dtype)));
    return detail::Bitwise<BitShift>::infer(in);
  }
  int64_t f(int64_t a, int64_t b) const {
    const uint64_t u = uint64_t(a), s = uint64_t(b);
    return s >= 64 ? 0 : int64_t(direction == Direction::Left ? u << s : u >> s);
  }
  bool operator==(const BitShift&) const = default;
};

/// out = a mod b, broadcast. fmod = 0 (integers only): the remainder takes the divisor's sign,
/// as Python's %; fmod = 1: the dividend's, as C's fmod (ONNX requires it for floats). A zero
/// integer divisor is an error; a zero float divisor gives NaN.
struct Mod : detail::Binary<Mod> {
  static constexpr std::string_view name = "Mod";
  PET_ATTRS(fmod);
  static constexpr bool multilinear = false, mixed_types = false;
  int64_t fmod = 0;
  Types infer(InTypes in) const {
    Types t = detail::Binary<Mod>::infer(in);
    if (fmod != 0 && fmod != 1) throw InvalidInput(cat("fmod must be 0 or 1, got ", fmod));
    if (is_float(in[0].dtype) && fmod == 0) throw InvalidInput("fmod must be 1 for float inputs (ONNX)");
    return t;
  }
  template <class E, class R>
  E apply(const Index& o, const R& r) const {
    pet::detail::require_ordered<E>(name);
    if constexpr (std::is_integral_v<E>) {
      return E(integer(r.ints(0, broadcast_index(o, r.shape(0))), r.ints(1, broadcast_index(o, r.shape(1)))));
    } else {
      auto [a, b] = detail::operands<E>(o, r);
      if constexpr (is_field_v<E>) {
        return a;  // not reached: require_ordered refused the field
      } else {
        return E(std::fmod(a, b));
      }
    }
  }
  /// The integer remainder: C's (sign of a) with fmod = 1, Python's (sign of b) with fmod = 0;
  /// anything by -1 is 0 (the machine's remainder of the lowest value by -1 would trap).
  int64_t integer(int64_t a, int64_t b) const {
    if (b == 0) throw InvalidInput("Mod: integer division by zero");
    int64_t m = b == -1 ? 0 : a % b;
    if (!fmod && m != 0 && ((m < 0) != (b < 0))) m += b;
    return m;
  }
  bool operator==(const Mod&) const = default;
};

}  // namespace pet::ops
