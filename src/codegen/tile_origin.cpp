// Host-side layout and indexing for code generation: DTensor strides, broadcasting, and where a
// block's tile starts. The generated kernels get these as constants, so they are computed and
// tested here once rather than in every kernel.
#include <cstdio>

#include "mugraph/codegen.h"
#include "mugraph/layout_choice.h"

namespace mugraph::codegen {

std::vector<int64_t> row_major_strides(const Shape& shape) {
  if (shape.rank() == 0) return {1};
  std::vector<int64_t> s(static_cast<size_t>(shape.rank()));
  int64_t stride = 1;
  for (int d = shape.rank() - 1; d >= 0; --d) {
    s[static_cast<size_t>(d)] = stride;
    stride *= shape[d];
  }
  return s;
}

std::vector<int64_t> broadcast_strides(const Shape& operand, const Shape& result) {
  return broadcast_read_strides(operand, row_major_strides(operand), result);
}

std::vector<TileOrigin> iterator_coords(const Shape& whole, const std::array<int8_t, 3>& imap, int8_t fmap,
                                        const Dim3& grid, int64_t forloop) {
  std::vector<TileOrigin> coords(static_cast<size_t>(whole.rank()));
  // As the interpreter's iterator_tile: the grid axes slice in order x, y, z, each taking its
  // part of what the previous left; the loop then slices the block's part.
  std::vector<int64_t> extent = whole.to_vector();
  for (int axis = 0; axis < 3; ++axis) {
    const int d = imap[static_cast<size_t>(axis)];
    if (d == kPhi) continue;
    const size_t du = static_cast<size_t>(d);
    extent[du] /= grid[axis];
    coords[du].block_coeff[static_cast<size_t>(axis)] = extent[du];
  }
  if (fmap != kPhi) coords[static_cast<size_t>(fmap)].loop_coeff = extent[static_cast<size_t>(fmap)] / forloop;
  return coords;
}

TileOrigin iterator_origin(const Shape& whole, const std::array<int8_t, 3>& imap, int8_t fmap, const Dim3& grid,
                           int64_t forloop) {
  const std::vector<int64_t> stride = row_major_strides(whole);
  const std::vector<TileOrigin> coords = iterator_coords(whole, imap, fmap, grid, forloop);
  TileOrigin o;
  for (size_t d = 0; d < coords.size(); ++d) {
    for (size_t axis = 0; axis < 3; ++axis) o.block_coeff[axis] += coords[d].block_coeff[axis] * stride[d];
    o.loop_coeff += coords[d].loop_coeff * stride[d];
  }
  return o;
}

TileOrigin saver_origin(const Shape& whole, const Shape& tile, const std::array<int8_t, 3>& omap) {
  const std::vector<int64_t> stride = row_major_strides(whole);
  TileOrigin o;
  for (int axis = 0; axis < 3; ++axis) {
    const int d = omap[static_cast<size_t>(axis)];
    if (d == kPhi) continue;
    o.block_coeff[static_cast<size_t>(axis)] = tile[d] * stride[static_cast<size_t>(d)];
  }
  return o;
}

bool vector_load_ok(const Shape& whole, const Shape& tile, const TileOrigin& origin, DType dtype) {
  constexpr int64_t kVector = 16;
  const int64_t bytes = dtype_bytes(dtype);
  if (whole.rank() == 0 || tile.rank() != whole.rank()) return false;
  const int last = whole.rank() - 1;
  // Rows of the tile are whole vectors; rows of the tensor too, so every row starts aligned.
  if (tile[last] * bytes % kVector != 0 || whole[last] * bytes % kVector != 0) return false;
  for (int64_t c : origin.block_coeff)
    if (c * bytes % kVector != 0) return false;
  return origin.loop_coeff * bytes % kVector == 0;
}

std::optional<TmaView> tma_view(const Shape& whole, const Shape& tile, const std::vector<TileOrigin>& coords,
                                DType dtype, int64_t inner_box) {
  constexpr int64_t kMaxBox = 256;  // mgd::kTmaMaxBox
  constexpr int kMaxRank = 5;       // mgd::kTmaMaxRank
  const int rank = tile.rank();
  if (rank == 0 || whole.rank() != rank || static_cast<int>(coords.size()) != rank) return std::nullopt;
  TmaView v;
  for (int d = 0; d < rank; ++d) {
    const bool inner = d == rank - 1;
    const int64_t extent = inner ? inner_box : tile[d];
    const TileOrigin& at = coords[static_cast<size_t>(d)];
    if (extent <= kMaxBox) {
      if (v.whole.rank() >= kMaxRank) return std::nullopt;
      v.whole.push_back(whole[d]);
      v.box.push_back(extent);
      v.coords.push_back(at);
      continue;
    }
    int64_t b = kMaxBox;
    while (b > 1 && (extent % b != 0 || (inner && b * dtype_bytes(dtype) % 16 != 0))) --b;
    // The tile's coordinates along d are multiples of its extent (grid and loop slice evenly),
    // hence of b: the split coordinate is (at / b, 0). Checked, not assumed.
    bool multiple = whole[d] % b == 0 && at.loop_coeff % b == 0;
    for (int64_t c : at.block_coeff) multiple = multiple && c % b == 0;
    if (b == 1 || extent / b > kMaxBox || !multiple || v.whole.rank() + 2 > kMaxRank) return std::nullopt;
    TileOrigin outer = at;
    outer.loop_coeff /= b;
    for (int64_t& c : outer.block_coeff) c /= b;
    v.whole.push_back(whole[d] / b);
    v.whole.push_back(b);
    v.box.push_back(extent / b);
    v.box.push_back(b);
    v.coords.push_back(outer);
    v.coords.push_back(TileOrigin{});
  }
  return v;
}

std::string escape_name(std::string_view name) {
  std::string out;
  for (unsigned char c : name) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                       c == ' ' || c == '.' || c == ',' || c == ':' || c == '[' || c == ']' || c == '=' || c == '-';
    if (plain) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03o", c);
      out += buf;
    }
  }
  return out;
}

}  // namespace mugraph::codegen
