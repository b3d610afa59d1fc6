/// \file loader.h
/// Loading a μGraph from a file that holds either a program (DESIGN.md §3) or μGraph JSON
/// (docs/json-format.md). It lives in the frontend library because it needs the program parser,
/// which depends on the IR; json.h itself stays in the IR.
#pragma once

#include <cstdint>
#include <string>

#include "mugraph/graph.h"

namespace mugraph {

/// Largest file load_graph_file reads.
inline constexpr int64_t kMaxGraphFileBytes = int64_t{256} << 20;

/// Reads a whole file as bytes. Throws UserError "cannot read 'path': reason" if it cannot be
/// read, is a directory, or holds more than max_bytes (checked before reading for regular files;
/// pipes and devices are read up to the limit).
std::string read_text_file(const std::string& path, int64_t max_bytes);

/// Reads a file and returns its kernel graph: JSON if looks_like_json says so (from_json), a
/// program otherwise (parse_program). Does not call validate(). Throws UserError
/// "cannot read 'path': reason" if the file cannot be read or is larger than kMaxGraphFileBytes,
/// and the parser's UserError if it does not parse.
Graph load_graph_file(const std::string& path);

}  // namespace mugraph
