// The floor of a growing block graph (growth_floor.h).
#include "growth_floor.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "mugraph/block_threads.h"
#include "mugraph/cost_model.h"

namespace mugraph::search_detail {

GrowthFloor::GrowthFloor(const KernelConfig& config, const ConfigFloor& floor, const GpuSpec& gpu)
    : config_(config), floor_(floor), gpu_(gpu) {}

void GrowthFloor::push(const Graph& bg) {
  const Op& op = bg.ops.back();
  MUGRAPH_CHECK(op.outputs.size() == 1 && op.outputs[0].index() == tensors_.size())
      << "GrowthFloor: ops are pushed as they are appended, one output each";
  before_.push_back(totals_);
  const bool loop = config_.forloop > 1;
  TensorFacts facts;
  if (op.kind == OpKind::input_iterator) {
    // An iterator runs at step 0 of the loop; what it loads is ready at step 1
    // (schedule_block_ops). A tile loaded once is the same in every iteration.
    facts.in_loop = !loop || op.attrs.fmap != kPhi;
    facts.ready = 1;
    totals_.loop_steps = std::max(totals_.loop_steps, 1);
    tensors_.push_back(facts);
    return;
  }
  int step = -1;
  for (TensorId in : op.inputs)
    if (tensors_[in.index()].in_loop) step = std::max(step, tensors_[in.index()].ready);
  // An op that reads a streamed tile runs in every iteration; others may be hoisted before the
  // loop or run after it, once.
  add_flops(bg, op, step >= 0 ? static_cast<double>(config_.forloop) : 1.0, totals_.tensor, totals_.fma);
  if (step >= 0) {
    totals_.loop_steps = std::max(totals_.loop_steps, step + 1);
    // What it makes is ready a step later, except where the op may yet fuse into a thread graph
    // or fold into the sum that reads it (element-wise ops), is an alias (reshape) or a concat;
    // an accumulator's total is read after the loop.
    const OpCategory category = op_info(op.kind).category;
    facts.in_loop = !(op.kind == OpKind::accum && loop);
    facts.ready = step + (category == OpCategory::matmul || category == OpCategory::reduction ? 1 : 0);
  }
  tensors_.push_back(facts);
}

void GrowthFloor::pop() {
  MUGRAPH_CHECK(!before_.empty()) << "GrowthFloor: nothing to pop";
  totals_ = before_.back();
  before_.pop_back();
  tensors_.pop_back();
}

double GrowthFloor::floor_us() const {
  const double busiest = static_cast<double>(blocks_on_busiest_sm(config_.grid.volume(), gpu_));
  const double sms = static_cast<double>(gpu_.sms);
  const double tensor_us = busiest * totals_.tensor / (gpu_.tensor_flops_per_us / sms);
  const double fma_us = busiest * totals_.fma / (gpu_.fma_flops_per_us / sms);
  // graph_defined_cost's issue term, rounds · fma / threads · max(latency, warps per scheduler ·
  // issue cycles), is at least fma · max(latency / most threads, busiest · issue cycles / 128):
  // a round holds at most as many blocks as the busiest SM has.
  const double most_threads = static_cast<double>(std::end(kBlockThreadChoices)[-1]);
  const double cycles_per_flop =
      std::max(gpu_.element_latency_cycles / most_threads, busiest * gpu_.element_issue_cycles / 128.0);
  const double issue_us = totals_.fma * cycles_per_flop / (gpu_.clock_ghz * 1e3);
  // block_barriers: (steps − 1 + 1) per iteration with a loop, steps − 1 without; the busiest SM
  // waits for them once per round of the most blocks it holds.
  const int64_t steps = totals_.loop_steps;
  const double barriers = config_.forloop > 1 ? static_cast<double>(config_.forloop * std::max<int64_t>(1, steps))
                                              : static_cast<double>(std::max<int64_t>(0, steps - 1));
  const double rounds = std::ceil(busiest / static_cast<double>(gpu_.blocks_per_sm));
  return floor_.launch_us + std::max({floor_.loads_us, tensor_us, fma_us}) + issue_us +
         rounds * barriers * gpu_.barrier_us;
}

}  // namespace mugraph::search_detail
