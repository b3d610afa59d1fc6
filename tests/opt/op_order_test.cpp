// Operator order (op_order.h): steps respect every dependency, each op sits at the earliest step
// its operands allow (so a phase has as many steps as its longest chain, the fewest barriers),
// and tensor lifetimes cover every read.
#include "mugraph/op_order.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "example_block_graphs.h"
#include "test_graphs.h"

namespace mugraph {
namespace {

/// The op that writes each tensor.
std::vector<int> producers(const Graph& g) {
  std::vector<int> p(g.tensors.size(), -1);
  for (size_t i = 0; i < g.ops.size(); ++i)
    for (TensorId t : g.ops[i].outputs) p[t.index()] = static_cast<int>(i);
  return p;
}

TEST(OpOrder, Figure3bRunsInFourStepsAndTwoAfterTheLoop) {
  const Graph k = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16);
  const Graph& b = k.bodies[0];
  const BlockSchedule s = schedule_block_ops(b);
  // loads | sqr folded into sum, mul | matmul, sum's accumulator | matmul's accumulator ;
  // thread graph | save
  EXPECT_EQ(s.loop_steps, 4);
  EXPECT_EQ(s.post_steps, 2);
  const std::vector<int32_t> steps = {0, 0, 0, 1, 1, 1, 2, 2, 3, 0, 1};
  ASSERT_EQ(s.step.size(), steps.size());
  EXPECT_EQ(s.step, steps);
  EXPECT_EQ(s.folded, (std::vector<bool>{false, false, false, true, false, false, false, false, false, false, false}));
  EXPECT_EQ(s.order, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  // Per iteration: 3 between the loop's steps and 1 at its end; 1 after the loop.
  EXPECT_EQ(block_barriers(b, s), 4 * 16 + 1);
}

TEST(OpOrder, AChainNeedsAStepPerLink) {
  Graph k;
  TensorId x = k.add_input("X", {16, 64});
  Graph b = make_block_graph({k.type(x)}, Dim3{4, 1, 1}, 1);
  TensorId t = b.add(OpKind::input_iterator, {}, test::iter(0, {0, kPhi, kPhi}, kPhi));
  for (int i = 0; i < 5; ++i) t = b.add(OpKind::exp, {t});
  b.add(OpKind::output_saver, {t}, test::saver(0, {0, kPhi, kPhi}));
  const BlockSchedule s = schedule_block_ops(b);
  EXPECT_EQ(s.loop_steps, 7);  // load, 5 exps, save
  EXPECT_EQ(s.post_steps, 0);
  EXPECT_EQ(block_barriers(b, s), 6);
}

TEST(OpOrder, LoopInvariantOpsRunOnceBeforeTheLoop) {
  // QKNorm's shape of loop: a tile loaded once (X, fmap φ) is squared and exp'd before the loop;
  // the loop multiplies exp(X²) by the tile it streams (Y) and accumulates.
  Graph k;
  TensorId x = k.add_input("X", {16, 64});
  TensorId y = k.add_input("Y", {16, 256});
  Graph b = make_block_graph({k.type(x), k.type(y)}, Dim3{4, 1, 1}, 4);
  TensorId xt = b.add(OpKind::input_iterator, {}, test::iter(0, {0, kPhi, kPhi}, kPhi));  // [4, 64]
  TensorId yt = b.add(OpKind::input_iterator, {}, test::iter(1, {0, kPhi, kPhi}, 1));     // [4, 64]
  TensorId sq = b.add(OpKind::sqr, {xt});
  TensorId ex = b.add(OpKind::exp, {sq});
  TensorId m = b.add(OpKind::mul, {ex, yt});
  TensorId acc = b.add(OpKind::accum, {m}, test::accum_sum());
  b.add(OpKind::output_saver, {acc}, test::saver(0, {0, kPhi, kPhi}));
  const BlockSchedule s = schedule_block_ops(b);
  EXPECT_EQ(s.phase[2], OpPhase::pre);
  EXPECT_EQ(s.phase[3], OpPhase::pre);
  EXPECT_EQ(s.phase[4], OpPhase::loop);
  EXPECT_EQ(s.step[2], 0);  // the tile loaded once is waited for before the pre phase
  EXPECT_EQ(s.step[3], 1);
  EXPECT_EQ(s.pre_steps, 2);
  EXPECT_EQ(s.step[4], 1);  // after Y's load; exp(X²) was ready before the loop
  EXPECT_EQ(s.loop_steps, 3);
  // Tiles loaded once first, then the pre phase, then the loop.
  EXPECT_EQ(s.order, (std::vector<int32_t>{0, 2, 3, 1, 4, 5, 6}));
  // Once after the tile loaded once, once after each pre step; per iteration 2 + 1; none after.
  EXPECT_EQ(block_barriers(b, s), 1 + 2 + 3 * 4);
  // X² is read only before the loop: its bytes are free once exp has read it. exp(X²) is read in
  // every iteration: it lives to the loop's end, so the loop's own values never share its bytes.
  const std::vector<TensorLifetime> life = tensor_lifetimes(b, s, false);
  EXPECT_EQ(life[sq.index()].first, 0);
  EXPECT_EQ(life[sq.index()].last, 1);
  EXPECT_EQ(life[ex.index()].first, 1);
  EXPECT_EQ(life[ex.index()].last, s.time(OpPhase::loop, s.loop_steps - 1));
  EXPECT_FALSE(life[m.index()].overlaps(life[sq.index()]));
  EXPECT_TRUE(life[m.index()].overlaps(life[ex.index()]));
  // A loop of one iteration has no pre phase.
  Graph once = b;
  once.forloop = 1;
  once.params[1].shape = Shape({16, 64});
  EXPECT_EQ(schedule_block_ops(once).pre_steps, 0);
}

TEST(OpOrder, EpilogueOperandsAreReadAfterTheLoopAndLiveThroughIt) {
  // O = X·W + 2·R: R's tile (fmap φ) is loaded once and doubled before the loop; the add after
  // the loop reads the double with the accumulated product. The double's bytes live from before
  // the loop to that add, so neither the loop's tiles nor the add's result may share them.
  Graph k;
  TensorId x = k.add_input("X", {16, 64});
  TensorId w = k.add_input("W", {64, 32});
  TensorId r = k.add_input("R", {16, 32});
  Graph b = make_block_graph({k.type(x), k.type(w), k.type(r)}, Dim3{2, 1, 1}, 4);
  TensorId xt = b.add(OpKind::input_iterator, {}, test::iter(0, {kPhi, kPhi, kPhi}, 1));  // [16, 16]
  TensorId wt = b.add(OpKind::input_iterator, {}, test::iter(1, {1, kPhi, kPhi}, 0));     // [16, 16]
  TensorId rt = b.add(OpKind::input_iterator, {}, test::iter(2, {1, kPhi, kPhi}, kPhi));  // [16, 16]
  TensorId twice = b.add(OpKind::mul, {rt}, test::scalar("2"));
  TensorId mm = b.add(OpKind::matmul, {xt, wt});
  TensorId acc = b.add(OpKind::accum, {mm}, test::accum_sum());
  TensorId sum = b.add(OpKind::add, {acc, twice});
  b.add(OpKind::output_saver, {sum}, test::saver(0, {1, kPhi, kPhi}));
  const BlockSchedule s = schedule_block_ops(b);
  EXPECT_EQ(s.phase[3], OpPhase::pre);
  EXPECT_EQ(s.phase[4], OpPhase::loop);
  EXPECT_EQ(s.phase[6], OpPhase::post);
  EXPECT_EQ(s.step[6], 0);  // the loop's last barrier separates it from both its operands
  EXPECT_EQ(s.order, (std::vector<int32_t>{2, 3, 0, 1, 4, 5, 6, 7}));
  const std::vector<TensorLifetime> life = tensor_lifetimes(b, s, true);
  EXPECT_EQ(life[twice.index()].first, s.time(OpPhase::pre, 0));
  EXPECT_EQ(life[twice.index()].last, s.time(OpPhase::post, 0));
  EXPECT_TRUE(life[twice.index()].overlaps(life[mm.index()]));
  EXPECT_TRUE(life[twice.index()].overlaps(life[sum.index()]));
  EXPECT_TRUE(life[acc.index()].overlaps(life[sum.index()]));
}

TEST(OpOrder, ReshapesSeparateNothing) {
  Graph k;
  TensorId x = k.add_input("X", {16, 64});
  Graph b = make_block_graph({k.type(x)}, Dim3{4, 1, 1}, 1);
  TensorId t = b.add(OpKind::input_iterator, {}, test::iter(0, {0, kPhi, kPhi}, kPhi));  // [4, 64]
  OpAttrs r;
  r.shape = Shape({4, 8, 8});
  TensorId v = b.add(OpKind::reshape, {b.add(OpKind::exp, {t})}, r);
  OpAttrs back;
  back.shape = Shape({4, 64});
  b.add(OpKind::output_saver, {b.add(OpKind::reshape, {v}, back)}, test::saver(0, {0, kPhi, kPhi}));
  const BlockSchedule s = schedule_block_ops(b);
  EXPECT_EQ(s.loop_steps, 3);  // load, exp, save (the reshapes with it: they emit nothing)
  EXPECT_EQ(s.step[1], 1);
  EXPECT_EQ(s.step[2], 2);
  EXPECT_EQ(s.step[3], 2);
  EXPECT_EQ(s.step[4], 2);
  const std::vector<TensorLifetime> life = tensor_lifetimes(b, s, false);
  // exp's result owns the bytes of both reshapes; the save reads it at step 2.
  EXPECT_EQ(life[2].alias_of, 1);
  EXPECT_EQ(life[3].alias_of, 2);
  EXPECT_EQ(life[1].first, 1);
  EXPECT_EQ(life[1].last, 2);
}

TEST(OpOrder, ElementWiseOpsThatOnlyASumReadsAreFoldedIntoIt) {
  // X² read by its row sum alone: folded (no step, no storage). exp(X) read by a sum and saved:
  // a tile. X·3 (binary) read by a sum: not folded (one operand only).
  Graph k;
  TensorId x = k.add_input("X", {16, 64});
  Graph b = make_block_graph({k.type(x)}, Dim3{4, 1, 1}, 1);
  TensorId xt = b.add(OpKind::input_iterator, {}, test::iter(0, {0, kPhi, kPhi}, kPhi));  // [4, 64]
  const OpAttrs row = attrs::sum(1);
  TensorId sq = b.add(OpKind::sqr, {xt});
  TensorId sq_sum = b.add(OpKind::sum, {sq}, row);
  TensorId ex = b.add(OpKind::exp, {xt});
  TensorId ex_sum = b.add(OpKind::sum, {ex}, row);
  TensorId scaled = b.add(OpKind::mul, {xt}, attrs::scalar(*parse_scalar("3")));
  TensorId scaled_sum = b.add(OpKind::sum, {scaled}, row);
  TensorId total = b.add(OpKind::add, {b.add(OpKind::add, {sq_sum, ex_sum}), scaled_sum});
  b.add(OpKind::output_saver, {b.add(OpKind::mul, {ex, total})}, test::saver(0, {0, kPhi, kPhi}));
  const BlockSchedule s = schedule_block_ops(b);
  for (size_t i = 0; i < b.ops.size(); ++i) EXPECT_EQ(s.folded[i], i == 1) << "op " << i;
  EXPECT_EQ(s.step[1], 1);  // with its operand's readers
  EXPECT_EQ(s.step[2], 1);  // the sum of squares, right after the load
  EXPECT_EQ(s.step[4], 2);  // exp's sum, a step after exp
  const std::vector<TensorLifetime> life = tensor_lifetimes(b, s, false);
  EXPECT_FALSE(life[sq.index()].stored);
  EXPECT_EQ(life[sq.index()].alias_of, xt.value);
  EXPECT_TRUE(life[ex.index()].stored);
  EXPECT_TRUE(life[scaled.index()].stored);
  // The load's tile lives until the folded sum has read it, and on: exp and the scaling read it too.
  EXPECT_GE(life[xt.index()].last, s.step[2]);
  // Without the sum of squares, nothing is folded: a result the saver reads is a tile.
  Graph saved = b;
  saved.ops[2].inputs[0] = ex;
  EXPECT_FALSE(schedule_block_ops(saved).folded[1]);
}

TEST(OpOrder, StepsRespectDependenciesAndAreTheEarliest) {
  const auto graphs = test::example_block_graphs();
  ASSERT_GE(graphs.size(), 8u);
  for (const auto& [name, b] : graphs) {
    const BlockSchedule s = schedule_block_ops(b);
    const std::vector<int> made_by = producers(b);
    std::vector<int> position(b.ops.size(), -1);
    for (size_t p = 0; p < s.order.size(); ++p) position[static_cast<size_t>(s.order[p])] = static_cast<int>(p);
    for (size_t i = 0; i < b.ops.size(); ++i) {
      if (s.phase[i] == OpPhase::dead) {
        EXPECT_EQ(position[i], -1) << name << " op " << i;
        continue;
      }
      ASSERT_GE(position[i], 0) << name << " op " << i << " is live but not ordered";
      bool tight = s.step[i] == 0;
      for (TensorId t : b.ops[i].inputs) {
        const size_t p = static_cast<size_t>(made_by[t.index()]);
        EXPECT_LT(position[p], position[i]) << name << ": op " << i << " runs before op " << p << " it reads";
        if (s.phase[p] != s.phase[i] || (b.ops[p].kind == OpKind::accum && b.forloop > 1)) continue;
        const int gap = b.ops[p].kind == OpKind::reshape || s.folded[p] ? 0 : 1;
        EXPECT_GE(s.step[i], s.step[p] + gap) << name << ": op " << i << " shares a step with op " << p;
        tight = tight || s.step[i] == s.step[p] + gap;
      }
      EXPECT_TRUE(tight) << name << ": op " << i << " could run a step earlier";
    }
  }
}

TEST(OpOrder, LifetimesCoverEveryReadAndLoopCarriedValues) {
  for (const auto& [name, b] : test::example_block_graphs()) {
    const BlockSchedule s = schedule_block_ops(b);
    for (const bool pipelined : {false, true}) {
      const std::vector<TensorLifetime> life = tensor_lifetimes(b, s, pipelined);
      for (size_t i = 0; i < b.ops.size(); ++i) {
        if (s.phase[i] == OpPhase::dead) continue;
        const int32_t now = s.time(s.phase[i], s.step[i]);
        for (TensorId t : b.ops[i].inputs) {
          size_t o = t.index();
          while (life[o].alias_of >= 0) o = static_cast<size_t>(life[o].alias_of);
          ASSERT_TRUE(life[o].stored) << name;
          EXPECT_LE(life[o].first, now) << name << " tensor " << o;
          EXPECT_GE(life[o].last, now) << name << " tensor " << o;
        }
        const Op& op = b.ops[i];
        const bool carried =
            b.forloop > 1 &&
            (op.kind == OpKind::accum || (op.kind == OpKind::input_iterator && (op.attrs.fmap == kPhi || pipelined)));
        if (carried) {
          const TensorLifetime& l = life[op.outputs[0].index()];
          EXPECT_EQ(l.first, 0) << name << " op " << i;
          EXPECT_GE(l.last, s.loop_steps - 1) << name << " op " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace mugraph
