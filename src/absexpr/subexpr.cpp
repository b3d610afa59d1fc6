// The subexpression oracle over normal forms (docs/absexpr.md, "The subexpression relation over
// normal forms").
//
// E ⊑ T holds iff E ≡ T or E ⊑ o for an operand o of some member of T's A_eq class. Over normal
// forms (multisets of monomials k·(factors)·exp(A)·sqrt(B)/D) that reduces to three checks:
//
// 1. E is one monomial e: some monomial t of T is divisible by e — t = g·e for a monomial "ratio"
//    g (a coefficient factor, a sub-multiset of the factors, a sub-multiset of the exp argument's
//    monomials, and exact quotients of the sqrt argument and the denominator). Every operand of a
//    class member of T is reached that way: add picks sub-multisets (a monomial of a part is a
//    monomial of T), mul/div/sum split a monomial into such factors, and divisibility is
//    transitive.
// 2. E has several monomials: some monomial ratio g has g·E ⊆ T as multisets. Sufficient: g·E is a
//    sub-sum of T, and E an operand of mul/div/sum around it. Necessary: if E lies in a factor F of
//    a sub-sum U = F·G of T, then any monomial g of G gives g·E ⊆ g·F ⊆ U ⊆ T; and g = t/e0 for the
//    monomial t = g·e0 of T, so trying t/e0 for every t finds it.
// 3. Otherwise E may lie inside an inner normal form of a monomial of T: an atom's argument
//    (relu, gelu, silu, concat), the exp argument, the sqrt argument or the denominator.
//
// concat is outside the axioms: a lone concat whose parts are all subexpressions of T is
// `undecided` (kept), because a matmul of concatenations can have T's expression (paper §8.1).
//
// The one place that is not decided exactly is the quotient of two normal forms with several
// monomials each where the quotient would have several monomials too (P = F·Q inside a sqrt
// argument or a denominator): that needs multivariate factorisation, and the answer is
// `undecided` (kept by the search). When T's normal form is within the pool's limits and E's is
// not, the answer is `no`: limits are monotone (normal_form.h), so every subterm of every term
// A_eq-equal to T is within them. When T's is past them, the answer is `undecided`.
#include "mugraph/subexpr.h"

#include <algorithm>
#include <optional>
#include <vector>

namespace mugraph {

std::string_view subexpr_answer_name(SubexprAnswer a) {
  switch (a) {
    case SubexprAnswer::no: return "no";
    case SubexprAnswer::yes: return "yes";
    case SubexprAnswer::undecided: return "undecided";
  }
  return "?";
}

namespace {

uint64_t pair_key(NfId a, NfId b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a.value)) << 32) | static_cast<uint32_t>(b.value);
}

/// Whether a monomial can stand alone as a term: it needs a factor (an atom, exp or sqrt); a bare
/// coefficient or denominator is only a ratio.
bool has_factor(const NfMonomial& m) { return !m.factors.empty() || m.exp_arg.valid() || m.sqrt_arg.valid(); }

template <typename T>
std::vector<T> distinct(std::vector<T> v) {
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

}  // namespace

struct SubexprOracle::Search {
  NormalFormPool& nfs;
  std::unordered_map<uint64_t, SubexprAnswer>& memo;

  /// g with g·e = t (status yes), or no, or undecided.
  struct Ratio {
    SubexprAnswer status = SubexprAnswer::no;
    NfMonomial g;
  };

  /// An exact quotient Q with P = F·Q and Q a term (every monomial has a factor); `equal` when
  /// P = F (the factor is all of it).
  struct Quotient {
    SubexprAnswer status = SubexprAnswer::no;
    bool equal = false;
    NfId q;
  };

  static Ratio no() { return Ratio{}; }
  static Ratio undecided() { return Ratio{SubexprAnswer::undecided, {}}; }

  /// Sets `part` of g from the parts of t and e that are NFs combined by product (sqrt, den).
  /// Returns false (with `r` set) when the ratio does not exist or is undecided.
  bool divide_product_part(NfId t_part, NfId e_part, NfId& g_part, Ratio& r) {
    if (!e_part.valid()) {
      g_part = t_part;
      return true;
    }
    if (!t_part.valid()) {
      r = no();
      return false;
    }
    Quotient q = quotient(t_part, e_part);
    if (q.status != SubexprAnswer::yes) {
      r = q.status == SubexprAnswer::undecided ? undecided() : no();
      return false;
    }
    g_part = q.equal ? NfId() : q.q;
    return true;
  }

  Ratio ratio(NfMonoId t_id, NfMonoId e_id) {
    NfMonomial t = nfs.monomial(t_id), e = nfs.monomial(e_id);
    if (t.coeff % e.coeff != 0) return no();
    if (!std::includes(t.factors.begin(), t.factors.end(), e.factors.begin(), e.factors.end())) return no();
    Ratio r{SubexprAnswer::yes, {}};
    r.g.coeff = t.coeff / e.coeff;
    std::set_difference(t.factors.begin(), t.factors.end(), e.factors.begin(), e.factors.end(),
                        std::back_inserter(r.g.factors));
    // exp(A)·exp(B) = exp(A + B): exp arguments combine as multisets of monomials.
    if (e.exp_arg.valid()) {
      if (!t.exp_arg.valid()) return no();
      std::vector<NfMonoId> a = nfs.monomials(t.exp_arg), b = nfs.monomials(e.exp_arg);
      if (!std::includes(a.begin(), a.end(), b.begin(), b.end())) return no();
      std::vector<NfMonoId> rest;
      std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(rest));
      if (!rest.empty()) {
        auto f = nfs.form_of(std::move(rest));
        if (!f) return undecided();
        r.g.exp_arg = *f;
      }
    } else {
      r.g.exp_arg = t.exp_arg;
    }
    // sqrt(x)·sqrt(y) = sqrt(x·y) and denominators multiply: exact quotients.
    if (!divide_product_part(t.sqrt_arg, e.sqrt_arg, r.g.sqrt_arg, r)) return r;
    if (!divide_product_part(t.den, e.den, r.g.den, r)) return r;
    return r;
  }

  /// The sorted products g·m for every monomial m of `ms`, or nullopt past a pool limit.
  std::optional<std::vector<NfMonoId>> times(NfMonoId g, const std::vector<NfMonoId>& ms) {
    std::vector<NfMonoId> out;
    out.reserve(ms.size());
    for (NfMonoId m : ms) {
      auto p = nfs.product(g, m);
      if (!p) return std::nullopt;
      out.push_back(*p);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  Quotient quotient(NfId p_id, NfId f_id) {
    if (p_id == f_id) return Quotient{SubexprAnswer::yes, true, {}};
    std::vector<NfMonoId> p = nfs.monomials(p_id), f = nfs.monomials(f_id);
    if (p.size() % f.size() != 0) return {};
    if (f.size() == 1) {
      // Division by one monomial is unique: every monomial of P divided by it.
      std::vector<NfMonoId> q;
      bool unsure = false;
      for (NfMonoId pm : p) {
        Ratio r = ratio(pm, f[0]);
        if (r.status == SubexprAnswer::no) return {};
        if (r.status == SubexprAnswer::undecided) {
          unsure = true;
          continue;
        }
        if (!has_factor(r.g)) return {};  // P = F·Q needs Q to be a term
        q.push_back(nfs.intern(r.g));
      }
      if (unsure) return Quotient{SubexprAnswer::undecided, false, {}};
      auto form = nfs.form_of(std::move(q));
      if (!form) return Quotient{SubexprAnswer::undecided, false, {}};
      return Quotient{SubexprAnswer::yes, false, *form};
    }
    if (p.size() > f.size()) {
      // A quotient with several monomials: multivariate factorisation, not attempted.
      return Quotient{SubexprAnswer::undecided, false, {}};
    }
    // |P| = |F|: the quotient is one monomial q = p/f0 for the p that f0·q is.
    bool unsure = false;
    for (NfMonoId pm : distinct(p)) {
      Ratio r = ratio(pm, f[0]);
      if (r.status == SubexprAnswer::undecided) unsure = true;
      if (r.status != SubexprAnswer::yes || !has_factor(r.g)) continue;
      NfMonoId q = nfs.intern(r.g);
      auto prod = times(q, f);
      if (!prod) {
        unsure = true;
        continue;
      }
      if (*prod == p) {
        auto form = nfs.form_of({q});
        if (!form) return Quotient{SubexprAnswer::undecided, false, {}};
        return Quotient{SubexprAnswer::yes, false, *form};
      }
    }
    return Quotient{unsure ? SubexprAnswer::undecided : SubexprAnswer::no, false, {}};
  }

  /// Every normal form held inside a monomial: atom arguments, exp and sqrt arguments, denominator.
  std::vector<NfId> inner_forms(NfMonoId id) {
    NfMonomial m = nfs.monomial(id);
    std::vector<NfId> out;
    for (NfAtomId a : distinct(m.factors))
      for (NfId arg : nfs.atom(a).args) out.push_back(arg);
    for (NfId x : {m.exp_arg, m.sqrt_arg, m.den})
      if (x.valid()) out.push_back(x);
    return out;
  }

  SubexprAnswer sub(NfId e, NfId t) {
    if (e == t) return SubexprAnswer::yes;
    uint64_t key = pair_key(e, t);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    SubexprAnswer answer = decide_uncached(e, t);
    memo.emplace(key, answer);
    return answer;
  }

  SubexprAnswer decide_uncached(NfId e_id, NfId t_id) {
    std::vector<NfMonoId> e = nfs.monomials(e_id), t = nfs.monomials(t_id);
    std::vector<NfMonoId> t_distinct = distinct(t);
    bool unsure = false;
    for (NfMonoId tm : t_distinct) {
      Ratio r = ratio(tm, e[0]);
      if (r.status == SubexprAnswer::undecided) unsure = true;
      if (r.status != SubexprAnswer::yes) continue;
      if (e.size() == 1) return SubexprAnswer::yes;  // e divides a monomial of T
      auto prod = times(nfs.intern(r.g), e);          // g·E ⊆ T?
      if (!prod) {
        unsure = true;
        continue;
      }
      if (std::includes(t.begin(), t.end(), prod->begin(), prod->end())) return SubexprAnswer::yes;
    }
    for (NfMonoId tm : t_distinct) {
      for (NfId inner : inner_forms(tm)) {
        SubexprAnswer a = sub(e_id, inner);
        if (a == SubexprAnswer::yes) return a;
        if (a == SubexprAnswer::undecided) unsure = true;
      }
    }
    if (!unsure && e.size() == 1 && concat_parts_inside(e[0], t_id)) return SubexprAnswer::undecided;
    return unsure ? SubexprAnswer::undecided : SubexprAnswer::no;
  }

  /// concat is outside the axioms, but a matmul of concatenations has the paper's §8.1 expression
  /// (absexpr.h), so a concat whose parts are all subexpressions of T may feed a matmul that is
  /// one: it must not be pruned. Such a lone concat is `undecided` rather than `no`.
  bool concat_parts_inside(NfMonoId e, NfId t) {
    NfMonomial m = nfs.monomial(e);
    if (m.coeff != 1 || m.factors.size() != 1 || m.exp_arg.valid() || m.sqrt_arg.valid() || m.den.valid()) return false;
    NfAtom atom = nfs.atom(m.factors[0]);
    if (atom.kind != NfAtomKind::concat) return false;
    for (NfId part : atom.args)
      if (sub(part, t) == SubexprAnswer::no) return false;
    return true;
  }
};

SubexprOracle::SubexprOracle(const ExprPool& exprs, NormalFormPool& nfs) : exprs_(exprs), nfs_(nfs) {}

SubexprAnswer SubexprOracle::decide(ExprId e, ExprId target) {
  auto start = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.queries;
  SubexprAnswer answer = SubexprAnswer::undecided;
  NfResult ne = normal_form(e, exprs_, nfs_), nt = normal_form(target, exprs_, nfs_);
  if (!ne.ok() && nt.ok()) {
    answer = SubexprAnswer::no;  // E is too large to lie inside T (the file comment)
  } else if (ne.ok() && nt.ok()) {
    uint64_t key = pair_key(ne.id, nt.id);
    if (auto it = cache_.find(key); it != cache_.end()) {
      ++stats_.cache_hits;
      answer = it->second;
    } else {
      Search search{nfs_, cache_};
      answer = search.sub(ne.id, nt.id);
    }
  }
  switch (answer) {
    case SubexprAnswer::no: ++stats_.no; break;
    case SubexprAnswer::yes: ++stats_.yes; break;
    case SubexprAnswer::undecided: ++stats_.undecided; break;
  }
  stats_.nanoseconds +=
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  return answer;
}

SubexprStats SubexprOracle::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace mugraph
