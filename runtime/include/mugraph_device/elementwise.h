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

/// f32 division, square root and exponential. On a GPU these are the hardware's approximations
/// (div.full: at most 2 ulp for divisors below 2^126; sqrt.approx; ex2.approx on x·log2(e): at
/// most 2 + 1.2·|x| ulp), not the correctly rounded forms, which take 4–10 times the
/// instructions and are what the portable tile ops in attention's loops are bound by (docs/codegen.md).
/// Every tile holds 16-bit elements or accumulates in f32 towards them, and an f16 ulp is
/// 8,192 f32 ulps, so the results round the same but in rare ties; the host emulation and the
/// CPU interpreter compute the correctly rounded forms, and results are checked against them
/// within the usual tolerance.
MGD_DEVICE float fast_div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdividef(a, b);
#else
  return a / b;
#endif
}
MGD_DEVICE float fast_sqrt(float x) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("sqrt.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#else
  return std::sqrt(x);
#endif
}
MGD_DEVICE float fast_exp(float x) {
#if defined(__CUDA_ARCH__)
  return __expf(x);
#else
  return std::exp(x);
#endif
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
  MGD_DEVICE float operator()(float a, float b) const { return fast_div(a, b); }
};
struct Exp {
  MGD_DEVICE float operator()(float x) const { return fast_exp(x); }
};
struct Sqr {
  MGD_DEVICE float operator()(float x) const { return x * x; }
};
struct Sqrt {
  MGD_DEVICE float operator()(float x) const { return fast_sqrt(x); }
};
struct Silu {
  MGD_DEVICE float operator()(float x) const { return fast_div(x, 1.0f + fast_exp(-x)); }
};
struct Relu {
  MGD_DEVICE float operator()(float x) const { return x > 0.0f ? x : 0.0f; }
};
struct Gelu {
  MGD_DEVICE float operator()(float x) const { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
};
}  // namespace op

}  // namespace mgd
