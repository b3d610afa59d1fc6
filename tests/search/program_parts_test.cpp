// Cutting a program at the ops the generator does not grow, and joining the parts' μGraphs
// around them (src/search/program_parts.h).
#include "program_parts.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "mugraph/frontend.h"
#include "mugraph/interp.h"
#include "mugraph/validate.h"
#include "mugraph/verify.h"
#include "search_parts.h"

namespace mugraph::search_detail {
namespace {

std::vector<std::string> input_names(const Graph& g) {
  std::vector<std::string> names;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::input) names.push_back(op.attrs.name);
  return names;
}

/// The split's order: each part and kept op once, and every tensor a unit reads made before it.
void expect_order_computes_before_reading(const Graph& program, const ProgramSplit& split) {
  ASSERT_EQ(split.order.size(), split.parts.size() + split.kept.size());
  std::set<int> seen(split.order.begin(), split.order.end());
  EXPECT_EQ(seen.size(), split.order.size());
  std::vector<bool> made(program.tensors.size(), false);
  for (const Op& op : program.ops)
    if (op.kind == OpKind::input) made[op.outputs[0].index()] = true;
  auto run = [&](OpId o) {
    for (TensorId in : program.op(o).inputs) EXPECT_TRUE(made[in.index()]) << "op " << o.value << " reads too early";
    for (TensorId out : program.op(o).outputs) made[out.index()] = true;
  };
  for (int unit : split.order) {
    if (unit < 0) {
      run(split.kept[static_cast<size_t>(-1 - unit)]);
      continue;
    }
    const ProgramPart& part = split.parts[static_cast<size_t>(unit)];
    for (TensorId in : part.inputs) EXPECT_TRUE(made[in.index()]) << "part " << unit << " reads too early";
    for (OpId o : part.ops) run(o);
  }
}

/// Joining the parts' own programs gives back the program's function: the same float outputs
/// (the same ops on the same values) and the verifier's verdict.
void expect_join_of_parts_computes_program(const Graph& program, const ProgramSplit& split) {
  std::vector<const Graph*> parts;
  for (const ProgramPart& p : split.parts) parts.push_back(&p.program);
  const Graph joined = join_parts(program, split, parts);
  auto rejection = validate(joined, default_target());
  ASSERT_FALSE(rejection.has_value()) << rejection->str();
  EXPECT_EQ(joined.output_names, program.output_names);
  EXPECT_EQ(input_names(joined), input_names(program));
  std::vector<HostTensor> inputs = random_inputs(program, 3);
  std::vector<HostTensor> want = run_float(program, inputs), got = run_float(joined, inputs);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(want[i].data, got[i].data) << "output " << i;
  EXPECT_EQ(verify(program, joined).verdict, Verdict::equivalent);
}

TEST(ProgramParts, AReshapeBetweenAMatmulAndANormCutsTheProgramInTwo) {
  const Graph program = parse_program(R"(
input X[4, 64]
input W[64, 64]
Y = reshape(matmul(X, W), shape=[4, 4, 16])
O = div(Y, sqrt(div(sum(sqr(Y), dim=2), 16)))
output O
)");
  const ProgramSplit split = split_program(program);
  ASSERT_EQ(split.parts.size(), 2u);
  ASSERT_EQ(split.kept.size(), 1u);
  EXPECT_EQ(kept_op_summary(program, split.kept[0]), "reshape (Y)");
  EXPECT_EQ(split.order, (std::vector<int>{0, -1, 1}));
  EXPECT_EQ(input_names(split.parts[0].program), (std::vector<std::string>{"X", "W"}));
  EXPECT_EQ(split.parts[0].ops.size(), 1u);
  ASSERT_EQ(split.parts[0].program.output_names.size(), 1u);
  // The matmul's result has no name in the program; the part's output is named after its id.
  EXPECT_EQ(split.parts[0].program.output_names[0], "t2");
  EXPECT_EQ(input_names(split.parts[1].program), (std::vector<std::string>{"Y"}));
  EXPECT_EQ(split.parts[1].program.output_names, (std::vector<std::string>{"O"}));
  EXPECT_EQ(split.parts[1].ops.size(), 5u);
  for (const ProgramPart& p : split.parts) EXPECT_FALSE(validate(p.program, default_target()).has_value());
  expect_order_computes_before_reading(program, split);
  expect_join_of_parts_computes_program(program, split);
}

TEST(ProgramParts, AKeptOpBetweenAValueAndItsOwnReaderSeparatesThem) {
  // add reads A directly and through two reshapes: exp and add are connected by A, but one part
  // holding both would read what a kept op makes of its own value. They are two parts.
  const Graph program = parse_program(R"(
input X[8, 16]
A = exp(X)
R = reshape(reshape(A, shape=[16, 8]), shape=[8, 16])
O = add(A, R)
output O
)");
  const ProgramSplit split = split_program(program);
  ASSERT_EQ(split.parts.size(), 2u);
  EXPECT_EQ(split.kept.size(), 2u);
  EXPECT_EQ(split.order, (std::vector<int>{0, -1, -2, 1}));
  // A is read by the second part and by the first reshape: one output of the first part.
  EXPECT_EQ(split.parts[0].program.output_names, (std::vector<std::string>{"A"}));
  EXPECT_EQ(input_names(split.parts[1].program), (std::vector<std::string>{"A", "R"}));
  expect_order_computes_before_reading(program, split);
  expect_join_of_parts_computes_program(program, split);
}

TEST(ProgramParts, AKeptOpOnAnInputDoesNotCutWhatReadsItFromTheRest) {
  // Q is reshaped, K's norm is not: both norms and the product stay one part (QKNorm's fusion of
  // both norms into the attention kernel needs them together), though the reshape comes first.
  const Graph program = parse_program(R"(
input Qf[8, 16]
input K[16, 8]
Q = reshape(Qf, shape=[4, 32])
KN = div(K, sqrt(sum(sqr(K), dim=0)))
QN = div(Q, sqrt(sum(sqr(Q), dim=1)))
O = matmul(QN, reshape(KN, shape=[32, 4]))
output O
)");
  const ProgramSplit split = split_program(program);
  // KN reaches the product through a reshape: its ops are a part of their own, and the reshape of
  // Qf does not cut QN from the product.
  ASSERT_EQ(split.parts.size(), 2u);
  EXPECT_EQ(split.parts[0].program.output_names, (std::vector<std::string>{"KN"}));
  EXPECT_EQ(split.parts[1].program.output_names, (std::vector<std::string>{"O"}));
  EXPECT_EQ(split.parts[1].ops.size(), 5u);  // sqr, sum, sqrt, div, matmul
  expect_order_computes_before_reading(program, split);
  expect_join_of_parts_computes_program(program, split);

  const Graph together = parse_program(R"(
input Qf[8, 16]
input K[32, 4]
Q = reshape(Qf, shape=[4, 32])
KN = div(K, sqrt(sum(sqr(K), dim=0)))
QN = div(Q, sqrt(sum(sqr(Q), dim=1)))
O = matmul(QN, KN)
output O
)");
  const ProgramSplit one = split_program(together);
  ASSERT_EQ(one.parts.size(), 1u);
  EXPECT_EQ(one.parts[0].ops.size(), 9u);
  EXPECT_EQ(input_names(one.parts[0].program), (std::vector<std::string>{"K", "Q"}));
  EXPECT_EQ(one.order, (std::vector<int>{-1, 0}));
  expect_join_of_parts_computes_program(together, one);
}

TEST(ProgramParts, IndependentChainsAreSeparatePartsAndProgramOutputsLeaveTheirParts) {
  // Two outputs: the element-wise chain's value Y is both a program output and what the repeat
  // reads; the sum to several values and the concat are kept; unused statements are left out.
  const Graph program = parse_program(R"(
input X[4, 32]
input Z[4, 32]
Y = mul(exp(X), 2)
P = sum(Y, dim=1, to=4)
Q = repeat(sqrt(exp(Z)), dim=0, times=2)
unused = silu(Z)
C = concat(P, P, dim=1)
O = add(Q, 1)
output Y, C, O
)");
  const ProgramSplit split = split_program(program);
  ASSERT_EQ(split.parts.size(), 3u);
  std::vector<std::string> kept;
  for (OpId k : split.kept) kept.push_back(kept_op_summary(program, k));
  EXPECT_EQ(kept, (std::vector<std::string>{"sum(..., to=4) (P)", "repeat (Q)", "concat (C)"}));
  EXPECT_EQ(split.parts[0].program.output_names, (std::vector<std::string>{"Y"}));
  // No part holds silu: it reaches no output.
  for (const ProgramPart& p : split.parts)
    for (OpId o : p.ops) EXPECT_NE(program.op(o).kind, OpKind::silu);
  expect_order_computes_before_reading(program, split);
  expect_join_of_parts_computes_program(program, split);
}

TEST(ProgramParts, PartInputNamesNeverClashWithTheProgramsNames) {
  // The program has an input called t2, which is the name an unnamed tensor 2 would get.
  const Graph program = parse_program(R"(
input t2[4, 16]
input X[4, 16]
Y = reshape(exp(X), shape=[16, 4])
O = reshape(add(Y, reshape(t2, shape=[16, 4])), shape=[4, 16])
output O
)");
  const ProgramSplit split = split_program(program);
  std::set<std::string> names;
  for (const ProgramPart& p : split.parts) {
    std::vector<std::string> in = input_names(p.program);
    EXPECT_EQ(std::set<std::string>(in.begin(), in.end()).size(), in.size());
    for (const std::string& n : p.program.output_names) EXPECT_TRUE(names.insert(n).second) << n;
  }
  expect_order_computes_before_reading(program, split);
  expect_join_of_parts_computes_program(program, split);
}

TEST(ProgramParts, AProgramOfLayoutOpsOnlyHasNoParts) {
  const Graph program = parse_program(R"(
input X[4, 16]
O = reshape(X, shape=[16, 4])
output O
)");
  const ProgramSplit split = split_program(program);
  EXPECT_TRUE(split.parts.empty());
  EXPECT_EQ(split.order, (std::vector<int>{-1}));
  expect_join_of_parts_computes_program(program, split);
}

TEST(ProgramParts, AJoinedVerdictSumsThePartsBoundsAndItsFloatRunChecksTheJoining) {
  const Graph program = parse_program(R"(
input X[4, 64]
Y = reshape(exp(X), shape=[64, 4])
O = mul(Y, 2)
output O
)");
  const ProgramSplit split = split_program(program);
  ASSERT_EQ(split.parts.size(), 2u);
  std::vector<const Graph*> graphs{&split.parts[0].program, &split.parts[1].program};
  const Graph joined = join_parts(program, split, graphs);
  VerifyResult a, b;
  a.verdict = b.verdict = Verdict::equivalent;
  a.tests_run = 5, b.tests_run = 3;
  a.bound = 1e-12, b.bound = 3e-12;
  a.guarantee = b.guarantee = true;
  VerifyOptions o;
  VerifyResult v = joined_verdict(program, joined, {&a, &b}, o);
  EXPECT_EQ(v.verdict, Verdict::equivalent);
  EXPECT_DOUBLE_EQ(v.bound, 4e-12);
  EXPECT_EQ(v.tests_run, 3);
  EXPECT_TRUE(v.guarantee);
  EXPECT_FALSE(v.opaque_functions);
  EXPECT_LE(v.float_max_rel_error, o.float_tolerance);
  // A part whose bound treats exp as an unknown function makes the joined bound one of that model.
  a.opaque_functions = true;
  EXPECT_TRUE(joined_verdict(program, joined, {&a, &b}, o).opaque_functions);
  // A part whose μGraph is not its program's own ops counts as is (null: its own ops).
  v = joined_verdict(program, joined, {nullptr, &b}, o);
  EXPECT_DOUBLE_EQ(v.bound, 3e-12);
  EXPECT_FALSE(v.opaque_functions);
  // Past delta, no guarantee.
  b.bound = 1e-3;
  EXPECT_FALSE(joined_verdict(program, joined, {&a, &b}, o).guarantee);
  // A joining gone wrong (the second part given another function) fails the float run.
  const Graph wrong_part = parse_program("input Y[64, 4]\nO = mul(Y, 3)\noutput O\n");
  ASSERT_EQ(input_names(split.parts[1].program), input_names(wrong_part));
  const Graph wrong = join_parts(program, split, {&split.parts[0].program, &wrong_part});
  v = joined_verdict(program, wrong, {&a, &b}, o);
  EXPECT_EQ(v.verdict, Verdict::not_equivalent);
  EXPECT_NE(v.reason.find("float relative error"), std::string::npos) << v.reason;
}

TEST(ProgramParts, CutsBeforeChainedMatmulsSeparateWhatNoOtherValueJoins) {
  // A norm, a gated MLP and its down projection with a residual: cut at the down projection's
  // operand, two parts.
  const Graph program = parse_program(R"(
input X[8, 64]
input G[64]
input W1[64, 128]
input W2[64, 128]
input W3[128, 64]
N = div(mul(X, G), sqrt(div(sum(sqr(X), dim=1), 64)))
M = mul(silu(matmul(N, W1)), matmul(N, W2))
O = add(X, matmul(M, W3))
output O
)");
  const std::vector<TensorId> cuts = chained_matmul_operands(program);
  ASSERT_EQ(cuts.size(), 1u);
  EXPECT_EQ(program.tensor(cuts[0]).name, "M");
  const ProgramSplit split = split_program(program, cuts);
  ASSERT_EQ(split.parts.size(), 2u);
  EXPECT_EQ(split.parts[0].program.output_names, (std::vector<std::string>{"M"}));
  EXPECT_EQ(input_names(split.parts[1].program), (std::vector<std::string>{"M", "W3", "X"}));
  EXPECT_TRUE(split.kept.empty());
  expect_order_computes_before_reading(program, split);
  expect_join_of_parts_computes_program(program, split);

  // A value that also reads the first matmul directly joins the parts again.
  const Graph bridged = parse_program(R"(
input X[8, 64]
input W1[64, 64]
input W2[64, 64]
H = matmul(X, W1)
O = add(matmul(exp(H), W2), H)
output O
)");
  const std::vector<TensorId> bridged_cuts = chained_matmul_operands(bridged);
  ASSERT_EQ(bridged_cuts.size(), 1u);
  EXPECT_EQ(split_program(bridged, bridged_cuts).parts.size(), 1u);
  // Inputs and matmuls of inputs alone are never cut.
  EXPECT_TRUE(
      chained_matmul_operands(parse_program("input X[8, 64]\ninput W[64, 64]\nO = matmul(X, W)\noutput O\n")).empty());
}

TEST(ProgramParts, ComputedMatmulOperandsAreWhatGrownOpsMakeForAMatmul) {
  // A LayerNorm before its projection, a bias, and gelu's tanh form: cut at the norm's output
  // alone (the matmul's other operand is an input; what follows the matmul is read by none).
  const Graph program = parse_program(R"(
input X[8, 64]
input W[64, 128]
input B[128]
C = sub(X, div(sum(X, dim=1), 64))
N = div(C, sqrt(add(div(sum(sqr(C), dim=1), 64), 1e-5)))
H = add(matmul(N, W), B)
A = div(H, add(exp(mul(add(H, mul(mul(sqr(H), H), 0.044715)), -1.59576912)), 1))
output A
)");
  EXPECT_TRUE(chained_matmul_operands(program).empty());
  const std::vector<TensorId> cuts = computed_matmul_operands(program);
  ASSERT_EQ(cuts.size(), 1u);
  EXPECT_EQ(program.tensor(cuts[0]).name, "N");
  const ProgramSplit split = split_program(program, cuts);
  ASSERT_EQ(split.parts.size(), 2u);
  EXPECT_EQ(split.parts[0].program.output_names, (std::vector<std::string>{"N"}));
  expect_order_computes_before_reading(program, split);
  expect_join_of_parts_computes_program(program, split);
  // Both operands computed: both cut. Inputs are never cut.
  const Graph both = parse_program("input X[8, 64]\ninput W[64, 64]\nO = matmul(exp(X), sqr(W))\noutput O\n");
  EXPECT_EQ(computed_matmul_operands(both).size(), 2u);
  EXPECT_TRUE(
      computed_matmul_operands(parse_program("input X[8, 64]\ninput W[64, 64]\nO = matmul(X, W)\noutput O\n")).empty());
}

TEST(ProgramParts, RandomProgramsJoinBackToWhatTheyCompute) {
  // Programs of random ops, grown and kept ones mixed, on random earlier tensors: every split
  // orders its units, and its parts joined back compute the program.
  std::mt19937 rng(12345);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  int with_parts = 0, with_kept = 0;
  for (int trial = 0; trial < 400; ++trial) {
    Graph g;
    std::vector<TensorId> pool{g.add_input("A", {4, 8}, DType::f32), g.add_input("B", {4, 8}, DType::f32)};
    const int n_ops = 3 + static_cast<int>(pick(10));
    for (int i = 0; i < n_ops; ++i) {
      // Mostly a recent tensor, so that chains through kept ops and back are common.
      const TensorId a = pool[pick(2) ? pool.size() - 1 - pick(std::min<size_t>(pool.size(), 3)) : pick(pool.size())];
      const Shape& sa = g.type(a).shape;
      std::vector<TensorId> same;
      for (TensorId t : pool)
        if (g.type(t).shape == sa) same.push_back(t);
      const TensorId b = same[pick(same.size())];
      OpAttrs at;
      switch (pick(9)) {
        case 8: {  // there and back: a value of a's shape that kept ops made from a
          OpAttrs flat, back;
          flat.shape = Shape{sa.numel()};
          back.shape = sa;
          pool.push_back(g.add(OpKind::mul, {g.add(OpKind::reshape, {g.add(OpKind::reshape, {a}, flat)}, back), a}));
          break;
        }
        case 0:
          pool.push_back(g.add(OpKind::exp, {g.add(OpKind::mul, {a}, attrs::scalar(Scalar(0.125)))}));
          break;
        case 1:
          pool.push_back(g.add(OpKind::add, {a, b}));
          break;
        case 2:
          pool.push_back(g.add(OpKind::sqr, {a}));
          break;
        case 3:
          at.shape = Shape{sa.numel()};
          if (sa.rank() == 1) at.shape = Shape{4, sa.numel() / 4};
          if (sa.numel() % 4 == 0) pool.push_back(g.add(OpKind::reshape, {a}, at));
          break;
        case 4:
          at.dim = 0;
          at.times = 2;
          if (sa.numel() <= 256) pool.push_back(g.add(OpKind::repeat, {a}, at));
          break;
        case 5:
          at.dim = 0;
          if (sa.numel() <= 256) pool.push_back(g.add(OpKind::concat, {a, b}, at));
          break;
        case 6:
          at.dim = sa.rank() - 1;
          at.to = sa[sa.rank() - 1] % 2 == 0 ? 2 : 1;
          pool.push_back(g.add(OpKind::sum, {a}, at));
          break;
        default:
          pool.push_back(g.add(OpKind::mul, {a, b}));
          break;
      }
    }
    g.mark_output(pool.back(), "O");
    const TensorId other = pool[2 + pick(pool.size() - 2)];
    if (other != pool.back()) g.mark_output(other, "P");
    ASSERT_FALSE(validate(g, default_target()).has_value()) << "trial " << trial;
    const ProgramSplit split = split_program(g);
    with_parts += !split.parts.empty();
    with_kept += !split.kept.empty();
    for (const ProgramPart& p : split.parts) {
      EXPECT_FALSE(p.program.outputs.empty()) << "trial " << trial;
      for (OpId o : p.ops) EXPECT_TRUE(generator_grows(g.op(o))) << "trial " << trial;
    }
    for (OpId k : split.kept) EXPECT_FALSE(generator_grows(g.op(k))) << "trial " << trial;
    SCOPED_TRACE("trial " + std::to_string(trial));
    expect_order_computes_before_reading(g, split);
    expect_join_of_parts_computes_program(g, split);
  }
  // The generator made both kinds often enough for the test to mean something.
  EXPECT_GT(with_parts, 300);
  EXPECT_GT(with_kept, 150);
}

}  // namespace
}  // namespace mugraph::search_detail
