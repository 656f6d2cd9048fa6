#pragma once
// Operator pairs for the verification lab: an original multilinear program and a mutant of
// it, built by hand (the paper's mutant kinds) or at random. Used by tests and experiments.
#include <numeric>

#include "pet/core/rng.hpp"
#include "pet/ir/builder.hpp"

namespace pet::lab {

struct Pair {
  std::string name;
  Graph original, mutant;
  /// The verdict the pair is built to have ("equivalent", "partially_equivalent",
  /// "not_equivalent"), or "" when unknown (random pairs).
  std::string expected;
};

inline Tensor<float> random_weight(const Shape& s, Rng& rng) {
  Tensor<float> t(s);
  for (int64_t i = 0; i < t.size(); ++i) t[i] = float(rng.uniform(-1, 1));
  return t;
}

struct ConvSpec {
  int64_t n = 1, c = 4, h = 8, w = 8, f = 4, k = 3, stride = 1, pad = 1, dil = 1, group = 1;
  ops::Conv op() const {
    return ops::Conv{.strides = {stride, stride}, .pads = {pad, pad, pad, pad}, .dilations = {dil, dil}, .group = group};
  }
  Shape x() const { return {n, c, h, w}; }
  Shape wt() const { return {f, c / group, k, k}; }
};

/// y = conv(x, w) as a program with input "x" and weight "w".
inline Graph conv_program(const ConvSpec& s, const Tensor<float>& w, const ops::Conv& op) {
  Graph g;
  Builder b(g);
  TensorId x = b.input("x", s.x());
  b.output(b.add(op, {x, b.constant("w", w)}, "conv"));
  return g;
}

/// Paper Fig. 2: the images of a batch placed side by side along W and convolved once
/// (stride 1, "same" padding). The columns at the seams read the neighbour image instead of
/// padding: partially equivalent.
inline Pair conv_batch_to_width(const ConvSpec& s, uint64_t seed) {
  Rng rng(seed);
  Tensor<float> w = random_weight(s.wt(), rng);
  // A 1x1 kernel has no seams: then the mutant is exactly equivalent.
  Pair p{"conv-batch-to-width", conv_program(s, w, s.op()), {}, s.k > 1 ? "partially_equivalent" : "equivalent"};
  Builder b(p.mutant);
  TensorId x = b.input("x", s.x());
  TensorId wide = b.add(ops::RT{.split_shape = s.x(), .perm = {1, 2, 0, 3}, .out_shape = {1, s.c, s.h, s.n * s.w}}, {x}, "to_width");
  TensorId y = b.add(s.op(), {wide, b.constant("w", w)}, "conv_wide");
  const Shape& yo = p.original.type(p.original.outputs()[0]).shape;
  b.output(b.add(ops::RT{.split_shape = {s.f, yo[2], s.n, yo[3]}, .perm = {2, 0, 1, 3}, .out_shape = yo}, {y}, "to_batch"));
  return p;
}

/// Dilated (d=2) conv -> dense conv by regrouping rows and columns by parity. `blocks`
/// places the four phase images as 2x2 blocks of one image (the seams between blocks read
/// the neighbour block instead of padding: partially equivalent); otherwise they go to the
/// batch (exactly equivalent). Needs even H, W and pad = d*(k-1)/2.
inline Pair dilated_to_dense(const ConvSpec& s, bool blocks, uint64_t seed) {
  Rng rng(seed);
  Tensor<float> w = random_weight(s.wt(), rng);
  Pair p{blocks ? "dilated-to-dense-blocks" : "dilated-to-dense-batch", conv_program(s, w, s.op()), {},
         blocks ? "partially_equivalent" : "equivalent"};
  Builder b(p.mutant);
  const int64_t h2 = s.h / 2, w2 = s.w / 2, p2 = s.pad / 2;
  ops::Conv dense{.strides = {1, 1}, .pads = {p2, p2, p2, p2}, .dilations = {1, 1}, .group = s.group};
  TensorId x = b.input("x", s.x());
  Shape phases{s.n, s.c, h2, 2, w2, 2};
  TensorId y;
  if (blocks) {
    TensorId r = b.add(ops::RT{.split_shape = phases, .perm = {0, 1, 3, 2, 5, 4}, .out_shape = s.x()}, {x}, "to_blocks");
    TensorId c = b.add(dense, {r, b.constant("w", w)}, "dense");
    y = b.add(ops::RT{.split_shape = {s.n, s.f, 2, h2, 2, w2}, .perm = {0, 1, 3, 2, 5, 4}, .out_shape = {s.n, s.f, s.h, s.w}}, {c},
              "from_blocks");
  } else {
    TensorId r = b.add(ops::RT{.split_shape = phases, .perm = {3, 5, 0, 1, 2, 4}, .out_shape = {4 * s.n, s.c, h2, w2}}, {x},
                       "to_phases");
    TensorId c = b.add(dense, {r, b.constant("w", w)}, "dense");
    y = b.add(ops::RT{.split_shape = {2, 2, s.n, s.f, h2, w2}, .perm = {2, 3, 4, 0, 5, 1}, .out_shape = {s.n, s.f, s.h, s.w}}, {c},
              "from_phases");
  }
  b.output(y);
  return p;
}

/// Two matmuls sharing nothing vs one batched matmul over stacked operands (equivalent).
inline Pair matmuls_to_batched(int64_t m, int64_t k, int64_t n, uint64_t seed) {
  Rng rng(seed);
  Tensor<float> w1 = random_weight({k, n}, rng), w2 = random_weight({k, n}, rng);
  Pair p{"matmuls-to-batched", {}, {}, "equivalent"};
  {
    Builder b(p.original);
    TensorId a1 = b.input("a1", {m, k}), a2 = b.input("a2", {m, k});
    b.output(b.add(ops::MatMul{}, {a1, b.constant("w1", w1)}, "mm1"));
    b.output(b.add(ops::MatMul{}, {a2, b.constant("w2", w2)}, "mm2"));
  }
  {
    Builder b(p.mutant);
    TensorId a1 = b.input("a1", {m, k}), a2 = b.input("a2", {m, k});
    auto stack = [&](TensorId u, TensorId v, Shape s, const char* name) {
      Shape s1 = s;
      s1.insert(s1.begin(), 1);
      TensorId cu = b.add(ops::Reshape{.shape = s1}, {u}), cv = b.add(ops::Reshape{.shape = s1}, {v});
      return b.add(ops::Concat{.axis = 0}, {cu, cv}, name);
    };
    TensorId aa = stack(a1, a2, {m, k}, "stack_a");
    TensorId ww = stack(b.constant("w1", w1), b.constant("w2", w2), {k, n}, "stack_w");
    TensorId y = b.add(ops::MatMul{}, {aa, ww}, "bmm");
    auto parts = b.add_multi(ops::Split{.axis = 0, .split = {1, 1}, .num_outputs = 2}, {y}, "unstack");
    b.output(b.add(ops::Reshape{.shape = {m, n}}, {parts[0]}));
    b.output(b.add(ops::Reshape{.shape = {m, n}}, {parts[1]}));
  }
  return p;
}

/// A conv vs the same conv with its kernel transposed spatially (not equivalent).
inline Pair conv_transposed_kernel(const ConvSpec& s, uint64_t seed) {
  Rng rng(seed);
  Tensor<float> w = random_weight(s.wt(), rng);
  Pair p{"conv-transposed-kernel", conv_program(s, w, s.op()), {}, "not_equivalent"};
  Builder b(p.mutant);
  TensorId x = b.input("x", s.x());
  TensorId wt = b.add(ops::Transpose{.perm = {0, 1, 3, 2}}, {b.constant("w", w)}, "transpose_kernel");
  b.output(b.add(s.op(), {x, wt}, "conv"));
  return p;
}

/// A random small multilinear program: up to four ops (R/T, transpose, reshape, conv,
/// average pool, pad, slice, concat, split, matmul, broadcast add, reduce).
inline Graph random_program(Rng& rng) {
  Graph g;
  Builder b(g);
  auto pick = [&](int64_t lo, int64_t hi) { return rng.range(lo, hi); };
  Shape s{pick(1, 2), pick(1, 3), pick(3, 6), pick(3, 6)};
  TensorId x = b.input("x", s);
  int weights = 0;
  auto weight = [&](Shape ws) { return b.constant(cat("w", weights++), random_weight(ws, rng)); };
  auto random_factor = [&](int64_t n) {
    std::vector<int64_t> divs;
    for (int64_t d = 1; d <= n; ++d)
      if (n % d == 0) divs.push_back(d);
    return divs[size_t(rng.below(divs.size()))];
  };
  auto random_shape = [&](int64_t n, int max_rank) {
    Shape r;
    while (int(r.size()) + 1 < max_rank && n > 1 && rng.below(3)) {
      int64_t f = random_factor(n);
      r.push_back(f);
      n /= f;
    }
    r.push_back(n);
    return r;
  };
  int ops_count = int(pick(1, 4));
  for (int i = 0; i < ops_count; ++i) {
    const Shape cur = g.type(x).shape;
    const int64_t n = numel(cur);
    if (cur.empty() || n == 0) break;  // a scalar or empty tensor: nothing more to do
    try {
      switch (rng.below(12)) {
        case 0: {  // R/T: split every dim at random, permute, regroup
          Shape split;
          for (int64_t d : cur) {
            int64_t f = random_factor(d);
            split.push_back(f);
            if (d / f > 1 && split.size() < size_t(kMaxRank)) split.push_back(d / f);
            else split.back() = d;
          }
          std::vector<int64_t> perm(split.size());
          std::iota(perm.begin(), perm.end(), 0);
          for (size_t k = perm.size(); k > 1; --k) std::swap(perm[k - 1], perm[rng.below(k)]);
          x = b.add(ops::RT{.split_shape = split, .perm = perm, .out_shape = random_shape(n, 4)}, {x});
          break;
        }
        case 1: {
          std::vector<int64_t> perm(cur.size());
          std::iota(perm.begin(), perm.end(), 0);
          for (size_t k = perm.size(); k > 1; --k) std::swap(perm[k - 1], perm[rng.below(k)]);
          x = b.add(ops::Transpose{.perm = perm}, {x});
          break;
        }
        case 2: x = b.add(ops::Reshape{.shape = random_shape(n, 4)}, {x}); break;
        case 3:
        case 4: {  // conv over a 4-D view
          if (cur.size() != 4) break;
          int64_t k = pick(1, 3), st = pick(1, 2), d = pick(1, 2), p = pick(0, 2);
          int64_t group = (cur[1] > 1 && rng.below(2)) ? cur[1] : 1;
          int64_t f = group == 1 ? pick(1, 3) : cur[1];
          x = b.add(ops::Conv{.strides = {st, 1}, .pads = {p, 0, pick(0, 2), p}, .dilations = {d, 1}, .group = group},
                    {x, weight({f, cur[1] / group, k, pick(1, 3)})});
          break;
        }
        case 5: {
          if (cur.size() != 4) break;
          int64_t k = pick(1, 3), p = pick(0, k - 1);
          x = b.add(ops::AveragePool{{.kernel_shape = {k, 2}, .strides = {pick(1, 2), 1}, .pads = {p, 0, p, 1}}, bool(rng.below(2))}, {x});
          break;
        }
        case 6: {
          std::vector<int64_t> pads(cur.size() * 2);
          for (auto& v : pads) v = pick(-1, 2);
          auto mode = ops::PadMode(rng.below(3));
          x = b.add(ops::Pad{.pads = pads, .mode = mode, .value = 0.0}, {x});
          break;
        }
        case 7: {
          int64_t axis = int64_t(rng.below(cur.size())), step = rng.below(2) ? pick(1, 2) : -pick(1, 2);
          x = b.add(ops::Slice{.starts = {pick(-3, 3)}, .ends = {step > 0 ? pick(2, 9) : -pick(4, 9)}, .axes = {axis}, .steps = {step}}, {x});
          break;
        }
        case 8: {
          int64_t axis = int64_t(rng.below(cur.size()));
          TensorId part = b.add(ops::Slice{.starts = {0}, .ends = {pick(1, cur[size_t(axis)])}, .axes = {axis}}, {x});
          x = b.add(ops::Concat{.axis = axis}, rng.below(2) ? std::vector<TensorId>{x, part} : std::vector<TensorId>{part, x});
          break;
        }
        case 9: {
          int64_t axis = int64_t(rng.below(cur.size()));
          if (cur[size_t(axis)] < 2) break;
          int64_t first = pick(1, cur[size_t(axis)] - 1);
          x = b.add_multi(ops::Split{.axis = axis, .split = {first, cur[size_t(axis)] - first}, .num_outputs = 2}, {x})[1];
          break;
        }
        case 10: {
          Shape ws(cur.size(), 1);
          ws.back() = cur.back();
          if (rng.below(2)) x = b.add(ops::Add{}, {x, weight(ws)});
          else x = b.add(ops::MatMul{}, {x, weight({cur.back(), pick(1, 4)})});
          break;
        }
        case 11: x = b.add(ops::ReduceSum{{.axes = {int64_t(rng.below(cur.size()))}, .keepdims = bool(rng.below(2))}}, {x}); break;
      }
    } catch (const InvalidInput&) {
      // an op whose random attributes do not fit the current shape: skip it
    }
  }
  b.output(x);
  return g;
}


/// Conv (k=3, pad 1) computed on two horizontal halves concatenated back along H. With the
/// halo rows each half conv reads across the cut (equivalent); without them the rows at the
/// cut read padding instead of their neighbours (partially equivalent).
inline Pair conv_split_halves(const ConvSpec& s, int64_t cut, bool halo, uint64_t seed) {
  Rng rng(seed);
  Tensor<float> w = random_weight(s.wt(), rng);
  Pair p{halo ? "conv-halves-with-halo" : "conv-halves-without-halo", conv_program(s, w, s.op()), {},
         halo ? "equivalent" : "partially_equivalent"};
  Builder b(p.mutant);
  TensorId x = b.input("x", s.x());
  TensorId wt = b.constant("w", w);
  const int64_t hlo = halo ? 1 : 0;
  TensorId top = b.add(ops::Slice{.starts = {0}, .ends = {cut + hlo}, .axes = {2}}, {x});
  TensorId bot = b.add(ops::Slice{.starts = {cut - hlo}, .ends = {s.h}, .axes = {2}}, {x});
  TensorId yt = b.add(ops::Conv{.pads = {1, 1, halo ? 0 : 1, 1}}, {top, wt});
  TensorId yb = b.add(ops::Conv{.pads = {halo ? 0 : 1, 1, 1, 1}}, {bot, wt});
  b.output(b.add(ops::Concat{.axis = 2}, {yt, yb}));
  return p;
}

/// Conv with internal padding vs an explicit Pad op and an unpadded conv; `mode` other than
/// constant changes the border values (partially equivalent).
inline Pair conv_explicit_pad(const ConvSpec& s, ops::PadMode mode, uint64_t seed) {
  Rng rng(seed);
  Tensor<float> w = random_weight(s.wt(), rng);
  bool same = mode == ops::PadMode::Constant;
  Pair p{same ? "conv-explicit-pad" : "conv-reflect-pad", conv_program(s, w, s.op()), {}, same ? "equivalent" : "partially_equivalent"};
  Builder b(p.mutant);
  TensorId x = b.input("x", s.x());
  const int64_t q = s.pad;
  TensorId px = b.add(ops::Pad{.pads = {0, 0, q, q, 0, 0, q, q}, .mode = mode}, {x});
  ops::Conv c = s.op();
  c.pads = {0, 0, 0, 0};
  b.output(b.add(c, {px, b.constant("w", w)}));
  return p;
}

/// A grouped conv vs one conv per group over channel slices, concatenated (equivalent).
inline Pair grouped_conv_split(const ConvSpec& s, uint64_t seed) {
  Rng rng(seed);
  Tensor<float> w = random_weight(s.wt(), rng);
  Pair p{"grouped-conv-split", conv_program(s, w, s.op()), {}, "equivalent"};
  Builder b(p.mutant);
  TensorId x = b.input("x", s.x());
  TensorId wt = b.constant("w", w);
  const int64_t cg = s.c / s.group, fg = s.f / s.group;
  std::vector<TensorId> parts;
  for (int64_t g = 0; g < s.group; ++g) {
    TensorId xs = b.add(ops::Slice{.starts = {g * cg}, .ends = {(g + 1) * cg}, .axes = {1}}, {x});
    TensorId ws = b.add(ops::Slice{.starts = {g * fg}, .ends = {(g + 1) * fg}, .axes = {0}}, {wt});
    ops::Conv c = s.op();
    c.group = 1;
    parts.push_back(b.add(c, {xs, ws}));
  }
  b.output(parts.size() == 1 ? parts[0] : b.add(ops::Concat{.axis = 1}, parts));
  return p;
}

/// Three matmuls with a shared input (BERT's Q/K/V) vs one matmul with the weights
/// concatenated and the result split (equivalent).
inline Pair qkv_merge(int64_t m, int64_t k, int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<Tensor<float>> w;
  for (int i = 0; i < 3; ++i) w.push_back(random_weight({k, n}, rng));
  Pair p{"qkv-matmul-merge", {}, {}, "equivalent"};
  {
    Builder b(p.original);
    TensorId x = b.input("x", {m, k});
    for (int i = 0; i < 3; ++i) b.output(b.add(ops::MatMul{}, {x, b.constant(cat("w", i), w[size_t(i)])}));
  }
  {
    Builder b(p.mutant);
    TensorId x = b.input("x", {m, k});
    TensorId ww = b.add(ops::Concat{.axis = 1}, {b.constant("w0", w[0]), b.constant("w1", w[1]), b.constant("w2", w[2])});
    TensorId y = b.add(ops::MatMul{}, {x, ww});
    auto parts = b.add_multi(ops::Split{.axis = 1, .split = {n, n, n}, .num_outputs = 3}, {y});
    for (TensorId t : parts) b.output(t);
  }
  return p;
}

/// A random program vs the same program fed through an R/T op and its inverse (equivalent),
/// or with its output rolled by one position along a random axis (not equivalent, or
/// partially where values repeat).
inline Pair random_program_pair(uint64_t seed, bool roll) {
  Rng r1(seed), r2(seed);
  Pair p{roll ? "random-program-rolled" : "random-program-rt-roundtrip", random_program(r1), random_program(r2),
         roll ? "" : "equivalent"};
  Graph& g = p.mutant;
  TensorId y = g.outputs()[0];
  const Shape ys = g.type(y).shape;
  Graph m;
  Builder b(m);
  // Rebuild the mutant with a wrapped input or output.
  std::vector<TensorId> remap(size_t(g.num_tensors()), -1);
  for (TensorId t : g.inputs()) {
    TensorId x = b.input(g.tensor(t).name, g.type(t).shape);
    if (!roll) {
      const Shape& xs = g.type(t).shape;
      TensorId f = b.add(ops::RT{.split_shape = xs, .perm = {3, 2, 1, 0}, .out_shape = {xs[3], xs[2], xs[1], xs[0]}}, {x}, "rt_there");
      x = b.add(ops::RT{.split_shape = {xs[3], xs[2], xs[1], xs[0]}, .perm = {3, 2, 1, 0}, .out_shape = xs}, {f}, "rt_back");
    }
    remap[size_t(t)] = x;
  }
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (g.tensor(t).is_constant()) remap[size_t(t)] = m.add_constant(g.tensor(t).name, g.type(t).dtype, *g.tensor(t).value);
  for (NodeId n : g.topo_order()) {
    const Node& node = g.node(n);
    std::vector<TensorId> in;
    for (TensorId t : node.inputs) in.push_back(remap[size_t(t)]);
    auto outs = m.add_node(node.name, node.op, in);
    for (size_t k = 0; k < outs.size(); ++k) remap[size_t(node.outputs[k])] = outs[k];
  }
  TensorId out = remap[size_t(y)];
  if (roll && !ys.empty() && numel(ys) > 1) {
    int64_t axis = 0;
    for (size_t d = 0; d < ys.size(); ++d)
      if (ys[d] > 1) axis = int64_t(d);
    TensorId head = b.add(ops::Slice{.starts = {1}, .ends = {ys[size_t(axis)]}, .axes = {axis}}, {out}, "roll_head");
    TensorId tail = b.add(ops::Slice{.starts = {0}, .ends = {1}, .axes = {axis}}, {out}, "roll_tail");
    out = b.add(ops::Concat{.axis = axis}, {head, tail}, "roll");
  }
  b.output(out);
  p.mutant = std::move(m);
  return p;
}

/// The subprograms the mutation generator is tested on (issue: CSRNet's dilated conv,
/// Inception's two parallel 1x1 convs, BERT's Q/K/V matmuls, a batch-2 3x3 conv).
inline std::vector<std::pair<std::string, Graph>> mutation_subprograms() {
  std::vector<std::pair<std::string, Graph>> v;
  Rng rng(2021);
  ConvSpec csr{.n = 1, .c = 512, .h = 14, .w = 14, .f = 512, .k = 3, .pad = 2, .dil = 2};
  v.emplace_back("csrnet_dilated_conv", conv_program(csr, random_weight(csr.wt(), rng), csr.op()));
  Graph inc;
  {
    Builder b(inc);
    TensorId x = b.input("x", {1, 768, 17, 17});
    b.output(b.add(ops::Conv{}, {x, b.constant("w192", random_weight({192, 768, 1, 1}, rng)), b.constant("b192", random_weight({192}, rng))}, "branch1x1"));
    b.output(b.add(ops::Conv{}, {x, b.constant("w160", random_weight({160, 768, 1, 1}, rng)), b.constant("b160", random_weight({160}, rng))}, "branch7x7_1"));
  }
  inc.name = "inception_1x1";
  v.emplace_back("inception_parallel_1x1", std::move(inc));
  v.emplace_back("bert_qkv", qkv_merge(128, 768, 768, 7).original);
  ConvSpec b2{.n = 2, .c = 64, .h = 56, .w = 56, .f = 64};
  v.emplace_back("conv3x3_batch2", conv_program(b2, random_weight(b2.wt(), rng), b2.op()));
  for (auto& [name, g] : v) g.name = name;
  return v;
}

/// One pair from the families above with random small shapes (the lab's experiments).
inline Pair random_pair(Rng& rng, int64_t max_side = 8) {
  auto pick = [&](int64_t lo, int64_t hi) { return rng.range(lo, hi); };
  const uint64_t seed = rng.next();
  switch (rng.below(11)) {
    case 0: {
      int64_t k = rng.below(2) ? 3 : 1;
      return conv_batch_to_width({.n = pick(2, 3), .c = pick(1, 3), .h = pick(2, max_side), .w = pick(2, max_side), .f = pick(1, 3), .k = k,
                                  .pad = (k - 1) / 2},
                                 seed);
    }
    case 1:
    case 2:
      return dilated_to_dense({.n = pick(1, 2), .c = pick(1, 3), .h = 2 * pick(2, max_side / 2), .w = 2 * pick(2, max_side / 2),
                               .f = pick(1, 3), .k = 3, .pad = 2, .dil = 2},
                              rng.below(2), seed);
    case 3:
      return conv_transposed_kernel({.c = pick(1, 3), .h = pick(3, max_side), .w = pick(3, max_side), .f = pick(1, 3), .k = 3, .pad = pick(0, 1)},
                                    seed);
    case 4: return matmuls_to_batched(pick(1, 5), pick(1, 5), pick(1, 5), seed);
    case 5: {
      int64_t h = pick(4, max_side);
      return conv_split_halves({.c = pick(1, 3), .h = h, .w = pick(2, max_side), .f = pick(1, 3)}, pick(2, h - 2), rng.below(2), seed);
    }
    case 6: {
      int64_t k = rng.below(2) ? 3 : 1;
      return conv_explicit_pad({.c = pick(1, 3), .h = pick(3, max_side), .w = pick(3, max_side), .f = pick(1, 3), .k = k, .pad = pick(1, 2)},
                               ops::PadMode(rng.below(3)), seed);
    }
    case 7: {
      int64_t g = pick(1, 3);
      return grouped_conv_split({.c = g * pick(1, 2), .h = pick(3, max_side), .w = pick(3, max_side), .f = g * pick(1, 2), .group = g}, seed);
    }
    case 8: return qkv_merge(pick(1, 4), pick(1, 4), pick(1, 4), seed);
    case 9: return random_program_pair(seed, false);
    default: return random_program_pair(seed, true);
  }
}
}  // namespace pet::lab
