#include "mugraph/fuse_thread_graphs.h"

#include <algorithm>

namespace mugraph {

namespace {

bool fusable(const Op& op) {
  const OpInfo& info = op_info(op.kind);
  return info.elementwise() && info.at(Level::thread);
}

/// Appends an op that must be valid (it was valid in the graph being rebuilt).
TensorId append_checked(Graph& g, OpKind kind, std::vector<TensorId> inputs, const OpAttrs& attrs) {
  auto r = g.append(kind, std::move(inputs), attrs);
  MUGRAPH_CHECK(r.ok()) << "rebuilding " << op_name(kind) << ": " << r.rejection().str();
  const Op& op = g.ops[r->index()];
  return op.outputs.empty() ? TensorId() : op.outputs[0];
}

}  // namespace

Graph fuse_block_graph(const Graph& g) {
  MUGRAPH_CHECK(g.level == Level::block) << "fuse_block_graph on a " << level_name(g.level) << " graph";
  // Uses of every tensor, and which op reads each single-use tensor.
  std::vector<int> uses(g.tensors.size(), 0);
  std::vector<int> reader(g.tensors.size(), -1);
  for (size_t i = 0; i < g.ops.size(); ++i)
    for (TensorId t : g.ops[i].inputs) {
      ++uses[t.index()];
      reader[t.index()] = static_cast<int>(i);
    }
  // parent[i]: the op whose tree absorbs op i (its only use, also fusable), or -1.
  std::vector<int> parent(g.ops.size(), -1);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (!fusable(op) || op.outputs.size() != 1) continue;
    TensorId out = op.outputs[0];
    int r = reader[out.index()];
    if (uses[out.index()] == 1 && r >= 0 && fusable(g.ops[static_cast<size_t>(r)])) parent[i] = r;
  }
  // root[i]: the root of op i's tree; size of each root's tree.
  std::vector<int> root(g.ops.size(), -1), tree_size(g.ops.size(), 0);
  for (size_t i = g.ops.size(); i-- > 0;) {
    if (!fusable(g.ops[i])) continue;
    root[i] = parent[i] < 0 ? static_cast<int>(i) : root[static_cast<size_t>(parent[i])];
    ++tree_size[static_cast<size_t>(root[i])];
  }

  Graph out = make_block_graph(g.params, g.grid, g.forloop, g.threads);
  std::vector<TensorId> map(g.tensors.size());
  auto keep_tensor = [&](TensorId old_id, TensorId new_id) {
    map[old_id.index()] = new_id;
    Tensor& t = out.tensors[new_id.index()];
    t.layout = g.tensor(old_id).layout;
    t.name = g.tensor(old_id).name;
  };
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    bool in_tree = root[i] >= 0 && tree_size[static_cast<size_t>(root[i])] >= 2;
    if (in_tree && root[i] != static_cast<int>(i)) continue;  // emitted with its root
    if (!in_tree) {
      std::vector<TensorId> inputs;
      for (TensorId t : op.inputs) inputs.push_back(map[t.index()]);
      if (op.attrs.body >= 0) {
        auto r = out.append_with_body(op.kind, std::move(inputs), g.bodies[static_cast<size_t>(op.attrs.body)]);
        MUGRAPH_CHECK(r.ok()) << "rebuilding " << op_name(op.kind) << ": " << r.rejection().str();
        const Op& added = out.ops[r->index()];
        for (size_t k = 0; k < op.outputs.size(); ++k) keep_tensor(op.outputs[k], added.outputs[k]);
      } else {
        TensorId t = append_checked(out, op.kind, std::move(inputs), op.attrs);
        if (!op.outputs.empty()) keep_tensor(op.outputs[0], t);
      }
      continue;
    }
    // Op i is the root of a tree of two or more ops: collect the tree in graph order.
    std::vector<size_t> members;
    for (size_t j = 0; j <= i; ++j)
      if (root[j] == static_cast<int>(i)) members.push_back(j);
    std::vector<TensorId> external;  // tensors the tree reads but does not make, in first-use order
    std::vector<bool> made(g.tensors.size(), false);
    for (size_t j : members) {
      for (TensorId t : g.ops[j].inputs)
        if (!made[t.index()] && std::find(external.begin(), external.end(), t) == external.end()) external.push_back(t);
      made[g.ops[j].outputs[0].index()] = true;
    }
    std::vector<TensorType> param_types;
    for (TensorId t : external) param_types.push_back(g.type(t));
    Graph body = make_thread_graph(param_types);
    std::vector<TensorId> local(g.tensors.size());
    for (size_t k = 0; k < external.size(); ++k)
      local[external[k].index()] =
          append_checked(body, OpKind::input_iterator, {}, attrs::iterator(static_cast<int32_t>(k)));
    for (size_t j : members) {
      std::vector<TensorId> inputs;
      for (TensorId t : g.ops[j].inputs) inputs.push_back(local[t.index()]);
      local[g.ops[j].outputs[0].index()] = append_checked(body, g.ops[j].kind, std::move(inputs), g.ops[j].attrs);
    }
    append_checked(body, OpKind::output_saver, {local[op.outputs[0].index()]}, attrs::saver(0));
    std::vector<TensorId> inputs;
    for (TensorId t : external) inputs.push_back(map[t.index()]);
    auto r = out.append_with_body(OpKind::thread_graph, std::move(inputs), std::move(body));
    MUGRAPH_CHECK(r.ok()) << "fusing a thread graph: " << r.rejection().str();
    keep_tensor(op.outputs[0], out.ops[r->index()].outputs[0]);
  }
  return out;
}

Graph fuse_thread_graphs(const Graph& kernel_graph) {
  Graph out = kernel_graph;
  for (Graph& body : out.bodies)
    if (body.level == Level::block) body = fuse_block_graph(body);
  return out;
}

}  // namespace mugraph
