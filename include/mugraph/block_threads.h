/// \file block_threads.h
/// Threads per block (DESIGN.md §7): the pass that gives each graph-defined kernel the number of
/// threads the cost model prefers.
///
/// Block ops are cooperative (every thread of a block takes a share of every op), so a block
/// graph computes the same with any number of threads; only the time changes. The search builds
/// block graphs of 128 threads, one warp per scheduler of an SM, which leaves the portable tile
/// ops' latency exposed (the cost model's issue term, measured on an H200: docs/cost_model.md).
/// The pass tries 128, 256 and 512 threads (multiples of a warpgroup, as wgmma takes) whose
/// shared memory fits the target (planned_shared_bytes with one stage: each warpgroup stages its
/// own wgmma operands) and keeps the fewest whose estimate no larger choice beats by
/// kBlockThreadsMinGain: more threads cost registers and resident blocks that the model sees
/// only in part.
#pragma once

#include "mugraph/cost_model.h"
#include "mugraph/graph.h"

namespace mugraph {

/// The threads per block the pass chooses among, fewest first.
inline constexpr int64_t kBlockThreadChoices[] = {128, 256, 512};
/// The share of a kernel's estimate a larger thread count has to gain to be chosen.
inline constexpr double kBlockThreadsMinGain = 0.02;

/// kernel_graph (a kernel graph) with every graph-defined kernel whose block graph has 128
/// threads (the search's) given the count from kBlockThreadChoices the cost model on `gpu`
/// prefers. Block graphs with any other count are a user's choice and stay as they are.
Graph choose_block_threads(const Graph& kernel_graph, const GpuSpec& gpu);

/// The same choice for kernel op `op_index` of `kernel_graph` alone, in place (a kernel's estimate
/// depends on that kernel alone, so choose_block_threads makes it kernel by kernel).
void choose_kernel_threads(Graph& kernel_graph, size_t op_index, const GpuSpec& gpu);

}  // namespace mugraph
