#include <gtest/gtest.h>

#include <unordered_set>

#include "mugraph/graph.h"
#include "test_graphs.h"

namespace mugraph {
namespace {

TEST(Graph, ShapeRulesOfProgramOps) {
  Graph g;
  TensorId x = g.add_input("X", {16, 4096});
  TensorId gm = g.add_input("G", {4096});
  TensorId w = g.add_input("W", {4096, 1024});
  OpAttrs s;
  s.dim = 1;
  TensorId sum = g.add(OpKind::sum, {g.add(OpKind::sqr, {x})}, s);
  EXPECT_EQ(g.type(sum).shape, (Shape{16, 1}));
  TensorId xg = g.add(OpKind::mul, {x, gm});
  EXPECT_EQ(g.type(xg).shape, (Shape{16, 4096}));
  TensorId y = g.add(OpKind::matmul, {xg, w});
  EXPECT_EQ(g.type(y).shape, (Shape{16, 1024}));
  OpAttrs c;
  c.has_scalar = true;
  c.scalar = *parse_scalar("4096");
  TensorId d = g.add(OpKind::div, {sum}, c);
  EXPECT_EQ(g.type(d).shape, (Shape{16, 1}));
}

TEST(Graph, RejectionsAreValues) {
  Graph g;
  TensorId x = g.add_input("X", {16, 64});
  TensorId w = g.add_input("W", {32, 8});
  auto r = g.append(OpKind::matmul, {x, w});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.rejection().reason, Reason::shape_mismatch);
  EXPECT_NE(r.rejection().message.find("inner extents 64 and 32"), std::string::npos) << r.rejection().message;
  size_t ops_before = g.ops.size();
  auto r2 = g.append(OpKind::add, {x, w});
  ASSERT_FALSE(r2.ok());
  EXPECT_EQ(r2.rejection().reason, Reason::shape_mismatch);
  EXPECT_EQ(g.ops.size(), ops_before);
  auto r3 = g.append(OpKind::accum, {x});
  ASSERT_FALSE(r3.ok());
  EXPECT_EQ(r3.rejection().reason, Reason::level_mismatch);
  OpAttrs s;
  s.dim = 1;
  s.to = 3;
  auto r4 = g.append(OpKind::sum, {x}, s);
  ASSERT_FALSE(r4.ok());
  EXPECT_EQ(r4.rejection().reason, Reason::bad_attribute);
  auto r5 = g.append(OpKind::exp, {TensorId(99)});
  ASSERT_FALSE(r5.ok());
  EXPECT_EQ(r5.rejection().reason, Reason::malformed);
}

TEST(Graph, BroadcastAndBatchedMatmul) {
  Graph g;
  TensorId a = g.add_input("A", {2, 1, 8, 4});
  TensorId b = g.add_input("B", {3, 4, 5});
  EXPECT_EQ(g.type(g.add(OpKind::matmul, {a, b})).shape, (Shape{2, 3, 8, 5}));
  TensorId c = g.add_input("C", {3, 1});
  TensorId d = g.add_input("D", {1, 7});
  EXPECT_EQ(g.type(g.add(OpKind::add, {c, d})).shape, (Shape{3, 7}));
  OpAttrs rep;
  rep.dim = 0;
  rep.times = 4;
  EXPECT_EQ(g.type(g.add(OpKind::repeat, {c}, rep)).shape, (Shape{12, 1}));
  OpAttrs cat;
  cat.dim = 1;
  EXPECT_EQ(g.type(g.add(OpKind::concat, {c, c, c}, cat)).shape, (Shape{3, 3}));
  OpAttrs rs;
  rs.shape = Shape{7};
  EXPECT_EQ(g.type(g.add(OpKind::reshape, {d}, rs)).shape, (Shape{7}));
}

TEST(Graph, Fig3bBlockGraphShapes) {
  Graph g = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16);
  ASSERT_EQ(g.bodies.size(), 1u);
  const Graph& body = g.bodies[0];
  EXPECT_EQ(body.level, Level::block);
  EXPECT_EQ(g.type(g.outputs[0]).shape, (Shape{16, 4096}));
  // The W tile: 4096 rows over 16 iterations, 4096 columns over 128 blocks.
  EXPECT_EQ(body.tensors[2].type.shape, (Shape{256, 32}));
}

TEST(Graph, ValuesCopyCompareHash) {
  Graph a = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16);
  Graph b = a;
  EXPECT_EQ(a, b);
  EXPECT_EQ(hash_value(a), hash_value(b));
  b.bodies[0].ops[0].attrs.fmap = kPhi;
  EXPECT_NE(a, b);
  EXPECT_NE(hash_value(a), hash_value(b));
  std::unordered_set<Graph> set{a, b, a};
  EXPECT_EQ(set.size(), 2u);
  EXPECT_EQ(count_ops(a), static_cast<int64_t>(a.ops.size() + a.bodies[0].ops.size() + a.bodies[0].bodies[0].ops.size()));
}

}  // namespace
}  // namespace mugraph
