/// \file wgmma_chain.h
/// Two matmuls chained through registers on Hopper's warpgroup tensor cores (sm_90a):
///
///     S = A·B,   P = f(S) element by element,   O = P·C,   L = the row sums of P
///
/// with S and P never stored. This is attention's inner step as the search finds it (scores,
/// exp, scores·V and the softmax denominators). Done op by op, S is written to shared memory by
/// the first matmul, read and P written by the element-wise op, P staged again for the second
/// matmul and read once more by the sum, with a block barrier between each: four passes over
/// the score tile by the SIMT ops, which is what kept the attention kernels at a third or less
/// of SDPA's speed on the H200 (docs/benchmarks.md). Here a warpgroup takes 64 rows and S an
/// n-block (up to 64 columns) at a time, in its accumulator registers: it applies f to them
/// there, adds them to its share of the row sums, and hands the registers, rounded to 16 bits,
/// to the second matmul as its A operand (wgmma_async_register_a): the accumulator fragment of a
/// 64×16 block is exactly the A fragment of that block. The row sums meet with two shuffles
/// within each quad of lanes at the end.
///
/// Values are rounded where the op-by-op kernel would store them (S to its type, P to the
/// operands', O and L to theirs), so the two agree to the order of the additions. The results
/// may go straight into the loop's summing accumulators (TileAccumulate), as mgd::accumulate
/// would add them.
#pragma once

#include <cstdint>

#include "mugraph_device/wgmma.h"

namespace mgd {

namespace detail {
/// Keeps the compiler from reusing registers a wgmma still reads (A from registers is read
/// asynchronously, until the wait for its group).
template <int R>
MGD_DEVICE void fence_register_a(uint32_t (&a)[R][4]) {
#if defined(__CUDACC__)
  MGD_UNROLL
  for (int r = 0; r < R; ++r) {
    MGD_UNROLL
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(a[r][j])::"memory");
  }
#else
  (void)a;
#endif
}
}  // namespace detail

namespace detail {
/// A call the chain cannot run (the emitter never makes one): traps on the GPU, fails the
/// emulated block with `what`.
[[noreturn]] MGD_DEVICE void chain_misuse(const char* what) {
#if defined(__CUDACC__)
  (void)what;
  __trap();
#else
  emu::fail(what);
#endif
}

/// Where element i of a thread's accumulator fragment of a 64-row job at row m0 lies (t: the
/// thread's rank in its warpgroup; `flat`: n-block nb of NT columns, element i of it, as
/// nb·NT/2 + i): wgmma's D layout (wgmma_d_row, wgmma_d_col) by blocks.
MGD_DEVICE int64_t fragment_row(int64_t m0, unsigned t, int i) { return m0 + wgmma_d_row(t, static_cast<unsigned>(i)); }
template <int NT>
MGD_DEVICE int64_t fragment_col(unsigned t, int flat) {
  return int64_t{flat / (NT / 2)} * NT + wgmma_d_col(t, static_cast<unsigned>(flat % (NT / 2)));
}
}  // namespace detail

/// Where a chain's result goes, or a single matmul's (matmul_wgmma_to, wgmma.h). Element (r, c)
/// of value v, the thread's element `i` of its local job `job` (see ResultRegisters), is put by
/// exactly one thread: TileStore writes it to a tile of type T at p[r·Row + c·Col];
/// TileAccumulate adds it, rounded to T (the type the op-by-op result tile would have, which
/// mgd::accumulate then adds), to a summing accumulator (f32, at p[r·Row + c·Col]; `first`: the
/// loop's first iteration, which sets it instead); RegisterAccumulate adds it likewise to the
/// thread's own registers (ResultRegisters); NoResult drops it (the row sums nobody reads).
template <typename T, int64_t Row, int64_t Col>
struct TileStore {
  static constexpr int kJobs = 0, kGroups = 0;  // any number of jobs per warpgroup, of warpgroups
  T* p;
  MGD_DEVICE void put(int, int, int64_t r, int64_t c, float v) const { p[r * Row + c * Col] = from_float<T>(v); }
};
template <typename T, int64_t Row, int64_t Col>
struct TileAccumulate {
  static constexpr int kJobs = 0, kGroups = 0;
  float* p;
  bool first;
  MGD_DEVICE void put(int, int, int64_t r, int64_t c, float v) const {
    const float x = to_float(from_float<T>(v));
    float& acc = p[r * Row + c * Col];
    acc = first ? x : acc + x;
  }
};
struct NoResult {
  static constexpr int kJobs = 0, kGroups = 0;
  MGD_DEVICE void put(int, int, int64_t, int64_t, float) const {}
};

/// A chain's result [M, N], or a single matmul's, summed over a loop's iterations in the
/// registers of the threads that compute it, in a block of Groups warpgroups: each thread holds its elements of each of
/// its warpgroup's jobs (job g + j·Groups is its local job j), so the summing accumulator in shared memory is written
/// once, after the loop (store_result_registers), instead of read and written in every iteration. N = 1: the row sums
/// (the thread's two rows, in lanes 4·q); else O's accumulator fragments. The kernel declares it before its loop;
/// nothing needs zeroing (the first iteration sets it).
template <int64_t M, int64_t N, int Groups>
struct ResultRegisters {
  static constexpr int kJobs = static_cast<int>(((M + 63) / 64 + Groups - 1) / Groups);
  static constexpr int kWidth = N == 1 ? 2 : static_cast<int>(N / 2);
  float v[kJobs][kWidth];
};
template <typename T, int64_t M, int64_t N, int Groups>
struct RegisterAccumulate {
  static constexpr int kJobs = ResultRegisters<M, N, Groups>::kJobs, kGroups = Groups;
  ResultRegisters<M, N, Groups>& regs;
  bool first;
  MGD_DEVICE void put(int job, int i, int64_t, int64_t, float v) const {
    const float x = to_float(from_float<T>(v));
    float& acc = regs.v[job][i];
    acc = first ? x : acc + x;
  }
};

/// Writes what a chain or a matmul summed in registers (ResultRegisters) to the f32 summing accumulator at
/// p[r·Row + c·Col], each element by the thread that holds it; a block barrier must follow
/// before others read it. Block scope, with the block the chain ran in.
template <int64_t Row, int64_t Col, int64_t M, int64_t N, int Groups>
MGD_DEVICE void store_result_registers(const ResultRegisters<M, N, Groups>& regs, float* p) {
  using Regs = ResultRegisters<M, N, Groups>;
  constexpr int NT = N <= 64 ? static_cast<int>(N) : 64;  // the n-blocks of O, as the chain computes them
  const unsigned t = thread_rank() % 128, group = thread_rank() / 128;
  if (block_threads() != 128u * Groups)
    detail::chain_misuse("store_result_registers: another block than the one that summed them");
  MGD_UNROLL
  for (int j = 0; j < Regs::kJobs; ++j) {
    const int64_t job = group + int64_t{j} * Groups;
    if (job >= (M + 63) / 64) break;
    if constexpr (N == 1) {
      if (t % 4 != 0) continue;  // the quad's sums met in its first lane
      MGD_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int64_t r = detail::fragment_row(64 * job, t, 2 * h);
        if (M % 64 == 0 || r < M) p[r * Row] = regs.v[j][h];
      }
    } else {
      MGD_UNROLL
      for (int i = 0; i < Regs::kWidth; ++i) {
        const int64_t r = detail::fragment_row(64 * job, t, i);
        if (M % 64 == 0 || r < M) p[r * Row + detail::fragment_col<NT>(t, i) * Col] = regs.v[j][i];
      }
    }
  }
}

/// The chain above on tiles in shared memory, Block scope: A [M, K1] K-major, B [K1, N1] and C
/// [N1, N2] MN-major, each written swizzled with span SpanA, SpanB, SpanC by the copy engine or
/// an element-wise op (and fenced) for wgmma to read in place (wgmma_rules.h), starting where
/// its pattern does. O [M, N2] goes to `o`, L [M, 1] to `l` (TileStore, TileAccumulate or, for L,
/// NoResult); each element of either is put by exactly one thread. S is rounded to TS as the
/// tile S would be. Warpgroup g takes the 64-row jobs g, g + warpgroups, ...; where M is not a
/// multiple of 64 (decoding's few query rows), the last job also computes rows beyond M, from
/// whatever follows A's rows in its buffer, and drops them: rows never mix in a matmul, a
/// row-wise op or a row sum.
///
/// With Splits > 1 (matmul_chain_splits: fewer jobs than warpgroups), warpgroup g takes job
/// g mod jobs and, of S's n-blocks, those congruent to g / jobs mod Splits; the job's first
/// warpgroup adds the others' partial O and row sums (f32, through `partials`, between two
/// block barriers) before it puts the results, rounded once, as an unsplit job would.
/// @pre matmul_chain_shape_ok(M, K1, N1, N2); block_threads() % 128 == 0; the operands are
/// complete (a block barrier, and for element-wise writers a proxy fence, before the call); A's
/// buffer extends wgmma_a_overread_bytes(M, SpanA) past the tile; with Splits > 1,
/// jobs · Splits ≤ warpgroups, Splits ≤ S's n-blocks, and `partials` holds
/// matmul_chain_partials_bytes(M, N2, Splits) bytes (16-byte aligned) that nothing else uses
/// during the call
template <int64_t M, int64_t K1, int64_t N1, int64_t N2, int64_t SpanA, int64_t SpanB, int64_t SpanC, typename TS,
          int Splits = 1, typename OutO, typename OutL, typename F, typename T>
MGD_DEVICE void matmul_chain_wgmma(OutO o, OutL l, const T* a, const T* b, const T* c, F f, float* partials = nullptr) {
  constexpr bool kRowSums = !std::is_same_v<OutL, NoResult>;
  static_assert(std::is_same_v<T, half> || std::is_same_v<T, bfloat16>, "wgmma takes f16 or bf16 operands");
  static_assert(kWgmmaAvailable || sizeof(T) == 0, "matmul_chain_wgmma needs wgmma (sm_90a)");
  static_assert(matmul_chain_shape_ok(M, K1, N1, N2), "see matmul_chain_shape_ok");
  static_assert(SpanA != 0 && SpanB != 0 && SpanC != 0, "every operand is read in place");
  constexpr int NT1 = N1 <= 64 ? static_cast<int>(N1) : 64, NB1 = static_cast<int>(N1) / NT1;
  constexpr int NT2 = N2 <= 64 ? static_cast<int>(N2) : 64, NB2 = static_cast<int>(N2) / NT2;
  constexpr int kSteps1 = static_cast<int>(K1 / 16);
  constexpr int64_t kJobs = (M + 63) / 64;
  (void)partials;  // read where S is split (Splits > 1) alone
  static_assert(Splits >= 1 && Splits <= NB1, "a split takes at least one of S's n-blocks");
  // An n-block of an MN-major operand read in place starts at one of its panels.
  static_assert(NB1 == 1 || NT1 % (SpanB / 2) == 0, "B's n-blocks start at its panels");
  static_assert(NB2 == 1 || NT2 % (SpanC / 2) == 0, "C's n-blocks start at its panels");
  const unsigned t = thread_rank() % 128, lane = t % 32;
  const unsigned group = thread_rank() / 128, groups = block_threads() / 128;
  if (block_threads() % 128 != 0) detail::chain_misuse("matmul_chain_wgmma: a block of partial warpgroups");
  const uint32_t tile_a = shared_address(a), tile_b = shared_address(b), tile_c = shared_address(c);
#if !defined(__CUDACC__)
  if (tile_a % (8 * SpanA) != 0 || tile_b % (8 * SpanB) != 0 || tile_c % (8 * SpanC) != 0)
    detail::chain_misuse("matmul_chain_wgmma: an operand does not start where its swizzle pattern does");
#endif
  // O's accumulators, a job's; this thread's share of its row sums (its two rows: element i of a
  // fragment is in row lane / 4 + 8·(i / 2 % 2)).
  using Acc = float[NB2][NT2 / 2];
  // Computes a job's O and row sums (this thread's share, the row sums not yet met across the
  // quad) over the n-blocks split, split + Splits, ... of S.
  const auto compute_job = [&](Acc& acc, float(&sums)[2], int64_t job, int split) {
    const int64_t m0 = job * 64;
    MGD_UNROLL
    for (int nb = 0; nb < NB2; ++nb) {
      MGD_UNROLL
      for (int i = 0; i < NT2 / 2; ++i) acc[nb][i] = 0.0f;
    }
    sums[0] = sums[1] = 0.0f;
    uint32_t pa[NT1 / 16][4];  // one n-block of P as the second matmul's A
    // S an n-block at a time, so that the registers a thread holds do not grow with S's width:
    // S's block (k16 steps of A·B as one group), then P = f(S) rounded as the tiles would be,
    // then O += P·C over the block's rows of C, left in flight while the next block of S is
    // computed (waiting for that block waits for it too, and frees pa).
    MGD_UNROLL
    for (int q = 0; q < (NB1 + Splits - 1) / Splits; ++q) {
      const int nb = split + q * Splits;
      if (Splits > 1 && nb >= NB1) break;
      float s[NT1 / 2];
      MGD_UNROLL
      for (int i = 0; i < NT1 / 2; ++i) s[i] = 0.0f;
      fence_registers(s);
      wgmma_fence();
      MGD_UNROLL
      for (int k = 0; k < kSteps1; ++k)
        wgmma_async<T, NT1, false, true>(
            s, in_place_step<true, SpanA, M, K1>(in_place_descriptor<true, SpanA, K1>(tile_a), m0, 16 * k),
            in_place_step<false, SpanB, N1, K1>(in_place_descriptor<false, SpanB, K1>(tile_b), nb * NT1, 16 * k));
      wgmma_commit();
      wgmma_wait<0>();
      fence_registers(s);
      detail::fence_register_a(pa);  // the previous block's P·C has read them
      MGD_UNROLL
      for (int i = 0; i < NT1 / 2; ++i) {
        const float p = to_float(from_float<T>(f(to_float(from_float<TS>(s[i])))));
        s[i] = p;
        sums[i / 2 % 2] += p;
      }
      MGD_UNROLL
      for (int j16 = 0; j16 < NT1 / 16; ++j16) register_a_from_accumulator<T>(pa[j16], s, j16);
      MGD_UNROLL
      for (int n2 = 0; n2 < NB2; ++n2) fence_registers(acc[n2]);
      detail::fence_register_a(pa);
      wgmma_fence();
      MGD_UNROLL
      for (int j16 = 0; j16 < NT1 / 16; ++j16) {
        MGD_UNROLL
        for (int n2 = 0; n2 < NB2; ++n2)
          wgmma_async_register_a<T, NT2, true>(
              acc[n2], pa[j16],
              in_place_step<false, SpanC, N2, N1>(in_place_descriptor<false, SpanC, N1>(tile_c), n2 * NT2,
                                                  nb * NT1 + 16 * j16));
      }
      wgmma_commit();
    }
    wgmma_wait<0>();
    detail::fence_register_a(pa);
    MGD_UNROLL
    for (int nb = 0; nb < NB2; ++nb) fence_registers(acc[nb]);
  };
  // Puts a job's results, this warpgroup's local job j. (The row sums meet across the quad only
  // once no wgmma is in flight: ptxas serializes every wgmma of a kernel where other
  // instructions may read registers that fed a wgmma within the pipeline stage of another,
  // C7514.)
  const auto put_job = [&](int j, int64_t job, const Acc& acc, float(&sums)[2]) {
    const int64_t m0 = job * 64;
    if constexpr (kRowSums) {
      MGD_UNROLL
      for (int h = 0; h < 2; ++h) {
        sums[h] += shfl_xor(sums[h], 1);
        sums[h] += shfl_xor(sums[h], 2);
      }
      if (lane % 4 == 0) {
        MGD_UNROLL
        for (int h = 0; h < 2; ++h) {
          const int64_t r = detail::fragment_row(m0, t, 2 * h);
          if (M % 64 == 0 || r < M) l.put(j, h, r, 0, sums[h]);
        }
      }
    } else {
      (void)l;
      (void)sums;
    }
    MGD_UNROLL
    for (int nb = 0; nb < NB2; ++nb) {
      MGD_UNROLL
      for (int i = 0; i < NT2 / 2; ++i) {
        const int flat = nb * (NT2 / 2) + i;
        const int64_t r = detail::fragment_row(m0, t, i);
        if (M % 64 == 0 || r < M) o.put(j, flat, r, detail::fragment_col<NT2>(t, flat), acc[nb][i]);
      }
    }
  };
  // Register results (ResultRegisters) are indexed by the local job: unrolled, so that the index
  // is a constant and they stay in registers. Else a loop over the warpgroup's jobs.
  constexpr int kRegisterJobs = OutO::kJobs > OutL::kJobs ? OutO::kJobs : OutL::kJobs;
  constexpr int kRegisterGroups = OutO::kGroups > OutL::kGroups ? OutO::kGroups : OutL::kGroups;
  static_assert(OutO::kGroups == 0 || OutL::kGroups == 0 || OutO::kGroups == OutL::kGroups,
                "register results of one block");
  if (kRegisterJobs > 0 && static_cast<int>(groups) != kRegisterGroups)
    detail::chain_misuse("matmul_chain_wgmma: register results for another number of warpgroups");
  if constexpr (Splits > 1) {
    // One job per warpgroup at most; a thread's partial lies at partials[((split - 1)·jobs +
    // job)·width·threads + i·threads + t], consecutive threads in consecutive words.
    constexpr int kWidth = static_cast<int>(N2 / 2) + 2;
    constexpr unsigned kThreads = static_cast<unsigned>(matmul_chain_partial_threads(M));
    if (kJobs * Splits > groups || partials == nullptr)
      detail::chain_misuse("matmul_chain_wgmma: a split for more warpgroups than the block has, or no partials");
    const int64_t job = group % kJobs;
    const int split = static_cast<int>(group / kJobs);
    const bool active = split < Splits;
    Acc acc;
    float sums[2];
    if (active) compute_job(acc, sums, job, split);
    sync_block();  // a previous call's first warpgroups have read its partials
    const auto partial = [&](int from) { return partials + ((from - 1) * kJobs + job) * kWidth * kThreads + t; };
    if (active && split > 0 && t < kThreads) {
      float* p = partial(split);
      MGD_UNROLL
      for (int i = 0; i < N2 / 2; ++i) p[i * kThreads] = acc[i / (NT2 / 2)][i % (NT2 / 2)];
      p[(kWidth - 2) * kThreads] = sums[0];
      p[(kWidth - 1) * kThreads] = sums[1];
    }
    sync_block();
    if (active && split == 0) {
      if (t < kThreads) {
        for (int from = 1; from < Splits; ++from) {
          const float* p = partial(from);
          MGD_UNROLL
          for (int i = 0; i < N2 / 2; ++i) acc[i / (NT2 / 2)][i % (NT2 / 2)] += p[i * kThreads];
          sums[0] += p[(kWidth - 2) * kThreads];
          sums[1] += p[(kWidth - 1) * kThreads];
        }
      }
      put_job(0, job, acc, sums);
    }
  } else {
    // A whole job, the warpgroup's local job j.
    const auto run_job = [&](int j, int64_t job) {
      Acc acc;
      float sums[2];
      compute_job(acc, sums, job, 0);
      put_job(j, job, acc, sums);
    };
    if constexpr (kRegisterJobs > 0) {
      MGD_UNROLL
      for (int j = 0; j < kRegisterJobs; ++j) {
        const int64_t job = group + int64_t{j} * groups;
        if (job < kJobs) run_job(j, job);
      }
    } else {
      int j = 0;
      for (int64_t job = group; job < kJobs; job += groups) run_job(j++, job);
    }
  }
}

}  // namespace mgd
