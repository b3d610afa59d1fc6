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

/// Whether a split sum's lanes read their group 8 elements at a time (one 16-byte access): 16-bit
/// elements, the group contiguous (stride 1), an equal whole number of 8-element chunks per lane,
/// and every group starting 16-byte aligned (`starts_aligned`: the tile is, and every other dim's
/// stride is a multiple of 8 elements). Lane l of an output then reads chunks l, l + lanes, ...
MGD_RULE bool sum_reads_vectors(int64_t lanes, int64_t group, int64_t element_bytes, int64_t group_stride,
                                bool starts_aligned) {
  return lanes > 1 && element_bytes == 2 && group_stride == 1 && group % (8 * lanes) == 0 && starts_aligned;
}

}  // namespace mgd

#undef MGD_RULE
