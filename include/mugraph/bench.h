/// \file bench.h
/// Running generated code (mugraph bench): a μGraph is generated (codegen.h), built with nvcc
/// into the benchmark harness (mugraph_device/bench_main.cu) — or with the host compiler against
/// the host emulation — cached on disk by a hash of everything that goes into the build, run on
/// the given inputs with its outputs poisoned, checked against the CPU interpreter, and timed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mugraph/codegen.h"
#include "mugraph/graph.h"
#include "mugraph/interp.h"

namespace mugraph {

/// The standard deviation of the random inputs on which generated code is checked against the
/// interpreter where no inputs are given (measured selection; mugraph bench --input-scale takes
/// any): attention's f16 reference overflows on standard normal inputs (exp(Q·K)), not at 0.25.
inline constexpr double kCheckInputScale = 0.25;

struct BenchOptions {
  std::string target = "sm_90a";
  /// Build against the host emulation instead of a GPU (checks the code on a machine without
  /// one; its times say nothing about a GPU).
  bool emulate = false;
  int warmup = 10;
  int repeats = 100;
  CodegenOptions codegen;
  /// Largest error allowed, relative to the largest magnitude of each reference output.
  double tolerance = 1e-2;
  /// Where built harnesses are cached; empty: $MUGRAPH_CACHE_DIR, else $XDG_CACHE_HOME/mugraph,
  /// else ~/.cache/mugraph.
  std::string cache_dir;
};

struct BenchOutputCheck {
  std::string name;
  double max_abs_error = 0;
  double max_abs_reference = 0;
  int64_t not_finite = 0;  ///< elements of the result that are NaN or infinite
  /// Elements where the interpreter's own result (the reference) is NaN or infinite: the inputs
  /// overflow the program in its dtypes, and nothing can be checked there.
  int64_t reference_not_finite = 0;
  bool ok = false;
};

struct BenchResult {
  std::string device;  ///< the GPU's name, or "host emulation"
  std::string build_dir;
  bool cached = false;  ///< the harness was already built
  std::vector<BenchOutputCheck> outputs;
  bool ok = false;  ///< every output within tolerance and finite
  int runs = 0;
  double median_us = 0, min_us = 0;  ///< runs launched one after another, queued back to back
  /// The same runs replayed from CUDA graphs (absent in the emulation, or where capture failed).
  std::optional<double> graph_median_us, graph_min_us;
  int input_copies = 1;  ///< how many copies of the inputs the timed runs rotate over
  /// What the generated code computed, one per output (in the outputs' dtypes, as floats), for a
  /// caller that checks it against another reference (mugraph bench --out).
  std::vector<HostTensor> values;
};

/// Builds (or reuses), runs, checks and times `ugraph` on `inputs` (one per program input, in
/// order, as random_inputs makes them). Throws UserError when no compiler or no GPU is there,
/// or when the build or a run fails, with the tool's message.
BenchResult bench_ugraph(const Graph& ugraph, const std::vector<HostTensor>& inputs, const BenchOptions& options);

/// One μGraph of a batch (bench_ugraphs): its result, or why it has none.
struct BatchBenchResult {
  std::optional<BenchResult> result;
  std::string error;  ///< empty where result is set
  /// Why the batch's harness could not run it, where it was then run alone and measured.
  std::string batch_error;
};

/// bench_ugraph for many μGraphs of one program, on the same inputs: each μGraph's code is built
/// as a shared library (several builds at once, identical code once), and one harness process
/// loads and times them one after another (mugraph_device/bench_main.cu built with
/// MGD_BENCH_LIBRARIES), so that the GPU's context, the inputs' copies on the device and the
/// harness's build are paid once rather than per μGraph; then each is checked against the
/// interpreter. Results come in the order of `ugraphs`. A μGraph whose code cannot be generated
/// or built gets an error and the others go on. One the batch harness cannot load or run (a
/// CUDA error or a crash restarts the harness after it) is run alone, as bench_ugraph runs it,
/// and gets an error only if that fails too. Throws UserError when no compiler or no GPU is
/// there, which fails all alike.
std::vector<BatchBenchResult> bench_ugraphs(const std::vector<Graph>& ugraphs, const std::vector<HostTensor>& inputs,
                                            const BenchOptions& options);

/// A harness built and not run (mugraph bench --build-only).
struct BuiltHarness {
  std::string build_dir;
  std::string executable;  ///< the harness (bench) in build_dir
  bool cached = false;     ///< it was already built
};

/// What a batch builds (mugraph bench A.json B.json ... --build-only): the harness that loads
/// the libraries, and each μGraph's library.
struct BuiltBatch {
  BuiltHarness harness;  ///< executable: the batch harness (bench_main.cu with MGD_BENCH_LIBRARIES)
  struct Library {
    std::string path;  ///< the μGraph's code built as a shared library
    bool cached = false;
    std::string error;  ///< why it has none (its code could not be generated or built); else empty
  };
  std::vector<Library> libraries;  ///< in the order of the μGraphs
};

/// Builds what bench_ugraphs builds, or finds it in the cache, without running anything: no GPU
/// is needed. Throws UserError when no compiler is found; a μGraph whose build fails gets an error.
BuiltBatch build_bench_batch(const std::vector<Graph>& ugraphs, const BenchOptions& options);

/// Builds `ugraph`'s harness exactly as bench_ugraph does, or finds it in the cache, without
/// running it: no GPU is needed, so a machine without one checks that the harness compiles and
/// prepares builds for one that has. Throws UserError when no compiler is found or the build fails.
BuiltHarness build_bench_harness(const Graph& ugraph, const BenchOptions& options);

/// The result as one JSON object (mugraph bench --json): device, target, emulated, stages, ok,
/// runs, median_us, min_us, input_copies, cached, build_dir, and per output name, max_abs_error,
/// max_abs_reference, not_finite, ok.
std::string bench_result_json(const BenchResult& result, const BenchOptions& options);

}  // namespace mugraph
