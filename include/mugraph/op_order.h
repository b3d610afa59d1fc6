/// \file op_order.h
/// Operator order of a block graph (DESIGN.md §7): the pass that decides in which order a
/// kernel's block ops run and where its block-wide barriers go.
///
/// Every thread of a block runs every block op, each op reading STensors that other threads
/// wrote, so two dependent ops need a barrier between them. The pass puts each live op in a
/// *step*: its longest-path depth from the start of its phase (the loop body, or the code after
/// the loop). Ops of one step never read what another op of the step writes, so they run back
/// to back, and a barrier is needed only between steps: a phase of depth d needs d − 1 barriers,
/// the fewest any order can have, since its longest dependency chain needs one per link.
///
/// Ops of the loop body whose operands are all loop-invariant (tiles loaded once, fmap φ, and
/// what such ops compute from them) compute the same in every iteration: they run once, before
/// the loop, in a phase of their own (`pre`), whose last step ends with a barrier. The
/// interpreters run them in every iteration, which computes the same values.
///
/// Reshapes are aliases (they move nothing), so they take their operand's step and separate
/// nothing. Input iterators are step 0 of the loop body (loop-invariant ones run once before
/// the loop, pipelined ones iterations ahead; the emitter decides, the step is the same).
/// Values made in the loop body and read after it (accumulators) need no step: the loop's last
/// barrier separates the phases.
///
/// An element-wise op of one operand whose result one op alone reads, a sum (RMSNorm's square
/// before its row sum), is *folded* into that sum: the sum applies it to each element as it
/// reads the op's operand, so the op's tile is never written or read, takes no shared memory,
/// and separates nothing, like a reshape. Saved, accumulated or otherwise shared results are
/// tiles as before.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mugraph/graph.h"

namespace mugraph {

/// Where an op of a block graph runs: the phase, and the step within it.
enum class OpPhase : uint8_t { dead, pre, loop, post };

/// The order of a block graph's ops.
struct BlockSchedule {
  /// Per op: its phase (the interpreters' definition, block_structure.h) and its step in that
  /// phase (-1 for dead ops).
  std::vector<OpPhase> phase;
  std::vector<int32_t> step;
  /// Per op: folded into the sum that reads its result (above); such an op has the step of its
  /// operand, and its result the storage of nothing (its lifetime's alias_of is the operand).
  std::vector<bool> folded;
  /// The live ops in the order they run: the tiles loaded once, pre ops by step, the other loop
  /// ops by step, then post ops by step; within a step in graph order.
  std::vector<int32_t> order;
  /// Steps before the loop, in the loop body and after it (each phase needs one barrier fewer
  /// than it has steps; the pre phase ends with one more).
  int32_t pre_steps = 0, loop_steps = 0, post_steps = 0;

  /// Where a time t of the kernel's timeline (lifetimes) falls: step s before the loop is time
  /// s, step s of the loop pre_steps + s, step s after the loop pre_steps + loop_steps + s.
  int32_t time(OpPhase p, int32_t step_in_phase) const {
    return p == OpPhase::pre    ? step_in_phase
           : p == OpPhase::loop ? pre_steps + step_in_phase
                                : pre_steps + loop_steps + step_in_phase;
  }
  int32_t end_time() const { return pre_steps + loop_steps + post_steps; }
};

/// Schedules the live ops of a block graph (Level::block) in steps of longest-path depth.
/// Throws UserError where the graph's loop structure is undefined (as the interpreters do).
BlockSchedule schedule_block_ops(const Graph& block_graph);

/// Whether tensor t of a block graph is a summing accumulator's result, or a reshape of one:
/// shared memory holds such sums in f32 (rounded to the tensor's dtype where they are read), so
/// no tensor-core matmul reads them (codegen runs such a matmul on the block's threads, and the
/// cost model counts its FLOPs at the CUDA-core rate).
bool holds_f32_sums(const Graph& block_graph, TensorId t);

/// When an STensor of a block graph holds a value, in the kernel's timeline (BlockSchedule::time):
/// from the step that writes it to the last step that reads it, both inclusive. A tensor whose
/// value must survive from one loop iteration to the next (an accumulator's result, a
/// loop-invariant tile loaded once, a tile a pipeline loads iterations ahead) lives over the
/// whole loop. Reshapes share their operand's storage: `alias_of` names the tensor that owns
/// the bytes, and that tensor's lifetime covers the alias's readers. A folded op's result is
/// an alias of its operand in the same way: the sum that reads it reads the operand.
struct TensorLifetime {
  bool stored = false;    ///< the tensor is written by a live op (false: dead, or a parameter)
  int32_t alias_of = -1;  ///< storage owner if this tensor is a reshape of another
  int32_t first = 0, last = 0;
  /// Whether this interval and another's (both stored) share a time step.
  bool overlaps(const TensorLifetime& o) const { return first <= o.last && o.first <= last; }
};

/// The lifetimes of every tensor of a block graph under a schedule. `pipelined_loads`: tiles the
/// loop loads afresh each iteration are filled iterations ahead (a load pipeline), so they live
/// over the whole loop too.
std::vector<TensorLifetime> tensor_lifetimes(const Graph& block_graph, const BlockSchedule& schedule,
                                             bool pipelined_loads);

/// Barriers between block ops per block execution (one after the tiles loaded once, pre steps,
/// loop steps − 1 per iteration, one at the end of each iteration, post steps − 1), for the cost
/// model and reports.
int64_t block_barriers(const Graph& block_graph, const BlockSchedule& schedule);

}  // namespace mugraph
