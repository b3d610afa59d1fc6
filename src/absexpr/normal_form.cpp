// The normal form that decides A_eq (docs/absexpr.md): hash-consed multisets of monomials, built
// bottom-up from a term's operands. Every operation below runs under the pool's mutex; a limit hit
// anywhere unwinds with a Stop exception that normal_form turns into an NfResult (and caches).
#include "mugraph/normal_form.h"

#include <algorithm>
#include <deque>
#include <unordered_map>
#include <utility>

namespace mugraph {

namespace {

/// Thrown inside the pool when a limit is hit; never escapes normal_form.
struct Stop {
  NfStop reason;
};

template <typename T>
size_t hash_ids(size_t h, const std::vector<T>& ids) {
  for (const T& id : ids) hash_combine(h, std::hash<int32_t>{}(id.value));
  return h;
}

struct AtomHash {
  size_t operator()(const NfAtom& a) const {
    size_t h = static_cast<size_t>(a.kind);
    hash_combine(h, std::hash<std::string>{}(a.text));
    return hash_ids(h, a.args);
  }
};

struct MonoHash {
  size_t operator()(const NfMonomial& m) const {
    size_t h = std::hash<uint64_t>{}(m.coeff);
    hash_combine(h, std::hash<int32_t>{}(m.exp_arg.value));
    hash_combine(h, std::hash<int32_t>{}(m.sqrt_arg.value));
    hash_combine(h, std::hash<int32_t>{}(m.den.value));
    return hash_ids(h, m.factors);
  }
};

struct FormHash {
  size_t operator()(const std::vector<NfMonoId>& v) const { return hash_ids(size_t{0x51ed27}, v); }
};

}  // namespace

std::string_view nf_stop_name(NfStop stop) {
  switch (stop) {
    case NfStop::none:
      return "none";
    case NfStop::too_many_monomials:
      return "too_many_monomials";
    case NfStop::coefficient_overflow:
      return "coefficient_overflow";
  }
  return "?";
}

struct NormalFormPool::Impl {
  int64_t max_monomials = 0;
  /// The ExprPool the cache belongs to (set on first use).
  const ExprPool* owner = nullptr;

  std::deque<NfAtom> atoms;
  std::unordered_map<NfAtom, NfAtomId, AtomHash> atom_ids;
  std::deque<NfMonomial> monos;
  std::unordered_map<NfMonomial, NfMonoId, MonoHash> mono_ids;
  std::deque<std::vector<NfMonoId>> forms;
  std::unordered_map<std::vector<NfMonoId>, NfId, FormHash> form_ids;

  std::unordered_map<int32_t, NfResult> cache;   // by ExprId
  std::unordered_map<uint64_t, NfId> mul_cache;  // by the (smaller, larger) NfId pair

  // --- interning -------------------------------------------------------------------------------

  NfAtomId intern(NfAtom a) {
    if (auto it = atom_ids.find(a); it != atom_ids.end()) return it->second;
    NfAtomId id(static_cast<int32_t>(atoms.size()));
    atoms.push_back(a);
    atom_ids.emplace(std::move(a), id);
    return id;
  }

  NfMonoId intern(NfMonomial m) {
    if (auto it = mono_ids.find(m); it != mono_ids.end()) return it->second;
    NfMonoId id(static_cast<int32_t>(monos.size()));
    monos.push_back(m);
    mono_ids.emplace(std::move(m), id);
    return id;
  }

  /// @pre v is sorted
  NfId intern(std::vector<NfMonoId> v) {
    if (static_cast<int64_t>(v.size()) > max_monomials) throw Stop{NfStop::too_many_monomials};
    if (auto it = form_ids.find(v); it != form_ids.end()) return it->second;
    NfId id(static_cast<int32_t>(forms.size()));
    forms.push_back(v);
    form_ids.emplace(std::move(v), id);
    return id;
  }

  const std::vector<NfMonoId>& form(NfId id) const {
    MUGRAPH_CHECK(id.valid() && id.index() < forms.size()) << "normal form id " << id.value << " is not of this pool";
    return forms[id.index()];
  }
  const NfMonomial& mono(NfMonoId id) const {
    MUGRAPH_CHECK(id.valid() && id.index() < monos.size()) << "monomial id " << id.value << " is not of this pool";
    return monos[id.index()];
  }
  const NfAtom& atom(NfAtomId id) const {
    MUGRAPH_CHECK(id.valid() && id.index() < atoms.size()) << "atom id " << id.value << " is not of this pool";
    return atoms[id.index()];
  }

  // --- the operations of docs/absexpr.md ---------------------------------------------------------

  NfId single(const NfMonomial& m) { return intern(std::vector<NfMonoId>{intern(m)}); }

  NfId of_atom(NfAtom a) {
    NfMonomial m;
    m.factors.push_back(intern(std::move(a)));
    return single(m);
  }

  /// Multiset union.
  NfId add(NfId a, NfId b) {
    const std::vector<NfMonoId>& x = form(a);
    const std::vector<NfMonoId>& y = form(b);
    if (static_cast<int64_t>(x.size() + y.size()) > max_monomials) throw Stop{NfStop::too_many_monomials};
    std::vector<NfMonoId> v;
    v.reserve(x.size() + y.size());
    std::merge(x.begin(), x.end(), y.begin(), y.end(), std::back_inserter(v));
    return intern(std::move(v));
  }

  /// The product of two monomials: coefficients multiply, numerators unite, exp arguments unite,
  /// sqrt arguments multiply, denominators multiply.
  NfMonoId mul(NfMonoId a, NfMonoId b) {
    NfMonomial x = mono(a);  // copies: the recursive calls below may grow the deques' maps
    NfMonomial y = mono(b);
    NfMonomial m;
    if (__builtin_mul_overflow(x.coeff, y.coeff, &m.coeff)) throw Stop{NfStop::coefficient_overflow};
    m.factors.reserve(x.factors.size() + y.factors.size());
    std::merge(x.factors.begin(), x.factors.end(), y.factors.begin(), y.factors.end(), std::back_inserter(m.factors));
    auto both = [](NfId p, NfId q, auto&& combine) { return !p.valid() ? q : !q.valid() ? p : combine(p, q); };
    m.exp_arg = both(x.exp_arg, y.exp_arg, [&](NfId p, NfId q) { return add(p, q); });
    m.sqrt_arg = both(x.sqrt_arg, y.sqrt_arg, [&](NfId p, NfId q) { return mul(p, q); });
    m.den = both(x.den, y.den, [&](NfId p, NfId q) { return mul(p, q); });
    return intern(std::move(m));
  }

  /// The expanded product of two NFs.
  NfId mul(NfId a, NfId b) {
    if (b < a) std::swap(a, b);
    uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(a.value)) << 32) | static_cast<uint32_t>(b.value);
    if (auto it = mul_cache.find(key); it != mul_cache.end()) return it->second;
    std::vector<NfMonoId> x = form(a);
    std::vector<NfMonoId> y = form(b);
    if (static_cast<int64_t>(x.size()) * static_cast<int64_t>(y.size()) > max_monomials) {
      throw Stop{NfStop::too_many_monomials};
    }
    std::vector<NfMonoId> v;
    v.reserve(x.size() * y.size());
    for (NfMonoId p : x)
      for (NfMonoId q : y) v.push_back(mul(p, q));
    std::sort(v.begin(), v.end());
    NfId id = intern(std::move(v));
    mul_cache.emplace(key, id);
    return id;
  }

  /// x / y: x times the factorless monomial 1/y.
  NfId div(NfId x, NfId y) {
    NfMonomial r;
    r.den = y;
    return mul(x, single(r));
  }

  /// sum(k, x): every coefficient times k.
  NfId sum(uint64_t k, NfId x) {
    std::vector<NfMonoId> v = form(x);
    for (NfMonoId& id : v) {
      NfMonomial m = mono(id);
      if (__builtin_mul_overflow(m.coeff, k, &m.coeff)) throw Stop{NfStop::coefficient_overflow};
      id = intern(std::move(m));
    }
    std::sort(v.begin(), v.end());
    return intern(std::move(v));
  }

  /// The NF of one node whose children's NFs are known (a, b: invalid where the kind has none).
  NfId node(const ExprPool& exprs, ExprId e, NfId a, NfId b) {
    const ExprNode& n = exprs.node(e);
    switch (n.kind) {
      case ExprKind::var:
        return of_atom(NfAtom{NfAtomKind::var, std::string(n.name), {}});
      case ExprKind::constant:
        return of_atom(NfAtom{NfAtomKind::constant, exprs.str(e), {}});
      case ExprKind::add:
        return add(a, b);
      case ExprKind::mul:
        return mul(a, b);
      case ExprKind::div:
        return div(a, b);
      case ExprKind::exp: {
        NfMonomial m;
        m.exp_arg = a;
        return single(m);
      }
      case ExprKind::sqrt: {
        NfMonomial m;
        m.sqrt_arg = a;
        return single(m);
      }
      case ExprKind::silu:
        return of_atom(NfAtom{NfAtomKind::silu, {}, {a}});
      case ExprKind::relu:
        return of_atom(NfAtom{NfAtomKind::relu, {}, {a}});
      case ExprKind::gelu:
        return of_atom(NfAtom{NfAtomKind::gelu, {}, {a}});
      case ExprKind::sum:
        MUGRAPH_CHECK(n.value >= 1) << "sum over " << n.value << " elements";
        return sum(static_cast<uint64_t>(n.value), a);
      case ExprKind::concat:
        return of_atom(NfAtom{NfAtomKind::concat, {}, {a, b}});
    }
    MUGRAPH_CHECK(false) << "bad expression kind " << static_cast<int>(n.kind);
    return NfId{};
  }

  /// Bottom-up over the DAG below e with an explicit stack; every visited term gets a cache entry.
  NfResult compute(const ExprPool& exprs, ExprId root) {
    std::vector<ExprId> stack{root};
    while (!stack.empty()) {
      ExprId e = stack.back();
      if (cache.count(e.value)) {
        stack.pop_back();
        continue;
      }
      const ExprNode& n = exprs.node(e);
      int arity = expr_arity(n.kind);
      ExprId kids[2] = {n.a, n.b};
      bool ready = true;
      for (int k = 0; k < arity; ++k) {
        if (!cache.count(kids[k].value)) {
          stack.push_back(kids[k]);
          ready = false;
        }
      }
      if (!ready) continue;
      stack.pop_back();
      NfId args[2];
      NfResult r;
      for (int k = 0; k < arity && r.ok(); ++k) {
        const NfResult& kr = cache.at(kids[k].value);
        if (kr.ok()) {
          args[k] = kr.id;
        } else {
          r.stop = kr.stop;
        }
      }
      if (r.ok()) {
        try {
          r.id = node(exprs, e, args[0], args[1]);
        } catch (const Stop& s) {
          r.stop = s.reason;
        }
      }
      cache.emplace(e.value, r);
    }
    return cache.at(root.value);
  }

  // --- printing ------------------------------------------------------------------------------------

  std::string str_form(NfId id) const {
    std::vector<std::string> parts;
    for (NfMonoId m : form(id)) parts.push_back(str_mono(m));
    std::sort(parts.begin(), parts.end());
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) out += (i ? " + " : "") + parts[i];
    return out;
  }

  std::string str_mono(NfMonoId id) const {
    const NfMonomial& m = mono(id);
    std::vector<std::string> factors;
    for (NfAtomId a : m.factors) factors.push_back(str_atom(a));
    if (m.exp_arg.valid()) factors.push_back("exp(" + str_form(m.exp_arg) + ")");
    if (m.sqrt_arg.valid()) factors.push_back("sqrt(" + str_form(m.sqrt_arg) + ")");
    std::sort(factors.begin(), factors.end());
    if (m.coeff != 1) factors.insert(factors.begin(), std::to_string(m.coeff));
    std::string out;
    for (size_t i = 0; i < factors.size(); ++i) out += (i ? "*" : "") + factors[i];
    if (out.empty()) out = "1";  // only the reciprocal 1/D, which no finished NF holds
    if (m.den.valid()) out += "/(" + str_form(m.den) + ")";
    return out;
  }

  std::string str_atom(NfAtomId id) const {
    const NfAtom& a = atom(id);
    switch (a.kind) {
      case NfAtomKind::var:
      case NfAtomKind::constant:
        return a.text;
      case NfAtomKind::relu:
        return "relu(" + str_form(a.args[0]) + ")";
      case NfAtomKind::gelu:
        return "gelu(" + str_form(a.args[0]) + ")";
      case NfAtomKind::silu:
        return "silu(" + str_form(a.args[0]) + ")";
      case NfAtomKind::concat:
        return "concat(" + str_form(a.args[0]) + ", " + str_form(a.args[1]) + ")";
    }
    return "?";
  }
};

NormalFormPool::NormalFormPool(NormalFormLimits limits) : limits_(limits), impl_(std::make_unique<Impl>()) {
  MUGRAPH_CHECK(limits.max_monomials >= 1) << "max_monomials is " << limits.max_monomials;
  impl_->max_monomials = limits.max_monomials;
}

NormalFormPool::~NormalFormPool() = default;

std::vector<NfMonoId> NormalFormPool::monomials(NfId id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return impl_->form(id);
}

NfMonomial NormalFormPool::monomial(NfMonoId id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return impl_->mono(id);
}

NfAtom NormalFormPool::atom(NfAtomId id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return impl_->atom(id);
}

NormalFormStats NormalFormPool::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return NormalFormStats{static_cast<int64_t>(impl_->forms.size()), static_cast<int64_t>(impl_->monos.size()),
                         static_cast<int64_t>(impl_->atoms.size()), static_cast<int64_t>(impl_->cache.size())};
}

std::string NormalFormPool::str(NfId id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return impl_->str_form(id);
}

NfMonoId NormalFormPool::intern(const NfMonomial& m) {
  std::lock_guard<std::mutex> lock(mutex_);
  return impl_->intern(m);
}

std::optional<NfMonoId> NormalFormPool::product(NfMonoId a, NfMonoId b) {
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    return impl_->mul(a, b);
  } catch (const Stop&) {
    return std::nullopt;
  }
}

std::optional<NfId> NormalFormPool::form_of(std::vector<NfMonoId> monos) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::sort(monos.begin(), monos.end());
  try {
    return impl_->intern(std::move(monos));
  } catch (const Stop&) {
    return std::nullopt;
  }
}

NfResult normal_form(ExprId e, const ExprPool& exprs, NormalFormPool& pool) {
  MUGRAPH_CHECK(e.valid() && e.value < exprs.size()) << "expression id " << e.value << " is not a term of the pool";
  std::lock_guard<std::mutex> lock(pool.mutex_);
  NormalFormPool::Impl& impl = *pool.impl_;
  if (impl.owner == nullptr) impl.owner = &exprs;
  MUGRAPH_CHECK(impl.owner == &exprs) << "a NormalFormPool used with a second ExprPool";
  return impl.compute(exprs, e);
}

std::optional<bool> aeq_equal(ExprId a, ExprId b, const ExprPool& exprs, NormalFormPool& pool) {
  NfResult x = normal_form(a, exprs, pool);
  NfResult y = normal_form(b, exprs, pool);
  if (x.ok() && y.ok()) return x.id == y.id;
  // Whether a term hits a limit depends on its normal form alone (limits are monotone, see
  // normal_form.h), so a term past a limit and one within the limits have different forms.
  if (x.ok() != y.ok()) return false;
  // Both are past a limit: the fingerprints still tell many apart (a candidate of a program whose
  // output is too large for a normal form would otherwise be A_eq-equal to it whatever it computes).
  if (fingerprints_differ(a, b, exprs, pool.fingerprints())) return false;
  return std::nullopt;
}

}  // namespace mugraph
