#include "program_parts.h"

#include <algorithm>
#include <climits>
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

ProgramSplit split_program(const Graph& program) {
  const size_t n_ops = program.ops.size(), n_tensors = program.tensors.size();
  // A tensor's stage: how many kept ops lie on the longest path to it from the program's inputs.
  // A grown op takes the largest stage of its operands, a kept op's results one more. Ops of a
  // part share a stage, so a part never reads a kept op's result of its own values.
  std::vector<int> tensor_stage(n_tensors, 0), op_stage(n_ops, 0);
  std::vector<int> parent(n_ops);
  std::iota(parent.begin(), parent.end(), 0);
  // Ops that reach no output are left out: a part of them would have no outputs to search for.
  const std::vector<bool> live = live_ops(program);
  auto skipped = [&](size_t o) { return program.ops[o].kind == OpKind::input || !live[o]; };
  auto grown = [&](size_t o) { return program.ops[o].kind != OpKind::input && generator_grows(program.ops[o]); };
  for (size_t o = 0; o < n_ops; ++o) {
    const Op& op = program.ops[o];
    if (skipped(o)) continue;
    int stage = 0;
    for (TensorId in : op.inputs) stage = std::max(stage, tensor_stage[in.index()]);
    op_stage[o] = stage;
    for (TensorId out : op.outputs) tensor_stage[out.index()] = grown(o) ? stage : stage + 1;
    if (!grown(o)) continue;
    for (TensorId in : op.inputs) {
      const size_t p = program.tensor(in).producer.index();
      if (grown(p) && op_stage[p] == stage)
        parent[static_cast<size_t>(find(parent, static_cast<int>(p)))] = find(parent, static_cast<int>(o));
    }
  }

  ProgramSplit split;
  std::vector<int> part_of_root(n_ops, -1), unit_of_op(n_ops, 0);
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

  // Each part's program: what it reads from outside becomes an input, what is read outside it (or
  // is a program output) an output.
  std::vector<bool> read_outside(n_tensors, false);
  std::vector<int> tensor_unit(n_tensors, 0);
  std::vector<bool> made_by_op(n_tensors, false);
  for (size_t o = 0; o < n_ops; ++o)
    for (TensorId out : program.ops[o].outputs) {
      tensor_unit[out.index()] = unit_of_op[o];
      made_by_op[out.index()] = program.ops[o].kind != OpKind::input;
    }
  for (size_t o = 0; o < n_ops; ++o)
    for (TensorId in : program.ops[o].inputs)
      if (!skipped(o) && made_by_op[in.index()] && tensor_unit[in.index()] != unit_of_op[o])
        read_outside[in.index()] = true;
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

  // Kahn's order over parts and kept ops; among those ready, the one whose first op comes first.
  const size_t units = split.parts.size() + split.kept.size();
  auto slot = [&](int unit) {
    return unit >= 0 ? static_cast<size_t>(unit) : split.parts.size() + static_cast<size_t>(-1 - unit);
  };
  auto unit_at = [&](size_t s) {
    return s < split.parts.size() ? static_cast<int>(s) : -1 - static_cast<int>(s - split.parts.size());
  };
  std::vector<std::set<size_t>> successors(units);
  std::vector<int> waiting(units, 0);
  std::vector<int32_t> first_op(units, INT32_MAX);
  for (size_t o = 0; o < n_ops; ++o) {
    if (skipped(o)) continue;
    const size_t s = slot(unit_of_op[o]);
    first_op[s] = std::min(first_op[s], static_cast<int32_t>(o));
    for (TensorId in : program.ops[o].inputs) {
      if (!made_by_op[in.index()]) continue;
      const size_t from = slot(tensor_unit[in.index()]);
      if (from != s && successors[from].insert(s).second) ++waiting[s];
    }
  }
  std::priority_queue<std::pair<int32_t, size_t>, std::vector<std::pair<int32_t, size_t>>, std::greater<>> ready;
  for (size_t s = 0; s < units; ++s)
    if (waiting[s] == 0) ready.push({first_op[s], s});
  while (!ready.empty()) {
    const size_t s = ready.top().second;
    ready.pop();
    split.order.push_back(unit_at(s));
    for (size_t next : successors[s])
      if (--waiting[next] == 0) ready.push({first_op[next], next});
  }
  MUGRAPH_CHECK(split.order.size() == units) << "the program's parts depend on each other in a cycle";
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
