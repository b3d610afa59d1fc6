#include "mugraph/validate.h"

#include <gtest/gtest.h>

#include "test_graphs.h"

namespace mugraph {
namespace {

TEST(Validate, Fig3bIsValid) {
  Graph g = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16);
  auto r = validate(g);
  EXPECT_FALSE(r) << r->str();
}

TEST(Validate, SharedMemoryLimitPerTarget) {
  // One block, one iteration: W alone is 4096 x 64 x 4 bytes = 1 MiB of shared memory.
  Graph g = test::rmsnorm_fig3b(16, 4096, 64, 1, 1);
  auto r = validate(g, *find_target("a100"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->reason, Reason::shared_memory);
  // 4 iterations over 4096 rows and 64 columns in f16: about 180 KB, between the two limits.
  Graph small = test::rmsnorm_fig3b(8, 4096, 64, 1, 4, DType::f16);
  EXPECT_GT(block_shared_memory_bytes(small.bodies[0]), 164 * 1024);
  EXPECT_LT(block_shared_memory_bytes(small.bodies[0]), 227 * 1024);
  EXPECT_TRUE(validate(small, *find_target("a100")));
  EXPECT_FALSE(validate(small, *find_target("h100")));
}

TEST(Validate, ConcatOperandsLiveInTheConcatBuffer) {
  const Graph body = test::two_tile_body();
  const TensorId a(0), b(1);
  const OpAttrs cat = test::concat_dim(1);
  Graph once = body;
  once.add(OpKind::exp, {once.add(OpKind::concat, {a, b}, cat)});
  // a and b (32 floats each) inside the 64-float concat, then exp's 64 floats.
  EXPECT_EQ(block_shared_memory_bytes(once), (64 + 64) * 4);
  // a concatenated twice keeps its own place (copied into the concats); b lives in the first
  // concat's buffer, which lives in the second's.
  Graph twice = body;
  TensorId c1 = twice.add(OpKind::concat, {a, b}, cat);
  twice.add(OpKind::concat, {a, c1}, cat);
  EXPECT_EQ(block_shared_memory_bytes(twice), (32 + 96) * 4);
  // concat(a, a) is two places as well.
  Graph self = body;
  self.add(OpKind::concat, {a, a}, cat);
  EXPECT_EQ(block_shared_memory_bytes(self), (32 + 32 + 64) * 4);
}

TEST(Validate, PathRuleNeedsAnAccumulatorWhenLooping) {
  Graph k;
  TensorId x = k.add_input("X", {16, 64}, DType::f32);
  Graph body = make_block_graph({k.type(x)}, Dim3{1, 1, 1}, 4);
  TensorId xt = body.add(OpKind::input_iterator, {}, test::iter(0, {kPhi, kPhi, kPhi}, 1));
  body.add(OpKind::output_saver, {body.add(OpKind::exp, {xt})}, test::saver(0, {kPhi, kPhi, kPhi}));
  auto op = k.append_with_body(OpKind::graph_kernel, {x}, body);
  ASSERT_TRUE(op.ok());
  k.mark_output(k.ops[op->index()].outputs[0], "O");
  auto r = validate(k);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->reason, Reason::path_rule);
  EXPECT_NE(r->message.find("passes no accumulator"), std::string::npos) << r->message;
}

TEST(Validate, PathRuleLetsALoopInvariantTileJoinTheAccumulatedValues) {
  // O = X·W + R with a loop over the reduced dim: R's tile (fmap φ) is the same in every
  // iteration, so its path may join the accumulated product after the loop without an
  // accumulator (an epilogue operand). Saving R's tile alone still needs one.
  const TensorType x{{4, 8}, DType::f32}, w{{8, 6}, DType::f32}, r{{4, 6}, DType::f32};
  auto kernel = [&](bool epilogue) {
    Graph body = make_block_graph({x, w, r}, Dim3{1, 1, 1}, 4);
    TensorId xt = body.add(OpKind::input_iterator, {}, test::iter(0, {kPhi, kPhi, kPhi}, 1));
    TensorId wt = body.add(OpKind::input_iterator, {}, test::iter(1, {kPhi, kPhi, kPhi}, 0));
    TensorId rt = body.add(OpKind::input_iterator, {}, test::iter(2, {kPhi, kPhi, kPhi}, kPhi));
    TensorId acc = body.add(OpKind::accum, {body.add(OpKind::matmul, {xt, wt})}, test::accum_sum());
    body.add(OpKind::output_saver, {epilogue ? body.add(OpKind::add, {acc, rt}) : body.add(OpKind::exp, {rt})},
             test::saver(0, {kPhi, kPhi, kPhi}));
    Graph k;
    TensorId ins[] = {k.add_input("X", x.shape, x.dtype), k.add_input("W", w.shape, w.dtype),
                      k.add_input("R", r.shape, r.dtype)};
    auto op = k.append_with_body(OpKind::graph_kernel, {ins[0], ins[1], ins[2]}, body);
    MUGRAPH_CHECK(op.ok()) << op.rejection().str();
    k.mark_output(k.ops[op->index()].outputs[0], "O");
    return k;
  };
  EXPECT_FALSE(validate(kernel(true))) << validate(kernel(true))->str();
  auto r2 = validate(kernel(false));
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->reason, Reason::path_rule);
  EXPECT_NE(r2->message.find("passes no accumulator"), std::string::npos) << r2->message;
}

TEST(Validate, PathRuleForbidsTwoAccumulators) {
  Graph body = make_block_graph({TensorType{{16, 64}, DType::f32}}, Dim3{1, 1, 1}, 4);
  TensorId xt = body.add(OpKind::input_iterator, {}, test::iter(0, {kPhi, kPhi, kPhi}, 1));
  TensorId a1 = body.add(OpKind::accum, {xt}, test::accum_sum());
  TensorId a2 = body.add(OpKind::accum, {a1}, test::accum_sum());
  body.add(OpKind::output_saver, {a2}, test::saver(0, {kPhi, kPhi, kPhi}));
  Graph k;
  TensorId x = k.add_input("X", {16, 64}, DType::f32);
  auto op = k.append_with_body(OpKind::graph_kernel, {x}, body);
  ASSERT_TRUE(op.ok());
  k.mark_output(k.ops[op->index()].outputs[0], "O");
  auto r = validate(k);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->reason, Reason::path_rule);
}

TEST(Validate, MapsMustDivideAndBeDisjoint) {
  Graph body = make_block_graph({TensorType{{16, 60}, DType::f32}}, Dim3{8, 1, 1}, 1);
  auto r = body.append(OpKind::input_iterator, {}, test::iter(0, {1, kPhi, kPhi}, kPhi));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.rejection().reason, Reason::not_divisible);
  TensorId xt = body.add(OpKind::input_iterator, {}, test::iter(0, {0, kPhi, kPhi}, kPhi));
  auto s = body.append(OpKind::output_saver, {xt}, test::saver(0, {kPhi, kPhi, kPhi}));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.rejection().reason, Reason::bad_map);
  EXPECT_NE(s.rejection().message.find("disjoint"), std::string::npos);
  Graph grid2 = make_block_graph({TensorType{{16, 64}, DType::f32}}, Dim3{2, 2, 1}, 1);
  auto t = grid2.append(OpKind::input_iterator, {}, test::iter(0, {1, 1, kPhi}, kPhi));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.rejection().reason, Reason::bad_map);
}

TEST(Validate, CatchesTamperedData) {
  Graph g = test::rmsnorm_fig3b(16, 256, 256, 8, 4);
  Graph bad = g;
  bad.tensors[0].type.shape = Shape{16, 255};
  auto r = validate(bad);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->reason, Reason::shape_mismatch);
  Graph bad2 = g;
  bad2.ops.back().inputs.push_back(TensorId(1000));
  ASSERT_TRUE(validate(bad2));
  EXPECT_EQ(validate(bad2)->reason, Reason::malformed);
  Graph bad3 = g;
  std::swap(bad3.bodies[0].ops[0], bad3.bodies[0].ops[4]);
  ASSERT_TRUE(validate(bad3));
  Graph bad4 = g;
  bad4.bodies[0].grid.x = 3;
  ASSERT_TRUE(validate(bad4));
  EXPECT_EQ(validate(bad4)->reason, Reason::not_divisible);
}

TEST(Validate, RegistersOfThreadGraphs) {
  Graph g = test::rmsnorm_fig3b(16, 256, 256, 8, 4);
  const Graph& tg = g.bodies[0].bodies[0];
  int64_t regs = thread_graph_registers(tg, Dim3{128, 1, 1});
  EXPECT_GT(regs, 16);
  EXPECT_LT(regs, 64);
}

}  // namespace
}  // namespace mugraph

namespace mugraph {
namespace {

TEST(Validate, ZeroGridOrLoopIsRejectedNotDividedBy) {
  Graph body = make_block_graph({TensorType{{16, 64}, DType::f32}}, Dim3{0, 1, 1}, 1);
  auto r = body.append(OpKind::input_iterator, {}, test::iter(0, {kPhi, kPhi, kPhi}, kPhi));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.rejection().reason, Reason::bad_attribute);
  Graph loop0 = make_block_graph({TensorType{{16, 64}, DType::f32}}, Dim3{1, 1, 1}, 0);
  EXPECT_FALSE(loop0.append(OpKind::input_iterator, {}, test::iter(0, {kPhi, kPhi, kPhi}, kPhi)).ok());
}

}  // namespace
}  // namespace mugraph

namespace mugraph {
namespace {

TEST(Validate, UnusedAttributesMustStayAtDefaults) {
  Graph g = test::rmsnorm_fig3b(16, 256, 256, 8, 4);
  EXPECT_FALSE(validate(g));
  Graph bad = g;
  bad.ops[0].attrs.times = 3;  // an input op has no 'times'
  auto r = validate(bad);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->reason, Reason::bad_attribute);
  EXPECT_NE(r->message.find("does not use"), std::string::npos) << r->message;
  for (const Op& op : g.ops) EXPECT_EQ(op.attrs, used_attrs(op.kind, op.attrs));
}

}  // namespace
}  // namespace mugraph
