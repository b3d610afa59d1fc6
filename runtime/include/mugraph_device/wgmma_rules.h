/// \file wgmma_rules.h
/// The shape of matmul_wgmma's work as plain constexpr arithmetic, with nothing from CUDA or the
/// emulation: the device library (wgmma.h) runs by these rules, and the host code that models or
/// sizes what it does includes this header too (the layout pass's bank-conflict model,
/// src/opt/layout_choice.cpp; the emitter's scratch sizes, src/codegen/emit.cpp), so the two
/// cannot drift apart.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define MGD_RULE __host__ __device__ constexpr
#else
#define MGD_RULE constexpr
#endif

namespace mgd {

/// Rows of A per wgmma (and per warpgroup job), and the k extent staged at once: one 128-byte
/// swizzled row of 16-bit elements.
inline constexpr int64_t kWgmmaM = 64;
inline constexpr int64_t kWgmmaStageK = 64;

/// The N of the wgmma instructions for a result N wide: a multiple of 8, at most 64.
MGD_RULE int64_t wgmma_n(int64_t n) { return n >= 64 ? 64 : (n + 7) / 8 * 8; }

/// Scratch shared memory matmul_wgmma needs for a result N wide on `warpgroups` warpgroups: per
/// warpgroup a stage of A (64 rows) and of B (wgmma_n(N) rows) of 128 bytes each, and 1024
/// bytes to align the stages to the swizzle pattern. Enough for a swapped matmul too
/// (wgmma_swaps: its B stage has wgmma_n(M) ≤ wgmma_n(N) rows).
MGD_RULE int64_t wgmma_scratch_bytes(int64_t n, int64_t warpgroups) {
  return 1024 + warpgroups * (kWgmmaM + wgmma_n(n)) * 128;
}

/// Result elements the wgmma jobs of an M × N result compute, padding included: blocks of 64
/// rows by wgmma_n(N) columns.
MGD_RULE int64_t wgmma_padded(int64_t m, int64_t n) {
  return (m + kWgmmaM - 1) / kWgmmaM * kWgmmaM * ((n + wgmma_n(n) - 1) / wgmma_n(n) * wgmma_n(n));
}

/// Whether matmul_wgmma computes an M × N result as its transpose, Bᵀ·Aᵀ: when M is below the
/// instruction's 64 rows and the transpose pads less. The small-batch products of the paper's
/// benchmarks (Figure 3b's 16 × 32 tiles, GatedMLP's 8 rows) would otherwise leave most of every
/// wgmma's rows zero; swapped, their M is the instruction's N, which comes in steps of 8.
MGD_RULE bool wgmma_swaps(int64_t m, int64_t n) { return m < kWgmmaM && wgmma_padded(n, m) < wgmma_padded(m, n); }

/// How matmul_wgmma divides an M × N result among wgmma jobs: the instruction's rows and columns
/// are the result's, or with `swap` its transpose's; each job is 64 rows by `n` columns.
struct WgmmaJobs {
  bool swap;
  int64_t rows, cols;  ///< extents along the instruction's M and N
  int64_t n;           ///< the instructions' N: wgmma_n(cols)
  int64_t row_jobs, col_jobs;
};

MGD_RULE WgmmaJobs wgmma_jobs(int64_t m, int64_t n) {
  const bool swap = wgmma_swaps(m, n);
  const int64_t rows = swap ? n : m, cols = swap ? m : n, nt = wgmma_n(cols);
  return {swap, rows, cols, nt, (rows + kWgmmaM - 1) / kWgmmaM, (cols + nt - 1) / nt};
}

}  // namespace mgd

#undef MGD_RULE
