#pragma once
// The index arithmetic of pet's CUDA kernels, as PET_HD functions on plain structs: the
// kernels (kernels.cu) only add the launch, and tests/test_cuda_host.cpp runs the same
// functions on the CPU against the reference interpreter (every path of the R/T copy, the
// tiled transpose's block/thread mapping, broadcasting), on every machine.
#include <cstdint>
#include <optional>

#include "pet/backend/copy_plan.hpp"
#include "pet/core/hd.hpp"

namespace pet::cuda {

inline constexpr int kDevRank = kMaxRank;

/// A box copy (pet/backend/copy_plan.hpp) in fixed-size form, passed to kernels by value.
struct DevBox {
  int rank = 0;
  int64_t count = 0;  ///< elements of the box
  int64_t shape[kDevRank] = {}, src_strides[kDevRank] = {}, dst_strides[kDevRank] = {};
  int64_t src_offset = 0, dst_offset = 0;
};

/// Element i of the box (row-major over its shape): its source and destination offsets.
PET_HD inline void box_element(const DevBox& b, int64_t i, int64_t& src, int64_t& dst) {
  src = b.src_offset;
  dst = b.dst_offset;
  for (int k = b.rank - 1; k >= 0; --k) {
    const int64_t q = i % b.shape[k];
    i /= b.shape[k];
    src += q * b.src_strides[k];
    dst += q * b.dst_strides[k];
  }
}

/// The fixed-size form of a host plan's copy; dims of extent 1 are dropped and
/// neighbouring dims that are contiguous in both source and destination are merged (fewer
/// divisions per element).
DevBox make_dev_box(const backend::BoxCopy& c);

/// A true transpose (the destination's innermost dim is not the source's) copied through a
/// 32 x 32 tile in shared memory, so that both reads and writes are coalesced: dim `a` is the
/// destination's innermost, `b` the one the source reads contiguously; a block handles one
/// tile of (a, b) at one position of the other dims.
struct DevTile {
  static constexpr int kTile = 32;
  DevBox box;
  int a = 0, b = 0;
  int64_t tiles_a = 0, tiles_b = 0, blocks = 0;
};

/// The tiled form of a box, when it transposes (nullopt when plain element order already
/// reads or writes contiguously).
std::optional<DevTile> make_dev_tile(const DevBox& b);

/// Element (ia, ib) of the tile of `block`: false when it falls outside the box; else its
/// offsets.
PET_HD inline bool tile_element(const DevTile& t, int64_t block, int ia, int ib, int64_t& src, int64_t& dst) {
  const int64_t ta = block % t.tiles_a, tb = (block / t.tiles_a) % t.tiles_b;
  int64_t rest = block / (t.tiles_a * t.tiles_b);
  const int64_t ea = ta * DevTile::kTile + ia, eb = tb * DevTile::kTile + ib;
  if (ea >= t.box.shape[t.a] || eb >= t.box.shape[t.b]) return false;
  src = t.box.src_offset + ea * t.box.src_strides[t.a] + eb * t.box.src_strides[t.b];
  dst = t.box.dst_offset + ea * t.box.dst_strides[t.a] + eb * t.box.dst_strides[t.b];
  for (int k = t.box.rank - 1; k >= 0; --k) {
    if (k == t.a || k == t.b) continue;
    const int64_t q = rest % t.box.shape[k];
    rest /= t.box.shape[k];
    src += q * t.box.src_strides[k];
    dst += q * t.box.dst_strides[k];
  }
  return true;
}

/// Numpy broadcasting of two operands to an output (strides 0 on broadcast dims).
struct DevBroadcast {
  int rank = 0;
  int64_t count = 0;
  int64_t shape[kDevRank] = {}, a_strides[kDevRank] = {}, b_strides[kDevRank] = {};
};
DevBroadcast make_dev_broadcast(const Shape& a, const Shape& b, const Shape& out);

PET_HD inline void broadcast_element(const DevBroadcast& br, int64_t i, int64_t& ia, int64_t& ib) {
  ia = ib = 0;
  for (int k = br.rank - 1; k >= 0; --k) {
    const int64_t q = i % br.shape[k];
    i /= br.shape[k];
    ia += q * br.a_strides[k];
    ib += q * br.b_strides[k];
  }
}

/// The binary element-wise ops the cuda backend runs with its own kernel (their meaning is
/// the ops' in pet/ir/ops/elementwise.hpp; test_cuda_host checks these against it).
enum class BinaryKind : int { Add, Sub, Mul, Div, Max, Min, PRelu, Pow };
std::optional<BinaryKind> binary_kind(const Op& op);

PET_HD inline float binary(BinaryKind k, float a, float b) {
  switch (k) {
    case BinaryKind::Add: return a + b;
    case BinaryKind::Sub: return a - b;
    case BinaryKind::Mul: return a * b;
    case BinaryKind::Div: return a / b;
    case BinaryKind::Max: return a != a || a > b ? a : b;  // NaN propagates from a, as in the reference
    case BinaryKind::Min: return a != a || a < b ? a : b;
    case BinaryKind::PRelu: return a < 0.f ? b * a : a;
    case BinaryKind::Pow: return powf(a, b);
  }
  return 0.f;
}


}  // namespace pet::cuda
