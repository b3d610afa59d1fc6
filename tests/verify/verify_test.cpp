// verify(): equivalent pairs pass with a bound, non-equivalent ones are rejected with the output,
// element and test that differ, incomparable pairs say why, verdicts replay from their seed.
#include "mugraph/verify.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "mugraph/error.h"
#include "mugraph/frontend.h"
#include "mugraph/host_memory.h"

namespace mugraph {
namespace {

VerifyOptions quick(uint64_t seed = 0) {
  VerifyOptions o;
  o.seed = seed;
  o.threads = 1;
  return o;
}

VerifyResult check(const std::string& a, const std::string& b, const VerifyOptions& o = quick()) {
  return verify(parse_program(a, "a.mg"), parse_program(b, "b.mg"), o);
}

std::string describe(const VerifyResult& r) {
  return "verdict " + std::to_string(static_cast<int>(r.verdict)) + ", tests " + std::to_string(r.tests_run) +
         ", per-test bound " + std::to_string(r.per_test_bound) + ", bound " + std::to_string(r.bound) +
         ", reason: " + r.reason + ", note: " + r.guarantee_note;
}

void expect_equivalent_with_guarantee(const std::string& a, const std::string& b) {
  VerifyResult r = check(a, b);
  EXPECT_EQ(r.verdict, Verdict::equivalent) << describe(r);
  EXPECT_TRUE(r.guarantee) << describe(r);
  EXPECT_LE(r.bound, 1e-9) << describe(r);
  EXPECT_GE(r.tests_run, 1);
  EXPECT_LT(r.per_test_bound, 1);
  EXPECT_TRUE(r.reason.empty()) << r.reason;
  EXPECT_TRUE(r.guarantee_note.empty()) << r.guarantee_note;
  EXPECT_LE(r.float_max_rel_error, 1e-3);
}

TEST(Verify, Distributivity) {
  expect_equivalent_with_guarantee(
      "input A[4, 8]\ninput B[4, 8]\ninput C[4, 8]\nO = mul(add(A, B), C)\noutput O\n",
      "input A[4, 8]\ninput B[4, 8]\ninput C[4, 8]\nO = add(mul(A, C), mul(B, C))\noutput O\n");
}

TEST(Verify, DivisionMovedPastMatmul) {
  expect_equivalent_with_guarantee(
      "input X[4, 8]\ninput S[4, 1]\ninput W[8, 16]\nO = matmul(div(X, S), W)\noutput O\n",
      "input X[4, 8]\ninput S[4, 1]\ninput W[8, 16]\nO = div(matmul(X, W), S)\noutput O\n");
}

TEST(Verify, ExpOfASum) {
  expect_equivalent_with_guarantee("input A[4, 8]\ninput B[4, 8]\nO = exp(add(A, B))\noutput O\n",
                                   "input A[4, 8]\ninput B[4, 8]\nO = mul(exp(A), exp(B))\noutput O\n");
}

TEST(Verify, SiluAgainstItsExpansion) {
  expect_equivalent_with_guarantee("input X[4, 8]\nO = silu(X)\noutput O\n",
                                   "input X[4, 8]\nO = div(X, add(1, exp(mul(X, -1))))\noutput O\n");
}

TEST(Verify, InputsMatchedByNameNotPosition) {
  expect_equivalent_with_guarantee("input A[4, 8]\ninput B[8, 2]\nO = matmul(A, B)\noutput O\n",
                                   "input B[8, 2]\ninput A[4, 8]\nO = matmul(A, B)\noutput O\n");
}

TEST(Verify, DTypesMayDiffer) {
  VerifyResult r =
      check("input A[4, 8] f16\nO = mul(A, 2)\noutput O\n", "input A[4, 8] f32\nO = add(A, A)\noutput O\n");
  EXPECT_EQ(r.verdict, Verdict::equivalent) << describe(r);
}

TEST(Verify, MultipleOutputs) {
  const char* a = "input A[4, 8]\ninput B[4, 8]\nP = add(A, B)\nQ = mul(A, B)\noutput P, Q\n";
  EXPECT_EQ(check(a, "input A[4, 8]\ninput B[4, 8]\nP = add(B, A)\nQ = mul(B, A)\noutput P, Q\n").verdict,
            Verdict::equivalent);
  VerifyResult r = check(a, "input A[4, 8]\ninput B[4, 8]\nP = add(B, A)\nQ = mul(B, B)\noutput P, Q\n");
  EXPECT_EQ(r.verdict, Verdict::not_equivalent);
  EXPECT_EQ(r.reason.rfind("output 1 (Q) differs at element [", 0), 0u) << r.reason;
}

TEST(Verify, WrongOpIsRejectedWithTheElement) {
  VerifyResult r = check("input A[4, 8]\ninput B[4, 8]\nO = add(A, B)\noutput O\n",
                         "input A[4, 8]\ninput B[4, 8]\nO = sub(A, B)\noutput O\n");
  EXPECT_EQ(r.verdict, Verdict::not_equivalent);
  EXPECT_EQ(r.reason.rfind("output 0 (O) differs at element [0, 0] in finite-field test 0 (test seed 0x", 0), 0u)
      << r.reason;
  EXPECT_EQ(r.tests_run, 0);
}

TEST(Verify, ConstantOffByATenThousandthIsRejectedByTheFiniteFields) {
  // rmsnorm_linear with 4096 vs 4096.4: the f32 filter alone accepts it.
  auto program = [](const std::string& divisor) {
    return "input X[4, 64] f32\ninput G[64] f32\ninput W[64, 16] f32\nS = sum(sqr(X), dim=1)\n"
           "Y = div(mul(X, G), sqrt(div(S, " +
           divisor + ")))\nO = matmul(Y, W)\noutput O\n";
  };
  Graph a = parse_program(program("4096"));
  Graph b = parse_program(program("4096.4"));
  double float_error = float_max_relative_error(a, b, 0, 1);
  EXPECT_GT(float_error, 0);
  EXPECT_LT(float_error, 1e-3);
  VerifyResult r = verify(a, b, quick());
  EXPECT_EQ(r.verdict, Verdict::not_equivalent) << describe(r);
  EXPECT_NE(r.reason.find("differs at element"), std::string::npos) << r.reason;

  // Without sqrt too.
  VerifyResult s =
      check("input X[4, 8]\nO = mul(X, 4096)\noutput O\n", "input X[4, 8]\nO = mul(X, 4096.4)\noutput O\n");
  EXPECT_EQ(s.verdict, Verdict::not_equivalent) << describe(s);
  EXPECT_NE(s.reason.find("differs at element"), std::string::npos) << s.reason;
}

TEST(Verify, FloatFilterRejectsWhatTheFieldsCannotSee) {
  // sqrt(x²) = |x| ≠ x over the reals, but in the fields the deterministic root agrees with x
  // about half the time. The float filter catches it.
  VerifyResult r = check("input X[4, 8]\nO = sqrt(sqr(X))\noutput O\n", "input X[4, 8]\nO = X\noutput O\n");
  EXPECT_EQ(r.verdict, Verdict::not_equivalent) << describe(r);
}

TEST(Verify, FloatFilterCanBeTurnedOff) {
  VerifyOptions o = quick();
  o.float_check = false;
  VerifyResult r = check("input A[4, 8]\ninput B[4, 8]\nO = mul(add(A, B), A)\noutput O\n",
                         "input A[4, 8]\ninput B[4, 8]\nO = add(mul(A, A), mul(B, A))\noutput O\n", o);
  EXPECT_EQ(r.verdict, Verdict::equivalent);
  EXPECT_EQ(r.float_max_rel_error, 0);
}

TEST(Verify, NumericallyUnstableCandidateIsRejected) {
  // (X + 1e8) − 1e8 is X exactly, but not in f32.
  VerifyResult r = check("input X[4, 8]\nO = mul(X, 1)\noutput O\n",
                         "input X[4, 8]\nO = sub(add(X, 100000000), 100000000)\noutput O\n");
  EXPECT_EQ(r.verdict, Verdict::not_equivalent) << describe(r);
  EXPECT_EQ(r.reason.rfind("numerically unstable: float relative error ", 0), 0u) << r.reason;
  EXPECT_GT(r.float_max_rel_error, 1e-3);
  EXPECT_GE(r.tests_run, 1);  // the finite fields accepted it first
}

TEST(Verify, Incomparable) {
  struct Case {
    const char* a;
    const char* b;
    const char* reason;
  };
  const Case cases[] = {
      {"input A[4]\nO = A\noutput O\n", "input B[4]\nO = B\noutput O\n",
       "the candidate has an input B that the reference does not have"},
      {"input A[4]\ninput B[4]\nO = add(A, B)\noutput O\n", "input A[4]\nO = A\noutput O\n",
       "the reference has an input B that the candidate does not have"},
      {"input A[4]\nO = A\noutput O\n", "input A[8]\nO = sum(A, dim=0, to=4)\noutput O\n",
       "input A has shape [4] in the reference but [8] in the candidate"},
      {"input A[4]\nO = A\noutput O\n", "input A[4]\nO = A\nP = mul(A, 2)\noutput O, P\n",
       "the reference has 1 output(s) but the candidate has 2"},
      {"input A[4, 2]\nO = A\noutput O\n", "input A[4, 2]\nO = sum(A, dim=1)\noutput O\n",
       "output 0 has shape [4, 2] in the reference but [4, 1] in the candidate"},
  };
  for (const Case& c : cases) {
    VerifyResult r = check(c.a, c.b);
    EXPECT_EQ(r.verdict, Verdict::incomparable) << c.reason;
    EXPECT_EQ(r.reason, c.reason);
    EXPECT_EQ(r.tests_run, 0);
  }
}

TEST(Verify, ReferenceDividingByZeroCannotBeCompared) {
  VerifyResult r = check("input A[4]\nO = div(A, sub(A, A))\noutput O\n", "input A[4]\nO = A\noutput O\n");
  EXPECT_EQ(r.verdict, Verdict::incomparable);
  EXPECT_NE(r.reason.find("the reference divides by zero"), std::string::npos) << r.reason;
  VerifyResult s = check("input A[4]\nO = A\noutput O\n", "input A[4]\nO = div(A, sub(A, A))\noutput O\n");
  EXPECT_EQ(s.verdict, Verdict::not_equivalent);
  EXPECT_NE(s.reason.find("the candidate divides by zero"), std::string::npos) << s.reason;
}

TEST(Verify, SeedReplaysTheVerdict) {
  const char* a = "input X[4, 8]\ninput W[8, 8]\nO = matmul(X, W)\noutput O\n";
  const char* b = "input X[4, 8]\ninput W[8, 8]\nO = matmul(X, add(W, 0.001))\noutput O\n";
  VerifyResult r1 = check(a, b, quick(42));
  VerifyResult r2 = check(a, b, quick(42));
  VerifyResult r3 = check(a, b, quick(43));
  EXPECT_EQ(r1.verdict, Verdict::not_equivalent);
  EXPECT_EQ(r1.reason, r2.reason);
  EXPECT_EQ(r1.seed, 42u);
  EXPECT_NE(r1.reason, r3.reason);  // other inputs, other values (and another test seed)

  const char* c = "input X[4, 8]\ninput W[8, 8]\nO = matmul(mul(X, 2), W)\noutput O\n";
  const char* d = "input X[4, 8]\ninput W[8, 8]\nO = mul(matmul(X, W), 2)\noutput O\n";
  VerifyResult e1 = check(c, d, quick(7));
  VerifyResult e2 = check(c, d, quick(7));
  EXPECT_EQ(e1.verdict, Verdict::equivalent);
  EXPECT_EQ(e1.tests_run, e2.tests_run);
  EXPECT_EQ(e1.bound, e2.bound);
  EXPECT_EQ(e1.float_max_rel_error, e2.float_max_rel_error);
}

TEST(Verify, ReferenceRunsGiveTheSameVerdictsWhetherTheyKeepTheInputsOrNot) {
  // A search verifies many candidates against one reference through one ReferenceRuns; beyond
  // its input budget a test draws the inputs again. Same verdicts, tests and bounds either way,
  // for each candidate and when a test seed is met again.
  const Graph ref = parse_program("input X[4, 8]\ninput W[8, 8]\nO = matmul(mul(X, 2), W)\noutput O\n");
  const Graph same = parse_program("input X[4, 8]\ninput W[8, 8]\nO = mul(matmul(X, W), 2)\noutput O\n");
  const Graph off = parse_program("input X[4, 8]\ninput W[8, 8]\nO = mul(matmul(X, add(W, 0.001)), 2)\noutput O\n");
  ReferenceRuns keeps, keeps_none(0);
  for (const Graph* cand : {&same, &off, &same}) {
    const VerifyResult alone = verify(ref, *cand, quick(3));
    for (ReferenceRuns* runs : {&keeps, &keeps_none}) {
      const VerifyResult r = verify(ref, *cand, quick(3), runs);
      EXPECT_EQ(r.verdict, alone.verdict) << describe(r);
      EXPECT_EQ(r.tests_run, alone.tests_run);
      EXPECT_EQ(r.bound, alone.bound);
      EXPECT_EQ(r.reason, alone.reason);
      EXPECT_EQ(r.float_max_rel_error, alone.float_max_rel_error);
    }
  }
  EXPECT_EQ(verify(ref, same, quick(3)).verdict, Verdict::equivalent);
  EXPECT_EQ(verify(ref, off, quick(3)).verdict, Verdict::not_equivalent);
}

TEST(Verify, ACandidateWithItsInputsInAnotherOrderLeavesTheCachedFloatInputsWhole) {
  // The float filter's inputs are cached in ReferenceRuns for the next candidates; one whose
  // inputs come in another order once moved them out, and the next candidate then failed with
  // "input 0 ('X') holds 0 values".
  const Graph ref = parse_program("input X[4, 8]\ninput W[8, 8]\nO = matmul(mul(X, 2), W)\noutput O\n");
  const Graph swapped = parse_program("input W[8, 8]\ninput X[4, 8]\nO = matmul(add(X, X), W)\noutput O\n");
  const Graph same = parse_program("input X[4, 8]\ninput W[8, 8]\nO = mul(matmul(X, W), 2)\noutput O\n");
  ReferenceRuns runs;
  EXPECT_EQ(verify(ref, swapped, quick(), &runs).verdict, Verdict::equivalent);
  EXPECT_EQ(verify(ref, same, quick(), &runs).verdict, Verdict::equivalent);
  EXPECT_EQ(verify(ref, swapped, quick(), &runs).verdict, Verdict::equivalent);
}

void expect_same_result(const VerifyResult& a, const VerifyResult& b) {
  EXPECT_EQ(a.verdict, b.verdict) << describe(a) << " / " << describe(b);
  EXPECT_EQ(a.reason, b.reason);
  EXPECT_EQ(a.tests_run, b.tests_run);
  EXPECT_EQ(a.redraws, b.redraws);
  EXPECT_EQ(a.per_test_bound, b.per_test_bound);
  EXPECT_EQ(a.bound, b.bound);
  EXPECT_EQ(a.guarantee, b.guarantee);
  EXPECT_EQ(a.guarantee_note, b.guarantee_note);
  EXPECT_EQ(a.opaque_functions, b.opaque_functions);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.reference_lax.lax, b.reference_lax.lax);
  EXPECT_EQ(a.candidate_lax.violation, b.candidate_lax.violation);
  EXPECT_EQ(a.float_max_rel_error, b.float_max_rel_error);
}

TEST(Verify, VerifyAllGivesEachCandidateWhatVerifyGivesIt) {
  // Candidates that need different numbers of tests (a sqrt-free one, a vacuous-bound one with
  // an exp, one that divides by zero on every draw), fail at different tests, or cannot be
  // compared, verified together and alone: identical results, in order.
  const Graph ref = parse_program("input X[4, 8]\ninput W[8, 8]\nO = matmul(mul(X, 2), W)\noutput O\n");
  const std::vector<Graph> cands = {
      parse_program("input X[4, 8]\ninput W[8, 8]\nO = mul(matmul(X, W), 2)\noutput O\n"),
      parse_program("input X[4, 8]\ninput W[8, 8]\nO = mul(matmul(X, add(W, 0.001)), 2)\noutput O\n"),
      parse_program("input X[4, 8]\ninput W[8, 8]\nO = div(matmul(mul(X, 2), W), sub(X, X))\noutput O\n"),
      parse_program("input W[8, 8]\ninput X[4, 8]\nO = matmul(add(X, X), W)\noutput O\n"),
      parse_program("input X[4, 8]\ninput V[8, 8]\nO = matmul(X, V)\noutput O\n"),
      parse_program("input X[4, 8]\ninput W[8, 8]\nO = mul(matmul(X, W), mul(exp(sub(X, X)), 2))\noutput O\n"),
      parse_program("input X[4, 8]\ninput W[8, 8]\nO = mul(matmul(X, W), 2)\noutput O\n"),
  };
  std::vector<const Graph*> ptrs;
  for (const Graph& c : cands) ptrs.push_back(&c);
  for (uint64_t seed : {0u, 9u}) {
    ReferenceRuns runs;
    const std::vector<VerifyResult> together = verify_all(ref, ptrs, quick(seed), &runs);
    ASSERT_EQ(together.size(), cands.size());
    for (size_t i = 0; i < cands.size(); ++i) {
      SCOPED_TRACE("candidate " + std::to_string(i) + ", seed " + std::to_string(seed));
      expect_same_result(together[i], verify(ref, cands[i], quick(seed)));
    }
    EXPECT_EQ(together[0].verdict, Verdict::equivalent);
    EXPECT_EQ(together[1].verdict, Verdict::not_equivalent);
    EXPECT_EQ(together[2].verdict, Verdict::not_equivalent);
    EXPECT_EQ(together[2].redraws, 100);
    EXPECT_EQ(together[3].verdict, Verdict::equivalent);
    EXPECT_EQ(together[4].verdict, Verdict::incomparable);
    EXPECT_EQ(together[5].verdict, Verdict::equivalent);
    EXPECT_NE(together[5].tests_run, together[0].tests_run);
  }
  // A reference that divides by zero: every candidate is incomparable, as alone.
  const Graph zero = parse_program("input X[4, 8]\ninput W[8, 8]\nO = div(matmul(X, W), sub(X, X))\noutput O\n");
  const std::vector<VerifyResult> z = verify_all(zero, {ptrs[0], ptrs[1]}, quick());
  for (size_t i = 0; i < 2; ++i) expect_same_result(z[i], verify(zero, cands[i], quick()));
  EXPECT_EQ(z[0].verdict, Verdict::incomparable);
  EXPECT_TRUE(verify_all(ref, {}, quick()).empty());
}

TEST(Verify, VerifyAllMixesUnknownFunctionTestsWithOrdinaryOnes) {
  // Candidates of an exp-free MLP: one that passes with silu unknown, wrong ones that fail there
  // and are rejected by the ordinary tests, one that expands silu (an exp: ordinary tests only)
  // and one that divides by zero on every draw (in both kinds of test). Verified together,
  // twice through one ReferenceRuns (the reference's runs of both kinds kept), and alone:
  // identical results.
  const std::string in = "input X[4, 8]\ninput W[8, 8]\ninput V[8, 4]\n";
  const Graph ref = parse_program(in + "O = matmul(mul(silu(matmul(X, W)), 2), V)\noutput O\n");
  const std::vector<Graph> cands = {
      parse_program(in + "H = silu(matmul(X, W))\nO = matmul(add(H, H), V)\noutput O\n"),
      parse_program(in + "O = matmul(mul(silu(matmul(X, W)), 3), V)\noutput O\n"),
      parse_program(in + "O = matmul(mul(silu(matmul(X, mul(W, 2))), 2), V)\noutput O\n"),
      parse_program(in + "A = matmul(X, W)\nO = matmul(mul(div(A, add(1, exp(mul(A, -1)))), 2), V)\noutput O\n"),
      parse_program(in + "O = div(matmul(mul(silu(matmul(X, W)), 2), V), sum(sub(X, X), dim=1))\noutput O\n"),
  };
  std::vector<const Graph*> ptrs;
  for (const Graph& c : cands) ptrs.push_back(&c);
  ReferenceRuns runs;
  for (int call = 0; call < 2; ++call) {
    const std::vector<VerifyResult> together = verify_all(ref, ptrs, quick(), &runs);
    ASSERT_EQ(together.size(), cands.size());
    for (size_t i = 0; i < cands.size(); ++i) {
      SCOPED_TRACE("candidate " + std::to_string(i) + ", call " + std::to_string(call));
      expect_same_result(together[i], verify(ref, cands[i], quick()));
    }
    EXPECT_EQ(together[0].verdict, Verdict::equivalent);
    EXPECT_TRUE(together[0].opaque_functions);
    EXPECT_TRUE(together[0].guarantee);
    EXPECT_EQ(together[1].verdict, Verdict::not_equivalent);
    EXPECT_EQ(together[2].verdict, Verdict::not_equivalent);
    EXPECT_EQ(together[3].verdict, Verdict::equivalent);
    EXPECT_FALSE(together[3].opaque_functions);
    EXPECT_EQ(together[4].verdict, Verdict::not_equivalent);
    EXPECT_EQ(together[4].redraws, 200);  // 100 with silu unknown, then 100 ordinary
  }
}

TEST(Verify, VerifyAllStopsWhenAsked) {
  const Graph ref = parse_program("input X[4, 8]\ninput W[8, 8]\nO = matmul(mul(X, 2), W)\noutput O\n");
  const Graph same = parse_program("input X[4, 8]\ninput W[8, 8]\nO = mul(matmul(X, W), 2)\noutput O\n");
  std::atomic<bool> stop{true};
  EXPECT_TRUE(verify_all(ref, {&same}, quick(), nullptr, &stop).empty());
  stop = false;
  EXPECT_EQ(verify_all(ref, {&same}, quick(), nullptr, &stop).at(0).verdict, Verdict::equivalent);
}

TEST(Verify, ThreadCountDoesNotChangeTheVerdict) {
  const char* a = "input X[8, 64]\ninput W[64, 32]\nO = matmul(X, W)\noutput O\n";
  const char* b = "input X[8, 64]\ninput W[64, 32]\nO = matmul(X, add(W, 0.5))\noutput O\n";
  VerifyOptions o1 = quick(3), o4 = quick(3);
  o4.threads = 4;
  EXPECT_EQ(check(a, b, o1).reason, check(a, b, o4).reason);
}

TEST(Verify, ReluVerifiesAsAnUnknownFunctionWithAGuarantee) {
  // relu is not Lax, but both graphs apply it to the same formula: as an unknown function (a
  // random function of both residues) the tests bound the error.
  VerifyResult r =
      check("input X[4, 8]\nO = mul(relu(X), 2)\noutput O\n", "input X[4, 8]\nR = relu(X)\nO = add(R, R)\noutput O\n");
  EXPECT_EQ(r.verdict, Verdict::equivalent) << describe(r);
  EXPECT_FALSE(r.reference_lax.lax);
  EXPECT_TRUE(r.opaque_functions) << describe(r);
  EXPECT_TRUE(r.guarantee) << describe(r);
  EXPECT_LE(r.bound, 1e-9);
  EXPECT_EQ(r.tests_run, 2) << describe(r);
  EXPECT_TRUE(r.guarantee_note.empty()) << r.guarantee_note;
  // Without the unknown-function tests, relu is a random function outside Theorem 2.
  VerifyOptions theorem2_only = quick();
  theorem2_only.unknown_functions = false;
  VerifyResult t = check("input X[4, 8]\nO = mul(relu(X), 2)\noutput O\n",
                         "input X[4, 8]\nR = relu(X)\nO = add(R, R)\noutput O\n", theorem2_only);
  EXPECT_EQ(t.verdict, Verdict::equivalent) << describe(t);
  EXPECT_FALSE(t.opaque_functions);
  EXPECT_FALSE(t.guarantee);
  EXPECT_NE(t.guarantee_note.find("the reference is not Lax: relu"), std::string::npos) << t.guarantee_note;
  // Different arguments are told apart: the unknown-function test disagrees, and the ordinary
  // tests that follow give the certain verdict.
  VerifyResult s = check("input X[4, 8]\nO = relu(X)\noutput O\n", "input X[4, 8]\nO = relu(mul(X, 2))\noutput O\n");
  EXPECT_EQ(s.verdict, Verdict::not_equivalent) << describe(s);
  EXPECT_FALSE(s.opaque_functions);
  EXPECT_NE(s.reason.find("differs at element"), std::string::npos) << s.reason;
}

TEST(Verify, ReluBesideAnExpIdentityVerifiesWithoutGuarantee) {
  // exp(2X) = exp(X)² holds by what exp is, not as a formula: the unknown-function test
  // disagrees, and the ordinary tests, where relu is a random function outside Theorem 2, decide.
  VerifyResult r = check("input X[4, 8]\nO = mul(relu(X), 2)\nP = exp(add(X, X))\noutput O, P\n",
                         "input X[4, 8]\nR = relu(X)\nO = add(R, R)\nP = sqr(exp(X))\noutput O, P\n");
  EXPECT_EQ(r.verdict, Verdict::equivalent) << describe(r);
  EXPECT_FALSE(r.opaque_functions);
  EXPECT_FALSE(r.guarantee);
  EXPECT_NE(r.guarantee_note.find("the reference is not Lax: relu"), std::string::npos) << r.guarantee_note;
  EXPECT_NE(r.guarantee_note.find("modelled as random functions"), std::string::npos) << r.guarantee_note;
  EXPECT_NE(r.guarantee_note.find("as unknown functions the graphs differ"), std::string::npos) << r.guarantee_note;
}

TEST(Verify, SqrtIsAnUnknownFunctionWithoutExp) {
  const char* a = "input X[4, 8]\nO = div(X, sqrt(sum(sqr(X), dim=1)))\noutput O\n";
  const char* b = "input X[4, 8]\nS = sqrt(sum(sqr(X), dim=1))\nO = mul(X, div(1, S))\noutput O\n";
  VerifyResult r = check(a, b);
  EXPECT_EQ(r.verdict, Verdict::equivalent) << describe(r);
  EXPECT_TRUE(r.reference_lax.uses_sqrt);
  EXPECT_TRUE(r.opaque_functions) << describe(r);
  EXPECT_TRUE(r.guarantee) << describe(r);
  EXPECT_LE(r.bound, 1e-9);
  // A rewrite that holds only by what sqrt is (sqrt(x)² = x) differs as a formula; the ordinary
  // tests then decide, with sqrt_pm, and cannot guarantee it.
  VerifyResult s =
      check("input X[4, 8]\nO = mul(X, 2)\noutput O\n", "input X[4, 8]\nR = sqrt(sqr(X))\nO = add(R, R)\noutput O\n");
  EXPECT_FALSE(s.opaque_functions);
  EXPECT_FALSE(s.guarantee);
}

TEST(Verify, SqrtBesideAnExpIdentityWeakensTheGuarantee) {
  const char* a = "input X[4, 8]\nO = div(X, sqrt(sum(sqr(X), dim=1)))\nP = exp(add(X, X))\noutput O, P\n";
  const char* b = "input X[4, 8]\nS = sqrt(sum(sqr(X), dim=1))\nO = mul(X, div(1, S))\nP = sqr(exp(X))\noutput O, P\n";
  VerifyResult r = check(a, b);
  EXPECT_EQ(r.verdict, Verdict::equivalent) << describe(r);
  EXPECT_TRUE(r.reference_lax.uses_sqrt);
  EXPECT_FALSE(r.opaque_functions);
  EXPECT_FALSE(r.guarantee);
  EXPECT_LE(r.bound, 1e-9);
  EXPECT_NE(r.guarantee_note.find("sqrt is evaluated as a deterministic function"), std::string::npos)
      << r.guarantee_note;
}

TEST(Verify, ASoftmaxIsBoundedWithExpUnknown) {
  // Attention's softmax: Theorem 2 is vacuous (a sum of 64 exponentials), but both graphs apply
  // exp to the same scores, so with exp unknown the difference has no exponential: a guarantee.
  const std::string in = "input Q[2, 8, 16]\ninput K[2, 16, 64]\ninput V[2, 64, 16]\n";
  const std::string ref = in + "E = exp(matmul(Q, K))\nO = matmul(div(E, sum(E, dim=2)), V)\noutput O\n";
  VerifyResult r = check(ref, in + "E = exp(matmul(Q, K))\nO = div(matmul(E, V), sum(E, dim=2))\noutput O\n");
  EXPECT_EQ(r.verdict, Verdict::equivalent) << describe(r);
  EXPECT_TRUE(r.opaque_functions) << describe(r);
  EXPECT_TRUE(r.guarantee) << describe(r);
  EXPECT_LE(r.bound, 1e-9);
  EXPECT_LT(r.tests_run, 64);
}

TEST(Verify, AnMlpsDownProjectionIsBoundedWithUnknownFunctions) {
  // silu(X·W1) ⊙ (X·W3), then ·W2: the down projection sums 32 fractions, each over its own
  // 1 + exp(−a), which makes Theorem 2 vacuous (64 tests, no guarantee). With silu unknown the
  // difference is a polynomial of low degree: 2 tests reach 1e-9.
  const std::string in = "input X[4, 16]\ninput W1[16, 32]\ninput W3[16, 32]\ninput W2[32, 8]\n";
  const std::string ref = in + "O = matmul(mul(silu(matmul(X, W1)), matmul(X, W3)), W2)\noutput O\n";
  VerifyResult r = check(ref, in + "H = mul(matmul(X, W3), silu(matmul(X, W1)))\nO = matmul(H, W2)\noutput O\n");
  EXPECT_EQ(r.verdict, Verdict::equivalent) << describe(r);
  EXPECT_TRUE(r.opaque_functions) << describe(r);
  EXPECT_TRUE(r.guarantee) << describe(r);
  EXPECT_EQ(r.tests_run, 2) << describe(r);
  // W1 and W3 exchanged, and silu's operand scaled: rejected with a certain verdict.
  for (const char* edit : {"O = matmul(mul(silu(matmul(X, W3)), matmul(X, W1)), W2)\n",
                           "O = matmul(mul(silu(mul(matmul(X, W1), 2)), matmul(X, W3)), W2)\n"}) {
    VerifyResult s = check(ref, in + edit + "output O\n");
    EXPECT_EQ(s.verdict, Verdict::not_equivalent) << edit << describe(s);
  }
}

TEST(Verify, VacuousBoundRunsMaxTests) {
  // A softmax over 64 columns: 64 exponential terms make Theorem 2 vacuous. The candidate
  // computes exp(X) as exp(X/2)², which holds by what exp is: the unknown-function test
  // disagrees, and Theorem 2 is all there is.
  VerifyOptions o = quick();
  o.max_tests = 5;
  VerifyResult r = check("input X[4, 64]\nE = exp(X)\nO = div(E, sum(E, dim=1))\noutput O\n",
                         "input X[4, 64]\nE = sqr(exp(div(X, 2)))\nO = mul(E, div(1, sum(E, dim=1)))\noutput O\n", o);
  EXPECT_EQ(r.verdict, Verdict::equivalent) << describe(r);
  EXPECT_EQ(r.tests_run, 5);
  EXPECT_EQ(r.per_test_bound, 1);
  EXPECT_EQ(r.bound, 1);
  EXPECT_FALSE(r.guarantee);
  EXPECT_NE(r.guarantee_note.find("vacuous"), std::string::npos) << r.guarantee_note;
}

TEST(Verify, AttentionEditsAreRejected) {
  // The interpreter computes QK^T in Z_q only and exp(QK^T)·V in Z_p only (the parts that are
  // read); an edit on either side of the exp must still be seen.
  VerifyOptions o = quick();
  o.max_tests = 4;
  o.float_check = false;  // the finite fields alone must see each edit
  const std::string in = "input Q[2, 8, 16]\ninput K[2, 16, 32]\ninput V[2, 32, 16]\n";
  const std::string ref = in + "E = exp(matmul(Q, K))\nO = matmul(div(E, sum(E, dim=2)), V)\noutput O\n";
  EXPECT_EQ(check(ref, in + "E = exp(matmul(Q, K))\nO = div(matmul(E, V), sum(E, dim=2))\noutput O\n", o).verdict,
            Verdict::equivalent);
  for (const char* edit : {
           "E = exp(matmul(Q, K))\nO = matmul(E, V)\n",                              // no normalizer
           "E = exp(mul(matmul(Q, K), 2))\nO = matmul(div(E, sum(E, dim=2)), V)\n",  // scores doubled
           "E = exp(matmul(Q, K))\nO = matmul(div(E, sum(E, dim=2)), mul(V, 2))\n",  // V doubled
           "E = exp(matmul(Q, K))\nO = matmul(div(sqr(E), sum(E, dim=2)), V)\n",     // E squared
       }) {
    VerifyResult r = check(ref, in + edit + "output O\n", o);
    EXPECT_EQ(r.verdict, Verdict::not_equivalent) << edit << describe(r);
  }
}

TEST(Verify, TestsNeededFollowTheBound) {
  // Exp-free: one plain term, d = 2 → ε = 8·2/q + 1/q ≈ 3e-8: two tests reach 1e-9.
  VerifyResult r = check("input A[4, 8]\ninput B[4, 8]\nO = mul(A, B)\noutput O\n",
                         "input A[4, 8]\ninput B[4, 8]\nO = mul(B, A)\noutput O\n");
  EXPECT_EQ(r.tests_run, 2) << describe(r);
  EXPECT_NEAR(r.per_test_bound, 17.0 / 536870219.0, 1e-12);
  // A looser delta needs fewer tests; a tight one is capped by max_tests.
  VerifyOptions o = quick();
  o.delta = 1e-3;
  EXPECT_EQ(check("input A[4]\nO = A\noutput O\n", "input A[4]\nO = A\noutput O\n", o).tests_run, 1);
  o.delta = 1e-300;
  o.max_tests = 3;
  VerifyResult t = check("input A[4]\nO = A\noutput O\n", "input A[4]\nO = A\noutput O\n", o);
  EXPECT_EQ(t.tests_run, 3);
  EXPECT_FALSE(t.guarantee);
  EXPECT_NE(t.guarantee_note.find("max_tests (3)"), std::string::npos) << t.guarantee_note;
}

TEST(Verify, KCountsTheNumeratorsTermsNotTheDenominators) {
  // silu(A)·B = A·B / (1 + exp(−A)). The difference of two such forms, (A·D − C·B) / (B·D), has
  // 3 terms above (the two plain ones merge) and 4 below. Theorem 2's bound is in the
  // numerator's count: K = 3 and d = 2 give ε = 8·2·3⁴/q + q^(−1/9) ≈ 0.107, so 10 tests reach
  // 1e-9. Counting the denominator's 4 terms gave ε ≈ 0.285 and 17 tests.
  // The exp identity beside (exp(2A) = exp(A)²) fails the unknown-function test, so Theorem 2
  // decides: its P output has 2 terms, fewer than O's.
  VerifyResult r = check("input A[4, 8]\ninput B[4, 8]\nO = mul(silu(A), B)\nP = exp(add(A, A))\noutput O, P\n",
                         "input A[4, 8]\ninput B[4, 8]\nO = mul(B, silu(A))\nP = sqr(exp(A))\noutput O, P\n");
  const double q = 536870219.0;
  const double eps = 8 * 2 * 81 / q + std::pow(q, -1.0 / 9);
  EXPECT_EQ(r.verdict, Verdict::equivalent) << describe(r);
  EXPECT_NEAR(r.per_test_bound, eps, 1e-12) << describe(r);
  EXPECT_EQ(r.tests_run, static_cast<int>(std::ceil(std::log(1e-9) / std::log(eps)))) << describe(r);
  EXPECT_EQ(r.tests_run, 10) << describe(r);
  EXPECT_TRUE(r.guarantee) << describe(r);
  EXPECT_LE(r.bound, 1e-9);
}

TEST(VerificationBytes, CountsInputsAndOutputsOnceAtEightBytesAnElement) {
  // X [16, 64] and W [64, 32] in, O [16, 32] out, the intermediate not counted; an output that
  // is an input counts once.
  const Graph program = parse_program(
      "input X[16, 64]\ninput W[64, 32]\nY = exp(X)\nO = matmul(Y, W)\n"
      "output O\noutput X\n");
  EXPECT_EQ(verification_bytes_lower_bound(program), (16 * 64 + 64 * 32 + 16 * 32) * 8);
}

TEST(VerificationBytes, AVerificationThatCannotFitIsRefusedBeforeItsFirstTest) {
  // 2^40 elements in and out: 16 TiB at least, more than any machine this runs on. verify says
  // so, with both figures, instead of drawing inputs until the kernel kills the process.
  const Graph program = parse_program("input X[1048576, 1048576]\nO = exp(X)\noutput O\n");
  ASSERT_GT(machine_usable_memory_bytes(), 0) << "this test needs to know the machine's memory";
  const std::string why = verification_memory_refusal(program);
  EXPECT_NE(why.find("takes at least 16384.0 GiB"), std::string::npos) << why;
  EXPECT_NE(why.find(gib_text(machine_usable_memory_bytes(), 1) + " of memory this process may use"), std::string::npos)
      << why;
  try {
    verify(program, program);
    ADD_FAILURE() << "verify ran";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()), "error: verify: " + why);
  }
  EXPECT_EQ(verification_memory_refusal(parse_program("input X[1024, 1024]\nO = exp(X)\noutput O\n")), "");
}

}  // namespace
}  // namespace mugraph
