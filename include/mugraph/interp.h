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

/// Options of the interpreter.
struct InterpOptions {
  /// Worker threads for block-parallel execution; 0 means all hardware threads.
  int threads = 0;
  /// Refuse to run graphs whose tensors need more host memory than this (UserError).
  int64_t max_bytes = int64_t{8} << 30;
};

/// Runs a kernel graph on the given inputs (one per `input` op, in op order) and returns the
/// graph's outputs in order. Arithmetic is f32 with f32-or-wider accumulation; every tensor is
/// rounded to its dtype when stored; for-loop accumulators keep f32 partial sums and round once
/// after the loop. Blocks run in parallel. Throws UserError if the inputs do not match the
/// graph's inputs or the graph is too large; the graph must have passed validate().
std::vector<HostTensor> run_float(const Graph& kernel_graph, const std::vector<HostTensor>& inputs,
                                  const InterpOptions& options = {});

/// Standard-normal inputs for every `input` op of a kernel graph from a seed (deterministic
/// across platforms), rounded to each input's dtype.
std::vector<HostTensor> random_inputs(const Graph& kernel_graph, uint64_t seed);

/// Reads an NPY file (format 1.0/2.0, little-endian float16/float32/float64, C order) into a
/// HostTensor of dtype f16 (float16) or f32 (float32, float64). Throws UserError naming the file
/// and what is wrong.
HostTensor read_npy(const std::string& path);
/// Writes an NPY 1.0 file: float16 for f16, float32 for f32 and bf16 (NumPy has no bfloat16).
void write_npy(const std::string& path, const HostTensor& t);

}  // namespace mugraph
