// Retiling (src/search/retile.h): a candidate's block graphs rebuilt under every configuration of
// their kernels' operands, the kernels after the retiled one chosen again.
#include "retile.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <string>

#include "block_tasks.h"
#include "example_graphs.h"
#include "mugraph/frontend.h"
#include "mugraph/json.h"
#include "mugraph/validate.h"
#include "mugraph/verify.h"
#include "search_fixtures.h"

namespace mugraph::search_detail {
namespace {

// FlashDecoding's split of the keys at a small shape (examples::gqa_split_kv(2, 16, 8, 64, ...)).
constexpr const char* kSmallGqa =
    "input Q[2, 16, 8]\ninput K[2, 8, 64]\ninput V[2, 64, 8]\n"
    "E = exp(matmul(Q, K))\nO = matmul(div(E, sum(E, dim=2)), V)\noutput O\n";

Graph small_gqa_split_kv(int64_t splits, int64_t query_tiles) {
  return examples::gqa_split_kv(2, 16, 8, 64, splits, 4, 8, query_tiles);
}

FoundCandidate seed_of(const Graph& g, const SearchContext& ctx) {
  FoundCandidate c;
  c.graph = g;
  c.metrics = candidate_metrics(g, ctx.options().target);
  c.estimated_us = rank_estimate_us(g, ctx.gpu());
  c.path = {7, 3};
  return c;
}

/// Verifies up to `most` of the candidates, spread over the list, against the program.
void expect_equivalent(const Graph& program, const std::vector<FoundCandidate>& found, size_t most) {
  std::vector<const Graph*> sample;
  const size_t step = std::max<size_t>(1, found.size() / most);
  for (size_t i = 0; i < found.size(); i += step) sample.push_back(&found[i].graph);
  ASSERT_FALSE(sample.empty());
  const std::vector<VerifyResult> verdicts = verify_all(program, sample);
  ASSERT_EQ(verdicts.size(), sample.size());
  for (size_t i = 0; i < sample.size(); ++i)
    EXPECT_EQ(verdicts[i].verdict, Verdict::equivalent) << verdicts[i].reason << "\n" << to_json(*sample[i]);
}

TEST(Retile, StructureIsBlindToTilingOnly) {
  const Graph a = small_gqa_split_kv(8, 1);
  const Graph b = small_gqa_split_kv(4, 2);  // other grids, loops and maps; the same ops
  EXPECT_NE(to_json(a), to_json(b));
  EXPECT_EQ(tiling_free_structure(a), tiling_free_structure(b));
  // One op changed in a block graph: exp for sqr in kernel 1.
  Graph c = a;
  for (Op& op : c.bodies[0].ops)
    if (op.kind == OpKind::exp) op.kind = OpKind::sqr;
  EXPECT_NE(tiling_free_structure(a), tiling_free_structure(c));
  // An operand changed.
  Graph d = a;
  std::swap(d.ops[3].inputs[1], d.ops[3].inputs[2]);
  EXPECT_NE(tiling_free_structure(a), tiling_free_structure(d));
}

TEST(Retile, ConfigOfReadsTheBlockGraphsConfiguration) {
  const Graph g = small_gqa_split_kv(8, 2);
  const KernelConfig c = config_of(g.bodies[0]);
  EXPECT_EQ(c.grid, g.bodies[0].grid);
  EXPECT_EQ(c.forloop, 4);
  for (const Op& op : g.bodies[0].ops)
    if (op.kind == OpKind::input_iterator) {
      EXPECT_EQ(c.imaps[static_cast<size_t>(op.attrs.io_index)], op.attrs.imap);
      EXPECT_EQ(c.fmaps[static_cast<size_t>(op.attrs.io_index)], op.attrs.fmap);
    }
  EXPECT_EQ(c.imaps[3], (std::array<int8_t, 3>{kPhi, kPhi, kPhi}));  // past the operands: φ
}

TEST(Retile, FindsEveryTilingOfTheStructureTheBlockSearchFinds) {
  // The small RMSNorm + projection in one kernel: every candidate the block tasks of (X, G, W)
  // find, with no bound. Retiling one of a structure must find all the others of that structure.
  const Graph program = parse_program(search_testing::kRmsNormSmall);
  SearchOptions options;
  options.max_kernel_ops = 1;
  options.max_graph_kernels = 1;
  options.max_block_ops = 10;
  SearchContext ctx(program, options);
  Generator gen(ctx);
  const std::atomic<bool> stop{false};
  std::map<std::string, std::vector<FoundCandidate>> by_structure;
  for (FoundCandidate& c :
       testing::run_block_tasks(ctx, *ctx.root().prefix, {TensorId(0), TensorId(1), TensorId(2)}).candidates)
    by_structure[tiling_free_structure(c.graph)].push_back(std::move(c));
  ASSERT_FALSE(by_structure.empty());
  const std::vector<FoundCandidate>* most = nullptr;
  for (const auto& [key, group] : by_structure)
    if (!most || group.size() > most->size()) most = &group;
  ASSERT_GT(most->size(), 2u) << "the test wants a structure the search found under several tilings";

  RetileStats stats;
  const std::vector<FoundCandidate> found = retile(ctx, gen, most->back(), stop, stats);
  std::set<std::string> retiled;
  for (const FoundCandidate& c : found) {
    retiled.insert(to_json(c.graph));
    EXPECT_EQ(tiling_free_structure(c.graph), tiling_free_structure(most->back().graph));
    EXPECT_FALSE(validate(c.graph, options.target).has_value()) << to_json(c.graph);
    EXPECT_DOUBLE_EQ(c.estimated_us, rank_estimate_us(c.graph, ctx.gpu()));
    EXPECT_EQ(c.path, most->back().path);
  }
  EXPECT_EQ(retiled.count(to_json(most->back().graph)), 0u) << "the seed itself is not returned";
  for (size_t i = 0; i + 1 < most->size(); ++i)
    EXPECT_EQ(retiled.count(to_json((*most)[i].graph)), 1u) << "a tiling the block search found:\n"
                                                            << to_json((*most)[i].graph);
  EXPECT_EQ(stats.complete, static_cast<int64_t>(found.size()));
  EXPECT_GE(stats.rebuilt, stats.complete);
  const auto root = std::make_shared<const Graph>(*ctx.root().prefix);
  const size_t configs = gen.configs_for(root, {TensorId(0), TensorId(1), TensorId(2)})->configs.size();
  EXPECT_GE(stats.configs, static_cast<int64_t>(configs) - 1);
  EXPECT_FALSE(stats.stopped);
  expect_equivalent(program, found, 16);
}

TEST(Retile, AnEpilogueWhoseOperandAnotherLoopWalksDoesNotFit) {
  // O = Y·W / sqrt(Σ X²): a kernel whose loop walks X's columns accumulates Σ X² and divides
  // Y·W, computed from tiles loaded once, by it after the loop (an epilogue). Under a loop that
  // walks Y's columns (and W's rows) instead, Y·W changes with the iteration and may not meet the
  // accumulated sum: the retiled kernel does not fit, and nothing is closed.
  const Graph program = parse_program(
      "input X[4, 64]\ninput Y[4, 32]\ninput W[32, 16]\nO = div(matmul(Y, W), sqrt(sum(sqr(X), dim=1)))\noutput O\n");
  SearchContext ctx(program, SearchOptions{});
  Generator gen(ctx);
  const auto root = std::make_shared<const Graph>(*ctx.root().prefix);
  const std::vector<TensorId> operands{TensorId(0), TensorId(1), TensorId(2)};
  Graph body =
      make_block_graph({root->type(operands[0]), root->type(operands[1]), root->type(operands[2])}, Dim3{1, 1, 1}, 4);
  const TensorId xt = body.add(OpKind::input_iterator, {}, attrs::iterator(0, {kPhi, kPhi, kPhi}, 1));
  const TensorId yt = body.add(OpKind::input_iterator, {}, attrs::iterator(1, {kPhi, kPhi, kPhi}, kPhi));
  const TensorId wt = body.add(OpKind::input_iterator, {}, attrs::iterator(2, {kPhi, kPhi, kPhi}, kPhi));
  const TensorId mm = body.add(OpKind::matmul, {yt, wt});
  const TensorId ssq = body.add(OpKind::accum, {body.add(OpKind::sum, {body.add(OpKind::sqr, {xt})}, attrs::sum(1))},
                                attrs::accum(kPhi));
  body.add(OpKind::output_saver, {body.add(OpKind::div, {mm, body.add(OpKind::sqrt, {ssq})})},
           attrs::saver(0, {kPhi, kPhi, kPhi}));
  const KernelConfig own = config_of(body);
  const std::vector<Graph> same = gen.retile_kernel(root, operands, own, body);
  ASSERT_FALSE(same.empty()) << "the epilogue closes under its own configuration";
  for (Graph g : same) {  // the kernel graph with its kernel's result as the program's output
    g.mark_output(g.ops.back().outputs[0], "O");
    EXPECT_FALSE(validate(g).has_value()) << validate(g)->str();
  }
  KernelConfig other = own;
  other.fmaps[0] = kPhi;
  other.fmaps[1] = 1;
  other.fmaps[2] = 0;
  EXPECT_TRUE(gen.retile_kernel(root, operands, other, body).empty());
}

TEST(Retile, ChoosesTheNextKernelAgainForEachTilingOfTheFirst) {
  // The split-keys GQA: kernel 1 stacks its blocks' partials, one slot per key slice, and kernel
  // 2's loop walks the slots. Retiling kernel 1 to fewer slices changes the stack, so kernel 2
  // must be tiled again; a 3-D grid that also splits the queries keeps it.
  const Graph program = parse_program(kSmallGqa);
  SearchContext ctx(program, SearchOptions{});
  Generator gen(ctx);
  const Graph seed_graph = small_gqa_split_kv(8, 1);
  const FoundCandidate seed = seed_of(seed_graph, ctx);
  const std::atomic<bool> stop{false};
  RetileStats stats;
  const std::vector<FoundCandidate> found = retile(ctx, gen, seed, stop, stats);
  ASSERT_FALSE(found.empty());
  const Graph split_queries = small_gqa_split_kv(8, 2);
  bool has_split_queries = false, has_fewer_slices = false, kernel2_retiled = false;
  for (const FoundCandidate& c : found) {
    ASSERT_EQ(c.graph.bodies.size(), 2u);
    EXPECT_NE(to_json(c.graph), to_json(seed_graph));
    EXPECT_EQ(tiling_free_structure(c.graph), tiling_free_structure(seed_graph));
    has_split_queries |= c.graph.bodies[0] == split_queries.bodies[0];
    const Graph& k1 = c.graph.bodies[0];
    const Graph& k2 = c.graph.bodies[1];
    // The key slices: the grid axis that splits K's keys (dim 2).
    int64_t slices = 1;
    for (const Op& op : k1.ops)
      if (op.kind == OpKind::input_iterator && op.attrs.io_index == 1)
        for (int axis = 0; axis < 3; ++axis)
          if (op.attrs.imap[static_cast<size_t>(axis)] == 2) slices = k1.grid[axis];
    if (slices < 8) has_fewer_slices = true;
    // Kernel 2's loop reads one slot of the stack per iteration: one per slice.
    if (slices > 1) {
      EXPECT_EQ(k2.forloop, slices) << to_json(c.graph);
    }
    kernel2_retiled |= !(k2 == seed_graph.bodies[1]);
  }
  EXPECT_TRUE(has_split_queries) << "the 3-D grid (8, 2, 2) is a tiling of kernel 1";
  EXPECT_TRUE(has_fewer_slices);
  EXPECT_TRUE(kernel2_retiled);
  expect_equivalent(program, found, 24);
}

TEST(Retile, StopsWhenAsked) {
  const Graph program = parse_program(kSmallGqa);
  SearchContext ctx(program, SearchOptions{});
  Generator gen(ctx);
  const std::atomic<bool> stop{true};
  RetileStats stats;
  EXPECT_TRUE(retile(ctx, gen, seed_of(small_gqa_split_kv(8, 1), ctx), stop, stats).empty());
  EXPECT_TRUE(stats.stopped);
  EXPECT_EQ(stats.configs, 0);
}

}  // namespace
}  // namespace mugraph::search_detail
