// Input probes (src/search/input_probes.h): which probes a program gets, and which kernels they
// show cannot compute the program's outputs from their operands.
#include "input_probes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>

#include "mugraph/frontend.h"
#include "mugraph/interp.h"
#include "search_fixtures.h"

namespace mugraph::search_detail {
namespace {

using search_testing::kNTransSmall;

constexpr uint64_t kSeed = 7;

bool has_probe(const InputProbes& probes, const std::string& name) {
  return std::find(probes.names.begin(), probes.names.end(), name) != probes.names.end();
}

/// `program`'s inputs, then the kernel ops `ops` adds (pre-defined kernels are kernels too).
template <typename Ops>
std::shared_ptr<const Graph> prefix_of(const Graph& program, Ops ops) {
  Graph g;
  for (const Op& op : program.ops)
    if (op.kind == OpKind::input) g.add_input(op.attrs.name, program.type(op.outputs[0]).shape);
  ops(g);
  return std::make_shared<const Graph>(std::move(g));
}

/// nTrans without α at `rows` × `cols`: O = X + (H − X) / rms(H − X).
std::string ntrans_without_alpha(int rows, int cols) {
  const std::string shape = "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
  return "input H" + shape + "\ninput X" + shape + "\nD = sub(H, X)\nO = add(X, div(D, sqrt(div(sum(sqr(D), dim=1), " +
         std::to_string(cols) + "))))\noutput O\n";
}

TEST(InputProbes, NTransKeepsTheDifferenceOfHAndXUnderOneShift) {
  const Graph program = parse_program(kNTransSmall);
  const InputProbes probes = make_input_probes(program, kSeed);
  // Shifting H and X by one tensor keeps D = H − X (and everything computed from D alone) and
  // changes the output, which adds X alone.
  ASSERT_TRUE(has_probe(probes, "H + C, X + C")) << ::testing::PrintToString(probes.names);
  ASSERT_EQ(probes.changes_output.size(), 1u);
  for (size_t i = 0; i < probes.names.size(); ++i) EXPECT_TRUE(probes.changes_output[0] & (1u << i)) << probes.names[i];
  EXPECT_EQ(probes.inputs.size(), probes.names.size());
  EXPECT_LE(probes.inputs.size(), static_cast<size_t>(kMaxInputProbes));
}

TEST(InputProbes, AProbeThatKeepsNoComputedValueIsDropped) {
  // Scaling X by s and W by 1/s keeps X·W, the output, so it changes nothing; negating X or W
  // changes the output and keeps no value computed from them. No probe is left.
  const Graph program = parse_program("input X[4, 64]\ninput W[64, 32]\nO = matmul(X, W)\noutput O\n");
  EXPECT_TRUE(make_input_probes(program, kSeed).empty());
}

TEST(InputProbes, NoneForAProgramPastTheStepLimit) {
  // nTrans at 64 rows of 4096: over 4 million element steps.
  const Graph program = parse_program(ntrans_without_alpha(64, 4096));
  ASSERT_GT(run_steps(program), kInputProbeMaxSteps);
  EXPECT_TRUE(make_input_probes(program, kSeed).empty());
}

TEST(ProbeEvaluator, AKernelReadingTheDifferenceWithoutXCannotFinish) {
  const Graph program = parse_program(kNTransSmall);
  const InputProbes probes = make_input_probes(program, kSeed);
  ASSERT_FALSE(probes.empty());
  ProbeEvaluator evaluator(probes);
  // H, X, Alpha (0, 1, 2), then D = H − X (3), D² (4) and its row sums (5).
  auto prefix = prefix_of(program, [](Graph& g) {
    TensorId d = g.add(OpKind::sub, {TensorId(0), TensorId(1)});
    g.add(OpKind::sum, {g.add(OpKind::sqr, {d})}, attrs::sum(1));
  });
  const TensorId alpha(2), d(3), sums(5);
  ASSERT_EQ(prefix->tensors.size(), 6u);
  // Alpha, D and the sums hold every input by their expressions, yet not X alone.
  EXPECT_TRUE(evaluator.cannot_finish(prefix, {alpha, d, sums}));
  // With X, with H (X = H − D) or with H, X and Alpha, the output is a function of the operands.
  EXPECT_FALSE(evaluator.cannot_finish(prefix, {TensorId(0), alpha, d}));
  EXPECT_FALSE(evaluator.cannot_finish(prefix, {TensorId(1), alpha, d, sums}));
  EXPECT_FALSE(evaluator.cannot_finish(prefix, {TensorId(0), TensorId(1), alpha}));
  // The prefix was evaluated once, under the base inputs and each probe.
  EXPECT_EQ(evaluator.prefixes_evaluated(), 1);
}

TEST(ProbeEvaluator, AnOutputThePrefixHoldsIsNotAskedFor) {
  // Y = H + X and O = (H − X)·A. Shifting H and X by one tensor keeps H − X and changes Y only;
  // once a kernel has computed Y, a kernel reading H − X and A can finish the program.
  const Graph program = parse_program(R"(
input H[4, 64]
input X[4, 64]
input A[4, 64]
Y = add(H, X)
O = mul(sub(H, X), A)
output Y
output O
)");
  const InputProbes probes = make_input_probes(program, kSeed);
  ASSERT_TRUE(has_probe(probes, "H + C, X + C")) << ::testing::PrintToString(probes.names);
  ProbeEvaluator evaluator(probes);
  auto without_y = prefix_of(program, [](Graph& g) { g.add(OpKind::sub, {TensorId(0), TensorId(1)}); });
  auto with_y = prefix_of(program, [](Graph& g) {
    g.add(OpKind::sub, {TensorId(0), TensorId(1)});
    g.add(OpKind::add, {TensorId(0), TensorId(1)});
  });
  const TensorId a(2), d(3);
  EXPECT_TRUE(evaluator.cannot_finish(without_y, {d, a})) << "Y is still to compute, and H − X and A do not give it";
  EXPECT_FALSE(evaluator.cannot_finish(with_y, {d, a}));
}

TEST(ProbeEvaluator, ATooLargePrefixIsNotJudged) {
  const Graph program = parse_program(ntrans_without_alpha(64, 64));
  const InputProbes probes = make_input_probes(program, kSeed);
  ASSERT_TRUE(has_probe(probes, "H + C, X + C")) << ::testing::PrintToString(probes.names);
  ProbeEvaluator evaluator(probes);
  // Five matmuls of 64 × 64 by 64 × 64 take 5 · 64³ steps, past kInputProbeMaxSteps: the
  // prefix is not evaluated, and no kernel after it is ruled out.
  auto prefix = prefix_of(program, [](Graph& g) {
    TensorId d = g.add(OpKind::sub, {TensorId(0), TensorId(1)});
    for (int i = 0; i < 5; ++i) g.add(OpKind::matmul, {d, d});
  });
  ASSERT_GT(run_steps(*prefix), kInputProbeMaxSteps);
  EXPECT_FALSE(evaluator.cannot_finish(prefix, {TensorId(2)}));
  EXPECT_EQ(evaluator.prefixes_evaluated(), 0);
  // Within the limit, the same kernel is ruled out: D alone lacks X.
  auto small = prefix_of(program, [](Graph& g) { g.add(OpKind::sub, {TensorId(0), TensorId(1)}); });
  EXPECT_TRUE(evaluator.cannot_finish(small, {TensorId(2)}));
}

}  // namespace
}  // namespace mugraph::search_detail
