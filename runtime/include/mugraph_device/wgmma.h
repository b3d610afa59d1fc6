/// \file wgmma.h
/// Tensor-core matmul on shared-memory tiles with Hopper's warpgroup instructions
/// (wgmma.mma_async m64nNk16, f16 or bf16 operands, f32 accumulators; sm_90a). A warpgroup is
/// four consecutive warps (128 threads); it multiplies a 64×16 block of A by a 16×N block of B
/// in one instruction, both read by the tensor cores from shared memory through descriptors.
///
/// The operands must be in one of the layouts the descriptors describe (PTX ISA, "Shared Memory
/// Matrix Layout"); here the K-major layout with 128-byte swizzling: rows of 64 elements along
/// k (128 bytes), eight rows to a 1024-byte group, groups one after another; within a group the
/// 16-byte chunk c of row r is stored at chunk position c ^ r, so that the eight rows of a
/// column of chunks fall in different banks. matmul_wgmma stages its operands into that layout
/// from tiles of any strides (the copy is the price of taking any tile; a layout pass that writes
/// producers' results in it directly would save it), 64 values of k at a time, per warpgroup.
///
/// Under the host emulation each thread's share of a wgmma is computed when the thread waits for
/// it, from shared memory decoded through the descriptors by the PTX definition, so CI checks the
/// staging layout, the descriptors and the accumulator fragments without a GPU.
#pragma once

#include <cstring>
#include <type_traits>

#include "mugraph_device/dims.h"
#include "mugraph_device/elementwise.h"
#include "mugraph_device/mma.h"
#include "mugraph_device/wgmma_rules.h"
#include "mugraph_device/wgmma_shapes.h"

namespace mgd {

/// Whether wgmma runs where this is compiled: sm_90a, or the host emulation. Elsewhere
/// matmul_wgmma falls back to mma.sync (matmul_tc).
inline constexpr bool kWgmmaAvailable =
#if !defined(__CUDACC__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
    true;
#else
    false;
#endif

/// Byte offset of 16-byte chunk `chunk` (k / 8) of row `row` in the K-major 128-byte-swizzled
/// layout, from a 1024-byte-aligned start.
MGD_HOST_DEVICE constexpr int64_t sw128_offset(int64_t row, int64_t chunk) {
  return row / 8 * 1024 + row % 8 * 128 + (chunk ^ (row % 8)) * 16;
}

/// The descriptor of a K-major 128-byte-swizzled operand starting at shared address `address`:
/// bits 0-13 the address / 16, 16-29 the leading-dimension byte offset / 16 (unused by swizzled
/// K-major layouts, 1 by convention), 32-45 the stride-dimension byte offset / 16 (1024: from
/// one 8-row group to the next), 49-51 base offset 0 (the pattern starts 1024-byte aligned),
/// 62-63 swizzle mode 1 (128 bytes).
MGD_HOST_DEVICE constexpr uint64_t wgmma_descriptor(uint32_t address) {
  return uint64_t{(address & 0x3FFFFu) >> 4} | uint64_t{1} << 16 | uint64_t{1024 >> 4} << 32 | uint64_t{1} << 62;
}

/// The address of p in the block's shared window.
MGD_DEVICE uint32_t shared_address(const void* p) {
#if defined(__CUDACC__)
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
#else
  return emu::shared_address(p);
#endif
}

#if !defined(__CUDACC__)
namespace emu {

/// Shared address of element (row, k), k < 16, of the K-major operand `desc` describes: the
/// canonical layouts of the PTX ISA. Swizzle mode 0: 8×16-byte core matrices, rows 16 bytes
/// apart, the two k halves LBO apart, 8-row groups SBO apart. Mode 1 (128-byte swizzle): rows
/// 128 bytes apart, k halves 16 bytes apart, groups SBO apart, then address bits 4-6 (the
/// chunk) XOR bits 7-9 (the row within its 1024-byte pattern).
inline uint32_t wgmma_element_address(uint64_t desc, unsigned row, unsigned k) {
  const uint32_t start = static_cast<uint32_t>(desc & 0x3FFF) << 4;
  const uint32_t lbo = static_cast<uint32_t>((desc >> 16) & 0x3FFF) << 4;
  const uint32_t sbo = static_cast<uint32_t>((desc >> 32) & 0x3FFF) << 4;
  const unsigned mode = static_cast<unsigned>(desc >> 62);
  if ((desc >> 49) & 7) fail("wgmma: a non-zero matrix base offset is not emulated");
  if (mode == 0) return start + row / 8 * sbo + row % 8 * 16 + k / 8 * lbo + k % 8 * 2;
  if (mode != 1) fail("wgmma: only no swizzle and 128-byte swizzle are emulated");
  uint32_t a = start + row / 8 * sbo + row % 8 * 128 + k / 8 * 16;
  a ^= ((a >> 7) & 7) << 4;
  return a + k % 8 * 2;
}

/// The calling thread's share of one m64nNk16 wgmma: accumulator register i holds row
/// 16·warp + lane / 4 + 8·(i / 2 % 2) and column 8·(i / 4) + 2·(lane % 4) + i % 2 (PTX ISA,
/// "Register Fragments and Shared Memory Matrix Layouts", matrix D), warp and lane within the
/// warpgroup.
template <typename T, int N>
void wgmma_thread_share(const WgmmaOp& op) {
  BlockState* s = state();
  const unsigned t = s->current % 128, warp = t / 32, lane = t % 32;
  auto element = [&](uint64_t desc, unsigned row, unsigned k) {
    const uint32_t at = wgmma_element_address(desc, row, k);
    if (at + 2 > s->shared.size()) fail("wgmma: an operand beyond the block's shared memory");
    uint16_t bits;
    std::memcpy(&bits, s->shared.data() + at, 2);
    return unpack<T>(bits, 0);
  };
  for (unsigned i = 0; i < N / 2; ++i) {
    const unsigned m = 16 * warp + lane / 4 + 8 * (i / 2 % 2), n = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
    float acc = 0.0f;
    for (unsigned k = 0; k < 16; ++k) acc += element(op.desc_a, m, k) * element(op.desc_b, n, k);
    op.d[i] += acc;
  }
}

}  // namespace emu
#endif

/// Makes this thread's generic-proxy writes to shared memory visible to the async proxy the
/// tensor cores read through (before the barrier that precedes a wgmma).
MGD_DEVICE void fence_proxy_async() {
#if defined(__CUDACC__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

/// A barrier of the calling thread's warpgroup only (named barrier 1 + warpgroup, 128 threads).
MGD_DEVICE void warpgroup_sync() {
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH__)
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + thread_rank() / 128) : "memory");
#endif
#else
  emu::warpgroup_barrier();
#endif
}

/// Orders this thread's accesses to accumulator registers before the wgmma ops that follow.
MGD_DEVICE void wgmma_fence() {
#if defined(__CUDACC__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

/// Keeps the compiler from moving accesses to d across this point (around wgmma ops, whose
/// results arrive asynchronously).
template <int R>
MGD_DEVICE void fence_registers(float (&d)[R]) {
#if defined(__CUDACC__)
  MGD_UNROLL
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
#else
  (void)d;
#endif
}

/// d += A·B for a 64×16 A and 16×N B in shared memory (descriptors desc_a, desc_b), issued
/// asynchronously by the whole warpgroup; d is this thread's fragment of the 64×N result.
template <typename T, int N>
MGD_DEVICE void wgmma_async(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b) {
  static_assert(N % 8 == 0 && N >= 8 && N <= 64, "wgmma_shapes.h has N = 8, 16, ..., 64");
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  detail::WgmmaAsync<N, std::is_same_v<T, bfloat16>>::run(d, desc_a, desc_b);
#else
  (void)d, (void)desc_a, (void)desc_b;
  __trap();  // matmul_wgmma only issues wgmma where kWgmmaAvailable
#endif
#else
  emu::state()->wgmma[thread_rank()].open.push_back({&emu::wgmma_thread_share<T, N>, desc_a, desc_b, d});
#endif
}

/// Closes the group of wgmma ops this thread issued since the last commit.
MGD_DEVICE void wgmma_commit() {
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
#else
  emu::state()->wgmma[thread_rank()].commit();
#endif
}

/// Waits until at most the N most recent committed groups of wgmma ops are in flight.
template <int N>
MGD_DEVICE void wgmma_wait() {
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
#else
  emu::state()->wgmma[thread_rank()].land(N, [](const emu::WgmmaOp& op) { op.run(op); });
#endif
}

/// 16 bytes from src to dst, both 16-byte aligned.
MGD_DEVICE void copy16(void* MGD_RESTRICT dst, const void* MGD_RESTRICT src) {
#if defined(__CUDACC__)
  *static_cast<uint4*>(dst) = *static_cast<const uint4*>(src);
#else
  std::memcpy(dst, src, 16);
#endif
}

/// Stages rows [r0, r0 + Rows) of an operand (element (r, k) at p[r·RS + k·KS], Ext rows and K
/// columns, zeros beyond K) for k in [kc, kc + 64) into the swizzled layout at dst. Rows
/// beyond Ext are not written: they only reach results that are not stored. Vector: KS is 1
/// and every 8 elements along k start 16-byte aligned, so each chunk is one 16-byte read.
template <int64_t Rows, int64_t RS, int64_t KS, int64_t Ext, int64_t K, bool Vector, typename T>
MGD_DEVICE void wgmma_stage(unsigned char* MGD_RESTRICT dst, const T* MGD_RESTRICT p, int64_t r0, int64_t kc,
                            unsigned t) {
  const T zero = from_float<T>(0.0f);
  for (int64_t c = t; c < Rows * 8; c += 128) {
    // Consecutive threads take consecutive chunks of a row when k is contiguous (coalesced
    // reads), consecutive rows otherwise (the swizzle keeps their writes in distinct banks).
    const int64_t r = KS == 1 ? c / 8 : c % Rows, ch = KS == 1 ? c % 8 : c / Rows;
    const int64_t row = r0 + r, k = kc + ch * 8;
    if (row >= Ext) continue;
    unsigned char* to = dst + sw128_offset(r, ch);
    if (Vector && k + 8 <= K) {
      copy16(to, p + row * RS + k);
      continue;
    }
    uint32_t w[4];
    for (int j = 0; j < 4; ++j) {
      const int64_t k0 = k + 2 * j;
      w[j] = pack2(k0 < K ? p[row * RS + k0 * KS] : zero, k0 + 1 < K ? p[row * RS + (k0 + 1) * KS] : zero);
    }
    copy16(to, w);
  }
}

/// Issues the Steps k16 wgmma ops of one staged chunk: step s starts 32 bytes further along the
/// swizzled rows of both stages.
template <typename T, int NT, int Steps>
MGD_DEVICE void wgmma_chunk(float (&acc)[NT / 2], uint32_t addr_a, uint32_t addr_b) {
  MGD_UNROLL
  for (int s = 0; s < Steps; ++s)
    wgmma_async<T, NT>(acc, wgmma_descriptor(addr_a + 32 * s), wgmma_descriptor(addr_b + 32 * s));
}

/// Batched matmul of tiles on Hopper's warpgroup tensor cores (the arguments of mgd::matmul,
/// Block scope; T f16 or bf16). Warpgroup g takes the 64 × wgmma_n(N) result blocks g, g +
/// warpgroups, ... of every batch; for each, 64 values of k at a time, it stages both operands
/// into its part of `scratch` (Scratch bytes of shared memory, at least wgmma_scratch_bytes),
/// then issues up to four wgmma ops and waits for them. When wgmma_swaps(M, N) it computes the
/// transpose instead: B's columns are the instruction's 64 rows and A's rows its N, so the
/// stages swap sources and each accumulator is stored at the transposed position. Where wgmma
/// is not available (compiled for another GPU) it is mma.sync (matmul_tc).
/// @pre block_threads() % 128 == 0 (whole warpgroups)
template <typename OutS, typename OutSt, typename ASt, int64_t AK, typename BSt, int64_t BK, int64_t K, int64_t Scratch,
          typename TO, typename T>
MGD_DEVICE void matmul_wgmma(TO* MGD_RESTRICT out, const T* MGD_RESTRICT a, const T* MGD_RESTRICT b,
                             unsigned char* scratch) {
  static_assert(std::is_same_v<T, half> || std::is_same_v<T, bfloat16>, "wgmma takes f16 or bf16 operands");
  if constexpr (!kWgmmaAvailable) {
    (void)scratch;
    matmul_tc<OutS, OutSt, ASt, AK, BSt, BK, K>(out, a, b);
  } else {
    constexpr int R = OutS::rank;
    constexpr int64_t M = OutS::get(R - 2), N = OutS::get(R - 1);
    constexpr int64_t AM = ASt::get(R - 2), BN = BSt::get(R - 1);
    constexpr WgmmaJobs kJobs = wgmma_jobs(M, N);
    constexpr bool kSwap = kJobs.swap;
    constexpr int64_t NT = kJobs.n, TM = kJobs.row_jobs, TN = kJobs.col_jobs, batches = OutS::numel / (M * N);
    constexpr bool kVectorA = AK == 1 && AM % 8 == 0 && batch_strides_aligned<ASt, R>();
    constexpr bool kVectorB = BK == 1 && BN % 8 == 0 && batch_strides_aligned<BSt, R>();
    // Whole chunks take four k16 steps; a last partial chunk the steps that cover it.
    constexpr int kLastSteps = static_cast<int>((K % kWgmmaStageK + 15) / 16);
    const unsigned t = thread_rank() % 128, warp = t / 32, lane = t % 32;
    const unsigned group = thread_rank() / 128, groups = block_threads() / 128;
    if (block_threads() % 128 != 0 || wgmma_scratch_bytes(N, groups) > Scratch) {
#if defined(__CUDACC__)
      __trap();
#else
      emu::fail("matmul_wgmma: a block of partial warpgroups, or less scratch than wgmma_scratch_bytes");
#endif
    }
    // This warpgroup's stages, 1024-byte aligned in the shared window (the swizzle pattern
    // repeats every 1024 bytes of address).
    const uint32_t base = shared_address(scratch);
    unsigned char* const stage_a = scratch + (1024 - base % 1024) % 1024 + group * (kWgmmaM + NT) * 128;
    unsigned char* const stage_b = stage_a + kWgmmaM * 128;
    const uint32_t addr_a = shared_address(stage_a), addr_b = shared_address(stage_b);
    for (int64_t job = group; job < batches * TM * TN; job += groups) {
      const int64_t batch = job / (TM * TN), m0 = (job / TN) % TM * kWgmmaM, n0 = job % TN * NT;
      // Element (batch, 0, 0) of the result locates the batch in each operand.
      const T* pa = a + offset<OutS, ASt>(batch * M * N);
      const T* pb = b + offset<OutS, BSt>(batch * M * N);
      float acc[NT / 2];
      MGD_UNROLL
      for (int i = 0; i < NT / 2; ++i) acc[i] = 0.0f;
      // One chunk of 64 values of k (Steps k16 steps; fewer in a last partial chunk).
      const auto chunk = [&](int64_t kc, auto steps) {
        // A as rows m, B transposed (rows n): both K-major, whichever side of the instruction
        // each is on.
        if constexpr (kSwap) {
          wgmma_stage<kWgmmaM, BN, BK, N, K, kVectorB>(stage_a, pb, m0, kc, t);
          wgmma_stage<NT, AM, AK, M, K, kVectorA>(stage_b, pa, n0, kc, t);
        } else {
          wgmma_stage<kWgmmaM, AM, AK, M, K, kVectorA>(stage_a, pa, m0, kc, t);
          wgmma_stage<NT, BN, BK, N, K, kVectorB>(stage_b, pb, n0, kc, t);
        }
        fence_proxy_async();
        warpgroup_sync();
        fence_registers(acc);
        wgmma_fence();
        wgmma_chunk<T, NT, decltype(steps)::value>(acc, addr_a, addr_b);
        wgmma_commit();
        wgmma_wait<0>();
        fence_registers(acc);
        warpgroup_sync();  // every warp is done with the stages before they are refilled
      };
      // The partial chunk is peeled off at compile time: a wgmma under a run-time branch is one
      // ptxas cannot prove warpgroup-uniform, and it serializes every wgmma of the kernel
      // ("wgmma.mma_async instructions are serialized due to ... divergent path", C7520).
      constexpr int64_t kWholeK = K - K % kWgmmaStageK;
      for (int64_t kc = 0; kc < kWholeK; kc += kWgmmaStageK) chunk(kc, std::integral_constant<int, 4>{});
      if constexpr (kLastSteps != 0) chunk(kWholeK, std::integral_constant<int, kLastSteps>{});
      TO* po = out + offset<OutS, OutSt>(batch * M * N);
      MGD_UNROLL
      for (int i = 0; i < NT / 2; ++i) {
        // Row and column of the instruction's result fragment (PTX's layout of D).
        const int64_t r = m0 + 16 * warp + lane / 4 + 8 * (i / 2 % 2), c = n0 + 8 * (i / 4) + 2 * (lane % 4) + i % 2;
        const int64_t m = kSwap ? c : r, n = kSwap ? r : c;
        if (m < M && n < N) po[m * OutSt::get(R - 2) + n * OutSt::get(R - 1)] = from_float<TO>(acc[i]);
      }
    }
  }
}

}  // namespace mgd
