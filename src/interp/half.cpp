// f16 / bf16 conversions: the public entry points; the work is in half.h.
#include "half.h"

#include "mugraph/interp.h"

namespace mugraph {

uint16_t float_to_half_bits(float f) { return interp::f32_to_f16(f); }
float half_bits_to_float(uint16_t h) { return interp::f16_to_f32(h); }
uint16_t float_to_bfloat16_bits(float f) { return interp::f32_to_bf16(f); }
float bfloat16_bits_to_float(uint16_t h) { return interp::bf16_to_f32(h); }
float round_to_dtype(float f, DType dtype) { return interp::round_to(f, dtype); }

}  // namespace mugraph
