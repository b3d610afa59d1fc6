#include "block_structure.h"

namespace mugraph::interp {

std::string body_op_where(const Graph& g, size_t i) {
  return std::string(level_name(g.level)) + " graph op " + std::to_string(i) + " (" +
         std::string(op_name(g.ops[i].kind)) + ")";
}

std::vector<BlockPhase> block_phases(const Graph& g) {
  std::vector<bool> live = live_ops(g);
  std::vector<BlockPhase> phase(g.ops.size(), BlockPhase::dead);
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (live[i]) phase[i] = BlockPhase::loop;
  if (g.level != Level::block || g.forloop == 1) return phase;  // every live op runs once, in order
  // A tensor is post-loop if it is made from accumulator outputs only.
  std::vector<BlockPhase> cls(g.tensors.size(), BlockPhase::loop);
  const std::string loops = std::to_string(g.forloop);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (phase[i] == BlockPhase::dead) continue;
    bool any_loop = false, any_post = false;
    for (TensorId t : op.inputs) (cls[t.index()] == BlockPhase::post ? any_post : any_loop) = true;
    BlockPhase out = BlockPhase::loop;
    switch (op_info(op.kind).category) {
      case OpCategory::iterator:
        break;
      case OpCategory::accumulator:
        if (any_post)
          throw UserError(body_op_where(g, i) +
                          " accumulates a value that was already accumulated; a path may pass at "
                          "most one accumulator");
        out = BlockPhase::post;  // the op itself accumulates in the loop; its result exists after it
        break;
      default:
        if (any_loop && any_post)
          throw UserError(body_op_where(g, i) +
                          " combines a per-iteration value with an accumulated one, but the "
                          "for-loop runs " +
                          loops + " iterations");
        if (op.kind == OpKind::output_saver && any_loop)
          throw UserError(body_op_where(g, i) +
                          " saves a value with a path from an input iterator that passes no "
                          "accumulator, but the for-loop runs " +
                          loops + " iterations");
        out = any_post ? BlockPhase::post : BlockPhase::loop;
        phase[i] = out;
        break;
    }
    for (TensorId t : op.outputs) cls[t.index()] = out;
  }
  return phase;
}

}  // namespace mugraph::interp
