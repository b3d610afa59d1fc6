// Shared by the search tests: the small programs they search and a scratch directory.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

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
