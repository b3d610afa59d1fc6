// Shared by the tests of the search's internals: running every block task of one operand set.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <vector>

#include "generator.h"

namespace mugraph::search_detail::testing {

/// Every output of running all chunks of the block task of `operands` after `prefix`, with no
/// cost bound.
inline TaskOutput run_block_tasks(SearchContext& ctx, const Graph& prefix, const std::vector<TensorId>& operands) {
  Generator gen(ctx);
  auto shared = std::make_shared<const Graph>(prefix);
  const size_t configs = gen.configs_for(shared, operands)->configs.size();
  TaskOutput all;
  std::atomic<bool> stop{false};
  for (size_t c = 0; c * kConfigsPerTask < configs; ++c) {
    Task t;
    t.prefix = shared;
    t.operands = operands;
    t.chunk = static_cast<int32_t>(c);
    TaskOutput out;
    EXPECT_TRUE(gen.run(t, out, stop));
    for (Task& child : out.children) all.children.push_back(std::move(child));
    for (FoundCandidate& f : out.candidates) all.candidates.push_back(std::move(f));
  }
  return all;
}

}  // namespace mugraph::search_detail::testing
