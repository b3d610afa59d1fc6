/// \file wgmma_deferred.h
/// A for-loop's matmul whose product lands an iteration later (sm_90a).
///
/// matmul_wgmma_to issues an iteration's wgmma ops and waits for them before it adds the
/// product to the loop's sums in registers, so the tensor cores and the rest of the iteration
/// take turns: while the product is computed, the threads that issued it only wait. Here
/// matmul_wgmma_issue in iteration it issues the ops of iteration it and returns without
/// waiting; matmul_wgmma_land in iteration it + 1, before the loop's first such matmul, waits
/// for them (by then the element-wise ops of iteration it + 1 have run while the tensor cores
/// worked) and adds the product to the sums; after the loop it adds the last one. FlashAttention-3 overlaps its softmax
/// with the next block's matmuls the same way.
///
/// The operands of iteration it are read until the call in iteration it + 1 returns, so nothing
/// may overwrite them before then: the emitter gives a tile an element-wise op writes in the
/// loop two buffers (iteration it writes buffer it mod 2), and keeps the tiles the copy engine
/// streams one stage longer than its load pipeline needs (a stage is refilled two iterations
/// after it was read, not one). Values are rounded and added in the order matmul_wgmma_to adds
/// them, so the sums are the same.
#pragma once

#include <cstdint>

#include "mugraph_device/wgmma.h"
#include "mugraph_device/wgmma_chain.h"

namespace mgd {

/// The products of a deferred matmul [M, N] in flight, in a block of Groups warpgroups: each
/// thread's fragment of each of its warpgroup's jobs (the layout of ResultRegisters<M, N,
/// Groups>). The kernel declares it zeroed before its loop (`{}`): the loop's first call adds
/// those zeros, setting the sums, so that every path waits before it reads the registers a
/// wgmma op may still be writing (a path that skipped the wait made ptxas insert one of its
/// own, C7517, and serialize every wgmma op of the kernel, C7520).
template <int64_t M, int64_t N, int Groups>
struct DeferredProduct {
  static constexpr int kJobs = ResultRegisters<M, N, Groups>::kJobs;
  float acc[kJobs][N / 2];
};

namespace detail {
template <int Jobs, int W>
MGD_DEVICE void fence_deferred(float (&acc)[Jobs][W]) {
  MGD_UNROLL
  for (int j = 0; j < Jobs; ++j) fence_registers(acc[j]);
}

/// Adds each product of `pending` (the jobs' fragments) to `result` (a RegisterAccumulate).
template <int64_t M, int64_t N, int Groups, typename Result>
MGD_DEVICE void add_deferred(const Result& result, const DeferredProduct<M, N, Groups>& pending) {
  const unsigned t = thread_rank() % 128, group = thread_rank() / 128;
  MGD_UNROLL
  for (int j = 0; j < DeferredProduct<M, N, Groups>::kJobs; ++j) {
    const int64_t job = group + int64_t{j} * Groups;
    if (job < (M + kWgmmaM - 1) / kWgmmaM)
      put_fragment<M, N, N, false>(pending.acc[j], job * kWgmmaM, 0, t,
                                   [&](int i, int64_t m, int64_t n, float v) { result.put(j, i, m, n, v); });
  }
}
}  // namespace detail

/// Issues the product a·b of one loop iteration, [M, N] (one n-block: N = wgmma_n(N)), into
/// `pending` as one group of wgmma ops and returns without waiting for it: matmul_wgmma_land
/// adds it to the loop's sums in the next iteration, or after the loop. Both operands are read
/// in place (SwizzleA and SwizzleB nonzero, wgmma_rules.h; nothing is staged) and must stay as
/// they are until it has landed. Block scope, every thread of the block's Groups warpgroups.
/// @pre the operands are complete (a block barrier before the call, and for element-wise
/// writers a proxy fence); `pending` has landed (nothing of it in flight); k a multiple of 16
template <typename OutS, typename ASt, int64_t AK, typename BSt, int64_t BK, int64_t K, int64_t SwizzleA,
          int64_t SwizzleB, int Groups, typename T>
MGD_DEVICE void matmul_wgmma_issue(
    DeferredProduct<OutS::get(OutS::rank - 2), OutS::get(OutS::rank - 1), Groups>& pending, const T* MGD_RESTRICT a,
    const T* MGD_RESTRICT b) {
  constexpr int R = OutS::rank;
  constexpr int64_t M = OutS::get(R - 2), N = OutS::get(R - 1);
  static_assert(kWgmmaAvailable || sizeof(T) == 0, "matmul_wgmma_issue needs wgmma (sm_90a)");
  static_assert(std::is_same_v<T, half> || std::is_same_v<T, bfloat16>, "wgmma takes f16 or bf16 operands");
  static_assert(OutS::numel == M * N && wgmma_n(N) == N, "one product of one n-block, no batches");
  static_assert(SwizzleA != 0 && SwizzleB != 0 && !wgmma_orientation_swaps(M, N, K, true, true),
                "both operands read in place, the product not computed as its transpose");
  static_assert(wgmma_in_place_a(M, N, K, false) == SwizzleA && wgmma_in_place_b(M, N, K, false) == SwizzleB,
                "the operands cannot be read in place");
  static_assert(K % 16 == 0, "whole k16 steps");
  // No check of the block's warpgroups here: a trap while wgmma ops are in flight makes ptxas
  // wait for them on that path and serialize every wgmma op (C7520). matmul_wgmma_land checks.
  using InstrA = WgmmaSource<SwizzleA, true, M, K>;
  using InstrB = WgmmaSource<SwizzleB, false, N, K>;
  const uint32_t tile_a = shared_address(a), tile_b = shared_address(b);
  const unsigned group = thread_rank() / 128;
  MGD_UNROLL
  for (int j = 0; j < DeferredProduct<M, N, Groups>::kJobs; ++j) {
    MGD_UNROLL
    for (int i = 0; i < N / 2; ++i) pending.acc[j][i] = 0.0f;
  }
  detail::fence_deferred(pending.acc);
  wgmma_fence();
  // Every warpgroup issues every job it may have, a job past the last taking the last one's
  // rows (its product is never added): a wgmma op under a branch ptxas cannot prove uniform
  // across the warpgroup serializes every wgmma op of the kernel (C7520).
  constexpr int64_t kLastJob = (M + kWgmmaM - 1) / kWgmmaM - 1;
  MGD_UNROLL
  for (int j = 0; j < DeferredProduct<M, N, Groups>::kJobs; ++j) {
    const int64_t job = group + int64_t{j} * Groups;
    wgmma_chunk<T, static_cast<int>(N), static_cast<int>(K / 16), InstrA, InstrB>(
        pending.acc[j], 0, tile_a, (job < kLastJob ? job : kLastJob) * kWgmmaM, 0, tile_b, 0, 0);
  }
  wgmma_commit();
}

/// Waits for every product in flight and adds `pending`'s to the sums `result` adds to (a
/// RegisterAccumulate, of `pending`'s M, N and Groups). In the loop it runs before the first
/// deferred matmul of each iteration, once per deferred product (the first wait lands them all;
/// reading one product's registers while another's group is still in flight would make ptxas
/// serialize every wgmma op, its warning C7514); in the loop's first iteration it adds the zeros
/// `pending` starts with, so `result` must set the sums in the first two. After the loop it adds
/// the last iteration's. Block scope, as matmul_wgmma_issue.
template <int64_t M, int64_t N, int Groups, typename Result>
MGD_DEVICE void matmul_wgmma_land(const Result& result, DeferredProduct<M, N, Groups>& pending) {
  static_assert(Result::kGroups == Groups && Result::kJobs == DeferredProduct<M, N, Groups>::kJobs,
                "the sums' registers are the product's");
  wgmma_wait<0>();
  detail::fence_deferred(pending.acc);
  if (block_threads() != 128u * Groups) detail::chain_misuse("matmul_wgmma_land: another block than its sums'");
  detail::add_deferred(result, pending);
}

}  // namespace mgd
