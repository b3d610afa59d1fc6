// Retiling: the search's last step before verification. A time-limited search finds a good
// block graph under some configurations of its kernel (grid, for-loop, imaps, fmaps) and may run
// out of time before it grows the same block graph under a better one: the configurations are
// tried in order of their load floors, each with its whole block-graph search, and QKNorm's
// 3-D grid ranks 640th of 32 101. Retiling takes the best candidates' block graphs and rebuilds
// each under every configuration of its kernel's operands, choosing the kernels after it again,
// so that every grid and tile of a structure the search found is ranked by the cost model.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "generator.h"

namespace mugraph::search_detail {

/// The structure of a complete or partial kernel graph, blind to how its graph-defined kernels
/// are tiled: the ops and their operands, with every grid, for-loop, imap, fmap and omap left
/// out. Candidates that differ only in tiling share it, and retiling one covers the others.
std::string tiling_free_structure(const Graph& kernel_graph);

/// The configuration a closed block graph was built with (its grid, for-loop and iterators'
/// maps).
KernelConfig config_of(const Graph& body);

/// Rebuilds every graph-defined kernel of `seed` (a complete candidate, thread graphs not fused,
/// outputs marked) under each configuration of its operands (Generator::configs_for): the ops
/// before it unchanged, and each kernel after it replayed as it is, a graph-defined one under
/// whichever of its own configurations gives the best estimate. Returns the complete μGraphs that
/// compute the program's outputs (same shapes, index labels and abstract expressions as the
/// program's, no dead ops) with their metrics and estimates; the seed itself is not among them.
/// Stops early, keeping what it has, when `stop` is set.
std::vector<FoundCandidate> retile(SearchContext& ctx, Generator& gen, const FoundCandidate& seed,
                                   const std::atomic<bool>& stop, RetileStats& stats);

}  // namespace mugraph::search_detail
