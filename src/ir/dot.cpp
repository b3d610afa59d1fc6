// Graphviz output (dot.h). Every op is a node named by its path of op indices ("n3_9_2": op 2 of
// the thread graph of op 9 of the block graph of kernel op 3); a tensor that crosses a body's
// boundary is drawn from the saver that writes it, or to the iterators that read it, so the
// edges show where data moves between device memory, shared memory and registers.
#include "mugraph/dot.h"

#include <string>
#include <vector>

#include "mugraph/printer.h"

namespace mugraph {

namespace {

/// Bodies nested deeper than this are not drawn (a valid μGraph has three levels).
constexpr int kMaxDepth = 8;

/// A DOT string literal's contents: quotes and backslashes escaped, newlines as \n.
std::string quoted(const std::string& text) {
  std::string s = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      s += '\\';
      s += c;
    } else if (c == '\n') {
      s += "\\n";
    } else {
      s += c;
    }
  }
  return s + "\"";
}

std::string dims(const Dim3& d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

const Graph* body_of(const Graph& g, const Op& op) {
  const OpCategory cat = op_info(op.kind).category;
  if (cat != OpCategory::kernel_body && cat != OpCategory::thread_body) return nullptr;
  if (op.attrs.body < 0 || static_cast<size_t>(op.attrs.body) >= g.bodies.size()) return nullptr;
  return &g.bodies[static_cast<size_t>(op.attrs.body)];
}

class DotWriter {
 public:
  std::string run(const Graph& g) {
    out_ =
        "digraph ugraph {\n  rankdir=TB;\n  compound=true;\n"
        "  node [shape=box, style=rounded, fontname=\"Helvetica\", fontsize=10];\n"
        "  edge [fontname=\"Helvetica\", fontsize=9];\n";
    graph(g, "n", 1, 0);
    // Program outputs: one node each, fed by what makes the tensor.
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      std::string node = "out" + std::to_string(i);
      std::string label = i < g.output_names.size() ? g.output_names[i] : "output " + std::to_string(i);
      if (g.outputs[i].valid() && g.outputs[i].index() < g.tensors.size()) label += "\n" + g.type(g.outputs[i]).str();
      out_ += "  " + node + " [label=" + quoted(label) + ", shape=ellipse, style=filled, fillcolor=\"#e8f0fe\"];\n";
      for (const std::string& from : sources(g, "n", g.outputs[i], 0)) out_ += "  " + from + " -> " + node + ";\n";
    }
    out_ += "}\n";
    return out_;
  }

 private:
  static std::string node_name(const std::string& prefix, size_t op) { return prefix + std::to_string(op); }

  /// The nodes of the ops of `op`'s body (op `op_index` of a graph at prefix) that are of a
  /// category (iterators or savers) and read or write io_index.
  static std::vector<std::string> body_nodes(const Graph& body, const std::string& prefix, size_t op_index,
                                             OpCategory category, size_t io_index) {
    std::vector<std::string> nodes;
    const std::string inner = node_name(prefix, op_index) + "_";
    for (size_t k = 0; k < body.ops.size(); ++k) {
      const Op& op = body.ops[k];
      if (op_info(op.kind).category == category && static_cast<size_t>(op.attrs.io_index) == io_index)
        nodes.push_back(node_name(inner, k));
    }
    return nodes;
  }

  /// The nodes that make tensor t of g: its producer, or the savers of its producer's body that
  /// write it.
  static std::vector<std::string> sources(const Graph& g, const std::string& prefix, TensorId t, int depth) {
    if (!t.valid() || t.index() >= g.tensors.size()) return {};
    const OpId p = g.tensors[t.index()].producer;
    if (!p.valid() || p.index() >= g.ops.size()) return {};
    const Op& op = g.ops[p.index()];
    const Graph* body = body_of(g, op);
    if (!body || depth >= kMaxDepth) return {node_name(prefix, p.index())};
    size_t out_index = 0;
    while (out_index < op.outputs.size() && op.outputs[out_index] != t) ++out_index;
    return body_nodes(*body, prefix, p.index(), OpCategory::saver, out_index);
  }

  /// The nodes that read operand `index` of op `op_index`: the op, or the iterators of its body
  /// that read that param.
  static std::vector<std::string> sinks(const Graph& g, const std::string& prefix, size_t op_index, size_t index,
                                        int depth) {
    const Graph* body = body_of(g, g.ops[op_index]);
    if (!body || depth >= kMaxDepth) return {node_name(prefix, op_index)};
    return body_nodes(*body, prefix, op_index, OpCategory::iterator, index);
  }

  void graph(const Graph& g, const std::string& prefix, size_t indent, int depth) {
    const std::string pad(2 * indent, ' ');
    for (size_t i = 0; i < g.ops.size(); ++i) {
      const Op& op = g.ops[i];
      const std::string name = node_name(prefix, i);
      const Graph* body = body_of(g, op);
      // The op as `mugraph check` lists it, a block graph's launch, and what the op makes.
      std::string label = describe_op(g, op);
      if (body && body->level == Level::block)
        label += "\ngrid=" + dims(body->grid) + " threads=" + dims(body->threads) +
                 " forloop=" + std::to_string(body->forloop);
      if (const std::string types = describe_types(g, op); !types.empty()) label += "\n" + types;
      if (body && depth < kMaxDepth) {
        const bool block = body->level == Level::block;
        out_ += pad + "subgraph cluster_" + name + " {\n" + pad + "  label=" + quoted(label) + ";\n" + pad +
                "  labeljust=l; style=\"rounded,filled\"; fillcolor=" + (block ? "\"#f4f4f4\"" : "\"#fff7e0\"") +
                "; fontname=\"Helvetica\"; fontsize=10;\n";
        graph(*body, name + "_", indent + 1, depth + 1);
        out_ += pad + "}\n";
      } else {
        std::string style;
        switch (op_info(op.kind).category) {
          case OpCategory::source:
            style = ", shape=ellipse, style=filled, fillcolor=\"#e8f0fe\"";
            break;
          case OpCategory::iterator:
          case OpCategory::saver:
            style = ", style=\"rounded,filled\", fillcolor=\"#e6f4ea\"";
            break;
          case OpCategory::accumulator:
            style = ", style=\"rounded,filled\", fillcolor=\"#fce8e6\"";
            break;
          default:
            break;
        }
        out_ += pad + name + " [label=" + quoted(label) + style + "];\n";
      }
      // Edges into this op (or into its body's iterators), from what makes each operand. In a
      // body, iterators read the enclosing op's operands, so they have no edges of their own.
      for (size_t k = 0; k < op.inputs.size(); ++k)
        for (const std::string& from : sources(g, prefix, op.inputs[k], depth))
          for (const std::string& to : sinks(g, prefix, i, k, depth)) out_ += pad + from + " -> " + to + ";\n";
    }
  }

  std::string out_;
};

}  // namespace

std::string to_dot(const Graph& kernel_graph) { return DotWriter().run(kernel_graph); }

}  // namespace mugraph
