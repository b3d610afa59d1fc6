/// \file subexpr.h
/// The subexpression oracle that prunes the search (paper §4.3, DESIGN.md §5): whether
/// A_eq ∪ A_sub ⊨ subexpr(E, T) for an abstract expression E of a μGraph prefix and the
/// expression T of a program output. The procedure works on normal forms (normal_form.h); its
/// argument is in docs/absexpr.md ("The subexpression relation over normal forms").
///
/// Answers are three-valued. `no` is exact: E is not a subexpression of T under the axioms, so a
/// prefix computing E can be pruned. `yes` is exact. `undecided` means a limit was reached or a
/// factorisation with a multi-term cofactor inside a denominator or square root would have to be
/// found; is_subexpression() treats it as yes, so pruning never removes a needed prefix.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "mugraph/absexpr.h"
#include "mugraph/normal_form.h"

namespace mugraph {

enum class SubexprAnswer : uint8_t { no, yes, undecided };

/// "no", "yes", "undecided".
std::string_view subexpr_answer_name(SubexprAnswer a);

/// Counters of an oracle, for benchmarks and the search's report.
struct SubexprStats {
  int64_t queries = 0;     ///< decide() calls
  int64_t cache_hits = 0;  ///< answered from the (E, T) cache
  int64_t no = 0, yes = 0, undecided = 0;
  int64_t nanoseconds = 0;  ///< time spent in decide()
};

/// Decides subexpr(E, T) with a cache per (E, T) normal-form pair. Thread-safe: queries are
/// serialised by one mutex (the cache makes repeated queries cheap; sharding is the upgrade path).
class SubexprOracle {
 public:
  /// The oracle reads terms of `exprs` and computes normal forms in `nfs` (both outlive it).
  SubexprOracle(const ExprPool& exprs, NormalFormPool& nfs);

  /// Whether E is a subexpression of T under A_eq ∪ A_sub (three-valued, see the file comment).
  SubexprAnswer decide(ExprId e, ExprId target);

  /// decide() != no: the prefix computing e may lead to the program and must be kept.
  bool is_subexpression(ExprId e, ExprId target) { return decide(e, target) != SubexprAnswer::no; }

  SubexprStats stats() const;

 private:
  struct Search;
  const ExprPool& exprs_;
  NormalFormPool& nfs_;
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, SubexprAnswer> cache_;  // by (NF of E, NF of T)
  SubexprStats stats_;
};

}  // namespace mugraph
