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
/// from tiles of any strides (the copy is the price of taking any tile), 64 values of k at a time,
/// per warpgroup; an operand the copy engine wrote swizzled (wgmma_rules.h, "Operands read in
/// place") it reads where it is, K-major or, with the instruction's transpose flag, MN-major.
///
/// Under the host emulation each thread's share of a wgmma is computed when the thread waits for
/// it, from shared memory decoded through the descriptors by the PTX definition, so CI checks the
/// staging layout, the descriptors and the accumulator fragments without a GPU, and that no stage
/// buffer is refilled before every thread's wgmma ops that read it have landed.
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

/// The descriptor of an operand at shared address `address` in the canonical layout of swizzle
/// span `span` (32, 64 or 128 bytes; mode 3, 2 or 1): bits 0-13 the address / 16, 16-29 the
/// leading byte offset `lbo` / 16 (MN-major: from one panel of span / 2 elements along m or n
/// to the next; unused by K-major layouts, 1 by convention), 32-45 the stride byte offset
/// `sbo` / 16 (from one group of 8 rows, or of 8 values of k for MN-major, to the next), 49-51
/// base offset 0 (the pattern starts aligned), 62-63 the mode.
MGD_HOST_DEVICE constexpr uint64_t wgmma_descriptor(uint32_t address, int64_t span, uint32_t lbo, uint32_t sbo) {
  const uint64_t mode = span == 128 ? 1 : span == 64 ? 2 : 3;
  return uint64_t{(address & 0x3FFFFu) >> 4} | uint64_t{(lbo & 0x3FFFFu) >> 4} << 16 |
         uint64_t{(sbo & 0x3FFFFu) >> 4} << 32 | mode << 62;
}

/// The stages' descriptor: K-major, 128-byte swizzle, 8-row groups 1024 bytes apart.
MGD_HOST_DEVICE constexpr uint64_t wgmma_descriptor(uint32_t address) {
  return wgmma_descriptor(address, 128, 16, 1024);
}

/// Shared address of the k16 step starting at k (a multiple of 16) of the rows from r0 on (a
/// multiple of 8, and of a panel's width for MN-major tiles) of an operand tile the copy engine
/// wrote swizzled with span Span: K-major tiles [Rows, K] as panels [K / W][Rows][W], MN-major
/// tiles [K, Rows] as panels [Rows / W][K][W], W = Span / 2 elements (wgmma_rules.h).
template <bool KMajor, int64_t Span, int64_t Rows, int64_t K>
MGD_HOST_DEVICE constexpr uint32_t in_place_address(uint32_t base, int64_t r0, int64_t k) {
  constexpr int64_t W = Span / 2;
  if constexpr (KMajor)
    return static_cast<uint32_t>(base + k / W * (Rows * Span) + r0 * Span + k % W * 2);
  else
    return static_cast<uint32_t>(base + r0 / W * (K * Span) + k * Span);
}

/// The descriptor of that step: K-major, 8-row groups 8 · Span apart; MN-major, groups of 8
/// values of k 8 · Span apart and panels K · Span apart.
template <bool KMajor, int64_t Span, int64_t K>
MGD_HOST_DEVICE constexpr uint64_t in_place_descriptor(uint32_t address) {
  return wgmma_descriptor(address, Span, KMajor ? 16u : static_cast<uint32_t>(K * Span),
                          static_cast<uint32_t>(8 * Span));
}

/// The descriptor of the step `bytes` (a multiple of 16) past the one `base` describes, whose
/// address is base's: its address field (bits 0-13, address / 16) plus bytes / 16, in one 32-bit
/// add. Shared addresses stay below 2^18, so the field takes the sum without a carry. Building
/// each step's descriptor from its address instead masks and shifts it again, about ten uniform
/// instructions per wgmma op (Figure 10b's loop issues 32 of them).
MGD_HOST_DEVICE constexpr uint64_t descriptor_plus(uint64_t base, uint32_t bytes) {
#if !defined(__CUDACC__)
  if ((base & 0x3FFFu) + (bytes >> 4) > 0x3FFFu || bytes % 16 != 0)
    emu::fail("descriptor_plus: the step's address leaves the descriptor's field");
#endif
  return (base & ~uint64_t{0xFFFFFFFFu}) | static_cast<uint32_t>(static_cast<uint32_t>(base) + (bytes >> 4));
}

/// The descriptor of the k16 step at k of the rows from r0 of a tile read in place (as
/// in_place_address and in_place_descriptor): the tile's own descriptor, `tile_descriptor`,
/// moved by the step's offset in the tile.
template <bool KMajor, int64_t Span, int64_t Rows, int64_t K>
MGD_HOST_DEVICE constexpr uint64_t in_place_step(uint64_t tile_descriptor, int64_t r0, int64_t k) {
  return descriptor_plus(tile_descriptor, in_place_address<KMajor, Span, Rows, K>(0, r0, k));
}

/// The address of p in the block's shared window.
MGD_DEVICE uint32_t shared_address(const void* p) {
#if defined(__CUDACC__)
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
#else
  return emu::shared_address(p);
#endif
}

/// Where accumulator register i of an m64nN wgmma lies in its 64×N result D, for thread t of the
/// warpgroup (PTX ISA, "Register Fragments and Shared Memory Matrix Layouts", matrix D): row
/// 16·warp + lane / 4 + 8·(i / 2 % 2), column 8·(i / 4) + 2·(lane % 4) + i % 2.
MGD_HOST_DEVICE constexpr unsigned wgmma_d_row(unsigned t, unsigned i) {
  return 16 * (t / 32) + t % 32 / 4 + 8 * (i / 2 % 2);
}
MGD_HOST_DEVICE constexpr unsigned wgmma_d_col(unsigned t, unsigned i) { return 8 * (i / 4) + 2 * (t % 4) + i % 2; }

/// Bytes from p to the next multiple of Align in the shared window (p is in shared memory).
template <uint32_t Align>
MGD_DEVICE uint32_t shared_padding(const void* p) {
  return (Align - shared_address(p) % Align) % Align;
}

#if !defined(__CUDACC__)
namespace emu {

/// Shared address of element (row, k), k < 16, of the operand `desc` describes, K-major or
/// (mn_major, the instruction's transpose flag) MN-major, row being its m or n: the canonical
/// layouts of the PTX ISA ("Shared Memory Matrix Layout"; T = 8 16-bit elements = 16 bytes).
/// K-major, no swizzle: ((8, m), (T, 2k)) : ((1T, SBO), (1, LBO)), 8×16-byte core matrices.
/// K-major, swizzle span S (mode 1, 2, 3: 128, 64, 32 bytes): ((8, m), (T, 2k)) : ((S/16·T,
/// SBO), (1, T)), rows S bytes apart. MN-major, span S: ((T, S/16, m), (8, k)) : ((1, T, LBO),
/// (S/16·T, SBO)), rows of S bytes along m or n, one per value of k. Swizzled layouts then XOR
/// address bits 4.. (the 16-byte chunk) with bits 7.. (the row within the pattern), log2(S/16)
/// bits of each: CuTe's Swizzle<log2(S/16), 4, 3>.
inline uint32_t wgmma_element_address(uint64_t desc, unsigned row, unsigned k, bool mn_major = false) {
  const uint32_t start = static_cast<uint32_t>(desc & 0x3FFF) << 4;
  const uint32_t lbo = static_cast<uint32_t>((desc >> 16) & 0x3FFF) << 4;
  const uint32_t sbo = static_cast<uint32_t>((desc >> 32) & 0x3FFF) << 4;
  const unsigned mode = static_cast<unsigned>(desc >> 62);
  if ((desc >> 49) & 7) fail("wgmma: a non-zero matrix base offset is not emulated");
  if (mode == 0) {
    if (mn_major) fail("wgmma: MN-major operands without a swizzle are not emulated");
    return start + row / 8 * sbo + row % 8 * 16 + k / 8 * lbo + k % 8 * 2;
  }
  const uint32_t span = 256u >> mode, chunks = span / 16;  // mode 1: 128 bytes, 8 chunks
  uint32_t a = mn_major ? start + row / (span / 2) * lbo + row % (span / 2) * 2 + k / 8 * sbo + k % 8 * span
                        : start + row / 8 * sbo + row % 8 * span + k * 2;
  return a ^ ((a >> 7) & (chunks - 1)) << 4;
}

/// The calling thread's share of one m64nNk16 wgmma: accumulator register i holds row
/// 16·warp + lane / 4 + 8·(i / 2 % 2) and column 8·(i / 4) + 2·(lane % 4) + i % 2 (PTX ISA,
/// "Register Fragments and Shared Memory Matrix Layouts", matrix D), warp and lane within the
/// warpgroup.
template <typename T, int N, bool TransA, bool TransB>
void wgmma_thread_share(const WgmmaOp& op) {
  BlockState* s = state();
  const unsigned t = s->current % 128;
  auto element = [&](uint64_t desc, unsigned row, unsigned k, bool mn_major) {
    const uint32_t at = wgmma_element_address(desc, row, k, mn_major);
    if (at + 2 > s->shared.size()) fail("wgmma: an operand beyond the block's shared memory");
    uint16_t bits;
    std::memcpy(&bits, s->shared.data() + at, 2);
    return unpack<T>(bits, 0);
  };
  for (unsigned i = 0; i < N / 2; ++i) {
    const unsigned m = wgmma_d_row(t, i), n = wgmma_d_col(t, i);
    float acc = 0.0f;
    for (unsigned k = 0; k < 16; ++k) acc += element(op.desc_a, m, k, TransA) * element(op.desc_b, n, k, TransB);
    op.d[i] += acc;
  }
}

/// The calling thread's share of one m64nNk16 wgmma with A from registers (op.a, gathered from
/// the warpgroup's fragments when it was issued) and B from op.desc_b.
template <typename T, int N, bool TransB>
void wgmma_thread_share_register_a(const WgmmaOp& op) {
  BlockState* s = state();
  const unsigned t = s->current % 128;
  const std::vector<float>& a = *op.a;
  for (unsigned i = 0; i < N / 2; ++i) {
    const unsigned m = wgmma_d_row(t, i), n = wgmma_d_col(t, i);
    float acc = 0.0f;
    for (unsigned k = 0; k < 16; ++k) {
      const uint32_t at = wgmma_element_address(op.desc_b, n, k, TransB);
      if (at + 2 > s->shared.size()) fail("wgmma: an operand beyond the block's shared memory");
      uint16_t bits;
      std::memcpy(&bits, s->shared.data() + at, 2);
      acc += a[m * 16 + k] * unpack<T>(bits, 0);
    }
    op.d[i] += acc;
  }
}

/// The warpgroup's 64×16 A from its threads' register fragments (each warp holds 16 rows as
/// mma.sync's A fragment: register j holds rows lane / 4 + 8·(j % 2), columns 2·(lane % 4) +
/// 8·(j / 2) and one more; PTX ISA, "Register Fragments", matrix A of wgmma .f16/.bf16). Every
/// thread of the warpgroup offers its registers; after a warpgroup barrier the first thread
/// builds the matrix once for the call and all share it; a second barrier keeps the offers until
/// everyone has it (the instruction is warpgroup-collective on the GPU too).
template <typename T>
std::shared_ptr<const std::vector<float>> gather_register_a(const uint32_t (&a)[4]) {
  BlockState* s = state();
  const unsigned first = s->current / 128 * 128;
  const uint64_t call = s->register_a_calls[s->current]++;  // the same for every thread of the call
  for (int j = 0; j < 4; ++j) s->register_a[s->current][static_cast<size_t>(j)] = a[j];
  warpgroup_barrier();
  // The first thread past the barrier builds the matrix; the others of the call share it.
  auto& [built_for, matrix] = s->register_a_matrix[first / 128];
  if (!matrix || built_for != call) {
    auto m = std::make_shared<std::vector<float>>(64 * 16);
    for (unsigned t = 0; t < 128; ++t) {
      const unsigned warp = t / 32, lane = t % 32;
      for (unsigned j = 0; j < 4; ++j) {
        const unsigned row = 16 * warp + lane / 4 + 8 * (j % 2), col = 2 * (lane % 4) + 8 * (j / 2);
        const uint32_t r = s->register_a[first + t][j];
        (*m)[row * 16 + col] = unpack<T>(r, 0);
        (*m)[row * 16 + col + 1] = unpack<T>(r, 1);
      }
    }
    built_for = call;
    matrix = std::move(m);
  }
  std::shared_ptr<const std::vector<float>> mine = matrix;
  warpgroup_barrier();
  return mine;
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
/// TransA / TransB: that operand is MN-major (the instruction's transpose flag), else K-major.
template <typename T, int N, bool TransA = false, bool TransB = false>
MGD_DEVICE void wgmma_async(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b) {
  static_assert(N % 8 == 0 && N >= 8 && N <= 64, "wgmma_shapes.h has N = 8, 16, ..., 64");
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  detail::WgmmaAsync<N, std::is_same_v<T, bfloat16>>::template run<TransA ? 1 : 0, TransB ? 1 : 0>(d, desc_a, desc_b);
#else
  (void)d, (void)desc_a, (void)desc_b;
  __trap();  // matmul_wgmma only issues wgmma where kWgmmaAvailable
#endif
#else
  emu::state()->wgmma[thread_rank()].open.push_back(
      {&emu::wgmma_thread_share<T, N, TransA, TransB>, desc_a, desc_b, d});
#endif
}

/// d += A·B for a 64×16 A held in the warpgroup's registers (this thread's fragment `a`: four
/// registers of two 16-bit values each, the layout of mma.sync's A per warp of 16 rows; see
/// emu::gather_register_a) and a 16×N B in shared memory (descriptor desc_b, MN-major if TransB).
/// The fragment of a 64×16 block of an f32 accumulator of the same layout as d, rounded to T,
/// is such an A (register_a_from_accumulator): that is how a result feeds the next matmul
/// without a trip through shared memory.
template <typename T, int N, bool TransB = false>
MGD_DEVICE void wgmma_async_register_a(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b) {
  static_assert(N % 8 == 0 && N >= 8 && N <= 64, "wgmma_shapes.h has N = 8, 16, ..., 64");
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  detail::WgmmaAsyncRegisterA<N, std::is_same_v<T, bfloat16>>::template run<TransB ? 1 : 0>(d, a, desc_b);
#else
  (void)d, (void)a, (void)desc_b;
  __trap();  // only issued where kWgmmaAvailable
#endif
#else
  emu::WgmmaOp op{&emu::wgmma_thread_share_register_a<T, N, TransB>, 0, desc_b, d};
  op.a = emu::gather_register_a<T>(a);
  emu::state()->wgmma[thread_rank()].open.push_back(std::move(op));
#endif
}

/// Registers j16 (the columns [16·j16, 16·j16 + 16)) of accumulator fragment d, rounded to T, as
/// the A operand of wgmma_async_register_a: element i of d holds column 8·(i / 4) + 2·(lane % 4)
/// + i % 2 of row lane / 4 + 8·(i / 2 % 2) (see emu::wgmma_thread_share), so A's register j is
/// d's elements 8·j16 + 2·j and the next, packed.
template <typename T, int R>
MGD_DEVICE void register_a_from_accumulator(uint32_t (&a)[4], const float (&d)[R], int j16) {
  MGD_UNROLL
  for (int j = 0; j < 4; ++j) a[j] = pack2(from_float<T>(d[8 * j16 + 2 * j]), from_float<T>(d[8 * j16 + 2 * j + 1]));
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

/// Where one side of the instruction reads its operand: its stage (Span 0), or in place, the
/// operand tile the copy engine wrote swizzled with span Span, K-major [Rows, K] or MN-major
/// [K, Rows] (read with the instruction's transpose flag).
template <int64_t Span, bool KMajor, int64_t Rows, int64_t K>
struct WgmmaSource {
  static constexpr bool kInPlace = Span != 0;
  static constexpr bool kTranspose = kInPlace && !KMajor;
  /// The descriptor of k16 step s of the chunk at kc, for rows from r0: in the stage, 32 bytes
  /// further along its swizzled rows per step; in place, by the tile's panels.
  MGD_DEVICE static uint64_t descriptor(uint32_t stage, uint32_t tile, int64_t r0, int64_t kc, int s) {
    if constexpr (kInPlace)
      return in_place_step<KMajor, Span, Rows, K>(in_place_descriptor<KMajor, Span, K>(tile), r0, kc + 16 * s);
    else
      return descriptor_plus(wgmma_descriptor(stage), 32 * static_cast<uint32_t>(s));
  }
};

/// Issues the Steps k16 wgmma ops of the chunk at kc, the instruction's A read as SrcA says
/// (its stage at stage_a, or the tile at tile_a from row r0a) and B as SrcB says.
template <typename T, int NT, int Steps, typename SrcA, typename SrcB>
MGD_DEVICE void wgmma_chunk(float (&acc)[NT / 2], uint32_t stage_a, uint32_t tile_a, int64_t r0a, uint32_t stage_b,
                            uint32_t tile_b, int64_t r0b, int64_t kc) {
  MGD_UNROLL
  for (int s = 0; s < Steps; ++s)
    wgmma_async<T, NT, SrcA::kTranspose, SrcB::kTranspose>(acc, SrcA::descriptor(stage_a, tile_a, r0a, kc, s),
                                                           SrcB::descriptor(stage_b, tile_b, r0b, kc, s));
}

namespace detail {
/// Hands each element of a job's accumulator fragment `acc` (the instruction's rows from m0,
/// columns from n0, this thread's rank t in its warpgroup) that lies in the result to
/// put(i, m, n, value): register i, at (m, n) of the M × N result. The instruction's extents are
/// Rows × Cols: M × N, or N × M where it computes the transpose (Swap).
template <int64_t Rows, int64_t Cols, int64_t NT, bool Swap, typename Put>
MGD_DEVICE void put_fragment(const float (&acc)[NT / 2], int64_t m0, int64_t n0, unsigned t, const Put& put) {
  if constexpr (Rows % 8 == 0 && Cols % NT == 0) {
    // Each warp holds 16 rows of the fragment, two runs of 8 (wgmma_d_row: value i in the
    // second where i / 2 is odd), and the n-blocks tile the columns: each run of a warp lies
    // inside the result or outside it whole, so two warp-uniform tests stand for a test per
    // value (each of which ptxas compiles to a branch of its own).
    const int64_t warp_row = m0 + 16 * (t / 32);
    const bool first_run = warp_row < Rows, second_run = warp_row + 8 < Rows;
    if (first_run) {
      MGD_UNROLL
      for (int i = 0; i < NT / 2; ++i) {
        const int64_t r = m0 + wgmma_d_row(t, i), c = n0 + wgmma_d_col(t, i);
        if (i / 2 % 2 == 0 || Rows % 16 == 0 || second_run) put(i, Swap ? c : r, Swap ? r : c, acc[i]);
      }
    }
  } else {
    MGD_UNROLL
    for (int i = 0; i < NT / 2; ++i) {
      // Row and column of the instruction's result fragment (PTX's layout of D).
      const int64_t r = m0 + wgmma_d_row(t, i), c = n0 + wgmma_d_col(t, i);
      const int64_t m = Swap ? c : r, n = Swap ? r : c;
      if (r < Rows && c < Cols) put(i, m, n, acc[i]);
    }
  }
}

/// matmul_wgmma's work, each result element handed to put(batch, j, i, m, n, value): job j of
/// this warpgroup's (local), register i of its accumulator fragment, at (m, n) of the batch's
/// M × N result, each element by exactly one thread. Groups: the block's warpgroups where the
/// caller fixes them (then the jobs are unrolled, so that j is a constant: results the caller
/// keeps in registers stay there), or 0.
template <typename OutS, typename ASt, int64_t AK, typename BSt, int64_t BK, int64_t K, int64_t Scratch,
          int64_t SwizzleA, int64_t SwizzleB, int64_t StageBuffers, int Groups, typename T, typename Put>
MGD_DEVICE void matmul_wgmma_jobs(const T* MGD_RESTRICT a, const T* MGD_RESTRICT b, unsigned char* scratch,
                                  const Put& put) {
  static_assert(std::is_same_v<T, half> || std::is_same_v<T, bfloat16>, "wgmma takes f16 or bf16 operands");
  static_assert(StageBuffers == 1 || StageBuffers == 2, "one or two stage buffers");
  constexpr int R = OutS::rank;
  constexpr int64_t M = OutS::get(R - 2), N = OutS::get(R - 1);
  constexpr int64_t AM = ASt::get(R - 2), BN = BSt::get(R - 1);
  constexpr bool kSwap = wgmma_orientation_swaps(M, N, K, SwizzleA != 0, SwizzleB != 0);
  static_assert(SwizzleA == 0 || wgmma_in_place_a(M, N, K, kSwap) == SwizzleA, "A cannot be read in place");
  static_assert(SwizzleB == 0 || wgmma_in_place_b(M, N, K, kSwap) == SwizzleB, "B cannot be read in place");
  constexpr WgmmaJobs kJobs = wgmma_jobs(M, N, kSwap);
  // The instruction's A and B: the matrices A ([M, K], K-major) and B ([K, N], MN-major in
  // place), or with kSwap B and A.
  using MatrixA = WgmmaSource<SwizzleA, true, M, K>;
  using MatrixB = WgmmaSource<SwizzleB, false, N, K>;
  using InstrA = std::conditional_t<kSwap, MatrixB, MatrixA>;
  using InstrB = std::conditional_t<kSwap, MatrixA, MatrixB>;
  constexpr bool kStages = !InstrA::kInPlace || !InstrB::kInPlace;
  constexpr int64_t NT = kJobs.n, TM = kJobs.row_jobs, TN = kJobs.col_jobs, batches = OutS::numel / (M * N);
  constexpr bool kVectorA = AK == 1 && AM % 8 == 0 && batch_strides_aligned<ASt, R>();
  constexpr bool kVectorB = BK == 1 && BN % 8 == 0 && batch_strides_aligned<BSt, R>();
  // Whole chunks take four k16 steps; a last partial chunk the steps that cover it.
  constexpr int kLastSteps = static_cast<int>((K % kWgmmaStageK + 15) / 16);
  const unsigned t = thread_rank() % 128;
  const unsigned group = thread_rank() / 128, groups = block_threads() / 128;
  // Two buffers only where k takes more than one chunk.
  constexpr int64_t kBuffers = StageBuffers < wgmma_stage_buffers(K) ? StageBuffers : wgmma_stage_buffers(K);
  if (block_threads() % 128 != 0 || wgmma_scratch_bytes(M, N, K, SwizzleA, SwizzleB, groups, kBuffers) > Scratch) {
#if defined(__CUDACC__)
    __trap();
#else
    emu::fail("matmul_wgmma: a block of partial warpgroups, or less scratch than wgmma_scratch_bytes");
#endif
  }
  // This warpgroup's stage buffers, 1024-byte aligned in the shared window (the swizzle
  // pattern repeats every 1024 bytes of address; a buffer is a multiple of 1024 bytes).
  // (None when both operands are read in place: scratch may be null.)
  constexpr int64_t kStageRows = wgmma_stage_rows(M, N, K, SwizzleA, SwizzleB);
  constexpr uint32_t kBufferBytes = static_cast<uint32_t>(kStageRows * 128);
  unsigned char* stage_a = scratch;
  unsigned char* stage_b = scratch;
  uint32_t addr_a = 0, addr_b = 0;
  if constexpr (kStages) {
    const uint32_t base = shared_address(scratch);
    stage_a = scratch + (1024 - base % 1024) % 1024 + group * kBuffers * kBufferBytes;
    stage_b = stage_a + (InstrA::kInPlace ? 0 : kWgmmaM * 128);
    addr_a = shared_address(stage_a);
    addr_b = shared_address(stage_b);
  }
  const auto run_job = [&](int j, int64_t job) {
    const int64_t batch = job / (TM * TN), m0 = (job / TN) % TM * kWgmmaM, n0 = job % TN * NT;
    // Element (batch, 0, 0) of the result locates the batch in each operand.
    const T* pa = a + offset<OutS, ASt>(batch * M * N);
    const T* pb = b + offset<OutS, BSt>(batch * M * N);
    const uint32_t tile_a = shared_address(kSwap ? static_cast<const void*>(pb) : pa);
    const uint32_t tile_b = shared_address(kSwap ? static_cast<const void*>(pa) : pb);
#if !defined(__CUDACC__)
    // Where each side's swizzle pattern repeats (8 rows of its span; 1 for a stage).
    constexpr int64_t kPatternA = InstrA::kInPlace ? 8 * (kSwap ? SwizzleB : SwizzleA) : 1;
    constexpr int64_t kPatternB = InstrB::kInPlace ? 8 * (kSwap ? SwizzleA : SwizzleB) : 1;
    if (tile_a % kPatternA != 0 || tile_b % kPatternB != 0)
      emu::fail("matmul_wgmma: an operand read in place does not start where its swizzle pattern does");
#endif
    float acc[NT / 2];
    MGD_UNROLL
    for (int i = 0; i < NT / 2; ++i) acc[i] = 0.0f;
    // Chunk c (64 values of k; the last may be partial) is staged into buffer c % kBuffers.
    // A as rows m, B transposed (rows n): both K-major, whichever side of the instruction each
    // is on. (Operands read in place were written by the copy engine, through the async proxy
    // the tensor cores read by, and waited for; or by element-wise ops, whose threads each
    // fenced their stores before the block barrier that precedes this call: they need no
    // fence here.)
    const auto stage = [&](int64_t kc, uint32_t buffer) {
      if constexpr (!InstrA::kInPlace) {
        if constexpr (kSwap)
          wgmma_stage<kWgmmaM, BN, BK, N, K, kVectorB>(stage_a + buffer * kBufferBytes, pb, m0, kc, t);
        else
          wgmma_stage<kWgmmaM, AM, AK, M, K, kVectorA>(stage_a + buffer * kBufferBytes, pa, m0, kc, t);
      }
      if constexpr (!InstrB::kInPlace) {
        if constexpr (kSwap)
          wgmma_stage<NT, AM, AK, M, K, kVectorA>(stage_b + buffer * kBufferBytes, pa, n0, kc, t);
        else
          wgmma_stage<NT, BN, BK, N, K, kVectorB>(stage_b + buffer * kBufferBytes, pb, n0, kc, t);
      }
      fence_proxy_async();
      warpgroup_sync();
    };
    // Issues chunk kc's Steps k16 ops from `buffer` as one group. The groups accumulate into
    // acc in issue order while in flight (wgmma ops of one shape on the same accumulators
    // need no wait between them).
    const auto issue = [&](int64_t kc, uint32_t buffer, auto steps) {
      fence_registers(acc);
      wgmma_fence();
      wgmma_chunk<T, NT, decltype(steps)::value, InstrA, InstrB>(acc, addr_a + buffer * kBufferBytes, tile_a, m0,
                                                                 addr_b + buffer * kBufferBytes, tile_b, n0, kc);
      wgmma_commit();
    };
    // Before chunk kc is staged into `buffer`: the chunk read from it before (two back, with
    // two buffers) has landed, in every warp of the group. The chunk just issued stays in
    // flight while this one is staged.
    const auto stage_next = [&](int64_t kc, uint32_t buffer) {
      if constexpr (kStages) {
        if constexpr (kBuffers == 2)
          wgmma_wait<1>();
        else
          wgmma_wait<0>();
        fence_registers(acc);
        warpgroup_sync();
        stage(kc, buffer);
      }
    };
    // The partial chunk is peeled off at compile time: a wgmma under a run-time branch is one
    // ptxas cannot prove warpgroup-uniform, and it serializes every wgmma of the kernel
    // ("wgmma.mma_async instructions are serialized due to ... divergent path", C7520).
    constexpr int64_t kChunks = (K + kWgmmaStageK - 1) / kWgmmaStageK;
    if constexpr (kStages) stage(0, 0);
    for (int64_t c = 0; c + 1 < kChunks; ++c) {
      issue(c * kWgmmaStageK, static_cast<uint32_t>(c % kBuffers), std::integral_constant<int, 4>{});
      stage_next((c + 1) * kWgmmaStageK, static_cast<uint32_t>((c + 1) % kBuffers));
    }
    constexpr int kFinalSteps = kLastSteps != 0 ? kLastSteps : 4;
    issue((kChunks - 1) * kWgmmaStageK, static_cast<uint32_t>((kChunks - 1) % kBuffers),
          std::integral_constant<int, kFinalSteps>{});
    wgmma_wait<0>();
    fence_registers(acc);
    if constexpr (kStages) warpgroup_sync();  // every warp is done with the stages before the next job refills them
    put_fragment<kSwap ? N : M, kSwap ? M : N, NT, kSwap>(
        acc, m0, n0, t, [&](int i, int64_t m, int64_t n, float v) { put(batch, j, i, m, n, v); });
  };
  constexpr int64_t kAllJobs = batches * TM * TN;
  if constexpr (Groups > 0) {
    if (static_cast<int>(groups) != Groups) {
#if defined(__CUDACC__)
      __trap();
#else
      emu::fail("matmul_wgmma: results for another number of warpgroups than the block has");
#endif
    }
    MGD_UNROLL
    for (int j = 0; j < (kAllJobs + Groups - 1) / Groups; ++j) {
      const int64_t job = group + int64_t{j} * Groups;
      if (job < kAllJobs) run_job(j, job);
    }
  } else {
    int j = 0;
    for (int64_t job = group; job < kAllJobs; job += groups) run_job(j++, job);
  }
}
}  // namespace detail

/// Batched matmul of tiles on Hopper's warpgroup tensor cores (the arguments of mgd::matmul,
/// Block scope; T f16 or bf16). Warpgroup g takes the 64 × wgmma_n(N) result blocks g, g +
/// warpgroups, ... of every batch; for each, 64 values of k at a time (a chunk), it stages the
/// operands it does not read in place into its part of `scratch` (Scratch bytes of shared memory,
/// at least wgmma_scratch_bytes) and issues up to four wgmma ops as one group. With two stage
/// buffers (StageBuffers) it stages the next chunk while the tensor cores read this one,
/// and waits for the chunk before it only; operands all read in place need no wait until the
/// last chunk. When wgmma_swaps(M, N) it computes the
/// transpose instead: B's columns are the instruction's 64 rows and A's rows its N, so the
/// stages swap sources and each accumulator is stored at the transposed position.
/// SwizzleA (SwizzleB): 0, or the swizzle span with which the copy engine wrote operand A (B),
/// a [M, K] ([K, N]) tile without batches, in panels (wgmma_rules.h); it is read in place, not
/// staged, and the orientation is wgmma_orientation_swaps'. Where wgmma is not available
/// (compiled for another GPU) it is mma.sync (matmul_tc), which takes no swizzled operands.
/// StageBuffers: 1, or 2 to double-buffer the stages where k takes more than one chunk (Scratch
/// then at least wgmma_scratch_bytes(..., 2)).
/// @pre block_threads() % 128 == 0 (whole warpgroups); operands read in place start at a
/// multiple of 8 · their span in the shared window (where their swizzle pattern starts)
template <typename OutS, typename OutSt, typename ASt, int64_t AK, typename BSt, int64_t BK, int64_t K, int64_t Scratch,
          int64_t SwizzleA = 0, int64_t SwizzleB = 0, int64_t StageBuffers = 1, typename TO, typename T>
MGD_DEVICE void matmul_wgmma(TO* MGD_RESTRICT out, const T* MGD_RESTRICT a, const T* MGD_RESTRICT b,
                             unsigned char* scratch) {
  if constexpr (!kWgmmaAvailable) {
    static_assert(SwizzleA == 0 && SwizzleB == 0, "only wgmma reads swizzled operand tiles");
    (void)scratch;
    matmul_tc<OutS, OutSt, ASt, AK, BSt, BK, K>(out, a, b);
  } else {
    constexpr int R = OutS::rank;
    constexpr int64_t M = OutS::get(R - 2), N = OutS::get(R - 1);
    detail::matmul_wgmma_jobs<OutS, ASt, AK, BSt, BK, K, Scratch, SwizzleA, SwizzleB, StageBuffers, 0>(
        a, b, scratch, [&](int64_t batch, int, int, int64_t m, int64_t n, float v) {
          out[offset<OutS, OutSt>(batch * M * N) + m * OutSt::get(R - 2) + n * OutSt::get(R - 1)] = from_float<TO>(v);
        });
  }
}

/// matmul_wgmma of one [M, N] product (no batches) whose result goes to `result`, a sink of
/// wgmma_chain.h (result.put(j, i, m, n, value) for each element, by one thread): added to a
/// for-loop's summing accumulator in shared memory (TileAccumulate) or in the registers of the
/// threads that compute it (RegisterAccumulate, whose fragment order this keeps: the
/// instruction's results are one n-block, N = wgmma_n(N); where the product is computed as its
/// transpose, the registers are the transpose's, [N, M], with M = wgmma_n(M)), instead of a result tile
/// that mgd::accumulate then reads. The value is rounded to the result tile's type first, so
/// the sums are the same. sm_90a only (the emitter uses it where kWgmmaAvailable).
template <typename OutS, typename ASt, int64_t AK, typename BSt, int64_t BK, int64_t K, int64_t Scratch,
          int64_t SwizzleA = 0, int64_t SwizzleB = 0, int64_t StageBuffers = 1, typename Result, typename T>
MGD_DEVICE void matmul_wgmma_to(const Result& result, const T* MGD_RESTRICT a, const T* MGD_RESTRICT b,
                                unsigned char* scratch) {
  constexpr int R = OutS::rank;
  constexpr int64_t M = OutS::get(R - 2), N = OutS::get(R - 1);
  static_assert(OutS::numel == M * N, "one product, no batches");
  static_assert(kWgmmaAvailable || sizeof(T) == 0, "matmul_wgmma_to needs wgmma (sm_90a)");
  // Registers hold the instruction's fragments: of the product, or of its transpose [N, M]
  // where the matmul computes that (the caller's ResultRegisters are then declared [N, M]).
  constexpr WgmmaJobs kJobs = wgmma_jobs(M, N, wgmma_orientation_swaps(M, N, K, SwizzleA != 0, SwizzleB != 0));
  static_assert(Result::kJobs == 0 || (kJobs.n == kJobs.cols &&
                                       Result::kJobs == (kJobs.row_jobs + Result::kGroups - 1) / Result::kGroups),
                "registers in the order of the instruction's fragments, one n-block of them");
  detail::matmul_wgmma_jobs<OutS, ASt, AK, BSt, BK, K, Scratch, SwizzleA, SwizzleB, StageBuffers, Result::kGroups>(
      a, b, scratch, [&](int64_t, int j, int i, int64_t m, int64_t n, float v) { result.put(j, i, m, n, v); });
}

}  // namespace mgd
