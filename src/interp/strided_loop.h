/// \file strided_loop.h
/// Walks N strided operands over a common shape in row-major order, handing the innermost
/// contiguous runs to a callback. Dims of extent 1 are dropped and adjacent dims that are
/// contiguous in every operand are merged first, so dense tensors become one long run.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "mugraph/types.h"
#include "view.h"

namespace mugraph::interp {

template <int N>
class StridedLoop {
 public:
  /// shape: the iteration space; strides[k]: operand k's stride per dim of shape (0 broadcasts).
  StridedLoop(const Shape& shape, const std::array<std::array<int64_t, kMaxRank>, N>& strides) {
    for (int d = 0; d < shape.rank(); ++d) {
      if (shape[d] == 1) continue;
      if (rank_ > 0) {
        bool merge = true;
        for (int k = 0; k < N; ++k)
          merge = merge && stride_[k][static_cast<size_t>(rank_ - 1)] ==
                               strides[static_cast<size_t>(k)][static_cast<size_t>(d)] * shape[d];
        if (merge) {
          shape_[static_cast<size_t>(rank_ - 1)] *= shape[d];
          for (int k = 0; k < N; ++k)
            stride_[k][static_cast<size_t>(rank_ - 1)] = strides[static_cast<size_t>(k)][static_cast<size_t>(d)];
          continue;
        }
      }
      shape_[static_cast<size_t>(rank_)] = shape[d];
      for (int k = 0; k < N; ++k)
        stride_[k][static_cast<size_t>(rank_)] = strides[static_cast<size_t>(k)][static_cast<size_t>(d)];
      ++rank_;
    }
    if (rank_ == 0) {  // a single element
      shape_[0] = 1;
      for (int k = 0; k < N; ++k) stride_[k][0] = 0;
      rank_ = 1;
    }
    numel_ = 1;
    for (int d = 0; d < rank_; ++d) numel_ *= shape_[static_cast<size_t>(d)];
  }

  int64_t numel() const { return numel_; }
  /// Stride of operand k along the innermost run.
  int64_t inner_stride(int k) const { return stride_[k][static_cast<size_t>(rank_ - 1)]; }

  /// Calls f(offsets, count) for the runs covering flat indices [begin, end): offsets[k] is the
  /// first element of operand k, count the run length; element j of the run is at
  /// offsets[k] + j · inner_stride(k).
  template <typename F>
  void run(int64_t begin, int64_t end, F&& f) const {
    std::array<int64_t, kMaxRank> idx{};
    int64_t rest = begin;
    for (int d = rank_ - 1; d >= 0; --d) {
      idx[static_cast<size_t>(d)] = rest % shape_[static_cast<size_t>(d)];
      rest /= shape_[static_cast<size_t>(d)];
    }
    int64_t pos = begin;
    const int inner = rank_ - 1;
    while (pos < end) {
      std::array<int64_t, N> off{};
      for (int k = 0; k < N; ++k)
        for (int d = 0; d < rank_; ++d)
          off[static_cast<size_t>(k)] += idx[static_cast<size_t>(d)] * stride_[k][static_cast<size_t>(d)];
      int64_t count = std::min(shape_[static_cast<size_t>(inner)] - idx[static_cast<size_t>(inner)], end - pos);
      f(off, count);
      pos += count;
      idx[static_cast<size_t>(inner)] += count;
      for (int d = inner; d > 0 && idx[static_cast<size_t>(d)] == shape_[static_cast<size_t>(d)]; --d) {
        idx[static_cast<size_t>(d)] = 0;
        ++idx[static_cast<size_t>(d - 1)];
      }
    }
  }

 private:
  int rank_ = 0;
  int64_t numel_ = 1;
  std::array<int64_t, kMaxRank> shape_{};
  std::array<std::array<int64_t, kMaxRank>, N> stride_{};
};

/// The strides of operand v broadcast (NumPy rules, right-aligned) to a shape of rank `rank`.
template <typename T>
std::array<int64_t, kMaxRank> broadcast_strides(const BasicView<T>& v, int rank) {
  std::array<int64_t, kMaxRank> s{};
  for (int i = 0; i < rank; ++i) {
    int j = i - (rank - v.rank());
    s[static_cast<size_t>(i)] = (j < 0 || v.shape[j] == 1) ? 0 : v.stride[static_cast<size_t>(j)];
  }
  return s;
}

}  // namespace mugraph::interp
