#include "op_eval.h"

#include "tensor_ops.h"

namespace mugraph::interp {

bool is_compute_op(OpKind kind) {
  switch (op_info(kind).category) {
    case OpCategory::unary:
    case OpCategory::binary:
    case OpCategory::matmul:
    case OpCategory::reduction:
    case OpCategory::layout:
      return true;
    default:
      return false;
  }
}

float scalar_operand(const OpAttrs& attrs) { return static_cast<float>(attrs.scalar.value()); }

void eval_compute_op(const Op& op, const std::vector<View>& ins, float scalar, const MutView& out, DType dt,
                     ThreadPool* pool) {
  const OpAttrs& a = op.attrs;
  switch (op_info(op.kind).category) {
    case OpCategory::unary:
      eval_unary(op.kind, ins.at(0), out, dt, pool);
      return;
    case OpCategory::binary: {
      if (!a.has_scalar) {
        eval_binary(op.kind, ins.at(0), ins.at(1), out, dt, pool);
        return;
      }
      View c;  // rank 0: broadcasts to every element
      c.data = &scalar;
      if (a.scalar_pos == 0) {
        eval_binary(op.kind, c, ins.at(0), out, dt, pool);
      } else {
        eval_binary(op.kind, ins.at(0), c, out, dt, pool);
      }
      return;
    }
    case OpCategory::matmul:
      eval_matmul(ins.at(0), ins.at(1), out, dt, pool);
      return;
    case OpCategory::reduction:
      eval_sum(ins.at(0), a.dim, a.to, out, dt, pool);
      return;
    case OpCategory::layout:
      if (op.kind == OpKind::repeat) {
        eval_repeat(ins.at(0), a.dim, a.times, out);
      } else if (op.kind == OpKind::reshape) {
        MUGRAPH_CHECK(ins.at(0).numel() == out.numel())
            << "reshape of " << ins.at(0).shape.str() << " to " << out.shape.str();
        // Row-major reshape: copy the operand densely, then the bytes are the result.
        copy_view(ins.at(0), MutView::dense(out.data, ins.at(0).shape));
      } else {
        eval_concat(ins, a.dim, out);
      }
      return;
    default:
      break;
  }
  MUGRAPH_CHECK(false) << op_name(op.kind) << " is not a computing op";
}

}  // namespace mugraph::interp
