// The cost model (cost_model.h): its monotonicity and lower bound, the paper's fused μGraphs
// against the programs they implement run as one kernel per op, and grids that fill the SMs
// against grids that leave them idle.
#include "mugraph/cost_model.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "mugraph/error.h"
#include "mugraph/loader.h"
#include "mugraph/search.h"
#include "test_graphs.h"

namespace mugraph {
namespace {

std::string source_dir() {
  const char* env = std::getenv("MUGRAPH_SOURCE_DIR");
  return env ? env : MUGRAPH_SOURCE_DIR_DEFAULT;
}

double cost(const Graph& g, const char* gpu = "h100") { return estimate_cost(g, gpu_spec(gpu)).total_us; }

TEST(GpuSpecs, ByNameAndArch) {
  EXPECT_EQ(gpu_spec("sm_80").name, "a100");
  EXPECT_EQ(gpu_spec("sm_90a").name, "h100");
  EXPECT_EQ(gpu_spec("h200").sms, 132);
  EXPECT_GT(gpu_spec("h200").dram_bytes_per_us, gpu_spec("h100").dram_bytes_per_us);
  EXPECT_THROW(gpu_spec("v100"), UserError);
}

TEST(CostModel, MonotoneInBytesAndFlops) {
  for (const char* gpu : {"a100", "h100", "h200"}) {
    // More columns of W: more bytes and more FLOPs, same grid.
    double last = 0;
    for (int64_t n : {1024, 2048, 4096, 8192}) {
      const double c = cost(test::rmsnorm_fig3b(16, 4096, n, 128, 16, DType::f16), gpu);
      EXPECT_GT(c, last) << gpu << " n " << n;
      last = c;
    }
    // More rows of X: more FLOPs and bytes of X.
    last = 0;
    for (int64_t b : {8, 16, 32, 64}) {
      const double c = cost(test::gated_mlp_reference(b, 4096, 4096, DType::f16), gpu);
      EXPECT_GE(c, last) << gpu << " b " << b;
      last = c;
    }
    // f32 operands: twice the bytes, FLOPs off the tensor cores.
    EXPECT_GT(cost(test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f32), gpu),
              cost(test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f16), gpu));
  }
}

TEST(CostModel, EachKernelCostsAtLeastItsLaunchAndItsCompulsoryTraffic) {
  const Graph g = test::gated_mlp_reference(8, 4096, 4096, DType::f16);
  const CandidateMetrics m = candidate_metrics(g);
  for (const GpuSpec& gpu : gpu_specs()) {
    const CostEstimate e = estimate_cost(g, gpu);
    ASSERT_EQ(e.kernels.size(), 4u);  // two matmuls, silu, mul
    EXPECT_GE(e.total_us, cost_lower_bound_us(m.device_bytes, m.kernels, gpu));
    for (const KernelCost& k : e.kernels) {
      EXPECT_GE(k.total_us, k.launch_us + k.dram_us);
      EXPECT_FALSE(k.bound.empty());
    }
    // The matmuls move 32 MiB of W each: memory-bound.
    EXPECT_EQ(e.kernels[0].kind, "matmul");
    EXPECT_EQ(e.kernels[0].bound, "dram");
  }
}

TEST(CostModel, AReshapeNoOutputTakesIsAViewThatCostsNothing) {
  // exp, reshape, exp: the reshape's result is read where it lies (every DTensor is dense
  // row-major), so it moves nothing and is no kernel. Once it is a program output, it is a copy.
  Graph g;
  const TensorId x = g.add_input("X", {4, 64}, DType::f16);
  OpAttrs shape;
  shape.shape = Shape{64, 4};
  const TensorId y = g.add(OpKind::reshape, {g.add(OpKind::exp, {x})}, shape);
  g.mark_output(g.add(OpKind::exp, {y}), "O");
  EXPECT_TRUE(kernel_op_is_view(g, g.ops[2]));
  EXPECT_EQ(kernel_device_bytes(g, g.ops[2]), 0);
  const GpuSpec& gpu = gpu_spec("h200");
  const CostEstimate e = estimate_cost(g, gpu);
  ASSERT_EQ(e.kernels.size(), 3u);
  EXPECT_EQ(e.kernels[1].kind, "reshape (view)");
  EXPECT_EQ(e.kernels[1].total_us, 0);
  EXPECT_NEAR(e.total_us, e.kernels[0].total_us + e.kernels[2].total_us, 1e-12);
  const CandidateMetrics m = candidate_metrics(g);
  EXPECT_EQ(m.kernels, 2);
  EXPECT_EQ(m.device_bytes, 4 * 512);  // each exp reads and writes 4·64 halves
  // An output whose operand only it reads: the exp writes the output's buffer, still a view.
  g.mark_output(y, "Y");
  EXPECT_TRUE(kernel_op_is_view(g, g.ops[2]));
  // Once another op reads the operand too, the reshape copies it into the output.
  g.mark_output(g.add(OpKind::sqr, {g.ops[1].outputs[0]}), "S");
  EXPECT_FALSE(kernel_op_is_view(g, g.ops[2]));
  EXPECT_EQ(estimate_cost(g, gpu).kernels[1].kind, "reshape");
  EXPECT_GT(estimate_cost(g, gpu).kernels[1].total_us, gpu.launch_us);
  EXPECT_EQ(candidate_metrics(g).kernels, 4);
}

TEST(CostModel, CublasMatmulsStreamAtTheShareMeasuredAndGeneratedKernelsAtThePeak) {
  const Graph g = test::gated_mlp_reference(8, 4096, 4096, DType::f16);
  for (const GpuSpec& gpu : gpu_specs()) {
    ASSERT_GT(gpu.cublas_dram_share, 0.0);
    ASSERT_LE(gpu.cublas_dram_share, 1.0);
    const CostEstimate e = estimate_cost(g, gpu);
    size_t k = 0;
    for (const Op& op : g.ops) {
      if (op.kind == OpKind::input) continue;
      const KernelCost& c = e.kernels[k++];
      const double bytes = static_cast<double>(kernel_device_bytes(g, op));
      const double share = op.kind == OpKind::matmul ? gpu.cublas_dram_share : 1.0;
      EXPECT_EQ(c.dram_share, share) << gpu.name << " " << c.kind;
      EXPECT_DOUBLE_EQ(c.dram_us, bytes / (gpu.dram_bytes_per_us * share)) << gpu.name << " " << c.kind;
    }
    // The share is what the line `mugraph check` prints says, so that scripts can undo it.
    char said[32];
    std::snprintf(said, sizeof said, "dram at %.2f of peak", gpu.cublas_dram_share);
    EXPECT_NE(e.str().find(said), std::string::npos) << e.str();
  }
}

/// GQA's fused kernel (examples/found/gqa: exp(Q·K)·V and sum(exp(Q·K)) accumulated over 16
/// iterations of 256 keys, divided after the loop) with `rows` blocks along Q's 256 rows and one
/// per batch.
Graph gqa_fused(int64_t rows) {
  using test::iter;
  Graph k;
  const TensorId q = k.add_input("Q", {2, 256, 64}, DType::f16);
  const TensorId kk = k.add_input("K", {2, 64, 4096}, DType::f16);
  const TensorId v = k.add_input("V", {2, 4096, 64}, DType::f16);
  Graph body = make_block_graph({k.type(q), k.type(kk), k.type(v)}, Dim3{rows, 2, 1}, 16);
  const TensorId qt = body.add(OpKind::input_iterator, {}, iter(0, {1, 0, kPhi}, kPhi));
  const TensorId kt = body.add(OpKind::input_iterator, {}, iter(1, {kPhi, 0, kPhi}, 2));
  const TensorId vt = body.add(OpKind::input_iterator, {}, iter(2, {kPhi, 0, kPhi}, 1));
  const TensorId e = body.add(OpKind::exp, {body.add(OpKind::matmul, {qt, kt})});
  const TensorId ev = body.add(OpKind::matmul, {e, vt});
  const TensorId s = body.add(OpKind::sum, {e}, attrs::sum(2));
  const TensorId acc_ev = body.add(OpKind::accum, {ev}, test::accum_sum());
  const TensorId acc_s = body.add(OpKind::accum, {s}, test::accum_sum());
  body.add(OpKind::output_saver, {body.add(OpKind::div, {acc_ev, acc_s})}, test::saver(0, {1, 0, kPhi}));
  auto op = k.append_with_body(OpKind::graph_kernel, {q, kk, v}, std::move(body));
  k.mark_output(k.ops[op->index()].outputs[0], "O");
  return k;
}

/// The paper's fused μGraphs against the programs they implement run as one pre-defined kernel
/// per op, in the order an H200 measured them (docs/gpu_runs/2026-11-27-h200, codegen.md):
/// - Figure 3b (RMSNorm + Linear, batch 16) and 10b (GatedMLP, batch 8) at the paper's shapes,
///   generated by mugraph, took 70.4 and 53.3 µs; the same programs in PyTorch, eager and replayed
///   from a CUDA graph (cuBLAS), 32.9 and 33.5 µs. The model puts them behind, as measured: their
///   W tiles are 64 bytes wide (the pieces term) and their tile ops wait on latency (issue).
/// - LoRA's fused kernel (examples/found) took 1.85× less than the best PyTorch variant (run of
///   2026-11-26); the model puts it ahead on every GPU.
/// Until 2026-11-27 this test asserted that the model prefers all six of the paper's fused
/// μGraphs, which four of six H200 measurements contradict; a model that ranks against the GPU
/// picks slower code (docs/cost_model.md, "Calibration").
TEST(CostModel, OrdersFusedAndUnfusedAsTheH200Measured) {
  const GpuSpec& h200 = gpu_spec("h200");
  EXPECT_GT(estimate_cost(test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f16), h200).total_us,
            estimate_cost(test::rmsnorm_reference(16, 4096, 4096, DType::f16), h200).total_us);
  EXPECT_GT(estimate_cost(test::gated_mlp_fused(8, 4096, 4096, 128, 16, DType::f16), h200).total_us,
            estimate_cost(test::gated_mlp_reference(8, 4096, 4096, DType::f16), h200).total_us);
  const Graph program = load_graph_file(source_dir() + "/examples/lora.mg");
  const Graph found = load_graph_file(source_dir() + "/examples/found/lora/best.json");
  for (const GpuSpec& gpu : gpu_specs()) {
    const CostEstimate p = estimate_cost(program, gpu), f = estimate_cost(found, gpu);
    EXPECT_LT(f.total_us, p.total_us) << "lora on " << gpu.name << "\nfused:\n" << f.str() << "unfused:\n" << p.str();
  }
}

TEST(CostModel, ALoopThatCannotPipelineExposesItsLoadsInEveryIteration) {
  // Figure 3b with 16 iterations of [256, 32] W tiles pipelines (a second buffer per streamed
  // tile fits), and its pipeline term is one iteration's fill per round of blocks. With 4
  // iterations of [1024, 32] tiles the second buffers do not fit in an H200's 227 KiB (the
  // emitter then loads each iteration's tiles before working on them), one block is resident,
  // and every iteration exposes the smaller of its loads and its work.
  const GpuSpec& h200 = gpu_spec("h200");
  const Target limits = require_target("h200");
  Target roomy = limits;
  roomy.shared_memory_bytes = 1 << 20;
  const Graph sixteen = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f16);
  const Graph four = test::rmsnorm_fig3b(16, 4096, 4096, 128, 4, DType::f16);
  EXPECT_TRUE(loop_pipelined(sixteen.bodies[0], limits));
  EXPECT_FALSE(loop_pipelined(four.bodies[0], limits));
  EXPECT_TRUE(loop_pipelined(four.bodies[0], roomy));  // where it would fit
  // The plan takes more with two stages than with one, and adds the wgmma stages and the TMA
  // barriers on sm_90a only.
  const Graph& b = sixteen.bodies[0];
  EXPECT_LT(planned_shared_bytes(b, 1, limits), planned_shared_bytes(b, 2, limits));
  EXPECT_LT(planned_shared_bytes(b, 2, require_target("a100")), planned_shared_bytes(b, 2, limits));
  const KernelCost k16 = estimate_cost(sixteen, h200).kernels[0], k4 = estimate_cost(four, h200).kernels[0];
  EXPECT_TRUE(k16.pipelined);
  EXPECT_FALSE(k4.pipelined);
  EXPECT_EQ(k4.resident_blocks_per_sm, 1);
  // Same bytes and FLOPs; the four-iteration loop's loads are 4x larger per iteration and all
  // four are exposed, against one sixteenth of the pipelined loop's.
  EXPECT_DOUBLE_EQ(k4.dram_us, k16.dram_us);
  EXPECT_GT(k4.pipeline_us, 10 * k16.pipeline_us) << k4.pipeline_us << " " << k16.pipeline_us;
  EXPECT_LT(k16.total_us, k4.total_us);
  // A loop of one iteration is never pipelined.
  EXPECT_FALSE(loop_pipelined(test::rmsnorm_fig3b(16, 4096, 4096, 128, 1, DType::f16).bodies[0], roomy));
}

TEST(CostModel, GridsThatLeaveSmsIdleLose) {
  // The paper's GQA point: 2 batches × 2 row blocks use 4 of 132 SMs; 2 × 32 use half of them
  // with 8 rows of Q per block.
  for (const GpuSpec& gpu : gpu_specs()) {
    const CostEstimate wide = estimate_cost(gqa_fused(32), gpu), narrow = estimate_cost(gqa_fused(2), gpu);
    EXPECT_LT(wide.total_us, narrow.total_us) << gpu.name << "\n" << wide.str() << narrow.str();
    EXPECT_EQ(narrow.kernels[0].blocks_on_busiest_sm, 1);
    // ... and among the grids of Figure 3b, those that leave seven in eight SMs idle lose. (Wide
    // grids lose too: their tiles are narrow, a few bytes of each row of W per block, and the
    // memory system serves pieces of rows, not bytes: the pieces term.)
    double best = 1e30;
    int64_t best_grid = 0;
    for (int64_t grid : {8, 16, 32, 64, 128}) {
      const double c = estimate_cost(test::rmsnorm_fig3b(16, 4096, 4096, grid, 16, DType::f16), gpu).total_us;
      if (c < best) best = c, best_grid = grid;
    }
    EXPECT_GE(best_grid, 32) << gpu.name;
  }
  // A partial wave costs a whole one: 133 blocks put two on one SM of 132.
  const KernelCost k =
      estimate_cost(test::rmsnorm_fig3b(16, 4256, 4256, 133, 16, DType::f16), gpu_spec("h100")).kernels[0];
  EXPECT_EQ(k.blocks_on_busiest_sm, 2);
}

TEST(CostModel, NarrowTilesCostPiecesOfRows) {
  // GatedMLP's W tiles [256, 4096 / grid]: 128 blocks read 64 bytes of each row, 512 blocks 16.
  // The same bytes, four times the pieces (measured on an H200: 56 and 137 µs, 40 candidates of
  // the paper's search, docs/cost_model.md).
  const GpuSpec& h200 = gpu_spec("h200");
  const KernelCost g128 = estimate_cost(test::gated_mlp_fused(8, 4096, 4096, 128, 16, DType::f16), h200).kernels[0];
  const KernelCost g512 = estimate_cost(test::gated_mlp_fused(8, 4096, 4096, 512, 16, DType::f16), h200).kernels[0];
  const KernelCost g64 = estimate_cost(test::gated_mlp_fused(8, 4096, 4096, 64, 16, DType::f16), h200).kernels[0];
  EXPECT_DOUBLE_EQ(g128.dram_us, g512.dram_us);
  EXPECT_NEAR(g512.pieces_us, 4 * g128.pieces_us, 0.05 * g128.pieces_us);
  // 64 blocks read 128 bytes of a row: one piece, as 128 blocks' 64 bytes are.
  EXPECT_NEAR(g64.pieces_us, g128.pieces_us / 2, 0.05 * g128.pieces_us);
  EXPECT_LT(g64.total_us, g128.total_us);
  EXPECT_LT(g128.total_us, g512.total_us);
}

TEST(CostModel, TileOpWorkTakesLessWithMoreWarps) {
  // Figure 3b's element-wise work and sums: with one warp per scheduler each element costs its
  // latency; twice the threads take half each; at 512 threads issue starts to bound it.
  const GpuSpec& h200 = gpu_spec("h200");
  Graph g = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f16);
  const double t128 = estimate_cost(g, h200).kernels[0].issue_us;
  g.bodies[0].threads = Dim3{256, 1, 1};
  const double t256 = estimate_cost(g, h200).kernels[0].issue_us;
  g.bodies[0].threads = Dim3{512, 1, 1};
  const double t512 = estimate_cost(g, h200).kernels[0].issue_us;
  EXPECT_GT(t128, 0);
  EXPECT_NEAR(t256, t128 / 2, 1e-9 * t128);
  EXPECT_LT(t512, t256);
  EXPECT_GT(t512, t128 / 4);
}

}  // namespace
}  // namespace mugraph
