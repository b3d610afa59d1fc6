// Float-interpreter throughput on the paper's two fused μGraphs at the paper's shapes:
//   RMSNorm + matmul (Figure 3b): X [16, 4096], G [4096], W [4096, 4096]; grid 128, loop 16
//   GatedMLP (Figure 10b):        X [8, 4096], W1, W2 [4096, 4096];     grid 128, loop 16
// and, for comparison, the same programs as kernel graphs of pre-defined ops. GFLOP/s counts
// 2·M·N·K per matmul; each figure is the median of the timed runs after one warm-up run.
//
// Usage: bench_interp [--runs N] [--threads T]   (T = 0: all hardware threads)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "mugraph/interp.h"
#include "mugraph/validate.h"
#include "bench_util.h"
#include "test_graphs.h"

namespace {

using namespace mugraph;

struct Result {
  double median_s;
  double min_s;
};

Result time_runs(const Graph& g, const std::vector<HostTensor>& in, const InterpOptions& o, int runs) {
  run_float(g, in, o);  // warm-up: page in the inputs, start OpenBLAS
  std::vector<double> t;
  for (int r = 0; r < runs; ++r) {
    auto start = std::chrono::steady_clock::now();
    auto out = run_float(g, in, o);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front()};
}

double relative_error(const HostTensor& a, const HostTensor& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a.data[i]) - b.data[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b.data[i])));
  }
  return scale == 0 ? diff : diff / scale;
}

void bench(const char* name, const Graph& fused, const Graph& reference, double flops, const InterpOptions& o,
           int runs) {
  if (auto r = validate(fused)) std::printf("  warning: %s is not valid on h100: %s\n", name, r->str().c_str());
  auto in = random_inputs(reference, 1);
  Result f = time_runs(fused, in, o, runs);
  Result k = time_runs(reference, in, o, runs);
  double err = relative_error(run_float(fused, in, o).at(0), run_float(reference, in, o).at(0));
  std::printf("%-34s median %8.2f ms  min %8.2f ms  %7.2f GFLOP/s\n", (std::string(name) + " (μGraph)").c_str(),
              f.median_s * 1e3, f.min_s * 1e3, flops / f.median_s * 1e-9);
  std::printf("%-34s median %8.2f ms  min %8.2f ms  %7.2f GFLOP/s\n",
              (std::string(name) + " (pre-defined ops)").c_str(), k.median_s * 1e3, k.min_s * 1e3,
              flops / k.median_s * 1e-9);
  std::printf("%-34s max relative error μGraph vs program: %.2e\n", "", err);
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 7, threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--runs")
      runs = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--threads")
      threads = std::max(0, std::atoi(argv[i + 1]));
  }
  InterpOptions o;
  o.threads = threads;
  std::printf("bench_interp: CPU float interpreter, f32, median of %d runs after a warm-up run\n", runs);
  std::printf("%s\n", benchutil::machine_line().c_str());
  std::printf("interpreter threads: %d\n\n", threads == 0 ? static_cast<int>(std::thread::hardware_concurrency()) : threads);
  try {
    const int64_t b1 = 16, h = 4096, n = 4096;
    bench("RMSNorm+matmul 16x4096x4096", test::rmsnorm_fig3b(b1, h, n, 128, 16), test::rmsnorm_reference(b1, h, n),
          2.0 * b1 * h * n, o, runs);
    const int64_t b2 = 8;
    bench("GatedMLP 8x4096x4096", test::gated_mlp_fused(b2, h, n, 128, 16), test::gated_mlp_reference(b2, h, n),
          2 * 2.0 * b2 * h * n, o, runs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_interp: %s\n", e.what());
    return 1;
  }
  return 0;
}
