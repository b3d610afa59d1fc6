/// \file emulate.h
/// A host emulation of the CUDA execution model, enough for the device library and the code
/// mugraph generates: a grid of blocks, each block's threads run as cooperative fibers
/// (ucontext) that switch only at barriers (block and warp), dynamic shared memory per block
/// (poisoned at the start of every block), asynchronous copies that land only when waited for
/// (their destinations poisoned from the issue on),
/// and the element types. Blocks run one after another, threads in rank order between
/// barriers, so a run is deterministic. Warp-level instructions the library uses (mma) are
/// emulated from their PTX definitions in the headers that use them.
///
/// Not a performance tool: it exists so that every generated kernel is checked against the CPU
/// interpreter in CI, where there is no GPU.
#pragma once

#include <ucontext.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#define MGD_DEVICE inline
#define MGD_HOST_DEVICE inline
#define MGD_GLOBAL
#define MGD_UNROLL
#define MGD_UNROLL_8
#define MGD_LAUNCH_BOUNDS(threads)
#define MGD_RESTRICT __restrict__
#define MGD_GRID_CONSTANT
#define MGD_DYNAMIC_SHARED(name) unsigned char* name = ::mgd::emu::dynamic_shared()
#define MGD_LAUNCH(kernel, grid, block, smem, stream, ...) \
  ::mgd::emu::launch(grid, block, smem, stream, [=] { kernel(__VA_ARGS__); })

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
using cudaStream_t = void*;
using cudaError_t = int;
constexpr cudaError_t cudaSuccess = 0;

namespace mgd {

/// IEEE binary16 (GCC and Clang provide _Float16 on x86-64 and AArch64; conversions round to
/// nearest even).
using half = _Float16;

/// bfloat16: the high half of an f32, rounded to nearest even.
struct bfloat16 {
  uint16_t bits = 0;
};

inline float to_float(float x) { return x; }
inline float to_float(half x) { return static_cast<float>(x); }
inline float to_float(bfloat16 x) {
  uint32_t u = static_cast<uint32_t>(x.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

template <typename T>
inline T from_float(float x);
template <>
inline float from_float<float>(float x) {
  return x;
}
template <>
inline half from_float<half>(float x) {
  return static_cast<half>(x);
}
template <>
inline bfloat16 from_float<bfloat16>(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if (std::isnan(x)) return bfloat16{static_cast<uint16_t>((u >> 16) | 0x40)};
  u += 0x7fff + ((u >> 16) & 1);
  return bfloat16{static_cast<uint16_t>(u >> 16)};
}

/// Two f16 values, as the f16x2 instructions take them (platform.h): each half computed in f32
/// and rounded once, which is what those instructions give bit for bit (elementwise.h).
struct half2 {
  half lo = 0, hi = 0;
};
inline half2 pack_half2(half lo, half hi) { return half2{lo, hi}; }
inline half low_half(half2 x) { return x.lo; }
inline half high_half(half2 x) { return x.hi; }
template <typename F>
inline half2 pairwise(half2 a, half2 b, F f) {
  return half2{from_float<half>(f(to_float(a.lo), to_float(b.lo))),
               from_float<half>(f(to_float(a.hi), to_float(b.hi)))};
}
inline half2 add2(half2 a, half2 b) {
  return pairwise(a, b, [](float x, float y) { return x + y; });
}
inline half2 sub2(half2 a, half2 b) {
  return pairwise(a, b, [](float x, float y) { return x - y; });
}
inline half2 mul2(half2 a, half2 b) {
  return pairwise(a, b, [](float x, float y) { return x * y; });
}

namespace emu {

/// Where a fiber stands: runnable, waiting at a block barrier, at a warp barrier (32
/// consecutive ranks), at a warpgroup barrier (128 consecutive ranks), or done.
enum class Wait : unsigned char { none, block, warp, warpgroup, done };

/// One warp's fragments of an emulated mma (two buffers, alternating per call, so that one warp
/// barrier per call suffices: a lane can only refill a buffer after every lane passed the next
/// call's barrier, i.e. finished reading it).
struct MmaStage {
  uint32_t a[2][32][4];
  uint32_t b[2][32][2];
  unsigned calls[32] = {};
  // ldmatrix: the row address each lane provides, alternating buffers likewise.
  const unsigned char* rows[2][32];
  unsigned ldsm_calls[32] = {};
  // shfl_xor: the value each lane offers, alternating buffers likewise.
  float shfl[2][32];
  unsigned shfl_calls[32] = {};
};

/// One thread's asynchronous operations of one kind, committed in groups and performed only
/// when the thread waits for them, oldest group first (cp.async and wgmma share these rules).
template <typename Item>
struct CommitGroups {
  std::vector<std::vector<Item>> committed;  // oldest group first
  std::vector<Item> open;                    // issued since the last commit

  /// Closes the group of the items issued since the last commit (possibly empty).
  void commit() {
    committed.push_back(std::move(open));
    open.clear();
  }
  /// Performs (f) the items of the oldest committed groups until at most `keep` remain.
  template <typename F>
  void land(size_t keep, F&& f) {
    while (committed.size() > keep) {
      for (const Item& item : committed.front()) f(item);
      committed.erase(committed.begin());
    }
  }
  /// Whether any item is issued and not yet performed.
  bool pending() const {
    bool any = !open.empty();
    for (const auto& group : committed) any = any || !group.empty();
    return any;
  }
};

/// A cp.async copy of 16 bytes: performed when its thread waits for it, so that a kernel
/// reading a tile before its wait reads poison.
struct AsyncCopy {
  void* dst;
  const void* src;
};
using AsyncCopies = CommitGroups<AsyncCopy>;

/// A thread's share of its warpgroup's wgmma.mma_async: added to the thread's accumulator
/// fragment when the thread waits for its group, so shared memory is read as late as the
/// hardware may read it.
struct WgmmaOp {
  void (*run)(const WgmmaOp&);  // computes the calling thread's fragment (wgmma.h)
  uint64_t desc_a, desc_b;
  float* d;
  /// A from registers (wgmma_async_register_a): the warpgroup's 64×16 A, row-major, as its
  /// threads held it when they issued the op; null when A is read through desc_a.
  std::shared_ptr<const std::vector<float>> a = nullptr;
};
using WgmmaOps = CommitGroups<WgmmaOp>;

/// A tensor map (tma.h): a row-major tensor in boxes, dims innermost first, strides in bytes.
struct TensorMap {
  const void* base = nullptr;
  int rank = 0;
  int element_bytes = 0;
  int swizzle = 0;  // span in bytes (32, 64, 128), or 0
  int64_t dims[5] = {}, strides[5] = {}, box[5] = {};
};

/// A transaction barrier (mbarrier) in shared memory, and the tensor copies counted against it,
/// which land when a thread waits for the barrier.
struct Mbarrier {
  struct Copy {
    void* dst;
    TensorMap map;
    int64_t at[5];  // innermost first
  };
  unsigned expected = 0, arrived = 0, phase = 0;
  int64_t tx = 0;  // bytes announced and not landed
  std::vector<Copy> in_flight;
};

/// The state of the block being run, and of the thread (fiber) running in it.
struct BlockState {
  dim3 grid, block, block_idx;
  std::vector<unsigned char> shared;
  ucontext_t scheduler;
  std::vector<ucontext_t> fibers;
  std::vector<std::unique_ptr<char[]>> stacks;
  std::vector<Wait> wait;
  std::vector<MmaStage> mma;                        // per warp
  std::vector<AsyncCopies> async;                   // per thread
  std::vector<WgmmaOps> wgmma;                      // per thread
  std::vector<std::array<uint32_t, 4>> register_a;  // per thread: A registers offered to a wgmma
  std::vector<uint64_t> register_a_calls;           // per thread: wgmma ops with A from registers issued
  // Per warpgroup: the A its threads' registers made for their call number `first`, built once.
  std::vector<std::pair<uint64_t, std::shared_ptr<const std::vector<float>>>> register_a_matrix;
  std::map<uint32_t, Mbarrier> mbarriers;  // by shared address
  unsigned current = 0;
  const std::function<void()>* body = nullptr;
};

inline BlockState*& state() {
  static thread_local BlockState* s = nullptr;
  return s;
}

inline unsigned char* dynamic_shared() { return state()->shared.data(); }

/// swapcontext returns twice; kept out of line so that the callers' locals are not at risk.
[[gnu::noinline]] inline void switch_context(ucontext_t* from, ucontext_t* to) { swapcontext(from, to); }

[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "mgd::emu: %s\n", what);
  std::abort();
}

/// The address of p in the block's shared window: its offset in the emulated shared memory.
inline uint32_t shared_address(const void* p) {
  const unsigned char* base = state()->shared.data();
  const auto* c = static_cast<const unsigned char*>(p);
  if (c < base || c >= base + state()->shared.size()) fail("a shared-memory address outside the block's shared memory");
  return static_cast<uint32_t>(c - base);
}

inline Mbarrier& mbarrier_at(uint32_t at) {
  auto it = state()->mbarriers.find(at);
  if (it == state()->mbarriers.end()) fail("an mbarrier used before mbarrier_init");
  return it->second;
}

inline void mbarrier_init(uint32_t at, unsigned arrivals) {
  Mbarrier& b = state()->mbarriers[at];
  if (!b.in_flight.empty()) fail("mbarrier_init on a barrier with tensor copies in flight");
  b = Mbarrier{};
  b.expected = arrivals;
}

/// Completes the barrier's phase once every arrival happened and every announced byte landed.
inline void mbarrier_try_complete(Mbarrier& b) {
  if (b.arrived == b.expected && b.tx == 0) {
    ++b.phase;
    b.arrived = 0;
  }
}

inline void mbarrier_arrive_expect_tx(uint32_t at, unsigned bytes) {
  Mbarrier& b = mbarrier_at(at);
  if (b.arrived == b.expected) fail("more arrivals at an mbarrier than it was initialized for");
  b.tx += bytes;
  ++b.arrived;
  mbarrier_try_complete(b);
}

/// Elements in one box of a tensor map.
inline int64_t box_elements(const TensorMap& m) {
  int64_t count = 1;
  for (int i = 0; i < m.rank; ++i) count *= m.box[i];
  return count;
}

/// The shared address where a swizzled tensor copy writes what lands densely at `at`: the
/// 16-byte chunk bits (4..) XOR the row bits (7..), log2(span / 16) bits of each (the CUDA
/// programming guide's TMA swizzle patterns; PTX's Swizzle<log2(span / 16), 4, 3>).
inline uint32_t tma_swizzled(uint32_t at, int span) {
  return span == 0 ? at : at ^ ((at >> 7) & static_cast<uint32_t>(span / 16 - 1)) << 4;
}

/// Performs a tensor copy: the box, innermost dim fastest, zeros outside the tensor; densely,
/// or permuted by the map's swizzle.
inline void land_tensor_copy(const Mbarrier::Copy& c) {
  const TensorMap& m = c.map;
  const int64_t count = box_elements(m);
  unsigned char* const window = state()->shared.data();
  const uint32_t start = shared_address(c.dst);
  for (int64_t e = 0; e < count; ++e) {
    int64_t rest = e, off = 0;
    bool inside = true;
    for (int i = 0; i < m.rank; ++i) {
      const int64_t coord = c.at[i] + rest % m.box[i];
      rest /= m.box[i];
      inside = inside && coord >= 0 && coord < m.dims[i];
      off += coord * m.strides[i];
    }
    unsigned char* to = window + tma_swizzled(start + static_cast<uint32_t>(e * m.element_bytes), m.swizzle);
    if (inside)
      std::memcpy(to, static_cast<const unsigned char*>(m.base) + off, static_cast<size_t>(m.element_bytes));
    else
      std::memset(to, 0, static_cast<size_t>(m.element_bytes));
  }
}

inline void tma_load(void* dst, const TensorMap& map, const int64_t (&at)[5], uint32_t bar) {
  if (shared_address(dst) % 128 != 0) fail("a tensor copy to shared memory not 128-byte aligned");
  if (map.swizzle != 0 && shared_address(dst) % (8 * static_cast<uint32_t>(map.swizzle)) != 0)
    fail("a swizzled tensor copy to shared memory that does not start where its pattern does");
  Mbarrier& b = mbarrier_at(bar);
  Mbarrier::Copy c{dst, map, {}};
  for (int i = 0; i < 5; ++i) c.at[i] = at[i];
  const int64_t bytes = box_elements(map) * map.element_bytes;
  if (shared_address(dst) + static_cast<size_t>(bytes) > state()->shared.size())
    fail("a tensor copy beyond the block's shared memory");
  // The copy engine may write the tile at any time until the wait: its bytes are poison until
  // then, so that reading them early, or still reading what they held before (a pipeline stage
  // refilled while a wgmma op issued before still reads it), gives wrong results.
  std::memset(dst, 0xCD, static_cast<size_t>(bytes));
  b.in_flight.push_back(c);
}

/// Lands the barrier's copies if the phase of parity `parity` is still open, then requires it done.
inline void mbarrier_wait(uint32_t at, unsigned parity) {
  Mbarrier& b = mbarrier_at(at);
  if ((b.phase & 1u) != (parity & 1u)) return;
  for (const Mbarrier::Copy& c : b.in_flight) {
    land_tensor_copy(c);
    b.tx -= box_elements(c.map) * c.map.element_bytes;
  }
  b.in_flight.clear();
  mbarrier_try_complete(b);
  if ((b.phase & 1u) == (parity & 1u))
    fail("an mbarrier wait that never completes (missing arrivals, or fewer bytes than announced)");
}

inline void fiber_main() {
  BlockState* s = state();
  (*s->body)();
  if (s->async[s->current].pending()) fail("a thread left the kernel with asynchronous copies it never waited for");
  if (s->wgmma[s->current].pending())
    fail("a thread left the kernel with asynchronous matrix multiplies it never waited for");
  s->wait[s->current] = Wait::done;
  switch_context(&s->fibers[s->current], &s->scheduler);
}

/// Every thread of the block reaches the barrier before any goes on: the fiber yields to the
/// scheduler, which runs the others up to the same point.
inline void barrier() {
  BlockState* s = state();
  s->wait[s->current] = Wait::block;
  switch_context(&s->fibers[s->current], &s->scheduler);
}

/// Every thread of the calling thread's warp (32 consecutive ranks) reaches it before any goes on.
inline void warp_barrier() {
  BlockState* s = state();
  s->wait[s->current] = Wait::warp;
  switch_context(&s->fibers[s->current], &s->scheduler);
}

/// Every thread of the calling thread's warpgroup (128 consecutive ranks) reaches it before any
/// goes on (a named barrier of 128 threads on the GPU).
inline void warpgroup_barrier() {
  BlockState* s = state();
  s->wait[s->current] = Wait::warpgroup;
  switch_context(&s->fibers[s->current], &s->scheduler);
}

/// Opens the barriers of kind `kind` over groups of `size` consecutive ranks where every thread
/// of the group that has not finished waits at one; whether any opened.
inline bool release_groups(BlockState& s, Wait kind, unsigned size, const char* divergent) {
  const unsigned n = static_cast<unsigned>(s.fibers.size());
  bool released = false;
  for (unsigned g = 0; g * size < n; ++g) {
    const unsigned end = std::min(n, g * size + size);
    bool any = false, all = true;
    for (unsigned t = g * size; t < end; ++t) {
      any = any || s.wait[t] == kind;
      all = all && (s.wait[t] == kind || s.wait[t] == Wait::done);
    }
    if (!any) continue;
    if (!all) fail(divergent);
    for (unsigned t = g * size; t < end; ++t)
      if (s.wait[t] == kind) s.wait[t] = Wait::none;
    released = true;
  }
  return released;
}

/// Runs the fibers of the current block until all are done, releasing barriers as they fill.
inline void run_fibers(BlockState& s) {
  const unsigned n = static_cast<unsigned>(s.fibers.size());
  while (true) {
    for (unsigned t = 0; t < n; ++t) {
      if (s.wait[t] != Wait::none) continue;
      s.current = t;
      switch_context(&s.scheduler, &s.fibers[t]);
    }
    // Warp and warpgroup barriers open when every thread of the group that has not finished
    // waits at them.
    const bool warps = release_groups(
        s, Wait::warp, 32, "a warp's lanes wait at different barriers (a warp-level op under divergent control flow)");
    const bool warpgroups = release_groups(s, Wait::warpgroup, 128,
                                           "a warpgroup's threads wait at different barriers (a warpgroup-level op "
                                           "under divergent control flow)");
    if (warps || warpgroups) continue;
    unsigned done = 0, at_block = 0;
    for (unsigned t = 0; t < n; ++t) {
      done += s.wait[t] == Wait::done;
      at_block += s.wait[t] == Wait::block;
    }
    if (done == n) return;
    if (done != 0) fail("threads left the kernel while others wait at a barrier");
    if (at_block != n) fail("deadlock: threads wait at different barriers");
    for (unsigned t = 0; t < n; ++t) s.wait[t] = Wait::none;
  }
}

constexpr size_t kStackBytes = size_t{256} << 10;

/// A fiber that runs fiber_main on stack (getcontext returns twice: out of line, as above).
[[gnu::noinline]] inline void make_fiber(ucontext_t* fiber, char* stack) {
  getcontext(fiber);
  fiber->uc_stack.ss_sp = stack;
  fiber->uc_stack.ss_size = kStackBytes;
  fiber->uc_link = nullptr;
  makecontext(fiber, fiber_main, 0);
}

/// Runs body as kernel<<<grid, block, smem>>>: every block, every thread. A thread that leaves
/// the kernel while others wait at a barrier, or a deadlock, is a bug in the kernel (CUDA leaves
/// it undefined); here it aborts with a message.
inline void launch(dim3 grid, dim3 block, size_t smem, cudaStream_t, const std::function<void()>& body) {
  const unsigned n = block.x * block.y * block.z;
  BlockState s;
  s.grid = grid;
  s.block = block;
  s.body = &body;
  s.fibers.resize(n);
  s.mma.resize((n + 31) / 32);
  s.async.resize(n);
  s.wgmma.resize(n);
  s.register_a.resize(n);
  s.register_a_calls.assign(n, 0);
  s.register_a_matrix.assign((n + 127) / 128, {});
  for (unsigned t = 0; t < n; ++t) s.stacks.emplace_back(new char[kStackBytes]);
  BlockState* saved = state();
  state() = &s;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        s.block_idx = dim3(bx, by, bz);
        s.shared.assign(smem, 0xCD);  // poisoned: a kernel must not read what it did not write
        s.wait.assign(n, Wait::none);
        for (MmaStage& m : s.mma) {
          std::fill(std::begin(m.calls), std::end(m.calls), 0u);
          std::fill(std::begin(m.ldsm_calls), std::end(m.ldsm_calls), 0u);
          std::fill(std::begin(m.shfl_calls), std::end(m.shfl_calls), 0u);
        }
        for (AsyncCopies& q : s.async) q = AsyncCopies{};
        for (WgmmaOps& q : s.wgmma) q = WgmmaOps{};
        s.mbarriers.clear();
        for (unsigned t = 0; t < n; ++t) make_fiber(&s.fibers[t], s.stacks[t].get());
        run_fibers(s);
        for (const auto& [at, bar] : s.mbarriers)
          if (!bar.in_flight.empty()) fail("a block ended with tensor copies nobody waited for");
      }
  state() = saved;
}

inline dim3 thread_index() {
  BlockState* s = state();
  unsigned t = s->current;
  return dim3(t % s->block.x, (t / s->block.x) % s->block.y, t / (s->block.x * s->block.y));
}

}  // namespace emu

template <typename Kernel>
inline cudaError_t allow_dynamic_shared(Kernel*, int64_t) {
  return cudaSuccess;
}

inline void sync_block() { emu::barrier(); }
inline unsigned thread_rank() { return emu::state()->current; }
inline unsigned block_threads() {
  const dim3& b = emu::state()->block;
  return b.x * b.y * b.z;
}

}  // namespace mgd

#define threadIdx (::mgd::emu::thread_index())
#define blockIdx (::mgd::emu::state()->block_idx)
#define blockDim (::mgd::emu::state()->block)
#define gridDim (::mgd::emu::state()->grid)
#define __syncthreads() ::mgd::sync_block()

// The few runtime calls the benchmark harness makes, on host memory. Events record wall-clock
// time (the emulation's times say nothing about a GPU).
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulation error"; }
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
struct cudaDeviceProp {
  char name[256];
  int l2CacheSize;
};
inline cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  std::snprintf(p->name, sizeof p->name, "host emulation");
  p->l2CacheSize = 0;
  return cudaSuccess;
}
inline cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = std::malloc(bytes == 0 ? 1 : bytes);
  return *p ? cudaSuccess : 2;
}
inline cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  std::memcpy(dst, src, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  std::memset(p, value, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
using cudaEvent_t = std::chrono::steady_clock::time_point*;
inline cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = new std::chrono::steady_clock::time_point();
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t = nullptr) {
  *e = std::chrono::steady_clock::now();
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  *ms = std::chrono::duration<float, std::milli>(*b - *a).count();
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
