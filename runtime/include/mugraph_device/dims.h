/// \file dims.h
/// Compile-time shapes and strides, and the index arithmetic every tile op shares: element e of
/// a dense row-major shape S lives at offset<S, Stride>(e) in a tensor with those strides. A
/// stride of 0 broadcasts a dim. The generated code spells every shape and stride out as
/// template arguments, so the divisions below are by constants and unroll.
#pragma once

#include "mugraph_device/platform.h"

namespace mgd {

/// A list of extents (a shape) or of element strides.
template <int64_t... E>
struct Dims {
  static_assert(sizeof...(E) >= 1, "tensors have at least one dim");
  static constexpr int rank = static_cast<int>(sizeof...(E));
  static constexpr int64_t numel = (int64_t{1} * ... * E);
  MGD_HOST_DEVICE static constexpr int64_t get(int d) {
    constexpr int64_t v[] = {E...};
    return v[d];
  }
};

/// Whether strides St lay shape S out densely in row-major order (element e at offset e); the
/// stride of an extent-1 dim does not matter.
template <typename S, typename St>
MGD_HOST_DEVICE constexpr bool is_row_major() {
  int64_t expect = 1;
  for (int d = S::rank - 1; d >= 0; --d) {
    if (S::get(d) != 1 && St::get(d) != expect) return false;
    expect *= S::get(d);
  }
  return true;
}

/// Offset of element e (row-major linear index over shape S) in a tensor with strides St.
template <typename S, typename St>
MGD_HOST_DEVICE int64_t offset(int64_t e) {
  static_assert(S::rank == St::rank, "a stride per dim");
  if constexpr (is_row_major<S, St>()) return e;
  int64_t off = 0;
  MGD_UNROLL
  for (int d = S::rank - 1; d >= 0; --d) {
    const int64_t c = e % S::get(d);
    e /= S::get(d);
    off += c * St::get(d);
  }
  return off;
}

/// Coordinate d of element e of shape S.
template <typename S>
MGD_HOST_DEVICE int64_t coord(int64_t e, int d) {
  int64_t c = 0;
  MGD_UNROLL
  for (int k = S::rank - 1; k >= 0; --k) {
    if (k == d) c = e % S::get(k);
    e /= S::get(k);
  }
  return c;
}

}  // namespace mgd
