// The analytic cost model (cost_model.h).
//
// A graph-defined kernel of B blocks puts ceil(B / SMs) blocks on its busiest SM; that SM's
// work bounds the kernel. Its terms, each a time in microseconds:
//   dram     the kernel's compulsory traffic (each distinct DTensor read once, each written once)
//            at HBM bandwidth: re-reads of a tensor by many blocks are taken to hit L2;
//   l2       every tile every block loads or stores, at L2 bandwidth;
//   sm_load  the busiest SM's loads and stores at what one SM reaches (sm_load_share times its
//            share of HBM bandwidth: few blocks cannot use the whole GPU's bandwidth);
//   shared   the busiest SM's shared-memory traffic (block_shared_traffic_bytes per block);
//   tensor   the busiest SM's matmul FLOPs on 16-bit operands, at its share of the tensor peak;
//   fma      its other FLOPs (element-wise ops, reductions, f32 matmuls) on CUDA cores;
//   pieces   every block's tile loads and stores cut into pieces of contiguous device memory of
//            at most 128 bytes (tile_pieces), at the rate the memory system serves pieces: a
//            tile 8 elements wide costs a piece per row, as a 64-element one does;
//   issue    the busiest SM's tile-op instructions: per round of resident blocks, each thread's
//            share of the CUDA-core work at element_latency_cycles per element while few warps
//            share a scheduler, at element_issue_cycles per element and warp once many do;
//   barrier  the busiest SM's block barriers (between the steps of the op order, op_order.h),
//            the blocks resident together overlapping theirs;
//   pipeline what the load pipeline cannot hide: per round of resident blocks, the smaller of
//            one iteration's loads and one iteration's work (see graph_defined_cost); in every
//            iteration where the emitter cannot pipeline the loop (loop_pipelined) and no other
//            resident block fills the gap.
// The kernel costs launch + max(dram, l2, sm_load, shared, tensor, fma, pieces) + issue + barrier
// + pipeline: the portable tile ops wait for their tiles and then work, so their instructions
// add to the memory time rather than hide under it. A
// pre-defined kernel (cuBLAS or a generated element-wise kernel) spreads over the whole GPU:
// launch + max(dram, tensor, fma) over the whole device, a matmul's dram term at the share of
// the bandwidth cuBLAS reaches (cublas_dram_share).
//
// Every term grows with bytes and FLOPs, so the estimate is monotone in both; every kernel costs
// at least launch + its dram term, which is what cost_lower_bound_us sums.
#include "mugraph/cost_model.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "mugraph/error.h"
#include "mugraph/op_order.h"
#include "mugraph/search.h"
#include "mugraph/shared_memory_plan.h"
#include "mugraph/validate.h"
#include "mugraph_device/wgmma_rules.h"

namespace mugraph {

namespace {

/// Whether the loop streams a tile (a load in the loop with an fmap) and one in 16-byte vectors,
/// which is what cp.async and TMA take (codegen::vector_load_ok).
struct Streams {
  bool any = false, vectors = false;
};

Streams loop_streams(const Graph& body, const BlockSchedule& schedule) {
  Streams s;
  if (body.forloop <= 1) return s;
  for (size_t i = 0; i < body.ops.size(); ++i) {
    const Op& b = body.ops[i];
    if (schedule.phase[i] != OpPhase::loop || b.kind != OpKind::input_iterator || b.attrs.fmap == kPhi) continue;
    const TensorType& tile = body.type(b.outputs[0]);
    const TensorType& whole = body.params[static_cast<size_t>(b.attrs.io_index)];
    const int64_t esz = dtype_bytes(tile.dtype);
    s.any = true;
    s.vectors = s.vectors || (tile.shape.rank() > 0 && tile.shape[tile.shape.rank() - 1] * esz % 16 == 0 &&
                              whole.shape[whole.shape.rank() - 1] * esz % 16 == 0);
  }
  return s;
}

int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

/// planned_shared_bytes under the block's schedule (computed once by the callers).
int64_t planned_bytes(const Graph& body, const BlockSchedule& schedule, int stages, const Target& target) {
  const bool pipelined = stages > 1 && loop_streams(body, schedule).any;
  const bool hopper = target.arch == "sm_90a";
  const std::vector<TensorLifetime> life = tensor_lifetimes(body, schedule, pipelined);
  std::vector<SharedBuffer> buffers;
  int64_t scratch = 0;
  int once_loads = 0;  // tiles loaded once by TMA on Hopper, each with a barrier of its own
  for (size_t i = 0; i < body.ops.size(); ++i) {
    const Op& op = body.ops[i];
    if (schedule.phase[i] == OpPhase::dead || op.kind == OpKind::output_saver || op.kind == OpKind::reshape ||
        schedule.folded[i])
      continue;
    const bool f32_acc = is_sum_accumulator(op);
    const bool streamed =
        pipelined && op.kind == OpKind::input_iterator && op.attrs.fmap != kPhi && schedule.phase[i] == OpPhase::loop;
    // A tile loaded once: loop-invariant, or in a kernel without a loop.
    const bool once = op.kind == OpKind::input_iterator && (body.forloop == 1 || op.attrs.fmap == kPhi);
    once_loads += once && hopper;
    const int64_t align = (streamed || once) && hopper ? 128 : 16;  // TMA tiles start 128-byte aligned
    for (TensorId t : op.outputs) {
      const TensorType& type = body.type(t);
      const int64_t bytes = align_up(type.shape.numel() * (f32_acc ? 4 : dtype_bytes(type.dtype)), align);
      const TensorLifetime& l = life[t.index()];
      buffers.push_back({bytes * (streamed ? stages : 1), align, l.first, l.last});
    }
    // The wgmma operand stages (every operand staged: the most a matmul takes).
    if (hopper && op.kind == OpKind::matmul && body.threads.volume() % 128 == 0) {
      const TensorType& a = body.type(op.inputs[0]);
      const Shape& c = body.type(op.outputs[0]).shape;
      if (dtype_bytes(a.dtype) == 2)
        scratch =
            std::max(scratch, mgd::wgmma_scratch_bytes(c[c.rank() - 2], c[c.rank() - 1], a.shape[a.shape.rank() - 1], 0,
                                                       0, body.threads.volume() / 128));
    }
  }
  // Best-fit: the emitter's exact plan is never larger, and the model runs for every candidate.
  SharedPlanOptions fast;
  fast.exact_max_buffers = 0;
  int64_t bytes = plan_shared_memory(buffers, fast).peak + scratch;
  // TMA loads: a transaction barrier per stage and per tile loaded once, and up to 1024 - 128
  // bytes to realign the window for tiles the copy engine swizzles.
  if (hopper && (pipelined || once_loads > 0)) bytes += 8 * (pipelined ? stages : 0) + 8 * once_loads + 16 + 1024 - 128;
  return bytes;
}

/// The shared memory of a pipelined loop (two stages), or 0 where the emitter would not
/// pipeline it (loop_pipelined).
int64_t pipelined_bytes(const Graph& body, const BlockSchedule& schedule, const Target& target) {
  if (!loop_streams(body, schedule).vectors) return 0;
  const int64_t bytes = planned_bytes(body, schedule, 2, target);
  return bytes <= target.shared_memory_bytes ? bytes : 0;
}

}  // namespace

int64_t planned_shared_bytes(const Graph& body, int stages, const Target& target) {
  return planned_bytes(body, schedule_block_ops(body), stages, target);
}

bool loop_pipelined(const Graph& body, const Target& target) {
  return pipelined_bytes(body, schedule_block_ops(body), target) > 0;
}

namespace {

/// block_shared_traffic_bytes under the block's schedule (graph_defined_cost has it already).
int64_t shared_traffic_bytes(const Graph& body, const BlockSchedule& schedule) {
  auto bytes = [&](TensorId t) {
    const TensorType& type = body.type(t);
    return type.shape.numel() * dtype_bytes(type.dtype);
  };
  // Ops before and after the loop run once, the others once per iteration (op_order.h).
  int64_t traffic = 0;
  for (size_t i = 0; i < body.ops.size(); ++i) {
    const Op& op = body.ops[i];
    const OpPhase phase = schedule.phase[i];
    if (phase == OpPhase::dead) continue;
    // Iterators and savers move device bytes (load_bytes_per_sm, device_bytes); a concat is a
    // placement (its operands are written into adjacent parts of one buffer); an accumulator
    // lives in registers; a folded op's operand is read by its sum, in the sum's bytes.
    if (op.kind == OpKind::input_iterator || op.kind == OpKind::output_saver || op.kind == OpKind::concat ||
        op.kind == OpKind::accum || schedule.folded[i])
      continue;
    int64_t op_bytes = 0;
    std::set<int32_t> read;
    for (TensorId t : op.inputs)
      if (read.insert(t.value).second) op_bytes += bytes(t);
    for (TensorId t : op.outputs) op_bytes += bytes(t);
    traffic += op_bytes * (phase == OpPhase::loop ? body.forloop : 1);
  }
  return traffic;
}

}  // namespace

int64_t block_shared_traffic_bytes(const Graph& body) { return shared_traffic_bytes(body, schedule_block_ops(body)); }

const std::vector<GpuSpec>& gpu_specs() {
  // Peaks from NVIDIA's data sheets (A100 SXM4 80 GB, H100 SXM5, H200 SXM): SMs, boost clock,
  // HBM bandwidth, dense f16 tensor and f32 CUDA-core FLOPs, shared memory per SM. Assumed until
  // calibrated against timings: L2 at about 2.5× H100's HBM (A100: 2.5× its own), one SM
  // reaching 3× its share of HBM bandwidth, 128 bytes per clock of shared memory per SM, a
  // launch of 3 µs (A100) or 2.5 µs (H100, H200) and a barrier of 20 ns.
  //
  // Fitted on an H200 (docs/cost_model.md, "Calibration"): 25 cycles per element and thread of
  // tile-op work (8 of issue), to 80 candidates timed on 2026-11-26/27; 31,250 128-byte pieces
  // per µs (25,000 before), refitted on 2026-11-28 to 103 attention candidates timed with their
  // operands read in place. With it every timed set's pick is within 1.3% of its fastest, and
  // the older sets rank as before.
  // cuBLAS's share of the HBM bandwidth on the benchmarks' skinny matmuls (2 to 16 rows by 4096 by
  // 4096), 0.49: the median over the 12 μGraphs with cuBLAS matmuls timed on 2026-11-28, of their
  // time less the model's other kernels and launches (bench/fit_cublas_share.py). Before, the model
  // took cuBLAS at peak bandwidth and rated these μGraphs 1.5 times too fast.
  // The A100 and H100 rows take the H200's figures until they are measured there.
  static const std::vector<GpuSpec> specs = {
      {"a100", 108, 1.41, 2.039e6, 5.1e6, 3.0, 128, 312e6, 19.5e6, 167936, 2048, 32, 3.0, 0.02, 31.25e3, 25, 8, 0.49},
      {"h100", 132, 1.98, 3.35e6, 8.4e6, 3.0, 128, 989e6, 66.9e6, 233472, 2048, 32, 2.5, 0.02, 31.25e3, 25, 8, 0.49},
      {"h200", 132, 1.98, 4.8e6, 8.4e6, 3.0, 128, 989e6, 66.9e6, 233472, 2048, 32, 2.5, 0.02, 31.25e3, 25, 8, 0.49},
  };
  return specs;
}

int64_t resident_blocks_per_sm(const GpuSpec& gpu, int64_t threads, int64_t shared_bytes) {
  int64_t resident = std::min(gpu.blocks_per_sm, gpu.threads_per_sm / std::max<int64_t>(1, threads));
  if (shared_bytes > 0) resident = std::min(resident, gpu.shared_memory_per_sm / shared_bytes);
  return std::max<int64_t>(1, resident);
}

const GpuSpec& gpu_spec(std::string_view name) {
  // An arch names its first target (validate.h): sm_80 the A100, sm_90a the H100.
  const std::optional<Target> target = find_target(name);
  const std::string_view key = target ? target->name : name;
  std::string known;
  for (const GpuSpec& g : gpu_specs()) {
    if (g.name == key) return g;
    known += (known.empty() ? "" : ", ") + std::string(g.name);
  }
  throw UserError("no cost model for GPU '" + std::string(name) + "' (known: " + known + ", sm_80, sm_90a)");
}

namespace {

int64_t bytes_of(const TensorType& t) { return t.shape.numel() * dtype_bytes(t.dtype); }

bool is_16_bit(DType d) { return d == DType::f16 || d == DType::bf16; }

}  // namespace

void add_flops(const Graph& g, const Op& op, double reps, double& tensor, double& fma) {
  const OpInfo& info = op_info(op.kind);
  if (op.kind == OpKind::thread_graph) {
    const Graph& tg = g.bodies[static_cast<size_t>(op.attrs.body)];
    for (const Op& t : tg.ops) add_flops(tg, t, reps, tensor, fma);
    return;
  }
  switch (info.category) {
    case OpCategory::matmul: {
      const TensorType& a = g.type(op.inputs[0]);
      const double flops = 2.0 * static_cast<double>(g.type(op.outputs[0]).shape.numel()) *
                           static_cast<double>(a.shape[a.shape.rank() - 1]) * reps;
      // Tensor cores take 16-bit operands; an accumulated tile holds f32 sums (holds_f32_sums).
      const bool tensor_cores =
          is_16_bit(a.dtype) && is_16_bit(g.type(op.inputs[1]).dtype) &&
          (g.level != Level::block || (!holds_f32_sums(g, op.inputs[0]) && !holds_f32_sums(g, op.inputs[1])));
      (tensor_cores ? tensor : fma) += flops;
      break;
    }
    case OpCategory::reduction:
      fma += static_cast<double>(g.type(op.inputs[0]).shape.numel()) * reps;
      break;
    case OpCategory::unary:
    case OpCategory::binary:
      fma += static_cast<double>(g.type(op.outputs[0]).shape.numel()) * reps;
      break;
    default:
      break;
  }
}

namespace {

void finish(KernelCost& k) {
  const std::pair<double, const char*> terms[] = {
      {k.dram_us, "dram"},     {k.l2_us, "l2"},   {k.sm_load_us, "sm_load"}, {k.shared_us, "shared"},
      {k.tensor_us, "tensor"}, {k.fma_us, "fma"}, {k.pieces_us, "pieces"}};
  const auto* top = std::max_element(std::begin(terms), std::end(terms),
                                     [](const auto& a, const auto& b) { return a.first < b.first; });
  k.bound = top->second;
  k.total_us = k.launch_us + top->first + k.issue_us + k.barrier_us + k.pipeline_us;
}

KernelCost graph_defined_cost(const Graph& g, const Op& op, const GpuSpec& gpu) {
  const Graph& body = g.bodies[static_cast<size_t>(op.attrs.body)];
  KernelCost k;
  k.kind = "graph-defined";
  k.blocks = body.grid.volume();
  const int64_t threads = std::max<int64_t>(1, body.threads.volume());
  // Residency by the shared memory the code generator gives the block (its memory plan, with the
  // pipeline's second buffers where the loop is pipelined).
  const Target target = require_target(gpu.name);
  const BlockSchedule schedule = schedule_block_ops(body);
  const int64_t two_stages = pipelined_bytes(body, schedule, target);
  k.pipelined = two_stages > 0;
  const int64_t smem = k.pipelined ? two_stages : planned_bytes(body, schedule, 1, target);
  k.resident_blocks_per_sm = resident_blocks_per_sm(gpu, threads, smem);
  k.blocks_on_busiest_sm = blocks_on_busiest_sm(k.blocks, gpu);

  // One block's work: tiles loaded (loop-invariant ones once, the others every iteration),
  // tiles stored, FLOPs, and barriers (between the steps of the op order the emitter uses,
  // op_order.h, and one per iteration).
  double moved = 0, moved_per_iteration = 0, tensor = 0, fma = 0, pieces = 0;
  for (size_t i = 0; i < body.ops.size(); ++i) {
    const Op& b = body.ops[i];
    if (schedule.phase[i] == OpPhase::dead) continue;
    const bool once = schedule.phase[i] == OpPhase::post || schedule.phase[i] == OpPhase::pre;
    const double reps = once ? 1.0 : static_cast<double>(body.forloop);
    if (b.kind == OpKind::input_iterator) {
      const TensorType& type = body.type(b.outputs[0]);
      const double tile = static_cast<double>(bytes_of(type));
      const bool streamed = b.attrs.fmap != kPhi && body.forloop > 1;
      const double times = streamed ? static_cast<double>(body.forloop) : 1.0;
      moved += tile * times;
      moved_per_iteration += tile;
      pieces += times * tile_pieces(type.shape, body.params[static_cast<size_t>(b.attrs.io_index)].shape,
                                    dtype_bytes(type.dtype));
      continue;
    }
    if (b.kind == OpKind::output_saver) {
      const TensorType& type = body.type(b.inputs[0]);
      moved += static_cast<double>(bytes_of(type));
      pieces += tile_pieces(type.shape, g.type(op.outputs[static_cast<size_t>(b.attrs.io_index)]).shape,
                            dtype_bytes(type.dtype));
      continue;
    }
    add_flops(body, b, reps, tensor, fma);
  }
  const double barriers = static_cast<double>(block_barriers(body, schedule));
  const double busiest = static_cast<double>(k.blocks_on_busiest_sm);
  const double sms = static_cast<double>(gpu.sms);

  k.launch_us = gpu.launch_us;
  k.dram_us = static_cast<double>(kernel_device_bytes(g, op)) / gpu.dram_bytes_per_us;
  const LoadTerms loads = load_terms(k.blocks, moved, gpu);
  k.l2_us = loads.l2_us;
  k.sm_load_us = loads.sm_load_us;
  k.shared_us = busiest * static_cast<double>(shared_traffic_bytes(body, schedule)) /
                (gpu.smem_bytes_per_clock * gpu.clock_ghz * 1e3);
  k.tensor_us = busiest * tensor / (gpu.tensor_flops_per_us / sms);
  k.fma_us = busiest * fma / (gpu.fma_flops_per_us / sms);
  k.pieces_us = static_cast<double>(k.blocks) * pieces / gpu.pieces_per_us;
  const double rounds =
      static_cast<double>((k.blocks_on_busiest_sm + k.resident_blocks_per_sm - 1) / k.resident_blocks_per_sm);
  // The tile ops' instructions: each thread's share of a block's CUDA-core work, at the latency of
  // an element while its warp has its scheduler (of 4 per SM) to itself, at the issue cost of every
  // warp there once enough share it.
  const double warps_per_scheduler =
      static_cast<double>(std::min(k.blocks_on_busiest_sm, k.resident_blocks_per_sm) * threads) / 128.0;
  const double cycles_per_element =
      std::max(gpu.element_latency_cycles, warps_per_scheduler * gpu.element_issue_cycles);
  k.issue_us = rounds * fma / static_cast<double>(threads) * cycles_per_element / (gpu.clock_ghz * 1e3);
  k.barrier_us = rounds * barriers * gpu.barrier_us;
  // The load pipeline hides an iteration's loads behind the previous iteration's work, except
  // where it fills: with loads a and work c per iteration, L iterations take
  // a + (L - 1) max(a, c) + c = L max(a, c) + min(a, c). Per round of resident blocks, the
  // busiest SM thus pays min(a, c) on top of its throughput terms (a loop of one iteration
  // overlaps nothing: its whole load, or its whole work, is exposed).
  const double round_blocks = static_cast<double>(std::min(k.blocks_on_busiest_sm, k.resident_blocks_per_sm));
  const double loads_per_iteration =
      round_blocks * moved_per_iteration / (gpu.dram_bytes_per_us / sms * gpu.sm_load_share);
  const double work_per_iteration =
      std::max({k.shared_us, k.tensor_us, k.fma_us}) / busiest * round_blocks / static_cast<double>(body.forloop);
  // Without a pipeline (loop_pipelined) a block's iteration waits for its loads, then works:
  // alone on its SM it exposes min(a, c) in every one of its L iterations (L (a + c) in all);
  // blocks resident together fill each other's gaps, which the model takes to hide all but
  // 1 / (blocks) of it, never less than the pipeline's fill.
  const double exposed = std::min(loads_per_iteration, work_per_iteration);
  k.pipeline_us =
      rounds * (k.pipelined ? exposed : std::max(exposed, exposed * static_cast<double>(body.forloop) / round_blocks));
  finish(k);
  return k;
}

KernelCost pre_defined_cost(const Graph& g, const Op& op, const GpuSpec& gpu) {
  KernelCost k;
  k.kind = std::string(op_name(op.kind));
  if (kernel_op_is_view(g, op)) {
    k.kind += " (view)";
    finish(k);
    return k;
  }
  k.blocks = gpu.sms;
  double tensor = 0, fma = 0;
  add_flops(g, op, 1.0, tensor, fma);
  k.launch_us = gpu.launch_us;
  // A matmul runs in cuBLAS, which does not reach the peak on these shapes; the element-wise and
  // reduction kernels are generated and stream at the rate the graph-defined kernels' dram term takes.
  k.dram_share = op.kind == OpKind::matmul ? gpu.cublas_dram_share : 1.0;
  k.dram_us = static_cast<double>(kernel_device_bytes(g, op)) / (gpu.dram_bytes_per_us * k.dram_share);
  k.tensor_us = tensor / gpu.tensor_flops_per_us;
  k.fma_us = fma / gpu.fma_flops_per_us;
  finish(k);
  return k;
}

}  // namespace

double tile_pieces(const Shape& tile, const Shape& whole, int64_t element_bytes) {
  int64_t run = 1;
  for (int d = tile.rank() - 1; d >= 0; --d) {
    run *= tile[d];
    if (tile[d] != whole[d]) break;
  }
  if (run == 0) return 0;
  return static_cast<double>(tile.numel() / run) * static_cast<double>((run * element_bytes + 127) / 128);
}

bool kernel_op_is_view(const Graph& g, const Op& op) {
  if (g.level != Level::kernel || op.kind != OpKind::reshape) return false;
  const auto times_output = [&](TensorId t) { return std::count(g.outputs.begin(), g.outputs.end(), t); };
  if (times_output(op.outputs[0]) == 0) return true;
  // A program output: its operand can be made in the output's buffer instead, if a kernel of its
  // own makes it (no input, no other view) and nothing else reads it.
  const TensorId in = op.inputs[0];
  const Op& maker = g.op(g.tensor(in).producer);
  if (times_output(op.outputs[0]) != 1 || times_output(in) != 0 || maker.kind == OpKind::input ||
      maker.kind == OpKind::reshape)
    return false;
  const std::vector<bool> live = live_ops(g);
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (live[i] && &g.ops[i] != &op &&
        std::find(g.ops[i].inputs.begin(), g.ops[i].inputs.end(), in) != g.ops[i].inputs.end())
      return false;
  return true;
}

int64_t kernel_device_bytes(const Graph& g, const Op& op) {
  if (kernel_op_is_view(g, op)) return 0;
  int64_t bytes = 0;
  std::set<int32_t> read;
  for (TensorId t : op.inputs)
    if (read.insert(t.value).second) bytes += bytes_of(g.type(t));
  for (TensorId t : op.outputs) bytes += bytes_of(g.type(t));
  return bytes;
}

KernelCost estimate_kernel_cost(const Graph& g, const Op& op, const GpuSpec& gpu) {
  MUGRAPH_CHECK(g.level == Level::kernel && op.kind != OpKind::input) << "estimate_kernel_cost takes a kernel op";
  return op.kind == OpKind::graph_kernel ? graph_defined_cost(g, op, gpu) : pre_defined_cost(g, op, gpu);
}

CostEstimate estimate_cost(const Graph& g, const GpuSpec& gpu) {
  MUGRAPH_CHECK(g.level == Level::kernel) << "estimate_cost takes a kernel graph";
  CostEstimate e;
  for (const Op& op : g.ops) {
    if (op.kind == OpKind::input) continue;
    e.kernels.push_back(estimate_kernel_cost(g, op, gpu));
    e.total_us += e.kernels.back().total_us;
  }
  return e;
}

LoadTerms load_terms(int64_t blocks, double bytes_per_block, const GpuSpec& gpu) {
  const double sms = static_cast<double>(gpu.sms);
  const double busiest = static_cast<double>(blocks_on_busiest_sm(blocks, gpu));
  return {static_cast<double>(blocks) * bytes_per_block / gpu.l2_bytes_per_us,
          busiest * bytes_per_block / (gpu.dram_bytes_per_us / sms * gpu.sm_load_share)};
}

double cost_lower_bound_us(int64_t device_bytes, int kernels, const GpuSpec& gpu) {
  return static_cast<double>(kernels) * gpu.launch_us + static_cast<double>(device_bytes) / gpu.dram_bytes_per_us;
}

std::string CostEstimate::str() const {
  std::string s;
  char line[512];
  for (size_t i = 0; i < kernels.size(); ++i) {
    const KernelCost& k = kernels[i];
    if (k.kind == "graph-defined")
      std::snprintf(line, sizeof line,
                    "kernel %zu graph-defined: %.2f us (%s-bound; launch %.2f, dram %.2f, l2 %.2f, sm_load %.2f, "
                    "shared %.2f, tensor %.2f, fma %.2f, pieces %.2f, issue %.2f, barrier %.2f, pipeline %.2f; "
                    "%lld blocks, %lld on the busiest SM, %lld resident%s)\n",
                    i, k.total_us, k.bound.c_str(), k.launch_us, k.dram_us, k.l2_us, k.sm_load_us, k.shared_us,
                    k.tensor_us, k.fma_us, k.pieces_us, k.issue_us, k.barrier_us, k.pipeline_us,
                    static_cast<long long>(k.blocks), static_cast<long long>(k.blocks_on_busiest_sm),
                    static_cast<long long>(k.resident_blocks_per_sm), k.pipelined ? ", loop pipelined" : "");
    else
      std::snprintf(line, sizeof line,
                    "kernel %zu %s: %.2f us (%s-bound; launch %.2f, dram %.2f, tensor %.2f, fma %.2f; dram at "
                    "%.2f of peak)\n",
                    i, k.kind.c_str(), k.total_us, k.bound.c_str(), k.launch_us, k.dram_us, k.tensor_us, k.fma_us,
                    k.dram_share);
    s += line;
  }
  return s;
}

}  // namespace mugraph
