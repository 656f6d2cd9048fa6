// onnx::generalise: one model for every value of the symbolic dims, from exports of one
// program at two bindings (include/pet/onnx/onnx.hpp).
#include <onnx/shape_inference/implementation.h>

#include <climits>
#include <cstring>

#include "proto_util.hpp"

namespace pet::onnx {

using namespace detail;

namespace {

using Dims = std::vector<int64_t>;

::onnx::ModelProto parse(std::string_view bytes, const std::string& label) {
  ::onnx::ModelProto m;
  if (bytes.size() > size_t(INT32_MAX) || !m.ParseFromArray(bytes.data(), int(bytes.size())))
    throw InvalidInput(cat(label, ": not a valid ONNX model"));
  return m;
}

/// Every tensor's static shape in m, by name, from ONNX's own shape inference.
std::map<std::string, Dims> shapes_of(::onnx::ModelProto m) {
  ::onnx::shape_inference::InferShapes(m, ::onnx::OpSchemaRegistry::Instance());
  std::map<std::string, Dims> s;
  auto add = [&](const ::onnx::ValueInfoProto& vi) {
    if (!vi.type().tensor_type().has_shape()) return;
    Dims d;
    for (const auto& dim : vi.type().tensor_type().shape().dim()) {
      if (!dim.has_dim_value()) return;
      d.push_back(dim.dim_value());
    }
    s[vi.name()] = d;
  };
  for (const auto& vi : m.graph().input()) add(vi);
  for (const auto& vi : m.graph().value_info()) add(vi);
  for (const auto& vi : m.graph().output()) add(vi);
  for (const auto& t : m.graph().initializer()) s[t.name()] = Dims(t.dims().begin(), t.dims().end());
  return s;
}

Dims ints_of(const ::onnx::TensorProto& t) {
  auto [dtype, v] = tensor_from_proto(t, ".", "initializer");  // (never a WeightStore's: those are float)
  const auto* i = std::get_if<Tensor<int64_t>>(&v);
  if (dtype != DType::Int64 || !i) throw Unsupported(cat("initializer '", t.name(), "' is not an int64 list"));
  return i->vec();
}

/// ONNX Reshape's output shape for `shape` (0 copies, -1 infers, allowzero 0) of input `in`.
std::optional<Dims> reshape_to(const Dims& shape, const Dims& in) {
  Dims out = shape;
  int64_t known = 1, n = 1;
  int infer = -1;
  for (int64_t d : in) n *= d;
  for (size_t k = 0; k < out.size(); ++k) {
    if (out[k] == 0) {
      if (k >= in.size()) return std::nullopt;
      out[k] = in[k];
    }
    if (out[k] == -1) {
      if (infer >= 0) return std::nullopt;
      infer = int(k);
    } else {
      known *= out[k];
    }
  }
  if (infer >= 0) {
    if (known == 0 || n % known) return std::nullopt;
    out[size_t(infer)] = n / known;
  }
  return out;
}

struct Merger {
  ::onnx::ModelProto a, b;
  std::map<std::string, Dims> sa, sb;  // shapes at the two bindings
  const std::set<std::string>& symbolic;  // the dim_params that stay symbolic
  const WeightStore* weights;             // where lean exports left their weights
  std::set<std::string> input_params = {};  // the dim_params the original's inputs declare

  std::set<std::string> taken = {};  // names of a's tensors and nodes, and those fresh() gave

  /// A name no tensor or node of a has (nor one fresh() gave before).
  std::string fresh(const std::string& want) {
    if (taken.empty()) {
      for (const auto& n : a.graph().node()) {
        taken.insert(n.name());
        for (const auto& o : n.output()) taken.insert(o);
      }
      for (const auto& i : a.graph().initializer()) taken.insert(i.name());
      for (const auto& i : a.graph().input()) taken.insert(i.name());
    }
    std::string s = want;
    for (int k = 1; taken.count(s); ++k) s = cat(want, "_", k);
    taken.insert(s);
    return s;
  }
  [[noreturn]] static void cannot(const ::onnx::NodeProto& n, const std::string& why) {
    throw Unsupported(cat(n.op_type(), " '", n.name(), "': ", why));
  }
  const Dims& shape(const std::map<std::string, Dims>& s, const ::onnx::NodeProto& n, const std::string& t) const {
    auto it = s.find(t);
    if (it == s.end()) cannot(n, cat("the shape of '", t, "' is not known"));
    return it->second;
  }
  const Dims* ints_input(const ::onnx::NodeProto& n, int slot, std::map<std::string, Dims>& cache) const {
    if (n.input_size() <= slot || n.input(slot).empty()) return nullptr;
    if (auto it = cache.find(n.input(slot)); it != cache.end()) return &it->second;
    for (const auto& t : a.graph().initializer())
      if (t.name() == n.input(slot)) return &(cache[t.name()] = ints_of(t));
    cannot(n, cat("input '", n.input(slot), "' is not a constant"));
  }

  /// The value of int64 initializer slot `slot` of node n that spells out extents which are
  /// va in a and vb in b, written so that it means both.
  Dims merge(const ::onnx::NodeProto& n, int slot, const Dims& va, const Dims& vb) {
    if (va.size() != vb.size()) cannot(n, cat("input ", slot, " has ", va.size(), " values at one binding and ", vb.size(), " at the other"));
    const Dims &ia = shape(sa, n, n.input(0)), &ib = shape(sb, n, n.input(0));
    Dims out = va;
    std::map<std::string, Dims> cache;
    if (n.op_type() == "Reshape" && slot == 1) {
      int inferred = 0;
      for (size_t k = 0; k < va.size(); ++k) {
        if (va[k] == vb[k]) {
          if (va[k] <= 0) cannot(n, "its shape holds a zero-size dim");
          continue;
        }
        if (k < ia.size() && k < ib.size() && va[k] == ia[k] && vb[k] == ib[k]) out[k] = 0;
        else out[k] = -1, ++inferred;
      }
      if (inferred > 1 || reshape_to(out, ia) != va || reshape_to(out, ib) != vb)
        cannot(n, cat("no one target shape gives ", va, " of ", ia, " and ", vb, " of ", ib));
      return out;
    }
    if (n.op_type() == "Slice" && slot == 2) {
      const Dims* axes = ints_input(n, 3, cache);
      const Dims* steps = ints_input(n, 4, cache);
      for (size_t k = 0; k < va.size(); ++k) {
        if (va[k] == vb[k]) continue;
        const int64_t ax = axes ? (*axes)[k] : int64_t(k);
        if (ax < 0 || size_t(ax) >= ia.size() || size_t(ax) >= ib.size() || (steps && (*steps)[k] <= 0) || va[k] < ia[size_t(ax)] ||
            vb[k] < ib[size_t(ax)])
          cannot(n, cat("its end on axis ", ax, " is ", va[k], " of ", ia, " and ", vb[k], " of ", ib, ", not the end of both"));
        out[k] = INT64_MAX;
      }
      return out;
    }
    if (n.op_type() == "Expand" && slot == 1) {
      const size_t off = va.size() >= ia.size() ? va.size() - ia.size() : 0;
      for (size_t k = 0; k < va.size(); ++k) {
        if (va[k] == vb[k]) continue;
        if (k < off || va.size() < ia.size() || ia.size() != ib.size() || ia[k - off] != va[k] || ib[k - off] != vb[k])
          cannot(n, cat("it expands to ", va, " and ", vb, ", not following its input ", ia, " and ", ib));
        out[k] = 1;
      }
      return out;
    }
    cannot(n, cat("its input '", n.input(slot), "' depends on the shapes and is not an extent pet can write for every shape"));
  }

  /// The declared type of graph input or output `vi` (of a), taken from the original's
  /// declaration of the same name where they agree at both bindings.
  void declare(::onnx::ValueInfoProto& vi, const ::onnx::ValueInfoProto* orig, bool is_input) {
    const Dims &da = sa.at(vi.name()), &db = sb.at(vi.name());
    const char* what = is_input ? "input" : "output";
    // (a float16 or bfloat16 one is float32 here: narrow_interface declares it so after)
    const int32_t elem = vi.type().tensor_type().elem_type();
    if (orig && orig->type().has_tensor_type() &&
        (orig->type().tensor_type().elem_type() == elem ||
         (elem == ::onnx::TensorProto::FLOAT && is_narrow_float(orig->type().tensor_type().elem_type()))) &&
        orig->type().tensor_type().has_shape() && orig->type().tensor_type().shape().dim_size() == int(da.size())) {
      *vi.mutable_type() = orig->type();
      vi.mutable_type()->mutable_tensor_type()->set_elem_type(elem);
      auto& dims = *vi.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim();
      for (int k = 0; k < dims.size(); ++k) {
        const size_t d = size_t(k);
        // A dim_param of the original's inputs is free where it stays symbolic. One that only
        // outputs declare (an exporter's 'Relu16_dim_0') names whatever the program computes
        // there: free where that follows the free input dims, written as the value otherwise.
        // An unknown dim (neither value nor name) of an input is free where its unnamed_dim
        // name stays symbolic; of an output, it stays unknown.
        const bool unknown = !dims[k].has_dim_value() && (!dims[k].has_dim_param() || dims[k].dim_param().empty());
        if (unknown && (!is_input || symbolic.count(unnamed_dim(vi.name(), d)))) continue;
        const bool free = dims[k].has_dim_param() && (symbolic.count(dims[k].dim_param()) ||
                                                      (!is_input && !input_params.count(dims[k].dim_param()) && da[d] != db[d]));
        if (!free && da[d] != db[d])
          throw Unsupported(cat(what, " '", vi.name(), "' is ", da, " and ", db, " where the model declares dim ", k, " as ",
                                dims[k].has_dim_value() ? std::to_string(dims[k].dim_value()) : cat("'", dims[k].dim_param(), "'")));
        if (dims[k].has_dim_value() && dims[k].dim_value() != da[d])
          throw Unsupported(cat(what, " '", vi.name(), "' is ", da, " where the model declares dim ", k, " as ", dims[k].dim_value()));
        if (!free) dims[k].set_dim_value(da[d]);  // a symbolic dim kept at the value it was optimised for
      }
      return;
    }
    if (is_input) throw Unsupported(cat("input '", vi.name(), "' is not declared so in the original model"));
    auto* sh = vi.mutable_type()->mutable_tensor_type()->mutable_shape();
    for (int k = 0; k < sh->dim_size(); ++k)
      if (da[size_t(k)] != db[size_t(k)]) sh->mutable_dim(k)->clear_dim_value();  // unknown: ONNX Runtime infers it
  }
};

/// The first slice along `dims` of a tensor of shape `from` (each of `dims` taken at 0), where
/// the tensor is the same along them (a broadcast); nullopt where it is not.
template <class E>
std::optional<Tensor<E>> broadcast_base(const Tensor<E>& v, const std::vector<size_t>& dims) {
  const Shape& from = v.shape();
  Shape to = from;
  for (size_t d : dims) to[d] = 1;
  Tensor<E> base(to);
  std::vector<int64_t> stride(from.size(), 1), bstride(from.size(), 1);
  for (size_t k = from.size(); k-- > 1;) stride[k - 1] = stride[k] * from[k], bstride[k - 1] = bstride[k] * to[k];
  for (int64_t i = 0; i < numel(from); ++i) {
    int64_t j = 0;
    for (size_t k = 0; k < from.size(); ++k)
      if (to[k] != 1 || from[k] == 1) j += (i / stride[k] % from[k]) * bstride[k];
    const bool first = [&] {
      for (size_t d : dims)
        if (i / stride[d] % from[d] != 0) return false;
      return true;
    }();
    if (first) base.data()[j] = v.data()[i];
    else if (!(v.data()[i] == base.data()[j])) return std::nullopt;  // slices are visited after the first
  }
  return base;
}

/// One element of a shape vector written into the program: tensor's dim `value` (read with
/// Shape) where `tensor` is named, else the extent `value` itself.
struct Extent {
  std::string tensor;
  int64_t value = 0;
};

/// Nodes that compute `extents` as an int64 vector (Shape slices and constants, one Concat)
/// appended to `nodes`, their constants to `inits`; returns the vector's name.
std::string extent_vector(const std::string& prefix, const std::vector<Extent>& extents, Merger& m, std::vector<::onnx::NodeProto>& nodes,
                          std::vector<::onnx::TensorProto>& inits) {
  auto int_attr = [](::onnx::NodeProto& n, const char* key, int64_t v) {
    auto* at = n.add_attribute();
    at->set_name(key);
    at->set_type(::onnx::AttributeProto::INT);
    at->set_i(v);
  };
  ::onnx::NodeProto concat;
  concat.set_op_type("Concat");
  concat.set_name(m.fresh(prefix + "_shape_concat"));
  int_attr(concat, "axis", 0);
  for (size_t d = 0; d < extents.size(); ++d) {
    const std::string piece = m.fresh(cat(prefix, "_extent", d));
    if (!extents[d].tensor.empty()) {
      ::onnx::NodeProto sh;
      sh.set_op_type("Shape");
      sh.set_name(piece);
      sh.add_input(extents[d].tensor);
      sh.add_output(piece);
      int_attr(sh, "start", extents[d].value);
      int_attr(sh, "end", extents[d].value + 1);
      nodes.push_back(std::move(sh));
    } else {
      ::onnx::TensorProto& init = inits.emplace_back();
      tensor_to_proto(DType::Int64, Tensor<int64_t>({1}, std::vector<int64_t>{extents[d].value}), &init);
      init.set_name(piece);
    }
    concat.add_input(piece);
  }
  const std::string out = m.fresh(prefix + "_shape");
  concat.add_output(out);
  nodes.push_back(std::move(concat));
  return out;
}

/// Constant `t` of the first program (`u` in the second) that differs only in extents, along
/// dims where its values are all the same (a class token expanded to the batch, folded at
/// import), written as an Expand of its first slice to a shape read from the graph inputs'
/// extents (Shape, Concat) that are those extents at both bindings. The nodes go to `nodes`,
/// new constants to `inits`; false (t unchanged) where t is not such a constant or no input
/// extent matches.
bool broadcast_from_inputs(::onnx::TensorProto& t, const ::onnx::TensorProto& u, Merger& m, std::vector<::onnx::NodeProto>& nodes,
                           std::vector<::onnx::TensorProto>& inits) {
  if (t.data_type() != u.data_type() || t.dims_size() != u.dims_size()) return false;
  const Dims ta(t.dims().begin(), t.dims().end()), tb(u.dims().begin(), u.dims().end());
  std::vector<size_t> dims;
  for (size_t d = 0; d < ta.size(); ++d)
    if (ta[d] != tb[d]) dims.push_back(d);
  if (dims.empty()) return false;
  // Each differing extent: a graph input's dim that is it at both bindings.
  std::vector<std::pair<std::string, int64_t>> source;
  for (size_t d : dims) {
    std::optional<std::pair<std::string, int64_t>> found;
    for (const auto& vi : m.a.graph().input()) {
      auto ia = m.sa.find(vi.name()), ib = m.sb.find(vi.name());
      if (ia == m.sa.end() || ib == m.sb.end() || ia->second.size() != ib->second.size()) continue;
      for (size_t k = 0; k < ia->second.size() && !found; ++k)
        if (ia->second[k] == ta[d] && ib->second[k] == tb[d]) found = {vi.name(), int64_t(k)};
      if (found) break;
    }
    if (!found) return false;
    source.push_back(*found);
  }
  auto [dtype_a, va] = tensor_from_proto(t, ".", "initializer", m.weights);
  auto [dtype_b, vb] = tensor_from_proto(u, ".", "initializer", m.weights);
  if (dtype_a != dtype_b || va.index() != vb.index()) return false;
  const std::optional<ConstValue> base = std::visit(
      [&](const auto& x) -> std::optional<ConstValue> {
        using T = std::decay_t<decltype(x)>;
        const auto& y = std::get<T>(vb);
        auto bx = broadcast_base(x, dims), by = broadcast_base(y, dims);
        if (!bx || !by || bx->vec() != by->vec()) return std::nullopt;
        return ConstValue(*bx);
      },
      va);
  if (!base) return false;
  const std::string name = t.name(), base_name = m.fresh(name + "_slice");
  std::vector<Extent> extents;
  size_t next = 0;
  for (size_t d = 0; d < ta.size(); ++d) {
    if (next < dims.size() && dims[next] == d) {
      extents.push_back({source[next].first, source[next].second});
      ++next;
    } else {
      extents.push_back({"", ta[d]});
    }
  }
  const std::string shape = extent_vector(name, extents, m, nodes, inits);
  ::onnx::NodeProto expand;
  expand.set_op_type("Expand");
  expand.set_name(m.fresh(name + "_expand"));
  expand.add_input(base_name);
  expand.add_input(shape);
  expand.add_output(name);
  nodes.push_back(std::move(expand));
  t.clear_external_data();
  t.set_data_location(::onnx::TensorProto::DEFAULT);
  tensor_to_proto(dtype_a, *base, &t);
  t.set_name(base_name);
  return true;
}

const ::onnx::ValueInfoProto* find_info(const google::protobuf::RepeatedPtrField<::onnx::ValueInfoProto>& v, const std::string& name) {
  for (const auto& vi : v)
    if (vi.name() == name) return &vi;
  return nullptr;
}

/// Whether lean initializers t and u hold equal values in `weights` (their type and shape too).
bool same_in_store(const ::onnx::TensorProto& t, const ::onnx::TensorProto& u, const WeightStore* weights) {
  uint64_t ta = 0, tl = 0, ua = 0, ul = 0;
  if (!weights || !in_store(t, &ta, &tl) || !in_store(u, &ua, &ul) || t.data_type() != u.data_type() ||
      !std::equal(t.dims().begin(), t.dims().end(), u.dims().begin(), u.dims().end()) || tl != ul)
    return false;
  return std::memcmp(weights->at(ta, tl, t.name()).data(), weights->at(ua, ul, u.name()).data(), tl) == 0;
}

}  // namespace

std::string generalise(std::string_view at_a, std::string_view at_b, const Model& original, const std::string& label,
                       const std::set<std::string>& symbolic, const WeightStore* weights) {
  Merger m{parse(at_a, "generalise: the first program"), parse(at_b, "generalise: the second program"), {}, {}, symbolic, weights};
  const ::onnx::ModelProto o = parse(original.declared, label);
  for (const auto& vi : o.graph().input())
    if (vi.type().has_tensor_type() && vi.type().tensor_type().has_shape())
      for (const auto& d : vi.type().tensor_type().shape().dim())
        if (d.has_dim_param()) m.input_params.insert(d.dim_param());
  m.sa = shapes_of(m.a);
  m.sb = shapes_of(m.b);
  auto& ga = *m.a.mutable_graph();
  const auto& gb = m.b.graph();
  if (ga.node_size() != gb.node_size() || ga.initializer_size() != gb.initializer_size() || ga.input_size() != gb.input_size() ||
      ga.output_size() != gb.output_size())
    throw InternalError("generalise: the two programs differ in structure");
  for (int i = 0; i < ga.node_size(); ++i) {
    const auto &na = ga.node(i), &nb = gb.node(i);
    if (na.op_type() != nb.op_type() || na.name() != nb.name() || na.input_size() != nb.input_size() ||
        na.attribute_size() != nb.attribute_size())
      throw InternalError(cat("generalise: node ", i, " differs in structure ('", na.name(), "', '", nb.name(), "')"));
    for (int k = 0; k < na.input_size(); ++k)
      if (na.input(k) != nb.input(k)) throw InternalError(cat("generalise: node '", na.name(), "' reads different tensors"));
    for (int k = 0; k < na.attribute_size(); ++k)
      if (na.attribute(k).SerializeAsString() != nb.attribute(k).SerializeAsString())
        Merger::cannot(na, cat("its attribute '", na.attribute(k).name(), "' depends on the shapes"));
  }
  std::vector<::onnx::NodeProto> prepend;  // nodes computing broadcast constants from the inputs' extents
  std::vector<::onnx::TensorProto> added;   // and their constants and those of `before`
  std::map<std::string, std::vector<::onnx::NodeProto>> before;  // nodes computing a node's extents, by its name
  std::set<std::string> dropped;  // initializers computed by nodes now
  std::map<std::string, const ::onnx::TensorProto*> binit;
  for (const auto& t : gb.initializer()) binit[t.name()] = &t;
  for (auto& t : *ga.mutable_initializer()) {
    auto it = binit.find(t.name());
    if (it == binit.end()) throw InternalError(cat("generalise: initializer '", t.name(), "' is in one program only"));
    if (t.SerializeAsString() == it->second->SerializeAsString() || same_in_store(t, *it->second, weights)) continue;
    const ::onnx::NodeProto* reader = nullptr;
    int slot = -1, readers = 0;
    for (const auto& n : ga.node())
      for (int k = 0; k < n.input_size(); ++k)
        if (n.input(k) == t.name()) reader = &n, slot = k, ++readers;
    if (readers == 1 && reader->op_type() == "Resize" && slot == 3 && t.data_type() == ::onnx::TensorProto::INT64) {
      // A Resize's sizes: where a size is the input's extent at both bindings, that extent
      // read from the input (ONNX 17's Resize has no "keep this dim").
      const Dims va = ints_of(t), vb = ints_of(*it->second);
      const Dims &ia = m.shape(m.sa, *reader, reader->input(0)), &ib = m.shape(m.sb, *reader, reader->input(0));
      if (va.size() != vb.size() || va.size() != ia.size() || ia.size() != ib.size())
        Merger::cannot(*reader, "its sizes and its input differ in rank");
      std::vector<Extent> extents;
      for (size_t k = 0; k < va.size(); ++k) {
        if (va[k] == vb[k]) extents.push_back({"", va[k]});
        else if (va[k] == ia[k] && vb[k] == ib[k]) extents.push_back({reader->input(0), int64_t(k)});
        else Merger::cannot(*reader, cat("it resizes to ", va, " of ", ia, " and ", vb, " of ", ib, ": a size that changes is not its input's"));
      }
      const std::string sizes = extent_vector(t.name(), extents, m, before[reader->name()], added);
      for (auto& n : *ga.mutable_node())
        if (n.name() == reader->name()) n.set_input(3, sizes);
      dropped.insert(t.name());
      continue;
    }
    if (broadcast_from_inputs(t, *it->second, m, prepend, added)) continue;
    if (readers != 1 || t.data_type() != ::onnx::TensorProto::INT64) throw Unsupported(cat("constant '", t.name(), "' depends on the shapes"));
    const Dims v = m.merge(*reader, slot, ints_of(t), ints_of(*it->second));
    tensor_to_proto(DType::Int64, Tensor<int64_t>({int64_t(v.size())}, v), &t);
  }
  if (!dropped.empty()) {
    google::protobuf::RepeatedPtrField<::onnx::TensorProto> kept;
    for (auto& t : *ga.mutable_initializer())
      if (!dropped.count(t.name())) *kept.Add() = std::move(t);
    ga.mutable_initializer()->Swap(&kept);
  }
  for (auto& t : added) *ga.add_initializer() = std::move(t);
  if (!prepend.empty() || !before.empty()) {  // the broadcasts read graph inputs and initializers only: first
    google::protobuf::RepeatedPtrField<::onnx::NodeProto> nodes;
    for (auto& n : prepend) *nodes.Add() = std::move(n);
    for (auto& n : *ga.mutable_node()) {
      if (auto b = before.find(n.name()); b != before.end())
        for (auto& x : b->second) *nodes.Add() = std::move(x);
      *nodes.Add() = std::move(n);
    }
    ga.mutable_node()->Swap(&nodes);
  }
  for (auto& vi : *ga.mutable_input()) m.declare(vi, find_info(o.graph().input(), vi.name()), true);
  for (auto& vi : *ga.mutable_output()) m.declare(vi, find_info(o.graph().output(), vi.name()), false);
  std::string bytes = m.a.SerializeAsString();
  check_bytes(bytes, cat("the program for every shape of '", label, "'"));
  return narrow_interface(std::move(bytes), original);
}

}  // namespace pet::onnx
