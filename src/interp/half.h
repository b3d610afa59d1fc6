/// \file half.h
/// Inline f16 / bf16 conversions (round to nearest, ties to even), written out by hand so that
/// they do not depend on the compiler's or the CPU's half-precision support. The public
/// functions in mugraph/interp.h call these; the interpreter's inner loops use them directly.
#pragma once

#include <bit>
#include <cstdint>

#include "mugraph/types.h"

namespace mugraph::interp {

/// f32 → IEEE binary16 bits. NaN keeps its sign and the top 10 payload bits (a payload that
/// would become 0 is made quiet, so NaN never turns into inf); values ≥ 65520 in magnitude
/// become ±inf; values ≤ 2^-25 in magnitude become ±0.
inline uint16_t f32_to_f16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) {  // inf or NaN
    if (x == 0x7f800000u) return sign | 0x7c00u;
    uint32_t payload = (x >> 13) & 0x3ffu;
    if (payload == 0) payload = 0x200u;
    return static_cast<uint16_t>(sign | 0x7c00u | payload);
  }
  // 65520 is halfway between 65504 (the largest half, odd mantissa) and 65536: ties go to even = inf.
  if (x >= 0x477ff000u) return sign | 0x7c00u;
  if (x < 0x38800000u) {  // below 2^-14: a half subnormal (unit 2^-24) or zero
    uint32_t e = x >> 23;
    if (e < 102) return sign;                  // below 2^-25: rounds to zero
    uint32_t m = (x & 0x7fffffu) | 0x800000u;  // value = m · 2^(e − 150)
    uint32_t shift = 126 - e;                  // value / 2^-24 = m >> shift, 14 ≤ shift ≤ 24
    uint32_t q = m >> shift;
    uint32_t rest = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (q & 1u))) ++q;  // may carry into the smallest normal: correct
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t h = (x - 0x38000000u) >> 13;  // rebias the exponent (127 → 15), drop 13 mantissa bits
  uint32_t rest = x & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

/// IEEE binary16 bits → f32 (exact).
inline float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu;
  if (e == 0) {
    // Zero or subnormal: m · 2^-24, exact in f32.
    float v = static_cast<float>(m) * 0x1p-24f;
    return std::bit_cast<float>(std::bit_cast<uint32_t>(v) | sign);
  }
  if (e == 31) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
  return std::bit_cast<float>(sign | ((e + 112) << 23) | (m << 13));
}

/// f32 → bfloat16 bits: keep the top 16 bits, rounding the rest to nearest even; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    uint32_t h = x >> 16;
    if ((h & 0x7fu) == 0) h |= 0x40u;
    return static_cast<uint16_t>(h);
  }
  uint32_t h = x >> 16;
  uint32_t rest = x & 0xffffu;
  if (rest > 0x8000u || (rest == 0x8000u && (h & 1u))) ++h;  // overflow carries into inf: correct
  return static_cast<uint16_t>(h);
}

/// bfloat16 bits → f32 (exact).
inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

/// The nearest value representable in dtype.
inline float round_to(float f, DType dt) {
  switch (dt) {
    case DType::f16:
      return f16_to_f32(f32_to_f16(f));
    case DType::bf16:
      return bf16_to_f32(f32_to_bf16(f));
    case DType::f32:
      break;
  }
  return f;
}

/// Rounds n floats in place to dtype (nothing to do for f32).
inline void round_span(float* p, int64_t n, DType dt) {
  if (dt == DType::f16) {
    for (int64_t i = 0; i < n; ++i) p[i] = f16_to_f32(f32_to_f16(p[i]));
  } else if (dt == DType::bf16) {
    for (int64_t i = 0; i < n; ++i) p[i] = bf16_to_f32(f32_to_bf16(p[i]));
  }
}

}  // namespace mugraph::interp
