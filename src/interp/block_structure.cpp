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
  // Each tensor is a per-iteration value (it depends on an iterator with an fmap), a
  // loop-invariant one (made from tiles loaded with fmap φ alone: the same in every iteration), or
  // a post-loop one (made from accumulator outputs, and perhaps loop-invariant values: a bias or
  // a residual added after a matmul's loop, the epilogue operands of GEMM libraries).
  enum class Class : uint8_t { varying, invariant, post };
  std::vector<Class> cls(g.tensors.size(), Class::varying);
  const std::string loops = std::to_string(g.forloop);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (phase[i] == BlockPhase::dead) continue;
    bool any_varying = false, any_post = false;
    for (TensorId t : op.inputs) {
      any_varying = any_varying || cls[t.index()] == Class::varying;
      any_post = any_post || cls[t.index()] == Class::post;
    }
    Class out = any_post ? Class::post : any_varying ? Class::varying : Class::invariant;
    switch (op_info(op.kind).category) {
      case OpCategory::iterator:
        out = op.attrs.fmap == kPhi ? Class::invariant : Class::varying;
        break;
      case OpCategory::accumulator:
        if (any_post)
          throw UserError(body_op_where(g, i) +
                          " accumulates a value that was already accumulated; a path may pass at "
                          "most one accumulator");
        out = Class::post;  // the op itself accumulates in the loop; its result exists after it
        break;
      default:
        if (any_varying && any_post)
          throw UserError(body_op_where(g, i) +
                          " combines a per-iteration value with an accumulated one, but the "
                          "for-loop runs " +
                          loops + " iterations");
        if (op.kind == OpKind::output_saver && out != Class::post)
          throw UserError(body_op_where(g, i) + " saves a value with a path from an input iterator that passes no " +
                          "accumulator, but the for-loop runs " + loops + " iterations");
        // Loop-invariant ops run in the loop (op_order.h hoists them before it); their values
        // are the same after it.
        if (out == Class::post) phase[i] = BlockPhase::post;
        break;
    }
    for (TensorId t : op.outputs) cls[t.index()] = out;
  }
  return phase;
}

}  // namespace mugraph::interp
