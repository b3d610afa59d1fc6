/// \file block_structure.h
/// The structure of a block graph that every interpreter shares (DESIGN.md §1, "Semantics,
/// precisely"): which ops are live, which run in the loop body and which after it, which tile an
/// input iterator loads and where an output saver writes. The float interpreter
/// (block_program.cpp) and the finite-field interpreter (src/verify) both use these, so the two
/// cannot drift apart in how they read a μGraph.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "mugraph/graph.h"
#include "view.h"

namespace mugraph::interp {

/// When an op of a block graph runs: never (it reaches no output saver), once per for-loop
/// iteration, or once after the loop on accumulated values.
enum class BlockPhase : uint8_t { dead, loop, post };

/// "block graph op 3 (matmul)", for messages.
std::string body_op_where(const Graph& g, size_t i);

/// The phase of every op of a block or thread graph: dead if not live, else loop, except in a
/// block graph with forloop > 1, where an op is post-loop if its operands are made from
/// accumulator outputs only. Throws UserError if the dataflow breaks the path rule of
/// Definition 2.1 in a way that leaves the loop structure undefined.
std::vector<BlockPhase> block_phases(const Graph& g);

/// The tile an input iterator of a block graph (attributes a) loads from the whole tensor v in
/// block b, iteration iter: v sliced by imap over the grid and by fmap over the for-loop.
template <typename T>
BasicView<T> iterator_tile(const Graph& g, const OpAttrs& a, BasicView<T> v, const std::array<int64_t, 3>& b,
                           int64_t iter) {
  for (int axis = 0; axis < 3; ++axis) {
    int d = a.imap[static_cast<size_t>(axis)];
    if (d == kPhi) continue;
    int64_t ext = v.shape[d] / g.grid[axis];
    v = v.slice(d, b[static_cast<size_t>(axis)] * ext, ext);
  }
  if (a.fmap != kPhi) {
    int64_t ext = v.shape[a.fmap] / g.forloop;
    v = v.slice(a.fmap, iter * ext, ext);
  }
  return v;
}

/// The region of the whole output dst that an output saver (attributes a) writes in block b,
/// given the tile shape it saves: dst sliced by omap.
template <typename T>
BasicView<T> saver_region(const OpAttrs& a, BasicView<T> dst, const Shape& tile, const std::array<int64_t, 3>& b) {
  for (int axis = 0; axis < 3; ++axis) {
    int d = a.omap[static_cast<size_t>(axis)];
    if (d == kPhi) continue;
    int64_t ext = tile[d];
    dst = dst.slice(d, b[static_cast<size_t>(axis)] * ext, ext);
  }
  return dst;
}

/// Block coordinates of linear block index `index` (x fastest).
inline std::array<int64_t, 3> block_coords(const Dim3& grid, int64_t index) {
  return {index % grid.x, (index / grid.x) % grid.y, index / (grid.x * grid.y)};
}

}  // namespace mugraph::interp
