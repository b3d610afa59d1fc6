// Fingerprints of abstract expressions (expr_fingerprint.h; docs/absexpr.md, "Fingerprints past
// the limits").

#include "mugraph/expr_fingerprint.h"

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "mugraph/error.h"
#include "mugraph/ffield.h"

namespace mugraph {

namespace {

constexpr int K = kFingerprintPoints;

using ff::splitmix64;

/// A term's values at every point, in Z_p and in Z_q; a field whose value is not defined (exp in
/// Z_q, a zero denominator) is marked, and so is everything built on it in that field.
struct Value {
  std::array<uint64_t, K> p{}, q{};
  bool p_ok = true, q_ok = true;
};

}  // namespace

struct ExprFingerprints::Impl {
  uint64_t seed = 0;
  const ExprPool* owner = nullptr;
  std::array<uint64_t, K> omega{};             // of order q in Z_p
  std::array<uint64_t, K> sqrt_p{}, sqrt_q{};  // the exponents that stand for sqrt
  std::unordered_map<int32_t, Value> cache;    // by ExprId

  /// A random residue mod m for (what, point, field), fixed by the seed.
  uint64_t draw(uint64_t what, int point, uint64_t m) const {
    return splitmix64(seed ^ splitmix64(what ^ splitmix64(static_cast<uint64_t>(point) * 2 + (m == ff::kP ? 0 : 1)))) %
           m;
  }

  Value leaf(uint64_t what) const {
    Value v;
    for (int i = 0; i < K; ++i) {
      v.p[i] = draw(what, i, ff::kP);
      v.q[i] = draw(what, i, ff::kQ);
    }
    return v;
  }

  /// A random function of the operands' values (relu, gelu, silu, concat): equal operands give
  /// equal values, in each field separately.
  Value opaque(ExprKind kind, const Value& a, const Value* b) const {
    Value v;
    v.p_ok = a.p_ok && (!b || b->p_ok);
    v.q_ok = a.q_ok && (!b || b->q_ok);
    const uint64_t tag = splitmix64(0x6f70617175650000ULL + static_cast<uint64_t>(kind));
    for (int i = 0; i < K; ++i) {
      v.p[i] = draw(splitmix64(tag ^ a.p[i]) ^ (b ? splitmix64(b->p[i] + 1) : 0), i, ff::kP);
      v.q[i] = draw(splitmix64(tag ^ a.q[i]) ^ (b ? splitmix64(b->q[i] + 1) : 0), i, ff::kQ);
    }
    return v;
  }

  Value node(const ExprPool& exprs, ExprId e, const Value* a, const Value* b) const {
    const ExprNode& n = exprs.node(e);
    switch (n.kind) {
      case ExprKind::var:
        return leaf(std::hash<std::string>{}("var " + std::string(n.name)));
      case ExprKind::constant:  // by its printed value, as the normal form names it
        return leaf(std::hash<std::string>{}("constant " + exprs.str(e)));
      case ExprKind::add:
      case ExprKind::mul:
      case ExprKind::div: {
        Value v;
        v.p_ok = a->p_ok && b->p_ok;
        v.q_ok = a->q_ok && b->q_ok;
        for (int i = 0; i < K; ++i) {
          if (n.kind == ExprKind::add) {
            v.p[i] = ff::add(a->p[i], b->p[i], ff::kP);
            v.q[i] = ff::add(a->q[i], b->q[i], ff::kQ);
          } else if (n.kind == ExprKind::mul) {
            v.p[i] = ff::mul(a->p[i], b->p[i], ff::kP);
            v.q[i] = ff::mul(a->q[i], b->q[i], ff::kQ);
          } else {
            v.p_ok = v.p_ok && b->p[i] != 0;
            v.q_ok = v.q_ok && b->q[i] != 0;
            v.p[i] = b->p[i] ? ff::mul(a->p[i], ff::inv(b->p[i], ff::kP), ff::kP) : 0;
            v.q[i] = b->q[i] ? ff::mul(a->q[i], ff::inv(b->q[i], ff::kQ), ff::kQ) : 0;
          }
        }
        return v;
      }
      case ExprKind::sum: {
        Value v = *a;
        const uint64_t k = static_cast<uint64_t>(n.value);
        for (int i = 0; i < K; ++i) {
          v.p[i] = ff::mul(k % ff::kP, a->p[i], ff::kP);
          v.q[i] = ff::mul(k % ff::kQ, a->q[i], ff::kQ);
        }
        return v;
      }
      case ExprKind::exp: {
        Value v;
        v.p_ok = a->q_ok;
        v.q_ok = false;  // would need an element of order dividing q - 1 in Z_q: not modelled
        for (int i = 0; i < K; ++i) v.p[i] = ff::pow(omega[i], a->q[i], ff::kP);
        return v;
      }
      case ExprKind::sqrt: {
        Value v = *a;
        for (int i = 0; i < K; ++i) {
          v.p[i] = ff::pow(a->p[i], sqrt_p[i], ff::kP);
          v.q[i] = ff::pow(a->q[i], sqrt_q[i], ff::kQ);
        }
        return v;
      }
      case ExprKind::silu:
      case ExprKind::relu:
      case ExprKind::gelu:
        return opaque(n.kind, *a, nullptr);
      case ExprKind::concat:
        return opaque(n.kind, *a, b);
    }
    MUGRAPH_CHECK(false) << "bad expression kind " << static_cast<int>(n.kind);
    return {};
  }

  const Value& compute(const ExprPool& exprs, ExprId root) {
    std::vector<ExprId> stack{root};
    while (!stack.empty()) {
      const ExprId e = stack.back();
      if (cache.count(e.value)) {
        stack.pop_back();
        continue;
      }
      const ExprNode& n = exprs.node(e);
      const int arity = expr_arity(n.kind);
      const ExprId kids[2] = {n.a, n.b};
      bool ready = true;
      for (int k = 0; k < arity; ++k)
        if (!cache.count(kids[k].value)) {
          stack.push_back(kids[k]);
          ready = false;
        }
      if (!ready) continue;
      stack.pop_back();
      const Value* a = arity >= 1 ? &cache.at(kids[0].value) : nullptr;
      const Value* b = arity >= 2 ? &cache.at(kids[1].value) : nullptr;
      Value v = node(exprs, e, a, b);
      cache.emplace(e.value, v);
    }
    return cache.at(root.value);
  }
};

ExprFingerprints::ExprFingerprints(uint64_t seed) : impl_(std::make_unique<Impl>()) {
  impl_->seed = splitmix64(seed);
  for (int i = 0; i < K; ++i) {
    // r in [2, p - 2], so r² ≠ 1 and ω = r² has order q (the non-zero squares of Z_p are the
    // subgroup of order q, since p = 2q + 1).
    const uint64_t r = 2 + impl_->draw(0x6f6d656761, i, ff::kP) % (ff::kP - 3);
    impl_->omega[i] = ff::mul(r, r, ff::kP);
    impl_->sqrt_p[i] = 2 + impl_->draw(0x73717274, i, ff::kP) % (ff::kP - 3);
    impl_->sqrt_q[i] = 2 + impl_->draw(0x73717274, i, ff::kQ) % (ff::kQ - 3);
  }
}

ExprFingerprints::~ExprFingerprints() = default;

std::optional<ExprFingerprint> ExprFingerprints::of(ExprId e, const ExprPool& exprs) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!impl_->owner) impl_->owner = &exprs;
  MUGRAPH_CHECK(impl_->owner == &exprs) << "an ExprFingerprints is used with a second ExprPool";
  const Value& v = impl_->compute(exprs, e);
  if (!v.p_ok) return std::nullopt;
  ExprFingerprint f;
  for (int i = 0; i < K; ++i) f[static_cast<size_t>(i)] = static_cast<uint32_t>(v.p[i]);
  return f;
}

bool fingerprints_differ(ExprId a, ExprId b, const ExprPool& exprs, ExprFingerprints& prints) {
  const std::optional<ExprFingerprint> x = prints.of(a, exprs), y = prints.of(b, exprs);
  return x && y && *x != *y;
}

}  // namespace mugraph
