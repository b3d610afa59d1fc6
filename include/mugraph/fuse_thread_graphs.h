/// \file fuse_thread_graphs.h
/// The rule-based pass that builds thread graphs (paper Algorithm 1, line 38; DESIGN.md §1): in
/// every block graph, trees of element-wise ops whose intermediate results have a single use
/// become one thread_graph op, so the intermediates live in registers instead of shared memory.
#pragma once

#include "mugraph/graph.h"

namespace mugraph {

/// Fuses element-wise trees of every block graph of a kernel graph into thread graphs.
///
/// A tree is a root element-wise op together with the element-wise ops whose only use is
/// (transitively) inside it; every op of a tree must exist at the thread level. Trees of one op
/// are left alone (nothing to keep in registers), as are ops already inside thread graphs. A tree
/// is convex by construction (no intermediate leaves it), so the fused op can stand where its root
/// stood.
/// @pre validate(kernel_graph) passes
/// @post the result computes exactly what kernel_graph computes (same ops, same roundings), its
///       block graphs keep their params, grid, threads and for-loop, and
///       fuse_thread_graphs(result) == result
Graph fuse_thread_graphs(const Graph& kernel_graph);

/// The same pass on one block graph.
Graph fuse_block_graph(const Graph& block_graph);

}  // namespace mugraph
