/// \file tile.h
/// Cooperative tile ops, the building blocks generated kernels fill in. Each is called by every
/// thread of a scope — Block (the threads of one block, on shared-memory tiles) or Grid (every
/// thread of the launch, on device memory, for pre-defined kernels) — and each thread takes the
/// elements e = first, first + step, ... of the result (its row-major linear index). Results are
/// written and operands read through strides (0 broadcasts an operand's dim), so a tile may be
/// laid out with padded rows or transposed (the layout pass, layout_choice.h). A scope-wide barrier between ops is
/// the caller's (Block: sync_block()).
///
/// These are the portable SIMT forms, used on every target and in the host emulation; the
/// tensor-core and asynchronous-copy forms specialize them on a GPU.
#pragma once

#include <cstring>

#include "mugraph_device/dims.h"
#include "mugraph_device/elementwise.h"
#include "mugraph_device/mma.h"
#include "mugraph_device/sum_rules.h"

namespace mgd {

/// The threads of one block, however many the launch gave it.
struct Block {
  static constexpr unsigned kThreads = 0;  // not known at compile time
  MGD_DEVICE static int64_t first() { return thread_rank(); }
  MGD_DEVICE static int64_t step() { return block_threads(); }
};

/// The N threads of one block, a count known at compile time. Generated kernels, whose launch
/// bounds fix their thread count, use this scope: each thread's share of a tile is then a
/// constant number of elements, so loops over them unroll with no bound checks, and a sum's
/// split among lanes is a constant too. The portable tile ops are bound by the instructions
/// they issue (docs/codegen.md), and these are the instructions a runtime count costs.
template <unsigned N>
struct Threads {
  static_assert(N >= 1 && N <= 1024, "a block has 1 to 1024 threads");
  static constexpr unsigned kThreads = N;
  MGD_DEVICE static int64_t first() { return thread_rank(); }
  MGD_DEVICE static int64_t step() { return N; }
};

/// Whether Scope is the threads of one block (Block or Threads<N>), not the Grid.
template <typename Scope>
inline constexpr bool kBlockScope = std::is_same_v<Scope, Block>;
template <unsigned N>
inline constexpr bool kBlockScope<Threads<N>> = true;

/// Every thread of the launch (blocks in x, y, z order).
struct Grid {
  static constexpr unsigned kThreads = 0;
  MGD_DEVICE static int64_t first() {
    const int64_t block = blockIdx.x + int64_t{gridDim.x} * (blockIdx.y + int64_t{gridDim.y} * blockIdx.z);
    return block * block_threads() + thread_rank();
  }
  MGD_DEVICE static int64_t step() { return int64_t{gridDim.x} * gridDim.y * gridDim.z * block_threads(); }
};

/// f(e) for every element e of shape S, spread over the scope's threads.
template <typename Scope, typename S, typename F>
MGD_DEVICE void for_each(F&& f) {
  if constexpr (Scope::kThreads != 0 && S::numel < (int64_t{1} << 31)) {
    // A constant count: every thread takes `rounds` elements, the first `tail` threads one more.
    constexpr uint32_t n = Scope::kThreads, rounds = static_cast<uint32_t>(S::numel / n),
                       tail = static_cast<uint32_t>(S::numel % n);
#if !defined(__CUDACC__)  // the emulation checks what the launch bounds promise on a GPU
    if (block_threads() != n) emu::fail("mgd::Threads<N> used in a block of another thread count");
#endif
    const uint32_t t = thread_rank();
    if constexpr (rounds != 0) {
      MGD_UNROLL_8
      for (uint32_t r = 0; r < rounds; ++r) f(static_cast<int64_t>(t + r * n));
    }
    if constexpr (tail != 0)
      if (t < tail) f(static_cast<int64_t>(t + rounds * n));
  } else if constexpr (S::numel < (int64_t{1} << 31)) {  // 32-bit counting (e + step stays below 2^32)
    const uint32_t step = static_cast<uint32_t>(Scope::step());
    for (uint32_t e = static_cast<uint32_t>(Scope::first()); e < static_cast<uint32_t>(S::numel); e += step)
      f(static_cast<int64_t>(e));
  } else {
    for (int64_t e = Scope::first(); e < S::numel; e += Scope::step()) f(e);
  }
}

/// Eight consecutive 16-bit elements, moved as one 16-byte access.
template <typename T>
struct alignas(16) Vec8 {
  T v[8];
};

/// Whether element-wise ops over shape S may take 8 elements of a row at a time through strides
/// St: the last dim a multiple of 8, and the operand contiguous along it (stride 1) with every
/// other stride a multiple of 8, so that each group of 8 starts 16-byte aligned when the tile
/// does; or (Broadcast) constant along it (stride 0), one element for all 8. A Swizzled tile
/// qualifies too: its panels are whole 16-byte chunks wide, and the swizzle moves chunks whole.
template <typename S, typename St, bool Broadcast = true>
MGD_HOST_DEVICE constexpr bool vector_rows_ok() {
  if constexpr (kIsSwizzled<St>) {
    return St::panel_width % 8 == 0;
  } else {
    // One return, at the end: nvcc warns of unreachable code after a constant early return.
    constexpr int last = S::rank - 1;
    bool rows_of_8 = true;
    for (int d = 0; d < last; ++d) rows_of_8 = rows_of_8 && St::get(d) % 8 == 0;
    const bool broadcast = Broadcast && St::get(last) == 0;
    return S::get(last) % 8 == 0 && (broadcast || (St::get(last) == 1 && rows_of_8));
  }
}

template <typename T>
inline constexpr bool k16Bit = sizeof(T) == 2;

/// Whether an operand read through strides St is one element for a whole row (stride 0 along the
/// last dim of S); never a Swizzled tile.
template <typename S, typename St>
MGD_HOST_DEVICE constexpr bool splat_rows() {
  if constexpr (kIsSwizzled<St>)
    return false;
  else
    return St::get(S::rank - 1) == 0;
}

/// Whether p is 16-byte aligned, as 16-byte accesses need: tiles are, by the memory plan; checked,
/// since callers may pass any pointer.
MGD_DEVICE bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

/// Whether p may be read or written 8 elements at a time through strides St: 16-byte aligned, or
/// read one element for 8 (stride 0 along the last dim).
template <typename S, typename St>
MGD_DEVICE bool vector_base_ok(const void* p) {
  return splat_rows<S, St>() || aligned16(p);
}

/// The 8 elements at p (16-byte aligned) or, with Broadcast stride, p[0] 8 times.
template <bool Splat, typename T>
MGD_DEVICE Vec8<T> load8(const T* p) {
  Vec8<T> x;
  if constexpr (Splat) {
    MGD_UNROLL
    for (int i = 0; i < 8; ++i) x.v[i] = p[0];
  } else {
#if defined(__CUDACC__)
    x = *reinterpret_cast<const Vec8<T>*>(p);
#else
    std::memcpy(static_cast<void*>(&x), static_cast<const void*>(p), sizeof(x));  // bytes of 16-bit values
#endif
  }
  return x;
}

template <typename T>
MGD_DEVICE void store8(T* p, const Vec8<T>& x) {
#if defined(__CUDACC__)
  *reinterpret_cast<Vec8<T>*>(p) = x;
#else
  std::memcpy(static_cast<void*>(p), static_cast<const void*>(&x), sizeof(x));
#endif
}

/// f applied to the 8 elements of x (and of z): on f16 pairs (half2) where the elements are f16
/// and f takes pairs (elementwise.h: the same bits in a quarter of the instructions), else
/// each element through f32.
template <typename TO, typename F, typename TI>
MGD_DEVICE Vec8<TO> map8(const F& f, const Vec8<TI>& x) {
  Vec8<TO> y;
  if constexpr (std::is_same_v<TO, half> && std::is_same_v<TI, half> && kHalf2Unary<F>) {
    MGD_UNROLL
    for (int i = 0; i < 8; i += 2) {
      const half2 r = f(pack_half2(x.v[i], x.v[i + 1]));
      y.v[i] = low_half(r);
      y.v[i + 1] = high_half(r);
    }
  } else {
    MGD_UNROLL
    for (int i = 0; i < 8; ++i) y.v[i] = from_float<TO>(f(to_float(x.v[i])));
  }
  return y;
}
template <typename TO, typename F, typename TA, typename TB>
MGD_DEVICE Vec8<TO> map8(const F& f, const Vec8<TA>& x, const Vec8<TB>& z) {
  Vec8<TO> y;
  if constexpr (std::is_same_v<TO, half> && std::is_same_v<TA, half> && std::is_same_v<TB, half> && kHalf2Binary<F>) {
    MGD_UNROLL
    for (int i = 0; i < 8; i += 2) {
      const half2 r = f(pack_half2(x.v[i], x.v[i + 1]), pack_half2(z.v[i], z.v[i + 1]));
      y.v[i] = low_half(r);
      y.v[i + 1] = high_half(r);
    }
  } else {
    MGD_UNROLL
    for (int i = 0; i < 8; ++i) y.v[i] = from_float<TO>(f(to_float(x.v[i]), to_float(z.v[i])));
  }
  return y;
}

/// g(e) for every eighth element e of shape S (the first of each group of 8 along the last dim).
template <typename Scope, typename S, typename G>
MGD_DEVICE void for_each_8(G&& g) {
  for_each<Scope, Dims<S::numel / 8>>([&](int64_t v) { g(v * 8); });
}

/// dst (strides DstSt) = src (strides SrcSt), both of shape S, converting element types.
template <typename Scope, typename S, typename DstSt, typename SrcSt, typename TD, typename TS>
MGD_DEVICE void copy(TD* MGD_RESTRICT dst, const TS* MGD_RESTRICT src) {
  if constexpr (std::is_same_v<TD, TS> && k16Bit<TD> && vector_rows_ok<S, DstSt, false>() &&
                vector_rows_ok<S, SrcSt, false>()) {
    if (vector_base_ok<S, DstSt>(dst) && vector_base_ok<S, SrcSt>(src)) {
      for_each_8<Scope, S>(
          [&](int64_t e) { store8(dst + offset<S, DstSt>(e), load8<false>(src + offset<S, SrcSt>(e))); });
      return;
    }
  }
  for_each<Scope, S>([&](int64_t e) { dst[offset<S, DstSt>(e)] = convert<TD>(src[offset<S, SrcSt>(e)]); });
}

/// out = f(in), both of shape S, out written through strides OutSt, in read through InSt.
/// 16-bit tiles laid out along their rows go 8 elements at a time (vector_rows_ok).
template <typename Scope, typename S, typename OutSt, typename InSt, typename F, typename TO, typename TI>
MGD_DEVICE void unary(TO* MGD_RESTRICT out, const TI* MGD_RESTRICT in) {
  F f;
  if constexpr (k16Bit<TO> && k16Bit<TI> && vector_rows_ok<S, OutSt, false>() && vector_rows_ok<S, InSt>()) {
    if (vector_base_ok<S, OutSt>(out) && vector_base_ok<S, InSt>(in)) {
      for_each_8<Scope, S>([&](int64_t e) {
        const Vec8<TI> x = load8<splat_rows<S, InSt>()>(in + offset<S, InSt>(e));
        store8(out + offset<S, OutSt>(e), map8<TO>(f, x));
      });
      return;
    }
  }
  for_each<Scope, S>(
      [&](int64_t e) { out[offset<S, OutSt>(e)] = from_float<TO>(f(to_float(in[offset<S, InSt>(e)]))); });
}

/// out = f(a, b) of shape S, out written through strides OutSt, a and b read through ASt and BSt
/// (NumPy broadcasting: stride 0 on the dims an operand does not have). 16-bit tiles laid out
/// along their rows go 8 elements at a time (vector_rows_ok).
template <typename Scope, typename S, typename OutSt, typename ASt, typename BSt, typename F, typename TO, typename TA,
          typename TB>
MGD_DEVICE void binary(TO* out, const TA* a, const TB* b) {
  F f;
  if constexpr (k16Bit<TO> && k16Bit<TA> && k16Bit<TB> && vector_rows_ok<S, OutSt, false>() &&
                vector_rows_ok<S, ASt>() && vector_rows_ok<S, BSt>()) {
    if (vector_base_ok<S, OutSt>(out) && vector_base_ok<S, ASt>(a) && vector_base_ok<S, BSt>(b)) {
      for_each_8<Scope, S>([&](int64_t e) {
        const Vec8<TA> x = load8<splat_rows<S, ASt>()>(a + offset<S, ASt>(e));
        const Vec8<TB> z = load8<splat_rows<S, BSt>()>(b + offset<S, BSt>(e));
        store8(out + offset<S, OutSt>(e), map8<TO>(f, x, z));
      });
      return;
    }
  }
  for_each<Scope, S>([&](int64_t e) {
    out[offset<S, OutSt>(e)] = from_float<TO>(f(to_float(a[offset<S, ASt>(e)]), to_float(b[offset<S, BSt>(e)])));
  });
}

/// out = f(a, c) (ScalarLeft false) or f(c, a) (true) with a constant c.
template <typename Scope, typename S, typename OutSt, typename ASt, typename F, bool ScalarLeft, typename TO,
          typename TA>
MGD_DEVICE void binary_scalar(TO* MGD_RESTRICT out, const TA* MGD_RESTRICT a, float c) {
  F f;
  for_each<Scope, S>([&](int64_t e) {
    const float x = to_float(a[offset<S, ASt>(e)]);
    out[offset<S, OutSt>(e)] = from_float<TO>(ScalarLeft ? f(c, x) : f(x, c));
  });
}

/// What a sum applies to each element it reads: nothing (ReadAsIs), or an element-wise op F
/// folded into it (ReadThrough: F's result rounded to TM, as the tile F's op would have
/// written holds it), so that RMSNorm's squares are summed without being stored.
struct ReadAsIs {
  MGD_DEVICE float operator()(float x) const { return x; }
};
template <typename F, typename TM>
struct ReadThrough {
  MGD_DEVICE float operator()(float x) const { return to_float(from_float<TM>(F{}(x))); }
  /// The same on an f16 pair (elementwise.h: the same bits), where the tile is f16 and F takes pairs.
  static constexpr bool kPairs = std::is_same_v<TM, half> && kHalf2Unary<F>;
  MGD_DEVICE half2 operator()(half2 x) const { return F{}(x); }
};

/// Whether Read folds in an op that works on f16 pairs.
template <typename Read>
inline constexpr bool kReadsPairs = false;
template <typename F, typename TM>
inline constexpr bool kReadsPairs<ReadThrough<F, TM>> = ReadThrough<F, TM>::kPairs;

/// Whether every group of a sum into OutS over an input with strides InSt starts a multiple of 8
/// elements from the input's start (sum_reads_vectors' `starts_aligned`, given an aligned tile):
/// each dim but Dim has one coordinate or a stride that is a multiple of 8. (Dim's own part of
/// a start, a multiple of Group, is the rule's to check.)
template <typename OutS, typename InSt, int Dim>
MGD_HOST_DEVICE constexpr bool group_starts_in_eights() {
  bool ok = true;
  for (int d = 0; d < OutS::rank; ++d) ok = ok && (d == Dim || OutS::get(d) == 1 || InSt::get(d) % 8 == 0);
  return ok;
}

/// A lane's part of a split sum read 8 elements at a time: Read of the elements of `Chunks`
/// chunks of 8 at p, p + 8 · Lanes, ..., summed in f32. Eight partial sums, one per position in
/// a chunk, keep the additions independent (one warp per scheduler runs these, so a single
/// chain of dependent adds would set the pace); f16 pairs where Read folds in an op that takes
/// them.
template <int64_t Chunks, int64_t Lanes, typename Read, typename TI>
MGD_DEVICE float sum_chunks(const TI* p) {
  const Read read;
  float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  MGD_UNROLL_8
  for (int64_t c = 0; c < Chunks; ++c) {
    const Vec8<TI> x = load8<false>(p + c * 8 * Lanes);
    if constexpr (std::is_same_v<TI, half> && kReadsPairs<Read>) {
      MGD_UNROLL
      for (int i = 0; i < 8; i += 2) {
        const half2 r = read(pack_half2(x.v[i], x.v[i + 1]));
        part[i] += to_float(low_half(r));
        part[i + 1] += to_float(high_half(r));
      }
    } else {
      MGD_UNROLL
      for (int i = 0; i < 8; ++i) part[i] += read(to_float(x.v[i]));
    }
  }
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}

/// The split form of sum (Block scope, whole warps): Lanes (sum_lanes) consecutive lanes share an
/// output, lane l adding the group's elements l, l + Lanes, ... (or, where sum_reads_vectors
/// allows, its chunks of 8 elements l, l + Lanes, ...); the partial sums meet by
/// butterfly shuffles within the lanes' aligned slice of the warp. Every thread takes part in
/// every shuffle (rounds are the same for the whole block), as __shfl_xor_sync requires. Lanes
/// is a constant, so the shuffles unroll; with a Threads<N> scope the rounds are constant too.
template <typename Scope, typename OutS, typename OutSt, typename InSt, int Dim, int64_t Group, int64_t Lanes,
          typename Read, typename TO, typename TI>
MGD_DEVICE void sum_split(TO* MGD_RESTRICT out, const TI* MGD_RESTRICT in) {
  const Read read;
  static_assert(Lanes >= 2 && Lanes <= 32 && (Lanes & (Lanes - 1)) == 0, "a power of two of lanes within a warp");
  const int64_t threads = Scope::kThreads != 0 ? int64_t{Scope::kThreads} : int64_t{block_threads()};
  const int64_t per_round = threads / Lanes, t = thread_rank(), lane = t % Lanes;
  constexpr int64_t stride = InSt::get(Dim);
  constexpr bool kVectors =
      k16Bit<TI> && sum_reads_vectors(Lanes, Group, sizeof(TI), stride, group_starts_in_eights<OutS, InSt, Dim>());
  const bool vectors = kVectors && aligned16(in);
  for (int64_t first = 0; first < OutS::numel; first += per_round) {
    const int64_t e = first + t / Lanes;
    float acc = 0.0f;
    if (e < OutS::numel) {
      const TI* group = in + offset<OutS, InSt>(e) + coord<OutS>(e, Dim) * (Group - 1) * stride;
      bool summed = false;
      if constexpr (kVectors) {
        if (vectors) {
          acc = sum_chunks<Group / (8 * Lanes), Lanes, Read>(group + lane * 8);
          summed = true;
        }
      }
      if (!summed) {
        group += lane * stride;
        MGD_UNROLL_8
        for (int64_t i = 0; i < Group / Lanes; ++i) acc += read(to_float(group[i * Lanes * stride]));
        if constexpr (Group % Lanes != 0)
          if (lane < Group % Lanes) acc += read(to_float(group[Group / Lanes * Lanes * stride]));
      }
    }
    MGD_UNROLL
    for (int m = Lanes / 2; m >= 1; m /= 2) acc += shfl_xor(acc, static_cast<unsigned>(m));
    if (e < OutS::numel && lane == 0) out[offset<OutS, OutSt>(e)] = from_float<TO>(acc);
  }
}

/// sum(dim = Dim, to): out has shape OutS (written through strides OutSt); out element e sums the
/// Group = extent / to input elements along Dim that fold into it. InSt are the input's strides;
/// element e of the output starts at offset<OutS, InSt>(e) with its Dim coordinate scaled by Group.
/// Read is applied to each element read (ReadThrough: an op folded into the sum).
template <typename Scope, typename OutS, typename OutSt, typename InSt, int Dim, int64_t Group,
          typename Read = ReadAsIs, typename TO, typename TI>
MGD_DEVICE void sum(TO* MGD_RESTRICT out, const TI* MGD_RESTRICT in) {
  // Few outputs with long groups (RMSNorm's row sums: 2 outputs of 1024 elements for 128
  // threads) would leave most threads idle while a few add a thousand numbers one after another:
  // there, lanes of a warp split each group and combine their sums by shuffles.
  // The split is block_sum_lanes's rule (sum_rules.h), which the layout pass models.
  if constexpr (Scope::kThreads != 0 && Group >= 2 * kSumMinPerLane) {
    constexpr int64_t lanes = block_sum_lanes(OutS::numel, Scope::kThreads, Group);
    if constexpr (lanes > 1) {
      sum_split<Scope, OutS, OutSt, InSt, Dim, Group, lanes, Read>(out, in);
      return;
    }
  } else if constexpr (std::is_same_v<Scope, Block> && Group >= 2 * kSumMinPerLane) {
    switch (block_sum_lanes(OutS::numel, block_threads(), Group)) {
      case 2:
        return sum_split<Scope, OutS, OutSt, InSt, Dim, Group, 2, Read>(out, in);
      case 4:
        return sum_split<Scope, OutS, OutSt, InSt, Dim, Group, 4, Read>(out, in);
      case 8:
        return sum_split<Scope, OutS, OutSt, InSt, Dim, Group, 8, Read>(out, in);
      case 16:
        return sum_split<Scope, OutS, OutSt, InSt, Dim, Group, 16, Read>(out, in);
      case 32:
        return sum_split<Scope, OutS, OutSt, InSt, Dim, Group, 32, Read>(out, in);
      default:
        break;  // one thread per output
    }
  }
  for_each<Scope, OutS>([&](int64_t e) {
    const TI* group = in + offset<OutS, InSt>(e) + coord<OutS>(e, Dim) * (Group - 1) * InSt::get(Dim);
    const Read read;
    float acc = 0.0f;
    MGD_UNROLL_8
    for (int64_t g = 0; g < Group; ++g) acc += read(to_float(group[g * InSt::get(Dim)]));
    out[offset<OutS, OutSt>(e)] = from_float<TO>(acc);
  });
}

/// Batched matmul: out (shape OutS = [batch..., M, N], written through strides OutSt) = Σ_k
/// a[.., m, k] · b[.., k, n], f32 accumulation. ASt gives, per output dim, A's stride (batch
/// dims, 0 where A broadcasts; its row stride for M; 0 for N), AK its stride along k; BSt and BK
/// likewise for B (0 for M, its column stride for N).
template <typename Scope, typename OutS, typename OutSt, typename ASt, int64_t AK, typename BSt, int64_t BK, int64_t K,
          typename TO, typename TA, typename TB>
MGD_DEVICE void matmul(TO* MGD_RESTRICT out, const TA* MGD_RESTRICT a, const TB* MGD_RESTRICT b) {
  // Tiles of f16 or bf16 operands go to the tensor cores (mma.h) when the block is whole warps.
  if constexpr (kBlockScope<Scope> && kTensorCoreOperands<TA, TB>) {
    if (Scope::kThreads != 0 ? Scope::kThreads % 32 == 0 : block_threads() % 32 == 0) {
      matmul_tc<OutS, OutSt, ASt, AK, BSt, BK, K>(out, a, b);
      return;
    }
  }
  for_each<Scope, OutS>([&](int64_t e) {
    const TA* pa = a + offset<OutS, ASt>(e);
    const TB* pb = b + offset<OutS, BSt>(e);
    float acc = 0.0f;
    for (int64_t k = 0; k < K; ++k) acc += to_float(pa[k * AK]) * to_float(pb[k * BK]);
    out[offset<OutS, OutSt>(e)] = from_float<TO>(acc);
  });
}

/// repeat(dim = Dim, times): out (shape OutS, strides OutSt) element e reads the input element
/// whose Dim coordinate is e's modulo Ext (the input's extent along Dim); InSt are the input's
/// strides.
template <typename Scope, typename OutS, typename OutSt, typename InSt, int Dim, int64_t Ext, typename TO, typename TI>
MGD_DEVICE void repeat(TO* MGD_RESTRICT out, const TI* MGD_RESTRICT in) {
  for_each<Scope, OutS>([&](int64_t e) {
    const int64_t c = coord<OutS>(e, Dim);
    const int64_t off = offset<OutS, InSt>(e) - c * InSt::get(Dim) + (c % Ext) * InSt::get(Dim);
    out[offset<OutS, OutSt>(e)] = convert<TO>(in[off]);
  });
}

/// A summing for-loop accumulator: acc (f32, dense, shape S) = in (read through strides InSt) in
/// the first iteration, acc + in after. Each thread touches the same elements in every
/// iteration, so no barrier is needed between the iterations' calls beyond the one that makes
/// `in` ready.
template <typename Scope, typename S, typename InSt, typename T>
MGD_DEVICE void accumulate(float* MGD_RESTRICT acc, const T* MGD_RESTRICT in, bool first) {
  for_each<Scope, S>([&](int64_t e) {
    const float x = to_float(in[offset<S, InSt>(e)]);
    acc[e] = first ? x : acc[e] + x;
  });
}

}  // namespace mgd
