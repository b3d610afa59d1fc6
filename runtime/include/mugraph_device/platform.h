/// \file platform.h
/// What the device library needs from the platform: CUDA when compiled by nvcc, or the host
/// emulation of the CUDA execution model (emulate.h) when compiled by a C++ compiler, so that
/// generated kernels run, and are tested, on machines without a GPU.
///
/// Element types: mgd::half (IEEE binary16), mgd::bfloat16, float. Tiles hold elements in their
/// type; arithmetic is in f32 (to_float / from_float), as in the CPU interpreter, except f16
/// add, sub and mul on pairs of elements (mgd::half2), which give the same bits (elementwise.h).
#pragma once

#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define MGD_DEVICE __device__ __forceinline__
#define MGD_HOST_DEVICE __host__ __device__ __forceinline__
#define MGD_GLOBAL __global__
#define MGD_RESTRICT __restrict__
#define MGD_GRID_CONSTANT __grid_constant__
#if defined(__CUDA_ARCH__)
#define MGD_UNROLL _Pragma("unroll")
/// Unrolled 8 times: loops with a constant count too long to unroll whole.
#define MGD_UNROLL_8 _Pragma("unroll 8")
#else
#define MGD_UNROLL
#define MGD_UNROLL_8
#endif
/// The block's dynamic shared memory, 128-byte aligned.
#define MGD_DYNAMIC_SHARED(name) extern __shared__ __align__(128) unsigned char name[]
#define MGD_LAUNCH_BOUNDS(threads) __launch_bounds__(threads)
/// Launches kernel on (grid, block) with smem bytes of dynamic shared memory on stream.
#define MGD_LAUNCH(kernel, grid, block, smem, stream, ...) kernel<<<grid, block, smem, stream>>>(__VA_ARGS__)

namespace mgd {
using half = __half;
using bfloat16 = __nv_bfloat16;

MGD_DEVICE float to_float(float x) { return x; }
MGD_DEVICE float to_float(half x) { return __half2float(x); }
MGD_DEVICE float to_float(bfloat16 x) { return __bfloat162float(x); }

template <typename T>
MGD_DEVICE T from_float(float x);
template <>
MGD_DEVICE float from_float<float>(float x) {
  return x;
}
template <>
MGD_DEVICE half from_float<half>(float x) {
  return __float2half_rn(x);
}
template <>
MGD_DEVICE bfloat16 from_float<bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

/// Two f16 values in one 32-bit register, for the f16x2 instructions (HADD2, HMUL2), which do
/// two elements' work in one instruction and without conversions to f32 and back.
using half2 = __half2;
MGD_DEVICE half2 pack_half2(half lo, half hi) { return __halves2half2(lo, hi); }
MGD_DEVICE half low_half(half2 x) { return __low2half(x); }
MGD_DEVICE half high_half(half2 x) { return __high2half(x); }
// The _rn forms: rounded to nearest even, and never contracted into a fused multiply-add, whose
// single rounding would differ from the f32 path's.
MGD_DEVICE half2 add2(half2 a, half2 b) { return __hadd2_rn(a, b); }
MGD_DEVICE half2 sub2(half2 a, half2 b) { return __hsub2_rn(a, b); }
MGD_DEVICE half2 mul2(half2 a, half2 b) { return __hmul2_rn(a, b); }

/// Lets kernel use more than the default 48 KiB of dynamic shared memory.
template <typename Kernel>
inline cudaError_t allow_dynamic_shared(Kernel* kernel, int64_t bytes) {
  if (bytes <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

MGD_DEVICE void sync_block() { __syncthreads(); }
MGD_DEVICE unsigned thread_rank() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
MGD_DEVICE unsigned block_threads() { return blockDim.x * blockDim.y * blockDim.z; }
}  // namespace mgd

#else  // host emulation

#include "mugraph_device/emulate.h"

#endif
