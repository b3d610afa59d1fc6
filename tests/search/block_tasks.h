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
/// pass's, as the search does; their statistics summed.
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
      all.stats.add(out.stats);
      for (Task& child : out.children) all.children.push_back(std::move(child));
      for (FoundCandidate& f : out.candidates) all.candidates.push_back(std::move(f));
    }
  }
  return all;
}

/// The block tasks of the root and of the prefixes they make (a second kernel), up to `most`.
inline std::vector<Task> two_levels_of_block_tasks(SearchContext& ctx, size_t most) {
  std::vector<Task> tasks;
  Generator gen(ctx);
  std::atomic<bool> stop{false};
  TaskOutput root;
  EXPECT_TRUE(gen.run(ctx.root(), root, stop));
  for (Task& t : root.children)
    if (t.is_block()) tasks.push_back(std::move(t));
  for (size_t i = 0, n = tasks.size(); i < n && tasks.size() < most; ++i) {
    TaskOutput out;
    EXPECT_TRUE(gen.run(tasks[i], out, stop));
    for (Task& child : out.children) {
      if (child.is_block()) continue;
      TaskOutput kernel;
      EXPECT_TRUE(gen.run(child, kernel, stop));
      for (Task& t : kernel.children)
        if (t.is_block() && tasks.size() < most) tasks.push_back(std::move(t));
    }
  }
  return tasks;
}

}  // namespace mugraph::search_detail::testing
