/// \file ff_interp.h
/// The finite-field interpreter: runs any valid μGraph (all three levels, the semantics of
/// DESIGN.md §1, exactly as the float interpreter) on values in Z_p × Z_q (ffield.h).
///
/// Op semantics (paper Table 3, extended):
/// - add, sub, mul, div: component-wise in Z_p and Z_q; a zero divisor voids the run (the
///   verifier then draws new inputs; precisely when, see div below).
/// - constants: the exact rational they spell, m·10^e, in each field.
/// - exp(x) = ω^(x_q) mod p in the p part. Its q part has no meaning (the exponent field is only
///   used inside exponents); it is set to 0. A tensor is "exp-tainted" if some path from an input
///   to it passes an exp (or silu); an exp-like op applied to a tainted value is a second exp on
///   that path and is evaluated as a non-Lax op (below).
/// - silu(x) = x / (1 + exp(−x)) with that exp, so silu verifies against its expansion.
/// - sqrt: ff::sqrt_pm in each field (deterministic; its square is ±x).
/// - sqr(x) = x·x; matmul and sum are sums of products in each field.
/// - relu, gelu and second exps: random functions of the operand's Z_p residue (its Z_q part may
///   be meaningless, see exp), drawn per test from FFContext::test_seed and the op kind, so both
///   graphs of a test apply the same function to the same operand.
/// - div: a zero divisor residue (or a constant divisor that is 0) voids the run
///   (FFRun::zero_divisor), in Z_p unless the quotient is read by untainted exps only, in Z_q
///   unless the quotient is exp-tainted (below).
/// - layout ops (repeat, reshape, concat), iterators, accumulators (sum or concat), savers and
///   thread graphs: exactly as the float interpreter, on residues.
/// - Parts nothing reads are not computed by matmul, sum and the binary ops, and are 0: the Z_q
///   part of an exp-tainted result, and the Z_p part of a result that only exps of untainted
///   values read (in attention, QK^T is computed in Z_q only and exp(QK^T)·V in Z_p only).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "mugraph/graph.h"

namespace mugraph {

namespace interp {
class ThreadPool;
}

/// A tensor of residues, row-major: p[i] < ff::kP, q[i] < ff::kQ.
struct FFTensor {
  Shape shape;
  std::vector<uint32_t> p, q;

  FFTensor() = default;
  explicit FFTensor(Shape s);
  int64_t numel() const { return shape.numel(); }
  friend bool operator==(const FFTensor&, const FFTensor&) = default;
};

/// What one random test fixes besides the inputs.
struct FFContext {
  uint64_t omega = 1;      ///< a q-th root of unity in Z_p
  uint64_t test_seed = 0;  ///< seeds the random functions standing for non-Lax ops
  /// exp, silu, relu, gelu and sqrt are all random functions of both residues of their operand,
  /// and nothing is exp-tainted. Graphs that agree in this mode compute the same formula in those
  /// functions, so they agree whatever the functions are (docs/verifier.md, "Functions as
  /// unknowns").
  bool opaque_functions = false;
};

/// The ops FFContext::opaque_functions makes random functions: every unary op but sqr (a product),
/// that is exp, sqrt, silu, relu and gelu.
inline bool is_opaque_function(OpKind kind) {
  return op_info(kind).category == OpCategory::unary && kind != OpKind::sqr;
}

/// The result of one finite-field run.
struct FFRun {
  std::vector<FFTensor> outputs;  ///< the graph's outputs in order (empty if zero_divisor)
  bool zero_divisor = false;      ///< some division had a zero divisor; the run is void
  /// Per output: whether a path from an input passes an exp-like op (its q part is meaningless).
  std::vector<bool> exp_tainted;
};

/// Kernel-op results shared by the runs of one test. Runs given the same FFOpCache must use the
/// same FFContext, and inputs of the same name must hold the same values in each (the verifier's
/// reference and candidates on one test's inputs). A run that meets a kernel op that an earlier
/// run computed on the same operands takes that result instead of computing it again: the
/// candidates of a search often share a kernel (a split attention's first kernel, a pre-defined
/// matmul). Ops match exactly: kind, attributes, body graph, where each operand came from
/// (recursively, down to the inputs' names), and which residues are read; a hash only finds
/// candidates for that comparison. Results beyond `max_bytes` are not kept. Not thread-safe.
class FFOpCache {
 public:
  static constexpr int64_t kDefaultMaxBytes = int64_t{1} << 30;
  explicit FFOpCache(int64_t max_bytes = kDefaultMaxBytes);
  ~FFOpCache();
  FFOpCache(const FFOpCache&) = delete;
  FFOpCache& operator=(const FFOpCache&) = delete;
  /// Kernel ops taken from the cache instead of computed.
  int64_t hits() const;
  /// Bytes of results kept.
  int64_t kept_bytes() const;
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

/// Runs a kernel graph (which must have passed validate()) on finite-field inputs, one per
/// `input` op in op order. Blocks run in parallel on `threads` workers (0: all cores); results do
/// not depend on the thread count, nor on `cache` (see FFOpCache).
FFRun run_ff(const Graph& kernel_graph, const std::vector<FFTensor>& inputs, const FFContext& ctx, int threads = 0,
             FFOpCache* cache = nullptr);

/// While one of these is alive, run_ff hands the buffers of its kernel-level results back when it
/// ends, and the next run takes them instead of new memory (at most 2 GiB are kept). A
/// verification runs the same graphs draw after draw; memory given back to the system is paged
/// in again on the next run, which cost a GQA reference run half its time (2026-11-28). All
/// kept buffers are freed when the last one ends. Thread-safe.
class FFBufferReuse {
 public:
  FFBufferReuse();
  ~FFBufferReuse();
  FFBufferReuse(const FFBufferReuse&) = delete;
  FFBufferReuse& operator=(const FFBufferReuse&) = delete;
};

/// Uniform inputs for every `input` op (p and q parts independent), from a seed. The values
/// depend on the seed alone, not on `threads` (0: all hardware threads), which only spreads the
/// drawing: at real shapes (the three [4096, 14336] weights of a Llama MLP) one draw is a third
/// of a billion residues.
std::vector<FFTensor> random_ff_inputs(const Graph& kernel_graph, uint64_t seed, int threads = 1);

/// A uniform q-th root of unity in Z_p from a seed.
uint64_t random_root_of_unity(uint64_t seed);

/// A 64-bit hash of a tensor's residues (cheap first comparison of outputs).
uint64_t hash_ff(const FFTensor& t);

/// Incremental evaluation for the search: remembers the values of every tensor of the last
/// kernel graph it evaluated; evaluating a graph that extends it (same first ops and tensors)
/// computes only the new ops. One evaluator per search thread (not thread-safe).
class FFPrefixEvaluator {
 public:
  /// inputs: one per `input` op of the graphs it will evaluate, in op order.
  FFPrefixEvaluator(std::vector<FFTensor> inputs, FFContext ctx, int threads = 1);
  ~FFPrefixEvaluator();
  FFPrefixEvaluator(FFPrefixEvaluator&&) noexcept;
  FFPrefixEvaluator& operator=(FFPrefixEvaluator&&) noexcept;
  /// Values of every tensor of `g` (indexed by tensor id), computing only ops not shared with
  /// the previously evaluated graph. Returns nullptr on a zero divisor.
  const std::vector<FFTensor>* evaluate(const Graph& g);
  /// Per tensor of the last evaluated graph: whether it is exp-tainted (its Z_q part is meaningless).
  const std::vector<bool>& exp_tainted() const { return tainted_; }
  /// Ops (input ops included) computed and reused so far.
  int64_t ops_computed() const { return computed_; }
  int64_t ops_reused() const { return reused_; }

 private:
  std::vector<FFTensor> inputs_;
  FFContext ctx_;
  std::unique_ptr<interp::ThreadPool> pool_;
  Graph last_;
  size_t valid_ops_ = 0;  // leading ops of last_ whose values are in values_
  std::vector<FFTensor> values_;
  std::vector<bool> tainted_;
  int64_t computed_ = 0, reused_ = 0;
};

}  // namespace mugraph
