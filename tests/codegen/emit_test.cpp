// The CUDA emitter (codegen.h) on μGraphs built in code: what it generates and what it refuses.
// That the generated code computes the right thing is checked end to end by
// tests/tools/test_codegen.py (host emulation against the interpreter) and on a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "mugraph/codegen.h"
#include "mugraph/cost_model.h"
#include "mugraph/frontend.h"
#include "mugraph/loader.h"
#include "mugraph/validate.h"
#include "test_graphs.h"

namespace mugraph {
namespace {

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

/// The shared memory of the first kernel in generated source, from its header comment.
long long kernel_shared_bytes(const std::string& src) {
  const size_t at = src.find(" bytes of shared memory");
  return std::stoll(src.substr(src.rfind(' ', at - 1) + 1, at));
}

/// Options that keep every tile dense row-major, for tests of what the layout pass would change.
CodegenOptions row_major(int stages = 0) {
  CodegenOptions o;
  o.pipeline_stages = stages;
  o.choose_layouts = false;
  return o;
}

TEST(Codegen, TargetsByArch) {
  EXPECT_EQ(find_cuda_target("sm_80").limits->name, "a100");
  EXPECT_EQ(find_cuda_target("sm_90a").limits->name, "h100");
  try {
    find_cuda_target("sm_75");
    FAIL() << "sm_75 is not a target";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("sm_80, sm_90a"), std::string::npos) << e.what();
  }
}

TEST(Codegen, Figure3bIsOneKernelWithALoop) {
  Graph g = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f16);
  GeneratedCode code = generate_cuda(g, find_cuda_target("sm_90a"));
  EXPECT_EQ(code.kernels, 1);
  EXPECT_EQ(code.workspace_bytes, 0);
  ASSERT_EQ(code.inputs.size(), 3u);
  EXPECT_EQ(code.inputs[2].name, "W");
  EXPECT_EQ(code.outputs.at(0).type.shape, (Shape{16, 4096}));
  EXPECT_EQ(count(code.source, "MGD_GLOBAL"), 1);
  EXPECT_EQ(count(code.source, "for (int64_t it = 0; it < 16; ++it)"), 1);
  // W's tile: 256 rows per iteration, 32 columns per block, loaded an iteration ahead: by the
  // copy engine at coordinates (row, column) on sm_90a, from the linear offset on sm_80.
  EXPECT_NE(code.source.find("&tm_2, {int32_t((it + 1) * 256), int32_t(bx * 32)}"), std::string::npos) << code.source;
  EXPECT_NE(generate_cuda(g, find_cuda_target("sm_80")).source.find("in_2 + bx * 32 + (it + 1) * 1048576"),
            std::string::npos);
  // Two summing accumulators: the sums of squares, added by mgd::accumulate; the products, which
  // the matmul adds in registers, written once after the loop. On sm_80 both by mgd::accumulate.
  EXPECT_EQ(count(code.source, "mgd::accumulate<"), 1);
  EXPECT_EQ(count(code.source, "mgd::RegisterAccumulate<mgd::half, 16, 32, 1>{r8, it == 0}"), 1);
  EXPECT_EQ(count(code.source, "mgd::store_result_registers<32, 1>(r8, t8);"), 1);
  EXPECT_EQ(count(generate_cuda(g, find_cuda_target("sm_80")).source, "mgd::accumulate<"), 2);
  EXPECT_EQ(count(code.source, "mgd::for_each<"), 1);  // the thread graph
  EXPECT_NE(code.source.find("dim3(128, 1, 1), dim3(128)"), std::string::npos);
  EXPECT_NE(code.manifest.find("\"target\": \"sm_90a\""), std::string::npos);
  EXPECT_NE(code.cmake.find("CMAKE_CUDA_ARCHITECTURES 90a"), std::string::npos);
}

TEST(Codegen, LoopProductsCanLandAnIterationLater) {
  // Figure 3b with CodegenOptions::overlap_loop_matmuls: the matmul of iteration it is issued
  // and not waited for; iteration it + 1 adds it to the sums in registers before it issues its
  // own, and the last lands after the loop. Its A (the mul's result) takes two buffers, and W's
  // and X's tiles three stages, still loaded one iteration ahead.
  Graph g = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f16);
  CodegenOptions overlap;
  overlap.overlap_loop_matmuls = true;
  const std::string src = generate_cuda(g, find_cuda_target("sm_90a"), overlap).source;
  const std::string plain = generate_cuda(g, find_cuda_target("sm_90a")).source;
  EXPECT_EQ(count(src, "mgd::DeferredProduct<16, 32, 1> p8{};"), 1) << src;
  const size_t land_in_loop =
      src.find("mgd::matmul_wgmma_land(mgd::RegisterAccumulate<mgd::half, 16, 32, 1>{r8, it <= 1}, p8);");
  const size_t issue = src.find(
      "mgd::matmul_wgmma_issue<mgd::Dims<16, 32>, mgd::Dims<256, 0>, 1, mgd::Dims<0, 1>, 32, 256, 128, 64, 1>(p8, t5, "
      "t2);");
  const size_t loop_end =
      src.find("  }\n  mgd::matmul_wgmma_land(mgd::RegisterAccumulate<mgd::half, 16, 32, 1>{r8, false}, p8);");
  const size_t store = src.find("mgd::store_result_registers<32, 1>(r8, t8);");
  ASSERT_NE(land_in_loop, std::string::npos) << src;
  EXPECT_LT(land_in_loop, issue);
  EXPECT_LT(issue, loop_end);
  EXPECT_LT(loop_end, store);
  EXPECT_EQ(count(src, "matmul_wgmma_to"), 0);
  EXPECT_NE(src.find("mgd::half* const t5 = t5_buffers + it % 2 * 7168;"), std::string::npos) << src;
  EXPECT_NE(src.find("if (it + 1 < 16) {"), std::string::npos);
  EXPECT_NE(src.find("mgd::mbarrier_wait(tma_bars + it % 3, it / 3 % 2);"), std::string::npos);
  EXPECT_NE(src.find("t2_stages + (it + 1) % 3 * 8192"), std::string::npos);
  EXPECT_EQ(count(src, "mgd::tma_load_panels<"), 2);  // the prologue's (iteration 0) and the loop's
  // The buffers cost shared memory; the cost model's plan (one buffer each) no longer bounds it.
  EXPECT_GT(kernel_shared_bytes(src), kernel_shared_bytes(plain));
  EXPECT_LE(kernel_shared_bytes(src), find_target("h100")->shared_memory_bytes);
  // Off by default, and where there is no wgmma (sm_80).
  EXPECT_EQ(count(plain, "matmul_wgmma_issue"), 0);
  EXPECT_EQ(count(plain, "mgd::RegisterAccumulate<mgd::half, 16, 32, 1>{r8, it == 0}"), 1);
  EXPECT_EQ(count(generate_cuda(g, find_cuda_target("sm_80"), overlap).source, "matmul_wgmma"), 0);
  // Nor with two warpgroups: the product's one 64-row job would leave one of them a copy to issue.
  CodegenOptions two_warpgroups = overlap;
  two_warpgroups.block_threads = 256;
  EXPECT_EQ(count(generate_cuda(g, find_cuda_target("sm_90a"), two_warpgroups).source, "matmul_wgmma_issue"), 0);
  // Where the extra buffers do not fit, the products land in their own iteration: with 48 rows
  // of X, three stages and two buffers of the mul's result take 185,016 bytes, and four stages
  // alone 199,872; five and two buffers would pass the 232,448 an H100 or H200 allows.
  CodegenOptions deep = overlap;
  deep.pipeline_stages = 4;
  const Graph tall = test::rmsnorm_fig3b(48, 4096, 4096, 128, 16, DType::f16);
  EXPECT_EQ(count(generate_cuda(tall, find_cuda_target("sm_90a"), overlap).source, "matmul_wgmma_issue"), 1);
  const std::string too_big = generate_cuda(tall, find_cuda_target("sm_90a"), deep).source;
  EXPECT_EQ(count(too_big, "matmul_wgmma_issue"), 0) << too_big;
  EXPECT_NE(too_big.find("(4-stage load pipeline)"), std::string::npos) << too_big;
}

TEST(Codegen, BlockMatmulsRunOnWgmmaOnSm90a) {
  // Figure 3b's [16, 256] x [256, 32] f16 tile matmul: warpgroup tensor cores on sm_90a. Only
  // the matmul reads the weight tile W [256, 32], which the copy engine writes with the 64-byte
  // swizzle, and the mul's result [16, 256], which the mul writes in 128-byte swizzled panels:
  // both are read in place (W as B, N-major; the mul's result as A, K-major), so nothing is
  // staged and there is no scratch. mma.sync (mgd::matmul) on sm_80. Tiles row-major.
  Graph g = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f16);
  const std::string hopper = generate_cuda(g, find_cuda_target("sm_90a"), row_major()).source;
  // Only the loop's summing accumulator reads the product: the matmul adds it there, in the
  // registers of the threads that compute it (r8), and the product tile t6 is never stored.
  EXPECT_NE(hopper.find("mgd::matmul_wgmma_to<mgd::Dims<16, 32>, mgd::Dims<256, 0>, 1, mgd::Dims<0, 1>, 32, 256, 0, "
                        "128, 64>(mgd::RegisterAccumulate<mgd::half, 16, 32, 1>{r8, it == 0}, t5, t2, nullptr);  "
                        "// matmul -> [16, 32] f16 on wgmma, both operands in place, added to t8's sums in registers"),
            std::string::npos)
      << hopper;
  EXPECT_EQ(count(hopper, " t6 = "), 0);
  EXPECT_EQ(count(hopper, "mgd::accumulate<"), 1);  // the sums of squares
  EXPECT_NE(hopper.find("mgd::binary<mgd::Threads<128>, mgd::Dims<16, 256>, mgd::Swizzled<16, 256, 128>, "),
            std::string::npos);
  EXPECT_EQ(count(hopper, "scratch"), 0);
  EXPECT_NE(hopper.find("// 2 stages of [256, 32] f16, 64-byte swizzle for wgmma to read in place"), std::string::npos);
  EXPECT_NE(hopper.find("mgd::tma_load_panels<2, 1, 32, 16384>(t2_stages + "), std::string::npos);
  EXPECT_NE(hopper.find("mgd::make_tensor_map(&k0_tm_2, d2, {4096, 4096}, {256, 32}, 64)"), std::string::npos);
  // X [16, 256] is read by the sqr and the mul too: not swizzled.
  EXPECT_NE(hopper.find("mgd::tma_load<2>(t0_stages + "), std::string::npos);
  // The shared window is realigned for the swizzle pattern (up to 1024 - 128 bytes).
  EXPECT_NE(hopper.find("unsigned char* const smem = smem_window + mgd::shared_padding<1024>(smem_window);"),
            std::string::npos);
  // The wgmma job reads 64 rows of the mul's result, which has 16: the rows past its last panel
  // (48 of 128 bytes) are padding its buffer holds, which no other tensor's bytes overlap. With
  // the 17,408 bytes of A's stages gone, the kernel takes 79,856 - 17,408 + 6,144 bytes, and
  // 1,024 fewer without the product tile.
  EXPECT_NE(hopper.find("dim3(128), 67568"), std::string::npos);
  CodegenOptions product_stored = row_major();
  product_stored.matmul_accumulators_in_registers = false;
  const std::string stored = generate_cuda(g, find_cuda_target("sm_90a"), product_stored).source;
  EXPECT_NE(stored.find("mgd::matmul_wgmma<mgd::Dims<16, 32>, mgd::Dims<32, 1>, mgd::Dims<256, 0>, 1, mgd::Dims<0, 1>, "
                        "32, 256, 0, 128, 64>(t6, t5, t2, nullptr);  // matmul -> [16, 32] f16 on wgmma, both operands "
                        "in place\n"),
            std::string::npos)
      << stored;
  EXPECT_EQ(count(stored, "mgd::accumulate<"), 2);
  EXPECT_EQ(count(stored, "ResultRegisters"), 0);
  EXPECT_NE(stored.find("dim3(128), 68592"), std::string::npos);
  const size_t t5 = hopper.find("t5 = reinterpret_cast<mgd::half*>(smem + ");
  ASSERT_NE(t5, std::string::npos);
  const int64_t a_at = std::stoll(hopper.substr(t5 + 41));
  for (size_t at = hopper.find("reinterpret_cast<"); at != std::string::npos;
       at = hopper.find("reinterpret_cast<", at + 1)) {
    const size_t offset = hopper.find("(smem + ", at);
    if (offset == std::string::npos || offset > hopper.find('\n', at)) continue;
    const int64_t o = std::stoll(hopper.substr(offset + 8));
    EXPECT_FALSE(o > a_at && o < a_at + 16 * 256 * 2 + 48 * 128) << hopper.substr(at, 80);
  }
  EXPECT_NE(hopper.find("mgd::sum<mgd::Threads<128>, mgd::Dims<16, 1>, mgd::Dims<1, 1>, mgd::Dims<256, 1>, 1, 256, "
                        "mgd::ReadThrough<mgd::op::Sqr, mgd::half>>(t4, t0);  // sqr folded into sum"),
            std::string::npos);
  EXPECT_EQ(count(hopper, "mgd::op::Sqr>("), 0);  // no tile op computes the squares
  EXPECT_EQ(count(hopper, " t3 = "), 0);          // nor stores them
  const std::string ampere = generate_cuda(g, find_cuda_target("sm_80")).source;
  EXPECT_EQ(count(ampere, "matmul_wgmma"), 0);
  EXPECT_EQ(count(ampere, "scratch"), 0);
  EXPECT_EQ(count(ampere, "mgd::matmul<mgd::Threads<128>,"), 1);
  // f32 operands have no wgmma form here; neither do blocks of partial warpgroups.
  const std::string f32 =
      generate_cuda(test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f32), find_cuda_target("sm_90a")).source;
  EXPECT_EQ(count(f32, "matmul_wgmma"), 0);
  Graph narrow = g;
  narrow.bodies.at(0).threads = Dim3{64, 1, 1};
  const std::string two_warps = generate_cuda(narrow, find_cuda_target("sm_90a")).source;
  EXPECT_EQ(count(two_warps, "matmul_wgmma"), 0);
  EXPECT_EQ(count(two_warps, "mgd::matmul<mgd::Threads<64>,"), 1);
}

TEST(Codegen, WgmmaStagesTakeASecondBufferWhereItCostsNoResidency) {
  // Figure 3b's kernel with every wgmma operand staged (k = 512 per iteration: eight chunks).
  // The second stage buffer is taken where the kernel still fits and an SM holds as many of its
  // blocks as the grid gives it; the cost model plans one (planned_shared_bytes) and assumes
  // that residency.
  CodegenOptions staged;
  staged.read_operands_in_place = false;
  staged.matmul_accumulators_in_registers = false;  // the product tiles stored, as the figures below count
  const CudaTarget& hopper = find_cuda_target("sm_90a");
  // 141,680 bytes with two buffers: one block per SM either way.
  const std::string both =
      generate_cuda(test::rmsnorm_fig3b(16, 4096, 4096, 128, 8, DType::f16), hopper, staged).source;
  EXPECT_NE(both.find(", 512, 21504, 0, 0, 2>("), std::string::npos) << both;  // 1024 + 2 · (64 + 16) · 128
  EXPECT_EQ(kernel_shared_bytes(both), 141680);
  // 70,352 bytes with one (grid 512: 8 columns a block, four blocks an SM): three blocks per SM
  // of 233,472 bytes, which 9,216 more would make two.
  const std::string three_blocks =
      generate_cuda(test::rmsnorm_fig3b(32, 4096, 4096, 512, 16, DType::f16), hopper, staged).source;
  EXPECT_EQ(kernel_shared_bytes(three_blocks), 70352);
  EXPECT_NE(three_blocks.find("// 10240 bytes: operand stages"), std::string::npos) << three_blocks;
  EXPECT_EQ(three_blocks.find(", 2>("), std::string::npos) << three_blocks;
  // The same block on 128 blocks, one an SM, loses nothing to the second buffer.
  const std::string one_per_sm =
      generate_cuda(test::rmsnorm_fig3b(32, 4096, 4096, 128, 16, DType::f16), hopper, staged).source;
  EXPECT_NE(one_per_sm.find(", 2>("), std::string::npos) << one_per_sm;
  // 224,928 bytes with one: a second (12,288 bytes) would pass the 232,448 a block may have.
  const std::string full =
      generate_cuda(test::rmsnorm_fig3b(44, 4096, 4096, 128, 8, DType::f16), hopper, staged).source;
  EXPECT_EQ(kernel_shared_bytes(full), 224928);
  EXPECT_NE(full.find("// 13312 bytes"), std::string::npos) << full;
  EXPECT_EQ(full.find(", 2>("), std::string::npos) << full;
  // Where k is one chunk there is nothing to overlap: one buffer.
  const std::string one_chunk =
      generate_cuda(test::rmsnorm_fig3b(16, 4096, 4096, 128, 64, DType::f16), hopper, staged).source;
  EXPECT_EQ(one_chunk.find(", 2>("), std::string::npos) << one_chunk;
}

TEST(Codegen, PreDefinedOpsGetAKernelEachAndIntermediatesAWorkspace) {
  Graph program = parse_program(R"(
input X[4, 64]
input W[64, 32]
Y = matmul(exp(X), W)
O = sum(Y, dim=1)
output O
output Y
)");
  GeneratedCode code = generate_cuda(program, find_cuda_target("sm_80"));
  EXPECT_EQ(code.kernels, 2);  // exp and sum; the matmul is a cuBLAS call
  EXPECT_EQ(code.blas_calls, 1);
  // exp(X) lives in the workspace (4·64 f16 = 512 bytes); Y and O are outputs.
  EXPECT_EQ(code.workspace_bytes, 512);
  EXPECT_EQ(count(code.source, "mgd::Grid"), 2);
  EXPECT_EQ(code.outputs.size(), 2u);
}

TEST(Codegen, AReshapeNoOutputTakesReadsItsOperandsBuffer) {
  // exp, reshape, exp: the second exp reads the first's workspace buffer as the reshaped tensor.
  Graph program = parse_program("input X[4, 64]\nY = reshape(exp(X), shape=[64, 4])\nO = exp(Y)\noutput O\n");
  GeneratedCode code = generate_cuda(program, find_cuda_target("sm_90a"));
  EXPECT_EQ(code.kernels, 2);
  EXPECT_EQ(code.workspace_bytes, 512);
  EXPECT_EQ(count(code.source, "pre-defined reshape"), 0) << code.source;
  EXPECT_EQ(count(code.source, "stream, d1, o0)"), 1) << code.source;  // the second exp reads d1
  // Y an output too: the first exp writes Y's buffer (o1), which the second reads.
  program = parse_program("input X[4, 64]\nY = reshape(exp(X), shape=[64, 4])\nO = exp(Y)\noutput O, Y\n");
  code = generate_cuda(program, find_cuda_target("sm_90a"));
  EXPECT_EQ(code.kernels, 2);
  EXPECT_EQ(code.workspace_bytes, 0);
  EXPECT_EQ(count(code.source, "pre-defined reshape"), 0) << code.source;
  EXPECT_EQ(count(code.source, "stream, d0, o1)"), 1) << code.source;
  EXPECT_EQ(count(code.source, "stream, o1, o0)"), 1) << code.source;
  // The exp's result read by another op as well: the reshape copies it into the output.
  program = parse_program("input X[4, 64]\nE = exp(X)\nY = reshape(E, shape=[64, 4])\nO = mul(E, 2)\noutput O, Y\n");
  code = generate_cuda(program, find_cuda_target("sm_90a"));
  EXPECT_EQ(code.kernels, 3);
  EXPECT_EQ(count(code.source, "pre-defined reshape"), 1) << code.source;
}

TEST(Codegen, PreDefinedMatmulsGoToCublas) {
  // B without batch dims broadcasts with stride 0; A's batch is dense (one 16×64 matrix apart).
  Graph program = parse_program("input A[3, 16, 64]\ninput B[64, 32]\nC = matmul(A, B)\noutput C\n");
  GeneratedCode code = generate_cuda(program, find_cuda_target("sm_90a"));
  EXPECT_EQ(code.kernels, 0);
  EXPECT_EQ(code.blas_calls, 1);
  // batch 3, m 16, n 32, k 64, strides 1024, 0, 512.
  EXPECT_NE(code.source.find("mgd::gemm<mgd::half>(stream, d0, d1, o0, 3, 16, 32, 64, 1024, 0, 512)"),
            std::string::npos)
      << code.source;
  EXPECT_NE(code.manifest.find("\"blas_calls\": 1"), std::string::npos);
  EXPECT_NE(code.cmake.find("CUDA::cublas"), std::string::npos);
}

TEST(Codegen, MatmulsCublasCannotExpressGetAKernel) {
  // A broadcasts along one batch dim but not the other: no single batch stride; and mixed dtypes.
  for (const char* text : {"input A[4, 1, 16, 64]\ninput B[4, 3, 64, 32]\nC = matmul(A, B)\noutput C\n",
                           "input A[16, 64] f32\ninput B[64, 32] f16\nC = matmul(A, B)\noutput C\n"}) {
    GeneratedCode code = generate_cuda(parse_program(text), find_cuda_target("sm_80"));
    EXPECT_EQ(code.blas_calls, 0) << text;
    EXPECT_EQ(code.kernels, 1) << text;
    EXPECT_NE(code.source.find("mgd::matmul<mgd::Grid"), std::string::npos) << text;
  }
}

TEST(Codegen, AnOutputThatIsAnInputIsCopied) {
  Graph program = parse_program("input X[4, 8]\nY = exp(X)\noutput Y\noutput X\n");
  GeneratedCode code = generate_cuda(program, find_cuda_target("sm_80"));
  EXPECT_EQ(code.kernels, 2);
  EXPECT_NE(code.source.find("copy of output 1"), std::string::npos);
}

TEST(Codegen, TooMuchSharedMemoryIsAUserError) {
  // Valid under the all-live rule (f16 tiles, 142 KiB), but four buffers per loaded tile and f32
  // accumulators push it over A100's limit even with tensors sharing bytes.
  Graph g = test::rmsnorm_fig3b(40, 4096, 4096, 8, 256, DType::f16);
  ASSERT_FALSE(validate(g, *find_cuda_target("sm_80").limits).has_value());
  try {
    generate_cuda(g, find_cuda_target("sm_80"), CodegenOptions{4});
    FAIL() << "expected a shared-memory error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("shared memory"), std::string::npos) << e.what();
  }
}

TEST(Codegen, LoopLoadsArePipelinedInTwoStagesByDefault) {
  // cp.async on sm_80 (sm_90a's TMA pipeline: TmaLoadsWaitOnAStageBarrier). Tiles row-major.
  Graph g = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f16);
  const GeneratedCode one = generate_cuda(g, find_cuda_target("sm_80"), row_major(1));
  const GeneratedCode two = generate_cuda(g, find_cuda_target("sm_80"), row_major());
  // One stage: every iteration loads its own tiles and waits for all of them.
  EXPECT_EQ(count(one.source, "_stages"), 0);
  EXPECT_NE(one.source.find("in_2 + bx * 32 + it * 1048576"), std::string::npos) << one.source;
  EXPECT_EQ(count(one.source, "mgd::async_wait<"), 0);
  // Two: iteration 0's tiles before the loop, then it + 1's while it computes, each in the other
  // half of a double buffer (W's [256, 32] f16 tile: 8192 elements a stage).
  EXPECT_NE(two.source.find("2-stage load pipeline"), std::string::npos);
  EXPECT_NE(two.source.find("(t2_stages + 0 * 8192, in_2 + bx * 32)"), std::string::npos) << two.source;
  EXPECT_NE(two.source.find("(t2_stages + (it + 1) % 2 * 8192, in_2 + bx * 32 + (it + 1) * 1048576)"),
            std::string::npos);
  EXPECT_NE(two.source.find("if (it + 1 < 16)"), std::string::npos);
  EXPECT_EQ(count(two.source, "mgd::async_commit();"), 2);
  EXPECT_EQ(count(two.source, "mgd::async_wait<1>();"), 1);
  EXPECT_NE(two.source.find("mgd::half* const t2 = t2_stages + it % 2 * 8192;"), std::string::npos);
  // The three streamed tiles (X 8 KiB, G 512 B, W 16 KiB) take a second buffer each, and hold
  // their bytes over the whole loop (with one stage, tensors made later in the iteration may
  // reuse a tile's bytes once it is read).
  const auto smem = [](const std::string& src) {
    const size_t at = src.find("dim3(128), ");
    return std::stoll(src.substr(at + 11));
  };
  EXPECT_GE(smem(two.source) - smem(one.source), 8192 + 512 + 16384);
}

TEST(Codegen, MorePipelineStagesLoadFurtherAhead) {
  Graph g = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f16);
  const GeneratedCode three = generate_cuda(g, find_cuda_target("sm_80"), row_major(3));
  EXPECT_NE(three.source.find("3-stage load pipeline"), std::string::npos);
  // Iterations 0 and 1 before the loop, each its own group; it + 2 in the loop.
  EXPECT_NE(three.source.find("(t2_stages + 1 * 8192, in_2 + bx * 32 + 1048576)"), std::string::npos) << three.source;
  EXPECT_NE(three.source.find("in_2 + bx * 32 + (it + 2) * 1048576"), std::string::npos);
  EXPECT_EQ(count(three.source, "mgd::async_commit();"), 3);
  EXPECT_EQ(count(three.source, "mgd::async_wait<2>();"), 1);
  // Never more stages than iterations.
  Graph short_loop = test::rmsnorm_fig3b(16, 512, 512, 16, 2, DType::f16);
  EXPECT_NE(generate_cuda(short_loop, find_cuda_target("sm_80"), CodegenOptions{4}).source.find("2-stage"),
            std::string::npos);
}

TEST(Codegen, TileLayoutsFollowTheLayoutPass) {
  // Figure 3b on sm_80 (layout_choice_test.cpp has the model's figures): W's [256, 32] tile,
  // read by ldmatrix.trans, and the mul's result, read by ldmatrix, get rows padded by 8
  // halves (16 bytes: cp.async vectors stay aligned; W's stage grows from 8192 to 10240
  // elements); X's tile, whose rows the split sum reads 16 bytes per lane, 8 lanes to a row
  // (through the sqr folded into it), stays dense; the matmul's result is written transposed.
  Graph g = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f16);
  const std::string src = generate_cuda(g, find_cuda_target("sm_80")).source;
  EXPECT_NE(src.find("mgd::load_async<mgd::Dims<256, 32>, mgd::Dims<40, 1>, mgd::Dims<4096, 1>>(t2_stages + (it + 1) % "
                     "2 * 10240"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("mgd::sum<mgd::Threads<128>, mgd::Dims<16, 1>, mgd::Dims<1, 1>, mgd::Dims<256, 1>, 1, 256, "
                     "mgd::ReadThrough<mgd::op::Sqr, mgd::half>>(t4, t0);"),
            std::string::npos);
  EXPECT_NE(src.find("mgd::matmul<mgd::Threads<128>, mgd::Dims<16, 32>, mgd::Dims<1, 18>, mgd::Dims<264, 0>, 1, "
                     "mgd::Dims<0, 1>, 40, 256>(t6, t5, t2);"),
            std::string::npos);
  EXPECT_EQ(count(src, "[16, 256] f16, rows padded by 8"), 1) << src;  // the mul's result
  EXPECT_NE(src.find("// layouts: 19376 shared-memory wavefronts per block modelled, 52912 with every tile row-major"),
            std::string::npos);
  // Row-major when asked: no padding, no layout line, every tile's strides dense.
  const std::string dense = generate_cuda(g, find_cuda_target("sm_80"), row_major()).source;
  EXPECT_EQ(count(dense, "padded"), 0);
  EXPECT_EQ(count(dense, "transposed"), 0);
  EXPECT_EQ(count(dense, "// layouts:"), 0);
  // The copy engine's tiles stay dense boxes on sm_90a (W swizzled, which the pass leaves alone).
  const std::string hopper = generate_cuda(g, find_cuda_target("sm_90a")).source;
  EXPECT_NE(hopper.find("t2_stages = reinterpret_cast<mgd::half*>(smem + 0);  // 2 stages of [256, 32] f16, 64-byte "
                        "swizzle for wgmma to read in place\n"),
            std::string::npos)
      << hopper;
  EXPECT_NE(hopper.find("t0_stages = reinterpret_cast<mgd::half*>(smem + 32768);  // 2 stages of [16, 256] f16\n"),
            std::string::npos)
      << hopper;
}

TEST(Codegen, TmaLoadsWaitOnAStageBarrier) {
  // On sm_90a the pipelined tiles come from the copy engine: a tensor map per streamed tile
  // (kernel parameters, built by the launcher), one thread issuing a stage's copies against the
  // stage's barrier with the stage's bytes (X 8 KiB + G 512 B + W 16 KiB), every thread waiting
  // on the barrier's phase, and no cp.async groups left.
  Graph g = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f16);
  const GeneratedCode code = generate_cuda(g, find_cuda_target("sm_90a"));
  const std::string& src = code.source;
  EXPECT_EQ(count(src, "const MGD_GRID_CONSTANT mgd::TensorMap tm_"), 3) << src;
  EXPECT_NE(src.find("mgd::make_tensor_map(&k0_tm_2, d2, {4096, 4096}, {256, 32}, 64)"), std::string::npos) << src;
  EXPECT_NE(src.find("d0, d1, d2, o0, k0_tm_0, k0_tm_1, k0_tm_2);"), std::string::npos);
  EXPECT_EQ(count(src, "mgd::mbarrier_arrive_expect_tx(tma_bars + "), 2);  // prologue, loop
  EXPECT_NE(src.find("mgd::mbarrier_arrive_expect_tx(tma_bars + (it + 1) % 2, 25088);"), std::string::npos);
  EXPECT_NE(src.find("mgd::tma_load_panels<2, 1, 32, 16384>(t2_stages + 0 * 8192, &tm_2, {int32_t(0), int32_t(bx * "
                     "32)}, tma_bars + 0);"),
            std::string::npos);
  EXPECT_NE(src.find("mgd::mbarrier_wait(tma_bars + it % 2, it / 2 % 2);"), std::string::npos);
  EXPECT_EQ(count(src, "mgd::async_commit"), 0);
  EXPECT_EQ(count(src, "mgd::load_async"), 0);
  // Each stage buffer of a TMA tile starts 128-byte aligned.
  int stage_buffers = 0;
  for (size_t at = src.find("_stages = reinterpret_cast<"); at != std::string::npos;
       at = src.find("_stages = reinterpret_cast<", at + 1)) {
    const size_t offset = src.find("(smem + ", at) + 8;
    EXPECT_EQ(std::stoll(src.substr(offset)) % 128, 0) << src.substr(at, 80);
    ++stage_buffers;
  }
  EXPECT_EQ(stage_buffers, 3);
  // One stage: no pipeline, so the tiles load with cp.async as on sm_80.
  const std::string one = generate_cuda(g, find_cuda_target("sm_90a"), CodegenOptions{1}).source;
  EXPECT_EQ(count(one, "tma_load"), 0);
  EXPECT_EQ(count(one, "TensorMap"), 0);
  EXPECT_EQ(count(generate_cuda(g, find_cuda_target("sm_80")).source, "tma_load"), 0);
}

TEST(Codegen, ShortATilesAreReadInPlaceWhereTheirPaddingCostsNoResidency) {
  // Figure 10b: X's tile [8, 256], which the copy engine loads for both matmuls, is read in
  // place with 56 rows of padding (7,168 bytes in every pipeline stage), more than the one
  // stage buffer the cost model plans, less than the two staging takes; one block an SM either
  // way. With four stages too.
  const char* env = std::getenv("MUGRAPH_SOURCE_DIR");
  const Graph g =
      load_graph_file(std::string(env ? env : MUGRAPH_SOURCE_DIR_DEFAULT) + "/examples/ugraphs/gated_mlp_fig10b.json");
  const CudaTarget& sm90 = find_cuda_target("sm_90a");
  const std::string two = generate_cuda(g, sm90).source;
  EXPECT_EQ(count(two, "on wgmma, both operands in place"), 2) << two;
  EXPECT_EQ(count(two, "unsigned char* const scratch"), 0) << two;
  CodegenOptions four_stages;
  four_stages.pipeline_stages = 4;
  EXPECT_EQ(count(generate_cuda(g, sm90, four_stages).source, "on wgmma, both operands in place"), 2);
  // Where blocks share an SM (Figure 3b's shape with 32 rows on 256 or 512 blocks: two or four
  // an SM), an SM still holds as many blocks as with every operand staged (the model's plan).
  // (The mul result is padded once, not per pipeline stage, and by less than the A stage it
  // saves: here the padding cannot cost residency. The check in plan() that keeps it so where
  // it could, for tiles the copy engine loads in several stages, has no such case among these
  // shapes or the saved μGraphs.)
  const GpuSpec& gpu = gpu_spec("h100");
  for (const int64_t grid : {128, 256, 512}) {
    const Graph f = test::rmsnorm_fig3b(32, 4096, 4096, grid, 16, DType::f16);
    CodegenOptions staged;
    staged.read_operands_in_place = false;
    const int64_t per_sm = (grid + gpu.sms - 1) / gpu.sms;
    const auto blocks = [&](const std::string& src) {
      return std::min(per_sm, resident_blocks_per_sm(gpu, 128, kernel_shared_bytes(src)));
    };
    const std::string chosen = generate_cuda(f, sm90).source;
    EXPECT_GE(blocks(chosen), blocks(generate_cuda(f, sm90, staged).source)) << chosen;
  }
}

TEST(Codegen, TilesLoadedOnceWaitOnABarrierOfTheirOwn) {
  // A kernel without a loop loads each tile once; on sm_90a the copy engine does, each tile
  // counted against a barrier of its own, waited for (phase 0) at the barrier after its step.
  // W, read only by the matmul, is written swizzled and read in place.
  Graph g = test::rmsnorm_fig3b(16, 256, 256, 8, 1, DType::f16);
  const std::string src = generate_cuda(g, find_cuda_target("sm_90a")).source;
  EXPECT_EQ(count(src, "for (int s = 0; s < 3; ++s) mgd::mbarrier_init(tma_bars + s, 1);"), 1) << src;
  for (int b = 0; b < 3; ++b) {
    EXPECT_EQ(count(src, "mgd::mbarrier_arrive_expect_tx(tma_bars + " + std::to_string(b) + ", "), 1) << src;
    EXPECT_EQ(count(src, "mgd::mbarrier_wait(tma_bars + " + std::to_string(b) + ", 0);"), 1) << src;
  }
  EXPECT_EQ(count(src, "mgd::load_async"), 0);
  EXPECT_EQ(count(src, "mgd::async_wait_all"), 0);
  EXPECT_EQ(count(src, "const MGD_GRID_CONSTANT mgd::TensorMap tm_"), 3);
  EXPECT_NE(src.find("on wgmma, both operands in place"), std::string::npos) << src;
  // The waits come before the barrier that publishes the tiles, and after the copies.
  EXPECT_LT(src.find("mgd::tma_load"), src.find("mgd::mbarrier_wait(tma_bars + 0, 0);"));
  // The same on sm_80 with cp.async.
  const std::string sm80 = generate_cuda(g, find_cuda_target("sm_80")).source;
  EXPECT_EQ(count(sm80, "tma_"), 0);
  EXPECT_EQ(count(sm80, "mgd::load_async<"), 3);
}

TEST(Codegen, LoopInvariantTilesLoadOnceBeforeThePipeline) {
  // GQA's fused kernel (examples/found/gqa): Q's tile does not change with the loop. It is copied
  // once, before the loop, on a barrier after the pipeline's (two stages: barriers 0 and 1),
  // and waited for after the pipeline's first copies are issued, so that they overlap.
  const char* env = std::getenv("MUGRAPH_SOURCE_DIR");
  const Graph g =
      load_graph_file(std::string(env ? env : MUGRAPH_SOURCE_DIR_DEFAULT) + "/examples/found/gqa/best.json");
  CodegenOptions split;
  split.chain_split_n_blocks = true;
  const std::string src = generate_cuda(g, find_cuda_target("sm_90a"), split).source;
  const size_t q = src.find("mgd::mbarrier_arrive_expect_tx(tma_bars + 2, ");
  const size_t first_stage = src.find("mgd::mbarrier_arrive_expect_tx(tma_bars + 0, ");
  const size_t q_wait = src.find("mgd::mbarrier_wait(tma_bars + 2, 0);");
  const size_t loop = src.find("for (int64_t it = 0;");
  ASSERT_NE(q, std::string::npos) << src;
  EXPECT_LT(q, first_stage);
  EXPECT_LT(first_stage, q_wait);
  EXPECT_LT(q_wait, loop);
  // The block's 16 query rows are one 64-row job for its four warpgroups and S is 256 wide: with
  // the split on, the matmul chain splits S's four n-blocks among the four warpgroups, which add
  // their partial results through shared memory of their own (mgd::matmul_chain_partials_bytes),
  // in the loop. (That fits here: op by op would take more, with S and E stored.)
  EXPECT_EQ(count(src, "mgd::matmul_chain_wgmma<16, 64, 256, 64, 128, 128, 128, mgd::half, 4>("), 1) << src;
  EXPECT_NE(src.find("S's n-blocks split 4 ways among the warpgroups"), std::string::npos) << src;
  EXPECT_LT(loop, src.find("mgd::matmul_chain_wgmma<"));
  // Without the split, the default since both were timed on an H200 (op by op was faster), the
  // chain would run S's four n-blocks on one warpgroup while three wait, so the ops run one by
  // one, Q and K both read in place by Q·K's wgmma.
  const std::string op_by_op = generate_cuda(g, find_cuda_target("sm_90a")).source;
  EXPECT_NE(op_by_op.find("on wgmma, both operands in place"), std::string::npos) << op_by_op;
  EXPECT_EQ(count(op_by_op, "matmul_chain_wgmma"), 0) << op_by_op;
  // With one warpgroup the chain takes the loop body unsplit, with the scores in registers (16
  // query rows of a 64-row job); nothing is staged for it.
  CodegenOptions one_warpgroup;
  one_warpgroup.block_threads = 128;
  const std::string chained = generate_cuda(g, find_cuda_target("sm_90a"), one_warpgroup).source;
  EXPECT_NE(chained.find("mgd::matmul_chain_wgmma<16, 64, 256, 64, 128, 128, 128, mgd::half>("), std::string::npos)
      << chained;
  EXPECT_EQ(count(chained, "unsigned char* const scratch"), 0) << chained;
}

TEST(Codegen, SplitMatmulChainsTakeNoMoreSharedMemoryThanOpByOp) {
  // QKNorm's fused kernel (examples/found/qknorm, 16 query rows, 512 threads): split four ways,
  // the chain's partials (13,056 bytes) would raise the kernel's shared memory above op by op's,
  // which the cost model's plan must bound; split two ways (4,352 bytes) it fits.
  const char* env = std::getenv("MUGRAPH_SOURCE_DIR");
  const Graph g =
      load_graph_file(std::string(env ? env : MUGRAPH_SOURCE_DIR_DEFAULT) + "/examples/found/qknorm/best.json");
  const CudaTarget& sm90 = find_cuda_target("sm_90a");
  CodegenOptions split_on;
  split_on.chain_split_n_blocks = true;
  const std::string split = generate_cuda(g, sm90, split_on).source;
  EXPECT_EQ(count(split, "mgd::matmul_chain_wgmma<16, 64, 256, 64, 128, 128, 128, mgd::half, 2>("), 1) << split;
  // By default (the split off) S's four n-blocks run op by op.
  EXPECT_EQ(count(generate_cuda(g, sm90).source, "matmul_chain_wgmma"), 0);
  CodegenOptions op_by_op;
  op_by_op.matmul_chains_in_registers = false;
  op_by_op.matmul_accumulators_in_registers = false;
  const std::string plain = generate_cuda(g, sm90, op_by_op).source;
  EXPECT_LE(kernel_shared_bytes(split), kernel_shared_bytes(plain));
  const Op& kernel = g.ops[3];
  ASSERT_EQ(kernel.kind, OpKind::graph_kernel);
  EXPECT_LE(kernel_shared_bytes(split),
            planned_shared_bytes(g.bodies[static_cast<size_t>(kernel.attrs.body)], 2, *find_target("sm_90a")));
}

TEST(Codegen, LoopInvariantOpsRunOnceBeforeTheLoop) {
  // QKNorm at batch 1 (a search's best of 2026-11-27, kept in tests/codegen/data so that new
  // searches do not change the test): Q's [256, 64] tile is loaded once, and its square, row sums and
  // normalisation (the pre phase, op_order.h) are emitted after its barrier and before the loop;
  // K's, streamed, are normalised in every iteration. Both squares are folded into their sums.
  const char* env = std::getenv("MUGRAPH_SOURCE_DIR");
  const Graph g =
      load_graph_file(std::string(env ? env : MUGRAPH_SOURCE_DIR_DEFAULT) + "/tests/codegen/data/qknorm_bs1_best.json");
  const std::string src = generate_cuda(g, find_cuda_target("sm_90a")).source;
  const size_t wait_q = src.find("mgd::mbarrier_wait(tma_bars + 2, 0);  // tile [1, 256, 64] f16");
  const size_t pre = src.find("// Loop-invariant ops: once, before the loop.");
  const size_t sqr_q = src.find("mgd::ReadThrough<mgd::op::Sqr, mgd::half>>(t4, t0);  // sqr folded into sum");
  const size_t loop = src.find("for (int64_t it = 0;");
  const size_t sqr_k = src.find("mgd::ReadThrough<mgd::op::Sqr, mgd::half>>(t7, t1);  // sqr folded into sum");
  ASSERT_NE(wait_q, std::string::npos) << src;
  ASSERT_NE(sqr_k, std::string::npos) << src;
  EXPECT_LT(wait_q, pre);
  EXPECT_LT(pre, sqr_q);
  EXPECT_LT(sqr_q, loop);
  EXPECT_LT(loop, sqr_k);
  EXPECT_EQ(count(src, "mgd::op::Sqr,"), 2);
  EXPECT_EQ(count(src, "mgd::op::Sqr>("), 0);
}

TEST(Codegen, AMatmulOfAnAccumulatedTileRunsOnTheBlocksThreads) {
  // X·(A·B): the loop accumulates A·B (f32 sums in shared memory), and X, loaded once, joins it
  // after the loop. The tensor cores read 16-bit tiles only: that matmul runs on the block's
  // threads on both targets (the loop's A·B on wgmma), and the cost model counts its FLOPs at
  // the CUDA-core rate.
  Graph k;
  const TensorId x = k.add_input("X", {64, 256}), a = k.add_input("A", {256, 256}), b = k.add_input("B", {256, 256});
  Graph body = make_block_graph({k.type(x), k.type(a), k.type(b)}, Dim3{16, 1, 1}, 4);
  const TensorId xt = body.add(OpKind::input_iterator, {}, test::iter(0, {kPhi, kPhi, kPhi}, kPhi));  // [64, 256]
  const TensorId at = body.add(OpKind::input_iterator, {}, test::iter(1, {kPhi, kPhi, kPhi}, 1));     // [256, 64]
  const TensorId bt = body.add(OpKind::input_iterator, {}, test::iter(2, {1, kPhi, kPhi}, 0));        // [64, 16]
  const TensorId ab = body.add(OpKind::accum, {body.add(OpKind::matmul, {at, bt})}, test::accum_sum());
  body.add(OpKind::output_saver, {body.add(OpKind::matmul, {xt, ab})}, test::saver(0, {1, kPhi, kPhi}));
  auto op = k.append_with_body(OpKind::graph_kernel, {x, a, b}, std::move(body));
  ASSERT_TRUE(op.ok()) << op.rejection().str();
  k.mark_output(k.ops[op->index()].outputs[0], "O");
  ASSERT_FALSE(validate(k)) << validate(k)->str();
  const std::string hopper = generate_cuda(k, find_cuda_target("sm_90a")).source;
  EXPECT_EQ(count(hopper, "mgd::matmul_wgmma"), 1) << hopper;
  EXPECT_EQ(count(hopper, "mgd::matmul<"), 1) << hopper;
  const Graph& b2 = k.bodies[0];
  double tensor = 0, fma = 0;
  add_flops(b2, b2.ops[3], 1.0, tensor, fma);
  EXPECT_EQ(tensor, 2.0 * 256 * 16 * 64);
  EXPECT_EQ(fma, 0.0);
  add_flops(b2, b2.ops[5], 1.0, tensor, fma);
  EXPECT_EQ(fma, 2.0 * 64 * 16 * 256);
}

TEST(Codegen, ThreadGraphValuesAThreadsElementsShareAreComputedOnce) {
  // QKNorm at batch 1: K's normalisation in the loop scales each column of the [64, 32] tile by
  // sqrt(sum / 64) of that column. With 256 threads each thread's 8 elements (e, e + 256, ...)
  // lie in one column (256 is a multiple of 32), so the column's load, division and square root
  // run once per thread, at its column (e0), before the loop over its elements; the element's
  // own load and division stay in it. Q's normalisation before the loop (a [256, 64] tile, a
  // scale per row of 64) gives each thread elements of 8 rows: nothing there is shared.
  const char* env = std::getenv("MUGRAPH_SOURCE_DIR");
  const Graph g =
      load_graph_file(std::string(env ? env : MUGRAPH_SOURCE_DIR_DEFAULT) + "/tests/codegen/data/qknorm_bs1_best.json");
  const std::string src = generate_cuda(g, find_cuda_target("sm_90a")).source;
  const size_t loop = src.find("for (int64_t it = 0;");
  const size_t once = src.find("  const int64_t e0 = mgd::thread_rank() % 32;\n", loop);
  ASSERT_NE(once, std::string::npos) << src;
  const size_t each = src.find("mgd::for_each<mgd::Threads<256>, mgd::Dims<1, 64, 32>>", once);
  ASSERT_NE(each, std::string::npos) << src;
  const std::string shared = src.substr(once, each - once),
                    per_element = src.substr(each, src.find("});", each) - each);
  EXPECT_EQ(count(shared, "(e0)]"), 1) << shared;  // the column's sum
  EXPECT_EQ(count(shared, "mgd::op::Sqrt{}"), 1) << shared;
  EXPECT_EQ(count(per_element, "mgd::to_float("), 1) << per_element;  // the element
  EXPECT_EQ(count(per_element, "mgd::op::Sqrt{}"), 0) << per_element;
  EXPECT_EQ(count(src, "const int64_t e0"), 1);  // Q's scales differ within a thread
  // 96 threads keep a thread in one column too; 80 do not, and share nothing.
  Graph other = g;
  for (Graph& b : other.bodies) b.threads = Dim3{96, 1, 1};
  EXPECT_EQ(count(generate_cuda(other, find_cuda_target("sm_90a")).source, "% 32;"), 1);
  for (Graph& b : other.bodies) b.threads = Dim3{80, 1, 1};
  EXPECT_EQ(count(generate_cuda(other, find_cuda_target("sm_90a")).source, "const int64_t e0"), 0);
}

TEST(Codegen, ElementWiseOpsWriteTheTilesWgmmaReadsInPlaceSwizzled) {
  // QKNorm at batch 1 (tests/codegen/data/qknorm_bs1_best.json, a search's best of 2026-11-27):
  // the normalized Q and K tiles are written
  // by thread graphs and read by QN·KN alone. They are written swizzled (mgd::Swizzled, QN
  // [256, 64] with the 128-byte span, KN [64, 32] with the 64-byte one), each writer fences its
  // stores for the tensor cores before the barrier, and the matmul reads both in place. (Op by
  // op: the matmul chain, below, reads them in place too, as one call.)
  const char* env = std::getenv("MUGRAPH_SOURCE_DIR");
  const Graph g =
      load_graph_file(std::string(env ? env : MUGRAPH_SOURCE_DIR_DEFAULT) + "/tests/codegen/data/qknorm_bs1_best.json");
  CodegenOptions op_by_op;
  op_by_op.matmul_chains_in_registers = false;
  op_by_op.matmul_accumulators_in_registers = false;
  const std::string src = generate_cuda(g, find_cuda_target("sm_90a"), op_by_op).source;
  const size_t qn = src.find("[mgd::offset<mgd::Dims<1, 256, 64>, mgd::Swizzled<256, 64, 128>>(e)] = ");
  const size_t kn = src.find("[mgd::offset<mgd::Dims<1, 64, 32>, mgd::Swizzled<64, 32, 64>>(e)] = ");
  const size_t mm = src.find("on wgmma, both operands in place");
  ASSERT_NE(qn, std::string::npos) << src;
  ASSERT_NE(kn, std::string::npos) << src;
  ASSERT_NE(mm, std::string::npos) << src;
  EXPECT_EQ(count(src, "mgd::fence_proxy_async();"), 2) << src;
  for (const size_t writer : {qn, kn}) {
    const size_t fence = src.find("mgd::fence_proxy_async();", writer);
    EXPECT_LT(fence, src.find("mgd::sync_block();", writer));
    EXPECT_LT(fence, mm);
  }
  EXPECT_EQ(count(src, "[1, 256, 64] f16, 128-byte swizzle for wgmma to read in place"), 1) << src;
  EXPECT_EQ(count(src, "[1, 64, 32] f16, 64-byte swizzle for wgmma to read in place"), 1) << src;
  // With operands staged (the option), nothing is swizzled and nothing fenced.
  CodegenOptions staged;
  staged.read_operands_in_place = false;
  const std::string other = generate_cuda(g, find_cuda_target("sm_90a"), staged).source;
  EXPECT_EQ(count(other, "Swizzled<"), 0);
  EXPECT_EQ(count(other, "fence_proxy_async"), 0);
}

TEST(Codegen, AttentionScoresStayInRegisters) {
  // QKNorm at batch 1: S = QN·KN, E = exp(S), E·V and sum(E) along rows in the loop, each summed
  // by an accumulator. With every operand but E read in place, the six ops are one
  // mgd::matmul_chain_wgmma call that adds its results to the accumulators itself: S, E and the
  // two results get no shared memory, the wgmma matmuls no operand stages, and the loop body
  // loses three of its barriers (between the first matmul, exp, the second matmul with the sum,
  // and the accumulates). The sums stay in the registers of the threads that compute them
  // through the loop and are written to the accumulators' tiles once, after it; with that option
  // off the chain adds to the tiles in every iteration. Op by op (the option) and with staged
  // operands the ops stay.
  const char* env = std::getenv("MUGRAPH_SOURCE_DIR");
  const Graph g =
      load_graph_file(std::string(env ? env : MUGRAPH_SOURCE_DIR_DEFAULT) + "/tests/codegen/data/qknorm_bs1_best.json");
  const GeneratedCode chained = generate_cuda(g, find_cuda_target("sm_90a"));
  const std::string& src = chained.source;
  EXPECT_EQ(count(src, "mgd::matmul_chain_wgmma<256, 64, 32, 64, 128, 64, 128, mgd::half>("), 1) << src;
  EXPECT_EQ(count(src, "mgd::ResultRegisters<256, 64, 2> r13;"), 1) << src;
  EXPECT_EQ(count(src, "mgd::ResultRegisters<256, 1, 2> r14;"), 1) << src;
  EXPECT_EQ(count(src, "mgd::RegisterAccumulate<mgd::half, 256, 64, 2>{r13, it == 0}"), 1) << src;
  EXPECT_EQ(count(src, "mgd::RegisterAccumulate<mgd::half, 256, 1, 2>{r14, it == 0}"), 1) << src;
  EXPECT_EQ(count(src, "TileAccumulate"), 0) << src;
  EXPECT_EQ(count(src, "mgd::matmul_wgmma<"), 0) << src;
  EXPECT_EQ(count(src.substr(0, src.find("// kernel_1")), "mgd::accumulate<"), 0) << src;  // kernel_1 combines
  EXPECT_EQ(count(src, "mgd::op::Exp>"), 0) << src;
  EXPECT_EQ(count(src, "unsigned char* const scratch"), 0) << src;
  const size_t chain = src.find("mgd::matmul_chain_wgmma<");
  const size_t loop = src.find("for (int64_t it = 0;");
  const size_t loop_end = src.find("\n  }\n", loop);
  EXPECT_LT(loop, chain);
  EXPECT_LT(chain, loop_end);
  EXPECT_LT(src.find("mgd::ResultRegisters<256, 64, 2> r13;"), loop);
  const size_t store = src.find("mgd::store_result_registers<64, 1>(r13, t13);\n");
  EXPECT_LT(loop_end, store);
  EXPECT_LT(store, src.find("mgd::sync_block();", store));
  EXPECT_LT(src.find("mgd::sync_block();", store), src.find("mgd::copy<", store));  // the saves read them after
  CodegenOptions shared_sums;
  shared_sums.chain_accumulators_in_registers = false;
  const std::string in_shared = generate_cuda(g, find_cuda_target("sm_90a"), shared_sums).source;
  EXPECT_EQ(count(in_shared, "mgd::TileAccumulate<mgd::half, 64, 1>{t13, it == 0}"), 1) << in_shared;
  EXPECT_EQ(count(in_shared, "mgd::TileAccumulate<mgd::half, 1, 1>{t14, it == 0}"), 1) << in_shared;
  EXPECT_EQ(count(in_shared, "ResultRegisters"), 0) << in_shared;
  CodegenOptions op_by_op;
  op_by_op.matmul_chains_in_registers = false;
  op_by_op.matmul_accumulators_in_registers = false;
  const GeneratedCode plain = generate_cuda(g, find_cuda_target("sm_90a"), op_by_op);
  EXPECT_EQ(count(plain.source, "matmul_chain_wgmma"), 0);
  EXPECT_EQ(count(plain.source, "mgd::matmul_wgmma<"), 2);
  // Three fewer barriers in the loop body, and less shared memory (no S, E, results or stages).
  const auto loop_barriers = [](const std::string& s) {
    const size_t from = s.find("for (int64_t it = 0;");
    return count(s.substr(from, s.find("\n  }\n", from) - from), "mgd::sync_block();");
  };
  EXPECT_EQ(loop_barriers(plain.source) - loop_barriers(src), 3);
  EXPECT_LT(kernel_shared_bytes(src), kernel_shared_bytes(plain.source));
  CodegenOptions staged;
  staged.read_operands_in_place = false;
  EXPECT_EQ(count(generate_cuda(g, find_cuda_target("sm_90a"), staged).source, "matmul_chain_wgmma"), 0);
}

TEST(Codegen, AnAutomaticPipelineFallsBackWhereItDoesNotFit) {
  // 56 rows, 64 blocks, 16 iterations: with two buffers per tile (held over the whole loop) the
  // kernel needs more than the 167,936 bytes A100 allows, with one it fits (111,184 bytes): the
  // automatic choice is no pipeline; asking for two is an error. (At 52 rows two fit: 167,808.)
  Graph g = test::rmsnorm_fig3b(56, 4096, 4096, 64, 16, DType::f16);
  const GeneratedCode code = generate_cuda(g, find_cuda_target("sm_80"));
  EXPECT_EQ(count(code.source, "_stages"), 0) << code.source.substr(0, 400);
  try {
    generate_cuda(g, find_cuda_target("sm_80"), CodegenOptions{2});
    FAIL() << "expected a shared-memory error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("2 buffers per loaded tile"), std::string::npos) << e.what();
  }
}

TEST(Codegen, PipelineStagesOutOfRangeAreAUserError) {
  Graph g = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f16);
  EXPECT_THROW(generate_cuda(g, find_cuda_target("sm_80"), CodegenOptions{kMaxPipelineStages + 1}), UserError);
  EXPECT_THROW(generate_cuda(g, find_cuda_target("sm_80"), CodegenOptions{-1}), UserError);
}

TEST(Codegen, AnInvalidGraphIsAUserError) {
  Graph g = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f16);
  g.bodies[0].forloop = 3;  // 4096 does not split in 3
  EXPECT_THROW(generate_cuda(g, find_cuda_target("sm_80")), UserError);
}

}  // namespace
}  // namespace mugraph
