// The CUDA emitter (codegen.h) on μGraphs built in code: what it generates and what it refuses.
// That the generated code computes the right thing is checked end to end by
// tests/tools/test_codegen.py (host emulation against the interpreter) and on a GPU.
#include <gtest/gtest.h>

#include "mugraph/codegen.h"
#include "mugraph/frontend.h"
#include "test_graphs.h"

namespace mugraph {
namespace {

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
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
  // W's tile: 256 rows per iteration, 32 columns per block.
  EXPECT_NE(code.source.find("in_2 + bx * 32 + it * 1048576"), std::string::npos) << code.source;
  EXPECT_EQ(count(code.source, "mgd::accumulate<"), 2);
  EXPECT_EQ(count(code.source, "mgd::for_each<"), 1);  // the thread graph
  EXPECT_NE(code.source.find("dim3(128, 1, 1), dim3(128)"), std::string::npos);
  EXPECT_NE(code.manifest.find("\"target\": \"sm_90a\""), std::string::npos);
  EXPECT_NE(code.cmake.find("CMAKE_CUDA_ARCHITECTURES 90a"), std::string::npos);
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
  EXPECT_EQ(code.kernels, 3);
  // exp(X) lives in the workspace (4·64 f16 = 512 bytes); Y and O are outputs.
  EXPECT_EQ(code.workspace_bytes, 512);
  EXPECT_EQ(count(code.source, "mgd::Grid"), 3);
  EXPECT_EQ(code.outputs.size(), 2u);
}

TEST(Codegen, AnOutputThatIsAnInputIsCopied) {
  Graph program = parse_program("input X[4, 8]\nY = exp(X)\noutput Y\noutput X\n");
  GeneratedCode code = generate_cuda(program, find_cuda_target("sm_80"));
  EXPECT_EQ(code.kernels, 2);
  EXPECT_NE(code.source.find("copy of output 1"), std::string::npos);
}

TEST(Codegen, TooMuchSharedMemoryIsAUserError) {
  // Valid under the all-live rule (f16 tiles), but f32 accumulators push it over A100's limit.
  Graph g = test::rmsnorm_fig3b(40, 4096, 4096, 8, 256, DType::f16);  // 142 KiB all-live in f16
  ASSERT_FALSE(validate(g, *find_cuda_target("sm_80").limits).has_value());
  try {
    generate_cuda(g, find_cuda_target("sm_80"));
    FAIL() << "expected a shared-memory error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("shared memory"), std::string::npos) << e.what();
  }
}

TEST(Codegen, AnInvalidGraphIsAUserError) {
  Graph g = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f16);
  g.bodies[0].forloop = 3;  // 4096 does not split in 3
  EXPECT_THROW(generate_cuda(g, find_cuda_target("sm_80")), UserError);
}

}  // namespace
}  // namespace mugraph
