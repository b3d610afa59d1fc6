// Every pre-defined kernel op against small hand-computed examples.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "interp_test_util.h"
#include "test_graphs.h"

namespace mugraph {
namespace {

using test::run;
using test::tensor;

OpAttrs dim_attrs(int dim) { return attrs::sum(dim); }
OpAttrs sum_attrs(int dim, int64_t to) { return attrs::sum(dim, to); }

/// Runs a one-op kernel graph: op(inputs...) with the given attributes.
HostTensor run_op(OpKind kind, const std::vector<HostTensor>& inputs, OpAttrs attrs = {}) {
  Graph g;
  std::vector<TensorId> ids;
  for (size_t i = 0; i < inputs.size(); ++i)
    ids.push_back(g.add_input("x" + std::to_string(i), inputs[i].type.shape, inputs[i].type.dtype));
  g.mark_output(g.add(kind, ids, attrs), "out");
  return run(g, inputs).at(0);
}

TEST(KernelOps, Unary) {
  HostTensor x = tensor({2, 2}, {0.0f, 1.0f, -2.0f, 4.0f});
  EXPECT_EQ(run_op(OpKind::sqr, {x}).data, (std::vector<float>{0, 1, 4, 16}));
  EXPECT_EQ(run_op(OpKind::relu, {x}).data, (std::vector<float>{0, 1, 0, 4}));
  HostTensor s = run_op(OpKind::sqrt, {x});
  EXPECT_EQ(s.data[0], 0.0f);
  EXPECT_EQ(s.data[3], 2.0f);
  EXPECT_TRUE(std::isnan(s.data[2]));
  HostTensor e = run_op(OpKind::exp, {x});
  EXPECT_EQ(e.data[0], 1.0f);
  EXPECT_FLOAT_EQ(e.data[1], 2.7182817f);
  HostTensor si = run_op(OpKind::silu, {x});
  EXPECT_EQ(si.data[0], 0.0f);
  EXPECT_FLOAT_EQ(si.data[1], 0.7310586f);
  EXPECT_FLOAT_EQ(si.data[2], -0.23840584f);
  HostTensor ge = run_op(OpKind::gelu, {x});
  EXPECT_EQ(ge.data[0], 0.0f);
  EXPECT_FLOAT_EQ(ge.data[1], 0.8413447f);
  // The values are exactly the registry's semantics.
  for (OpKind k : {OpKind::exp, OpKind::sqr, OpKind::sqrt, OpKind::silu, OpKind::relu, OpKind::gelu}) {
    HostTensor r = run_op(k, {x});
    for (size_t i = 0; i < x.data.size(); ++i) {
      float want = apply_unary(k, x.data[i]);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(r.data[i]));
      } else {
        EXPECT_EQ(r.data[i], want) << op_name(k) << " " << i;
      }
    }
  }
}

TEST(KernelOps, BinaryBroadcasting) {
  HostTensor a = tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor row = tensor({3}, {10, 20, 30});
  HostTensor col = tensor({2, 1}, {100, 200});
  EXPECT_EQ(run_op(OpKind::add, {a, row}).data, (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(run_op(OpKind::sub, {a, col}).data, (std::vector<float>{-99, -98, -97, -196, -195, -194}));
  // [2,1] × [3] broadcasts both ways to [2,3]: an outer product.
  HostTensor outer = run_op(OpKind::mul, {col, row});
  EXPECT_EQ(outer.type.shape, (Shape{2, 3}));
  EXPECT_EQ(outer.data, (std::vector<float>{1000, 2000, 3000, 2000, 4000, 6000}));
  EXPECT_EQ(run_op(OpKind::div, {row, tensor({1, 1}, {10})}).data, (std::vector<float>{1, 2, 3}));
  // Rank 3 against rank 1 and a middle broadcast dim.
  HostTensor c = tensor({2, 1, 2}, {1, 2, 3, 4});
  HostTensor d = tensor({3, 1}, {10, 20, 30});
  HostTensor cd = run_op(OpKind::add, {c, d});
  EXPECT_EQ(cd.type.shape, (Shape{2, 3, 2}));
  EXPECT_EQ(cd.data, (std::vector<float>{11, 12, 21, 22, 31, 32, 13, 14, 23, 24, 33, 34}));
}

TEST(KernelOps, ScalarOnEitherSide) {
  HostTensor x = tensor({3}, {1, 2, 4});
  EXPECT_EQ(run_op(OpKind::sub, {x}, test::scalar("1", 1)).data, (std::vector<float>{0, 1, 3}));    // x − 1
  EXPECT_EQ(run_op(OpKind::sub, {x}, test::scalar("1", 0)).data, (std::vector<float>{0, -1, -3}));  // 1 − x
  EXPECT_EQ(run_op(OpKind::div, {x}, test::scalar("2", 1)).data, (std::vector<float>{0.5, 1, 2}));  // x / 2
  EXPECT_EQ(run_op(OpKind::div, {x}, test::scalar("2", 0)).data, (std::vector<float>{2, 1, 0.5}));  // 2 / x
  EXPECT_EQ(run_op(OpKind::mul, {x}, test::scalar("0.125", 0)).data, (std::vector<float>{0.125, 0.25, 0.5}));
  EXPECT_EQ(run_op(OpKind::add, {x}, test::scalar("-2.5")).data, (std::vector<float>{-1.5, -0.5, 1.5}));
}

TEST(KernelOps, SumWithGroups) {
  HostTensor x = tensor({2, 6}, {1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60});
  // dim=-1 normalized to 1; to=2: two groups of three.
  EXPECT_EQ(run_op(OpKind::sum, {x}, sum_attrs(1, 2)).data, (std::vector<float>{6, 15, 60, 150}));
  EXPECT_EQ(run_op(OpKind::sum, {x}, sum_attrs(1, 1)).data, (std::vector<float>{21, 210}));
  EXPECT_EQ(run_op(OpKind::sum, {x}, sum_attrs(1, 6)).data, x.data);
  EXPECT_EQ(run_op(OpKind::sum, {x}, sum_attrs(0, 1)).data, (std::vector<float>{11, 22, 33, 44, 55, 66}));
  // A middle dim with inner elements: [2, 4, 3] summed over dim 1 to 2 → [2, 2, 3].
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  HostTensor y = run_op(OpKind::sum, {tensor({2, 4, 3}, v)}, sum_attrs(1, 2));
  EXPECT_EQ(y.type.shape, (Shape{2, 2, 3}));
  // out[b, j, k] = v[b, 2j, k] + v[b, 2j+1, k] = (12b + 6j + k) + (12b + 6j + 3 + k)
  EXPECT_EQ(y.data, (std::vector<float>{3, 5, 7, 15, 17, 19, 27, 29, 31, 39, 41, 43}));
}

TEST(KernelOps, SumAccumulatesWiderThanF32) {
  // 2^24 + 1 + 1 + ... is exact in f64 but not in a running f32 sum.
  std::vector<float> v(9, 1.0f);
  v[0] = 16777216.0f;
  HostTensor r = run_op(OpKind::sum, {tensor({9}, v)}, sum_attrs(0, 1));
  EXPECT_EQ(r.data[0], 16777224.0f);
}

TEST(KernelOps, RepeatTiles) {
  HostTensor x = tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  OpAttrs r0 = dim_attrs(0);
  r0.times = 2;
  HostTensor a = run_op(OpKind::repeat, {x}, r0);
  EXPECT_EQ(a.type.shape, (Shape{4, 3}));
  EXPECT_EQ(a.data, (std::vector<float>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}));
  OpAttrs r1 = dim_attrs(1);
  r1.times = 3;
  HostTensor b = run_op(OpKind::repeat, {x}, r1);
  EXPECT_EQ(b.type.shape, (Shape{2, 9}));
  EXPECT_EQ(b.data, (std::vector<float>{1, 2, 3, 1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6, 4, 5, 6}));
}

TEST(KernelOps, ReshapeIsRowMajor) {
  HostTensor x = tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  OpAttrs a;
  a.shape = Shape{3, 1, 2};
  HostTensor r = run_op(OpKind::reshape, {x}, a);
  EXPECT_EQ(r.type.shape, (Shape{3, 1, 2}));
  EXPECT_EQ(r.data, x.data);
}

TEST(KernelOps, ConcatOfThree) {
  HostTensor a = tensor({2, 1}, {1, 2});
  HostTensor b = tensor({2, 2}, {3, 4, 5, 6});
  HostTensor c = tensor({2, 1}, {7, 8});
  HostTensor r = run_op(OpKind::concat, {a, b, c}, dim_attrs(1));
  EXPECT_EQ(r.type.shape, (Shape{2, 4}));
  EXPECT_EQ(r.data, (std::vector<float>{1, 3, 4, 7, 2, 5, 6, 8}));
  HostTensor r0 = run_op(OpKind::concat, {tensor({1, 2}, {1, 2}), tensor({2, 2}, {3, 4, 5, 6}), tensor({1, 2}, {7, 8})},
                         dim_attrs(0));
  EXPECT_EQ(r0.data, (std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(KernelOps, Matmul) {
  HostTensor a = tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor b = tensor({3, 2}, {7, 8, 9, 10, 11, 12});
  EXPECT_EQ(run_op(OpKind::matmul, {a, b}).data, (std::vector<float>{58, 64, 139, 154}));
}

TEST(KernelOps, BatchedMatmulBroadcastsBatchDims) {
  // A [2, 1, 1, 2] (batch [2, 1]) times B [3, 2, 1] (batch [3]) → [2, 3, 1, 1].
  HostTensor a = tensor({2, 1, 1, 2}, {1, 2, 3, 4});
  HostTensor b = tensor({3, 2, 1}, {1, 1, 10, 0, 0, 100});
  HostTensor r = run_op(OpKind::matmul, {a, b});
  EXPECT_EQ(r.type.shape, (Shape{2, 3, 1, 1}));
  // a0 = [1, 2], a1 = [3, 4]; b0 = [1, 1]ᵀ, b1 = [10, 0]ᵀ, b2 = [0, 100]ᵀ
  EXPECT_EQ(r.data, (std::vector<float>{3, 10, 200, 7, 30, 400}));
  // A batched left operand against a plain matrix.
  HostTensor c = tensor({2, 2, 2}, {1, 0, 0, 1, 2, 0, 0, 2});
  HostTensor d = tensor({2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(run_op(OpKind::matmul, {c, d}).data, (std::vector<float>{1, 2, 3, 4, 2, 4, 6, 8}));
}

TEST(KernelOps, LargeMatmulMatchesNaiveAndIsThreadCountIndependent) {
  // Big enough to be split into pieces on the pool: [300, 70] × [70, 600].
  Graph g;
  TensorId x = g.add_input("A", {300, 70}, DType::f32);
  TensorId w = g.add_input("B", {70, 600}, DType::f32);
  g.mark_output(g.add(OpKind::matmul, {x, w}), "C");
  auto in = random_inputs(g, 7);
  HostTensor one = run(g, in, 1).at(0), two = run(g, in, 2).at(0);
  EXPECT_TRUE(test::bit_identical(one, two));
  HostTensor naive(TensorType{{300, 600}, DType::f32});
  for (int i = 0; i < 300; ++i)
    for (int j = 0; j < 600; ++j) {
      double s = 0;
      for (int k = 0; k < 70; ++k) s += static_cast<double>(in[0].data[i * 70 + k]) * in[1].data[k * 600 + j];
      naive.data[static_cast<size_t>(i * 600 + j)] = static_cast<float>(s);
    }
  EXPECT_LT(test::relative_error(one, naive), 1e-5);
}

TEST(KernelOps, F16ResultsAreRounded) {
  HostTensor one = tensor({1}, {1.0f}, DType::f16);
  HostTensor tiny = tensor({1}, {std::ldexp(1.0f, -11)}, DType::f16);  // half an f16 ulp of 1
  EXPECT_EQ(run_op(OpKind::add, {one, tiny}).data[0], 1.0f);           // tie to even
  HostTensor three = tensor({1}, {3.0f}, DType::f16);
  EXPECT_EQ(run_op(OpKind::div, {one, three}).data[0], round_to_dtype(1.0f / 3.0f, DType::f16));
  // f16 with f32 promotes to f32: no f16 rounding.
  HostTensor tiny32 = tensor({1}, {std::ldexp(1.0f, -11)}, DType::f32);
  HostTensor mixed = run_op(OpKind::add, {one, tiny32});
  EXPECT_EQ(mixed.type.dtype, DType::f32);
  EXPECT_EQ(mixed.data[0], 1.0f + std::ldexp(1.0f, -11));
  // bf16 rounding.
  HostTensor b = tensor({1}, {1.0f}, DType::bf16);
  EXPECT_EQ(run_op(OpKind::add, {b, tensor({1}, {std::ldexp(1.0f, -8)}, DType::bf16)}).data[0], 1.0f);
  // Overflow in f16 gives inf.
  HostTensor big = tensor({1}, {60000.0f}, DType::f16);
  EXPECT_TRUE(std::isinf(run_op(OpKind::add, {big, big}).data[0]));
}

TEST(KernelOps, ChainsAndOutputsThatAreInputs) {
  Graph g;
  TensorId x = g.add_input("X", {2, 2}, DType::f32);
  TensorId y = g.add(OpKind::exp, {g.add(OpKind::sqr, {x})});
  g.mark_output(y, "Y");
  g.mark_output(x, "X");
  g.mark_output(y, "Y2");
  auto out = run(g, {tensor({2, 2}, {0, 1, 2, 0})});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].data[0], 1.0f);
  EXPECT_FLOAT_EQ(out[0].data[2], std::exp(4.0f));
  EXPECT_EQ(out[1].data, (std::vector<float>{0, 1, 2, 0}));
  EXPECT_EQ(out[2].data, out[0].data);
}

TEST(RunFloat, RejectsWrongInputs) {
  Graph g = test::rmsnorm_reference(4, 8, 8);
  auto in = random_inputs(g, 1);
  auto message = [&](const std::vector<HostTensor>& inputs, InterpOptions o = {}) {
    try {
      run_float(g, inputs, o);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({in[0], in[1]}).find("the graph has 3 inputs but 2 were given"), std::string::npos);
  auto wrong_shape = in;
  wrong_shape[1] = HostTensor(TensorType{{9}, DType::f32});
  EXPECT_NE(message(wrong_shape).find("input 1 ('G') should be [8] f32 but is [9] f32"), std::string::npos)
      << message(wrong_shape);
  auto wrong_dtype = in;
  wrong_dtype[2].type.dtype = DType::f16;
  EXPECT_NE(message(wrong_dtype).find("should be [8, 8] f32 but is [8, 8] f16"), std::string::npos);
  auto short_data = in;
  short_data[0].data.pop_back();
  EXPECT_NE(message(short_data).find("holds 31 values"), std::string::npos);
  InterpOptions neg;
  neg.threads = -1;
  EXPECT_NE(message(in, neg).find("thread count"), std::string::npos);
}

TEST(RunFloat, RefusesMalformedGraphs) {
  auto message = [](const Graph& g) {
    try {
      run_float(g, random_inputs(g, 1));
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Graph g;
  TensorId x = g.add_input("X", {4, 4}, DType::f32);
  g.mark_output(g.add(OpKind::exp, {x}), "Y");
  Graph wrong_type = g;
  wrong_type.tensors[1].type.shape = Shape{3};
  EXPECT_NE(message(wrong_type).find("not a valid μGraph"), std::string::npos) << message(wrong_type);
  Graph dangling = g;
  dangling.ops[1].inputs[0] = TensorId(7);
  EXPECT_NE(message(dangling).find("not a valid μGraph"), std::string::npos) << message(dangling);
  Graph no_outputs = g;
  no_outputs.outputs.clear();
  no_outputs.output_names.clear();
  EXPECT_NE(message(no_outputs).find("no outputs"), std::string::npos) << message(no_outputs);
  Graph fig = test::rmsnorm_fig3b(4, 64, 32, 4, 4);
  fig.bodies[0].ops[2].attrs.imap = {5, kPhi, kPhi};  // a dimension W does not have
  EXPECT_NE(message(fig).find("not a valid μGraph"), std::string::npos) << message(fig);
}

TEST(RunFloat, RefusesGraphsAboveTheMemoryLimit) {
  // X [16, 4096], G, W [4096, 4096] and the intermediates: far above a 1 MiB limit.
  Graph g = test::rmsnorm_reference(16, 4096, 4096);
  InterpOptions o;
  o.max_bytes = 1 << 20;
  std::vector<HostTensor> no_inputs = {HostTensor(TensorType{{16, 4096}, DType::f32}),
                                       HostTensor(TensorType{{4096}, DType::f32}),
                                       HostTensor(TensorType{{4096, 4096}, DType::f32})};
  try {
    run_float(g, no_inputs, o);
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("bytes of host memory; the limit is 1048576"), std::string::npos) << e.what();
  }
  // An absurd graph (2^40 elements per tensor) is refused cleanly by the default limit, before
  // its inputs are looked at, and random_inputs refuses to make its inputs.
  Graph huge;
  TensorId x = huge.add_input("X", {1 << 20, 1 << 20}, DType::f16);
  huge.mark_output(huge.add(OpKind::exp, {x}), "Y");
  std::vector<HostTensor> fake(1);
  fake[0].type = huge.type(x);
  try {
    run_float(huge, fake);
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("the graph needs 8796093022208 bytes of host memory; the limit is 8589934592"),
              std::string::npos)
        << e.what();
  }
  try {
    random_inputs(huge, 1);
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("inputs need 4398046511104 bytes"), std::string::npos) << e.what();
  }
  EXPECT_EQ(host_memory_bytes(test::rmsnorm_reference(16, 4096, 4096)),
            4 * (16 * 4096 * 5 + 16 * 3 + 4096 + 4096 * 4096));
}

}  // namespace
}  // namespace mugraph
