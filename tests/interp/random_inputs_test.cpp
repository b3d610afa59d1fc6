// random_inputs: deterministic standard-normal values.
#include <gtest/gtest.h>

#include <cmath>

#include "interp_test_util.h"
#include "test_graphs.h"

namespace mugraph {
namespace {

TEST(RandomInputs, AreStandardNormal) {
  Graph g;
  g.add_input("X", {1000, 1000}, DType::f32);
  HostTensor x = random_inputs(g, 1).at(0);
  double sum = 0, sq = 0, quart = 0, within1 = 0;
  for (float v : x.data) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sq += static_cast<double>(v) * v;
    quart += static_cast<double>(v) * v * v * v;
    within1 += std::fabs(v) < 1.0f ? 1 : 0;
  }
  double n = static_cast<double>(x.data.size());
  EXPECT_NEAR(sum / n, 0.0, 0.005);
  EXPECT_NEAR(sq / n, 1.0, 0.005);
  EXPECT_NEAR(quart / n, 3.0, 0.05);
  EXPECT_NEAR(within1 / n, 0.6827, 0.002);
}

TEST(RandomInputs, AreDeterministicAndRoundedToTheirDtype) {
  Graph g = test::rmsnorm_fig3b(4, 64, 32, 4, 4, DType::f16);
  auto a = random_inputs(g, 99), b = random_inputs(g, 99), c = random_inputs(g, 100);
  ASSERT_EQ(a.size(), 3u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(test::bit_identical(a[i], b[i]));
    EXPECT_FALSE(test::bit_identical(a[i], c[i]));
    EXPECT_EQ(a[i].type, g.type(g.ops[i].outputs[0]));
    for (float v : a[i].data) ASSERT_EQ(v, round_to_dtype(v, DType::f16));
  }
  EXPECT_FALSE(test::bit_identical(a[0], a[2]));  // inputs get different streams
}

TEST(RandomInputs, GoldenValues) {
  // Fixed forever: a change here changes every recorded experiment's inputs.
  Graph g;
  g.add_input("X", {6}, DType::f32);
  g.add_input("Y", {3}, DType::bf16);
  auto in = random_inputs(g, 2024);
  // (The same as splitmix64 + Box–Muller with libm's log/cos/sin, to f32 precision.)
  EXPECT_EQ(in[0].data,
            (std::vector<float>{-0.117500827f, 1.34298444f, -1.17317176f, -0.13224712f, -1.29712141f, -1.03845656f}));
  EXPECT_EQ(in[1].data, (std::vector<float>{0.375f, 0.178710938f, -0.03125f}));
}

TEST(RandomInputs, DrawnInChunksOnAnyNumberOfThreadsTheyAreTheSequentialDraws) {
  // Golden values past the first chunk (2^16 elements) and at the odd last element, as the
  // sequential generator of earlier sessions drew them (`mugraph run` of mul(X, 1), seed 2024).
  Graph g;
  g.add_input("X", {140003}, DType::f32);
  g.add_input("Y", {70001}, DType::f16);
  const auto one = random_inputs(g, 2024, kDefaultMaxHostBytes, 1);
  EXPECT_EQ(one[0].data[65535], 0.721635342f);
  EXPECT_EQ(one[0].data[65536], 1.09475565f);
  EXPECT_EQ(one[0].data[65537], -2.34103751f);
  EXPECT_EQ(one[0].data[140002], -1.30530488f);
  for (int threads : {2, 3, 0}) {
    const auto many = random_inputs(g, 2024, kDefaultMaxHostBytes, threads);
    for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(test::bit_identical(one[i], many[i])) << threads;
  }
}

TEST(RandomInputs, ScaledAreTheSameDrawsTimesTheScaleRoundedToTheirDtype) {
  Graph g;
  g.add_input("X", {1000}, DType::f32);
  g.add_input("Y", {1000}, DType::f16);
  auto one = random_inputs(g, 7), quarter = random_inputs_scaled(g, 7, 0.25);
  auto same = random_inputs_scaled(g, 7, 1.0);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(test::bit_identical(one[i], same[i]));
  // A power of two: exact in f32; in f16 the same draw rounded once (not the f16 value scaled).
  for (size_t j = 0; j < 1000; ++j) EXPECT_EQ(quarter[0].data[j], 0.25f * one[0].data[j]);
  double sq = 0;
  for (float v : quarter[1].data) {
    ASSERT_EQ(v, round_to_dtype(v, DType::f16));
    sq += static_cast<double>(v) * v;
  }
  EXPECT_NEAR(sq / 1000, 0.0625, 0.01);
}

}  // namespace
}  // namespace mugraph
