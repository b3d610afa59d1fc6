// Repeats turned into broadcasts before a search (src/search/lift_repeats.h).
#include "lift_repeats.h"

#include <gtest/gtest.h>

#include <random>

#include "mugraph/frontend.h"
#include "mugraph/interp.h"
#include "mugraph/validate.h"
#include "mugraph/verify.h"
#include "search_fixtures.h"

namespace mugraph::search_detail {
namespace {

int count_kind(const Graph& g, OpKind kind) {
  int n = 0;
  for (const Op& op : g.ops) n += op.kind == kind;
  return n;
}

/// The rewritten program is a valid program with the same inputs and outputs, computing the
/// same values: the same floats (each value is the same ops on the same operands) and the
/// verifier's verdict.
void expect_same_function(const Graph& program, const Graph& lifted) {
  auto rejection = validate(lifted, default_target());
  ASSERT_FALSE(rejection.has_value()) << rejection->str();
  EXPECT_EQ(lifted.output_names, program.output_names);
  std::vector<TensorType> want_in, got_in;
  for (const Op& op : program.ops)
    if (op.kind == OpKind::input) want_in.push_back(program.type(op.outputs[0]));
  for (const Op& op : lifted.ops)
    if (op.kind == OpKind::input) got_in.push_back(lifted.type(op.outputs[0]));
  EXPECT_EQ(want_in, got_in);
  std::vector<HostTensor> inputs = random_inputs(program, 7);
  std::vector<HostTensor> want = run_float(program, inputs), got = run_float(lifted, inputs);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(want[i].type, got[i].type) << "output " << i;
    EXPECT_EQ(want[i].data, got[i].data) << "output " << i;
  }
  EXPECT_EQ(verify(program, lifted).verdict, Verdict::equivalent);
}

TEST(LiftRepeats, GroupQueryAttentionReadsKeysAndValuesThroughABroadcast) {
  const Graph program = parse_program(search_testing::kTiledGqaSmall);
  const RepeatLift r = lift_repeats(program);
  EXPECT_EQ(r.lifted, (std::vector<std::string>{"repeat (KR)", "repeat (VR)"}));
  EXPECT_TRUE(r.kept.empty());
  expect_same_function(program, r.program);
  // No copies: Q viewed as [4, 2, 16, 32], K and V as [1, 2, ...], O merged back from
  // [4, 2, 16, 32]. The four reshapes are views.
  EXPECT_EQ(count_kind(r.program, OpKind::repeat), 0);
  EXPECT_EQ(count_kind(r.program, OpKind::reshape), 4);
  for (const Op& op : r.program.ops) {
    if (op.kind != OpKind::matmul) continue;
    EXPECT_EQ(r.program.type(op.outputs[0]).shape.rank(), 4);
  }
}

TEST(LiftRepeats, TheFormOfExpandOrRepeatInterleaveReadsItsUnitDimensionThroughABroadcast) {
  // PyTorch's repeat_kv: K[:, :, None].expand(...).reshape(...): query head h reads K[h / 4].
  const Graph program = parse_program(R"(
input Q[1, 8, 16, 32]
input K[1, 2, 32, 64]
K1 = reshape(K, shape=[1, 2, 1, 32, 64])
KE = repeat(K1, dim=2, times=4)
KR = reshape(KE, shape=[1, 8, 32, 64])
O = exp(matmul(Q, KR))
output O
)");
  const RepeatLift r = lift_repeats(program);
  EXPECT_EQ(r.lifted, (std::vector<std::string>{"repeat (KR)"}));
  expect_same_function(program, r.program);
  EXPECT_EQ(count_kind(r.program, OpKind::repeat), 0);
  // The matmul reads K1 itself: Q [1, 2, 4, 16, 32] times [1, 2, 1, 32, 64].
  for (const Op& op : r.program.ops) {
    if (op.kind != OpKind::matmul) continue;
    EXPECT_EQ(r.program.type(op.inputs[0]).shape, (Shape{1, 2, 4, 16, 32}));
    EXPECT_EQ(r.program.type(op.inputs[1]).shape, (Shape{1, 2, 1, 32, 64}));
  }
}

TEST(LiftRepeats, OpsThatCommuteWithARepeatRunOnOneCopyAndTheOutputIsRepeatedLast) {
  const Graph program = parse_program(R"(
input Y[4, 4, 16]
R = repeat(Y, dim=0, times=2)
O = div(R, sqrt(div(sum(sqr(R), dim=2), 16)))
output O
)");
  const RepeatLift r = lift_repeats(program);
  EXPECT_EQ(r.lifted, (std::vector<std::string>{"repeat (R)"}));
  expect_same_function(program, r.program);
  // The norm reads Y as [1, 4, 4, 16]; its result is repeated to [2, 4, 4, 16] and merged.
  ASSERT_EQ(count_kind(r.program, OpKind::repeat), 1);
  const Op& last_but_one = r.program.ops[r.program.ops.size() - 2];
  EXPECT_EQ(last_but_one.kind, OpKind::repeat);
  EXPECT_EQ(r.program.type(last_but_one.inputs[0]).shape, (Shape{1, 4, 4, 16}));
  EXPECT_EQ(r.program.ops.back().kind, OpKind::reshape);
  EXPECT_EQ(r.program.output_names, (std::vector<std::string>{"O"}));
}

TEST(LiftRepeats, AValueMergedBackIntoAReshapeIsOneView) {
  // O merged back and reshaped to V: one reshape of the repeat, which the repeat's kernel writes
  // in place as the output (two reshapes in a row would make the second a copy).
  const Graph program = parse_program(R"(
input Z[4, 32]
Q = repeat(sqrt(exp(Z)), dim=0, times=2)
O = add(Q, 1)
V = reshape(O, shape=[4, 64])
output V
)");
  const RepeatLift r = lift_repeats(program);
  EXPECT_EQ(r.lifted, (std::vector<std::string>{"repeat (Q)"}));
  expect_same_function(program, r.program);
  const Op& last = r.program.op(r.program.tensor(r.program.outputs[0]).producer);
  ASSERT_EQ(last.kind, OpKind::reshape);
  EXPECT_EQ(r.program.op(r.program.tensor(last.inputs[0]).producer).kind, OpKind::repeat);
  EXPECT_EQ(count_kind(r.program, OpKind::reshape), 2);  // the view of sqrt(exp(Z)), and V
}

TEST(LiftRepeats, ARepeatReadAlongItsRepeatedDimensionIsKeptWithTheReason) {
  const Graph sum_over = parse_program(R"(
input X[4, 16]
R = repeat(X, dim=0, times=2)
S = sum(exp(R), dim=0)
output S
)");
  RepeatLift r = lift_repeats(sum_over);
  EXPECT_TRUE(r.lifted.empty());
  EXPECT_EQ(r.kept, (std::vector<std::string>{"repeat (R): sum (S) sums over the repeated dimension"}));
  EXPECT_EQ(r.program, sum_over);

  const Graph contracted = parse_program(R"(
input X[4, 16]
input W[32, 8]
R = repeat(X, dim=1, times=2)
O = matmul(R, W)
output O
)");
  r = lift_repeats(contracted);
  EXPECT_TRUE(r.lifted.empty());
  ASSERT_EQ(r.kept.size(), 1u);
  EXPECT_NE(r.kept[0].find("contracts it"), std::string::npos) << r.kept[0];

  // Splitting E, which an op the search grows makes, would cut it from the add.
  const Graph reshaped_value = parse_program(R"(
input X[4, 16]
input Y[8, 16]
E = exp(Y)
O = add(repeat(X, dim=0, times=2), E)
output O
)");
  r = lift_repeats(reshaped_value);
  EXPECT_TRUE(r.lifted.empty());
  ASSERT_EQ(r.kept.size(), 1u);
  EXPECT_NE(r.kept[0].find("reads E, which would need a reshape"), std::string::npos) << r.kept[0];
}

TEST(LiftRepeats, ARepeatReadByKeptOpsAloneIsLeftAsItIs) {
  const Graph program = parse_program(R"(
input X[4, 16]
R = repeat(X, dim=0, times=2)
O = reshape(R, shape=[128])
output R, O
)");
  const RepeatLift r = lift_repeats(program);
  EXPECT_TRUE(r.lifted.empty());
  EXPECT_TRUE(r.kept.empty());
  EXPECT_EQ(r.program, program);
}

TEST(LiftRepeats, RandomProgramsComputeWhatTheyComputedBefore) {
  // Random programs of repeats (both forms), element-wise ops with full and broadcast operands,
  // sums and batched matmuls on [*, 8, 8] tensors: every rewrite is a valid program with the
  // same function.
  std::mt19937 rng(2026);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  int lifted = 0, kept = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Graph g;
    std::vector<TensorId> pool{g.add_input("A", {4, 8, 8}, DType::f32), g.add_input("B", {8, 8, 8}, DType::f32),
                               g.add_input("C", {1, 8, 8}, DType::f32)};
    const int n_ops = 3 + static_cast<int>(pick(8));
    for (int i = 0; i < n_ops; ++i) {
      const TensorId a = pool[pick(3) ? pool.size() - 1 - pick(std::min<size_t>(pool.size(), 2)) : pick(pool.size())];
      const Shape sa = g.type(a).shape;
      // An operand that broadcasts with a: the same batch extent or 1.
      std::vector<TensorId> fits;
      for (TensorId t : pool)
        if (g.type(t).shape[0] == sa[0] || g.type(t).shape[0] == 1 || sa[0] == 1) fits.push_back(t);
      const TensorId b = fits[pick(fits.size())];
      OpAttrs at;
      switch (pick(9)) {
        case 0:
        case 1:  // a tiled repeat of a 4-batch or 1-batch tensor
          if (sa[0] == 8) break;
          at.dim = 0;
          at.times = 8 / sa[0];
          pool.push_back(g.add(OpKind::repeat, {a}, at));
          break;
        case 2: {  // the interleaved form: [4, 1, 8, 8] repeated to [4, 2, 8, 8], merged
          if (sa[0] != 4) break;
          OpAttrs unit, merge;
          unit.shape = Shape{4, 1, 8, 8};
          merge.shape = Shape{8, 8, 8};
          at.dim = 1;
          at.times = 2;
          pool.push_back(
              g.add(OpKind::reshape, {g.add(OpKind::repeat, {g.add(OpKind::reshape, {a}, unit)}, at)}, merge));
          break;
        }
        case 3:
          pool.push_back(g.add(OpKind::exp, {g.add(OpKind::mul, {a}, attrs::scalar(Scalar(0.125)))}));
          break;
        case 4:
          pool.push_back(g.add(pick(2) ? OpKind::add : OpKind::mul, {a, b}));
          break;
        case 5:
          pool.push_back(g.add(OpKind::matmul, {a, b}));
          break;
        case 6:  // a sum over a matrix dim, broadcast back; now and then over the batch dim
          at.dim = pick(4) ? 1 + static_cast<int32_t>(pick(2)) : 0;
          pool.push_back(g.add(OpKind::div, {a, g.add(OpKind::sum, {a}, at)}));
          break;
        case 7:
          pool.push_back(g.add(OpKind::sqr, {a}));
          break;
        default: {  // through a kept op and back
          OpAttrs flat, back;
          flat.shape = Shape{sa.numel()};
          back.shape = sa;
          pool.push_back(g.add(OpKind::reshape, {g.add(OpKind::reshape, {a}, flat)}, back));
          break;
        }
      }
    }
    g.mark_output(pool.back(), "O");
    const TensorId other = pool[3 + pick(pool.size() - 3)];
    if (other != pool.back()) g.mark_output(other, "P");
    ASSERT_FALSE(validate(g, default_target()).has_value()) << "trial " << trial;
    SCOPED_TRACE("trial " + std::to_string(trial));
    const RepeatLift r = lift_repeats(g);
    lifted += !r.lifted.empty();
    kept += !r.kept.empty();
    expect_same_function(g, r.program);
  }
  // Both outcomes came up often enough for the test to mean something.
  EXPECT_GT(lifted, 60);
  EXPECT_GT(kept, 10);
}

}  // namespace
}  // namespace mugraph::search_detail
