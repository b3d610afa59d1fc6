#include "mugraph/ops.h"

#include <string>

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

void detail::bad_elementwise(OpKind kind) {
  detail::throw_internal(__FILE__, __LINE__, "elementwise(kind)",
                         "no element-wise float semantics for " + std::string(op_name(kind)));
}

}  // namespace mugraph
