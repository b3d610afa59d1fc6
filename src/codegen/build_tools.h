/// \file build_tools.h
/// Internals shared by bench.cpp and build.cpp: running a tool, and building generated code into
/// a cached directory.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "mugraph/codegen.h"

namespace mugraph::codegen {

struct ProcessResult {
  int status = -1;  ///< exit status, or -1 if it did not exit normally
  std::string out, err;
};

/// Runs argv (no shell) with stdout and stderr captured in files under dir.
ProcessResult run_process(const std::vector<std::string>& argv, const std::filesystem::path& dir);

/// A whole file's bytes ("" if it cannot be read).
std::string read_all(const std::filesystem::path& p);

/// What to build from generated code.
enum class BuildProduct {
  bench_harness,   ///< an executable: ugraph.cu with mugraph_device/bench_main.cu
  shared_library,  ///< libugraph.so exporting mugraph_run and mugraph_workspace_bytes
  /// The batch harness: mugraph_device/bench_main.cu alone, built with MGD_BENCH_LIBRARIES to run
  /// shared libraries of many μGraphs in one process (the code's source is not built).
  batch_harness,
};

struct CachedBuild {
  std::filesystem::path dir;     ///< the build directory, named by the hash of its inputs
  std::filesystem::path output;  ///< the executable or library in it
  bool cached = false;           ///< it was there already
};

/// nvcc's target flag for generated code: machine code for exactly that architecture
/// ("-gencode=arch=compute_90a,code=sm_90a").
std::string nvcc_gencode(const CudaTarget& target);

/// Writes code into a cache directory named by a hash of everything the build reads (target,
/// emulation, compiler, sources, device library, product) and builds it there, unless a
/// previous build left its output. Throws UserError if no compiler is found or the build fails.
CachedBuild build_cached(const GeneratedCode& code, const CudaTarget& target, bool emulate,
                         const std::string& cache_dir, BuildProduct product);

}  // namespace mugraph::codegen
