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

/// Add, sub, mul and sqr also take f16 pairs (half2), computed by the f16x2 instructions. Their
/// results are the f32 path's bits: f32 (24-bit significand) holds at least 2 · 11 + 2 bits of
/// an f16 (11 bits), so rounding the exact result to f32 and then to f16 gives what rounding it
/// to f16 once does (double rounding is innocuous for +, −, × when p' ≥ 2p + 2; Figueroa, 1995),
/// and f16's range lies far inside f32's. bf16 (8 bits) fits the bound too, but shares f32's
/// range, where products overflow or become subnormal in f32 first: it stays on the f32 path.
namespace op {
struct Add {
  MGD_DEVICE float operator()(float a, float b) const { return a + b; }
  MGD_DEVICE half2 operator()(half2 a, half2 b) const { return add2(a, b); }
};
struct Sub {
  MGD_DEVICE float operator()(float a, float b) const { return a - b; }
  MGD_DEVICE half2 operator()(half2 a, half2 b) const { return sub2(a, b); }
};
struct Mul {
  MGD_DEVICE float operator()(float a, float b) const { return a * b; }
  MGD_DEVICE half2 operator()(half2 a, half2 b) const { return mul2(a, b); }
};
struct Div {
  MGD_DEVICE float operator()(float a, float b) const { return fast_div(a, b); }
};
struct Exp {
  MGD_DEVICE float operator()(float x) const { return fast_exp(x); }
};
struct Sqr {
  MGD_DEVICE float operator()(float x) const { return x * x; }
  MGD_DEVICE half2 operator()(half2 x) const { return mul2(x, x); }
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

/// Whether op F takes f16 pairs: a binary op (F{}(half2, half2)) or a unary one (F{}(half2)).
template <typename F, typename = void>
inline constexpr bool kHalf2Binary = false;
template <typename F>
inline constexpr bool kHalf2Binary<F, std::void_t<decltype(F{}(half2{}, half2{}))>> = true;
template <typename F, typename = void>
inline constexpr bool kHalf2Unary = false;
template <typename F>
inline constexpr bool kHalf2Unary<F, std::void_t<decltype(F{}(half2{}))>> = true;

}  // namespace mgd
