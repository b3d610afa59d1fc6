/// \file cost_model.h
/// An analytic cost model: the time a μGraph takes on a GPU, estimated kernel by kernel from
/// the bytes it moves (device memory, L2, one SM's loads, shared memory), the FLOPs it does
/// (tensor cores, CUDA cores), how its blocks spread over the SMs, its barriers and the launch
/// overhead of each kernel. It ranks candidates without a GPU; measured selection (timing the
/// top candidates where a GPU is present) calibrates it.
///
/// Each kernel costs its launch plus the largest of its throughput terms (they overlap) plus its
/// barriers (they do not). Per-SM terms count the blocks of the busiest SM: a grid that leaves
/// SMs idle or ends in a partial wave pays for it. The terms are documented in cost_model.cpp;
/// the throughputs of each GPU are in one table there (gpu_specs).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "mugraph/graph.h"
#include "mugraph/validate.h"

namespace mugraph {

/// What the cost model knows of a GPU: peak figures from the vendors' data sheets, and the
/// few the model assumes (sm_load_share, launch_us, barrier_us) until measured selection
/// calibrates them.
struct GpuSpec {
  std::string_view name;  ///< as Target::name: "a100", "h100", "h200"
  int64_t sms;
  double clock_ghz;              ///< boost clock
  double dram_bytes_per_us;      ///< HBM bandwidth
  double l2_bytes_per_us;        ///< L2 bandwidth
  double sm_load_share;          ///< one SM's loads reach at most this many times its share of DRAM bandwidth
  double smem_bytes_per_clock;   ///< shared-memory bandwidth of one SM
  double tensor_flops_per_us;    ///< dense f16/bf16 tensor-core peak, f32 accumulation
  double fma_flops_per_us;       ///< f32 CUDA-core peak (an FMA is 2 FLOPs)
  int64_t shared_memory_per_sm;  ///< bytes
  int64_t threads_per_sm;
  int64_t blocks_per_sm;  ///< most resident blocks per SM
  double launch_us;       ///< one kernel launched after another on a stream
  double barrier_us;      ///< one block-wide barrier
  /// Pieces of contiguous device memory (at most 128 bytes each) the memory system serves per
  /// microsecond, all SMs together: a tile whose rows are narrower than its tensor's is fetched
  /// row piece by row piece, and narrow pieces cost nearly what full ones do.
  double pieces_per_us;
  /// Cycles one thread of the portable tile ops spends per element of CUDA-core work while its
  /// warp is alone on its scheduler (latency, not issue: shared-memory round trips and index math).
  double element_latency_cycles;
  /// Cycles of issue per element and thread: the floor once enough warps share a scheduler to
  /// hide the latency.
  double element_issue_cycles;
  /// The share of dram_bytes_per_us a pre-defined matmul (cuBLAS) reaches: the benchmarks'
  /// matmuls have 2 to 16 rows, and cuBLAS streams their weights at about half the peak.
  double cublas_dram_share;
};

/// Every GPU the model knows.
const std::vector<GpuSpec>& gpu_specs();
/// The spec of a target by name ("a100", "h100", "h200") or arch ("sm_80": A100, "sm_90a":
/// H100); throws UserError naming the known ones if there is none.
const GpuSpec& gpu_spec(std::string_view name);

/// Blocks of `threads` threads and `shared_bytes` of shared memory one SM of `gpu` holds at once
/// (at least 1).
int64_t resident_blocks_per_sm(const GpuSpec& gpu, int64_t threads, int64_t shared_bytes);

/// The blocks a grid of `blocks` puts on its busiest SM: ceil(blocks / SMs).
inline int64_t blocks_on_busiest_sm(int64_t blocks, const GpuSpec& gpu) { return (blocks + gpu.sms - 1) / gpu.sms; }

/// The estimate of one kernel, with the terms it is made of (microseconds).
struct KernelCost {
  std::string kind;  ///< "graph-defined" or the pre-defined op's name ("matmul", "exp", ...)
  int64_t blocks = 1;
  int64_t resident_blocks_per_sm = 1;  ///< occupancy: blocks one SM holds at once
  int64_t blocks_on_busiest_sm = 1;    ///< ceil(blocks / SMs)
  double launch_us = 0;
  double dram_us = 0;  ///< distinct DTensor bytes read and written, at HBM bandwidth
  /// The share of the HBM peak dram_us takes: GpuSpec::cublas_dram_share for a matmul, else 1
  double dram_share = 1;
  double l2_us = 0;       ///< every tile every block loads and stores, at L2 bandwidth
  double sm_load_us = 0;  ///< the busiest SM's loads at one SM's reach
  double shared_us = 0;   ///< the busiest SM's shared-memory traffic
  double tensor_us = 0;   ///< the busiest SM's tensor-core FLOPs (a kernel's, for pre-defined ops)
  double fma_us = 0;      ///< the busiest SM's CUDA-core FLOPs (likewise)
  double pieces_us = 0;   ///< every block's tile loads and stores as 128-byte pieces, at pieces_per_us
  /// The busiest SM's tile-op instructions: per round of resident blocks, each thread's share of
  /// the CUDA-core work at element_latency_cycles, or at element_issue_cycles per warp sharing a
  /// scheduler once there are enough of them; it does not overlap the memory terms
  double issue_us = 0;
  double barrier_us = 0;  ///< the busiest SM's barriers, resident blocks overlapping theirs
  /// What the load pipeline leaves exposed: per round of resident blocks, the smaller of one
  /// iteration's loads and one iteration's work (in every iteration where the loop is not
  /// pipelined, loop_pipelined, and one block is resident)
  double pipeline_us = 0;
  /// A graph-defined kernel with a loop: whether the code generator pipelines it (loop_pipelined)
  bool pipelined = false;
  double total_us = 0;  ///< launch + the largest throughput term + issue + barriers + pipeline
  /// the largest throughput term: "dram", "l2", "sm_load", "shared", "tensor", "fma", "pieces"
  std::string bound;
};

/// The estimate of a μGraph: its kernels in launch order and their sum.
struct CostEstimate {
  double total_us = 0;
  std::vector<KernelCost> kernels;
  /// One line per kernel: "kernel 0 graph-defined: 12.3 us (dram-bound; dram 10.1, ...)".
  std::string str() const;
};

/// Shared-memory bytes one block's ops read and write: each op's distinct inputs and its outputs,
/// once per loop iteration (once for ops after the loop, as the interpreters phase them). Input iterators and output
/// savers are device traffic, a concat is free (its operands are placed side by side) and an
/// accumulator lives in registers.
int64_t block_shared_traffic_bytes(const Graph& block_graph);

/// Shared memory the code generator gives a block with `stages` load stages on `target`: its
/// STensors, row-major, as a memory plan places them by their lifetimes (best-fit: the
/// emitter's exact plan is never larger), the streamed tiles `stages` times, and on sm_90a the
/// wgmma operand stages (every operand staged), the TMA loads' barriers and the realignment of
/// the window for swizzled tiles.
int64_t planned_shared_bytes(const Graph& block_graph, int stages, const Target& target);

/// Whether the code generator pipelines the block graph's for-loop (the tiles of the next
/// iteration loading while this one works): its default where the loop streams a tile in 16-byte
/// vectors (cp.async, TMA) and planned_shared_bytes with two stages fits the target's shared
/// memory. The emitter's exact plan may fit where this does not; never the other way round.
bool loop_pipelined(const Graph& block_graph, const Target& target);

/// The L2 and busiest-SM load terms (microseconds) of a grid of `blocks` blocks that each move
/// `bytes_per_block` of tiles between device memory and the SM: every block's bytes at L2
/// bandwidth, and ceil(blocks / SMs) blocks' bytes at what one SM's loads reach.
struct LoadTerms {
  double l2_us = 0;
  double sm_load_us = 0;
};
LoadTerms load_terms(int64_t blocks, double bytes_per_block, const GpuSpec& gpu);

/// Pieces of contiguous row-major memory, of at most 128 bytes each, that a tile of a tensor of
/// shape `whole` spans (the pieces term): its innermost dims as far as they cover the tensor's
/// whole make one run; every run costs ceil(bytes / 128) pieces.
double tile_pieces(const Shape& tile, const Shape& whole, int64_t element_bytes);

/// Whether kernel op `op` of `kernel_graph` moves nothing: a reshape whose result is no program
/// output is a view of its operand (every DTensor is dense row-major, and a row-major reshape
/// keeps the element order), for which the generated code launches nothing. So is a reshape
/// that is a program output (once) of an operand that only it reads and that a kernel of its own
/// makes (not an input, not another reshape): that kernel writes the output's buffer. It costs
/// nothing, moves no bytes and is no kernel (CandidateMetrics::kernels).
bool kernel_op_is_view(const Graph& kernel_graph, const Op& op);

/// A kernel's compulsory device-memory traffic (0 for a view): the bytes of the distinct DTensors kernel op
/// `op` of `kernel_graph` reads plus those it writes (re-reads by many blocks are taken to hit
/// L2). CandidateMetrics::device_bytes sums it over the kernels, estimate_cost's dram terms too.
int64_t kernel_device_bytes(const Graph& kernel_graph, const Op& op);

/// Adds the FLOPs of op `op` of graph `g` (any level), `reps` times, to `tensor` (a matmul of
/// two 16-bit operands, neither an accumulated tile of f32 sums (holds_f32_sums), on tensor
/// cores) or `fma` (on CUDA cores): a matmul 2·M·N·K per batch, a
/// reduction one per input element, other compute ops one per output element; a thread graph the
/// sum of its ops. Iterators, savers, accumulators and layout ops: none.
void add_flops(const Graph& g, const Op& op, double reps, double& tensor, double& fma);

/// Estimates kernel op `op` of `kernel_graph` on `gpu`: it depends on that op alone (its body,
/// grid, threads and tensors), not on the kernels around it.
KernelCost estimate_kernel_cost(const Graph& kernel_graph, const Op& op, const GpuSpec& gpu);

/// Estimates a complete μGraph (a kernel graph, with thread graphs fused or not) on `gpu`.
/// Monotone: more bytes or more FLOPs anywhere never lower the estimate.
CostEstimate estimate_cost(const Graph& kernel_graph, const GpuSpec& gpu);

/// A lower bound on estimate_cost of any μGraph with at least `device_bytes` of compulsory
/// device-memory traffic (CandidateMetrics::device_bytes) in at least `kernels` kernels.
double cost_lower_bound_us(int64_t device_bytes, int kernels, const GpuSpec& gpu);

}  // namespace mugraph
