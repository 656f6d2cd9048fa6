#include "broadcast.hpp"

#include "copy.hpp"

#include <algorithm>
#include <cmath>

#include "pet/core/parallel.hpp"

namespace pet::cpu {

std::vector<int64_t> broadcast_strides(const Shape& operand, const Shape& out) {
  std::vector<int64_t> s(out.size(), 0);
  int64_t step = 1;
  for (size_t k = 0; k < operand.size(); ++k) {
    const size_t i = operand.size() - 1 - k, o = out.size() - 1 - k;
    s[o] = operand[i] == 1 && out[o] != 1 ? 0 : step;
    step *= operand[i];
  }
  return s;
}

namespace {

/// C's fmod(a, b), exactly, without glibc's bit-by-bit loop where |a / b| < 2^29: then the
/// truncated quotient q times |b| is exact in double (24 + 29 bits), and so is |a| - q |b|
/// (both are multiples of the smaller ulp of |a| and |b|, the difference below 2 |b|); the
/// quotient's rounding can make q one too large, which one correction undoes. The result,
/// |a| mod |b| with a's sign, is a float exactly. Other operands (b zero or NaN, either
/// b or a infinite, larger quotients) go to std::fmod.
inline float exact_fmod(float a, float b) {
  const float A = std::fabs(a), B = std::fabs(b);
  if (!(B > 0.f) || !std::isfinite(B) || !std::isfinite(A) || !(A < B * 536870912.f)) return std::fmod(a, b);
  const double q = std::floor(double(A) / double(B));
  double r = double(A) - q * double(B);
  if (r < 0) r += double(B);
  return std::copysign(float(r), a);
}

template <BinaryKind K>
inline float apply(float x, float y) {
  if constexpr (K == BinaryKind::Add) return x + y;
  else if constexpr (K == BinaryKind::Sub) return x - y;
  else if constexpr (K == BinaryKind::Mul) return x * y;
  else if constexpr (K == BinaryKind::Div) return x / y;
  else if constexpr (K == BinaryKind::Max) return std::isnan(x) || x > y ? x : y;  // NaN wins, as ops::Max
  else if constexpr (K == BinaryKind::Min) return std::isnan(x) || x < y ? x : y;
  else if constexpr (K == BinaryKind::Fmod) return exact_fmod(x, y);
  else return x < 0.f ? y * x : x;  // PRelu, y the slope
}

/// One innermost run of n elements: the common stride patterns as plain loops.
template <BinaryKind K>
inline void run(const float* a, int64_t sa, const float* b, int64_t sb, float* y, int64_t n) {
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) y[i] = apply<K>(a[i], b[i]);
  } else if (sa == 1 && sb == 0) {
    const float v = *b;
    for (int64_t i = 0; i < n; ++i) y[i] = apply<K>(a[i], v);
  } else if (sa == 0 && sb == 1) {
    const float v = *a;
    for (int64_t i = 0; i < n; ++i) y[i] = apply<K>(v, b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = apply<K>(a[i * sa], b[i * sb]);
  }
}

template <BinaryKind K>
void kernel(const float* a, std::vector<int64_t> sa, const float* b, std::vector<int64_t> sb, float* y, const Shape& shape) {
  broadcast_rows<2>(shape, {std::move(sa), std::move(sb)}, [&](const std::array<int64_t, 2>& o, int64_t yo, int64_t n, const std::array<int64_t, 2>& st) {
    run<K>(a + o[0], st[0], b + o[1], st[1], y + yo, n);
  });
}

template <CompareKind K>
inline bool holds(float x, float y) {
  if constexpr (K == CompareKind::Equal) return x == y;
  else if constexpr (K == CompareKind::Less) return x < y;
  else if constexpr (K == CompareKind::LessOrEqual) return x <= y;
  else if constexpr (K == CompareKind::Greater) return x > y;
  else return x >= y;
}

template <CompareKind K>
void compare_kernel(const float* a, std::vector<int64_t> sa, const float* b, std::vector<int64_t> sb, int64_t* y, const Shape& shape) {
  broadcast_rows<2>(shape, {std::move(sa), std::move(sb)}, [&](const std::array<int64_t, 2>& o, int64_t yo, int64_t n, const std::array<int64_t, 2>& st) {
    const float *pa = a + o[0], *pb = b + o[1];
    int64_t* py = y + yo;
    if (st[0] == 1 && st[1] == 0)
      for (int64_t i = 0; i < n; ++i) py[i] = holds<K>(pa[i], *pb);
    else
      for (int64_t i = 0; i < n; ++i) py[i] = holds<K>(pa[i * st[0]], pb[i * st[1]]);
  });
}

/// One innermost run of Where with strides 0 or 1 known at compile time (S < 0: any).
template <int SC, int SA, int SB>
inline void where_run(const int64_t* c, int64_t sc, const float* a, int64_t sa, const float* b, int64_t sb, float* y, int64_t n) {
  if constexpr (SC >= 0) sc = SC;
  if constexpr (SA >= 0) sa = SA;
  if constexpr (SB >= 0) sb = SB;
  for (int64_t i = 0; i < n; ++i) y[i] = c[i * sc] != 0 ? a[i * sa] : b[i * sb];
}

using WhereRun = void (*)(const int64_t*, int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t);

template <int SC, int SA>
WhereRun where_pick_b(int64_t sb) {
  return sb == 0 ? where_run<SC, SA, 0> : sb == 1 ? where_run<SC, SA, 1> : where_run<SC, SA, -1>;
}
template <int SC>
WhereRun where_pick_a(int64_t sa, int64_t sb) {
  return sa == 0 ? where_pick_b<SC, 0>(sb) : sa == 1 ? where_pick_b<SC, 1>(sb) : where_pick_b<SC, -1>(sb);
}
WhereRun where_pick(int64_t sc, int64_t sa, int64_t sb) {
  return sc == 0 ? where_pick_a<0>(sa, sb) : sc == 1 ? where_pick_a<1>(sa, sb) : where_pick_a<-1>(sa, sb);
}

}  // namespace

void broadcast_where(const int64_t* c, std::vector<int64_t> sc, const float* a, std::vector<int64_t> sa, const float* b, std::vector<int64_t> sb,
                     float* y, Shape shape) {
  broadcast_rows<3>(std::move(shape), {std::move(sc), std::move(sa), std::move(sb)},
                    [&](const std::array<int64_t, 3>& o, int64_t yo, int64_t n, const std::array<int64_t, 3>& st) {
                      where_pick(st[0], st[1], st[2])(c + o[0], st[0], a + o[1], st[1], b + o[2], st[2], y + yo, n);
                    });
}

void broadcast_compare(CompareKind cmp, const float* a, std::vector<int64_t> sa, const float* b, std::vector<int64_t> sb, int64_t* y, Shape shape) {
  switch (cmp) {
    case CompareKind::Equal: return compare_kernel<CompareKind::Equal>(a, std::move(sa), b, std::move(sb), y, shape);
    case CompareKind::Less: return compare_kernel<CompareKind::Less>(a, std::move(sa), b, std::move(sb), y, shape);
    case CompareKind::LessOrEqual: return compare_kernel<CompareKind::LessOrEqual>(a, std::move(sa), b, std::move(sb), y, shape);
    case CompareKind::Greater: return compare_kernel<CompareKind::Greater>(a, std::move(sa), b, std::move(sb), y, shape);
    case CompareKind::GreaterOrEqual: return compare_kernel<CompareKind::GreaterOrEqual>(a, std::move(sa), b, std::move(sb), y, shape);
  }
}

void broadcast_binary(BinaryKind op, const float* a, std::vector<int64_t> sa, const float* b, std::vector<int64_t> sb, float* y, Shape shape) {
  switch (op) {
    case BinaryKind::Add: return kernel<BinaryKind::Add>(a, sa, b, sb, y, shape);
    case BinaryKind::Sub: return kernel<BinaryKind::Sub>(a, sa, b, sb, y, shape);
    case BinaryKind::Mul: return kernel<BinaryKind::Mul>(a, sa, b, sb, y, shape);
    case BinaryKind::Div: return kernel<BinaryKind::Div>(a, sa, b, sb, y, shape);
    case BinaryKind::Max: return kernel<BinaryKind::Max>(a, sa, b, sb, y, shape);
    case BinaryKind::Min: return kernel<BinaryKind::Min>(a, sa, b, sb, y, shape);
    case BinaryKind::PRelu: return kernel<BinaryKind::PRelu>(a, sa, b, sb, y, shape);
    case BinaryKind::Fmod: return kernel<BinaryKind::Fmod>(a, sa, b, sb, y, shape);
  }
}

}  // namespace pet::cpu
