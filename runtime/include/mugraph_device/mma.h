/// \file mma.h
/// Tensor-core matmul on shared-memory tiles with mma.sync.m16n8k16 (f16 or bf16 operands, f32
/// accumulation; sm_80 and later, sm_90a included). Each warp computes 16×8 blocks of the
/// result; operand fragments are gathered from the tiles by the layouts of the PTX ISA
/// ("Matrix Fragments for mma.m16n8k16 with floating point type"), with zeros beyond the
/// tile's edges, so any M, N and K work.
///
/// Under the host emulation mma_m16n8k16 is computed from the same fragments, exchanged between
/// the warp's lanes, so CI checks the fragment layouts without a GPU.
#pragma once

#include <cstring>
#include <type_traits>

#include "mugraph_device/dims.h"
#include "mugraph_device/elementwise.h"

namespace mgd {

/// Two 16-bit values in one register, lo in the low half.
template <typename T>
MGD_DEVICE uint32_t pack2(T lo, T hi) {
  uint16_t l, h;
  static_assert(sizeof(T) == 2, "16-bit elements");
  std::memcpy(&l, static_cast<const void*>(&lo), 2);
  std::memcpy(&h, static_cast<const void*>(&hi), 2);
  return static_cast<uint32_t>(l) | (static_cast<uint32_t>(h) << 16);
}

/// Element `which` (0 low, 1 high) of a packed register, as f32.
template <typename T>
MGD_DEVICE float unpack(uint32_t r, int which) {
  const uint16_t bits = static_cast<uint16_t>(which ? r >> 16 : r & 0xFFFF);
  T x;
  std::memcpy(static_cast<void*>(&x), &bits, 2);
  return to_float(x);
}

/// d = a·b + c for one warp: a is the 16×16 A fragment (4 registers), b the 16×8 B fragment
/// (2), c and d the 16×8 f32 accumulator fragments (4). Every lane of the warp must call it.
template <typename T>
MGD_DEVICE void mma_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
  }
#else
  (void)d, (void)a, (void)b, (void)c;
  __trap();  // matmul_tc is only selected for sm_80 and later
#endif
#else
  // Host emulation: the lanes publish their fragments, meet at a warp barrier, and each computes
  // its four results from everyone's fragments by the PTX layouts.
  emu::BlockState* s = emu::state();
  const unsigned rank = s->current, lane = rank % 32;
  emu::MmaStage& st = s->mma[rank / 32];
  const unsigned buf = st.calls[lane]++ % 2;
  std::memcpy(st.a[buf][lane], a, sizeof(uint32_t) * 4);
  std::memcpy(st.b[buf][lane], b, sizeof(uint32_t) * 2);
  emu::warp_barrier();
  // A(r, k): lane (r % 8)·4 + (k % 8)/2, register (r / 8) + 2·(k / 8), half k % 2.
  auto A = [&](unsigned r, unsigned k) {
    return unpack<T>(st.a[buf][(r % 8) * 4 + (k % 8) / 2][r / 8 + 2 * (k / 8)], static_cast<int>(k % 2));
  };
  // B(k, n): lane n·4 + (k % 8)/2, register k / 8, half k % 2.
  auto B = [&](unsigned k, unsigned n) {
    return unpack<T>(st.b[buf][n * 4 + (k % 8) / 2][k / 8], static_cast<int>(k % 2));
  };
  const unsigned g = lane / 4, t = lane % 4;
  for (unsigned i = 0; i < 4; ++i) {
    const unsigned r = g + (i >= 2 ? 8 : 0), n = 2 * t + (i & 1);
    float acc = 0.0f;
    for (unsigned k = 0; k < 16; ++k) acc += A(r, k) * B(k, n);
    d[i] = acc + c[i];
  }
#endif
}

/// Whether matmul runs on tensor cores for operand types TA, TB in the Block scope: both f16 or
/// both bf16, on sm_80 and later (and in the host emulation).
template <typename TA, typename TB>
inline constexpr bool kTensorCoreOperands =
#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    false;
#else
    std::is_same_v<TA, TB> && (std::is_same_v<TA, half> || std::is_same_v<TA, bfloat16>);
#endif

/// Batched matmul of tiles on tensor cores (the arguments of mgd::matmul, Block scope): warp w
/// takes the 16×8 result blocks w, w + warps, ... of every batch. @pre block_threads() % 32 == 0
template <typename OutS, typename ASt, int64_t AK, typename BSt, int64_t BK, int64_t K, typename TO, typename T>
MGD_DEVICE void matmul_tc(TO* MGD_RESTRICT out, const T* MGD_RESTRICT a, const T* MGD_RESTRICT b) {
  constexpr int R = OutS::rank;
  constexpr int64_t M = OutS::get(R - 2), N = OutS::get(R - 1);
  constexpr int64_t AM = ASt::get(R - 2), BN = BSt::get(R - 1);
  constexpr int64_t TM = (M + 15) / 16, TN = (N + 7) / 8, batches = OutS::numel / (M * N);
  const unsigned lane = thread_rank() % 32, warp = thread_rank() / 32, warps = block_threads() / 32;
  const int64_t g = lane / 4, t = lane % 4;
  const T zero = from_float<T>(0.0f);
  for (int64_t blk = warp; blk < batches * TM * TN; blk += warps) {
    const int64_t batch = blk / (TM * TN), m0 = (blk / TN) % TM * 16, n0 = blk % TN * 8;
    // Element (batch, 0, 0) of the result locates the batch in each operand.
    const T* pa = a + offset<OutS, ASt>(batch * M * N);
    const T* pb = b + offset<OutS, BSt>(batch * M * N);
    auto A = [&](int64_t r, int64_t k) { return r < M && k < K ? pa[r * AM + k * AK] : zero; };
    auto B = [&](int64_t k, int64_t n) { return k < K && n < N ? pb[k * BK + n * BN] : zero; };
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t k0 = 0; k0 < K; k0 += 16) {
      const int64_t r0 = m0 + g, r1 = m0 + g + 8, k = k0 + 2 * t, n = n0 + g;
      const uint32_t fa[4] = {pack2(A(r0, k), A(r0, k + 1)), pack2(A(r1, k), A(r1, k + 1)),
                              pack2(A(r0, k + 8), A(r0, k + 9)), pack2(A(r1, k + 8), A(r1, k + 9))};
      const uint32_t fb[2] = {pack2(B(k, n), B(k + 1, n)), pack2(B(k + 8, n), B(k + 9, n))};
      mma_m16n8k16<T>(acc, fa, fb, acc);
    }
    TO* po = out + batch * M * N;
    for (int i = 0; i < 4; ++i) {
      const int64_t r = m0 + g + (i >= 2 ? 8 : 0), n = n0 + 2 * t + (i & 1);
      if (r < M && n < N) po[r * N + n] = from_float<TO>(acc[i]);
    }
  }
}

}  // namespace mgd
