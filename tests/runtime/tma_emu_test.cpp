// Tile loads by the tensor memory accelerator (mugraph_device/tma.h) under the host emulation:
// boxes of row-major tensors at any coordinates (zeros outside), transaction barriers and their
// phases, and the errors the driver or the hardware would give.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "mugraph_device/device.h"

namespace {

template <typename F>
void run_block(unsigned threads, size_t smem, F body) {
  std::function<void()> f = body;
  mgd::emu::launch(dim3(1), dim3(threads), smem, nullptr, f);
}

/// A [5, 6, 40] f16 tensor whose element (i, j, k) holds its linear index (i·6 + j)·40 + k,
/// at most 1199: exact in f16.
std::vector<mgd::half> tensor3() {
  std::vector<mgd::half> t(5 * 6 * 40);
  for (size_t e = 0; e < t.size(); ++e) t[e] = mgd::from_float<mgd::half>(static_cast<float>(e));
  return t;
}

TEST(Tma, BoxesOfATensorLandAtTheWaitWithZerosOutside) {
  const std::vector<mgd::half> t = tensor3();
  mgd::TensorMap map;
  ASSERT_EQ(mgd::make_tensor_map(&map, t.data(), {5, 6, 40}, {2, 4, 16}), 0);
  std::vector<float> before, after;
  run_block(64, 1024, [&] {
    MGD_DYNAMIC_SHARED(smem);
    auto* bar = reinterpret_cast<uint64_t*>(smem + 512);
    auto* tile = reinterpret_cast<mgd::half*>(smem);
    if (mgd::thread_rank() == 0) mgd::mbarrier_init(bar, 1);
    mgd::mbarrier_init_fence();
    mgd::sync_block();
    if (mgd::thread_rank() == 0) {
      tile[0] = mgd::from_float<mgd::half>(7.0f);
      mgd::mbarrier_arrive_expect_tx(bar, 2 * 4 * 16 * 2);
      // Rows 4-5 (5 is outside), columns 3-6, k 32-47 (40-47 outside).
      mgd::tma_load<3>(tile, &map, {4, 3, 32}, bar);
      before.push_back(mgd::to_float(tile[0]));
    }
    mgd::mbarrier_wait(bar, 0);
    if (mgd::thread_rank() == 1)
      for (int e = 0; e < 2 * 4 * 16; ++e) after.push_back(mgd::to_float(tile[e]));
  });
  ASSERT_EQ(before.size(), 1u);
  EXPECT_NE(before[0], (4 * 6 + 3) * 40 + 32) << "landed before the wait";
  // Nor do the old contents stay: the copy engine may write the tile at any time until the wait.
  EXPECT_NE(before[0], 7.0f) << "a tile is poison from its copy's issue to its wait";
  ASSERT_EQ(after.size(), 2u * 4 * 16);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 16; ++k) {
        const int gi = 4 + i, gj = 3 + j, gk = 32 + k;
        const bool inside = gi < 5 && gj < 6 && gk < 40;
        EXPECT_EQ(after[static_cast<size_t>((i * 4 + j) * 16 + k)], inside ? (gi * 6 + gj) * 40 + gk : 0.0f)
            << i << " " << j << " " << k;
      }
}

TEST(Tma, PhasesAlternateParity) {
  // One barrier refilled three times: the waits take parities 0, 1, 0.
  std::vector<mgd::half> t(8 * 8);
  for (size_t e = 0; e < t.size(); ++e) t[e] = mgd::from_float<mgd::half>(static_cast<float>(e));
  mgd::TensorMap map;
  ASSERT_EQ(mgd::make_tensor_map(&map, t.data(), {8, 8}, {1, 8}), 0);
  std::vector<float> rows;
  run_block(32, 256, [&] {
    MGD_DYNAMIC_SHARED(smem);
    auto* bar = reinterpret_cast<uint64_t*>(smem + 128);
    auto* tile = reinterpret_cast<mgd::half*>(smem);
    if (mgd::thread_rank() == 0) mgd::mbarrier_init(bar, 1);
    mgd::sync_block();
    for (int round = 0; round < 3; ++round) {
      if (mgd::thread_rank() == 0) {
        mgd::mbarrier_arrive_expect_tx(bar, 16);
        mgd::tma_load<2>(tile, &map, {2 * round + 1, 0}, bar);
      }
      mgd::mbarrier_wait(bar, static_cast<unsigned>(round % 2));
      if (mgd::thread_rank() == 5) rows.push_back(mgd::to_float(tile[7]));
      mgd::sync_block();
    }
  });
  EXPECT_EQ(rows, (std::vector<float>{15, 31, 47}));
}

TEST(Tma, TensorMapsCheckWhatTheDriverChecks) {
  std::vector<mgd::half> t(16 * 16);
  mgd::TensorMap map;
  EXPECT_NE(mgd::make_tensor_map(&map, t.data(), {16, 16}, {4, 4}), 0);      // box rows of 8 bytes
  EXPECT_NE(mgd::make_tensor_map(&map, t.data(), {16, 4}, {4, 4}), 0);       // tensor rows of 8 bytes
  EXPECT_NE(mgd::make_tensor_map(&map, t.data(), {1, 256}, {1, 512}), 0);    // box over 256
  EXPECT_NE(mgd::make_tensor_map(&map, t.data() + 1, {16, 16}, {8, 8}), 0);  // base not 16-byte aligned
  EXPECT_EQ(mgd::make_tensor_map(&map, t.data(), {16, 16}, {8, 8}), 0);
}

/// One block in which thread 0 copies a 64-element f16 tensor to smem + dst_offset, announcing
/// `announced` bytes, and every thread then waits if `wait`.
void copy_once(int64_t dst_offset, unsigned announced, bool wait) {
  std::vector<mgd::half> t(64);
  mgd::TensorMap map;
  ASSERT_EQ(mgd::make_tensor_map(&map, t.data(), {64}, {64}), 0);
  run_block(32, 512, [&] {
    MGD_DYNAMIC_SHARED(smem);
    auto* bar = reinterpret_cast<uint64_t*>(smem + 256);
    if (mgd::thread_rank() == 0) {
      mgd::mbarrier_init(bar, 1);
      mgd::mbarrier_arrive_expect_tx(bar, announced);
      mgd::tma_load<1>(smem + dst_offset, &map, {0}, bar);
    }
    mgd::sync_block();
    if (wait) mgd::mbarrier_wait(bar, 0);
  });
}

TEST(Tma, MisusesAreBugs) {
  copy_once(0, 128, true);  // as it should be
  EXPECT_DEATH(copy_once(0, 128, false), "tensor copies nobody waited for");
  EXPECT_DEATH(copy_once(16, 128, true), "not 128-byte aligned");
  // Announcing more bytes than the copies bring never completes the phase.
  EXPECT_DEATH(copy_once(0, 256, true), "never completes");
}

}  // namespace

namespace {

/// Where a swizzled box [rows, width] of 16-bit elements (span: the box row's bytes, 32, 64 or
/// 128) puts element (r, c), written out from the CUDA programming guide's TMA swizzle patterns:
/// rows `span` bytes apart; the 16-byte chunk c / 8 of a row moves to chunk (c / 8) XOR the
/// row's index within its 128-byte line group (bits 7.. of the address: r·span / 128), taken
/// modulo span / 16.
size_t swizzled_offset(int r, int c, int span) {
  const int line_row = r * span / 128 % (span / 16);
  return static_cast<size_t>(r * span + ((c / 8) ^ line_row) * 16 + c % 8 * 2);
}

/// Runs a block in which one thread asks the copy engine for `bytes` at shared offset `at` with
/// issue(smem + at, barrier); returns those bytes of shared memory once the barrier completed.
template <typename Issue>
std::vector<unsigned char> land(size_t at, size_t bytes, Issue issue) {
  std::vector<unsigned char> landed(bytes);
  const size_t window = std::max<size_t>(4096, (at + bytes + 1023) / 1024 * 1024);
  run_block(32, static_cast<int64_t>(window) + 64, [&] {
    MGD_DYNAMIC_SHARED(smem);
    auto* bar = reinterpret_cast<uint64_t*>(smem + window);
    if (mgd::thread_rank() == 0) mgd::mbarrier_init(bar, 1);
    mgd::mbarrier_init_fence();
    mgd::sync_block();
    if (mgd::thread_rank() == 0) {
      mgd::mbarrier_arrive_expect_tx(bar, static_cast<unsigned>(bytes));
      issue(smem + at, bar);
    }
    mgd::mbarrier_wait(bar, 0);
    if (mgd::thread_rank() == 0) std::memcpy(landed.data(), smem + at, bytes);
  });
  return landed;
}

}  // namespace

TEST(Tma, SwizzledBoxesPermuteTheChunksOfEachRow) {
  for (const int span : {32, 64, 128}) {
    const int width = span / 2, rows = 16;
    std::vector<mgd::half> t(static_cast<size_t>(rows * width));
    for (size_t e = 0; e < t.size(); ++e) t[e] = mgd::from_float<mgd::half>(static_cast<float>(e));
    mgd::TensorMap map;
    ASSERT_EQ(mgd::make_tensor_map(&map, t.data(), {rows, width}, {rows, width}, span), 0);
    const std::vector<unsigned char> landed =
        land(1024, static_cast<size_t>(rows * span), [&](void* dst, uint64_t* bar) {
          mgd::tma_load<2>(dst, &map, {0, 0}, bar);
        });
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < width; ++c) {
        mgd::half v;
        std::memcpy(&v, landed.data() + swizzled_offset(r, c, span), 2);
        ASSERT_EQ(mgd::to_float(v), static_cast<float>(r * width + c)) << "span " << span << ": " << r << ", " << c;
      }
  }
  // 128 bytes: row 1's chunk 0 is its second chunk, as in the guide's 128B pattern.
  EXPECT_EQ(swizzled_offset(1, 0, 128), 128u + 16u);
  EXPECT_EQ(swizzled_offset(3, 2 * 8, 64), 3u * 64 + ((2 ^ 1) * 16));
}

TEST(Tma, SwizzledPanelsOfAWideTile) {
  // A [8, 256] tile in four 128-byte-swizzled panels of 64 columns, 1024 bytes apart.
  std::vector<mgd::half> t(8 * 512);
  for (size_t e = 0; e < t.size(); ++e) t[e] = mgd::from_float<mgd::half>(static_cast<float>(e % 2000));
  mgd::TensorMap map;
  ASSERT_EQ(mgd::make_tensor_map(&map, t.data(), {8, 512}, {8, 64}, 128), 0);
  const std::vector<unsigned char> landed = land(0, 4096, [&](void* dst, uint64_t* bar) {
    mgd::tma_load_panels<2, 4, 64, 1024>(dst, &map, {0, 256}, bar);  // columns 256-511
  });
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 256; ++c) {
      mgd::half v;
      std::memcpy(&v, landed.data() + c / 64 * 1024 + swizzled_offset(r, c % 64, 128), 2);
      ASSERT_EQ(mgd::to_float(v), static_cast<float>((r * 512 + 256 + c) % 2000)) << r << ", " << c;
    }
}

/// Element-wise ops write a tile that wgmma reads in place through mgd::Swizzled (dims.h): every
/// element must land where the copy engine lands it, panels included, and no two on one place.
template <int64_t Rows, int64_t Cols, int64_t Span>
void check_swizzled_layout() {
  using L = mgd::Swizzled<Rows, Cols, Span>;
  constexpr int64_t width = Span / 2;
  std::vector<mgd::half> t(static_cast<size_t>(Rows * Cols));
  for (size_t e = 0; e < t.size(); ++e) t[e] = mgd::from_float<mgd::half>(static_cast<float>(e % 2000));
  mgd::TensorMap map;
  ASSERT_EQ(mgd::make_tensor_map(&map, t.data(), {Rows, Cols}, {Rows, width}, Span), 0);
  const std::vector<unsigned char> landed =
      land(0, static_cast<size_t>(Rows * Cols * 2), [&](void* dst, uint64_t* bar) {
        mgd::tma_load_panels<2, Cols / width, width, Rows * Span>(dst, &map, {0, 0}, bar);
      });
  std::vector<bool> used(static_cast<size_t>(Rows * Cols), false);
  for (int64_t r = 0; r < Rows; ++r)
    for (int64_t c = 0; c < Cols; ++c) {
      const int64_t at = L::at(r, c);
      ASSERT_TRUE(at >= 0 && at < Rows * Cols && !used[static_cast<size_t>(at)]) << r << ", " << c;
      used[static_cast<size_t>(at)] = true;
      mgd::half v;
      std::memcpy(&v, landed.data() + at * 2, 2);
      ASSERT_EQ(mgd::to_float(v), static_cast<float>((r * Cols + c) % 2000))
          << "span " << Span << ": " << r << ", " << c;
      // offset<> reaches it from the row-major index, with leading dims of 1 too.
      ASSERT_EQ((mgd::offset<mgd::Dims<1, Rows, Cols>, L>(r * Cols + c)), at);
    }
  // Element-wise ops writing through L (8 elements at a time: a group of 8 along a row is one
  // 16-byte chunk, which the swizzle moves whole) put every element there too, on a block of 96
  // threads (a tail of groups).
  std::vector<unsigned char> copied(landed.size()), scaled(landed.size());
  run_block(96, 2 * landed.size(), [&] {
    MGD_DYNAMIC_SHARED(smem);
    auto* a = reinterpret_cast<mgd::half*>(smem);
    auto* b = reinterpret_cast<mgd::half*>(smem + landed.size());
    mgd::copy<mgd::Block, mgd::Dims<Rows, Cols>, L, mgd::Dims<Cols, 1>>(a, t.data());
    mgd::binary_scalar<mgd::Block, mgd::Dims<Rows, Cols>, L, mgd::Dims<Cols, 1>, mgd::op::Mul, false>(b, t.data(),
                                                                                                      1.0f);
    mgd::sync_block();
    if (mgd::thread_rank() == 0) {
      std::memcpy(copied.data(), a, landed.size());
      std::memcpy(scaled.data(), b, landed.size());
    }
  });
  EXPECT_EQ(copied, landed) << "span " << Span;
  EXPECT_EQ(scaled, landed) << "span " << Span;
}

TEST(Tma, TheSwizzledLayoutIsWhereTheCopyEngineLandsEachElement) {
  check_swizzled_layout<16, 16, 32>();
  check_swizzled_layout<64, 32, 64>();    // QKNorm's normalized K tile
  check_swizzled_layout<256, 64, 128>();  // QKNorm's normalized Q tile
  check_swizzled_layout<8, 256, 128>();   // four panels
  check_swizzled_layout<24, 64, 32>();    // two panels of a 32-byte span, rows not a multiple of 8
}

TEST(Tma, TilesLargerThanABoxLandThroughASplitView) {
  // A box has at most 256 elements per dim. A larger tile is one box of a view of the tensor
  // with that dim split (codegen::tma_view): the view is row-major like the tensor, so the box
  // lands as the tile would, dense and row-major, in one copy.
  {
    // [2, 1024] from a [4, 4096] tensor at (2, 1024), through the view [4, 16, 256], box [2, 4, 256].
    std::vector<mgd::half> t(4 * 4096);
    for (size_t e = 0; e < t.size(); ++e) t[e] = mgd::from_float<mgd::half>(static_cast<float>(e % 2000));
    mgd::TensorMap map;
    ASSERT_EQ(mgd::make_tensor_map(&map, t.data(), {4, 16, 256}, {2, 4, 256}), 0);
    const std::vector<unsigned char> landed = land(0, 2 * 1024 * 2, [&](void* dst, uint64_t* bar) {
      mgd::tma_load<3>(dst, &map, {2, 4, 0}, bar);
    });
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 1024; ++c) {
        mgd::half v;
        std::memcpy(&v, landed.data() + (r * 1024 + c) * 2, 2);
        ASSERT_EQ(mgd::to_float(v), static_cast<float>(((2 + r) * 4096 + 1024 + c) % 2000)) << r << ", " << c;
      }
  }
  for (const int span : {32, 64, 128}) {
    // Swizzled, in two panels: [512, span] f16 rows 512-1023 of a [1024, span] tensor, through
    // the view [4, 256, span] in boxes [2, 256, span / 2]: each panel's rows swizzled as one
    // box of 512 rows would have them (the pattern follows the shared address).
    const int width = span / 2, cols = 2 * width, rows = 512;
    std::vector<mgd::half> t(static_cast<size_t>(2 * rows * cols));
    for (size_t e = 0; e < t.size(); ++e) t[e] = mgd::from_float<mgd::half>(static_cast<float>(e % 2000));
    mgd::TensorMap map;
    ASSERT_EQ(mgd::make_tensor_map(&map, t.data(), {4, 256, cols}, {2, 256, width}, span), 0);
    const size_t panel = static_cast<size_t>(rows * span);
    const std::vector<unsigned char> landed = land(0, 2 * panel, [&](void* dst, uint64_t* bar) {
      if (span == 32) mgd::tma_load_panels<3, 2, 16, 512 * 32>(dst, &map, {2, 0, 0}, bar);
      if (span == 64) mgd::tma_load_panels<3, 2, 32, 512 * 64>(dst, &map, {2, 0, 0}, bar);
      if (span == 128) mgd::tma_load_panels<3, 2, 64, 512 * 128>(dst, &map, {2, 0, 0}, bar);
    });
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        mgd::half v;
        std::memcpy(&v, landed.data() + static_cast<size_t>(c / width) * panel + swizzled_offset(r, c % width, span),
                    2);
        ASSERT_EQ(mgd::to_float(v), static_cast<float>(((rows + r) * cols + c) % 2000))
            << span << ": " << r << ", " << c;
      }
  }
}

TEST(Tma, SwizzledMapsCheckTheirBoxAndTheirDestination) {
  std::vector<mgd::half> t(64 * 64);
  mgd::TensorMap map;
  EXPECT_NE(mgd::make_tensor_map(&map, t.data(), {64, 64}, {8, 64}, 64), 0);   // box rows of 128 bytes, span 64
  EXPECT_NE(mgd::make_tensor_map(&map, t.data(), {64, 64}, {8, 64}, 96), 0);   // no such span
  EXPECT_EQ(mgd::make_tensor_map(&map, t.data(), {64, 64}, {8, 16}, 128), 0);  // rows shorter than the span
  ASSERT_EQ(mgd::make_tensor_map(&map, t.data(), {64, 64}, {8, 64}, 128), 0);
  EXPECT_DEATH(run_block(1, 4096,
                         [&] {
                           MGD_DYNAMIC_SHARED(smem);
                           auto* bar = reinterpret_cast<uint64_t*>(smem + 3072);
                           mgd::mbarrier_init(bar, 1);
                           mgd::mbarrier_arrive_expect_tx(bar, 1024);
                           mgd::tma_load<2>(smem + 512, &map, {0, 0}, bar);  // 128-byte aligned, not 1024
                         }),
               "does not start where its pattern does");
}
