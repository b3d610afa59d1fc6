// How much memory the search may use: its limit, and the share of it the verifier keeps. What the
// process uses and may use is host_memory.h.
#pragma once

#include <cstdint>

#include "mugraph/search.h"

namespace mugraph::search_detail {

/// The memory limit a search runs under: the option, or three quarters of what the process may
/// use (the physical memory, or its control group's limit where that is lower; 0, no limit, where
/// neither is known).
int64_t effective_memory_limit(const SearchOptions& options);

/// The random inputs the verifier keeps between candidates (ReferenceRuns) under a memory limit
/// of `memory_limit_bytes` (0: none known): an eighth of it, at most ReferenceRuns'
/// 2-GiB default. Beyond, a test draws its inputs again for each candidate, which costs a few
/// per cent of verifying at the paper's shapes, where the kept inputs were the largest item of an
/// attention search's memory.
int64_t verifier_kept_input_bytes(int64_t memory_limit_bytes);

}  // namespace mugraph::search_detail
