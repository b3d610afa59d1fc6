// Layout choice (layout_choice.h): the bank-conflict model on access patterns worked out by
// hand, the layouts' strides, the constraints every chosen layout satisfies, and the choice
// against a brute force over every assignment.
#include "mugraph/layout_choice.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "example_block_graphs.h"
#include "test_graphs.h"

namespace mugraph {
namespace {

std::vector<int64_t> lanes(int64_t stride, int64_t count = 32, int64_t base = 0) {
  std::vector<int64_t> a(32, -1);
  for (int64_t l = 0; l < count; ++l) a[static_cast<size_t>(l)] = base + l * stride;
  return a;
}

TEST(WarpWavefronts, BankConflictsAsTheHardwareCountsThem) {
  EXPECT_EQ(warp_wavefronts(lanes(2), 2), 1);     // 32 consecutive halves: 16 words, 16 banks
  EXPECT_EQ(warp_wavefronts(lanes(4), 4), 1);     // 32 consecutive words
  EXPECT_EQ(warp_wavefronts(lanes(128), 4), 32);  // a column of 128-byte rows: one bank
  EXPECT_EQ(warp_wavefronts(lanes(132), 4), 1);   // ... with 4 bytes of padding per row
  EXPECT_EQ(warp_wavefronts(lanes(0), 4), 1);     // one word: a broadcast
  EXPECT_EQ(warp_wavefronts(lanes(8), 4), 2);     // every other word: two lanes per bank
  EXPECT_EQ(warp_wavefronts(lanes(4, 0), 4), 0);  // no lane active
  // 16-byte accesses go in four phases of 8 lanes: consecutive vectors take one wavefront each.
  EXPECT_EQ(warp_wavefronts(lanes(16), 16), 4);
  // ldmatrix's 8 rows of 16 bytes in one phase: 128-byte rows share 4 banks (8 wavefronts),
  // 144-byte rows (16 bytes of padding) cover all 32 banks.
  EXPECT_EQ(warp_wavefronts(lanes(128, 8), 16), 8);
  EXPECT_EQ(warp_wavefronts(lanes(144, 8), 16), 1);
  EXPECT_EQ(warp_wavefronts(lanes(80, 8), 16), 1);  // 40 halves a row (a padded [., 32] f16 tile)
  EXPECT_EQ(warp_wavefronts(lanes(64, 8), 16), 4);
}

TEST(TileLayout, StridesAndSpan) {
  const Shape s{4, 6};
  EXPECT_EQ(layout_strides(s, {}), (std::vector<int64_t>{6, 1}));
  EXPECT_EQ(layout_elements(s, {}), 24);
  EXPECT_EQ(layout_strides(s, {false, 2}), (std::vector<int64_t>{8, 1}));
  EXPECT_EQ(layout_elements(s, {false, 2}), 32);
  EXPECT_EQ(layout_strides(s, {true, 0}), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(layout_strides(s, {true, 2}), (std::vector<int64_t>{1, 6}));
  EXPECT_EQ(layout_elements(s, {true, 2}), 36);
  // Batch dims are row-major over what the last two span.
  EXPECT_EQ(layout_strides(Shape{2, 3, 4}, {true, 1}), (std::vector<int64_t>{16, 1, 4}));
  EXPECT_EQ(layout_elements(Shape{2, 3, 4}, {true, 1}), 32);
  EXPECT_EQ(layout_strides(Shape{5}, {}), (std::vector<int64_t>{1}));
  EXPECT_EQ((TileLayout{false, 8}).str(), "rows padded by 8");
  EXPECT_EQ((TileLayout{true, 2}).str(), "transposed, columns padded by 2");
  EXPECT_EQ(TileLayout{}.str(), "row-major");
  // Reading a padded [4, 1] column broadcast to [4, 6].
  EXPECT_EQ(broadcast_read_strides(Shape{4, 1}, {3, 1}, Shape{4, 6}), (std::vector<int64_t>{3, 0}));
}

/// Bytes per element of tensor t in shared memory (summing accumulators hold f32).
int element_bytes(const Graph& g, TensorId t) {
  for (const Op& op : g.ops)
    for (TensorId o : op.outputs)
      if (o == t && op.kind == OpKind::accum && op.attrs.dim == kPhi) return 4;
  return dtype_bytes(g.type(t).dtype);
}

int64_t extra_bytes(const Graph& g, const std::vector<TileLayout>& layouts) {
  int64_t b = 0;
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    const Shape& s = g.tensors[t].type.shape;
    b +=
        (layout_elements(s, layouts[t]) - layout_elements(s, {})) * element_bytes(g, TensorId(static_cast<int32_t>(t)));
  }
  return b;
}

/// A layout problem for block graph g as an emitter might pose it: loads by cp.async where rows
/// are whole 16-byte vectors (or by TMA in the loop, with `tma`), matmuls on wgmma or not, and
/// an allowance of padding bytes standing in for the shared-memory limit.
LayoutProblem problem_for(const Graph& g, const BlockSchedule& s, bool tma, bool wgmma, int64_t allowance) {
  LayoutProblem p;
  p.body = &g;
  p.schedule = &s;
  p.loads.assign(g.ops.size(), TileLoad::none);
  p.wgmma.assign(g.ops.size(), false);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (op.kind == OpKind::input_iterator) {
      const TensorType& t = g.type(op.outputs[0]);
      const bool vector = t.shape[t.shape.rank() - 1] * dtype_bytes(t.dtype) % 16 == 0;
      const bool streamed = g.forloop > 1 && op.attrs.fmap != kPhi;
      p.loads[i] = !vector ? TileLoad::copy : tma && streamed ? TileLoad::tma : TileLoad::cp_async;
    }
    p.wgmma[i] = wgmma && op.kind == OpKind::matmul;
  }
  p.fits = [&g, allowance](const std::vector<TileLayout>& l) { return extra_bytes(g, l) <= allowance; };
  return p;
}

TEST(LayoutChoice, Figure3bKeepsTheRowsItsSumReadsEightAtATimeDense) {
  // The sum over X²'s rows reads X's [16, 256] tile itself, the sqr folded into it (op_order.h),
  // and is split (sum_rules.h: 8 lanes per row for 16 rows and 128 threads), each lane reading
  // 16 bytes at a time: a warp reads 128 contiguous bytes of each of 4 rows, 512 bytes, which
  // take 4 wavefronts however the rows fall on the banks, 4 such accesses per warp per
  // iteration. Padding rows by 8 halves keeps them 16-byte aligned and gains nothing; by 2, the
  // sum reads element by element (sum_reads_vectors), 4 rows of 16 bytes sharing 4 banks at a
  // time. The sqr's own tile is never stored: it costs nothing and keeps the default layout.
  const Graph k = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f16);
  const Graph& b = k.bodies[0];
  const BlockSchedule s = schedule_block_ops(b);
  const LayoutProblem p = problem_for(b, s, false, false, std::numeric_limits<int64_t>::max());
  const TensorId x_tile(0), sqr_out(3);
  ASSERT_EQ(b.type(x_tile).shape, (Shape{16, 256}));
  ASSERT_TRUE(s.folded[3]);
  EXPECT_EQ(tensor_wavefronts(p, sqr_out, {}), 0);
  EXPECT_EQ(tensor_wavefronts(p, x_tile, {}), tensor_wavefronts(p, x_tile, {false, 8}));
  // Element by element: 32 accesses of 4 wavefronts per warp where 16-byte ones took 4 of 4.
  EXPECT_EQ(tensor_wavefronts(p, x_tile, {false, 2}) - tensor_wavefronts(p, x_tile, {}), 16 * 4 * (32 * 4 - 4 * 4));
  const LayoutChoice c = choose_layouts(p);
  EXPECT_TRUE(c.fits && c.optimal) << c.method;
  EXPECT_EQ(c.layouts[x_tile.index()], TileLayout{});
  EXPECT_EQ(c.layouts[sqr_out.index()], TileLayout{});
  // mma.sync reads the mul's [16, 256] result through ldmatrix: eight 512-byte rows per phase
  // share four banks. W's [256, 32] tile through ldmatrix.trans: 64-byte rows, four-way. Both
  // get 16 bytes of padding per row (cp.async's vectors stay aligned).
  EXPECT_EQ(c.layouts[5], (TileLayout{false, 8}));
  EXPECT_EQ(c.layouts[2], (TileLayout{false, 8}));
  EXPECT_LT(tensor_wavefronts(p, TensorId(2), {false, 8}), tensor_wavefronts(p, TensorId(2), {}));
  EXPECT_LT(c.wavefronts * 2, c.row_major_wavefronts);
  // With no padding allowed, everything stays as dense as it was.
  const LayoutProblem tight = problem_for(b, s, false, false, 0);
  const LayoutChoice none = choose_layouts(tight);
  EXPECT_TRUE(none.fits);
  EXPECT_EQ(none.extra_bytes, 0);
  EXPECT_LE(none.wavefronts, none.row_major_wavefronts);
}

TEST(LayoutChoice, OperandsReadInPlaceCostNoWavefrontsAndTurnTheMatmulAround) {
  // Figure 3b on sm_90a with TMA loads: W's [256, 32] tile (tensor 2) read in place by wgmma
  // costs nothing the load/store units do, and the matmul is no longer swapped: its A (the mul's
  // [16, 256] result, tensor 5) is staged as the instruction's A, 64 rows a job (16 of them
  // real), not as the swapped instruction's B.
  const Graph k = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f16);
  const Graph& b = k.bodies[0];
  const BlockSchedule s = schedule_block_ops(b);
  LayoutProblem staged = problem_for(b, s, true, true, std::numeric_limits<int64_t>::max());
  LayoutProblem in_place = staged;
  in_place.swizzle.assign(b.tensors.size(), 0);
  in_place.swizzle[2] = 64;
  ASSERT_EQ(b.type(TensorId(2)).shape, (Shape{256, 32}));
  EXPECT_GT(tensor_wavefronts(staged, TensorId(2), {}), 0);
  EXPECT_EQ(tensor_wavefronts(in_place, TensorId(2), {}), 0);  // the copy engine writes it, wgmma reads it
  // The mul's result: the rows that exist are staged either way, each element read once in
  // 16-byte chunks, so the same count on either side of the instruction.
  EXPECT_EQ(tensor_wavefronts(in_place, TensorId(5), {}), tensor_wavefronts(staged, TensorId(5), {}));
  const LayoutChoice c = choose_layouts(in_place);
  EXPECT_TRUE(c.fits && c.optimal) << c.method;
  EXPECT_TRUE(c.layouts[2].is_row_major());  // a TMA box
  EXPECT_LT(c.wavefronts, choose_layouts(staged).wavefronts);
}

TEST(LayoutChoice, AnEightRowOperandIsReadThroughLdmatrixX2) {
  // GatedMLP's X tile [8, 256] (f16, 512-byte rows) is A of both matmuls, read on sm_80 through
  // ldmatrix.x2 (8 rows, half a 16-row block): per k16 step two phases of eight 16-byte rows.
  // Row-major the eight rows share four banks (8 wavefronts a phase); padded by 16 bytes each
  // row starts four banks on (1). Per block: 16 iterations × 2 matmuls × 4 result blocks along
  // N (each warp reloads A) × 16 k16 steps × 2 phases, at 8 or 1 wavefronts; the cp.async
  // writes (a warp's 32 vectors fill one row either way) are the same.
  const Graph k = test::gated_mlp_fused(8, 4096, 4096, 128, 16, DType::f16);
  const Graph& b = k.bodies[0];
  const BlockSchedule s = schedule_block_ops(b);
  const LayoutProblem p = problem_for(b, s, false, false, std::numeric_limits<int64_t>::max());
  const TensorId x(0);
  ASSERT_EQ(b.type(x).shape, (Shape{8, 256}));
  EXPECT_EQ(tensor_wavefronts(p, x, {}) - tensor_wavefronts(p, x, {false, 8}), 16 * 2 * 4 * 16 * 2 * (8 - 1));
  EXPECT_EQ(choose_layouts(p).layouts[x.index()], (TileLayout{false, 8}));
}

TEST(LayoutChoice, ChosenLayoutsSatisfyEveryConstraint) {
  int checked = 0;
  for (const auto& [name, b] : test::example_block_graphs()) {
    const BlockSchedule s = schedule_block_ops(b);
    for (const bool tma : {false, true})
      for (const bool wgmma : {false, true}) {
        const LayoutProblem p = problem_for(b, s, tma, wgmma, 4096);
        const LayoutChoice c = choose_layouts(p);
        ASSERT_EQ(c.layouts.size(), b.tensors.size());
        EXPECT_TRUE(c.fits) << name;
        EXPECT_LE(c.wavefronts, c.row_major_wavefronts) << name;
        EXPECT_LE(extra_bytes(b, c.layouts), 4096) << name;
        for (size_t i = 0; i < b.ops.size(); ++i) {
          const Op& op = b.ops[i];
          if (s.phase[i] == OpPhase::dead) continue;
          for (TensorId t : op.outputs) {
            const TileLayout& l = c.layouts[t.index()];
            const std::vector<TileLayout> allowed = allowed_layouts(p, t);
            EXPECT_NE(std::find(allowed.begin(), allowed.end(), l), allowed.end()) << name << " t" << t.value;
            const int esz = element_bytes(b, t);
            // The copy engine writes dense boxes; cp.async writes whole aligned vectors along
            // the source's rows; accumulators and reshapes stay dense; rank 1 has no choice.
            if (p.loads[i] == TileLoad::tma || op.kind == OpKind::reshape || b.type(t).shape.rank() < 2 ||
                (op.kind == OpKind::accum && op.attrs.dim == kPhi)) {
              EXPECT_TRUE(l.is_row_major()) << name << " t" << t.value;
            }
            if (p.loads[i] == TileLoad::cp_async) {
              EXPECT_TRUE(!l.transposed && l.pad * esz % 16 == 0) << name;
            }
          }
          if (op.kind == OpKind::reshape) {
            EXPECT_TRUE(c.layouts[op.inputs[0].index()].is_row_major()) << name;
          }
        }
        ++checked;
      }
  }
  EXPECT_GE(checked, 4 * 8);
}

TEST(LayoutChoice, ExactAgainstBruteForce) {
  // Every assignment of allowed layouts, with an allowance of padding that binds (half of what
  // the unconstrained choice would use): the choice has the fewest wavefronts, then bytes.
  int compared = 0;
  for (const auto& [name, b] : test::example_block_graphs()) {
    const BlockSchedule s = schedule_block_ops(b);
    for (const bool wgmma : {false, true}) {
      const LayoutChoice free = choose_layouts(problem_for(b, s, false, wgmma, std::numeric_limits<int64_t>::max()));
      const int64_t allowance = free.extra_bytes / 2;
      const LayoutProblem p = problem_for(b, s, false, wgmma, allowance);
      std::vector<std::vector<TileLayout>> options;
      std::vector<std::vector<int64_t>> cost;
      int64_t combos = 1;
      for (size_t t = 0; t < b.tensors.size(); ++t) {
        const TensorId id(static_cast<int32_t>(t));
        options.push_back(allowed_layouts(p, id));
        cost.emplace_back();
        for (const TileLayout& l : options.back()) cost.back().push_back(tensor_wavefronts(p, id, l));
        combos *= static_cast<int64_t>(options.back().size());
      }
      if (combos > 200000) continue;
      std::pair<int64_t, int64_t> best{std::numeric_limits<int64_t>::max(), 0};
      std::vector<size_t> pick(b.tensors.size(), 0);
      std::vector<TileLayout> layouts(b.tensors.size());
      for (int64_t n = 0; n < combos; ++n) {
        int64_t rest = n, waves = 0;
        for (size_t t = 0; t < pick.size(); ++t) {
          pick[t] = static_cast<size_t>(rest % static_cast<int64_t>(options[t].size()));
          rest /= static_cast<int64_t>(options[t].size());
          layouts[t] = options[t][pick[t]];
          waves += cost[t][pick[t]];
        }
        const int64_t bytes = extra_bytes(b, layouts);
        if (bytes <= allowance) best = std::min(best, {waves, bytes});
      }
      const LayoutChoice c = choose_layouts(p);
      EXPECT_TRUE(c.optimal) << name;
      EXPECT_EQ(std::make_pair(c.wavefronts, c.extra_bytes), best) << name << (wgmma ? " wgmma" : "");
      ++compared;
    }
  }
  EXPECT_GE(compared, 6);
}

TEST(LayoutChoice, ABudgetOfFitChecksStillGivesLayoutsThatFit) {
  const Graph k = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f16);
  const Graph& b = k.bodies[0];
  const BlockSchedule s = schedule_block_ops(b);
  LayoutProblem p = problem_for(b, s, false, false, 64);
  p.fit_budget = 3;
  const LayoutChoice c = choose_layouts(p);
  EXPECT_LE(c.fit_checks, 3);
  if (c.fits) {
    EXPECT_LE(extra_bytes(b, c.layouts), 64);
  } else {
    EXPECT_EQ(c.layouts, std::vector<TileLayout>(b.tensors.size()));
  }
  if (!c.optimal) {
    EXPECT_EQ(c.method, "exact (budget reached)");
  }
}

}  // namespace
}  // namespace mugraph
