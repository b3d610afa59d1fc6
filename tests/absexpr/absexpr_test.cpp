// Abstract expressions: the hash-consing pool, the expression rules of every op (paper Table 1),
// inlining of block and thread graphs, the concat rule, incremental use, and thread safety.
#include "mugraph/absexpr.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "example_graphs.h"
#include "mugraph/frontend.h"
#include "mugraph/loader.h"
#include "test_graphs.h"

namespace mugraph {
namespace {

std::string source_dir() {
  const char* dir = std::getenv("MUGRAPH_SOURCE_DIR");
  return dir ? dir : MUGRAPH_SOURCE_DIR_DEFAULT;
}

ExprId c(ExprPool& pool, const char* text) { return pool.constant(*parse_scalar(text)); }

/// The one output expression of a program given as text.
ExprId program_output(const std::string& text, ExprPool& pool) {
  std::vector<ExprId> outs = output_expressions(parse_program(text), pool);
  EXPECT_EQ(outs.size(), 1u);
  return outs.empty() ? ExprId{} : outs[0];
}

/// Every tensor of g and of every body some op refers to has an expression; returns how many.
int64_t check_complete(const Graph& g, const GraphExprs& e, const std::string& where) {
  EXPECT_EQ(e.tensors.size(), g.tensors.size()) << where;
  EXPECT_EQ(e.bodies.size(), g.bodies.size()) << where;
  int64_t n = 0;
  for (size_t t = 0; t < e.tensors.size(); ++t, ++n) EXPECT_TRUE(e.tensors[t].valid()) << where << " tensor " << t;
  for (ExprId o : e.outputs) EXPECT_TRUE(o.valid()) << where << " output";
  for (const Op& op : g.ops) {
    if (op.attrs.body < 0 || op_info(op.kind).category == OpCategory::source) continue;
    size_t b = static_cast<size_t>(op.attrs.body);
    if (op.kind == OpKind::graph_kernel || op.kind == OpKind::thread_graph) {
      n += check_complete(g.bodies[b], e.bodies[b], where + "/body " + std::to_string(b));
    }
  }
  return n;
}

// --- the pool --------------------------------------------------------------------------------

TEST(ExprPool, SameTermSameId) {
  ExprPool pool;
  ExprId x = pool.var("X"), w = pool.var("W");
  EXPECT_EQ(pool.var("X"), x);
  EXPECT_NE(x, w);
  ExprId t1 = pool.sum(4096, pool.mul(x, w));
  ExprId t2 = pool.sum(4096, pool.mul(pool.var("X"), pool.var("W")));
  EXPECT_EQ(t1, t2);
  EXPECT_NE(pool.sum(4096, pool.mul(x, w)), pool.sum(2048, pool.mul(x, w)));
  EXPECT_EQ(pool.str(t1), "sum(4096, mul(X, W))");
  EXPECT_EQ(pool.node(t1).kind, ExprKind::sum);
  EXPECT_EQ(pool.node(t1).value, 4096);
  EXPECT_EQ(pool.node(x).name, "X");
}

TEST(ExprPool, CommutativeOperandsCoincide) {
  ExprPool pool;
  ExprId a = pool.var("A"), b = pool.var("B");
  EXPECT_EQ(pool.add(a, b), pool.add(b, a));
  EXPECT_EQ(pool.mul(a, b), pool.mul(b, a));
  EXPECT_NE(pool.div(a, b), pool.div(b, a));
  EXPECT_NE(pool.concat(a, b), pool.concat(b, a));
  EXPECT_NE(pool.add(a, b), pool.mul(a, b));
  EXPECT_EQ(pool.str(pool.div(b, a)), "div(B, A)");
  EXPECT_EQ(pool.str(pool.concat(b, a)), "concat(B, A)");
}

TEST(ExprPool, SumOfOneIsTheOperand) {
  ExprPool pool;
  ExprId x = pool.var("X");
  EXPECT_EQ(pool.sum(1, x), x);
  EXPECT_EQ(pool.sum(1, pool.sum(1, pool.exp(x))), pool.exp(x));
  // Nested sums are not folded: that is an axiom for the oracle.
  EXPECT_EQ(pool.str(pool.sum(16, pool.sum(256, x))), "sum(16, sum(256, X))");
  EXPECT_THROW(pool.sum(0, x), InternalError);
}

TEST(ExprPool, ConstantsAreAtomsPerValue) {
  ExprPool pool;
  EXPECT_EQ(c(pool, "4096"), c(pool, "4096.0"));
  EXPECT_EQ(c(pool, "0.125"), c(pool, "125e-3"));
  EXPECT_NE(c(pool, "2"), c(pool, "-2"));
  EXPECT_EQ(pool.str(c(pool, "4096")), "c4096");
  EXPECT_EQ(pool.str(c(pool, "0.125")), "c0.125");
  EXPECT_EQ(pool.constant_value(c(pool, "0.125")).value(), 0.125);
  EXPECT_THROW(pool.constant_value(pool.var("X")), InternalError);
}

TEST(ExprPool, EqualTermsAreOneNode) {
  ExprPool pool;
  ExprId x = pool.var("X");
  EXPECT_EQ(pool.exp(x), pool.exp(x));
  EXPECT_EQ(pool.var("X"), x);
  EXPECT_EQ(pool.stats().nodes, 2);
  EXPECT_EQ(pool.size(), 2);
}

TEST(ExprPool, FindsEveryTermAcrossIndexGrowth) {
  // The index starts at 1024 slots and doubles at half full: 100k terms grow it 7 times. Every
  // term must still be found (same id) afterwards, and distinct terms must stay distinct.
  ExprPool pool;
  ExprId x = pool.var("X"), y = pool.var("Y");
  std::vector<ExprId> ids;
  for (int i = 0; i < 100000; ++i) ids.push_back(pool.add(pool.sum(2 + i, x), y));
  EXPECT_EQ(pool.size(), 2 + 2 * 100000);
  for (int i = 0; i < 100000; ++i) ASSERT_EQ(pool.add(pool.sum(2 + i, x), y), ids[static_cast<size_t>(i)]) << i;
  EXPECT_EQ(pool.size(), 2 + 2 * 100000);
  EXPECT_NE(pool.add(x, y), pool.mul(x, y));
  EXPECT_EQ(pool.add(x, y), pool.add(y, x));
}

TEST(ExprPool, RejectsForeignIdsAndBadKinds) {
  ExprPool pool;
  ExprId x = pool.var("X");
  EXPECT_THROW(pool.node(ExprId{5}), InternalError);
  EXPECT_THROW(pool.exp(ExprId{5}), InternalError);
  EXPECT_THROW(pool.unary(ExprKind::add, x), InternalError);
  EXPECT_THROW(pool.binary(ExprKind::exp, x, x), InternalError);
}

TEST(ExprPool, LongTextIsCut) {
  ExprPool pool;
  ExprId e = pool.var("X");
  for (int i = 0; i < 40; ++i) e = pool.mul(e, e);  // 41 nodes, 2^40 leaves when printed
  EXPECT_EQ(pool.size(), 41);
  std::string s = pool.str(e, 100);
  EXPECT_EQ(s.size(), 103u);
  EXPECT_EQ(s.substr(100), "...");
}

TEST(ExprPool, GrowsAcrossChunks) {
  ExprPool pool;
  std::vector<ExprId> ids;
  ExprId e = pool.var("X");
  for (int i = 2; i < 20000; ++i) ids.push_back(e = pool.sum(i, e));
  for (int i = 2; i < 20000; ++i) {
    const ExprNode& n = pool.node(ids[static_cast<size_t>(i - 2)]);
    ASSERT_EQ(n.kind, ExprKind::sum);
    ASSERT_EQ(n.value, i);
  }
}

// --- expressions of programs -----------------------------------------------------------------

TEST(GraphExprs, RmsnormLinearProgram) {
  ExprPool pool;
  Graph g = load_program_file(source_dir() + "/examples/rmsnorm_linear.mg");
  GraphExprs e = expressions(g, pool);
  ASSERT_EQ(e.outputs.size(), 1u);
  ExprId x = pool.var("X"), gm = pool.var("G"), w = pool.var("W");
  ExprId s = pool.sum(4096, pool.mul(x, x));
  ExprId y = pool.div(pool.mul(x, gm), pool.sqrt(pool.div(s, c(pool, "4096"))));
  ExprId o = pool.sum(4096, pool.mul(y, w));
  EXPECT_EQ(e.outputs[0], o) << pool.str(e.outputs[0]);
  // W's id is smaller than Y's, so the canonical mul prints W first.
  EXPECT_EQ(pool.str(e.outputs[0]), "sum(4096, mul(W, div(mul(X, G), sqrt(div(sum(4096, mul(X, X)), c4096)))))");
  // Named intermediate tensors have the expected expressions too.
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    if (g.tensors[t].name == "S") {
      EXPECT_EQ(e.tensors[t], s);
    }
    if (g.tensors[t].name == "Y") {
      EXPECT_EQ(e.tensors[t], y);
    }
  }
}

TEST(GraphExprs, OpRulesFromTheTable) {
  ExprPool pool;
  ExprId x = pool.var("X"), y = pool.var("Y");
  auto out = [&](const std::string& stmt) {
    return program_output("input X[8, 64]\ninput Y[8, 64]\nO = " + stmt + "\noutput O\n", pool);
  };
  EXPECT_EQ(out("sub(X, Y)"), pool.add(x, y));
  EXPECT_EQ(out("add(Y, X)"), pool.add(x, y));
  EXPECT_EQ(out("sqr(X)"), pool.mul(x, x));
  EXPECT_EQ(out("div(1, X)"), pool.div(c(pool, "1"), x));
  EXPECT_EQ(out("div(X, 0.5)"), pool.div(x, c(pool, "0.5")));
  EXPECT_EQ(out("mul(2, X)"), pool.mul(x, c(pool, "2")));
  EXPECT_EQ(out("exp(X)"), pool.exp(x));
  EXPECT_EQ(out("sqrt(X)"), pool.sqrt(x));
  EXPECT_EQ(out("silu(X)"), pool.silu(x));
  EXPECT_EQ(out("relu(X)"), pool.relu(x));
  EXPECT_EQ(out("gelu(X)"), pool.gelu(x));
  EXPECT_EQ(out("sum(X, dim=1)"), pool.sum(64, x));
  EXPECT_EQ(out("sum(X, dim=1, to=4)"), pool.sum(16, x));
  EXPECT_EQ(out("sum(X, dim=1, to=64)"), x);
  EXPECT_EQ(out("sum(X, dim=0)"), pool.sum(8, x));
  EXPECT_EQ(out("matmul(X, reshape(Y, shape=[64, 8]))"), pool.sum(64, pool.mul(x, y)));
  EXPECT_EQ(out("repeat(X, dim=0, times=3)"), x);
  EXPECT_EQ(out("concat(X, Y, exp(X), dim=1)"), pool.concat(x, pool.concat(y, pool.exp(x))));
}

TEST(GraphExprs, EveryExampleProgram) {
  for (const auto& entry : std::filesystem::directory_iterator(source_dir() + "/examples")) {
    if (entry.path().extension() != ".mg") continue;
    ExprPool pool;
    Graph g = load_program_file(entry.path().string());
    GraphExprs e = expressions(g, pool);
    check_complete(g, e, entry.path().filename().string());
    EXPECT_EQ(e.outputs.size(), g.outputs.size());
  }
}

TEST(GraphExprs, GatedMlpProgram) {
  ExprPool pool;
  ExprId o = output_expressions(load_program_file(source_dir() + "/examples/gated_mlp.mg"), pool)[0];
  ExprId x = pool.var("X");
  EXPECT_EQ(
      o, pool.mul(pool.silu(pool.sum(4096, pool.mul(x, pool.var("W1")))), pool.sum(4096, pool.mul(x, pool.var("W2")))));
}

// --- μGraphs: inlining of block and thread graphs --------------------------------------------

TEST(GraphExprs, Figure3bHasTileSums) {
  ExprPool pool;
  Graph g = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16);
  GraphExprs e = expressions(g, pool);
  check_complete(g, e, "fig3b");
  ExprId x = pool.var("X"), gm = pool.var("G"), w = pool.var("W");
  // 16 loop iterations over tiles of 256 of the hidden dim.
  ExprId acc_mm = pool.sum(16, pool.sum(256, pool.mul(pool.mul(x, gm), w)));
  ExprId acc_ssq = pool.sum(16, pool.sum(256, pool.mul(x, x)));
  ExprId o = pool.div(acc_mm, pool.sqrt(pool.div(acc_ssq, c(pool, "4096"))));
  ASSERT_EQ(e.outputs.size(), 1u);
  EXPECT_EQ(e.outputs[0], o) << pool.str(e.outputs[0]);
  EXPECT_EQ(pool.str(e.outputs[0]),
            "div(sum(16, sum(256, mul(W, mul(X, G)))), sqrt(div(sum(16, sum(256, mul(X, X))), c4096)))");
  // The block graph's tensors: iterators carry the inputs, the accumulators the loop sums; the
  // thread graph's params are the accumulators' expressions and its saver writes the output.
  ASSERT_EQ(e.bodies.size(), 1u);
  const Graph& b = g.bodies[0];
  const GraphExprs& be = e.bodies[0];
  EXPECT_EQ(be.tensors[b.ops[0].outputs[0].index()], x);
  EXPECT_EQ(be.tensors[b.ops[2].outputs[0].index()], w);
  ASSERT_EQ(be.outputs.size(), 1u);
  EXPECT_EQ(be.outputs[0], o);
  ASSERT_EQ(be.bodies.size(), 1u);
  EXPECT_EQ(be.bodies[0].tensors[0], acc_mm);
  EXPECT_EQ(be.bodies[0].tensors[1], acc_ssq);
  EXPECT_EQ(be.bodies[0].outputs[0], o);
  // Shared subterms with the program coincide in one pool; the outputs differ only by the
  // sum(16, sum(256, ·)) vs sum(4096, ·) structure the oracle's axioms relate.
  ExprId prog = output_expressions(test::rmsnorm_reference(16, 4096, 4096), pool)[0];
  EXPECT_NE(prog, o);
  EXPECT_EQ(pool.str(prog), "sum(4096, mul(W, div(mul(X, G), sqrt(div(sum(4096, mul(X, X)), c4096)))))");
}

TEST(GraphExprs, Figure3bWithoutLoopOrGrid) {
  // One iteration: the accumulator adds nothing (sum(1, ·) = ·), the matmul reduces all 4096.
  ExprPool pool;
  ExprId o = output_expressions(test::rmsnorm_fig3b(16, 4096, 4096, 1, 1), pool)[0];
  EXPECT_EQ(pool.str(o), "div(sum(4096, mul(W, mul(X, G))), sqrt(div(sum(4096, mul(X, X)), c4096)))");
}

TEST(GraphExprs, GatedMlpFigure10b) {
  ExprPool pool;
  Graph g = test::gated_mlp_fused(8, 4096, 4096, 128, 16);
  GraphExprs e = expressions(g, pool);
  check_complete(g, e, "gated mlp");
  ExprId x = pool.var("X");
  auto acc = [&](const char* w) { return pool.sum(16, pool.sum(256, pool.mul(x, pool.var(w)))); };
  EXPECT_EQ(e.outputs[0], pool.mul(pool.silu(acc("W1")), acc("W2"))) << pool.str(e.outputs[0]);
}

TEST(GraphExprs, EveryExampleUGraphAtEveryLevel) {
  int files = 0;
  for (const auto& ex : examples::all_examples()) {
    ExprPool pool;
    std::string path = source_dir() + "/examples/ugraphs/" + ex.json_file;
    Graph g = load_graph_file(path);
    GraphExprs e = expressions(g, pool);
    int64_t n = check_complete(g, e, ex.json_file);
    EXPECT_GT(n, static_cast<int64_t>(g.tensors.size())) << ex.json_file << ": bodies were not walked";
    ASSERT_EQ(e.outputs.size(), g.outputs.size());
    Graph program = load_program_file(source_dir() + "/examples/" + ex.program_file);
    std::vector<ExprId> want = output_expressions(program, pool);
    ASSERT_EQ(want.size(), e.outputs.size());
    SCOPED_TRACE(std::string(ex.json_file) + ": " + pool.str(e.outputs[0]) + " vs " + pool.str(want[0]));
    // A concatenating accumulator or a loop-free μGraph leaves the program's own expression.
    if (std::string(ex.json_file) == "exp_scale_concat.json") {
      EXPECT_EQ(e.outputs[0], want[0]);
    }
    if (std::string(ex.json_file) == "rmsnorm_two_kernels.json") {
      EXPECT_EQ(pool.str(e.outputs[0]), "div(mul(X, G), sqrt(div(sum(32, sum(2, sum(64, mul(X, X)))), c4096)))");
    }
    ++files;
  }
  EXPECT_EQ(files, 11);
}

// --- concat ----------------------------------------------------------------------------------


TEST(GraphExprs, ConcatIsOpaque) {
  ExprPool pool;
  ExprId x = pool.var("X"), y = pool.var("Y");
  ExprId cat = program_output("input X[8, 64]\ninput Y[8, 64]\nO = concat(X, Y, dim=0)\noutput O\n", pool);
  EXPECT_EQ(cat, pool.concat(x, y));
  EXPECT_NE(cat, pool.add(x, y));
  // Consumed by anything but a matching matmul, it stays inside the term.
  ExprId m = program_output(
      "input X[8, 64]\ninput Y[8, 64]\nO = matmul(concat(X, Y, dim=0), reshape(X, shape=[64, 8]))\noutput O\n", pool);
  EXPECT_EQ(pool.str(m), "sum(64, mul(X, concat(X, Y)))");
}

TEST(GraphExprs, MatmulOfAlignedConcatsIsThePapersLoraExpression) {
  ExprPool pool;
  ExprId fused = output_expressions(test::lora_concat(), pool)[0];
  ExprId program = output_expressions(load_program_file(source_dir() + "/examples/lora.mg"), pool)[0];
  EXPECT_EQ(fused, program) << pool.str(fused) << " vs " << pool.str(program);
  EXPECT_EQ(pool.str(program), "add(sum(256, mul(X, W)), sum(16, mul(B, sum(256, mul(X, A)))))");
}

TEST(GraphExprs, MatmulOfMisalignedConcatsStaysOpaque) {
  // Split at 256 + 16 on the left but 16 + 256 on the right: not the §8.1 form.
  ExprPool pool;
  Graph k;
  TensorId x = k.add_input("X", {16, 256});
  TensorId w = k.add_input("W", {256, 4096});
  TensorId a = k.add_input("A", {16, 16});
  TensorId b = k.add_input("B", {16, 4096});
  TensorId left = k.add(OpKind::concat, {x, a}, attrs::sum(1));
  TensorId right = k.add(OpKind::concat, {b, w}, attrs::sum(0));
  k.mark_output(k.add(OpKind::matmul, {left, right}), "O");
  ExprId o = output_expressions(k, pool)[0];
  EXPECT_EQ(pool.str(o), "sum(272, mul(concat(X, A), concat(B, W)))");
}

TEST(GraphExprs, ThreeWayConcatMatmul) {
  ExprPool pool;
  Graph k;
  TensorId x = k.add_input("X", {4, 8});
  TensorId y = k.add_input("Y", {4, 2});
  TensorId z = k.add_input("Z", {4, 8});
  TensorId p = k.add_input("P", {8, 5});
  TensorId q = k.add_input("Q", {2, 5});
  TensorId r = k.add_input("R", {8, 5});
  TensorId left = k.add(OpKind::concat, {x, y, z}, attrs::sum(1));
  TensorId right = k.add(OpKind::concat, {p, q, r}, attrs::sum(0));
  k.mark_output(k.add(OpKind::matmul, {left, right}), "O");
  ExprId o = output_expressions(k, pool)[0];
  auto term = [&](int64_t n, const char* a, const char* b) { return pool.sum(n, pool.mul(pool.var(a), pool.var(b))); };
  EXPECT_EQ(o, pool.add(pool.add(term(8, "X", "P"), term(2, "Y", "Q")), term(8, "Z", "R"))) << pool.str(o);
}

// --- incremental use -------------------------------------------------------------------------

TEST(GraphExprs, OneAppendedOpFromItsOperands) {
  ExprPool pool;
  Graph g = test::rmsnorm_reference(16, 4096, 4096);
  GraphExprs before = expressions(g, pool);
  TensorId o = g.outputs[0];
  TensorId s = g.add(OpKind::sum, {g.add(OpKind::exp, {o})}, attrs::sum(1, 16));
  // The two appended ops, one at a time, from the expressions already known.
  std::vector<ExprId> known = before.tensors;
  for (size_t i = g.ops.size() - 2; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    std::vector<ExprId> operands;
    for (TensorId t : op.inputs) operands.push_back(known[t.index()]);
    std::vector<ExprId> outs = op_expressions(g, op, operands, pool);
    ASSERT_EQ(outs.size(), 1u);
    known.resize(g.tensors.size());
    known[op.outputs[0].index()] = outs[0];
  }
  EXPECT_EQ(known[s.index()], pool.sum(256, pool.exp(before.outputs[0])));
  EXPECT_EQ(known, expressions(g, pool).tensors);
}

TEST(GraphExprs, OpExpressionsOfABodyOpAndOfIterators) {
  ExprPool pool;
  Graph g = test::gated_mlp_fused(8, 256, 256, 8, 4);
  ExprId x = pool.var("X"), w1 = pool.var("W1"), w2 = pool.var("W2");
  const Op& kop = g.ops.back();
  ASSERT_EQ(kop.kind, OpKind::graph_kernel);
  std::vector<ExprId> outs = op_expressions(g, kop, {x, w1, w2}, pool);
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0], expressions(g, pool).outputs[0]);
  const Graph& body = g.bodies[0];
  EXPECT_EQ(op_expressions(body, body.ops[1], {}, pool, {x, w1, w2}), std::vector<ExprId>{w1});
  EXPECT_THROW(op_expressions(body, body.ops[1], {}, pool), InternalError);  // no params given
  EXPECT_THROW(op_expressions(g, kop, {x}, pool), InternalError);            // operand count
}

// --- thread safety ---------------------------------------------------------------------------

TEST(ExprPool, ConcurrentBuildersAgree) {
  ExprPool pool;
  constexpr int kThreads = 4;
  constexpr int kTerms = 5000;
  // Thread t builds the same terms as every other thread, in its own order.
  auto build = [&pool](int i) {
    ExprId a = pool.var("V" + std::to_string(i % 7));
    ExprId b = pool.var("V" + std::to_string(i % 11));
    ExprId m = i % 2 ? pool.mul(a, b) : pool.mul(b, a);
    return pool.sum(2 + i % 13, pool.add(pool.exp(m), pool.constant(Scalar{i % 5, 0})));
  };
  std::vector<std::vector<ExprId>> ids(kThreads, std::vector<ExprId>(kTerms));
  std::vector<std::string> outs(kThreads);
  std::vector<std::thread> threads;
  std::latch start(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();  // all threads insert at the same time
      for (int j = 0; j < kTerms; ++j) {
        int i = t % 2 ? kTerms - 1 - j : (j * 7 + t) % kTerms;  // a permutation per thread
        ids[static_cast<size_t>(t)][static_cast<size_t>(i)] = build(i);
      }
      // Readers run while the others still insert.
      outs[static_cast<size_t>(t)] = pool.str(ids[static_cast<size_t>(t)][17]);
      Graph g = test::rmsnorm_fig3b(16, 4096, 4096, 128, 16);
      ExprId o = expressions(g, pool).outputs[0];
      outs[static_cast<size_t>(t)] += " " + pool.str(o);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 1; t < kThreads; ++t) {
    EXPECT_EQ(ids[static_cast<size_t>(t)], ids[0]) << "thread " << t;
    EXPECT_EQ(outs[static_cast<size_t>(t)], outs[0]) << "thread " << t;
  }
  const int64_t nodes = pool.stats().nodes;
  EXPECT_EQ(nodes, pool.size());
  // Rebuilding on one thread finds every term.
  for (int i = 0; i < kTerms; ++i) EXPECT_EQ(build(i), ids[0][static_cast<size_t>(i)]);
  EXPECT_EQ(pool.size(), nodes);
}

}  // namespace
}  // namespace mugraph
