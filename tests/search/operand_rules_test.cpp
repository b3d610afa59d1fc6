// The rules on a graph-defined kernel's operands (src/search/operand_rules.h), on nTrans at a
// small shape (search_fixtures.h).
#include "operand_rules.h"

#include <gtest/gtest.h>

#include "example_graphs.h"
#include "mugraph/frontend.h"
#include "search_fixtures.h"

namespace mugraph::search_detail {
namespace {

using search_testing::kNTransSmall;

/// The program's inputs as a kernel-graph prefix, then pre-defined kernels that compute the
/// program's own values: the tensors a search's earlier kernels may have made.
struct Prefix {
  Graph g;
  TensorId h, x, alpha, d, n, t, y, rms_y, sqr_h;
  Prefix() {
    g.level = Level::kernel;
    h = g.add_input("H", {4, 64}, DType::f16);
    x = g.add_input("X", {4, 64}, DType::f16);
    alpha = g.add_input("Alpha", {4, 64}, DType::f16);
    d = op(OpKind::sub, {h, x});
    n = op(OpKind::div, {d, norm_of(d)});
    t = op(OpKind::mul, {alpha, n});
    y = op(OpKind::add, {x, t});
    rms_y = norm_of(y);
    // H²: no value of the program.
    sqr_h = op(OpKind::sqr, {h});
  }
  TensorId op(OpKind kind, std::vector<TensorId> inputs, const OpAttrs& attrs = {}) {
    auto r = g.append(kind, std::move(inputs), attrs);
    EXPECT_TRUE(r.ok()) << r.rejection().str();
    return g.ops[r->index()].outputs[0];
  }
  /// sqrt(sum(v², dim=1) / 64)
  TensorId norm_of(TensorId v) {
    TensorId s = op(OpKind::sum, {op(OpKind::sqr, {v})}, attrs::sum(1));
    return op(OpKind::sqrt, {op(OpKind::div, {s}, attrs::scalar(Scalar{64, 0}, 1))});
  }
};

/// held_program_tensors of a prefix.
std::vector<std::vector<int32_t>> held_by(SearchContext& ctx, const Graph& prefix) {
  auto labels = kernel_graph_labels(ctx.indices(), prefix);
  EXPECT_TRUE(labels.has_value());
  return held_program_tensors(ctx, prefix, expressions(prefix, ctx.exprs()).tensors, *labels);
}

class OperandRules : public ::testing::Test {
 protected:
  Graph program = parse_program(kNTransSmall);
  SearchContext ctx{program, SearchOptions{}};
  Prefix p;
  std::vector<std::vector<int32_t>> held = held_by(ctx, p.g);
  std::vector<ExprId> exprs = expressions(p.g, ctx.exprs()).tensors;
};

TEST_F(OperandRules, TensorsHoldTheProgramValuesTheyCompute) {
  // Inputs hold themselves; D, N, α ⊙ N and Y are program tensors; H² is none.
  for (TensorId t : {p.h, p.x, p.alpha, p.d, p.n, p.t, p.y, p.rms_y}) EXPECT_EQ(held[t.index()].size(), 1u) << t.value;
  EXPECT_TRUE(held[p.sqr_h.index()].empty());
  EXPECT_EQ(program.tensors[static_cast<size_t>(held[p.h.index()][0])].name, "H");
  EXPECT_EQ(program.tensors[static_cast<size_t>(held[p.y.index()][0])].name, "Y");
}

TEST_F(OperandRules, AnOperandWhosePathsToTheOutputsPassThroughAnotherIsRedundant) {
  // After α ⊙ N, H and α reach O only through it; X also reaches it directly (Y = X + α ⊙ N).
  EXPECT_TRUE(has_redundant_operand(ctx, held, exprs, {p.h, p.x, p.alpha, p.t}));
  EXPECT_TRUE(has_redundant_operand(ctx, held, exprs, {p.x, p.alpha, p.t}));
  EXPECT_TRUE(has_redundant_operand(ctx, held, exprs, {p.h, p.x, p.t}));
  EXPECT_FALSE(has_redundant_operand(ctx, held, exprs, {p.x, p.t}));
  EXPECT_FALSE(has_redundant_operand(ctx, held, exprs, {p.h, p.x, p.alpha}));
  // N reaches O only through α ⊙ N, which α and N together make: neither is redundant.
  EXPECT_FALSE(has_redundant_operand(ctx, held, exprs, {p.x, p.alpha, p.n}));
  // D's paths all pass through N (N = D / norm(D)).
  EXPECT_TRUE(has_redundant_operand(ctx, held, exprs, {p.d, p.n, p.x, p.alpha}));
  // A partial result is never judged (H² holds no program value), nor judges others: the one
  // program value inside it, H, is an input.
  EXPECT_FALSE(has_redundant_operand(ctx, held, exprs, {p.h, p.x, p.alpha, p.sqr_h}));
}

TEST_F(OperandRules, AValueNoOperandHoldsCarriesOnlyTheSingleUseChainsInside) {
  // Z = Y + H holds no program value; Y, and D, N and α ⊙ N inside it, are all inside its
  // expression, but Y is read twice (its norm and the division), as D is: no chain of single
  // uses leads from any of them to O, so Z carries none of them and X is not redundant beside
  // it.
  const TensorId z = p.op(OpKind::add, {p.y, p.h});
  held = held_by(ctx, p.g);
  exprs = expressions(p.g, ctx.exprs()).tensors;
  ASSERT_TRUE(held[z.index()].empty());
  EXPECT_FALSE(has_redundant_operand(ctx, held, exprs, {p.x, z}));
  EXPECT_FALSE(has_redundant_operand(ctx, held, exprs, {p.h, p.x, p.alpha, z}));
}

/// RMSNorm (Figure 3a): a prefix that computed X ⊙ G, (X ⊙ G)·W (no value of the program, which
/// divides before it multiplies) and S = sum(X²) with pre-defined kernels.
class RmsNormOperandRules : public ::testing::Test {
 protected:
  Graph program = parse_program(search_testing::kRmsNormSmall);
  SearchContext ctx{program, SearchOptions{}};
  Graph g;
  TensorId x, gain, w, xg, xgw, s;
  std::vector<std::vector<int32_t>> held;
  std::vector<ExprId> exprs;

  void SetUp() override {
    g.level = Level::kernel;
    x = g.add_input("X", {4, 64}, DType::f16);
    gain = g.add_input("G", {64}, DType::f16);
    w = g.add_input("W", {64, 64}, DType::f16);
    xg = op(OpKind::mul, {x, gain});
    xgw = op(OpKind::matmul, {xg, w});
    s = op(OpKind::sum, {op(OpKind::sqr, {x})}, attrs::sum(1));
    held = held_by(ctx, g);
    exprs = expressions(g, ctx.exprs()).tensors;
  }
  TensorId op(OpKind kind, std::vector<TensorId> inputs, const OpAttrs& attrs = {}) {
    auto r = g.append(kind, std::move(inputs), attrs);
    EXPECT_TRUE(r.ok()) << r.rejection().str();
    return g.ops[r->index()].outputs[0];
  }
};

TEST_F(RmsNormOperandRules, AValueNoOperandHoldsCarriesTheProgramValuesOnItsChainToTheOutput) {
  ASSERT_TRUE(held[xgw.index()].empty());
  ASSERT_FALSE(held[s.index()].empty());
  // (X ⊙ G)·W carries X ⊙ G, whose single uses lead to O (the division, then the matmul): G
  // reaches O only through it.
  EXPECT_TRUE(has_redundant_operand(ctx, held, exprs, {x, gain, xgw}));
  EXPECT_TRUE(has_redundant_operand(ctx, held, exprs, {gain, xgw, s}));
  // X also reaches O through X², which it does not carry: the kernel still needs X for the norm.
  EXPECT_FALSE(has_redundant_operand(ctx, held, exprs, {x, xgw}));
  // With S beside it, X's every path is carried (X ⊙ G by (X ⊙ G)·W, X² on the way to S by S).
  EXPECT_TRUE(has_redundant_operand(ctx, held, exprs, {x, xgw, s}));
  // X ⊙ G itself is carried by (X ⊙ G)·W: reading both is reading it twice.
  EXPECT_TRUE(has_redundant_operand(ctx, held, exprs, {x, xg, xgw}));
  EXPECT_FALSE(has_redundant_operand(ctx, held, exprs, {x, xgw}));
  // Without (X ⊙ G)·W, X ⊙ G is no operand's: X is needed beside S, and G beside X.
  EXPECT_FALSE(has_redundant_operand(ctx, held, exprs, {x, gain, w, s}));
  EXPECT_FALSE(has_redundant_operand(ctx, held, exprs, {x, gain, w}));
}

TEST_F(OperandRules, ALastKernelMustNotSplitAnIndexItStillContracts) {
  auto labels = kernel_graph_labels(ctx.indices(), p.g);
  ASSERT_TRUE(labels.has_value());
  const int16_t i = index_of(labels->tensors[p.x.index()][0]), j = index_of(labels->tensors[p.x.index()][1]);
  ASSERT_NE(i, j);
  const uint64_t only_j = uint64_t{1} << j;

  // From the inputs both norms are still to compute: every input feeds a sum over j.
  std::vector<TensorId> inputs{p.h, p.x, p.alpha};
  EXPECT_EQ(unsplittable_indices(ctx, p.g, held, exprs, inputs), (std::vector<uint64_t>{only_j, only_j, only_j}));
  // Every configuration whose grid splits dim 1 (j) of an input is refused, and only those.
  int refused = 0, kept = 0;
  for (const KernelConfig& c : kernel_configs(p.g, inputs)) {
    bool splits_j = false;
    for (size_t k = 0; k < inputs.size(); ++k) splits_j |= c.imaps[k][0] == 1 || c.imaps[k][1] == 1;
    EXPECT_EQ(splits_unsplittable(c, inputs, *labels, unsplittable_indices(ctx, p.g, held, exprs, inputs)), splits_j);
    (splits_j ? refused : kept) += 1;
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(kept, 0);

  // From X and α ⊙ N only the second norm is left: both feed it.
  EXPECT_EQ(unsplittable_indices(ctx, p.g, held, exprs, {p.x, p.t}), (std::vector<uint64_t>{only_j, only_j}));
  // From Y and its norm nothing is contracted any more: blocks may split j.
  EXPECT_EQ(unsplittable_indices(ctx, p.g, held, exprs, {p.y, p.rms_y}), (std::vector<uint64_t>{0, 0}));
  // An operand that holds no program value and has no sum (H²) completes no contraction: the
  // others still feed both norms.
  EXPECT_EQ(unsplittable_indices(ctx, p.g, held, exprs, {p.h, p.x, p.alpha, p.sqr_h}),
            (std::vector<uint64_t>{only_j, only_j, only_j, 0}));
}

/// A graph-defined kernel over `v` ([rows, 64]): 4 blocks along its columns, each writing the
/// sums of the squares of its 16 columns ([rows, 4] in all, partial sums of sum(v², dim=1)).
TensorId partial_sums_of_squares(Graph& g, TensorId v) {
  Graph b = make_block_graph({g.type(v)}, Dim3{4, 1, 1}, 1);
  const TensorId t = b.add(OpKind::input_iterator, {}, examples::iterator(0, examples::kX1, kPhi));  // [rows, 16]
  b.add(OpKind::output_saver, {b.add(OpKind::sum, {b.add(OpKind::sqr, {t})}, attrs::sum(1))},
        examples::saver(0, examples::kX1));
  auto r = g.append_with_body(OpKind::graph_kernel, {v}, std::move(b));
  EXPECT_TRUE(r.ok()) << r.rejection().str();
  return g.ops[r->index()].outputs[0];
}

/// A graph-defined kernel over `v` ([rows, 64]): 2 blocks along its columns, each walking its
/// 32 in a 2-step loop that accumulates (Σ v²) / 64 over 16 columns at a time: partial sums of
/// the mean of squares, scaled inside the loop ([rows, 2] in all).
TensorId scaled_partial_sums_of_squares(Graph& g, TensorId v) {
  Graph b = make_block_graph({g.type(v)}, Dim3{2, 1, 1}, 2);
  const TensorId t = b.add(OpKind::input_iterator, {}, examples::iterator(0, examples::kX1, 1));  // [rows, 16]
  const TensorId s = b.add(OpKind::sum, {b.add(OpKind::sqr, {t})}, attrs::sum(1));
  const TensorId mean = b.add(OpKind::div, {s}, attrs::scalar(Scalar{64, 0}, 1));
  b.add(OpKind::output_saver, {b.add(OpKind::accum, {mean}, examples::accum(kPhi))}, examples::saver(0, examples::kX1));
  auto r = g.append_with_body(OpKind::graph_kernel, {v}, std::move(b));
  EXPECT_TRUE(r.ok()) << r.rejection().str();
  return g.ops[r->index()].outputs[0];
}

TEST_F(OperandRules, APartialSumCompletesTheContractionWhoseSummandItAdds) {
  auto labels = kernel_graph_labels(ctx.indices(), p.g);
  ASSERT_TRUE(labels.has_value());
  const uint64_t only_j = uint64_t{1} << index_of(labels->tensors[p.x.index()][1]);
  // The sums of D² over four slices of j (a [4, 4] stack of partial sums): a last kernel reading
  // them completes sum(D²) from them, not from H and X; but Y's norm is still to compute from
  // H, X and α (and from the partial sums, through N), so no operand may be split along j.
  const TensorId d2 = partial_sums_of_squares(p.g, p.d);
  held = held_by(ctx, p.g);
  exprs = expressions(p.g, ctx.exprs()).tensors;
  ASSERT_TRUE(held[d2.index()].empty());
  EXPECT_EQ(unsplittable_indices(ctx, p.g, held, exprs, {p.h, p.x, p.alpha, d2}),
            (std::vector<uint64_t>{only_j, only_j, only_j, only_j}));
}

TEST_F(OperandRules, AnOutputAnEarlierKernelMadeIsNotComputedAgain) {
  // With O made, a last kernel has nothing to contract: no index is unsplittable.
  Prefix done;
  TensorId o = done.op(OpKind::div, {done.y, done.rms_y});
  auto h = held_by(ctx, done.g);
  ASSERT_EQ(h[o.index()].size(), 1u);
  EXPECT_EQ(
      unsplittable_indices(ctx, done.g, h, expressions(done.g, ctx.exprs()).tensors, {done.h, done.x, done.alpha}),
      (std::vector<uint64_t>{0, 0, 0}));
}

/// The kinds of the ops that make the program's steps, in order.
std::vector<OpKind> step_kinds(const SearchContext& ctx) {
  std::vector<OpKind> kinds;
  for (const ProgramStep& s : ctx.program_steps())
    kinds.push_back(ctx.program().op(ctx.program().tensors[static_cast<size_t>(s.tensors[0])].producer).kind);
  return kinds;
}

TEST(ProgramSteps, AreTheContractionsTheFunctionsTheJoinsAndTheOutputs) {
  // Llama's MLP block: sum(X²), N·W1, silu, N·W2, their product (a join), M·W3 and the residual
  // add (an output no step makes). The norm's divisions, its ε, sqrt and G are none.
  Graph llama = parse_program(search_testing::kLlamaMlpBlockSmall);
  SearchContext llama_ctx(llama, SearchOptions{});
  EXPECT_EQ(step_kinds(llama_ctx), (std::vector<OpKind>{OpKind::sum, OpKind::matmul, OpKind::silu, OpKind::matmul,
                                                        OpKind::mul, OpKind::matmul, OpKind::add}));
  // nTrans: its two sums and the output division; α ⊙ N multiplies no step.
  Graph ntrans = parse_program(kNTransSmall);
  SearchContext ntrans_ctx(ntrans, SearchOptions{});
  EXPECT_EQ(step_kinds(ntrans_ctx), (std::vector<OpKind>{OpKind::sum, OpKind::sum, OpKind::div}));
  // exp is no step (exp(x)·exp(y) = exp(x + y)): softmax's steps are its sum and its output.
  Graph softmax = parse_program("input X[4, 64]\nE = exp(X)\nO = div(E, sum(E, dim=1))\noutput O\n");
  SearchContext softmax_ctx(softmax, SearchOptions{});
  EXPECT_EQ(step_kinds(softmax_ctx), (std::vector<OpKind>{OpKind::sum, OpKind::div}));
  // A program that adds two contractions has none: a matmul of concats computes both.
  Graph lora = parse_program(
      "input X[4, 64]\ninput W[64, 64]\ninput A[64, 16]\ninput B[16, 64]\n"
      "O = add(matmul(X, W), matmul(matmul(X, A), B))\noutput O\n");
  SearchContext lora_ctx(lora, SearchOptions{});
  EXPECT_TRUE(lora_ctx.program_steps().empty());
}

/// Llama's MLP block, with a prefix of pre-defined kernels that compute program values.
class LlamaBlockSteps : public ::testing::Test {
 protected:
  Graph program = parse_program(search_testing::kLlamaMlpBlockSmall);
  SearchContext ctx{program, SearchOptions{}};
  Generator gen{ctx};
  Graph g;
  TensorId x, gain, w1, w2, w3;

  void SetUp() override {
    g.level = Level::kernel;
    x = g.add_input("X", {8, 64}, DType::f16);
    gain = g.add_input("G", {64}, DType::f16);
    w1 = g.add_input("W1", {64, 128}, DType::f16);
    w2 = g.add_input("W2", {64, 128}, DType::f16);
    w3 = g.add_input("W3", {128, 64}, DType::f16);
  }
  TensorId op(OpKind kind, std::vector<TensorId> inputs, const OpAttrs& attrs = {}) {
    auto r = g.append(kind, std::move(inputs), attrs);
    EXPECT_TRUE(r.ok()) << r.rejection().str();
    return g.ops[r->index()].outputs[0];
  }
  /// N, as the program computes it.
  TensorId norm() {
    TensorId s = op(OpKind::sum, {op(OpKind::sqr, {x})}, attrs::sum(1));
    TensorId ms = op(OpKind::add, {op(OpKind::div, {s}, attrs::scalar(Scalar{64, 0}, 1))},
                     attrs::scalar(*parse_scalar("1e-6"), 1));
    return op(OpKind::mul, {gain, op(OpKind::div, {x, op(OpKind::sqrt, {ms})})});
  }
  /// steps_left after the prefix and a kernel reading `operands` (none: no kernel).
  int left(const std::vector<TensorId>& operands) {
    const std::vector<ExprId> exprs = expressions(g, ctx.exprs()).tensors;
    uint64_t vars = 0;
    for (TensorId t : operands) vars |= gen.vars_of(exprs[t.index()]);
    const std::optional<std::vector<size_t>> not_held = steps_not_held(ctx, held_by(ctx, g), exprs);
    return not_held ? steps_left(gen, ctx, *not_held, vars) : 0;
  }
};

TEST_F(LlamaBlockSteps, CountWhatNeitherThePrefixHoldsNorTheKernelCanCompute) {
  EXPECT_EQ(left({}), 7);
  // X, G and W1 give the norm, the gate and its silu; W2's matmul, the join, W3's and the
  // residual add are left.
  EXPECT_EQ(left({x, gain, w1}), 4);
  // With W2 too, the whole gated MLP: the down projection and the add are left.
  EXPECT_EQ(left({x, gain, w1, w2}), 2);
  // Without G, only the norm's sum: N and everything after it multiply by G.
  EXPECT_EQ(left({x, w1, w2, w3}), 6);
}

TEST_F(LlamaBlockSteps, AValueThePrefixHoldsHoldsTheStepsInside) {
  const TensorId n = norm();
  EXPECT_EQ(left({}), 6);  // the sum is inside N
  EXPECT_EQ(left({n, w1, w2}), 2);
  const TensorId m = op(OpKind::mul, {op(OpKind::silu, {op(OpKind::matmul, {n, w1})}), op(OpKind::matmul, {n, w2})});
  EXPECT_EQ(left({}), 2);
  EXPECT_EQ(left({x, m, w3}), 0);
}

TEST_F(LlamaBlockSteps, PartialSumsHoldNoStepAndOtherPartialResultsSilenceTheRule) {
  // Partial sums of X² still take a sum: all seven steps are left. So do partial sums of the
  // mean of squares, which a loop accumulates after the division by 64.
  partial_sums_of_squares(g, x);
  EXPECT_EQ(left({}), 7);
  scaled_partial_sums_of_squares(g, x);
  EXPECT_EQ(left({}), 7);
  // G ⊙ X is no value of the program (it scales X before the norm divides): what it saves a
  // later op is unknown, and the rule says nothing.
  op(OpKind::mul, {x, gain});
  EXPECT_EQ(left({}), 0);
}

TEST(OperandRulesWithoutProgramTileValues, AreSilent) {
  Graph program = parse_program(kNTransSmall);
  SearchOptions o;
  o.program_tile_values = false;
  SearchContext ctx(program, o);
  Prefix p;
  auto held = held_by(ctx, p.g);
  for (const auto& h : held) EXPECT_TRUE(h.empty());
  const std::vector<ExprId> exprs = expressions(p.g, ctx.exprs()).tensors;
  EXPECT_FALSE(has_redundant_operand(ctx, held, exprs, {p.h, p.x, p.alpha, p.t}));
  EXPECT_EQ(unsplittable_indices(ctx, p.g, held, exprs, {p.h, p.x, p.alpha}), (std::vector<uint64_t>{0, 0, 0}));
}

TEST_F(OperandRules, PartialSumsScaledByConstantsAddUpTheProgramsContractions) {
  // Blocks' partial sums of D² (the program sums D² over 64 columns), as later kernels read
  // them: plain, scaled by a constant once or twice inside a loop's accumulator, and scaled by
  // a value (H) or summing H², which no contraction of the program sums.
  ExprPool& e = ctx.exprs();
  const ExprId d2 = e.mul(exprs[p.d.index()], exprs[p.d.index()]);
  const ExprId part = e.sum(16, d2);
  const ExprId c64 = e.constant(Scalar{64, 0});
  EXPECT_TRUE(sums_program_contractions(ctx, part));
  EXPECT_TRUE(sums_program_contractions(ctx, e.sum(4, e.div(part, c64))));
  EXPECT_TRUE(sums_program_contractions(ctx, e.sum(4, e.div(e.div(part, c64), c64))));
  EXPECT_TRUE(sums_program_contractions(ctx, e.sum(4, e.mul(c64, e.div(part, c64)))));
  EXPECT_FALSE(sums_program_contractions(ctx, e.sum(4, e.mul(part, exprs[p.h.index()]))));
  EXPECT_FALSE(sums_program_contractions(ctx, e.sum(16, exprs[p.sqr_h.index()])));
}

}  // namespace
}  // namespace mugraph::search_detail
