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

/// The swizzled layout in which wgmma reads a [Rows, Cols] tile of 16-bit elements in place
/// (wgmma_rules.h): cut along Cols into panels Span / 2 elements wide, one after another; row r
/// of a panel at r · Span bytes, its 16-byte chunk c at c XOR (r mod Span / 16). It is the
/// layout the copy engine writes with a swizzled tensor map, spelt as an address function so that
/// element-wise ops can write such a tile themselves. The tile starts where the pattern does
/// (1024-byte aligned in shared memory).
template <int64_t Rows, int64_t Cols, int64_t Span>
struct Swizzled {
  static_assert(Span == 32 || Span == 64 || Span == 128, "a swizzle span of 32, 64 or 128 bytes");
  static_assert(Cols % (Span / 2) == 0, "whole panels");
  static constexpr int64_t rows = Rows, cols = Cols, panel_width = Span / 2;
  /// The element offset of (r, c).
  MGD_HOST_DEVICE static constexpr int64_t at(int64_t r, int64_t c) {
    const int64_t bytes = c / panel_width * (Rows * Span) + r * Span + c % panel_width * 2;
    return (bytes ^ (((bytes >> 7) & (Span / 16 - 1)) << 4)) / 2;
  }
};

template <typename St>
inline constexpr bool kIsSwizzled = false;
template <int64_t Rows, int64_t Cols, int64_t Span>
inline constexpr bool kIsSwizzled<Swizzled<Rows, Cols, Span>> = true;

/// Whether every element index of shape S and every offset it reaches through strides St fit
/// 32 bits: then the index arithmetic below runs in 32 bits (shared-memory tiles always do), half
/// the instructions of 64-bit divisions and products, which the portable tile ops are bound by
/// (docs/codegen.md, "Measured on an H200").
template <typename S, typename St>
MGD_HOST_DEVICE constexpr bool fits_32_bits() {
  constexpr int64_t kMax = int64_t{1} << 31;
  if (S::numel >= kMax) return false;
  if constexpr (!kIsSwizzled<St>) {
    int64_t last = 0;
    for (int d = 0; d < S::rank; ++d) last += (S::get(d) - 1) * St::get(d);
    return last >= 0 && last < kMax;
  } else {
    return true;
  }
}

/// Offset of element e (row-major linear index over shape S) in a tensor with strides St (or
/// the Swizzled layout of a tile whose dims other than the last two are 1), computed in the
/// integer type I.
template <typename S, typename St, typename I>
MGD_HOST_DEVICE I offset_in(I e) {
  I off = 0;
  MGD_UNROLL
  for (int d = S::rank - 1; d >= 0; --d) {
    const I c = e % static_cast<I>(S::get(d));
    e /= static_cast<I>(S::get(d));
    off += c * static_cast<I>(St::get(d));
  }
  return off;
}

template <typename S, typename St>
MGD_HOST_DEVICE int64_t offset(int64_t e) {
  if constexpr (kIsSwizzled<St>) {
    static_assert(S::numel == St::rows * St::cols && S::get(S::rank - 1) == St::cols, "a whole 2-D tile");
    return St::at(e / St::cols, e % St::cols);
  } else {
    static_assert(S::rank == St::rank, "a stride per dim");
    if constexpr (is_row_major<S, St>()) return e;
    if constexpr (fits_32_bits<S, St>())  // unsigned: divisions by powers of two are shifts
      return static_cast<int64_t>(offset_in<S, St, uint32_t>(static_cast<uint32_t>(e)));
    return offset_in<S, St, int64_t>(e);
  }
}

/// Coordinate d of element e of shape S, computed in the integer type I.
template <typename S, typename I>
MGD_HOST_DEVICE I coord_in(I e, int d) {
  I c = 0;
  MGD_UNROLL
  for (int k = S::rank - 1; k >= 0; --k) {
    if (k == d) c = e % static_cast<I>(S::get(k));
    e /= static_cast<I>(S::get(k));
  }
  return c;
}

/// Coordinate d of element e of shape S (in 32 bits where S's indices fit).
template <typename S>
MGD_HOST_DEVICE int64_t coord(int64_t e, int d) {
  if constexpr (S::numel < (int64_t{1} << 31))
    return static_cast<int64_t>(coord_in<S, uint32_t>(static_cast<uint32_t>(e), d));
  else
    return coord_in<S, int64_t>(e, d);
}

}  // namespace mgd
