// Index labels (src/search/labels.h): which program index every dimension stands for, which
// indices are contracted and over which products, and the label rules of the ops the generator
// appends.
#include "labels.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "example_graphs.h"
#include "mugraph/error.h"
#include "mugraph/frontend.h"
#include "search_fixtures.h"

namespace mugraph::search_detail {
namespace {

constexpr const char* kRmsNorm = search_testing::kRmsNormSmall;

/// A one-dimension DimLabels holding label l.
DimLabels one(int16_t l) {
  DimLabels d;
  d.rank = 1;
  d[0] = l;
  return d;
}

/// The carrier entries of `labels` for the program index that label l stands for.
std::vector<CarrierEntry> carried(const DimLabels& labels, int16_t l) {
  std::vector<CarrierEntry> out;
  for (const CarrierEntry& e : labels.carriers)
    if (index_set(one(l)) == uint64_t{1} << e.index) out.push_back(e);
  return out;
}

/// `c` with every count multiplied by k (the carriers of a k-fold product of one factor).
std::vector<CarrierEntry> times(std::vector<CarrierEntry> c, int k) {
  for (CarrierEntry& e : c) e.count *= k;
  return c;
}

std::vector<CarrierEntry> concat(std::vector<CarrierEntry> a, const std::vector<CarrierEntry>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  return a;
}

class RmsNormLabels : public ::testing::Test {
 protected:
  Graph program = parse_program(kRmsNorm);
  ProgramIndices p{program};
  const DimLabels& X = p.input("X");
  const DimLabels& G = p.input("G");
  const DimLabels& W = p.input("W");
  int16_t i = X[0];  // rows
  int16_t k = X[1];  // the hidden (contracted) index
  int16_t n = W[1];  // output columns
};

TEST(ProgramIndices, IndicesApartAreThoseNoProgramTensorHoldsTogether) {
  // Q's and K's columns never meet: no value ranges over both, so no product pairs their slices.
  Graph program = parse_program(R"(
input X[8, 64]
input WQ[64, 32]
input WK[64, 16]
Q = matmul(X, WQ)
K = matmul(X, WK)
output Q, K
)");
  ProgramIndices p{program};
  const int16_t rows = label_base(p.input("X")[0]), hidden = label_base(p.input("X")[1]);
  const int16_t q = label_base(p.input("WQ")[1]), k = label_base(p.input("WK")[1]);
  auto bit = [](int16_t x) { return uint64_t{1} << x; };
  EXPECT_TRUE(p.apart_from(q) & bit(k));
  EXPECT_TRUE(p.apart_from(k) & bit(q));
  EXPECT_FALSE(p.apart_from(q) & bit(rows));    // Q holds both
  EXPECT_FALSE(p.apart_from(q) & bit(hidden));  // WQ holds both
  EXPECT_FALSE(p.apart_from(q) & bit(q));
  EXPECT_EQ(p.apart_from(kNone), 0u);
  // A summed index is apart from nothing: its slices are partial sums.
  EXPECT_EQ(p.apart_from(hidden), 0u);
}

TEST(ProgramIndices, AttentionsKeyWidthIsApartFromNothing) {
  // d (Q's and K's width, summed) and e (V's width) share no tensor, but d is summed.
  Graph program = parse_program(R"(
input Q[2, 8, 16]
input K[2, 16, 32]
input V[2, 32, 24]
O = matmul(exp(matmul(Q, K)), V)
output O
)");
  ProgramIndices p{program};
  const int16_t d = label_base(p.input("Q")[2]), e = label_base(p.input("V")[2]);
  EXPECT_EQ(p.apart_from(d), 0u);
  EXPECT_FALSE(p.apart_from(e) & (uint64_t{1} << d));
}

TEST_F(RmsNormLabels, SharedHiddenIndexIsContracted) {
  ASSERT_EQ(X.rank, 2);
  ASSERT_EQ(G.rank, 1);
  ASSERT_EQ(W.rank, 2);
  EXPECT_EQ(G[0], k);
  EXPECT_EQ(W[0], k);
  EXPECT_NE(i, k);
  EXPECT_NE(n, k);
  EXPECT_NE(i, n);
  for (int16_t l : {i, k, n}) EXPECT_NE(l, kNone);
  EXPECT_TRUE(p.contracted(k));
  EXPECT_FALSE(p.contracted(i));
  EXPECT_FALSE(p.contracted(n));
  // An extent-1 dimension may always be summed.
  EXPECT_TRUE(p.contracted(kNone));
}

TEST_F(RmsNormLabels, OutputRangesOverRowsAndColumns) {
  const DimLabels& o = p.output(0);
  ASSERT_EQ(o.rank, 2);
  EXPECT_EQ(o[0], i);
  EXPECT_EQ(o[1], n);
}

TEST_F(RmsNormLabels, InputsCarryTheirOwnIndices) {
  EXPECT_EQ(index_set(X), index_set(one(i)) | index_set(one(k)));
  EXPECT_EQ(index_set(G), index_set(one(k)));
  EXPECT_EQ(index_set(W), index_set(one(k)) | index_set(one(n)));
  EXPECT_EQ(carried(X, k).size(), 1u);
  EXPECT_EQ(carried(G, k).size(), 1u);
  EXPECT_EQ(carried(W, k).size(), 1u);
  // Distinct inputs are distinct factors.
  EXPECT_NE(carried(X, k)[0].factor, carried(G, k)[0].factor);
  EXPECT_NE(carried(X, k)[0].factor, carried(W, k)[0].factor);
}

TEST_F(RmsNormLabels, ContractionOkOnlyForTheProgramsProducts) {
  const auto x = carried(X, k), g = carried(G, k), w = carried(W, k);
  // sum over k of plain X is not in the program; of X·X (sum(sqr(X))) it is.
  EXPECT_FALSE(p.contraction_ok(k, x));
  EXPECT_TRUE(p.contraction_ok(k, times(x, 2)));
  EXPECT_FALSE(p.contraction_ok(k, times(x, 3)));
  // The matmul contracts k over X·G·W, and only over all three.
  EXPECT_TRUE(p.contraction_ok(k, concat(concat(x, g), w)));
  EXPECT_FALSE(p.contraction_ok(k, concat(x, g)));
  EXPECT_FALSE(p.contraction_ok(k, concat(x, w)));
  EXPECT_FALSE(p.contraction_ok(k, w));
  // A partial result whose contraction was checked where it began passes.
  EXPECT_TRUE(p.contraction_ok(k, {CarrierEntry{carried(X, k)[0].index, kAnyFactor, 1}}));
}

TEST_F(RmsNormLabels, OpLabelsApplyTheContractionRule) {
  const Shape sx{4, 64}, sw{64, 64}, sg{64}, s1{4, 1};
  // sum(X, dim=1): rejected (the program sums X·X over k, not X).
  EXPECT_FALSE(op_labels(p, OpKind::sum, attrs::sum(1), {X}, {sx}, s1).has_value());
  // sum(X, dim=0): i is never contracted.
  EXPECT_FALSE(op_labels(p, OpKind::sum, attrs::sum(0), {X}, {sx}, Shape{1, 64}).has_value());
  // sum(sqr(X), dim=1) and sum(mul(X, X), dim=1) are the program's.
  auto sq = op_labels(p, OpKind::sqr, {}, {X}, {sx}, sx);
  ASSERT_TRUE(sq.has_value());
  auto ssq = op_labels(p, OpKind::sum, attrs::sum(1), {*sq}, {sx}, s1);
  ASSERT_TRUE(ssq.has_value());
  EXPECT_EQ((*ssq)[0], i);
  EXPECT_EQ((*ssq)[1], kNone);
  auto xx = op_labels(p, OpKind::mul, {}, {X, X}, {sx, sx}, sx);
  ASSERT_TRUE(xx.has_value());
  EXPECT_TRUE(op_labels(p, OpKind::sum, attrs::sum(1), {*xx}, {sx}, s1).has_value());
  // matmul(X, W) contracts k over X·W only: rejected; matmul(mul(X, G), W) is the program's.
  EXPECT_FALSE(op_labels(p, OpKind::matmul, {}, {X, W}, {sx, sw}, sx).has_value());
  auto xg = op_labels(p, OpKind::mul, {}, {X, G}, {sx, sg}, sx);
  ASSERT_TRUE(xg.has_value());
  auto o = op_labels(p, OpKind::matmul, {}, {*xg, W}, {sx, sw}, sx);
  ASSERT_TRUE(o.has_value());
  EXPECT_TRUE(o->same_dims(p.output(0)));
}

TEST_F(RmsNormLabels, ElementwiseLabelsCombineOnlyEqualIndices) {
  const Shape sx{4, 64}, sw{64, 64}, sg{64};
  // X with itself and G broadcast along X's rows: fine.
  auto xx = elementwise_labels(X, sx, X, sx, sx);
  ASSERT_TRUE(xx.has_value());
  EXPECT_TRUE(xx->same_dims(X));
  auto xg = elementwise_labels(X, sx, G, sg, sx);
  ASSERT_TRUE(xg.has_value());
  EXPECT_TRUE(xg->same_dims(X));
  // G broadcast along W's columns: G ranges over k, W's last dim over n: rejected, although the
  // shapes broadcast.
  EXPECT_FALSE(elementwise_labels(W, sw, G, sg, sw).has_value());
  // W with itself is fine.
  EXPECT_TRUE(elementwise_labels(W, sw, W, sw, sw).has_value());
}

TEST_F(RmsNormLabels, NonlinearOpsOnlyWhereTheProgramHasThem) {
  // sqrt acts on a value over i (after the sum over k): fine there, not on X (over i and k).
  auto sq = op_labels(p, OpKind::sqr, {}, {X}, {Shape{4, 64}}, Shape{4, 64});
  auto ssq = op_labels(p, OpKind::sum, attrs::sum(1), {*sq}, {Shape{4, 64}}, Shape{4, 1});
  ASSERT_TRUE(ssq.has_value());
  EXPECT_TRUE(p.nonlinear_ok(OpKind::sqrt, *ssq));
  EXPECT_FALSE(p.nonlinear_ok(OpKind::sqrt, X));
  // The program has no exp at all.
  EXPECT_FALSE(p.nonlinear_ok(OpKind::exp, *ssq));
  // div's denominator is the sqrt over i.
  EXPECT_TRUE(p.nonlinear_ok(OpKind::div, *ssq));
  EXPECT_FALSE(p.nonlinear_ok(OpKind::div, W));
}

TEST_F(RmsNormLabels, TheProgramsOwnGraphPassesTheRules) {
  auto labels = kernel_graph_labels(p, program);
  ASSERT_TRUE(labels.has_value());
  EXPECT_TRUE(labels->tensors[program.outputs[0].index()].same_dims(p.output(0)));
}

TEST_F(RmsNormLabels, TileLabelsMarkTheSplitAndSaversReassembleIt) {
  // W split along n by the grid x axis and along k by the loop.
  DimLabels tile = tile_labels(p, W, {1, kPhi, kPhi}, 0, Shape{16, 16}).value();
  EXPECT_NE(tile[0], W[0]);
  EXPECT_NE(tile[1], W[1]);
  EXPECT_EQ(index_set(tile), index_set(W));  // same program indices, only split
  IteratorSplit s = iterator_split(W, {1, kPhi, kPhi}, 0);
  EXPECT_EQ(s.grid[0], n);
  EXPECT_EQ(s.loop, k);
  // Unsplit: the tile is the DTensor.
  EXPECT_TRUE(tile_labels(p, X, {kPhi, kPhi, kPhi}, kPhi, Shape{4, 64})->same_dims(X));
}

TEST(Labels, IndicesOfAGatedMlp) {
  Graph program = parse_program(R"(
input X[4, 64]
input W1[64, 64]
input W2[64, 64]
O = mul(silu(matmul(X, W1)), matmul(X, W2))
output O
)");
  ProgramIndices p(program);
  const DimLabels &x = p.input("X"), &w1 = p.input("W1"), &w2 = p.input("W2");
  EXPECT_EQ(w1[0], x[1]);
  EXPECT_EQ(w2[0], x[1]);
  // Both matmuls' outputs are multiplied element-wise: their columns are one index.
  EXPECT_EQ(w1[1], w2[1]);
  EXPECT_TRUE(p.contracted(x[1]));
  EXPECT_FALSE(p.contracted(x[0]));
  EXPECT_FALSE(p.contracted(w1[1]));
  EXPECT_EQ(p.output(0)[0], x[0]);
  EXPECT_EQ(p.output(0)[1], w1[1]);
}

TEST(Labels, EveryProgramPassesItsOwnIndexRules) {
  // The labels are derived from the program, so its own kernel graph must satisfy them (else the
  // search can never generate the program, not even as one pre-defined kernel per op).
  const char* programs[] = {
      kRmsNorm,
      "input X[4, 64]\ninput W1[64, 64]\ninput W2[64, 64]\nO = mul(silu(matmul(X, W1)), matmul(X, W2))\noutput O\n",
      "input X[4, 64]\ninput G[64]\nO = mul(exp(X), G)\noutput O\n",
      "input X[4, 64]\ninput W[64, 64]\nO = matmul(matmul(X, W), W)\noutput O\n",
      "input X[4, 64]\nO = sum(sum(X, dim=1), dim=0)\noutput O\n",
      "input Q[2, 16, 64]\ninput K[2, 64, 16]\nO = matmul(Q, K)\noutput O\n",
      "input X[4, 64]\ninput W[64, 64]\ninput A[64, 16]\ninput B[16, 64]\n"
      "O = add(matmul(X, W), matmul(matmul(X, A), B))\noutput O\n",
      // Fails today: both dims of X become one index and matmul_labels refuses an output whose
      // dims share an index (labels.cpp: `if (m != kNone && base(m) == base(n))`).
      "input X[64, 64]\nO = matmul(X, X)\noutput O\n",
  };
  for (const char* text : programs) {
    Graph program = parse_program(text);
    ProgramIndices p(program);
    auto labels = kernel_graph_labels(p, program);
    EXPECT_TRUE(labels.has_value()) << "the program breaks its own index rules:\n" << text;
    if (!labels) continue;
    for (size_t j = 0; j < program.outputs.size(); ++j)
      EXPECT_TRUE(labels->tensors[program.outputs[j].index()].same_dims(p.output(j))) << text;
  }
}

// FlashDecoding's split of the keys (examples::gqa_split_kv, small): kernel 1's savers stack the
// blocks' partial numerators along the head dim and put their partial denominators side by side
// along an extent-1 dim; kernel 2 reads one slot of each per iteration and sums them.
class SplitKeysLabels : public ::testing::Test {
 protected:
  Graph program = parse_program(
      "input Q[2, 16, 8]\ninput K[2, 8, 64]\ninput V[2, 64, 8]\n"
      "E = exp(matmul(Q, K))\nO = matmul(div(E, sum(E, dim=2)), V)\noutput O\n");
  ProgramIndices p{program};
  Graph ugraph = examples::gqa_split_kv(2, 16, 8, 64, 8, 4, 8);
  int16_t keys = p.input("K")[2];
  int16_t c = p.input("V")[2];  // the head dim of V and O
};

TEST_F(SplitKeysLabels, SaversStackPartialsAndTheCombineCompletesTheSum) {
  auto labels = kernel_graph_labels(p, ugraph);
  ASSERT_TRUE(labels.has_value());
  const DimLabels& nums = labels->tensors[3];  // [2, 16, 8·8]
  const DimLabels& dens = labels->tensors[4];  // [2, 16, 8]
  EXPECT_TRUE(is_stack(nums[2]));
  EXPECT_EQ(stack_index(nums[2]), keys);
  EXPECT_EQ(stack_slot(nums[2]), c);
  EXPECT_EQ(index_of(nums[2]), label_base(keys));
  EXPECT_EQ(p.extent(nums[2]), 8);
  EXPECT_TRUE(p.contracted(nums[2]));
  EXPECT_EQ(dens[2], keys);  // an extent-1 partial: the dim simply ranges over the keys
  for (const DimLabels* l : {&nums, &dens}) {
    const std::vector<CarrierEntry> k = carried(*l, keys);
    ASSERT_EQ(k.size(), 1u);
    EXPECT_EQ(k[0].factor, kAnyFactor);
  }
  // The combine's result is the program's output, the keys summed away.
  const DimLabels& out = labels->tensors[ugraph.outputs[0].index()];
  EXPECT_TRUE(out.same_dims(p.output(0)));
  EXPECT_TRUE(carried(out, keys).empty());
}

TEST_F(SplitKeysLabels, AStackIsOnlyReadOneSlotPerIteration) {
  auto labels = kernel_graph_labels(p, ugraph);
  ASSERT_TRUE(labels.has_value());
  const DimLabels& nums = labels->tensors[3];
  const DimLabels& dens = labels->tensors[4];
  // One slot per iteration: the tile ranges over the slot's index; a denominator tile of one
  // partial has no index there.
  auto one_slot = tile_labels(p, nums, {1, 0, kPhi}, 2, Shape{1, 8, 8});
  ASSERT_TRUE(one_slot.has_value());
  EXPECT_EQ((*one_slot)[2], c);
  auto one_partial = tile_labels(p, dens, {1, 0, kPhi}, 2, Shape{1, 8, 1});
  ASSERT_TRUE(one_partial.has_value());
  EXPECT_EQ((*one_partial)[2], kNone);
  // Two slots per iteration, the whole stack in one tile, or a stack split across blocks: the
  // tile would mix partials of different slices.
  EXPECT_FALSE(tile_labels(p, nums, {1, 0, kPhi}, 2, Shape{1, 8, 16}).has_value());
  EXPECT_FALSE(tile_labels(p, nums, {1, 0, kPhi}, kPhi, Shape{1, 8, 64}).has_value());
  EXPECT_FALSE(tile_labels(p, nums, {2, 0, kPhi}, kPhi, Shape{1, 16, 8}).has_value());
  // A pre-defined op never reads a stack (a contiguous sum would add neighbouring columns).
  EXPECT_FALSE(op_labels(p, OpKind::sum, attrs::sum(2), {nums}, {Shape{2, 16, 64}}, Shape{2, 16, 1}).has_value());
  EXPECT_FALSE(op_labels(p, OpKind::exp, {}, {nums}, {Shape{2, 16, 64}}, Shape{2, 16, 64}).has_value());
}

TEST_F(SplitKeysLabels, AccumulatingTheSlotsRemovesThePartialMark) {
  auto labels = kernel_graph_labels(p, ugraph);
  ASSERT_TRUE(labels.has_value());
  const DimLabels& nums = labels->tensors[3];
  std::vector<IteratorSplit> splits{iterator_split(nums, {1, 0, kPhi}, 2)};
  DimLabels tile = tile_labels(p, nums, {1, 0, kPhi}, 2, Shape{1, 8, 8}).value();
  auto summed = accum_labels(p, tile, kPhi, 1, splits);
  ASSERT_TRUE(summed.has_value());
  EXPECT_TRUE(carried(*summed, keys).empty());
  EXPECT_EQ((*summed)[2], c);
}

TEST(Labels, ProgramsWithLayoutOpsAreRefused) {
  Graph program = parse_program("input X[4, 64]\nY = reshape(X, shape=[64, 4])\nO = exp(Y)\noutput O\n");
  EXPECT_THROW(ProgramIndices{program}, UserError);
}

}  // namespace
}  // namespace mugraph::search_detail
