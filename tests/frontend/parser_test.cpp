// Programs that parse: the graph each one builds.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "mugraph/frontend.h"

namespace mugraph {
namespace {

/// The op that produced a program output.
const Op& producer(const Graph& g, TensorId t) { return g.op(g.tensor(t).producer); }

/// The shape of output i.
Shape out_shape(const Graph& g, size_t i) { return g.type(g.outputs.at(i)).shape; }

TEST(Parser, DesignExample) {
  // DESIGN.md §3, verbatim.
  const char* text = R"(# RMSNorm followed by a projection (the paper's Figure 3a)
input X[16, 4096] f16          # dtype is optional: f16 (default), bf16, f32
input G[4096]
input W[4096, 4096]
S = sum(sqr(X), dim=1)          # -> [16, 1]
Y = div(mul(X, G), sqrt(div(S, 4096)))
O = matmul(Y, W)
output O                        # one or more names, comma separated, in output order
)";
  Graph g = parse_program(text, "rmsnorm.mg");
  EXPECT_EQ(g.level, Level::kernel);
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.output_names[0], "O");
  EXPECT_EQ(out_shape(g, 0), (Shape{16, 4096}));
  EXPECT_EQ(g.type(g.outputs[0]).dtype, DType::f16);
  EXPECT_EQ(g.tensor(g.outputs[0]).name, "O");
  EXPECT_EQ(producer(g, g.outputs[0]).kind, OpKind::matmul);

  // inputs, then sqr, sum, mul, div(S, 4096), sqrt, div, matmul.
  ASSERT_EQ(g.ops.size(), 10u);
  std::vector<OpKind> kinds;
  for (const Op& op : g.ops) kinds.push_back(op.kind);
  EXPECT_EQ(kinds, (std::vector<OpKind>{OpKind::input, OpKind::input, OpKind::input, OpKind::sqr, OpKind::sum,
                                        OpKind::mul, OpKind::div, OpKind::sqrt, OpKind::div, OpKind::matmul}));
  EXPECT_EQ(g.ops[0].attrs.name, "X");
  EXPECT_EQ(g.ops[0].attrs.shape, (Shape{16, 4096}));
  EXPECT_EQ(g.ops[1].attrs.shape, (Shape{4096}));
  EXPECT_EQ(g.ops[4].attrs.dim, 1);
  EXPECT_EQ(g.ops[4].attrs.to, 1);
  EXPECT_EQ(g.type(g.ops[4].outputs[0]).shape, (Shape{16, 1}));
  EXPECT_EQ(g.tensor(g.ops[4].outputs[0]).name, "S");
  const OpAttrs& d = g.ops[6].attrs;
  EXPECT_TRUE(d.has_scalar);
  EXPECT_EQ(d.scalar, *parse_scalar("4096"));
  EXPECT_EQ(d.scalar_pos, 1);
  EXPECT_EQ(g.ops[6].inputs.size(), 1u);
  EXPECT_EQ(g.type(g.ops[8].outputs[0]).shape, (Shape{16, 4096}));
  EXPECT_EQ(g.tensor(g.ops[8].outputs[0]).name, "Y");
}

TEST(Parser, EveryOp) {
  Graph g = parse_program(R"(input A[8, 16]
input B[16, 32]
input C[8, 16]
M = matmul(A, B)
P = add(A, C)
Q = sub(A, C)
R = mul(A, C)
D = div(A, C)
E1 = exp(A)
E2 = sqr(A)
E3 = sqrt(A)
E4 = silu(A)
E5 = relu(A)
E6 = gelu(A)
S = sum(A, dim=0)
T = repeat(A, dim=1, times=3)
U = reshape(A, shape=[4, 2, 16])
V = concat(A, C, A, dim=0)
output M, P, Q, R, D, E1, E2, E3, E4, E5, E6, S, T, U, V
)");
  std::vector<std::pair<OpKind, Shape>> want = {
      {OpKind::matmul, {8, 32}}, {OpKind::add, {8, 16}},        {OpKind::sub, {8, 16}},     {OpKind::mul, {8, 16}},
      {OpKind::div, {8, 16}},    {OpKind::exp, {8, 16}},        {OpKind::sqr, {8, 16}},     {OpKind::sqrt, {8, 16}},
      {OpKind::silu, {8, 16}},   {OpKind::relu, {8, 16}},       {OpKind::gelu, {8, 16}},    {OpKind::sum, {1, 16}},
      {OpKind::repeat, {8, 48}}, {OpKind::reshape, {4, 2, 16}}, {OpKind::concat, {24, 16}},
  };
  ASSERT_EQ(g.outputs.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(producer(g, g.outputs[i]).kind, want[i].first) << i;
    EXPECT_EQ(out_shape(g, i), want[i].second) << op_name(want[i].first);
  }
  EXPECT_EQ(producer(g, g.outputs[12]).attrs.times, 3);
  EXPECT_EQ(producer(g, g.outputs[14]).inputs.size(), 3u);
  EXPECT_EQ(g.output_names[4], "D");
}

TEST(Parser, Broadcasting) {
  Graph g = parse_program(R"(input X[2, 1, 64]
input Y[8, 1]
input V[64]
A = add(X, Y)
B = mul(V, X)
output A, B
)");
  EXPECT_EQ(out_shape(g, 0), (Shape{2, 8, 64}));
  EXPECT_EQ(out_shape(g, 1), (Shape{2, 1, 64}));
}

TEST(Parser, BatchedMatmulBroadcastsLeadingDims) {
  Graph g = parse_program("input Q[4, 256, 64]\ninput K[64, 128]\nO = matmul(Q, K)\noutput O\n");
  EXPECT_EQ(out_shape(g, 0), (Shape{4, 256, 128}));
}

TEST(Parser, NegativeDimsCountFromTheEnd) {
  Graph g = parse_program(R"(input X[2, 3, 4]
A = sum(X, dim=-1)
B = repeat(X, dim=-3, times=2)
C = concat(X, X, dim=-2)
output A, B, C
)");
  EXPECT_EQ(producer(g, g.outputs[0]).attrs.dim, 2);
  EXPECT_EQ(out_shape(g, 0), (Shape{2, 3, 1}));
  EXPECT_EQ(producer(g, g.outputs[1]).attrs.dim, 0);
  EXPECT_EQ(out_shape(g, 1), (Shape{4, 3, 4}));
  EXPECT_EQ(producer(g, g.outputs[2]).attrs.dim, 1);
  EXPECT_EQ(out_shape(g, 2), (Shape{2, 6, 4}));
}

TEST(Parser, GroupedSum) {
  Graph g = parse_program("input x[16, 4096]\ny = sum(x, dim=1, to=4)\nz = sum(x, to=8, dim=0)\noutput y, z\n");
  EXPECT_EQ(out_shape(g, 0), (Shape{16, 4}));
  EXPECT_EQ(producer(g, g.outputs[0]).attrs.to, 4);
  EXPECT_EQ(out_shape(g, 1), (Shape{8, 4096}));
}

TEST(Parser, SeveralOutputsKeepTheirOrder) {
  Graph g = parse_program(R"(input X[4, 4]
A = exp(X)
B = sqr(X)
C = relu(X)
output C
output A, B
output X
)");
  EXPECT_EQ(g.output_names, (std::vector<std::string>{"C", "A", "B", "X"}));
  EXPECT_EQ(producer(g, g.outputs[0]).kind, OpKind::relu);
  EXPECT_EQ(producer(g, g.outputs[1]).kind, OpKind::exp);
  EXPECT_EQ(producer(g, g.outputs[3]).kind, OpKind::input);
}

TEST(Parser, ScalarsOnEitherSide) {
  Graph g = parse_program(R"(input X[4]
A = sub(1, X)
B = div(X, 0.125)
C = mul(-2, X)
D = add(X, 1e-6)
output A, B, C, D
)");
  const OpAttrs& a = producer(g, g.outputs[0]).attrs;
  EXPECT_TRUE(a.has_scalar);
  EXPECT_EQ(a.scalar_pos, 0);
  EXPECT_EQ(a.scalar.str(), "1");
  const OpAttrs& b = producer(g, g.outputs[1]).attrs;
  EXPECT_EQ(b.scalar_pos, 1);
  EXPECT_EQ(b.scalar.mantissa, 125);
  EXPECT_EQ(b.scalar.exp10, -3);
  EXPECT_EQ(producer(g, g.outputs[2]).attrs.scalar.str(), "-2");
  EXPECT_EQ(producer(g, g.outputs[2]).attrs.scalar_pos, 0);
  EXPECT_EQ(producer(g, g.outputs[3]).attrs.scalar, *parse_scalar("1e-6"));
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(producer(g, g.outputs[i]).inputs.size(), 1u);
    EXPECT_EQ(out_shape(g, i), (Shape{4}));
  }
}

TEST(Parser, NamedConstants) {
  Graph g = parse_program(R"(input X[4]
eps = 1e-6
half = 0.5
alias = half
Y = mul(add(X, eps), alias)
output Y
)");
  const Op& mul = producer(g, g.outputs[0]);
  EXPECT_EQ(mul.kind, OpKind::mul);
  EXPECT_EQ(mul.attrs.scalar.str(), "0.5");
  const Op& add = g.op(g.tensor(mul.inputs[0]).producer);
  EXPECT_EQ(add.attrs.scalar, *parse_scalar("0.000001"));
}

TEST(Parser, Dtypes) {
  Graph g = parse_program(
      "input A[2] f16\ninput B[2] bf16\ninput C[2] f32\ninput D[2]\nE = add(A, B)\n"
      "F = add(A, C)\nG = exp(B)\noutput E, F, G, D\n");
  EXPECT_EQ(g.ops[0].attrs.dtype, DType::f16);
  EXPECT_EQ(g.ops[1].attrs.dtype, DType::bf16);
  EXPECT_EQ(g.ops[2].attrs.dtype, DType::f32);
  EXPECT_EQ(g.ops[3].attrs.dtype, DType::f16);
  EXPECT_EQ(g.type(g.outputs[0]).dtype, DType::f32);  // f16 with bf16 promotes to f32
  EXPECT_EQ(g.type(g.outputs[1]).dtype, DType::f32);
  EXPECT_EQ(g.type(g.outputs[2]).dtype, DType::bf16);
}

TEST(Parser, CommentsBlankLinesAndSpacing) {
  Graph g = parse_program(
      "# leading comment\n\n   \t\n#only comment\ninput   X [ 4 ,8 ]f32#c\n"
      "\tY=exp( X )# no space\n  # indented comment\noutput Y # trailing");
  EXPECT_EQ(out_shape(g, 0), (Shape{4, 8}));
  EXPECT_EQ(g.type(g.outputs[0]).dtype, DType::f32);
}

TEST(Parser, LineEndingsAndByteOrderMark) {
  const char* crlf = "input X[4]\r\nY = exp(X)\r\noutput Y\r\n";
  const char* cr = "input X[4]\rY = exp(X)\routput Y";
  const char* bom = "\xEF\xBB\xBFinput X[4]\nY = exp(X)\noutput Y";
  for (const char* text : {crlf, cr, bom}) {
    Graph g = parse_program(text);
    EXPECT_EQ(out_shape(g, 0), (Shape{4}));
  }
}

TEST(Parser, CommentsMayHoldAnyBytes) {
  std::string text = "input X[4] # caf\xC3\xA9 \x01\xFF";
  text += '\0';
  text += " still a comment\nY = exp(X)\noutput Y\n";
  EXPECT_EQ(parse_program(text).outputs.size(), 1u);
}

TEST(Parser, AliasesShareATensor) {
  Graph g = parse_program("input X[4]\nA = exp(X)\nB = A\noutput A, B\n");
  ASSERT_EQ(g.outputs.size(), 2u);
  EXPECT_EQ(g.outputs[0], g.outputs[1]);
  EXPECT_EQ(g.tensor(g.outputs[1]).name, "A");
  EXPECT_EQ(g.output_names[1], "B");
  EXPECT_EQ(g.ops.size(), 2u);
}

TEST(Parser, DeepButAllowedNesting) {
  std::string expr = "X";
  for (int i = 0; i < 200; ++i) expr = "exp(" + expr + ")";
  Graph g = parse_program("input X[2]\nY = " + expr + "\noutput Y\n");
  EXPECT_EQ(g.ops.size(), 201u);
}

TEST(Parser, LayoutOps) {
  Graph g = parse_program(R"(input X[16, 256]
input A[256, 16]
input W[256, 4096]
input B[16, 4096]
XA = matmul(X, A)
L = matmul(concat(X, XA, dim=1), concat(W, B, dim=0))
R = reshape(L, shape=[16, 64, 64])
T = repeat(R, dim=0, times=2)
output L, T
)");
  EXPECT_EQ(out_shape(g, 0), (Shape{16, 4096}));
  EXPECT_EQ(out_shape(g, 1), (Shape{32, 64, 64}));
  EXPECT_EQ(g.op(g.tensor(g.outputs[1]).producer).attrs.dim, 0);
}

TEST(Parser, IntegersInOtherNotations) {
  Graph g = parse_program("input X[1e3, 2.0e1]\nY = sum(X, dim=1, to=1e1)\noutput Y\n");
  EXPECT_EQ(out_shape(g, 0), (Shape{1000, 10}));
}

TEST(Parser, NamesMayLookLikeDtypesOrStructuralOps) {
  Graph g = parse_program("input f16[4]\naccum = exp(f16)\n_x9 = accum\noutput _x9\n");
  EXPECT_EQ(g.output_names[0], "_x9");
}

TEST(LoadProgramFile, ReadsAFile) {
  std::string path = ::testing::TempDir() + "/mugraph_load_test.mg";
  {
    std::ofstream f(path, std::ios::binary);
    f << "input X[3]\nY = exp(X)\noutput Y\n";
  }
  Graph g = load_program_file(path);
  EXPECT_EQ(out_shape(g, 0), (Shape{3}));
  std::remove(path.c_str());
}

TEST(LoadProgramFile, ErrorsNameTheFile) {
  std::string path = ::testing::TempDir() + "/mugraph_load_error.mg";
  {
    std::ofstream f(path, std::ios::binary);
    f << "input X[3]\nY = exq(X)\n";
  }
  try {
    load_program_file(path);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_EQ(e.loc().file, path);
    EXPECT_EQ(e.loc().line, 2);
    EXPECT_EQ(e.loc().column, 5);
  }
  std::remove(path.c_str());
}

TEST(LoadProgramFile, UnreadableFiles) {
  try {
    load_program_file("/nonexistent/dir/x.mg");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "error: cannot read '/nonexistent/dir/x.mg': No such file or directory");
  }
  try {
    load_program_file(::testing::TempDir());
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_EQ(e.message(), "cannot read '" + ::testing::TempDir() + "': it is a directory");
  }
}

TEST(LoadProgramFile, RejectsHugeFiles) {
  // /dev/zero never ends; the size limit stops the read.
  try {
    load_program_file("/dev/zero");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_EQ(e.message(), "cannot read '/dev/zero': it is larger than the limit of 67108864 bytes");
  }
}

}  // namespace
}  // namespace mugraph
