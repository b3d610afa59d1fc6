// The thread-graph fusion pass: element-wise trees of block graphs become thread graphs, and the
// μGraph computes exactly what it computed before.
#include "mugraph/fuse_thread_graphs.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "mugraph/interp.h"
#include "mugraph/loader.h"
#include "mugraph/validate.h"
#include "test_graphs.h"

namespace mugraph {
namespace {

std::string source_dir() {
  const char* dir = std::getenv("MUGRAPH_SOURCE_DIR");
  return dir ? dir : MUGRAPH_SOURCE_DIR_DEFAULT;
}

/// Figure 3b with its post-processing (acc / sqrt(ssq / h)) as three block ops instead of a thread
/// graph: what the generator produces before fusion.
Graph rmsnorm_unfused(int64_t b, int64_t h, int64_t n, int64_t grid, int64_t loop) {
  Graph k;
  TensorId x = k.add_input("X", {b, h}, DType::f32);
  TensorId gm = k.add_input("G", {h}, DType::f32);
  TensorId w = k.add_input("W", {h, n}, DType::f32);
  Graph body = make_block_graph({k.type(x), k.type(gm), k.type(w)}, Dim3{grid, 1, 1}, loop);
  TensorId xt = body.add(OpKind::input_iterator, {}, attrs::iterator(0, {kPhi, kPhi, kPhi}, 1));
  TensorId gt = body.add(OpKind::input_iterator, {}, attrs::iterator(1, {kPhi, kPhi, kPhi}, 0));
  TensorId wt = body.add(OpKind::input_iterator, {}, attrs::iterator(2, {1, kPhi, kPhi}, 0));
  TensorId ssq = body.add(OpKind::sum, {body.add(OpKind::sqr, {xt})}, attrs::sum(1));
  TensorId mm = body.add(OpKind::matmul, {body.add(OpKind::mul, {xt, gt}), wt});
  TensorId acc_ssq = body.add(OpKind::accum, {ssq}, attrs::accum());
  TensorId acc_mm = body.add(OpKind::accum, {mm}, attrs::accum());
  TensorId mean = body.add(OpKind::div, {acc_ssq}, attrs::scalar(*parse_scalar(std::to_string(h))));
  TensorId out = body.add(OpKind::div, {acc_mm, body.add(OpKind::sqrt, {mean})});
  body.add(OpKind::output_saver, {out}, attrs::saver(0, {1, kPhi, kPhi}));
  auto op = k.append_with_body(OpKind::graph_kernel, {x, gm, w}, std::move(body));
  k.mark_output(k.ops[op->index()].outputs[0], "O");
  return k;
}

int count_kind(const Graph& g, OpKind kind) {
  int n = 0;
  for (const Op& op : g.ops) n += op.kind == kind;
  return n;
}

/// Runs both graphs on the same inputs; results must be bit-identical (same ops, same roundings).
void expect_same_outputs(const Graph& a, const Graph& b) {
  std::vector<HostTensor> inputs = random_inputs(a, 3);
  // Scaled by 1/8 (exact) so that attention's exp(Q·K) stays finite in f16: NaN outputs would
  // compare unequal to themselves and say nothing.
  for (HostTensor& t : inputs)
    for (auto& v : t.data) v *= 0.125f;
  auto x = run_float(a, inputs), y = run_float(b, inputs);
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(x[i].data, y[i].data) << "output " << i;
}

TEST(FuseThreadGraphs, Figure3bPostProcessingBecomesOneThreadGraph) {
  Graph unfused = rmsnorm_unfused(8, 256, 128, 4, 4);
  ASSERT_FALSE(validate(unfused)) << validate(unfused)->str();
  Graph fused = fuse_thread_graphs(unfused);
  ASSERT_FALSE(validate(fused)) << validate(fused)->str();
  const Graph& body = fused.bodies[0];
  EXPECT_EQ(count_kind(body, OpKind::thread_graph), 1);
  // div, sqrt, div moved into the thread graph; sqr and mul stay (each feeds a non-element-wise op).
  EXPECT_EQ(count_kind(body, OpKind::div), 0);
  EXPECT_EQ(count_kind(body, OpKind::sqrt), 0);
  EXPECT_EQ(count_kind(body, OpKind::sqr), 1);
  EXPECT_EQ(count_kind(body, OpKind::mul), 1);
  ASSERT_EQ(body.bodies.size(), 1u);
  const Graph& tg = body.bodies[0];
  EXPECT_EQ(tg.level, Level::thread);
  EXPECT_EQ(count_kind(tg, OpKind::input_iterator), 2);
  EXPECT_EQ(count_kind(tg, OpKind::div), 2);
  EXPECT_EQ(count_kind(tg, OpKind::sqrt), 1);
  EXPECT_EQ(count_kind(tg, OpKind::output_saver), 1);
  // Fewer shared-memory tensors: the two intermediates now live in registers.
  EXPECT_LT(block_shared_memory_bytes(body), block_shared_memory_bytes(unfused.bodies[0]));
  expect_same_outputs(unfused, fused);
  EXPECT_EQ(fuse_thread_graphs(fused), fused);
}

TEST(FuseThreadGraphs, MultiUseValuesAndSingleOpsStayInSharedMemory) {
  Graph k;
  TensorId x = k.add_input("X", {16, 64}, DType::f32);
  Graph body = make_block_graph({k.type(x)}, Dim3{4, 1, 1}, 1);
  TensorId xt = body.add(OpKind::input_iterator, {}, attrs::iterator(0, {0, kPhi, kPhi}));
  TensorId e = body.add(OpKind::exp, {xt});
  TensorId sq = body.add(OpKind::mul, {e, e});  // e is used twice: not absorbed
  TensorId s = body.add(OpKind::sum, {sq}, attrs::sum(1));
  TensorId r = body.add(OpKind::relu, {s});  // a lone element-wise op: nothing to fuse it with
  body.add(OpKind::output_saver, {r}, attrs::saver(0, {0, kPhi, kPhi}));
  auto op = k.append_with_body(OpKind::graph_kernel, {x}, std::move(body));
  k.mark_output(k.ops[op->index()].outputs[0], "O");
  ASSERT_FALSE(validate(k));
  EXPECT_EQ(fuse_thread_graphs(k), k);
}

TEST(FuseThreadGraphs, KernelGraphsWithoutBodiesAreUnchanged) {
  Graph g = test::rmsnorm_reference(4, 64, 32);
  EXPECT_EQ(fuse_thread_graphs(g), g);
}

TEST(FuseThreadGraphs, ExamplesStayEquivalentAndFusionIsIdempotent) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(source_dir() + "/examples/ugraphs")) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    Graph g = load_graph_file(entry.path().string());
    Graph fused = fuse_thread_graphs(g);
    EXPECT_FALSE(validate(fused)) << entry.path() << ": " << validate(fused)->str();
    EXPECT_EQ(fuse_thread_graphs(fused), fused) << entry.path();
    for (size_t b = 0; b < g.bodies.size(); ++b) {
      EXPECT_EQ(fused.bodies[b].params, g.bodies[b].params);
      EXPECT_LE(block_shared_memory_bytes(fused.bodies[b]), block_shared_memory_bytes(g.bodies[b]));
    }
    expect_same_outputs(g, fused);
  }
  EXPECT_GE(files, 4);
}

}  // namespace
}  // namespace mugraph
