#pragma once
/// Constant values of graph tensors (initializers) and their storage.
#include <cstdint>
#include <string>
#include <variant>

#include "pet/core/dtype.hpp"
#include "pet/core/tensor.hpp"

namespace pet {

/// A constant's value. Integer constants of the 1-byte types keep one byte per element, as in
/// their file: int8 as Tensor<int8_t>, uint8 and bool as Tensor<uint8_t> (a quantized model's
/// weights take the memory they take on disk, not 8 times it); int32 and int64 ones are held
/// as int64 (dtype.hpp). Graph::add_constant keeps to this (const_storage); read integer
/// constants with ConstInts (in place) or const_ints, never std::get<Tensor<int64_t>>.
using ConstValue = std::variant<Tensor<float>, Tensor<int64_t>, Tensor<int8_t>, Tensor<uint8_t>>;

const Shape& const_shape(const ConstValue& v);
/// The elements of an integer constant as int64: v's own storage when it holds int64, a
/// widened copy of a 1-byte one (InternalError for a float constant).
Tensor<int64_t> const_ints(const ConstValue& v);
/// v held as a graph constant of type t holds it: 1-byte types narrowed (values wrapped to the
/// type, as wrap_to), other integer types widened to int64. InternalError when a float value
/// is given for an integer type or the other way round.
ConstValue const_storage(DType t, ConstValue v);

/// The elements of an integer constant read as int64 where they are held (no widened copy): a
/// view into v's storage, valid while v lives.
class ConstInts {
 public:
  ConstInts() = default;
  explicit ConstInts(const ConstValue& v);
  int64_t size() const { return n_; }
  int64_t operator[](int64_t i) const {
    switch (kind_) {
      case 2: return static_cast<const int8_t*>(p_)[i];
      case 3: return static_cast<const uint8_t*>(p_)[i];
      default: return static_cast<const int64_t*>(p_)[i];
    }
  }

 private:
  const void* p_ = nullptr;
  int64_t n_ = 0;
  int kind_ = 1;
};

/// v's values as text for a key ("1,2,3"); one of over 256 values (a quantized weight) as its
/// count and two 64-bit hashes of them ("#n:h1:h2"), never megabytes of text.
std::string ints_key(const ConstInts& v);

}  // namespace pet
