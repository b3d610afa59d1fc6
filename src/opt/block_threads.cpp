// Threads per block of each graph-defined kernel, by the cost model (block_threads.h).
#include "mugraph/block_threads.h"

#include "mugraph/error.h"
#include "mugraph/validate.h"

namespace mugraph {

void choose_kernel_threads(Graph& g, size_t op_index, const GpuSpec& gpu) {
  MUGRAPH_CHECK(g.level == Level::kernel && op_index < g.ops.size()) << "choose_kernel_threads takes a kernel op";
  const Op& op = g.ops[op_index];
  if (op.kind != OpKind::graph_kernel) return;
  Graph& body = g.bodies[static_cast<size_t>(op.attrs.body)];
  if (body.threads != Dim3{kBlockThreadChoices[0], 1, 1}) return;
  const Target target = require_target(gpu.name);
  double best = estimate_kernel_cost(g, op, gpu).total_us;
  int64_t chosen = kBlockThreadChoices[0];
  for (int64_t threads : kBlockThreadChoices) {
    if (threads == kBlockThreadChoices[0]) continue;
    body.threads = Dim3{threads, 1, 1};
    // More warpgroups stage more wgmma operands: a count whose shared memory does not fit is
    // no choice (QKNorm bs 1's kernel needed 252 KiB with 512 threads, 2026-11-27).
    if (planned_shared_bytes(body, 1, target) > target.shared_memory_bytes) continue;
    const double t = estimate_kernel_cost(g, op, gpu).total_us;
    if (t < best * (1.0 - kBlockThreadsMinGain)) {
      best = t;
      chosen = threads;
    }
  }
  body.threads = Dim3{chosen, 1, 1};
}

Graph choose_block_threads(const Graph& kernel_graph, const GpuSpec& gpu) {
  MUGRAPH_CHECK(kernel_graph.level == Level::kernel) << "choose_block_threads takes a kernel graph";
  Graph g = kernel_graph;
  for (size_t i = 0; i < g.ops.size(); ++i) choose_kernel_threads(g, i, gpu);
  return g;
}

}  // namespace mugraph
