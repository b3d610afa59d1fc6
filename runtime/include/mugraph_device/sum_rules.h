/// \file sum_rules.h
/// How a block sum shares its work among threads (tile.h: sum, sum_split), as plain constexpr
/// arithmetic with nothing from CUDA or the emulation: the device library sums by these rules,
/// and the layout pass's bank-conflict model (src/opt/layout_choice.cpp) includes this header
/// too, so that it models the reads the library makes.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define MGD_RULE __host__ __device__ constexpr
#else
#define MGD_RULE constexpr
#endif

namespace mgd {

/// Each lane of a split sum adds at least this many elements before the shuffles.
inline constexpr int64_t kSumMinPerLane = 8;

/// Lanes per output of a block sum of `outputs` groups of `group` elements over `threads`
/// threads: the largest power of two up to 32 such that every output gets its lanes in one
/// round and each lane at least kSumMinPerLane elements (1: one thread per output).
MGD_RULE int64_t sum_lanes(int64_t outputs, int64_t threads, int64_t group) {
  int64_t lanes = 32;
  while (lanes > 1 && (outputs * lanes > threads || group < lanes * kSumMinPerLane)) lanes /= 2;
  return lanes;
}

/// Lanes per output of a block sum as tile.h's sum runs it: split (sum_lanes) for groups of at
/// least 2 · kSumMinPerLane elements in blocks of whole warps, else one thread per output.
MGD_RULE int64_t block_sum_lanes(int64_t outputs, int64_t threads, int64_t group) {
  return group >= 2 * kSumMinPerLane && threads % 32 == 0 ? sum_lanes(outputs, threads, group) : 1;
}

}  // namespace mgd

#undef MGD_RULE
