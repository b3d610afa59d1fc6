// Operator order of a block graph: steps of longest-path depth (op_order.h).
#include "mugraph/op_order.h"

#include <algorithm>

#include "block_structure.h"

namespace mugraph {

namespace {

/// Per op: whether it folds into the sum that reads its result (op_order.h): element-wise of
/// one operand, with one result that exactly one live op reads, a sum. One pass counts each
/// tensor's live readers.
std::vector<bool> folded_ops(const Graph& g, const std::vector<bool>& live) {
  std::vector<int32_t> readers(g.tensors.size(), 0);
  std::vector<bool> read_by_sum(g.tensors.size(), false);
  for (size_t j = 0; j < g.ops.size(); ++j) {
    if (!live[j]) continue;
    const bool sum = op_info(g.ops[j].kind).category == OpCategory::reduction;
    for (TensorId t : g.ops[j].inputs) {
      ++readers[t.index()];
      read_by_sum[t.index()] = read_by_sum[t.index()] || sum;
    }
  }
  std::vector<bool> folded(g.ops.size(), false);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (!live[i] || op_info(op.kind).category != OpCategory::unary || op.outputs.size() != 1) continue;
    const size_t r = op.outputs[0].index();
    folded[i] = readers[r] == 1 && read_by_sum[r];
  }
  return folded;
}

}  // namespace

BlockSchedule schedule_block_ops(const Graph& g) {
  MUGRAPH_CHECK(g.level == Level::block) << "schedule_block_ops takes a block graph";
  BlockSchedule s;
  const std::vector<interp::BlockPhase> phases = interp::block_phases(g);
  s.phase.resize(g.ops.size());
  s.step.assign(g.ops.size(), -1);
  std::vector<bool> live(g.ops.size());
  for (size_t i = 0; i < g.ops.size(); ++i) live[i] = phases[i] != interp::BlockPhase::dead;
  s.folded = folded_ops(g, live);
  // ready[t]: the first step of the reading op's phase at which tensor t may be read; values from
  // the loop read after it are ready at once (the loop's last barrier separates the phases).
  std::vector<int32_t> ready(g.tensors.size(), 0);
  std::vector<OpPhase> made_in(g.tensors.size(), OpPhase::loop);
  // invariant[t]: tensor t holds the same value in every iteration (a tile loaded once, or an
  // op's result computed from such tiles alone).
  std::vector<bool> invariant(g.tensors.size(), false);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    OpPhase p = phases[i] == interp::BlockPhase::dead   ? OpPhase::dead
                : phases[i] == interp::BlockPhase::loop ? OpPhase::loop
                                                        : OpPhase::post;
    if (p == OpPhase::loop && g.forloop > 1) {
      if (op.kind == OpKind::input_iterator) {
        if (op.attrs.fmap == kPhi)
          for (TensorId t : op.outputs) invariant[t.index()] = true;
      } else if (op.kind != OpKind::output_saver && op.kind != OpKind::accum && !op.inputs.empty() &&
                 std::all_of(op.inputs.begin(), op.inputs.end(), [&](TensorId t) { return invariant[t.index()]; })) {
        p = OpPhase::pre;
        for (TensorId t : op.outputs) invariant[t.index()] = true;
      }
    }
    s.phase[i] = p;
    if (p == OpPhase::dead) continue;
    int32_t step = 0;
    for (TensorId t : op.inputs)
      if (made_in[t.index()] == p) step = std::max(step, ready[t.index()]);
    s.step[i] = step;
    // A reshape is an alias, and a folded op runs inside its reader: their readers wait for what
    // their operand waits for. An accumulator runs in the loop; its result is read after it,
    // from the first step on.
    const bool accumulated = op.kind == OpKind::accum && g.forloop > 1;
    const int32_t out_ready = accumulated ? 0 : op.kind == OpKind::reshape || s.folded[i] ? step : step + 1;
    for (TensorId t : op.outputs) {
      ready[t.index()] = out_ready;
      made_in[t.index()] = accumulated ? OpPhase::post : p;
    }
    int32_t& steps = p == OpPhase::post ? s.post_steps : p == OpPhase::pre ? s.pre_steps : s.loop_steps;
    steps = std::max(steps, step + 1);
  }
  // Tiles loaded once (loop ops of step 0) run first: the pre phase reads them.
  auto loaded_once = [&](size_t i) {
    return g.forloop > 1 && s.phase[i] == OpPhase::loop && g.ops[i].kind == OpKind::input_iterator &&
           g.ops[i].attrs.fmap == kPhi;
  };
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (loaded_once(i)) s.order.push_back(static_cast<int32_t>(i));
  for (const OpPhase p : {OpPhase::pre, OpPhase::loop, OpPhase::post}) {
    std::vector<int32_t> ops;
    for (size_t i = 0; i < g.ops.size(); ++i)
      if (s.phase[i] == p && !loaded_once(i)) ops.push_back(static_cast<int32_t>(i));
    std::stable_sort(ops.begin(), ops.end(), [&](int32_t a, int32_t b) {
      return s.step[static_cast<size_t>(a)] < s.step[static_cast<size_t>(b)];
    });
    s.order.insert(s.order.end(), ops.begin(), ops.end());
  }
  return s;
}

bool holds_f32_sums(const Graph& g, TensorId t) {
  for (;;) {
    const OpId made = g.tensor(t).producer;
    if (!made.valid()) return false;
    const Op& op = g.op(made);
    if (op.kind == OpKind::accum) return op.attrs.dim == kPhi;
    if (op.kind != OpKind::reshape) return false;
    t = op.inputs[0];
  }
}

std::vector<TensorLifetime> tensor_lifetimes(const Graph& g, const BlockSchedule& s, bool pipelined_loads) {
  std::vector<TensorLifetime> life(g.tensors.size());
  auto owner = [&](TensorId t) {
    size_t i = t.index();
    while (life[i].alias_of >= 0) i = static_cast<size_t>(life[i].alias_of);
    return i;
  };
  const bool loop = g.forloop > 1;
  const int32_t loop_end = s.time(OpPhase::loop, std::max(0, s.loop_steps - 1));
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (s.phase[i] == OpPhase::dead) continue;
    const int32_t now = s.time(s.phase[i], s.step[i]);
    for (TensorId t : op.inputs) {
      TensorLifetime& l = life[owner(t)];
      l.last = std::max(l.last, now);
    }
    for (TensorId t : op.outputs) {
      TensorLifetime& l = life[t.index()];
      if (op.kind == OpKind::reshape || s.folded[i]) {
        l.alias_of = op.inputs[0].value;
        continue;
      }
      l.stored = true;
      l.first = l.last = now;
      // Values that must outlive an iteration hold their bytes over the whole loop (from the
      // start: tiles loaded once and the pipeline's first loads are issued before the pre phase).
      const bool carried = loop && s.phase[i] == OpPhase::loop &&
                           (op.kind == OpKind::accum ||
                            (op.kind == OpKind::input_iterator && (op.attrs.fmap == kPhi || pipelined_loads)));
      if (carried) {
        l.first = 0;
        l.last = std::max(l.last, loop_end);
      }
    }
  }
  // A value of the pre phase that the loop reads is read in every iteration: it holds its bytes
  // until the loop ends.
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (s.phase[i] != OpPhase::loop) continue;
    for (TensorId t : g.ops[i].inputs) {
      TensorLifetime& l = life[owner(t)];
      if (l.stored && l.first < s.pre_steps) l.last = std::max(l.last, loop_end);
    }
  }
  return life;
}

int64_t block_barriers(const Graph& g, const BlockSchedule& s) {
  int64_t n = 0;
  const bool loop = g.forloop > 1;
  bool hoisted = false;
  for (size_t i = 0; i < g.ops.size(); ++i)
    hoisted = hoisted || (loop && s.phase[i] == OpPhase::loop && g.ops[i].kind == OpKind::input_iterator &&
                          g.ops[i].attrs.fmap == kPhi);
  n += hoisted;
  n += s.pre_steps;  // between its steps, and one before the loop
  const int64_t per_iteration = std::max(0, s.loop_steps - 1) + (loop ? 1 : 0);
  n += per_iteration * g.forloop;
  n += std::max(0, s.post_steps - 1);
  return n;
}

}  // namespace mugraph
