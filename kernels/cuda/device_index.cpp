// Host-side construction of the CUDA kernels' index structs (kernels/cuda/device_index.hpp).
#include "device_index.hpp"

#include <cstdlib>

namespace pet::cuda {

DevBox make_dev_box(const backend::BoxCopy& c) {
  // Drop unit dims, then merge dim k into k+1 where both sides are contiguous across them.
  std::vector<int64_t> shape, ss, ds;
  for (size_t k = 0; k < c.shape.size(); ++k)
    if (c.shape[k] != 1) shape.push_back(c.shape[k]), ss.push_back(c.src_strides[k]), ds.push_back(c.dst_strides[k]);
  for (size_t k = shape.size(); k-- > 1;) {
    if (ss[k - 1] == ss[k] * shape[k] && ds[k - 1] == ds[k] * shape[k]) {
      shape[k] *= shape[k - 1];
      shape.erase(shape.begin() + long(k - 1));
      ss.erase(ss.begin() + long(k - 1));
      ds.erase(ds.begin() + long(k - 1));
    }
  }
  PET_CHECK(shape.size() <= size_t(kDevRank), "a box copy of rank ", shape.size());
  DevBox b;
  b.rank = int(shape.size());
  b.count = numel(c.shape);
  b.src_offset = c.src_offset;
  b.dst_offset = c.dst_offset;
  for (int k = 0; k < b.rank; ++k) b.shape[k] = shape[size_t(k)], b.src_strides[k] = ss[size_t(k)], b.dst_strides[k] = ds[size_t(k)];
  return b;
}

std::optional<DevTile> make_dev_tile(const DevBox& b) {
  if (b.rank < 2) return std::nullopt;
  const int a = b.rank - 1;  // the destination is written row-major over the box
  int s = -1;
  for (int k = 0; k < b.rank; ++k)
    if (std::llabs(b.src_strides[k]) == 1) s = k;
  if (s < 0 || s == a || std::llabs(b.dst_strides[a]) != 1) return std::nullopt;
  DevTile t;
  t.box = b;
  t.a = a;
  t.b = s;
  t.tiles_a = (b.shape[a] + DevTile::kTile - 1) / DevTile::kTile;
  t.tiles_b = (b.shape[s] + DevTile::kTile - 1) / DevTile::kTile;
  t.blocks = t.tiles_a * t.tiles_b;
  for (int k = 0; k < b.rank; ++k)
    if (k != a && k != s) t.blocks *= b.shape[k];
  return t;
}

DevBroadcast make_dev_broadcast(const Shape& a, const Shape& b, const Shape& out) {
  PET_CHECK(out.size() <= size_t(kDevRank), "a broadcast of rank ", out.size());
  DevBroadcast br;
  br.rank = int(out.size());
  br.count = numel(out);
  const auto sa = strides_of(a), sb = strides_of(b);
  for (size_t k = 0; k < out.size(); ++k) {
    br.shape[k] = out[k];
    const size_t oa = out.size() - a.size(), ob = out.size() - b.size();
    br.a_strides[k] = k >= oa && a[k - oa] != 1 ? sa[k - oa] : 0;
    br.b_strides[k] = k >= ob && b[k - ob] != 1 ? sb[k - ob] : 0;
  }
  return br;
}

std::optional<BinaryKind> binary_kind(const Op& op) {
  if (std::holds_alternative<ops::Add>(op)) return BinaryKind::Add;
  if (std::holds_alternative<ops::Sub>(op)) return BinaryKind::Sub;
  if (std::holds_alternative<ops::Mul>(op)) return BinaryKind::Mul;
  if (std::holds_alternative<ops::Div>(op)) return BinaryKind::Div;
  if (std::holds_alternative<ops::Max>(op)) return BinaryKind::Max;
  if (std::holds_alternative<ops::Min>(op)) return BinaryKind::Min;
  if (std::holds_alternative<ops::PRelu>(op)) return BinaryKind::PRelu;
  if (std::holds_alternative<ops::Pow>(op)) return BinaryKind::Pow;
  return std::nullopt;
}

}  // namespace pet::cuda
