/// \file view.h
/// Strided views of float tensors: how the interpreter refers to whole tensors, to tiles of them
/// (an input iterator's tile is a view into the kernel-level tensor, never a copy) and to the
/// region an output saver writes. Views do not own memory.
#pragma once

#include <array>
#include <cstdint>

#include "mugraph/error.h"
#include "mugraph/types.h"

namespace mugraph::interp {

/// A strided view: element (i0, .., ir-1) lives at data[Σ ik · stride[k]].
template <typename T>
struct BasicView {
  T* data = nullptr;
  Shape shape;
  std::array<int64_t, kMaxRank> stride{};

  int rank() const { return shape.rank(); }
  int64_t numel() const { return shape.numel(); }

  /// Row-major (C order) view of a dense buffer.
  static BasicView dense(T* p, const Shape& s) {
    BasicView v;
    v.data = p;
    v.shape = s;
    int64_t st = 1;
    for (int d = s.rank() - 1; d >= 0; --d) {
      v.stride[static_cast<size_t>(d)] = st;
      st *= s[d];
    }
    return v;
  }

  /// Whether the elements are exactly data[0 .. numel) in row-major order (dims of extent 1
  /// may have any stride).
  bool contiguous() const {
    int64_t st = 1;
    for (int d = rank() - 1; d >= 0; --d) {
      if (shape[d] != 1 && stride[static_cast<size_t>(d)] != st) return false;
      st *= shape[d];
    }
    return true;
  }

  /// Elements [begin, begin + extent) along dim d. @pre 0 ≤ begin, begin + extent ≤ shape[d]
  BasicView slice(int d, int64_t begin, int64_t extent) const {
    BasicView v = *this;
    v.data += begin * stride[static_cast<size_t>(d)];
    v.shape[d] = extent;
    return v;
  }

  operator BasicView<const T>() const {  // NOLINT(google-explicit-constructor)
    BasicView<const T> v;
    v.data = data;
    v.shape = shape;
    v.stride = stride;
    return v;
  }
};

/// A read-only view (operands).
using View = BasicView<const float>;
/// A writable view (results).
using MutView = BasicView<float>;

}  // namespace mugraph::interp
