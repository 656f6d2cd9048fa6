#pragma once
// Exact symbolic polynomials over F_p with variables (leaf, flat index): the element type
// for checking box soundness (which input variables each output position reads, and with
// which coefficients).
#include <map>
#include <vector>

#include "pet/core/field.hpp"

namespace pet::lab {

struct Var {
  int leaf;
  int64_t index;
  auto operator<=>(const Var&) const = default;
};
using Monomial = std::vector<Var>;  // sorted

struct Poly {
  std::map<Monomial, F31> terms;
  Poly() = default;
  Poly(int64_t c) {
    if (F31(c).v) terms[{}] = F31(c);
  }
  static Poly var(int leaf, int64_t index) {
    Poly p;
    p.terms[{Var{leaf, index}}] = F31(1);
    return p;
  }
  friend Poly operator+(const Poly& a, const Poly& b) {
    Poly r = a;
    for (const auto& [m, c] : b.terms) r.add(m, c);
    return r;
  }
  friend Poly operator-(const Poly& a) {
    Poly r;
    for (const auto& [m, c] : a.terms) r.terms[m] = -c;
    return r;
  }
  friend Poly operator-(const Poly& a, const Poly& b) { return a + (-b); }
  friend Poly operator*(const Poly& a, const Poly& b) {
    Poly r;
    for (const auto& [ma, ca] : a.terms)
      for (const auto& [mb, cb] : b.terms) {
        Monomial m = ma;
        m.insert(m.end(), mb.begin(), mb.end());
        std::sort(m.begin(), m.end());
        r.add(m, ca * cb);
      }
    return r;
  }
  /// Division by a constant polynomial (averages).
  friend Poly operator/(const Poly& a, const Poly& b) {
    PET_CHECK(b.terms.size() == 1 && b.terms.begin()->first.empty(), "Poly division by a non-constant");
    F31 inv = b.terms.begin()->second.inv();
    Poly r;
    for (const auto& [m, c] : a.terms) r.terms[m] = c * inv;
    return r;
  }
  Poly& operator+=(const Poly& b) { return *this = *this + b; }
  Poly& operator-=(const Poly& b) { return *this = *this - b; }
  Poly& operator*=(const Poly& b) { return *this = *this * b; }
  bool operator==(const Poly& b) const { return terms == b.terms; }
  void add(const Monomial& m, F31 c) {
    auto [it, fresh] = terms.emplace(m, c);
    if (!fresh) {
      it->second += c;
      if (it->second.v == 0) terms.erase(it);
    }
  }
  /// The polynomial with every variable of leaf j shifted by shift[j].
  Poly shifted(const std::map<int, int64_t>& shift) const {
    Poly r;
    for (const auto& [m, c] : terms) {
      Monomial n = m;
      for (auto& v : n)
        if (auto it = shift.find(v.leaf); it != shift.end()) v.index += it->second;
      std::sort(n.begin(), n.end());
      r.add(n, c);
    }
    return r;
  }
  /// Smallest index of each leaf's variables.
  std::map<int, int64_t> min_index() const {
    std::map<int, int64_t> r;
    for (const auto& [m, c] : terms)
      for (const auto& v : m) {
        auto [it, fresh] = r.emplace(v.leaf, v.index);
        if (!fresh) it->second = std::min(it->second, v.index);
      }
    return r;
  }
};

}  // namespace pet::lab
