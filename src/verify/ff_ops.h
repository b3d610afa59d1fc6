/// \file ff_ops.h
/// The computing ops of the finite-field interpreter (ff_interp.h) on strided views of residues,
/// shared by the kernel-level driver and the block-graph executor so that each op has one
/// implementation. Values are pairs of uint32 views (Z_p part, Z_q part) of the same shape and
/// strides; the tile slicing, strided loops and thread pool are the float interpreter's
/// (src/interp: view.h, strided_loop.h, thread_pool.h).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "ff_vector.h"
#include "mugraph/ff_interp.h"
#include "mugraph/ffield.h"
#include "mugraph/graph.h"
#include "thread_pool.h"
#include "view.h"

namespace mugraph::ff_detail {

using UView = interp::BasicView<const uint32_t>;
using MutUView = interp::BasicView<uint32_t>;

/// A value in Z_p × Z_q: two views with the same shape.
struct FFView {
  UView p, q;
  const Shape& shape() const { return p.shape; }
  FFView slice(int d, int64_t begin, int64_t extent) const {
    return {p.slice(d, begin, extent), q.slice(d, begin, extent)};
  }
};
struct FFMutView {
  MutUView p, q;
  const Shape& shape() const { return p.shape; }
  operator FFView() const { return {p, q}; }  // NOLINT(google-explicit-constructor)
  FFMutView slice(int d, int64_t begin, int64_t extent) const {
    return {p.slice(d, begin, extent), q.slice(d, begin, extent)};
  }
};

/// `n` zero residues, in a buffer given back by an earlier run where one fits (FFBufferReuse).
/// `zeroed` false: whatever the buffer held (for a caller that writes every element; a fresh
/// buffer is zero all the same).
std::vector<uint32_t> take_buffer(size_t n, bool zeroed = true);
/// Keeps `buffer` for a later take_buffer while an FFBufferReuse is alive (else frees it).
void give_buffer(std::vector<uint32_t>&& buffer);
/// give_buffer for both residue buffers of `t`.
inline void give_buffers(FFTensor& t) {
  give_buffer(std::move(t.p));
  give_buffer(std::move(t.q));
}

/// A dense view of a whole FFTensor.
inline FFView view_of(const FFTensor& t) {
  return {UView::dense(t.p.data(), t.shape), UView::dense(t.q.data(), t.shape)};
}
inline FFMutView mut_view_of(FFTensor& t) {
  return {MutUView::dense(t.p.data(), t.shape), MutUView::dense(t.q.data(), t.shape)};
}

/// ω^e mod p for e < q (exp's exponent is a Z_q residue): ω^(e mod 2^15) · ω^(2^15·(e >> 15)),
/// two table look-ups and one multiplication.
struct OmegaPow {
  static constexpr int kLowBits = 15;
  static constexpr uint64_t kLowMask = (uint64_t{1} << kLowBits) - 1;
  static_assert(ff::kQ <= uint64_t{1} << (2 * kLowBits - 1), "a Z_q residue splits into 15 + 14 bits");
  const uint32_t* low;   ///< ω^j, j < 2^15
  const uint32_t* high;  ///< ω^(2^15·j), j ≤ q >> 15
  uint64_t operator()(uint64_t e) const { return uint64_t{low[e & kLowMask]} * high[e >> kLowBits] % ff::kP; }
};

/// What a run shares across ops and threads: the test's context, tables derived from it, the
/// zero-divisor flag and the worker pool.
class FFState {
 public:
  FFState(const FFContext& ctx, interp::ThreadPool* pool);
  /// ω^e for the test's ω (OmegaPow). Its tables are made on the first call of the run, or taken
  /// from the runs before with the same ω (omega_powers). Thread-safe.
  OmegaPow omega_pow() const;
  /// The seed of the random function standing for op `kind` (hash_residues of the operand's Z_p
  /// residue: (value mod p, value mod q)). Depends on the test seed and the op kind only, so both
  /// graphs of a test apply the same function. Only the Z_p residue is hashed: the Z_q part of an
  /// exp-tainted operand is meaningless and may differ between equivalent graphs.
  uint64_t random_fn_seed(OpKind kind) const;
  /// The seed of the random function of FFContext::opaque_functions, of both residues of the
  /// operand (its key: xp << 32 | xq), so that two different operands give the same value only if
  /// they agree in Z_p and in Z_q.
  uint64_t random_pair_fn_seed(OpKind kind) const;

  const FFContext& ctx;
  interp::ThreadPool* pool;  ///< null: run serially
  std::atomic<bool> zero_divisor{false};

 private:
  /// ω^j and ω^(2^15·j).
  struct OmegaPowers {
    std::vector<uint32_t> low, high;
  };
  /// The powers of ω, shared by every run with that ω: the draws of a verification use one ω for
  /// the reference and each candidate, so they are made once per draw.
  static std::shared_ptr<const OmegaPowers> omega_powers(uint64_t omega);
  mutable std::once_flag powers_once_;
  mutable std::shared_ptr<const OmegaPowers> powers_;
};

/// The Z_p and Z_q residues of a binary op's constant (m·10^e exactly). A zero residue of a
/// divisor constant is reported as a zero divisor by eval_ff_op.
std::array<uint32_t, 2> scalar_residues(const Scalar& s);

/// Which parts of an op's result something reads: not the Z_q part of an exp-tainted result
/// (Taint::tensor), not the Z_p part of one only untainted exps read (Taint::exp_only).
struct PartsRead {
  bool p = true;
  bool q = true;
};

/// out = op(ins) for every computing op (element-wise, matmul, sum, repeat, reshape, concat), in
/// both fields, but for the parts of the result nobody reads (`read`): matmul, sum and the
/// binary ops (the costly ones) do not compute those and set them to 0. `tainted[k]`: whether
/// operand k is exp-tainted (exp and silu of a tainted value are second exps); a zero divisor
/// residue counts only in a field whose part of the quotient is read.
/// `scalar`: residues of the op's constant if attrs.has_scalar. out is dense with the op's
/// output shape. Sets state.zero_divisor (and leaves out unspecified) on a zero divisor. With
/// state.pool, large ops are split over the workers (results are exact, so the split does not
/// matter); `parallel` false keeps the op on the calling thread (inside blocks).
void eval_ff_op(const Op& op, const std::vector<FFView>& ins, const std::array<bool, 2>& tainted,
                const std::array<uint32_t, 2>& scalar, const FFMutView& out, FFState& state, bool parallel,
                PartsRead read);

/// dst = src in both fields (any strides). @pre same shape
void copy_ff(const FFView& src, const FFMutView& dst);
/// dst += src in both fields (for-loop sum accumulators). @pre same shape
void add_into_ff(const FFView& src, const FFMutView& dst);

/// Exp taint of every tensor of a graph of any level, and of what it passes out: kernel graph
/// (no params): inputs are untainted, `out` is per program output; block and thread graphs:
/// params by io_index, `out` per io_index of the savers. exp and silu taint their result.
struct Taint {
  std::vector<bool> tensor;
  std::vector<bool> out;
  /// Per tensor: read only by exps of untainted values (which read Z_q residues only) and not a
  /// graph output, so its Z_p part is never read (QK^T before a softmax's exp). Counts every op
  /// of g: a graph that grows later (a search prefix) must not use it.
  std::vector<bool> exp_only;
};
/// `exps_taint`: false under FFContext::opaque_functions, where exp and silu are random
/// functions of both residues: nothing is tainted, and every part is read.
Taint exp_taint(const Graph& g, const std::vector<bool>& params, bool exps_taint = true);

/// The worker count for `threads` (0: all hardware threads); UserError if out of range.
int resolve_threads(int threads);

/// Evaluates kernel-level op i of g: reads operands from `views`, allocates its results in
/// `store` and points `views` at them. graph_kernel ops run their block graphs block by block
/// on the pool. Returns false on a zero divisor. @pre g valid; taint = exp_taint(g, {}).tensor;
/// exp_only = exp_taint(g, {}).exp_only, or empty (every Z_p part is computed)
bool run_kernel_op(const Graph& g, size_t i, const std::vector<bool>& taint, const std::vector<bool>& exp_only,
                   std::vector<FFView>& views, std::vector<FFTensor>& store, FFState& state);

}  // namespace mugraph::ff_detail
