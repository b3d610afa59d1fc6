#include "mugraph/ops.h"

#include <cmath>

#include "mugraph/error.h"

namespace mugraph {

namespace {
constexpr uint8_t K = static_cast<uint8_t>(Level::kernel);
constexpr uint8_t B = static_cast<uint8_t>(Level::block);
constexpr uint8_t T = static_cast<uint8_t>(Level::thread);

constexpr OpInfo kOps[] = {
#define MUGRAPH_OP_INFO(name, amin, amax, levels, cat, lax) \
  OpInfo{OpKind::name, #name, amin, amax, static_cast<uint8_t>(levels), OpCategory::cat, lax},
    MUGRAPH_OPS(MUGRAPH_OP_INFO)
#undef MUGRAPH_OP_INFO
};
static_assert(sizeof(kOps) / sizeof(kOps[0]) == kNumOpKinds);
}  // namespace

std::string_view level_name(Level l) {
  switch (l) {
    case Level::kernel: return "kernel";
    case Level::block: return "block";
    case Level::thread: return "thread";
  }
  return "?";
}

std::optional<Level> parse_level(std::string_view name) {
  if (name == "kernel") return Level::kernel;
  if (name == "block") return Level::block;
  if (name == "thread") return Level::thread;
  return std::nullopt;
}

const OpInfo& op_info(OpKind kind) {
  auto i = static_cast<size_t>(kind);
  MUGRAPH_CHECK(i < static_cast<size_t>(kNumOpKinds)) << "op kind " << i;
  return kOps[i];
}

std::optional<OpKind> op_by_name(std::string_view name) {
  for (const OpInfo& info : kOps)
    if (info.name == name) return info.kind;
  return std::nullopt;
}

float apply_unary(OpKind kind, float x) {
  double v = x;
  switch (kind) {
    case OpKind::exp: return static_cast<float>(std::exp(v));
    case OpKind::sqr: return static_cast<float>(v * v);
    case OpKind::sqrt: return static_cast<float>(std::sqrt(v));
    case OpKind::silu: return static_cast<float>(v / (1.0 + std::exp(-v)));
    case OpKind::relu: return x > 0.0f ? x : 0.0f;
    case OpKind::gelu: return static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
    default: break;
  }
  MUGRAPH_CHECK(false) << "apply_unary on " << op_name(kind);
  return 0.0f;
}

float apply_binary(OpKind kind, float a, float b) {
  switch (kind) {
    case OpKind::add: return a + b;
    case OpKind::sub: return a - b;
    case OpKind::mul: return a * b;
    case OpKind::div: return a / b;
    default: break;
  }
  MUGRAPH_CHECK(false) << "apply_binary on " << op_name(kind);
  return 0.0f;
}

}  // namespace mugraph
