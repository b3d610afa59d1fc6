/// \file normal_form.h
/// The normal form of abstract expressions that decides A_eq (docs/absexpr.md, "A_eq is decided by
/// a normal form"; DESIGN.md §5): two terms are equal under the axioms of the paper's Table 2 iff
/// their normal forms are equal, and normal forms are hash-consed, so that is an id comparison.
///
/// Shape. A normal form (NF) is a multiset of monomials k · (n1 · … · nr) · exp(E) · sqrt(S) / D:
/// - k ≥ 1, the product of the sizes of the sums around the monomial (a formal integer);
/// - n1..nr, a multiset of atoms: var, constant, relu/gelu/silu(NF), concat(NF, NF);
/// - at most one exp atom (its argument E is an NF; exp(x)·exp(y) merge into exp(x + y)) and at most
///   one sqrt atom (its argument S is an NF; sqrt(x)·sqrt(y) merge into sqrt(x·y));
/// - an optional denominator D, itself an NF (denominators multiply and re-expand).
/// A monomial of a term always has at least one factor (an atom, exp or sqrt); the monomial with no
/// factor is the reciprocal 1/D that div multiplies by, and it never survives that product.
///
/// Limits. Expansion can grow exponentially; an NF with more than max_monomials monomials, or a
/// coefficient beyond 64 bits, stops the computation with a reason instead of an answer. Never
/// silently wrong. Limits are monotone: every operation builds its result's NF around its
/// operands' (sizes add or multiply, coefficients multiply, inner forms are kept or multiplied;
/// the axioms cancel nothing), so no NF inside or on the way to a term's NF is larger than the
/// largest inside the term's own, and whether a term hits a limit depends on its NF alone. Hence a
/// term past a limit is A_eq-equal to no term within the limits, and is no subexpression of one
/// (docs/absexpr.md, "Limits").
///
/// Pools. A NormalFormPool serves one ExprPool (it caches ExprId → NF; using it with a second
/// ExprPool is an internal error). Atoms name their leaves by text (var name, constant value), so
/// NF ids themselves do not depend on ExprPool ids. Thread-safe: one mutex held for the whole of
/// each call (normal_form computes under it; accessors copy out under it). Sharding is the upgrade
/// path if the search ever shows contention.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mugraph/absexpr.h"
#include "mugraph/expr_fingerprint.h"
#include "mugraph/types.h"

namespace mugraph {

struct NfTag {};
struct NfMonoTag {};
struct NfAtomTag {};
/// A normal form (a multiset of monomials) in its NormalFormPool.
using NfId = Id<NfTag>;
/// A monomial in its NormalFormPool.
using NfMonoId = Id<NfMonoTag>;
/// A numerator atom in its NormalFormPool.
using NfAtomId = Id<NfAtomTag>;

/// The kinds of numerator atoms (exp and sqrt are not atoms: a monomial holds them apart so that
/// they merge).
enum class NfAtomKind : uint8_t { var, constant, relu, gelu, silu, concat };

/// A numerator atom.
struct NfAtom {
  NfAtomKind kind = NfAtomKind::var;
  /// var: the input's name; constant: the value as ExprPool::str prints it ("c4096").
  std::string text;
  /// relu, gelu, silu: one NF; concat: the two parts in order.
  std::vector<NfId> args;
  friend bool operator==(const NfAtom&, const NfAtom&) = default;
};

/// A monomial k · (factors) · exp(exp_arg) · sqrt(sqrt_arg) / den.
struct NfMonomial {
  uint64_t coeff = 1;
  /// The numerator atoms, sorted by id (a multiset: repeats allowed).
  std::vector<NfAtomId> factors;
  /// Invalid when the monomial has no exp, sqrt or denominator respectively.
  NfId exp_arg, sqrt_arg, den;
  friend bool operator==(const NfMonomial&, const NfMonomial&) = default;
};

/// Why a normal form was not computed.
enum class NfStop : uint8_t {
  none,                  ///< computed
  too_many_monomials,    ///< some NF on the way exceeded NormalFormLimits::max_monomials
  coefficient_overflow,  ///< a coefficient exceeded 64 bits
};

/// "none", "too_many_monomials", "coefficient_overflow".
std::string_view nf_stop_name(NfStop stop);

/// Limits of a NormalFormPool.
struct NormalFormLimits {
  /// The most monomials any NF (the result or any NF inside it or on the way) may have.
  int64_t max_monomials = 4096;
};

/// The outcome of normal_form: an id, or why there is none.
struct NfResult {
  NfId id;  ///< valid iff stop == NfStop::none
  NfStop stop = NfStop::none;
  bool ok() const { return stop == NfStop::none; }
};

/// Counters of a NormalFormPool.
struct NormalFormStats {
  int64_t forms = 0;      ///< distinct NFs
  int64_t monomials = 0;  ///< distinct monomials
  int64_t atoms = 0;      ///< distinct atoms
  int64_t cached = 0;     ///< terms whose NF (or stop reason) is cached
};

/// A hash-consing arena of normal forms, monomials and atoms, with the cache ExprId → NF. Not
/// copyable; thread-safe as described in the file comment.
class NormalFormPool {
 public:
  explicit NormalFormPool(NormalFormLimits limits = {});
  ~NormalFormPool();
  NormalFormPool(const NormalFormPool&) = delete;
  NormalFormPool& operator=(const NormalFormPool&) = delete;

  const NormalFormLimits& limits() const { return limits_; }

  /// The monomials of an NF, sorted by id (repeats allowed). @pre id is an NF of this pool
  std::vector<NfMonoId> monomials(NfId id) const;
  /// A monomial. @pre id is a monomial of this pool
  NfMonomial monomial(NfMonoId id) const;
  /// An atom. @pre id is an atom of this pool
  NfAtom atom(NfAtomId id) const;
  NormalFormStats stats() const;

  // Algebra for the subexpression oracle; each call takes the pool's lock. nullopt: a limit of
  // the pool was reached (the caller must not conclude anything from it).

  /// The id of a monomial (interned). A monomial without factors is allowed here: the oracle
  /// uses such "ratios" (a coefficient and/or a denominator) between monomials.
  NfMonoId intern(const NfMonomial& m);
  /// The product of two monomials.
  std::optional<NfMonoId> product(NfMonoId a, NfMonoId b);
  /// The NF whose monomials are `monos` (a multiset; sorted here).
  std::optional<NfId> form_of(std::vector<NfMonoId> monos);

  /// The NF as text, e.g. "4096*G*W*X/(sqrt(4096*X*X/(c4096)))": monomials joined by " + ",
  /// factors by "*", each list sorted by its text so that the output does not depend on ids.
  std::string str(NfId id) const;

  /// The fingerprints aeq_equal compares when both normal forms are past the limits (it has its
  /// own lock).
  ExprFingerprints& fingerprints() { return fingerprints_; }

 private:
  friend NfResult normal_form(ExprId e, const ExprPool& exprs, NormalFormPool& pool);
  struct Impl;
  NormalFormLimits limits_;
  mutable std::mutex mutex_;
  std::unique_ptr<Impl> impl_;
  ExprFingerprints fingerprints_;
};

/// The normal form of a term, computed bottom-up over the term's DAG (no recursion on term depth)
/// and cached per ExprId. @pre e is a term of `exprs`; `pool` is only ever used with `exprs`
NfResult normal_form(ExprId e, const ExprPool& exprs, NormalFormPool& pool);

/// Whether a and b are equal under A_eq: true or false (also when exactly one normal form hit a
/// limit: the two forms differ). When both did, false if their fingerprints differ
/// (expr_fingerprint.h), and otherwise nullopt: nothing is known.
std::optional<bool> aeq_equal(ExprId a, ExprId b, const ExprPool& exprs, NormalFormPool& pool);

}  // namespace mugraph
