// The device library's tile ops (runtime/include/mugraph_device), run by its host emulation of
// the CUDA execution model: each op against a plain loop, in Block and Grid scope, with thread
// counts that do and do not divide the element count; the emulation's barrier; conversions.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "mugraph_device/device.h"

namespace {

using mgd::Dims;

std::vector<float> randoms(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(Dims, OffsetAndCoord) {
  using S = Dims<2, 3, 4>;
  EXPECT_EQ(S::numel, 24);
  EXPECT_EQ(S::rank, 3);
  // Element 17 = (1, 1, 1); with strides (100, 10, 1) it sits at 111; broadcasting dim 1 away, 101.
  EXPECT_EQ((mgd::offset<S, Dims<100, 10, 1>>(17)), 111);
  EXPECT_EQ((mgd::offset<S, Dims<100, 0, 1>>(17)), 101);
  EXPECT_EQ(mgd::coord<S>(17, 0), 1);
  EXPECT_EQ(mgd::coord<S>(23, 2), 3);
}

TEST(Conversions, HalfAndBfloat16RoundToNearestEven) {
  EXPECT_EQ(mgd::to_float(mgd::from_float<mgd::half>(1.0f + 1.0f / 4096)), 1.0f);  // ties to even
  EXPECT_EQ(mgd::to_float(mgd::from_float<mgd::half>(65504.0f)), 65504.0f);
  EXPECT_EQ(mgd::to_float(mgd::from_float<mgd::bfloat16>(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(mgd::to_float(mgd::from_float<mgd::bfloat16>(1.0f + 3.0f / 256)), 1.0f + 1.0f / 64);
  EXPECT_TRUE(std::isnan(mgd::to_float(mgd::from_float<mgd::bfloat16>(NAN))));
}

/// Runs body on one block of `threads` threads with `smem` bytes of shared memory.
template <typename F>
void run_block(unsigned threads, size_t smem, F body) {
  std::function<void()> f = body;
  mgd::emu::launch(dim3(1), dim3(threads), smem, nullptr, f);
}

TEST(Emulation, BarrierMakesEveryThreadsWritesVisible) {
  std::vector<int> seen(96, -1);
  run_block(96, 96 * sizeof(int), [&] {
    MGD_DYNAMIC_SHARED(smem);
    int* s = reinterpret_cast<int*>(smem);
    const unsigned t = mgd::thread_rank();
    s[t] = static_cast<int>(t) * 3;
    __syncthreads();
    seen[t] = s[(t + 1) % 96];  // written by another thread
  });
  for (int t = 0; t < 96; ++t) EXPECT_EQ(seen[static_cast<size_t>(t)], ((t + 1) % 96) * 3);
}

TEST(Emulation, GridAndBlockIndices) {
  std::vector<int> hits(4 * 3 * 2 * 32, 0);
  std::function<void()> f = [&] {
    const int64_t i = mgd::Grid::first();
    EXPECT_EQ(mgd::Grid::step(), 4 * 3 * 2 * 32);
    EXPECT_EQ(blockDim.x, 32u);
    ++hits[static_cast<size_t>(i)];
  };
  mgd::emu::launch(dim3(4, 3, 2), dim3(32), 0, nullptr, f);
  for (int h : hits) EXPECT_EQ(h, 1);
}

TEST(TileOps, MatmulWithABroadcastBatch) {
  // out[b, m, n] = Σ_k a[m, k] · x[b, k, n]: A has no batch dim (stride 0), B has one.
  constexpr int B = 3, M = 5, N = 7, K = 9;
  std::vector<float> a = randoms(M * K, 1), x = randoms(B * K * N, 2), out(B * M * N, NAN);
  for (unsigned threads : {32u, 100u}) {
    run_block(threads, 0, [&] {
      mgd::matmul<mgd::Block, Dims<B, M, N>, Dims<M * N, N, 1>, Dims<0, K, 0>, 1, Dims<K * N, 0, 1>, N, K>(
          out.data(), a.data(), x.data());
    });
    for (int b = 0; b < B; ++b)
      for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
          float want = 0;
          for (int k = 0; k < K; ++k) want += a[m * K + k] * x[(b * K + k) * N + n];
          ASSERT_NEAR(out[(b * M + m) * N + n], want, 1e-4f) << threads << " threads";
        }
  }
}

/// The tensor-core path against f32 arithmetic on the same rounded operands, with a batch that A
/// broadcasts, and warp counts that do and do not divide the blocks. Shapes <20, 12, 40> gather
/// both operands (zero padding); <32, 24, 48> load both with ldmatrix (16-byte rows, whole
/// blocks); <20, 16, 32> mixes the two.
template <typename T, int M = 20, int N = 12, int K = 40>
void check_tensor_core_matmul(unsigned threads) {
  constexpr int B = 2;
  std::vector<float> fa = randoms(M * K, 8), fb = randoms(B * K * N, 9);
  std::vector<T> a(fa.size()), b(fb.size());
  for (size_t i = 0; i < fa.size(); ++i) a[i] = mgd::from_float<T>(fa[i]);
  for (size_t i = 0; i < fb.size(); ++i) b[i] = mgd::from_float<T>(fb[i]);
  std::vector<float> out(B * M * N, NAN);
  static_assert(mgd::kTensorCoreOperands<T, T>);
  run_block(threads, 0, [&] {
    mgd::matmul<mgd::Block, Dims<B, M, N>, Dims<M * N, N, 1>, Dims<0, K, 0>, 1, Dims<K * N, 0, 1>, N, K>(
        out.data(), a.data(), b.data());
  });
  for (int bi = 0; bi < B; ++bi)
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        float want = 0;
        for (int k = 0; k < K; ++k) want += mgd::to_float(a[m * K + k]) * mgd::to_float(b[(bi * K + k) * N + n]);
        ASSERT_NEAR(out[(bi * M + m) * N + n], want, 1e-3f) << bi << "," << m << "," << n << " with " << threads;
      }
}

TEST(TileOps, TensorCoreMatmulF16) {
  check_tensor_core_matmul<mgd::half>(128);
  check_tensor_core_matmul<mgd::half>(96);  // 3 warps: 2·2·2 result blocks do not divide evenly
}

TEST(TileOps, TensorCoreMatmulBf16) { check_tensor_core_matmul<mgd::bfloat16>(64); }

TEST(TileOps, TensorCoreMatmulWithLdmatrix) {
  check_tensor_core_matmul<mgd::half, 32, 24, 48>(128);
  check_tensor_core_matmul<mgd::half, 32, 24, 48>(96);
  check_tensor_core_matmul<mgd::bfloat16, 32, 24, 48>(64);
  check_tensor_core_matmul<mgd::half, 20, 16, 32>(64);  // A gathered, B through ldmatrix
  check_tensor_core_matmul<mgd::half, 16, 12, 16>(32);  // A through ldmatrix, B gathered
}

TEST(TileOps, TensorCoreMatmulWithLdmatrixOfEightRows) {
  // An A of 8 rows (GatedMLP's tile) through ldmatrix.x2, rows 8 to 15 of the fragment zero;
  // 24 and 40 rows: whole 16-row blocks through x4, the last 8 rows through x2, in one warp
  // and spread over warps.
  check_tensor_core_matmul<mgd::half, 8, 16, 32>(128);
  check_tensor_core_matmul<mgd::bfloat16, 8, 24, 48>(32);
  check_tensor_core_matmul<mgd::half, 24, 16, 32>(32);
  check_tensor_core_matmul<mgd::half, 40, 24, 48>(96);
}

/// The tensor-core path with the layouts the layout pass chooses: A's rows padded by 8 elements
/// (ldmatrix still applies: rows stay 16-byte aligned), B stored transposed (k innermost:
/// gathered), the result written transposed (m innermost) and with padded rows.
TEST(TileOps, TensorCoreMatmulThroughPaddedAndTransposedLayouts) {
  constexpr int M = 32, N = 24, K = 48, AP = K + 8, BP = K + 4, OP = M + 2;
  std::vector<float> fa = randoms(M * AP, 11), fb = randoms(N * BP, 12);
  std::vector<mgd::half> a(fa.size()), b(fb.size());
  for (size_t i = 0; i < fa.size(); ++i) a[i] = mgd::from_float<mgd::half>(fa[i]);
  for (size_t i = 0; i < fb.size(); ++i) b[i] = mgd::from_float<mgd::half>(fb[i]);
  std::vector<float> out(N * OP, NAN);
  run_block(128, 0, [&] {
    mgd::matmul<mgd::Block, Dims<M, N>, Dims<1, OP>, Dims<AP, 0>, 1, Dims<0, BP>, 1, K>(out.data(), a.data(), b.data());
  });
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float want = 0;
      for (int k = 0; k < K; ++k) want += mgd::to_float(a[m * AP + k]) * mgd::to_float(b[n * BP + k]);
      ASSERT_NEAR(out[n * OP + m], want, 1e-3f) << m << "," << n;
    }
  for (int n = 0; n < N; ++n)
    for (int m = M; m < OP; ++m) EXPECT_TRUE(std::isnan(out[n * OP + m])) << "padding written at " << n << "," << m;
}

/// Element-wise ops, sums and repeats write through the result's strides: a transposed [4, 6]
/// result and one with rows padded to 9, each checked element by element and for untouched
/// padding.
TEST(TileOps, ResultsThroughStrides) {
  std::vector<float> a = randoms(24, 13), t(24, NAN), p(36, NAN), s(4 * 3, NAN), r(4 * 12, NAN);
  run_block(7, 0, [&] {
    mgd::unary<mgd::Block, Dims<4, 6>, Dims<1, 4>, Dims<6, 1>, mgd::op::Exp>(t.data(), a.data());
    mgd::binary_scalar<mgd::Block, Dims<4, 6>, Dims<9, 1>, Dims<6, 1>, mgd::op::Mul, false>(p.data(), a.data(), 3.0f);
    mgd::sum<mgd::Block, Dims<4, 3>, Dims<1, 4>, Dims<6, 1>, 1, 2>(s.data(), a.data());
    mgd::repeat<mgd::Block, Dims<4, 12>, Dims<1, 4>, Dims<6, 1>, 1, 6>(r.data(), a.data());
  });
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) {
      EXPECT_FLOAT_EQ(t[j * 4 + i], std::exp(a[i * 6 + j]));
      EXPECT_FLOAT_EQ(p[i * 9 + j], 3.0f * a[i * 6 + j]);
    }
  for (int i = 0; i < 4; ++i)
    for (int j = 6; j < 9; ++j) EXPECT_TRUE(std::isnan(p[i * 9 + j]));
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_FLOAT_EQ(s[j * 4 + i], a[i * 6 + 2 * j] + a[i * 6 + 2 * j + 1]);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 12; ++j) EXPECT_EQ(r[j * 4 + i], a[i * 6 + j % 6]);
}

TEST(Dims, RowMajorStridesAreRecognized) {
  EXPECT_TRUE((mgd::is_row_major<Dims<2, 3, 4>, Dims<12, 4, 1>>()));
  EXPECT_TRUE((mgd::is_row_major<Dims<2, 1, 4>, Dims<4, 77, 1>>()));   // an extent-1 dim's stride is free
  EXPECT_FALSE((mgd::is_row_major<Dims<2, 3, 4>, Dims<15, 5, 1>>()));  // padded rows
  EXPECT_FALSE((mgd::is_row_major<Dims<3, 4>, Dims<1, 3>>()));         // transposed
  EXPECT_EQ((mgd::offset<Dims<3, 4>, Dims<5, 1>>(7)), 8);              // (1, 3) with rows of 5
}

TEST(TileOps, MmaFragmentsFollowThePtxLayout) {
  // One mma with A = row index · 16 + column and B = the unit matrix in its first 8 rows:
  // D(r, n) = A(r, n). Any mix-up of rows, columns, registers or halves shows.
  std::vector<float> d(16 * 8, NAN);
  run_block(32, 0, [&] {
    const unsigned lane = mgd::thread_rank(), g = lane / 4, t = lane % 4;
    auto A = [](unsigned r, unsigned k) { return mgd::from_float<mgd::half>(static_cast<float>(r * 16 + k)); };
    auto B = [](unsigned k, unsigned n) { return mgd::from_float<mgd::half>(k == n ? 1.0f : 0.0f); };
    const uint32_t a[4] = {mgd::pack2(A(g, 2 * t), A(g, 2 * t + 1)), mgd::pack2(A(g + 8, 2 * t), A(g + 8, 2 * t + 1)),
                           mgd::pack2(A(g, 2 * t + 8), A(g, 2 * t + 9)),
                           mgd::pack2(A(g + 8, 2 * t + 8), A(g + 8, 2 * t + 9))};
    const uint32_t b[2] = {mgd::pack2(B(2 * t, g), B(2 * t + 1, g)), mgd::pack2(B(2 * t + 8, g), B(2 * t + 9, g))};
    const float c[4] = {0, 0, 0, 0};
    float out[4];
    mgd::mma_m16n8k16<mgd::half>(out, a, b, c);
    for (int i = 0; i < 4; ++i) d[(g + (i >= 2 ? 8 : 0)) * 8 + 2 * t + (i & 1)] = out[i];
  });
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 8; ++n) EXPECT_EQ(d[r * 8 + n], static_cast<float>(r * 16 + n)) << r << "," << n;
}

TEST(Emulation, WarpBarriersOnlyWaitForTheirWarp) {
  // Warp 0 meets at warp barriers 3 times, warp 1 once, then everyone at a block barrier.
  std::vector<int> order;
  run_block(64, 0, [&] {
    const unsigned warp = mgd::thread_rank() / 32;
    for (int i = 0; i < (warp == 0 ? 3 : 1); ++i) mgd::emu::warp_barrier();
    if (mgd::thread_rank() % 32 == 0) order.push_back(static_cast<int>(warp));
    __syncthreads();
  });
  EXPECT_EQ(order.size(), 2u);
}

TEST(TileOps, SumToGroups) {
  // [4, 12] summed along dim 1 to 3: groups of 4 consecutive elements.
  std::vector<float> in = randoms(48, 3), out(12, NAN);
  run_block(7, 0, [&] { mgd::sum<mgd::Block, Dims<4, 3>, Dims<3, 1>, Dims<12, 1>, 1, 4>(out.data(), in.data()); });
  for (int r = 0; r < 4; ++r)
    for (int j = 0; j < 3; ++j) {
      float want = 0;
      for (int g = 0; g < 4; ++g) want += in[r * 12 + j * 4 + g];
      EXPECT_NEAR(out[r * 3 + j], want, 1e-5f);
    }
}

TEST(TileOps, SumLanesSplitLongGroupsOnly) {
  EXPECT_EQ(mgd::sum_lanes(2, 128, 1024), 32);   // RMSNorm's row sums: a warp per row
  EXPECT_EQ(mgd::sum_lanes(5, 64, 256), 8);      // 8 lanes each for 5 outputs fit 64 threads
  EXPECT_EQ(mgd::sum_lanes(2, 128, 40), 4);      // 8 elements a lane at least
  EXPECT_EQ(mgd::sum_lanes(128, 128, 1024), 1);  // an output per thread already
  EXPECT_EQ(mgd::sum_lanes(2, 128, 15), 1);
}

TEST(TileOps, ShuffleXorExchangesWithinTheWarp) {
  std::vector<float> got(64, NAN);
  run_block(64, 0, [&] {
    const unsigned t = mgd::thread_rank();
    float v = static_cast<float>(t);
    v = mgd::shfl_xor(v, 1);  // twice in a row: the emulation's alternating buffers
    got[t] = mgd::shfl_xor(v, 16);
  });
  for (unsigned t = 0; t < 64; ++t) EXPECT_EQ(got[t], static_cast<float>(t ^ 1u ^ 16u)) << t;
}

/// sum over groups long enough to be split among lanes: rows (stride 1 along the group) and
/// columns (stride 40), with as many threads as outputs need and with more.
TEST(TileOps, SumSplitAmongLanesMatchesPlainLoop) {
  std::vector<float> in = randoms(3 * 1024, 9);
  for (unsigned threads : {32u, 64u, 128u, 96u}) {
    std::vector<float> rows(3, NAN);   // [3, 1024] summed along dim 1 to 1
    std::vector<float> cols(40, NAN);  // [3072 / 40 = 76 (first 76·40 elements), 40] summed along dim 0
    run_block(threads, 0, [&] {
      mgd::sum<mgd::Block, Dims<3, 1>, Dims<1, 1>, Dims<1024, 1>, 1, 1024>(rows.data(), in.data());
      mgd::sum<mgd::Block, Dims<1, 40>, Dims<40, 1>, Dims<40, 1>, 0, 76>(cols.data(), in.data());
    });
    for (int r = 0; r < 3; ++r) {
      double want = 0;
      for (int k = 0; k < 1024; ++k) want += in[static_cast<size_t>(r * 1024 + k)];
      EXPECT_NEAR(rows[static_cast<size_t>(r)], want, 1e-3) << threads << " threads, row " << r;
    }
    for (int c = 0; c < 40; ++c) {
      double want = 0;
      for (int k = 0; k < 76; ++k) want += in[static_cast<size_t>(k * 40 + c)];
      EXPECT_NEAR(cols[static_cast<size_t>(c)], want, 1e-3) << threads << " threads, column " << c;
    }
  }
}

/// The tile ops in a Threads<N> scope (a count known at compile time, as generated kernels use)
/// against the same ops in Block scope: element-wise ops over shapes whose element counts N
/// does and does not divide (rounds and a tail, or a tail alone), sums split among lanes and
/// not, a copy and an accumulation; the same elements in the same order, so equal bits.
template <unsigned N>
void check_fixed_thread_count() {
  using H = mgd::half;
  std::vector<H> a(100), row(1024 * 3);
  const std::vector<float> af = randoms(100, 21), rf = randoms(3 * 1024, 22);
  for (size_t i = 0; i < a.size(); ++i) a[i] = mgd::from_float<H>(af[i]);
  for (size_t i = 0; i < row.size(); ++i) row[i] = mgd::from_float<H>(rf[i]);
  struct Results {
    std::vector<H> sq = std::vector<H>(100), scaled = std::vector<H>(100), copied = std::vector<H>(100);
    std::vector<float> rows = std::vector<float>(3), cols = std::vector<float>(25), acc = std::vector<float>(100);
  };
  const auto run = [&](auto scope, Results& r) {
    using S = decltype(scope);
    run_block(N, 0, [&] {
      mgd::unary<S, Dims<4, 25>, Dims<25, 1>, Dims<25, 1>, mgd::op::Sqr>(r.sq.data(), a.data());
      mgd::binary_scalar<S, Dims<4, 25>, Dims<25, 1>, Dims<25, 1>, mgd::op::Div, false>(r.scaled.data(), a.data(),
                                                                                        3.0f);
      mgd::copy<S, Dims<4, 25>, Dims<1, 4>, Dims<25, 1>>(r.copied.data(), a.data());           // transposed
      mgd::sum<S, Dims<3, 1>, Dims<1, 1>, Dims<1024, 1>, 1, 1024>(r.rows.data(), row.data());  // split
      mgd::sum<S, Dims<1, 25>, Dims<25, 1>, Dims<25, 1>, 0, 4>(r.cols.data(), a.data());       // one per output
      mgd::accumulate<S, Dims<4, 25>, Dims<25, 1>>(r.acc.data(), a.data(), true);
      mgd::accumulate<S, Dims<4, 25>, Dims<25, 1>>(r.acc.data(), r.sq.data(), false);
    });
  };
  Results fixed, plain;
  run(mgd::Threads<N>{}, fixed);
  run(mgd::Block{}, plain);
  const auto bits = [](const std::vector<H>& v) {
    std::vector<float> f;
    for (H x : v) f.push_back(mgd::to_float(x));
    return f;
  };
  EXPECT_EQ(bits(fixed.sq), bits(plain.sq)) << N;
  EXPECT_EQ(bits(fixed.scaled), bits(plain.scaled)) << N;
  EXPECT_EQ(bits(fixed.copied), bits(plain.copied)) << N;
  EXPECT_EQ(fixed.rows, plain.rows) << N;
  EXPECT_EQ(fixed.cols, plain.cols) << N;
  EXPECT_EQ(fixed.acc, plain.acc) << N;
  for (size_t i = 0; i < 100; ++i) {  // and both are right: acc = x + x², the square rounded to f16
    const float x = mgd::to_float(a[i]), sq = mgd::to_float(mgd::from_float<H>(x * x));
    EXPECT_EQ(mgd::to_float(fixed.sq[i]), sq) << N << ", " << i;
    EXPECT_EQ(fixed.acc[i], x + sq) << N << ", " << i;
  }
  for (size_t r = 0; r < 4; ++r)  // the transposed copy: (r, c) at r + 4c
    for (size_t c = 0; c < 25; ++c) EXPECT_EQ(mgd::to_float(fixed.copied[r + 4 * c]), mgd::to_float(a[r * 25 + c]));
  double want = 0;
  for (int k = 0; k < 1024; ++k) want += mgd::to_float(row[static_cast<size_t>(k)]);
  EXPECT_NEAR(fixed.rows[0], want, 1e-3) << N;
}

TEST(TileOps, FixedThreadCountScopeMatchesBlockScope) {
  check_fixed_thread_count<32>();   // 3 rounds and a tail of 4; the row sums split 32 ways
  check_fixed_thread_count<96>();   // 1 round and a tail of 4
  check_fixed_thread_count<128>();  // a tail alone (100 of 128 threads)
  static_assert(mgd::kBlockScope<mgd::Threads<96>> && mgd::kBlockScope<mgd::Block> && !mgd::kBlockScope<mgd::Grid>);
}

TEST(TileOps, FixedThreadCountScopeRefusesAnotherBlock) {
  std::vector<float> out(64);
  EXPECT_DEATH(
      run_block(128, 0, [&] { mgd::copy<mgd::Threads<64>, Dims<64>, Dims<1>, Dims<1>>(out.data(), out.data()); }),
      "Threads<N> used in a block of another thread count");
}

/// A sum with an element-wise op folded into it (ReadThrough) sums what the op's tile would have
/// held: each result rounded to the tile's type. Split among lanes (rows of 1024) and not
/// (columns of 4), in a fixed and a runtime thread count.
TEST(TileOps, SumReadsThroughAFoldedOp) {
  using H = mgd::half;
  const std::vector<float> f = randoms(4 * 1024, 31);
  std::vector<H> x(f.size());
  for (size_t i = 0; i < f.size(); ++i) x[i] = mgd::from_float<H>(f[i] * 3.0f);
  const auto sq = [&](size_t i) {  // x² as an f16 tile holds it
    const float v = mgd::to_float(x[i]);
    return mgd::to_float(mgd::from_float<H>(v * v));
  };
  using Read = mgd::ReadThrough<mgd::op::Sqr, H>;
  for (int fixed = 0; fixed < 2; ++fixed) {
    std::vector<float> rows(4, NAN), cols(1024, NAN);
    run_block(128, 0, [&] {
      if (fixed) {
        mgd::sum<mgd::Threads<128>, Dims<4, 1>, Dims<1, 1>, Dims<1024, 1>, 1, 1024, Read>(rows.data(), x.data());
        mgd::sum<mgd::Threads<128>, Dims<1, 1024>, Dims<1024, 1>, Dims<1024, 1>, 0, 4, Read>(cols.data(), x.data());
      } else {
        mgd::sum<mgd::Block, Dims<4, 1>, Dims<1, 1>, Dims<1024, 1>, 1, 1024, Read>(rows.data(), x.data());
        mgd::sum<mgd::Block, Dims<1, 1024>, Dims<1024, 1>, Dims<1024, 1>, 0, 4, Read>(cols.data(), x.data());
      }
    });
    for (size_t r = 0; r < 4; ++r) {
      double want = 0;
      for (size_t k = 0; k < 1024; ++k) want += sq(r * 1024 + k);
      EXPECT_NEAR(rows[r], want, 1e-4 * want) << fixed << ", row " << r;
    }
    for (size_t c = 0; c < 1024; ++c) {
      float want = 0;  // a thread per output adds its 4 in order: the same f32 sum
      for (size_t k = 0; k < 4; ++k) want += sq(k * 1024 + c);
      EXPECT_EQ(cols[c], want) << fixed << ", column " << c;
    }
  }
}

/// A split sum over f16 rows contiguous along the group reads each lane's part 8 elements at a
/// time (sum_reads_vectors), and folded sqrs on f16 pairs; rows that do not start 16-byte aligned
/// (a stride that is not a multiple of 8, an unaligned tile) are read element by element. Each
/// way gives the sum of what the plain loop reads, within f32 rounding of a different order.
TEST(TileOps, SumSplitReadsEightAtATimeWhereRowsAreAligned) {
  using H = mgd::half;
  static_assert(mgd::sum_reads_vectors(8, 256, 2, 1, true) && !mgd::sum_reads_vectors(1, 256, 2, 1, true) &&
                !mgd::sum_reads_vectors(8, 256, 4, 1, true) && !mgd::sum_reads_vectors(8, 256, 2, 2, true) &&
                !mgd::sum_reads_vectors(8, 200, 2, 1, true) && !mgd::sum_reads_vectors(8, 256, 2, 1, false));
  static_assert(mgd::group_starts_in_eights<Dims<3, 1>, Dims<264, 1>, 1>() &&
                !mgd::group_starts_in_eights<Dims<3, 1>, Dims<260, 1>, 1>() &&
                mgd::group_starts_in_eights<Dims<1, 1>, Dims<260, 1>, 1>());
  static_assert(mgd::kHalf2Binary<mgd::op::Mul> && mgd::kHalf2Binary<mgd::op::Add> && mgd::kHalf2Binary<mgd::op::Sub> &&
                !mgd::kHalf2Binary<mgd::op::Div> && mgd::kHalf2Unary<mgd::op::Sqr> && !mgd::kHalf2Unary<mgd::op::Exp> &&
                mgd::kReadsPairs<mgd::ReadThrough<mgd::op::Sqr, H>> &&
                !mgd::kReadsPairs<mgd::ReadThrough<mgd::op::Sqr, mgd::bfloat16>> &&
                !mgd::kReadsPairs<mgd::ReadThrough<mgd::op::Exp, H>> && !mgd::kReadsPairs<mgd::ReadAsIs>);
  const std::vector<float> f = randoms(3 * 264 + 8, 41);
  alignas(16) H x[3 * 264 + 8];
  for (size_t i = 0; i < f.size(); ++i) x[i] = mgd::from_float<H>(f[i] * 4.0f);
  using Sqr = mgd::ReadThrough<mgd::op::Sqr, H>;
  // Rows of 256 at strides 264 (aligned), 260 (not a multiple of 8), and 264 from x + 1.
  std::vector<float> plain(3, NAN), squares(3, NAN), odd(3, NAN), shifted(3, NAN), odd_squares(3, NAN);
  run_block(64, 0, [&] {  // 8 lanes per row of 3
    mgd::sum<mgd::Threads<64>, Dims<3, 1>, Dims<1, 1>, Dims<264, 1>, 1, 256>(plain.data(), x);
    mgd::sum<mgd::Threads<64>, Dims<3, 1>, Dims<1, 1>, Dims<264, 1>, 1, 256, Sqr>(squares.data(), x);
    mgd::sum<mgd::Threads<64>, Dims<3, 1>, Dims<1, 1>, Dims<260, 1>, 1, 256>(odd.data(), x);
    mgd::sum<mgd::Threads<64>, Dims<3, 1>, Dims<1, 1>, Dims<260, 1>, 1, 256, Sqr>(odd_squares.data(), x);
    mgd::sum<mgd::Block, Dims<3, 1>, Dims<1, 1>, Dims<264, 1>, 1, 256>(shifted.data(), x + 1);
  });
  const auto want = [&](size_t first, size_t row_stride, size_t r, bool square) {
    double total = 0;
    for (size_t k = 0; k < 256; ++k) {
      const float v = mgd::to_float(x[first + r * row_stride + k]);
      total += square ? mgd::to_float(mgd::from_float<H>(v * v)) : v;
    }
    return total;
  };
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_NEAR(plain[r], want(0, 264, r, false), 1e-4) << r;
    EXPECT_NEAR(squares[r], want(0, 264, r, true), 1e-5 * want(0, 264, r, true)) << r;
    EXPECT_NEAR(odd[r], want(0, 260, r, false), 1e-4) << r;
    EXPECT_NEAR(odd_squares[r], want(0, 260, r, true), 1e-5 * want(0, 260, r, true)) << r;
    EXPECT_NEAR(shifted[r], want(1, 264, r, false), 1e-4) << r;
  }
}

TEST(TileOps, RepeatCopiesAlongADim) {
  std::vector<float> in = randoms(6, 4), out(18, NAN);  // [2, 3] repeated 3 times along dim 1
  run_block(5, 0, [&] { mgd::repeat<mgd::Block, Dims<2, 9>, Dims<9, 1>, Dims<3, 1>, 1, 3>(out.data(), in.data()); });
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 9; ++c) EXPECT_EQ(out[r * 9 + c], in[r * 3 + c % 3]);
}

TEST(TileOps, ElementwiseBroadcastAndScalars) {
  std::vector<float> a = randoms(32, 5), row(8, 0), out(32, NAN), out2(32, NAN);
  for (int i = 0; i < 8; ++i) row[i] = 1.0f + i;
  run_block(13, 0, [&] {
    mgd::binary<mgd::Block, Dims<4, 8>, Dims<8, 1>, Dims<8, 1>, Dims<0, 1>, mgd::op::Div>(out.data(), a.data(),
                                                                                          row.data());
    mgd::binary_scalar<mgd::Block, Dims<4, 8>, Dims<8, 1>, Dims<8, 1>, mgd::op::Sub, true>(out2.data(), a.data(), 2.0f);
  });
  for (int i = 0; i < 32; ++i) {
    EXPECT_FLOAT_EQ(out[i], a[i] / row[i % 8]);
    EXPECT_FLOAT_EQ(out2[i], 2.0f - a[i]);
  }
  std::vector<mgd::half> h(32);
  run_block(32, 0, [&] { mgd::unary<mgd::Block, Dims<32>, Dims<1>, Dims<1>, mgd::op::Silu>(h.data(), a.data()); });
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(mgd::to_float(h[i]), a[i] / (1 + std::exp(-a[i])), 2e-3);
}

/// 16-bit element-wise ops over rows of 8 and more take 8 elements per access (vector_rows_ok):
/// row-major, padded by a multiple of 8, broadcast along rows or along the last dim. Padding of
/// another width, an unaligned tile, or other element types take the element path. Both give
/// the plain loop's results.
TEST(TileOps, ElementwiseEightAtATimeMatchesPlainLoop) {
  using H = mgd::half;
  auto halves = [](const std::vector<float>& v) {
    std::vector<H> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = mgd::from_float<H>(v[i]);
    return h;
  };
  auto f = [](H x) { return mgd::to_float(x); };
  auto r = [](float x) { return mgd::to_float(mgd::from_float<H>(x)); };
  static_assert(mgd::vector_rows_ok<Dims<4, 16>, Dims<24, 1>, false>() &&
                mgd::vector_rows_ok<Dims<4, 16>, Dims<1, 0>>() && !mgd::vector_rows_ok<Dims<4, 16>, Dims<18, 1>>() &&
                !mgd::vector_rows_ok<Dims<4, 12>, Dims<12, 1>>() && !mgd::vector_rows_ok<Dims<4, 16>, Dims<1, 4>>() &&
                !mgd::vector_rows_ok<Dims<4, 16>, Dims<1, 0>, false>());
  const std::vector<H> a = halves(randoms(64, 11)), row = halves(randoms(16, 12)), col = halves(randoms(4, 13));
  alignas(16) H sq[4 * 24], prod[4 * 16], scaled[4 * 18], shifted[1 + 64], copied[4 * 24];
  for (unsigned threads : {32u, 96u}) {
    std::fill(std::begin(sq), std::end(sq), mgd::from_float<H>(NAN));
    run_block(threads, 0, [&] {
      mgd::unary<mgd::Block, Dims<4, 16>, Dims<24, 1>, Dims<16, 1>, mgd::op::Sqr>(sq, a.data());  // padded by 8
      mgd::binary<mgd::Block, Dims<4, 16>, Dims<16, 1>, Dims<16, 1>, Dims<0, 1>, mgd::op::Mul>(prod, a.data(),
                                                                                               row.data());
      mgd::binary<mgd::Block, Dims<4, 16>, Dims<18, 1>, Dims<16, 1>, Dims<1, 0>, mgd::op::Div>(scaled, a.data(),
                                                                                               col.data());
      mgd::binary<mgd::Block, Dims<4, 16>, Dims<16, 1>, Dims<1, 0>, Dims<16, 1>, mgd::op::Sub>(shifted + 1, col.data(),
                                                                                               a.data());
      mgd::copy<mgd::Block, Dims<4, 16>, Dims<24, 1>, Dims<16, 1>>(copied, a.data());
    });
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 16; ++j) {
        const float x = f(a[static_cast<size_t>(i * 16 + j)]);
        EXPECT_EQ(f(sq[i * 24 + j]), r(x * x)) << threads << ": " << i << ", " << j;
        EXPECT_EQ(f(prod[i * 16 + j]), r(x * f(row[static_cast<size_t>(j)])));
        EXPECT_EQ(f(scaled[i * 18 + j]), r(x / f(col[static_cast<size_t>(i)])));
        EXPECT_EQ(f(shifted[1 + i * 16 + j]), r(f(col[static_cast<size_t>(i)]) - x));
        EXPECT_EQ(f(copied[i * 24 + j]), x);
      }
    for (int i = 0; i < 4; ++i)
      for (int j = 16; j < 24; ++j) EXPECT_TRUE(std::isnan(f(sq[i * 24 + j])));  // the padding is left alone
  }
}

TEST(TileOps, StridedCopyAndAccumulate) {
  // A [3, 4] tile at column 2 of a [3, 10] tensor, into a dense tile, converted to f16.
  std::vector<float> whole = randoms(30, 6);
  std::vector<mgd::half> tile(12);
  std::vector<float> acc(12, NAN);
  run_block(8, 0, [&] {
    mgd::copy<mgd::Block, Dims<3, 4>, Dims<4, 1>, Dims<10, 1>>(tile.data(), whole.data() + 2);
    mgd::sync_block();
    mgd::accumulate<mgd::Block, Dims<3, 4>, Dims<4, 1>>(acc.data(), tile.data(), true);
    mgd::accumulate<mgd::Block, Dims<3, 4>, Dims<4, 1>>(acc.data(), tile.data(), false);
  });
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) {
      const float want = mgd::to_float(mgd::from_float<mgd::half>(whole[r * 10 + 2 + c]));
      EXPECT_EQ(mgd::to_float(tile[r * 4 + c]), want);
      EXPECT_EQ(acc[r * 4 + c], 2 * want);
    }
}

TEST(TileOps, AsyncLoadOfATile) {
  // A [4, 16] f16 tile at column 32 of a [4, 64] tensor, in 16-byte vectors.
  std::vector<mgd::half> whole(256), tile(64);
  for (int i = 0; i < 256; ++i) whole[i] = mgd::from_float<mgd::half>(static_cast<float>(i));
  run_block(3, 0, [&] {
    mgd::load_async<Dims<4, 16>, Dims<16, 1>, Dims<64, 1>>(tile.data(), whole.data() + 32);
    mgd::async_wait_all();
  });
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 16; ++c) EXPECT_EQ(mgd::to_float(tile[r * 16 + c]), static_cast<float>(r * 64 + 32 + c));
}

TEST(Emulation, AsyncCopiesLandOnlyWhenWaitedFor) {
  // Two groups of one 16-byte copy each, into poisoned shared memory: nothing lands before a
  // wait; async_wait<1> lands the older group only; async_wait<0> the rest.
  std::vector<uint32_t> src(8);
  for (uint32_t i = 0; i < 8; ++i) src[i] = 100 + i;
  std::vector<uint32_t> before(8), after_one(8), after_all(8);
  run_block(1, 32, [&] {
    MGD_DYNAMIC_SHARED(smem);
    uint32_t* s = reinterpret_cast<uint32_t*>(smem);
    mgd::cp_async16(s, src.data());
    mgd::async_commit();
    mgd::cp_async16(s + 4, src.data() + 4);
    mgd::async_commit();
    std::copy(s, s + 8, before.begin());
    mgd::async_wait<1>();
    std::copy(s, s + 8, after_one.begin());
    mgd::async_wait<0>();
    std::copy(s, s + 8, after_all.begin());
  });
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(before[i], 0xCDCDCDCDu) << i;
    EXPECT_EQ(after_one[i], i < 4 ? 100u + i : 0xCDCDCDCDu) << i;
    EXPECT_EQ(after_all[i], 100u + i) << i;
  }
}

TEST(Emulation, WaitAllLandsUncommittedCopiesToo) {
  std::vector<uint32_t> src{1, 2, 3, 4}, seen(4);
  run_block(1, 16, [&] {
    MGD_DYNAMIC_SHARED(smem);
    uint32_t* s = reinterpret_cast<uint32_t*>(smem);
    mgd::cp_async16(s, src.data());
    mgd::async_wait_all();
    std::copy(s, s + 4, seen.begin());
  });
  EXPECT_EQ(seen, src);
}

TEST(Emulation, LeavingWithCopiesInFlightIsABug) {
  std::vector<uint32_t> src(4, 7);
  EXPECT_DEATH(run_block(1, 16,
                         [&] {
                           MGD_DYNAMIC_SHARED(smem);
                           mgd::cp_async16(smem, src.data());
                         }),
               "asynchronous copies it never waited for");
}

TEST(Blas, GemmIsRowMajorBatchedMatmul) {
  // C_b = A_b · B for 3 batches of 5×7 by 7×4, B broadcast (stride 0); through the column-major
  // cuBLAS call (emulated from cuBLAS's definition).
  const int64_t batch = 3, m = 5, k = 7, n = 4;
  const std::vector<float> af = randoms(batch * m * k, 11), bf = randoms(k * n, 12);
  std::vector<mgd::half> a(af.size()), b(bf.size()), c(batch * m * n);
  for (size_t i = 0; i < af.size(); ++i) a[i] = mgd::from_float<mgd::half>(af[i]);
  for (size_t i = 0; i < bf.size(); ++i) b[i] = mgd::from_float<mgd::half>(bf[i]);
  ASSERT_EQ(mgd::gemm<mgd::half>(nullptr, a.data(), b.data(), c.data(), batch, m, n, k, m * k, 0, m * n), 0);
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float want = 0.0f;
        for (int64_t l = 0; l < k; ++l) want += mgd::to_float(a[p * m * k + i * k + l]) * mgd::to_float(b[l * n + j]);
        EXPECT_NEAR(mgd::to_float(c[p * m * n + i * n + j]), want, 1e-2f * (1.0f + std::fabs(want)))
            << p << " " << i << " " << j;
      }
}

TEST(TileOps, GridScopeCoversEveryElementOnce) {
  std::vector<float> in = randoms(1000, 7), out(1000, NAN);
  std::function<void()> f = [&] {
    mgd::unary<mgd::Grid, Dims<1000>, Dims<1>, Dims<1>, mgd::op::Exp>(out.data(), in.data());
  };
  mgd::emu::launch(dim3(3), dim3(64), 0, nullptr, f);
  for (int i = 0; i < 1000; ++i) EXPECT_FLOAT_EQ(out[i], std::exp(in[i]));
}

}  // namespace
