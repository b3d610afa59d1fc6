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
#include "mugraph_device/mma_rules.h"

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

/// The value v of lane (this lane ^ lane_mask) of the calling warp (__shfl_xor_sync over the
/// whole warp). Every lane of the warp must call it.
MGD_DEVICE float shfl_xor(float v, unsigned lane_mask) {
#if defined(__CUDACC__)
  return __shfl_xor_sync(0xffffffffu, v, static_cast<int>(lane_mask));
#else
  // Host emulation: the lanes publish their values, meet, and each reads its partner's.
  emu::BlockState* st = emu::state();
  const unsigned rank = st->current, lane = rank % 32;
  emu::MmaStage& m = st->mma[rank / 32];
  const unsigned buf = m.shfl_calls[lane]++ % 2;
  m.shfl[buf][lane] = v;
  emu::warp_barrier();
  return m.shfl[buf][(lane ^ lane_mask) % 32];
#endif
}

/// ldmatrix.sync.aligned.m8n8.x{Count}{.trans}.shared.b16: the warp loads Count 8×8 matrices of
/// 16-bit elements from shared memory; lane 8·j + i gives the address of row i of matrix j (16
/// bytes, 16-byte aligned; lanes beyond 8·Count repeat valid addresses), and lane l receives in
/// r[j] the elements (l / 4, 2·(l % 4)) and (l / 4, 2·(l % 4) + 1) of matrix j — of its
/// transpose with Trans. Every lane of the warp must call it.
template <int Count, bool Trans>
MGD_DEVICE void ldmatrix(uint32_t (&r)[Count], const void* row_address) {
  static_assert(Count == 1 || Count == 2 || Count == 4, "x1, x2 or x4");
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row_address));
  if constexpr (Count == 4 && !Trans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
  } else if constexpr (Count == 4) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
  } else if constexpr (Count == 2 && !Trans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(s));
  } else if constexpr (Count == 2) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(s));
  } else if constexpr (!Trans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(s));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(s));
  }
#else
  (void)r, (void)row_address;
  __trap();  // matmul_tc is only selected for sm_80 and later
#endif
#else
  // Host emulation: the lanes publish their row addresses, meet, and each gathers its elements.
  emu::BlockState* st = emu::state();
  const unsigned rank = st->current, lane = rank % 32;
  emu::MmaStage& m = st->mma[rank / 32];
  const unsigned buf = m.ldsm_calls[lane]++ % 2;
  m.rows[buf][lane] = static_cast<const unsigned char*>(row_address);
  emu::warp_barrier();
  auto element = [&](int j, unsigned row, unsigned col) {
    uint16_t v;
    std::memcpy(&v, m.rows[buf][8 * j + row] + 2 * col, 2);
    return static_cast<uint32_t>(v);
  };
  for (int j = 0; j < Count; ++j) {
    const unsigned i = lane / 4, c = 2 * (lane % 4);
    // Trans: element (i, c) of the transpose is (c, i) of the matrix.
    r[j] = Trans ? element(j, c, i) | element(j, c + 1, i) << 16 : element(j, i, c) | element(j, i, c + 1) << 16;
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

/// Whether every batch stride of an operand (dims before the last two of the result, rank R)
/// keeps 16-byte alignment for 16-bit elements.
template <typename St, int R>
MGD_HOST_DEVICE constexpr bool batch_strides_aligned() {
  for (int d = 0; d + 2 < R; ++d)
    if (St::get(d) % 8 != 0) return false;
  return true;
}

/// Batched matmul of tiles on tensor cores (the arguments of mgd::matmul, Block scope): warp w
/// takes the 16×8 result blocks w, w + warps, ... of every batch. @pre block_threads() % 32 == 0
template <typename OutS, typename OutSt, typename ASt, int64_t AK, typename BSt, int64_t BK, int64_t K, typename TO,
          typename T>
MGD_DEVICE void matmul_tc(TO* MGD_RESTRICT out, const T* MGD_RESTRICT a, const T* MGD_RESTRICT b) {
  constexpr int R = OutS::rank;
  constexpr int64_t M = OutS::get(R - 2), N = OutS::get(R - 1);
  constexpr int64_t AM = ASt::get(R - 2), BN = BSt::get(R - 1);
  constexpr int64_t TM = (M + 15) / 16, TN = (N + 7) / 8, batches = OutS::numel / (M * N);
  const unsigned lane = thread_rank() % 32, warp = thread_rank() / 32, warps = block_threads() / 32;
  const int64_t g = lane / 4, t = lane % 4;
  const T zero = from_float<T>(0.0f);
  // Whole 16×16 A blocks with 16-byte rows along k go through ldmatrix (x4: the four 8×8
  // quarters in fragment order), and so does an A of 8 rows more than a multiple of 16 (the last
  // block through x2: its upper quarters, the lower ones zero); whole 16×8 B blocks with 16-byte
  // rows along n through ldmatrix.trans (x2: the k halves). Other tiles are gathered element by
  // element.
  constexpr bool kLdsmA = ldmatrix_a(AM, AK, M, K, batch_strides_aligned<ASt, R>());
  constexpr bool kLdsmB = ldmatrix_b(BK, BN, N, K, batch_strides_aligned<BSt, R>());
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
      uint32_t fa[4], fb[2];
      if constexpr (kLdsmA) {
        if (m0 + 16 <= M) {
          // Lane l: row l % 8 of quarter l / 8 (quarters: rows +0/+8, then k +0/+8).
          ldmatrix<4, false>(fa, pa + (m0 + lane % 8 + (lane / 8) % 2 * 8) * AM + k0 + lane / 16 * 8);
        } else {
          // 8 rows left (warp-uniform: the block is the warp's): lane l (mod 16) gives row l % 8
          // of the k half l / 8; rows 8 to 15 are zero.
          uint32_t half_rows[2];
          ldmatrix<2, false>(half_rows, pa + (m0 + lane % 8) * AM + k0 + lane / 8 % 2 * 8);
          fa[0] = half_rows[0];
          fa[1] = 0;
          fa[2] = half_rows[1];
          fa[3] = 0;
        }
      } else {
        fa[0] = pack2(A(r0, k), A(r0, k + 1));
        fa[1] = pack2(A(r1, k), A(r1, k + 1));
        fa[2] = pack2(A(r0, k + 8), A(r0, k + 9));
        fa[3] = pack2(A(r1, k + 8), A(r1, k + 9));
      }
      if constexpr (kLdsmB) {
        // Lane l (mod 16): row k0 + l of B's 16×8 block; transposed, each lane gets its k pairs.
        ldmatrix<2, true>(fb, pb + (k0 + lane % 16) * BK + n0);
      } else {
        fb[0] = pack2(B(k, n), B(k + 1, n));
        fb[1] = pack2(B(k + 8, n), B(k + 9, n));
      }
      mma_m16n8k16<T>(acc, fa, fb, acc);
    }
    TO* po = out + offset<OutS, OutSt>(batch * M * N);
    for (int i = 0; i < 4; ++i) {
      const int64_t r = m0 + g + (i >= 2 ? 8 : 0), n = n0 + 2 * t + (i & 1);
      if (r < M && n < N) po[r * OutSt::get(R - 2) + n * OutSt::get(R - 1)] = from_float<TO>(acc[i]);
    }
  }
}

}  // namespace mgd
