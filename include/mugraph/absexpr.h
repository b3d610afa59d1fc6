/// \file absexpr.h
/// Abstract expressions (paper §4.3, Table 1; DESIGN.md §2 and §5): hash-consed terms that
/// abstract what a tensor of a μGraph computes, and the expression of every tensor of a μGraph at
/// every level. The search prunes a prefix whose expressions are not subexpressions of the
/// program's; that oracle is a separate component built on these terms.
///
/// Terms. Leaves are var(name) (a program input) and constant(c) (a scalar constant, one atom
/// per distinct value); inner nodes are add, mul, div, exp, sqrt, silu, relu, gelu, sum(k, x)
/// with k ≥ 2, and concat(a, b). Terms are built only through an ExprPool, which normalizes on
/// the way in, so equal terms have equal ids:
/// - add and mul store their operands with the smaller id first (commutativity is free);
/// - sum(1, x) is x (an A_eq axiom that costs nothing to apply at construction).
/// No other axiom is applied: sum(i, sum(j, x)) stays nested, add(add(a, b), c) stays binary.
///
/// Why var is identified by name: verify() matches the inputs of two μGraphs by name, and the
/// search grows μGraphs from the program's own input ops, so a name denotes the same input
/// everywhere a pool is used.
///
/// How tiles appear. Tiling does not change an expression (iterators and savers pass it
/// through), but reductions see tile extents: a block-level matmul on tiles whose reduced extent
/// is k_tile gives sum(k_tile, mul(·, ·)), and a summing accumulator over F iterations wraps it in
/// sum(F, ·). The Figure 3b μGraph's output therefore holds sum(16, sum(256, mul(...))) where the
/// program holds sum(4096, mul(...)); the oracle relates the two through the A_eq axiom
/// sum(i, sum(j, x)) = sum(i·j, x).
///
/// Concat. The paper (§8.1) does not give plain concatenation an expression; it adds a fused
/// operator f(W, X, Y, Z) = (W‖X)·(Y‖Z) with E(f) = add(sum(k1, mul(E(W), E(Y))),
/// sum(k2, mul(E(X), E(Z)))), k1 and k2 the extents of W and X along the reduced dim. Writing
/// E(concat(a, b)) = add(E(a), E(b)) would be wrong in general (a matmul of it would produce cross
/// terms a·d and b·c that the tensor program never computes). So:
/// - concat(a, b, ...) gets a dedicated node kind, concat(E(a), concat(E(b), ...)) (right-nested,
///   operands in order), which no axiom looks into: a concat result is only ever a subexpression
///   of a term that contains the same concat node;
/// - a matmul whose left operand is a concat along its last dim and whose right operand is a
///   concat along its second-to-last dim, with the same number of parts and equal part extents
///   (both produced by concat ops of the same graph), gets the paper's §8.1 expression
///   add(sum(k1, mul(a1, b1)), sum(k2, mul(a2, b2)), ...) (left-nested adds). This is what makes
///   the LoRA rewrite W·X + B·A·X = (W‖B)·(X‖A·X) pass the pruning: the concats themselves are
///   opaque, but the matmul that consumes them is not.
/// Limitation: a concat consumed by anything else (an element-wise op, a matmul along another
/// dim, a concat split at different extents, a concat in another graph level) stays opaque, and a
/// prefix ending in a concat is a subexpression only of programs that contain that concat.
///
/// Thread safety. An ExprPool may be used by any number of threads at once. Building a node takes
/// one mutex (a sharded table is the upgrade path if profiles ever show contention; the search
/// builds one or two nodes per appended op). Reading a node by id takes no lock: nodes live in
/// chunks that never move, published before their ids can be seen by any other thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "mugraph/graph.h"
#include "mugraph/types.h"

namespace mugraph {

// clang-format off
/// X(enum_name, arity): the node kinds of abstract expressions (paper Table 1, plus concat).
/// arity counts child terms; sum also carries its extent, var its name, constant its value.
#define MUGRAPH_EXPR_KINDS(X) \
  X(var,      0)              \
  X(constant, 0)              \
  X(add,      2)              \
  X(mul,      2)              \
  X(div,      2)              \
  X(exp,      1)              \
  X(sqrt,     1)              \
  X(silu,     1)              \
  X(relu,     1)              \
  X(gelu,     1)              \
  X(sum,      1)              \
  X(concat,   2)
// clang-format on

/// Every node kind, generated from MUGRAPH_EXPR_KINDS.
enum class ExprKind : uint8_t {
#define MUGRAPH_EXPR_ENUM(name, arity) name,
  MUGRAPH_EXPR_KINDS(MUGRAPH_EXPR_ENUM)
#undef MUGRAPH_EXPR_ENUM
};

/// "var", "add", "sum", ...
std::string_view expr_kind_name(ExprKind kind);
/// Number of child terms of a node kind (0, 1 or 2).
int expr_arity(ExprKind kind);

struct ExprTag {};
/// Index of a term in its ExprPool.
using ExprId = Id<ExprTag>;

/// One node of a term. Fields a kind does not use stay at their defaults.
struct ExprNode {
  ExprKind kind = ExprKind::var;
  /// sum: the extent (≥ 2); var: the name's slot in the pool; constant: the normalized mantissa.
  int64_t value = 0;
  /// constant: the normalized power of ten.
  int32_t exp10 = 0;
  /// Children: unary kinds and sum use a; binary kinds use a and b (add, mul: a < b by id).
  ExprId a, b;
  /// var: the input's name (owned by the pool; same slot, same name).
  std::string_view name;

  friend bool operator==(const ExprNode&, const ExprNode&) = default;
};

/// Counters of an ExprPool. (Lookups and hits are not counted: a shared counter on the lock-free
/// lookup path would cost more than the lookup.)
struct ExprPoolStats {
  int64_t nodes = 0;  ///< distinct terms
};

/// A hash-consing arena of terms: building a node that exists returns its id. Not copyable (ids
/// are meaningful only in their pool); thread-safe as described in the file comment.
class ExprPool {
 public:
  ExprPool();
  ~ExprPool();
  ExprPool(const ExprPool&) = delete;
  ExprPool& operator=(const ExprPool&) = delete;

  /// A program input.
  ExprId var(std::string_view name);
  /// A scalar constant; equal values (after Scalar::normalized) give the same atom.
  ExprId constant(Scalar value);
  ExprId add(ExprId x, ExprId y);
  ExprId mul(ExprId x, ExprId y);
  ExprId div(ExprId x, ExprId y);
  ExprId exp(ExprId x) { return unary(ExprKind::exp, x); }
  ExprId sqrt(ExprId x) { return unary(ExprKind::sqrt, x); }
  ExprId silu(ExprId x) { return unary(ExprKind::silu, x); }
  ExprId relu(ExprId x) { return unary(ExprKind::relu, x); }
  ExprId gelu(ExprId x) { return unary(ExprKind::gelu, x); }
  /// sum(k, x); sum(1, x) is x. @pre k ≥ 1
  ExprId sum(int64_t k, ExprId x);
  /// concat(x, y), operands in order (not commutative).
  ExprId concat(ExprId x, ExprId y);
  /// A node of a unary kind (exp, sqrt, silu, relu, gelu). @pre expr_arity(kind) == 1, kind != sum
  ExprId unary(ExprKind kind, ExprId x);
  /// A node of a binary kind (add, mul, div, concat). @pre expr_arity(kind) == 2
  ExprId binary(ExprKind kind, ExprId x, ExprId y);

  /// The node of a term. Lock-free. @pre id was returned by this pool
  const ExprNode& node(ExprId id) const;
  /// The constant of a constant node. @pre node(id).kind == ExprKind::constant
  Scalar constant_value(ExprId id) const;
  /// Number of distinct terms.
  int64_t size() const { return size_.load(std::memory_order_acquire); }
  ExprPoolStats stats() const;

  /// The term as text: "sum(4096, mul(X, W))"; constants print as "c" followed by the value
  /// ("c4096", "c0.125"). Shared subterms are printed at every use, so the text can be much
  /// larger than the pool; output beyond max_chars is cut and ends in "...".
  std::string str(ExprId id, size_t max_chars = size_t{1} << 20) const;

 private:
  ExprId intern(const ExprNode& n);
  ExprNode* slot(int64_t index) const;

  // Chunk c holds kFirstChunk << c nodes, so kMaxChunks chunks cover every int32 id.
  static constexpr int kFirstChunkBits = 10;
  static constexpr int kMaxChunks = 32 - kFirstChunkBits;
  std::atomic<ExprNode*> chunks_[kMaxChunks] = {};
  std::atomic<int64_t> size_{0};

  // The hash-cons index: open addressing over node ids, read without the lock (see intern).
  struct Index;
  ExprId find(const Index& index, const ExprNode& n, uint64_t hash) const;
  void insert_locked(ExprId id, uint64_t hash);
  std::atomic<const Index*> index_{nullptr};

  struct Table;  // the indexes made so far and the var names, guarded by mutex_
  mutable std::mutex mutex_;
  std::unique_ptr<Table> table_;
};

/// The expressions of one graph and, nested, of its bodies.
struct GraphExprs {
  /// By TensorId of the graph.
  std::vector<ExprId> tensors;
  /// Parallel to Graph::bodies; a body no op refers to keeps an empty entry.
  std::vector<GraphExprs> bodies;
  /// Kernel graph: the program outputs in order. Body: what its output savers write, by
  /// io_index (an index no saver writes stays invalid).
  std::vector<ExprId> outputs;
};

/// The expressions of every tensor of a μGraph at every level (paper Table 1 with graph-defined
/// ops inlined). Every tensor gets one, dead ones included. @pre kernel_graph.level == kernel and
/// the graph is well-formed (validate() would report at most limits such as memory)
GraphExprs expressions(const Graph& kernel_graph, ExprPool& pool);

/// The expressions of a block or thread graph whose params have the expressions `params` (the
/// expressions of the enclosing op's operands, by io_index).
GraphExprs body_expressions(const Graph& body, const std::vector<ExprId>& params, ExprPool& pool);

/// The expressions of the program outputs, in order. @pre as for expressions()
std::vector<ExprId> output_expressions(const Graph& kernel_graph, ExprPool& pool);

/// The expressions of the outputs of one op of `g` from the expressions of its operands, without
/// looking at the rest of the graph except for what the rules need: operand shapes (reduced
/// extents), `g.forloop` (accumulators), `g.bodies` (graph_kernel, thread_graph: the body is
/// walked, see body_expressions) and the producers of a matmul's operands (the concat rule
/// above). This is how the search extends a prefix by one op. `params` is needed only by
/// input iterators: the expressions of the enclosing op's operands. Output savers have no
/// outputs and give an empty vector.
/// @pre operand_exprs.size() == op.inputs.size(); the operand tensors of `op` belong to `g`
std::vector<ExprId> op_expressions(const Graph& g, const Op& op, const std::vector<ExprId>& operand_exprs,
                                   ExprPool& pool, const std::vector<ExprId>& params = {});

}  // namespace mugraph
