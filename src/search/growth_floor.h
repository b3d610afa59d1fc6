// The floor of a graph-defined kernel as its block graph grows: what the ops appended so far
// commit the kernel's estimate to, whatever ops and savers close it. With the model bound the
// block search stops growing a block graph whose floor, with the rest of the μGraph's, is beyond
// the bound (docs/search.md, "The cost bound").
#pragma once

#include <vector>

#include "generator.h"

namespace mugraph::search_detail {

class GrowthFloor {
 public:
  /// For a kernel of configuration `config` whose iterators' floor is `floor` (config_floor).
  GrowthFloor(const KernelConfig& config, const ConfigFloor& floor, const GpuSpec& gpu);

  /// Accounts for the last op of `block_graph` (an iterator or a block op with one output, its
  /// operands already accounted for): its FLOPs, once per iteration where it reads a streamed
  /// tile, and the step of the loop it runs at no earlier than.
  void push(const Graph& block_graph);
  /// Forgets the last op pushed.
  void pop();

  /// A lower bound on the kernel's estimate (rank_estimate_us's, with thread graphs fused and
  /// threads chosen) once any ops and savers close the block graph: its launch, the largest of
  /// its loads' terms and its FLOPs' terms, those FLOPs' instructions at the fewest cycles any
  /// thread count gives them, and a barrier per step of the loop in every iteration
  /// (block_barriers). Each term only grows as ops are pushed.
  double floor_us() const;

  /// The loop's steps counted so far (schedule_block_ops has at least as many).
  int loop_steps() const { return totals_.loop_steps; }

 private:
  struct Totals {
    double tensor = 0, fma = 0;
    int loop_steps = 0;
  };
  /// Per tensor of the block graph: whether it is made in every iteration from a streamed tile
  /// (or, with no loop, in the one pass), and the step from which ops may read it.
  struct TensorFacts {
    bool in_loop = false;
    int ready = 0;
  };

  KernelConfig config_;
  ConfigFloor floor_;
  const GpuSpec& gpu_;
  std::vector<TensorFacts> tensors_;
  std::vector<Totals> before_;  ///< totals_ before each op pushed
  Totals totals_;
};

}  // namespace mugraph::search_detail
