// The floor of a growing block graph (src/search/growth_floor.h): on every graph-defined kernel
// of the candidates a search tree yields, the floor of its block ops, pushed as the search
// appends them, is at most the kernel's estimate as the search ranks it, and the loop steps it
// counts are at most those of the op order the code generator uses.
#include "growth_floor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <deque>

#include "mugraph/block_threads.h"
#include "mugraph/cost_model.h"
#include "mugraph/frontend.h"
#include "mugraph/fuse_thread_graphs.h"
#include "mugraph/json.h"
#include "mugraph/op_order.h"
#include "retile.h"
#include "search_fixtures.h"

namespace mugraph::search_detail {
namespace {

/// Candidates of the first `max_tasks` tasks of `program`'s search tree (breadth first, no bound).
std::vector<FoundCandidate> tree_candidates(const char* program_text, int max_tasks) {
  Graph program = parse_program(program_text);
  SearchContext ctx(program, search_testing::small_model_bound_options());
  Generator gen(ctx);
  std::atomic<bool> stop{false};
  std::deque<Task> queue{ctx.root()};
  std::vector<FoundCandidate> found;
  for (int tasks = 0; !queue.empty() && tasks < max_tasks; ++tasks) {
    TaskOutput out;
    EXPECT_TRUE(gen.run(queue.front(), out, stop));
    queue.pop_front();
    for (FoundCandidate& c : out.candidates) found.push_back(std::move(c));
    for (Task& t : out.children) queue.push_back(std::move(t));
  }
  return found;
}

/// Checks the growth floor of every graph-defined kernel of `candidates`; returns how many kernels
/// it checked and how many of them loop.
std::pair<int, int> check_kernels(const std::vector<FoundCandidate>& candidates) {
  const GpuSpec& gpu = gpu_spec("h200");
  int kernels = 0, looping = 0;
  for (const FoundCandidate& c : candidates) {
    const Graph ranked = choose_block_threads(fuse_thread_graphs(c.graph), gpu);
    for (size_t i = 0; i < c.graph.ops.size(); ++i) {
      const Op& op = c.graph.ops[i];
      if (op.kind != OpKind::graph_kernel) continue;
      const Graph& body = c.graph.bodies[static_cast<size_t>(op.attrs.body)];
      const KernelConfig config = config_of(body);
      GrowthFloor floor(config, config_floor(c.graph, op.inputs, config, gpu), gpu);
      // The search appends iterators, then block ops, then closes the graph with savers.
      Graph grown = make_block_graph(body.params, body.grid, body.forloop);
      for (const Op& b : body.ops) {
        if (b.kind == OpKind::output_saver) continue;
        const bool appended = grown.append(b.kind, b.inputs, b.attrs).ok();
        EXPECT_TRUE(appended);
        if (!appended) return {kernels, looping};
        floor.push(grown);
      }
      const KernelCost cost = estimate_kernel_cost(ranked, ranked.ops[i], gpu);
      const Graph& ranked_body = ranked.bodies[static_cast<size_t>(ranked.ops[i].attrs.body)];
      ++kernels;
      looping += body.forloop > 1;
      EXPECT_LE(floor.floor_us(), cost.total_us + 1e-9) << to_json(c.graph) << cost.bound;
      EXPECT_LE(floor.loop_steps(), schedule_block_ops(ranked_body).loop_steps) << to_json(c.graph);
      // Popping every op leaves the iterators' floor alone.
      for (size_t k = body.params.size(); k < grown.ops.size(); ++k) floor.pop();
      const double base = floor.floor_us();
      EXPECT_LE(base, cost.total_us + 1e-9);
    }
  }
  return {kernels, looping};
}

TEST(GrowthFloor, IsAtMostTheEstimateOfEveryKernelTheSearchCloses) {
  // RMSNorm then a projection, and attention (GQA at a small shape): loops over a reduction, a
  // matmul's tiles and a softmax, in one kernel or two.
  const auto [rms_kernels, rms_looping] = check_kernels(tree_candidates(search_testing::kSmallRmsNormLinear, 2000));
  const auto [gqa_kernels, gqa_looping] = check_kernels(tree_candidates(search_testing::kSmallGqa, 3000));
  EXPECT_GT(rms_kernels, 50);
  EXPECT_GT(rms_looping, 10);
  EXPECT_GT(gqa_kernels, 50);
  EXPECT_GT(gqa_looping, 10);
}

TEST(GrowthFloor, CountsAStepPerMatmulOrSumOnTheLoopsLongestChain) {
  // sum(X²) then its division, and X ⊙ G then its matmul by W, over a loop of 4: the chain
  // iterator → sum → accumulate needs 3 steps (the element-wise ops may fuse or fold away).
  Graph body = make_block_graph({{{2, 64}, DType::f16}, {{64}, DType::f16}, {{64, 64}, DType::f16}}, Dim3{1, 1, 1}, 4);
  const GpuSpec& gpu = gpu_spec("h200");
  KernelConfig config;
  config.grid = body.grid;
  config.forloop = 4;
  config.fmaps[0] = 1;
  config.fmaps[1] = 0;
  config.fmaps[2] = 0;
  GrowthFloor floor(config, ConfigFloor{2.5, 1.0, 0.0}, gpu);
  auto push = [&](OpKind kind, std::vector<TensorId> in, const OpAttrs& attrs = {}) {
    auto r = body.append(kind, std::move(in), attrs);
    EXPECT_TRUE(r.ok()) << r.rejection().str();
    floor.push(body);
    return body.ops.back().outputs.empty() ? TensorId() : body.ops.back().outputs[0];
  };
  const TensorId x = push(OpKind::input_iterator, {}, attrs::iterator(0, {kPhi, kPhi, kPhi}, 1));
  const TensorId g = push(OpKind::input_iterator, {}, attrs::iterator(1, {kPhi, kPhi, kPhi}, 0));
  push(OpKind::input_iterator, {}, attrs::iterator(2, {kPhi, kPhi, kPhi}, 0));
  EXPECT_EQ(floor.loop_steps(), 1);
  // 4 iterations, one barrier each, on 1 block: launch + loads + 4 barriers.
  EXPECT_NEAR(floor.floor_us(), 2.5 + 1.0 + 4 * gpu.barrier_us, 1e-12);
  const TensorId sq = push(OpKind::sqr, {x});
  EXPECT_EQ(floor.loop_steps(), 2);
  const TensorId s = push(OpKind::sum, {sq}, attrs::sum(1));
  EXPECT_EQ(floor.loop_steps(), 2);
  const double before_accum = floor.floor_us();
  push(OpKind::accum, {s}, attrs::accum());
  EXPECT_EQ(floor.loop_steps(), 3);
  EXPECT_GT(floor.floor_us(), before_accum);
  push(OpKind::mul, {x, g});
  EXPECT_EQ(floor.loop_steps(), 3);
  floor.pop();
  floor.pop();
  EXPECT_EQ(floor.loop_steps(), 2);
  EXPECT_DOUBLE_EQ(floor.floor_us(), before_accum);
}

}  // namespace
}  // namespace mugraph::search_detail
