/// \file copy_async.h
/// Asynchronous tile loads, global → shared, 16 bytes per instruction (cp.async.cg on sm_80 and
/// later: the data bypasses registers and L1). A thread's copies are committed in groups
/// (async_commit) and waited for oldest first (async_wait<N> leaves the N newest groups in
/// flight; async_wait_all waits for every copy, committed or not); a barrier after the wait
/// publishes the tiles to the other threads. That is what pipelines a loop: the loads of
/// iteration i + 1 are in flight while iteration i computes.
///
/// The host emulation performs a thread's copies only when it waits for them, so a kernel that
/// reads a tile too early reads the poison the emulation fills shared memory with.
#pragma once

#include <cstring>
#include <utility>

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
  std::memset(dst, 0xCD, 16);  // poison until the wait (emu::tma_load says why)
  emu::state()->async[thread_rank()].open.push_back({dst, src});
#endif
}

#if !defined(__CUDACC__)
namespace emu {
/// Performs the calling thread's oldest committed groups until at most `keep` remain.
inline void land_async_groups(size_t keep) {
  state()->async[thread_rank()].land(keep, [](const AsyncCopy& c) { std::memcpy(c.dst, c.src, 16); });
}
}  // namespace emu
#endif

/// Closes the group of this thread's copies issued since the last commit (possibly empty).
MGD_DEVICE void async_commit() {
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
#else
  emu::state()->async[thread_rank()].commit();
#endif
}

/// Waits until at most the N most recently committed groups of this thread's copies are in flight.
template <int N>
MGD_DEVICE void async_wait() {
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
#else
  emu::land_async_groups(N);
#endif
}

/// Waits until this thread's asynchronous copies have landed, committed or not.
MGD_DEVICE void async_wait_all() {
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
#else
  async_commit();
  emu::land_async_groups(0);
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
