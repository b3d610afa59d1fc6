#include "mugraph/printer.h"

#include <gtest/gtest.h>

#include "test_graphs.h"

namespace mugraph {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Printer, DescribesFigure3b) {
  Graph g = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f16);
  g.tensors[3].name = "O";
  std::string text = describe(g);
  EXPECT_TRUE(contains(text, "  %0 = input")) << text;
  EXPECT_TRUE(contains(text, "[16, 4096] f16  \"X\"")) << text;
  EXPECT_TRUE(contains(text, "%3 = graph_kernel(%0, %1, %2)")) << text;
  EXPECT_TRUE(contains(text, "[16, 4096] f16  \"O\"")) << text;
  EXPECT_TRUE(contains(text, "      block graph: grid=(128,1,1) threads=(128,1,1) forloop=16\n")) << text;
  EXPECT_TRUE(contains(text, "%0 = input_iterator(in0) imap={x:φ} fmap=1")) << text;
  EXPECT_TRUE(contains(text, "%2 = input_iterator(in2) imap={x:1} fmap=0")) << text;
  EXPECT_TRUE(contains(text, "[256, 32] f16")) << text;
  EXPECT_TRUE(contains(text, "= sum(%3, dim=1)")) << text;
  EXPECT_TRUE(contains(text, "%7 = accum(%4) sum")) << text;
  EXPECT_TRUE(contains(text, "= thread_graph(%8, %7)")) << text;
  EXPECT_TRUE(contains(text, "          thread graph:\n")) << text;
  EXPECT_TRUE(contains(text, "          %2 = div(%1, 4096)")) << text;
  EXPECT_TRUE(contains(text, "output_saver(%9) -> out0 omap={x:1}")) << text;
  EXPECT_TRUE(contains(text, "\noutputs: O [16, 4096] f16\n")) << text;
}

TEST(Printer, ShowsAttributesAndToleratesBrokenGraphs) {
  Graph g;
  TensorId x = g.add_input("X", {8, 64});
  OpAttrs s;
  s.dim = 1;
  s.to = 4;
  TensorId r = g.add(OpKind::sum, {x}, s);
  TensorId d = g.add(OpKind::div, {r}, test::scalar("2", 0));
  g.mark_output(d, "Y");
  std::string text = describe(g);
  EXPECT_TRUE(contains(text, "%1 = sum(%0, dim=1, to=4)")) << text;
  EXPECT_TRUE(contains(text, "%2 = div(2, %1)")) << text;
  g.ops[2].inputs[0] = TensorId(99);
  g.ops.push_back(Op{OpKind::graph_kernel, {}, {}, {}});
  g.outputs.push_back(TensorId(1234));
  text = describe(g);
  EXPECT_TRUE(contains(text, "div(2, %99)")) << text;
  EXPECT_TRUE(contains(text, "(body -1 is missing)")) << text;
  EXPECT_TRUE(contains(text, "outputs: Y [8, 4] f16, %1234")) << text;

  Graph f = test::rmsnorm_fig3b(16, 256, 256, 8, 4);
  f.bodies[0].ops.back().attrs.omap = {100, kPhi, kPhi};
  f.bodies[0].ops[0].attrs.imap = {kPhi, 7, kPhi};
  text = describe(f);
  EXPECT_TRUE(contains(text, "omap={x:100}")) << text;
  EXPECT_TRUE(contains(text, "imap={x:φ,y:7}")) << text;
}

}  // namespace
}  // namespace mugraph
