// How much memory the search may use, and how much it uses: the resident set of the process and
// the memory it may take before the kernel's OOM killer (or a container's) ends it.
#pragma once

#include <cstdint>
#include <string>

#include "mugraph/graph.h"
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

/// A lower bound on the memory verifying a candidate of `program` takes: each finite-field test
/// draws the program's inputs at their full size and computes its outputs, 8 bytes an element
/// (a 32-bit residue in each of the two fields), whatever else the candidate's run holds.
int64_t verification_bytes_lower_bound(const Graph& program);

/// `bytes` in GiB with `decimals` places: "17.70 GiB".
std::string gib_text(int64_t bytes, int decimals = 2);

/// The process's resident memory in bytes (Linux: /proc/self/statm), or 0 where unknown.
int64_t resident_bytes();

/// The memory this process may use: the smaller of the physical memory and the memory limit of
/// its control group (cgroup v2 `memory.max`, v1 `memory.limit_in_bytes`, of the group and each
/// group above it). 0 where neither is known. `root` stands for `/` (tests pass a made-up tree).
int64_t usable_memory_bytes(const std::string& root = "/");

/// The smallest memory limit on the control-group path of the process that `proc_self_cgroup`
/// (the text of /proc/self/cgroup) describes, under `root`; 0 where there is none. Where the
/// group's own folder is not there (a container sees its own group as the hierarchy's root), the
/// hierarchy's root is read.
int64_t cgroup_memory_limit(const std::string& root, const std::string& proc_self_cgroup);

}  // namespace mugraph::search_detail
