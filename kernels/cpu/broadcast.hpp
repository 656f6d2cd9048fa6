#pragma once
// pet's broadcasting binary kernel for the cpu backend, for the broadcasts oneDNN 2.6 runs
// only with its reference kernel (an operand broadcast over a middle dim, as Swin's window
// masks are added to the attention scores: 30 ms where this takes under 1) and for a first
// operand that is the broadcast one of a non-commutative op (1 - x), which oneDNN's binary
// does not take.
#include <array>
#include <cstdint>
#include <vector>

#include "copy.hpp"
#include "pet/core/parallel.hpp"
#include "pet/core/shape.hpp"

namespace pet::cpu {

/// PRelu: a < 0 ? b a : a (b the slope), as ops::PRelu. Fmod: C's fmod(a, b), as ops::Mod
/// with fmod = 1.
enum class BinaryKind { Add, Sub, Mul, Div, Max, Min, PRelu, Fmod };

/// y (contiguous, row-major over `shape`) = a (op) b, where a and b are read with element
/// strides a_strides and b_strides over `shape` (0 on the dims they are broadcast over).
/// Multi-threaded; the innermost run is a contiguous or scalar loop the compiler vectorises.
void broadcast_binary(BinaryKind op, const float* a, std::vector<int64_t> a_strides, const float* b, std::vector<int64_t> b_strides,
                      float* y, Shape shape);

/// Row-major element strides of `operand` (rank <= out's, aligned to the right, numpy style)
/// read over `out`: 0 where the operand has extent 1 (or lacks the dim) and out does not.
std::vector<int64_t> broadcast_strides(const Shape& operand, const Shape& out);

/// The loop every broadcasting kernel shares: the output (contiguous, row-major over `shape`)
/// walked row by row, in parallel, after merging the dims all operands continue without a
/// jump; row(offsets, y_offset, inner, inner_strides) gets each operand's element offset at
/// the row's start, the output's, the row length and each operand's stride along the row.
template <size_t N, class F>
void broadcast_rows(Shape shape, std::array<std::vector<int64_t>, N> strides, F&& row) {
  if (numel(shape) == 0) return;
  [&]<size_t... I>(std::index_sequence<I...>) { simplify_views(shape, {&strides[I]...}); }(std::make_index_sequence<N>{});
  const size_t r = shape.size();
  const int64_t inner = shape[r - 1], rows = numel(shape) / inner;
  std::array<int64_t, N> step;
  for (size_t k = 0; k < N; ++k) step[k] = strides[k][r - 1];
  parallel_chunks(rows, std::max<int64_t>(1, (int64_t(1) << 14) / inner), [&](int64_t r0, int64_t r1) {
    for (int64_t rw = r0; rw < r1; ++rw) {
      std::array<int64_t, N> off{};
      int64_t rem = rw;
      for (size_t d = r - 1; d-- > 0;) {
        const int64_t i = rem % shape[d];
        rem /= shape[d];
        for (size_t k = 0; k < N; ++k) off[k] += i * strides[k][d];
      }
      row(off, rw * inner, inner, step);
    }
  });
}

/// Comparisons of float operands (IEEE: NaN is unordered, so only != ... holds for it).
enum class CompareKind { Equal, Less, LessOrEqual, Greater, GreaterOrEqual };

/// y (contiguous, 0 or 1) = a (cmp) b, operands read with broadcast strides.
void broadcast_compare(CompareKind cmp, const float* a, std::vector<int64_t> a_strides, const float* b, std::vector<int64_t> b_strides,
                       int64_t* y, Shape shape);

/// ONNX Where: y (contiguous over `shape`) = c ? a : b, each operand read with its element
/// strides (0 where broadcast); c nonzero means true. Multi-threaded, rows as in
/// broadcast_binary.
void broadcast_where(const int64_t* c, std::vector<int64_t> c_strides, const float* a, std::vector<int64_t> a_strides, const float* b,
                     std::vector<int64_t> b_strides, float* y, Shape shape);

}  // namespace pet::cpu
