// Finite-field interpreter throughput (ff_interp.h) on the paper's Figure 3b μGraph
// (RMSNorm + matmul: X [16, 4096], G [4096], W [4096, 4096]; grid 128, loop 16) and on the
// program it implements (pre-defined kernel ops only). A matmul [M, K] x [K, N] is M·N·K
// multiply-adds in each field; rates are given counting Z_p and Z_q separately (2·M·N·K per
// matmul) and per pair (M·N·K: one multiply-add in both fields). Only the matmul is counted; the
// element-wise work (sqr, sum, mul, div, sqrt) is extra. Each figure is the median of the timed
// runs after one warm-up run.
//
// Files named on the command line (programs or μGraph JSON, such as the paper's attention
// programs and their searched bests) are timed the same way instead, one run_ff each, with the
// buffers of one run reused by the next (FFBufferReuse) as in a verification: what it spends per
// test and graph, and what drawing its random inputs (random_ff_inputs) takes.
//
// Usage: bench_ff [--runs N] [--threads T] [FILE ...]   (T = 0: all hardware threads)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "mugraph/ff_interp.h"
#include "mugraph/loader.h"
#include "mugraph/validate.h"
#include "test_graphs.h"

namespace {

using namespace mugraph;

double median_seconds(const Graph& g, const std::vector<FFTensor>& in, const FFContext& ctx, int threads, int runs) {
  run_ff(g, in, ctx, threads);  // warm-up
  std::vector<double> t;
  for (int r = 0; r < runs; ++r) {
    auto start = std::chrono::steady_clock::now();
    FFRun out = run_ff(g, in, ctx, threads);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (out.zero_divisor) std::printf("  (zero divisor)\n");
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5, threads = 0;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--threads" && i + 1 < argc) {
      threads = std::max(0, std::atoi(argv[++i]));
    } else {
      files.push_back(a);
    }
  }
  const int64_t b = 16, h = 4096, n = 4096;
  std::printf("%s\n", benchutil::machine_line().c_str());
  std::printf("threads: %d (0 = all)   runs: %d (median reported)\n", threads, runs);
  if (!files.empty()) {
    const FFContext ctx{random_root_of_unity(1), 1};
    const FFBufferReuse reuse;  // as verify_all runs its draws
    for (const std::string& f : files) {
      try {
        const Graph g = load_graph_file(f);
        std::vector<double> draw;
        std::vector<FFTensor> in;
        for (int r = 0; r < runs; ++r) {
          auto start = std::chrono::steady_clock::now();
          in = random_ff_inputs(g, 1 + static_cast<uint64_t>(r), threads);
          draw.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        }
        std::sort(draw.begin(), draw.end());
        std::printf("%s: median %.1f ms per run_ff, %.1f ms per draw of its inputs\n", f.c_str(),
                    median_seconds(g, in, ctx, threads, runs) * 1e3, draw[draw.size() / 2] * 1e3);
      } catch (const std::exception& e) {
        std::printf("%s: %s\n", f.c_str(), e.what());
        return 1;
      }
    }
    return 0;
  }
  const double macs = static_cast<double>(b) * h * n;  // one matmul [16, 4096] x [4096, 4096]
  struct Case {
    const char* name;
    Graph g;
  };
  Case cases[] = {
      {"RMSNorm + matmul, Figure 3b uGraph (grid 128, loop 16)", test::rmsnorm_fig3b(b, h, n, 128, 16)},
      {"RMSNorm + matmul, program (kernel ops only)", test::rmsnorm_reference(b, h, n)},
  };
  const FFContext ctx{random_root_of_unity(1), 1};
  for (const Case& c : cases) {
    if (auto r = validate(c.g)) {
      std::printf("%s: invalid: %s\n", c.name, r->str().c_str());
      return 1;
    }
    std::vector<FFTensor> in = random_ff_inputs(c.g, 1);
    double s = median_seconds(c.g, in, ctx, threads, runs);
    std::printf("%s\n  X [%ld, %ld] x W [%ld, %ld]: median %.1f ms\n", c.name, static_cast<long>(b),
                static_cast<long>(h), static_cast<long>(h), static_cast<long>(n), s * 1e3);
    std::printf("  multiply-adds: %.3g per field (M*N*K), %.3g counting Z_p and Z_q separately\n", macs, 2 * macs);
    std::printf("  rate: %.2f G multiply-adds/s counting both fields (%.2f G pairs/s)\n", 2 * macs / s / 1e9,
                macs / s / 1e9);
  }
  return 0;
}
