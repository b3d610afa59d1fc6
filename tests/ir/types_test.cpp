#include <gtest/gtest.h>

#include "mugraph/types.h"

namespace mugraph {
namespace {

TEST(Scalar, ParsesDecimalsExactly) {
  auto s = parse_scalar("0.125");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->mantissa, 125);
  EXPECT_EQ(s->exp10, -3);
  EXPECT_DOUBLE_EQ(s->value(), 0.125);
  EXPECT_EQ(parse_scalar("4096")->str(), "4096");
  EXPECT_EQ(parse_scalar("-2")->str(), "-2");
  EXPECT_EQ(parse_scalar("1e-6")->mantissa, 1);
  EXPECT_EQ(parse_scalar("1e-6")->exp10, -6);
  EXPECT_EQ(parse_scalar("2.50"), parse_scalar("2.5"));
  EXPECT_EQ(parse_scalar("0.0")->str(), "0");
}

TEST(Scalar, RejectsNonNumbers) {
  for (const char* bad : {"", "-", ".", "e5", "1e", "1e+", "1.2.3", "0x10", "1f", "1e999", "1e-999",
                          "1234567890123456789", "1.5e300", "9.9e-301", "0.5e-300"})
    EXPECT_FALSE(parse_scalar(bad)) << bad;
}

TEST(Scalar, TrailingZerosAreAnExponentAndTheRangeIsTheMagnitudes) {
  // 10^18 has one significant digit: 19 digits of text, mantissa 1.
  EXPECT_EQ(parse_scalar("1000000000000000000")->mantissa, 1);
  EXPECT_EQ(parse_scalar("1000000000000000000")->exp10, 18);
  EXPECT_EQ(parse_scalar("120000000000000000000000.00")->str(), parse_scalar("1.2e23")->str());
  EXPECT_EQ(parse_scalar("1.50"), parse_scalar("1.5"));
  EXPECT_EQ(parse_scalar("100.5")->mantissa, 1005);  // zeros between digits are digits
  EXPECT_FALSE(parse_scalar("1000000000000000001"));  // 19 significant digits
  // From 1e-300 to 1e300 by magnitude, whatever the spelling of the mantissa.
  for (const char* ok : {"1.5e-300", "15e-301", "1e-300", "1e300", "0.1e301", "9.99e299"})
    EXPECT_TRUE(parse_scalar(ok)) << ok;
}

TEST(Scalar, TextRoundTrips) {
  for (const char* text : {"0.125", "4096", "-2", "1e-06", "3.14159", "1e+30", "-0.0001", "123456789012345678"}) {
    auto s = parse_scalar(text);
    ASSERT_TRUE(s) << text;
    EXPECT_EQ(parse_scalar(s->str()), s) << text << " -> " << s->str();
    EXPECT_DOUBLE_EQ(s->value(), std::stod(text)) << text;
  }
}

TEST(DType, PromotionAndNames) {
  EXPECT_EQ(promote(DType::f16, DType::f16), DType::f16);
  EXPECT_EQ(promote(DType::f16, DType::bf16), DType::f32);
  EXPECT_EQ(promote(DType::bf16, DType::f32), DType::f32);
  for (DType t : {DType::f16, DType::bf16, DType::f32}) EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  EXPECT_FALSE(parse_dtype("f64"));
}

TEST(Shape, BasicsAndHash) {
  Shape a{16, 4096};
  EXPECT_EQ(a.rank(), 2);
  EXPECT_EQ(a.numel(), 16 * 4096);
  EXPECT_EQ(a.str(), "[16, 4096]");
  Shape b{16, 4096};
  EXPECT_EQ(a, b);
  EXPECT_EQ(hash_value(a), hash_value(b));
  EXPECT_NE(a, (Shape{4096, 16}));
}

}  // namespace
}  // namespace mugraph
