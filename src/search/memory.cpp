#include "memory.h"

#include <algorithm>

#include "mugraph/host_memory.h"

namespace mugraph::search_detail {

int64_t effective_memory_limit(const SearchOptions& o) {
  if (o.memory_limit_bytes > 0) return o.memory_limit_bytes;
  return machine_usable_memory_bytes() / 4 * 3;
}

int64_t verifier_kept_input_bytes(int64_t memory_limit_bytes) {
  const int64_t most = ReferenceRuns::kDefaultKeptInputBytes;
  return memory_limit_bytes > 0 ? std::min(memory_limit_bytes / 8, most) : most;
}

}  // namespace mugraph::search_detail
