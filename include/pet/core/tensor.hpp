#pragma once
/// Tensor<E>: a shape plus contiguous row-major storage. Copies are shallow (storage is
/// shared, like a framework tensor); use clone() for a deep copy. Reshape-like ops alias.
/// Storage is aligned to 64 bytes (a cache line, an AVX-512 vector), as oneDNN allocates its
/// own: backends read the caller's tensors and write outputs in place, and some library
/// kernels assume that alignment (oneDNN 2.6's jit linear resampling writes large outputs
/// with aligned non-temporal stores, and crashed on a 16-byte aligned std::vector).
#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <vector>

#include "pet/core/shape.hpp"

namespace pet {

inline constexpr size_t kTensorAlignment = 64;

/// std::allocator with kTensorAlignment-byte aligned blocks.
template <class T>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() noexcept = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kTensorAlignment))); }
  void deallocate(T* p, size_t) noexcept { ::operator delete(p, std::align_val_t(kTensorAlignment)); }
  template <class U>
  bool operator==(const AlignedAllocator<U>&) const noexcept { return true; }
};
template <class E>
using AlignedVector = std::vector<E, AlignedAllocator<E>>;

template <class E>
class Tensor {
 public:
  Tensor() : buf_(std::make_shared<AlignedVector<E>>()) {}
  explicit Tensor(Shape shape, E fill = E(0))
      : shape_(std::move(shape)), buf_(std::make_shared<AlignedVector<E>>(size_t(numel(shape_)), fill)) {}
  /// The elements of `data` (copied into aligned storage).
  Tensor(Shape shape, const std::vector<E>& data)
      : shape_(std::move(shape)), buf_(std::make_shared<AlignedVector<E>>(data.begin(), data.end())) {
    if (int64_t(buf_->size()) != numel(shape_))
      throw InvalidInput(cat("tensor of shape ", shape_, " needs ", numel(shape_),
                             " elements but ", buf_->size(), " were given"));
  }

  const Shape& shape() const { return shape_; }
  int rank() const { return int(shape_.size()); }
  int64_t size() const { return int64_t(buf_->size()); }
  E* data() { return buf_->data(); }
  const E* data() const { return buf_->data(); }
  std::span<const E> span() const { return {buf_->data(), buf_->size()}; }
  std::span<E> span() { return {buf_->data(), buf_->size()}; }
  /// A copy of the elements (for tests and small constants).
  std::vector<E> vec() const { return {buf_->begin(), buf_->end()}; }

  E& operator[](int64_t i) { return (*buf_)[size_t(i)]; }
  const E& operator[](int64_t i) const { return (*buf_)[size_t(i)]; }
  E& at(const Index& idx) { return (*buf_)[size_t(flat_offset(idx, shape_))]; }
  const E& at(const Index& idx) const { return (*buf_)[size_t(flat_offset(idx, shape_))]; }

  /// Same storage, another shape of equal element count.
  Tensor reshaped(Shape s) const {
    if (numel(s) != size())
      throw InternalError(cat("reshaped: ", shape_, " -> ", s, " changes the element count"));
    Tensor t = *this;
    t.shape_ = std::move(s);
    return t;
  }
  Tensor clone() const {
    Tensor t;
    t.shape_ = shape_;
    t.buf_ = std::make_shared<AlignedVector<E>>(*buf_);
    return t;
  }
  bool shares_storage_with(const Tensor& o) const { return buf_ == o.buf_; }
  /// No other Tensor shares this storage: its holder may write it in place.
  bool sole_owner() const { return buf_.use_count() == 1; }

 private:
  Shape shape_;
  std::shared_ptr<AlignedVector<E>> buf_;
};

/// Storage handed out run after run (a compiled program's outputs): the tensor given last
/// time is given again once its taker has dropped it, so a repeated run does not map and
/// zero fresh pages (a 32 MiB output took 15 ms a run that way, the kernel itself 1 ms).
/// While the taker keeps it, a fresh tensor is given: nothing the caller holds is written.
template <class E>
class Recycler {
 public:
  Tensor<E> take(const Shape& shape) {
    if (!last_.has_value() || !last_->sole_owner() || last_->shape() != shape) last_ = Tensor<E>(shape);
    return *last_;
  }

 private:
  std::optional<Tensor<E>> last_;
};

/// Element-wise conversion (e.g. float constants into double or a field).
template <class To, class From, class F>
Tensor<To> map_tensor(const Tensor<From>& t, F&& f) {
  Tensor<To> out(t.shape());
  for (int64_t i = 0; i < t.size(); ++i) out[i] = f(t[i]);
  return out;
}

}  // namespace pet
