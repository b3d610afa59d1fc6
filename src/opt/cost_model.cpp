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
//   barrier  the busiest SM's block barriers (between the steps of the op order, op_order.h),
//            the blocks resident together overlapping theirs;
//   pipeline what the load pipeline cannot hide: per round of resident blocks, the smaller of
//            one iteration's loads and one iteration's work (see graph_defined_cost).
// The kernel costs launch + max(dram, l2, sm_load, shared, tensor, fma) + barrier + pipeline. A
// pre-defined kernel (cuBLAS or a generated element-wise kernel) spreads over the whole GPU:
// launch + max(dram, tensor, fma) over the whole device.
//
// Every term grows with bytes and FLOPs, so the estimate is monotone in both; every kernel costs
// at least launch + its dram term, which is what cost_lower_bound_us sums.
#include "mugraph/cost_model.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "block_structure.h"
#include "mugraph/error.h"
#include "mugraph/op_order.h"
#include "mugraph/search.h"
#include "mugraph/validate.h"

namespace mugraph {

int64_t block_shared_traffic_bytes(const Graph& body) {
  auto bytes = [&](TensorId t) {
    const TensorType& type = body.type(t);
    return type.shape.numel() * dtype_bytes(type.dtype);
  };
  // Ops after the loop run once, the others once per iteration (block_structure.h).
  const std::vector<interp::BlockPhase> phase = interp::block_phases(body);
  int64_t traffic = 0;
  for (size_t i = 0; i < body.ops.size(); ++i) {
    const Op& op = body.ops[i];
    if (phase[i] == interp::BlockPhase::dead) continue;
    // Iterators and savers move device bytes (load_bytes_per_sm, device_bytes); a concat is a
    // placement (its operands are written into adjacent parts of one buffer); an accumulator
    // lives in registers.
    if (op.kind == OpKind::input_iterator || op.kind == OpKind::output_saver || op.kind == OpKind::concat ||
        op.kind == OpKind::accum)
      continue;
    int64_t op_bytes = 0;
    std::set<int32_t> read;
    for (TensorId t : op.inputs)
      if (read.insert(t.value).second) op_bytes += bytes(t);
    for (TensorId t : op.outputs) op_bytes += bytes(t);
    traffic += op_bytes * (phase[i] == interp::BlockPhase::post ? 1 : body.forloop);
  }
  return traffic;
}

const std::vector<GpuSpec>& gpu_specs() {
  // Peaks from NVIDIA's data sheets (A100 SXM4 80 GB, H100 SXM5, H200 SXM): SMs, boost clock,
  // HBM bandwidth, dense f16 tensor and f32 CUDA-core FLOPs, shared memory per SM. Assumed until
  // calibrated against timings: L2 at about 2.5× H100's HBM (A100: 2.5× its own), one SM
  // reaching 3× its share of HBM bandwidth, 128 bytes per clock of shared memory per SM, a
  // launch of 3 µs (A100) or 2.5 µs (H100, H200) and a barrier of 20 ns.
  static const std::vector<GpuSpec> specs = {
      {"a100", 108, 1.41, 2.039e6, 5.1e6, 3.0, 128, 312e6, 19.5e6, 167936, 2048, 32, 3.0, 0.02},
      {"h100", 132, 1.98, 3.35e6, 8.4e6, 3.0, 128, 989e6, 66.9e6, 233472, 2048, 32, 2.5, 0.02},
      {"h200", 132, 1.98, 4.8e6, 8.4e6, 3.0, 128, 989e6, 66.9e6, 233472, 2048, 32, 2.5, 0.02},
  };
  return specs;
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

/// FLOPs of one op: a matmul 2·M·N·K per batch (on tensor cores when both operands are 16-bit),
/// a reduction one per input element, other compute ops one per output element; a thread graph
/// the sum of its ops. Iterators, savers, accumulators and layout ops: none.
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
      (is_16_bit(a.dtype) && is_16_bit(g.type(op.inputs[1]).dtype) ? tensor : fma) += flops;
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

void finish(KernelCost& k) {
  const std::pair<double, const char*> terms[] = {{k.dram_us, "dram"},       {k.l2_us, "l2"},
                                                  {k.sm_load_us, "sm_load"}, {k.shared_us, "shared"},
                                                  {k.tensor_us, "tensor"},   {k.fma_us, "fma"}};
  const auto* top = std::max_element(std::begin(terms), std::end(terms),
                                     [](const auto& a, const auto& b) { return a.first < b.first; });
  k.bound = top->second;
  k.total_us = k.launch_us + top->first + k.barrier_us + k.pipeline_us;
}

KernelCost graph_defined_cost(const Graph& g, const Op& op, const GpuSpec& gpu) {
  const Graph& body = g.bodies[static_cast<size_t>(op.attrs.body)];
  KernelCost k;
  k.kind = "graph-defined";
  k.blocks = body.grid.volume();
  const int64_t threads = std::max<int64_t>(1, body.threads.volume());
  const int64_t smem = block_shared_memory_bytes(body);
  int64_t resident = std::min(gpu.blocks_per_sm, gpu.threads_per_sm / threads);
  if (smem > 0) resident = std::min(resident, gpu.shared_memory_per_sm / smem);
  k.resident_blocks_per_sm = std::max<int64_t>(1, resident);
  k.blocks_on_busiest_sm = (k.blocks + gpu.sms - 1) / gpu.sms;

  // One block's work: tiles loaded (loop-invariant ones once, the others every iteration),
  // tiles stored, FLOPs, and barriers (between the steps of the op order the emitter uses,
  // op_order.h, and one per iteration).
  const BlockSchedule schedule = schedule_block_ops(body);
  double moved = 0, moved_per_iteration = 0, tensor = 0, fma = 0;
  for (size_t i = 0; i < body.ops.size(); ++i) {
    const Op& b = body.ops[i];
    if (schedule.phase[i] == OpPhase::dead) continue;
    const bool post = schedule.phase[i] == OpPhase::post;
    const double reps = post ? 1.0 : static_cast<double>(body.forloop);
    if (b.kind == OpKind::input_iterator) {
      const double tile = static_cast<double>(bytes_of(body.type(b.outputs[0])));
      moved += tile * (b.attrs.fmap == kPhi ? 1.0 : static_cast<double>(body.forloop));
      moved_per_iteration += tile;
      continue;
    }
    if (b.kind == OpKind::output_saver) {
      moved += static_cast<double>(bytes_of(body.type(b.inputs[0])));
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
  k.shared_us = busiest * static_cast<double>(block_shared_traffic_bytes(body)) /
                (gpu.smem_bytes_per_clock * gpu.clock_ghz * 1e3);
  k.tensor_us = busiest * tensor / (gpu.tensor_flops_per_us / sms);
  k.fma_us = busiest * fma / (gpu.fma_flops_per_us / sms);
  const double rounds =
      static_cast<double>((k.blocks_on_busiest_sm + k.resident_blocks_per_sm - 1) / k.resident_blocks_per_sm);
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
  k.pipeline_us = rounds * std::min(loads_per_iteration, work_per_iteration);
  finish(k);
  return k;
}

KernelCost pre_defined_cost(const Graph& g, const Op& op, const GpuSpec& gpu) {
  KernelCost k;
  k.kind = std::string(op_name(op.kind));
  k.blocks = gpu.sms;
  double tensor = 0, fma = 0;
  add_flops(g, op, 1.0, tensor, fma);
  k.launch_us = gpu.launch_us;
  k.dram_us = static_cast<double>(kernel_device_bytes(g, op)) / gpu.dram_bytes_per_us;
  k.tensor_us = tensor / gpu.tensor_flops_per_us;
  k.fma_us = fma / gpu.fma_flops_per_us;
  finish(k);
  return k;
}

}  // namespace

int64_t kernel_device_bytes(const Graph& g, const Op& op) {
  int64_t bytes = 0;
  std::set<int32_t> read;
  for (TensorId t : op.inputs)
    if (read.insert(t.value).second) bytes += bytes_of(g.type(t));
  for (TensorId t : op.outputs) bytes += bytes_of(g.type(t));
  return bytes;
}

CostEstimate estimate_cost(const Graph& g, const GpuSpec& gpu) {
  MUGRAPH_CHECK(g.level == Level::kernel) << "estimate_cost takes a kernel graph";
  CostEstimate e;
  for (const Op& op : g.ops) {
    if (op.kind == OpKind::input) continue;
    e.kernels.push_back(op.kind == OpKind::graph_kernel ? graph_defined_cost(g, op, gpu)
                                                        : pre_defined_cost(g, op, gpu));
    e.total_us += e.kernels.back().total_us;
  }
  return e;
}

LoadTerms load_terms(int64_t blocks, double bytes_per_block, const GpuSpec& gpu) {
  const double sms = static_cast<double>(gpu.sms);
  const double busiest = static_cast<double>((blocks + gpu.sms - 1) / gpu.sms);
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
                    "shared %.2f, tensor %.2f, fma %.2f, barrier %.2f, pipeline %.2f; %lld blocks, %lld on the "
                    "busiest SM, %lld resident)\n",
                    i, k.total_us, k.bound.c_str(), k.launch_us, k.dram_us, k.l2_us, k.sm_load_us, k.shared_us,
                    k.tensor_us, k.fma_us, k.barrier_us, k.pipeline_us, static_cast<long long>(k.blocks),
                    static_cast<long long>(k.blocks_on_busiest_sm), static_cast<long long>(k.resident_blocks_per_sm));
    else
      std::snprintf(line, sizeof line,
                    "kernel %zu %s: %.2f us (%s-bound; launch %.2f, dram %.2f, tensor %.2f, fma %.2f)\n", i,
                    k.kind.c_str(), k.total_us, k.bound.c_str(), k.launch_us, k.dram_us, k.tensor_us, k.fma_us);
    s += line;
  }
  return s;
}

}  // namespace mugraph
