// Kernel-level ops of the finite-field interpreter, graph-defined kernels included: a block graph
// runs block by block on the float interpreter's own executor (block_executor.h), over residues:
// tiles by imap/fmap, loop body per iteration, accumulators (sum or concat), post-processing once,
// savers by omap, thread graphs in place.
#include <optional>
#include <string>

#include "block_executor.h"
#include "block_structure.h"
#include "ff_ops.h"

namespace mugraph::ff_detail {

namespace {

using interp::BlockPhase;

/// Residue pairs (Z_p, Z_q), the finite-field interpreter's value domain for the block executor
/// (block_executor.h): a tensor's buffer holds its Z_p part, then its Z_q part.
struct FFValues {
  using View = FFView;
  using MutView = FFMutView;
  using Elem = uint32_t;
  static int64_t buffer_elems(int64_t numel) { return 2 * interp::arena_aligned(numel); }
  static FFMutView buffer(uint32_t* base, const Shape& s) {
    return {MutUView::dense(base, s), MutUView::dense(base + interp::arena_aligned(s.numel()), s)};
  }
  static FFView tile(const Graph& g, const OpAttrs& a, const FFView& whole, const std::array<int64_t, 3>& b,
                     int64_t iter) {
    return {interp::iterator_tile(g, a, whole.p, b, iter), interp::iterator_tile(g, a, whole.q, b, iter)};
  }
  static FFMutView region(const OpAttrs& a, const FFMutView& whole, const Shape& tile,
                          const std::array<int64_t, 3>& b) {
    return {interp::saver_region(a, whole.p, tile, b), interp::saver_region(a, whole.q, tile, b)};
  }
  static const Shape& shape(const FFView& v) { return v.shape(); }
  static void copy(const FFView& src, const FFMutView& dst) { copy_ff(src, dst); }
  static void add_into(const FFView& src, const FFMutView& dst) { add_into_ff(src, dst); }
  static std::optional<FFView> alias(const FFView& x, const Shape& s) {
    if (!x.p.contiguous() || !x.q.contiguous()) return std::nullopt;
    return FFView{UView::dense(x.p.data, s), UView::dense(x.q.data, s)};
  }
};

using FFExecutor = interp::BlockExecutor<FFValues>;
using FFWorker = FFExecutor::Worker;

/// A block graph (and its thread graphs) planned for residues: the executor's plans, and per plan
/// what the residue arithmetic needs beside them.
class FFBlockProgram {
 public:
  FFBlockProgram(const Graph& body, const std::vector<bool>& param_taint, bool exps_taint) : executor_(body) {
    const auto& plans = executor_.plans();
    extras_.resize(plans.size());
    // A thread graph's operands are tainted as its op's are; its plan comes after its op's.
    std::vector<std::vector<bool>> operand_taint(plans.size());
    operand_taint[0] = param_taint;
    for (const FFExecutor::Plan& p : plans) {
      const Graph& g = *p.g;
      Extra& e = extras_[static_cast<size_t>(p.index)];
      Taint t = exp_taint(g, operand_taint[static_cast<size_t>(p.index)], exps_taint);
      e.taint = std::move(t.tensor);
      e.exp_only = std::move(t.exp_only);
      e.scalar.assign(g.ops.size(), {0, 0});
      for (size_t i = 0; i < g.ops.size(); ++i) {
        const Op& op = g.ops[i];
        if (p.phase[i] == BlockPhase::dead) continue;
        if (op.attrs.has_scalar) e.scalar[i] = scalar_residues(op.attrs.scalar);
        if (p.nested[i] >= 0)
          for (TensorId in : op.inputs) operand_taint[static_cast<size_t>(p.nested[i])].push_back(e.taint[in.index()]);
      }
    }
  }

  FFWorker make_worker() const { return executor_.make_worker(); }

  /// Runs block `index` (x fastest): every iteration of the loop body, then post-processing.
  void run_block(FFWorker& w, const std::vector<FFView>& params, const std::vector<FFMutView>& outputs, int64_t index,
                 FFState& st) const {
    const Graph& body = executor_.body();
    const auto b = interp::block_coords(body.grid, index);
    const FFExecutor::Plan& p = executor_.plans()[0];
    Hooks hooks{*this, st};
    for (int64_t i = 0; i < body.forloop; ++i)
      if (!executor_.exec(p, w, BlockPhase::loop, params, &outputs, b, i, hooks)) return;
    if (body.forloop > 1) executor_.exec(p, w, BlockPhase::post, params, &outputs, b, 0, hooks);
  }

 private:
  struct Extra {
    std::vector<std::array<uint32_t, 2>> scalar;  // per op: residues of a binary op's constant
    std::vector<bool> taint;                      // per tensor: exp-tainted
    std::vector<bool> exp_only;                   // per tensor: Z_p part unread (Taint::exp_only)
  };

  /// Every live op runs, on residues; a zero divisor voids the run.
  struct Hooks {
    const FFBlockProgram& program;
    FFState& st;

    bool skip(const FFExecutor::Plan&, size_t) const { return false; }
    bool compute(const FFExecutor::Plan& p, size_t i, const std::vector<FFView>& ins, const FFMutView& out) {
      const Extra& e = program.extras_[static_cast<size_t>(p.index)];
      const Op& op = p.g->ops[i];
      const TensorId t = op.outputs[0];
      std::array<bool, 2> taint{e.taint[op.inputs[0].index()], op.inputs.size() > 1 && e.taint[op.inputs[1].index()]};
      eval_ff_op(op, ins, taint, e.scalar[i], out, st, false, {!e.exp_only[t.index()], !e.taint[t.index()]});
      return !st.zero_divisor.load(std::memory_order_relaxed);
    }
  };

  FFExecutor executor_;
  std::vector<Extra> extras_;  // per plan
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
