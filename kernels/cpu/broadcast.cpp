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

template <BinaryKind K>
inline float apply(float x, float y) {
  if constexpr (K == BinaryKind::Add) return x + y;
  else if constexpr (K == BinaryKind::Sub) return x - y;
  else if constexpr (K == BinaryKind::Mul) return x * y;
  else if constexpr (K == BinaryKind::Div) return x / y;
  else if constexpr (K == BinaryKind::Max) return std::isnan(x) || x > y ? x : y;  // NaN wins, as ops::Max
  else if constexpr (K == BinaryKind::Min) return std::isnan(x) || x < y ? x : y;
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
void kernel(const float* a, const std::vector<int64_t>& sa, const float* b, const std::vector<int64_t>& sb, float* y, const Shape& shape) {
  const size_t r = shape.size();
  const int64_t inner = shape[r - 1], rows = numel(shape) / inner;
  // rows in parallel, each an innermost run; a row's offsets from its index over the outer dims
  parallel_chunks(rows, std::max<int64_t>(1, (int64_t(1) << 14) / inner), [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) {
      int64_t rem = row, oa = 0, ob = 0;
      for (size_t d = r - 1; d-- > 0;) {
        const int64_t i = rem % shape[d];
        rem /= shape[d];
        oa += i * sa[d];
        ob += i * sb[d];
      }
      run<K>(a + oa, sa[r - 1], b + ob, sb[r - 1], y + row * inner, inner);
    }
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
  if (numel(shape) == 0) return;
  simplify_views(shape, {&sc, &sa, &sb});
  const size_t r = shape.size();
  const int64_t inner = shape[r - 1], rows = numel(shape) / inner;
  const WhereRun run = where_pick(sc[r - 1], sa[r - 1], sb[r - 1]);
  parallel_chunks(rows, std::max<int64_t>(1, (int64_t(1) << 14) / inner), [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) {
      int64_t rem = row, oc = 0, oa = 0, ob = 0;
      for (size_t d = r - 1; d-- > 0;) {
        const int64_t i = rem % shape[d];
        rem /= shape[d];
        oc += i * sc[d], oa += i * sa[d], ob += i * sb[d];
      }
      run(c + oc, sc[r - 1], a + oa, sa[r - 1], b + ob, sb[r - 1], y + row * inner, inner);
    }
  });
}

void broadcast_binary(BinaryKind op, const float* a, std::vector<int64_t> sa, const float* b, std::vector<int64_t> sb, float* y, Shape shape) {
  // y is contiguous: dims that a and b both continue without a jump merge
  simplify(shape, sa, sb);
  switch (op) {
    case BinaryKind::Add: return kernel<BinaryKind::Add>(a, sa, b, sb, y, shape);
    case BinaryKind::Sub: return kernel<BinaryKind::Sub>(a, sa, b, sb, y, shape);
    case BinaryKind::Mul: return kernel<BinaryKind::Mul>(a, sa, b, sb, y, shape);
    case BinaryKind::Div: return kernel<BinaryKind::Div>(a, sa, b, sb, y, shape);
    case BinaryKind::Max: return kernel<BinaryKind::Max>(a, sa, b, sb, y, shape);
    case BinaryKind::Min: return kernel<BinaryKind::Min>(a, sa, b, sb, y, shape);
    case BinaryKind::PRelu: return kernel<BinaryKind::PRelu>(a, sa, b, sb, y, shape);
  }
}

}  // namespace pet::cpu
