/// \file json.h
/// The versioned JSON format of complete μGraphs ("format": "mugraph-ugraph", "version": 1),
/// documented in docs/json-format.md. Round trips are exact: from_json(to_json(g)) == g.
/// Reading a file that may hold either a program or JSON is load_graph_file in loader.h.
#pragma once

#include <string>
#include <string_view>

#include "mugraph/graph.h"

namespace mugraph {

/// The format's current version.
inline constexpr int kJsonFormatVersion = 1;

/// Serializes a kernel graph (with all bodies) as pretty-printed JSON.
std::string to_json(const Graph& kernel_graph);

/// Parses a μGraph. Throws UserError naming the file, the line and column (syntax errors) or the
/// JSON path (schema errors) and what was expected. The result is structurally complete; call
/// validate() for Definition 2.1.
Graph from_json(std::string_view text, const std::string& filename = "<json>");

/// True if the text looks like a μGraph JSON document (first non-space character, after an
/// optional UTF-8 byte-order mark, is '{'). Programs never start with '{'.
bool looks_like_json(std::string_view text);

}  // namespace mugraph
