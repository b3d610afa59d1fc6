/// \file verify.h
/// Equivalence verification of μGraphs (DESIGN.md §5, paper §5): the Lax check, random tests over
/// finite fields with a stated error bound (Theorems 2 and 3), and a floating-point filter.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mugraph/graph.h"

namespace mugraph {

/// Whether a graph is in the Lax fragment, and the bounds Theorem 2 needs.
struct LaxReport {
  bool lax = true;
  /// If not Lax: which op on which path breaks it, e.g. "relu (op 4 of the kernel graph) is not
  /// multilinear" or "exp (block graph 0, op 7) is the second exp on the path X → exp → ... → exp".
  std::string violation;
  /// Most exp-like ops (exp, silu) on any input-to-output path.
  int max_exps_on_path = 0;
  /// Upper bound on the degree of the polynomials f, g, h of Equation 2 for the outputs.
  double degree = 0;
  /// Upper bound on the number of exponential terms k of Equation 2 (numerator or denominator).
  double exp_terms = 1;
  /// Whether the graph uses sqrt (verified as a deterministic function whose square is ±x; see
  /// docs/verifier.md for what that means for the guarantee).
  bool uses_sqrt = false;
};

/// The Lax check of a program or μGraph.
LaxReport check_lax(const Graph& kernel_graph);

/// Options of verify().
struct VerifyOptions {
  double delta = 1e-9;        ///< wanted bound on the probability of accepting non-equivalent graphs
  uint64_t seed = 0;          ///< seed of the tests; every verdict can be replayed from it
  int max_tests = 64;         ///< stop after this many tests even if delta is not reached
  int threads = 0;            ///< 0: all cores
  bool float_check = true;    ///< also run the floating-point filter
  /// First test with exp, silu, relu, gelu and sqrt as unknown functions where that bound helps
  /// (VerifyResult::opaque_functions); false: Theorem 2's tests only.
  bool unknown_functions = true;
  double float_tolerance = 1e-3;  ///< max relative error of the float filter (f32 run)
};

enum class Verdict : uint8_t {
  equivalent,      ///< every test agreed (and the float filter passed)
  not_equivalent,  ///< a test disagreed (certain), or the float filter failed
  incomparable,    ///< different input names/shapes or output counts/shapes
};

/// The outcome of verify().
struct VerifyResult {
  Verdict verdict = Verdict::incomparable;
  std::string reason;          ///< why not equivalent / incomparable (output, element, test)
  int tests_run = 0;           ///< finite-field tests completed
  int redraws = 0;             ///< tests redrawn because of a zero divisor
  double per_test_bound = 1;   ///< Theorem 2's bound on one test accepting non-equivalent graphs
  double bound = 1;            ///< bound reached: per_test_bound ^ tests_run
  bool guarantee = false;      ///< both graphs Lax without sqrt and bound ≤ delta: the bound is a real guarantee
  std::string guarantee_note;  ///< what weakens it, if anything
  /// The tests treated exp, silu, relu, gelu and sqrt as unknown functions (random functions of their
  /// operands), and the bound is for that model: the graphs compute the same formula in those
  /// functions, which holds for any functions in their place (docs/verifier.md, "Functions as
  /// unknowns"). Tried first for graphs that apply one, where Theorem 2 gives no guarantee
  /// (relu, gelu, sqrt) or a weaker bound (exp, silu).
  bool opaque_functions = false;
  uint64_t seed = 0;
  LaxReport reference_lax, candidate_lax;
  double float_max_rel_error = 0;  ///< of the float filter, if it ran
};

/// What verify() computed for a reference graph (random inputs and the reference's outputs,
/// per test seed), kept so that verifying many candidates against one reference with the same
/// options runs the reference once per test (the search verifies its candidates this way).
/// Bound to the first reference it sees; not thread-safe. The reference's outputs are kept for
/// every test; its inputs only while those kept total at most `kept_input_bytes` (beyond, each
/// candidate's test draws them again from the seed: at the paper's shapes one test's inputs are
/// hundreds of MB).
class ReferenceRuns {
 public:
  static constexpr int64_t kDefaultKeptInputBytes = int64_t{2} << 30;
  explicit ReferenceRuns(int64_t kept_input_bytes = kDefaultKeptInputBytes);
  ~ReferenceRuns();
  ReferenceRuns(const ReferenceRuns&) = delete;
  ReferenceRuns& operator=(const ReferenceRuns&) = delete;
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

/// Verifies that `candidate` computes the same function as `reference`. Both must have passed
/// validate(). Inputs are matched by name, outputs by position. Equivalent graphs always pass
/// the finite-field tests. `runs` (optional) caches the reference's side across calls.
VerifyResult verify(const Graph& reference, const Graph& candidate, const VerifyOptions& options = {},
                    ReferenceRuns* runs = nullptr);

/// verify() for several candidates against one reference: element i is exactly what
/// verify(reference, *candidates[i], options, runs) gives. It runs test by test rather than
/// candidate by candidate, so that one test's inputs are drawn once for all candidates and kernel
/// ops that candidates (or a candidate and the reference) share are computed once per test
/// (FFOpCache, ff_interp.h): the search's candidates often share a kernel. `stop` (optional) is
/// polled between tests; once it is set, verify_all returns an empty vector.
std::vector<VerifyResult> verify_all(const Graph& reference, const std::vector<const Graph*>& candidates,
                                     const VerifyOptions& options = {}, ReferenceRuns* runs = nullptr,
                                     const std::atomic<bool>* stop = nullptr);

/// A lower bound on the memory verifying a graph against `reference` takes: each finite-field
/// test draws the program's inputs at their full size and computes its outputs, 8 bytes an
/// element (a 32-bit residue in each of the two fields), whatever else the graphs' runs hold.
int64_t verification_bytes_lower_bound(const Graph& reference);

/// Why verifying against `reference` cannot fit in the memory this process may use
/// (verification_bytes_lower_bound beyond machine_usable_memory_bytes, host_memory.h), with both
/// figures; "" when it may fit or the machine's memory is unknown. verify_all throws it as a
/// UserError before the first test; the search, before it searches.
std::string verification_memory_refusal(const Graph& reference);

/// The floating-point filter alone: both graphs on the same standard-normal inputs (in f32),
/// max over outputs of max|a − b| / max|b|. `runs` (optional) keeps the reference's inputs and
/// outputs for the next candidate.
double float_max_relative_error(const Graph& reference, const Graph& candidate, uint64_t seed, int threads = 0,
                                ReferenceRuns* runs = nullptr);

}  // namespace mugraph
