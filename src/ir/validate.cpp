// Validity of μGraphs: well-formedness of the data, the shape rules, Definition 2.1's path rule
// and the target's memory limits.
#include "mugraph/validate.h"

#include <algorithm>
#include <set>
#include <vector>

namespace mugraph {

const std::vector<Target>& all_targets() {
  static const std::vector<Target> targets = {
      // Shared memory: the usable dynamic shared memory per block (A100: 164 KB, H100/H200: 227 KB).
      {"a100", "sm_80", 164 * 1024, int64_t{80} << 30, 255, 1024, 65535, 108},
      {"h100", "sm_90a", 227 * 1024, int64_t{80} << 30, 255, 1024, 65535, 132},
      {"h200", "sm_90a", 227 * 1024, int64_t{141} << 30, 255, 1024, 65535, 132},
  };
  return targets;
}

std::optional<Target> find_target(std::string_view name) {
  for (const Target& t : all_targets())
    if (t.name == name) return t;
  for (const Target& t : all_targets())
    if (t.arch == name) return t;
  return std::nullopt;
}

Target require_target(std::string_view name) {
  if (auto t = find_target(name)) return *t;
  std::string known;
  for (const Target& t : all_targets()) known += (known.empty() ? "" : ", ") + std::string(t.name);
  throw UserError("unknown target '" + std::string(name) + "'; known targets are " + known);
}

const Target& default_target() { return all_targets()[1]; }

int64_t block_shared_memory_bytes(const Graph& g) {
  // A tensor that is an operand of exactly one concat, once, is stored in its part of the
  // concat's buffer (the concat itself moves nothing); a tensor concatenated twice would need
  // two places, so it keeps its own.
  std::vector<int> concat_uses(g.tensors.size(), 0);
  for (const Op& op : g.ops)
    if (op.kind == OpKind::concat)
      for (TensorId t : op.inputs) ++concat_uses[t.index()];
  int64_t bytes = 0;
  for (size_t i = 0; i < g.tensors.size(); ++i)
    if (concat_uses[i] != 1) bytes += g.tensors[i].type.shape.numel() * dtype_bytes(g.tensors[i].type.dtype);
  return bytes;
}

// A thread graph runs as a loop in which each thread handles its elements one at a time, so an
// element-wise value needs one register while it is live; we count one per tensor (an upper
// bound on the live set). Ops that are not element-wise (matmul, sum) hold their whole per-thread
// share of the tensor: ceil(numel / threads) registers. 16 more cover indices and addresses.
int64_t thread_graph_registers(const Graph& g, const Dim3& threads) {
  int64_t per_thread = 16;
  int64_t nthreads = std::max<int64_t>(1, threads.volume());
  for (const Op& op : g.ops) {
    bool elementwise = op_info(op.kind).elementwise() || op.kind == OpKind::input_iterator;
    for (TensorId t : op.outputs) {
      int64_t regs_per_value = (dtype_bytes(g.type(t).dtype) + 3) / 4;
      per_thread += elementwise ? regs_per_value : (g.type(t).shape.numel() + nthreads - 1) / nthreads * regs_per_value;
    }
  }
  return per_thread;
}

namespace {

struct Validator {
  const Target& target;

  std::optional<Rejection> structure(const Graph& g, Level want, const std::string& where) {
    if (g.level != want)
      return reject(Reason::level_mismatch) << where << "is a " << level_name(g.level) << " graph where a "
                                            << level_name(want) << " graph belongs";
    std::vector<bool> body_used(g.bodies.size(), false);
    for (size_t i = 0; i < g.tensors.size(); ++i) {
      const Tensor& t = g.tensors[i];
      if (!t.producer.valid() || t.producer.index() >= g.ops.size())
        return reject(Reason::malformed) << where << "tensor " << i << " has no producing op";
      const auto& outs = g.ops[t.producer.index()].outputs;
      if (std::find(outs.begin(), outs.end(), TensorId(static_cast<int32_t>(i))) == outs.end())
        return reject(Reason::malformed) << where << "tensor " << i << " names op " << t.producer.value
                                         << " as its producer, which does not produce it";
      std::vector<int8_t> perm = t.layout;
      std::sort(perm.begin(), perm.end());
      bool is_perm = static_cast<int>(perm.size()) == t.type.shape.rank();
      for (size_t d = 0; is_perm && d < perm.size(); ++d) is_perm = perm[d] == static_cast<int8_t>(d);
      if (!is_perm) return reject(Reason::malformed) << where << "tensor " << i << " has a layout that is not a permutation of its dimensions";
    }
    std::set<std::string> input_names;
    for (size_t i = 0; i < g.ops.size(); ++i) {
      const Op& op = g.ops[i];
      std::string at = where + "op " + std::to_string(i) + " (" + std::string(op_name(op.kind)) + "): ";
      std::vector<TensorType> in;
      for (TensorId t : op.inputs) {
        if (!t.valid() || t.index() >= g.tensors.size())
          return reject(Reason::malformed) << at << "reads tensor " << t.value << ", which does not exist";
        if (g.tensors[t.index()].producer.value >= static_cast<int32_t>(i))
          return reject(Reason::malformed) << at << "reads tensor " << t.value << " before it is produced";
        in.push_back(g.tensors[t.index()].type);
      }
      if (op.attrs != used_attrs(op.kind, op.attrs))
        return reject(Reason::bad_attribute) << at << "sets attributes that " << op_name(op.kind) << " does not use";
      if (op.attrs.has_scalar && op.attrs.scalar_pos != 0 && op.attrs.scalar_pos != 1)
        return reject(Reason::bad_attribute) << at << "scalar position " << int(op.attrs.scalar_pos) << " is not 0 or 1";
      auto types = infer_output_types(g, op.kind, in, op.attrs);
      if (!types) return Rejection{types.rejection().reason, at + types.rejection().message};
      if (types->size() != op.outputs.size())
        return reject(Reason::malformed) << at << "has " << op.outputs.size() << " outputs; its shape rule gives "
                                         << types->size();
      for (size_t k = 0; k < op.outputs.size(); ++k) {
        TensorId t = op.outputs[k];
        if (!t.valid() || t.index() >= g.tensors.size() || g.tensors[t.index()].producer.value != static_cast<int32_t>(i))
          return reject(Reason::malformed) << at << "output " << k << " is not a tensor it produces";
        if (g.tensors[t.index()].type != (*types)[k])
          return reject(Reason::shape_mismatch) << at << "output " << k << " is stored as "
                                                << g.tensors[t.index()].type.str() << " but its shape rule gives "
                                                << (*types)[k].str();
      }
      if (op.kind == OpKind::input && !input_names.insert(op.attrs.name).second)
        return reject(Reason::malformed) << at << "a second input named '" << op.attrs.name << "'";
      if (op.attrs.body >= 0) {
        if (op_info(op.kind).category != OpCategory::kernel_body && op_info(op.kind).category != OpCategory::thread_body)
          return reject(Reason::malformed) << at << "has a body but is not a graph_kernel or thread_graph";
        if (body_used[static_cast<size_t>(op.attrs.body)])
          return reject(Reason::malformed) << at << "shares body " << op.attrs.body << " with another op";
        body_used[static_cast<size_t>(op.attrs.body)] = true;
      }
    }
    for (size_t b = 0; b < g.bodies.size(); ++b)
      if (!body_used[b]) return reject(Reason::malformed) << where << "body " << b << " belongs to no op";
    return std::nullopt;
  }

  // Definition 2.1 on a block graph: every path from an input iterator to an output saver passes
  // at most one accumulator, and exactly one when the for-loop runs more than once; except that
  // a path from a loop-invariant iterator (fmap φ: the same tile in every iteration) may join
  // the accumulated values after the loop without one (an epilogue operand: a bias, a residual).
  // A saved value must still pass an accumulator. For each tensor we track the fewest
  // accumulators on a path from a per-iteration iterator (kNone: no such path) and the most on
  // any path.
  std::optional<Rejection> path_rule(const Graph& g, const std::string& where) {
    constexpr int kNone = 1 << 20;
    std::vector<int> lo(g.tensors.size(), 0), hi(g.tensors.size(), 0);
    for (size_t i = 0; i < g.ops.size(); ++i) {
      const Op& op = g.ops[i];
      int l = kNone, h = 0;
      if (op.kind == OpKind::input_iterator && (g.forloop == 1 || op.attrs.fmap != kPhi)) l = 0;
      for (TensorId t : op.inputs) {
        l = std::min(l, lo[t.index()]);
        h = std::max(h, hi[t.index()]);
      }
      if (op.kind == OpKind::accum) {
        if (h > 0)
          return reject(Reason::path_rule) << where << "op " << i
                                           << " (accum) accumulates a value that was already accumulated; a path may "
                                              "pass at most one accumulator";
        l = h = 1;
      }
      if (op.kind == OpKind::output_saver && g.forloop > 1 && (l == 0 || h == 0))
        return reject(Reason::path_rule) << where << "op " << i << " (output_saver) saves a value with a path from an input"
                                         << " iterator that passes no accumulator, but the for-loop runs " << g.forloop
                                         << " iterations";
      for (TensorId t : op.outputs) {
        lo[t.index()] = l;
        hi[t.index()] = h;
      }
    }
    return std::nullopt;
  }

  std::optional<Rejection> thread_graph(const Graph& g, const Dim3& threads, const std::string& where) {
    if (auto r = structure(g, Level::thread, where)) return r;
    int64_t regs = thread_graph_registers(g, threads);
    if (regs > target.registers_per_thread)
      return reject(Reason::registers) << where << "needs about " << regs << " registers per thread; " << target.name
                                       << " has " << target.registers_per_thread;
    return std::nullopt;
  }

  std::optional<Rejection> block_graph(const Graph& g, const std::string& where) {
    // Bodies first, so that a broken body is reported as itself rather than as its op's output.
    for (size_t b = 0; b < g.bodies.size(); ++b)
      if (auto r = thread_graph(g.bodies[b], g.threads, where + "thread graph " + std::to_string(b) + ": ")) return r;
    if (auto r = structure(g, Level::block, where)) return r;
    for (int axis = 0; axis < 3; ++axis) {
      int64_t limit = axis == 0 ? (int64_t{1} << 31) - 1 : target.max_grid_y_z;
      if (g.grid[axis] < 1 || g.grid[axis] > limit)
        return reject(Reason::bad_attribute) << where << "grid " << axis_name(axis) << " = " << g.grid[axis]
                                             << " is outside 1.." << limit;
      if (g.threads[axis] < 1)
        return reject(Reason::bad_attribute) << where << "threads " << axis_name(axis) << " = " << g.threads[axis];
    }
    if (g.threads.volume() > target.max_threads_per_block)
      return reject(Reason::bad_attribute) << where << g.threads.volume() << " threads per block; at most "
                                           << target.max_threads_per_block;
    if (g.forloop < 1 || g.forloop > kMaxExtent)
      return reject(Reason::bad_attribute) << where << "for-loop range " << g.forloop << " must be at least 1";
    if (auto r = path_rule(g, where)) return r;
    int64_t smem = block_shared_memory_bytes(g);
    if (smem > target.shared_memory_bytes)
      return reject(Reason::shared_memory) << where << "its shared-memory tensors take " << smem << " bytes; "
                                           << target.name << " has " << target.shared_memory_bytes;
    return std::nullopt;
  }

  std::optional<Rejection> kernel_graph(const Graph& g, bool require_outputs = true) {
    for (size_t b = 0; b < g.bodies.size(); ++b)
      if (auto r = block_graph(g.bodies[b], "block graph " + std::to_string(b) + ": ")) return r;
    if (auto r = structure(g, Level::kernel, "")) return r;
    if (g.outputs.empty() && require_outputs) return reject(Reason::missing_output) << "the graph has no outputs";
    if (g.output_names.size() != g.outputs.size())
      return reject(Reason::malformed) << g.outputs.size() << " outputs but " << g.output_names.size() << " output names";
    for (TensorId t : g.outputs)
      if (!t.valid() || t.index() >= g.tensors.size())
        return reject(Reason::missing_output) << "output tensor " << t.value << " does not exist";
    int64_t bytes = 0;
    for (const Tensor& t : g.tensors) bytes += t.type.shape.numel() * dtype_bytes(t.type.dtype);
    if (bytes > target.device_memory_bytes)
      return reject(Reason::device_memory) << "the device tensors take " << bytes << " bytes; " << target.name << " has "
                                           << target.device_memory_bytes;
    return std::nullopt;
  }
};

}  // namespace

std::optional<Rejection> validate(const Graph& g, const Target& target) {
  Validator v{target};
  return v.kernel_graph(g);
}

std::optional<Rejection> validate_prefix(const Graph& g, const Target& target) {
  Validator v{target};
  return v.kernel_graph(g, /*require_outputs=*/false);
}

}  // namespace mugraph
