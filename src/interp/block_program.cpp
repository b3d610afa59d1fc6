#include "block_program.h"

#include <string>

#include "block_structure.h"
#include "half.h"
#include "op_eval.h"
#include "tensor_ops.h"

namespace mugraph::interp {

namespace {

constexpr int64_t kAlign = 16;  // floats: buffers start on 64-byte boundaries

std::string op_where(const Graph& g, size_t i) { return body_op_where(g, i); }

void check_ids(const Graph& g) {
  for (size_t i = 0; i < g.ops.size(); ++i) {
    for (TensorId t : g.ops[i].inputs)
      MUGRAPH_CHECK(t.valid() && t.index() < g.tensors.size()) << op_where(g, i) << " reads tensor " << t.value;
    for (TensorId t : g.ops[i].outputs)
      MUGRAPH_CHECK(t.valid() && t.index() < g.tensors.size()) << op_where(g, i) << " writes tensor " << t.value;
  }
}

}  // namespace

BlockProgram::BlockProgram(const Graph& body, bool share_invariant) : body_(body) {
  MUGRAPH_CHECK(body.level == Level::block) << "a graph_kernel body must be a block graph";
  if (body.forloop < 1) throw UserError("the block graph's for-loop range is " + std::to_string(body.forloop));
  for (int axis = 0; axis < 3; ++axis)
    if (body.grid[axis] < 1)
      throw UserError("the block graph's grid " + std::string(axis_name(axis)) + " is " +
                      std::to_string(body.grid[axis]));
  add_plan(body, arena_floats_, num_values_);
  plans_[0].invariant.assign(body.ops.size(), false);
  plans_[0].shared.assign(body.ops.size(), false);
  if (share_invariant) plan_sharing(plans_[0]);
}

void BlockProgram::plan_sharing(Plan& p) {
  const Graph& g = *p.g;
  if (g.grid.volume() == 1) return;  // one block: nothing to share
  std::vector<bool> inv(g.tensors.size(), false);
  std::vector<int64_t> producer(g.tensors.size(), -1);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    for (TensorId t : op.outputs) producer[t.index()] = static_cast<int64_t>(i);
    if (p.phase[i] == Phase::dead) continue;
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
    p.invariant[i] = invariant;
    p.shared[i] = invariant && cat != OpCategory::iterator;
    for (TensorId t : op.outputs) inv[t.index()] = invariant;
  }
  // The shared tiles that a block's own ops read.
  std::vector<bool> needed(g.tensors.size(), false);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (p.phase[i] == Phase::dead || p.shared[i]) continue;
    for (TensorId t : g.ops[i].inputs) {
      int64_t prod = producer[t.index()];
      if (prod >= 0 && p.shared[static_cast<size_t>(prod)]) needed[t.index()] = true;
    }
  }
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    if (!needed[t]) continue;
    shared_tiles_.push_back(SharedTile{TensorId(static_cast<int32_t>(t)), shared_per_iter_});
    shared_per_iter_ += (g.tensors[t].type.shape.numel() + kAlign - 1) / kAlign * kAlign;
  }
  // Sharing trades memory for work; past a limit (or with nothing to share) don't.
  constexpr int64_t kMaxSharedFloats = int64_t{64} << 20;  // 256 MiB
  if (shared_tiles_.empty() || shared_per_iter_ > kMaxSharedFloats / g.forloop) {
    shared_tiles_.clear();
    shared_per_iter_ = 0;
    p.shared.assign(g.ops.size(), false);
  }
}

int32_t BlockProgram::add_plan(const Graph& g, int64_t& arena_floats, int32_t& values) {
  check_ids(g);
  auto index = static_cast<int32_t>(plans_.size());
  plans_.emplace_back();
  {
    Plan& p = plans_.back();
    p.g = &g;
    p.index = index;
    p.value_base = values;
    p.offset.assign(g.tensors.size(), -1);
    p.scalar.assign(g.ops.size(), 0.0f);
    p.nested.assign(g.ops.size(), -1);
  }
  values += static_cast<int32_t>(g.tensors.size());
  std::vector<bool> live = live_ops(g);
  std::vector<TensorId> saved;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (!live[i]) continue;
    OpCategory cat = op_info(op.kind).category;
    bool buffer = false;
    switch (cat) {
      case OpCategory::iterator:
        break;
      case OpCategory::saver:
        if (g.level == Level::thread) {
          auto io = static_cast<size_t>(op.attrs.io_index);
          if (saved.size() <= io) saved.resize(io + 1);
          saved[io] = op.inputs.at(0);
        }
        break;
      case OpCategory::accumulator:
        if (g.level != Level::block) throw UserError(op_where(g, i) + " is only meaningful in a block graph");
        buffer = true;
        break;
      case OpCategory::thread_body: {
        if (g.level != Level::block || op.attrs.body < 0 || static_cast<size_t>(op.attrs.body) >= g.bodies.size())
          throw UserError(op_where(g, i) + " has no thread-graph body");
        const Graph& tb = g.bodies[static_cast<size_t>(op.attrs.body)];
        if (tb.level != Level::thread) throw UserError(op_where(g, i) + " needs a thread graph as its body");
        int32_t n = add_plan(tb, arena_floats, values);
        plans_[static_cast<size_t>(index)].nested[i] = n;
        if (plans_[static_cast<size_t>(n)].saved.size() != op.outputs.size())
          throw UserError(op_where(g, i) + " has " + std::to_string(op.outputs.size()) +
                          " outputs but its thread graph saves " +
                          std::to_string(plans_[static_cast<size_t>(n)].saved.size()));
        break;
      }
      default:
        if (!is_compute_op(op.kind))
          throw UserError(op_where(g, i) + " cannot appear in a " + std::string(level_name(g.level)) + " graph");
        buffer = true;
        if (op.attrs.has_scalar) plans_[static_cast<size_t>(index)].scalar[i] = scalar_operand(op.attrs);
        break;
    }
    if (buffer) {
      for (TensorId t : op.outputs) {
        plans_[static_cast<size_t>(index)].offset[t.index()] = arena_floats;
        int64_t n = g.type(t).shape.numel();
        arena_floats += (n + kAlign - 1) / kAlign * kAlign;
      }
    }
  }
  if (g.level == Level::thread)
    for (size_t io = 0; io < saved.size(); ++io)
      if (!saved[io].valid())
        throw UserError("no output_saver of the thread graph writes output " + std::to_string(io));
  Plan& p = plans_[static_cast<size_t>(index)];
  p.phase = block_phases(g);  // the block graph's loop and post-loop ops; thread graphs: all loop
  p.saved = std::move(saved);
  return index;
}

BlockWorker BlockProgram::make_worker() const {
  BlockWorker w;
  w.arena.assign(static_cast<size_t>(arena_floats_), 0.0f);
  w.values.assign(static_cast<size_t>(num_values_), View{});
  w.operands.resize(plans_.size());
  for (auto& v : w.operands) v.reserve(8);
  return w;
}

void BlockProgram::precompute(BlockWorker& w, const std::vector<View>& params, int64_t iter, float* shared) const {
  const Plan& p = plans_[0];
  exec(p, w, Phase::loop, Mode::shared, params, nullptr, {0, 0, 0}, iter);
  float* table = shared + iter * shared_per_iter_;
  const View* vals = w.values.data() + p.value_base;
  for (const SharedTile& s : shared_tiles_)
    copy_view(vals[s.tensor.index()], MutView::dense(table + s.offset, body_.type(s.tensor).shape));
}

void BlockProgram::run_blocks(std::vector<BlockWorker>& states, const std::vector<View>& params,
                              const std::vector<MutView>& outputs, int64_t first, int64_t count,
                              const float* shared) const {
  MUGRAPH_CHECK(count >= 1 && static_cast<size_t>(count) <= states.size())
      << "run_blocks: " << count << " blocks, " << states.size() << " block states";
  MUGRAPH_CHECK(shared_tiles_.empty() || shared != nullptr) << "run_blocks needs the shared table";
  const Plan& p = plans_[0];
  const int64_t F = body_.forloop;
  const Dim3 grid = body_.grid;
  auto coords = [&](int64_t index) { return block_coords(grid, index); };
  for (int64_t i = 0; i < F; ++i) {
    for (int64_t k = 0; k < count; ++k) {
      BlockWorker& w = states[static_cast<size_t>(k)];
      View* vals = w.values.data() + p.value_base;
      for (const SharedTile& s : shared_tiles_)
        vals[s.tensor.index()] = View::dense(shared + i * shared_per_iter_ + s.offset, body_.type(s.tensor).shape);
      exec(p, w, Phase::loop, Mode::block, params, &outputs, coords(first + k), i);
    }
  }
  if (F == 1) return;
  for (int64_t k = 0; k < count; ++k) {
    BlockWorker& w = states[static_cast<size_t>(k)];
    finish_accumulators(p, w);
    exec(p, w, Phase::post, Mode::block, params, &outputs, coords(first + k), 0);
  }
}

void BlockProgram::finish_accumulators(const Plan& p, BlockWorker& w) const {
  const Graph& g = *p.g;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (!is_sum_accumulator(op) || p.phase[i] == Phase::dead) continue;
    TensorId t = op.outputs[0];
    round_span(w.arena.data() + p.offset[t.index()], g.type(t).shape.numel(), g.type(t).dtype);
  }
}

void BlockProgram::exec(const Plan& p, BlockWorker& w, Phase phase, Mode mode, const std::vector<View>& params,
                        const std::vector<MutView>* outputs, const std::array<int64_t, 3>& b, int64_t iter) const {
  const Graph& g = *p.g;
  View* vals = w.values.data() + p.value_base;
  std::vector<View>& ins = w.operands[static_cast<size_t>(p.index)];
  auto buffer = [&](TensorId t) { return MutView::dense(w.arena.data() + p.offset[t.index()], g.type(t).shape); };
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (p.phase[i] != phase) continue;
    if (mode == Mode::block ? !p.shared.empty() && p.shared[i] : !p.invariant[i]) continue;
    const Op& op = g.ops[i];
    switch (op_info(op.kind).category) {
      case OpCategory::iterator: {
        auto io = static_cast<size_t>(op.attrs.io_index);
        MUGRAPH_CHECK(io < params.size()) << op_where(g, i) << " reads input " << io << " of " << params.size();
        View v = g.level == Level::block ? iterator_tile(g, op.attrs, params[io], b, iter) : params[io];
        MUGRAPH_CHECK(v.shape == g.type(op.outputs[0]).shape)
            << op_where(g, i) << " loads a tile " << v.shape.str() << " but its tensor is "
            << g.type(op.outputs[0]).shape.str();
        vals[op.outputs[0].index()] = v;
        break;
      }
      case OpCategory::saver: {
        if (g.level != Level::block) break;  // thread graphs: the thread_graph op picks up `saved`
        auto io = static_cast<size_t>(op.attrs.io_index);
        MUGRAPH_CHECK(outputs && io < outputs->size()) << op_where(g, i) << " writes output " << io;
        const View& src = vals[op.inputs[0].index()];
        copy_view(src, saver_region(op.attrs, (*outputs)[io], src.shape, b));
        break;
      }
      case OpCategory::accumulator: {
        const View& src = vals[op.inputs[0].index()];
        MutView acc = buffer(op.outputs[0]);
        if (op.attrs.dim == kPhi) {
          if (iter == 0) {
            copy_view(src, acc);
          } else {
            add_into(src, acc);
          }
        } else {
          int64_t ext = src.shape[op.attrs.dim];
          copy_view(src, acc.slice(op.attrs.dim, iter * ext, ext));
        }
        vals[op.outputs[0].index()] = acc;
        // With one iteration there is no post-loop phase: the sum is final (and already rounded).
        break;
      }
      case OpCategory::thread_body: {
        const Plan& q = plans_[static_cast<size_t>(p.nested[i])];
        ins.clear();
        for (TensorId t : op.inputs) ins.push_back(vals[t.index()]);
        exec(q, w, Phase::loop, Mode::block, ins, nullptr, b, 0);  // a thread graph runs whole
        const View* inner = w.values.data() + q.value_base;
        for (size_t k = 0; k < op.outputs.size(); ++k) vals[op.outputs[k].index()] = inner[q.saved[k].index()];
        break;
      }
      default: {
        TensorId t = op.outputs[0];
        const View& x = vals[op.inputs.at(0).index()];
        if (op.kind == OpKind::reshape && x.contiguous()) {
          vals[t.index()] = View::dense(x.data, g.type(t).shape);  // row-major reshape of dense data: a view
          break;
        }
        ins.clear();
        for (TensorId in : op.inputs) ins.push_back(vals[in.index()]);
        MutView out = buffer(t);
        eval_compute_op(op, ins, p.scalar[i], out, g.type(t).dtype, nullptr);
        vals[t.index()] = out;
        break;
      }
    }
  }
}

}  // namespace mugraph::interp
