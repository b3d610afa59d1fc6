#include "block_program.h"

#include <string>

#include "half.h"
#include "op_eval.h"
#include "tensor_ops.h"

namespace mugraph::interp {

void FloatValues::copy(const View& src, const MutView& dst) { copy_view(src, dst); }
void FloatValues::add_into(const View& src, const MutView& dst) { interp::add_into(src, dst); }

/// What the float interpreter adds to the executor's walk: which ops a run skips (by Mode), and
/// each compute op on floats.
struct BlockProgram::Hooks {
  const BlockProgram& program;
  Mode mode;

  bool skip(const Plan& p, size_t i) const {
    if (p.index != 0) return false;  // a thread graph runs whole where its op runs
    return mode == Mode::block ? !program.shared_.empty() && program.shared_[i] : !program.invariant_[i];
  }
  bool compute(const Plan& p, size_t i, const std::vector<View>& ins, const MutView& out) const {
    const Graph& g = *p.g;
    const Op& op = g.ops[i];
    eval_compute_op(op, ins, program.scalar_[static_cast<size_t>(p.index)][i], out, g.type(op.outputs[0]).dtype,
                    nullptr);
    return true;
  }
};

BlockProgram::BlockProgram(const Graph& body, bool share_invariant) : executor_(body) {
  for (const Plan& p : executor_.plans()) {
    const Graph& g = *p.g;
    std::vector<float>& scalars = scalar_.emplace_back(g.ops.size(), 0.0f);
    for (size_t i = 0; i < g.ops.size(); ++i)
      if (p.phase[i] != BlockPhase::dead && g.ops[i].attrs.has_scalar) scalars[i] = scalar_operand(g.ops[i].attrs);
  }
  invariant_.assign(body.ops.size(), false);
  shared_.assign(body.ops.size(), false);
  if (share_invariant) plan_sharing();
}

void BlockProgram::plan_sharing() {
  const Plan& p = executor_.plans()[0];
  const Graph& g = *p.g;
  if (g.grid.volume() == 1) return;  // one block: nothing to share
  std::vector<bool> inv(g.tensors.size(), false);
  std::vector<int64_t> producer(g.tensors.size(), -1);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    for (TensorId t : op.outputs) producer[t.index()] = static_cast<int64_t>(i);
    if (p.phase[i] == BlockPhase::dead) continue;
    OpCategory cat = op_info(op.kind).category;
    bool invariant = false;
    if (cat == OpCategory::iterator) {
      invariant = true;
      for (int axis = 0; axis < 3; ++axis)
        if (g.grid[axis] > 1 && op.attrs.imap[static_cast<size_t>(axis)] != kPhi) invariant = false;
    } else if (is_compute_op(op.kind) || cat == OpCategory::thread_body) {
      invariant = !op.inputs.empty();
      for (TensorId t : op.inputs) invariant = invariant && inv[t.index()];
    }
    invariant_[i] = invariant;
    shared_[i] = invariant && cat != OpCategory::iterator;
    for (TensorId t : op.outputs) inv[t.index()] = invariant;
  }
  // The shared tiles that a block's own ops read.
  std::vector<bool> needed(g.tensors.size(), false);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (p.phase[i] == BlockPhase::dead || shared_[i]) continue;
    for (TensorId t : g.ops[i].inputs) {
      int64_t prod = producer[t.index()];
      if (prod >= 0 && shared_[static_cast<size_t>(prod)]) needed[t.index()] = true;
    }
  }
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    if (!needed[t]) continue;
    shared_tiles_.push_back(SharedTile{TensorId(static_cast<int32_t>(t)), shared_per_iter_});
    shared_per_iter_ += arena_aligned(g.tensors[t].type.shape.numel());
  }
  // Sharing trades memory for work; past a limit (or with nothing to share) don't.
  constexpr int64_t kMaxSharedFloats = int64_t{64} << 20;  // 256 MiB
  if (shared_tiles_.empty() || shared_per_iter_ > kMaxSharedFloats / g.forloop) {
    shared_tiles_.clear();
    shared_per_iter_ = 0;
    shared_.assign(g.ops.size(), false);
  }
}

BlockWorker BlockProgram::make_worker() const { return executor_.make_worker(); }

void BlockProgram::precompute(BlockWorker& w, const std::vector<View>& params, int64_t iter, float* shared) const {
  const Plan& p = executor_.plans()[0];
  Hooks hooks{*this, Mode::shared};
  executor_.exec(p, w, BlockPhase::loop, params, nullptr, {0, 0, 0}, iter, hooks);
  float* table = shared + iter * shared_per_iter_;
  const View* vals = w.values.data() + p.value_base;
  for (const SharedTile& s : shared_tiles_)
    copy_view(vals[s.tensor.index()], MutView::dense(table + s.offset, p.g->type(s.tensor).shape));
}

void BlockProgram::run_blocks(std::vector<BlockWorker>& states, const std::vector<View>& params,
                              const std::vector<MutView>& outputs, int64_t first, int64_t count,
                              const float* shared) const {
  MUGRAPH_CHECK(count >= 1 && static_cast<size_t>(count) <= states.size())
      << "run_blocks: " << count << " blocks, " << states.size() << " block states";
  MUGRAPH_CHECK(shared_tiles_.empty() || shared != nullptr) << "run_blocks needs the shared table";
  const Plan& p = executor_.plans()[0];
  const Graph& body = executor_.body();
  const int64_t F = body.forloop;
  auto coords = [&](int64_t index) { return block_coords(body.grid, index); };
  Hooks hooks{*this, Mode::block};
  for (int64_t i = 0; i < F; ++i) {
    for (int64_t k = 0; k < count; ++k) {
      BlockWorker& w = states[static_cast<size_t>(k)];
      View* vals = w.values.data() + p.value_base;
      for (const SharedTile& s : shared_tiles_)
        vals[s.tensor.index()] = View::dense(shared + i * shared_per_iter_ + s.offset, body.type(s.tensor).shape);
      executor_.exec(p, w, BlockPhase::loop, params, &outputs, coords(first + k), i, hooks);
    }
  }
  // With one iteration there is no post-loop phase: the sums are final (and already rounded).
  if (F == 1) return;
  for (int64_t k = 0; k < count; ++k) {
    BlockWorker& w = states[static_cast<size_t>(k)];
    finish_accumulators(w);
    executor_.exec(p, w, BlockPhase::post, params, &outputs, coords(first + k), 0, hooks);
  }
}

/// Sums accumulate in f32 and are rounded to their dtype once, after the loop.
void BlockProgram::finish_accumulators(BlockWorker& w) const {
  const Plan& p = executor_.plans()[0];
  const Graph& g = *p.g;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (!is_sum_accumulator(op) || p.phase[i] == BlockPhase::dead) continue;
    TensorId t = op.outputs[0];
    round_span(w.arena.data() + p.offset[t.index()], g.type(t).shape.numel(), g.type(t).dtype);
  }
}

}  // namespace mugraph::interp
