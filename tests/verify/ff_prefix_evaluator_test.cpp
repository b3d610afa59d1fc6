// FFPrefixEvaluator: reuses the values of a shared prefix and computes the same values as run_ff.
#include <gtest/gtest.h>

#include "mugraph/ff_interp.h"
#include "test_graphs.h"

namespace mugraph {
namespace {

FFContext context(uint64_t seed) { return FFContext{random_root_of_unity(seed), seed}; }

/// A kernel graph growing op by op (the search's view): X·W, then more ops on top.
std::vector<Graph> growing_graphs() {
  std::vector<Graph> gs;
  Graph g;
  TensorId x = g.add_input("X", {8, 32});
  TensorId w = g.add_input("W", {32, 16});
  TensorId m = g.add(OpKind::matmul, {x, w});
  gs.push_back(g);
  TensorId e = g.add(OpKind::exp, {m});
  gs.push_back(g);
  OpAttrs s;
  s.dim = 1;
  TensorId sum = g.add(OpKind::sum, {e}, s);
  gs.push_back(g);
  g.mark_output(g.add(OpKind::div, {e, sum}), "O");
  gs.push_back(g);
  return gs;
}

void expect_values_match_run_ff(const Graph& g, const std::vector<FFTensor>& values, const std::vector<FFTensor>& in,
                                const FFContext& ctx) {
  // Every tensor, via run_ff on the same graph with that tensor as its output.
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    Graph h = g;
    h.outputs = {TensorId(static_cast<int32_t>(t))};
    h.output_names = {"T"};
    FFRun r = run_ff(h, in, ctx, 1);
    ASSERT_FALSE(r.zero_divisor);
    EXPECT_EQ(r.outputs[0], values[t]) << "tensor " << t;
  }
}

TEST(FFPrefixEvaluator, ReusesPrefixAndMatchesRunFF) {
  std::vector<Graph> gs = growing_graphs();
  std::vector<FFTensor> in = random_ff_inputs(gs.back(), 3);
  FFPrefixEvaluator ev(in, context(3), 1);
  for (size_t k = 0; k < gs.size(); ++k) {
    const std::vector<FFTensor>* v = ev.evaluate(gs[k]);
    ASSERT_NE(v, nullptr);
    ASSERT_EQ(v->size(), gs[k].tensors.size());
    expect_values_match_run_ff(gs[k], *v, in, context(3));
  }
  // Graphs of 3, 4, 5 and 6 ops: after the first, all but the new op come from the cache.
  EXPECT_EQ(ev.ops_reused(), 3 + 4 + 5);
  EXPECT_EQ(ev.ops_computed(), 3 + 1 + 1 + 1);
}

TEST(FFPrefixEvaluator, BranchingRecomputesFromTheFirstDifference) {
  std::vector<Graph> gs = growing_graphs();
  std::vector<FFTensor> in = random_ff_inputs(gs.back(), 4);
  FFPrefixEvaluator ev(in, context(4), 2);
  ASSERT_NE(ev.evaluate(gs[3]), nullptr);
  // A sibling: same first 3 ops, then sqr instead of exp.
  Graph sib = gs[0];
  sib.add(OpKind::sqr, {sib.ops[2].outputs[0]});
  const auto* v = ev.evaluate(sib);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(ev.ops_reused(), 3);
  expect_values_match_run_ff(sib, *v, in, context(4));
  // A graph-defined kernel is one op; the fused μGraph after the plain one shares the inputs.
  Graph fused = test::rmsnorm_fig3b(4, 32, 16, 2, 2);
  Graph ref = test::rmsnorm_reference(4, 32, 16);
  std::vector<FFTensor> in2 = random_ff_inputs(ref, 5);
  FFPrefixEvaluator ev2(in2, context(5), 1);
  const auto* a = ev2.evaluate(ref);
  ASSERT_NE(a, nullptr);
  FFTensor ref_out = (*a)[ref.outputs[0].index()];
  const auto* b = ev2.evaluate(fused);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(ev2.ops_reused(), 3);
  EXPECT_EQ((*b)[fused.outputs[0].index()], ref_out);
}

TEST(FFPrefixEvaluator, ZeroDivisorReturnsNullAndRecovers) {
  Graph g;
  TensorId x = g.add_input("X", {4});
  TensorId y = g.add_input("Y", {4});
  TensorId s = g.add(OpKind::sub, {y, y});  // zero
  g.mark_output(g.add(OpKind::div, {x, s}), "O");
  std::vector<FFTensor> in = random_ff_inputs(g, 1);
  FFPrefixEvaluator ev(in, context(1));
  EXPECT_EQ(ev.evaluate(g), nullptr);
  Graph ok;
  TensorId x2 = ok.add_input("X", {4});
  TensorId y2 = ok.add_input("Y", {4});
  TensorId s2 = ok.add(OpKind::sub, {y2, y2});
  ok.mark_output(ok.add(OpKind::add, {x2, s2}), "O");
  const auto* v = ev.evaluate(ok);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(ev.ops_reused(), 3);
  EXPECT_EQ((*v)[ok.outputs[0].index()], in[0]);
}

}  // namespace
}  // namespace mugraph
