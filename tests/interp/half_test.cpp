// f16 / bf16 conversions: exhaustive round trips and the rounding boundaries.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "mugraph/interp.h"

namespace mugraph {
namespace {

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }
float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

TEST(Half, EveryBitPatternRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = half_bits_to_float(static_cast<uint16_t>(h));
    bool nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
    EXPECT_EQ(std::isnan(f), nan) << std::hex << h;
    EXPECT_EQ(float_to_half_bits(f), h) << std::hex << h;  // NaN payloads survive too
    EXPECT_EQ(std::signbit(f), (h & 0x8000u) != 0) << std::hex << h;
  }
}

TEST(Half, DecodesKnownValues) {
  EXPECT_EQ(half_bits_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_bits_to_float(0xc000), -2.0f);
  EXPECT_EQ(half_bits_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_bits_to_float(0x0400), std::ldexp(1.0f, -14));     // smallest normal
  EXPECT_EQ(half_bits_to_float(0x0001), std::ldexp(1.0f, -24));     // smallest subnormal
  EXPECT_EQ(half_bits_to_float(0x03ff), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(half_bits_to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(half_bits_to_float(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(bits(half_bits_to_float(0x8000)), 0x80000000u);  // -0
}

// Between every two adjacent finite halves a < b (same sign): the midpoint goes to the one with
// an even mantissa, anything just below it to a, anything just above it to b.
TEST(Half, RoundsToNearestEvenBetweenEveryPairOfNeighbours) {
  for (uint32_t sign : {0u, 0x8000u}) {
    for (uint32_t h = 0; h < 0x7bff; ++h) {
      float a = half_bits_to_float(static_cast<uint16_t>(sign | h));
      float b = half_bits_to_float(static_cast<uint16_t>(sign | (h + 1)));
      float mid = static_cast<float>((static_cast<double>(a) + b) / 2);  // exact: halves have 11 bits
      ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(a) + b) / 2);
      uint16_t even = static_cast<uint16_t>(sign | ((h & 1u) ? h + 1 : h));
      EXPECT_EQ(float_to_half_bits(mid), even) << std::hex << h;
      float below = std::nextafter(mid, a), above = std::nextafter(mid, b);
      EXPECT_EQ(float_to_half_bits(below), sign | h) << std::hex << h;
      EXPECT_EQ(float_to_half_bits(above), sign | (h + 1)) << std::hex << h;
      EXPECT_EQ(float_to_half_bits(a), sign | h);
    }
  }
}

TEST(Half, OverflowUnderflowAndSpecials) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(std::nextafter(65520.0f, 0.0f)), 0x7bff);  // just below the midpoint
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);                        // the tie goes to the even neighbour: inf
  EXPECT_EQ(float_to_half_bits(-65520.0f), 0xfc00);
  EXPECT_EQ(float_to_half_bits(1e10f), 0x7c00);
  EXPECT_EQ(float_to_half_bits(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(float_to_half_bits(inf), 0x7c00);
  EXPECT_EQ(float_to_half_bits(-inf), 0xfc00);
  // 2^-25 is halfway between 0 and the smallest subnormal: ties to even gives 0.
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(float_to_half_bits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(float_to_half_bits(-std::ldexp(1.0f, -25)), 0x8000);
  EXPECT_EQ(float_to_half_bits(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 units: tie to even 2
  EXPECT_EQ(float_to_half_bits(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
  // Rounding up from the largest subnormal carries into the smallest normal.
  EXPECT_EQ(float_to_half_bits(std::ldexp(1023.75f, -24)), 0x0400);
  // NaN stays NaN (quiet, sign kept) even when its payload lives only in the low bits.
  EXPECT_EQ(float_to_half_bits(from_bits(0x7f800001u)) & 0x7c00u, 0x7c00u);
  EXPECT_NE(float_to_half_bits(from_bits(0x7f800001u)) & 0x3ffu, 0u);
  EXPECT_EQ(float_to_half_bits(from_bits(0xffc00000u)), 0xfe00);
  EXPECT_TRUE(std::isnan(round_to_dtype(std::numeric_limits<float>::quiet_NaN(), DType::f16)));
}

#if defined(__FLT16_MAX__)
// Cross-check against the compiler's _Float16 conversion (correctly rounded by IEEE 754).
TEST(Half, AgreesWithCompilerFloat16) {
  uint32_t state = 12345;
  for (int i = 0; i < 2000000; ++i) {
    state = state * 1664525u + 1013904223u;
    // Exponents around the half range: 2^-30 .. 2^17.
    uint32_t u = (state & 0x807fffffu) | (((state >> 23) % 48 + 97) << 23);
    float f = from_bits(u);
    auto ref = std::bit_cast<uint16_t>(static_cast<_Float16>(f));
    ASSERT_EQ(float_to_half_bits(f), ref) << std::hex << u;
  }
}
#endif

TEST(BFloat16, EveryBitPatternRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = bfloat16_bits_to_float(static_cast<uint16_t>(h));
    EXPECT_EQ(bits(f), h << 16);
    EXPECT_EQ(float_to_bfloat16_bits(f), h) << std::hex << h;
  }
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bfloat16_bits(from_bits(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(float_to_bfloat16_bits(from_bits(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(float_to_bfloat16_bits(from_bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(float_to_bfloat16_bits(from_bits(0x3f807fffu)), 0x3f80);
  EXPECT_EQ(float_to_bfloat16_bits(std::numeric_limits<float>::max()), 0x7f80);  // overflow to inf
  EXPECT_EQ(float_to_bfloat16_bits(from_bits(0x00008000u)), 0x0000);             // subnormal tie to even 0
  EXPECT_EQ(float_to_bfloat16_bits(from_bits(0x00018000u)), 0x0002);
  uint16_t nan = float_to_bfloat16_bits(from_bits(0x7f800001u));  // payload only in dropped bits
  EXPECT_TRUE(std::isnan(bfloat16_bits_to_float(nan)));
}

TEST(RoundToDtype, RoundsToTheNearestRepresentable) {
  EXPECT_EQ(round_to_dtype(0.1f, DType::f32), 0.1f);
  EXPECT_EQ(round_to_dtype(0.1f, DType::f16), half_bits_to_float(0x2e66));
  EXPECT_EQ(round_to_dtype(0.1f, DType::bf16), bfloat16_bits_to_float(0x3dcd));
  EXPECT_EQ(round_to_dtype(1.0f + std::ldexp(1.0f, -11), DType::f16), 1.0f);  // tie to even
  HostTensor t(TensorType{{3}, DType::f16});
  t.data = {0.1f, 70000.0f, 1.0f};
  round_tensor(t);
  EXPECT_EQ(t.data[0], half_bits_to_float(0x2e66));
  EXPECT_TRUE(std::isinf(t.data[1]));
  EXPECT_EQ(t.data[2], 1.0f);
}

}  // namespace
}  // namespace mugraph
