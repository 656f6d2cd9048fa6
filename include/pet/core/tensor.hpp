#pragma once
/// Tensor<E>: a shape plus contiguous row-major storage. Copies are shallow (storage is
/// shared, like a framework tensor); use clone() for a deep copy. Reshape-like ops alias.
#include <memory>
#include <vector>

#include "pet/core/shape.hpp"

namespace pet {

template <class E>
class Tensor {
 public:
  Tensor() : buf_(std::make_shared<std::vector<E>>()) {}
  explicit Tensor(Shape shape, E fill = E(0))
      : shape_(std::move(shape)), buf_(std::make_shared<std::vector<E>>(size_t(numel(shape_)), fill)) {}
  Tensor(Shape shape, std::vector<E> data)
      : shape_(std::move(shape)), buf_(std::make_shared<std::vector<E>>(std::move(data))) {
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
  const std::vector<E>& vec() const { return *buf_; }

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
    t.buf_ = std::make_shared<std::vector<E>>(*buf_);
    return t;
  }
  bool shares_storage_with(const Tensor& o) const { return buf_ == o.buf_; }

 private:
  Shape shape_;
  std::shared_ptr<std::vector<E>> buf_;
};

/// Element-wise conversion (e.g. float constants into double or a field).
template <class To, class From, class F>
Tensor<To> map_tensor(const Tensor<From>& t, F&& f) {
  std::vector<To> out(size_t(t.size()));
  for (int64_t i = 0; i < t.size(); ++i) out[size_t(i)] = f(t[i]);
  return Tensor<To>(t.shape(), std::move(out));
}

}  // namespace pet
