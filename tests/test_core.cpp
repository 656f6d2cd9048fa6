// Core types: the prime field, shapes, boxes and split points, tensors, random numbers.
#include <doctest/doctest.h>

#include "pet/core/box.hpp"
#include "pet/core/field.hpp"
#include "pet/core/rng.hpp"
#include "pet/core/tensor.hpp"

using namespace pet;

static_assert(Ring<float> && Ring<double> && Ring<F31> && Ring<Fp<7>>);

TEST_CASE("F31 arithmetic is exact modulo 2^31-1") {
  const uint64_t p = 2147483647u;
  Rng rng(42);
  for (int i = 0; i < 100000; ++i) {
    uint64_t a = rng.below(p), b = rng.below(p);
    F31 x = F31::raw(uint32_t(a)), y = F31::raw(uint32_t(b));
    CHECK((x * y).v == uint32_t((unsigned __int128)a * b % p));
    CHECK((x + y).v == (a + b) % p);
    CHECK((x - y).v == (a + p - b) % p);
  }
  CHECK(F31::raw(uint32_t(p - 1)) * F31::raw(uint32_t(p - 1)) == F31(1));  // (-1)^2
  CHECK(F31(-5).v == p - 5);
  CHECK(F31(-5).signed_value() == -5);
  CHECK(F31(int64_t(p) * 3 + 2) == F31(2));
  for (int i = 0; i < 1000; ++i) {
    F31 a(int64_t(rng.below(p - 1) + 1));
    CHECK(a * a.inv() == F31(1));
  }
  CHECK_THROWS_WITH_AS(F31(0).inv(), "division by zero in the finite field", InvalidInput);
}

TEST_CASE("small prime fields use generic reduction") {
  using F7 = Fp<7>;
  CHECK((F7(3) * F7(5)).v == 1);
  CHECK((F7(3) + F7(5)).v == 1);
  CHECK(F7(3).inv() == F7(5));
  CHECK(F7(3).pow(6) == F7(1));  // Fermat
}

TEST_CASE("lift_scalar embeds integers exactly and refuses other reals in a field") {
  CHECK(lift_scalar<F31>(-3.0, "x") == F31(-3));
  CHECK(lift_scalar<double>(0.25, "x") == 0.25);
  CHECK_THROWS_WITH_AS(lift_scalar<F31>(0.25, "Pad value"), "Pad value = 0.25 is not an integer and has no exact value in the finite field",
                       Unsupported);
  CHECK(div_count(F31(6), 3) == F31(2));
  CHECK(div_count(F31(1), 3) * F31(3) == F31(1));
}

TEST_CASE("shapes: numel, strides, axes, broadcasting") {
  CHECK(numel({2, 3, 4}) == 24);
  CHECK(numel({}) == 1);
  CHECK(numel({3, 0}) == 0);
  CHECK_THROWS_WITH_AS(numel({2, -1}), "shape [2,-1] has a negative dimension", InvalidInput);
  CHECK_THROWS_WITH_AS(numel({1 << 20, 1 << 20, 1 << 20}), "shape [1048576,1048576,1048576] has more than 2^36 elements (the most pet supports in one tensor)",
                       Unsupported);
  CHECK(strides_of({2, 3, 4}) == std::vector<int64_t>{12, 4, 1});
  CHECK(normalize_axis(-1, 3, "t") == 2);
  CHECK_THROWS_WITH_AS(normalize_axis(3, 3, "Concat"), "Concat: axis 3 is out of range for rank 3", InvalidInput);
  CHECK(broadcast_shapes({2, 1, 4}, {3, 1}, "t") == Shape{2, 3, 4});
  CHECK(broadcasts_to({3, 1}, {2, 3, 4}));
  CHECK_FALSE(broadcasts_to({2, 3, 4}, {3, 4}));
  Index o{1, 2, 3};
  CHECK(broadcast_index(o, {3, 1}) == Index{2, 0});
  Index i(3);
  int count = 0;
  do ++count;
  while (next_index(i, {2, 3, 4}));
  CHECK(count == 24);
  CHECK(flat_offset(unflatten(17, {2, 3, 4}), {2, 3, 4}) == 17);
}

TEST_CASE("tensors share storage on copy and alias on reshape") {
  Tensor<float> a({2, 3}, 1.0f);
  Tensor<float> b = a;
  b[0] = 5;
  CHECK(a[0] == 5);
  Tensor<float> c = a.reshaped({3, 2});
  CHECK(c.shares_storage_with(a));
  Tensor<float> d = a.clone();
  d[0] = 7;
  CHECK(a[0] == 5);
  CHECK_THROWS_AS(a.reshaped({4}), InternalError);
  CHECK_THROWS_WITH_AS(Tensor<float>({2, 2}, std::vector<float>{1, 2, 3}),
                       "tensor of shape [2,2] needs 4 elements but 3 were given", InvalidInput);
}

TEST_CASE("tensor storage is 64-byte aligned, whatever its size and however it was made") {
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % kTensorAlignment == 0; };
  for (int64_t n : {1, 3, 16, 1000, 262147, 1 << 22}) {
    INFO("n = " << n);
    Tensor<float> a({n});
    CHECK(aligned(a.data()));
    CHECK(aligned(a.clone().data()));
    CHECK(aligned(Tensor<int64_t>({n}, std::vector<int64_t>(size_t(n), 7)).data()));
    CHECK(aligned(map_tensor<double>(a, [](float v) { return double(v); }).data()));
  }
  CHECK(Tensor<float>({3}, std::vector<float>{1, 2, 3}).vec() == std::vector<float>{1, 2, 3});
}

TEST_CASE("split points cut a shape into a grid of boxes covering it exactly once") {
  Shape s{5, 7};
  SplitPoints sp = SplitPoints::none(s);
  sp.add(0, 2, 5);
  sp.add(0, 2, 5);  // duplicates ignored
  sp.add(0, 0, 5);  // boundaries ignored
  sp.add(1, 1, 7);
  sp.add(1, 6, 7);
  auto boxes = sp.boxes(s);
  CHECK(boxes.size() == 6);
  std::vector<int> cover(35, 0);
  for (const auto& b : boxes) {
    Index i = b.origin();
    for (int64_t r = b.dims[0].lo; r < b.dims[0].hi; ++r)
      for (int64_t c = b.dims[1].lo; c < b.dims[1].hi; ++c) {
        CHECK(b.contains(Index{r, c}));
        cover[size_t(r * 7 + c)]++;
      }
    (void)i;
  }
  for (int c : cover) CHECK(c == 1);
  Box a{{{0, 4, 1}, {2, 6, 1}}}, b{{{2, 8, 1}, {0, 3, 1}}};
  CHECK(intersect(a, b) == Box{{{2, 4, 1}, {2, 3, 1}}});
  CHECK(intersect(a, Box{{{5, 8, 1}, {0, 3, 1}}}).empty());
  Box strided{{{1, 8, 2}}};
  CHECK(strided.volume() == 4);
  CHECK(strided.contains(Index{7}));
  CHECK_FALSE(strided.contains(Index{2}));
  CHECK(to_string(strided) == "[1:8:2]");
}

TEST_CASE("Rng is deterministic per seed") {
  Rng a(9), b(9), c(10);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    uint64_t x = a.next();
    CHECK(x == b.next());
    differs = differs || x != c.next();
  }
  CHECK(differs);
  for (int i = 0; i < 1000; ++i) {
    int64_t r = a.range(-3, 3);
    CHECK(r >= -3);
    CHECK(r <= 3);
  }
}
