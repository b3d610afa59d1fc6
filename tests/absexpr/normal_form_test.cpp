// The normal form that decides A_eq (docs/absexpr.md): one positive test per axiom of the paper's
// Table 2 with non-trivial subterms, negative tests for what the axioms do not give, the
// hand-written μGraphs against their programs, limits, threads, and a randomized property test
// (random axiom applications keep the NF; certain changes change it).
#include "mugraph/normal_form.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "axiom_rewrites.h"
#include "mugraph/absexpr.h"
#include "mugraph/frontend.h"
#include "mugraph/loader.h"
#include "test_graphs.h"

namespace mugraph {
namespace {

using testing_axioms::apply_axiom;
using testing_axioms::kAxiomNames;
using testing_axioms::kAxioms;
using testing_axioms::occurrences;
using testing_axioms::RandomTerms;
using testing_axioms::replace_at;
using testing_axioms::rewrite_once;

std::string source_dir() {
  const char* dir = std::getenv("MUGRAPH_SOURCE_DIR");
  return dir ? dir : MUGRAPH_SOURCE_DIR_DEFAULT;
}

/// A pool of terms and one of normal forms, with the test's shorthand.
struct Fixture {
  ExprPool p;
  NormalFormPool nf;

  ExprId v(const char* name) { return p.var(name); }
  ExprId c(const char* text) { return p.constant(*parse_scalar(text)); }
  NfId id(ExprId e) {
    NfResult r = normal_form(e, p, nf);
    EXPECT_TRUE(r.ok()) << nf_stop_name(r.stop) << " for " << p.str(e);
    return r.id;
  }
  std::string str(ExprId e) { return nf.str(id(e)); }
  ::testing::AssertionResult equal(ExprId a, ExprId b) {
    std::optional<bool> eq = aeq_equal(a, b, p, nf);
    if (!eq) return ::testing::AssertionFailure() << "a limit was hit";
    if (*eq) return ::testing::AssertionSuccess() << str(a);
    return ::testing::AssertionFailure() << p.str(a) << " -> " << str(a) << "\n vs " << p.str(b) << " -> " << str(b);
  }
  // Non-trivial subterms: a sum with an exp in it, a quotient of a sqrt by an atom, a sum of an add.
  ExprId x() { return p.add(v("X"), p.sum(4, p.mul(v("Y"), p.exp(v("Z"))))); }
  ExprId y() { return p.div(p.sqrt(p.add(v("X"), v("W"))), p.relu(v("Y"))); }
  ExprId z() { return p.sum(8, p.add(p.mul(v("X"), v("W")), c("2"))); }
};

// --- one test per axiom ---------------------------------------------------------------------

TEST(NormalForm, AddCommutativeAndAssociative) {
  Fixture f;
  ExprId x = f.x(), y = f.y(), z = f.z();
  EXPECT_TRUE(f.equal(f.p.add(x, y), f.p.add(y, x)));
  EXPECT_TRUE(f.equal(f.p.add(f.p.add(x, y), z), f.p.add(x, f.p.add(y, z))));
  EXPECT_TRUE(f.equal(f.p.add(f.p.add(x, y), z), f.p.add(f.p.add(z, x), y)));
}

TEST(NormalForm, MulCommutativeAndAssociative) {
  Fixture f;
  ExprId x = f.x(), y = f.y(), z = f.z();
  EXPECT_TRUE(f.equal(f.p.mul(x, y), f.p.mul(y, x)));
  EXPECT_TRUE(f.equal(f.p.mul(f.p.mul(x, y), z), f.p.mul(x, f.p.mul(y, z))));
  EXPECT_TRUE(f.equal(f.p.mul(f.p.mul(x, y), z), f.p.mul(f.p.mul(z, x), y)));
}

TEST(NormalForm, MulDistributesOverAdd) {
  Fixture f;
  ExprId x = f.x(), y = f.y(), z = f.z();
  EXPECT_TRUE(f.equal(f.p.mul(x, f.p.add(y, z)), f.p.add(f.p.mul(x, y), f.p.mul(x, z))));
  // Inside a denominator too.
  ExprId w = f.v("W");
  EXPECT_TRUE(f.equal(f.p.div(w, f.p.mul(x, f.p.add(y, z))), f.p.div(w, f.p.add(f.p.mul(x, y), f.p.mul(x, z)))));
}

TEST(NormalForm, DivDistributesOverAdd) {
  Fixture f;
  ExprId x = f.x(), y = f.y(), z = f.z();
  EXPECT_TRUE(f.equal(f.p.div(f.p.add(x, y), z), f.p.add(f.p.div(x, z), f.p.div(y, z))));
}

TEST(NormalForm, MulDivReassociate) {
  Fixture f;
  ExprId x = f.x(), y = f.y(), z = f.z();
  EXPECT_TRUE(f.equal(f.p.mul(x, f.p.div(y, z)), f.p.div(f.p.mul(x, y), z)));
}

TEST(NormalForm, DivDivIsDivByProduct) {
  Fixture f;
  ExprId x = f.x(), y = f.y(), z = f.z();
  EXPECT_TRUE(f.equal(f.p.div(f.p.div(x, y), z), f.p.div(x, f.p.mul(y, z))));
  // The denominators are collected into one expanded product whichever way they came in.
  EXPECT_TRUE(f.equal(f.p.mul(f.p.div(x, y), f.p.div(y, z)), f.p.div(f.p.mul(x, y), f.p.mul(z, y))));
}

TEST(NormalForm, SumOfOneIsIdentity) {
  // The ExprPool folds sum(1, x) already; the NF agrees with it on every kind of term.
  Fixture f;
  ExprId x = f.x(), y = f.y();
  EXPECT_TRUE(f.equal(x, f.p.sum(1, x)));
  EXPECT_TRUE(f.equal(f.p.div(x, y), f.p.div(f.p.sum(1, x), f.p.sum(1, y))));
}

TEST(NormalForm, NestedSumsMultiply) {
  Fixture f;
  ExprId x = f.x();
  EXPECT_TRUE(f.equal(f.p.sum(3, f.p.sum(5, x)), f.p.sum(15, x)));
  EXPECT_TRUE(f.equal(f.p.sum(16, f.p.sum(256, x)), f.p.sum(4096, x)));
  EXPECT_TRUE(f.equal(f.p.sum(16, f.p.sum(256, x)), f.p.sum(64, f.p.sum(64, x))));
}

TEST(NormalForm, SumOverAdd) {
  Fixture f;
  ExprId x = f.x(), y = f.y();
  EXPECT_TRUE(f.equal(f.p.sum(6, f.p.add(x, y)), f.p.add(f.p.sum(6, x), f.p.sum(6, y))));
}

TEST(NormalForm, SumPastMul) {
  Fixture f;
  ExprId x = f.x(), y = f.y();
  EXPECT_TRUE(f.equal(f.p.sum(6, f.p.mul(x, y)), f.p.mul(f.p.sum(6, x), y)));
  EXPECT_TRUE(f.equal(f.p.sum(6, f.p.mul(x, y)), f.p.mul(x, f.p.sum(6, y))));
  EXPECT_TRUE(f.equal(f.p.mul(f.p.sum(2, x), f.p.sum(3, y)), f.p.sum(6, f.p.mul(x, y))));
}

TEST(NormalForm, SumPastDivNumerator) {
  Fixture f;
  ExprId x = f.x(), y = f.y();
  EXPECT_TRUE(f.equal(f.p.sum(6, f.p.div(x, y)), f.p.div(f.p.sum(6, x), y)));
}

TEST(NormalForm, ExpOfAddIsProductOfExps) {
  Fixture f;
  ExprId x = f.x(), y = f.y(), z = f.z();
  EXPECT_TRUE(f.equal(f.p.mul(f.p.exp(x), f.p.exp(y)), f.p.exp(f.p.add(x, y))));
  // Merging inside a monomial that has other factors and a denominator.
  EXPECT_TRUE(
      f.equal(f.p.mul(f.p.div(f.p.mul(z, f.p.exp(x)), y), f.p.exp(y)), f.p.div(f.p.mul(z, f.p.exp(f.p.add(y, x))), y)));
}

TEST(NormalForm, SqrtOfProductIsProductOfSqrts) {
  Fixture f;
  ExprId x = f.x(), y = f.y(), z = f.z();
  EXPECT_TRUE(f.equal(f.p.mul(f.p.sqrt(x), f.p.sqrt(y)), f.p.sqrt(f.p.mul(x, y))));
  EXPECT_TRUE(f.equal(f.p.mul(f.p.mul(f.p.sqrt(x), z), f.p.sqrt(y)), f.p.mul(z, f.p.sqrt(f.p.mul(y, x)))));
}

// --- what the axioms do not give -------------------------------------------------------------

TEST(NormalForm, NoCounting) {
  Fixture f;
  ExprId x = f.x();
  EXPECT_FALSE(f.equal(f.p.add(x, x), f.p.sum(2, x)));
  EXPECT_FALSE(f.equal(f.p.sum(4, x), f.p.sum(2, x)));
  EXPECT_FALSE(f.equal(f.p.sum(4, x), f.p.mul(f.c("4"), x)));
  EXPECT_FALSE(f.equal(f.p.exp(f.p.sum(2, x)), f.p.mul(f.p.exp(x), f.p.exp(x))));
  EXPECT_TRUE(f.equal(f.p.exp(f.p.add(x, x)), f.p.mul(f.p.exp(x), f.p.exp(x))));
}

TEST(NormalForm, NoCancellation) {
  Fixture f;
  ExprId a = f.x(), b = f.y(), x = f.v("X"), y = f.v("Y"), z = f.v("Z");
  EXPECT_FALSE(f.equal(f.p.div(f.p.exp(a), f.p.exp(b)), f.p.exp(f.p.add(a, b))));
  EXPECT_FALSE(f.equal(f.p.div(x, f.p.div(y, z)), f.p.div(f.p.mul(x, z), y)));
  EXPECT_FALSE(f.equal(f.p.div(a, a), f.c("1")));
  EXPECT_FALSE(f.equal(f.p.div(f.p.mul(a, b), b), a));
  EXPECT_FALSE(f.equal(f.p.mul(f.p.sqrt(a), f.p.sqrt(a)), a));
  EXPECT_FALSE(f.equal(f.p.div(a, f.p.sum(4, b)), f.p.sum(4, f.p.div(a, b))));
  EXPECT_FALSE(f.equal(f.p.mul(a, f.c("1")), a));
}

TEST(NormalForm, OpaqueAtoms) {
  Fixture f;
  ExprId x = f.x(), y = f.y();
  // Atoms see their argument's NF (a congruence) but nothing passes through them.
  EXPECT_TRUE(f.equal(f.p.relu(f.p.sum(4, f.p.sum(2, x))), f.p.relu(f.p.sum(8, x))));
  EXPECT_FALSE(f.equal(f.p.relu(f.p.add(x, y)), f.p.add(f.p.relu(x), f.p.relu(y))));
  EXPECT_FALSE(f.equal(f.p.sum(4, f.p.silu(x)), f.p.silu(f.p.sum(4, x))));
  EXPECT_FALSE(f.equal(f.p.gelu(x), f.p.relu(x)));
  EXPECT_FALSE(f.equal(f.p.concat(x, y), f.p.concat(y, x)));
  EXPECT_TRUE(f.equal(f.p.concat(f.p.add(x, y), y), f.p.concat(f.p.add(y, x), y)));
  EXPECT_FALSE(f.equal(f.p.sqrt(x), f.p.exp(x)));
}

TEST(NormalForm, PrintsSortedText) {
  Fixture f;
  ExprId x = f.v("X"), y = f.v("Y"), z = f.v("Z");
  EXPECT_EQ(f.str(f.p.sum(4, f.p.mul(x, f.p.div(y, z)))), "4*X*Y/(Z)");
  EXPECT_EQ(f.str(f.p.mul(f.p.add(x, y), f.p.exp(z))), "X*exp(Z) + Y*exp(Z)");
  EXPECT_EQ(f.str(f.p.mul(f.p.sqrt(x), f.p.sqrt(f.c("4096")))), "sqrt(X*c4096)");
  EXPECT_EQ(f.str(f.p.concat(x, f.p.relu(y))), "concat(X, relu(Y))");
}

// --- the hand-written μGraphs against their programs -----------------------------------------

TEST(NormalForm, Figure3bEqualsItsProgram) {
  Fixture f;
  ExprId fused = output_expressions(test::rmsnorm_fig3b(16, 4096, 4096, 128, 16), f.p)[0];
  ExprId program = output_expressions(load_program_file(source_dir() + "/examples/rmsnorm_linear.mg"), f.p)[0];
  // The program divides before the matmul, the μGraph after: sum past div and mul/div
  // re-association relate them, and sum(16, sum(256, ·)) is sum(4096, ·).
  ASSERT_NE(fused, program);
  EXPECT_TRUE(f.equal(fused, program));
  EXPECT_EQ(f.str(program), "4096*G*W*X/(sqrt(4096*X*X/(c4096)))");
}

TEST(NormalForm, EveryExampleUGraphEqualsItsProgram) {
  std::ifstream in(source_dir() + "/examples/ugraphs/references.txt");
  ASSERT_TRUE(in) << "references.txt not found (set MUGRAPH_SOURCE_DIR)";
  std::string line;
  int pairs = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string ugraph, program;
    ASSERT_TRUE(words >> ugraph >> program) << line;
    Fixture f;
    std::vector<ExprId> got = output_expressions(load_graph_file(source_dir() + "/examples/ugraphs/" + ugraph), f.p);
    std::vector<ExprId> want = output_expressions(load_program_file(source_dir() + "/examples/" + program), f.p);
    ASSERT_EQ(got.size(), want.size()) << line;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(f.equal(got[i], want[i])) << line << " output " << i;
    ++pairs;
  }
  EXPECT_GE(pairs, 4);
}

// --- limits, caching, threads ------------------------------------------------------------------

TEST(NormalForm, TooManyMonomialsStopsWithAReason) {
  Fixture f;
  ExprId e = f.p.add(f.v("A0"), f.v("B0"));
  for (int i = 1; i < 13; ++i) {
    std::string a = "A" + std::to_string(i), b = "B" + std::to_string(i);
    e = f.p.mul(e, f.p.add(f.p.var(a), f.p.var(b)));  // 2^13 = 8192 monomials
  }
  NfResult r = normal_form(e, f.p, f.nf);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.stop, NfStop::too_many_monomials);
  EXPECT_FALSE(aeq_equal(e, e, f.p, f.nf).has_value());  // both past the limit: no answer
  // One past the limit and one within it differ (limits are monotone): a definite false.
  EXPECT_EQ(aeq_equal(e, f.v("A0"), f.p, f.nf), std::optional<bool>(false));
  EXPECT_EQ(aeq_equal(f.v("A0"), e, f.p, f.nf), std::optional<bool>(false));
  // The stop is cached and propagates to every term above.
  EXPECT_EQ(normal_form(f.p.exp(e), f.p, f.nf).stop, NfStop::too_many_monomials);

  NormalFormPool big(NormalFormLimits{1 << 14});
  NfResult rb = normal_form(e, f.p, big);
  ASSERT_TRUE(rb.ok());
  EXPECT_EQ(big.monomials(rb.id).size(), 8192u);
}

TEST(NormalForm, CoefficientOverflowStopsWithAReason) {
  Fixture f;
  ExprId e = f.p.sum(int64_t{1} << 40, f.p.sum(int64_t{1} << 40, f.v("X")));
  EXPECT_EQ(normal_form(e, f.p, f.nf).stop, NfStop::coefficient_overflow);
  ExprId ok = f.p.sum(int64_t{1} << 31, f.p.sum(int64_t{1} << 31, f.v("X")));
  EXPECT_TRUE(normal_form(ok, f.p, f.nf).ok());
  EXPECT_EQ(nf_stop_name(NfStop::coefficient_overflow), "coefficient_overflow");
}

TEST(NormalForm, DeepTermsNeedNoRecursion) {
  Fixture f;
  ExprId e = f.v("X");
  for (int i = 0; i < 50000; ++i) e = (i % 2) ? f.p.relu(e) : f.p.exp(e);
  EXPECT_TRUE(normal_form(e, f.p, f.nf).ok());
  EXPECT_EQ(f.nf.stats().cached, f.p.size());
}

TEST(NormalForm, RejectsASecondExprPool) {
  Fixture f;
  f.id(f.v("X"));
  ExprPool other;
  EXPECT_THROW(normal_form(other.var("X"), other, f.nf), InternalError);
  EXPECT_THROW(f.nf.str(NfId{12345}), InternalError);
}

TEST(NormalForm, ConcurrentCallsAgree) {
  Fixture f;
  std::vector<ExprId> terms;
  for (int i = 0; i < 64; ++i) {
    ExprId t = f.p.sum(i + 2, f.p.mul(f.x(), f.p.add(f.y(), f.p.var("V" + std::to_string(i)))));
    terms.push_back(t);
  }
  std::vector<std::vector<NfId>> got(4);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < got.size(); ++k) {
    threads.emplace_back([&, k] {
      got[k].resize(terms.size());
      for (size_t i = 0; i < terms.size(); ++i) {
        size_t j = (i + 16 * k) % terms.size();  // different orders per thread
        got[k][j] = normal_form(terms[j], f.p, f.nf).id;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t k = 1; k < got.size(); ++k) EXPECT_EQ(got[k], got[0]);
}

// --- randomized: axioms keep the NF, certain changes change it -------------------------------

TEST(NormalFormProperty, RandomAxiomApplicationsKeepTheNormalForm) {
  ExprPool p;
  NormalFormPool nf;
  RandomTerms r(p, 20240611);
  std::array<int, kAxioms> applied{};
  int total = 0, skipped = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    ExprId t = r.term(4);
    NfResult want = normal_form(t, p, nf);
    if (!want.ok()) {
      ++skipped;
      continue;
    }
    for (int step = 0; step < 12; ++step) {
      int axiom = -1;
      int64_t pos = -1;
      const ExprId next = rewrite_once(p, t, r, &axiom, &pos);
      if (axiom < 0) continue;
      NfResult got = normal_form(next, p, nf);
      ASSERT_TRUE(got.ok()) << nf_stop_name(got.stop);
      ASSERT_EQ(got.id, want.id) << kAxiomNames[axiom] << " at occurrence " << pos << "\n"
                                 << p.str(t) << "\n -> " << p.str(next) << "\n"
                                 << nf.str(want.id) << "\n vs " << nf.str(got.id);
      ++applied[static_cast<size_t>(axiom)];
      ++total;
      t = next;
    }
  }
  EXPECT_GE(total, 2000);
  EXPECT_LT(skipped, 100);
  for (int k = 0; k < kAxioms; ++k) EXPECT_GE(applied[static_cast<size_t>(k)], 10) << kAxiomNames[k];
}

// Whether a term passes a limit depends on its normal form alone (normal_form.h, "Limits are
// monotone"): the search's oracle answers `no` for a term past a limit on that ground. Terms
// rewritten by the axioms have the same normal form but other subterms and intermediate products,
// so a small pool must stop on both or on neither.
TEST(NormalFormProperty, PassingALimitDependsOnTheNormalFormAlone) {
  ExprPool p;
  NormalFormPool roomy;
  NormalFormPool small(NormalFormLimits{3});
  RandomTerms r(p, 20261123);
  int pairs = 0, both_stopped = 0, neither_stopped = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    ExprId t = r.term(5);
    NfResult want = normal_form(t, p, roomy);
    if (!want.ok()) continue;
    const bool stops = !normal_form(t, p, small).ok();
    for (int step = 0; step < 8; ++step) {
      std::vector<std::pair<ExprId, bool>> occ;
      occurrences(p, t, true, occ);
      int64_t pos = r.pick(static_cast<int>(occ.size()));
      std::optional<ExprId> rewritten;
      for (int tries = 0; tries < 4 * kAxioms && !rewritten; ++tries)
        rewritten = apply_axiom(p, occ[static_cast<size_t>(pos)].first, r.pick(kAxioms), r);
      if (!rewritten) continue;
      int64_t counter = 0;
      ExprId next = replace_at(p, t, pos, counter, [&](ExprId) { return *rewritten; });
      ASSERT_EQ(normal_form(next, p, roomy).id, want.id);
      ASSERT_EQ(!normal_form(next, p, small).ok(), stops) << p.str(t) << "\n -> " << p.str(next);
      // And so the answer of aeq_equal is never "unknown" for one past the limit and one within.
      ExprId within = p.var("X");
      ASSERT_EQ(aeq_equal(next, within, p, small).has_value(), true);
      ++pairs;
      (stops ? both_stopped : neither_stopped) += 1;
      t = next;
    }
  }
  EXPECT_GE(pairs, 2000);
  EXPECT_GE(both_stopped, 200);  // the limit is small enough to matter
  EXPECT_GE(neither_stopped, 200);
}

TEST(NormalFormProperty, CertainChangesChangeTheNormalForm) {
  ExprPool p;
  NormalFormPool nf;
  RandomTerms r(p, 20240611);
  ExprId fresh = p.var("Q");  // never generated by Random::term
  int var_changes = 0, sum_changes = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    ExprId t = r.term(4);
    NfResult want = normal_form(t, p, nf);
    if (!want.ok()) continue;
    std::vector<std::pair<ExprId, bool>> occ;
    occurrences(p, t, true, occ);
    std::vector<int64_t> vars, sums;
    for (size_t i = 0; i < occ.size(); ++i) {
      const ExprNode& n = p.node(occ[i].first);
      if (n.kind == ExprKind::var) vars.push_back(static_cast<int64_t>(i));
      if (n.kind == ExprKind::sum && occ[i].second) sums.push_back(static_cast<int64_t>(i));
    }
    // A fresh variable: every variable occurrence survives into the NF (nothing cancels), and Q
    // occurs in no term before the change.
    if (!vars.empty()) {
      int64_t counter = 0;
      int64_t pos = vars[static_cast<size_t>(r.pick(static_cast<int>(vars.size())))];
      ExprId changed = replace_at(p, t, pos, counter, [&](ExprId) { return fresh; });
      NfResult got = normal_form(changed, p, nf);
      ASSERT_TRUE(got.ok());
      EXPECT_NE(got.id, want.id) << p.str(t) << "\n -> " << p.str(changed);
      ++var_changes;
    }
    // A sum size on a numerator path: the total of the NF's coefficients is additive over add,
    // multiplicative over mul, scaled by sum and unchanged by a denominator, so it grows strictly.
    if (!sums.empty()) {
      int64_t counter = 0;
      int64_t pos = sums[static_cast<size_t>(r.pick(static_cast<int>(sums.size())))];
      ExprId changed =
          replace_at(p, t, pos, counter, [&](ExprId s) { return p.sum(p.node(s).value + 1, p.node(s).a); });
      NfResult got = normal_form(changed, p, nf);
      ASSERT_TRUE(got.ok());
      EXPECT_NE(got.id, want.id) << p.str(t) << "\n -> " << p.str(changed);
      ++sum_changes;
    }
  }
  EXPECT_GE(var_changes, 1000);
  EXPECT_GE(sum_changes, 500);
}

}  // namespace
}  // namespace mugraph
