#include "lift_repeats.h"

#include <algorithm>
#include <map>
#include <optional>
#include <variant>

#include "program_parts.h"

namespace mugraph::search_detail {

namespace {

/// A tensor that is a broadcast: `m` is `x` (of rank m's + 1, extent 1 at one of dims d and
/// d + 1) broadcast to extents (a, b) there and the two dims merged.
struct Source {
  OpId op;  ///< the op that makes m (the repeat, or the reshape after it)
  TensorId m;
  int d = 0;
  int64_t a = 1, b = 1;
  TensorId x;
  Shape x_shape;  ///< x as the split form reads it: x's own shape, or m's with (1, n) at d
};

/// `s` with dim d replaced by the extents (p, q).
Shape split_dim(const Shape& s, int d, int64_t p, int64_t q) {
  Shape r;
  for (int i = 0; i < s.rank(); ++i) {
    if (i != d) {
      r.push_back(s[i]);
      continue;
    }
    r.push_back(p);
    r.push_back(q);
  }
  return r;
}

/// The broadcast `op` makes, if it is one of the two forms lift_repeats() takes.
std::optional<Source> source_of(const Graph& g, OpId id) {
  const Op& op = g.op(id);
  if (op.kind == OpKind::repeat) {
    const Shape& xs = g.type(op.inputs[0]).shape;
    if (xs.rank() >= kMaxRank) return std::nullopt;
    Source s{id, op.outputs[0], op.attrs.dim, op.attrs.times, xs[op.attrs.dim], op.inputs[0], {}};
    s.x_shape = split_dim(xs, s.d, 1, s.b);
    return s;
  }
  if (op.kind != OpKind::reshape) return std::nullopt;
  const Op& rep = g.op(g.tensor(op.inputs[0]).producer);
  if (rep.kind != OpKind::repeat) return std::nullopt;
  const Shape &ts = g.type(rep.outputs[0]).shape, &ms = g.type(op.outputs[0]).shape;
  const Shape& xs = g.type(rep.inputs[0]).shape;
  const int e = rep.attrs.dim;
  if (xs[e] != 1 || ms.rank() + 1 != ts.rank()) return std::nullopt;
  // The reshape merges e with the dim before or after it.
  for (int d : {e - 1, e}) {
    if (d < 0 || d + 1 >= ts.rank()) continue;
    if (split_dim(ms, d, ts[d], ts[d + 1]) == ts)
      return Source{id, op.outputs[0], d, ts[d], ts[d + 1], rep.inputs[0], xs};
  }
  return std::nullopt;
}

/// "repeat (KR)": what a source is, by the name of the tensor it makes (its output name if it
/// is a program output).
std::string source_summary(const Graph& g, const Source& s) {
  std::string name = g.tensor(s.m).name;
  for (size_t i = 0; i < g.outputs.size(); ++i)
    if (g.outputs[i] == s.m) name = g.output_names[i];
  return name.empty() ? "repeat" : "repeat (" + name + ")";
}

/// How one op of the rewritten set reads one operand.
enum class Read : uint8_t {
  split,     ///< a rewritten tensor: its split form
  as_is,     ///< lacks the dim, or holds extent 1 as its first dim: broadcasts unchanged
  unit,      ///< extent 1 at the dim: viewed with (1, 1) there
  full,      ///< the full extent: viewed with (a, b) there
  absorbed,  ///< a broadcast of its own with the same split: its x
};

struct Plan {
  std::map<TensorId, int> dim;                              ///< rewritten tensors: the dim that is split
  std::map<OpId, std::vector<std::pair<Read, int>>> reads;  ///< rewritten ops: per operand, how and at which dim
  std::map<TensorId, Source> absorbed;
  int grown = 0;  ///< rewritten ops the generator grows
};

/// Plans the rewrite of `src`, or says why it cannot be done.
std::variant<Plan, std::string> plan_lift(const Graph& g, const Source& src,
                                          const std::map<TensorId, Source>& sources) {
  Plan plan;
  plan.dim[src.m] = src.d;
  for (size_t o = src.op.index() + 1; o < g.ops.size(); ++o) {
    const Op& op = g.ops[o];
    const OpInfo& info = op_info(op.kind);
    int at = -1;  // the dim of the result that is split; -1: none, or not the same for all
    bool reads_split = false, same = true;
    const int rank = g.type(op.outputs[0]).shape.rank();
    // The dim of the result an operand's dim d lines up with (right-aligned, the batch dims
    // alone for a matmul), and the reverse.
    auto to_result = [&](TensorId t, int d) { return d + rank - g.type(t).shape.rank(); };
    for (TensorId in : op.inputs) {
      auto it = plan.dim.find(in);
      if (it == plan.dim.end()) continue;
      reads_split = true;
      const int r = to_result(in, it->second);
      same = same && (at < 0 || at == r);
      at = r;
    }
    if (!reads_split) continue;
    const std::string reader =
        std::string(op_name(op.kind)) +
        (g.tensor(op.outputs[0]).name.empty() ? std::string() : " (" + g.tensor(op.outputs[0]).name + ")");
    std::string why;  // empty: the op takes the split form
    if (!same)
      why = reader + " reads it split at two different dimensions";
    else if (info.category == OpCategory::matmul && at >= rank - 2)
      why = reader + " contracts it, or keeps the repeated dimension as a matrix dimension";
    else if (info.category == OpCategory::reduction && (op.attrs.to != 1 || op.attrs.dim == at))
      why = reader + " sums over the repeated dimension";
    else if (info.category != OpCategory::matmul && info.category != OpCategory::reduction && !info.elementwise())
      why = reader + " is a layout op";
    else if (rank >= kMaxRank)
      why = reader + " has rank " + std::to_string(rank) + ", the most a tensor has";
    if (!why.empty()) {
      if (generator_grows(op)) return why;
      continue;  // a kept op: it reads the value merged back
    }
    std::vector<std::pair<Read, int>> reads;
    for (TensorId in : op.inputs) {
      const Shape& s = g.type(in).shape;
      const int d = at - (rank - s.rank());
      if (plan.dim.count(in)) {
        reads.push_back({Read::split, d});
        continue;
      }
      if (d < 0) {
        reads.push_back({Read::as_is, d});
        continue;
      }
      auto other = sources.find(in);
      if (other != sources.end() && other->second.d == d && other->second.a == src.a && other->second.b == src.b) {
        plan.absorbed.emplace(in, other->second);
        reads.push_back({Read::absorbed, d});
        continue;
      }
      if (s[d] == 1 && d == 0) {
        reads.push_back({Read::as_is, d});
        continue;
      }
      const Op& producer = g.op(g.tensor(in).producer);
      if (producer.kind != OpKind::input && generator_grows(producer))
        return reader + " reads " + (g.tensor(in).name.empty() ? "a value" : g.tensor(in).name) +
               ", which would need a reshape between ops the search fuses";
      reads.push_back({s[d] == 1 ? Read::unit : Read::full, d});
    }
    plan.reads[OpId{static_cast<int32_t>(o)}] = std::move(reads);
    plan.dim[op.outputs[0]] = at;
    ++plan.grown;
  }
  return plan;
}

TensorId append_or_check(Graph& g, OpKind kind, std::vector<TensorId> ins, const OpAttrs& attrs) {
  Expected<OpId> made = g.append(kind, std::move(ins), attrs);
  MUGRAPH_CHECK(made.ok()) << "lift_repeats: the rewritten " << op_name(kind)
                           << " does not fit: " << made.rejection().str();
  return g.op(*made).outputs[0];
}

/// `t` viewed at `shape`. A reshape of a reshape reads the first one's operand: the chain is
/// one view, and a program output made by one reshape of a kernel's result is written in
/// place by that kernel (a chain of two would be copied).
TensorId reshaped(Graph& g, TensorId t, const Shape& shape) {
  const Op& producer = g.op(g.tensor(t).producer);
  if (producer.kind == OpKind::reshape) t = producer.inputs[0];
  if (g.type(t).shape == shape) return t;
  OpAttrs a;
  a.shape = shape;
  return append_or_check(g, OpKind::reshape, {t}, a);
}

/// Carries out `plan`: the ops it rewrites read the split forms, and the values that leave them
/// are repeated and merged back.
Graph apply_lift(const Graph& g, const Source& src, const Plan& plan) {
  std::vector<bool> leaves(g.tensors.size(), false);  // rewritten values read as they were
  for (TensorId t : g.outputs) leaves[t.index()] = plan.dim.count(t) > 0;
  for (size_t o = 0; o < g.ops.size(); ++o)
    if (!plan.reads.count(OpId{static_cast<int32_t>(o)}))
      for (TensorId in : g.ops[o].inputs) leaves[in.index()] = leaves[in.index()] || plan.dim.count(in) > 0;

  Graph out;
  std::vector<TensorId> as_was(g.tensors.size()), split(g.tensors.size());
  // Views of values as they were, made once however many ops read them.
  std::map<std::pair<TensorId, std::vector<int64_t>>, TensorId> views;
  auto view = [&](TensorId t, const Shape& shape) {
    const std::pair key{t, shape.to_vector()};
    auto it = views.find(key);
    if (it == views.end()) it = views.emplace(key, reshaped(out, as_was[t.index()], shape)).first;
    return it->second;
  };
  // A split value merged back: its broadcast dims repeated to (a, b), then the two merged.
  auto merged = [&](TensorId t, const Tensor& original) {
    const int d = plan.dim.at(t);
    TensorId v = split[t.index()];
    for (int k : {d, d + 1}) {
      const int64_t want = k == d ? src.a : src.b;
      if (out.type(v).shape[k] == want) continue;
      OpAttrs a;
      a.dim = k;
      a.times = want;
      v = append_or_check(out, OpKind::repeat, {v}, a);
    }
    return reshaped(out, v, original.type.shape);
  };
  for (size_t o = 0; o < g.ops.size(); ++o) {
    const Op& op = g.ops[o];
    auto plan_reads = plan.reads.find(OpId{static_cast<int32_t>(o)});
    if (plan_reads == plan.reads.end()) {
      // As it was (the source too: dead unless something still reads it merged).
      std::vector<TensorId> ins;
      for (TensorId in : op.inputs) ins.push_back(as_was[in.index()]);
      const TensorId t = op.kind == OpKind::reshape && plan.dim.count(op.inputs[0])
                             ? reshaped(out, ins[0], op.attrs.shape)  // reads a value merged back
                             : append_or_check(out, op.kind, ins, op.attrs);
      if (out.tensors[t.index()].name.empty()) out.tensors[t.index()].name = g.tensor(op.outputs[0]).name;
      as_was[op.outputs[0].index()] = t;
      if (OpId{static_cast<int32_t>(o)} == src.op) {
        split[src.m.index()] = view(src.x, src.x_shape);
        if (leaves[src.m.index()]) as_was[src.m.index()] = merged(src.m, g.tensor(src.m));
      }
      continue;
    }
    std::vector<TensorId> ins;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const TensorId in = op.inputs[i];
      const auto [read, d] = plan_reads->second[i];
      const Shape& s = g.type(in).shape;
      switch (read) {
        case Read::split:
          ins.push_back(split[in.index()]);
          break;
        case Read::as_is:
          ins.push_back(as_was[in.index()]);
          break;
        case Read::unit:
          ins.push_back(view(in, split_dim(s, d, 1, 1)));
          break;
        case Read::full:
          ins.push_back(view(in, split_dim(s, d, src.a, src.b)));
          break;
        case Read::absorbed: {
          const Source& other = plan.absorbed.at(in);
          ins.push_back(view(other.x, other.x_shape));
          break;
        }
      }
    }
    OpAttrs attrs = op.attrs;
    const int d_in = plan.dim.count(op.inputs[0]) ? plan.dim.at(op.inputs[0]) : -1;
    if (op.kind == OpKind::sum && attrs.dim > d_in) ++attrs.dim;
    const TensorId t = append_or_check(out, op.kind, ins, attrs);
    const TensorId orig = op.outputs[0];
    split[orig.index()] = t;
    // The value's name goes where it is read as it was, if anywhere.
    if (leaves[orig.index()]) {
      as_was[orig.index()] = merged(orig, g.tensor(orig));
      out.tensors[as_was[orig.index()].index()].name = g.tensor(orig).name;
    } else {
      out.tensors[t.index()].name = g.tensor(orig).name;
    }
    // A split value read as it was too is named after it ("O_split"), so that a part of the
    // search that makes it reports a name; unless the program has that name already.
    const std::string& name = g.tensor(orig).name;
    if (leaves[orig.index()] && !name.empty() &&
        !std::any_of(g.tensors.begin(), g.tensors.end(), [&](const Tensor& x) { return x.name == name + "_split"; }))
      out.tensors[t.index()].name = name + "_split";
  }
  for (size_t i = 0; i < g.outputs.size(); ++i) out.mark_output(as_was[g.outputs[i].index()], g.output_names[i]);

  // Without the ops nothing reads any more (the repeats lifted); inputs stay, in order.
  const std::vector<bool> live = live_ops(out);
  Graph pruned;
  std::vector<TensorId> at(out.tensors.size());
  for (size_t o = 0; o < out.ops.size(); ++o) {
    const Op& op = out.ops[o];
    if (op.kind != OpKind::input && !live[o]) continue;
    std::vector<TensorId> ins;
    for (TensorId in : op.inputs) ins.push_back(at[in.index()]);
    const TensorId t = append_or_check(pruned, op.kind, ins, op.attrs);
    pruned.tensors[t.index()].name = out.tensor(op.outputs[0]).name;
    at[op.outputs[0].index()] = t;
  }
  for (size_t i = 0; i < out.outputs.size(); ++i) pruned.mark_output(at[out.outputs[i].index()], out.output_names[i]);
  return pruned;
}

}  // namespace

RepeatLift lift_repeats(const Graph& program) {
  RepeatLift r;
  r.program = program;
  // One repeat at a time, until none is left that can be lifted. Each lift leaves one op fewer
  // the search grows reading a repeat (the ops it rewrites read splits; what it merges back is
  // read by kept ops and outputs only), so this ends.
  for (;;) {
    const Graph& g = r.program;
    std::map<TensorId, Source> sources;
    for (size_t o = 0; o < g.ops.size(); ++o)
      if (auto s = source_of(g, OpId{static_cast<int32_t>(o)})) sources.emplace(s->m, *s);
    std::vector<std::string> kept;
    bool changed = false;
    for (const auto& [m, src] : sources) {
      auto plan = plan_lift(g, src, sources);
      if (auto* why = std::get_if<std::string>(&plan)) {
        kept.push_back(source_summary(g, src) + ": " + *why);
        continue;
      }
      const Plan& p = std::get<Plan>(plan);
      if (p.grown == 0) continue;  // read by kept ops and outputs alone: nothing to gain
      r.lifted.push_back(source_summary(g, src));
      for (const auto& [t, absorbed] : p.absorbed) r.lifted.push_back(source_summary(g, absorbed));
      r.program = apply_lift(g, src, p);
      changed = true;
      break;
    }
    if (!changed) {
      r.kept = std::move(kept);
      return r;
    }
  }
}

}  // namespace mugraph::search_detail
