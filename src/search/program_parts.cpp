#include "program_parts.h"

#include <algorithm>
#include <climits>
#include <functional>
#include <map>
#include <numeric>
#include <queue>
#include <set>

namespace mugraph::search_detail {

bool generator_grows(const Op& op) {
  const OpInfo& info = op_info(op.kind);
  if (info.category == OpCategory::layout) return false;
  if (op.kind == OpKind::sum && op.attrs.to > 1) return false;
  return true;
}

namespace {

int find(std::vector<int>& parent, int a) {
  while (parent[static_cast<size_t>(a)] != a)
    a = parent[static_cast<size_t>(a)] = parent[parent[static_cast<size_t>(a)]];
  return a;
}

}  // namespace

namespace {

/// The units of a grouping (parts and kept ops) and the order that computes each before what
/// reads it, or the units on a cycle where there is none.
struct UnitOrder {
  std::vector<int> order;      ///< slots: parts first, then kept ops
  std::vector<bool> on_cycle;  ///< per slot
};

/// Orders `units` slots given `successors` (Kahn, among the ready the one whose first op comes
/// first); where that leaves some out, marks the slots on a cycle (Tarjan's strongly connected
/// components of more than one slot).
UnitOrder order_units(const std::vector<std::set<size_t>>& successors, const std::vector<int32_t>& first_op) {
  const size_t units = successors.size();
  UnitOrder r;
  r.on_cycle.assign(units, false);
  std::vector<int> waiting(units, 0);
  for (size_t s = 0; s < units; ++s)
    for (size_t next : successors[s]) ++waiting[next];
  std::priority_queue<std::pair<int32_t, size_t>, std::vector<std::pair<int32_t, size_t>>, std::greater<>> ready;
  for (size_t s = 0; s < units; ++s)
    if (waiting[s] == 0) ready.push({first_op[s], s});
  while (!ready.empty()) {
    const size_t s = ready.top().second;
    ready.pop();
    r.order.push_back(static_cast<int>(s));
    for (size_t next : successors[s])
      if (--waiting[next] == 0) ready.push({first_op[next], next});
  }
  if (r.order.size() == units) return r;
  // Tarjan, recursive: a program has few units.
  std::vector<int> index(units, -1), low(units, 0);
  std::vector<bool> on_stack(units, false);
  std::vector<size_t> stack;
  int next_index = 0;
  std::function<void(size_t)> visit = [&](size_t v) {
    index[v] = low[v] = next_index++;
    stack.push_back(v);
    on_stack[v] = true;
    for (size_t w : successors[v]) {
      if (index[w] < 0) {
        visit(w);
        low[v] = std::min(low[v], low[w]);
      } else if (on_stack[w]) {
        low[v] = std::min(low[v], index[w]);
      }
    }
    if (low[v] != index[v]) return;
    std::vector<size_t> component;
    size_t w;
    do {
      w = stack.back();
      stack.pop_back();
      on_stack[w] = false;
      component.push_back(w);
    } while (w != v);
    if (component.size() > 1)
      for (size_t c : component) r.on_cycle[c] = true;
  };
  for (size_t v = 0; v < units; ++v)
    if (index[v] < 0) visit(v);
  return r;
}

}  // namespace

ProgramSplit split_program(const Graph& program, const std::vector<TensorId>& cuts) {
  const size_t n_ops = program.ops.size(), n_tensors = program.tensors.size();
  std::vector<bool> is_cut(n_tensors, false);
  for (TensorId t : cuts) is_cut[t.index()] = true;
  // Ops that reach no output are left out: a part of them would have no outputs to search for.
  const std::vector<bool> live = live_ops(program);
  auto skipped = [&](size_t o) { return program.ops[o].kind == OpKind::input || !live[o]; };
  auto grown = [&](size_t o) { return program.ops[o].kind != OpKind::input && generator_grows(program.ops[o]); };
  // A tensor's stage: how many kept ops lie on the longest path to it from the program's inputs.
  // A grown op takes the largest stage of its operands, a kept op's results one more.
  std::vector<int> tensor_stage(n_tensors, 0), op_stage(n_ops, 0);
  for (size_t o = 0; o < n_ops; ++o) {
    const Op& op = program.ops[o];
    if (skipped(o)) continue;
    int stage = 0;
    for (TensorId in : op.inputs) stage = std::max(stage, tensor_stage[in.index()]);
    op_stage[o] = stage;
    for (TensorId out : op.outputs) tensor_stage[out.index()] = grown(o) && !is_cut[out.index()] ? stage : stage + 1;
  }
  // Sets of grown ops: each joined with the grown ops it reads where `joins(p, o)`.
  auto join_grown = [&](std::vector<int>& sets, const std::function<bool(size_t, size_t)>& joins) {
    sets.resize(n_ops);
    std::iota(sets.begin(), sets.end(), 0);
    for (size_t o = 0; o < n_ops; ++o)
      if (!skipped(o) && grown(o))
        for (TensorId in : program.ops[o].inputs) {
          const size_t p = program.tensor(in).producer.index();
          if (grown(p) && !is_cut[in.index()] && joins(p, o))
            sets[static_cast<size_t>(find(sets, static_cast<int>(p)))] = find(sets, static_cast<int>(o));
        }
  };
  // Grown ops that pass each other tensors make one part: a component. A component that would
  // read, through kept ops, what it makes itself (its unit on a cycle) is cut by stage, which no
  // such path stays within (a kept op on it raises the stage). Cut components are cut again
  // until no cycle is left; with every component cut there is none.
  std::vector<int> component;
  join_grown(component, [](size_t, size_t) { return true; });
  std::vector<bool> cut(n_ops, false);  // by component root
  std::vector<int> unit_of_op(n_ops, 0);
  // The unit that makes a tensor: its producer's.
  auto tensor_unit = [&](TensorId t) { return unit_of_op[program.tensor(t).producer.index()]; };
  std::vector<bool> made_by_op(n_tensors, false);
  for (size_t o = 0; o < n_ops; ++o)
    for (TensorId out : program.ops[o].outputs) made_by_op[out.index()] = program.ops[o].kind != OpKind::input;
  ProgramSplit split;
  for (;;) {
    std::vector<int> parent;
    join_grown(parent, [&](size_t p, size_t o) {
      return !cut[static_cast<size_t>(find(component, static_cast<int>(o)))] || op_stage[p] == op_stage[o];
    });
    split = ProgramSplit{};
    std::vector<int> part_of_root(n_ops, -1);
    for (size_t o = 0; o < n_ops; ++o) {
      if (skipped(o)) continue;
      if (!grown(o)) {
        unit_of_op[o] = -1 - static_cast<int>(split.kept.size());
        split.kept.push_back(OpId(static_cast<int32_t>(o)));
        continue;
      }
      const size_t root = static_cast<size_t>(find(parent, static_cast<int>(o)));
      if (part_of_root[root] < 0) {
        part_of_root[root] = static_cast<int>(split.parts.size());
        split.parts.emplace_back();
      }
      unit_of_op[o] = part_of_root[root];
      split.parts[static_cast<size_t>(part_of_root[root])].ops.push_back(OpId(static_cast<int32_t>(o)));
    }
    // Slots: parts first, then kept ops.
    const size_t units = split.parts.size() + split.kept.size();
    auto slot = [&](int unit) {
      return unit >= 0 ? static_cast<size_t>(unit) : split.parts.size() + static_cast<size_t>(-1 - unit);
    };
    std::vector<std::set<size_t>> successors(units);
    std::vector<int32_t> first_op(units, INT32_MAX);
    for (size_t o = 0; o < n_ops; ++o) {
      if (skipped(o)) continue;
      const size_t s = slot(unit_of_op[o]);
      first_op[s] = std::min(first_op[s], static_cast<int32_t>(o));
      for (TensorId in : program.ops[o].inputs)
        if (made_by_op[in.index()] && slot(tensor_unit(in)) != s) successors[slot(tensor_unit(in))].insert(s);
    }
    const UnitOrder order = order_units(successors, first_op);
    if (order.order.size() == units) {
      // Parts numbered in that order.
      std::vector<int> renumber(split.parts.size());
      std::vector<ProgramPart> parts;
      for (int s : order.order)
        if (static_cast<size_t>(s) < split.parts.size()) {
          renumber[static_cast<size_t>(s)] = static_cast<int>(parts.size());
          parts.push_back(std::move(split.parts[static_cast<size_t>(s)]));
        }
      split.parts = std::move(parts);
      for (int s : order.order)
        split.order.push_back(static_cast<size_t>(s) < renumber.size()
                                  ? renumber[static_cast<size_t>(s)]
                                  : -1 - static_cast<int>(static_cast<size_t>(s) - renumber.size()));
      for (size_t o = 0; o < n_ops; ++o)
        if (!skipped(o) && grown(o)) unit_of_op[o] = renumber[static_cast<size_t>(unit_of_op[o])];
      break;
    }
    bool more = false;
    for (size_t p = 0; p < split.parts.size(); ++p)
      if (order.on_cycle[p]) {
        const size_t root = static_cast<size_t>(find(component, split.parts[p].ops.front().value));
        more |= !cut[root];
        cut[root] = true;
      }
    MUGRAPH_CHECK(more) << "the program's parts depend on each other in a cycle that cutting by stage leaves";
  }

  // Each part's program: what it reads from outside becomes an input, what is read outside it (or
  // is a program output) an output.
  std::vector<bool> read_outside(n_tensors, false);
  for (size_t o = 0; o < n_ops; ++o)
    for (TensorId in : program.ops[o].inputs)
      if (!skipped(o) && made_by_op[in.index()] && tensor_unit(in) != unit_of_op[o]) read_outside[in.index()] = true;
  std::set<std::string> names;
  for (const Op& op : program.ops)
    if (op.kind == OpKind::input) names.insert(op.attrs.name);
  for (const std::string& name : program.output_names) names.insert(name);
  auto name_of = [&](TensorId t) {
    const Tensor& tensor = program.tensor(t);
    if (program.op(tensor.producer).kind == OpKind::input) return program.op(tensor.producer).attrs.name;
    for (size_t i = 0; i < program.outputs.size(); ++i)
      if (program.outputs[i] == t) return program.output_names[i];
    std::string name = tensor.name;
    if (name.empty() || names.count(name)) {
      name = "t" + std::to_string(t.value);
      while (names.count(name)) name += "_";
    }
    names.insert(name);
    return name;
  };
  std::vector<std::string> tensor_name(n_tensors);
  for (size_t t = 0; t < n_tensors; ++t) tensor_name[t] = name_of(TensorId(static_cast<int32_t>(t)));

  for (ProgramPart& part : split.parts) {
    Graph& g = part.program;
    std::vector<TensorId> local(n_tensors);
    std::vector<bool> inside(n_tensors, false);
    for (OpId o : part.ops)
      for (TensorId out : program.op(o).outputs) inside[out.index()] = true;
    for (OpId o : part.ops) {
      const Op& op = program.op(o);
      std::vector<TensorId> ins;
      for (TensorId in : op.inputs) {
        if (!inside[in.index()] && !local[in.index()].valid()) {
          const TensorType& type = program.type(in);
          local[in.index()] = g.add_input(tensor_name[in.index()], type.shape, type.dtype);
          part.inputs.push_back(in);
        }
        ins.push_back(local[in.index()]);
      }
      Expected<OpId> made = g.append(op.kind, ins, op.attrs);
      MUGRAPH_CHECK(made.ok()) << "a part of the program rejects its own op: " << made.rejection().str();
      const Op& copy = g.op(*made);
      for (size_t i = 0; i < op.outputs.size(); ++i) {
        local[op.outputs[i].index()] = copy.outputs[i];
        g.tensors[copy.outputs[i].index()].name = program.tensor(op.outputs[i]).name;
      }
    }
    std::vector<bool> is_output(n_tensors, false);
    for (TensorId t : program.outputs) is_output[t.index()] = true;
    for (OpId o : part.ops)
      for (TensorId out : program.op(o).outputs)
        if (is_output[out.index()] || read_outside[out.index()]) {
          g.mark_output(local[out.index()], tensor_name[out.index()]);
          part.outputs.push_back(out);
        }
  }

  return split;
}

Graph join_parts(const Graph& program, const ProgramSplit& split, const std::vector<const Graph*>& part_graphs) {
  MUGRAPH_CHECK(part_graphs.size() == split.parts.size()) << "join_parts: one μGraph per part";
  Graph g;
  std::vector<TensorId> at(program.tensors.size());
  for (const Op& op : program.ops)
    if (op.kind == OpKind::input)
      at[op.outputs[0].index()] = g.add_input(op.attrs.name, op.attrs.shape, op.attrs.dtype);
  for (int unit : split.order) {
    if (unit < 0) {
      const Op& op = program.op(split.kept[static_cast<size_t>(-1 - unit)]);
      std::vector<TensorId> ins;
      for (TensorId in : op.inputs) ins.push_back(at[in.index()]);
      Expected<OpId> made = g.append(op.kind, ins, op.attrs);
      MUGRAPH_CHECK(made.ok()) << "join_parts: a kept op no longer fits: " << made.rejection().str();
      for (size_t i = 0; i < op.outputs.size(); ++i) {
        at[op.outputs[i].index()] = g.op(*made).outputs[i];
        g.tensors[g.op(*made).outputs[i].index()].name = program.tensor(op.outputs[i]).name;
      }
      continue;
    }
    const ProgramPart& part = split.parts[static_cast<size_t>(unit)];
    const Graph& u = *part_graphs[static_cast<size_t>(unit)];
    MUGRAPH_CHECK(u.outputs.size() == part.outputs.size()) << "join_parts: a part's μGraph has other outputs";
    std::map<std::string, TensorId> input_named;  // the part's inputs by name: what they stand for
    size_t next_input = 0;
    for (const Op& op : part.program.ops)
      if (op.kind == OpKind::input) input_named[op.attrs.name] = part.inputs[next_input++];
    std::vector<TensorId> local(u.tensors.size());
    for (const Op& op : u.ops) {
      if (op.kind == OpKind::input) {
        auto it = input_named.find(op.attrs.name);
        MUGRAPH_CHECK(it != input_named.end()) << "join_parts: the part has no input " << op.attrs.name;
        local[op.outputs[0].index()] = at[it->second.index()];
        continue;
      }
      std::vector<TensorId> ins;
      for (TensorId in : op.inputs) ins.push_back(local[in.index()]);
      const OpCategory category = op_info(op.kind).category;
      Expected<OpId> made = category == OpCategory::kernel_body || category == OpCategory::thread_body
                                ? g.append_with_body(op.kind, ins, u.bodies[static_cast<size_t>(op.attrs.body)])
                                : g.append(op.kind, ins, op.attrs);
      MUGRAPH_CHECK(made.ok()) << "join_parts: a part's op no longer fits: " << made.rejection().str();
      for (size_t i = 0; i < op.outputs.size(); ++i) {
        const TensorId t = g.op(*made).outputs[i];
        local[op.outputs[i].index()] = t;
        g.tensors[t.index()].layout = u.tensor(op.outputs[i]).layout;
        g.tensors[t.index()].name = u.tensor(op.outputs[i]).name;
      }
    }
    for (size_t i = 0; i < part.outputs.size(); ++i) at[part.outputs[i].index()] = local[u.outputs[i].index()];
  }
  for (size_t i = 0; i < program.outputs.size(); ++i)
    g.mark_output(at[program.outputs[i].index()], program.output_names[i]);
  return g;
}

namespace {

/// The operands of the program's matmuls that a grown op computed and `keep` accepts, each once.
template <typename Keep>
std::vector<TensorId> computed_operands_of_matmuls(const Graph& program, Keep keep) {
  std::vector<TensorId> cuts;
  for (const Op& op : program.ops) {
    if (op.kind != OpKind::matmul) continue;
    for (TensorId in : op.inputs) {
      const Op& producer = program.op(program.tensor(in).producer);
      if (keep(in) && producer.kind != OpKind::input && generator_grows(producer) &&
          std::find(cuts.begin(), cuts.end(), in) == cuts.end())
        cuts.push_back(in);
    }
  }
  return cuts;
}

}  // namespace

std::vector<TensorId> chained_matmul_operands(const Graph& program) {
  std::vector<bool> after_matmul(program.tensors.size(), false);
  for (const Op& op : program.ops) {
    bool after = op.kind == OpKind::matmul;
    for (TensorId in : op.inputs) after = after || after_matmul[in.index()];
    for (TensorId out : op.outputs) after_matmul[out.index()] = after;
  }
  return computed_operands_of_matmuls(program, [&](TensorId in) { return after_matmul[in.index()]; });
}

std::vector<TensorId> computed_matmul_operands(const Graph& program) {
  return computed_operands_of_matmuls(program, [](TensorId) { return true; });
}

std::string kept_op_summary(const Graph& program, OpId op) {
  const Op& o = program.op(op);
  std::string s(op_name(o.kind));
  if (o.kind == OpKind::sum) s += "(..., to=" + std::to_string(o.attrs.to) + ")";
  // A program output by its output name (a Python-built program names its tensors t1, t2...).
  std::string name = program.tensor(o.outputs[0]).name;
  for (size_t i = 0; i < program.outputs.size(); ++i)
    if (program.outputs[i] == o.outputs[0]) name = program.output_names[i];
  if (!name.empty()) s += " (" + name + ")";
  return s;
}

}  // namespace mugraph::search_detail
