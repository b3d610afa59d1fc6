// Ranking of a complete μGraph: the cost model's estimate, then tie-breaking metrics (search.h).
#include <algorithm>
#include <vector>

#include "block_structure.h"
#include "mugraph/block_threads.h"
#include "mugraph/fuse_thread_graphs.h"
#include "mugraph/search.h"

namespace mugraph {

CandidateMetrics candidate_metrics(const Graph& g, const Target& target) {
  CandidateMetrics m;
  auto bytes = [&](TensorId t) {
    const TensorType& type = g.type(t);
    return type.shape.numel() * dtype_bytes(type.dtype);
  };
  for (const Op& op : g.ops) {
    if (op.kind == OpKind::input || kernel_op_is_view(g, op)) continue;
    ++m.kernels;
    m.device_bytes += kernel_device_bytes(g, op);
    if (op.kind != OpKind::graph_kernel) {
      for (TensorId t : op.inputs) m.load_bytes_per_sm += bytes(t) / target.sms;
      continue;
    }
    ++m.graph_defined_kernels;
    const Graph& body = g.bodies[static_cast<size_t>(op.attrs.body)];
    const int64_t blocks = body.grid.volume();
    int64_t loads = 0;
    for (const Op& b : body.ops)
      if (b.kind == OpKind::input_iterator) {
        const TensorType& tile = body.type(b.outputs[0]);
        loads += tile.shape.numel() * dtype_bytes(tile.dtype) * body.forloop * blocks;
      }
    m.load_bytes_per_sm += loads / std::min(blocks, target.sms);
    for (const Op& b : body.ops) m.block_ops += b.kind != OpKind::output_saver;
    m.shared_traffic_bytes_per_sm += block_shared_traffic_bytes(body) * blocks / std::min(blocks, target.sms);
    m.shared_memory_bytes = std::max(m.shared_memory_bytes, block_shared_memory_bytes(body));
  }
  return m;
}

double rank_estimate_us(const Graph& g, const GpuSpec& gpu) {
  return estimate_cost(choose_block_threads(fuse_thread_graphs(g), gpu), gpu).total_us;
}

namespace {

/// What kernel `k` costs beyond cost_lower_bound_us's share of it: its launch and its bytes at
/// the peak (a cuBLAS matmul's dram term takes them at its share of it, dram_share, and the
/// difference is extra too).
double floor_extra_of(const KernelCost& k) {
  return std::max(0.0, k.total_us - k.launch_us - k.dram_us * k.dram_share);
}

}  // namespace

double kernels_floor_extra_us(const Graph& g, const GpuSpec& gpu) {
  Graph ranked = fuse_thread_graphs(g);
  double extra = 0;
  for (size_t i = 0; i < ranked.ops.size(); ++i) {
    if (ranked.ops[i].kind == OpKind::input) continue;
    choose_kernel_threads(ranked, i, gpu);
    extra += floor_extra_of(estimate_kernel_cost(ranked, ranked.ops[i], gpu));
  }
  return extra;
}

double last_kernel_floor_extra_us(const Graph& g, const GpuSpec& gpu) {
  MUGRAPH_CHECK(!g.ops.empty() && g.ops.back().kind != OpKind::input) << "last_kernel_floor_extra_us: no kernel";
  const Op& op = g.ops.back();
  if (op.kind != OpKind::graph_kernel) return floor_extra_of(estimate_kernel_cost(g, op, gpu));
  Graph ranked = g;
  Graph& body = ranked.bodies[static_cast<size_t>(op.attrs.body)];
  body = fuse_block_graph(body);
  choose_kernel_threads(ranked, ranked.ops.size() - 1, gpu);
  return floor_extra_of(estimate_kernel_cost(ranked, ranked.ops.back(), gpu));
}

int64_t SearchStats::total_pruned() const {
  int64_t n = 0;
  for (const auto& [reason, count] : pruned) n += count;
  return n;
}

void SearchStats::add(const SearchStats& o) {
  states += o.states;
  kernel_states += o.kernel_states;
  block_configs += o.block_configs;
  for (const auto& [reason, count] : o.pruned) pruned[reason] += count;
  candidates += o.candidates;
  verified += o.verified;
  rejected += o.rejected;
  tasks += o.tasks;
  oracle_queries += o.oracle_queries;
  block_replays += o.block_replays;
}

void RetileStats::add(const RetileStats& o) {
  seeds += o.seeds;
  configs += o.configs;
  rebuilt += o.rebuilt;
  complete += o.complete;
  kept += o.kept;
  seconds += o.seconds;
  stopped |= o.stopped;
}

std::string_view cost_bound_name(CostBound b) {
  switch (b) {
    case CostBound::bytes:
      return "bytes";
    case CostBound::model:
      return "model";
    case CostBound::both:
      return "both";
  }
  return "?";
}

CostBound require_cost_bound(std::string_view name) {
  for (CostBound b : {CostBound::bytes, CostBound::model, CostBound::both})
    if (cost_bound_name(b) == name) return b;
  throw UserError("unknown cost bound '" + std::string(name) + "'; the cost bounds are bytes, model and both");
}

std::string_view stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::exhausted:
      return "exhausted";
    case StopReason::time_limit:
      return "time_limit";
    case StopReason::interrupted:
      return "interrupted";
    case StopReason::memory_limit:
      return "memory_limit";
  }
  return "?";
}

}  // namespace mugraph
