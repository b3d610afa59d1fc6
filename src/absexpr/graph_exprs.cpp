// The abstract expression of every tensor of a μGraph (paper Table 1; DESIGN.md §2). One forward
// walk per graph; a graph_kernel or thread_graph op walks its body with the operands' expressions
// as the body's params and takes what the body's savers write as its outputs (inlining).
#include <optional>
#include <utility>

#include "mugraph/absexpr.h"

namespace mugraph {
namespace {

/// The parts of a concat along `dim` that produced tensor t in g (operand tensors and their
/// extents along dim), or nullopt if t is not such a concat's output.
std::optional<std::vector<std::pair<TensorId, int64_t>>> concat_parts(const Graph& g, TensorId t, int dim) {
  const Tensor& tensor = g.tensor(t);
  if (!tensor.producer.valid()) return std::nullopt;
  const Op& producer = g.op(tensor.producer);
  if (producer.kind != OpKind::concat || producer.attrs.dim != dim) return std::nullopt;
  std::vector<std::pair<TensorId, int64_t>> parts;
  for (TensorId in : producer.inputs) parts.emplace_back(in, g.type(in).shape[dim]);
  return parts;
}

/// The part expressions of an n-part concat expression concat(e1, concat(e2, ... en)).
std::vector<ExprId> unfold_concat(const ExprPool& pool, ExprId e, size_t n) {
  std::vector<ExprId> parts;
  for (size_t i = 0; i + 1 < n; ++i) {
    const ExprNode& node = pool.node(e);
    MUGRAPH_CHECK(node.kind == ExprKind::concat)
        << "operand of a concat op has a " << expr_kind_name(node.kind) << " expression";
    parts.push_back(node.a);
    e = node.b;
  }
  parts.push_back(e);
  return parts;
}

/// matmul(A, B) = sum(k, mul(E(A), E(B))), k the reduced extent; or the paper's §8.1 expression
/// add(sum(k1, mul(a1, b1)), ...) when A and B are concats split at the same extents along the
/// reduced dim (see absexpr.h).
ExprId matmul_expression(const Graph& g, const Op& op, ExprId ea, ExprId eb, ExprPool& pool) {
  const Shape& a = g.type(op.inputs[0]).shape;
  const Shape& b = g.type(op.inputs[1]).shape;
  auto pa = concat_parts(g, op.inputs[0], a.rank() - 1);
  auto pb = b.rank() >= 2 ? concat_parts(g, op.inputs[1], b.rank() - 2) : std::nullopt;
  bool aligned = pa && pb && pa->size() == pb->size();
  for (size_t i = 0; aligned && i < pa->size(); ++i) aligned = (*pa)[i].second == (*pb)[i].second;
  if (!aligned) return pool.sum(a[a.rank() - 1], pool.mul(ea, eb));
  std::vector<ExprId> as = unfold_concat(pool, ea, pa->size());
  std::vector<ExprId> bs = unfold_concat(pool, eb, pb->size());
  ExprId e;
  for (size_t i = 0; i < as.size(); ++i) {
    ExprId term = pool.sum((*pa)[i].second, pool.mul(as[i], bs[i]));
    e = i == 0 ? term : pool.add(e, term);
  }
  return e;
}

ExprId binary_expression(const Op& op, const std::vector<ExprId>& operands, ExprPool& pool) {
  ExprId x = operands[0];
  ExprId y;
  if (op.attrs.has_scalar) {
    y = pool.constant(op.attrs.scalar);
    if (op.attrs.scalar_pos == 0) std::swap(x, y);
  } else {
    MUGRAPH_CHECK(operands.size() == 2) << op_name(op.kind) << " with one operand and no constant";
    y = operands[1];
  }
  switch (op.kind) {
    case OpKind::add:
    case OpKind::sub:  // the paper abstracts sub as add
      return pool.add(x, y);
    case OpKind::mul:
      return pool.mul(x, y);
    case OpKind::div:
      return pool.div(x, y);
    default:
      MUGRAPH_CHECK(false) << op_name(op.kind) << " is not a binary op";
  }
  return {};
}

ExprId unary_expression(OpKind kind, ExprId x, ExprPool& pool) {
  switch (kind) {
    case OpKind::exp:
      return pool.exp(x);
    case OpKind::sqr:
      return pool.mul(x, x);
    case OpKind::sqrt:
      return pool.sqrt(x);
    case OpKind::silu:
      return pool.silu(x);
    case OpKind::relu:
      return pool.relu(x);
    case OpKind::gelu:
      return pool.gelu(x);
    default:
      MUGRAPH_CHECK(false) << op_name(kind) << " is not a unary op";
  }
  return {};
}

const Graph& body_of(const Graph& g, const Op& op) {
  MUGRAPH_CHECK(op.attrs.body >= 0 && static_cast<size_t>(op.attrs.body) < g.bodies.size())
      << op_name(op.kind) << " op refers to body " << op.attrs.body << " of " << g.bodies.size();
  return g.bodies[static_cast<size_t>(op.attrs.body)];
}

/// Walks g; params are a body's param expressions (empty at kernel level).
GraphExprs walk(const Graph& g, const std::vector<ExprId>& params, ExprPool& pool) {
  GraphExprs r;
  r.tensors.resize(g.tensors.size());
  r.bodies.resize(g.bodies.size());
  std::vector<ExprId> operands;
  for (const Op& op : g.ops) {
    operands.clear();
    for (TensorId t : op.inputs) {
      ExprId e = r.tensors[t.index()];
      MUGRAPH_CHECK(e.valid()) << "tensor " << t.value << " is read by a " << op_name(op.kind)
                               << " op before it has an expression";
      operands.push_back(e);
    }
    std::vector<ExprId> outs;
    switch (op_info(op.kind).category) {
      case OpCategory::kernel_body:
      case OpCategory::thread_body: {
        const Graph& body_graph = body_of(g, op);
        GraphExprs& body = r.bodies[static_cast<size_t>(op.attrs.body)];
        body = walk(body_graph, operands, pool);
        outs = body.outputs;
        break;
      }
      case OpCategory::saver: {
        size_t k = static_cast<size_t>(op.attrs.io_index);
        if (r.outputs.size() <= k) r.outputs.resize(k + 1);
        r.outputs[k] = operands[0];
        break;
      }
      default:
        outs = op_expressions(g, op, operands, pool, params);
        break;
    }
    MUGRAPH_CHECK(outs.size() == op.outputs.size() || op.kind == OpKind::output_saver)
        << op_name(op.kind) << " op has " << op.outputs.size() << " outputs but " << outs.size() << " expressions";
    for (size_t k = 0; k < outs.size(); ++k) {
      MUGRAPH_CHECK(outs[k].valid()) << "output " << k << " of a " << op_name(op.kind) << " op has no expression";
      r.tensors[op.outputs[k].index()] = outs[k];
    }
  }
  if (g.level == Level::kernel) {
    r.outputs.clear();
    for (TensorId t : g.outputs) r.outputs.push_back(r.tensors[t.index()]);
  }
  return r;
}

}  // namespace

std::vector<ExprId> op_expressions(const Graph& g, const Op& op, const std::vector<ExprId>& operand_exprs,
                                   ExprPool& pool, const std::vector<ExprId>& params) {
  MUGRAPH_CHECK(operand_exprs.size() == op.inputs.size())
      << op_name(op.kind) << " op has " << op.inputs.size() << " operands but " << operand_exprs.size()
      << " operand expressions";
  const std::vector<ExprId>& in = operand_exprs;
  switch (op_info(op.kind).category) {
    case OpCategory::source:
      return {pool.var(op.attrs.name)};
    case OpCategory::kernel_body:
    case OpCategory::thread_body:
      return body_expressions(body_of(g, op), in, pool).outputs;
    case OpCategory::iterator: {
      size_t k = static_cast<size_t>(op.attrs.io_index);
      MUGRAPH_CHECK(op.attrs.io_index >= 0 && k < params.size() && params[k].valid())
          << "input iterator reads param " << op.attrs.io_index << " but " << params.size()
          << " param expressions were given";
      return {params[k]};  // tiles do not change the expression
    }
    case OpCategory::saver:
      return {};
    case OpCategory::accumulator:
      // Summing over the F iterations; a concatenating accumulator only moves tiles.
      return {op.attrs.dim == kPhi ? pool.sum(g.forloop, in[0]) : in[0]};
    case OpCategory::unary:
      return {unary_expression(op.kind, in[0], pool)};
    case OpCategory::binary:
      return {binary_expression(op, in, pool)};
    case OpCategory::matmul:
      return {matmul_expression(g, op, in[0], in[1], pool)};
    case OpCategory::reduction: {
      const Shape& s = g.type(op.inputs[0]).shape;
      MUGRAPH_CHECK(op.attrs.dim >= 0 && op.attrs.dim < s.rank() && op.attrs.to >= 1 &&
                    s[op.attrs.dim] % op.attrs.to == 0)
          << "sum(dim=" << op.attrs.dim << ", to=" << op.attrs.to << ") of a " << s.str() << " tensor";
      return {pool.sum(s[op.attrs.dim] / op.attrs.to, in[0])};
    }
    case OpCategory::layout:
      if (op.kind != OpKind::concat) return {in[0]};  // repeat, reshape
      {
        // Right-nested, operands in order: concat(a, concat(b, c)).
        ExprId e = in.back();
        for (size_t k = in.size() - 1; k-- > 0;) e = pool.concat(in[k], e);
        return {e};
      }
  }
  MUGRAPH_CHECK(false) << "op kind " << op_name(op.kind) << " has no expression rule";
  return {};
}

GraphExprs body_expressions(const Graph& body, const std::vector<ExprId>& params, ExprPool& pool) {
  MUGRAPH_CHECK(body.level != Level::kernel) << "body_expressions of a kernel graph";
  return walk(body, params, pool);
}

GraphExprs expressions(const Graph& kernel_graph, ExprPool& pool) {
  MUGRAPH_CHECK(kernel_graph.level == Level::kernel)
      << "expressions() of a " << level_name(kernel_graph.level) << " graph";
  return walk(kernel_graph, {}, pool);
}

std::vector<ExprId> output_expressions(const Graph& kernel_graph, ExprPool& pool) {
  return expressions(kernel_graph, pool).outputs;
}

}  // namespace mugraph
