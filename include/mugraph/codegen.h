/// \file codegen.h
/// CUDA code generation (DESIGN.md §8): a μGraph becomes one CUDA source that fills in the
/// device library (runtime/include/mugraph_device): one kernel per graph-defined kernel op, a
/// cuBLAS call per pre-defined matmul (a generated kernel where cuBLAS cannot express its
/// broadcasting or dtypes), a generated element-wise, reduction or layout kernel per other
/// pre-defined op, and a host
/// function that launches them in order on the caller's stream with one workspace for the
/// intermediate DTensors.
///
/// The same source compiles with nvcc for a GPU and with a C++ compiler against the device
/// library's host emulation (mugraph_device/emulate.h), which is how CI checks every generated
/// kernel against the CPU interpreter without a GPU.
///
/// Identifiers in generated code are derived from positions (kernel_0, t3, in_0), never copied
/// from names in the μGraph; names appear only in comments and the manifest, escaped.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mugraph/graph.h"
#include "mugraph/validate.h"

namespace mugraph {

/// A code-generation target: the CUDA architecture and the limits its GPUs have.
struct CudaTarget {
  std::string_view arch;        ///< "sm_80", "sm_90a"
  std::string_view cmake_arch;  ///< CMAKE_CUDA_ARCHITECTURES: "80", "90a"
  const Target* limits;         ///< A100 for sm_80, H100 for sm_90a (H200 has the same per-SM limits)
  bool wgmma = false;           ///< block matmuls on warpgroup tensor cores (wgmma, sm_90a) instead of mma.sync
  bool tma = false;             ///< pipelined tile loads by the tensor memory accelerator instead of cp.async
};

/// The known code-generation targets.
const std::vector<CudaTarget>& cuda_targets();
/// Looks a target up by its arch name; throws UserError naming the known ones if there is none.
const CudaTarget& find_cuda_target(std::string_view arch);

/// What the generated host function takes and returns, in order.
struct GeneratedTensor {
  std::string name;  ///< from the μGraph (program input or output name)
  TensorType type;
};

/// The files code generation writes, as text.
struct GeneratedCode {
  std::string source;    ///< ugraph.cu: kernels and the host launcher
  std::string header;    ///< ugraph.h: the host interface
  std::string cmake;     ///< CMakeLists.txt: builds ugraph.cu into a shared library
  std::string manifest;  ///< manifest.json: target, inputs, outputs, workspace bytes
  std::vector<GeneratedTensor> inputs, outputs;
  int64_t workspace_bytes = 0;
  int kernels = 0;     ///< CUDA kernels launched by the host function
  int blas_calls = 0;  ///< cuBLAS calls it makes (pre-defined matmuls)
};

/// Choices code generation makes that do not change what the μGraph computes.
struct CodegenOptions {
  /// Stages of the for-loop's load pipeline: with S stages the tiles of iterations i + 1 …
  /// i + S − 1 are being loaded (asynchronously) while iteration i computes, in S buffers per
  /// tile. 0 chooses: 2 where the kernel loads tiles asynchronously in its loop and the buffers
  /// fit in shared memory, else 1 (no pipeline). At most kMaxPipelineStages.
  int pipeline_stages = 0;
  /// Lay each STensor out by the layout pass (layout_choice.h: padded rows, transposed tiles,
  /// where the model of the device library's shared-memory accesses says they take fewer
  /// wavefronts and the kernel still fits); false keeps every tile dense row-major.
  bool choose_layouts = true;
  /// On sm_90a, let wgmma matmuls read the operand tiles the copy engine loads for them alone in
  /// place, written swizzled (wgmma_rules.h); false stages every operand (to measure the two).
  bool read_operands_in_place = true;
  /// On sm_90a, the most stage buffers per warpgroup for wgmma operands staged over several
  /// chunks of k: 2 stages the next chunk while the tensor cores read this one (taken where the
  /// kernel fits and an SM holds as many of its blocks); 1 makes each chunk wait for the one
  /// before it (to measure the two).
  int wgmma_stage_buffers = 2;
  /// On sm_90a, run a wgmma matmul whose result goes through one unary element-wise op into a
  /// second wgmma matmul (and perhaps a sum along rows) as one chain in registers
  /// (mgd::matmul_chain_wgmma: attention's scores never stored) where its operands are read in
  /// place; false runs every op on its own (to measure the two).
  bool matmul_chains_in_registers = true;
  /// Where a chain in the for-loop adds to the loop's summing accumulators: in the registers of
  /// the threads that compute it, written to shared memory once after the loop
  /// (mgd::RegisterAccumulate), or in shared memory in every iteration (false; to measure the two).
  bool chain_accumulators_in_registers = true;
  /// On sm_90a, where a wgmma matmul in the for-loop is read only by a summing accumulator: the
  /// matmul adds its product to the accumulator in the registers of the threads that compute
  /// it, written to shared memory once after the loop (mgd::matmul_wgmma_to), instead of storing
  /// a product tile that the accumulator op reads after a barrier (false; to measure the two).
  bool matmul_accumulators_in_registers = true;
  /// Where a chain has fewer 64-row jobs than the block has warpgroups (decoding's few query
  /// rows), split S's n-blocks among the warpgroups a job would leave idle and add their partial
  /// results through shared memory (mgd::matmul_chain_splits; true, to measure the two); false
  /// runs such a chain only where S has one n-block, and the others op by op. Off by default:
  /// on an H200 (2026-11-28) the split chains of examples/found/gqa and qknorm took 53.5 and
  /// 82.8 µs against 33.9 and 69.2 op by op (docs/codegen.md).
  bool chain_split_n_blocks = false;
  /// On sm_90a, where a wgmma matmul in the for-loop adds its product to the loop's sums in
  /// registers and reads both operands in place: issue each iteration's product and add it in
  /// the next iteration (mgd::matmul_wgmma_deferred), so that the tensor cores compute it while
  /// the next iteration's element-wise ops run. An operand an op of the loop writes takes a
  /// second buffer, and streamed operands one more pipeline stage (loading no further ahead);
  /// taken where the kernel still fits and an SM still holds as many of its blocks. false waits
  /// for each product in its own iteration. Off until an H200 has timed the two
  /// (docs/codegen.md, "Hopper: a loop's products landing an iteration later").
  bool overlap_loop_matmuls = false;
  /// Threads per block of every graph-defined kernel: 0 keeps each block graph's own (the
  /// search's 128); a multiple of 32 up to 1024 replaces it. Block ops are cooperative, so the
  /// μGraph computes the same; more warps hide more of the portable tile ops' latency, which
  /// bounds the kernels on an H200 (docs/codegen.md). wgmma needs a multiple of 128.
  int block_threads = 0;
};
inline constexpr int kMaxPipelineStages = 4;

/// Generates CUDA for a valid μGraph (kernel level). Throws UserError with the reason if the
/// μGraph is invalid for the target, uses something code generation does not support yet, or
/// the options ask for more shared memory than the target has.
GeneratedCode generate_cuda(const Graph& ugraph, const CudaTarget& target, const CodegenOptions& options = {});

/// Writes code into dir (created if needed): ugraph.cu, ugraph.h, CMakeLists.txt,
/// manifest.json and the device library headers under mugraph_device/, so that dir builds on
/// its own. Throws UserError if a file cannot be written.
void write_generated_code(const GeneratedCode& code, const std::string& dir);

namespace codegen {

/// Row-major element strides of a shape (rank 0 is treated as [1]).
std::vector<int64_t> row_major_strides(const Shape& shape);

/// Strides that read an operand of shape `operand` as if it had shape `result` (NumPy
/// broadcasting: dims aligned from the right; missing dims and extent-1 dims broadcast with
/// stride 0). @pre operand broadcasts to result
std::vector<int64_t> broadcast_strides(const Shape& operand, const Shape& result);

/// Where block b's tile of an input iterator or output saver starts in its DTensor, in elements:
/// sum over grid axes of block_coeff[axis] · blockIdx[axis], plus loop_coeff · iteration.
struct TileOrigin {
  std::array<int64_t, 3> block_coeff{0, 0, 0};
  int64_t loop_coeff = 0;
};

/// The coordinates of an input iterator's tile (imap, fmap) in a DTensor of shape `whole`, one
/// per dim, each in elements along its dim (what a TMA tensor copy takes), for a block graph
/// with the given grid and for-loop.
std::vector<TileOrigin> iterator_coords(const Shape& whole, const std::array<int8_t, 3>& imap, int8_t fmap,
                                        const Dim3& grid, int64_t forloop);

/// The origin of an input iterator's tile (imap, fmap) in a row-major DTensor of shape `whole`,
/// for a block graph with the given grid and for-loop: the coordinates times the strides.
TileOrigin iterator_origin(const Shape& whole, const std::array<int8_t, 3>& imap, int8_t fmap, const Dim3& grid,
                           int64_t forloop);

/// The origin of the region an output saver (omap) writes in a DTensor of shape `whole`.
TileOrigin saver_origin(const Shape& whole, const Shape& tile, const std::array<int8_t, 3>& omap);

/// Whether an input iterator's tile can be loaded in 16-byte vectors (asynchronously on sm_80
/// and later): its rows are whole vectors, and every row of every tile, in every block and
/// iteration, starts 16-byte aligned in the row-major DTensor (given a 16-byte aligned base).
bool vector_load_ok(const Shape& whole, const Shape& tile, const TileOrigin& origin, DType dtype);

/// A tile as one box of a tensor map. A box has at most 256 elements along each dim and a tensor
/// map at most 5 dims, so each tile dim longer than 256 splits, in the map's view of the tensor,
/// into (extent / b, b): b the largest divisor of the tile's extent up to 256 (16-byte multiples
/// along the innermost dim). The view is row-major like the tensor, so its box lands in shared
/// memory as the tile would, dense and row-major, in one copy.
struct TmaView {
  Shape whole;                     ///< the tensor, its split dims split
  Shape box;                       ///< the tile (or one panel of it), its split dims split
  std::vector<TileOrigin> coords;  ///< the tile's coordinates in the view
};

/// The view of input tile `tile` (at `coords`, iterator_coords) of a row-major tensor `whole`
/// whose box is `inner_box` elements wide along the innermost dim (the tile's extent, or a
/// swizzled tile's panel width); nullopt where none fits: more than 5 dims, or a coordinate
/// that is not a multiple of its split.
std::optional<TmaView> tma_view(const Shape& whole, const Shape& tile, const std::vector<TileOrigin>& coords,
                                DType dtype, int64_t inner_box);

/// Text safe in a C++ comment or string literal: characters outside [A-Za-z0-9_ .,:[]=-] are
/// written as three-digit octal escapes (\ooo), which end where they start.
std::string escape_name(std::string_view name);

}  // namespace codegen

}  // namespace mugraph
