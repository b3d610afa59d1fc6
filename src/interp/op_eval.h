/// \file op_eval.h
/// Evaluates one computing op (element-wise, matmul, sum, repeat, reshape, concat) of any graph
/// level on operand views: the dispatch shared by the kernel-, block- and thread-level executors.
#pragma once

#include <vector>

#include "mugraph/graph.h"
#include "thread_pool.h"
#include "view.h"

namespace mugraph::interp {

/// Whether the interpreter evaluates this op kind with eval_compute_op (as opposed to the
/// structural ops: input, graph_kernel, thread_graph, iterators, savers, accumulators).
bool is_compute_op(OpKind kind);

/// The f32 value of a binary op's scalar constant.
float scalar_operand(const OpAttrs& attrs);

/// out = op(ins). `scalar` is the constant of a binary op with attrs.has_scalar (see
/// scalar_operand). out is dense and has the op's output type; dt is that type's dtype.
void eval_compute_op(const Op& op, const std::vector<View>& ins, float scalar, const MutView& out, DType dt,
                     ThreadPool* pool);

}  // namespace mugraph::interp
