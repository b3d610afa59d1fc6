// The block-search cache (src/search/block_cache.h): a block task that replays what another
// prefix's block search closed must produce exactly what growing the block graphs again would.
#include "block_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "block_tasks.h"
#include "mugraph/frontend.h"
#include "mugraph/json.h"
#include "search_fixtures.h"

namespace mugraph::search_detail {
namespace {

using search_testing::kRmsNormSmall;
using search_testing::kSmallRmsNormLinear;
using search_testing::small_model_bound_options;

std::shared_ptr<const BlockClosings> entry(double complete_to_us, int64_t bytes = 100) {
  auto e = std::make_shared<BlockClosings>();
  e->complete_to_us = complete_to_us;
  e->bytes = bytes;
  return e;
}

BlockSearchKey key(const std::string& shelf, int64_t forloop = 1) {
  KernelConfig config;
  config.forloop = forloop;
  return {shelf, config};
}

TEST(BlockCache, FindsOnlyAnEntryThatReachesTheCut) {
  BlockCache cache(1 << 20);
  EXPECT_EQ(cache.find(key("k"), 1.0), nullptr);
  cache.insert(key("k"), entry(5.0));
  ASSERT_NE(cache.find(key("k"), 4.0), nullptr);
  ASSERT_NE(cache.find(key("k"), 5.0), nullptr);
  EXPECT_EQ(cache.find(key("k"), 5.5), nullptr) << "a growth cut at 5 us may have missed closings with floors above it";
  EXPECT_EQ(cache.find(key("other"), 1.0), nullptr);
  EXPECT_EQ(cache.find(key("k", 2), 1.0), nullptr) << "another configuration on the same shelf";
  // An entry that reaches less does not replace one that reaches more; one that reaches more does.
  cache.insert(key("k"), entry(3.0));
  EXPECT_EQ(cache.find(key("k"), 4.0)->complete_to_us, 5.0);
  cache.insert(key("k"), entry(std::numeric_limits<double>::infinity()));
  EXPECT_NE(cache.find(key("k"), 1e9), nullptr);
  cache.clear();
  EXPECT_EQ(cache.find(key("k"), 1.0), nullptr);
  EXPECT_EQ(cache.bytes(), 0);
}

TEST(BlockCache, AShelfTakenBeforeAClearAddsNothing) {
  // A task holds its shelf while it runs; the cache may be cleared meanwhile (it filled up, or
  // the model bound's phase began). What the task then records must not come back.
  BlockCache cache(1 << 20);
  std::shared_ptr<BlockShelf> held = cache.shelf("k");
  cache.insert(held, key("k").config, entry(1.0));
  EXPECT_NE(cache.find(*held, key("k").config, 1.0), nullptr);
  cache.clear();
  cache.insert(held, key("k", 2).config, entry(1.0));
  EXPECT_EQ(cache.find(key("k", 2), 1.0), nullptr);
  EXPECT_EQ(cache.bytes(), 0);
  EXPECT_NE(cache.shelf("k"), held) << "the next task gets a new shelf";
}

TEST(BlockCache, StaysWithinItsCapacity) {
  BlockCache cache(64 << 10);
  // Larger than a sixteenth of the capacity: not kept.
  cache.insert(key("big"), entry(1.0, cache.entry_limit_bytes() + 1));
  EXPECT_EQ(cache.find(key("big"), 0.0), nullptr);
  for (int i = 0; i < 1000; ++i) {
    // Ten configurations on each shelf.
    const BlockSearchKey k = key("k" + std::to_string(i / 10), i % 10 + 1);
    cache.insert(k, entry(1.0, 1000));
    EXPECT_LE(cache.bytes(), 64 << 10);
    ASSERT_NE(cache.find(k, 1.0), nullptr) << "the newest entry is kept";
  }
}

TEST(BlockCache, KeysTellApartWhatTheGrowthReads) {
  Graph program = parse_program(kRmsNormSmall);
  SearchContext ctx(program, SearchOptions{});
  Graph prefix = ctx.root().prefix ? *ctx.root().prefix : Graph{};
  ASSERT_EQ(prefix.tensors.size(), 3u);
  PrefixFacts facts{expressions(prefix, ctx.exprs()).tensors, *kernel_graph_labels(ctx.indices(), prefix)};
  const std::vector<TensorId> xg{TensorId(0), TensorId(1)};
  const std::vector<KernelConfig> configs = kernel_configs(prefix, xg);
  ASSERT_GE(configs.size(), 2u);
  const BlockSearchKey k = block_search_key(prefix, facts, xg, configs[0], false, 2, true);
  EXPECT_EQ(k, block_search_key(prefix, facts, xg, configs[0], false, 2, true));
  EXPECT_NE(k, block_search_key(prefix, facts, xg, configs[1], false, 2, true));
  EXPECT_NE(k, block_search_key(prefix, facts, xg, configs[0], true, 2, true));
  EXPECT_NE(k, block_search_key(prefix, facts, xg, configs[0], false, 1, true));
  EXPECT_NE(k, block_search_key(prefix, facts, xg, configs[0], false, 2, false));
  // A kernel that must finish the program has no room after it to count.
  EXPECT_EQ(block_search_key(prefix, facts, xg, configs[0], true, 2, true),
            block_search_key(prefix, facts, xg, configs[0], true, 1, true));
  // Another operand, of the same shape, with another expression.
  Graph other = prefix;
  other.add_input("Z", {4, 64}, DType::f16);
  PrefixFacts other_facts{expressions(other, ctx.exprs()).tensors, facts.labels};
  other_facts.labels.tensors.push_back(facts.labels.tensors[0]);
  EXPECT_NE(k, block_search_key(other, other_facts, {TensorId(3), TensorId(1)}, configs[0], false, 2, true));
  // A prefix with more ops before the operands gives the same key: the growth does not read it.
  Graph longer = prefix;
  longer.add(OpKind::sqr, {TensorId(0)});
  PrefixFacts longer_facts{expressions(longer, ctx.exprs()).tensors, *kernel_graph_labels(ctx.indices(), longer)};
  EXPECT_EQ(k, block_search_key(longer, longer_facts, xg, configs[0], false, 2, true));
}

struct TaskRuns {
  std::vector<TaskOutput> outputs;
  int64_t states = 0, replays = 0;
};

TaskRuns run_all(SearchContext& ctx, const std::vector<Task>& tasks) {
  TaskRuns run;
  Generator gen(ctx);
  std::atomic<bool> stop{false};
  for (const Task& t : tasks) {
    TaskOutput out;
    EXPECT_TRUE(gen.run(t, out, stop));
    run.states += out.stats.states;
    run.replays += out.stats.block_replays;
    run.outputs.push_back(std::move(out));
  }
  return run;
}

/// Every task made the same children (prefix, path, floor) and candidates, in the same order.
void expect_same_outputs(const TaskRuns& a, const TaskRuns& b, const char* what) {
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    const TaskOutput& x = a.outputs[i];
    const TaskOutput& y = b.outputs[i];
    ASSERT_EQ(x.children.size(), y.children.size()) << what << ", task " << i;
    for (size_t c = 0; c < x.children.size(); ++c) {
      EXPECT_EQ(*x.children[c].prefix, *y.children[c].prefix) << what << ", task " << i << ", child " << c;
      EXPECT_EQ(x.children[c].path, y.children[c].path);
      EXPECT_EQ(x.children[c].floor_us, y.children[c].floor_us);
    }
    ASSERT_EQ(x.candidates.size(), y.candidates.size()) << what << ", task " << i;
    for (size_t c = 0; c < x.candidates.size(); ++c) {
      EXPECT_EQ(x.candidates[c].graph, y.candidates[c].graph) << what << ", task " << i << ", candidate " << c;
      EXPECT_EQ(x.candidates[c].estimated_us, y.candidates[c].estimated_us);
    }
  }
}

TEST(BlockCache, ReplaysCloseWhatGrowingTheBlockGraphsAgainCloses) {
  // The same tasks in a search with the cache and in one without: unbounded, then under a model
  // bound that cuts growth (replays of unbounded growths, filtered by their floors), then
  // unbounded again in a search whose cache holds only growths the bound cut (each must be grown
  // again, the entries not reaching that far).
  Graph program = parse_program(kSmallRmsNormLinear);
  SearchOptions with_options = small_model_bound_options();
  SearchOptions without_options = with_options;
  without_options.block_cache_bytes = 0;
  SearchContext with(program, with_options), without(program, without_options), bounded_first(program, with_options);
  ASSERT_NE(with.block_cache(), nullptr);
  ASSERT_EQ(without.block_cache(), nullptr);
  const std::vector<Task> tasks = testing::two_levels_of_block_tasks(without, 600);
  ASSERT_GT(tasks.size(), 300u);

  const TaskRuns grown = run_all(without, tasks);
  const TaskRuns replayed = run_all(with, tasks);
  expect_same_outputs(grown, replayed, "unbounded");
  EXPECT_GT(replayed.replays, 0) << "prefixes with one kernel share the next kernel's operands";
  EXPECT_LT(replayed.states, grown.states);
  EXPECT_EQ(grown.replays, 0);

  std::vector<double> estimates;
  for (const TaskOutput& out : grown.outputs)
    for (const FoundCandidate& c : out.candidates) estimates.push_back(c.estimated_us);
  ASSERT_GT(estimates.size(), 20u);
  std::sort(estimates.begin(), estimates.end());
  const double bound = estimates[estimates.size() / 3];
  for (SearchContext* ctx : {&with, &without, &bounded_first}) ctx->set_bound_us(bound);
  const TaskRuns grown_bounded = run_all(without, tasks);
  const TaskRuns replayed_bounded = run_all(with, tasks);
  expect_same_outputs(grown_bounded, replayed_bounded, "bounded");
  EXPECT_GT(replayed_bounded.replays, 0);
  EXPECT_LT(replayed_bounded.states, grown_bounded.states);
  int64_t cut = 0;
  for (const TaskOutput& out : replayed_bounded.outputs) cut += out.stats.pruned.count("cost_bound");
  EXPECT_GT(cut, 0);

  const TaskRuns first = run_all(bounded_first, tasks);
  expect_same_outputs(grown_bounded, first, "bounded, from an empty cache");
  bounded_first.set_bound_us(std::numeric_limits<double>::infinity());
  const TaskRuns loosened = run_all(bounded_first, tasks);
  expect_same_outputs(grown, loosened, "unbounded after bounded");
}

TEST(BlockCache, AGrowthCutShortIsNotKept) {
  // A stop ends a growth after at most 1024 states: the tasks with larger growths stop, keeping
  // the growths they completed before. Run again, they must give what a search without the
  // cache gives (no replay of a stopped growth's first closings).
  Graph program = parse_program(kSmallRmsNormLinear);
  SearchOptions without_options = small_model_bound_options();
  without_options.block_cache_bytes = 0;
  SearchContext ctx(program, small_model_bound_options()), without(program, without_options);
  const std::vector<Task> tasks = testing::two_levels_of_block_tasks(without, 300);
  Generator gen(ctx);
  std::atomic<bool> stop{true};
  int stopped = 0;
  for (const Task& t : tasks) {
    TaskOutput out;
    stopped += gen.run(t, out, stop) ? 0 : 1;
  }
  EXPECT_GT(stopped, 0);
  expect_same_outputs(run_all(without, tasks), run_all(ctx, tasks), "after stops");
}

TEST(BlockCache, TheModelPhaseStartsWithAnEmptyCache) {
  Graph program = parse_program(kSmallRmsNormLinear);
  SearchOptions options = small_model_bound_options();
  options.cost_bound = CostBound::both;
  SearchContext ctx(program, options);
  ASSERT_FALSE(ctx.model_bound());
  const std::vector<Task> tasks = testing::two_levels_of_block_tasks(ctx, 50);
  run_all(ctx, tasks);
  EXPECT_GT(ctx.block_cache()->bytes(), 0);
  ctx.use_model_bound();
  EXPECT_EQ(ctx.block_cache()->bytes(), 0) << "the bytes phase's growths recorded no floors";
}

TEST(BlockCache, OffWithNoBytes) {
  Graph program = parse_program(kSmallRmsNormLinear);
  SearchOptions options;
  options.block_cache_bytes = 0;
  EXPECT_EQ(SearchContext(program, options).block_cache(), nullptr);
  options.block_cache_bytes = -1;
  EXPECT_THROW(SearchContext(program, options), UserError);
}

}  // namespace
}  // namespace mugraph::search_detail
