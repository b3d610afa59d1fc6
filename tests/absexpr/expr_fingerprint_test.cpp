// Fingerprints of abstract expressions (expr_fingerprint.h): every axiom keeps them, certain
// changes change them, where the image has no value they say so, and aeq_equal uses them to tell
// apart terms whose normal forms are both past the limits — among them a GPT-2 MLP block and a
// wrong μGraph of it that the search once took for a candidate.
#include "mugraph/expr_fingerprint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <string>
#include <vector>

#include "axiom_rewrites.h"
#include "mugraph/absexpr.h"
#include "mugraph/error.h"
#include "mugraph/ffield.h"
#include "mugraph/frontend.h"
#include "mugraph/normal_form.h"

namespace mugraph {
namespace {

using testing_axioms::apply_axiom;
using testing_axioms::kAxiomNames;
using testing_axioms::kAxioms;
using testing_axioms::occurrences;
using testing_axioms::RandomTerms;
using testing_axioms::replace_at;
using testing_axioms::rewrite_once;

TEST(ExprFingerprint, RandomAxiomApplicationsKeepTheFingerprint) {
  ExprPool p;
  ExprFingerprints prints;
  RandomTerms r(p, 20261205);
  std::array<int, kAxioms> applied{};
  int with_print = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    ExprId t = r.term(5);  // deeper than the normal-form tests: many of these are past its limits
    const std::optional<ExprFingerprint> want = prints.of(t, p);
    if (!want) continue;
    ++with_print;
    for (int step = 0; step < 12; ++step) {
      int axiom = -1;
      const ExprId next = rewrite_once(p, t, r, &axiom);
      if (axiom < 0) continue;
      const std::optional<ExprFingerprint> got = prints.of(next, p);
      // A rewrite may move a zero denominator or an exp in and out of view only together with the
      // value: the image of the rewritten term is the same function.
      ASSERT_TRUE(got.has_value()) << kAxiomNames[axiom] << "\n" << p.str(t) << "\n -> " << p.str(next);
      ASSERT_EQ(*got, *want) << kAxiomNames[axiom] << "\n" << p.str(t) << "\n -> " << p.str(next);
      ++applied[static_cast<size_t>(axiom)];
      t = next;
    }
  }
  EXPECT_GE(with_print, 1500);
  for (int k = 0; k < kAxioms; ++k) EXPECT_GE(applied[static_cast<size_t>(k)], 10) << kAxiomNames[k];
}

TEST(ExprFingerprint, AFreshVariableOrALargerSumChangesIt) {
  ExprPool p;
  ExprFingerprints prints;
  RandomTerms r(p, 20261206);
  const ExprId fresh = p.var("Q");
  int compared = 0, differ = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const ExprId t = r.term(5);
    const std::optional<ExprFingerprint> want = prints.of(t, p);
    if (!want) continue;
    std::vector<std::pair<ExprId, bool>> occ;
    occurrences(p, t, true, occ);
    std::vector<int64_t> vars, sums;
    for (size_t i = 0; i < occ.size(); ++i) {
      const ExprNode& n = p.node(occ[i].first);
      if (n.kind == ExprKind::var) vars.push_back(static_cast<int64_t>(i));
      if (n.kind == ExprKind::sum && occ[i].second) sums.push_back(static_cast<int64_t>(i));
    }
    std::vector<ExprId> changed;
    if (!vars.empty()) {
      int64_t counter = 0;
      const int64_t pos = vars[static_cast<size_t>(r.pick(static_cast<int>(vars.size())))];
      changed.push_back(replace_at(p, t, pos, counter, [&](ExprId) { return fresh; }));
    }
    if (!sums.empty()) {
      int64_t counter = 0;
      const int64_t pos = sums[static_cast<size_t>(r.pick(static_cast<int>(sums.size())))];
      changed.push_back(
          replace_at(p, t, pos, counter, [&](ExprId s) { return p.sum(p.node(s).value + 1, p.node(s).a); }));
    }
    for (ExprId c : changed) {
      const std::optional<ExprFingerprint> got = prints.of(c, p);
      if (!got) continue;
      ++compared;
      differ += *got != *want;
    }
  }
  EXPECT_GE(compared, 1500);
  // Two points in fields of about 2^30: a change that survives into the image is missed with
  // probability about (degree / q)^2. What the image identifies (x + x = sum(2, x), sqrt as a
  // power) can hide a change only where the term holds such a pair; allow a handful.
  EXPECT_GE(differ, compared - 5) << differ << " of " << compared;
}

TEST(ExprFingerprint, SaysWhereTheImageHasNoValue) {
  ExprPool p;
  ExprFingerprints prints;
  const ExprId x = p.var("X"), y = p.var("Y");
  EXPECT_TRUE(prints.of(p.exp(p.mul(x, y)), p).has_value());
  EXPECT_TRUE(prints.of(p.mul(p.exp(x), p.sqrt(p.exp(y))), p).has_value());
  // An exp inside an exp's argument needs the value of exp in Z_q.
  EXPECT_FALSE(prints.of(p.exp(p.exp(x)), p).has_value());
  EXPECT_FALSE(prints.of(p.exp(p.add(x, p.div(y, p.exp(x)))), p).has_value());
  // A sum over p elements is zero in Z_p: dividing by it has no value.
  const ExprId zero = p.sum(static_cast<int64_t>(ff::kP), x);
  EXPECT_FALSE(prints.of(p.div(y, zero), p).has_value());
  EXPECT_TRUE(prints.of(p.div(zero, y), p).has_value());
  EXPECT_FALSE(fingerprints_differ(p.div(y, zero), x, p, prints));
}

TEST(ExprFingerprint, DependsOnTheSeedOnly) {
  ExprPool p, q;
  ExprFingerprints a(1), b(1), c(2);
  const ExprId t = p.div(p.sum(64, p.mul(p.var("X"), p.var("W"))), p.sqrt(p.sum(64, p.mul(p.var("X"), p.var("X")))));
  // The same term built in another pool, in another order of ids.
  const ExprId x = q.var("X"), w = q.var("W");
  const ExprId u = q.div(q.sum(64, q.mul(w, x)), q.sqrt(q.sum(64, q.mul(x, x))));
  EXPECT_EQ(a.of(t, p), b.of(u, q));
  EXPECT_NE(a.of(t, p), c.of(t, p));
  EXPECT_THROW(a.of(x, q), InternalError);
}

TEST(ExprFingerprint, OpaqueAtomsKeepTheirKindAndOrder) {
  ExprPool p;
  ExprFingerprints prints;
  const ExprId x = p.var("X"), y = p.var("Y");
  EXPECT_TRUE(fingerprints_differ(p.relu(x), p.silu(x), p, prints));
  EXPECT_TRUE(fingerprints_differ(p.gelu(x), p.gelu(y), p, prints));
  EXPECT_TRUE(fingerprints_differ(p.concat(x, y), p.concat(y, x), p, prints));
  EXPECT_FALSE(fingerprints_differ(p.relu(p.add(x, y)), p.relu(p.add(y, x)), p, prints));
  // Constants are atoms by their value, as in the normal form: 2 · 2 is not 4.
  const ExprId two = p.constant(*parse_scalar("2")), four = p.constant(*parse_scalar("4"));
  EXPECT_TRUE(fingerprints_differ(p.mul(p.mul(two, two), x), p.mul(four, x), p, prints));
}

// Terms past a small pool's limits: rewrites keep aeq_equal without an answer, changes make it
// false (before fingerprints it had no answer for either).
TEST(ExprFingerprint, AeqEqualTellsApartTermsPastTheLimits) {
  ExprPool p;
  NormalFormPool small(NormalFormLimits{3});
  RandomTerms r(p, 20261207);
  const ExprId fresh = p.var("Q");
  int rewrites = 0, changes = 0;
  for (int trial = 0; trial < 20000 && (rewrites < 200 || changes < 200); ++trial) {
    const ExprId t = r.term(5);
    if (normal_form(t, p, small).ok() || !small.fingerprints().of(t, p)) continue;
    const ExprId rewritten = rewrite_once(p, t, r);
    if (rewritten != t && !normal_form(rewritten, p, small).ok()) {
      EXPECT_EQ(aeq_equal(t, rewritten, p, small), std::nullopt) << p.str(t) << "\n -> " << p.str(rewritten);
      ++rewrites;
    }
    std::vector<std::pair<ExprId, bool>> occ;
    occurrences(p, t, true, occ);
    for (size_t i = 0; i < occ.size(); ++i) {
      if (p.node(occ[i].first).kind != ExprKind::var) continue;
      int64_t counter = 0;
      const ExprId changed = replace_at(p, t, static_cast<int64_t>(i), counter, [&](ExprId) { return fresh; });
      if (normal_form(changed, p, small).ok() || !small.fingerprints().of(changed, p)) break;
      EXPECT_EQ(aeq_equal(t, changed, p, small), false) << p.str(t) << "\n -> " << p.str(changed);
      ++changes;
      break;
    }
  }
  EXPECT_GE(rewrites, 200);
  EXPECT_GE(changes, 200);
}

// GPT-2's MLP block (bench/heldout/gpt2_mlp_block.mg) has an output whose normal form
// is past the default limits. With a 7-input kernel allowed, the search completed 16,321 one-kernel
// μGraphs of it in 60 s, all A_eq-equal to it for want of an answer; the first 512 it verified were
// all wrong (the first had add(H, exp(..)) where the GELU divides, and no residual). Written as
// programs, the wrong forms are now told apart, and a form equal under the axioms is not.
TEST(ExprFingerprint, TellsAGpt2MlpBlockFromWrongFormsOfIt) {
  const std::string head = R"(
input X[8, 768]
input G[768]
input BETA[768]
input W1[768, 3072]
input B1[3072]
input W2[3072, 768]
input B2[768]
MU = div(sum(X, dim=1), 768)
C = sub(X, MU)
XN = add(mul(div(C, sqrt(add(div(sum(sqr(C), dim=1), 768), 1e-5))), G), BETA)
H = add(matmul(XN, W1), B1)
)";
  const std::string program = head +
                              "A = div(H, add(exp(mul(add(H, mul(mul(sqr(H), H), 0.044715)), -1.59576912)), 1))\n" +
                              "O = add(add(matmul(A, W2), B2), X)\noutput O\n";
  // The same block with the residual added first and the cube written H·H·H: equal under A_eq.
  const std::string reordered =
      head + "A = div(H, add(1, exp(mul(-1.59576912, add(mul(mul(H, H), mul(H, 0.044715)), H)))))\n" +
      "O = add(X, add(B2, matmul(A, W2)))\noutput O\n";
  const std::string gelu_adds = head + "A = add(H, exp(mul(add(H, mul(mul(sqr(H), H), 0.044715)), -1.59576912)))\n" +
                                "O = add(add(matmul(A, W2), B2), X)\noutput O\n";
  const std::string no_residual = head +
                                  "A = div(H, add(exp(mul(add(H, mul(mul(sqr(H), H), 0.044715)), -1.59576912)), 1))\n" +
                                  "O = add(matmul(A, W2), B2)\noutput O\n";
  ExprPool p;
  NormalFormPool nf;
  auto output = [&](const std::string& text) { return output_expressions(parse_program(text), p)[0]; };
  const ExprId want = output(program);
  const NfResult want_nf = normal_form(want, p, nf);
  ASSERT_FALSE(want_nf.ok()) << "the test needs an output past the limits";
  // Sums over 768 and 3072 elements, multiplied out, pass 64-bit coefficients.
  EXPECT_EQ(want_nf.stop, NfStop::coefficient_overflow);
  EXPECT_EQ(aeq_equal(want, output(reordered), p, nf), std::nullopt);
  EXPECT_EQ(aeq_equal(want, output(gelu_adds), p, nf), false);
  EXPECT_EQ(aeq_equal(want, output(no_residual), p, nf), false);
}

}  // namespace
}  // namespace mugraph
