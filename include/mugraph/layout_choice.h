/// \file layout_choice.h
/// Layout choice (DESIGN.md §7): how each STensor of a block graph is laid out in shared memory.
///
/// Every block op of the device library reads its operands and writes its result through
/// strides, so a tile need not be dense row-major: its last two dims may swap places in memory
/// (transposed: the second-to-last dim innermost), and each run along the innermost dim may be
/// followed by padding. Which layout is best depends on how the ops that touch the tile address
/// it: a warp's accesses to shared memory take as many wavefronts as the most requests any of
/// the 32 banks receives, so a column walked by 32 lanes over 128-byte rows takes 32 wavefronts
/// where 4 bytes of padding per row take one; eight ldmatrix rows 128 bytes apart take eight
/// where 16 bytes of padding take one.
///
/// The pass models every access the device library makes to each tile (tile.h, mma.h,
/// wgmma.h, copy_async.h), lane by lane, for each candidate layout, and picks the layouts with
/// the fewest wavefronts per block run (ties: fewer bytes), subject to what the library
/// supports: tiles the copy engine (TMA) fills are dense boxes, cp.async writes 16-byte vectors
/// along the source's rows, reshapes alias their operand's bytes, f32 accumulators are dense,
/// and the kernel must still fit in shared memory. Costs are a sum over tensors, each term
/// depending on one tensor's layout; the shared-memory limit couples them, so the choice is an
/// exact branch and bound over the candidates with that check at the leaves.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "mugraph/graph.h"
#include "mugraph/op_order.h"

namespace mugraph {

/// The layout of one STensor in shared memory.
struct TileLayout {
  bool transposed = false;  ///< the last two dims swap places in memory: the second-to-last is innermost
  int64_t pad = 0;          ///< elements after each run along the innermost dim

  bool is_row_major() const { return !transposed && pad == 0; }
  bool operator==(const TileLayout&) const = default;
  /// "row-major", "rows padded by 8", "transposed", "transposed, columns padded by 2".
  std::string str() const;
};

/// Element strides of a tile of `shape` laid out by `layout` (rank 0 is treated as [1]). Dims
/// before the last two are row-major over what the last two span.
std::vector<int64_t> layout_strides(const Shape& shape, const TileLayout& layout);
/// Elements the layout spans (padding included).
int64_t layout_elements(const Shape& shape, const TileLayout& layout);

/// Strides that read a tensor of shape `operand` with strides `strides` as if it had shape
/// `result` (NumPy broadcasting: dims aligned from the right; missing and extent-1 dims
/// broadcast with stride 0). @pre operand broadcasts to result
std::vector<int64_t> broadcast_read_strides(const Shape& operand, const std::vector<int64_t>& strides,
                                            const Shape& result);

/// How the device library's matmul (mgd::matmul's template arguments) indexes an operand of
/// shape x laid out with strides x_strides, for a result of shape `result`: per result dim, the
/// operand's stride (batch dims broadcast, the contracted dim's entry 0), and its stride along k.
struct MatmulOperandStrides {
  std::vector<int64_t> strides;
  int64_t k_stride = 0;
};
MatmulOperandStrides matmul_operand_strides(const Shape& x, const std::vector<int64_t>& x_strides, const Shape& result,
                                            bool is_a);

/// Shared-memory wavefronts of one warp-wide access: lane i accesses `bytes` (2, 4, 8 or 16) at
/// byte address addresses[i], or nothing where it is negative. Accesses of 8 and 16 bytes are
/// served in phases of 16 and 8 lanes. Within a phase a bank serves one 4-byte word per
/// wavefront (lanes reading the same word share it), so the phase takes as many wavefronts as
/// the most distinct words any bank is asked for.
int64_t warp_wavefronts(std::span<const int64_t> addresses, int bytes);

/// How the emitter loads a tile (decided before layouts are chosen).
enum class TileLoad : uint8_t { none, copy, cp_async, tma };

/// What layout choice needs to know of a kernel besides its block graph.
struct LayoutProblem {
  const Graph* body = nullptr;
  const BlockSchedule* schedule = nullptr;
  std::vector<TileLoad> loads;  ///< per op: how an input iterator's tile is loaded (none: other ops)
  std::vector<bool> wgmma;      ///< per op: a matmul the warpgroup tensor cores run (operands staged)
  /// Per tensor (or empty: none): the swizzle span of a tile the copy engine or element-wise ops
  /// write swizzled for wgmma matmuls to read in place (wgmma_rules.h), 0 for the others. Such a
  /// tile is row-major for the pass (an element-wise op's stores are modelled as row-major ones:
  /// the swizzle only permutes the 16-byte chunks of each 128-byte row), the tensor cores read it
  /// without the load/store units, and the matmuls reading it take the orientation
  /// mgd::wgmma_orientation_swaps gives.
  std::vector<int64_t> swizzle;
  /// Whether the kernel fits in shared memory with these layouts (one per tensor).
  std::function<bool(const std::vector<TileLayout>&)> fits;
  int64_t fit_budget = 2048;  ///< calls of `fits` before the best layouts found so far are taken
};

/// Layouts that can hold tensor t given its producer and consumers (the row-major layout first).
std::vector<TileLayout> allowed_layouts(const LayoutProblem& problem, TensorId t);

/// Modelled shared-memory wavefronts of every access to tensor t in one run of the block (loop
/// ops count once per iteration) when it has `layout`.
int64_t tensor_wavefronts(const LayoutProblem& problem, TensorId t, const TileLayout& layout);

/// The chosen layouts.
struct LayoutChoice {
  std::vector<TileLayout> layouts;   ///< per tensor of the block graph
  int64_t wavefronts = 0;            ///< modelled wavefronts per block run with them
  int64_t row_major_wavefronts = 0;  ///< ... with every tensor row-major
  int64_t extra_bytes = 0;           ///< bytes of padding they add (every tensor counted, lifetimes aside)
  bool fits = false;                 ///< row-major layouts fit, and so do these (false: nothing fits)
  /// Fewest wavefronts, then bytes, among assignments that fit, given that fitting is monotone
  /// in the bytes (true of an exact shared-memory plan; the best-fit plan of large graphs can
  /// break it, and then the choice is the best of those the search saw).
  bool optimal = false;
  int64_t fit_checks = 0;  ///< calls of problem.fits
  std::string method;      ///< "exact", "exact (budget reached)"
};

/// Chooses a layout per STensor (see the file comment). Tensors with one allowed layout keep it;
/// with a budget of fit checks spent, the best assignment found so far is taken (row-major
/// layouts at worst).
LayoutChoice choose_layouts(const LayoutProblem& problem);

}  // namespace mugraph
