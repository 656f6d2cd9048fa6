// The cuda backend's index arithmetic, run on the host against the reference interpreter
// (kernels/cuda/device_index.hpp): the box-copy plans of every data-movement op, each
// copy's element mapping as the copy kernel runs it, the tiled transpose's block and thread
// mapping (every element written once, with the right value), broadcasting binary ops, and
// the lifetime buffer plan the cuda backend places device memory with (shared with the cpu
// backend).
// Runs on every machine; the GPU runs of the same kernels are in test_cuda.
#include <map>

#include "cuda/device_index.hpp"
#include "pet/backend/buffer_plan.hpp"
#include "op_testing.hpp"

using namespace pet;
using namespace pet::testing;

namespace {
struct Case {
  Op op;
  Types in;
  std::string what;
  int outputs = 1;
};

std::vector<Case> copy_cases() {
  std::vector<Case> v;
  v.push_back({ops::Transpose{.perm = {1, 0}}, {f32({37, 45})}, "2-D transpose (tiled)"});
  v.push_back({ops::Transpose{.perm = {0, 2, 3, 1}}, {f32({2, 16, 9, 7})}, "NCHW -> NHWC"});
  v.push_back({ops::Transpose{.perm = {0, 2, 1, 3}}, {f32({2, 12, 33, 64})}, "BERT head split (rows kept)"});
  v.push_back({ops::Transpose{.perm = {2, 1, 0}}, {f32({5, 1, 70})}, "with a unit dim"});
  v.push_back({ops::RT{.split_shape = {16, 4, 3, 4, 3}, .perm = {1, 3, 0, 2, 4}, .out_shape = {16, 16, 3, 3}}, {f32({16, 16, 3, 3})},
               "R/T: dilated weights regrouped"});
  v.push_back({ops::RT{.split_shape = {1, 16, 6, 2, 6, 2}, .perm = {0, 1, 3, 2, 5, 4}, .out_shape = {1, 16, 12, 12}}, {f32({1, 16, 12, 12})},
               "R/T: parity phases"});
  v.push_back({ops::RT{.split_shape = {3, 40, 50}, .perm = {2, 0, 1}, .out_shape = {50, 120}}, {f32({120, 50})}, "R/T with reshape"});
  v.push_back({ops::Slice{.starts = {1, 0}, .ends = {9, 7}, .axes = {2, 3}, .steps = {2, 3}}, {f32({2, 3, 10, 8})}, "strided slice"});
  v.push_back({ops::Slice{.starts = {-1}, .ends = {-100}, .axes = {1}, .steps = {-1}}, {f32({3, 11})}, "reversing slice"});
  v.push_back({ops::Split{.axis = 1, .split = {3, 5, 1}, .num_outputs = 3}, {f32({2, 9, 4})}, "split", 3});
  v.push_back({ops::Pad{.pads = {0, 1, 2, 0, 0, 3, 1, 0}, .value = 0.5}, {f32({2, 3, 4, 5})}, "pad"});
  v.push_back({ops::Pad{.pads = {0, -1, 2, 0, 0, 1, -2, 0}}, {f32({2, 3, 4, 5})}, "pad that crops"});
  v.push_back({ops::Pad{.pads = {0, 1, 2, 0, 0, 3, 1, 0}, .mode = ops::PadMode::Edge}, {f32({2, 3, 4, 5})}, "edge pad"});
  v.push_back({ops::Pad{.pads = {0, -1, 2, 3, 0, 1, -2, -1}, .mode = ops::PadMode::Edge}, {f32({2, 3, 4, 5})}, "edge pad that crops"});
  v.push_back({ops::Pad{.pads = {0, 2, 3, 1, 0, 1, 0, 4}, .mode = ops::PadMode::Reflect}, {f32({2, 3, 4, 5})}, "reflect pad"});
  v.push_back({ops::Patch{.offsets = {0, 2, 1}}, {f32({2, 7, 5}), f32({2, 3, 4})}, "correction patch"});
  v.push_back({ops::Expand{.shape = {2, 3, 4, 5}}, {f32({3, 1, 5})}, "expand"});
  v.push_back({ops::Tile{.repeats = {2, 1, 3}}, {f32({3, 1, 5})}, "tile"});
  v.push_back({ops::Tile{.repeats = {2, 2, 2, 2}}, {f32({2, 3, 1, 4})}, "tile, every dim repeated"});
  v.push_back({ops::Concat{.axis = 1}, {f32({2, 3, 4}), f32({2, 1, 4}), f32({2, 6, 4})}, "concat"});
  return v;
}

/// The op's outputs from the reference interpreter, on inputs 0, 1, 2, ...
std::vector<Tensor<float>> reference(const Case& c, std::vector<Tensor<float>>& inputs, Graph& g) {
  std::vector<TensorId> ids;
  float next = 0;
  for (size_t i = 0; i < c.in.size(); ++i) {
    Tensor<float> x(c.in[i].shape);
    for (int64_t k = 0; k < x.size(); ++k) x[k] = next++;
    inputs.push_back(x);
    ids.push_back(g.add_input(cat("x", i), c.in[i]));
  }
  std::vector<std::string> names;
  for (int k = 0; k < c.outputs; ++k) names.push_back(cat("y", k));
  for (TensorId t : g.add_node("op", c.op, ids, names)) g.add_output(t);
  std::vector<Value<float>> in(inputs.begin(), inputs.end());
  std::vector<Tensor<float>> out;
  for (auto& v : Interpreter<float>(g).run(in)) out.push_back(std::get<Tensor<float>>(v));
  return out;
}
}  // namespace

TEST_CASE("copy plans: every data-movement op as box copies, against the reference") {
  for (const Case& c : copy_cases()) {
    INFO(c.what);
    Graph g;
    std::vector<Tensor<float>> inputs;
    const auto want = reference(c, inputs, g);
    const NodeId n = g.topo_order().at(0);
    auto plan = backend::copy_plan(g.node(n).op, g.input_types(n), g.output_types(n));
    REQUIRE(plan.has_value());
    std::vector<const float*> in;
    for (size_t i = 0; i < inputs.size(); ++i) in.push_back(inputs[i].data());
    std::vector<std::vector<float>> got;
    std::vector<float*> out;
    std::vector<int64_t> sizes;
    for (const auto& w : want) got.emplace_back(size_t(w.size()), -7.f), sizes.push_back(w.size());
    for (auto& o : got) out.push_back(o.data());
    backend::run_copy_plan(*plan, in, out, sizes);
    for (size_t k = 0; k < want.size(); ++k)
      for (int64_t i = 0; i < want[k].size(); ++i) REQUIRE(got[k][size_t(i)] == want[k][i]);

    // Each copy as the cuda kernels run it: element by element, and through tiles.
    for (auto& o : got) std::fill(o.begin(), o.end(), -7.f);
    int tiled = 0;
    for (const auto& bc : *plan) {
      float* d = out[size_t(bc.dst)];
      if (bc.fill_first) std::fill(d, d + sizes[size_t(bc.dst)], bc.fill_value);
      const float* s = in[size_t(bc.src)];
      const cuda::DevBox box = cuda::make_dev_box(bc);
      CHECK(box.count == numel(bc.shape));
      if (auto t = cuda::make_dev_tile(box)) {
        ++tiled;
        std::map<int64_t, int> writes;
        for (int64_t blk = 0; blk < t->blocks; ++blk)
          for (int ia = 0; ia < cuda::DevTile::kTile; ++ia)
            for (int ib = 0; ib < cuda::DevTile::kTile; ++ib) {
              int64_t so, dof;
              if (!cuda::tile_element(*t, blk, ia, ib, so, dof)) continue;
              d[dof] = s[so];
              ++writes[dof];
            }
        CHECK(int64_t(writes.size()) == box.count);  // every element of the box, each once
        for (const auto& [k, w] : writes) REQUIRE(w == 1);
      } else {
        for (int64_t i = 0; i < box.count; ++i) {
          int64_t so, dof;
          cuda::box_element(box, i, so, dof);
          d[dof] = s[so];
        }
      }
    }
    for (size_t k = 0; k < want.size(); ++k)
      for (int64_t i = 0; i < want[k].size(); ++i) REQUIRE(got[k][size_t(i)] == want[k][i]);
    if (c.what.find("tiled") != std::string::npos || c.what.find("NHWC") != std::string::npos) CHECK(tiled >= 1);
  }
}

TEST_CASE("copy boxes: unit dims dropped and contiguous dims merged") {
  backend::BoxCopy c;
  c.shape = {2, 1, 3, 4};
  c.src_strides = {12, 12, 4, 1};
  c.dst_strides = {12, 12, 4, 1};
  const cuda::DevBox b = cuda::make_dev_box(c);
  CHECK(b.rank == 1);
  CHECK(b.shape[0] == 24);
  CHECK_FALSE(cuda::make_dev_tile(b).has_value());  // a plain copy is not tiled
}

TEST_CASE("broadcasting binary ops: the cuda kernel's formula and indexing against the reference") {
  Rng rng(3);
  const std::vector<std::pair<Shape, Shape>> shapes = {{{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {4}}, {{2, 1, 4}, {3, 1}}, {{1}, {5, 2}}, {{6, 1, 1}, {1, 5, 7}}};
  const std::vector<Op> ops = {ops::Add{}, ops::Sub{}, ops::Mul{}, ops::Div{}, ops::Max{}, ops::Min{}, ops::PRelu{}, ops::Pow{}};
  for (const Op& op : ops)
    for (const auto& [sa, sb] : shapes) {
      INFO(op_name(op), " ", sa, " ", sb);
      Graph g;
      TensorId a = g.add_input("a", f32(sa)), b = g.add_input("b", f32(sb));
      TensorId y = g.add_node("op", op, {a, b}).at(0);
      g.add_output(y);
      Tensor<float> xa(sa), xb(sb);
      const bool pow = std::holds_alternative<ops::Pow>(op);
      for (int64_t i = 0; i < xa.size(); ++i) xa[i] = float(rng.uniform(pow ? 0.1 : -2, 2));
      for (int64_t i = 0; i < xb.size(); ++i) xb[i] = float(rng.uniform(-2, 2));
      const std::vector<Value<float>> args{xa, xb};
      const auto want = std::get<Tensor<float>>(Interpreter<float>(g).run(args).at(0));
      const auto kind = cuda::binary_kind(op);
      REQUIRE(kind.has_value());
      const cuda::DevBroadcast br = cuda::make_dev_broadcast(sa, sb, g.type(y).shape);
      REQUIRE(br.count == want.size());
      for (int64_t i = 0; i < br.count; ++i) {
        int64_t ia, ib;
        cuda::broadcast_element(br, i, ia, ib);
        const float got = cuda::binary(*kind, xa[ia], xb[ib]);
        REQUIRE(got == doctest::Approx(want[i]).epsilon(1e-6));
      }
    }
  CHECK_FALSE(cuda::binary_kind(ops::Relu{}).has_value());
}

TEST_CASE("buffer plans: no two live requests share a buffer, pinned ones never share, dead buffers are reused") {
  // A chain a -> b -> c -> d: each step reads the previous tensor and writes the next, so
  // a tensor two steps back is dead and its buffer can hold the next one.
  std::vector<backend::BufferRequest> chain;
  for (int i = 0; i < 6; ++i) chain.push_back({1000, i, i + 1, false});
  const auto pc = backend::plan_buffers(chain);
  CHECK(pc.buffer_bytes.size() == 2);  // ping-pong
  CHECK(pc.requested_bytes == 6000);
  CHECK(pc.planned_bytes == 2000);

  Rng rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<backend::BufferRequest> r;
    const int n = 1 + int(rng.uniform(0, 30));
    for (int i = 0; i < n; ++i) {
      const int first = int(rng.uniform(0, 40));
      const int last = rng.uniform(0, 1) < 0.1 ? -1 : first + int(rng.uniform(0, 10));
      r.push_back({size_t(1 + rng.uniform(0, 5000)), first, last, rng.uniform(0, 1) < 0.15});
    }
    const auto p = backend::plan_buffers(r);
    REQUIRE(p.buffer_of.size() == r.size());
    size_t planned = 0;
    for (size_t b : p.buffer_bytes) planned += b;
    CHECK(planned == p.planned_bytes);
    for (size_t i = 0; i < r.size(); ++i) {
      REQUIRE(p.buffer_of[i] >= 0);
      REQUIRE(p.buffer_bytes[size_t(p.buffer_of[i])] >= r[i].bytes);
      for (size_t j = i + 1; j < r.size(); ++j) {
        if (p.buffer_of[i] != p.buffer_of[j]) continue;
        INFO("requests ", i, " and ", j);
        REQUIRE_FALSE(r[i].pinned);
        REQUIRE_FALSE(r[j].pinned);
        const int li = std::max(r[i].last, r[i].first), lj = std::max(r[j].last, r[j].first);
        REQUIRE((li < r[j].first || lj < r[i].first));  // lifetimes disjoint
      }
    }
  }
}
