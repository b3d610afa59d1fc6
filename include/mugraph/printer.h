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

/// One op as describe() lists it: "%5 = mul(%0, %1)", "%0 = input_iterator(in0) imap={x:φ} fmap=1",
/// "output_saver(%9) -> out0 omap={x:1}". The graph gives the context of maps (its grid, loop).
std::string describe_op(const Graph& g, const Op& op);

/// The types of what an op makes, with tensor names: "[16, 256] f16", "[16, 4096] f16  \"O\"";
/// for a block graph's output saver, the whole DTensor it writes.
std::string describe_types(const Graph& g, const Op& op);

}  // namespace mugraph
