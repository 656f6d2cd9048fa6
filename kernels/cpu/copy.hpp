#pragma once
// pet's own data-movement kernels for the cpu backend (oneDNN has no R/T, slice, pad or patch
// primitive): every one is a strided copy of a box, multi-threaded, with contiguous inner
// runs done by memcpy and true transposes done in cache-sized tiles.
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "pet/core/shape.hpp"

namespace pet::cpu {

/// dst (contiguous, row-major over `shape`) = src viewed with element strides `src_strides`
/// over `shape` (any permutation or sub-box of a larger tensor).
void strided_copy(const float* src, const std::vector<int64_t>& src_strides, float* dst, const Shape& shape);

/// General box copy: dst[dst_off + i . dst_strides] = src[src_off + i . src_strides] for i
/// over `shape`.
void box_copy(const float* src, const std::vector<int64_t>& src_strides, float* dst, const std::vector<int64_t>& dst_strides,
              const Shape& shape);

/// Drops unit dims and merges dims that are contiguous in both strided views a and b, so that
/// loops run over as few and as long rows as possible (a dim of stride 0 in both merges too).
void simplify(Shape& shape, std::vector<int64_t>& a, std::vector<int64_t>& b);
/// The same over any number of strided views (the operands of a broadcast, say).
void simplify_views(Shape& shape, std::initializer_list<std::vector<int64_t>*> views);

/// Fills n floats with v (multi-threaded).
void fill(float* dst, int64_t n, float v);

}  // namespace pet::cpu
