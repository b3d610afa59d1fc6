// Threads per block of each graph-defined kernel, by the cost model (block_threads.h).
#include "mugraph/block_threads.h"

#include "mugraph/error.h"
#include "mugraph/validate.h"

namespace mugraph {

Graph choose_block_threads(const Graph& kernel_graph, const GpuSpec& gpu) {
  MUGRAPH_CHECK(kernel_graph.level == Level::kernel) << "choose_block_threads takes a kernel graph";
  Graph g = kernel_graph;
  const Target target = require_target(gpu.name);
  // Kernels are estimated one at a time: each one's time depends on its own block graph alone.
  size_t kernel = 0;
  for (const Op& op : g.ops) {
    if (op.kind == OpKind::input) continue;
    const size_t this_kernel = kernel++;
    if (op.kind != OpKind::graph_kernel) continue;
    Graph& body = g.bodies[static_cast<size_t>(op.attrs.body)];
    if (body.threads != Dim3{kBlockThreadChoices[0], 1, 1}) continue;
    double best = estimate_cost(g, gpu).kernels[this_kernel].total_us;
    int64_t chosen = kBlockThreadChoices[0];
    for (int64_t threads : kBlockThreadChoices) {
      if (threads == kBlockThreadChoices[0]) continue;
      body.threads = Dim3{threads, 1, 1};
      // More warpgroups stage more wgmma operands: a count whose shared memory does not fit is
      // no choice (QKNorm bs 1's kernel needed 252 KiB with 512 threads, 2026-11-27).
      if (planned_shared_bytes(body, 1, target) > target.shared_memory_bytes) continue;
      const double t = estimate_cost(g, gpu).kernels[this_kernel].total_us;
      if (t < best * (1.0 - kBlockThreadsMinGain)) {
        best = t;
        chosen = threads;
      }
    }
    body.threads = Dim3{chosen, 1, 1};
  }
  return g;
}

}  // namespace mugraph
