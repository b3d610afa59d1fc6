/// \file axiom_rewrites.h
/// Test helpers shared by the abstract-expression tests: random terms over the operators of the
/// paper's Table 2, and every direction of every A_eq axiom applied at the root of a term.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "mugraph/absexpr.h"

namespace mugraph::testing_axioms {

/// Random terms (a fixed seed makes every run the same).
class RandomTerms {
 public:
  RandomTerms(ExprPool& p, uint64_t seed) : rng(seed), p_(p) {}

  std::mt19937_64 rng;
  int pick(int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); }

  ExprId term(int depth) {
    static const char* kLeaves[] = {"X", "Y", "Z", "W"};
    if (depth == 0 || pick(6) == 0) {
      if (pick(8) == 0) return p_.constant(*parse_scalar(pick(2) ? "2" : "0.5"));
      return p_.var(kLeaves[pick(4)]);
    }
    static const int64_t kSums[] = {2, 3, 4, 6, 8};
    switch (pick(18)) {
      case 0:
      case 1:
      case 2:
        return p_.add(term(depth - 1), term(depth - 1));
      case 3:
      case 4:
      case 5:
        return p_.mul(term(depth - 1), term(depth - 1));
      case 6:
      case 7:
        return p_.div(term(depth - 1), term(depth - 1));
      case 8:
      case 9:
      case 10:
        return p_.sum(kSums[pick(5)], term(depth - 1));
      case 11:
        return p_.exp(term(depth - 1));
      case 12:
        return p_.sqrt(term(depth - 1));
      case 13:
        return p_.relu(term(depth - 1));
      case 14:
        return p_.silu(term(depth - 1));
      case 15:  // products of exps and of sqrts give the merging axioms something to match
        return p_.mul(p_.exp(term(depth - 1)), p_.exp(term(depth - 1)));
      case 16:
        return p_.mul(p_.sqrt(term(depth - 1)), p_.sqrt(term(depth - 1)));
      default:
        return pick(2) ? p_.concat(term(depth - 1), term(depth - 1)) : p_.gelu(term(depth - 1));
    }
  }

 private:
  ExprPool& p_;
};

/// Rebuilds a node with new children.
inline ExprId with_kids(ExprPool& p, ExprId t, ExprId a, ExprId b) {
  const ExprNode& n = p.node(t);
  switch (expr_arity(n.kind)) {
    case 0:
      return t;
    case 1:
      return n.kind == ExprKind::sum ? p.sum(n.value, a) : p.unary(n.kind, a);
    default:
      return p.binary(n.kind, a, b);
  }
}

constexpr int kAxioms = 22;
constexpr const char* kAxiomNames[kAxioms] = {
    "add assoc", "mul assoc",   "mul/add", "mul/add rev", "div/add",  "div/add rev", "mul·div", "mul·div rev",
    "div/div",   "div/div rev", "sum sum", "sum sum rev", "sum/add",  "sum/add rev", "sum/mul", "sum/mul rev",
    "sum/div",   "sum/div rev", "exp add", "exp add rev", "sqrt mul", "sqrt mul rev"};

/// One axiom (a direction of one Table 2 equation) applied at the root of t, if it matches.
inline std::optional<ExprId> apply_axiom(ExprPool& p, ExprId t, int axiom, RandomTerms& r) {
  const ExprNode n = p.node(t);
  auto is = [&](ExprId e, ExprKind k) { return p.node(e).kind == k; };
  // For commutative roots, try both operand orders: (first, second).
  std::array<std::pair<ExprId, ExprId>, 2> orders = {std::pair{n.a, n.b}, std::pair{n.b, n.a}};
  if (r.pick(2)) std::swap(orders[0], orders[1]);
  switch (axiom) {
    case 0:  // add(add(x, y), z) -> add(x, add(y, z))
    case 1:  // the same for mul
    {
      ExprKind k = axiom == 0 ? ExprKind::add : ExprKind::mul;
      if (n.kind != k) return std::nullopt;
      for (auto [l, z] : orders) {
        if (!is(l, k)) continue;
        const ExprNode ln = p.node(l);
        return p.binary(k, ln.a, p.binary(k, ln.b, z));
      }
      return std::nullopt;
    }
    case 2:  // mul(x, add(y, z)) -> add(mul(x, y), mul(x, z))
      if (n.kind != ExprKind::mul) return std::nullopt;
      for (auto [x, s] : orders) {
        if (!is(s, ExprKind::add)) continue;
        const ExprNode sn = p.node(s);
        return p.add(p.mul(x, sn.a), p.mul(x, sn.b));
      }
      return std::nullopt;
    case 3:   // add(mul(x, y), mul(x, z)) -> mul(x, add(y, z))
    case 5:   // add(div(x, z), div(y, z)) -> div(add(x, y), z)
    case 13:  // add(sum(i, x), sum(i, y)) -> sum(i, add(x, y))
    {
      if (n.kind != ExprKind::add) return std::nullopt;
      const ExprNode l = p.node(n.a), m = p.node(n.b);
      if (axiom == 3 && l.kind == ExprKind::mul && m.kind == ExprKind::mul) {
        for (auto [x1, y] : std::array{std::pair{l.a, l.b}, std::pair{l.b, l.a}})
          for (auto [x2, z] : std::array{std::pair{m.a, m.b}, std::pair{m.b, m.a}})
            if (x1 == x2) return p.mul(x1, p.add(y, z));
      }
      if (axiom == 5 && l.kind == ExprKind::div && m.kind == ExprKind::div && l.b == m.b) {
        return p.div(p.add(l.a, m.a), l.b);
      }
      if (axiom == 13 && l.kind == ExprKind::sum && m.kind == ExprKind::sum && l.value == m.value) {
        return p.sum(l.value, p.add(l.a, m.a));
      }
      return std::nullopt;
    }
    case 4:  // div(add(x, y), z) -> add(div(x, z), div(y, z))
      if (n.kind != ExprKind::div || !is(n.a, ExprKind::add)) return std::nullopt;
      return p.add(p.div(p.node(n.a).a, n.b), p.div(p.node(n.a).b, n.b));
    case 6:  // mul(x, div(y, z)) -> div(mul(x, y), z)
      if (n.kind != ExprKind::mul) return std::nullopt;
      for (auto [x, d] : orders) {
        if (!is(d, ExprKind::div)) continue;
        const ExprNode dn = p.node(d);
        return p.div(p.mul(x, dn.a), dn.b);
      }
      return std::nullopt;
    case 7:  // div(mul(x, y), z) -> mul(x, div(y, z))
    {
      if (n.kind != ExprKind::div || !is(n.a, ExprKind::mul)) return std::nullopt;
      const ExprNode m = p.node(n.a);
      return r.pick(2) ? p.mul(m.a, p.div(m.b, n.b)) : p.mul(m.b, p.div(m.a, n.b));
    }
    case 8:  // div(div(x, y), z) -> div(x, mul(y, z))
      if (n.kind != ExprKind::div || !is(n.a, ExprKind::div)) return std::nullopt;
      return p.div(p.node(n.a).a, p.mul(p.node(n.a).b, n.b));
    case 9:  // div(x, mul(y, z)) -> div(div(x, y), z)
    {
      if (n.kind != ExprKind::div || !is(n.b, ExprKind::mul)) return std::nullopt;
      const ExprNode m = p.node(n.b);
      return r.pick(2) ? p.div(p.div(n.a, m.a), m.b) : p.div(p.div(n.a, m.b), m.a);
    }
    case 10:  // sum(i, sum(j, x)) -> sum(i·j, x)
      if (n.kind != ExprKind::sum || !is(n.a, ExprKind::sum)) return std::nullopt;
      return p.sum(n.value * p.node(n.a).value, p.node(n.a).a);
    case 11:  // sum(k, x) -> sum(i, sum(k / i, x)) for a divisor 1 < i < k
    {
      if (n.kind != ExprKind::sum) return std::nullopt;
      std::vector<int64_t> divisors;
      for (int64_t i = 2; i < n.value; ++i)
        if (n.value % i == 0) divisors.push_back(i);
      if (divisors.empty()) return std::nullopt;
      int64_t i = divisors[static_cast<size_t>(r.pick(static_cast<int>(divisors.size())))];
      return p.sum(i, p.sum(n.value / i, n.a));
    }
    case 12:  // sum(i, add(x, y)) -> add(sum(i, x), sum(i, y))
      if (n.kind != ExprKind::sum || !is(n.a, ExprKind::add)) return std::nullopt;
      return p.add(p.sum(n.value, p.node(n.a).a), p.sum(n.value, p.node(n.a).b));
    case 14:  // sum(i, mul(x, y)) -> mul(sum(i, x), y)
    {
      if (n.kind != ExprKind::sum || !is(n.a, ExprKind::mul)) return std::nullopt;
      const ExprNode m = p.node(n.a);
      return r.pick(2) ? p.mul(p.sum(n.value, m.a), m.b) : p.mul(m.a, p.sum(n.value, m.b));
    }
    case 15:  // mul(sum(i, x), y) -> sum(i, mul(x, y))
      if (n.kind != ExprKind::mul) return std::nullopt;
      for (auto [s, y] : orders) {
        if (!is(s, ExprKind::sum)) continue;
        return p.sum(p.node(s).value, p.mul(p.node(s).a, y));
      }
      return std::nullopt;
    case 16:  // sum(i, div(x, y)) -> div(sum(i, x), y)
      if (n.kind != ExprKind::sum || !is(n.a, ExprKind::div)) return std::nullopt;
      return p.div(p.sum(n.value, p.node(n.a).a), p.node(n.a).b);
    case 17:  // div(sum(i, x), y) -> sum(i, div(x, y))
      if (n.kind != ExprKind::div || !is(n.a, ExprKind::sum)) return std::nullopt;
      return p.sum(p.node(n.a).value, p.div(p.node(n.a).a, n.b));
    case 18:  // exp(add(x, y)) -> mul(exp(x), exp(y))
      if (n.kind != ExprKind::exp || !is(n.a, ExprKind::add)) return std::nullopt;
      return p.mul(p.exp(p.node(n.a).a), p.exp(p.node(n.a).b));
    case 19:  // mul(exp(x), exp(y)) -> exp(add(x, y))
      if (n.kind != ExprKind::mul || !is(n.a, ExprKind::exp) || !is(n.b, ExprKind::exp)) return std::nullopt;
      return p.exp(p.add(p.node(n.a).a, p.node(n.b).a));
    case 20:  // mul(sqrt(x), sqrt(y)) -> sqrt(mul(x, y))
      if (n.kind != ExprKind::mul || !is(n.a, ExprKind::sqrt) || !is(n.b, ExprKind::sqrt)) return std::nullopt;
      return p.sqrt(p.mul(p.node(n.a).a, p.node(n.b).a));
    case 21:  // sqrt(mul(x, y)) -> mul(sqrt(x), sqrt(y))
      if (n.kind != ExprKind::sqrt || !is(n.a, ExprKind::mul)) return std::nullopt;
      return p.mul(p.sqrt(p.node(n.a).a), p.sqrt(p.node(n.a).b));
  }
  return std::nullopt;
}

/// The term with its occurrence number `target` (preorder over the tree, not the DAG) replaced
/// by f(occurrence).
inline ExprId replace_at(ExprPool& p, ExprId t, int64_t target, int64_t& counter,
                         const std::function<ExprId(ExprId)>& f) {
  if (counter > target) return t;
  if (counter++ == target) return f(t);
  const ExprNode n = p.node(t);
  int arity = expr_arity(n.kind);
  if (arity == 0) return t;
  ExprId a = replace_at(p, n.a, target, counter, f);
  ExprId b = arity == 2 ? replace_at(p, n.b, target, counter, f) : ExprId{};
  return with_kids(p, t, a, b);
}

/// Preorder occurrences: (index, term, on a numerator path from the root: through add, mul, sum
/// and the numerator of div only).
inline void occurrences(const ExprPool& p, ExprId t, bool numerator, std::vector<std::pair<ExprId, bool>>& out) {
  out.emplace_back(t, numerator);
  const ExprNode n = p.node(t);
  bool through = n.kind == ExprKind::add || n.kind == ExprKind::mul || n.kind == ExprKind::sum;
  if (expr_arity(n.kind) >= 1) {
    occurrences(p, n.a, numerator && (through || n.kind == ExprKind::div), out);
  }
  if (expr_arity(n.kind) == 2) occurrences(p, n.b, numerator && through, out);
}

/// One random axiom application at a random occurrence in t, or t itself when no axiom matched
/// there; `axiom_applied` says which (unchanged when none), `at` where.
inline ExprId rewrite_once(ExprPool& p, ExprId t, RandomTerms& r, int* axiom_applied = nullptr, int64_t* at = nullptr) {
  std::vector<std::pair<ExprId, bool>> occ;
  occurrences(p, t, true, occ);
  const int64_t pos = r.pick(static_cast<int>(occ.size()));
  // The axioms in a random order; the first that matches there is applied.
  std::array<int, kAxioms> order;
  for (int k = 0; k < kAxioms; ++k) order[static_cast<size_t>(k)] = k;
  std::shuffle(order.begin(), order.end(), r.rng);
  for (int axiom : order) {
    std::optional<ExprId> rewritten = apply_axiom(p, occ[static_cast<size_t>(pos)].first, axiom, r);
    if (!rewritten) continue;
    int64_t counter = 0;
    if (axiom_applied) *axiom_applied = axiom;
    if (at) *at = pos;
    return replace_at(p, t, pos, counter, [&](ExprId) { return *rewritten; });
  }
  return t;
}

}  // namespace mugraph::testing_axioms
