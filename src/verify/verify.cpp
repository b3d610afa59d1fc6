// verify(): comparability, random tests over Z_p × Z_q with Theorem 2's bound, and the float
// filter. See docs/verifier.md for what the verdict promises.
#include "mugraph/verify.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ff_ops.h"
#include "lax_forms.h"
#include "mugraph/ff_interp.h"
#include "mugraph/ffield.h"
#include "mugraph/host_memory.h"
#include "mugraph/interp.h"
#include "mugraph/retype.h"

namespace mugraph {
namespace {

/// A test whose inputs make a division by zero is drawn again; this many in a row end the run.
constexpr int kMaxRedrawsInARow = 100;
/// The unknown-function tests draw from their own seed stream (verify_all).
constexpr uint64_t kOpaqueSeedSalt = 0x6f70617175652d66ull;

using ff_detail::splitmix64;

/// The seed of draw number `draw` (tests and redraws count alike) of a run seeded with `seed`.
uint64_t draw_seed(uint64_t seed, uint64_t draw) { return splitmix64(splitmix64(seed) ^ splitmix64(draw + 1)); }

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

/// A bound for messages: check_lax saturates its bounds at 1e30.
/// Every scalar constant of a graph and its bodies.
void collect_constants(const Graph& g, std::vector<Scalar>& out) {
  for (const Op& op : g.ops)
    if (op.attrs.has_scalar) out.push_back(op.attrs.scalar.normalized());
  for (const Graph& body : g.bodies) collect_constants(body, out);
}

/// The residue of a constant m·10^e in the field of modulus m_field.
uint64_t constant_residue(const Scalar& c, uint64_t m_field) {
  uint64_t v = ff::from_int(c.mantissa, m_field);
  uint64_t ten = c.exp10 >= 0
                     ? ff::pow(10, static_cast<uint64_t>(c.exp10), m_field)
                     : ff::inv(ff::pow(10, static_cast<uint64_t>(-static_cast<int64_t>(c.exp10)), m_field), m_field);
  return ff::mul(v, ten, m_field);
}

/// Whether a constant, as a reduced fraction a/b, has |a| and b below `limit`.
bool constant_is_small(const Scalar& c, int64_t limit) {
  int64_t a = c.mantissa < 0 ? -c.mantissa : c.mantissa, b = 1;
  for (int32_t e = c.exp10; e > 0; --e) {
    if (a > limit / 10) return false;
    a *= 10;
  }
  for (int32_t e = c.exp10; e < 0; ++e) {
    if (b > limit) return false;  // 10^-e keeps growing; a reduces it by at most a's size
    b *= 10;
    int64_t g = std::gcd(a, b);
    a /= g;
    b /= g;
  }
  return a < limit && b < limit;
}

/// Why the constants of the two graphs weaken Theorem 2, if they do. The theorem needs integer
/// coefficients below q/2 in magnitude, and constants are the coefficients a program writer
/// controls: two different constants congruent modulo p (or q, inside an exponent) cannot be
/// told apart by any test.
std::vector<std::string> constant_notes(const Graph& reference, const Graph& candidate) {
  std::vector<Scalar> all;
  collect_constants(reference, all);
  collect_constants(candidate, all);
  std::sort(all.begin(), all.end(), [](const Scalar& x, const Scalar& y) {
    return std::pair(x.mantissa, x.exp10) < std::pair(y.mantissa, y.exp10);
  });
  all.erase(std::unique(all.begin(), all.end()), all.end());
  std::vector<std::string> notes;
  const int64_t limit = static_cast<int64_t>(ff::kQ / 2);
  for (const Scalar& c : all)
    if (!constant_is_small(c, limit))
      notes.push_back("the constant " + c.str() + " has a numerator or denominator of q/2 = " + std::to_string(limit) +
                      " or more, outside Theorem 2's coefficient bound");
  for (size_t i = 0; i < all.size(); ++i)
    for (size_t j = i + 1; j < all.size(); ++j)
      if (constant_residue(all[i], ff::kP) == constant_residue(all[j], ff::kP) ||
          constant_residue(all[i], ff::kQ) == constant_residue(all[j], ff::kQ))
        notes.push_back("the constants " + all[i].str() + " and " + all[j].str() +
                        " are congruent modulo p or q, so the tests cannot tell them apart");
  return notes;
}

std::string fmt_bound(double v) { return v >= 1e30 ? "1e30 or more (saturated)" : fmt(v); }

struct InputRef {
  std::string_view name;
  const Shape* shape;
};

std::vector<InputRef> graph_inputs(const Graph& g) {
  std::vector<InputRef> r;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::input) r.push_back({op.attrs.name, &g.type(op.outputs[0]).shape});
  return r;
}

/// Why the graphs cannot be compared (empty if they can). On success, `perm[k]` is the position
/// among the reference's inputs of the candidate's input k.
std::string comparability(const Graph& ref, const Graph& cand, std::vector<size_t>& perm) {
  std::vector<InputRef> ri = graph_inputs(ref), ci = graph_inputs(cand);
  std::map<std::string_view, size_t> by_name;
  for (size_t k = 0; k < ri.size(); ++k)
    if (!by_name.emplace(ri[k].name, k).second) return "the reference has two inputs named " + std::string(ri[k].name);
  std::vector<bool> matched(ri.size(), false);
  perm.assign(ci.size(), 0);
  for (size_t k = 0; k < ci.size(); ++k) {
    auto it = by_name.find(ci[k].name);
    const std::string name(ci[k].name);
    if (it == by_name.end()) return "the candidate has an input " + name + " that the reference does not have";
    if (matched[it->second]) return "the candidate has two inputs named " + name;
    matched[it->second] = true;
    if (*ri[it->second].shape != *ci[k].shape)
      return "input " + name + " has shape " + ri[it->second].shape->str() + " in the reference but " +
             ci[k].shape->str() + " in the candidate";
    perm[k] = it->second;
  }
  for (size_t k = 0; k < ri.size(); ++k)
    if (!matched[k])
      return "the reference has an input " + std::string(ri[k].name) + " that the candidate does not have";
  if (ref.outputs.size() != cand.outputs.size())
    return "the reference has " + std::to_string(ref.outputs.size()) + " output(s) but the candidate has " +
           std::to_string(cand.outputs.size());
  for (size_t k = 0; k < ref.outputs.size(); ++k) {
    const Shape& a = ref.type(ref.outputs[k]).shape;
    const Shape& b = cand.type(cand.outputs[k]).shape;
    if (a != b)
      return "output " + std::to_string(k) + " has shape " + a.str() + " in the reference but " + b.str() +
             " in the candidate";
  }
  return {};
}

bool is_identity(const std::vector<size_t>& perm) {
  for (size_t k = 0; k < perm.size(); ++k)
    if (perm[k] != k) return false;
  return true;
}

/// The reference's inputs in the candidate's order, moved out of `inputs`.
template <typename T>
std::vector<T> permuted(std::vector<T>& inputs, const std::vector<size_t>& perm) {
  std::vector<T> r;
  r.reserve(perm.size());
  for (size_t k : perm) r.push_back(std::move(inputs[k]));
  return r;
}

/// The same, copied (the inputs stay for the next candidate).
template <typename T>
std::vector<T> permuted_copy(const std::vector<T>& inputs, const std::vector<size_t>& perm) {
  std::vector<T> r;
  r.reserve(perm.size());
  for (size_t k : perm) r.push_back(inputs[k]);
  return r;
}

/// "[3, 7]" for a flat index into a row-major shape.
std::string element_index(const Shape& s, int64_t flat) {
  std::vector<int64_t> idx(static_cast<size_t>(s.rank()));
  for (int d = s.rank(); d-- > 0;) {
    idx[static_cast<size_t>(d)] = flat % s[d];
    flat /= s[d];
  }
  std::string r = "[";
  for (size_t d = 0; d < idx.size(); ++d) r += (d ? ", " : "") + std::to_string(idx[d]);
  return r + "]";
}

std::string output_label(const Graph& g, size_t k) {
  std::string r = "output " + std::to_string(k);
  if (k < g.output_names.size() && !g.output_names[k].empty()) r += " (" + g.output_names[k] + ")";
  return r;
}

/// Theorem 2's bound for one test: 8·d·K⁴/q + q^(−1/K²), at most 1.
double theorem2_bound(double d, double k) {
  const double q = static_cast<double>(ff::kQ);
  double eps = 8 * d * std::pow(k, 4) / q + std::pow(q, -1 / (k * k));
  return eps < 1 ? eps : 1;  // NaN (saturated inputs) counts as vacuous
}

/// The bound of one test with exp, silu, relu, gelu and sqrt as unknown functions (FFContext::
/// opaque_functions). The tests run in an ideal model where each
/// application of a function to a distinct formula is a fresh uniform variable; the real run
/// matches it unless two of the m applications (both graphs) get different formulas of the same
/// value in both fields. Such a pair's difference has degree ≤ e (operands' numerator plus
/// denominator degrees), zero in Z_p with probability ≤ e/p and, independently, in Z_q with ≤ e/q
/// (Schwartz–Zippel), so collisions add at most m²/2 · (e/p)·(e/q) to Theorem 2's bound of the
/// difference in the ideal model, an expression of degree d with K terms and no exponential.
double opaque_bound(double d, double k, const lax::FunctionApplications& a, const lax::FunctionApplications& b) {
  const double m = a.count + b.count;
  const double e = std::max(a.arg_num_deg, b.arg_num_deg) + std::max(a.arg_den_deg, b.arg_den_deg);
  const double collisions = m * m / 2 * (e / static_cast<double>(ff::kP)) * (e / static_cast<double>(ff::kQ));
  const double eps = theorem2_bound(d, k) + collisions;
  return eps < 1 ? eps : 1;
}

/// Tests that reach `delta` at `per_test` each, at most `max_tests`.
int tests_for(double per_test, const VerifyOptions& options) {
  const int max_tests = std::max(1, options.max_tests);
  if (options.delta >= 1) return 1;
  if (!(per_test < 1)) return max_tests;
  double n = std::ceil(std::log(options.delta) / std::log(per_test));
  return n >= 1 && n < max_tests ? static_cast<int>(n) : max_tests;
}

/// Degree d and term count K of the difference of the two graphs, output by output (Theorem 2
/// bounds the difference A/B − C/D = (A·D − C·B) / (B·D), itself of the form of Equation 2). d
/// bounds every polynomial, the denominator's too; K counts the terms of the numerator A·D − C·B
/// only: the theorem's bound is in k, the numerator's count, whatever the denominator's k'.
std::pair<double, double> difference_bounds(const std::vector<lax::Form>& a, const std::vector<lax::Form>& b) {
  double d = 0, k = 1;
  for (size_t o = 0; o < a.size() && o < b.size(); ++o) {
    lax::Form diff = lax::difference(a[o], b[o]);
    d = std::max(d, diff.degree());
    k = std::max(k, diff.numerator_terms());
  }
  return {d, k};
}

/// max|a − b| / max|b| of one output (|a − b| if b is all zeros); infinite if a value is
/// non-finite in one and not the same non-finite value in the other.
double relative_error(const HostTensor& a, const HostTensor& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    double x = a.data[i], y = b.data[i];
    if (!std::isfinite(x) || !std::isfinite(y)) {
      bool same = (std::isnan(x) && std::isnan(y)) || x == y;
      if (!same) return INFINITY;
      continue;
    }
    diff = std::max(diff, std::fabs(x - y));
    scale = std::max(scale, std::fabs(y));
  }
  return scale == 0 ? diff : diff / scale;
}

double float_error(const Graph& reference, const Graph& candidate, const std::vector<size_t>& perm, uint64_t seed,
                   int threads, std::pair<std::vector<HostTensor>, std::vector<HostTensor>>* cached = nullptr) {
  Graph cand32 = retype(candidate, DType::f32);
  InterpOptions options;
  options.threads = threads;
  std::pair<std::vector<HostTensor>, std::vector<HostTensor>> local;
  auto& [inputs, ref_out] = cached ? *cached : local;  // the cache holds one seed's: kept whole
  if (inputs.empty()) {
    Graph ref32 = retype(reference, DType::f32);
    inputs = random_inputs(ref32, seed, kDefaultMaxHostBytes, threads);
    ref_out = run_float(ref32, inputs, options);
  }
  // The cached inputs serve the next candidates too: permuted, they are copied, not moved.
  std::vector<HostTensor> cand_out =
      is_identity(perm) ? run_float(cand32, inputs, options)
                        : run_float(cand32, cached ? permuted_copy(inputs, perm) : permuted(inputs, perm), options);
  double err = 0;
  for (size_t k = 0; k < ref_out.size(); ++k) err = std::max(err, relative_error(cand_out[k], ref_out[k]));
  return err;
}

/// Compares one output of a test; returns why they differ, or an empty string.
std::string compare_output(const Graph& ref, size_t k, const FFRun& a, const FFRun& b, int test, uint64_t seed) {
  const FFTensor& x = a.outputs[k];
  const FFTensor& y = b.outputs[k];
  auto tainted = [k](const FFRun& run) { return k >= run.exp_tainted.size() || run.exp_tainted[k]; };
  const bool compare_q = !tainted(a) && !tainted(b);
  if (x.p == y.p && (!compare_q || x.q == y.q)) return {};
  int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) {
    size_t u = static_cast<size_t>(i);
    bool p_differs = x.p[u] != y.p[u];
    if (!p_differs && (!compare_q || x.q[u] == y.q[u])) continue;
    char seed_text[32];
    std::snprintf(seed_text, sizeof seed_text, "0x%016llx", static_cast<unsigned long long>(seed));
    std::string field = p_differs ? "Z_p" : "Z_q";
    uint64_t rv = p_differs ? x.p[u] : x.q[u], cv = p_differs ? y.p[u] : y.q[u];
    return output_label(ref, k) + " differs at element " + element_index(x.shape, i) + " in finite-field test " +
           std::to_string(test) + " (test seed " + seed_text + "): in " + field + " the reference gives " +
           std::to_string(rv) + " and the candidate " + std::to_string(cv);
  }
  return {};
}

}  // namespace

struct ReferenceRuns::Impl {
  size_t reference_hash = 0;
  bool bound = false;
  // Per test seed: the reference's outputs, and its inputs while the inputs kept stay within
  // max_kept_input_bytes; beyond, a test draws them again from the seed for each candidate (a
  // few ns per element). GatedMLP at the paper's shapes has 268 MB of inputs per test and 17
  // tests: all kept, its search's verification peaked at 4.7 GB (2.3 GB with 2 GiB kept, but
  // 52 s instead of 35 s for 8 candidates).
  int64_t max_kept_input_bytes = 0;
  struct FF {
    std::vector<FFTensor> inputs;  ///< empty if not kept
    FFRun run;
  };
  std::map<std::pair<uint64_t, bool>, FF> ff;  ///< by test seed and whether functions are unknown
  int64_t kept_input_bytes = 0;

  /// The entry of test seed `s` (of the unknown-function tests if `opaque`), and whether it was
  /// just made (the reference has not run yet).
  std::pair<FF*, bool> entry(uint64_t s, bool opaque) {
    auto [it, made] = ff.try_emplace({s, opaque});
    return {&it->second, made};
  }

  /// Keeps a fresh test's inputs in `f` if the budget allows (taking them from `drawn`).
  void keep_inputs(FF& f, std::vector<FFTensor>& drawn) {
    int64_t bytes = 0;
    for (const FFTensor& t : drawn) bytes += 2 * t.numel() * static_cast<int64_t>(sizeof(uint32_t));
    if (kept_input_bytes + bytes > max_kept_input_bytes) return;
    kept_input_bytes += bytes;
    f.inputs = std::exchange(drawn, {});
  }
  std::map<std::pair<uint64_t, int>, std::pair<std::vector<HostTensor>, std::vector<HostTensor>>>
      flt;  // inputs, outputs

  void bind(const Graph& reference) {
    size_t h = hash_value(reference);
    if (!bound) {
      bound = true;
      reference_hash = h;
    }
    MUGRAPH_CHECK(h == reference_hash) << "ReferenceRuns used with a second reference graph";
  }
};

ReferenceRuns::ReferenceRuns(int64_t kept_input_bytes) : impl_(std::make_unique<Impl>()) {
  impl_->max_kept_input_bytes = kept_input_bytes;
}
ReferenceRuns::~ReferenceRuns() = default;

double float_max_relative_error(const Graph& reference, const Graph& candidate, uint64_t seed, int threads,
                                ReferenceRuns* runs) {
  std::vector<size_t> perm;
  std::string why = comparability(reference, candidate, perm);
  if (!why.empty()) throw UserError("cannot compare the graphs: " + why);
  if (runs) runs->impl().bind(reference);
  return float_error(reference, candidate, perm, seed, threads, runs ? &runs->impl().flt[{seed, threads}] : nullptr);
}

namespace {

/// One candidate's verification in progress (verify_all).
struct Pending {
  const Graph* graph = nullptr;
  VerifyResult r;
  std::vector<size_t> perm;
  bool same_order = true;
  bool lax = false;
  bool theorem2_covers = false;  ///< both graphs Lax and without sqrt: Theorem 2's bound is a guarantee
  double d = 0, k = 1;           ///< Theorem 2's degree and term count of the difference
  int wanted = 1;       ///< tests Theorem 2 asks for (at most max_tests)
  /// In the tests with exp, silu, relu, gelu and sqrt as unknown functions (tried first where their bound
  /// is below Theorem 2's): their per-test bound and the tests it asks for.
  bool opaque = false;
  double opaque_per_test = 1;
  int opaque_wanted = 1;
  bool opaque_failed = false;  ///< an unknown-function test disagreed: the ordinary tests decide
  int streak_ref = 0, streak_cand = 0;
  bool done = false;  ///< verdict reached, or every wanted test passed
};

/// The reference's side of prepare(), computed once.
struct ReferenceForms {
  LaxReport lax;
  std::vector<lax::Form> forms;
  std::vector<lax::Form> opaque_forms;  ///< with exp, silu, relu, gelu and sqrt unknown functions
  lax::FunctionApplications apps;
};

/// Comparability, the Lax check, how many tests Theorem 2 asks for, and whether the candidate is
/// tested with unknown functions first.
void prepare(const Graph& reference, const ReferenceForms& ref, Pending& c, const VerifyOptions& options) {
  const LaxReport& ref_lax = ref.lax;
  const std::vector<lax::Form>& ref_forms = ref.forms;
  c.r.seed = options.seed;
  c.r.reason = comparability(reference, *c.graph, c.perm);
  if (!c.r.reason.empty()) {
    c.r.verdict = Verdict::incomparable;
    c.done = true;
    return;
  }
  std::vector<lax::Form> cand_forms;
  c.r.reference_lax = ref_lax;
  c.r.candidate_lax = lax::check_lax_forms(*c.graph, cand_forms);
  c.lax = c.r.reference_lax.lax && c.r.candidate_lax.lax;
  c.theorem2_covers = c.lax && !ref_lax.uses_sqrt && !c.r.candidate_lax.uses_sqrt;
  std::tie(c.d, c.k) = difference_bounds(ref_forms, cand_forms);
  c.r.per_test_bound = theorem2_bound(c.d, c.k);
  c.wanted = tests_for(c.r.per_test_bound, options);
  c.same_order = is_identity(c.perm);
  // exp, silu, relu, gelu and sqrt as unknown functions, where either graph applies one: a
  // guarantee for relu, gelu and sqrt, which Theorem 2 does not cover, and a bound where
  // Theorem 2's is weak or vacuous (a softmax's sum of exponentials; an MLP's down projection,
  // which sums fractions over as many denominators 1 + exp(−a) as it has terms). Candidates that
  // rest on exp's identities (exp(a + b) = exp(a)·exp(b)) fail these tests and take Theorem 2's.
  if (!options.unknown_functions) return;
  lax::FunctionApplications apps;
  std::vector<lax::Form> opaque_forms;
  lax::check_opaque_forms(*c.graph, opaque_forms, apps);
  if (ref.apps.count + apps.count == 0) return;
  auto [d, k] = difference_bounds(ref.opaque_forms, opaque_forms);
  const double eps = opaque_bound(d, k, ref.apps, apps);
  if (eps < 1 && (!c.theorem2_covers || eps < c.r.per_test_bound)) {
    c.opaque = true;
    c.opaque_per_test = eps;
    c.opaque_wanted = tests_for(eps, options);
  }
}

/// The bound, the guarantee and its notes of a candidate that passed every test.
void conclude(const Graph& reference, Pending& c, const VerifyOptions& options) {
  VerifyResult& r = c.r;
  const int max_tests = std::max(1, options.max_tests);
  // What weakens the guarantee.
  std::vector<std::string> notes = constant_notes(reference, *c.graph);
  if (c.opaque) {
    r.opaque_functions = true;
    r.per_test_bound = c.opaque_per_test;
    r.bound = std::pow(r.per_test_bound, r.tests_run);
    r.guarantee = r.bound <= options.delta && notes.empty();
    if (r.bound > options.delta)
      notes.push_back("max_tests (" + std::to_string(max_tests) + ") ran out before the bound reached delta " +
                      fmt(options.delta) + " (exp, silu, relu, gelu and sqrt as unknown functions)");
  } else {
    r.bound = r.per_test_bound < 1 ? std::pow(r.per_test_bound, r.tests_run) : 1;
    r.guarantee = c.theorem2_covers && r.bound <= options.delta && notes.empty();
    if (!r.reference_lax.lax) notes.push_back("the reference is not Lax: " + r.reference_lax.violation);
    if (!r.candidate_lax.lax) notes.push_back("the candidate is not Lax: " + r.candidate_lax.violation);
    if (!c.lax)
      notes.push_back(
          "non-Lax ops were modelled as random functions, consistent in both graphs; Theorem 2 does not cover them");
    if (r.per_test_bound >= 1) {
      notes.push_back("the per-test bound is vacuous for degree d = " + fmt_bound(c.d) + " and K = " + fmt_bound(c.k) +
                      " terms of the difference (Theorem 2: 8·d·K⁴/q + q^(−1/K²) ≥ 1)");
    } else if (r.bound > options.delta) {
      notes.push_back("max_tests (" + std::to_string(max_tests) + ") ran out before the bound reached delta " +
                      fmt(options.delta) + " (d = " + fmt_bound(c.d) + ", K = " + fmt_bound(c.k) + ")");
    }
    if (r.reference_lax.uses_sqrt || r.candidate_lax.uses_sqrt)
      notes.push_back(
          "sqrt is evaluated as a deterministic function whose square is ±x, outside Theorem 2: rewrites that "
          "rely on sqrt(x)·sqrt(y) = sqrt(x·y) are rejected, and candidates that differ from the reference only "
          "in the sign of a square root (sqrt(x²) vs x) pass a test with probability about 1/4 (the float filter "
          "catches those)");
    if (c.opaque_failed && !r.guarantee)
      notes.push_back(
          "with exp, silu, relu, gelu and sqrt as unknown functions the graphs differ: their equivalence rests on "
          "what those functions compute");
  }
  for (size_t i = 0; i < notes.size(); ++i) r.guarantee_note += (i ? "; " : "") + notes[i];
  r.verdict = Verdict::equivalent;
}

}  // namespace

std::vector<VerifyResult> verify_all(const Graph& reference, const std::vector<const Graph*>& candidates,
                                     const VerifyOptions& options, ReferenceRuns* runs, const std::atomic<bool>* stop) {
  // The command line checks these too; library and Python callers get the same refusal.
  if (!(options.delta > 0 && options.delta <= 1)) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", options.delta);
    throw UserError(std::string("verify: delta must be in (0, 1], got ") + got);
  }
  if (options.max_tests < 1)
    throw UserError("verify: max_tests is " + std::to_string(options.max_tests) + ", expected 1 or more");
  if (options.threads < 0)
    throw UserError("verify: threads is " + std::to_string(options.threads) + ", expected 0 (every core) or more");
  // Past the machine's memory the first test's inputs would be pages the kernel hands out and
  // then reclaims by killing the process.
  if (std::string why = verification_memory_refusal(reference); !why.empty()) throw UserError("verify: " + why);
  ReferenceRuns::Impl* cache = runs ? &runs->impl() : nullptr;
  if (cache) cache->bind(reference);
  ReferenceForms ref_forms;
  ref_forms.lax = lax::check_lax_forms(reference, ref_forms.forms);
  lax::check_opaque_forms(reference, ref_forms.opaque_forms, ref_forms.apps);
  std::vector<Pending> all(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    all[i].graph = candidates[i];
    prepare(reference, ref_forms, all[i], options);
  }

  // The tests, seed by seed: every candidate still under test runs on the same draw, which is
  // what it would have run alone (a candidate's n-th draw does not depend on the others), so
  // each verdict is verify()'s for that candidate alone. One draw's inputs serve them all, and
  // kernel ops they share are computed once per draw (FFOpCache). First the candidates tested
  // with unknown functions (their own draws, from another seed stream); those whose test
  // disagrees join the ordinary tests after.
  const FFBufferReuse reuse;  // each draw runs the same graphs again
  for (const bool opaque : {true, false}) {
    uint64_t draw = 0;
    auto in_phase = [opaque](const Pending& c) { return !c.done && c.opaque == opaque; };
    auto under_test = [&] { return std::any_of(all.begin(), all.end(), in_phase); };
    // A candidate whose unknown-function test disagrees, or keeps dividing by zero, goes on to the
    // ordinary tests, which decide.
    auto leave_opaque = [](Pending& c) {
      c.opaque = false;
      c.opaque_failed = true;
      c.r.tests_run = 0;
      c.streak_ref = c.streak_cand = 0;
    };
    // A draw voided by a zero divisor is drawn again; too many in a row end with `verdict`.
    auto redraw = [&](Pending& c, int& streak, Verdict verdict, const char* who, const char* why) {
      ++c.r.redraws;
      if (++streak < kMaxRedrawsInARow) return;
      if (opaque) return leave_opaque(c);
      c.r.verdict = verdict;
      c.r.reason = std::string(who) + " divides by zero on " + std::to_string(streak) + " random draws in a row" + why;
      c.done = true;
    };
    while (under_test()) {
      if (stop && stop->load()) return {};
      const uint64_t s = draw_seed(opaque ? options.seed ^ kOpaqueSeedSalt : options.seed, draw++);
      FFContext ctx{random_root_of_unity(splitmix64(s ^ 0x5bd1e995u)), s, opaque};
      FFOpCache shared;
      // The reference's side of the test: from the cache where it ran before (drawing the inputs
      // again if they were not kept), else run now.
      ReferenceRuns::Impl::FF local;
      ReferenceRuns::Impl::FF* ref = &local;
      bool fresh = true;
      if (cache) std::tie(ref, fresh) = cache->entry(s, opaque);
      std::vector<FFTensor> drawn;
      if (ref->inputs.empty()) drawn = random_ff_inputs(reference, s, options.threads);
      if (fresh) {
        ref->run = run_ff(reference, drawn, ctx, options.threads, &shared);
        if (cache) cache->keep_inputs(*ref, drawn);
      }
      const std::vector<FFTensor>& inputs = drawn.empty() ? ref->inputs : drawn;
      const FFRun& a = ref->run;
      for (Pending& c : all) {
        if (!in_phase(c)) continue;
        VerifyResult& r = c.r;
        if (a.zero_divisor) {
          redraw(c, c.streak_ref, Verdict::incomparable, "the reference", " (is a divisor identically zero?)");
          continue;
        }
        FFRun b = c.same_order ? run_ff(*c.graph, inputs, ctx, options.threads, &shared)
                               : run_ff(*c.graph, permuted_copy(inputs, c.perm), ctx, options.threads, &shared);
        if (b.zero_divisor) {
          redraw(c, c.streak_cand, Verdict::not_equivalent, "the candidate", " where the reference does not");
          continue;
        }
        c.streak_ref = c.streak_cand = 0;
        bool differs = false;
        for (size_t o = 0; o < a.outputs.size() && !differs; ++o) {
          std::string why = compare_output(reference, o, a, b, r.tests_run, s);
          if (why.empty()) continue;
          differs = true;
          if (opaque) {
            leave_opaque(c);
          } else {
            r.verdict = Verdict::not_equivalent;
            r.reason = why;
            c.done = true;
          }
        }
        if (differs) continue;
        if (++r.tests_run >= (opaque ? c.opaque_wanted : c.wanted)) {
          conclude(reference, c, options);
          c.done = true;
        }
      }
      for (FFTensor& t : drawn) ff_detail::give_buffers(t);  // the next draw's inputs (none if the cache kept them)
    }
  }

  std::vector<VerifyResult> results;
  for (Pending& c : all) {
    VerifyResult& r = c.r;
    if (r.verdict == Verdict::equivalent && options.float_check) {
      r.float_max_rel_error = float_error(reference, *c.graph, c.perm, options.seed, options.threads,
                                          cache ? &cache->flt[{options.seed, options.threads}] : nullptr);
      if (!(r.float_max_rel_error <= options.float_tolerance)) {
        r.verdict = Verdict::not_equivalent;
        r.guarantee = false;  // a guarantee is about equivalence; this verdict rests on the float run
        r.reason = "numerically unstable: float relative error " + fmt(r.float_max_rel_error) + " > tolerance " +
                   fmt(options.float_tolerance) + " (f32 run, input seed " + std::to_string(options.seed) + ")";
      }
    }
    results.push_back(std::move(r));
  }
  return results;
}

int64_t verification_bytes_lower_bound(const Graph& program) {
  constexpr int64_t kBytesPerElement = 2 * sizeof(uint32_t);
  std::vector<bool> counted(program.tensors.size(), false);
  int64_t elements = 0;
  auto count = [&](TensorId t) {
    if (counted[t.index()]) return;
    counted[t.index()] = true;
    elements += program.type(t).shape.numel();
  };
  for (const Op& op : program.ops)
    if (op.kind == OpKind::input) count(op.outputs.at(0));
  for (TensorId t : program.outputs) count(t);
  // At most 2^40 elements a tensor (kMaxElements), 2^43 bytes: 2^20 tensors stay below 2^63.
  return elements * kBytesPerElement;
}

std::string verification_memory_refusal(const Graph& reference) {
  const int64_t usable = machine_usable_memory_bytes();
  const int64_t needed = verification_bytes_lower_bound(reference);
  if (usable <= 0 || needed <= usable) return "";
  return "verification runs the graphs on random inputs at the program's size over two finite fields, which "
         "takes at least " +
         gib_text(needed, 1) + " (the inputs and outputs, 8 bytes an element), more than the " + gib_text(usable, 1) +
         " of memory this process may use";
}

VerifyResult verify(const Graph& reference, const Graph& candidate, const VerifyOptions& options, ReferenceRuns* runs) {
  return verify_all(reference, {&candidate}, options, runs).front();
}

}  // namespace mugraph
