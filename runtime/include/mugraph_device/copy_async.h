/// \file copy_async.h
/// Asynchronous tile loads, global → shared, 16 bytes per instruction (cp.async.cg on sm_80 and
/// later: the data bypasses registers and L1). A thread's loads complete at async_wait_all(),
/// which must come before the barrier that publishes the tiles. The host emulation copies at
/// once.
#pragma once

#include <cstring>

#include "mugraph_device/dims.h"

namespace mgd {

/// Copies 16 bytes from global memory at src to shared memory at dst, asynchronously.
/// @pre both 16-byte aligned
MGD_DEVICE void cp_async16(void* dst, const void* src) {
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src) : "memory");
#else
  *static_cast<uint4*>(dst) = *static_cast<const uint4*>(src);
#endif
#else
  std::memcpy(dst, src, 16);
#endif
}

/// Waits until this thread's asynchronous copies have landed.
MGD_DEVICE void async_wait_all() {
#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

/// A tile of shape S from src (strides SrcSt) into dst (strides DstSt), 16 bytes at a time.
/// @pre the innermost extent is a multiple of 16 bytes, both innermost strides are 1, and
/// every run of 16 bytes starts 16-byte aligned in both (the emitter checks this statically)
template <typename S, typename DstSt, typename SrcSt, typename T>
MGD_DEVICE void load_async(T* MGD_RESTRICT dst, const T* MGD_RESTRICT src) {
  constexpr int64_t V = 16 / static_cast<int64_t>(sizeof(T));
  static_assert(S::get(S::rank - 1) % V == 0, "rows of whole 16-byte vectors");
  static_assert(DstSt::get(S::rank - 1) == 1 && SrcSt::get(S::rank - 1) == 1, "contiguous rows");
  for (int64_t v = thread_rank(); v < S::numel / V; v += block_threads()) {
    const int64_t e = v * V;
    cp_async16(dst + offset<S, DstSt>(e), src + offset<S, SrcSt>(e));
  }
}

}  // namespace mgd
