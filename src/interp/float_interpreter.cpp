// run_float: the kernel-level driver of the float interpreter. Pre-defined kernel ops run on the
// whole tensors (split over the worker pool in shape-determined pieces); graph_kernel ops run
// their block graphs block by block in parallel (block_program.h).
#include <algorithm>
#include <limits>
#include <optional>
#include <string>

#include "block_program.h"
#include "mugraph/interp.h"
#include "mugraph/validate.h"
#include "op_eval.h"
#include "tensor_ops.h"
#include "thread_pool.h"

namespace mugraph {

namespace {

using interp::MutView;
using interp::View;

/// Blocks per task of a graph-defined kernel (see BlockProgram::run_blocks).
constexpr int64_t kBlockGroup = 16;

std::string op_where(const Graph& g, size_t i) {
  return "kernel graph op " + std::to_string(i) + " (" + std::string(op_name(g.ops[i].kind)) + ")";
}

/// A target without limits: validity on it is validity minus the GPU's memory and register limits,
/// which do not bind the interpreter.
const Target& host_target() {
  constexpr int64_t kBig = std::numeric_limits<int64_t>::max();
  static const Target host{"host", "cpu", kBig, kBig, kBig, kBig, kBig};
  return host;
}

class KernelRunner {
 public:
  KernelRunner(const Graph& g, const std::vector<HostTensor>& inputs, const InterpOptions& options,
               interp::ThreadPool& pool)
      : g_(g), inputs_(inputs), options_(options), pool_(pool), views_(g.tensors.size()), store_(g.tensors.size()) {}

  std::vector<HostTensor> run() {
    // Ops needed for the outputs, and each tensor's last reader (to free it early).
    std::vector<bool> needed(g_.tensors.size(), false), live(g_.ops.size(), false);
    std::vector<size_t> last_use(g_.tensors.size(), 0);
    std::vector<bool> is_output(g_.tensors.size(), false);
    for (TensorId t : g_.outputs) needed[t.index()] = is_output[t.index()] = true;
    for (size_t i = g_.ops.size(); i-- > 0;) {
      const Op& op = g_.ops[i];
      bool l = op.kind == OpKind::input;  // inputs are always checked and bound
      for (TensorId t : op.outputs) l = l || needed[t.index()];
      if (!l) continue;
      live[i] = true;
      for (TensorId t : op.inputs) {
        if (!needed[t.index()]) last_use[t.index()] = i;
        needed[t.index()] = true;
      }
    }
    size_t next_input = 0;
    for (size_t i = 0; i < g_.ops.size(); ++i) {
      if (!live[i]) continue;
      const Op& op = g_.ops[i];
      switch (op_info(op.kind).category) {
        case OpCategory::source: {
          const HostTensor& in = inputs_[next_input++];
          views_[op.outputs.at(0).index()] = View::dense(in.data.data(), in.type.shape);
          break;
        }
        case OpCategory::kernel_body:
          run_graph_kernel(i);
          break;
        default: {
          if (!interp::is_compute_op(op.kind)) throw UserError(op_where(g_, i) + " cannot appear in a kernel graph");
          std::vector<View> ins;
          for (TensorId t : op.inputs) ins.push_back(views_[t.index()]);
          TensorId out = op.outputs.at(0);
          MutView o = allocate(out, g_.type(out));
          float scalar = op.attrs.has_scalar ? interp::scalar_operand(op.attrs) : 0.0f;
          interp::eval_compute_op(op, ins, scalar, o, g_.type(out).dtype, &pool_);
          break;
        }
      }
      for (TensorId t : op.inputs)
        if (last_use[t.index()] == i && !is_output[t.index()]) store_[t.index()] = HostTensor();
    }
    std::vector<HostTensor> result;
    for (size_t k = 0; k < g_.outputs.size(); ++k) {
      TensorId t = g_.outputs[k];
      bool again =
          std::find(g_.outputs.begin() + static_cast<std::ptrdiff_t>(k) + 1, g_.outputs.end(), t) != g_.outputs.end();
      if (!again && !store_[t.index()].data.empty()) {
        result.push_back(std::move(store_[t.index()]));
        continue;
      }
      HostTensor copy(g_.type(t));
      const View& v = views_[t.index()];
      copy.data.assign(v.data, v.data + v.numel());
      result.push_back(std::move(copy));
    }
    return result;
  }

 private:
  MutView allocate(TensorId t, const TensorType& type) {
    store_[t.index()] = HostTensor(type);
    MutView v = MutView::dense(store_[t.index()].data.data(), type.shape);
    views_[t.index()] = v;
    return v;
  }

  void run_graph_kernel(size_t i) {
    const Op& op = g_.ops[i];
    if (op.attrs.body < 0 || static_cast<size_t>(op.attrs.body) >= g_.bodies.size())
      throw UserError(op_where(g_, i) + " refers to body " + std::to_string(op.attrs.body) + " of " +
                      std::to_string(g_.bodies.size()));
    const Graph& body = g_.bodies[static_cast<size_t>(op.attrs.body)];
    if (body.level != Level::block) throw UserError(op_where(g_, i) + " needs a block graph as its body");
    auto types = body_output_types(body);
    if (!types) throw UserError(op_where(g_, i) + ": " + types.rejection().str());
    if (types->size() != op.outputs.size())
      throw UserError(op_where(g_, i) + " has " + std::to_string(op.outputs.size()) +
                      " outputs but its block graph saves " + std::to_string(types->size()));
    if (body.params.size() != op.inputs.size())
      throw UserError(op_where(g_, i) + " passes " + std::to_string(op.inputs.size()) +
                      " tensors but its block graph takes " + std::to_string(body.params.size()));
    std::vector<View> params;
    for (size_t k = 0; k < op.inputs.size(); ++k) {
      if (body.params[k] != g_.type(op.inputs[k]))
        throw UserError(op_where(g_, i) + ": input " + std::to_string(k) + " is " + g_.type(op.inputs[k]).str() +
                        " but its block graph expects " + body.params[k].str());
      params.push_back(views_[op.inputs[k].index()]);
    }
    std::vector<MutView> outs;
    for (size_t k = 0; k < op.outputs.size(); ++k) {
      if ((*types)[k] != g_.type(op.outputs[k]))
        throw UserError(op_where(g_, i) + ": output " + std::to_string(k) + " is " + g_.type(op.outputs[k]).str() +
                        " but its block graph saves " + (*types)[k].str());
      outs.push_back(allocate(op.outputs[k], (*types)[k]));
    }
    interp::BlockProgram program(body, options_.share_block_invariant);
    // Blocks run in groups of consecutive indices, one group per task (see run_blocks); the
    // grouping only orders the work, so results do not depend on it.
    const int64_t blocks = body.grid.volume();
    const int64_t group = std::min<int64_t>(kBlockGroup, blocks);
    std::vector<std::vector<interp::BlockWorker>> states(static_cast<size_t>(pool_.size()));
    auto worker_states = [&](int w) -> std::vector<interp::BlockWorker>& {
      auto& st = states[static_cast<size_t>(w)];
      if (st.empty())
        for (int64_t k = 0; k < group; ++k) st.push_back(program.make_worker());
      return st;
    };
    // Tiles every block would compute alike: once per iteration, shared by all blocks.
    std::vector<float> shared(static_cast<size_t>(program.shared_floats()));
    if (!shared.empty())
      pool_.parallel_for(body.forloop, [&](int w, int64_t iter) {
        program.precompute(worker_states(w)[0], params, iter, shared.data());
      });
    pool_.parallel_for((blocks + group - 1) / group, [&](int w, int64_t g) {
      int64_t first = g * group;
      program.run_blocks(worker_states(w), params, outs, first, std::min(group, blocks - first),
                         shared.empty() ? nullptr : shared.data());
    });
  }

  const Graph& g_;
  const std::vector<HostTensor>& inputs_;
  const InterpOptions& options_;
  interp::ThreadPool& pool_;
  std::vector<View> views_;        // every tensor, by id
  std::vector<HostTensor> store_;  // tensors this run made (inputs stay with the caller)
};

}  // namespace

int64_t host_memory_bytes(const Graph& g) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t total = 0;
  for (const Tensor& t : g.tensors) {
    int64_t n = 1;
    for (int64_t d : t.type.shape) n = (d > 0 && n > kMax / d) ? kMax : n * std::max<int64_t>(d, 0);
    int64_t bytes = n > kMax / 4 ? kMax : n * 4;
    total = total > kMax - bytes ? kMax : total + bytes;
  }
  return total;
}

int64_t run_steps(const Graph& g) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  auto add = [](int64_t a, int64_t b) { return a > kMax - b ? kMax : a + b; };
  auto mul = [](int64_t a, int64_t b) { return b > 0 && a > kMax / b ? kMax : a * std::max<int64_t>(b, 0); };
  auto numel = [&](const Shape& s) {
    int64_t n = 1;
    for (int64_t d : s) n = mul(n, d);
    return n;
  };
  int64_t steps = 0;
  for (const Op& op : g.ops) {
    for (TensorId t : op.outputs) {
      if (t.index() >= g.tensors.size()) continue;
      int64_t n = numel(g.type(t).shape);
      if (op.kind == OpKind::matmul && !op.inputs.empty() && op.inputs[0].index() < g.tensors.size()) {
        const Shape& a = g.type(op.inputs[0]).shape;
        if (a.rank() > 0) n = mul(n, a[a.rank() - 1]);
      }
      steps = add(steps, n);
    }
    if (op.kind == OpKind::sum && !op.inputs.empty() && op.inputs[0].index() < g.tensors.size())
      steps = add(steps, numel(g.type(op.inputs[0]).shape));
    if (op.attrs.body >= 0 && static_cast<size_t>(op.attrs.body) < g.bodies.size()) {
      const Graph& body = g.bodies[static_cast<size_t>(op.attrs.body)];
      int64_t per_run = run_steps(body);
      if (body.level == Level::block) per_run = mul(mul(per_run, body.grid.volume()), body.forloop);
      steps = add(steps, per_run);
    }
  }
  return steps;
}

std::vector<HostTensor> run_float(const Graph& g, const std::vector<HostTensor>& inputs, const InterpOptions& options) {
  if (g.level != Level::kernel)
    throw UserError("run_float needs a kernel graph, got a " + std::string(level_name(g.level)) + " graph");
  int64_t bytes = host_memory_bytes(g);
  if (bytes > options.max_bytes)
    throw UserError("the graph needs " + std::to_string(bytes) + " bytes of host memory; the limit is " +
                    std::to_string(options.max_bytes));
  // Everything the interpreter relies on (ids, op order, shape rules, maps, the path rule) is
  // validity; checking it here means a malformed graph is refused instead of misread.
  if (auto r = validate(g, host_target())) throw UserError("the graph is not a valid μGraph: " + r->str());
  size_t expected = 0;
  for (const Op& op : g.ops) expected += op.kind == OpKind::input ? 1 : 0;
  if (inputs.size() != expected)
    throw UserError("the graph has " + std::to_string(expected) + " inputs but " + std::to_string(inputs.size()) +
                    " were given");
  size_t k = 0;
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::input) continue;
    const TensorType& want = g.type(op.outputs.at(0));
    const HostTensor& in = inputs[k];
    std::string which = "input " + std::to_string(k) + " ('" + op.attrs.name + "')";
    if (in.type != want) throw UserError(which + " should be " + want.str() + " but is " + in.type.str());
    if (static_cast<int64_t>(in.data.size()) != want.shape.numel())
      throw UserError(which + " holds " + std::to_string(in.data.size()) + " values but its shape " + want.shape.str() +
                      " has " + std::to_string(want.shape.numel()) + " elements");
    ++k;
  }
  const int threads = interp::resolve_threads(options.threads, "the interpreter's");
  interp::init_blas();
  interp::ThreadPool pool(threads);
  return KernelRunner(g, inputs, options, pool).run();
}

}  // namespace mugraph
