/// \file mma_rules.h
/// When matmul_tc (mma.h: mma.sync on sm_80) reads an operand through ldmatrix rather than
/// element by element, as plain constexpr arithmetic with nothing from CUDA or the emulation: the
/// device library decides by these rules, and the layout pass's bank-conflict model
/// (src/opt/layout_choice.cpp) includes this header too, so the two cannot drift apart.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define MGD_RULE __host__ __device__ constexpr
#else
#define MGD_RULE constexpr
#endif

namespace mgd {

/// Operand A (an M × K tile: element (m, k) at m·am + k·ak) goes through ldmatrix when its rows
/// are 16-byte vectors along k: k contiguous, rows and batches 16-byte aligned (8 16-bit
/// elements), whole 8-row blocks and k16 steps. Whole 16-row blocks take ldmatrix.x4, a last
/// block of 8 rows .x2.
MGD_RULE bool ldmatrix_a(int64_t am, int64_t ak, int64_t m, int64_t k, bool batches_aligned) {
  return ak == 1 && am % 8 == 0 && m % 8 == 0 && k % 16 == 0 && batches_aligned;
}

/// Operand B (a K × N tile: element (k, n) at k·bk + n·bn) goes through ldmatrix.trans when its
/// rows are 16-byte vectors along n: n contiguous, rows and batches 16-byte aligned, whole 8-column
/// blocks and k16 steps.
MGD_RULE bool ldmatrix_b(int64_t bk, int64_t bn, int64_t n, int64_t k, bool batches_aligned) {
  return bn == 1 && bk % 8 == 0 && n % 8 == 0 && k % 16 == 0 && batches_aligned;
}

}  // namespace mgd

#undef MGD_RULE
