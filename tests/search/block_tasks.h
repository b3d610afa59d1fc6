// Shared by the tests of the search's internals: running every block task of one operand set.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <vector>

#include "generator.h"

namespace mugraph::search_detail::testing {

/// Every output of running all chunks of the block task of `operands` after `prefix`, with no
/// cost bound: the first pass's (Task::finish_only) where the search makes one, then the full
/// pass's, as the search does.
inline TaskOutput run_block_tasks(SearchContext& ctx, const Graph& prefix, const std::vector<TensorId>& operands) {
  Generator gen(ctx);
  auto shared = std::make_shared<const Graph>(prefix);
  const size_t configs = gen.configs_for(shared, operands)->configs.size();
  const bool first_pass =
      gets_first_pass(ctx.options(), prefix, gen.can_finish(expressions(prefix, ctx.exprs()).tensors, operands));
  TaskOutput all;
  std::atomic<bool> stop{false};
  for (int pass = first_pass ? 0 : 1; pass < 2; ++pass) {
    for (size_t c = 0; c * kConfigsPerTask < configs; ++c) {
      Task t;
      t.prefix = shared;
      t.operands = operands;
      t.chunk = static_cast<int32_t>(c);
      t.finish_only = pass == 0;
      TaskOutput out;
      EXPECT_TRUE(gen.run(t, out, stop));
      for (Task& child : out.children) all.children.push_back(std::move(child));
      for (FoundCandidate& f : out.candidates) all.candidates.push_back(std::move(f));
    }
  }
  return all;
}

}  // namespace mugraph::search_detail::testing
