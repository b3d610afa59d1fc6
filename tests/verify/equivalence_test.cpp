// Acceptance tests of verify(): equivalent pairs verify, with the bound they reach; non-equivalent
// pairs are rejected, including near misses that the floating-point filter alone would accept.
// Pairs: algebraic rewrites written as programs, and every hand-written μGraph of
// examples/ugraphs/ against the program it implements (at the committed shapes for Figure 3b,
// at reduced shapes with the same structure for all of them).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "../ir/example_graphs.h"
#include "mugraph/frontend.h"
#include "mugraph/loader.h"
#include "mugraph/retype.h"
#include "mugraph/validate.h"
#include "mugraph/verify.h"
#include "verify_test_util.h"

namespace mugraph {
namespace {

using vtest::seconds_since;

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::equivalent:
      return "equivalent";
    case Verdict::not_equivalent:
      return "not_equivalent";
    case Verdict::incomparable:
      return "incomparable";
  }
  return "?";
}

VerifyOptions options(uint64_t seed = 7) {
  VerifyOptions o;
  o.seed = seed;
  o.threads = 2;
  return o;
}

std::string describe(const VerifyResult& r) {
  std::ostringstream out;
  out << verdict_name(r.verdict) << " after " << r.tests_run << " tests (" << r.redraws << " redraws), bound "
      << r.bound << " (per test " << r.per_test_bound << "), guarantee " << r.guarantee;
  if (!r.guarantee_note.empty()) out << " [" << r.guarantee_note << "]";
  if (!r.reason.empty()) out << ", reason: " << r.reason;
  out << ", float error " << r.float_max_rel_error;
  return out.str();
}

/// Asserts that `candidate` verifies against `reference` with the strength its fragment allows:
/// a bound ≤ delta wherever one test has a non-vacuous bound (Theorem 2's bound grows with the
/// number of exponential terms, so a sum of many exps can make it vacuous), and then a real
/// guarantee for Lax graphs without sqrt (sqrt is verified as a deterministic function whose
/// square is ±x, which weakens the guarantee).
/// `validated`: the caller validated the graphs (retyping to f32 doubles shared memory, which a
/// committed f16 μGraph may then exceed).
void expect_equivalent(const Graph& reference, const Graph& candidate, const std::string& what,
                       VerifyOptions o = options(), bool validated = false) {
  if (!validated) {
    ASSERT_FALSE(validate(reference)) << what << ": " << validate(reference)->str();
    ASSERT_FALSE(validate(candidate)) << what << ": " << validate(candidate)->str();
  }
  auto start = std::chrono::steady_clock::now();
  VerifyResult r = verify(reference, candidate, o);
  double secs = seconds_since(start);
  std::printf("[ verify   ] %-44s %s (%.3f s)\n", what.c_str(), describe(r).c_str(), secs);
  EXPECT_EQ(r.verdict, Verdict::equivalent) << what << ": " << describe(r);
  EXPECT_GT(r.tests_run, 0) << what;
  bool lax = r.reference_lax.lax && r.candidate_lax.lax;
  bool sqrt = r.reference_lax.uses_sqrt || r.candidate_lax.uses_sqrt;
  if (lax && !sqrt && r.per_test_bound < 1) {
    EXPECT_TRUE(r.guarantee) << what << ": " << describe(r);
  }
  if (r.per_test_bound < 1) {
    EXPECT_LE(r.bound, o.delta) << what << ": " << describe(r);
  }
  if (r.guarantee) {
    EXPECT_LE(r.bound, o.delta) << what;
  }
  if (r.opaque_functions) {
    // exp, silu, relu, gelu and sqrt as unknown functions: a guarantee for the Lax and the non-Lax.
    EXPECT_TRUE(r.guarantee) << what << ": " << describe(r);
  } else if (!lax) {
    EXPECT_FALSE(r.guarantee) << what << ": not Lax, yet a guarantee: " << describe(r);
  }
}

void expect_equivalent(const std::string& reference, const std::string& candidate, const std::string& what) {
  expect_equivalent(parse_program(reference, what + " (reference)"), parse_program(candidate, what + " (candidate)"),
                    what);
}

/// Asserts that `candidate` is rejected by the finite-field tests alone (float filter off).
VerifyResult expect_rejected(const Graph& reference, const Graph& candidate, const std::string& what) {
  VerifyOptions o = options();
  o.float_check = false;
  VerifyResult r = verify(reference, candidate, o);
  std::printf("[ reject   ] %-44s %s\n", what.c_str(), describe(r).c_str());
  EXPECT_EQ(r.verdict, Verdict::not_equivalent) << what << ": " << describe(r);
  EXPECT_FALSE(r.guarantee && r.verdict == Verdict::equivalent) << what;
  return r;
}

VerifyResult expect_rejected(const std::string& reference, const std::string& candidate, const std::string& what) {
  return expect_rejected(parse_program(reference, what + " (reference)"),
                         parse_program(candidate, what + " (candidate)"), what);
}

// ---------------------------------------------------------------------------------------------
// Algebraic rewrites as programs.

struct Rewrite {
  const char* name;
  const char* inputs;     // shared input declarations
  const char* reference;  // statements defining O
  const char* candidate;
};

const Rewrite kRewrites[] = {
    {"distributivity", "input A[8, 16] f32\ninput B[8, 16] f32\ninput C[16, 12] f32\n",
     "O = add(matmul(A, C), matmul(B, C))", "O = matmul(add(A, B), C)"},
    {"matmul re-association", "input X[6, 8] f32\ninput A[8, 10] f32\ninput B[10, 4] f32\n",
     "O = matmul(matmul(X, A), B)", "O = matmul(X, matmul(A, B))"},
    {"row scaling past matmul", "input X[8, 16] f32\ninput W[16, 12] f32\ninput S[8, 1] f32\n",
     "O = div(matmul(X, W), S)", "O = matmul(div(X, S), W)"},
    {"exp of a sum", "input A[8, 16] f32\ninput B[8, 16] f32\n", "O = exp(add(A, B))", "O = mul(exp(A), exp(B))"},
    {"exp of a broadcast sum", "input A[8, 16] f32\ninput B[8, 1] f32\n", "O = exp(sub(A, B))",
     "O = div(exp(A), exp(B))"},
    {"LoRA concat", "input X[8, 32] f32\ninput W[32, 24] f32\ninput A[32, 4] f32\ninput B[4, 24] f32\n",
     "O = add(matmul(X, W), matmul(matmul(X, A), B))",
     "O = matmul(concat(X, matmul(X, A), dim=1), concat(W, B, dim=0))"},
    {"grouped sums", "input X[8, 32] f32\n", "O = sum(X, dim=1)", "O = sum(sum(X, dim=1, to=4), dim=1)"},
    {"grouped sums over dim 0", "input X[16, 6] f32\n", "O = sum(X, dim=0)",
     "O = sum(sum(X, dim=0, to=8), dim=0, to=1)"},
    {"silu expansion", "input X[8, 16] f32\n", "O = silu(X)", "O = div(X, add(1, exp(mul(X, -1))))"},
    {"silu expansion (sub)", "input X[8, 16] f32\n", "O = silu(X)", "O = div(X, add(exp(sub(0, X)), 1))"},
    {"gated MLP: silu of a matmul", "input X[4, 16] f32\ninput W1[16, 8] f32\ninput W2[16, 8] f32\n",
     "O = mul(silu(matmul(X, W1)), matmul(X, W2))",
     "H = matmul(X, W1)\nO = div(mul(H, matmul(X, W2)), add(1, exp(mul(H, -1))))"},
    {"softmax normalizer", "input X[4, 16] f32\ninput V[16, 8] f32\n",
     "E = exp(X)\nO = matmul(div(E, sum(E, dim=1)), V)", "E = exp(X)\nO = div(matmul(E, V), sum(E, dim=1))"},
    {"division by a constant as a product", "input X[8, 16] f32\n", "O = div(X, 8)", "O = mul(X, 0.125)"},
    {"sqr as a product", "input X[8, 16] f32\ninput Y[8, 16] f32\n", "O = sqr(add(X, Y))",
     "O = add(add(mul(X, X), mul(2, mul(X, Y))), sqr(Y))"},
    {"sum of a broadcast product", "input X[8, 16] f32\ninput G[16] f32\n", "O = sum(mul(X, G), dim=1)",
     "O = matmul(X, reshape(G, shape=[16, 1]))"},
    {"repeat as broadcast", "input X[8, 1] f32\ninput Y[8, 16] f32\n", "O = add(X, Y)",
     "O = add(repeat(X, dim=1, times=16), Y)"},
    {"exp of a halved exponent, squared", "input X[8, 16] f32\n", "O = exp(X)", "O = sqr(exp(div(X, 2)))"},
    {"exp cancellation", "input X[8, 16] f32\ninput Y[8, 16] f32\n", "O = add(Y, 1)",
     "O = add(Y, mul(exp(X), exp(mul(X, -1))))"},
    {"relu of commuted operands (not Lax)", "input X[8, 16] f32\ninput Y[8, 16] f32\n", "O = relu(add(X, Y))",
     "O = relu(add(Y, X))"},
    {"second exp on a path (not Lax)", "input X[8, 16] f32\ninput Y[8, 16] f32\n", "O = exp(exp(add(X, Y)))",
     "O = exp(mul(exp(X), exp(Y)))"},
    {"gelu of a matmul, re-associated (not Lax)", "input X[4, 8] f32\ninput A[8, 8] f32\ninput B[8, 4] f32\n",
     "O = gelu(matmul(matmul(X, A), B))", "O = gelu(matmul(X, matmul(A, B)))"},
};

void PrintTo(const Rewrite& r, std::ostream* os) { *os << r.name; }

class Rewrites : public ::testing::TestWithParam<Rewrite> {};

TEST_P(Rewrites, Verify) {
  const Rewrite& r = GetParam();
  std::string in = r.inputs;
  expect_equivalent(in + r.reference + "\noutput O\n", in + r.candidate + "\noutput O\n", r.name);
}

INSTANTIATE_TEST_SUITE_P(Equivalence, Rewrites, ::testing::ValuesIn(kRewrites),
                         [](const ::testing::TestParamInfo<Rewrite>& p) { return std::to_string(p.index); });

TEST(Equivalence, RmsNormReorderedDivision) {
  // Figure 3a, and the same with the normalization applied after the matmul.
  std::string rms = vtest::rmsnorm_linear_program(8, 256, 64);
  std::string after =
      "input X[8, 256] f32\ninput G[256] f32\ninput W[256, 64] f32\nS = sum(sqr(X), dim=1)\n"
      "O = div(matmul(mul(X, G), W), sqrt(div(S, 256)))\noutput O\n";
  expect_equivalent(rms, after, "RMSNorm: division after the matmul");
}

TEST(Equivalence, MultipleOutputs) {
  std::string in = "input A[4, 8] f32\ninput B[8, 4] f32\n";
  expect_equivalent(in + "P = matmul(A, B)\nQ = exp(A)\noutput P, Q\n",
                    in + "Q = exp(mul(A, 1))\nP = matmul(mul(A, 2), div(B, 2))\noutput P, Q\n", "two outputs");
}

// ---------------------------------------------------------------------------------------------
// Non-equivalent pairs.

struct Miss {
  const char* name;
  const char* inputs;
  const char* reference;
  const char* candidate;
};

const Miss kMisses[] = {
    {"distributivity with a wrong operand", "input A[8, 16] f32\ninput B[8, 16] f32\ninput C[16, 12] f32\n",
     "O = add(matmul(A, C), matmul(B, C))", "O = matmul(add(A, A), C)"},
    {"matmul order", "input X[8, 8] f32\ninput A[8, 8] f32\ninput B[8, 8] f32\n", "O = matmul(matmul(X, A), B)",
     "O = matmul(matmul(X, B), A)"},
    {"exp of a sum as a sum of exps", "input A[8, 16] f32\ninput B[8, 16] f32\n", "O = exp(add(A, B))",
     "O = add(exp(A), exp(B))"},
    {"column scaling does not commute", "input X[8, 16] f32\ninput W[16, 16] f32\ninput S[1, 16] f32\n",
     "O = matmul(mul(X, S), W)", "O = mul(matmul(X, W), S)"},
    {"grouped sums of the wrong dim", "input X[8, 8] f32\n", "O = sum(X, dim=1)",
     "O = reshape(sum(X, dim=0), shape=[8, 1])"},
    {"silu sign", "input X[8, 16] f32\n", "O = silu(X)", "O = div(X, add(1, exp(X)))"},
    {"relu against identity", "input X[8, 16] f32\n", "O = relu(X)", "O = X"},
    {"gelu against silu", "input X[8, 16] f32\n", "O = gelu(X)", "O = silu(X)"},
    {"sqrt against identity", "input X[8, 16] f32\n", "O = sqrt(sqr(X))", "O = X"},
    {"constant 2 against 2.0001", "input X[8, 16] f32\n", "O = mul(X, 2)", "O = mul(X, 2.0001)"},
    {"exp scale 1e-5", "input X[8, 16] f32\n", "O = exp(X)", "O = exp(mul(X, 1.00001))"},
    {"LoRA concat in the wrong order",
     "input X[8, 32] f32\ninput W[32, 24] f32\ninput A[32, 4] f32\ninput B[4, 24] f32\n",
     "O = add(matmul(X, W), matmul(matmul(X, A), B))",
     "O = matmul(concat(matmul(X, A), X, dim=1), concat(W, B, dim=0))"},
};

void PrintTo(const Miss& m, std::ostream* os) { *os << m.name; }

class Misses : public ::testing::TestWithParam<Miss> {};

TEST_P(Misses, Rejected) {
  const Miss& m = GetParam();
  std::string in = m.inputs;
  std::string a = in + m.reference + "\noutput O\n", b = in + m.candidate + "\noutput O\n";
  Graph ga = parse_program(a, "reference"), gb = parse_program(b, "candidate");
  if (validate(gb)) {
    // Shapes differ (a deliberately ill-typed miss): then the verdict is incomparable.
    GTEST_SKIP() << m.name << ": candidate invalid: " << validate(gb)->str();
  }
  VerifyResult r = verify(ga, gb, [] {
    VerifyOptions o = options();
    o.float_check = false;
    return o;
  }());
  std::printf("[ reject   ] %-44s %s\n", m.name, describe(r).c_str());
  EXPECT_NE(r.verdict, Verdict::equivalent) << m.name << ": " << describe(r);
}

INSTANTIATE_TEST_SUITE_P(NonEquivalence, Misses, ::testing::ValuesIn(kMisses),
                         [](const ::testing::TestParamInfo<Miss>& p) { return std::to_string(p.index); });

TEST(NonEquivalence, RmsNormDivisorNearMiss) {
  // div(S, 4096) against div(S, 4096.4): a relative change of 1e-4 that the float filter accepts
  // at its 1e-3 tolerance; the finite fields must still see it.
  Graph ref = parse_program(vtest::rmsnorm_linear_program(16, 4096, 64), "ref");
  Graph cand = parse_program(vtest::rmsnorm_linear_program(16, 4096, 64, "4096.4"), "cand");
  double err = float_max_relative_error(ref, cand, 11, 2);
  std::printf("[ near miss] float max relative error %.3g\n", err);
  EXPECT_LT(err, 1e-3);
  EXPECT_GT(err, 0);
  expect_rejected(ref, cand, "RMSNorm div(S, 4096) vs div(S, 4096.4)");
  // With the float filter on, the verdict must still be not_equivalent (the tests run first).
  VerifyResult with_float = verify(ref, cand, options());
  EXPECT_EQ(with_float.verdict, Verdict::not_equivalent) << describe(with_float);
}

TEST(NonEquivalence, NearMissConstants) {
  std::string in = "input X[8, 16] f32\ninput Y[8, 16] f32\n";
  expect_rejected(in + "O = add(X, mul(Y, 0.125))\noutput O\n", in + "O = add(X, mul(Y, 0.1250125))\noutput O\n",
                  "0.125 vs 0.1250125");
  expect_rejected(in + "O = div(exp(X), 3)\noutput O\n", in + "O = div(exp(X), 3.0003)\noutput O\n",
                  "exp(X)/3 vs exp(X)/3.0003");
}

// Known verifier bug (disabled until fixed): a constant is mapped to its residues, so two
// different constants that are congruent modulo the fields (c ≡ c' mod q inside an exponent, or
// mod p and q elsewhere) make different programs agree on every test, and verify() claims a
// guarantee for them. 0.536870219 = q / 10^9 ≡ 0 (mod q); 5.76459264635086141 = p·q / 10^17.
// The float filter rejects these examples (as "numerically unstable", while still reporting
// guarantee = true); with it off they pass. Expected fix: detect constants whose difference is
// divisible by p or q (or draw the fields per run), and never report a guarantee with a
// not_equivalent verdict.
// Different constants that are congruent modulo p or q cannot be told apart by any finite-field
// test. The verifier must not claim a guarantee for them, and the float filter rejects them.
TEST(NonEquivalence, ConstantsCongruentModuloTheFieldsNeverClaimAGuarantee) {
  std::string in = "input X[4, 4] f32\n";
  const std::pair<std::string, std::string> cases[] = {
      {"O = exp(mul(X, 1.536870219))", "O = exp(X)"},  // 0.536870219 = q/10^9 ≡ 0 mod q
      {"O = exp(add(X, 0.536870219))", "O = exp(X)"},
      {"O = mul(X, 5.76459264635086141)", "O = mul(X, 0)"},  // p·q/10^17 ≡ 0 mod p and q
  };
  for (const auto& [a, b] : cases) {
    Graph ga = parse_program(in + a + "\noutput O\n"), gb = parse_program(in + b + "\noutput O\n");
    VerifyOptions no_float = options();
    no_float.float_check = false;
    VerifyResult fields_only = verify(ga, gb, no_float);
    EXPECT_FALSE(fields_only.guarantee) << a << " vs " << b << ": " << describe(fields_only);
    EXPECT_NE(fields_only.guarantee_note.find("constant"), std::string::npos) << fields_only.guarantee_note;
    VerifyResult with_float = verify(ga, gb, options());
    EXPECT_EQ(with_float.verdict, Verdict::not_equivalent) << a << " vs " << b;
    EXPECT_FALSE(with_float.guarantee);
  }
}

TEST(NonEquivalence, IncomparableShapes) {
  Graph a = parse_program("input X[8, 16] f32\nO = exp(X)\noutput O\n");
  Graph b = parse_program("input X[8, 16] f32\nO = sum(exp(X), dim=1)\noutput O\n");
  Graph c = parse_program("input Z[8, 16] f32\nO = exp(Z)\noutput O\n");
  EXPECT_EQ(verify(a, b, options()).verdict, Verdict::incomparable);
  EXPECT_EQ(verify(a, c, options()).verdict, Verdict::incomparable);
}

// ---------------------------------------------------------------------------------------------
// The hand-written μGraphs against their programs.

/// Each example's builder at reduced shapes (same structure: same maps, grid and loop > 1) and
/// its program at those shapes.
struct SmallExample {
  const char* name;
  Graph (*ugraph)();
  std::string (*program)();
};

const SmallExample kSmallExamples[] = {
    {"rmsnorm_fig3b", [] { return examples::rmsnorm_fig3b(4, 64, 32, 4, 4); },
     [] { return vtest::rmsnorm_linear_program(4, 64, 32); }},
    {"rmsnorm_fig3b_wide", [] { return examples::rmsnorm_fig3b(16, 512, 256, 8, 8); },
     [] { return vtest::rmsnorm_linear_program(16, 512, 256); }},
    {"gated_mlp_fig10b", [] { return examples::gated_mlp_fig10b(4, 64, 32, 4, 4); },
     [] { return vtest::gated_mlp_program(4, 64, 32); }},
    {"gated_mlp_fig10b_wide", [] { return examples::gated_mlp_fig10b(8, 512, 256, 8, 8); },
     [] { return vtest::gated_mlp_program(8, 512, 256); }},
    // rows, h, n, cols, splits, loop: kernel 1's grid (n / cols, splits), kernel 2's loop over
    // the splits, as the committed (16, 4096, 4096, 128, 4, 4) and (8, 4096, 4096, 64, 2, 8).
    {"rmsnorm_fig3b_split_k", [] { return examples::rmsnorm_fig3b_split_k(4, 64, 32, 8, 4, 2); },
     [] { return vtest::rmsnorm_linear_program(4, 64, 32); }},
    {"gated_mlp_fig10b_split_k", [] { return examples::gated_mlp_fig10b_split_k(4, 64, 32, 8, 2, 4); },
     [] { return vtest::gated_mlp_program(4, 64, 32); }},
    {"exp_scale_concat", [] { return examples::exp_scale_concat(4, 64, 2, 4); },
     [] { return vtest::exp_scale_program(4, 64); }},
    {"rmsnorm_two_kernels", [] { return examples::rmsnorm_two_kernels(4, 64, 4, 2); },
     [] { return vtest::rmsnorm_program(4, 64); }},
};

void PrintTo(const SmallExample& e, std::ostream* os) { *os << e.name; }

class SmallExamples : public ::testing::TestWithParam<SmallExample> {};

TEST_P(SmallExamples, VerifyAgainstProgram) {
  const SmallExample& e = GetParam();
  Graph ugraph = retype(e.ugraph(), DType::f32);
  Graph program = parse_program(e.program(), e.name);
  expect_equivalent(program, ugraph, std::string(e.name) + " (reduced shapes)");
}

INSTANTIATE_TEST_SUITE_P(Examples, SmallExamples, ::testing::ValuesIn(kSmallExamples),
                         [](const ::testing::TestParamInfo<SmallExample>& p) { return p.param.name; });

/// A non-Lax op is a random function drawn per test; the μGraph (op inside a block graph) and the
/// program (op at kernel level) must draw the same one. Built from exp_scale_concat with its exp
/// replaced.
TEST(Examples, NonLaxOpsInsideBlockGraphsMatchKernelLevel) {
  for (OpKind kind : {OpKind::relu, OpKind::gelu, OpKind::sqr, OpKind::silu}) {
    Graph g = examples::exp_scale_concat(4, 64, 2, 4);
    Graph& body = g.bodies.at(0);
    for (Op& op : body.ops)
      if (op.kind == OpKind::exp) op.kind = kind;
    g = retype(g, DType::f32);
    std::string name(op_name(kind));
    Graph program = parse_program("input X[4, 64] f32\ninput G[64] f32\nO = mul(" + name + "(X), G)\noutput O\n");
    expect_equivalent(program, g, "exp_scale_concat with " + name);
  }
}

struct ExamplePair {
  std::string ugraph, program;
};

std::vector<ExamplePair> read_pairs() {
  std::ifstream in(vtest::source_dir() + "/examples/ugraphs/references.txt");
  std::vector<ExamplePair> pairs;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    ExamplePair p;
    if (fields >> p.ugraph >> p.program) pairs.push_back(p);
  }
  return pairs;
}

/// Every pair of references.txt at the committed (paper) shapes, with the time each takes
/// (Release, 2 threads: Figure 3b about 2.5 s, Figure 10b about 21 s with 17 tests, the others
/// under 0.1 s). The forms of Figure 10b (10 tests of two 8×4096×4096 matmuls each: its silu
/// keeps the per-test bound at 0.107) run only when MUGRAPH_VERIFY_PAPER_SHAPES is set, and in slow (debug
/// or sanitizer) builds those of Figure 3b too; their reduced-shape versions above cover the same
/// structure.
TEST(Examples, CommittedUGraphsVerifyAgainstTheirPrograms) {
  std::vector<ExamplePair> pairs = read_pairs();
  ASSERT_EQ(pairs.size(), examples::all_examples().size()) << "references.txt and example_graphs.h disagree";
  bool all = std::getenv("MUGRAPH_VERIFY_PAPER_SHAPES") != nullptr;
  int ran = 0;
  for (const ExamplePair& p : pairs) {
    bool heavy = p.program == "gated_mlp.mg" || (vtest::slow_build() && p.program == "rmsnorm_linear.mg");
    if (heavy && !all) {
      std::printf("[ skipped  ] %s at paper shapes (set MUGRAPH_VERIFY_PAPER_SHAPES to run it)\n", p.ugraph.c_str());
      continue;
    }
    Graph ugraph = load_graph_file(vtest::source_dir() + "/examples/ugraphs/" + p.ugraph);
    Graph program = load_graph_file(vtest::source_dir() + "/examples/" + p.program);
    ASSERT_FALSE(validate(program)) << p.program << ": " << validate(program)->str();
    ASSERT_FALSE(validate(ugraph)) << p.ugraph << ": " << validate(ugraph)->str();
    expect_equivalent(retype(program, DType::f32), retype(ugraph, DType::f32), p.ugraph + " vs " + p.program, options(),
                      /*validated=*/true);
    ++ran;
  }
  EXPECT_GE(ran, 2);
}

}  // namespace
}  // namespace mugraph
