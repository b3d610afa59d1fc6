/// \file frontend.h
/// The program format (DESIGN.md §3): text in, kernel-level Graph out.
#pragma once

#include <string>
#include <string_view>

#include "mugraph/graph.h"

namespace mugraph {

/// Parses a program. Every statement's ops become pre-defined ops of a kernel graph; program
/// inputs become `input` ops, named statements name their tensors, and `output` lines set the
/// graph's outputs. Throws UserError("file:line:col: error: ...") on any malformed or
/// inconsistent program; never crashes or hangs on any input.
Graph parse_program(std::string_view text, const std::string& filename = "<program>");

/// Whether a program cannot define `name` whatever else it holds: a keyword (input, output) or
/// the name of an op a statement may call.
bool is_reserved_name(std::string_view name);

/// Reads and parses a program file; throws UserError if it cannot be read.
Graph load_program_file(const std::string& path);

}  // namespace mugraph
