// Measured selection (measured_selection.h): the rank correlation it reports, and its report
// entry. Building and timing candidates is exercised end to end by tests/tools/test_search_cli.py
// (under the host emulation) and on a GPU.
#include "mugraph/measured_selection.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

namespace mugraph {
namespace {

TEST(Spearman, PerfectReversedAndTied) {
  EXPECT_DOUBLE_EQ(spearman_rank_correlation({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(spearman_rank_correlation({1, 2, 3, 4}, {9, 7, 5, 1}), -1.0);
  // Only the order counts: a monotone but non-linear relation is still 1.
  EXPECT_DOUBLE_EQ(spearman_rank_correlation({1, 2, 3, 4, 5}, {1, 4, 9, 16, 1000}), 1.0);
  // Ties take their average rank: x ranks (1, 2.5, 2.5, 4), y (1, 3, 2, 4): 4.5 / sqrt(4.5 · 5).
  EXPECT_NEAR(spearman_rank_correlation({1, 2, 2, 3}, {1, 3, 2, 4}), 4.5 / std::sqrt(22.5), 1e-12);
  // One swapped pair of five: 1 - 6 · 2 / 120.
  EXPECT_NEAR(spearman_rank_correlation({1, 2, 3, 4, 5}, {1, 2, 3, 5, 4}), 0.9, 1e-12);
}

TEST(Spearman, UndefinedWithoutTwoValuesOrWithAConstantSeries) {
  EXPECT_TRUE(std::isnan(spearman_rank_correlation({}, {})));
  EXPECT_TRUE(std::isnan(spearman_rank_correlation({1}, {2})));
  EXPECT_TRUE(std::isnan(spearman_rank_correlation({1, 2, 3}, {5, 5, 5})));
  EXPECT_THROW(spearman_rank_correlation({1, 2}, {1}), InternalError);
}

TEST(MeasuredSelection, ReportEntry) {
  MeasuredSelection s;
  s.device = "NVIDIA H200";
  s.chosen_rank = 1;
  s.spearman = std::nan("");
  s.candidates = {{0, 10.0, true, 12.5, ""}, {1, 11.0, true, 9.5, ""}, {2, 12.0, false, 0, "its result differs"}};
  const nlohmann::json j = nlohmann::json::parse(measured_selection_json(s));
  EXPECT_EQ(j["device"], "NVIDIA H200");
  EXPECT_EQ(j["chosen_rank"], 1);
  EXPECT_TRUE(j["spearman"].is_null());
  ASSERT_EQ(j["candidates"].size(), 3u);
  EXPECT_EQ(j["candidates"][1]["measured_us"], 9.5);
  EXPECT_FALSE(j["candidates"][2]["ok"]);
  EXPECT_EQ(j["candidates"][2]["error"], "its result differs");
  EXPECT_FALSE(j["candidates"][0].contains("error"));
}

}  // namespace
}  // namespace mugraph
