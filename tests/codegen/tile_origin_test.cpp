// Host-side layout and indexing of code generation (codegen.h): strides, broadcasting, tile
// origins, and the escaping of names.
#include <gtest/gtest.h>

#include <optional>

#include "mugraph/codegen.h"

namespace mugraph::codegen {
namespace {

TEST(RowMajorStrides, LastDimIsContiguous) {
  EXPECT_EQ(row_major_strides(Shape{2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(row_major_strides(Shape{7}), (std::vector<int64_t>{1}));
  EXPECT_EQ(row_major_strides(Shape{}), (std::vector<int64_t>{1}));  // rank 0 reads as [1]
}

TEST(BroadcastStrides, MissingAndUnitDimsGetStrideZero) {
  EXPECT_EQ(broadcast_strides(Shape{16, 1}, Shape{16, 32}), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(broadcast_strides(Shape{32}, Shape{16, 32}), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(broadcast_strides(Shape{2, 1, 4}, Shape{2, 3, 4}), (std::vector<int64_t>{4, 0, 1}));
  EXPECT_EQ(broadcast_strides(Shape{1, 1}, Shape{1, 1}), (std::vector<int64_t>{1, 1}));  // no broadcast
}

/// The tile's start by brute force, per dim: the interpreter's slicing (grid axes x, y, z in
/// order, then the loop) applied to coordinates.
std::vector<int64_t> slice_start(const Shape& whole, const std::array<int8_t, 3>& imap, int8_t fmap, const Dim3& grid,
                                 int64_t forloop, const std::array<int64_t, 3>& b, int64_t it) {
  std::vector<int64_t> start(static_cast<size_t>(whole.rank()), 0), extent = whole.to_vector();
  for (int axis = 0; axis < 3; ++axis) {
    const int d = imap[static_cast<size_t>(axis)];
    if (d == kPhi) continue;
    extent[static_cast<size_t>(d)] /= grid[axis];
    start[static_cast<size_t>(d)] += b[static_cast<size_t>(axis)] * extent[static_cast<size_t>(d)];
  }
  if (fmap != kPhi) {
    extent[static_cast<size_t>(fmap)] /= forloop;
    start[static_cast<size_t>(fmap)] += it * extent[static_cast<size_t>(fmap)];
  }
  return start;
}

/// The same as a linear offset in the row-major tensor.
int64_t slice_origin(const Shape& whole, const std::array<int8_t, 3>& imap, int8_t fmap, const Dim3& grid,
                     int64_t forloop, const std::array<int64_t, 3>& b, int64_t it) {
  const std::vector<int64_t> start = slice_start(whole, imap, fmap, grid, forloop, b, it);
  const std::vector<int64_t> stride = row_major_strides(whole);
  int64_t off = 0;
  for (size_t d = 0; d < start.size(); ++d) off += start[d] * stride[d];
  return off;
}

TEST(IteratorOrigin, OffsetsAndCoordinatesAgreeWithSlicingForEveryBlockAndIteration) {
  struct Case {
    Shape whole;
    std::array<int8_t, 3> imap;
    int8_t fmap;
    Dim3 grid;
    int64_t forloop;
  };
  const std::vector<Case> cases = {
      {Shape{16, 4096}, {kPhi, kPhi, kPhi}, 1, Dim3{128, 1, 1}, 16},  // Figure 3b's X
      {Shape{4096, 4096}, {1, kPhi, kPhi}, 0, Dim3{128, 1, 1}, 16},   // Figure 3b's W
      {Shape{2, 64, 4096}, {kPhi, 0, kPhi}, 2, Dim3{64, 2, 1}, 16},   // GQA's K
      {Shape{8, 64, 32}, {2, 0, 1}, kPhi, Dim3{4, 2, 8}, 1},          // every axis a dim
      {Shape{64, 32}, {1, kPhi, kPhi}, 1, Dim3{4, 1, 1}, 2},          // grid and loop on one dim
      {Shape{64, 32}, {1, 1, kPhi}, kPhi, Dim3{2, 4, 1}, 1},          // two axes on one dim
  };
  for (const Case& c : cases) {
    const TileOrigin o = iterator_origin(c.whole, c.imap, c.fmap, c.grid, c.forloop);
    const std::vector<TileOrigin> coords = iterator_coords(c.whole, c.imap, c.fmap, c.grid, c.forloop);
    ASSERT_EQ(coords.size(), static_cast<size_t>(c.whole.rank()));
    auto at = [&](const TileOrigin& t, int64_t bx, int64_t by, int64_t bz, int64_t it) {
      return bx * t.block_coeff[0] + by * t.block_coeff[1] + bz * t.block_coeff[2] + it * t.loop_coeff;
    };
    for (int64_t bz = 0; bz < c.grid.z; ++bz)
      for (int64_t by = 0; by < c.grid.y; ++by)
        for (int64_t bx = 0; bx < c.grid.x; bx += std::max<int64_t>(1, c.grid.x / 8))
          for (int64_t it = 0; it < c.forloop; ++it) {
            ASSERT_EQ(at(o, bx, by, bz, it), slice_origin(c.whole, c.imap, c.fmap, c.grid, c.forloop, {bx, by, bz}, it))
                << c.whole.str() << " block " << bx << "," << by << "," << bz << " iteration " << it;
            // The per-dim coordinates a tensor copy takes.
            const std::vector<int64_t> start =
                slice_start(c.whole, c.imap, c.fmap, c.grid, c.forloop, {bx, by, bz}, it);
            for (size_t d = 0; d < coords.size(); ++d)
              ASSERT_EQ(at(coords[d], bx, by, bz, it), start[d]) << c.whole.str() << " dim " << d;
          }
  }
}

TEST(SaverOrigin, BlocksWriteTheirTileAlongTheOmapDims) {
  // Figure 3b's output: [16, 4096] from 128 tiles of [16, 32] along dim 1.
  TileOrigin o = saver_origin(Shape{16, 4096}, Shape{16, 32}, {1, kPhi, kPhi});
  EXPECT_EQ(o.block_coeff, (std::array<int64_t, 3>{32, 0, 0}));
  EXPECT_EQ(o.loop_coeff, 0);
  // GQA's output [2, 256, 64] from tiles [1, 4, 64]: x over rows, y over the batch.
  o = saver_origin(Shape{2, 256, 64}, Shape{1, 4, 64}, {1, 0, kPhi});
  EXPECT_EQ(o.block_coeff, (std::array<int64_t, 3>{4 * 64, 256 * 64, 0}));
}

TEST(VectorLoad, OnlyWholeAlignedRows) {
  const Dim3 grid{128, 1, 1};
  // Figure 3b's W tile [256, 32] f16: rows of 64 bytes, origins multiples of 32 elements.
  TileOrigin w = iterator_origin(Shape{4096, 4096}, {1, kPhi, kPhi}, 0, grid, 16);
  EXPECT_TRUE(vector_load_ok(Shape{4096, 4096}, Shape{256, 32}, w, DType::f16));
  // One f16 column per block (a row of 2 bytes) is not a vector.
  TileOrigin col = iterator_origin(Shape{64, 64}, {1, kPhi, kPhi}, kPhi, Dim3{64, 1, 1}, 1);
  EXPECT_FALSE(vector_load_ok(Shape{64, 64}, Shape{64, 1}, col, DType::f16));
  // Rows of 8 f16 (16 bytes) in a tensor whose rows are 12 f16: the second row starts misaligned.
  TileOrigin none{};
  EXPECT_FALSE(vector_load_ok(Shape{4, 12}, Shape{4, 8}, none, DType::f16));
  // Tiles of 8 columns starting at column 4·b: the origin is misaligned for odd b.
  TileOrigin odd{};
  odd.block_coeff[0] = 4;
  EXPECT_FALSE(vector_load_ok(Shape{4, 64}, Shape{4, 8}, odd, DType::f16));
  // f32 rows of 4 elements are vectors.
  EXPECT_TRUE(vector_load_ok(Shape{4, 64}, Shape{4, 4}, none, DType::f32));
}

/// A coordinate's value for block b in iteration it.
int64_t at(const TileOrigin& o, const std::array<int64_t, 3>& b, int64_t it) {
  return o.block_coeff[0] * b[0] + o.block_coeff[1] * b[1] + o.block_coeff[2] * b[2] + o.loop_coeff * it;
}

TEST(TmaView, TilesWithinABoxKeepTheirDims) {
  const Shape whole{16, 4096}, tile{16, 256};
  const std::vector<TileOrigin> coords = iterator_coords(whole, {kPhi, kPhi, kPhi}, 1, Dim3{1, 1, 1}, 16);
  const std::optional<TmaView> v = tma_view(whole, tile, coords, DType::f16, 256);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->whole, whole);
  EXPECT_EQ(v->box, tile);
  EXPECT_EQ(v->coords[1].loop_coeff, 256);
  // A swizzled tile's box is one panel wide.
  EXPECT_EQ(tma_view(whole, tile, coords, DType::f16, 64)->box, (Shape{16, 64}));
}

TEST(TmaView, LongDimsSplitAndTheBoxCoversTheTileInEveryBlockAndIteration) {
  // The paper's RMSNorm at batch 1 (bench/paper/results/rmsnorm_bs1): [2, 1024] tiles of X,
  // [1024] of G and [1024, 32] of W, over a grid of 128 and a loop of 4.
  struct Case {
    Shape whole, tile;
    std::array<int8_t, 3> imap;
    int8_t fmap;
    int64_t inner_box;
    Shape view, box;
    int64_t gx = 128;
  };
  const std::vector<Case> cases = {
      {{2, 4096}, {2, 1024}, {kPhi, kPhi, kPhi}, 1, 1024, {2, 16, 256}, {2, 4, 256}},
      {{4096}, {1024}, {kPhi, kPhi, kPhi}, 0, 1024, {16, 256}, {4, 256}},
      {{4096, 4096}, {1024, 32}, {1, kPhi, kPhi}, 0, 32, {16, 256, 4096}, {4, 256, 32}},
      // f16 rows split in 16-byte multiples: 1000 = 5 · 200 (250 would be 500 bytes).
      {{4, 2000}, {4, 1000}, {1, kPhi, kPhi}, kPhi, 1000, {4, 10, 200}, {4, 5, 200}, 2},
  };
  for (const Case& c : cases) {
    const Dim3 grid{c.imap[0] == kPhi ? 1 : c.gx, 1, 1};
    const int64_t loop = c.fmap == kPhi ? 1 : 4;
    const std::optional<TmaView> v =
        tma_view(c.whole, c.tile, iterator_coords(c.whole, c.imap, c.fmap, grid, loop), DType::f16, c.inner_box);
    ASSERT_TRUE(v.has_value()) << c.whole.str();
    EXPECT_EQ(v->whole, c.view);
    EXPECT_EQ(v->box, c.box);
    for (int d = 0; d < v->box.rank(); ++d) EXPECT_LE(v->box[d], 256);
    // The view's coordinates name the tile's first element, in every block and iteration.
    for (int64_t bx : {int64_t{0}, int64_t{1}, grid.x - 1})
      for (int64_t it = 0; it < loop; ++it) {
        const std::vector<int64_t> start = slice_start(c.whole, c.imap, c.fmap, grid, loop, {bx, 0, 0}, it);
        int64_t offset = 0, view_offset = 0;
        const std::vector<int64_t> s = row_major_strides(c.whole), vs = row_major_strides(v->whole);
        for (size_t d = 0; d < start.size(); ++d) offset += start[d] * s[d];
        for (size_t d = 0; d < v->coords.size(); ++d) view_offset += at(v->coords[d], {bx, 0, 0}, it) * vs[d];
        EXPECT_EQ(view_offset, offset) << c.whole.str() << " block " << bx << " iteration " << it;
      }
  }
}

TEST(TmaView, NoViewWhereNoSplitFits) {
  const std::vector<TileOrigin> one = {TileOrigin{}};
  // 263 is prime: no box of at most 256 divides it.
  EXPECT_FALSE(tma_view(Shape{263}, Shape{263}, one, DType::f32, 263).has_value());
  // A split dim of [4, 4, 4, 512] needs 5 dims... and a second split 6: too many for a tensor map.
  const Shape big{4, 4, 512, 512};
  EXPECT_TRUE(tma_view(Shape{4, 4, 512, 256}, Shape{4, 4, 512, 256}, std::vector<TileOrigin>(4), DType::f16, 256)
                  .has_value());
  EXPECT_FALSE(tma_view(big, big, std::vector<TileOrigin>(4), DType::f16, 512).has_value());
  // A tile coordinate that is not a multiple of the split (a tile of 512, boxes of 256, at 768
  // from the start, then at 100).
  TileOrigin at_768, at_100;
  at_768.loop_coeff = 768;
  at_100.loop_coeff = 100;
  EXPECT_TRUE(tma_view(Shape{2304}, Shape{512}, {at_768}, DType::f16, 512).has_value());
  EXPECT_FALSE(tma_view(Shape{2304}, Shape{512}, {at_100}, DType::f16, 512).has_value());
}

TEST(EscapeName, OnlyPlainCharactersSurvive) {
  EXPECT_EQ(escape_name("X_1 [a, b]"), "X_1 [a, b]");
  EXPECT_EQ(escape_name("*/"), "\\052\\057");
  EXPECT_EQ(escape_name("a\"b\nc"), "a\\042b\\012c");
  EXPECT_EQ(escape_name("\\"), "\\134");
  // Octal escapes end after three digits, so a following digit stays a digit.
  EXPECT_EQ(escape_name("\t7"), "\\0117");
  EXPECT_EQ(escape_name("μ"), "\\316\\274");
}

}  // namespace
}  // namespace mugraph::codegen
