// Shared by the search tests: the small programs they search and a scratch directory.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "mugraph/search.h"

namespace mugraph::search_testing {

/// RMSNorm followed by a projection (the paper's Figure 3a) at a small shape.
inline constexpr const char* kRmsNormSmall = R"(
input X[4, 64]
input G[64]
input W[64, 64]
S = sum(sqr(X), dim=1)
Y = div(mul(X, G), sqrt(div(S, 64)))
O = matmul(Y, W)
output O
)";

/// Group-query attention with its 2 key/value heads tiled to 8 query heads (head h reads
/// K[h mod 2]), at a small shape: what lift_repeats reads through a broadcast.
inline constexpr const char* kTiledGqaSmall = R"(
input Q[8, 16, 32]
input K[2, 32, 64]
input V[2, 64, 32]
KR = repeat(K, dim=0, times=4)
VR = repeat(V, dim=0, times=4)
S = exp(mul(matmul(Q, KR), 0.125))
O = div(matmul(S, VR), sum(S, dim=2))
output O
)";

/// Llama's MLP input at a small shape: an RMS norm with its ε (an add of a scalar), then a gated
/// MLP. Two matmuls and an add, but no sum of two contractions: no concats are enumerated.
inline constexpr const char* kRmsNormGatedMlpSmall = R"(
input X[8, 64]
input G[64]
input W1[64, 128]
input W2[64, 128]
N = mul(G, div(X, sqrt(add(div(sum(sqr(X), dim=1), 64), 1e-6))))
O = mul(silu(matmul(N, W1)), matmul(N, W2))
output O
)";

/// Llama's MLP block at a small shape (bench/heldout/llama_mlp_block.mg's program): the norm and
/// gated MLP above, then the down projection and the residual add.
inline constexpr const char* kLlamaMlpBlockSmall = R"(
input X[8, 64]
input G[64]
input W1[64, 128]
input W2[64, 128]
input W3[128, 64]
N = mul(G, div(X, sqrt(add(div(sum(sqr(X), dim=1), 64), 1e-6))))
M = mul(silu(matmul(N, W1)), matmul(N, W2))
O = add(X, matmul(M, W3))
output O
)";

/// The paper's nTrans at a small shape: norm(X + α ⊙ norm(H − X)), norm(v) = v / sqrt(sum(v²,
/// dim=1) / 64).
inline constexpr const char* kNTransSmall = R"(
input H[4, 64]
input X[4, 64]
input Alpha[4, 64]
D = sub(H, X)
N = div(D, sqrt(div(sum(sqr(D), dim=1), 64)))
Y = add(X, mul(Alpha, N))
O = div(Y, sqrt(div(sum(sqr(Y), dim=1), 64)))
output O
)";

/// FlashDecoding's split of the key/value sequence (examples::gqa_split_kv) at a small shape: 8
/// splits of 64 keys, a 4-step loop in kernel 1, and kernel 2's loop over the 8 slots (a range the
/// paper's list {1, 4, 16, 64} lacks).
inline constexpr const char* kSmallGqa =
    "input Q[2, 16, 8]\ninput K[2, 8, 64]\ninput V[2, 64, 8]\n"
    "E = exp(matmul(Q, K))\nO = matmul(div(E, sum(E, dim=2)), V)\noutput O\n";

/// RMSNorm then a projection at a small shape: its best μGraphs normalise in a graph-defined
/// kernel and leave the matmul, and the bytes of W, to a later kernel.
inline constexpr const char* kSmallRmsNormLinear =
    "input X[2, 64]\ninput G[64]\ninput W[64, 64]\n"
    "Y = div(mul(X, G), sqrt(div(sum(sqr(X), dim=1), 64)))\nO = matmul(Y, W)\noutput O\n";

/// The model-bound options of the floor tests: small limits, so that a tree of a few thousand
/// tasks reaches kernels of every kind, on the H200's model.
inline SearchOptions small_model_bound_options() {
  SearchOptions options;
  options.cost_bound = CostBound::model;
  options.max_block_ops = 8;
  options.max_kernel_ops = 3;
  options.target = require_target("h200");
  return options;
}

/// A fresh directory under the temp dir named after the running test, removed at its end.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            (prefix + "_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream f(file(name), std::ios::binary);
    f << text;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace mugraph::search_testing
