// The generator's building blocks (src/search/generator.h): the candidate lists of graph-defined
// kernel configurations and the canonical op rank.
#include "generator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <set>

#include "block_tasks.h"
#include "example_graphs.h"
#include "json_reader.h"
#include "mugraph/cost_model.h"
#include "mugraph/frontend.h"
#include "mugraph/json.h"
#include "mugraph/printer.h"
#include "mugraph/validate.h"
#include "operand_rules.h"
#include "retile.h"
#include "search_fixtures.h"

namespace mugraph::search_detail {
namespace {

/// X[4, 64], W[64, 64] as kernel-graph inputs.
Graph xw() {
  Graph g;
  g.add_input("X", {4, 64}, DType::f16);
  g.add_input("W", {64, 64}, DType::f16);
  return g;
}

TEST(KernelConfigs, EveryConfigurationSplitsEvenlyAndUsesEveryAxis) {
  Graph g = xw();
  std::vector<TensorId> inputs{TensorId(0), TensorId(1)};
  std::vector<KernelConfig> configs = kernel_configs(g, inputs);
  ASSERT_FALSE(configs.empty());
  const std::set<int64_t> forloops{1, 4, 16, 64};
  for (const KernelConfig& c : configs) {
    for (size_t i = inputs.size(); i < c.imaps.size(); ++i) {
      EXPECT_EQ(c.imaps[i], (std::array<int8_t, 3>{kPhi, kPhi, kPhi})) << "slot " << i << " maps no operand";
      EXPECT_EQ(c.fmaps[i], kPhi) << "slot " << i << " maps no operand";
    }
    EXPECT_TRUE(forloops.count(c.forloop)) << c.forloop;
    EXPECT_GE(c.grid.x, 1);
    EXPECT_LE(c.grid.volume(), 4096);
    bool x_used = c.grid.x == 1, y_used = c.grid.y == 1, f_used = c.forloop == 1;
    for (size_t i = 0; i < inputs.size(); ++i) {
      Shape tile = g.type(inputs[i]).shape;
      const auto& imap = c.imaps[i];
      for (int ax = 0; ax < 3; ++ax) {
        if (imap[static_cast<size_t>(ax)] == kPhi) continue;
        int d = imap[static_cast<size_t>(ax)];
        ASSERT_LT(d, tile.rank());
        ASSERT_GT(c.grid[ax], 1) << "a grid axis of size 1 maps no dim";
        ASSERT_EQ(tile[d] % c.grid[ax], 0);
        tile[d] /= c.grid[ax];
      }
      if (imap[0] != kPhi && imap[1] != kPhi) {
        EXPECT_NE(imap[0], imap[1]);
      }
      EXPECT_EQ(imap[2], kPhi);
      if (c.fmaps[i] != kPhi) {
        ASSERT_GT(c.forloop, 1);
        ASSERT_EQ(tile[c.fmaps[i]] % c.forloop, 0);
      }
      x_used |= imap[0] != kPhi;
      y_used |= imap[1] != kPhi;
      f_used |= c.fmaps[i] != kPhi;
    }
    // Blocks that see the same data or iterations that load the same tiles only repeat work.
    EXPECT_TRUE(x_used && y_used && f_used);
  }
}

TEST(KernelConfigs, NoDuplicates) {
  Graph g = xw();
  std::vector<KernelConfig> configs = kernel_configs(g, {TensorId(0), TensorId(1)});
  for (size_t a = 0; a < configs.size(); ++a)
    for (size_t b = a + 1; b < configs.size(); ++b) EXPECT_FALSE(configs[a] == configs[b]) << a << " " << b;
}

TEST(KernelConfigs, ContainsTheRmsNormTilings) {
  Graph g = xw();
  std::vector<KernelConfig> configs = kernel_configs(g, {TensorId(0), TensorId(1)});
  auto has = [&](Dim3 grid, int64_t loop, std::array<int8_t, 3> ix, int8_t fx, std::array<int8_t, 3> iw, int8_t fw) {
    return std::any_of(configs.begin(), configs.end(), [&](const KernelConfig& c) {
      return c.grid == grid && c.forloop == loop && c.imaps[0] == ix && c.fmaps[0] == fx && c.imaps[1] == iw &&
             c.fmaps[1] == fw;
    });
  };
  constexpr int8_t P = kPhi;
  // One block, no loop: the whole problem in one block.
  EXPECT_TRUE(has(Dim3{1, 1, 1}, 1, {P, P, P}, P, {P, P, P}, P));
  // W's columns over 8 blocks (tiles of 8), X whole (Figure 3b's grid).
  EXPECT_TRUE(has(Dim3{8, 1, 1}, 1, {P, P, P}, P, {1, P, P}, P));
  // ... and the hidden dim over a loop of 4: X split along dim 1, W along dim 0.
  EXPECT_TRUE(has(Dim3{8, 1, 1}, 4, {P, P, P}, 1, {1, P, P}, 0));
  // A grid that splits nothing is never generated.
  EXPECT_FALSE(has(Dim3{8, 1, 1}, 1, {P, P, P}, P, {P, P, P}, P));
}

TEST(KernelConfigs, BatchedInputsGetTwoDimensionalGrids) {
  Graph g;
  g.add_input("Q", {2, 16, 64}, DType::f16);
  g.add_input("K", {2, 64, 16}, DType::f16);
  std::vector<KernelConfig> configs = kernel_configs(g, {TensorId(0), TensorId(1)});
  bool two_d = false;
  for (const KernelConfig& c : configs) two_d |= c.grid.y == 2;
  EXPECT_TRUE(two_d);
}

TEST(KernelConfigs, BatchedInputsGetThreeDimensionalGrids) {
  // Attention over 2 heads: (keys split, heads, queries split) grids, each grid once (z ≤ x),
  // and with as many blocks along x as along z only the one whose x splits the larger index.
  Graph g;
  g.add_input("Q", {2, 16, 8}, DType::f16);
  g.add_input("K", {2, 8, 64}, DType::f16);
  OperandIndexUse use;
  use.contracted = {{false, false, true}, {false, true, false}};
  use.index = {{0, 1, 2}, {0, 2, 3}};  // heads, queries, head dim, keys
  use.stack_slot = {{0, 0, 0}, {0, 0, 0}};
  std::vector<KernelConfig> configs = kernel_configs(g, {TensorId(0), TensorId(1)}, &use);
  constexpr int8_t P = kPhi;
  auto has = [&](Dim3 grid, std::array<int8_t, 3> iq, std::array<int8_t, 3> ik) {
    return std::any_of(configs.begin(), configs.end(), [&](const KernelConfig& c) {
      return c.grid == grid && c.forloop == 1 && c.imaps[0] == iq && c.imaps[1] == ik;
    });
  };
  // 8 key slices × 2 heads × 2 query slices.
  EXPECT_TRUE(has(Dim3{8, 2, 2}, {P, 0, 1}, {2, 0, P}));
  // The same blocks with the axes' roles swapped is not generated again.
  EXPECT_FALSE(has(Dim3{2, 2, 8}, {1, 0, P}, {P, 0, 2}));
  // Equal counts along x and z: x takes the keys (index 3 > 1), never the queries.
  EXPECT_TRUE(has(Dim3{2, 2, 2}, {P, 0, 1}, {2, 0, P}));
  EXPECT_FALSE(has(Dim3{2, 2, 2}, {1, 0, P}, {P, 0, 2}));
  for (const KernelConfig& c : configs) {
    if (c.grid.z == 1) continue;
    EXPECT_LE(c.grid.z, c.grid.x);
    EXPECT_EQ(c.grid.y, 2) << "z grids are (x, heads, z)";
    bool z_used = false;
    for (size_t i = 0; i < 2; ++i) {
      z_used |= c.imaps[i][2] != kPhi;
      EXPECT_EQ(c.imaps[i][1], 0) << "y splits every operand's heads";
    }
    EXPECT_TRUE(z_used) << "a z axis that splits nothing only repeats work";
  }
}

TEST(KernelConfigs, LeadingUnitDimsLeaveTheGridsOfTheBatchDimAfterThem) {
  // PyTorch's [batch 1, heads, queries, head dim]: the heads are the batch dim the (x, heads, z)
  // grids split, as they are without the unit dim.
  Graph g;
  g.add_input("Q", {1, 2, 16, 8}, DType::f16);
  g.add_input("K", {1, 2, 8, 64}, DType::f16);
  OperandIndexUse use;
  use.contracted = {{false, false, false, true}, {false, false, true, false}};
  use.index = {{0, 1, 2, 3}, {0, 1, 3, 4}};  // batch, heads, queries, head dim, keys
  use.stack_slot = {{0, 0, 0, 0}, {0, 0, 0, 0}};
  std::vector<KernelConfig> configs = kernel_configs(g, {TensorId(0), TensorId(1)}, &use);
  constexpr int8_t P = kPhi;
  EXPECT_TRUE(std::any_of(configs.begin(), configs.end(), [&](const KernelConfig& c) {
    return c.grid == Dim3{8, 2, 2} && c.imaps[0] == std::array<int8_t, 3>{P, 1, 2} &&
           c.imaps[1] == std::array<int8_t, 3>{3, 1, P};
  }));
  for (const KernelConfig& c : configs) {
    if (c.grid.z == 1) continue;
    for (size_t i = 0; i < 2; ++i) EXPECT_EQ(c.imaps[i][1], 1) << "y splits every operand's heads";
  }
}

TEST(OpRank, OrdersByLargestOperandThenKind) {
  Graph g = parse_program("input X[4, 64]\ninput G[64]\nA = exp(X)\nB = mul(X, G)\nC = exp(G)\nD = sqr(X)\noutput B\n");
  auto rank_of = [&](int op) { return op_rank(g, g.ops[static_cast<size_t>(op)]); };
  // Ops: 0 X, 1 G, 2 exp(X), 3 mul(X, G), 4 exp(G), 5 sqr(X).
  OpRank exp_x = rank_of(2), mul_xg = rank_of(3), exp_g = rank_of(4), sqr_x = rank_of(5);
  EXPECT_EQ(exp_x.max_input, 0);
  EXPECT_EQ(mul_xg.max_input, 1);
  EXPECT_LT(exp_x, mul_xg);  // reads only X
  EXPECT_LT(exp_x, exp_g);
  EXPECT_NE(exp_x, sqr_x);                 // same operand, other kind
  EXPECT_EQ(exp_x, op_rank(g, g.ops[2]));  // a function of the op
}

TEST(OpRank, AttributesSeparateOpsOfOneKindOnTheSameOperands) {
  Graph g =
      parse_program("input X[4, 64]\nA = sum(X, dim=0)\nB = sum(X, dim=1)\nC = mul(A, 2)\nD = mul(A, 3)\noutput B\n");
  EXPECT_NE(op_rank(g, g.ops[1]), op_rank(g, g.ops[2]));
  EXPECT_NE(op_rank(g, g.ops[3]), op_rank(g, g.ops[4]));
  EXPECT_EQ(op_rank(g, g.ops[1]).kind, op_rank(g, g.ops[2]).kind);
}

TEST(OpRank, FieldsAnOpKindDoesNotUseLeaveItsRankAlone) {
  // The rank hashes the fields the kind uses (attr_fields) and takes the others as their
  // defaults, as used_attrs would leave them: ops that differ only there are one op.
  Graph g = parse_program("input X[4, 64]\nA = exp(X)\nB = sum(X, dim=1)\nC = mul(X, 2)\noutput B\n");
  for (size_t i = 1; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    Op noisy = op;
    OpAttrs& a = noisy.attrs;
    const uint32_t f = attr_fields(op.kind);
    if (!(f & (kAttrDim | kAttrAccum))) a.dim = 5;
    if (!(f & kAttrTo)) a.to = 9;
    if (!(f & kAttrTimes)) a.times = 3;
    if (!(f & (kAttrInput | kAttrOutput))) a.io_index = 4;
    if (!(f & kAttrInMaps)) a.imap = {0, 1, 1}, a.fmap = 1;
    if (!(f & kAttrOMap)) a.omap = {1, 0, 0};
    if (!(f & kAttrBody)) a.body = 0;
    if (!(f & kAttrScalar)) a.has_scalar = true, a.scalar = Scalar{7, 0}, a.scalar_pos = 0;
    EXPECT_EQ(op_rank(g, noisy), op_rank(g, op)) << op_name(op.kind);
    EXPECT_EQ(op_rank(g, noisy), op_rank(g, Op{op.kind, op.inputs, op.outputs, used_attrs(op.kind, noisy.attrs)}));
  }
  // Fields it does use still count.
  Op other = g.ops[2];
  other.attrs.dim = 0;
  EXPECT_NE(op_rank(g, other), op_rank(g, g.ops[2]));
  other = g.ops[3];
  other.attrs.scalar = Scalar{3, 0};
  EXPECT_NE(op_rank(g, other), op_rank(g, g.ops[3]));
}

/// X[4, 64] · W[64, 64]: X's dims range over rows (free) and k (contracted), W's over k and
/// columns (free).
OperandIndexUse xw_use() {
  OperandIndexUse use;
  use.contracted = {{false, true}, {true, false}};
  use.index = {{0, 1}, {1, 2}};
  return use;
}

TEST(KernelConfigs, TheLoopSplitsOnlyContractedIndices) {
  Graph g = xw();
  OperandIndexUse use = xw_use();
  std::vector<KernelConfig> configs = kernel_configs(g, {TensorId(0), TensorId(1)}, &use);
  ASSERT_FALSE(configs.empty());
  bool some_loop = false;
  for (const KernelConfig& c : configs) {
    EXPECT_TRUE(c.fmaps[0] == kPhi || c.fmaps[0] == 1) << "X's rows are never summed";
    EXPECT_TRUE(c.fmaps[1] == kPhi || c.fmaps[1] == 0) << "W's columns are never summed";
    some_loop |= c.forloop > 1;
  }
  EXPECT_TRUE(some_loop);
  // Without the index information the loop may split anything.
  bool loop_over_rows = false;
  for (const KernelConfig& c : kernel_configs(g, {TensorId(0), TensorId(1)})) loop_over_rows |= c.fmaps[0] == 0;
  EXPECT_TRUE(loop_over_rows);
}

TEST(KernelConfigs, SmallFreeDimsGetOneRowPerBlock) {
  // nTrans: 8 rows of 4096, normalized per row. Tile extents 8..256 give 1 block over the rows
  // (and 16..512 over the summed columns); a row per block needs a tile extent of 1.
  Graph g;
  g.add_input("H", {8, 4096}, DType::f16);
  OperandIndexUse use;
  use.contracted = {{false, true}};
  use.index = {{0, 1}};
  std::set<int64_t> grids;
  for (const KernelConfig& c : kernel_configs(g, {TensorId(0)}, &use))
    if (c.imaps[0][0] == 0) grids.insert(c.grid.x);
  EXPECT_EQ(grids, (std::set<int64_t>{2, 4, 8}));
  std::set<int64_t> plain;
  for (const KernelConfig& c : kernel_configs(g, {TensorId(0)}))
    if (c.imaps[0][0] == 0) plain.insert(c.grid.x);
  EXPECT_TRUE(plain.empty());
}

TEST(KernelConfigs, EachAxisSplitsOneIndex) {
  Graph g = xw();
  OperandIndexUse use = xw_use();
  std::vector<KernelConfig> configs = kernel_configs(g, {TensorId(0), TensorId(1)}, &use);
  for (const KernelConfig& c : configs) {
    for (int ax = 0; ax < 2; ++ax) {
      const int8_t a = c.imaps[0][static_cast<size_t>(ax)], b = c.imaps[1][static_cast<size_t>(ax)];
      if (a != kPhi && b != kPhi) {
        EXPECT_EQ(use.index[0][static_cast<size_t>(a)], use.index[1][static_cast<size_t>(b)]);
      }
    }
    if (c.fmaps[0] != kPhi && c.fmaps[1] != kPhi) {
      EXPECT_EQ(use.index[0][static_cast<size_t>(c.fmaps[0])], use.index[1][static_cast<size_t>(c.fmaps[1])]);
    }
  }
  // The plain lists have blocks that pair X's rows with W's columns (only the diagonal).
  bool diagonal = false;
  for (const KernelConfig& c : kernel_configs(g, {TensorId(0), TensorId(1)}))
    diagonal |= c.imaps[0][0] == 0 && c.imaps[1][0] == 1;
  EXPECT_TRUE(diagonal);
}

TEST(KernelConfigs, AGridAxisMaySplitIndicesNoProgramTensorHoldsTogether) {
  // X[8, 64], WQ[64, 32], WK[64, 16]: Q = X·WQ and K = X·WK. Indices 0 rows, 1 hidden, 2 Q's
  // columns, 3 K's columns; 2 and 3 are apart (no tensor holds both).
  Graph g;
  g.add_input("X", {8, 64}, DType::f16);
  g.add_input("WQ", {64, 32}, DType::f16);
  g.add_input("WK", {64, 16}, DType::f16);
  OperandIndexUse use;
  use.contracted = {{false, true}, {true, false}, {true, false}};
  use.index = {{0, 1}, {1, 2}, {1, 3}};
  const std::vector<TensorId> operands{TensorId(0), TensorId(1), TensorId(2)};
  // Blocks that each take a slice of Q's and of K's columns: the one-kernel projections.
  auto both_columns = [](const KernelConfig& c) { return c.imaps[1][0] == 1 && c.imaps[2][0] == 1; };
  std::vector<KernelConfig> strict = kernel_configs(g, operands, &use);
  EXPECT_FALSE(std::any_of(strict.begin(), strict.end(), both_columns));
  use.apart = {0, 0, uint32_t{1} << 3, uint32_t{1} << 2};
  std::vector<KernelConfig> configs = kernel_configs(g, operands, &use);
  EXPECT_TRUE(std::any_of(configs.begin(), configs.end(), [&](const KernelConfig& c) {
    return both_columns(c) && c.grid == Dim3{4, 1, 1} && c.fmaps[0] == 1 && c.fmaps[1] == 0 && c.fmaps[2] == 0;
  }));
  for (const KernelConfig& c : configs) {
    // Indices that meet still never share an axis: X's rows with either's columns.
    if (c.imaps[0][0] == 0) {
      EXPECT_TRUE(c.imaps[1][0] == kPhi && c.imaps[2][0] == kPhi);
    }
  }
  EXPECT_GT(configs.size(), strict.size());
}

TEST(SearchContext, RootHoldsTheProgramsInputs) {
  Graph program = parse_program("input X[4, 64]\ninput G[64]\nO = mul(exp(X), G)\noutput O\n");
  SearchContext ctx(program, SearchOptions{});
  Task root = ctx.root();
  EXPECT_FALSE(root.is_block());
  EXPECT_TRUE(root.path.empty());
  // The kinds the search may use are the program's.
  std::vector<OpKind> kinds = ctx.kinds();
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), OpKind::exp), kinds.end());
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), OpKind::mul), kinds.end());
  EXPECT_EQ(std::find(kinds.begin(), kinds.end(), OpKind::matmul), kinds.end());
  EXPECT_FALSE(ctx.has_self_operand_op(OpKind::mul));
  EXPECT_FALSE(ctx.uses_concat());
  EXPECT_EQ(ctx.targets().size(), 1u);
}

TEST(SearchContext, SelfOperandOpsOnlyOfTheKindsTheProgramHas) {
  // add(x, x) is 2x: only a program that adds a value to itself can need it.
  Graph twice = parse_program("input X[4, 64]\nY = exp(X)\nZ = exp(X)\nO = add(Y, Z)\noutput O\n");
  SearchContext a(twice, SearchOptions{});
  EXPECT_TRUE(a.has_self_operand_op(OpKind::add));  // Y and Z are one value
  EXPECT_FALSE(a.has_self_operand_op(OpKind::mul));
  Graph other = parse_program("input X[4, 64]\ninput G[64]\nO = add(X, G)\noutput O\n");
  EXPECT_FALSE(SearchContext(other, SearchOptions{}).has_self_operand_op(OpKind::add));
}

TEST(SearchContext, ConcatOnlyWhereTheLoraRewriteApplies) {
  Graph lora = parse_program(R"(
input X[4, 64]
input W[64, 64]
input A[64, 16]
input B[16, 64]
O = add(matmul(X, W), matmul(matmul(X, A), B))
output O
)");
  EXPECT_TRUE(SearchContext(lora, SearchOptions{}).uses_concat());
  // A scaled adapter still adds two contractions.
  Graph scaled = parse_program(R"(
input X[4, 64]
input W[64, 64]
input A[64, 16]
input B[16, 64]
O = add(matmul(X, W), mul(matmul(matmul(X, A), B), 0.5))
output O
)");
  EXPECT_TRUE(SearchContext(scaled, SearchOptions{}).uses_concat());
  // Two matmuls and an add, but no sum of two contractions: the add of an RMSNorm's ε (a
  // scalar) before a gated MLP, and a residual add of an input.
  Graph norm_mlp = parse_program(search_testing::kRmsNormGatedMlpSmall);
  EXPECT_FALSE(SearchContext(norm_mlp, SearchOptions{}).uses_concat());
  Graph residual = parse_program(R"(
input X[8, 64]
input W1[64, 128]
input W2[128, 64]
O = add(X, matmul(silu(matmul(X, W1)), W2))
output O
)");
  EXPECT_FALSE(SearchContext(residual, SearchOptions{}).uses_concat());
}

using search_testing::kSmallGqa;
using search_testing::kSmallRmsNormLinear;
using search_testing::small_model_bound_options;
using testing::run_block_tasks;

TEST(Generator, BlockTasksShareTheirKernelTasksConfigurationsAndRunAsIfResumed) {
  // A kernel task hands each operand set's configurations to all its chunk tasks; a task read
  // from a checkpoint has none and computes them again. Both must run the same configurations
  // (with the model bound: in the same order, with the same floors).
  Graph program = parse_program(kSmallGqa);
  SearchOptions options;
  options.cost_bound = CostBound::model;
  // Both runs grow their block graphs (with the cache the second would replay the first's, and
  // count fewer states).
  options.block_cache_bytes = 0;
  SearchContext ctx(program, options);
  Generator gen(ctx);
  std::atomic<bool> stop{false};
  TaskOutput root;
  ASSERT_TRUE(gen.run(ctx.root(), root, stop));
  std::map<std::vector<TensorId>, const ConfigList*> lists;
  int block_tasks = 0, compared = 0;
  for (const Task& t : root.children) {
    if (!t.is_block()) continue;
    ++block_tasks;
    ASSERT_NE(t.configs, nullptr);
    EXPECT_TRUE(t.configs->by_floor);
    auto [it, fresh] = lists.emplace(t.operands, t.configs.get());
    EXPECT_EQ(it->second, t.configs.get()) << "chunks of one operand set share one list";
    if (t.finish_only || compared >= 6) continue;
    ++compared;
    Task resumed = t;
    resumed.configs.reset();
    TaskOutput with, without;
    Generator fresh_gen(ctx);  // no cached list
    ASSERT_TRUE(gen.run(t, with, stop));
    ASSERT_TRUE(fresh_gen.run(resumed, without, stop));
    ASSERT_EQ(with.children.size(), without.children.size());
    for (size_t i = 0; i < with.children.size(); ++i) EXPECT_EQ(*with.children[i].prefix, *without.children[i].prefix);
    ASSERT_EQ(with.candidates.size(), without.candidates.size());
    for (size_t i = 0; i < with.candidates.size(); ++i)
      EXPECT_EQ(with.candidates[i].graph, without.candidates[i].graph);
    EXPECT_EQ(with.stats.states, without.stats.states);
  }
  EXPECT_GT(block_tasks, static_cast<int>(lists.size())) << "some operand set has more than one chunk";
  EXPECT_GT(compared, 0);
}

TEST(Generator, BlockTasksTellTheirStatesWhileTheyRun) {
  // A block task tells the context its states and prunings every 1024 states
  // (SearchContext::add_running), so that the progress line moves
  // during a long one; what it told is in published_states and published_pruned, for the driver
  // to take back when it counts the task's stats.
  // A LayerNorm: one kernel of many block ops, whose block tasks grow thousands of states each.
  Graph program = parse_program(R"(
input X[8, 256]
input G[256]
input B[256]
MU = div(sum(X, dim=1), 256)
C = sub(X, MU)
O = add(mul(div(C, sqrt(add(div(sum(sqr(C), dim=1), 256), 1e-5))), G), B)
output O
)");
  SearchOptions options;
  options.block_cache_bytes = 0;  // grown, not replayed
  SearchContext ctx(program, options);
  Generator gen(ctx);
  std::atomic<bool> stop{false};
  TaskOutput root;
  ASSERT_TRUE(gen.run(ctx.root(), root, stop));
  int64_t told = ctx.running_states(), told_pruned = ctx.running_pruned();
  EXPECT_EQ(told, root.published_states);
  EXPECT_EQ(told_pruned, root.published_pruned);
  int long_tasks = 0;
  std::deque<Task> tasks(root.children.begin(), root.children.end());
  for (int ran = 0; !tasks.empty() && ran < 400 && long_tasks == 0; ++ran) {
    Task t = std::move(tasks.front());
    tasks.pop_front();
    TaskOutput out;
    ASSERT_TRUE(gen.run(t, out, stop));
    EXPECT_LE(out.published_states, out.stats.states);
    EXPECT_EQ(ctx.running_states() - told, out.published_states);
    EXPECT_EQ(ctx.running_pruned() - told_pruned, out.published_pruned);
    EXPECT_LE(out.published_pruned, out.stats.total_pruned());
    told = ctx.running_states();
    told_pruned = ctx.running_pruned();
    if (t.is_block() && out.stats.states >= 2048) {
      ++long_tasks;
      EXPECT_GT(out.published_states, 0);
      EXPECT_GT(out.published_pruned, 0);
    }
    for (Task& c : out.children) tasks.push_back(std::move(c));
  }
  EXPECT_GT(long_tasks, 0) << "the test wants a block task of more than 2048 states";
}

TEST(Generator, ModelBoundMakesNoChunkItWouldSkipWhole) {
  // With the model bound a kernel task makes only the chunks whose first configuration is within
  // the bound (the lists are sorted by floor, and the bound only tightens). Every chunk it leaves
  // out must be one the block task would have skipped entirely.
  Graph program = parse_program(kSmallGqa);
  SearchOptions options;
  options.cost_bound = CostBound::model;
  SearchContext ctx(program, options);
  std::atomic<bool> stop{false};
  auto chunks = [&] {
    Generator gen(ctx);
    TaskOutput out;
    EXPECT_TRUE(gen.run(ctx.root(), out, stop));
    std::map<std::vector<TensorId>, int32_t> n;
    for (const Task& t : out.children)
      if (t.is_block() && !t.finish_only) n[t.operands] = std::max(n[t.operands], t.chunk + 1);
    return n;
  };
  const std::map<std::vector<TensorId>, int32_t> unbounded = chunks();
  // A bound halfway through the floors of the operand set with the most chunks.
  const auto most = std::max_element(unbounded.begin(), unbounded.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
  Generator probe(ctx);
  const Task root_task = ctx.root();
  const std::shared_ptr<const ConfigList> list = probe.configs_for(root_task.prefix, most->first);
  ASSERT_GT(most->second, 2);
  const Graph& root = *root_task.prefix;
  const std::vector<ExprId> root_exprs = expressions(root, ctx.exprs()).tensors;
  const bool finishes = probe.can_finish(root_exprs, most->first);
  int64_t later_bytes = 0;
  double unread_extra = 0;
  ctx.lower_bound(root, root_exprs, most->first, !finishes, &later_bytes, &unread_extra);
  // The full pass's floor (which the counted chunks are) counts a later kernel where a first
  // pass closes the kernels that finish the program.
  const bool full_pass_finishes = finishes && !gets_first_pass(options, root, finishes);
  ctx.set_bound_us(
      probe.model_rest_floor_us(root, later_bytes, full_pass_finishes, ctx.floor_extra_us(root), unread_extra) +
      list->floors[list->floors.size() / 2]);
  const std::map<std::vector<TensorId>, int32_t> bounded = chunks();
  int left_out = 0, kept = 0;
  Generator gen(ctx);
  for (const auto& [operands, n] : unbounded) {
    const int32_t made = bounded.count(operands) ? bounded.at(operands) : 0;
    kept += made;
    for (int32_t c = made; c < n; ++c) {
      ++left_out;
      Task t;
      t.prefix = ctx.root().prefix;
      t.operands = operands;
      t.chunk = c;
      TaskOutput out;
      ASSERT_TRUE(gen.run(t, out, stop));
      EXPECT_EQ(out.stats.states, 0) << "chunk " << c << " of a left-out operand set grew block graphs";
      EXPECT_TRUE(out.children.empty() && out.candidates.empty());
    }
  }
  EXPECT_GT(left_out, 0);
  EXPECT_GT(kept, 0);
}

TEST(Generator, TasksCarryTheirPrefixesFloorExtra) {
  // A task made by another carries its prefix's floor_extra_us, which the task would otherwise
  // compute again; it must be the same figure, in the bytes phase too (0).
  Graph program = parse_program(kSmallRmsNormLinear);
  for (CostBound bound : {CostBound::model, CostBound::bytes}) {
    SearchOptions options = small_model_bound_options();
    options.cost_bound = bound;
    SearchContext ctx(program, options);
    Generator gen(ctx);
    std::atomic<bool> stop{false};
    std::deque<Task> queue{ctx.root()};
    EXPECT_TRUE(std::isnan(queue.front().floor_extra_us));
    int checked = 0, nonzero = 0;
    while (!queue.empty() && checked < 3000) {
      Task t = std::move(queue.front());
      queue.pop_front();
      if (!std::isnan(t.floor_extra_us)) {
        ++checked;
        nonzero += t.floor_extra_us > 0;
        ASSERT_EQ(t.floor_extra_us, ctx.floor_extra_us(*t.prefix)) << to_json(*t.prefix);
      }
      TaskOutput out;
      ASSERT_TRUE(gen.run(t, out, stop));
      for (Task& c : out.children) queue.push_back(std::move(c));
    }
    EXPECT_GT(checked, 1000);
    if (bound == CostBound::model)
      EXPECT_GT(nonzero, 0);
    else
      EXPECT_EQ(nonzero, 0);
  }
}

TEST(Generator, TasksKnowThePrefixTheirsExtends) {
  // Checkpoints write a prefix as the one it extends plus what it appends: a child's parent must
  // be its maker's prefix (and that one's parent), a block task's its kernel task's, and the
  // prefix must begin with the parent's ops.
  Graph program = parse_program(kSmallRmsNormLinear);
  SearchContext ctx(program, small_model_bound_options());
  Generator gen(ctx);
  std::atomic<bool> stop{false};
  std::deque<Task> queue{ctx.root()};
  EXPECT_EQ(queue.front().parent, nullptr);
  int extended = 0, depth_two = 0;
  for (int tasks = 0; !queue.empty() && tasks < 3000; ++tasks) {
    Task t = std::move(queue.front());
    queue.pop_front();
    TaskOutput out;
    ASSERT_TRUE(gen.run(t, out, stop));
    for (Task& c : out.children) {
      if (c.prefix == t.prefix) {
        EXPECT_EQ(c.parent, t.parent) << "a task on its maker's prefix extends what that one does";
      } else {
        ++extended;
        ASSERT_NE(c.parent, nullptr);
        EXPECT_EQ(c.parent->prefix, t.prefix);
        EXPECT_EQ(c.parent->parent, t.parent);
        depth_two += c.parent->parent != nullptr;
        const Graph& base = *t.prefix;
        ASSERT_GT(c.prefix->ops.size(), base.ops.size());
        for (size_t i = 0; i < base.ops.size(); ++i) ASSERT_EQ(c.prefix->ops[i], base.ops[i]);
        // Its checkpoint form reads back as the same graph.
        EXPECT_TRUE(json_reading::extended_from_value(base, json_reading::extension_value(*c.prefix, base), "", "") ==
                    *c.prefix);
      }
      queue.push_back(std::move(c));
    }
  }
  EXPECT_GT(extended, 100);
  EXPECT_GT(depth_two, 0);
}

TEST(Generator, TaskFloorsAreLowerBoundsOfEveryCandidateBelowThem) {
  // The model bound's search runs tasks by their floors and drops those whose floor is beyond
  // the bound, so a floor must never exceed the estimate of a candidate in its subtree. Run the
  // tree (no bound, the first few thousand tasks breadth first) and check every candidate
  // against the largest floor on its path.
  Graph program = parse_program(kSmallRmsNormLinear);
  SearchContext ctx(program, small_model_bound_options());
  Generator gen(ctx);
  std::atomic<bool> stop{false};
  std::deque<std::pair<Task, double>> queue;  // a task, the largest floor on its path
  queue.emplace_back(ctx.root(), 0.0);
  int tasks = 0, candidates = 0, chained = 0, later_kernels = 0;
  while (!queue.empty() && tasks < 3000) {
    auto [task, above] = std::move(queue.front());
    queue.pop_front();
    ++tasks;
    const double floor = std::max(above, task.floor_us);
    TaskOutput out;
    ASSERT_TRUE(gen.run(task, out, stop));
    for (const FoundCandidate& c : out.candidates) {
      ++candidates;
      later_kernels += c.metrics.kernels > 1;
      EXPECT_GE(c.estimated_us, floor - 1e-9) << "a candidate below its task's floor:\n" << to_json(c.graph);
    }
    for (Task& child : out.children) {
      chained += child.is_block() && child.chunk > 0 && task.is_block();
      queue.emplace_back(std::move(child), floor);
    }
  }
  EXPECT_GT(candidates, 20);
  EXPECT_GT(later_kernels, 0) << "no candidate of two kernels or more was reached";
  EXPECT_GT(chained, 0) << "no chunk was made by the chunk before it";
}

TEST(Generator, InputsLeftToPreDefinedKernelsRaiseTheFloor) {
  // Once the last graph-defined kernel is placed, an input it leaves unread goes to pre-defined
  // kernels: W to cuBLAS at its share of the bandwidth, or to an element-wise kernel that writes
  // as much as it reads. The floors of the block tasks of a last kernel reading X and G count it.
  const Graph program = parse_program(
      "input X[2, 64]\ninput G[64]\ninput W[64, 1024]\n"
      "Y = div(mul(X, G), sqrt(div(sum(sqr(X), dim=1), 64)))\nO = matmul(Y, W)\noutput O\n");
  const TensorId x(0), g(1), w(2);
  auto first_chunk_floors = [&](int max_graph_kernels, double* unread_extra) {
    SearchOptions options = small_model_bound_options();
    options.max_graph_kernels = max_graph_kernels;
    SearchContext ctx(program, options);
    Generator gen(ctx);
    std::atomic<bool> stop{false};
    TaskOutput out;
    EXPECT_TRUE(gen.run(ctx.root(), out, stop));
    std::map<std::vector<TensorId>, double> floors;
    for (const Task& t : out.children)
      if (t.is_block() && !t.finish_only && t.chunk == 0) floors[t.operands] = t.floor_us;
    *unread_extra = ctx.unread_inputs_extra_us(*ctx.root().prefix, {x, g});
    // X has as many elements as O: an element-wise kernel could read it and write O, which the
    // bound counts already. Read, W costs nothing more.
    EXPECT_EQ(ctx.unread_inputs_extra_us(*ctx.root().prefix, {g, w}), 0);
    EXPECT_EQ(ctx.unread_inputs_extra_us(*ctx.root().prefix, {x, g, w}), 0);
    return floors;
  };
  double extra = 0, same = 0;
  const std::map<std::vector<TensorId>, double> last = first_chunk_floors(1, &extra);
  const std::map<std::vector<TensorId>, double> not_last = first_chunk_floors(2, &same);
  const GpuSpec& gpu = gpu_spec("h200");
  EXPECT_DOUBLE_EQ(extra, 64.0 * 1024 * 2 * std::min(1 / gpu.cublas_dram_share - 1, 1.0) / gpu.dram_bytes_per_us);
  EXPECT_EQ(same, extra);  // what the context says; only a last kernel's floors count it
  ASSERT_TRUE(last.count({x, g}) && not_last.count({x, g}));
  EXPECT_NEAR(last.at({x, g}) - not_last.at({x, g}), extra, 1e-9);
  ASSERT_TRUE(last.count({x, g, w}) && not_last.count({x, g, w}));
  EXPECT_DOUBLE_EQ(last.at({x, g, w}), not_last.at({x, g, w}));
}

TEST(Generator, AnInputOnlySummedAddsNothingToTheFloor) {
  // The outputs use W only through its sums along each dim: a pre-defined reduction may be all
  // that reads it, which costs no more than its bytes.
  const Graph program = parse_program("input X[2, 64]\ninput W[64, 64]\nO = mul(X, sum(W, dim=0))\noutput O\n");
  SearchOptions options = small_model_bound_options();
  SearchContext ctx(program, options);
  EXPECT_EQ(ctx.unread_inputs_extra_us(*ctx.root().prefix, {TensorId(0)}), 0);
  // The same shapes, with W multiplied in whole.
  const Graph whole = parse_program("input X[2, 64]\ninput W[64, 64]\nO = matmul(X, W)\noutput O\n");
  SearchContext whole_ctx(whole, options);
  EXPECT_GT(whole_ctx.unread_inputs_extra_us(*whole_ctx.root().prefix, {TensorId(0)}), 0);
}

TEST(Generator, AKernelSavingATensorNothingReadsIsDead) {
  // A kernel that saves O and a tensor nothing reads computes what the kernel without that
  // saver computes, and moves more bytes: both count as dead ops, as an op whose results reach
  // no output does.
  auto kernel_graph = [](bool extra_saver, bool extra_op) {
    Graph g;
    const TensorId x = g.add_input("X", {8, 64}, DType::f16);
    Graph b = make_block_graph({g.type(x)}, Dim3{1, 1, 1}, 1);
    const TensorId xt = b.add(OpKind::input_iterator, {}, examples::load(0));
    b.add(OpKind::output_saver, {b.add(OpKind::sqr, {xt})}, examples::saver(0));
    if (extra_saver) b.add(OpKind::output_saver, {b.add(OpKind::exp, {xt})}, examples::saver(1));
    auto r = g.append_with_body(OpKind::graph_kernel, {x}, std::move(b));
    EXPECT_TRUE(r.ok()) << r.rejection().str();
    const TensorId o = g.ops[r->index()].outputs[0];
    if (extra_op) g.add(OpKind::exp, {o});
    g.mark_output(o, "O");
    return g;
  };
  EXPECT_FALSE(has_dead_ops(kernel_graph(false, false)));
  EXPECT_TRUE(has_dead_ops(kernel_graph(true, false)));
  EXPECT_TRUE(has_dead_ops(kernel_graph(false, true)));
}

TEST(Generator, AFullPassLeavesWhatFinishesTheProgramToItsFirstPass) {
  // A kernel that can finish the program and is not the last op there is room for gets a first
  // pass (Task::finish_only), which closes every kernel that finishes the program. The full pass
  // over the same configurations then closes only kernels a later kernel reads, and its floor
  // counts that kernel's launch. Together they must find what a full pass with no twin finds
  // (the same kernel as the last op there is room for), and nothing twice.
  Graph program = parse_program(kSmallRmsNormLinear);
  std::atomic<bool> stop{false};
  auto root_block_outputs = [&](SearchContext& ctx, bool full_pass) {
    Generator gen(ctx);
    TaskOutput root;
    EXPECT_TRUE(gen.run(ctx.root(), root, stop));
    TaskOutput all;
    for (const Task& t : root.children) {
      if (!t.is_block() || t.finish_only == full_pass) continue;
      TaskOutput out;
      EXPECT_TRUE(gen.run(t, out, stop));
      for (FoundCandidate& c : out.candidates) all.candidates.push_back(std::move(c));
      for (Task& c : out.children) all.children.push_back(std::move(c));
    }
    return all;
  };
  SearchContext twins(program, small_model_bound_options());
  SearchOptions last_op = small_model_bound_options();
  last_op.max_kernel_ops = 1;
  SearchContext alone(program, last_op);
  const TaskOutput first = root_block_outputs(twins, false);
  const TaskOutput full = root_block_outputs(twins, true);
  const TaskOutput whole = root_block_outputs(alone, true);
  EXPECT_TRUE(first.children.empty());
  EXPECT_TRUE(full.candidates.empty()) << "a full pass closed a kernel that finishes the program";
  EXPECT_FALSE(full.children.empty());
  std::multiset<std::string> twin_found, found_alone;
  for (const FoundCandidate& c : first.candidates) twin_found.insert(to_json(c.graph));
  for (const FoundCandidate& c : whole.candidates) found_alone.insert(to_json(c.graph));
  EXPECT_GT(found_alone.size(), 4u);
  EXPECT_EQ(twin_found, found_alone);

  // Past the root, a full pass is ordered by its twin's floor, and cuts what a launch more puts
  // beyond the bound: with the bound at a twin's floor and half a launch, its full pass grows
  // nothing, while the twins grow.
  std::vector<std::pair<Task, Task>> pairs;  // (first pass, full pass) of one chunk
  {
    Generator gen(twins);
    for (const Task& kernel : full.children) {
      if (kernel.is_block() || pairs.size() >= 100) continue;
      TaskOutput out;
      ASSERT_TRUE(gen.run(kernel, out, stop));
      for (const Task& first_pass : out.children) {
        if (!first_pass.is_block() || !first_pass.finish_only) continue;
        for (const Task& full_pass : out.children)
          if (full_pass.is_block() && !full_pass.finish_only && full_pass.operands == first_pass.operands &&
              full_pass.chunk == first_pass.chunk)
            pairs.emplace_back(first_pass, full_pass);
      }
    }
  }
  ASSERT_GT(pairs.size(), 10u);
  int64_t first_states = 0;
  for (const auto& [first_pass, full_pass] : pairs) {
    EXPECT_NEAR(full_pass.floor_us, first_pass.floor_us, 1e-9);
    twins.set_bound_us(first_pass.floor_us + twins.gpu().launch_us / 2);
    Generator gen(twins);
    TaskOutput first_out, full_out;
    ASSERT_TRUE(gen.run(first_pass, first_out, stop));
    ASSERT_TRUE(gen.run(full_pass, full_out, stop));
    first_states += first_out.stats.states;
    EXPECT_EQ(full_out.stats.states, 0) << "a full pass grew what only a kernel after it could complete";
    EXPECT_TRUE(full_out.children.empty() && full_out.candidates.empty());
  }
  EXPECT_GT(first_states, 0);
}

TEST(Generator, TheGrowthFloorCutsNoBlockGraphThatClosesWithinTheBound) {
  // With the model bound a block search stops growing a block graph whose floor (the rest of the
  // μGraph, the kernel's loads, the FLOPs and loop steps of its ops so far: GrowthFloor) is
  // beyond the bound. Every candidate a block task finds without a bound and estimates within
  // it must still be found with the bound set, and some growth must be cut.
  Graph program = parse_program(kSmallRmsNormLinear);
  SearchContext ctx(program, small_model_bound_options());
  std::atomic<bool> stop{false};
  // The root's block tasks, and the block tasks of the prefixes they make (a second kernel).
  const std::vector<Task> tasks = testing::two_levels_of_block_tasks(ctx, 600);
  auto run_all = [&](int64_t& states, int64_t& cut) {
    Generator gen(ctx);
    std::vector<std::vector<FoundCandidate>> found;
    states = cut = 0;
    for (const Task& t : tasks) {
      TaskOutput out;
      EXPECT_TRUE(gen.run(t, out, stop));
      states += out.stats.states;
      cut += out.stats.pruned["cost_bound"];
      found.push_back(std::move(out.candidates));
    }
    return found;
  };
  int64_t states_unbounded = 0, cut_unbounded = 0;
  const auto unbounded = run_all(states_unbounded, cut_unbounded);
  std::vector<double> estimates;
  for (const auto& f : unbounded)
    for (const FoundCandidate& c : f) estimates.push_back(c.estimated_us);
  ASSERT_GT(estimates.size(), 20u);
  std::sort(estimates.begin(), estimates.end());
  const double bound = estimates[estimates.size() / 3];
  ctx.set_bound_us(bound);
  int64_t states_bounded = 0, cut_bounded = 0;
  const auto bounded = run_all(states_bounded, cut_bounded);
  // A bound also leaves to the first pass (finish_only) what a full pass would grow again, so
  // candidates are compared over all the tasks.
  std::vector<const Graph*> kept_graphs;
  for (const auto& f : bounded)
    for (const FoundCandidate& b : f) kept_graphs.push_back(&b.graph);
  int within = 0;
  for (size_t i = 0; i < tasks.size(); ++i)
    for (const FoundCandidate& c : unbounded[i]) {
      if (c.estimated_us > bound) continue;
      ++within;
      const bool kept =
          std::any_of(kept_graphs.begin(), kept_graphs.end(), [&](const Graph* b) { return *b == c.graph; });
      EXPECT_TRUE(kept) << "a candidate estimated at " << c.estimated_us << " us, within the bound " << bound
                        << " us, was cut:\n"
                        << to_json(c.graph);
    }
  EXPECT_GT(within, 0);
  EXPECT_EQ(cut_unbounded, 0);
  EXPECT_GT(cut_bounded, 0);
  EXPECT_LT(states_bounded, states_unbounded);
}

TEST(Generator, AKernelThatMustFinishTheProgramFindsWhatTheFullPassFinds) {
  // A kernel that must finish the program saves program outputs only, so its block search cuts
  // what can no longer close that way: past its loop body, post-loop tiles smaller than the
  // outputs' (BlockSearch::post_loop_cannot_reach_outputs). The full pass over the same
  // configurations grows everything; the complete candidates must be the same. RMSNorm's
  // one-kernel μGraphs with a loop over X's columns accumulate the sums of X² and the products
  // (X ⊙ G)·W, then normalise after the loop (Figure 3b): 12 block ops.
  Graph program = parse_program(
      "input X[2, 512]\ninput G[512]\ninput W[512, 64]\n"
      "Y = div(mul(X, G), sqrt(div(sum(sqr(X), dim=1), 512)))\nO = matmul(Y, W)\noutput O\n");
  SearchOptions options;
  options.max_kernel_ops = 1;
  options.max_block_ops = 12;
  SearchContext ctx(program, options);
  std::atomic<bool> stop{false};
  Generator gen(ctx);
  TaskOutput root;
  ASSERT_TRUE(gen.run(ctx.root(), root, stop));
  std::set<std::string> full, finishing;
  bool looped = false;
  for (const Task& t : root.children) {
    if (!t.is_block()) continue;
    for (bool finish_only : {false, true}) {
      Task task = t;
      task.finish_only = finish_only;
      TaskOutput out;
      ASSERT_TRUE(gen.run(task, out, stop));
      for (const FoundCandidate& c : out.candidates) {
        (finish_only ? finishing : full).insert(to_json(c.graph));
        for (const Op& op : c.graph.ops)
          if (op.kind == OpKind::graph_kernel && c.graph.bodies[static_cast<size_t>(op.attrs.body)].forloop > 1)
            looped = true;
      }
    }
  }
  EXPECT_TRUE(looped) << "no candidate with a loop: the rule is not exercised";
  EXPECT_FALSE(full.empty());
  EXPECT_EQ(finishing, full);
}

TEST(Generator, APartialSumIsAddedOnlyToAnotherOfItsSplit) {
  // sum(X², dim=1) with a loop over X's columns: each iteration's partial sum p_k is
  // accumulated. Scaling p_k by C, which every iteration reads whole, accumulates
  // Σ_k p_k·C = S·C; adding C accumulates Σ_k (p_k + C) = S + 4·C, a sum of C over an index it
  // does not carry, which the block search refuses (partial_sum). Rebuilt through the block
  // search's checks (retile_kernel), the body that adds does not close; the one that scales does.
  const Graph program = parse_program("input X[2, 64]\ninput C[2, 1]\nO = add(sum(sqr(X), dim=1), C)\noutput O\n");
  SearchContext ctx(program, SearchOptions{});
  Generator gen(ctx);
  Graph k;
  const TensorId x = k.add_input("X", {2, 64});
  const TensorId c = k.add_input("C", {2, 1});
  const auto prefix = std::make_shared<const Graph>(k);
  auto loop_body = [&](OpKind with_c) {
    Graph b = make_block_graph({k.type(x), k.type(c)}, Dim3{2, 1, 1}, 4);
    const TensorId xt = b.add(OpKind::input_iterator, {}, examples::iterator(0, examples::kX0, 1));     // [1, 16]
    const TensorId ct = b.add(OpKind::input_iterator, {}, examples::iterator(1, examples::kX0, kPhi));  // [1, 1]
    const TensorId p = b.add(OpKind::sum, {b.add(OpKind::sqr, {xt})}, attrs::sum(1));  // [1, 1], a partial sum
    const TensorId q = b.add(with_c, {p, ct});
    b.add(OpKind::output_saver, {b.add(OpKind::accum, {q}, attrs::accum(kPhi))}, attrs::saver(0, examples::kX0));
    return b;
  };
  for (OpKind refused_kind : {OpKind::add, OpKind::sub}) {
    const Graph refused = loop_body(refused_kind);
    EXPECT_TRUE(gen.retile_kernel(prefix, {x, c}, config_of(refused), refused).empty()) << op_info(refused_kind).name;
  }
  const Graph scaled = loop_body(OpKind::mul);
  EXPECT_FALSE(gen.retile_kernel(prefix, {x, c}, config_of(scaled), scaled).empty());
}

TEST(Generator, AKernelThatCannotFinishIsNotMadeToFinishByABoundThatLeavesItsSuccessorRoom) {
  // nTrans: a kernel reading H and X cannot compute the output (α is missing), so a later kernel
  // must follow it, and the lower bound of its task counts that one. A model bound just below
  // that of one kernel more leaves room for it: the kernel may still write what the later one
  // reads. Until the fix, the test "one more kernel would be beyond the bound" counted the later
  // kernel twice and made such a kernel save program outputs only, so that it closed nothing.
  const Graph program = parse_program(search_testing::kNTransSmall);
  SearchOptions o;
  o.cost_bound = CostBound::model;
  o.target = require_target("h200");
  o.max_block_ops = 6;  // D = H − X and the sums of D², with their iterators
  SearchContext ctx(program, o);
  Graph prefix;
  const TensorId h = prefix.add_input("H", {4, 64}, DType::f16);
  const TensorId x = prefix.add_input("X", {4, 64}, DType::f16);
  prefix.add_input("Alpha", {4, 64}, DType::f16);
  Generator gen(ctx);
  const std::vector<ExprId> exprs = expressions(prefix, ctx.exprs()).tensors;
  ASSERT_FALSE(gen.can_finish(exprs, {h, x}));
  const auto [bytes, kernels] = ctx.lower_bound(prefix, exprs, {h, x}, /*another_kernel=*/true);
  ASSERT_EQ(kernels, 2);
  const TaskOutput unbounded = testing::run_block_tasks(ctx, prefix, {h, x});
  const double one_more = cost_lower_bound_us(bytes, kernels + 1, ctx.gpu());
  std::vector<std::string> within;  // the kernels written under the bound below
  for (const Task& t : unbounded.children)
    if (t.floor_us < one_more) within.push_back(to_json(*t.prefix));
  ASSERT_FALSE(within.empty()) << "no kernel after which the next fits below one more launch";
  ctx.set_bound_us(std::nextafter(one_more, 0.0));
  ASSERT_TRUE(ctx.beyond_bound(bytes, kernels + 1));
  const TaskOutput bounded = testing::run_block_tasks(ctx, prefix, {h, x});
  std::set<std::string> kept;
  for (const Task& t : bounded.children) kept.insert(to_json(*t.prefix));
  for (const std::string& k : within) EXPECT_TRUE(kept.count(k)) << k;
}

TEST(Generator, AnElementwiseKernelOfProgramValuesComputesAProgramValue) {
  // nTrans: H ⊙ X passes the abstract-expression oracle, since (H − X)² expands to terms that
  // hold it, but the program computes no such value. As a pre-defined kernel it is computed
  // from whole program values, as a tile-local block op is, and is refused like one; H − X
  // (the program's D) is kept. Without program tile values both are grown.
  const Graph program = parse_program(search_testing::kNTransSmall);
  auto predefined = [&](bool tile_values) {
    SearchOptions o;
    o.program_tile_values = tile_values;
    SearchContext ctx(program, o);
    Generator gen(ctx);
    std::atomic<bool> stop{false};
    TaskOutput root;
    EXPECT_TRUE(gen.run(ctx.root(), root, stop));
    std::set<std::pair<OpKind, std::vector<TensorId>>> ops;
    for (const Task& t : root.children)
      if (!t.is_block() && t.prefix->ops.back().kind != OpKind::graph_kernel)
        ops.insert({t.prefix->ops.back().kind, t.prefix->ops.back().inputs});
    return ops;
  };
  const TensorId h(0), x(1);
  const auto with = predefined(true), without = predefined(false);
  EXPECT_TRUE(with.count({OpKind::sub, {h, x}}));
  EXPECT_FALSE(with.count({OpKind::mul, {h, x}}));
  EXPECT_TRUE(without.count({OpKind::sub, {h, x}}));
  EXPECT_TRUE(without.count({OpKind::mul, {h, x}})) << "the oracle alone refuses H ⊙ X: the rule is not exercised";
  EXPECT_LT(with.size(), without.size());
}

TEST(Generator, AnAccumulatedProgramValueIsCheckedAfterTheLoop) {
  // A loop over X's columns accumulates the partial sums p_k of X². Completed, S = Σ_k p_k is a
  // program value, and what is computed from it after the loop is checked like a tile-local
  // value. With O = (sum(X², dim=1) / 64 + C)², S / 64 is kept, and S², which the oracle lets
  // through (the square of a sum has it among its terms), is not. Accumulating scaled partial
  // sums gives Σ_k p_k / 64 = S / 64, a program value, kept. With O = (S / 64 + C)·C, a kernel
  // that also reads C whole may accumulate Σ_k p_k·C = S·C, a term of O but no value the program
  // computes: refused. Without program tile values all of them are grown.
  struct Seen {
    bool s_over_64 = false, s_squared = false, scaled_by_64 = false, scaled_by_c = false;
  };
  auto grow = [&](const char* text, bool read_c, bool tile_values) {
    const Graph program = parse_program(text);
    SearchOptions o;
    o.program_tile_values = tile_values;
    o.max_block_ops = 6;  // the iterators, sqr, sum, mul and accum
    SearchContext ctx(program, o);
    Graph prefix;
    const TensorId x = prefix.add_input("X", {2, 64}, DType::f16);
    const TensorId c = prefix.add_input("C", {2, 1}, DType::f16);
    Seen seen;
    auto look = [&](const Graph& g) {
      for (const Op& kop : g.ops) {
        if (kop.kind != OpKind::graph_kernel) continue;
        const Graph& b = g.bodies[static_cast<size_t>(kop.attrs.body)];
        if (b.forloop < 2) continue;
        auto made_by = [&](TensorId t) -> const Op& { return b.op(b.tensors[t.index()].producer); };
        for (const Op& op : b.ops) {
          if (op.kind == OpKind::accum && op.attrs.dim == kPhi) {
            const Op& in = made_by(op.inputs[0]);
            if (in.kind == OpKind::div && in.inputs.size() == 1 && made_by(in.inputs[0]).kind == OpKind::sum)
              seen.scaled_by_64 = true;
            if (in.kind == OpKind::mul && in.inputs.size() == 2) {
              const OpKind p = made_by(in.inputs[0]).kind, q = made_by(in.inputs[1]).kind;
              // Whole sums only: a grid that splits X's columns saves the blocks' partial sums,
              // which a later kernel completes (the rule is silent about those).
              if ((p == OpKind::sum && q == OpKind::input_iterator) ||
                  (p == OpKind::input_iterator && q == OpKind::sum))
                seen.scaled_by_c |= g.type(kop.outputs[0]).shape == Shape{2, 1};
            }
          }
          if (op.inputs.size() == 1 && made_by(op.inputs[0]).kind == OpKind::accum &&
              made_by(made_by(op.inputs[0]).inputs[0]).kind == OpKind::sum) {
            if (op.kind == OpKind::div) seen.s_over_64 = true;
            if (op.kind == OpKind::sqr) seen.s_squared = true;
          }
        }
      }
    };
    const TaskOutput out =
        testing::run_block_tasks(ctx, prefix, read_c ? std::vector<TensorId>{x, c} : std::vector<TensorId>{x});
    for (const Task& t : out.children) look(*t.prefix);
    for (const FoundCandidate& f : out.candidates) look(f.graph);
    return seen;
  };
  const char* squared = "input X[2, 64]\ninput C[2, 1]\nO = sqr(add(div(sum(sqr(X), dim=1), 64), C))\noutput O\n";
  const char* times_c = "input X[2, 64]\ninput C[2, 1]\nO = mul(add(div(sum(sqr(X), dim=1), 64), C), C)\noutput O\n";
  const Seen with = grow(squared, false, true), without = grow(squared, false, false);
  EXPECT_TRUE(with.s_over_64);
  EXPECT_FALSE(with.s_squared);
  EXPECT_TRUE(with.scaled_by_64);
  EXPECT_TRUE(without.s_over_64);
  EXPECT_TRUE(without.s_squared) << "the oracle alone refuses S²: the rule is not exercised";
  EXPECT_TRUE(without.scaled_by_64);
  EXPECT_FALSE(grow(times_c, true, true).scaled_by_c);
  EXPECT_TRUE(grow(times_c, true, false).scaled_by_c) << "the oracle alone refuses S·C: the rule is not exercised";
}

TEST(Generator, ABiasAndAResidualJoinAMatmulsAccumulatedSumsAfterItsLoop) {
  // O = R + (X·W + B): a kernel whose loop walks the reduced dim loads B's and R's tiles once
  // (fmap φ) and adds them to the accumulated product after the loop (epilogue operands). Such
  // kernels finish the program alone; every one the search closes is a valid μGraph.
  const Graph program = parse_program(
      "input X[8, 64]\ninput W[64, 32]\ninput B[32]\ninput R[8, 32]\nO = add(R, add(matmul(X, W), B))\noutput O\n");
  SearchOptions o;
  o.max_block_ops = 8;  // the four iterators, matmul, accum and the two adds
  SearchContext ctx(program, o);
  Graph prefix;
  std::vector<TensorId> operands;
  for (const Op& op : program.ops)
    if (op.kind == OpKind::input)
      operands.push_back(prefix.add_input(op.attrs.name, program.type(op.outputs[0]).shape, DType::f16));
  const TaskOutput out = testing::run_block_tasks(ctx, prefix, operands);
  int epilogues = 0;
  for (const FoundCandidate& f : out.candidates) {
    EXPECT_FALSE(validate(f.graph)) << validate(f.graph)->str();
    for (const Op& kop : f.graph.ops) {
      if (kop.kind != OpKind::graph_kernel) continue;
      const Graph& b = f.graph.bodies[static_cast<size_t>(kop.attrs.body)];
      if (b.forloop < 2) continue;
      // Post-loop adds with an operand loaded once: one of B's tile, one of R's.
      int joined = 0;
      for (const Op& op : b.ops) {
        if (op.kind != OpKind::add) continue;
        for (TensorId t : op.inputs) {
          const Op& made = b.op(b.tensors[t.index()].producer);
          joined += made.kind == OpKind::input_iterator && made.attrs.fmap == kPhi;
        }
      }
      epilogues += joined == 2;
    }
  }
  EXPECT_GT(epilogues, 0) << out.candidates.size() << " candidates, none with both adds after a loop";
}

TEST(Generator, AKernelFinishesTheProgramOnlyFromOperandsHoldingWhatTheOutputsUseOutsideSums) {
  // nTrans's output uses H, X and α outside every sum (Y = X + α ⊙ N). Partial sums of (H − X)²
  // hold H and X only inside sums, which do not give back their summands: with α alone beside
  // them a kernel cannot compute the output (its block searches grew 16 million states in
  // under a minute at the paper's shape), with H and X beside them it can.
  const Graph program = parse_program(search_testing::kNTransSmall);
  SearchContext ctx(program, SearchOptions{});
  Graph prefix;
  const TensorId h = prefix.add_input("H", {4, 64}, DType::f16);
  const TensorId x = prefix.add_input("X", {4, 64}, DType::f16);
  const TensorId alpha = prefix.add_input("Alpha", {4, 64}, DType::f16);
  auto r = prefix.append(OpKind::sub, {h, x});
  ASSERT_TRUE(r.ok());
  const TensorId d = prefix.ops[r->index()].outputs[0];
  r = prefix.append(OpKind::sqr, {d});
  ASSERT_TRUE(r.ok());
  r = prefix.append(OpKind::sum, {prefix.ops[r->index()].outputs[0]}, attrs::sum(1, 4));
  ASSERT_TRUE(r.ok());
  const TensorId partials = prefix.ops[r->index()].outputs[0];  // [4, 4]
  Generator gen(ctx);
  const std::vector<ExprId> exprs = expressions(prefix, ctx.exprs()).tensors;
  EXPECT_TRUE(gen.can_finish(exprs, {h, x, alpha}));
  EXPECT_FALSE(gen.can_finish(exprs, {alpha, partials}));
  EXPECT_TRUE(gen.can_finish(exprs, {h, x, alpha, partials}));
  EXPECT_TRUE(gen.can_finish(exprs, {alpha, d, x}));
  // RMSNorm's output is a matmul, a sum: a kernel reading the partial results of an earlier one
  // may finish it.
  const Graph rms = parse_program(search_testing::kRmsNormSmall);
  SearchContext rms_ctx(rms, SearchOptions{});
  Graph k;
  const TensorId xi = k.add_input("X", {4, 64}, DType::f16);
  const TensorId g = k.add_input("G", {64}, DType::f16);
  const TensorId w = k.add_input("W", {64, 64}, DType::f16);
  r = k.append(OpKind::mul, {xi, g});
  ASSERT_TRUE(r.ok());
  r = k.append(OpKind::matmul, {k.ops[r->index()].outputs[0], w});
  ASSERT_TRUE(r.ok());
  const TensorId xgw = k.ops[r->index()].outputs[0];
  r = k.append(OpKind::sum, {k.ops[k.append(OpKind::sqr, {xi})->index()].outputs[0]}, attrs::sum(1));
  ASSERT_TRUE(r.ok());
  const TensorId s = k.ops[r->index()].outputs[0];
  Generator rms_gen(rms_ctx);
  EXPECT_TRUE(rms_gen.can_finish(expressions(k, rms_ctx.exprs()).tensors, {xgw, s}));
}

TEST(Generator, AKernelReadingWholeSumsAnEarlierKernelAccumulatedTreatsThemAsWhole) {
  // GatedMLP in two kernels: the first accumulates X·W1 and X·W2 over a loop, an expression other
  // than the program's matmuls but with their normal forms; the second computes silu(X·W1) ⊙
  // X·W2 from them. They are whole sums, not partial ones to complete: a first version of the
  // rule for partial results took them for such and refused the silu.
  const Graph program = parse_program(
      "input X[8, 64]\ninput W1[64, 64]\ninput W2[64, 64]\nO = mul(silu(matmul(X, W1)), matmul(X, W2))\noutput O\n");
  SearchContext ctx(program, SearchOptions{});
  Graph prefix;
  const TensorId x = prefix.add_input("X", {8, 64}, DType::f16);
  const TensorId w1 = prefix.add_input("W1", {64, 64}, DType::f16);
  const TensorId w2 = prefix.add_input("W2", {64, 64}, DType::f16);
  Graph b = make_block_graph({prefix.type(x), prefix.type(w1), prefix.type(w2)}, Dim3{4, 1, 1}, 4);
  const TensorId xt = b.add(OpKind::input_iterator, {}, examples::iterator(0, {kPhi, kPhi, kPhi}, 1));  // [8, 16]
  const TensorId w1t = b.add(OpKind::input_iterator, {}, examples::iterator(1, examples::kX1, 0));      // [16, 16]
  const TensorId w2t = b.add(OpKind::input_iterator, {}, examples::iterator(2, examples::kX1, 0));      // [16, 16]
  const TensorId a1 = b.add(OpKind::matmul, {xt, w1t}), a2 = b.add(OpKind::matmul, {xt, w2t});
  b.add(OpKind::output_saver, {b.add(OpKind::accum, {a1}, attrs::accum(kPhi))}, examples::saver(0, examples::kX1));
  b.add(OpKind::output_saver, {b.add(OpKind::accum, {a2}, attrs::accum(kPhi))}, examples::saver(1, examples::kX1));
  auto r = prefix.append_with_body(OpKind::graph_kernel, {x, w1, w2}, std::move(b));
  ASSERT_TRUE(r.ok()) << r.rejection().str();
  const Op& k1 = prefix.ops[r->index()];
  const TaskOutput out = testing::run_block_tasks(ctx, prefix, {k1.outputs[0], k1.outputs[1]});
  EXPECT_FALSE(out.candidates.empty());
}

/// X[8, 64] and a kernel that stacks four blocks' sums of `summand` (X, or X²) over their
/// 16 columns, each divided by 64 `divisions` times: the [8, 4] stack of partial sums.
TensorId stack_of_partial_row_sums(Graph& prefix, TensorId x, OpKind summand, int divisions = 0) {
  Graph b = make_block_graph({prefix.type(x)}, Dim3{4, 1, 1}, 1);
  TensorId t = b.add(OpKind::input_iterator, {}, examples::iterator(0, examples::kX1, kPhi));  // [8, 16]
  if (summand != OpKind::input) t = b.add(summand, {t});
  t = b.add(OpKind::sum, {t}, attrs::sum(1));
  for (int k = 0; k < divisions; ++k) t = b.add(OpKind::div, {t}, attrs::scalar(Scalar{64, 0}));
  b.add(OpKind::output_saver, {t}, examples::saver(0, examples::kX1));
  auto r = prefix.append_with_body(OpKind::graph_kernel, {x}, std::move(b));
  EXPECT_TRUE(r.ok()) << r.rejection().str();
  return prefix.ops[r->index()].outputs[0];
}

TEST(Generator, AnEarlierKernelsProgramValueInAnotherFormIsThatValue) {
  // O = X / Σ X with S = Σ X computed as the program spells it, or as the sum of a stack of
  // four blocks' partial sums: Σ_4 Σ_16 X, another expression with S's normal form. A kernel
  // reading X and either is grown alike: what it computes from S must be a program value. Left
  // opaque, the second let through arithmetic on S that the first refuses (nTrans's last
  // kernel: millions of states of α·N + α·N/4096 + …).
  const Graph program = parse_program("input X[8, 64]\nS = sum(X, dim=1)\nO = div(X, S)\noutput O\n");
  SearchContext ctx(program, SearchOptions{});
  Graph spelled;
  const TensorId x1 = spelled.add_input("X", {8, 64}, DType::f16);
  const TensorId s1 = spelled.add(OpKind::sum, {x1}, attrs::sum(1));
  Graph stacked;
  const TensorId x2 = stacked.add_input("X", {8, 64}, DType::f16);
  const TensorId s2 = stacked.add(OpKind::sum, {stack_of_partial_row_sums(stacked, x2, OpKind::input)}, attrs::sum(1));
  const TaskOutput a = run_block_tasks(ctx, spelled, {x1, s1});
  const TaskOutput b = run_block_tasks(ctx, stacked, {x2, s2});
  EXPECT_FALSE(a.candidates.empty());
  EXPECT_EQ(a.candidates.size(), b.candidates.size());
  EXPECT_EQ(a.stats.states, b.stats.states);
}

TEST(Generator, AKernelThatCanSumItsRowsWholeReadsNoStackOfTheirPartialSums) {
  // O = X / sqrt(Σ X²) after a kernel that stacks four blocks' sums of X² over their columns.
  // A kernel whose blocks hold whole rows of X computes Σ X² itself: reading the stack too
  // (and summing it, or anything else) is what the same kernel without the stack does with
  // more bytes. Blocks that hold a quarter of the columns still complete the stack.
  const Graph program = parse_program("input X[8, 64]\nO = div(X, sqrt(sum(sqr(X), dim=1)))\noutput O\n");
  SearchContext ctx(program, SearchOptions{});
  Graph prefix;
  const TensorId x = prefix.add_input("X", {8, 64}, DType::f16);
  const TensorId stack = stack_of_partial_row_sums(prefix, x, OpKind::sqr);
  const TaskOutput out = run_block_tasks(ctx, prefix, {x, stack});
  EXPECT_GT(out.stats.pruned.count("redundant_operand") ? out.stats.pruned.at("redundant_operand") : 0, 0);
  int split_columns = 0;
  for (const FoundCandidate& c : out.candidates) {
    const Op& last = c.graph.ops.back();
    ASSERT_EQ(last.kind, OpKind::graph_kernel);
    const Shape& x_tile = c.graph.bodies[static_cast<size_t>(last.attrs.body)].tensors[0].type.shape;
    EXPECT_LT(x_tile[1], 64) << "a kernel holding whole rows of X read the stack:\n" << describe(c.graph);
    split_columns += x_tile[1] < 64 ? 1 : 0;
  }
  EXPECT_GT(split_columns, 0);
}

TEST(Generator, AStackScaledSoThatItsSumIsNoProgramValueIsNotRead) {
  // O = X / sqrt(Σ X² / 64) after a kernel that stacks four blocks' sums of X², divided by 64
  // once (summed, the program's mean square) or twice (Σ X² / 64², no program value). Only
  // multiplied by 64 again could the second complete to a program value: the kernel writing it
  // makes no prefix, and no configuration reading it is grown (3,822 block states were).
  const Graph program = parse_program("input X[8, 64]\nO = div(X, sqrt(div(sum(sqr(X), dim=1), 64)))\noutput O\n");
  SearchContext ctx(program, SearchOptions{});
  for (int divisions : {1, 2}) {
    Graph prefix;
    const TensorId x = prefix.add_input("X", {8, 64}, DType::f16);
    const TensorId stack = stack_of_partial_row_sums(prefix, x, OpKind::sqr, divisions);
    // The search keeps no prefix ending in the kernel that writes the second.
    EXPECT_EQ(writes_partial_sums_nothing_completes(ctx, prefix, expressions(prefix, ctx.exprs()).tensors),
              divisions == 2);
    const TaskOutput out = run_block_tasks(ctx, prefix, {x, stack});
    if (divisions == 1) {
      EXPECT_FALSE(out.candidates.empty());
    } else {
      EXPECT_TRUE(out.candidates.empty()) << describe(out.candidates[0].graph);
      EXPECT_TRUE(out.children.empty());
      EXPECT_EQ(out.stats.states, 0) << "block graphs grown around the stack";
    }
  }
}

TEST(Generator, AKernelSavesNoValueBesideItScaledByAConstant) {
  // O = X / sqrt(Σ X² / 64): a first kernel may write the blocks' sums of X², or those sums
  // divided by 64, for a later kernel to complete; not both, which a later kernel reading one
  // gets with one op. A program whose outputs are a value and the value times 2 has its kernel
  // write both.
  const Graph program = parse_program("input X[8, 64]\nO = div(X, sqrt(div(sum(sqr(X), dim=1), 64)))\noutput O\n");
  SearchContext ctx(program, SearchOptions{});
  Graph inputs;
  const TensorId x = inputs.add_input("X", {8, 64}, DType::f16);
  const TaskOutput out = run_block_tasks(ctx, inputs, {x});
  ExprPool& pool = ctx.exprs();
  const ExprId c64 = pool.constant(Scalar{64, 0});
  auto nf = [&](ExprId e) { return normal_form(e, pool, ctx.normal_forms()).id; };
  int writes_sums = 0;
  for (const Task& child : out.children) {
    const Graph& g = *child.prefix;
    const std::vector<ExprId> exprs = expressions(g, pool).tensors;
    const Op& k = g.ops.back();
    for (TensorId a : k.outputs)
      for (TensorId b : k.outputs) {
        if (a == b || g.type(a) != g.type(b)) continue;
        EXPECT_NE(nf(pool.div(exprs[a.index()], c64)), nf(exprs[b.index()])) << describe(g);
      }
    writes_sums += k.outputs.size() == 1 && g.type(k.outputs[0]).shape[1] > 1 ? 1 : 0;
  }
  EXPECT_GT(writes_sums, 0) << "no kernel writes a stack of partial sums";
  const Graph chain = parse_program("input X[16, 256]\nY = exp(X)\nO = mul(Y, 2)\noutput Y, O\n");
  SearchContext chain_ctx(chain, SearchOptions{});
  Graph chain_inputs;
  const TensorId cx = chain_inputs.add_input("X", {16, 256}, DType::f16);
  EXPECT_FALSE(run_block_tasks(chain_ctx, chain_inputs, {cx}).candidates.empty());
}

TEST(Generator, ChunksOfAnOperandSetChainBeyondTheRoot) {
  // With the model bound, a kernel task past the root makes only the first chunk of each operand
  // set, without the list; each chunk makes the next (the path and floor it would have had) while
  // the bound allows its floor.
  Graph program = parse_program(kSmallRmsNormLinear);
  SearchOptions options;
  options.cost_bound = CostBound::model;
  options.target = require_target("h200");
  SearchContext ctx(program, options);
  Generator gen(ctx);
  std::atomic<bool> stop{false};
  TaskOutput root;
  ASSERT_TRUE(gen.run(ctx.root(), root, stop));
  // The root's chunks are all made at once, with their list.
  std::map<std::vector<TensorId>, int32_t> root_chunks;
  for (const Task& t : root.children)
    if (t.is_block() && !t.finish_only) {
      EXPECT_NE(t.configs, nullptr);
      root_chunks[t.operands] = std::max(root_chunks[t.operands], t.chunk + 1);
    }
  EXPECT_TRUE(std::any_of(root_chunks.begin(), root_chunks.end(), [](const auto& e) { return e.second > 1; }));
  // A kernel task past the root: sqr(X) as a pre-defined kernel.
  const auto past_root = std::find_if(root.children.begin(), root.children.end(), [](const Task& t) {
    return !t.is_block() && t.prefix->ops.back().kind == OpKind::sqr;
  });
  ASSERT_NE(past_root, root.children.end());
  TaskOutput kernel;
  ASSERT_TRUE(gen.run(*past_root, kernel, stop));
  const Task* longest = nullptr;
  size_t longest_configs = 0;
  for (const Task& t : kernel.children) {
    if (!t.is_block()) continue;
    EXPECT_EQ(t.chunk, 0);
    EXPECT_EQ(t.configs, nullptr);
    const size_t n = gen.configs_for(t.prefix, t.operands)->configs.size();
    if (!t.finish_only && n > longest_configs) longest = &t, longest_configs = n;
  }
  ASSERT_NE(longest, nullptr);
  ASSERT_GT(longest_configs, static_cast<size_t>(kConfigsPerTask));
  TaskOutput first;
  ASSERT_TRUE(gen.run(*longest, first, stop));
  const auto next =
      std::find_if(first.children.begin(), first.children.end(), [](const Task& t) { return t.is_block(); });
  ASSERT_NE(next, first.children.end());
  EXPECT_EQ(next->chunk, 1);
  EXPECT_EQ(next->operands, longest->operands);
  std::vector<int32_t> path = longest->path;
  path.back() += 1;
  EXPECT_EQ(next->path, path);
  EXPECT_GE(next->floor_us, longest->floor_us);
  // A bound just below the next chunk's floor ends the chain.
  ctx.set_bound_us(std::nextafter(next->floor_us, 0.0));
  TaskOutput cut;
  ASSERT_TRUE(gen.run(*longest, cut, stop));
  EXPECT_TRUE(std::none_of(cut.children.begin(), cut.children.end(), [](const Task& t) { return t.is_block(); }));
}

TEST(Generator, SplitKeysKernelStacksItsPartials) {
  // With a 2-D grid (key slices, heads), and a 3-D one whose z axis also splits the queries:
  // the partials of a block's query slice go to its rows of the stack, its key slice to its slot.
  Graph program = parse_program(kSmallGqa);
  SearchContext ctx(program, SearchOptions{});
  for (int64_t query_tiles : {1, 2}) {
    const Graph want = examples::gqa_split_kv(2, 16, 8, 64, 8, 4, 8, query_tiles);
    Graph inputs = want;
    inputs.ops.resize(3);
    inputs.tensors.resize(3);
    inputs.bodies.clear();
    inputs.outputs.clear();
    TaskOutput out = run_block_tasks(ctx, inputs, {TensorId(0), TensorId(1), TensorId(2)});
    bool found = false;
    for (const Task& child : out.children) {
      const Graph& g = *child.prefix;
      if (g.bodies.size() == 1 && g.bodies[0] == want.bodies[0]) found = true;
    }
    EXPECT_TRUE(found) << "query tiles " << query_tiles << ": the split-keys kernel is not among "
                       << out.children.size() << " prefixes";
  }
}

TEST(Generator, CombineKernelSumsTheStackedPartialsSlotBySlot) {
  // After kernel 1 with a 2-D grid, and after one whose z axis also splits the queries: the
  // stacks have the same shapes and labels, so the same combining kernel completes both.
  Graph program = parse_program(kSmallGqa);
  SearchContext ctx(program, SearchOptions{});
  for (int64_t query_tiles : {1, 2}) {
    const Graph want = examples::gqa_split_kv(2, 16, 8, 64, 8, 4, 8, query_tiles);
    Graph prefix = want;
    prefix.ops.pop_back();
    prefix.tensors.pop_back();
    prefix.bodies.pop_back();
    prefix.outputs.clear();
    prefix.tensors.back().name.clear();
    TaskOutput out = run_block_tasks(ctx, prefix, {TensorId(3), TensorId(4)});
    bool found = false;
    for (const FoundCandidate& c : out.candidates)
      if (c.graph.bodies.size() == 2 && c.graph.bodies[1] == want.bodies[1]) found = true;
    EXPECT_TRUE(found) << "query tiles " << query_tiles << ": the combining kernel is not among "
                       << out.candidates.size() << " candidates";
  }
}

TEST(Generator, ConfigFloorChargesEveryBlockForWhatItLoads) {
  // GQA at the paper's shapes on H200: splitting the rows makes each of 64 blocks load its
  // head's whole K and V (1 MiB); splitting the keys makes each load 1/32 of them and all of Q.
  const Graph g = examples::gqa_split_kv();
  const GpuSpec& h200 = gpu_spec("h200");
  const std::vector<TensorId> qkv{TensorId(0), TensorId(1), TensorId(2)};
  auto config = [](Dim3 grid, std::vector<std::array<int8_t, 3>> imaps, std::vector<int8_t> fmaps) {
    KernelConfig c;
    c.grid = grid;
    c.forloop = 4;
    std::copy(imaps.begin(), imaps.end(), c.imaps.begin());
    std::copy(fmaps.begin(), fmaps.end(), c.fmaps.begin());
    return c;
  };
  const KernelConfig keys = config(Dim3{64, 2, 1}, {{kPhi, 0, kPhi}, {2, 0, kPhi}, {1, 0, kPhi}}, {kPhi, 2, 1});
  const KernelConfig rows = config(Dim3{32, 2, 1}, {{1, 0, kPhi}, {kPhi, 0, kPhi}, {kPhi, 0, kPhi}}, {kPhi, 2, 1});
  const double by_keys = config_floor_us(g, qkv, keys, h200), by_rows = config_floor_us(g, qkv, rows, h200);
  EXPECT_GT(by_keys, h200.launch_us);
  EXPECT_GT(by_rows, 4 * (by_keys - h200.launch_us) + h200.launch_us);
  // Never above what the cost model estimates for a kernel with that configuration (the
  // example's first kernel has it).
  EXPECT_LE(by_keys, estimate_cost(g, h200).kernels[0].total_us);
}

}  // namespace
}  // namespace mugraph::search_detail
