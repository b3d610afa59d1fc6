/// \file elementwise.h
/// The element-wise ops as functors on f32 values (the semantics of the op registry's
/// apply_unary / apply_binary, in single precision), and element conversion.
#pragma once

#include <cmath>
#include <type_traits>

#include "mugraph_device/platform.h"

namespace mgd {

/// x converted to T (through f32 unless it already is a T).
template <typename T, typename S>
MGD_DEVICE T convert(S x) {
  if constexpr (std::is_same_v<T, S>) {
    return x;
  } else {
    return from_float<T>(to_float(x));
  }
}

namespace op {
struct Add {
  MGD_DEVICE float operator()(float a, float b) const { return a + b; }
};
struct Sub {
  MGD_DEVICE float operator()(float a, float b) const { return a - b; }
};
struct Mul {
  MGD_DEVICE float operator()(float a, float b) const { return a * b; }
};
struct Div {
  MGD_DEVICE float operator()(float a, float b) const { return a / b; }
};
struct Exp {
  MGD_DEVICE float operator()(float x) const { return expf(x); }
};
struct Sqr {
  MGD_DEVICE float operator()(float x) const { return x * x; }
};
struct Sqrt {
  MGD_DEVICE float operator()(float x) const { return sqrtf(x); }
};
struct Silu {
  MGD_DEVICE float operator()(float x) const { return x / (1.0f + expf(-x)); }
};
struct Relu {
  MGD_DEVICE float operator()(float x) const { return x > 0.0f ? x : 0.0f; }
};
struct Gelu {
  MGD_DEVICE float operator()(float x) const { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
};
}  // namespace op

}  // namespace mgd
