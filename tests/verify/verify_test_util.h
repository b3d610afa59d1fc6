/// \file verify_test_util.h
/// Helpers shared by the verifier's acceptance tests: the example programs at any shape, the
/// source tree, timing, and test-size scaling for slow (sanitizer or debug) builds.
#pragma once

#include <chrono>
#include <cstdlib>
#include <string>

#include "mugraph/frontend.h"
#include "mugraph/graph.h"

namespace mugraph::vtest {

/// The source tree: $MUGRAPH_SOURCE_DIR, else the directory the tests were configured from.
inline std::string source_dir() {
  const char* dir = std::getenv("MUGRAPH_SOURCE_DIR");
  return dir ? dir : MUGRAPH_SOURCE_DIR_DEFAULT;
}

/// Whether this is a build where heavy tests must shrink: a sanitizer build (the
/// MUGRAPH_SANITIZE_BUILD definition or environment variable) or a build without optimization.
inline bool slow_build() {
#if defined(MUGRAPH_SANITIZE_BUILD) || !defined(NDEBUG)
  return true;
#else
  return std::getenv("MUGRAPH_SANITIZE_BUILD") != nullptr;
#endif
}

/// Seconds since `start`.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline std::string dims(std::initializer_list<int64_t> d) {
  std::string out = "[";
  for (int64_t v : d) out += (out.size() > 1 ? ", " : "") + std::to_string(v);
  return out + "]";
}

/// examples/rmsnorm_linear.mg (the paper's Figure 3a) at shapes X [rows, h], W [h, n], in f32.
inline std::string rmsnorm_linear_program(int64_t rows, int64_t h, int64_t n, const std::string& divisor = "") {
  std::string d = divisor.empty() ? std::to_string(h) : divisor;
  return "input X" + dims({rows, h}) + " f32\ninput G" + dims({h}) + " f32\ninput W" + dims({h, n}) +
         " f32\nS = sum(sqr(X), dim=1)\nY = div(mul(X, G), sqrt(div(S, " + d + ")))\nO = matmul(Y, W)\noutput O\n";
}

/// examples/gated_mlp.mg at shapes X [rows, h], W1, W2 [h, n], in f32.
inline std::string gated_mlp_program(int64_t rows, int64_t h, int64_t n) {
  return "input X" + dims({rows, h}) + " f32\ninput W1" + dims({h, n}) + " f32\ninput W2" + dims({h, n}) +
         " f32\nO = mul(silu(matmul(X, W1)), matmul(X, W2))\noutput O\n";
}

/// examples/exp_scale.mg at shapes X [rows, h], G [h], in f32.
inline std::string exp_scale_program(int64_t rows, int64_t h) {
  return "input X" + dims({rows, h}) + " f32\ninput G" + dims({h}) + " f32\nO = mul(exp(X), G)\noutput O\n";
}

/// examples/rmsnorm.mg at shapes X [rows, h], G [h], in f32.
inline std::string rmsnorm_program(int64_t rows, int64_t h) {
  return "input X" + dims({rows, h}) + " f32\ninput G" + dims({h}) +
         " f32\nS = sum(sqr(X), dim=1)\nO = div(mul(X, G), sqrt(div(S, " + std::to_string(h) + ")))\noutput O\n";
}

}  // namespace mugraph::vtest
