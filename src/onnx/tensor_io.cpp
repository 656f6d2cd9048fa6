// TensorProto conversion and the ONNX backend-test file layout (input_N.pb / output_N.pb).
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "proto_util.hpp"

namespace pet::onnx {
namespace detail {

using ::onnx::TensorProto;

DType dtype_from_onnx(int32_t t, std::string_view who) {
  switch (t) {
    case TensorProto::FLOAT:
    case TensorProto::FLOAT16:  // computed as float32 (narrow_float)
    case TensorProto::BFLOAT16: return DType::Float32;
    case TensorProto::INT64: return DType::Int64;
    case TensorProto::INT32: return DType::Int32;
    case TensorProto::BOOL: return DType::Bool;
    case TensorProto::INT8: return DType::Int8;
    case TensorProto::UINT8: return DType::UInt8;
    default:
      throw Unsupported(cat(who, " has element type ", onnx_type_name(t),
                            "; pet supports float32 (float16 and bfloat16 computed as float32), int64, int32, int8, uint8 and bool"));
  }
}

int32_t dtype_to_onnx(DType t) {
  switch (t) {
    case DType::Float32: return TensorProto::FLOAT;
    case DType::Int64: return TensorProto::INT64;
    case DType::Int32: return TensorProto::INT32;
    case DType::Bool: return TensorProto::BOOL;
    case DType::Int8: return TensorProto::INT8;
    case DType::UInt8: return TensorProto::UINT8;
  }
  return TensorProto::UNDEFINED;
}

static_assert(kFloat16 == TensorProto::FLOAT16 && kBFloat16 == TensorProto::BFLOAT16);
std::string_view onnx_type_name(int32_t t) {
  if (::onnx::TensorProto_DataType_IsValid(t))
    return ::onnx::TensorProto_DataType_Name(static_cast<TensorProto::DataType>(t));
  return "an invalid type";
}

namespace {
/// A TensorProto's external data entries.
struct External {
  std::string location;
  int64_t offset = 0, length = -1;
};
External external_of(const TensorProto& p, std::string_view who) {
  External x;
  for (const auto& e : p.external_data()) {
    try {
      if (e.key() == "location") x.location = e.value();
      else if (e.key() == "offset") x.offset = std::stoll(e.value());
      else if (e.key() == "length") x.length = std::stoll(e.value());
    } catch (const std::exception&) {
      throw InvalidInput(cat(who, ": external data entry '", e.key(), "' has the non-numeric value '", e.value(), "'"));
    }
  }
  return x;
}
}  // namespace

bool in_store(const TensorProto& p, uint64_t* offset, uint64_t* length) {
  if (p.data_location() != TensorProto::EXTERNAL) return false;
  External x = external_of(p, "tensor");
  if (x.location != WeightStore::kLocation || x.offset < 0 || x.length < 0) return false;
  if (offset) *offset = uint64_t(x.offset);
  if (length) *length = uint64_t(x.length);
  return true;
}

void store_ref(const Tensor<float>& t, WeightStore& weights, TensorProto* p) {
  p->set_data_type(TensorProto::FLOAT);
  p->clear_dims();
  for (int64_t d : t.shape()) p->add_dims(d);
  p->set_data_location(TensorProto::EXTERNAL);
  p->clear_external_data();
  for (auto [key, value] : {std::pair<const char*, std::string>{"location", std::string(WeightStore::kLocation)},
                            {"offset", std::to_string(weights.add(t))}, {"length", std::to_string(uint64_t(t.size()) * 4)}}) {
    auto* e = p->add_external_data();
    e->set_key(key);
    e->set_value(value);
  }
}

void release_data(TensorProto& p) {
  std::string().swap(*p.mutable_raw_data());
  p.clear_raw_data();
  google::protobuf::RepeatedField<float>().Swap(p.mutable_float_data());
  google::protobuf::RepeatedField<int64_t>().Swap(p.mutable_int64_data());
  google::protobuf::RepeatedField<int32_t>().Swap(p.mutable_int32_data());
}

namespace {
/// A tensor's external data, opened and its range checked against the file.
struct ExternalData {
  std::ifstream file;
  int64_t offset = 0, length = 0;
  std::string path;
};
ExternalData open_external(const TensorProto& p, const std::string& base_dir, std::string_view who) {
  auto [location, offset, length] = external_of(p, who);
  if (location.empty()) throw InvalidInput(cat(who, " is stored externally but names no location"));
  std::filesystem::path path = std::filesystem::path(base_dir) / location;
  if (location.find("..") != std::string::npos || std::filesystem::path(location).is_absolute())
    throw InvalidInput(cat(who, ": external data location '", location, "' must stay inside the model's folder"));
  ExternalData x{std::ifstream(path, std::ios::binary), 0, 0, path.string()};
  if (!x.file) throw InvalidInput(cat(who, ": external data file '", x.path, "' cannot be opened"));
  x.file.seekg(0, std::ios::end);
  const int64_t size = int64_t(x.file.tellg());
  if (length < 0) length = size - offset;
  if (offset < 0 || length < 0 || offset > size || length > size - offset)
    throw InvalidInput(cat(who, ": external data [", offset, ", +", length, ") lies outside '", x.path, "' (", size, " bytes)"));
  x.file.seekg(offset);
  x.offset = offset;
  x.length = length;
  return x;
}
void read_external(ExternalData& x, char* into, std::string_view who) {
  if (!x.file.read(into, std::streamsize(x.length))) throw InvalidInput(cat(who, ": external data file '", x.path, "' could not be read"));
}
}  // namespace

int64_t external_length(const TensorProto& p, const std::string& base_dir, std::string_view who) {
  return open_external(p, base_dir, who).length;
}

uint64_t copy_external(const TensorProto& p, const std::string& base_dir, std::ostream& out, std::string_view who) {
  ExternalData x = open_external(p, base_dir, who);
  std::vector<char> chunk(std::min<size_t>(size_t(x.length), size_t(16) << 20));
  for (int64_t done = 0; done < x.length;) {
    const size_t n = std::min<size_t>(chunk.size(), size_t(x.length - done));
    if (!x.file.read(chunk.data(), std::streamsize(n))) throw InvalidInput(cat(who, ": external data file '", x.path, "' could not be read"));
    if (!out.write(chunk.data(), std::streamsize(n))) throw InvalidInput(cat(who, ": its data could not be written"));
    done += int64_t(n);
  }
  return uint64_t(x.length);
}

std::string external_bytes(const TensorProto& p, const std::string& base_dir, std::string_view who) {
  ExternalData x = open_external(p, base_dir, who);
  std::string buf(size_t(x.length), '\0');
  read_external(x, buf.data(), who);
  return buf;
}

bool same_data(const TensorProto& p, const std::string& base_dir, const Tensor<float>& t, std::string_view who) {
  if (p.data_type() != TensorProto::FLOAT || !std::equal(p.dims().begin(), p.dims().end(), t.shape().begin(), t.shape().end()) ||
      p.has_segment())
    return false;
  const size_t bytes = size_t(t.size()) * 4;
  const char* want = reinterpret_cast<const char*>(t.data());
  if (p.data_location() != TensorProto::EXTERNAL)
    return p.has_raw_data() && p.raw_data().size() == bytes && std::memcmp(p.raw_data().data(), want, bytes) == 0;
  ExternalData x = open_external(p, base_dir, who);
  if (size_t(x.length) != bytes) return false;
  std::vector<char> chunk(std::min<size_t>(bytes, size_t(16) << 20));
  for (size_t done = 0; done < bytes;) {  // in chunks: the tensor is not read in whole
    const size_t n = std::min(chunk.size(), bytes - done);
    if (!x.file.read(chunk.data(), std::streamsize(n))) throw InvalidInput(cat(who, ": external data file '", x.path, "' could not be read"));
    if (std::memcmp(chunk.data(), want + done, n) != 0) return false;
    done += n;
  }
  return true;
}

namespace {
template <class E, class Field>
std::vector<E> from_field(const Field& f) {
  return std::vector<E>(f.begin(), f.end());
}
}  // namespace

std::pair<DType, ConstValue> tensor_from_proto(const TensorProto& p, const std::string& base_dir, std::string_view who_in,
                                               const WeightStore* weights) {
  std::string who = cat(who_in.empty() ? "tensor" : who_in, p.name().empty() ? "" : cat(" '", p.name(), "'"));
  DType dt = dtype_from_onnx(p.data_type(), who);
  Shape shape(p.dims().begin(), p.dims().end());
  if (shape.size() > size_t(kMaxRank)) throw Unsupported(cat(who, " has rank ", shape.size(), "; pet supports up to ", kMaxRank));
  int64_t n;
  try {
    n = numel(shape);
  } catch (const InvalidInput& e) {
    throw InvalidInput(cat(who, ": ", e.what()));
  }
  if (p.has_segment()) throw Unsupported(cat(who, " is segmented; pet reads whole tensors only"));
  const bool external = p.data_location() == TensorProto::EXTERNAL;
  std::string ext;
  const std::string* raw = nullptr;
  uint64_t offset = 0, length = 0;
  if (weights && in_store(p, &offset, &length)) {
    if (dt != DType::Float32 || uint64_t(n) * 4 != length)
      throw InvalidInput(cat(who, " is left in pet's weight store but is not float32 of shape ", shape));
    return {dt, weights->at(offset, length, who).reshaped(shape)};
  }
  // 1-byte integers (quantized weights, masks) keep one byte an element (const_value.hpp)
  auto narrow = [&](auto tag, const char* bytes) -> ConstValue {
    using E = decltype(tag);
    Tensor<E> t(shape);
    if (n) std::memcpy(t.data(), bytes, size_t(n));
    if (dt == DType::Bool)
      for (int64_t i = 0; i < n; ++i) t[i] = t[i] != 0;
    return t;
  };
  if (is_narrow_float(p.data_type())) {  // 2 bytes a value (raw or external), or each one's bits in int32_data
    std::string ext16;
    const std::string* bytes = external ? &(ext16 = external_bytes(p, base_dir, who)) : p.has_raw_data() ? &p.raw_data() : nullptr;
    if (bytes && bytes->size() != size_t(n) * 2)
      throw InvalidInput(cat(who, " of shape ", shape, " needs ", size_t(n) * 2, " bytes of data but has ", bytes->size()));
    if (!bytes && p.int32_data_size() != n)
      throw InvalidInput(cat(who, " of shape ", shape, " has ", p.int32_data_size(), " values instead of ", n));
    Tensor<float> t(shape);
    for (int64_t i = 0; i < n; ++i) {
      uint16_t b;
      if (bytes) std::memcpy(&b, bytes->data() + size_t(i) * 2, 2);
      else b = uint16_t(uint32_t(p.int32_data(int(i))));
      t[i] = narrow_to_float(b, p.data_type());
    }
    return {dt, t};
  }
  if (external && (dt == DType::Float32 || is_int8(dt))) {  // straight into the tensor's storage (no copy of it)
    ExternalData x = open_external(p, base_dir, who);
    const int64_t esize = dt == DType::Float32 ? 4 : 1;
    if (x.length != n * esize) throw InvalidInput(cat(who, " of shape ", shape, " needs ", n * esize, " bytes of data but has ", x.length));
    if (dt == DType::Float32) {
      Tensor<float> t(shape);
      if (n) read_external(x, reinterpret_cast<char*>(t.data()), who);
      return {dt, t};
    }
    auto read = [&](auto tag) -> ConstValue {
      Tensor<decltype(tag)> t(shape);
      if (n) read_external(x, reinterpret_cast<char*>(t.data()), who);
      return t;
    };
    return {dt, dt == DType::Int8 ? read(int8_t{}) : read(uint8_t{})};
  }
  if (external) {
    ext = external_bytes(p, base_dir, who);
    raw = &ext;
  } else if (p.has_raw_data()) {
    raw = &p.raw_data();
  }
  const size_t esize = dt == DType::Float32 || dt == DType::Int32 ? 4 : dt == DType::Int64 ? 8 : 1;
  if (raw) {
    if (raw->size() != size_t(n) * esize)
      throw InvalidInput(cat(who, " of shape ", shape, " needs ", size_t(n) * esize, " bytes of data but has ", raw->size()));
    // Straight into the tensor's (aligned) storage: a weight is not copied twice.
    if (dt == DType::Float32) {
      Tensor<float> t(shape);
      if (n) std::memcpy(t.data(), raw->data(), raw->size());
      return {dt, t};
    }
    if (dt == DType::Int8) return {dt, narrow(int8_t{}, raw->data())};
    if (esize == 1) return {dt, narrow(uint8_t{}, raw->data())};  // uint8, bool
    Tensor<int64_t> t(shape);
    for (int64_t i = 0; i < n; ++i) {
      const char* b = raw->data() + size_t(i) * esize;
      if (dt == DType::Int64) {
        std::memcpy(&t[i], b, 8);
      } else {
        int32_t x;
        std::memcpy(&x, b, 4);
        t[i] = x;
      }
    }
    return {dt, t};
  }
  auto check = [&](int64_t have) {
    if (have != n) throw InvalidInput(cat(who, " of shape ", shape, " has ", have, " values instead of ", n));
  };
  if (dt == DType::Float32) {
    check(p.float_data_size());
    return {dt, Tensor<float>(shape, from_field<float>(p.float_data()))};
  }
  if (dt == DType::Int64) {
    check(p.int64_data_size());
    return {dt, Tensor<int64_t>(shape, from_field<int64_t>(p.int64_data()))};
  }
  check(p.int32_data_size());  // int32, int8, uint8 and bool are stored in int32_data
  std::vector<int64_t> v = from_field<int64_t>(p.int32_data());
  for (auto& x : v) x = wrap_to(dt, x);
  return {dt, const_storage(dt, Tensor<int64_t>(shape, std::move(v)))};
}

void tensor_to_proto(DType dtype, const ConstValue& v, TensorProto* p) {
  p->set_data_type(dtype_to_onnx(dtype));
  const Shape& s = const_shape(v);
  p->clear_dims();
  for (int64_t d : s) p->add_dims(d);
  std::string raw;
  if (const auto* f = std::get_if<Tensor<float>>(&v)) {
    raw.assign(reinterpret_cast<const char*>(f->data()), size_t(f->size()) * 4);
  } else if (is_int8(dtype) && !std::holds_alternative<Tensor<int64_t>>(v)) {  // the bytes as held
    std::visit([&](const auto& t) { raw.assign(reinterpret_cast<const char*>(t.data()), size_t(t.size()) * sizeof(t[0])); }, v);
  } else {
    const Tensor<int64_t> t = const_ints(v);
    for (int64_t i = 0; i < t.size(); ++i) {
      int64_t x = t[i];
      if (dtype == DType::Int64) raw.append(reinterpret_cast<const char*>(&x), 8);
      else if (dtype == DType::Int32) {
        int32_t y = int32_t(x);
        raw.append(reinterpret_cast<const char*>(&y), 4);
      } else {
        raw.push_back(char(uint8_t(uint64_t(wrap_to(dtype, x)))));
      }
    }
  }
  p->set_raw_data(std::move(raw));
}

}  // namespace detail

uint64_t WeightStore::add(const Tensor<float>& t) {
  const std::pair<const float*, Shape> key{t.data(), t.shape()};
  if (auto it = index_.find(key); it != index_.end()) return it->second;
  const uint64_t at = end_;
  by_offset_.emplace(at, t);
  index_.emplace(key, at);
  end_ = (at + uint64_t(t.size()) * 4 + 63) / 64 * 64;
  return at;
}

const Tensor<float>& WeightStore::at(uint64_t offset, uint64_t bytes, std::string_view who) const {
  auto it = by_offset_.find(offset);
  if (it == by_offset_.end() || uint64_t(it->second.size()) * 4 != bytes)
    throw InvalidInput(cat(who, ": pet's weight store holds no tensor of ", bytes, " bytes at offset ", offset));
  return it->second;
}

NamedTensor read_tensor_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InvalidInput(cat("cannot open tensor file '", path, "'"));
  std::stringstream ss;
  ss << f.rdbuf();
  std::string bytes = ss.str();
  ::onnx::TensorProto p;
  if (!p.ParseFromString(bytes)) throw InvalidInput(cat("'", path, "' is not a serialized ONNX TensorProto"));
  auto [dt, v] = detail::tensor_from_proto(p, std::filesystem::path(path).parent_path().string(), path);
  return {p.name(), dt, const_value(v), detail::is_narrow_float(p.data_type()) ? p.data_type() : 0};
}

void write_tensor_file(const std::string& path, const NamedTensor& t) {
  ::onnx::TensorProto p;
  p.set_name(t.name);
  if (t.narrow_float) {
    if (!detail::is_narrow_float(t.narrow_float)) throw InvalidInput(cat("tensor file '", path, "': ", detail::onnx_type_name(t.narrow_float), " is not float16 or bfloat16"));
    const auto* f = std::get_if<Tensor<float>>(&t.value);
    if (!f) throw InvalidInput(cat("tensor file '", path, "': integer values cannot be written as ", detail::onnx_type_name(t.narrow_float)));
    const Tensor<float>& v = *f;
    p.set_data_type(t.narrow_float);
    for (int64_t d : v.shape()) p.add_dims(d);
    std::string raw(size_t(v.size()) * 2, '\0');
    for (int64_t i = 0; i < v.size(); ++i) {
      const uint16_t b = detail::float_to_narrow(v[i], t.narrow_float);
      std::memcpy(raw.data() + size_t(i) * 2, &b, 2);
    }
    p.set_raw_data(std::move(raw));
  } else {
    detail::tensor_to_proto(t.dtype, to_constant(t.value), &p);
  }
  std::ofstream f(path, std::ios::binary);
  if (!f || !p.SerializeToOstream(&f)) throw InvalidInput(cat("cannot write tensor file '", path, "'"));
}

Value<float> round_to_narrow(const Value<float>& v, int32_t narrow_float) {
  const auto* f = std::get_if<Tensor<float>>(&v);
  if (!f || !detail::is_narrow_float(narrow_float)) return v;
  Tensor<float> r(f->shape());
  for (int64_t i = 0; i < f->size(); ++i) r[i] = detail::narrow_to_float(detail::float_to_narrow((*f)[i], narrow_float), narrow_float);
  return r;
}

std::vector<NamedTensor> read_test_data(const std::string& dir, const std::string& prefix) {
  if (std::filesystem::is_regular_file(dir))
    throw InvalidInput(cat("'", dir, "' is a file; a test-data folder (holding ", prefix, "_0.pb, ...) is expected"));
  if (!std::filesystem::is_directory(dir)) throw InvalidInput(cat("test-data folder '", dir, "' does not exist"));
  std::vector<NamedTensor> v;
  for (int i = 0;; ++i) {
    auto p = std::filesystem::path(dir) / cat(prefix, "_", i, ".pb");
    if (!std::filesystem::exists(p)) break;
    v.push_back(read_tensor_file(p.string()));
  }
  return v;
}

}  // namespace pet::onnx
