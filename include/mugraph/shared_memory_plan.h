/// \file shared_memory_plan.h
/// Shared-memory planning (DESIGN.md §7): offsets for a kernel's shared-memory buffers such that
/// no two buffers live at the same time share a byte, with the smallest peak we can find.
///
/// This is dynamic storage allocation: buffers are rectangles of fixed height (bytes) and fixed
/// extent in time, placed at offsets. It is NP-hard in general, but a kernel has few buffers.
/// Any placement is reproduced, with no offset higher, by placing its buffers in order of offset
/// at the lowest free aligned offset (lower neighbours can only move down, which frees room).
/// So the exact search tries orders of the buffers, each placed lowest-fit, with branch and bound
/// on the peak, up to a budget of placements; it starts from best-fit (the tightest gap, largest
/// buffers first), which is what larger problems get.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mugraph {

/// A buffer to place: its size, its alignment, and the time steps (inclusive) it is live.
struct SharedBuffer {
  int64_t bytes = 0;
  int64_t align = 16;  ///< a power of two
  int32_t first = 0, last = 0;
};

/// Limits of the exact search.
struct SharedPlanOptions {
  /// Problems with at most this many buffers (of non-zero size) are searched exactly.
  int exact_max_buffers = 12;
  /// Placements the exact search may try before it keeps the best plan found.
  int64_t exact_budget = 200000;
};

struct SharedMemoryPlan {
  std::vector<int64_t> offsets;  ///< per buffer, aligned
  int64_t peak = 0;              ///< bytes: the largest offset + size
  /// The most bytes live at any one time (alignment aside): no plan needs less.
  int64_t live_lower_bound = 0;
  /// Whether `peak` is proven the least possible (the exact search finished, or the plan meets
  /// live_lower_bound).
  bool optimal = false;
  std::string method;      ///< "exact", "exact (budget reached)" or "best-fit"
  int64_t placements = 0;  ///< placements the exact search tried
};

/// Plans `buffers` (any order; sizes ≥ 0).
SharedMemoryPlan plan_shared_memory(const std::vector<SharedBuffer>& buffers, const SharedPlanOptions& options = {});

/// Whether a plan places every buffer at an aligned offset with no two buffers that are live at
/// the same time sharing a byte, and its peak covers every buffer. For tests and checks.
bool plan_is_valid(const std::vector<SharedBuffer>& buffers, const SharedMemoryPlan& plan);

}  // namespace mugraph
