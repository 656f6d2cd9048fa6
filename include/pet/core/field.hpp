#pragma once
/// The prime field F_p (paper section 5.2, Theorem 2) and the Ring concept that float, double
/// and Fp satisfy. Arithmetic is exact: no overflow and no rounding, so a polynomial identity
/// tested at random points fails with probability <= degree / p.
#include <cmath>
#include <concepts>
#include <cstdint>
#include <ostream>
#include <type_traits>

#include "pet/core/error.hpp"

namespace pet {

/// Integers modulo the prime P (P < 2^32). Default P = 2^31 - 1 (a Mersenne prime, fast
/// reduction). Construction from a signed integer reduces it into [0, P).
template <uint32_t P>
struct Fp {
  static constexpr uint32_t modulus = P;
  uint32_t v = 0;

  constexpr Fp() = default;
  constexpr Fp(int64_t x) : v(uint32_t(((x % int64_t(P)) + int64_t(P)) % int64_t(P))) {}
  static constexpr Fp raw(uint32_t x) {
    Fp f;
    f.v = x;
    return f;
  }

  static constexpr uint32_t reduce(uint64_t x) {
    if constexpr (P == 2147483647u) {
      x = (x & P) + (x >> 31);
      x = (x & P) + (x >> 31);
      return uint32_t(x >= P ? x - P : x);
    } else {
      return uint32_t(x % P);
    }
  }
  friend constexpr Fp operator+(Fp a, Fp b) {
    uint64_t s = uint64_t(a.v) + b.v;
    return raw(uint32_t(s >= P ? s - P : s));
  }
  friend constexpr Fp operator-(Fp a, Fp b) { return raw(a.v >= b.v ? a.v - b.v : a.v + P - b.v); }
  friend constexpr Fp operator-(Fp a) { return raw(a.v ? P - a.v : 0); }
  friend constexpr Fp operator*(Fp a, Fp b) { return raw(reduce(uint64_t(a.v) * b.v)); }
  constexpr Fp& operator+=(Fp b) { return *this = *this + b; }
  constexpr Fp& operator-=(Fp b) { return *this = *this - b; }
  constexpr Fp& operator*=(Fp b) { return *this = *this * b; }
  friend constexpr bool operator==(Fp a, Fp b) { return a.v == b.v; }

  constexpr Fp pow(uint64_t e) const {
    Fp r(1), b = *this;
    for (; e; e >>= 1, b *= b)
      if (e & 1) r *= b;
    return r;
  }
  /// Multiplicative inverse (Fermat); throws on zero.
  Fp inv() const {
    if (v == 0) throw InvalidInput("division by zero in the finite field");
    return pow(P - 2);
  }
  friend Fp operator/(Fp a, Fp b) { return a * b.inv(); }
  constexpr Fp& operator/=(Fp b) { return *this = *this / b; }
  /// The representative in (-P/2, P/2], as a signed integer (for printing and comparing
  /// against integer-valued float computations).
  constexpr int64_t signed_value() const { return v > P / 2 ? int64_t(v) - int64_t(P) : int64_t(v); }
  friend std::ostream& operator<<(std::ostream& os, Fp a) { return os << a.v; }
};

/// The default verification field.
using F31 = Fp<2147483647u>;

/// Integers modulo a prime chosen at run time (pet verify --prime, the Theorem 2
/// experiment). The modulus is per thread: set it with FpRt::Scope before creating values.
struct FpRt {
  uint32_t v = 0;
  static uint32_t& modulus() {
    thread_local uint32_t p = 2147483647u;
    return p;
  }
  /// Sets the modulus for the current thread while alive.
  struct Scope {
    uint32_t old;
    explicit Scope(uint64_t p) : old(modulus()) {
      if (p < 2 || p > 0xffffffffull) throw InvalidInput(cat("prime ", p, " is not in [2, 2^32)"));
      for (uint64_t d = 2; d * d <= p; ++d)
        if (p % d == 0) throw InvalidInput(cat(p, " is not a prime (divisible by ", d, ")"));
      modulus() = uint32_t(p);
    }
    ~Scope() { modulus() = old; }
  };
  FpRt() = default;
  FpRt(int64_t x) {
    int64_t p = modulus();
    v = uint32_t(((x % p) + p) % p);
  }
  static FpRt raw(uint32_t x) {
    FpRt f;
    f.v = x;
    return f;
  }
  friend FpRt operator+(FpRt a, FpRt b) { return raw(uint32_t((uint64_t(a.v) + b.v) % modulus())); }
  friend FpRt operator-(FpRt a, FpRt b) { return raw(uint32_t((uint64_t(a.v) + modulus() - b.v) % modulus())); }
  friend FpRt operator-(FpRt a) { return raw(a.v ? modulus() - a.v : 0); }
  friend FpRt operator*(FpRt a, FpRt b) { return raw(uint32_t(uint64_t(a.v) * b.v % modulus())); }
  FpRt& operator+=(FpRt b) { return *this = *this + b; }
  FpRt& operator-=(FpRt b) { return *this = *this - b; }
  FpRt& operator*=(FpRt b) { return *this = *this * b; }
  friend bool operator==(FpRt a, FpRt b) { return a.v == b.v; }
  FpRt pow(uint64_t e) const {
    FpRt r(1), b = *this;
    for (; e; e >>= 1, b *= b)
      if (e & 1) r *= b;
    return r;
  }
  FpRt inv() const {
    if (v == 0) throw InvalidInput("division by zero in the finite field");
    return pow(modulus() - 2);
  }
  friend FpRt operator/(FpRt a, FpRt b) { return a * b.inv(); }
  friend std::ostream& operator<<(std::ostream& os, FpRt a) { return os << a.v; }
};

template <class T>
struct is_field : std::false_type {};
template <uint32_t P>
struct is_field<Fp<P>> : std::true_type {};
template <>
struct is_field<FpRt> : std::true_type {};
template <class T>
inline constexpr bool is_field_v = is_field<T>::value;

/// A commutative ring with unit: what multilinear ops need to be evaluated.
template <class T>
concept Ring = std::regular<T> && requires(T a, T b) {
  { a + b } -> std::convertible_to<T>;
  { a - b } -> std::convertible_to<T>;
  { a * b } -> std::convertible_to<T>;
  { -a } -> std::convertible_to<T>;
  T(0);
  T(1);
};

/// Embeds a real constant (an attribute like Gemm's alpha or Pad's value) into T. For a field
/// only integers are exact; anything else is Unsupported with `who` naming the attribute.
template <class T>
T lift_scalar(double x, std::string_view who) {
  if constexpr (is_field_v<T>) {
    if (std::nearbyint(x) != x || std::abs(x) > 9.0e15)
      throw Unsupported(cat(who, " = ", x, " is not an integer and has no exact value in the finite field"));
    return T(int64_t(x));
  } else {
    return T(x);
  }
}

/// a / n for a positive integer n (average pooling, means): exact in a field.
template <class T>
T div_count(T a, int64_t n) {
  if constexpr (is_field_v<T>) {
    return a * T(n).inv();
  } else {
    return a / T(n);
  }
}

}  // namespace pet
