// The finite-field interpreter (ff_interp.h): every kernel-level op against a brute-force
// reference written here with plain % arithmetic, and the core property that equivalent μGraphs
// give identical residues (Figure 3b, GatedMLP, the examples/ugraphs pairs).
#include <array>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "example_graphs.h"
#include "ff_ops.h"
#include "mugraph/ff_interp.h"
#include "mugraph/ffield.h"
#include "mugraph/frontend.h"
#include "mugraph/loader.h"
#include "mugraph/validate.h"
#include "test_graphs.h"

namespace mugraph {
namespace {

using ff::kP;
using ff::kQ;

std::string source_dir() {
  const char* dir = std::getenv("MUGRAPH_SOURCE_DIR");
  return dir ? dir : MUGRAPH_SOURCE_DIR_DEFAULT;
}

bool slow_build() {
#if defined(__SANITIZE_ADDRESS__) || !defined(NDEBUG)
  return true;
#else
  return false;
#endif
}

FFContext context(uint64_t seed) { return FFContext{random_root_of_unity(seed), seed * 7 + 1}; }

/// Inputs for `g` by name from `named` (so two graphs with the same inputs in any order agree).
std::vector<FFTensor> inputs_by_name(const Graph& g, const std::map<std::string, FFTensor>& named) {
  std::vector<FFTensor> in;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::input) in.push_back(named.at(op.attrs.name));
  return in;
}

std::map<std::string, FFTensor> named_inputs(const Graph& g, uint64_t seed) {
  std::map<std::string, FFTensor> named;
  std::vector<FFTensor> in = random_ff_inputs(g, seed);
  size_t k = 0;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::input) named[op.attrs.name] = in[k++];
  return named;
}

/// Runs both graphs on the same inputs; expects identical Z_p parts, and identical Z_q parts of
/// outputs that are not exp-tainted.
void expect_same(const Graph& a, const Graph& b, uint64_t seed, int threads = 0) {
  ASSERT_FALSE(validate(a).has_value()) << validate(a)->str();
  ASSERT_FALSE(validate(b).has_value()) << validate(b)->str();
  auto named = named_inputs(a, seed);
  FFContext ctx = context(seed);
  FFRun ra = run_ff(a, inputs_by_name(a, named), ctx, threads);
  FFRun rb = run_ff(b, inputs_by_name(b, named), ctx, threads);
  ASSERT_FALSE(ra.zero_divisor);
  ASSERT_FALSE(rb.zero_divisor);
  ASSERT_EQ(ra.outputs.size(), rb.outputs.size());
  for (size_t k = 0; k < ra.outputs.size(); ++k) {
    EXPECT_EQ(ra.outputs[k].shape, rb.outputs[k].shape);
    EXPECT_EQ(ra.exp_tainted[k], rb.exp_tainted[k]);
    EXPECT_TRUE(ra.outputs[k].p == rb.outputs[k].p) << "output " << k << ": Z_p parts differ";
    if (!ra.exp_tainted[k]) {
      EXPECT_TRUE(ra.outputs[k].q == rb.outputs[k].q) << "output " << k << ": Z_q parts differ";
    }
  }
}

FFRun run_one(const Graph& g, uint64_t seed, std::vector<FFTensor>* inputs = nullptr, int threads = 0) {
  EXPECT_FALSE(validate(g).has_value()) << validate(g)->str();
  std::vector<FFTensor> in = random_ff_inputs(g, seed);
  if (inputs) *inputs = in;
  return run_ff(g, in, context(seed), threads);
}

uint64_t field(const FFTensor& t, int f, int64_t i) {
  return f == 0 ? t.p[static_cast<size_t>(i)] : t.q[static_cast<size_t>(i)];
}
uint64_t modulus(int f) { return f == 0 ? kP : kQ; }

// ---- helpers and inputs -----------------------------------------------------------------------

TEST(FFInterp, RandomInputsAreDeterministicResidues) {
  Graph g;
  g.mark_output(g.add_input("X", {7, 9}), "X");
  g.add_input("Y", {3});
  auto a = random_ff_inputs(g, 5), b = random_ff_inputs(g, 5), c = random_ff_inputs(g, 6);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (const FFTensor& t : a)
    for (size_t i = 0; i < t.p.size(); ++i) {
      EXPECT_LT(t.p[i], kP);
      EXPECT_LT(t.q[i], kQ);
    }
  EXPECT_NE(a[0].p, a[0].q) << "p and q parts are independent draws";
}

TEST(FFInterp, RandomInputsDoNotDependOnTheThreadsAndAreUniform) {
  // Large enough for several draw chunks (2^16 elements each) per field and an odd length, so
  // the last chunk ends on half a word.
  Graph g;
  g.mark_output(g.add_input("W", {301, 1001}), "W");
  g.add_input("B", {5});
  const auto one = random_ff_inputs(g, 9, 1);
  EXPECT_EQ(one, random_ff_inputs(g, 9, 2));
  EXPECT_EQ(one, random_ff_inputs(g, 9, 3));
  EXPECT_NE(one[0].p, random_ff_inputs(g, 10, 1)[0].p);
  // Uniform: 16 equal ranges of each field get their share (chi-square with 15 degrees of
  // freedom; 60 is beyond its 99.999th percentile), and the two inputs are not one stream.
  for (int f = 0; f < 2; ++f) {
    const std::vector<uint32_t>& v = f == 0 ? one[0].p : one[0].q;
    std::array<double, 16> counts{};
    for (uint32_t x : v) {
      ASSERT_LT(x, modulus(f));
      counts[static_cast<size_t>(uint64_t{x} * 16 / modulus(f))] += 1;
    }
    const double expect = static_cast<double>(v.size()) / 16;
    double chi2 = 0;
    for (double c : counts) chi2 += (c - expect) * (c - expect) / expect;
    EXPECT_LT(chi2, 60) << "field " << f;
  }
  EXPECT_NE(std::vector<uint32_t>(one[0].p.begin(), one[0].p.begin() + 5), one[1].p);
}

TEST(FFInterp, RootOfUnity) {
  for (uint64_t s = 0; s < 50; ++s) {
    uint64_t w = random_root_of_unity(s);
    EXPECT_GT(w, 0u);
    EXPECT_LT(w, kP);
    EXPECT_EQ(ff::pow(w, kQ, kP), 1u);
  }
  EXPECT_NE(random_root_of_unity(1), random_root_of_unity(2));
}

TEST(FFInterp, HashSeesShapeAndValues) {
  FFTensor a(Shape{2, 3}), b(Shape{3, 2});
  EXPECT_NE(hash_ff(a), hash_ff(b));
  FFTensor c = a;
  EXPECT_EQ(hash_ff(a), hash_ff(c));
  c.q[4] = 1;
  EXPECT_NE(hash_ff(a), hash_ff(c));
}

// ---- kernel-level ops against brute force ------------------------------------------------------

TEST(FFInterp, BinaryOpsWithBroadcastAndConstants) {
  for (OpKind kind : {OpKind::add, OpKind::sub, OpKind::mul, OpKind::div}) {
    Graph g;
    TensorId x = g.add_input("X", {3, 5});
    TensorId y = g.add_input("Y", {5});
    g.mark_output(g.add(kind, {x, y}), "O");
    g.mark_output(g.add(kind, {x}, attrs::scalar(*parse_scalar("0.125"), 1)), "A");
    g.mark_output(g.add(kind, {y}, attrs::scalar(*parse_scalar("-3e2"), 0)), "B");
    std::vector<FFTensor> in;
    FFRun r = run_one(g, 11, &in);
    ASSERT_FALSE(r.zero_divisor);
    for (int f = 0; f < 2; ++f) {
      uint64_t m = modulus(f);
      auto apply = [&](uint64_t a, uint64_t b) -> uint64_t {
        switch (kind) {
          case OpKind::add:
            return (a + b) % m;
          case OpKind::sub:
            return (a + m - b) % m;
          case OpKind::mul:
            return a * b % m;
          default:
            return a * ff::pow(b, m - 2, m) % m;
        }
      };
      const uint64_t eighth = ff::pow(8, m - 2, m);  // 0.125 = 1/8
      const uint64_t c300 = m - 300;                 // -3e2
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 5; ++j) {
          uint64_t xv = field(in[0], f, i * 5 + j), yv = field(in[1], f, j);
          EXPECT_EQ(field(r.outputs[0], f, i * 5 + j), apply(xv, yv)) << op_name(kind);
          EXPECT_EQ(field(r.outputs[1], f, i * 5 + j), apply(xv, eighth)) << op_name(kind);
        }
      for (int64_t j = 0; j < 5; ++j) EXPECT_EQ(field(r.outputs[2], f, j), apply(c300, field(in[1], f, j)));
    }
  }
}

TEST(FFInterp, MatmulBatchedAgainstBruteForce) {
  // Shapes that reach every path: rows fewer than 4, 4 × 16 register tiles with edges, wide B.
  for (auto [M, K, N] : {std::array<int64_t, 3>{3, 40, 21}, {9, 100, 37}, {8, 33, 32}, {5, 17, 300}}) {
    Graph g;
    TensorId a = g.add_input("A", {2, M, K});
    TensorId b = g.add_input("B", {K, N});
    g.mark_output(g.add(OpKind::matmul, {a, b}), "O");
    std::vector<FFTensor> in;
    FFRun r = run_one(g, 3, &in);
    for (int f = 0; f < 2; ++f)
      for (int64_t bt = 0; bt < 2; ++bt)
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            uint64_t s = 0;
            for (int64_t k = 0; k < K; ++k)
              s = (s + field(in[0], f, (bt * M + i) * K + k) * field(in[1], f, k * N + j)) % modulus(f);
            ASSERT_EQ(field(r.outputs[0], f, (bt * M + i) * N + j), s) << M << "x" << K << "x" << N;
          }
  }
}

TEST(FFInterp, MatmulLazyReductionAtWorstCase) {
  // Every residue m − 1: each product is the largest possible; K spans many lazy chunks.
  for (int64_t K : {1, 15, 16, 17, 100, 1000}) {
    Graph g;
    TensorId a = g.add_input("A", {9, K});
    TensorId b = g.add_input("B", {K, 41});
    g.mark_output(g.add(OpKind::matmul, {a, b}), "O");
    std::vector<FFTensor> in = random_ff_inputs(g, 1);
    for (auto& t : in) {
      std::fill(t.p.begin(), t.p.end(), static_cast<uint32_t>(kP - 1));
      std::fill(t.q.begin(), t.q.end(), static_cast<uint32_t>(kQ - 1));
    }
    FFRun r = run_ff(g, in, context(1));
    for (uint32_t v : r.outputs[0].p) EXPECT_EQ(v, static_cast<uint64_t>(K) % kP) << K;  // (−1)(−1)·K
    for (uint32_t v : r.outputs[0].q) EXPECT_EQ(v, static_cast<uint64_t>(K) % kQ) << K;
  }
}

/// X [m, k] · W [k, n] as one graph-defined kernel over 2 blocks and 2 iterations (W read as
/// [k/2, n/2] tiles), against the plain kernel-level matmul.
void expect_tiled_matmul_matches(int64_t m, int64_t k, int64_t n, uint64_t seed) {
  Graph g;
  TensorId x = g.add_input("X", {m, k});
  TensorId w = g.add_input("W", {k, n});
  Graph body = make_block_graph({g.type(x), g.type(w)}, Dim3{2, 1, 1}, 2);
  TensorId xt = body.add(OpKind::input_iterator, {}, attrs::iterator(0, {kPhi, kPhi, kPhi}, 1));
  TensorId wt = body.add(OpKind::input_iterator, {}, attrs::iterator(1, {1, kPhi, kPhi}, 0));
  TensorId acc = body.add(OpKind::accum, {body.add(OpKind::matmul, {xt, wt})}, attrs::accum(kPhi));
  body.add(OpKind::output_saver, {acc}, attrs::saver(0, {1, kPhi, kPhi}));
  auto op = g.append_with_body(OpKind::graph_kernel, {x, w}, std::move(body));
  g.mark_output(g.ops[op->index()].outputs[0], "O");
  Graph ref;
  ref.mark_output(ref.add(OpKind::matmul, {ref.add_input("X", {m, k}), ref.add_input("W", {k, n})}), "O");
  expect_same(g, ref, seed);
}

TEST(FFInterp, MatmulWithTransposedOperand) {
  // B is a strided (non-contiguous) tile inside a block graph: W [16, 8] read as a [8, 4] tile.
  expect_tiled_matmul_matches(4, 16, 8, 9);
}

TEST(FFInterp, MatmulOfNarrowStridedTiles) {
  // W [64, 64] read as [32, 32] tiles (rows 64 apart): packed, then 4 × 16 register tiles.
  expect_tiled_matmul_matches(8, 64, 64, 10);
}

TEST(FFInterp, SumAgainstBruteForce) {
  Graph g;
  TensorId x = g.add_input("X", {4, 6, 3});
  g.mark_output(g.add(OpKind::sum, {x}, attrs::sum(1, 2)), "O");
  g.mark_output(g.add(OpKind::sum, {x}, attrs::sum(2, 1)), "S");
  std::vector<FFTensor> in;
  FFRun r = run_one(g, 4, &in);
  ASSERT_EQ(r.outputs[0].shape, (Shape{4, 2, 3}));
  for (int f = 0; f < 2; ++f) {
    uint64_t m = modulus(f);
    for (int64_t a = 0; a < 4; ++a)
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t c = 0; c < 3; ++c) {
          uint64_t s = 0;
          for (int64_t k = 0; k < 3; ++k) s = (s + field(in[0], f, (a * 6 + j * 3 + k) * 3 + c)) % m;
          EXPECT_EQ(field(r.outputs[0], f, (a * 2 + j) * 3 + c), s);
        }
    for (int64_t row = 0; row < 24; ++row) {
      uint64_t s = 0;
      for (int64_t c = 0; c < 3; ++c) s = (s + field(in[0], f, row * 3 + c)) % m;
      EXPECT_EQ(field(r.outputs[1], f, row), s);
    }
  }
}

TEST(FFInterp, LongRowSumsAgainstBruteForce) {
  // Sums along the last dim (a row's elements contiguous) run four running sums side by side,
  // then the remainder: rows of 4098 elements, whole and in three groups of 1366 = 4·341 + 2,
  // and rows of 4099 = 4·1024 + 3.
  Graph g;
  TensorId y = g.add_input("Y", {5, 4098});
  g.mark_output(g.add(OpKind::sum, {y}, attrs::sum(1, 1)), "O");
  g.mark_output(g.add(OpKind::sum, {y}, attrs::sum(1, 3)), "T");
  TensorId z = g.add_input("Z", {2, 4099});
  g.mark_output(g.add(OpKind::sum, {z}, attrs::sum(1, 1)), "U");
  std::vector<FFTensor> in;
  FFRun r = run_one(g, 5, &in);
  for (int f = 0; f < 2; ++f) {
    const uint64_t m = modulus(f);
    auto expect_groups = [&](const FFTensor& x, int64_t rows, int64_t n, int64_t to, const FFTensor& out) {
      const int64_t group = n / to;
      for (int64_t row = 0; row < rows; ++row)
        for (int64_t t = 0; t < to; ++t) {
          uint64_t s = 0;
          for (int64_t k = 0; k < group; ++k) s = (s + field(x, f, row * n + t * group + k)) % m;
          ASSERT_EQ(field(out, f, row * to + t), s) << "field " << f << " row " << row << " group " << t;
        }
    };
    expect_groups(in[0], 5, 4098, 1, r.outputs[0]);
    expect_groups(in[0], 5, 4098, 3, r.outputs[1]);
    expect_groups(in[1], 2, 4099, 1, r.outputs[2]);
  }
}

TEST(FFInterp, UnaryOps) {
  Graph g;
  TensorId x = g.add_input("X", {64});
  g.mark_output(g.add(OpKind::sqr, {x}), "sqr");
  g.mark_output(g.add(OpKind::sqrt, {x}), "sqrt");
  g.mark_output(g.add(OpKind::exp, {x}), "exp");
  g.mark_output(g.add(OpKind::silu, {x}), "silu");
  g.mark_output(g.add(OpKind::relu, {x}), "relu");
  std::vector<FFTensor> in;
  FFRun r = run_one(g, 8, &in);
  const uint64_t w = context(8).omega;
  EXPECT_EQ(r.exp_tainted, (std::vector<bool>{false, false, true, true, false}));
  for (int64_t i = 0; i < 64; ++i) {
    uint64_t xp = field(in[0], 0, i), xq = field(in[0], 1, i);
    EXPECT_EQ(field(r.outputs[0], 0, i), xp * xp % kP);
    EXPECT_EQ(field(r.outputs[0], 1, i), xq * xq % kQ);
    for (int f = 0; f < 2; ++f) {
      uint64_t m = modulus(f), v = field(in[0], f, i), s = field(r.outputs[1], f, i);
      EXPECT_TRUE(s * s % m == v || s * s % m == (m - v) % m);
    }
    EXPECT_EQ(field(r.outputs[2], 0, i), ff::pow(w, xq, kP));
    EXPECT_EQ(field(r.outputs[2], 1, i), 0u);
    uint64_t e = ff::pow(w, (kQ - xq) % kQ, kP);
    EXPECT_EQ(field(r.outputs[3], 0, i), xp * ff::inv((1 + e) % kP, kP) % kP);
    EXPECT_EQ(field(r.outputs[3], 1, i), xq);
  }
}

TEST(FFInterp, RandomFunctionsAreSharedWithinATestOnly) {
  // relu and a second exp are random functions of the operand: the same in two graphs of one
  // test (even computed along different routes), different between tests.
  Graph a;
  TensorId x = a.add_input("X", {2, 8});
  a.mark_output(a.add(OpKind::relu, {x}), "R");
  a.mark_output(a.add(OpKind::exp, {a.add(OpKind::exp, {x})}), "E");
  Graph b;
  TensorId y = b.add_input("X", {2, 8});
  TensorId y2 = b.add(OpKind::reshape, {b.add(OpKind::mul, {y}, attrs::scalar(*parse_scalar("1")))}, [] {
    OpAttrs s;
    s.shape = Shape{16};
    return s;
  }());
  TensorId back = b.add(OpKind::reshape, {y2}, [] {
    OpAttrs s;
    s.shape = Shape{2, 8};
    return s;
  }());
  b.mark_output(b.add(OpKind::relu, {back}), "R");
  b.mark_output(b.add(OpKind::exp, {b.add(OpKind::exp, {back})}), "E");
  expect_same(a, b, 21);
  std::vector<FFTensor> in = random_ff_inputs(a, 1);
  FFRun r1 = run_ff(a, in, context(1)), r2 = run_ff(a, in, context(2));
  EXPECT_NE(r1.outputs[0].p, r2.outputs[0].p);
  EXPECT_NE(r1.outputs[1].p, r2.outputs[1].p);
  EXPECT_NE(r1.outputs[0].p, r1.outputs[1].p) << "relu and exp are different functions";
}

TEST(FFInterp, ThreadGraphOperandsKeepTheirExpTaint) {
  // exp(exp(X)) with the first exp in the block graph and the second in a thread graph: the
  // thread graph's operand is exp-tainted, so its exp is a second exp (a random function), as
  // in the kernel-level program. Read as untainted, its exp would compute a first exp of
  // residues that mean nothing, and the two graphs would differ.
  Graph prog;
  TensorId x = prog.add_input("X", {4, 8});
  prog.mark_output(prog.add(OpKind::exp, {prog.add(OpKind::exp, {x})}), "E");

  Graph k;
  TensorId kx = k.add_input("X", {4, 8});
  Graph body = make_block_graph({k.type(kx)}, Dim3{2, 1, 1}, 1);
  TensorId xt = body.add(OpKind::input_iterator, {}, test::iter(0, {0, kPhi, kPhi}, kPhi));
  TensorId first = body.add(OpKind::exp, {xt});
  Graph tg = make_thread_graph({body.type(first)});
  TensorId tin = tg.add(OpKind::input_iterator, {}, test::iter(0, {kPhi, kPhi, kPhi}, kPhi));
  tg.add(OpKind::output_saver, {tg.add(OpKind::exp, {tin})}, test::saver(0, {kPhi, kPhi, kPhi}));
  auto fused = body.append_with_body(OpKind::thread_graph, {first}, std::move(tg));
  body.add(OpKind::output_saver, {body.ops[fused->index()].outputs[0]}, test::saver(0, {0, kPhi, kPhi}));
  auto kop = k.append_with_body(OpKind::graph_kernel, {kx}, std::move(body));
  k.mark_output(k.ops[kop->index()].outputs[0], "E");
  ASSERT_FALSE(validate(k).has_value()) << validate(k)->str();
  expect_same(prog, k, 23);
}

TEST(FFInterp, LayoutOps) {
  Graph g;
  TensorId x = g.add_input("X", {2, 3});
  TensorId y = g.add_input("Y", {2, 2});
  OpAttrs rep;
  rep.dim = 1;
  rep.times = 3;
  g.mark_output(g.add(OpKind::repeat, {x}, rep), "R");
  OpAttrs rs;
  rs.shape = Shape{3, 2};
  g.mark_output(g.add(OpKind::reshape, {x}, rs), "S");
  OpAttrs cat;
  cat.dim = 1;
  g.mark_output(g.add(OpKind::concat, {x, y}, cat), "C");
  std::vector<FFTensor> in;
  FFRun r = run_one(g, 2, &in);
  for (int f = 0; f < 2; ++f) {
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 9; ++j) EXPECT_EQ(field(r.outputs[0], f, i * 9 + j), field(in[0], f, i * 3 + j % 3));
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(field(r.outputs[1], f, i), field(in[0], f, i));
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 5; ++j)
        EXPECT_EQ(field(r.outputs[2], f, i * 5 + j),
                  j < 3 ? field(in[0], f, i * 3 + j) : field(in[1], f, i * 2 + j - 3));
  }
}

TEST(FFInterp, ConstantsAreExactRationals) {
  // x · 0.125 = x / 8 and x · 1e-3 = x / 1000, exactly.
  Graph a, b;
  TensorId x = a.add_input("X", {10});
  a.mark_output(a.add(OpKind::mul, {x}, attrs::scalar(*parse_scalar("0.125"))), "A");
  a.mark_output(a.add(OpKind::mul, {x}, attrs::scalar(*parse_scalar("1e-3"))), "B");
  TensorId y = b.add_input("X", {10});
  b.mark_output(b.add(OpKind::div, {y}, attrs::scalar(*parse_scalar("8"))), "A");
  b.mark_output(b.add(OpKind::div, {y}, attrs::scalar(*parse_scalar("1000"))), "B");
  expect_same(a, b, 5);
}

// ---- zero divisors -----------------------------------------------------------------------------

TEST(FFInterp, ZeroDivisorIsReported) {
  Graph g;
  TensorId x = g.add_input("X", {4, 4});
  TensorId y = g.add_input("Y", {4});
  g.mark_output(g.add(OpKind::div, {x, y}), "O");
  std::vector<FFTensor> in = random_ff_inputs(g, 1);
  in[1].p.assign(4, 0);
  in[1].q.assign(4, 0);
  FFRun r = run_ff(g, in, context(1));
  EXPECT_TRUE(r.zero_divisor);
  EXPECT_TRUE(r.outputs.empty());
  in = random_ff_inputs(g, 1);
  in[1].q[2] = 0;  // a zero in Z_q alone is a zero divisor too (the divisor is not exp-tainted)
  EXPECT_TRUE(run_ff(g, in, context(1)).zero_divisor);
  // Inside a block graph (Figure 3b divides by sqrt(S / h)): X all zeros makes S zero.
  Graph fused = test::rmsnorm_fig3b(4, 32, 16, 2, 2);
  in = random_ff_inputs(fused, 3);
  in[0].p.assign(in[0].p.size(), 0);
  EXPECT_TRUE(run_ff(fused, in, context(3)).zero_divisor);
}

TEST(FFInterp, TaintedZeroInZqIsNoZeroDivisor) {
  // exp's Z_q part is 0 by definition: dividing by an exp must not count as a zero divisor.
  Graph g;
  TensorId x = g.add_input("X", {8});
  TensorId y = g.add_input("Y", {8});
  g.mark_output(g.add(OpKind::div, {x, g.add(OpKind::exp, {y})}), "O");
  FFRun r = run_one(g, 4);
  EXPECT_FALSE(r.zero_divisor);
  EXPECT_TRUE(r.exp_tainted[0]);
}

TEST(FFInterp, UnreadFieldsAreNotComputedAndWhatIsReadIsExact) {
  // Attention: S = Q·K is read only by exp, which reads its Z_q residues, so S's Z_p part is not
  // computed; exp(S)/sum·V is exp-tainted, so its Z_q part is not computed (both are left 0). O's
  // Z_p part must equal the brute-force value, and must not change when S is an output as well
  // (then S's Z_p part is computed).
  const std::string body =
      "input Q[2, 4, 8] f32\ninput K[2, 8, 16] f32\ninput V[2, 16, 4] f32\n"
      "S = matmul(Q, K)\nE = exp(S)\nO = matmul(div(E, sum(E, dim=2)), V)\noutput O\n";
  Graph lean = parse_program(body);
  Graph with_s = parse_program(body + "output S\n");
  std::vector<FFTensor> in;
  FFRun a = run_one(lean, 6, &in);
  FFRun b = run_ff(with_s, in, context(6));
  ASSERT_FALSE(a.zero_divisor);
  ASSERT_FALSE(b.zero_divisor);
  EXPECT_TRUE(a.exp_tainted[0]);
  EXPECT_EQ(a.outputs[0].p, b.outputs[0].p);
  EXPECT_EQ(a.outputs[0].q, std::vector<uint32_t>(a.outputs[0].q.size(), 0u));
  const uint64_t w = context(6).omega;
  for (int64_t bi = 0; bi < 2; ++bi) {
    for (int64_t i = 0; i < 4; ++i) {
      // S's row in both fields, then E = ω^(S_q) in Z_p, its row sum and O's row.
      std::vector<uint64_t> e(16);
      uint64_t denom = 0;
      for (int64_t k = 0; k < 16; ++k) {
        uint64_t sp = 0, sq = 0;
        for (int64_t j = 0; j < 8; ++j) {
          sp = (sp + field(in[0], 0, (bi * 4 + i) * 8 + j) * field(in[1], 0, (bi * 8 + j) * 16 + k)) % kP;
          sq = (sq + field(in[0], 1, (bi * 4 + i) * 8 + j) * field(in[1], 1, (bi * 8 + j) * 16 + k)) % kQ;
        }
        EXPECT_EQ(field(b.outputs[1], 0, (bi * 4 + i) * 16 + k), sp);
        EXPECT_EQ(field(b.outputs[1], 1, (bi * 4 + i) * 16 + k), sq);
        e[static_cast<size_t>(k)] = ff::pow(w, sq, kP);
        denom = (denom + e[static_cast<size_t>(k)]) % kP;
      }
      const uint64_t inv = ff::inv(denom, kP);
      for (int64_t c = 0; c < 4; ++c) {
        uint64_t o = 0;
        for (int64_t k = 0; k < 16; ++k)
          o = (o + e[static_cast<size_t>(k)] * inv % kP * field(in[2], 0, (bi * 16 + k) * 4 + c)) % kP;
        EXPECT_EQ(field(a.outputs[0], 0, (bi * 4 + i) * 4 + c), o) << "O[" << bi << ", " << i << ", " << c << "]";
      }
    }
  }
}

// ---- equivalent μGraphs agree exactly ----------------------------------------------------------

TEST(FFInterp, Fig3bMatchesReference) {
  expect_same(test::rmsnorm_fig3b(4, 64, 32, 4, 4), test::rmsnorm_reference(4, 64, 32), 1);
  expect_same(test::rmsnorm_fig3b(8, 128, 64, 8, 4), test::rmsnorm_reference(8, 128, 64), 2);
  expect_same(test::rmsnorm_fig3b(16, 512, 512, 16, 4), test::rmsnorm_reference(16, 512, 512), 5);
  expect_same(examples::rmsnorm_fig3b(4, 64, 32, 4, 4), test::rmsnorm_reference(4, 64, 32), 3);
  Graph prog = parse_program(
      "input X[4, 64] f32\ninput G[64] f32\ninput W[64, 32] f32\n"
      "S = sum(sqr(X), dim=1)\nY = div(mul(X, G), sqrt(div(S, 64)))\nO = matmul(Y, W)\noutput O\n");
  expect_same(test::rmsnorm_fig3b(4, 64, 32, 4, 4), prog, 4);
}

TEST(FFInterp, NonEquivalentVariantDiffers) {
  Graph prog = parse_program(
      "input X[4, 64] f32\ninput G[64] f32\ninput W[64, 32] f32\n"
      "S = sum(sqr(X), dim=1)\nY = div(mul(X, G), sqrt(div(S, 63)))\nO = matmul(Y, W)\noutput O\n");
  Graph fused = test::rmsnorm_fig3b(4, 64, 32, 4, 4);
  auto named = named_inputs(fused, 1);
  FFRun a = run_ff(fused, inputs_by_name(fused, named), context(1));
  FFRun b = run_ff(prog, inputs_by_name(prog, named), context(1));
  EXPECT_NE(a.outputs[0].p, b.outputs[0].p);
  EXPECT_NE(hash_ff(a.outputs[0]), hash_ff(b.outputs[0]));
}

// ---- FFOpCache -------------------------------------------------------------------------------

/// Runs each graph on the same named inputs with one cache, and each alone; the outputs must be
/// the same. Returns the cache's hits.
int64_t expect_cache_changes_nothing(const std::vector<const Graph*>& graphs, uint64_t seed) {
  auto named = named_inputs(*graphs.front(), seed);
  FFContext ctx = context(seed);
  FFOpCache cache;
  for (const Graph* g : graphs) {
    FFRun alone = run_ff(*g, inputs_by_name(*g, named), ctx, 1);
    FFRun shared = run_ff(*g, inputs_by_name(*g, named), ctx, 1, &cache);
    EXPECT_EQ(shared.zero_divisor, alone.zero_divisor);
    EXPECT_EQ(shared.exp_tainted, alone.exp_tainted);
    EXPECT_EQ(shared.outputs, alone.outputs);
  }
  return cache.hits();
}

TEST(FFInterp, OpCacheSharesAKernelBetweenGraphs) {
  // Figure 3b and the same kernel followed by another op: the second run takes the kernel from
  // the cache (one hit), and its output is what it computes alone.
  Graph fused = test::rmsnorm_fig3b(4, 64, 32, 4, 4);
  Graph more = fused;
  const TensorId o = more.outputs[0];
  ASSERT_TRUE(more.append(OpKind::mul, {o, o}).ok());
  more.outputs[0] = more.ops.back().outputs[0];
  ASSERT_FALSE(validate(more).has_value()) << validate(more)->str();
  EXPECT_EQ(expect_cache_changes_nothing({&fused, &more}, 1), 1);
}

TEST(FFInterp, OpCacheSharesWhatReadsEqualValuesOfDifferentlyTiledKernels) {
  // Figure 3b under two grids, each followed by the same op: the kernels are different ops,
  // but their results are equal, so the op after them is computed once (one hit) and its
  // output is what it computes alone. A kernel that computes something else shares nothing.
  auto then_square = [](Graph g) {
    const TensorId o = g.outputs[0];
    EXPECT_TRUE(g.append(OpKind::mul, {o, o}).ok());
    g.outputs[0] = g.ops.back().outputs[0];
    EXPECT_FALSE(validate(g).has_value()) << validate(g)->str();
    return g;
  };
  Graph four = then_square(test::rmsnorm_fig3b(4, 64, 32, 4, 4));
  Graph two = then_square(test::rmsnorm_fig3b(4, 64, 32, 2, 4));
  EXPECT_EQ(expect_cache_changes_nothing({&four, &two}, 1), 1);
  EXPECT_EQ(expect_cache_changes_nothing({&four, &two, &four}, 1), 3);  // the third: its kernel and the mul
  Graph added = test::rmsnorm_fig3b(4, 64, 32, 2, 4);                   // X + G where the norm has X · G
  for (Op& op : added.bodies.at(0).ops)
    if (op.kind == OpKind::mul) op.kind = OpKind::add;
  Graph other = then_square(added);
  EXPECT_EQ(expect_cache_changes_nothing({&four, &other}, 1), 0);
}

TEST(FFInterp, OpCacheMatchesOpsExactly) {
  // The same matmul of the same inputs is shared; on other inputs, with another constant, or
  // with other residues read (Q·K^T read only by an exp is computed in Z_q alone) it is not.
  Graph a = parse_program("input X[4, 8]\ninput W[8, 8]\nO = mul(matmul(X, W), 2)\noutput O\n");
  Graph same = parse_program("input W[8, 8]\ninput X[4, 8]\nO = add(matmul(X, W), 1)\noutput O\n");
  Graph swapped = parse_program("input X[8, 8]\ninput W[4, 8]\nO = mul(matmul(W, X), 2)\noutput O\n");
  Graph other_constant = parse_program("input X[4, 8]\ninput W[8, 8]\nO = mul(matmul(X, W), 3)\noutput O\n");
  Graph exp_only = parse_program("input X[4, 8]\ninput W[8, 8]\nO = exp(matmul(X, W))\noutput O\n");
  Graph both = parse_program("input X[4, 8]\ninput W[8, 8]\nS = matmul(X, W)\nO = mul(exp(S), S)\noutput O\n");
  EXPECT_EQ(expect_cache_changes_nothing({&a, &same}, 2), 1);             // the matmul
  EXPECT_EQ(expect_cache_changes_nothing({&a, &other_constant}, 2), 1);   // the matmul, not the mul
  EXPECT_EQ(expect_cache_changes_nothing({&exp_only, &both, &a}, 2), 1);  // both's S is a's, not exp_only's
  EXPECT_EQ(expect_cache_changes_nothing({&exp_only, &exp_only}, 2), 2);
  // Other names are other inputs, whatever their values.
  auto named = named_inputs(a, 4);
  std::map<std::string, FFTensor> renamed{{"X", named.at("W")}, {"W", named.at("X")}};
  FFOpCache cache;
  run_ff(a, inputs_by_name(a, named), context(4), 1, &cache);
  FFRun r = run_ff(swapped, inputs_by_name(swapped, renamed), context(4), 1, &cache);
  EXPECT_EQ(cache.hits(), 0);
  EXPECT_EQ(r.outputs, run_ff(swapped, inputs_by_name(swapped, renamed), context(4), 1).outputs);
}

TEST(FFInterp, OpCacheKeepsNoMoreThanItsBudget) {
  Graph a = parse_program("input X[4, 8]\ninput W[8, 8]\nO = mul(matmul(X, W), 2)\noutput O\n");
  auto named = named_inputs(a, 5);
  FFOpCache none(0), some(2 * 4 * 8 * 4);  // room for the matmul's result only
  for (FFOpCache* c : {&none, &some}) {
    run_ff(a, inputs_by_name(a, named), context(5), 1, c);
    run_ff(a, inputs_by_name(a, named), context(5), 1, c);
  }
  EXPECT_EQ(none.hits(), 0);
  EXPECT_EQ(none.kept_bytes(), 0);
  EXPECT_EQ(some.hits(), 1);
  EXPECT_EQ(some.kept_bytes(), 2 * 4 * 8 * 4);
}

TEST(FFInterp, GatedMlpMatchesReference) {
  expect_same(test::gated_mlp_fused(4, 64, 32, 4, 4), test::gated_mlp_reference(4, 64, 32), 1);
  expect_same(examples::gated_mlp_fig10b(4, 64, 32, 4, 4), test::gated_mlp_reference(4, 64, 32), 2);
  FFRun r = run_one(test::gated_mlp_reference(4, 64, 32), 1);
  EXPECT_TRUE(r.exp_tainted[0]);
}

TEST(FFInterp, OtherExamplesMatchTheirPrograms) {
  Graph exp_scale = parse_program("input X[4, 64] f32\ninput G[64] f32\nO = mul(exp(X), G)\noutput O\n");
  expect_same(examples::exp_scale_concat(4, 64, 2, 4), exp_scale, 1);
  Graph rms = parse_program(
      "input X[4, 64] f32\ninput G[64] f32\nS = sum(sqr(X), dim=1)\n"
      "O = div(mul(X, G), sqrt(div(S, 64)))\noutput O\n");
  expect_same(examples::rmsnorm_two_kernels(4, 64, 4, 2), rms, 2);
}

TEST(FFInterp, ExampleUGraphFilesMatchTheirPrograms) {
  // examples/ugraphs/references.txt at the paper's shapes (skipped in slow builds).
  if (slow_build()) GTEST_SKIP() << "paper shapes are too slow in a sanitizer or debug build";
  std::ifstream list(source_dir() + "/examples/ugraphs/references.txt");
  ASSERT_TRUE(list) << "cannot read references.txt";
  std::string line;
  int pairs = 0;
  while (std::getline(list, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string ugraph, program;
    words >> ugraph >> program;
    SCOPED_TRACE(ugraph + " vs " + program);
    Graph a = load_graph_file(source_dir() + "/examples/ugraphs/" + ugraph);
    Graph b = load_graph_file(source_dir() + "/examples/" + program);
    expect_same(a, b, 100 + static_cast<uint64_t>(pairs));
    ++pairs;
  }
  EXPECT_GE(pairs, 4);
}

TEST(FFInterp, ResultsDoNotDependOnThreadCount) {
  for (const Graph& g : {test::rmsnorm_fig3b(8, 256, 128, 8, 4), test::rmsnorm_reference(16, 256, 300),
                         test::gated_mlp_fused(4, 64, 32, 4, 4)}) {
    std::vector<FFTensor> in = random_ff_inputs(g, 6);
    FFRun one = run_ff(g, in, context(6), 1);
    for (int t : {2, 3, 7}) {
      FFRun more = run_ff(g, in, context(6), t);
      EXPECT_EQ(one.outputs, more.outputs) << t << " threads";
    }
  }
}

TEST(FFInterp, BufferReuseHandsBackAKeptBufferZeroed) {
  const size_t n = size_t{1} << 18;  // the smallest size kept
  {
    const FFBufferReuse reuse;
    std::vector<uint32_t> given(n, 7);
    const uint32_t* data = given.data();
    ff_detail::give_buffer(std::move(given));
    std::vector<uint32_t> taken = ff_detail::take_buffer(n);
    EXPECT_EQ(taken.data(), data) << "the kept buffer was not reused";
    EXPECT_EQ(std::count(taken.begin(), taken.end(), 0u), static_cast<std::ptrdiff_t>(n));
    // Too small to keep, or much larger than asked for: not handed out.
    ff_detail::give_buffer(std::vector<uint32_t>(n / 2, 1));
    ff_detail::give_buffer(std::vector<uint32_t>(4 * n, 1));
    EXPECT_EQ(ff_detail::take_buffer(n / 2).size(), n / 2);
    std::vector<uint32_t> big = ff_detail::take_buffer(n);
    EXPECT_LT(big.capacity(), 4 * n);
  }
  // With no FFBufferReuse alive nothing is kept.
  std::vector<uint32_t> given(n, 7);
  const uint32_t* data = given.data();
  ff_detail::give_buffer(std::move(given));
  std::vector<uint32_t> taken = ff_detail::take_buffer(n);
  EXPECT_NE(taken.data(), data);
}

TEST(FFInterp, BufferReuseChangesNoResult) {
  // Runs of one graph on different draws, with and without the buffers of the run before.
  Graph g;
  TensorId x = g.add_input("X", {512, 512});
  TensorId y = g.add_input("Y", {512, 512});
  g.mark_output(g.add(OpKind::mul, {g.add(OpKind::exp, {x}), g.add(OpKind::add, {x, y})}), "O");
  std::vector<FFRun> fresh;
  for (uint64_t seed : {1, 2, 3}) fresh.push_back(run_ff(g, random_ff_inputs(g, seed), context(seed)));
  const FFBufferReuse reuse;
  for (uint64_t seed : {1, 2, 3}) {
    FFRun r = run_ff(g, random_ff_inputs(g, seed), context(seed));
    EXPECT_EQ(r.outputs, fresh[seed - 1].outputs) << seed;
  }
}

TEST(FFInterp, RejectsWrongInputs) {
  Graph g = test::rmsnorm_reference(4, 64, 32);
  std::vector<FFTensor> in = random_ff_inputs(g, 1);
  in.pop_back();
  EXPECT_THROW(run_ff(g, in, context(1)), UserError);
  in = random_ff_inputs(g, 1);
  in[0] = FFTensor(Shape{4, 63});
  EXPECT_THROW(run_ff(g, in, context(1)), UserError);
}

}  // namespace
}  // namespace mugraph
