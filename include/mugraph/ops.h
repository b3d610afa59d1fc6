/// \file ops.h
/// The op registry: every op mugraph knows is listed once, in MUGRAPH_OPS below. The enum, the
/// names used by the program format, JSON and Python, the levels an op exists at, its arity and
/// its float semantics all derive from that list, so a new op is added in one place.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>

namespace mugraph {

/// Graph levels (bit flags so an op can list several).
enum class Level : uint8_t { kernel = 1, block = 2, thread = 4 };

/// "kernel", "block", "thread".
std::string_view level_name(Level l);
std::optional<Level> parse_level(std::string_view name);

/// How an op behaves, for code that treats whole families alike (shape rules, interpreters,
/// fusion, code generation).
enum class OpCategory : uint8_t {
  source,          ///< program input (kernel level)
  kernel_body,     ///< graph-defined kernel: its meaning is a block graph
  thread_body,     ///< thread graph: a fused element-wise chain, its meaning is a thread graph
  iterator,        ///< input iterator (block: DTensor → STensor with imap/fmap; thread: STensor → registers)
  saver,           ///< output saver (block: STensor → DTensor with omap; thread: registers → STensor)
  accumulator,     ///< for-loop accumulator (block level)
  unary,           ///< element-wise, one operand
  binary,          ///< element-wise, two operands (one may be a scalar constant), NumPy broadcasting
  matmul,          ///< batched matrix product on the last two dims
  reduction,       ///< sum(dim, to)
  layout,          ///< repeat, reshape, concat: moves data, computes nothing
};

// clang-format off
/// X(enum_name, arity_min, arity_max, levels, category, lax)
///   arity counts tensor operands (-1: any number); levels: K kernel, B block, T thread;
///   lax: whether the op belongs to the Lax fragment in itself (exp is Lax but at most once a path).
#define MUGRAPH_OPS(X)                                                    \
  X(input,          0,  0, K,     source,      true)                       \
  X(graph_kernel,   0, -1, K,     kernel_body, true)                       \
  X(thread_graph,   1, -1, B,     thread_body, true)                       \
  X(input_iterator, 0,  0, B | T, iterator,    true)                       \
  X(output_saver,   1,  1, B | T, saver,       true)                       \
  X(accum,          1,  1, B,     accumulator, true)                       \
  X(matmul,         2,  2, K | B | T, matmul,  true)                       \
  X(sum,            1,  1, K | B | T, reduction, true)                     \
  X(add,            1,  2, K | B | T, binary,  true)                       \
  X(sub,            1,  2, K | B | T, binary,  true)                       \
  X(mul,            1,  2, K | B | T, binary,  true)                       \
  X(div,            1,  2, K | B | T, binary,  true)                       \
  X(exp,            1,  1, K | B | T, unary,   true)                       \
  X(sqr,            1,  1, K | B | T, unary,   true)                       \
  X(sqrt,           1,  1, K | B | T, unary,   true)                       \
  X(silu,           1,  1, K | B | T, unary,   true)                       \
  X(relu,           1,  1, K | B | T, unary,   false)                      \
  X(gelu,           1,  1, K | B | T, unary,   false)                      \
  X(repeat,         1,  1, K | B,     layout,  true)                       \
  X(reshape,        1,  1, K | B,     layout,  true)                       \
  X(concat,         2, -1, K | B,     layout,  true)
// clang-format on

/// Every op kind, generated from MUGRAPH_OPS.
enum class OpKind : uint8_t {
#define MUGRAPH_OP_ENUM(name, amin, amax, levels, cat, lax) name,
  MUGRAPH_OPS(MUGRAPH_OP_ENUM)
#undef MUGRAPH_OP_ENUM
};

/// Number of op kinds.
inline constexpr int kNumOpKinds = 0
#define MUGRAPH_OP_COUNT(name, amin, amax, levels, cat, lax) +1
    MUGRAPH_OPS(MUGRAPH_OP_COUNT)
#undef MUGRAPH_OP_COUNT
    ;

/// What the registry knows about one op.
struct OpInfo {
  OpKind kind;
  std::string_view name;  ///< the spelling in programs, JSON and Python
  int arity_min;
  int arity_max;          ///< -1: unbounded
  uint8_t levels;         ///< bit set of Level
  OpCategory category;
  bool lax;

  bool at(Level l) const { return (levels & static_cast<uint8_t>(l)) != 0; }
  bool elementwise() const { return category == OpCategory::unary || category == OpCategory::binary; }
};

/// The registry entry of an op.
const OpInfo& op_info(OpKind kind);
/// Looks an op up by its name; nullopt if there is none.
std::optional<OpKind> op_by_name(std::string_view name);
/// Shorthand for op_info(kind).name.
inline std::string_view op_name(OpKind kind) { return op_info(kind).name; }

namespace detail {
[[noreturn]] void bad_elementwise(OpKind kind);
}

/// Float semantics of element-wise ops (f32 in, f32 out; transcendental ones computed in double).
/// Inline because interpreters call them once per element.
/// @pre op_info(kind).category == unary
inline float apply_unary(OpKind kind, float x) {
  double v = x;
  switch (kind) {
    case OpKind::exp: return static_cast<float>(std::exp(v));
    case OpKind::sqr: return x * x;
    case OpKind::sqrt: return static_cast<float>(std::sqrt(v));
    case OpKind::silu: return static_cast<float>(v / (1.0 + std::exp(-v)));
    case OpKind::relu: return x > 0.0f ? x : 0.0f;
    case OpKind::gelu: return static_cast<float>(0.5 * v * (1.0 + std::erf(v * 0.70710678118654752440)));
    default: detail::bad_elementwise(kind);
  }
}

/// @pre op_info(kind).category == binary
inline float apply_binary(OpKind kind, float a, float b) {
  switch (kind) {
    case OpKind::add: return a + b;
    case OpKind::sub: return a - b;
    case OpKind::mul: return a * b;
    case OpKind::div: return a / b;
    default: detail::bad_elementwise(kind);
  }
}

}  // namespace mugraph
