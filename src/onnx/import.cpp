// ONNX import: parse, bind shapes, order nodes, map ops, fold constant arithmetic.
#include <climits>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <unordered_map>

#include "importer.hpp"

namespace pet::onnx {

using namespace detail;

namespace {
Model import_model(::onnx::ModelProto& model, const std::string& label, const ImportOptions& opt, const std::string& base_dir) {
  Importer im{opt, label, base_dir, {}, {}, {}, {}, {}, {}, {}, {}};
  im.run(model);
  return std::move(im.m);
}
void parse(::onnx::ModelProto& model, std::string_view bytes, const std::string& label) {
  if (bytes.size() > size_t(INT32_MAX))
    throw Unsupported(cat(label, ": ", bytes.size(), " bytes exceed protobuf's 2 GiB limit"));
  if (!model.ParseFromArray(bytes.data(), int(bytes.size())))
    throw InvalidInput(cat(label, ": not a valid ONNX model (the protobuf message could not be parsed)"));
}
}  // namespace

Model import_bytes(std::string_view bytes, const std::string& label, const ImportOptions& opt, const std::string& base_dir) {
  ::onnx::ModelProto model;
  parse(model, bytes, label);
  return import_model(model, label, opt, base_dir);
}

Model import_file(const std::string& path, const ImportOptions& opt) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InvalidInput(cat(path, ": is a folder, not a model file"));
  if (!std::filesystem::exists(path, ec)) throw InvalidInput(cat(path, ": no such model file"));
  if (!std::filesystem::is_regular_file(path, ec)) throw InvalidInput(cat(path, ": is not a regular file (a device, pipe or socket), not a model file"));
  if (std::filesystem::file_size(path, ec) == 0) throw InvalidInput(cat(path, ": the file is empty (0 bytes), not an ONNX model"));
  ::onnx::ModelProto model;
  {
    // Parsed from the stream: the file's bytes are not held besides the message (peak memory).
    const uintmax_t size = std::filesystem::file_size(path, ec);
    if (size > uintmax_t(INT32_MAX)) throw Unsupported(cat(path, ": ", size, " bytes exceed protobuf's 2 GiB limit"));
    std::ifstream f(path, std::ios::binary);
    if (!f) throw InvalidInput(cat(path, ": cannot open the model file"));
    if (!model.ParseFromIstream(&f)) {
      if (f.bad()) throw InvalidInput(cat(path, ": cannot read the model file"));
      throw InvalidInput(cat(path, ": not a valid ONNX model (the protobuf message could not be parsed)"));
    }
  }
  std::string base = std::filesystem::path(path).parent_path().string();
  return import_model(model, path, opt, base.empty() ? "." : base);
}

std::vector<std::string> supported_ops() {
  std::set<std::string> s = {};
  for (const auto& [k, _] : import_table()) s.insert(k);
  for (const auto& [k, _] : expand_table()) s.insert(k);
  for (const auto& k : Importer::structured_op_types()) s.insert(k);
  return {s.begin(), s.end()};
}

}  // namespace pet::onnx
