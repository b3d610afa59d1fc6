/// \file printer.h
/// Human-readable listings of μGraphs (used by `mugraph check`).
#pragma once

#include <string>

#include "mugraph/graph.h"

namespace mugraph {

/// One line per op with its output tensors' names, shapes and dtypes; block and thread graphs
/// indented under their kernel op with grid, threads, for-loop and the imap/fmap/omap of each
/// iterator and saver; then the outputs.
std::string describe(const Graph& kernel_graph);

}  // namespace mugraph
