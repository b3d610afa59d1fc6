/// \file host_memory.h
/// The host memory this process uses and may use: its resident set, and the memory it may take
/// before the kernel's OOM killer (or a container's) ends it. The search stops at a limit derived
/// from it; the search and the verifier refuse work that cannot fit in it.
#pragma once

#include <cstdint>
#include <string>

namespace mugraph {

/// The process's resident memory in bytes (Linux: /proc/self/statm), or 0 where unknown.
int64_t resident_bytes();

/// The memory this process may use: the smaller of the physical memory and the memory limit of
/// its control group (cgroup v2 `memory.max`, v1 `memory.limit_in_bytes`, of the group and each
/// group above it). 0 where neither is known. `root` stands for `/` (tests pass a made-up tree).
int64_t usable_memory_bytes(const std::string& root = "/");

/// usable_memory_bytes() of the real machine, read once per process: callers on hot paths (the
/// verifier checks it for every batch of candidates) do not read /proc and /sys each time.
int64_t machine_usable_memory_bytes();

/// The smallest memory limit on the control-group path of the process that `proc_self_cgroup`
/// (the text of /proc/self/cgroup) describes, under `root`; 0 where there is none. Where the
/// group's own folder is not there (a container sees its own group as the hierarchy's root), the
/// hierarchy's root is read.
int64_t cgroup_memory_limit(const std::string& root, const std::string& proc_self_cgroup);

/// `bytes` in GiB with `decimals` places: "17.70 GiB".
std::string gib_text(int64_t bytes, int decimals = 2);

}  // namespace mugraph
