/// \file ffield.h
/// Arithmetic in the two prime fields of the probabilistic verifier (DESIGN.md §5, paper §5).
///
/// Values are pairs (x_p, x_q) in Z_p × Z_q with q | p − 1. We use p = 2q + 1 (a safe prime):
///   p = 1073740439 (< 2^30), q = 536870219 (≥ 2^29, well above the 2^20 DESIGN.md asks for).
/// Why these:
/// - p < 2^30, so a product of two residues fits in 60 bits and 16 products can be summed in one
///   64-bit word before a single reduction (lazy reduction in matmul and sum inner loops).
/// - q | p − 1 with (p − 1)/q = 2, so the q-th roots of unity in Z_p are exactly the non-zero
///   squares, and ω = r² for uniform r ≠ 0 is a uniform q-th root of unity.
/// - p ≡ q ≡ 3 (mod 4), so sqrt is the deterministic (±x)^((m+1)/4) (see sqrt_pm).
/// - q is as large as p < 2^30 allows, which keeps Theorem 2's per-test bound small.
#pragma once

#include <cstdint>

namespace mugraph::ff {

/// splitmix64's finalizer: a bijective mix of a 64-bit word (the verifier's random functions and
/// seeds, the abstract expressions' fingerprints).
inline constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline constexpr uint64_t kP = 1073740439;
inline constexpr uint64_t kQ = 536870219;

inline constexpr uint64_t add(uint64_t a, uint64_t b, uint64_t m) {
  uint64_t s = a + b;
  return s >= m ? s - m : s;
}
inline constexpr uint64_t sub(uint64_t a, uint64_t b, uint64_t m) { return a >= b ? a - b : a + m - b; }
inline constexpr uint64_t neg(uint64_t a, uint64_t m) { return a == 0 ? 0 : m - a; }
/// @pre a, b < m < 2^32
inline constexpr uint64_t mul(uint64_t a, uint64_t b, uint64_t m) { return a * b % m; }
inline constexpr uint64_t pow(uint64_t base, uint64_t e, uint64_t m) {
  uint64_t r = 1 % m;
  base %= m;
  while (e) {
    if (e & 1) r = r * base % m;
    base = base * base % m;
    e >>= 1;
  }
  return r;
}
/// Multiplicative inverse (Fermat). @pre a % m != 0, m prime
inline constexpr uint64_t inv(uint64_t a, uint64_t m) { return pow(a, m - 2, m); }

/// A deterministic square root up to sign: returns r with r² = x or r² = −x (mod m), the smaller
/// of the two roots. Needs m ≡ 3 (mod 4): then exactly one of x, −x is a square when x ≠ 0.
/// One power serves both cases: r = x^((m+1)/4) has r² = x · x^((m−1)/2), and Euler's criterion
/// makes x^((m−1)/2) 1 for a square and −1 otherwise. (−x)^((m+1)/4) is ±r, so the smaller root
/// is the same whichever of x and −x is the square; x = 0 gives 0.
inline constexpr uint64_t sqrt_pm(uint64_t x, uint64_t m) {
  const uint64_t r = pow(x, (m + 1) / 4, m);
  return r < m - r ? r : m - r;
}

/// The residue of a signed integer.
inline constexpr uint64_t from_int(int64_t v, uint64_t m) {
  int64_t r = v % static_cast<int64_t>(m);
  return static_cast<uint64_t>(r < 0 ? r + static_cast<int64_t>(m) : r);
}

}  // namespace mugraph::ff
