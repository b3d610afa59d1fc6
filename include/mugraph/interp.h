/// \file interp.h
/// The CPU float interpreter: the executable definition of what a μGraph means (DESIGN.md §1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mugraph/graph.h"

namespace mugraph {

/// A dense row-major tensor in host memory. Values are held as f32; a tensor whose dtype is
/// f16 or bf16 holds only values representable in that type (round_to_dtype keeps this true).
struct HostTensor {
  TensorType type;
  std::vector<float> data;

  HostTensor() = default;
  explicit HostTensor(TensorType t);
  int64_t numel() const { return type.shape.numel(); }
};

/// f32 → f16 / bf16 bits with round-to-nearest-even (NaN stays NaN, overflow goes to ±inf), and back.
uint16_t float_to_half_bits(float f);
float half_bits_to_float(uint16_t h);
uint16_t float_to_bfloat16_bits(float f);
float bfloat16_bits_to_float(uint16_t h);
/// The nearest value representable in dtype.
float round_to_dtype(float f, DType dtype);
/// Rounds every element of t to its dtype.
void round_tensor(HostTensor& t);

/// The default limit on the host memory a run may use (8 GiB).
inline constexpr int64_t kDefaultMaxHostBytes = int64_t{8} << 30;

/// Options of the interpreter.
struct InterpOptions {
  /// Worker threads for block-parallel execution; 0 means all hardware threads.
  int threads = 0;
  /// Refuse to run graphs whose tensors need more host memory than this (UserError).
  int64_t max_bytes = kDefaultMaxHostBytes;
  /// Compute a block graph's loop-body ops that read no block-dependent tile (their iterators
  /// map no grid axis) once per iteration for all blocks, instead of once per block. The
  /// results are bit-identical either way; false evaluates every block separately, literally
  /// as DESIGN.md §1 states the semantics.
  bool share_block_invariant = true;
};

/// The host memory run_float budgets for a kernel graph: every kernel-level tensor at 4 bytes per
/// element (the host holds floats), saturating at INT64_MAX. Not counted: the per-worker buffers
/// of block graphs (a few copies of one block's tiles) and the table of block-invariant tiles
/// shared across blocks (capped at 256 MiB).
int64_t host_memory_bytes(const Graph& kernel_graph);

/// Element steps a run of `g` takes on either interpreter, roughly: every op's output elements
/// (times k for a matmul; a sum's input elements), a block graph's once per block and
/// iteration, and a thread graph's as its own ops count. Saturates at INT64_MAX. Work done
/// on graphs of any size (fuzzing, the search's input probes) is bounded with it.
int64_t run_steps(const Graph& g);

/// Runs a kernel graph on the given inputs (one per `input` op, in op order) and returns the
/// graph's outputs in order. Arithmetic is f32 with f32-or-wider accumulation; every tensor is
/// rounded to its dtype when stored; for-loop accumulators keep f32 partial sums and round once
/// after the loop. Blocks run in parallel; the results are bit-identical for any thread count.
/// Throws UserError if the graph needs more than options.max_bytes (checked first, before the
/// inputs are looked at), is not a valid μGraph (validate() on a target without memory or
/// register limits: the interpreter runs tiles of any size), or the inputs do not match the
/// graph's inputs.
std::vector<HostTensor> run_float(const Graph& kernel_graph, const std::vector<HostTensor>& inputs,
                                  const InterpOptions& options = {});

/// Standard-normal inputs for every `input` op of a kernel graph from a seed (deterministic
/// across platforms: splitmix64 and Box–Muller with hand-written log/sin/cos), rounded to each
/// input's dtype. Input k's values depend only on the seed, k and its element count, not on
/// `threads` (0: all hardware threads), which only spreads the drawing. Throws UserError if the
/// inputs together need more than max_bytes of host memory.
std::vector<HostTensor> random_inputs(const Graph& kernel_graph, uint64_t seed,
                                      int64_t max_bytes = kDefaultMaxHostBytes, int threads = 1);

/// random_inputs at standard deviation `scale`: each draw times `scale`, then rounded to the
/// input's dtype (attention's f16 reference overflows on standard normal inputs: bench.h,
/// kCheckInputScale).
std::vector<HostTensor> random_inputs_scaled(const Graph& kernel_graph, uint64_t seed, double scale,
                                             int64_t max_bytes = kDefaultMaxHostBytes, int threads = 1);

/// Reads an NPY file (format 1.0, 2.0 or 3.0; float16/float32/float64 stored little-endian:
/// '<', or '=' / '|' which NumPy reads as native order; C order; rank ≤ kMaxRank, every extent
/// ≥ 1) into a HostTensor of dtype f16 (float16) or f32 (float32, float64 rounded to nearest).
/// Throws UserError naming the file and what is wrong (header syntax, dtype, byte order, Fortran
/// order, rank, truncated or surplus data); no file makes it crash or over-allocate.
HostTensor read_npy(const std::string& path);
/// Writes an NPY 1.0 file: float16 for f16, float32 for f32 and bf16 (NumPy has no bfloat16).
void write_npy(const std::string& path, const HostTensor& t);

}  // namespace mugraph
