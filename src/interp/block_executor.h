/// \file block_executor.h
/// The one executor of block graphs (DESIGN.md §1, "Semantics, precisely") that both interpreters
/// run: the float interpreter (block_program.cpp), which defines what a μGraph computes, and the
/// finite-field interpreter of the verifier (src/verify/ff_kernel_op.cpp), which proves two μGraphs
/// compute the same. Both walk a block graph the same way — tiles by imap/fmap, the loop body per
/// iteration, accumulators (sum or concat), post-processing once, savers by omap, thread graphs in
/// place — so that way is written once, here, over a value domain; what differs (how an op computes
/// on floats or on residues, which ops a block shares with others, when a run is void) comes in
/// through the hooks each caller passes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "block_structure.h"
#include "mugraph/error.h"
#include "mugraph/graph.h"
#include "op_eval.h"

namespace mugraph::interp {

/// Arena buffers start on multiples of 16 elements (64 bytes of floats or residues).
constexpr int64_t kArenaAlign = 16;
inline int64_t arena_aligned(int64_t n) { return (n + kArenaAlign - 1) / kArenaAlign * kArenaAlign; }

/// Plans a block graph and its thread graphs once and runs their ops for one block, over the
/// value domain `Values`, a traits type with
///   View, MutView (a MutView converts to a View), Elem (the arena's element type);
///   static int64_t buffer_elems(int64_t numel): the arena a tensor's buffer takes;
///   static MutView buffer(Elem* base, const Shape&): that buffer, as a view;
///   static View tile(const Graph&, const OpAttrs&, const View& whole, block, iteration);
///   static MutView region(const OpAttrs&, const MutView& whole, const Shape& tile, block);
///   static const Shape& shape(const View&);
///   static void copy(const View&, const MutView&), add_into(const View&, const MutView&);
///   static std::optional<View> alias(const View&, const Shape&): a reshape of dense data as a view.
/// Immutable once built, so workers share it; each worker has its own BlockExecutor::Worker.
template <class Values>
class BlockExecutor {
 public:
  using View = typename Values::View;
  using MutView = typename Values::MutView;

  /// The plan of one graph (the block graph or one of its thread graphs).
  struct Plan {
    const Graph* g = nullptr;
    std::vector<BlockPhase> phase;  // per op
    std::vector<int64_t> offset;    // per tensor: its buffer in the arena, or -1 (a view of another)
    std::vector<int32_t> nested;    // per op: index in plans() of a thread_graph op's body, or -1
    std::vector<TensorId> saved;    // thread graphs: per io_index, the tensor its saver saves
    int32_t value_base = 0;         // this graph's tensor values start here in Worker::values
    int32_t index = 0;              // this plan's index in plans()
  };

  /// The state of one block in flight: a buffer for every tensor of the block graph and its
  /// thread graphs (accumulators included), allocated once and reused for every block it runs.
  struct Worker {
    std::vector<typename Values::Elem> arena;
    std::vector<View> values;
    std::vector<std::vector<View>> operands;  // per plan: the current op's operands (capacity reused)
  };

  /// Plans `body`, a block graph. Throws UserError where its structure leaves what it computes
  /// undefined (a for-loop or grid below 1, a thread_graph op without a thread graph, a thread
  /// graph that saves fewer outputs than its op has, a path that breaks Definition 2.1).
  explicit BlockExecutor(const Graph& body) : body_(body) {
    MUGRAPH_CHECK(body.level == Level::block) << "a graph_kernel body must be a block graph";
    if (body.forloop < 1) throw UserError("the block graph's for-loop range is " + std::to_string(body.forloop));
    for (int axis = 0; axis < 3; ++axis)
      if (body.grid[axis] < 1)
        throw UserError("the block graph's grid " + std::string(axis_name(axis)) + " is " +
                        std::to_string(body.grid[axis]));
    add_plan(body);
  }

  const Graph& body() const { return body_; }
  /// plans()[0] is the block graph; a thread graph's plan comes after the plan of the graph that
  /// holds it (plans are added depth first).
  const std::vector<Plan>& plans() const { return plans_; }

  Worker make_worker() const {
    Worker w;
    w.arena.assign(static_cast<size_t>(arena_elems_), typename Values::Elem{});
    w.values.assign(static_cast<size_t>(num_values_), View{});
    w.operands.resize(plans_.size());
    for (auto& v : w.operands) v.reserve(8);
    return w;
  }

  /// The buffer of tensor t of plan p in worker w.
  MutView buffer(const Plan& p, Worker& w, TensorId t) const {
    return Values::buffer(w.arena.data() + p.offset[t.index()], p.g->type(t).shape);
  }

  /// Runs the ops of plan p that belong to `phase` (thread graphs: all their live ops, in one
  /// call) in block b, iteration iter, reading the kernel's inputs `params` (a thread graph: its
  /// op's operands) and writing `outputs` by omap. `hooks` says which ops to skip
  /// (`bool skip(const Plan&, size_t op)`) and computes the rest (`bool compute(const Plan&,
  /// size_t op, const std::vector<View>& operands, const MutView& out)`, false when the run is
  /// void, which ends it: exec returns false).
  template <class Hooks>
  bool exec(const Plan& p, Worker& w, BlockPhase phase, const std::vector<View>& params,
            const std::vector<MutView>* outputs, const std::array<int64_t, 3>& b, int64_t iter, Hooks& hooks) const {
    const Graph& g = *p.g;
    View* vals = w.values.data() + p.value_base;
    std::vector<View>& ins = w.operands[static_cast<size_t>(p.index)];
    for (size_t i = 0; i < g.ops.size(); ++i) {
      if (p.phase[i] != phase || hooks.skip(p, i)) continue;
      const Op& op = g.ops[i];
      switch (op_info(op.kind).category) {
        case OpCategory::iterator: {
          auto io = static_cast<size_t>(op.attrs.io_index);
          MUGRAPH_CHECK(io < params.size()) << body_op_where(g, i) << " reads input " << io << " of " << params.size();
          View v = g.level == Level::block ? Values::tile(g, op.attrs, params[io], b, iter) : params[io];
          MUGRAPH_CHECK(Values::shape(v) == g.type(op.outputs[0]).shape)
              << body_op_where(g, i) << " loads a tile " << Values::shape(v).str() << " but its tensor is "
              << g.type(op.outputs[0]).shape.str();
          vals[op.outputs[0].index()] = v;
          break;
        }
        case OpCategory::saver: {
          if (g.level != Level::block) break;  // thread graphs: the thread_graph op picks up `saved`
          auto io = static_cast<size_t>(op.attrs.io_index);
          MUGRAPH_CHECK(outputs && io < outputs->size()) << body_op_where(g, i) << " writes output " << io;
          const View& src = vals[op.inputs[0].index()];
          Values::copy(src, Values::region(op.attrs, (*outputs)[io], Values::shape(src), b));
          break;
        }
        case OpCategory::accumulator: {
          const View& src = vals[op.inputs[0].index()];
          MutView acc = buffer(p, w, op.outputs[0]);
          if (op.attrs.dim == kPhi) {
            if (iter == 0) {
              Values::copy(src, acc);
            } else {
              Values::add_into(src, acc);
            }
          } else {
            int64_t ext = Values::shape(src)[op.attrs.dim];
            Values::copy(src, acc.slice(op.attrs.dim, iter * ext, ext));
          }
          vals[op.outputs[0].index()] = acc;
          break;
        }
        case OpCategory::thread_body: {
          const Plan& q = plans_[static_cast<size_t>(p.nested[i])];
          ins.clear();
          for (TensorId t : op.inputs) ins.push_back(vals[t.index()]);
          // A thread graph runs whole. Its plan has operands of its own: `ins` is handed to it intact.
          if (!exec(q, w, BlockPhase::loop, ins, nullptr, b, 0, hooks)) return false;
          const View* inner = w.values.data() + q.value_base;
          for (size_t k = 0; k < op.outputs.size(); ++k) vals[op.outputs[k].index()] = inner[q.saved[k].index()];
          break;
        }
        default: {
          TensorId t = op.outputs[0];
          if (op.kind == OpKind::reshape) {
            if (std::optional<View> alias = Values::alias(vals[op.inputs.at(0).index()], g.type(t).shape)) {
              vals[t.index()] = *alias;  // row-major reshape of dense data: a view
              break;
            }
          }
          ins.clear();
          for (TensorId in : op.inputs) ins.push_back(vals[in.index()]);
          MutView out = buffer(p, w, t);
          if (!hooks.compute(p, i, ins, out)) return false;
          vals[t.index()] = out;
          break;
        }
      }
    }
    return true;
  }

 private:
  int32_t add_plan(const Graph& g) {
    for (size_t i = 0; i < g.ops.size(); ++i) {
      for (TensorId t : g.ops[i].inputs)
        MUGRAPH_CHECK(t.valid() && t.index() < g.tensors.size()) << body_op_where(g, i) << " reads tensor " << t.value;
      for (TensorId t : g.ops[i].outputs)
        MUGRAPH_CHECK(t.valid() && t.index() < g.tensors.size()) << body_op_where(g, i) << " writes tensor " << t.value;
    }
    auto index = static_cast<int32_t>(plans_.size());
    {
      Plan p;
      p.g = &g;
      p.index = index;
      p.value_base = num_values_;
      p.phase = block_phases(g);  // the block graph's loop and post-loop ops; thread graphs: all loop
      p.offset.assign(g.tensors.size(), -1);
      p.nested.assign(g.ops.size(), -1);
      plans_.push_back(std::move(p));
    }
    num_values_ += static_cast<int32_t>(g.tensors.size());
    // plans_ grows under the recursion below: index it, never hold a reference across it.
    auto plan = [&]() -> Plan& { return plans_[static_cast<size_t>(index)]; };
    for (size_t i = 0; i < g.ops.size(); ++i) {
      const Op& op = g.ops[i];
      if (plan().phase[i] == BlockPhase::dead) continue;
      bool buffered = false;
      switch (op_info(op.kind).category) {
        case OpCategory::iterator:
          break;
        case OpCategory::saver:
          if (g.level == Level::thread) {
            auto io = static_cast<size_t>(op.attrs.io_index);
            if (plan().saved.size() <= io) plan().saved.resize(io + 1);
            plan().saved[io] = op.inputs.at(0);
          }
          break;
        case OpCategory::accumulator:
          if (g.level != Level::block) throw UserError(body_op_where(g, i) + " is only meaningful in a block graph");
          buffered = true;
          break;
        case OpCategory::thread_body: {
          if (g.level != Level::block || op.attrs.body < 0 || static_cast<size_t>(op.attrs.body) >= g.bodies.size())
            throw UserError(body_op_where(g, i) + " has no thread-graph body");
          const Graph& tb = g.bodies[static_cast<size_t>(op.attrs.body)];
          if (tb.level != Level::thread) throw UserError(body_op_where(g, i) + " needs a thread graph as its body");
          int32_t n = add_plan(tb);
          plan().nested[i] = n;
          const size_t saves = plans_[static_cast<size_t>(n)].saved.size();
          if (saves != op.outputs.size())
            throw UserError(body_op_where(g, i) + " has " + std::to_string(op.outputs.size()) +
                            " outputs but its thread graph saves " + std::to_string(saves));
          break;
        }
        default:
          if (!is_compute_op(op.kind))
            throw UserError(body_op_where(g, i) + " cannot appear in a " + std::string(level_name(g.level)) +
                            " graph");
          buffered = true;
          break;
      }
      if (buffered) {
        for (TensorId t : op.outputs) {
          plan().offset[t.index()] = arena_elems_;
          arena_elems_ += Values::buffer_elems(g.type(t).shape.numel());
        }
      }
    }
    if (g.level == Level::thread)
      for (size_t io = 0; io < plan().saved.size(); ++io)
        if (!plan().saved[io].valid())
          throw UserError("no output_saver of the thread graph writes output " + std::to_string(io));
    return index;
  }

  const Graph& body_;
  std::vector<Plan> plans_;
  int64_t arena_elems_ = 0;
  int32_t num_values_ = 0;
};

}  // namespace mugraph::interp
