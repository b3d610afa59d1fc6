/// \file validate.h
/// Validity of a μGraph (paper Definition 2.1) for a target GPU, and the targets themselves.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "mugraph/error.h"
#include "mugraph/graph.h"

namespace mugraph {

/// Hardware limits of a target GPU that validity depends on.
struct Target {
  std::string_view name;          ///< "a100", "h100", "h200"
  std::string_view arch;          ///< "sm_80", "sm_90a"
  int64_t shared_memory_bytes;    ///< usable dynamic shared memory per block
  int64_t device_memory_bytes;
  int64_t registers_per_thread;   ///< architectural maximum (255 on sm_80 and sm_90)
  int64_t max_threads_per_block;
  int64_t max_grid_y_z;           ///< largest grid extent along y and z (x allows 2^31 − 1)
  int64_t sms;                    ///< streaming multiprocessors (A100 108, H100 SXM and H200 132)
};

/// All known targets.
const std::vector<Target>& all_targets();
/// A target by name ("a100", "h100", "h200") or arch ("sm_80", "sm_90a"); nullopt if unknown.
std::optional<Target> find_target(std::string_view name);
/// find_target, or a UserError naming the known targets.
Target require_target(std::string_view name);
/// The default target (h100).
const Target& default_target();

/// Checks a complete μGraph (a kernel graph with its bodies) against Definition 2.1 and the
/// target's limits. Also checks that the graph is well-formed data (ids in range, ops in
/// topological order, stored tensor types equal to what the shape rules infer), so it is the
/// gate for graphs that come from files. Returns nullopt when valid.
std::optional<Rejection> validate(const Graph& kernel_graph, const Target& target = default_target());

/// validate() for a search prefix (a kernel graph the search is still growing, as a checkpoint
/// stores it): every check but that the program's outputs exist, which a prefix has not
/// produced yet.
std::optional<Rejection> validate_prefix(const Graph& kernel_graph, const Target& target = default_target());

/// Bytes of shared memory a block graph needs if all its STensors are live at once (the
/// paper's conservative rule; the memory planner later does better), a concat's operands
/// placed in its buffer when they are concatenated nowhere else.
int64_t block_shared_memory_bytes(const Graph& block_graph);

/// Registers per thread a thread graph needs, by the rule documented in validate.cpp.
int64_t thread_graph_registers(const Graph& thread_graph, const Dim3& threads);

}  // namespace mugraph
