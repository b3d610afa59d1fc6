// The cost model (cost_model.h): its monotonicity and lower bound, the paper's fused μGraphs
// against the programs they implement run as one kernel per op, and grids that fill the SMs
// against grids that leave them idle.
#include "mugraph/cost_model.h"

#include <gtest/gtest.h>

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

/// Every benchmark program in examples/ as one pre-defined kernel per op, against the paper's
/// fused μGraph for it: the one the search found (examples/found: Figure 3b's structure for
/// RMSNorm, 10b's for GatedMLP, 9b's for LoRA, a FlashAttention-like kernel for QKNorm, one
/// kernel for nTrans), and for GQA the FlashAttention-like kernel with its grid chosen per shape,
/// as the paper does (the search's pick, 4 rows of Q per block, re-reads K and V from L2 in 128
/// blocks: the model ranks it behind the unfused program on A100 and H200).
TEST(CostModel, PrefersThePapersFusedUGraphsOverTheUnfusedPrograms) {
  for (const char* name : {"rmsnorm_linear", "gated_mlp", "lora", "gqa", "qknorm", "ntrans"}) {
    const Graph program = load_graph_file(source_dir() + "/examples/" + name + ".mg");
    const Graph found = load_graph_file(source_dir() + "/examples/found/" + name + "/best.json");
    for (const GpuSpec& gpu : gpu_specs()) {
      const CostEstimate p = estimate_cost(program, gpu);
      CostEstimate f = estimate_cost(found, gpu);
      if (std::string(name) == "gqa")
        for (int64_t rows : {2, 4, 8, 16, 32, 64}) {
          CostEstimate e = estimate_cost(gqa_fused(rows), gpu);
          if (e.total_us < f.total_us) f = e;
        }
      // The QKNorm kernel searched for H100 (136 KiB of tiles, and its streamed tiles again for a
      // second stage) cannot pipeline its loop in an A100's 164 KiB; the one the search finds
      // for A100 (40 KiB) can (tests/opt/data/qknorm_a100.json:
      // `mugraph search examples/qknorm.mg --target a100 --threads 2`, exhausted in 0.18 s).
      if (std::string(name) == "qknorm" && gpu.name == "a100")
        f = estimate_cost(load_graph_file(source_dir() + "/tests/opt/data/qknorm_a100.json"), gpu);
      EXPECT_LT(f.total_us, p.total_us) << name << " on " << gpu.name << "\nfused:\n"
                                        << f.str() << "unfused:\n"
                                        << p.str();
    }
  }
  // The hand-written Figure 3b and 10b μGraphs at the paper's shapes, likewise.
  for (const GpuSpec& gpu : gpu_specs()) {
    EXPECT_LT(estimate_cost(test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f16), gpu).total_us,
              estimate_cost(test::rmsnorm_reference(16, 4096, 4096, DType::f16), gpu).total_us);
    EXPECT_LT(estimate_cost(test::gated_mlp_fused(8, 4096, 4096, 128, 16, DType::f16), gpu).total_us,
              estimate_cost(test::gated_mlp_reference(8, 4096, 4096, DType::f16), gpu).total_us);
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
    // ... and among the grids of Figure 3b, the one with a block per SM or more wins.
    double best = 1e30;
    int64_t best_grid = 0;
    for (int64_t grid : {8, 16, 32, 64, 128}) {
      const double c = estimate_cost(test::rmsnorm_fig3b(16, 4096, 4096, grid, 16, DType::f16), gpu).total_us;
      if (c < best) best = c, best_grid = grid;
    }
    EXPECT_GE(best_grid, 64) << gpu.name;
  }
  // A partial wave costs a whole one: 133 blocks put two on one SM of 132.
  const KernelCost k =
      estimate_cost(test::rmsnorm_fig3b(16, 4256, 4256, 133, 16, DType::f16), gpu_spec("h100")).kernels[0];
  EXPECT_EQ(k.blocks_on_busiest_sm, 2);
}

}  // namespace
}  // namespace mugraph
