/// \file tma.h
/// Tile loads by Hopper's tensor memory accelerator (TMA; sm_90): one thread asks the copy
/// engine for a whole tile (a box of a row-major tensor described by a tensor map), which writes
/// it to shared memory densely, row-major, zero-filling what lies outside the tensor, and counts
/// the bytes it delivers against a transaction barrier (mbarrier) in shared memory. The threads
/// that read the tile wait on that barrier's phase; no thread moves the data.
///
/// A barrier goes through phases: it completes a phase when the expected arrivals happened and
/// every byte announced with them (expect_tx) landed, and then starts the next. A loop that
/// refills a stage every S iterations waits, in iteration it, for phase it / S of the stage's
/// barrier: parity (it / S) % 2.
///
/// A tensor map may swizzle what it writes (span 32, 64 or 128 bytes): the 16-byte chunks of each
/// row are permuted by address, chunk bits 4.. XOR row bits 7.. of the shared address, which is
/// the layout the warpgroup tensor cores read in place (wgmma_rules.h). Its rows (the box's inner
/// extent) are at most the span, and the box starts where a pattern does (8 · span bytes).
///
/// Tensor maps are built on the host (make_tensor_map, through the driver's
/// cuTensorMapEncodeTiled, found via the runtime so nothing links libcuda) and passed to the
/// kernel as __grid_constant__ parameters. Under the host emulation a tensor map is a plain
/// struct, and a copy lands only when a thread waits for its barrier, so a kernel reading a tile
/// before its wait reads the poison shared memory starts with.
#pragma once

#include <cstring>
#include <initializer_list>

#include "mugraph_device/dims.h"

#if defined(__CUDACC__)
#include <cudaTypedefs.h>
#endif

namespace mgd {

/// mugraph_run's status for a tensor map the driver refused: kTmaErrorBase + CUresult.
inline constexpr int kTmaErrorBase = 20000;
/// The most dims and the largest box extent a tensor map takes.
inline constexpr int kTmaMaxRank = 5;
inline constexpr int64_t kTmaMaxBox = 256;

#if defined(__CUDACC__)
using TensorMap = CUtensorMap;
#else
using TensorMap = emu::TensorMap;
#endif

/// Describes the row-major tensor at base (dims, outermost first) in boxes of extents `box`,
/// written to shared memory swizzled with span `swizzle` (0: dense): cudaSuccess, or
/// kTmaErrorBase + the driver's error. @pre base 16-byte aligned, every row (dims[rank-1] ·
/// sizeof(T)) and every box row (box[rank-1] · sizeof(T)) a multiple of 16 bytes, box extents at
/// most 256, rank at most 5; a box row at most `swizzle` bytes.
template <typename T>
inline int make_tensor_map(TensorMap* map, const T* base, std::initializer_list<int64_t> dims,
                           std::initializer_list<int64_t> box, int64_t swizzle = 0) {
  const int rank = static_cast<int>(dims.size());
  if (rank < 1 || rank > kTmaMaxRank || box.size() != dims.size()) return kTmaErrorBase + 1;
  if ((swizzle != 0 && swizzle != 32 && swizzle != 64 && swizzle != 128) ||
      (swizzle != 0 && box.begin()[rank - 1] * static_cast<int64_t>(sizeof(T)) > swizzle))
    return kTmaErrorBase + 1;
  // The driver lists dims innermost first; strides in bytes, for dims 1 and up.
  uint64_t global_dim[kTmaMaxRank], global_stride[kTmaMaxRank];
  uint32_t box_dim[kTmaMaxRank];
  uint64_t stride = sizeof(T);
  for (int i = 0; i < rank; ++i) {
    global_dim[i] = static_cast<uint64_t>(dims.begin()[rank - 1 - i]);
    box_dim[i] = static_cast<uint32_t>(box.begin()[rank - 1 - i]);
    if (i > 0) global_stride[i - 1] = stride;
    stride *= global_dim[i];
  }
#if defined(__CUDACC__)
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  if (encode == nullptr) return kTmaErrorBase + CUDA_ERROR_NOT_FOUND;
  const uint32_t element_stride[kTmaMaxRank] = {1, 1, 1, 1, 1};
  const CUtensorMapDataType type = sizeof(T) == 4                ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                   : std::is_same_v<T, bfloat16> ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                                 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const CUtensorMapSwizzle swizzle_mode = swizzle == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                          : swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                          : swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                          : CU_TENSOR_MAP_SWIZZLE_NONE;
  const CUresult r = encode(map, type, static_cast<cuuint32_t>(rank), const_cast<T*>(base), global_dim, global_stride,
                            box_dim, element_stride, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle_mode,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? 0 : kTmaErrorBase + static_cast<int>(r);
#else
  // The driver's checks that matter for the emulation.
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0 || box_dim[0] * sizeof(T) % 16 != 0) return kTmaErrorBase + 1;
  for (int i = 0; i < rank; ++i)
    if (box_dim[i] == 0 || box_dim[i] > kTmaMaxBox || (i > 0 && global_stride[i - 1] % 16 != 0))
      return kTmaErrorBase + 1;
  *map = emu::TensorMap{};
  map->base = base;
  map->rank = rank;
  map->element_bytes = static_cast<int>(sizeof(T));
  map->swizzle = static_cast<int>(swizzle);
  for (int i = 0; i < rank; ++i) {
    map->dims[i] = static_cast<int64_t>(global_dim[i]);
    map->box[i] = box_dim[i];
    map->strides[i] = i == 0 ? static_cast<int64_t>(sizeof(T)) : static_cast<int64_t>(global_stride[i - 1]);
  }
  return 0;
#endif
}

/// Sets up the barrier at bar (8 bytes of shared memory) to complete a phase on `arrivals`
/// arrivals. One thread calls it; mbarrier_init_fence and a block barrier publish it.
MGD_DEVICE void mbarrier_init(uint64_t* bar, unsigned arrivals) {
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(bar))),
               "r"(arrivals)
               : "memory");
#else
  (void)bar, (void)arrivals;
  __trap();  // TMA loads are only generated for sm_90a
#endif
#else
  emu::mbarrier_init(emu::shared_address(bar), arrivals);
#endif
}

/// Makes initialized barriers visible to the copy engine (before the block barrier after init).
MGD_DEVICE void mbarrier_init_fence() {
#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

/// Arrives at bar, announcing `bytes` more to land in the current phase.
MGD_DEVICE void mbarrier_arrive_expect_tx(uint64_t* bar, unsigned bytes) {
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                   static_cast<unsigned>(__cvta_generic_to_shared(bar))),
               "r"(bytes)
               : "memory");
#else
  (void)bar, (void)bytes;
  __trap();
#endif
#else
  emu::mbarrier_arrive_expect_tx(emu::shared_address(bar), bytes);
#endif
}

/// Waits until the phase of bar with parity `parity` has completed.
MGD_DEVICE void mbarrier_wait(uint64_t* bar, unsigned parity) {
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  unsigned done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(at), "r"(parity)
        : "memory");
  } while (!done);
#else
  (void)bar, (void)parity;
  __trap();
#endif
#else
  emu::mbarrier_wait(emu::shared_address(bar), parity);
#endif
}

/// Asks the copy engine for the box of `map` at element coordinates `at` (outermost first, as
/// the tensor's dims) into dst, its bytes counted against bar. One thread issues it.
/// @pre dst 128-byte aligned
template <int Rank>
MGD_DEVICE void tma_load(void* dst, const TensorMap* map, const int32_t (&at)[Rank], uint64_t* bar) {
  static_assert(Rank >= 1 && Rank <= kTmaMaxRank, "tensor maps have 1 to 5 dims");
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  const uint64_t m = reinterpret_cast<uint64_t>(map);
  // The instruction takes coordinates innermost first.
  if constexpr (Rank == 1) {
    asm volatile(
        "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2}], [%3];\n" ::
            "r"(d),
        "l"(m), "r"(at[0]), "r"(b)
        : "memory");
  } else if constexpr (Rank == 2) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
        "[%4];\n" ::"r"(d),
        "l"(m), "r"(at[1]), "r"(at[0]), "r"(b)
        : "memory");
  } else if constexpr (Rank == 3) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
        "[%5];\n" ::"r"(d),
        "l"(m), "r"(at[2]), "r"(at[1]), "r"(at[0]), "r"(b)
        : "memory");
  } else if constexpr (Rank == 4) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
        "%5}], [%6];\n" ::"r"(d),
        "l"(m), "r"(at[3]), "r"(at[2]), "r"(at[1]), "r"(at[0]), "r"(b)
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
        "%5, %6}], [%7];\n" ::"r"(d),
        "l"(m), "r"(at[4]), "r"(at[3]), "r"(at[2]), "r"(at[1]), "r"(at[0]), "r"(b)
        : "memory");
  }
#else
  (void)dst, (void)map, (void)at, (void)bar;
  __trap();
#endif
#else
  int64_t c[kTmaMaxRank] = {};
  for (int i = 0; i < Rank; ++i) c[i] = at[Rank - 1 - i];
  emu::tma_load(dst, *map, c, emu::shared_address(bar));
#endif
}

/// Asks for a tile as Panels boxes of `map` side by side along the innermost dim, each
/// PanelWidth elements wide, written one after another from dst, PanelBytes apart: a swizzled
/// tile whose rows are longer than the swizzle span (wgmma_rules.h). One thread issues it.
template <int Rank, int Panels, int64_t PanelWidth, int64_t PanelBytes>
MGD_DEVICE void tma_load_panels(void* dst, const TensorMap* map, const int32_t (&at)[Rank], uint64_t* bar) {
  MGD_UNROLL
  for (int p = 0; p < Panels; ++p) {
    int32_t c[Rank];
    for (int d = 0; d < Rank; ++d) c[d] = at[d];
    c[Rank - 1] += static_cast<int32_t>(p * PanelWidth);
    tma_load<Rank>(static_cast<unsigned char*>(dst) + p * PanelBytes, map, c, bar);
  }
}

}  // namespace mgd
