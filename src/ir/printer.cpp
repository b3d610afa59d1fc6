// Human-readable listings of μGraphs (printer.h). Tolerates malformed graphs (ids out of range,
// missing bodies): it prints what is there, so it can describe a graph that failed validation.
#include "mugraph/printer.h"

#include <string>

namespace mugraph {

namespace {

/// Column at which the output types start (relative to the start of the line).
constexpr size_t kTypeColumn = 56;
/// Graphs nested deeper than this are not expanded (a valid μGraph has three levels).
constexpr int kMaxDepth = 8;

/// Display width of UTF-8 text (one column per code point; φ is two bytes).
size_t width(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool in_range(const Graph& g, TensorId t) { return t.valid() && t.index() < g.tensors.size(); }

std::string ref(TensorId t) { return "%" + std::to_string(t.value); }

std::string dim3(const Dim3& d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

std::string map_entry(int d) { return d == kPhi ? "φ" : std::to_string(d); }

/// "{x:1}" with the grid axes that have more than one block or are mapped; empty if none.
std::string grid_map(const Graph& g, const std::array<int8_t, 3>& map) {
  std::string s;
  for (int axis = 0; axis < 3; ++axis) {
    int d = map[static_cast<size_t>(axis)];
    if (g.grid[axis] > 1 || d != kPhi) s += (s.empty() ? "" : ",") + std::string(axis_name(axis)) + ":" + map_entry(d);
  }
  return s.empty() ? s : "{" + s + "}";
}

/// The operand list of an op, with a scalar constant at its position.
std::string operands(const Op& op) {
  std::vector<std::string> parts;
  for (TensorId t : op.inputs) parts.push_back(ref(t));
  if (op.attrs.has_scalar) {
    size_t pos = op.attrs.scalar_pos == 0 ? 0 : parts.size();
    parts.insert(parts.begin() + static_cast<std::ptrdiff_t>(pos), op.attrs.scalar.str());
  }
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : ", ") + p;
  return s;
}

/// "name(args) extras" for one op.
std::string op_text(const Graph& g, const Op& op) {
  const OpAttrs& a = op.attrs;
  std::string name(op_name(op.kind));
  std::string args = operands(op);
  switch (op.kind) {
    case OpKind::input:
      return "input";
    case OpKind::sum:
      args += ", dim=" + std::to_string(a.dim);
      if (a.to != 1) args += ", to=" + std::to_string(a.to);
      break;
    case OpKind::repeat:
      args += ", dim=" + std::to_string(a.dim) + ", times=" + std::to_string(a.times);
      break;
    case OpKind::reshape:
      args += ", shape=" + a.shape.str();
      break;
    case OpKind::concat:
      args += ", dim=" + std::to_string(a.dim);
      break;
    default:
      break;
  }
  std::string s = name + "(" + args + ")";
  switch (op_info(op.kind).category) {
    case OpCategory::iterator: {
      s = name + "(in" + std::to_string(a.io_index) + ")";
      std::string imap = grid_map(g, a.imap);
      if (g.level == Level::block && !imap.empty()) s += " imap=" + imap;
      if ((g.level == Level::block && g.forloop > 1) || a.fmap != kPhi) s += " fmap=" + map_entry(a.fmap);
      break;
    }
    case OpCategory::saver: {
      s += " -> out" + std::to_string(a.io_index);
      std::string omap = grid_map(g, a.omap);
      if (g.level == Level::block && !omap.empty()) s += " omap=" + omap;
      break;
    }
    case OpCategory::accumulator:
      s += a.dim == kPhi ? " sum" : " concat(dim=" + std::to_string(a.dim) + ")";
      break;
    default:
      break;
  }
  return s;
}

}  // namespace

std::string describe_types(const Graph& g, const Op& op) {
  std::string s;
  if (op_info(op.kind).category == OpCategory::saver && g.level == Level::block && !op.inputs.empty() &&
      in_range(g, op.inputs[0])) {
    // A saver has no tensor of its own; show the full tensor it writes.
    TensorType t = g.type(op.inputs[0]);
    for (int axis = 0; axis < 3; ++axis) {
      int d = op.attrs.omap[static_cast<size_t>(axis)];
      if (d < 0 || d >= t.shape.rank()) continue;  // φ, or a broken map the validator reports
      t.shape[d] *= g.grid[axis];
    }
    return t.str();
  }
  std::string names;
  for (TensorId t : op.outputs) {
    if (!in_range(g, t)) continue;
    s += (s.empty() ? "" : "; ") + g.type(t).str();
    const std::string& n = g.tensor(t).name;
    if (!n.empty()) names += (names.empty() ? "" : " ") + ("\"" + n + "\"");
  }
  return names.empty() ? s : s + "  " + names;
}

std::string describe_op(const Graph& g, const Op& op) {
  std::string line;
  if (!op.outputs.empty()) {
    for (size_t k = 0; k < op.outputs.size(); ++k) line += (k ? ", " : "") + ref(op.outputs[k]);
    line += " = ";
  }
  return line + op_text(g, op);
}

namespace {

void describe_graph(std::string& out, const Graph& g, size_t indent, int depth) {
  std::string pad(indent, ' ');
  if (g.level == Level::block)
    out += pad + "block graph: grid=" + dim3(g.grid) + " threads=" + dim3(g.threads) +
           " forloop=" + std::to_string(g.forloop) + "\n";
  else if (g.level == Level::thread)
    out += pad + "thread graph:\n";
  for (const Op& op : g.ops) {
    std::string line = pad + describe_op(g, op);
    std::string types = describe_types(g, op);
    if (!types.empty()) {
      size_t w = width(line);
      line += std::string(w + 2 < kTypeColumn ? kTypeColumn - w : 2, ' ');
      line += types;
    }
    out += line + "\n";
    OpCategory cat = op_info(op.kind).category;
    if (cat == OpCategory::kernel_body || cat == OpCategory::thread_body) {
      if (op.attrs.body < 0 || static_cast<size_t>(op.attrs.body) >= g.bodies.size())
        out += pad + "    (body " + std::to_string(op.attrs.body) + " is missing)\n";
      else if (depth >= kMaxDepth)
        out += pad + "    (nested too deeply to show)\n";
      else
        describe_graph(out, g.bodies[static_cast<size_t>(op.attrs.body)], indent + 4, depth + 1);
    }
  }
}

}  // namespace

std::string describe(const Graph& g) {
  std::string out;
  describe_graph(out, g, 2, 0);
  std::string outs;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    std::string name = i < g.output_names.size() ? g.output_names[i] : "";
    std::string item = (name.empty() ? ref(g.outputs[i]) : name);
    if (in_range(g, g.outputs[i])) item += " " + g.type(g.outputs[i]).str();
    outs += (outs.empty() ? "" : ", ") + item;
  }
  if (g.level == Level::kernel) out += "outputs: " + (outs.empty() ? std::string("(none)") : outs) + "\n";
  return out;
}

}  // namespace mugraph
