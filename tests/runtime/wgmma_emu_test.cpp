// Hopper's warpgroup matmul (mugraph_device/wgmma.h) under the host emulation: the descriptor
// bits and the swizzled layout against the PTX ISA's definitions written out by hand, one wgmma
// against the fragment layout of D, and matmul_wgmma against f32 arithmetic over shapes that
// exercise padding, batches, broadcasting, transposed operands and several warpgroups.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <type_traits>
#include <vector>

#include "mugraph_device/device.h"

namespace {

using mgd::Dims;

template <typename F>
void run_block(unsigned threads, size_t smem, F body) {
  std::function<void()> f = body;
  mgd::emu::launch(dim3(1), dim3(threads), smem, nullptr, f);
}

TEST(Wgmma, DescriptorBits) {
  // Address 0x2400 / 16 = 0x240 in bits 0-13; LBO 1 in 16-29; SBO 1024 / 16 = 64 in 32-45; mode 1
  // (128-byte swizzle) in 62-63.
  EXPECT_EQ(mgd::wgmma_descriptor(0x2400), 0x4000004000010240ull);
  // Only address bits 4-17 are encoded.
  EXPECT_EQ(mgd::wgmma_descriptor(0x40000 | 0x2400) & 0x3FFF, 0x240u);
}

TEST(Wgmma, SwizzledLayoutSpreadsAColumnOfChunksOverTheBanks) {
  // Rows 128 bytes apart, groups of 8 rows 1024 bytes apart, chunk c of row r at c ^ (r % 8).
  EXPECT_EQ(mgd::sw128_offset(0, 0), 0);
  EXPECT_EQ(mgd::sw128_offset(1, 0), 128 + 16);
  EXPECT_EQ(mgd::sw128_offset(3, 5), 3 * 128 + (5 ^ 3) * 16);
  EXPECT_EQ(mgd::sw128_offset(9, 2), 1024 + 128 + (2 ^ 1) * 16);
  // The eight rows of one chunk column cover all eight 16-byte bank groups of a 128-byte line.
  for (int c = 0; c < 8; ++c) {
    unsigned seen = 0;
    for (int r = 0; r < 8; ++r) seen |= 1u << (mgd::sw128_offset(r, c) % 128 / 16);
    EXPECT_EQ(seen, 0xFFu) << "chunk " << c;
  }
  // The emulation's descriptor decoding reads back what the layout wrote: element (r, k) of a
  // k16 step s sits at sw128_offset(r, 2s + k / 8) + 2 (k % 8).
  std::vector<unsigned char> smem(4096);
  run_block(1, 4096, [&] {
    for (unsigned s = 0; s < 4; ++s)
      for (unsigned r = 0; r < 16; ++r)
        for (unsigned k = 0; k < 16; ++k)
          ASSERT_EQ(mgd::emu::wgmma_element_address(mgd::wgmma_descriptor(1024 + 32 * s), r, k),
                    1024 + mgd::sw128_offset(r, 2 * s + k / 8) + 2 * (k % 8))
              << s << " " << r << " " << k;
  });
}

/// The accumulator fragments d (each thread's N / 2 registers, thread by thread) of a 64×N
/// result D(m, n) = m·16 + n: register i of thread t holds row 16·warp + lane / 4 + 8·(i / 2 % 2)
/// and column 8·(i / 4) + 2·(lane % 4) + i % 2 (PTX's layout of D).
void expect_fragments_of_m16_plus_n(const std::vector<float>& d, unsigned N) {
  for (unsigned t = 0; t < 128; ++t) {
    const unsigned warp = t / 32, lane = t % 32;
    for (unsigned i = 0; i < N / 2; ++i) {
      const unsigned m = 16 * warp + lane / 4 + 8 * (i / 2 % 2), n = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
      ASSERT_EQ(d[t * N / 2 + i], static_cast<float>(m * 16 + n)) << "thread " << t << " register " << i;
    }
  }
}

TEST(Wgmma, FragmentOfDFollowsThePtxLayout) {
  // One m64n16k16 with A(m, k) = m·16 + k (small integers, exact in f16) and B(n, k) = 1 where
  // k == n: D(m, n) = A(m, n). Each thread's fragment must hold its rows and columns.
  constexpr int N = 16;
  std::vector<float> d(128 * N / 2, -1.0f);
  run_block(128, 8192 + 2048, [&] {
    MGD_DYNAMIC_SHARED(smem);
    unsigned char* sa = smem;         // 64 rows
    unsigned char* sb = smem + 8192;  // 16 rows
    const unsigned t = mgd::thread_rank();
    if (t == 0) {
      for (int m = 0; m < 64; ++m)
        for (int k = 0; k < 16; ++k) {
          const mgd::half v = mgd::from_float<mgd::half>(static_cast<float>(m * 16 + k));
          std::memcpy(sa + mgd::sw128_offset(m, k / 8) + 2 * (k % 8), &v, 2);
        }
      for (int n = 0; n < N; ++n)
        for (int k = 0; k < 16; ++k) {
          const mgd::half v = mgd::from_float<mgd::half>(k == n ? 1.0f : 0.0f);
          std::memcpy(sb + mgd::sw128_offset(n, k / 8) + 2 * (k % 8), &v, 2);
        }
    }
    mgd::sync_block();
    float acc[N / 2] = {};
    mgd::wgmma_fence();
    mgd::wgmma_async<mgd::half, N>(acc, mgd::wgmma_descriptor(mgd::shared_address(sa)),
                                   mgd::wgmma_descriptor(mgd::shared_address(sb)));
    mgd::wgmma_commit();
    for (float x : acc) EXPECT_EQ(x, 0.0f);  // not landed before the wait
    mgd::wgmma_wait<0>();
    for (int i = 0; i < N / 2; ++i) d[t * N / 2 + static_cast<unsigned>(i)] = acc[i];
  });
  expect_fragments_of_m16_plus_n(d, N);
}

TEST(Emulation, WarpgroupBarriersOnlyWaitForTheirWarpgroup) {
  // Warpgroup 1 passes its barrier twice while warpgroup 0 is at its first one: each barrier
  // counts its own 128 threads.
  std::vector<int> order;
  run_block(256, 0, [&] {
    const unsigned g = mgd::thread_rank() / 128;
    if (g == 0) {
      mgd::warpgroup_sync();
      if (mgd::thread_rank() == 0) order.push_back(0);
    } else {
      mgd::warpgroup_sync();
      mgd::warpgroup_sync();
      if (mgd::thread_rank() == 128) order.push_back(1);
    }
  });
  EXPECT_EQ(order.size(), 2u);
}

TEST(Emulation, LeavingWithWgmmaInFlightIsABug) {
  EXPECT_DEATH(run_block(128, 4096,
                         [] {
                           MGD_DYNAMIC_SHARED(smem);
                           float acc[4] = {};
                           const uint64_t d = mgd::wgmma_descriptor(mgd::shared_address(smem));
                           mgd::wgmma_async<mgd::half, 8>(acc, d, d);
                           mgd::wgmma_commit();
                         }),
               "asynchronous matrix multiplies it never waited for");
}

std::vector<float> randoms(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(gen);
  return v;
}

/// The values of f rounded to T, as a tile of T holds them.
template <typename T>
std::vector<T> rounded(const std::vector<float>& f) {
  std::vector<T> t(f.size());
  for (size_t i = 0; i < f.size(); ++i) t[i] = mgd::from_float<T>(f[i]);
  return t;
}

/// matmul_wgmma on out[B, M, N] = a[M, K] (shared by the batches) · b[B, K, N], or with A
/// transposed in memory (a stored [K, M]) or B transposed (b stored [B, N, K]), against f32
/// arithmetic on the same rounded operands. The tiles sit at odd offsets of shared memory, so
/// the 1024-byte alignment of the stages is exercised too.
/// TransOut writes the result transposed within each batch (m innermost), as a layout the
/// layout pass may choose. Buffers: the stage buffers (two pipeline the chunks of k). Nothing
/// is written past the result (the instruction computes rows and columns beyond M and N).
template <typename T, int M, int N, int K, bool TransA = false, bool TransB = false, bool TransOut = false,
          int64_t Buffers = 2>
void check_wgmma_matmul(unsigned threads) {
  constexpr int B = 2;
  constexpr int64_t AM = TransA ? 1 : K, AK = TransA ? M : 1;
  constexpr int64_t BN = TransB ? K : 1, BK = TransB ? 1 : N;
  constexpr int64_t OM = TransOut ? 1 : N, ON = TransOut ? M : 1;
  constexpr int64_t kScratch = mgd::wgmma_scratch_bytes(M, N, K, 0, 0, 2, Buffers);
  const size_t a_bytes = size_t{M} * K * sizeof(T), b_bytes = size_t{B} * K * N * sizeof(T);
  const size_t a_at = 48, b_at = (a_at + a_bytes + 15) / 16 * 16, scratch_at = (b_at + b_bytes + 15) / 16 * 16 + 16;
  std::vector<float> fa = randoms(size_t{M} * K, 3), fb = randoms(size_t{B} * K * N, 4);
  const std::vector<T> a = rounded<T>(fa), b = rounded<T>(fb);
  constexpr size_t kPast = 64 * 256;     // more than a job's rows and columns beyond the result
  constexpr float kUntouched = 1234.5f;  // not NaN: rows past M are computed from NaN-poisoned stages
  std::vector<float> out(size_t{B} * M * N + kPast, kUntouched);
  run_block(threads, scratch_at + kScratch, [&] {
    MGD_DYNAMIC_SHARED(smem);
    T* sa = reinterpret_cast<T*>(smem + a_at);
    T* sb = reinterpret_cast<T*>(smem + b_at);
    for (size_t i = mgd::thread_rank(); i < a.size(); i += mgd::block_threads()) sa[i] = a[i];
    for (size_t i = mgd::thread_rank(); i < b.size(); i += mgd::block_threads()) sb[i] = b[i];
    mgd::sync_block();
    mgd::matmul_wgmma<Dims<B, M, N>, Dims<M * N, OM, ON>, Dims<0, AM, 0>, AK, Dims<K * N, 0, BN>, BK, K, kScratch, 0, 0,
                      Buffers>(out.data(), sa, sb, smem + scratch_at);
  });
  for (int bi = 0; bi < B; ++bi)
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        float want = 0;
        for (int k = 0; k < K; ++k)
          want += mgd::to_float(a[static_cast<size_t>(m * AM + k * AK)]) *
                  mgd::to_float(b[static_cast<size_t>(bi * K * N + n * BN + k * BK)]);
        ASSERT_NEAR(out[static_cast<size_t>(bi * M * N + m * OM + n * ON)], want, 1e-3f)
            << bi << "," << m << "," << n << " with " << threads << " threads";
      }
  for (size_t i = size_t{B} * M * N; i < out.size(); ++i)
    ASSERT_EQ(out[i], kUntouched) << "written past the result at " << i << " with " << threads << " threads";
}

TEST(TileOps, WgmmaMatmulF16) {
  check_wgmma_matmul<mgd::half, 16, 32, 256>(128);  // Figure 3b's tile shapes: 48 of 64 rows unused
  check_wgmma_matmul<mgd::half, 64, 64, 64>(128);   // one whole job
  check_wgmma_matmul<mgd::half, 80, 72, 40>(256);   // padding in M, N and K; two warpgroups, uneven jobs
  check_wgmma_matmul<mgd::half, 8, 8, 16>(128);     // the smallest wgmma
  check_wgmma_matmul<mgd::half, 16, 32, 272>(128);  // LoRA's concat: four whole chunks of k, then one k16 step
  // Two warpgroups with uneven jobs, each job three chunks of k (the last partial) through two
  // stage buffers per warpgroup.
  check_wgmma_matmul<mgd::half, 80, 72, 136, false, true>(256);
}

TEST(TileOps, WgmmaMatmulWithOneStageBuffer) {
  // Where a second buffer does not fit, each chunk waits for the one before it.
  check_wgmma_matmul<mgd::half, 16, 32, 256, false, false, false, 1>(128);
  check_wgmma_matmul<mgd::half, 80, 72, 136, false, true, false, 1>(256);
  static_assert(mgd::wgmma_scratch_bytes(16, 32, 256, 0, 0, 1, 1) == 1024 + (64 + 16) * 128);  // swapped: n16
  static_assert(mgd::wgmma_scratch_bytes(16, 32, 256, 0, 0, 1, 2) == 1024 + 2 * (64 + 16) * 128);
  static_assert(mgd::wgmma_scratch_bytes(16, 32, 64, 0, 0, 1, 2) == 1024 + (64 + 16) * 128);  // one chunk: one
}

TEST(TileOps, WgmmaMatmulBf16) { check_wgmma_matmul<mgd::bfloat16, 24, 48, 96>(128); }

TEST(TileOps, WgmmaMatmulOfTransposedOperands) {
  check_wgmma_matmul<mgd::half, 16, 40, 64, true, false>(128);  // A gathered along k
  check_wgmma_matmul<mgd::half, 16, 40, 64, false, true>(128);  // B's chunks in 16-byte reads
  check_wgmma_matmul<mgd::bfloat16, 70, 24, 50, true, true>(256);
  check_wgmma_matmul<mgd::half, 80, 72, 40, false, true, true>(256);  // the result transposed
}

TEST(TileOps, WgmmaSwapsOperandsWhereTheTransposePadsLess) {
  static_assert(mgd::wgmma_swaps(16, 32));   // 16 × 32 in one 64 × 32 block, transposed one 64 × 16
  static_assert(mgd::wgmma_swaps(8, 128));   // GatedMLP's rows: 8192 computed elements, or 1024
  static_assert(mgd::wgmma_swaps(2, 64));    // RMSNorm at batch size 1
  static_assert(!mgd::wgmma_swaps(8, 8));    // equal padding: the plain order
  static_assert(!mgd::wgmma_swaps(32, 8));   // N the smaller side already
  static_assert(!mgd::wgmma_swaps(64, 8));   // whole instruction rows
  static_assert(!mgd::wgmma_swaps(80, 72));  // M of 64 or more is never swapped
  static_assert(mgd::wgmma_padded(16, 32) == 64 * 32 && mgd::wgmma_padded(32, 16) == 64 * 16);
  // Swapped products, checked element by element like the plain ones above.
  check_wgmma_matmul<mgd::half, 8, 128, 64>(128);                      // two jobs along N, one warpgroup
  check_wgmma_matmul<mgd::half, 8, 200, 48>(256);                      // N padded to 256, uneven jobs
  check_wgmma_matmul<mgd::half, 2, 64, 32>(128);                       // M below the instruction's 8
  check_wgmma_matmul<mgd::bfloat16, 12, 96, 80, true, true>(128);      // both operands transposed
  check_wgmma_matmul<mgd::half, 16, 72, 64, false, false, true>(128);  // the result transposed
}

TEST(TileOps, WgmmaMatmulNeedsWholeWarpgroups) {
  // The emitter only uses matmul_wgmma in blocks of whole warpgroups; anything else is a bug.
  EXPECT_DEATH((check_wgmma_matmul<mgd::half, 16, 32, 64>(96)), "partial warpgroups");
}

}  // namespace

namespace {

using mgd::Dims;

TEST(Wgmma, SwizzledDescriptorsDecodeThePtxCanonicalLayouts) {
  run_block(1, 16384, [&] {
    // The PTX ISA's example "MN-major, 64B swizzling, bf16": Swizzle<2,4,3> o ((8,4,2),(8,2)) :
    // ((1,8,256),(32,512)) elements, LBO 256 elements (512 bytes), SBO 512 (1024 bytes).
    const uint64_t mn64 = mgd::wgmma_descriptor(2048, 64, 512, 1024);
    EXPECT_EQ(mn64 >> 62, 2u);
    EXPECT_EQ((mn64 >> 16) & 0x3FFF, 32u);
    EXPECT_EQ((mn64 >> 32) & 0x3FFF, 64u);
    for (unsigned mn = 0; mn < 64; ++mn)
      for (unsigned k = 0; k < 16; ++k) {
        const unsigned e = mn % 8 + mn / 8 % 4 * 8 + mn / 32 * 256 + k % 8 * 32 + k / 8 * 512;
        unsigned a = 2048 + 2 * e;
        a ^= ((a >> 7) & 3) << 4;
        ASSERT_EQ(mgd::emu::wgmma_element_address(mn64, mn, k, true), a) << mn << " " << k;
      }
    // MN-major, 128B: ((8,8,m),(8,k)) : ((1,8,LBO),(64,SBO)); here one panel, k groups 1024 bytes apart.
    const uint64_t mn128 = mgd::wgmma_descriptor(4096, 128, 8192, 1024);
    for (unsigned mn = 0; mn < 64; ++mn)
      for (unsigned k = 0; k < 16; ++k) {
        unsigned a = 4096 + 2 * (mn + k % 8 * 64) + k / 8 * 1024;
        a ^= ((a >> 7) & 7) << 4;
        ASSERT_EQ(mgd::emu::wgmma_element_address(mn128, mn, k, true), a) << mn << " " << k;
      }
    // K-major, 32B: ((8,m),(8,2k)) : ((16,SBO),(1,8)) elements, rows 32 bytes apart, bit 4 XOR bit 7.
    const uint64_t k32 = mgd::wgmma_descriptor(1024, 32, 16, 256);
    EXPECT_EQ(k32 >> 62, 3u);
    for (unsigned r = 0; r < 16; ++r)
      for (unsigned k = 0; k < 16; ++k) {
        unsigned a = 1024 + r / 8 * 256 + 2 * (r % 8 * 16 + k);
        a ^= ((a >> 7) & 1) << 4;
        ASSERT_EQ(mgd::emu::wgmma_element_address(k32, r, k), a) << r << " " << k;
      }
    // The 128-byte K-major form agrees with the staging layout's descriptor.
    for (unsigned r = 0; r < 16; ++r)
      for (unsigned k = 0; k < 16; ++k)
        ASSERT_EQ(mgd::emu::wgmma_element_address(mgd::wgmma_descriptor(1024 + 32, 128, 16, 1024), r, k),
                  mgd::emu::wgmma_element_address(mgd::wgmma_descriptor(1024 + 32), r, k));
  });
}

TEST(Wgmma, OperandsReadInPlaceWhereEveryJobReadsRowsTheTileOrItsPaddingHolds) {
  // Figure 3b and 10b: the weight tile [256, 32] (n innermost: MN-major, 64-byte rows) is read in
  // place as the instruction's B; as its A (swapped) a job would read 64 rows of one 32-row panel.
  static_assert(mgd::wgmma_in_place_b(16, 32, 256, false) == 64 && mgd::wgmma_in_place_b(16, 32, 256, true) == 0);
  static_assert(mgd::wgmma_in_place_b(8, 32, 256, false) == 64);
  static_assert(!mgd::wgmma_orientation_swaps(16, 32, 256, false, true));  // in place beats less padding
  static_assert(mgd::wgmma_orientation_swaps(16, 32, 256, false, false));  // nothing in place: wgmma_swaps
  // X [8, 256] (k innermost, 128-byte panels) fits the instruction's B (8 rows), and its A: the
  // job's rows 8-63 run on through the next panels and then into padding its buffer holds.
  static_assert(mgd::wgmma_in_place_a(8, 32, 256, true) == 128 && mgd::wgmma_in_place_a(8, 32, 256, false) == 128);
  static_assert(mgd::wgmma_a_overread_bytes(8, 128) == 56 * 128 && mgd::wgmma_a_overread_bytes(16, 64) == 48 * 64);
  static_assert(mgd::wgmma_a_overread_bytes(128, 128) == 0 && mgd::wgmma_a_overread_bytes(104, 128) == 24 * 128);
  // Both weight and X: unswapped, both are read in place (swapped, only X would be).
  static_assert(!mgd::wgmma_orientation_swaps(8, 32, 256, true, true));
  static_assert(!mgd::wgmma_orientation_swaps(16, 32, 256, true, true));
  static_assert(mgd::wgmma_scratch_bytes(16, 32, 256, 128, 64, 1, 2) == 0);
  static_assert(mgd::wgmma_tile_swizzle(16) == 32 && mgd::wgmma_tile_swizzle(32) == 64 &&
                mgd::wgmma_tile_swizzle(192) == 128 && mgd::wgmma_tile_swizzle(24) == 0 &&
                mgd::wgmma_tile_swizzle(8) == 0);
  static_assert(mgd::wgmma_in_place_b(64, 48, 64, false) == 0);     // rows of 96 bytes
  static_assert(mgd::wgmma_in_place_a(64, 64, 40, false) == 0);     // k not whole k16 steps
  static_assert(mgd::wgmma_in_place_a(104, 64, 64, false) == 128);  // rows 104-127 from padding
  // ... in whole 8-row groups: a panel of 2 or 100 rows would not start where the pattern does.
  static_assert(mgd::wgmma_in_place_a(2, 32, 1024, false) == 0 && mgd::wgmma_in_place_a(100, 64, 64, false) == 0);
  // As the instruction's B a K-major tile still needs whole jobs: 12 rows, N = 16.
  static_assert(mgd::wgmma_in_place_a(12, 100, 64, true) == 0);
  // An MN-major tile as the instruction's A: a job's 64 rows must lie in one panel.
  static_assert(mgd::wgmma_in_place_b(100, 32, 64, true) == 0);
}

/// The padding A's buffer holds past the tile where wgmma reads A in place with fewer rows than
/// its jobs (mgd::wgmma_a_overread_bytes), as the emitter lays it out.
template <int M, int N, int K, int64_t SwA, int64_t SwB>
constexpr size_t a_padding() {
  const bool instr_a = SwA != 0 && !mgd::wgmma_orientation_swaps(M, N, K, true, SwB != 0);
  return instr_a ? static_cast<size_t>(mgd::wgmma_a_overread_bytes(M, SwA)) : 0;
}

/// Fills `bytes` of shared memory at p with NaNs (0xffff in f16 and bf16) and waits for every
/// thread: the rows wgmma reads from padding must reach no stored result.
void poison_padding(unsigned char* p, size_t bytes) {
  if (mgd::thread_rank() == 0) std::memset(p, 0xff, bytes);
  mgd::sync_block();
}

/// matmul_wgmma on out[M, N] = a[M, K] · b[K, N] with the operands marked SwA / SwB loaded by
/// the copy engine in swizzled panels and read in place, the others loaded densely and staged,
/// against f32 arithmetic. The operand tiles are cut from larger tensors (a at row 8 and column
/// 64 of a [M + 8, K + 64] tensor), so the tensor maps' coordinates are exercised too.
template <typename T, int M, int N, int K, int64_t SwA, int64_t SwB, int64_t Buffers = 2>
void check_in_place(unsigned threads) {
  static_assert(SwA == 0 || SwA == mgd::wgmma_tile_swizzle(K));
  static_assert(SwB == 0 || SwB == mgd::wgmma_tile_swizzle(N));
  constexpr int64_t kScratch = mgd::wgmma_scratch_bytes(M, N, K, SwA, SwB, 2, Buffers);
  constexpr int AR = M + 8, AC = K + 64, BR = K + 64, BC = N + 64;
  std::vector<float> fa = randoms(size_t{AR} * AC, 5), fb = randoms(size_t{BR} * BC, 6);
  const std::vector<T> a = rounded<T>(fa), b = rounded<T>(fb);
  constexpr int64_t WA = SwA ? SwA / 2 : K, WB = SwB ? SwB / 2 : N;  // box widths
  mgd::TensorMap map_a, map_b;
  ASSERT_EQ(mgd::make_tensor_map(&map_a, a.data(), {AR, AC}, {M, WA}, SwA), 0);
  ASSERT_EQ(mgd::make_tensor_map(&map_b, b.data(), {BR, BC}, {K, WB}, SwB), 0);
  constexpr size_t a_bytes = size_t{M} * K * sizeof(T), b_bytes = size_t{K} * N * sizeof(T);
  constexpr size_t a_pad = a_padding<M, N, K, SwA, SwB>();
  constexpr size_t a_at = 1024, b_at = (a_at + a_bytes + a_pad + 1023) / 1024 * 1024;
  constexpr size_t bar_at = b_at + b_bytes, scratch_at = bar_at + 64;
  std::vector<float> out(size_t{M} * N, NAN);
  run_block(threads, scratch_at + kScratch, [&] {
    MGD_DYNAMIC_SHARED(smem);
    T* sa = reinterpret_cast<T*>(smem + a_at);
    T* sb = reinterpret_cast<T*>(smem + b_at);
    auto* bar = reinterpret_cast<uint64_t*>(smem + bar_at);
    poison_padding(smem + a_at + a_bytes, a_pad);
    if (mgd::thread_rank() == 0) mgd::mbarrier_init(bar, 1);
    mgd::mbarrier_init_fence();
    mgd::sync_block();
    if (mgd::thread_rank() == 0) {
      mgd::mbarrier_arrive_expect_tx(bar, static_cast<unsigned>(a_bytes + b_bytes));
      mgd::tma_load_panels<2, K / WA, WA, M * WA * sizeof(T)>(sa, &map_a, {8, 64}, bar);
      mgd::tma_load_panels<2, N / WB, WB, K * WB * sizeof(T)>(sb, &map_b, {64, 64}, bar);
    }
    mgd::mbarrier_wait(bar, 0);
    mgd::matmul_wgmma<Dims<M, N>, Dims<N, 1>, Dims<K, 0>, 1, Dims<0, 1>, N, K, kScratch, SwA, SwB, Buffers>(
        out.data(), sa, sb, smem + scratch_at);
  });
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float want = 0;
      for (int k = 0; k < K; ++k)
        want += mgd::to_float(a[static_cast<size_t>((8 + m) * AC + 64 + k)]) *
                mgd::to_float(b[static_cast<size_t>((64 + k) * BC + 64 + n)]);
      ASSERT_NEAR(out[static_cast<size_t>(m * N + n)], want, 1e-3f)
          << m << "," << n << " with " << threads << " threads";
    }
}

TEST(TileOps, WgmmaMatmulReadsSwizzledTilesInPlace) {
  check_in_place<mgd::half, 16, 32, 256, 0, 64>(128);      // Figure 3b: W [256, 32] in place, unswapped
  check_in_place<mgd::half, 16, 32, 256, 0, 64, 1>(128);   // ... with one stage buffer
  check_in_place<mgd::half, 8, 32, 256, 0, 64>(128);       // Figure 10b's W1 and W2
  check_in_place<mgd::bfloat16, 8, 24, 128, 128, 0>(128);  // X [8, 128] in place as the swapped B
  check_in_place<mgd::half, 64, 128, 128, 128, 128>(256);  // both in place, two panels each, two warpgroups
  static_assert(mgd::wgmma_scratch_bytes(64, 128, 128, 128, 128, 2) == 0);  // ... and no stages
  // Figure 3b: A's stage only, in one buffer or two (four chunks of k).
  static_assert(mgd::wgmma_scratch_bytes(16, 32, 256, 0, 64, 1) == 1024 + 64 * 128);
  static_assert(mgd::wgmma_scratch_bytes(16, 32, 256, 0, 64, 1, 2) == 1024 + 2 * 64 * 128);
  check_in_place<mgd::half, 128, 16, 32, 64, 32>(128);     // 64- and 32-byte spans, two row jobs
  check_in_place<mgd::bfloat16, 64, 64, 80, 0, 128>(128);  // a partial chunk of k (64 + 16)
  // A with fewer rows than a job, in place, the rest of the job's rows read from NaN padding.
  check_in_place<mgd::half, 16, 32, 256, 128, 64>(128);     // Figure 3b with X in place: no stages
  check_in_place<mgd::bfloat16, 8, 32, 256, 128, 64>(128);  // Figure 10b
  check_in_place<mgd::half, 104, 64, 128, 128, 128>(256);   // two row jobs, the second partial; two panels
  check_in_place<mgd::half, 40, 32, 32, 64, 0>(128);        // 64-byte span, B staged
}

/// matmul_wgmma on out[M, N] = sqr(a)[M, K] · (b + 1)[K, N] where element-wise ops (mgd::unary,
/// mgd::binary_scalar) write the operands marked SwA / SwB swizzled (mgd::Swizzled) and fence
/// them, as generated kernels do, and wgmma reads those in place; against f32 arithmetic on the
/// same rounded operands.
template <typename T, int M, int N, int K, int64_t SwA, int64_t SwB>
void check_written_in_place(unsigned threads) {
  constexpr int64_t kScratch = mgd::wgmma_scratch_bytes(M, N, K, SwA, SwB, 2, 2);  // up to two warpgroups
  using LA = std::conditional_t<SwA != 0, mgd::Swizzled<M, K, (SwA ? SwA : 32)>, Dims<K, 1>>;
  using LB = std::conditional_t<SwB != 0, mgd::Swizzled<K, N, (SwB ? SwB : 32)>, Dims<N, 1>>;
  std::vector<float> fa = randoms(size_t{M} * K, 7), fb = randoms(size_t{K} * N, 8);
  const std::vector<T> a = rounded<T>(fa), b = rounded<T>(fb);
  constexpr size_t a_bytes = size_t{M} * K * sizeof(T), b_bytes = size_t{K} * N * sizeof(T);
  constexpr size_t a_pad = a_padding<M, N, K, SwA, SwB>();
  constexpr size_t a_at = 1024, b_at = (a_at + a_bytes + a_pad + 1023) / 1024 * 1024;
  constexpr size_t scratch_at = (b_at + b_bytes + 1023) / 1024 * 1024;
  std::vector<float> out(size_t{M} * N, NAN);
  run_block(threads, scratch_at + kScratch, [&] {
    MGD_DYNAMIC_SHARED(smem);
    T* sa = reinterpret_cast<T*>(smem + a_at);
    T* sb = reinterpret_cast<T*>(smem + b_at);
    poison_padding(smem + a_at + a_bytes, a_pad);
    mgd::unary<mgd::Block, Dims<M, K>, LA, Dims<K, 1>, mgd::op::Sqr>(sa, a.data());
    mgd::binary_scalar<mgd::Block, Dims<K, N>, LB, Dims<N, 1>, mgd::op::Add, false>(sb, b.data(), 1.0f);
    mgd::fence_proxy_async();
    mgd::sync_block();
    mgd::matmul_wgmma<Dims<M, N>, Dims<N, 1>, Dims<K, 0>, 1, Dims<0, 1>, N, K, kScratch, SwA, SwB, 2>(
        out.data(), sa, sb, smem + scratch_at);
  });
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float want = 0;
      for (int k = 0; k < K; ++k) {
        const float x = mgd::to_float(a[static_cast<size_t>(m * K + k)]);
        const float y = mgd::to_float(b[static_cast<size_t>(k * N + n)]);
        want += mgd::to_float(mgd::from_float<T>(x * x)) * mgd::to_float(mgd::from_float<T>(y + 1.0f));
      }
      ASSERT_NEAR(out[static_cast<size_t>(m * N + n)], want, 2e-3f * (1.0f + std::fabs(want)))
          << m << "," << n << " with " << threads << " threads";
    }
}

TEST(TileOps, WgmmaMatmulReadsTilesElementWiseOpsWroteSwizzled) {
  check_written_in_place<mgd::half, 256, 32, 64, 128, 64>(128);        // QKNorm bs 1: QN · KN, both written so
  check_written_in_place<mgd::bfloat16, 64, 128, 128, 128, 128>(256);  // two panels each, two warpgroups
  check_written_in_place<mgd::half, 16, 32, 256, 0, 64>(128);          // B written so, A staged
  check_written_in_place<mgd::half, 16, 32, 256, 128, 64>(128);        // Figure 3b: both, A's job from padding
  check_written_in_place<mgd::bfloat16, 24, 16, 64, 128, 32>(256);     // a job for one warpgroup of two
  check_written_in_place<mgd::half, 128, 16, 32, 64, 32>(128);         // 64- and 32-byte spans
}

/// A for-loop's summing accumulator of a matmul over three iterations, three ways: the product
/// stored as a tile of T and added by mgd::accumulate (the op-by-op kernel); added by the matmul
/// itself to the f32 accumulator in shared memory (matmul_wgmma_to, TileAccumulate); and summed
/// in the registers of the threads that compute it (RegisterAccumulate), written once after the
/// loop (store_result_registers). The operands of each iteration are written by element-wise
/// ops, swizzled for wgmma to read in place where SwA / SwB say. The three sums must agree bit
/// for bit: each product is rounded to T before it is added, in the same order.
template <typename T, int M, int N, int K, int64_t SwA, int64_t SwB, int Groups>
void check_accumulated() {
  constexpr int kIterations = 3;
  constexpr int64_t kScratch = mgd::wgmma_scratch_bytes(M, N, K, SwA, SwB, Groups, 2);
  using LA = std::conditional_t<SwA != 0, mgd::Swizzled<M, K, (SwA ? SwA : 32)>, Dims<K, 1>>;
  using LB = std::conditional_t<SwB != 0, mgd::Swizzled<K, N, (SwB ? SwB : 32)>, Dims<N, 1>>;
  std::vector<float> fa = randoms(size_t{kIterations} * M * K, 11), fb = randoms(size_t{kIterations} * K * N, 12);
  const std::vector<T> a = rounded<T>(fa), b = rounded<T>(fb);
  constexpr size_t a_bytes = size_t{M} * K * sizeof(T), b_bytes = size_t{K} * N * sizeof(T);
  constexpr size_t a_pad = a_padding<M, N, K, SwA, SwB>();
  constexpr size_t a_at = 1024, b_at = (a_at + a_bytes + a_pad + 1023) / 1024 * 1024;
  constexpr size_t c_at = (b_at + b_bytes + 1023) / 1024 * 1024;
  constexpr size_t scratch_at = (c_at + size_t{M} * N * sizeof(T) + 1023) / 1024 * 1024;
  std::vector<float> op_by_op(size_t{M} * N, NAN), in_tile(size_t{M} * N, NAN), in_registers(size_t{M} * N, NAN);
  run_block(128 * Groups, scratch_at + kScratch, [&] {
    MGD_DYNAMIC_SHARED(smem);
    T* sa = reinterpret_cast<T*>(smem + a_at);
    T* sb = reinterpret_cast<T*>(smem + b_at);
    T* sc = reinterpret_cast<T*>(smem + c_at);
    poison_padding(smem + a_at + a_bytes, a_pad);
    mgd::ResultRegisters<M, N, Groups> regs;
    for (int it = 0; it < kIterations; ++it) {
      mgd::unary<mgd::Block, Dims<M, K>, LA, Dims<K, 1>, mgd::op::Sqr>(sa, a.data() + size_t{M} * K * it);
      mgd::binary_scalar<mgd::Block, Dims<K, N>, LB, Dims<N, 1>, mgd::op::Add, false>(sb, b.data() + size_t{K} * N * it,
                                                                                      1.0f);
      mgd::fence_proxy_async();
      mgd::sync_block();
      mgd::matmul_wgmma<Dims<M, N>, Dims<N, 1>, Dims<K, 0>, 1, Dims<0, 1>, N, K, kScratch, SwA, SwB, 2>(
          sc, sa, sb, smem + scratch_at);
      mgd::matmul_wgmma_to<Dims<M, N>, Dims<K, 0>, 1, Dims<0, 1>, N, K, kScratch, SwA, SwB, 2>(
          mgd::TileAccumulate<T, N, 1>{in_tile.data(), it == 0}, sa, sb, smem + scratch_at);
      mgd::matmul_wgmma_to<Dims<M, N>, Dims<K, 0>, 1, Dims<0, 1>, N, K, kScratch, SwA, SwB, 2>(
          mgd::RegisterAccumulate<T, M, N, Groups>{regs, it == 0}, sa, sb, smem + scratch_at);
      mgd::sync_block();
      mgd::accumulate<mgd::Block, Dims<M, N>, Dims<N, 1>>(op_by_op.data(), sc, it == 0);
      mgd::sync_block();
    }
    mgd::store_result_registers<N, 1>(regs, in_registers.data());
  });
  for (size_t e = 0; e < op_by_op.size(); ++e) {
    ASSERT_FALSE(std::isnan(op_by_op[e])) << e;
    ASSERT_EQ(in_tile[e], op_by_op[e]) << e;
    ASSERT_EQ(in_registers[e], op_by_op[e]) << e;
  }
}

TEST(TileOps, WgmmaMatmulAddsItsProductToALoopAccumulator) {
  check_accumulated<mgd::half, 16, 32, 256, 128, 64, 1>();    // Figure 3b: both operands in place
  check_accumulated<mgd::bfloat16, 8, 32, 64, 128, 64, 1>();  // GatedMLP's rows
  check_accumulated<mgd::half, 192, 16, 80, 0, 0, 2>();       // staged; three jobs on two warpgroups
  check_accumulated<mgd::half, 64, 24, 32, 64, 0, 2>();       // one job, the second warpgroup idle
}

/// The loop of check_accumulated with the product landing an iteration later
/// (wgmma_deferred.h): iteration it writes its operands into buffer it % Buffers, issues its
/// product (matmul_wgmma_issue) and lands the one before (matmul_wgmma_land, then after the
/// loop). With two buffers the sums are the op-by-op kernel's bit for bit. With one, iteration
/// it + 1 overwrites the operands before the product of iteration it has landed, and the
/// emulation, which computes a wgmma op when it is waited for (as late as the hardware may read
/// its operands), must show the sums wrong: returns whether they all agree.
template <typename T, int M, int N, int K, int64_t SwA, int64_t SwB, int Groups, int Buffers = 2>
bool deferred_sums_agree() {
  constexpr int kIterations = 4;
  using LA = mgd::Swizzled<M, K, SwA>;
  using LB = mgd::Swizzled<K, N, SwB>;
  std::vector<float> fa = randoms(size_t{kIterations} * M * K, 13), fb = randoms(size_t{kIterations} * K * N, 14);
  const std::vector<T> a = rounded<T>(fa), b = rounded<T>(fb);
  constexpr size_t a_bytes = size_t{M} * K * sizeof(T), b_bytes = size_t{K} * N * sizeof(T);
  constexpr size_t a_pad = a_padding<M, N, K, SwA, SwB>();
  constexpr size_t a_stride = (a_bytes + a_pad + 1023) / 1024 * 1024, b_stride = (b_bytes + 1023) / 1024 * 1024;
  constexpr size_t a_at = 1024, b_at = a_at + Buffers * a_stride;
  constexpr size_t c_at = b_at + Buffers * b_stride, end = c_at + size_t{M} * N * sizeof(T);
  std::vector<float> op_by_op(size_t{M} * N, NAN), deferred(size_t{M} * N, NAN);
  run_block(128 * Groups, end, [&] {
    MGD_DYNAMIC_SHARED(smem);
    T* sc = reinterpret_cast<T*>(smem + c_at);
    for (int buffer = 0; buffer < Buffers; ++buffer) poison_padding(smem + a_at + buffer * a_stride + a_bytes, a_pad);
    mgd::ResultRegisters<M, N, Groups> regs;
    mgd::DeferredProduct<M, N, Groups> pending{};
    for (int it = 0; it < kIterations; ++it) {
      T* sa = reinterpret_cast<T*>(smem + a_at + it % Buffers * a_stride);
      T* sb = reinterpret_cast<T*>(smem + b_at + it % Buffers * b_stride);
      mgd::unary<mgd::Block, Dims<M, K>, LA, Dims<K, 1>, mgd::op::Sqr>(sa, a.data() + size_t{M} * K * it);
      mgd::binary_scalar<mgd::Block, Dims<K, N>, LB, Dims<N, 1>, mgd::op::Add, false>(sb, b.data() + size_t{K} * N * it,
                                                                                      1.0f);
      mgd::fence_proxy_async();
      mgd::sync_block();
      mgd::matmul_wgmma<Dims<M, N>, Dims<N, 1>, Dims<K, 0>, 1, Dims<0, 1>, N, K, 0, SwA, SwB>(sc, sa, sb, nullptr);
      mgd::matmul_wgmma_land(mgd::RegisterAccumulate<T, M, N, Groups>{regs, it <= 1}, pending);
      mgd::matmul_wgmma_issue<Dims<M, N>, Dims<K, 0>, 1, Dims<0, 1>, N, K, SwA, SwB, Groups>(pending, sa, sb);
      mgd::sync_block();
      mgd::accumulate<mgd::Block, Dims<M, N>, Dims<N, 1>>(op_by_op.data(), sc, it == 0);
      mgd::sync_block();
    }
    mgd::matmul_wgmma_land(mgd::RegisterAccumulate<T, M, N, Groups>{regs, false}, pending);
    mgd::store_result_registers<N, 1>(regs, deferred.data());
  });
  bool agree = true;
  for (size_t e = 0; e < op_by_op.size(); ++e) {
    EXPECT_FALSE(std::isnan(op_by_op[e])) << e;
    agree = agree && deferred[e] == op_by_op[e];
  }
  return agree;
}

TEST(TileOps, DeferredProductsLandInTheNextIteration) {
  EXPECT_TRUE((deferred_sums_agree<mgd::half, 16, 32, 256, 128, 64, 1>()));      // Figure 3b
  EXPECT_TRUE((deferred_sums_agree<mgd::bfloat16, 8, 32, 64, 128, 64, 1>()));    // GatedMLP's rows
  EXPECT_TRUE((deferred_sums_agree<mgd::half, 128, 16, 32, 64, 32, 1>()));       // two jobs on one warpgroup
  EXPECT_TRUE((deferred_sums_agree<mgd::half, 16, 32, 256, 128, 64, 2>()));      // a second warpgroup without a job
  EXPECT_TRUE((deferred_sums_agree<mgd::bfloat16, 192, 16, 64, 128, 32, 2>()));  // three jobs on two warpgroups
  // One buffer: the operands of iteration it are overwritten before its product lands.
  EXPECT_FALSE((deferred_sums_agree<mgd::half, 16, 32, 256, 128, 64, 1, 1>()));
}

TEST(TileOps, DeferredProductsRefuseRegistersOfAnotherBlock) {
  EXPECT_DEATH(run_block(128, 1024,
                         [] {
                           mgd::ResultRegisters<64, 8, 2> regs;
                           mgd::DeferredProduct<64, 8, 2> pending{};
                           mgd::matmul_wgmma_land(mgd::RegisterAccumulate<mgd::half, 64, 8, 2>{regs, true}, pending);
                         }),
               "another block than its sums'");
}

TEST(TileOps, WgmmaMatmulRefusesRegistersOfAnotherBlock) {
  // Registers summed for two warpgroups, in a block of one.
  constexpr int64_t kScratch = mgd::wgmma_scratch_bytes(64, 8, 16, 0, 0, 1);
  EXPECT_DEATH(run_block(128, 3072 + kScratch,
                         [] {
                           MGD_DYNAMIC_SHARED(smem);
                           auto* a = reinterpret_cast<mgd::half*>(smem + 0);
                           auto* b = reinterpret_cast<mgd::half*>(smem + 2048);
                           mgd::ResultRegisters<64, 8, 2> regs;
                           mgd::matmul_wgmma_to<Dims<64, 8>, Dims<16, 1>, 1, Dims<8, 1>, 1, 16, kScratch>(
                               mgd::RegisterAccumulate<mgd::half, 64, 8, 2>{regs, true}, a, b, smem + 3072);
                         }),
               "another number of warpgroups");
}

TEST(TileOps, WgmmaMatmulChecksWhereAnInPlaceOperandStarts) {
  // An operand read in place must start where its swizzle pattern does.
  EXPECT_DEATH(run_block(128, 8192 + mgd::wgmma_scratch_bytes(16, 32, 64, 0, 64, 1),
                         [] {
                           MGD_DYNAMIC_SHARED(smem);
                           auto* a = reinterpret_cast<mgd::half*>(smem + 1024);
                           auto* b = reinterpret_cast<mgd::half*>(smem + 4096 + 128);  // 128 past a pattern
                           float out[16 * 32];
                           mgd::matmul_wgmma<Dims<16, 32>, Dims<32, 1>, Dims<64, 0>, 1, Dims<0, 1>, 32, 64,
                                             mgd::wgmma_scratch_bytes(16, 32, 64, 0, 64, 1), 0, 64>(out, a, b,
                                                                                                    smem + 8192);
                         }),
               "does not start where its swizzle pattern does");
}

}  // namespace

TEST(Wgmma, RegisterAFollowsTheFragmentLayoutOfD) {
  // One m64n16k16 with A from registers: each thread packs A(m, k) = m·16 + k for the rows and
  // columns register_a_from_accumulator assigns to a 64×16 block of a D fragment (the D layout
  // of FragmentOfDFollowsThePtxLayout), and B(n, k) = 1 where k == n: D(m, n) = A(m, n). A
  // register put in the wrong place, or a D fragment that is not an A fragment, fails here.
  constexpr int N = 16;
  std::vector<float> d(128 * N / 2, -1.0f);
  run_block(128, 2048, [&] {
    MGD_DYNAMIC_SHARED(smem);
    const unsigned t = mgd::thread_rank(), warp = t / 32, lane = t % 32;
    if (t == 0)
      for (int n = 0; n < N; ++n)
        for (int k = 0; k < 16; ++k) {
          const mgd::half v = mgd::from_float<mgd::half>(k == n ? 1.0f : 0.0f);
          std::memcpy(smem + mgd::sw128_offset(n, k / 8) + 2 * (k % 8), &v, 2);
        }
    mgd::sync_block();
    // The fragment of a 64×16 accumulator holding A, as a first matmul would leave it.
    float s[8];
    for (unsigned i = 0; i < 8; ++i) {
      const unsigned m = 16 * warp + lane / 4 + 8 * (i / 2 % 2), k = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
      s[i] = static_cast<float>(m * 16 + k);
    }
    uint32_t a[4];
    mgd::register_a_from_accumulator<mgd::half>(a, s, 0);
    float acc[N / 2] = {};
    mgd::wgmma_fence();
    mgd::wgmma_async_register_a<mgd::half, N>(acc, a, mgd::wgmma_descriptor(mgd::shared_address(smem)));
    mgd::wgmma_commit();
    for (float x : acc) EXPECT_EQ(x, 0.0f);  // not landed before the wait
    mgd::wgmma_wait<0>();
    for (int i = 0; i < N / 2; ++i) d[t * N / 2 + static_cast<unsigned>(i)] = acc[i];
  });
  expect_fragments_of_m16_plus_n(d, N);
}

/// matmul_chain_wgmma on A [M, K1], B [K1, N1], C [N1, N2] written swizzled by an element-wise
/// op (a multiply by 1) and fenced, as generated kernels write such tiles, with f = exp(x / 8):
/// O = exp(A·B / 8)·C and L its row sums, against f32 arithmetic rounding S, P, O and L where the
/// op-by-op kernel stores them. Stored (mgd::TileStore), O is written transposed and L at a
/// stride, as tile layouts may have them; accumulated (mgd::TileAccumulate), the chain runs
/// twice, as in two iterations of a loop, into dense f32 accumulators, and L may be dropped;
/// summed in registers (mgd::RegisterAccumulate, a block of `threads` / 128 warpgroups), the
/// same, written to those accumulators after the second run (mgd::store_result_registers). With
/// Splits > 1, each job's n-blocks of S are split among that many warpgroups, which add their
/// partial results through shared memory poisoned as the emulation leaves it.
enum class ChainResults { store, accumulate, accumulate_o_only, registers };
template <typename T, int M, int K1, int N1, int N2, int64_t SpanA, int64_t SpanB, int64_t SpanC,
          ChainResults Results = ChainResults::store, int Groups = 0, int Splits = 1>
void check_matmul_chain(unsigned threads) {
  static_assert((Results == ChainResults::registers) == (Groups > 0), "register results, and only they, name Groups");
  std::vector<float> fa = randoms(size_t{M} * K1, 11), fb = randoms(size_t{K1} * N1, 12),
                     fc = randoms(size_t{N1} * N2, 13);
  std::vector<T> a(fa.size()), b(fb.size()), c(fc.size());
  for (size_t i = 0; i < fa.size(); ++i) a[i] = mgd::from_float<T>(fa[i]);
  for (size_t i = 0; i < fb.size(); ++i) b[i] = mgd::from_float<T>(fb[i]);
  for (size_t i = 0; i < fc.size(); ++i) c[i] = mgd::from_float<T>(fc[i]);
  // A's buffer holds the rows the last job reads beyond M (poison: the emulation fills shared
  // memory with 0xCD, so those rows compute NaN or worse, and must not reach a result).
  constexpr size_t a_at = 1024,
                   b_at = (a_at + size_t{M} * K1 * 2 + mgd::wgmma_a_overread_bytes(M, SpanA) + 1023) / 1024 * 1024;
  constexpr size_t c_at = (b_at + size_t{K1} * N1 * 2 + 1023) / 1024 * 1024;
  constexpr size_t partials_at = (c_at + size_t{N1} * N2 * 2 + 15) / 16 * 16;
  constexpr size_t end = partials_at + static_cast<size_t>(mgd::matmul_chain_partials_bytes(M, N2, Splits));
  constexpr int64_t kLRow = 3;
  constexpr bool kStore = Results == ChainResults::store;
  std::vector<T> o(size_t{M} * N2, mgd::from_float<T>(NAN)), l(size_t{M} * kLRow, mgd::from_float<T>(NAN));
  // 64 rows more than the results have: rows beyond M must not be put anywhere.
  std::vector<float> o_acc(size_t{M + 64} * N2, NAN), l_acc(size_t{M + 64}, NAN);
  run_block(threads, end, [&] {
    MGD_DYNAMIC_SHARED(smem);
    T* sa = reinterpret_cast<T*>(smem + a_at);
    T* sb = reinterpret_cast<T*>(smem + b_at);
    T* sc = reinterpret_cast<T*>(smem + c_at);
    mgd::binary_scalar<mgd::Block, Dims<M, K1>, mgd::Swizzled<M, K1, SpanA>, Dims<K1, 1>, mgd::op::Mul, false>(
        sa, a.data(), 1.0f);
    mgd::binary_scalar<mgd::Block, Dims<K1, N1>, mgd::Swizzled<K1, N1, SpanB>, Dims<N1, 1>, mgd::op::Mul, false>(
        sb, b.data(), 1.0f);
    mgd::binary_scalar<mgd::Block, Dims<N1, N2>, mgd::Swizzled<N1, N2, SpanC>, Dims<N2, 1>, mgd::op::Mul, false>(
        sc, c.data(), 1.0f);
    mgd::fence_proxy_async();
    mgd::sync_block();
    const auto f = [](float x) { return expf(x * 0.125f); };
    float* const partials = Splits > 1 ? reinterpret_cast<float*>(smem + partials_at) : nullptr;
    if constexpr (kStore) {
      mgd::matmul_chain_wgmma<M, K1, N1, N2, SpanA, SpanB, SpanC, T, Splits>(
          mgd::TileStore<T, 1, M>{o.data()}, mgd::TileStore<T, kLRow, 1>{l.data()}, sa, sb, sc, f, partials);
    } else if constexpr (Results == ChainResults::registers) {
      mgd::ResultRegisters<M, N2, Groups> o_regs;
      mgd::ResultRegisters<M, 1, Groups> l_regs;
      for (int it = 0; it < 2; ++it)
        mgd::matmul_chain_wgmma<M, K1, N1, N2, SpanA, SpanB, SpanC, T, Splits>(
            mgd::RegisterAccumulate<T, M, N2, Groups>{o_regs, it == 0},
            mgd::RegisterAccumulate<T, M, 1, Groups>{l_regs, it == 0}, sa, sb, sc, f, partials);
      mgd::store_result_registers<N2, 1>(o_regs, o_acc.data());
      mgd::store_result_registers<1, 1>(l_regs, l_acc.data());
    } else {
      for (int it = 0; it < 2; ++it) {
        const mgd::TileAccumulate<T, N2, 1> to_o{o_acc.data(), it == 0};
        if constexpr (Results == ChainResults::accumulate)
          mgd::matmul_chain_wgmma<M, K1, N1, N2, SpanA, SpanB, SpanC, T, Splits>(
              to_o, mgd::TileAccumulate<T, 1, 1>{l_acc.data(), it == 0}, sa, sb, sc, f, partials);
        else
          mgd::matmul_chain_wgmma<M, K1, N1, N2, SpanA, SpanB, SpanC, T, Splits>(to_o, mgd::NoResult{}, sa, sb, sc, f,
                                                                                 partials);
      }
    }
  });
  for (size_t i = size_t{M} * N2; i < o_acc.size(); ++i) ASSERT_TRUE(std::isnan(o_acc[i])) << "beyond O: " << i;
  for (size_t i = M; i < l_acc.size(); ++i) ASSERT_TRUE(std::isnan(l_acc[i])) << "beyond L: " << i;
  auto round = [](float x) { return mgd::to_float(mgd::from_float<T>(x)); };
  const float times = kStore ? 1.0f : 2.0f;
  for (int m = 0; m < M; ++m) {
    std::vector<float> p(N1);
    float sum = 0;
    for (int n = 0; n < N1; ++n) {
      float s = 0;
      for (int k = 0; k < K1; ++k) s += mgd::to_float(a[size_t(m * K1 + k)]) * mgd::to_float(b[size_t(k * N1 + n)]);
      p[size_t(n)] = round(expf(round(s) * 0.125f));
      sum += p[size_t(n)];
    }
    if (kStore)
      ASSERT_NEAR(mgd::to_float(l[size_t(m * kLRow)]), sum, 1e-2f * sum) << "row sum " << m;
    else if (Results != ChainResults::accumulate_o_only)
      ASSERT_NEAR(l_acc[size_t(m)], times * sum, 1e-2f * times * sum) << "row sum " << m;
    else
      ASSERT_TRUE(std::isnan(l_acc[size_t(m)]));  // dropped
    for (int n = 0; n < N2; ++n) {
      float want = 0, scale = 0;
      for (int j = 0; j < N1; ++j) {
        want += p[size_t(j)] * mgd::to_float(c[size_t(j * N2 + n)]);
        scale += std::fabs(p[size_t(j)] * mgd::to_float(c[size_t(j * N2 + n)]));
      }
      const float got = kStore ? mgd::to_float(o[size_t(n * M + m)]) : o_acc[size_t(m * N2 + n)];
      ASSERT_NEAR(got, times * want, times * (1e-2f * scale + 1e-3f))
          << m << "," << n << " with " << threads << " threads";
    }
  }
}

TEST(TileOps, MatmulChainKeepsTheScoresInRegisters) {
  check_matmul_chain<mgd::half, 256, 64, 32, 64, 128, 64, 128>(256);     // QKNorm bs 1, GQA bs 8: Q·K, exp, ·V
  check_matmul_chain<mgd::half, 64, 64, 64, 64, 128, 128, 128>(512);     // QKNorm bs 8: one job, four warpgroups
  check_matmul_chain<mgd::half, 256, 64, 128, 64, 128, 128, 128>(512);   // GQA bs 1: two n-blocks of S
  check_matmul_chain<mgd::bfloat16, 128, 32, 64, 128, 64, 32, 64>(128);  // bf16, narrower spans, two n-blocks of O
  // Fewer rows than a job's 64 (decoding's query rows; QKNorm bs 8's 16-row candidates), and a
  // partial second job: the rows beyond M are computed from poison and dropped.
  check_matmul_chain<mgd::half, 16, 64, 256, 64, 128, 128, 128>(512);
  check_matmul_chain<mgd::half, 32, 64, 64, 64, 128, 128, 128>(128);
  check_matmul_chain<mgd::half, 80, 64, 32, 64, 128, 64, 128>(256);
  static_assert(mgd::wgmma_a_overread_bytes(16, 128) == 48 * 128);
  static_assert(mgd::wgmma_a_overread_bytes(128, 128) == 0);
  // Into the loop's summing accumulators, over two iterations; the row sums too, or dropped.
  check_matmul_chain<mgd::half, 256, 64, 32, 64, 128, 64, 128, ChainResults::accumulate>(256);
  check_matmul_chain<mgd::half, 128, 64, 64, 64, 128, 128, 128, ChainResults::accumulate_o_only>(128);
  check_matmul_chain<mgd::half, 16, 64, 64, 64, 128, 128, 128, ChainResults::accumulate>(128);
  // Summed in registers across the loop: two jobs per warpgroup (GQA bs 8), one job for one of
  // four warpgroups (QKNorm bs 8), a partial job, two n-blocks of O.
  check_matmul_chain<mgd::half, 256, 64, 32, 64, 128, 64, 128, ChainResults::registers, 2>(256);
  check_matmul_chain<mgd::half, 64, 64, 64, 64, 128, 128, 128, ChainResults::registers, 4>(512);
  check_matmul_chain<mgd::half, 80, 64, 32, 64, 128, 64, 128, ChainResults::registers, 1>(128);
  check_matmul_chain<mgd::bfloat16, 128, 32, 64, 128, 64, 32, 64, ChainResults::registers, 1>(128);
  // Fewer jobs than warpgroups, S's n-blocks split among them: the examples' GQA (16 rows, four
  // n-blocks, four warpgroups) summed in registers; one job split two ways and stored; two jobs
  // on four warpgroups; three n-blocks on four warpgroups (one idle) accumulated.
  static_assert(mgd::matmul_chain_splits(16, 256, 4) == 4 && mgd::matmul_chain_splits(16, 128, 4) == 2);
  static_assert(mgd::matmul_chain_splits(128, 256, 4) == 2 && mgd::matmul_chain_splits(256, 256, 4) == 1);
  static_assert(mgd::matmul_chain_splits(64, 64, 4) == 1);  // one n-block: nothing to split
  static_assert(mgd::matmul_chain_partials_bytes(16, 64, 4) == 3 * 34 * 32 * 4);
  check_matmul_chain<mgd::half, 16, 64, 256, 64, 128, 128, 128, ChainResults::registers, 4, 4>(512);
  check_matmul_chain<mgd::half, 64, 64, 128, 64, 128, 128, 128, ChainResults::store, 0, 2>(256);
  check_matmul_chain<mgd::half, 128, 64, 128, 128, 128, 128, 128, ChainResults::accumulate, 0, 2>(512);
  check_matmul_chain<mgd::bfloat16, 40, 32, 192, 64, 64, 128, 128, ChainResults::accumulate, 0, 3>(512);
  EXPECT_DEATH((check_matmul_chain<mgd::half, 16, 64, 256, 64, 128, 128, 128, ChainResults::store, 0, 4>(256)),
               "a split for more warpgroups than the block has");
  // Registers laid out for two warpgroups' jobs, in a block of one: refused, not misfiled.
  EXPECT_DEATH((check_matmul_chain<mgd::half, 256, 64, 32, 64, 128, 64, 128, ChainResults::registers, 2>(128)),
               "register results for another number of warpgroups");
  static_assert(mgd::matmul_chain_shape_ok(256, 64, 32, 64));
  static_assert(!mgd::matmul_chain_shape_ok(20, 64, 32, 64));   // not whole 8-row groups
  static_assert(!mgd::matmul_chain_shape_ok(64, 64, 24, 64));   // P not in whole k16 steps
  static_assert(!mgd::matmul_chain_shape_ok(64, 64, 96, 64));   // neither one n-block nor whole 64-column ones
  static_assert(mgd::matmul_chain_shape_ok(64, 64, 512, 64));   // S is computed an n-block at a time
  static_assert(!mgd::matmul_chain_shape_ok(64, 64, 64, 512));  // O too wide for registers
}
