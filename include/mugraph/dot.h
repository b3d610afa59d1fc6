/// \file dot.h
/// A μGraph as a Graphviz drawing: the kernel graph's ops as nodes, each graph-defined kernel as
/// a box (cluster) labelled with its grid, threads and for-loop that holds its block graph, each
/// thread graph as a box inside it. Iterators show their imap and fmap, savers their omap, and
/// accumulators what they do; edges follow the tensors, into a body's iterators and out of its
/// savers.
#pragma once

#include <string>

#include "mugraph/graph.h"

namespace mugraph {

/// The DOT text (`dot -Tsvg` renders it). Node labels are describe_op's text and the types of
/// what the op makes, so they match `mugraph check`. Tolerates malformed graphs as describe() does.
std::string to_dot(const Graph& kernel_graph);

}  // namespace mugraph
