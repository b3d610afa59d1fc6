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

MGD_RULE WgmmaJobs wgmma_jobs(int64_t m, int64_t n, bool swap) {
  const int64_t rows = swap ? n : m, cols = swap ? m : n, nt = wgmma_n(cols);
  return {swap, rows, cols, nt, (rows + kWgmmaM - 1) / kWgmmaM, (cols + nt - 1) / nt};
}

// Operands read in place. A tile the copy engine (TMA) writes for matmuls alone can be written
// in a swizzled layout the tensor cores read directly, so matmul_wgmma need not stage it. The
// copy engine swizzles rows of at most the swizzle span (32, 64 or 128 bytes), so a tile whose
// rows are longer is written as panels: boxes of the tile cut along its inner dim into 64-element
// columns, one after another. Within a panel, row r of W = span / 2 elements sits at r · span,
// and the 16-byte chunk c of it at c XOR (r mod span / 16) (PTX's Swizzle<log2(span / 16), 4, 3>
// on the shared address: bits 4.. XOR bits 7..). These are the PTX ISA's canonical layouts:
// a tile [rows, k] (matrix A, k innermost) is K-major, a tile [k, cols] (matrix B, n innermost)
// MN-major; the instruction reads the latter with its transpose flag set.

/// The swizzle span in bytes for rows of `inner` 16-bit elements: 32 or 64 for rows of exactly
/// that many bytes, 128 for rows of whole 128-byte multiples (cut into panels), 0 otherwise.
MGD_RULE int64_t wgmma_tile_swizzle(int64_t inner) {
  const int64_t bytes = inner * 2;
  return bytes == 32 || bytes == 64 ? bytes : bytes > 0 && bytes % 128 == 0 ? 128 : 0;
}

/// Bytes the wgmma jobs reading a K-major tile of `m` rows (swizzle span `span`) in place as the
/// instruction's A read past the tile's end: the last job's 64 rows run past m unless m is a
/// whole number of jobs. The tile's buffer holds them; their values reach only result rows at or
/// beyond m, which are never stored (row i of a product depends on row i of A alone).
MGD_RULE int64_t wgmma_a_overread_bytes(int64_t m, int64_t span) {
  return m % kWgmmaM == 0 ? 0 : (kWgmmaM - m % kWgmmaM) * span;
}

/// The swizzle span with which an operand tile is read in place by the wgmma jobs of a matmul,
/// or 0 where it must be staged. k_major: the tile is [mn, k] (matrix A), else [k, mn] (matrix
/// B). instr_a: the operand is the instruction's A (64 rows per job) rather than its B (`nt`
/// rows per job). Jobs must read whole k16 steps (no zero padding along k exists in place). A
/// K-major tile on the instruction's A side may have fewer rows than its jobs read (the small
/// batches' activations: Figure 3b's 16 rows, GatedMLP's 8): its 8-row groups are 8 · span
/// apart, so the rows past the tile lie in its next panels and, for the last, in padding its
/// buffer holds (wgmma_a_overread_bytes). Such a tile must have whole 8-row groups, so that each
/// panel (mn · span bytes) starts where the swizzle pattern does, as the descriptors assume.
/// Elsewhere every job reads rows inside the tile, and an MN-major job's rows must lie in one
/// panel.
MGD_RULE int64_t wgmma_in_place_swizzle(bool k_major, bool instr_a, int64_t mn, int64_t k, int64_t nt) {
  const int64_t span = wgmma_tile_swizzle(k_major ? k : mn);
  const int64_t rows = instr_a ? kWgmmaM : nt;
  if (span == 0 || k % 16 != 0) return 0;
  if (k_major && instr_a) return mn % 8 == 0 ? span : 0;
  if (mn % rows != 0) return 0;
  return k_major || (span / 2) % rows == 0 ? span : 0;
}

/// The swizzle of matmul operand A (a [m, k] tile) or B (a [k, n] tile) read in place when the
/// matmul computes its transpose (swap) or not.
MGD_RULE int64_t wgmma_in_place_a(int64_t m, int64_t n, int64_t k, bool swap) {
  return wgmma_in_place_swizzle(true, !swap, m, k, wgmma_n(swap ? m : n));
}
MGD_RULE int64_t wgmma_in_place_b(int64_t m, int64_t n, int64_t k, bool swap) {
  return wgmma_in_place_swizzle(false, swap, n, k, wgmma_n(swap ? m : n));
}

/// Whether matmul_wgmma computes an M × N result (contraction K) as its transpose, given which
/// operands are tiles it may read in place (a_tile, b_tile): the orientation that reads more
/// operand elements in place, then the one that pads less (wgmma_swaps). Staging an operand costs
/// a pass over it through registers every time the matmul runs, and a gather where its k is not
/// contiguous; the padding rows cost tensor-core time, which kernels bound by loading their
/// weights have to spare.
MGD_RULE bool wgmma_orientation_swaps(int64_t m, int64_t n, int64_t k, bool a_tile, bool b_tile) {
  const auto in_place = [&](bool swap) {
    return (a_tile && wgmma_in_place_a(m, n, k, swap) != 0 ? m * k : 0) +
           (b_tile && wgmma_in_place_b(m, n, k, swap) != 0 ? k * n : 0);
  };
  const int64_t plain = in_place(false), swapped = in_place(true);
  return plain != swapped ? swapped > plain : wgmma_swaps(m, n);
}

/// Rows of 128 bytes one warpgroup stages per chunk of k for an M × N × K matmul with the given
/// operands read in place (swizzle spans, 0: staged): 64 for the instruction's A, its N for its B.
MGD_RULE int64_t wgmma_stage_rows(int64_t m, int64_t n, int64_t k, int64_t swizzle_a, int64_t swizzle_b) {
  const bool swap = wgmma_orientation_swaps(m, n, k, swizzle_a != 0, swizzle_b != 0);
  const bool instr_a_staged = (swap ? swizzle_b : swizzle_a) == 0, instr_b_staged = (swap ? swizzle_a : swizzle_b) == 0;
  return (instr_a_staged ? kWgmmaM : 0) + (instr_b_staged ? wgmma_n(swap ? m : n) : 0);
}

/// The stage buffers per warpgroup that pay for a contraction of k: two where k takes more than
/// one chunk, so that the next chunk is staged while the tensor cores read this one (and the wait
/// for a chunk never drains them); one otherwise.
MGD_RULE int64_t wgmma_stage_buffers(int64_t k) { return k > kWgmmaStageK ? 2 : 1; }

/// Scratch shared memory such a matmul needs on `warpgroups` warpgroups with up to `buffers`
/// stage buffers each (as many as pay, wgmma_stage_buffers): the buffers and 1024 bytes to align
/// them to the swizzle pattern; none when both operands are read in place.
MGD_RULE int64_t wgmma_scratch_bytes(int64_t m, int64_t n, int64_t k, int64_t swizzle_a, int64_t swizzle_b,
                                     int64_t warpgroups, int64_t buffers = 1) {
  const int64_t rows = wgmma_stage_rows(m, n, k, swizzle_a, swizzle_b);
  const int64_t used = buffers < wgmma_stage_buffers(k) ? buffers : wgmma_stage_buffers(k);
  return rows == 0 ? 0 : 1024 + warpgroups * used * rows * 128;
}

/// Whether matmul_chain_wgmma (wgmma_chain.h) takes these extents: M whole 8-row groups (jobs of
/// 64 rows, the last one's rows beyond M computed and dropped); K1 whole k16 steps; N1 and N2 one
/// n-block of at most 64 columns or whole 64-column blocks, N1 a multiple of 16 (P's k16 steps),
/// N2 at most 256 (O's accumulators stay in registers).
MGD_RULE bool matmul_chain_shape_ok(int64_t m, int64_t k1, int64_t n1, int64_t n2) {
  return m > 0 && m % 8 == 0 && k1 > 0 && k1 % 16 == 0 && n1 % 16 == 0 && n1 >= 16 && (n1 <= 64 || n1 % 64 == 0) &&
         n2 >= 8 && n2 % 8 == 0 && (n2 <= 64 || n2 % 64 == 0) && n2 <= 256;
}

/// How many warpgroups matmul_chain_wgmma gives each 64-row job in a block of `warpgroups`:
/// where S has fewer jobs than the block has warpgroups (decoding's few query rows), the ones a
/// job would leave idle take a share of S's n-blocks each (at most one n-block apiece), and the
/// job's partial O and row sums are added through shared memory once they are done.
MGD_RULE int64_t matmul_chain_splits(int64_t m, int64_t n1, int64_t warpgroups) {
  const int64_t jobs = (m + kWgmmaM - 1) / kWgmmaM, n_blocks = n1 <= 64 ? 1 : n1 / 64;
  const int64_t splits = jobs < warpgroups ? warpgroups / jobs : 1;
  return splits < n_blocks ? splits : n_blocks;
}

/// The threads of a warpgroup that hold rows of a job below M, as whole warps (warp w holds the
/// job's rows 16w to 16w + 15): only they pass partial results when a job is split.
MGD_RULE int64_t matmul_chain_partial_threads(int64_t m) { return m >= kWgmmaM ? 128 : 32 * ((m + 15) / 16); }

/// Bytes of shared memory (f32) through which matmul_chain_wgmma adds the partial results of a
/// job split `splits` ways: each thread's O elements (N2 / 2) and its two row sums, for every
/// split but the first, which adds them.
MGD_RULE int64_t matmul_chain_partials_bytes(int64_t m, int64_t n2, int64_t splits) {
  return splits <= 1
             ? 0
             : (splits - 1) * ((m + kWgmmaM - 1) / kWgmmaM) * (n2 / 2 + 2) * matmul_chain_partial_threads(m) * 4;
}

}  // namespace mgd

#undef MGD_RULE
