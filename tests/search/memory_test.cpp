// The memory a search may use: the share the verifier keeps, and the refusal of a program whose
// verification cannot fit.
#include "memory.h"

#include <gtest/gtest.h>

#include <string>

#include "mugraph/error.h"
#include "mugraph/frontend.h"
#include "mugraph/host_memory.h"
#include "search_fixtures.h"

namespace mugraph::search_detail {
namespace {

TEST(VerifierKeptInputs, AnEighthOfTheLimitAtMostTheDefault) {
  const int64_t gib = int64_t{1} << 30;
  EXPECT_EQ(verifier_kept_input_bytes(0), ReferenceRuns::kDefaultKeptInputBytes);
  EXPECT_EQ(verifier_kept_input_bytes(4 * gib), gib / 2);
  EXPECT_EQ(verifier_kept_input_bytes(16 * gib), 2 * gib);
  EXPECT_EQ(verifier_kept_input_bytes(96 * gib), ReferenceRuns::kDefaultKeptInputBytes);
}

TEST(VerificationBytes, ASearchWhoseVerificationCannotFitIsRefusedBeforeItStarts) {
  // 2^40 inputs and as many outputs, the most a tensor may have: 16 TiB at least, more than any
  // machine this runs on. The refusal comes before the search; a smaller program searches.
  const Graph program = parse_program("input X[1048576, 1048576]\nO = exp(X)\noutput O\n");
  ASSERT_GT(usable_memory_bytes(), 0) << "this test needs to know the machine's memory";
  try {
    search(program, SearchOptions{});
    ADD_FAILURE() << "the search ran";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("error: search: verification runs the graphs", 0), 0) << e.what();
    EXPECT_NE(std::string(e.what()).find("takes at least 16384.0 GiB"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("of memory this process may use"), std::string::npos) << e.what();
  }
  SearchOptions options;
  options.time_limit_seconds = 5;
  EXPECT_FALSE(search(parse_program("input X[1024, 1024]\nO = exp(X)\noutput O\n"), options).top.empty());
}

}  // namespace
}  // namespace mugraph::search_detail
