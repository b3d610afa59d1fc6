// The Lax check (paper Definition 5.1): which programs and μGraphs are Lax, the violation it
// reports otherwise, and the symbolic bounds on Equation 2 it computes for Theorem 2.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "../ir/example_graphs.h"
#include "lax_forms.h"
#include "line_degrees.h"
#include "mugraph/frontend.h"
#include "mugraph/loader.h"
#include "mugraph/validate.h"
#include "mugraph/verify.h"

namespace mugraph {
namespace {

std::string source_dir() {
  const char* dir = std::getenv("MUGRAPH_SOURCE_DIR");
  return dir ? dir : MUGRAPH_SOURCE_DIR_DEFAULT;
}

LaxReport lax_of_file(const std::string& relative) { return check_lax(load_graph_file(source_dir() + "/" + relative)); }
LaxReport lax_of(const std::string& program) { return check_lax(parse_program(program)); }

TEST(Lax, ExamplePrograms) {
  for (const char* name : {"rmsnorm_linear", "rmsnorm", "gated_mlp", "lora", "gqa", "exp_scale", "ntrans", "qknorm"}) {
    LaxReport r = lax_of_file(std::string("examples/") + name + ".mg");
    EXPECT_TRUE(r.lax) << name << ": " << r.violation;
    EXPECT_TRUE(r.violation.empty()) << name;
    EXPECT_LE(r.max_exps_on_path, 1) << name;
  }
  EXPECT_TRUE(lax_of_file("examples/rmsnorm_linear.mg").uses_sqrt);
  EXPECT_FALSE(lax_of_file("examples/lora.mg").uses_sqrt);
  EXPECT_EQ(lax_of_file("examples/lora.mg").max_exps_on_path, 0);
  EXPECT_EQ(lax_of_file("examples/gqa.mg").max_exps_on_path, 1);
  EXPECT_EQ(lax_of_file("examples/gated_mlp.mg").max_exps_on_path, 1);  // silu holds one exp
}

TEST(Lax, HandWrittenUGraphsWalkIntoBodies) {
  for (const char* name : {"rmsnorm_fig3b", "gated_mlp_fig10b", "exp_scale_concat", "rmsnorm_two_kernels"}) {
    LaxReport r = lax_of_file(std::string("examples/ugraphs/") + name + ".json");
    EXPECT_TRUE(r.lax) << name << ": " << r.violation;
  }
  // The silu sits in a thread graph inside a graph-defined kernel: the walk must find it.
  EXPECT_EQ(lax_of_file("examples/ugraphs/gated_mlp_fig10b.json").max_exps_on_path, 1);
  EXPECT_EQ(lax_of_file("examples/ugraphs/exp_scale_concat.json").max_exps_on_path, 1);
  EXPECT_TRUE(lax_of_file("examples/ugraphs/rmsnorm_fig3b.json").uses_sqrt);
}

TEST(Lax, ViolationInsideAThreadGraphNamesWhere) {
  Graph g = load_graph_file(source_dir() + "/examples/ugraphs/gated_mlp_fig10b.json");
  bool replaced = false;
  for (Graph& block : g.bodies)
    for (Graph& thread : block.bodies)
      for (Op& op : thread.ops)
        if (op.kind == OpKind::silu) {
          op.kind = OpKind::relu;
          replaced = true;
        }
  ASSERT_TRUE(replaced);
  LaxReport r = check_lax(g);
  EXPECT_FALSE(r.lax);
  EXPECT_NE(r.violation.find("relu (op "), std::string::npos) << r.violation;
  EXPECT_NE(r.violation.find("of thread graph 0 (body of op "), std::string::npos) << r.violation;
  EXPECT_NE(r.violation.find("of block graph 0 (body of op "), std::string::npos) << r.violation;
  EXPECT_NE(r.violation.find("of the kernel graph"), std::string::npos) << r.violation;
  EXPECT_NE(r.violation.find("is not multilinear"), std::string::npos) << r.violation;
  EXPECT_NE(r.violation.find("X → matmul"), std::string::npos) << r.violation;
  EXPECT_EQ(r.max_exps_on_path, 0);
}

TEST(Lax, ReluIsNotLax) {
  LaxReport r = lax_of(
      "input X[4, 8]\ninput W[8, 8]\n"
      "H = relu(matmul(X, W))\n"
      "O = matmul(H, W)\n"
      "output O\n");
  EXPECT_FALSE(r.lax);
  EXPECT_EQ(r.violation,
            "relu (op 3 of the kernel graph, tensor H) is not multilinear; it is modelled as a random function "
            "(path X → matmul → relu)");
}

TEST(Lax, GeluIsNotLax) {
  LaxReport r = lax_of("input X[4, 8]\nO = add(gelu(X), X)\noutput O\n");
  EXPECT_FALSE(r.lax);
  EXPECT_NE(r.violation.find("gelu (op 1 of the kernel graph) is not multilinear"), std::string::npos) << r.violation;
}

TEST(Lax, SecondExpOnAPath) {
  LaxReport r = lax_of("input X[4, 8]\nO = exp(exp(X))\noutput O\n");
  EXPECT_FALSE(r.lax);
  EXPECT_EQ(r.max_exps_on_path, 2);
  EXPECT_EQ(r.violation,
            "exp (op 2 of the kernel graph, tensor O) is the second exp-like op on the path X → exp → exp; "
            "it is modelled as a random function");
}

TEST(Lax, SecondExpThroughOtherOps) {
  LaxReport r = lax_of(
      "input X[4, 8]\n"
      "E = exp(X)\n"
      "S = sum(mul(E, X), dim=1)\n"
      "O = exp(S)\n"
      "output O\n");
  EXPECT_FALSE(r.lax);
  EXPECT_NE(r.violation.find("the path X → exp → mul → sum → exp"), std::string::npos) << r.violation;
}

TEST(Lax, SiluCountsAsAnExp) {
  LaxReport r = lax_of("input X[4, 8]\nO = silu(exp(X))\noutput O\n");
  EXPECT_FALSE(r.lax);
  EXPECT_NE(r.violation.find(
                "silu (op 2 of the kernel graph, tensor O) is the second exp-like op on the path X → exp → silu"),
            std::string::npos)
      << r.violation;
}

TEST(Lax, ExpsOnSeparatePathsAreFine) {
  // Two exps, but no path passes both: exp(X) · exp(Y), and softmax-like exp / sum(exp).
  LaxReport r = lax_of(
      "input X[4, 8]\ninput Y[4, 8]\n"
      "E = exp(X)\n"
      "O = add(mul(E, exp(Y)), div(E, sum(E, dim=1)))\n"
      "output O\n");
  EXPECT_TRUE(r.lax) << r.violation;
  EXPECT_EQ(r.max_exps_on_path, 1);
}

TEST(Lax, OpsThatReachNoOutputDoNotCount) {
  LaxReport r = lax_of("input X[4, 8]\nR = relu(X)\nO = exp(X)\noutput O\n");
  EXPECT_TRUE(r.lax) << r.violation;
}

TEST(Lax, PathGoesThroughTensorsNotConstants) {
  LaxReport r = lax_of("input X[4, 8]\nO = relu(add(1, mul(2, X)))\noutput O\n");
  EXPECT_NE(r.violation.find("(path X → mul → add → relu)"), std::string::npos) << r.violation;
}

TEST(Lax, FirstViolationIsReported) {
  LaxReport r = lax_of("input X[4, 8]\nA = relu(X)\nB = exp(exp(X))\nO = add(A, B)\noutput O\n");
  EXPECT_FALSE(r.lax);
  EXPECT_EQ(r.violation.rfind("relu (op 1", 0), 0u) << r.violation;
}

TEST(LaxBounds, Polynomials) {
  // An input is a degree-1 polynomial with one plain term.
  LaxReport x = lax_of("input X[4, 8]\nO = add(X, 1)\noutput O\n");
  EXPECT_EQ(x.degree, 1);
  EXPECT_EQ(x.exp_terms, 1);
  EXPECT_EQ(lax_of("input X[4, 8]\nO = mul(X, X)\noutput O\n").degree, 2);
  EXPECT_EQ(lax_of("input X[4, 8]\nO = sqr(sqr(X))\noutput O\n").degree, 4);
  // A sum with a constant denominator does not raise the degree; a matmul multiplies two inputs.
  EXPECT_EQ(lax_of("input X[4, 8]\nO = sum(X, dim=1)\noutput O\n").degree, 1);
  EXPECT_EQ(lax_of("input X[4, 8]\ninput W[8, 4]\nO = matmul(X, W)\noutput O\n").degree, 2);
  // lora: X·W + (X·A)·B has degree 3.
  EXPECT_EQ(lax_of_file("examples/lora.mg").degree, 3);
  EXPECT_EQ(lax_of_file("examples/lora.mg").exp_terms, 1);
}

TEST(LaxBounds, SumsOverFractionsUseACommonDenominator) {
  // Σ_8 X/Y: numerator degree 1 + 7·1, denominator 8·1.
  EXPECT_EQ(lax_of("input X[4, 8]\ninput Y[4, 8]\nO = sum(div(X, Y), dim=1)\noutput O\n").degree, 8);
  EXPECT_EQ(lax_of("input X[4, 16]\ninput Y[4, 16]\nO = sum(div(X, Y), dim=1)\noutput O\n").degree, 16);
  // sum(dim, to) sums groups of n/to elements.
  EXPECT_EQ(lax_of("input X[4, 16]\ninput Y[4, 16]\nO = sum(div(X, Y), dim=1, to=4)\noutput O\n").degree, 4);
  // A sqrt is a fresh variable: X·G / s has degree 2 over 1. The projection sums 4096 of them
  // over s, which is the same along the row the matmul sums: degree 3 over 1, not 3 + 4095.
  EXPECT_EQ(lax_of_file("examples/rmsnorm.mg").degree, 2);
  EXPECT_EQ(lax_of_file("examples/rmsnorm_linear.mg").degree, 3);
}

/// The degree bound of an exp-free program's output, checked against its true degrees along a
/// line (line_degrees.h): a claim below them fails the test.
double rational_degree(const std::string& program) {
  Graph g = parse_program(program);
  std::vector<lax::Form> forms;
  LaxReport r = lax::check_lax_forms(g, forms);
  EXPECT_TRUE(vtest::degrees_hold_along_a_line(g, forms.at(0), 3)) << program;
  return r.degree;
}

TEST(LaxBounds, SumsKeepADenominatorTheSummandsShare) {
  // Σ_j X[i, j] / S[i] = (Σ_j X[i, j]) / S[i]: S broadcasts along the dim summed.
  EXPECT_EQ(rational_degree("input X[4, 8]\ninput S[4, 1]\nO = sum(div(X, S), dim=1)\noutput O\n"), 1);
  // Along the other dim S differs: the sum over rows multiplies the four denominators.
  EXPECT_EQ(rational_degree("input X[4, 8]\ninput S[4, 1]\nO = sum(div(X, S), dim=0)\noutput O\n"), 4);
  // Broadcasting by rank: T [8] is the same along X's rows, so is X / T; S [4, 1] in [2, 4, 8] is
  // the same along the batch dim it lacks and the last, where its extent is 1.
  EXPECT_EQ(rational_degree("input X[4, 8]\ninput T[8]\nO = sum(div(X, T), dim=0)\noutput O\n"), 1);
  EXPECT_EQ(rational_degree("input X[4, 8]\ninput T[8]\nO = sum(div(X, T), dim=1)\noutput O\n"), 8);
  EXPECT_EQ(rational_degree("input X[2, 4, 8]\ninput S[4, 1]\nO = sum(div(X, S), dim=0)\noutput O\n"), 1);
  EXPECT_EQ(rational_degree("input X[2, 4, 8]\ninput S[4, 1]\nO = sum(div(X, S), dim=1)\noutput O\n"), 4);
  EXPECT_EQ(rational_degree("input X[2, 4, 8]\ninput S[4, 1]\nO = sum(div(X, S), dim=2)\noutput O\n"), 1);
  // A matmul sums over x's last dim and w's first: (X / S) · W keeps S, (X / T) · W does not.
  EXPECT_EQ(rational_degree("input X[4, 8]\ninput S[4, 1]\ninput W[8, 2]\nO = matmul(div(X, S), W)\noutput O\n"), 2);
  EXPECT_EQ(rational_degree("input X[4, 8]\ninput T[8]\ninput W[8, 2]\nO = matmul(div(X, T), W)\noutput O\n"), 2 + 7);
  // w's denominator too: W / U with U [1, 2] is the same down W's rows, with U [8, 1] it is not.
  EXPECT_EQ(rational_degree("input X[4, 8]\ninput W[8, 2]\ninput U[1, 2]\nO = matmul(X, div(W, U))\noutput O\n"), 2);
  EXPECT_EQ(rational_degree("input X[4, 8]\ninput W[8, 2]\ninput U[8, 1]\nO = matmul(X, div(W, U))\noutput O\n"), 9);
  // Only a divisor the same along the dim keeps it: X / (X + S) has X in its denominator.
  EXPECT_EQ(rational_degree("input X[4, 8]\ninput S[4, 1]\nO = sum(div(S, add(X, S)), dim=1)\noutput O\n"), 8);
  // A dividend's denominator stays below: (S / X) / S is S / (X·S), eight different ones.
  EXPECT_EQ(rational_degree("input X[4, 8]\ninput S[4, 1]\nO = sum(div(div(S, X), S), dim=1)\noutput O\n"), 8 * 2);
  // A repeat copies: the repeated row sum is the same along the dim it widens.
  EXPECT_EQ(rational_degree("input X[4, 8]\nS = repeat(sum(X, dim=1), dim=1, times=8)\n"
                            "O = sum(div(X, S), dim=1)\noutput O\n"),
            1);
  // A concat joins different formulas along its dim, and a reshape mixes dims: neither keeps it.
  EXPECT_EQ(rational_degree("input X[4, 4]\ninput S[4, 1]\ninput T[4, 1]\n"
                            "O = sum(concat(div(X, S), div(X, T), dim=1), dim=1)\noutput O\n"),
            8);
  EXPECT_EQ(
      rational_degree("input X[4, 8]\ninput S[4, 1]\nO = sum(reshape(div(X, S), shape=[4, 8]), dim=1)\noutput O\n"), 8);
  // Two columns, each the same along dim 1 by itself (extent 1), joined along it: no longer.
  EXPECT_EQ(rational_degree("input X[4, 2]\ninput S[4, 1]\ninput T[4, 1]\n"
                            "O = sum(div(X, concat(S, T, dim=1)), dim=1)\noutput O\n"),
            2);
  // silu's denominator 1 + exp(−x) holds x: summing silu(X) puts eight of them under one bar
  // (8 · 2⁷ terms above, the plain ones merged), summing X · silu(S) keeps S's one (X·S above,
  // 1 + exp(−S) below).
  EXPECT_EQ(lax_of("input X[4, 8]\nO = sum(silu(X), dim=1)\noutput O\n").exp_terms, 8 * 128 - 7);
  EXPECT_EQ(lax_of("input X[4, 8]\ninput S[4, 1]\nO = sum(mul(X, silu(S)), dim=1)\noutput O\n").exp_terms, 2);
  // Softmax times V, with the row sums the same along the dim the second matmul sums.
  LaxReport attention = lax_of(
      "input Q[4, 8]\ninput K[8, 16]\ninput V[16, 8]\n"
      "E = exp(matmul(Q, K))\nO = matmul(div(E, sum(E, dim=1)), V)\noutput O\n");
  EXPECT_EQ(attention.degree, 2);      // the exponents Q·K
  EXPECT_EQ(attention.exp_terms, 16);  // 16 terms above and below
}

TEST(LaxBounds, ExponentialTerms) {
  LaxReport e = lax_of("input X[4, 8]\nO = exp(X)\noutput O\n");
  EXPECT_EQ(e.exp_terms, 1);  // exp(X) is a single term
  EXPECT_EQ(e.degree, 1);     // its exponent X
  // exp(X) + 1: an exp term and a plain term.
  EXPECT_EQ(lax_of("input X[4, 8]\nO = add(exp(X), 1)\noutput O\n").exp_terms, 2);
  // exp(X)·exp(Y) stays one term.
  EXPECT_EQ(lax_of("input X[4, 8]\ninput Y[4, 8]\nO = mul(exp(X), exp(Y))\noutput O\n").exp_terms, 1);
  // A sum of n exps has n terms; the exponent degree follows the operand.
  EXPECT_EQ(lax_of("input X[4, 8]\nO = sum(exp(X), dim=1)\noutput O\n").exp_terms, 8);
  EXPECT_EQ(lax_of("input X[4, 32]\nO = sum(exp(X), dim=1)\noutput O\n").exp_terms, 32);
  EXPECT_EQ(lax_of("input X[4, 8]\ninput W[8, 8]\nO = exp(matmul(X, W))\noutput O\n").degree, 2);
  // silu(x) = x / (1 + exp(−x)): two terms in the denominator.
  EXPECT_EQ(lax_of("input X[4, 8]\nO = silu(X)\noutput O\n").exp_terms, 2);
  // Softmax over 4096 columns: the bound is huge, so Theorem 2 is vacuous there.
  EXPECT_GE(lax_of_file("examples/gqa.mg").exp_terms, 4096);
}

TEST(LaxBounds, Saturate) {
  LaxReport r = lax_of(
      "input X[4, 4096]\ninput Y[4, 4096]\n"
      "A = sum(div(exp(X), add(exp(Y), 1)), dim=1)\n"
      "O = sum(div(repeat(A, dim=1, times=4096), Y), dim=1)\n"
      "output O\n");
  EXPECT_TRUE(r.lax) << r.violation;
  EXPECT_GT(r.exp_terms, 1e20);
  EXPECT_LE(r.exp_terms, 1e30);
  EXPECT_LE(r.degree, 1e30);
}

TEST(OpaqueForms, CountApplicationsPerBlockAndIteration) {
  // The collision term of the unknown-function bound counts every application: m²/2 pairs.
  auto apps_of = [](const Graph& g) {
    std::vector<lax::Form> forms;
    lax::FunctionApplications apps;
    lax::check_opaque_forms(g, forms, apps);
    return std::make_pair(forms, apps);
  };
  // Kernel level: one per element. sqrt's operand, a sum of squares, has degree 2.
  auto [forms, apps] =
      apps_of(parse_program("input X[4, 8]\nS = sqrt(sum(sqr(X), dim=1))\nO = relu(div(X, S))\noutput O\n"));
  EXPECT_EQ(apps.count, 4 + 32);
  EXPECT_EQ(apps.arg_num_deg, 2);
  EXPECT_EQ(apps.arg_den_deg, 1);  // relu's operand X / S, S a fresh variable
  ASSERT_EQ(forms.size(), 1u);
  EXPECT_EQ(forms[0].degree(), 1);  // relu(...) is itself a fresh variable
  EXPECT_EQ(forms[0].numerator_terms(), 1);
  // exp inside a for-loop: a [4, 8] tile in each of 4 iterations of 2 blocks, X's 256 elements.
  EXPECT_EQ(apps_of(examples::exp_scale_concat(4, 64, 2, 4)).second.count, 256);
  // sqrt in a thread graph of a one-iteration kernel: the [16, 1] sums in each of 32 blocks.
  EXPECT_EQ(apps_of(examples::rmsnorm_two_kernels()).second.count, 16 * 32);
  // Figure 3b: the sqrt after the loop runs once per block, not once per iteration (128 blocks,
  // 16 iterations).
  EXPECT_EQ(apps_of(load_graph_file(source_dir() + "/examples/ugraphs/rmsnorm_fig3b.json")).second.count, 16 * 128);
}

/// O = Σ_j X[i, j] / Y[., j] at the kernel level over Q = X / Y, computed by a kernel whose two blocks
/// each own one column: its tile [4, 1] has a single column, but Y's [1, 2] differ from block to block
/// unless `y_replicated` (Y [1, 1], read whole by both blocks).
Graph quotient_by_blocks(bool y_replicated) {
  Graph k;
  TensorId x = k.add_input("X", {4, 2});
  TensorId y = k.add_input("Y", {1, y_replicated ? 1 : 2});
  Graph b = make_block_graph({k.type(x), k.type(y)}, Dim3{2, 1, 1}, 1);
  TensorId xt = b.add(OpKind::input_iterator, {}, examples::iterator(0, examples::kX1, kPhi));
  TensorId yt =
      b.add(OpKind::input_iterator, {}, examples::iterator(1, y_replicated ? examples::kNoMap : examples::kX1, kPhi));
  b.add(OpKind::output_saver, {b.add(OpKind::div, {xt, yt})}, examples::saver(0, examples::kX1));
  auto q = k.append_with_body(OpKind::graph_kernel, {x, y}, std::move(b));
  examples::name_output(k, k.add(OpKind::sum, {examples::output_of(k, q)}, examples::reduce(1)), "O");
  return k;
}

/// Σ over a 4-iteration loop of the row sums of X / Y tiles [4, 2], Y [4, 8] split by the loop
/// along its columns (`y_split`) or Y [4, 1] the same in every iteration.
Graph quotient_by_iterations(bool y_split) {
  Graph k;
  TensorId x = k.add_input("X", {4, 8});
  TensorId y = k.add_input("Y", {4, y_split ? 8 : 1});
  Graph b = make_block_graph({k.type(x), k.type(y)}, Dim3{2, 1, 1}, 4);
  TensorId xt = b.add(OpKind::input_iterator, {}, examples::iterator(0, examples::kX0, 1));
  TensorId yt = b.add(OpKind::input_iterator, {}, examples::iterator(1, examples::kX0, y_split ? 1 : kPhi));
  TensorId s = b.add(OpKind::sum, {b.add(OpKind::div, {xt, yt})}, examples::reduce(1));
  b.add(OpKind::output_saver, {b.add(OpKind::accum, {s}, examples::accum(kPhi))}, examples::saver(0, examples::kX0));
  auto o = k.append_with_body(OpKind::graph_kernel, {x, y}, std::move(b));
  examples::name_output(k, examples::output_of(k, o), "O");
  return k;
}

/// Σ_j X[i, j] / C[j] at the kernel level, C a copy of S [1, 4] that a one-block kernel gathers
/// column by column, one per iteration, in a concatenating accumulator: each iteration's tile
/// [1, 1] is the same along its one column, the gathered row is not.
Graph quotient_by_gathered_columns() {
  Graph k;
  TensorId x = k.add_input("X", {4, 4});
  TensorId s = k.add_input("S", {1, 4});
  Graph b = make_block_graph({k.type(s)}, Dim3{1, 1, 1}, 4);
  TensorId st = b.add(OpKind::input_iterator, {}, examples::iterator(0, examples::kNoMap, 1));
  b.add(OpKind::output_saver, {b.add(OpKind::accum, {st}, examples::accum(1))}, examples::saver(0));
  auto c = k.append_with_body(OpKind::graph_kernel, {s}, std::move(b));
  TensorId q = k.add(OpKind::div, {x, examples::output_of(k, c)});
  examples::name_output(k, k.add(OpKind::sum, {q}, examples::reduce(1)), "O");
  return k;
}

TEST(OpaqueForms, BlocksAndIterationsKeepADenominatorOnlyWhereItIsTheSame) {
  auto degree = [](const Graph& g) {
    EXPECT_FALSE(validate(g)) << validate(g)->message;
    std::vector<lax::Form> forms;
    lax::FunctionApplications apps;
    lax::check_opaque_forms(g, forms, apps);
    // The claim must hold: a degree below the true one would fail here.
    EXPECT_TRUE(vtest::degrees_hold_along_a_line(g, forms.at(0), 5));
    return forms.at(0).degree();
  };
  // Each block's tile has one column, but the blocks' columns of Y differ: the kernel-level sum
  // over them multiplies both.
  EXPECT_EQ(degree(quotient_by_blocks(false)), 2);
  EXPECT_EQ(degree(quotient_by_blocks(true)), 1);
  // The loop sums four iterations' sums of two: over eight different Y or one.
  EXPECT_EQ(degree(quotient_by_iterations(true)), 8);
  EXPECT_EQ(degree(quotient_by_iterations(false)), 1);
  // Gathered by the iterations, the columns of S stay four different denominators.
  EXPECT_EQ(degree(quotient_by_gathered_columns()), 4);
  // QKNorm split along the keys: exp's operand is Q·K / (‖Q‖·‖K‖), degree 2 over 2, though the
  // norms are computed in thread graphs and the 64 products summed in a block's matmul; the
  // output, Σ E·V / Σ E over the loop and then over the blocks' slots, has degree 4.
  std::vector<lax::Form> forms;
  lax::FunctionApplications apps;
  lax::check_opaque_forms(examples::qknorm_split_kv(2, 16, 8, 64, 4, 2, 4, 2), forms, apps);
  EXPECT_EQ(apps.arg_num_deg, 2);
  EXPECT_EQ(apps.arg_den_deg, 2);
  ASSERT_EQ(forms.size(), 1u);
  EXPECT_LE(forms[0].degree(), 4);
  EXPECT_EQ(forms[0].numerator_terms(), 1);
}

}  // namespace
}  // namespace mugraph
