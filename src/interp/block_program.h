/// \file block_program.h
/// Runs the block graph of a graph_kernel op, one thread block at a time (DESIGN.md §1,
/// "Semantics, precisely"): for block b and iteration i, input iterators select tiles by
/// (imap, b) and (fmap, i), the loop body runs, accumulators combine the iterations (sums kept
/// in f32 and rounded once after the loop, concatenations placed at position i),
/// post-processing runs once on the accumulated tiles, and output savers write the block's tiles
/// at (omap, b). thread_graph ops run their thread-graph bodies in place.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "block_executor.h"
#include "block_structure.h"
#include "mugraph/graph.h"
#include "view.h"

namespace mugraph::interp {

/// Floats, the float interpreter's value domain for the block executor (block_executor.h).
struct FloatValues {
  using View = interp::View;
  using MutView = interp::MutView;
  using Elem = float;
  static int64_t buffer_elems(int64_t numel) { return arena_aligned(numel); }
  static MutView buffer(float* base, const Shape& s) { return MutView::dense(base, s); }
  static View tile(const Graph& g, const OpAttrs& a, const View& whole, const std::array<int64_t, 3>& b, int64_t iter) {
    return iterator_tile(g, a, whole, b, iter);
  }
  static MutView region(const OpAttrs& a, const MutView& whole, const Shape& tile, const std::array<int64_t, 3>& b) {
    return saver_region(a, whole, tile, b);
  }
  static const Shape& shape(const View& v) { return v.shape; }
  static void copy(const View& src, const MutView& dst);
  static void add_into(const View& src, const MutView& dst);
  static std::optional<View> alias(const View& x, const Shape& s) {
    return x.contiguous() ? std::optional<View>(View::dense(x.data, s)) : std::nullopt;
  }
};

/// The state of one block in flight: a buffer for every tensor of the block graph and its thread
/// graphs (accumulators included), allocated once and reused for every block it runs.
using BlockWorker = BlockExecutor<FloatValues>::Worker;

/// An executable plan of one block graph. Immutable once built, so workers share it.
///
/// Block-invariant sharing: a loop-body op whose operands come only from input iterators that
/// map no grid axis (and from other such ops) computes the same tile in every block. When
/// `share_invariant` is on, such ops run once per iteration (precompute) and every block reads
/// their results from a shared table instead of recomputing them: the same values with the same
/// arithmetic, so results are bit-identical either way, with far less work for programs like
/// Figure 3b where every block normalizes the same rows of X.
class BlockProgram {
 public:
  /// Plans `body` (a block graph). Which ops are loop body and which post-processing follows
  /// from the dataflow: a tensor is post-loop if it is made from accumulator outputs only. Ops
  /// that reach no output saver are skipped. Throws UserError if the dataflow breaks the path
  /// rule of Definition 2.1 in a way that leaves the loop structure undefined.
  BlockProgram(const Graph& body, bool share_invariant);

  /// A worker with its buffers allocated.
  BlockWorker make_worker() const;

  /// Floats of the shared table of block-invariant tiles (all iterations); 0 if nothing is shared.
  int64_t shared_floats() const { return shared_per_iter_ * executor_.body().forloop; }

  /// Computes the block-invariant tiles of iteration `iter` into `shared` (of shared_floats()).
  /// Iterations write disjoint parts, so they may run in parallel.
  void precompute(BlockWorker& w, const std::vector<View>& params, int64_t iter, float* shared) const;

  /// Runs the blocks with linear indices [first, first + count) (x fastest): reads tiles of
  /// `params` (the kernel op's inputs) and the shared table filled by precompute (null if
  /// shared_floats() is 0), writes their tiles of `outputs` (the kernel op's outputs, by
  /// io_index). Block k uses states[k]. The blocks' iterations are interleaved (iteration i of
  /// every block, then i + 1): neighbouring blocks read neighbouring parts of the same rows, so
  /// memory is read in longer runs. Each block's own arithmetic is the same in any order.
  void run_blocks(std::vector<BlockWorker>& states, const std::vector<View>& params,
                  const std::vector<MutView>& outputs, int64_t first, int64_t count, const float* shared) const;

 private:
  using Executor = BlockExecutor<FloatValues>;
  using Plan = Executor::Plan;
  /// Which ops a run computes: a block's own ops (skipping shared ones) or the shared ones only.
  enum class Mode : uint8_t { block, shared };
  struct Hooks;

  /// A shared tile some per-block op reads: its tensor and its offset within an iteration's table.
  struct SharedTile {
    TensorId tensor;
    int64_t offset;
  };

  void plan_sharing();
  void finish_accumulators(BlockWorker& w) const;

  Executor executor_;
  std::vector<std::vector<float>> scalar_;  // per plan, per op: the scalar constant of a binary op
  std::vector<bool> invariant_;             // block graph, per op: computes the same tiles in every block
  std::vector<bool> shared_;                // block graph, per op: computed by precompute, skipped per block
  std::vector<SharedTile> shared_tiles_;
  int64_t shared_per_iter_ = 0;
};

}  // namespace mugraph::interp
