// Kernel-level ops of the finite-field interpreter, graph-defined kernels included: a block graph
// runs block by block with exactly the float interpreter's structure (block_structure.h): tiles
// by imap/fmap, loop body per iteration, accumulators (sum or concat), post-processing once,
// savers by omap, thread graphs in place.
#include <optional>
#include <string>

#include "block_structure.h"
#include "ff_ops.h"

namespace mugraph::ff_detail {

namespace {

using interp::BlockPhase;

constexpr int64_t kAlign = 16;  // uint32s: buffers start on 64-byte boundaries

int64_t aligned(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

/// The state of one block in flight, reused for every block a worker runs.
struct FFWorker {
  std::vector<uint32_t> arena;
  std::vector<FFView> values;
  std::vector<std::vector<FFView>> operands;  // per plan (capacity reused)
};

/// An executable plan of one block graph (and its thread graphs) on residues.
class FFBlockProgram {
 public:
  FFBlockProgram(const Graph& body, const std::vector<bool>& param_taint, bool exps_taint)
      : body_(body), exps_taint_(exps_taint) {
    MUGRAPH_CHECK(body.level == Level::block && body.forloop >= 1) << "a graph_kernel body must be a block graph";
    add_plan(body, param_taint);
  }

  FFWorker make_worker() const {
    FFWorker w;
    w.arena.assign(static_cast<size_t>(arena_), 0);
    w.values.assign(static_cast<size_t>(num_values_), FFView{});
    w.operands.resize(plans_.size());
    return w;
  }

  /// Runs block `index` (x fastest): every iteration of the loop body, then post-processing.
  void run_block(FFWorker& w, const std::vector<FFView>& params, const std::vector<FFMutView>& outputs, int64_t index,
                 FFState& st) const {
    const auto b = interp::block_coords(body_.grid, index);
    for (int64_t i = 0; i < body_.forloop; ++i) {
      if (!exec(plans_[0], w, BlockPhase::loop, params, &outputs, b, i, st)) return;
    }
    if (body_.forloop > 1) exec(plans_[0], w, BlockPhase::post, params, &outputs, b, 0, st);
  }

 private:
  struct Plan {
    const Graph* g = nullptr;
    std::vector<BlockPhase> phase;                // per op
    std::vector<int64_t> offset;                  // per tensor: Z_p buffer in the arena (Z_q follows), or -1
    std::vector<std::array<uint32_t, 2>> scalar;  // per op: residues of a binary op's constant
    std::vector<int32_t> nested;                  // per op: plan of a thread_graph op's body, or -1
    std::vector<TensorId> saved;                  // thread graphs: per io_index, the tensor saved
    std::vector<bool> taint;                      // per tensor: exp-tainted
    std::vector<bool> exp_only;                   // per tensor: Z_p part unread (Taint::exp_only)
    int32_t value_base = 0;
    int32_t index = 0;
  };

  int32_t add_plan(const Graph& g, const std::vector<bool>& param_taint) {
    auto index = static_cast<int32_t>(plans_.size());
    plans_.emplace_back();
    {
      Plan& p = plans_.back();
      p.g = &g;
      p.index = index;
      p.value_base = num_values_;
      p.phase = interp::block_phases(g);
      p.offset.assign(g.tensors.size(), -1);
      p.scalar.assign(g.ops.size(), {0, 0});
      p.nested.assign(g.ops.size(), -1);
      Taint t = exp_taint(g, param_taint, exps_taint_);
      p.taint = std::move(t.tensor);
      p.exp_only = std::move(t.exp_only);
    }
    num_values_ += static_cast<int32_t>(g.tensors.size());
    for (size_t i = 0; i < g.ops.size(); ++i) {
      const Op& op = g.ops[i];
      if (plans_[static_cast<size_t>(index)].phase[i] == BlockPhase::dead) continue;
      bool buffer = false;
      switch (op_info(op.kind).category) {
        case OpCategory::iterator:
          break;
        case OpCategory::saver:
          if (g.level == Level::thread) {
            auto io = static_cast<size_t>(op.attrs.io_index);
            auto& saved = plans_[static_cast<size_t>(index)].saved;
            if (saved.size() <= io) saved.resize(io + 1);
            saved[io] = op.inputs.at(0);
          }
          break;
        case OpCategory::accumulator:
          buffer = true;
          break;
        case OpCategory::thread_body: {
          std::vector<bool> in;
          for (TensorId t : op.inputs) in.push_back(plans_[static_cast<size_t>(index)].taint[t.index()]);
          int32_t n = add_plan(g.bodies.at(static_cast<size_t>(op.attrs.body)), in);
          plans_[static_cast<size_t>(index)].nested[i] = n;
          MUGRAPH_CHECK(plans_[static_cast<size_t>(n)].saved.size() == op.outputs.size())
              << interp::body_op_where(g, i) << ": its thread graph saves a different number of outputs";
          break;
        }
        default:
          buffer = true;
          if (op.attrs.has_scalar) plans_[static_cast<size_t>(index)].scalar[i] = scalar_residues(op.attrs.scalar);
          break;
      }
      if (buffer) {
        for (TensorId t : op.outputs) {
          plans_[static_cast<size_t>(index)].offset[t.index()] = arena_;
          arena_ += 2 * aligned(g.type(t).shape.numel());
        }
      }
    }
    return index;
  }

  /// Runs the ops of plan p in `phase` (thread graphs: all live ops). False on a zero divisor.
  bool exec(const Plan& p, FFWorker& w, BlockPhase phase, const std::vector<FFView>& params,
            const std::vector<FFMutView>* outputs, const std::array<int64_t, 3>& b, int64_t iter, FFState& st) const {
    const Graph& g = *p.g;
    FFView* vals = w.values.data() + p.value_base;
    std::vector<FFView>& ins = w.operands[static_cast<size_t>(p.index)];
    auto buffer = [&](TensorId t) {
      const Shape& s = g.type(t).shape;
      uint32_t* base = w.arena.data() + p.offset[t.index()];
      return FFMutView{MutUView::dense(base, s), MutUView::dense(base + aligned(s.numel()), s)};
    };
    for (size_t i = 0; i < g.ops.size(); ++i) {
      if (p.phase[i] != phase) continue;
      const Op& op = g.ops[i];
      switch (op_info(op.kind).category) {
        case OpCategory::iterator: {
          const FFView& whole = params.at(static_cast<size_t>(op.attrs.io_index));
          FFView v = g.level == Level::block ? FFView{interp::iterator_tile(g, op.attrs, whole.p, b, iter),
                                                      interp::iterator_tile(g, op.attrs, whole.q, b, iter)}
                                             : whole;
          MUGRAPH_CHECK(v.shape() == g.type(op.outputs[0]).shape)
              << interp::body_op_where(g, i) << " loads a tile " << v.shape().str() << " but its tensor is "
              << g.type(op.outputs[0]).shape.str();
          vals[op.outputs[0].index()] = v;
          break;
        }
        case OpCategory::saver: {
          if (g.level != Level::block) break;  // thread graphs: the thread_graph op picks up `saved`
          const FFView& src = vals[op.inputs[0].index()];
          const FFMutView& dst = outputs->at(static_cast<size_t>(op.attrs.io_index));
          copy_ff(src, FFMutView{interp::saver_region(op.attrs, dst.p, src.shape(), b),
                                 interp::saver_region(op.attrs, dst.q, src.shape(), b)});
          break;
        }
        case OpCategory::accumulator: {
          const FFView& src = vals[op.inputs[0].index()];
          FFMutView acc = buffer(op.outputs[0]);
          if (op.attrs.dim == kPhi) {
            if (iter == 0) {
              copy_ff(src, acc);
            } else {
              add_into_ff(src, acc);
            }
          } else {
            int64_t ext = src.shape()[op.attrs.dim];
            copy_ff(src, acc.slice(op.attrs.dim, iter * ext, ext));
          }
          vals[op.outputs[0].index()] = acc;
          break;
        }
        case OpCategory::thread_body: {
          const Plan& q = plans_[static_cast<size_t>(p.nested[i])];
          ins.clear();
          for (TensorId t : op.inputs) ins.push_back(vals[t.index()]);
          if (!exec(q, w, BlockPhase::loop, ins, nullptr, b, 0, st)) return false;  // a thread graph runs whole
          const FFView* inner = w.values.data() + q.value_base;
          for (size_t k = 0; k < op.outputs.size(); ++k) vals[op.outputs[k].index()] = inner[q.saved[k].index()];
          break;
        }
        default: {
          TensorId t = op.outputs[0];
          const FFView& x = vals[op.inputs.at(0).index()];
          if (op.kind == OpKind::reshape && x.p.contiguous() && x.q.contiguous()) {
            const Shape& s = g.type(t).shape;
            vals[t.index()] = {UView::dense(x.p.data, s), UView::dense(x.q.data, s)};  // a view
            break;
          }
          ins.clear();
          for (TensorId in : op.inputs) ins.push_back(vals[in.index()]);
          std::array<bool, 2> taint{p.taint[op.inputs[0].index()],
                                    op.inputs.size() > 1 && p.taint[op.inputs[1].index()]};
          FFMutView out = buffer(t);
          eval_ff_op(op, ins, taint, p.scalar[i], out, st, false, {!p.exp_only[t.index()], !p.taint[t.index()]});
          if (st.zero_divisor.load(std::memory_order_relaxed)) return false;
          vals[t.index()] = out;
          break;
        }
      }
    }
    return true;
  }

  const Graph& body_;
  bool exps_taint_ = true;   ///< false under FFContext::opaque_functions
  std::vector<Plan> plans_;  // plans_[0]: the block graph
  int64_t arena_ = 0;
  int32_t num_values_ = 0;
};

FFMutView allocate(std::vector<FFTensor>& store, std::vector<FFView>& views, TensorId t, const Shape& s) {
  FFTensor& r = store[t.index()];
  r.shape = s;
  r.p = take_buffer(static_cast<size_t>(s.numel()));
  r.q = take_buffer(static_cast<size_t>(s.numel()));
  FFMutView v = mut_view_of(store[t.index()]);
  views[t.index()] = v;
  return v;
}

}  // namespace

bool run_kernel_op(const Graph& g, size_t i, const std::vector<bool>& taint, const std::vector<bool>& exp_only,
                   std::vector<FFView>& views, std::vector<FFTensor>& store, FFState& st) {
  const Op& op = g.ops[i];
  if (op.kind == OpKind::graph_kernel) {
    const Graph& body = g.bodies.at(static_cast<size_t>(op.attrs.body));
    std::vector<bool> in_taint;
    std::vector<FFView> params;
    for (TensorId t : op.inputs) {
      in_taint.push_back(taint[t.index()]);
      params.push_back(views[t.index()]);
    }
    std::vector<FFMutView> outs;
    for (TensorId t : op.outputs) outs.push_back(allocate(store, views, t, g.type(t).shape));
    FFBlockProgram program(body, in_taint, !st.ctx.opaque_functions);
    const int64_t blocks = body.grid.volume();
    int workers_n = st.pool ? st.pool->size() : 1;
    std::vector<std::optional<FFWorker>> workers(static_cast<size_t>(workers_n));
    auto work = [&](int w, int64_t block) {
      if (st.zero_divisor.load(std::memory_order_relaxed)) return;  // the run is void: stop soon
      auto& worker = workers[static_cast<size_t>(w)];
      if (!worker) worker = program.make_worker();
      program.run_block(*worker, params, outs, block, st);
    };
    if (st.pool && workers_n > 1 && blocks > 1) {
      st.pool->parallel_for(blocks, [&](int w, int64_t block) { work(w, block); });
    } else {
      for (int64_t block = 0; block < blocks; ++block) work(0, block);
    }
    return !st.zero_divisor.load();
  }
  MUGRAPH_CHECK(op_info(op.kind).category != OpCategory::source) << "run_kernel_op on an input op";
  std::vector<FFView> ins;
  for (TensorId t : op.inputs) ins.push_back(views[t.index()]);
  std::array<bool, 2> in_taint{taint[op.inputs.at(0).index()], op.inputs.size() > 1 && taint[op.inputs[1].index()]};
  std::array<uint32_t, 2> scalar{0, 0};
  if (op.attrs.has_scalar) scalar = scalar_residues(op.attrs.scalar);
  TensorId out = op.outputs.at(0);
  FFMutView o = allocate(store, views, out, g.type(out).shape);
  const PartsRead read{exp_only.empty() || !exp_only[out.index()], !taint[out.index()]};
  eval_ff_op(op, ins, in_taint, scalar, o, st, true, read);
  return !st.zero_divisor.load();
}

}  // namespace mugraph::ff_detail
