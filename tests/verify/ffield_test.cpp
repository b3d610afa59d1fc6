// Finite-field arithmetic (ffield.h): the primes, inverses, powers, square roots up to sign.
#include "mugraph/ffield.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace mugraph::ff {
namespace {

bool is_prime(uint64_t n) {
  if (n < 2) return false;
  for (uint64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

TEST(FField, PrimesAreAsDocumented) {
  EXPECT_TRUE(is_prime(kP));
  EXPECT_TRUE(is_prime(kQ));
  EXPECT_EQ(kP, 2 * kQ + 1);
  EXPECT_LT(kP, uint64_t{1} << 30);
  EXPECT_EQ(kP % 4, 3u);
  EXPECT_EQ(kQ % 4, 3u);
}

TEST(FField, AddSubNeg) {
  for (uint64_t m : {kP, kQ}) {
    EXPECT_EQ(add(m - 1, 1, m), 0u);
    EXPECT_EQ(add(m - 1, m - 1, m), m - 2);
    EXPECT_EQ(sub(0, 1, m), m - 1);
    EXPECT_EQ(sub(5, 3, m), 2u);
    EXPECT_EQ(neg(0, m), 0u);
    EXPECT_EQ(add(neg(7, m), 7, m), 0u);
  }
}

TEST(FField, InverseAndPow) {
  std::mt19937_64 rng(1);
  for (uint64_t m : {kP, kQ}) {
    EXPECT_EQ(pow(3, 0, m), 1u);
    EXPECT_EQ(pow(2, 10, m), 1024u);
    EXPECT_EQ(pow(5, m - 1, m), 1u);  // Fermat
    for (int i = 0; i < 1000; ++i) {
      uint64_t x = rng() % (m - 1) + 1;
      EXPECT_EQ(mul(x, inv(x, m), m), 1u) << x;
    }
    EXPECT_EQ(inv(1, m), 1u);
    EXPECT_EQ(inv(m - 1, m), m - 1);
  }
}

TEST(FField, SqrtIsPlusMinusRoot) {
  std::mt19937_64 rng(2);
  for (uint64_t m : {kP, kQ}) {
    EXPECT_EQ(sqrt_pm(0, m), 0u);
    EXPECT_EQ(sqrt_pm(4, m), 2u);
    for (int i = 0; i < 2000; ++i) {
      uint64_t x = rng() % m;
      uint64_t r = sqrt_pm(x, m);
      uint64_t sq = mul(r, r, m);
      EXPECT_TRUE(sq == x || sq == neg(x, m)) << "x " << x << " r " << r;
      EXPECT_LE(r, m - r) << "the smaller root";
      EXPECT_EQ(sqrt_pm(mul(r, r, m), m), r) << "deterministic";
      // The definition: the power of whichever of x and −x is the square, the smaller root.
      uint64_t s = pow(x, (m + 1) / 4, m);
      if (mul(s, s, m) != x) s = pow(neg(x, m), (m + 1) / 4, m);
      EXPECT_EQ(r, std::min(s, m - s)) << "x " << x;
    }
    EXPECT_EQ(sqrt_pm(m - 1, m), 1u) << "−1 is not a square: the root of 1";
  }
}

TEST(FField, FromInt) {
  for (uint64_t m : {kP, kQ}) {
    EXPECT_EQ(from_int(0, m), 0u);
    EXPECT_EQ(from_int(-1, m), m - 1);
    EXPECT_EQ(from_int(-static_cast<int64_t>(m), m), 0u);
    EXPECT_EQ(from_int(static_cast<int64_t>(m) + 3, m), 3u);
    EXPECT_EQ(add(from_int(-12345, m), 12345, m), 0u);
    EXPECT_EQ(from_int(INT64_MIN, m), (m - static_cast<uint64_t>(-(INT64_MIN % static_cast<int64_t>(m)))) % m);
  }
}

}  // namespace
}  // namespace mugraph::ff
