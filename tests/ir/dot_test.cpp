#include "mugraph/dot.h"

#include <gtest/gtest.h>

#include "test_graphs.h"

namespace mugraph {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Dot, DrawsFigure3bWithItsBlockAndThreadGraphs) {
  Graph g = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f16);
  const std::string dot = to_dot(g);
  EXPECT_TRUE(dot.starts_with("digraph ugraph {\n")) << dot;
  EXPECT_TRUE(dot.ends_with("}\n")) << dot;
  // Program inputs and the output.
  EXPECT_TRUE(contains(dot, "n0 [label=\"%0 = input\\n[16, 4096] f16  \\\"X\\\"\", shape=ellipse")) << dot;
  EXPECT_TRUE(contains(dot, "out0 [label=\"O\\n[16, 4096] f16\"")) << dot;
  // The graph-defined kernel is a cluster with its grid, threads and for-loop.
  EXPECT_TRUE(contains(dot, "subgraph cluster_n3 {")) << dot;
  EXPECT_TRUE(contains(dot, "grid=(128,1,1) threads=(128,1,1) forloop=16")) << dot;
  // Iterators with imap and fmap, the saver with its omap, the accumulators.
  EXPECT_TRUE(contains(dot, "n3_0 [label=\"%0 = input_iterator(in0) imap={x:φ} fmap=1\\n[16, 256] f16\"")) << dot;
  EXPECT_TRUE(contains(dot, "n3_2 [label=\"%2 = input_iterator(in2) imap={x:1} fmap=0\\n[256, 32] f16\"")) << dot;
  EXPECT_TRUE(contains(dot, "output_saver(%9) -> out0 omap={x:1}")) << dot;
  EXPECT_TRUE(contains(dot, "%7 = accum(%4) sum")) << dot;
  // The thread graph is a cluster inside the kernel's.
  EXPECT_TRUE(contains(dot, "    subgraph cluster_n3_9 {")) << dot;
  EXPECT_TRUE(contains(dot, "n3_9_2 [label=\"%2 = div(%1, 4096)\\n[16, 1] f16\"]")) << dot;
  // Edges: device tensors into the iterators that load them, block tensors into the thread
  // graph's iterators, its saver into the block saver, and that saver to the program output.
  EXPECT_TRUE(contains(dot, "n0 -> n3_0;")) << dot;
  EXPECT_TRUE(contains(dot, "n2 -> n3_2;")) << dot;
  EXPECT_TRUE(contains(dot, "n3_3 -> n3_4;")) << dot;
  EXPECT_TRUE(contains(dot, "n3_8 -> n3_9_0;")) << dot;
  EXPECT_TRUE(contains(dot, "n3_7 -> n3_9_1;")) << dot;
  EXPECT_TRUE(contains(dot, "n3_9_5 -> n3_10;")) << dot;
  EXPECT_TRUE(contains(dot, "n3_10 -> out0;")) << dot;
  // The kernel op itself is no node: nothing points at "n3" alone.
  EXPECT_FALSE(contains(dot, "-> n3;")) << dot;
  EXPECT_FALSE(contains(dot, "n3 [")) << dot;
}

TEST(Dot, EscapesNamesAndToleratesBrokenGraphs) {
  Graph g;
  TensorId x = g.add_input("a\"b\\c", {4, 4});
  TensorId y = g.add(OpKind::exp, {x});
  g.mark_output(y, "Y");
  std::string dot = to_dot(g);
  EXPECT_TRUE(contains(dot, "\\\"a\\\"b\\\\c\\\"")) << dot;
  EXPECT_TRUE(contains(dot, "n0 -> n1;")) << dot;
  EXPECT_TRUE(contains(dot, "n1 -> out0;")) << dot;

  // A graph-defined kernel whose body is missing, and an output id out of range, are drawn as
  // far as they go.
  Graph broken = g;
  Op k;
  k.kind = OpKind::graph_kernel;
  k.inputs = {x};
  k.attrs.body = 7;
  broken.ops.push_back(k);
  broken.outputs.push_back(TensorId{99});
  broken.output_names.push_back("Z");
  dot = to_dot(broken);
  EXPECT_TRUE(contains(dot, "n2 [label=")) << dot;
  EXPECT_TRUE(contains(dot, "n0 -> n2;")) << dot;
  EXPECT_TRUE(contains(dot, "out1 [label=\"Z\"")) << dot;
}

}  // namespace
}  // namespace mugraph
