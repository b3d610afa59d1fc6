/// \file expr_fingerprint.h
/// Fingerprints of abstract expressions: a term evaluated at random points of an image of the
/// A_eq quotient (docs/absexpr.md, "Fingerprints past the limits"). Terms equal under the axioms
/// have equal fingerprints, so different fingerprints prove two terms different. Equal
/// fingerprints prove nothing. This is what aeq_equal falls back on when both normal forms are
/// past the pool's limits, where it had no answer at all.
///
/// The image. Each point evaluates a term in the two fields of the verifier (ffield.h: Z_p and
/// Z_q with p = 2q + 1) at once:
/// - var and constant: a random residue per name or per printed value (the normal form's atoms
///   are named the same way), in each field;
/// - add, mul, div: the field operations (a denominator that is zero at a point leaves the term
///   without a fingerprint);
/// - sum(k, x): k · x, which is what the normal form's coefficient k is;
/// - exp(x): ω^x in Z_p with x's value in Z_q, ω of order q, so exp(x)·exp(y) = exp(x + y);
///   the value of exp in Z_q is not defined, so an exp inside an exp's argument leaves the term
///   without one (programs of the Lax fragment have at most one exp on a path);
/// - sqrt(x): x^e for a random exponent e, so sqrt(x)·sqrt(y) = sqrt(x·y);
/// - relu, gelu, silu and concat: a random function of their arguments' values.
/// Every operation is a function of its operands' values and each axiom of the paper's Table 2
/// holds for it (AC, distributivity and the div re-associations in a field; sum past add, mul and
/// div as multiplication by k; the exp and sqrt merges above), so A_eq-equal terms, whose normal
/// forms are equal, evaluate equally. The image identifies more than the axioms (x + x = sum(2, x)
/// here), which only makes it blind to some differences.
///
/// Thread-safe: one mutex held for the whole of each call. Values are cached per ExprId; using
/// one ExprFingerprints with a second ExprPool is an internal error.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "mugraph/absexpr.h"

namespace mugraph {

/// Points a fingerprint evaluates at. Two differing terms whose images differ as polynomials agree
/// at one random point with probability at most their degree over q (about 2^29) — 1e-5 at
/// degree 5000 — and at both points with the square of it.
inline constexpr int kFingerprintPoints = 2;

/// A term's values in Z_p at each point.
using ExprFingerprint = std::array<uint32_t, kFingerprintPoints>;

/// The fingerprints of the terms of one ExprPool. Not copyable.
class ExprFingerprints {
 public:
  explicit ExprFingerprints(uint64_t seed = 0x6d75677261706831);
  ~ExprFingerprints();
  ExprFingerprints(const ExprFingerprints&) = delete;
  ExprFingerprints& operator=(const ExprFingerprints&) = delete;

  /// The fingerprint of a term, or nullopt where the image gives it no value (an exp inside an
  /// exp's argument, or a denominator that is zero at one of the points). Computed bottom-up over
  /// the term's DAG without recursion. @pre e is a term of `exprs`, and `exprs` is the pool every
  /// earlier call used
  std::optional<ExprFingerprint> of(ExprId e, const ExprPool& exprs);

 private:
  struct Impl;
  std::mutex mutex_;
  std::unique_ptr<Impl> impl_;
};

/// Whether two terms are proven not A_eq-equal by their fingerprints: both have one, and they
/// differ. False says nothing.
bool fingerprints_differ(ExprId a, ExprId b, const ExprPool& exprs, ExprFingerprints& prints);

}  // namespace mugraph
