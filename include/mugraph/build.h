/// \file build.h
/// Building generated code (codegen.h) into a shared library that a process loads and calls:
/// `mugraph_run(inputs, outputs, workspace, stream)` and `mugraph_workspace_bytes()` as ugraph.h
/// declares them. With nvcc for a GPU, or with the host compiler against the device library's
/// host emulation (then the "device pointers" are host memory and the stream is ignored).
/// Builds are cached on disk by a hash of everything that goes into them, as mugraph bench's are.
#pragma once

#include <string>

#include "mugraph/codegen.h"
#include "mugraph/graph.h"

namespace mugraph {

struct BuildOptions {
  std::string target = "sm_90a";  ///< sm_80 or sm_90a
  /// Build against the host emulation with the host compiler ($CXX, else c++) instead of nvcc.
  bool emulate = false;
  CodegenOptions codegen;
  /// Where builds are cached; empty: $MUGRAPH_CACHE_DIR, else $XDG_CACHE_HOME/mugraph, else
  /// ~/.cache/mugraph.
  std::string cache_dir;
};

struct BuiltLibrary {
  std::string library;  ///< the shared library's path
  std::string dir;      ///< its build directory (the generated sources are there)
  bool cached = false;  ///< it was already built
  GeneratedCode code;   ///< what mugraph_run takes and returns, and its workspace
};

/// Generates code for a valid μGraph and builds it into a shared library, or reuses a cached
/// build. Throws UserError when code generation refuses the μGraph, no compiler is found, or the
/// build fails (with the compiler's message).
BuiltLibrary build_ugraph_library(const Graph& ugraph, const BuildOptions& options);

}  // namespace mugraph
