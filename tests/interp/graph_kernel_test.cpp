// Graph-defined kernels: the block-graph semantics of DESIGN.md §1 (grid, imaps, fmaps, accumulators,
// post-processing, output savers, thread graphs) against kernel-level programs and hand results.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "interp_test_util.h"
#include "mugraph/validate.h"
#include "test_graphs.h"

namespace mugraph {
namespace {

using test::run;
using test::tensor;

constexpr std::array<int8_t, 3> kNoMap{kPhi, kPhi, kPhi};

/// Wraps a block graph into a kernel graph with one input per param, marks every output.
Graph kernel_of(Graph body) {
  Graph k;
  std::vector<TensorId> ins;
  for (size_t i = 0; i < body.params.size(); ++i)
    ins.push_back(k.add_input("in" + std::to_string(i), body.params[i].shape, body.params[i].dtype));
  auto op = k.append_with_body(OpKind::graph_kernel, ins, std::move(body));
  MUGRAPH_CHECK(op.ok()) << op.rejection().str();
  for (size_t i = 0; i < k.ops[op->index()].outputs.size(); ++i)
    k.mark_output(k.ops[op->index()].outputs[i], "out" + std::to_string(i));
  return k;
}

std::vector<float> iota(int n, float start = 0) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = start + static_cast<float>(i);
  return v;
}

struct Shapes {
  int64_t b, h, n, grid, loop;
};

class Fig3b : public ::testing::TestWithParam<Shapes> {};

TEST_P(Fig3b, MatchesTheProgram) {
  Shapes s = GetParam();
  Graph fused = test::rmsnorm_fig3b(s.b, s.h, s.n, s.grid, s.loop);
  ASSERT_FALSE(validate(fused)) << validate(fused)->str();
  Graph ref = test::rmsnorm_reference(s.b, s.h, s.n);
  auto in = random_inputs(ref, 11);
  HostTensor got = run(fused, in, 2).at(0), want = run(ref, in, 2).at(0);
  ASSERT_EQ(got.type, want.type);
  EXPECT_LE(test::relative_error(got, want), 1e-3);
  EXPECT_TRUE(test::bit_identical(got, run(fused, in, 1).at(0)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, Fig3b,
                         ::testing::Values(Shapes{4, 64, 32, 4, 4}, Shapes{16, 256, 128, 8, 16},
                                           Shapes{8, 128, 64, 1, 1}, Shapes{8, 128, 64, 4, 1},
                                           Shapes{8, 128, 64, 1, 8}));

class GatedMlp : public ::testing::TestWithParam<Shapes> {};

TEST_P(GatedMlp, MatchesTheProgram) {
  Shapes s = GetParam();
  Graph fused = test::gated_mlp_fused(s.b, s.h, s.n, s.grid, s.loop);
  ASSERT_FALSE(validate(fused)) << validate(fused)->str();
  Graph ref = test::gated_mlp_reference(s.b, s.h, s.n);
  auto in = random_inputs(ref, 12);
  HostTensor got = run(fused, in, 2).at(0), want = run(ref, in, 2).at(0);
  EXPECT_LE(test::relative_error(got, want), 1e-3);
  EXPECT_TRUE(test::bit_identical(got, run(fused, in, 1).at(0)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, GatedMlp,
                         ::testing::Values(Shapes{4, 64, 32, 4, 4}, Shapes{8, 512, 256, 16, 8},
                                           Shapes{2, 32, 16, 1, 1}));

TEST(GraphKernel, ThreadCountDoesNotChangeResults) {
  for (const Graph& g : {test::rmsnorm_fig3b(16, 512, 256, 16, 8), test::gated_mlp_fused(8, 512, 512, 32, 4),
                         test::rmsnorm_reference(16, 512, 1024)}) {
    auto in = random_inputs(g, 3);
    auto one = run(g, in, 1), two = run(g, in, 2), five = run(g, in, 5);
    EXPECT_TRUE(test::bit_identical(one[0], two[0]));
    EXPECT_TRUE(test::bit_identical(one[0], five[0]));
  }
}

/// A block graph whose block-invariant part includes a thread graph and a layout op: X's tile
/// (no imap) goes through a thread graph exp(x)·0.5 and a repeat before meeting W's tile.
Graph invariant_thread_graph_kernel() {
  Graph k;
  TensorId x = k.add_input("X", {4, 32}, DType::f32);
  TensorId w = k.add_input("W", {64, 48}, DType::f32);
  Graph body = make_block_graph({k.type(x), k.type(w)}, Dim3{3, 2, 1}, 4);
  TensorId xt = body.add(OpKind::input_iterator, {}, test::iter(0, kNoMap, 1));        // [4, 8]
  TensorId wt = body.add(OpKind::input_iterator, {}, test::iter(1, {1, 0, kPhi}, 0));  // [8, 16]
  Graph tg = make_thread_graph({body.type(xt)});
  TensorId ti = tg.add(OpKind::input_iterator, {}, test::iter(0, kNoMap, kPhi));
  tg.add(OpKind::output_saver, {tg.add(OpKind::mul, {tg.add(OpKind::exp, {ti})}, test::scalar("0.5"))},
         test::saver(0, kNoMap));
  auto op = body.append_with_body(OpKind::thread_graph, {xt}, std::move(tg));
  OpAttrs rp;
  rp.dim = 1;
  rp.times = 2;
  TensorId xr = body.add(OpKind::repeat, {body.ops[op->index()].outputs[0]}, rp);  // [4, 16]
  OpAttrs rs;
  rs.shape = Shape{4, 2, 8};
  TensorId x3 = body.add(OpKind::reshape, {xr}, rs);
  OpAttrs back;
  back.shape = Shape{4, 16};
  TensorId x2 = body.add(OpKind::reshape, {x3}, back);
  OpAttrs s;
  s.dim = 1;
  TensorId norm = body.add(OpKind::sum, {x2}, s);                             // invariant [4, 1]
  TensorId mm = body.add(OpKind::matmul, {body.add(OpKind::sqr, {xt}), wt});  // [4, 16]
  TensorId acc = body.add(OpKind::accum, {body.add(OpKind::div, {mm, norm})}, test::accum_sum());
  body.add(OpKind::output_saver, {acc}, test::saver(0, {1, 0, kPhi}));
  auto kop = k.append_with_body(OpKind::graph_kernel, {x, w}, std::move(body));
  MUGRAPH_CHECK(kop.ok()) << kop.rejection().str();
  k.mark_output(k.ops[kop->index()].outputs[0], "O");
  return k;
}

TEST(GraphKernel, SharingBlockInvariantTilesChangesNothing) {
  for (const Graph& g : {test::rmsnorm_fig3b(16, 256, 128, 8, 4), test::rmsnorm_fig3b(8, 128, 64, 4, 1),
                         test::rmsnorm_fig3b(8, 128, 64, 4, 4, DType::f16), test::gated_mlp_fused(8, 256, 128, 8, 4),
                         invariant_thread_graph_kernel()}) {
    ASSERT_FALSE(validate(g)) << validate(g)->str();
    auto in = random_inputs(g, 8);
    InterpOptions literal;
    literal.share_block_invariant = false;
    for (int threads : {1, 2}) {
      literal.threads = threads;
      EXPECT_TRUE(test::bit_identical(run(g, in, threads).at(0), run_float(g, in, literal).at(0)));
    }
  }
}

TEST(GraphKernel, InvariantThreadGraphMatchesHandComputation) {
  Graph g = invariant_thread_graph_kernel();
  auto in = random_inputs(g, 9);
  HostTensor got = run(g, in, 2).at(0);
  // Grid y splits W's rows in two halves and stacks the results: with R = 32·by + 8i + j,
  // O[4·by + r, c] = Σ_i (Σ_j X[r, 8i + j]² W[R, c]) / (2 Σ_j exp(X[r, 8i + j]) / 2).
  ASSERT_EQ(got.type.shape, (Shape{8, 48}));
  HostTensor want(TensorType{{8, 48}, DType::f32});
  const auto &x = in[0].data, &w = in[1].data;
  for (int by = 0; by < 2; ++by)
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 48; ++c) {
        double total = 0;
        for (int i = 0; i < 4; ++i) {
          double norm = 0, mm = 0;
          for (int j = 0; j < 8; ++j) {
            double v = x[static_cast<size_t>(r * 32 + 8 * i + j)];
            norm += std::exp(v);  // 2 copies of exp(v)/2
            mm += v * v * w[static_cast<size_t>((32 * by + 8 * i + j) * 48 + c)];
          }
          total += mm / norm;
        }
        want.data[static_cast<size_t>((4 * by + r) * 48 + c)] = static_cast<float>(total);
      }
  EXPECT_LE(test::relative_error(got, want), 1e-5);
}

TEST(GraphKernel, F16GraphsRoundTheirOutputs) {
  Graph fused = test::rmsnorm_fig3b(8, 256, 64, 4, 4, DType::f16);
  Graph ref32 = test::rmsnorm_reference(8, 256, 64);
  auto in = random_inputs(fused, 5);
  HostTensor got = run(fused, in, 2).at(0);
  EXPECT_EQ(got.type.dtype, DType::f16);
  for (float v : got.data) ASSERT_EQ(v, round_to_dtype(v, DType::f16));
  // Against the same values in f32: f16 rounding of every tensor costs about 1e-3 relative.
  auto in32 = in;
  for (auto& t : in32) t.type.dtype = DType::f32;
  EXPECT_LE(test::relative_error(got, run(ref32, in32).at(0)), 1e-2);
  Graph mlp = test::gated_mlp_fused(4, 128, 64, 4, 4, DType::f16);
  HostTensor m = run(mlp, random_inputs(mlp, 6)).at(0);
  for (float v : m.data) ASSERT_EQ(v, round_to_dtype(v, DType::f16));
}

TEST(GraphKernel, AccumulatorSumsInF32AndRoundsOnce) {
  // 8 iterations each contributing 1 + 2^-10 in f16: an f16 running sum would round at 3, 5, 6, 7
  // (ties and half-ulps); the f32 running sum, rounded once, is exactly 8 + 8·2^-10.
  Graph body = make_block_graph({TensorType{{1, 8}, DType::f16}}, Dim3{1, 1, 1}, 8);
  TensorId xt = body.add(OpKind::input_iterator, {}, test::iter(0, kNoMap, 1));
  TensorId acc = body.add(OpKind::accum, {body.add(OpKind::add, {xt}, test::scalar("1"))}, test::accum_sum());
  body.add(OpKind::output_saver, {acc}, test::saver(0, kNoMap));
  Graph k = kernel_of(std::move(body));
  ASSERT_FALSE(validate(k));
  // Each x is 2^-10 (representable); x + 1 = 1 + 2^-10 is representable in f16.
  float x = std::ldexp(1.0f, -10);
  HostTensor out = run(k, {tensor({1, 8}, std::vector<float>(8, x), DType::f16)}).at(0);
  EXPECT_EQ(out.type.shape, (Shape{1, 1}));
  EXPECT_EQ(out.data[0], round_to_dtype(8.0f + 8 * x, DType::f16));
  EXPECT_EQ(out.data[0], 8.0078125f);
}

TEST(GraphKernel, FmapConcatenationAccumulator) {
  // X [4, 6]; the loop walks dim 0 (tiles [1, 6]); the accumulator concatenates the iterations
  // along dim 1: out[0, 6i + j] = 2·X[i, j]. Iteration i must land at position i.
  Graph body = make_block_graph({TensorType{{4, 6}, DType::f32}}, Dim3{1, 1, 1}, 4);
  TensorId xt = body.add(OpKind::input_iterator, {}, test::iter(0, kNoMap, 0));
  TensorId twice = body.add(OpKind::mul, {xt}, test::scalar("2"));
  OpAttrs cat;
  cat.dim = 1;
  TensorId acc = body.add(OpKind::accum, {twice}, cat);
  EXPECT_EQ(body.type(acc).shape, (Shape{1, 24}));
  body.add(OpKind::output_saver, {acc}, test::saver(0, kNoMap));
  Graph k = kernel_of(std::move(body));
  ASSERT_FALSE(validate(k)) << validate(k)->str();
  HostTensor out = run(k, {tensor({4, 6}, iota(24))}).at(0);
  std::vector<float> want = iota(24);
  for (float& v : want) v *= 2;
  EXPECT_EQ(out.data, want);
}

TEST(GraphKernel, ConcatAccumulatorAlongTheLoopedDimWithGrid) {
  // X [4, 8]: grid x = 2 splits dim 0, the loop splits dim 1 into 4 tiles [2, 2], exp is applied,
  // the accumulator concatenates along dim 1 again: the result is exp(X) in place.
  Graph body = make_block_graph({TensorType{{4, 8}, DType::f32}}, Dim3{2, 1, 1}, 4);
  TensorId xt = body.add(OpKind::input_iterator, {}, test::iter(0, {0, kPhi, kPhi}, 1));
  OpAttrs cat;
  cat.dim = 1;
  TensorId acc = body.add(OpKind::accum, {body.add(OpKind::exp, {xt})}, cat);
  body.add(OpKind::output_saver, {acc}, test::saver(0, {0, kPhi, kPhi}));
  Graph k = kernel_of(std::move(body));
  ASSERT_FALSE(validate(k)) << validate(k)->str();
  std::vector<float> x = iota(32, -16);
  for (float& v : x) v /= 8;
  HostTensor out = run(k, {tensor({4, 8}, x)}, 2).at(0);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(out.data[i], apply_unary(OpKind::exp, x[i]));
}

TEST(GraphKernel, TwoDimensionalGridWithXFastest) {
  // X [4, 6] split by grid (2, 3): x over dim 0, y over dim 1; each block writes 10·X plus its
  // own id (read through a second iterator), so a tile loaded or saved at the wrong place shows.
  Graph body = make_block_graph({TensorType{{4, 6}, DType::f32}, TensorType{{2, 3}, DType::f32}}, Dim3{2, 3, 1}, 1);
  TensorId xt = body.add(OpKind::input_iterator, {}, test::iter(0, {0, 1, kPhi}, kPhi));  // [2, 2]
  TensorId bt = body.add(OpKind::input_iterator, {}, test::iter(1, {0, 1, kPhi}, kPhi));  // [1, 1]
  TensorId y = body.add(OpKind::add, {body.add(OpKind::mul, {xt}, test::scalar("10")), bt});
  body.add(OpKind::output_saver, {y}, test::saver(0, {0, 1, kPhi}));
  Graph k = kernel_of(std::move(body));
  ASSERT_FALSE(validate(k)) << validate(k)->str();
  // The second input holds each block's id at [bx, by]: id = bx + 2·by.
  HostTensor ids = tensor({2, 3}, {0, 2, 4, 1, 3, 5});
  HostTensor out = run(k, {tensor({4, 6}, iota(24)), ids}, 2).at(0);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 6; ++c) {
      int bx = r / 2, by = c / 2;
      EXPECT_EQ(out.data[static_cast<size_t>(r * 6 + c)],
                10.0f * static_cast<float>(r * 6 + c) + static_cast<float>(bx + 2 * by))
          << r << "," << c;
    }
}

TEST(GraphKernel, ImapAndFmapOnTheSameDimension) {
  // X [1, 16]: grid 2 splits dim 1 into halves of 8, the loop splits each half into 4 tiles of 2;
  // the sum accumulator adds the tiles: block b gets Σ_i X[0, 8b + 2i + j] for j = 0, 1.
  Graph body = make_block_graph({TensorType{{1, 16}, DType::f32}}, Dim3{2, 1, 1}, 4);
  TensorId xt = body.add(OpKind::input_iterator, {}, test::iter(0, {1, kPhi, kPhi}, 1));
  TensorId acc = body.add(OpKind::accum, {xt}, test::accum_sum());
  body.add(OpKind::output_saver, {acc}, test::saver(0, {1, kPhi, kPhi}));
  Graph k = kernel_of(std::move(body));
  ASSERT_FALSE(validate(k)) << validate(k)->str();
  HostTensor out = run(k, {tensor({1, 16}, iota(16))}).at(0);
  EXPECT_EQ(out.data, (std::vector<float>{0 + 2 + 4 + 6, 1 + 3 + 5 + 7, 8 + 10 + 12 + 14, 9 + 11 + 13 + 15}));
}

TEST(GraphKernel, LayoutOpsAndPostProcessingInABlockGraph) {
  // X [2, 8], loop over dim 1 (tiles [2, 2]); per iteration: reshape to [4, 1], repeat ×2 along
  // dim 1, concat with itself along dim 0 → [8, 2]; accumulated by sum; post-processing: sum
  // over dim 0 to 2. Both the accumulator and the post-processed value are saved.
  Graph body = make_block_graph({TensorType{{2, 8}, DType::f32}}, Dim3{1, 1, 1}, 4);
  TensorId xt = body.add(OpKind::input_iterator, {}, test::iter(0, kNoMap, 1));
  OpAttrs rs;
  rs.shape = Shape{4, 1};
  TensorId r = body.add(OpKind::reshape, {xt}, rs);
  OpAttrs rp;
  rp.dim = 1;
  rp.times = 2;
  TensorId t = body.add(OpKind::repeat, {r}, rp);
  OpAttrs c0;
  c0.dim = 0;
  TensorId c = body.add(OpKind::concat, {t, t}, c0);
  TensorId acc = body.add(OpKind::accum, {c}, test::accum_sum());
  OpAttrs s;
  s.dim = 0;
  s.to = 2;
  TensorId post = body.add(OpKind::sum, {acc}, s);
  body.add(OpKind::output_saver, {post}, test::saver(0, kNoMap));
  body.add(OpKind::output_saver, {acc}, test::saver(1, kNoMap));
  Graph k = kernel_of(std::move(body));
  ASSERT_FALSE(validate(k)) << validate(k)->str();
  // X = [[0..7], [8..15]]; tile i = X[:, 2i:2i+2] reshaped row-major to [x0i0, x0i1, x1i0, x1i1].
  auto out = run(k, {tensor({2, 8}, iota(16))});
  // Σ_i of the reshaped tiles: [0+2+4+6, 1+3+5+7, 8+10+12+14, 9+11+13+15] = [12, 16, 44, 48].
  std::vector<float> col = {12, 16, 44, 48};
  std::vector<float> want_acc;
  for (int rep = 0; rep < 2; ++rep)
    for (float v : col) want_acc.insert(want_acc.end(), {v, v});
  EXPECT_EQ(out[1].type.shape, (Shape{8, 2}));
  EXPECT_EQ(out[1].data, want_acc);
  // Sum of 8 rows in 2 groups of 4: both groups are the same column [12, 16, 44, 48] → 120.
  EXPECT_EQ(out[0].data, (std::vector<float>{120, 120, 120, 120}));
}

TEST(GraphKernel, ThreadGraphWithAReduction) {
  // A thread graph may hold any op the interpreter knows: sum over its tile, then scale.
  Graph body = make_block_graph({TensorType{{4, 6}, DType::f32}}, Dim3{2, 1, 1}, 1);
  TensorId xt = body.add(OpKind::input_iterator, {}, test::iter(0, {0, kPhi, kPhi}, kPhi));  // [2, 6]
  Graph tg = make_thread_graph({body.type(xt)});
  TensorId ti = tg.add(OpKind::input_iterator, {}, test::iter(0, kNoMap, kPhi));
  OpAttrs s;
  s.dim = 1;
  s.to = 2;
  tg.add(OpKind::output_saver, {tg.add(OpKind::mul, {tg.add(OpKind::sum, {ti}, s)}, test::scalar("0.5"))},
         test::saver(0, kNoMap));
  tg.add(OpKind::output_saver, {tg.add(OpKind::sqr, {ti})}, test::saver(1, kNoMap));
  auto op = body.append_with_body(OpKind::thread_graph, {xt}, std::move(tg));
  ASSERT_TRUE(op.ok()) << op.rejection().str();
  body.add(OpKind::output_saver, {body.ops[op->index()].outputs[0]}, test::saver(0, {0, kPhi, kPhi}));
  body.add(OpKind::output_saver, {body.ops[op->index()].outputs[1]}, test::saver(1, {0, kPhi, kPhi}));
  Graph k = kernel_of(std::move(body));
  auto out = run(k, {tensor({4, 6}, iota(24))});
  EXPECT_EQ(out[0].type.shape, (Shape{4, 2}));
  // Row r: groups of three starting at 6r and 6r + 3, halved.
  EXPECT_EQ(out[0].data, (std::vector<float>{1.5, 6, 10.5, 15, 19.5, 24, 28.5, 33}));
  for (int i = 0; i < 24; ++i) EXPECT_EQ(out[1].data[static_cast<size_t>(i)], static_cast<float>(i * i));
}

TEST(GraphKernel, TwoGraphKernelsInSequence) {
  // Kernel 1: Y = exp(X) ⊙ G row-wise, grid over rows. Kernel 2: Z = Y · W accumulated over a
  // loop on the inner dim, grid over W's columns. Against the same program in pre-defined ops.
  const int64_t b = 8, h = 64, n = 32;
  Graph k;
  TensorId x = k.add_input("X", {b, h}, DType::f32);
  TensorId gm = k.add_input("G", {h}, DType::f32);
  TensorId w = k.add_input("W", {h, n}, DType::f32);
  Graph b1 = make_block_graph({k.type(x), k.type(gm)}, Dim3{4, 1, 1}, 1);
  TensorId xt = b1.add(OpKind::input_iterator, {}, test::iter(0, {0, kPhi, kPhi}, kPhi));
  TensorId gt = b1.add(OpKind::input_iterator, {}, test::iter(1, kNoMap, kPhi));
  b1.add(OpKind::output_saver, {b1.add(OpKind::mul, {b1.add(OpKind::exp, {xt}), gt})}, test::saver(0, {0, kPhi, kPhi}));
  auto op1 = k.append_with_body(OpKind::graph_kernel, {x, gm}, std::move(b1));
  TensorId y = k.ops[op1->index()].outputs[0];
  Graph b2 = make_block_graph({k.type(y), k.type(w)}, Dim3{4, 1, 1}, 8);
  TensorId yt = b2.add(OpKind::input_iterator, {}, test::iter(0, kNoMap, 1));
  TensorId wt = b2.add(OpKind::input_iterator, {}, test::iter(1, {1, kPhi, kPhi}, 0));
  TensorId acc = b2.add(OpKind::accum, {b2.add(OpKind::matmul, {yt, wt})}, test::accum_sum());
  b2.add(OpKind::output_saver, {acc}, test::saver(0, {1, kPhi, kPhi}));
  auto op2 = k.append_with_body(OpKind::graph_kernel, {y, w}, std::move(b2));
  k.mark_output(k.ops[op2->index()].outputs[0], "Z");
  ASSERT_FALSE(validate(k)) << validate(k)->str();

  Graph ref;
  TensorId rx = ref.add_input("X", {b, h}, DType::f32);
  TensorId rg = ref.add_input("G", {h}, DType::f32);
  TensorId rw = ref.add_input("W", {h, n}, DType::f32);
  ref.mark_output(ref.add(OpKind::matmul, {ref.add(OpKind::mul, {ref.add(OpKind::exp, {rx}), rg}), rw}), "Z");
  auto in = random_inputs(ref, 21);
  HostTensor got = run(k, in, 2).at(0);
  EXPECT_LE(test::relative_error(got, run(ref, in).at(0)), 1e-4);
  EXPECT_TRUE(test::bit_identical(got, run(k, in, 1).at(0)));
}

TEST(GraphKernel, OneIterationWithoutAccumulator) {
  // F = 1 and no accumulator: the body runs once per block; silu then a scalar subtraction.
  Graph body = make_block_graph({TensorType{{6, 4}, DType::f32}}, Dim3{3, 1, 1}, 1);
  TensorId xt = body.add(OpKind::input_iterator, {}, test::iter(0, {0, kPhi, kPhi}, kPhi));
  TensorId y = body.add(OpKind::sub, {body.add(OpKind::silu, {xt})}, test::scalar("1", 0));
  body.add(OpKind::output_saver, {y}, test::saver(0, {0, kPhi, kPhi}));
  Graph k = kernel_of(std::move(body));
  ASSERT_FALSE(validate(k)) << validate(k)->str();
  std::vector<float> x = iota(24, -12);
  HostTensor out = run(k, {tensor({6, 4}, x)}, 2).at(0);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(out.data[i], apply_binary(OpKind::sub, 1.0f, apply_unary(OpKind::silu, x[i])));
}

/// validate() rejects k (the path rule), and the interpreter refuses it cleanly too, naming the
/// rule.
void expect_refused_saving_without_accumulator(const Graph& k) {
  try {
    run(k, random_inputs(k, 1));
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("passes no accumulator"), std::string::npos) << e.what();
  }
}

TEST(GraphKernel, LoopValueReachingASaverIsRefused) {
  // validate() rejects this (path rule); the interpreter refuses it cleanly too.
  Graph body = make_block_graph({TensorType{{16, 64}, DType::f32}}, Dim3{1, 1, 1}, 4);
  TensorId xt = body.add(OpKind::input_iterator, {}, test::iter(0, kNoMap, 1));
  body.add(OpKind::output_saver, {body.add(OpKind::exp, {xt})}, test::saver(0, kNoMap));
  Graph k = kernel_of(std::move(body));
  ASSERT_TRUE(validate(k));
  expect_refused_saving_without_accumulator(k);
}

TEST(GraphKernel, LoopInvariantTilesJoinTheAccumulatedValuesAfterTheLoop) {
  // O = X·W + 2·R, X [4, 8], W [8, 6], R [4, 6]: grid x = 2 splits the columns, the loop walks
  // the reduced dim in 4 steps. R's tile (fmap φ) is loaded once; 2·R is computed from it alone
  // (loop-invariant), and added to the accumulated product after the loop. Integer values keep
  // every sum exact, so the result equals the program's to the bit.
  Graph body =
      make_block_graph({TensorType{{4, 8}, DType::f32}, TensorType{{8, 6}, DType::f32}, TensorType{{4, 6}, DType::f32}},
                       Dim3{2, 1, 1}, 4);
  TensorId xt = body.add(OpKind::input_iterator, {}, test::iter(0, kNoMap, 1));
  TensorId wt = body.add(OpKind::input_iterator, {}, test::iter(1, {1, kPhi, kPhi}, 0));
  TensorId rt = body.add(OpKind::input_iterator, {}, test::iter(2, {1, kPhi, kPhi}, kPhi));
  TensorId twice = body.add(OpKind::mul, {rt}, test::scalar("2"));
  TensorId acc = body.add(OpKind::accum, {body.add(OpKind::matmul, {xt, wt})}, test::accum_sum());
  body.add(OpKind::output_saver, {body.add(OpKind::add, {acc, twice})}, test::saver(0, {1, kPhi, kPhi}));
  Graph k = kernel_of(std::move(body));
  ASSERT_FALSE(validate(k)) << validate(k)->str();
  std::vector<float> x = iota(32, -16), w = iota(48, -24), r = iota(24, -5);
  HostTensor out = run(k, {tensor({4, 8}, x), tensor({8, 6}, w), tensor({4, 6}, r)}, 2).at(0);
  ASSERT_EQ(out.type.shape, (Shape{4, 6}));
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) {
      float want = 2 * r[static_cast<size_t>(i * 6 + j)];
      for (int c = 0; c < 8; ++c) want += x[static_cast<size_t>(i * 8 + c)] * w[static_cast<size_t>(c * 6 + j)];
      EXPECT_EQ(out.data[static_cast<size_t>(i * 6 + j)], want) << i << ", " << j;
    }
}

TEST(GraphKernel, ALoopInvariantTileSavedWithoutAnAccumulatorIsRefused) {
  // Only the accumulated values leave the loop: R's tile may join them, but not be saved alone.
  Graph body = make_block_graph({TensorType{{4, 8}, DType::f32}, TensorType{{4, 1}, DType::f32}}, Dim3{1, 1, 1}, 4);
  TensorId xt = body.add(OpKind::input_iterator, {}, test::iter(0, kNoMap, 1));
  TensorId rt = body.add(OpKind::input_iterator, {}, test::iter(1, kNoMap, kPhi));
  body.add(OpKind::output_saver, {body.add(OpKind::accum, {xt}, test::accum_sum())}, test::saver(0, kNoMap));
  body.add(OpKind::output_saver, {body.add(OpKind::exp, {rt})}, test::saver(1, kNoMap));
  Graph k = kernel_of(std::move(body));
  ASSERT_TRUE(validate(k));
  expect_refused_saving_without_accumulator(k);
}

TEST(GraphKernel, DeadOpsAreSkipped) {
  // An op that reaches no saver may even mix loop and post values (validate allows it, since no
  // path through it ends at a saver); the interpreter skips it.
  Graph body = make_block_graph({TensorType{{2, 8}, DType::f32}}, Dim3{1, 1, 1}, 4);
  TensorId xt = body.add(OpKind::input_iterator, {}, test::iter(0, kNoMap, 1));
  TensorId acc = body.add(OpKind::accum, {xt}, test::accum_sum());
  body.add(OpKind::mul, {acc, xt});  // dead
  body.add(OpKind::output_saver, {acc}, test::saver(0, kNoMap));
  Graph k = kernel_of(std::move(body));
  HostTensor out = run(k, {tensor({2, 8}, iota(16))}).at(0);
  EXPECT_EQ(out.data, (std::vector<float>{0 + 2 + 4 + 6, 1 + 3 + 5 + 7, 8 + 10 + 12 + 14, 9 + 11 + 13 + 15}));
}

}  // namespace
}  // namespace mugraph

namespace mugraph {
namespace {

TEST(RunSteps, CountsMatmulsByTheirDepthAndSumsByWhatTheyRead) {
  Graph k;
  TensorId x = k.add_input("X", {4, 8});
  TensorId w = k.add_input("W", {8, 16});
  ASSERT_TRUE(k.append(OpKind::matmul, {x, w}).ok());
  ASSERT_TRUE(k.append(OpKind::sum, {x}, attrs::sum(1)).ok());
  // X and W (32 + 128), the matmul's 4·16 results of 8 products each, the sum's 4 results and
  // the 32 elements it reads.
  EXPECT_EQ(run_steps(k), 32 + 128 + 4 * 16 * 8 + 4 + 32);
}

TEST(RunSteps, CountsABlockGraphOncePerBlockAndIteration) {
  const int64_t rows = 8, h = 128, n = 64, grid = 4, loop = 4;
  Graph g = test::rmsnorm_fig3b(rows, h, n, grid, loop);
  ASSERT_EQ(g.bodies.size(), 1u);
  EXPECT_EQ(run_steps(g), rows * h + h + h * n + rows * n + run_steps(g.bodies[0]) * grid * loop);
}

TEST(RunSteps, SaturatesInsteadOfOverflowing) {
  // Eight matmuls of 2^20 × 2^20 by 2^20 × 2^20 (tensors of 2^40 elements, the most there may
  // be) take 2^60 steps each: 2^63 in all, one past INT64_MAX.
  Graph k;
  const int64_t e = int64_t{1} << 20;
  TensorId x = k.add_input("X", {e, e});
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(k.append(OpKind::matmul, {x, x}).ok());
  EXPECT_EQ(run_steps(k), std::numeric_limits<int64_t>::max());
}

}  // namespace
}  // namespace mugraph
