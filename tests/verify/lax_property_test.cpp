// Property tests of verify() on random Lax programs. A generator builds random expression DAGs
// over [4, 4] and [4, 1] inputs with add/sub/mul/div (tensor or constant operands), matmul,
// sum, sqr, and exp/silu at most once on any path; random algebraic rewrites (commuting,
// distributing, re-associating, splitting sums into grouped sums, x/y → x·(1/y),
// exp(a±b) ↔ exp(a)·exp(b) or exp(a)/exp(b), the silu expansion, sqr → mul, a − b → a + b·(−1))
// give equivalent programs. Properties: every rewrite verifies with a guarantee; changing one
// constant the output depends on is rejected, by a large change and by a relative 1e-4.
// The float filter is off: it is not what is tested, and random divisions can be ill-conditioned.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "line_degrees.h"
#include "mugraph/frontend.h"
#include "mugraph/interp.h"
#include "mugraph/validate.h"
#include "mugraph/verify.h"
#include "verify_test_util.h"

namespace mugraph {
namespace {

/// A node of a random expression DAG. Every tensor is [4, cols].
struct Node;
using P = std::shared_ptr<const Node>;

struct Node {
  enum Kind { input, binary, scalar_binary, matmul, sum, unary } kind;
  std::string op;  // binary / scalar_binary: add sub mul div; unary: exp silu sqr; input: its name
  std::vector<P> args;
  Scalar constant;     // scalar_binary
  int scalar_pos = 1;  // scalar_binary: 0 left, 1 right
  int64_t to = 1;      // sum over dim 1 to this extent
  int64_t cols = 4;
  bool tainted = false;  // an exp or silu lies on some path into this node
};

constexpr int64_t kRows = 4;

P make(Node n) {
  for (const P& a : n.args) n.tainted = n.tainted || a->tainted;
  if (n.kind == Node::unary && n.op != "sqr") n.tainted = true;
  if (n.kind == Node::binary) n.cols = std::max(n.args[0]->cols, n.args[1]->cols);
  if (n.kind == Node::scalar_binary || n.kind == Node::unary) n.cols = n.args[0]->cols;
  if (n.kind == Node::matmul) n.cols = n.args[1]->cols;
  if (n.kind == Node::sum) n.cols = n.to;
  return std::make_shared<const Node>(std::move(n));
}
P bin(const std::string& op, P a, P b) { return make({Node::binary, op, {std::move(a), std::move(b)}}); }
P sbin(const std::string& op, P a, Scalar c, int pos) {
  Node n{Node::scalar_binary, op, {std::move(a)}};
  n.constant = c;
  n.scalar_pos = pos;
  return make(std::move(n));
}
P un(const std::string& op, P a) { return make({Node::unary, op, {std::move(a)}}); }
P mm(P a, P b) { return make({Node::matmul, "", {std::move(a), std::move(b)}}); }
P sum(P a, int64_t to) {
  Node n{Node::sum, "", {std::move(a)}};
  n.to = to;
  return make(std::move(n));
}

/// The program inputs: three [4, 4] matrices, one [4, 1] column and one [4] row (T, which
/// broadcasts by rank; only Generator's `vectors` programs use it).
struct Inputs {
  P x[3], s, t;
  Inputs() {
    for (int i = 0; i < 3; ++i) {
      Node n{Node::input, "X" + std::to_string(i)};
      x[i] = make(std::move(n));
    }
    Node n{Node::input, "S"};
    n.cols = 1;
    s = make(std::move(n));
    t = make(Node{Node::input, "T"});
  }
};

/// Program text for a DAG: one statement per non-input node, shared nodes computed once.
std::string program_text(const P& root, const Inputs& in) {
  std::string text = "input X0[4, 4] f32\ninput X1[4, 4] f32\ninput X2[4, 4] f32\ninput S[4, 1] f32\n";
  std::map<const Node*, std::string> names;
  for (int i = 0; i < 3; ++i) names[in.x[i].get()] = in.x[i]->op;
  names[in.s.get()] = "S";
  names[in.t.get()] = "T";
  std::function<std::string(const P&)> emit = [&](const P& n) -> std::string {
    auto it = names.find(n.get());
    if (it != names.end()) return it->second;
    std::vector<std::string> a;
    for (const P& arg : n->args) a.push_back(emit(arg));
    std::string e;
    switch (n->kind) {
      case Node::input:
        e = n->op;
        break;
      case Node::binary:
        e = n->op + "(" + a[0] + ", " + a[1] + ")";
        break;
      case Node::scalar_binary:
        e = n->scalar_pos == 0 ? n->op + "(" + n->constant.str() + ", " + a[0] + ")"
                               : n->op + "(" + a[0] + ", " + n->constant.str() + ")";
        break;
      case Node::matmul:
        e = "matmul(" + a[0] + ", " + a[1] + ")";
        break;
      case Node::sum:
        e = "sum(" + a[0] + ", dim=1" + (n->to == 1 ? std::string() : ", to=" + std::to_string(n->to)) + ")";
        break;
      case Node::unary:
        e = n->op + "(" + a[0] + ")";
        break;
    }
    std::string name = "t" + std::to_string(names.size());
    text += name + " = " + e + "\n";
    names[n.get()] = name;
    return name;
  };
  std::string out = emit(root);
  if (text.find("(T") != std::string::npos || text.find(" T)") != std::string::npos) text = "input T[4] f32\n" + text;
  return text + "O = add(" + out + ", 0)\noutput O\n";
}

/// Random Lax DAGs.
class Generator {
 public:
  /// `functions`: exp and silu may appear (else sqr stands in for them). `vectors`: the second
  /// operand of a binary op on [4, 4] may be the row T [4].
  explicit Generator(uint64_t seed, bool functions = true, bool vectors = false)
      : rng_(seed), functions_(functions), vectors_(vectors) {}

  P program(const Inputs& in) {
    pool_.clear();
    return gen(in, 4, rand(3) == 0 ? 1 : 4);
  }

  int rand(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

 private:
  static Scalar constant(int i) {
    static const Scalar values[] = {{5, -1}, {2, 0}, {3, 0}, {125, -3}, {15, -1}, {-1, 0}, {-25, -2}, {7, 0}};
    return values[i];
  }

  P leaf(const Inputs& in, int64_t cols) {
    std::vector<P> same;
    for (const P& p : pool_)
      if (p->cols == cols) same.push_back(p);
    if (!same.empty() && rand(4) == 0) return same[static_cast<size_t>(rand(static_cast<int>(same.size())))];
    return cols == 1 ? in.s : in.x[rand(3)];
  }

  /// A random expression of shape [4, cols] (cols 4 or 1).
  P gen(const Inputs& in, int depth, int64_t cols) {
    if (depth == 0 || rand(5) == 0) return leaf(in, cols);
    P n;
    switch (rand(9)) {
      case 0:
      case 1:
      case 2: {  // tensor binary, one operand may broadcast a column
        static const char* ops[] = {"add", "sub", "mul", "div"};
        std::string op = ops[rand(4)];
        P a = gen(in, depth - 1, cols);
        P b = vectors_ && cols == 4 && rand(4) == 0 ? in.t : gen(in, depth - 1, cols == 4 && rand(3) == 0 ? 1 : cols);
        if (a == b && (op == "sub" || op == "div")) op = "add";
        n = rand(2) ? bin(op, a, b) : bin(op, b, a);
        break;
      }
      case 3: {
        static const char* ops[] = {"add", "sub", "mul", "div"};
        n = sbin(ops[rand(4)], gen(in, depth - 1, cols), constant(rand(8)), rand(2));
        break;
      }
      case 4:
        n = mm(gen(in, depth - 1, 4), gen(in, depth - 1, cols));
        break;
      case 5:
        if (cols != 1) return gen(in, depth, cols);
        n = sum(gen(in, depth - 1, 4), 1);
        break;
      case 6:
      case 7: {
        P a = gen(in, depth - 1, cols);
        n = un(a->tainted || !functions_ ? "sqr" : (rand(3) == 0 ? "silu" : "exp"), a);
        break;
      }
      default:
        n = un("sqr", gen(in, depth - 1, cols));
        break;
    }
    pool_.push_back(n);
    return n;
  }

  std::mt19937_64 rng_;
  bool functions_;
  bool vectors_;
  std::vector<P> pool_;
};

/// Every node of a DAG once, children first.
void nodes(const P& root, std::vector<P>& out, std::map<const Node*, bool>& seen) {
  if (seen[root.get()]) return;
  seen[root.get()] = true;
  for (const P& a : root->args) nodes(a, out, seen);
  out.push_back(root);
}

/// The DAG with node `target` replaced by `repl` everywhere (sharing kept).
P replace(const P& root, const Node* target, const P& repl, std::map<const Node*, P>& memo) {
  if (root.get() == target) return repl;
  auto it = memo.find(root.get());
  if (it != memo.end()) return it->second;
  bool changed = false;
  std::vector<P> args;
  for (const P& a : root->args) {
    args.push_back(replace(a, target, repl, memo));
    changed = changed || args.back() != a;
  }
  P out = root;
  if (changed) {
    Node n = *root;
    n.args = std::move(args);
    out = make(std::move(n));
  }
  memo[root.get()] = out;
  return out;
}

bool is(const P& n, Node::Kind k, const char* op = nullptr) { return n->kind == k && (!op || n->op == op); }

/// An equivalent rewrite of node n, or nullptr if the drawn rule does not apply.
P rewrite_node(const P& n, int rule) {
  const auto& a = n->args;
  switch (rule) {
    case 0:  // commute
      if (is(n, Node::binary, "add") || is(n, Node::binary, "mul")) return bin(n->op, a[1], a[0]);
      if (is(n, Node::scalar_binary, "add") || is(n, Node::scalar_binary, "mul"))
        return sbin(n->op, a[0], n->constant, 1 - n->scalar_pos);
      return nullptr;
    case 1:  // distribute mul/div over add/sub
      if (is(n, Node::binary, "mul")) {
        for (int side = 0; side < 2; ++side) {
          const P& s = a[static_cast<size_t>(side)];
          const P& o = a[static_cast<size_t>(1 - side)];
          if (is(s, Node::binary, "add") || is(s, Node::binary, "sub"))
            return bin(s->op, bin("mul", o, s->args[0]), bin("mul", o, s->args[1]));
        }
      }
      if (is(n, Node::binary, "div") && (is(a[0], Node::binary, "add") || is(a[0], Node::binary, "sub")))
        return bin(a[0]->op, bin("div", a[0]->args[0], a[1]), bin("div", a[0]->args[1], a[1]));
      if ((is(n, Node::scalar_binary, "mul") || (is(n, Node::scalar_binary, "div") && n->scalar_pos == 1)) &&
          (is(a[0], Node::binary, "add") || is(a[0], Node::binary, "sub")))
        return bin(a[0]->op, sbin(n->op, a[0]->args[0], n->constant, n->scalar_pos),
                   sbin(n->op, a[0]->args[1], n->constant, n->scalar_pos));
      if (is(n, Node::matmul) && is(a[1], Node::binary, "add") && a[1]->args[0]->cols == a[1]->cols &&
          a[1]->args[1]->cols == a[1]->cols)
        return bin("add", mm(a[0], a[1]->args[0]), mm(a[0], a[1]->args[1]));
      if (is(n, Node::matmul) && is(a[0], Node::binary, "add") && a[0]->args[0]->cols == 4 && a[0]->args[1]->cols == 4)
        return bin("add", mm(a[0]->args[0], a[1]), mm(a[0]->args[1], a[1]));
      return nullptr;
    case 2:  // re-associate
      if ((is(n, Node::binary, "add") || is(n, Node::binary, "mul")) && is(a[0], Node::binary, n->op.c_str()))
        return bin(n->op, a[0]->args[0], bin(n->op, a[0]->args[1], a[1]));
      if (is(n, Node::matmul) && is(a[0], Node::matmul)) return mm(a[0]->args[0], mm(a[0]->args[1], a[1]));
      if (is(n, Node::matmul) && is(a[1], Node::matmul)) return mm(mm(a[0], a[1]->args[0]), a[1]->args[1]);
      return nullptr;
    case 3:  // grouped sums
      if (is(n, Node::sum) && n->to == 1 && a[0]->cols == 4) return sum(sum(a[0], 2), 1);
      return nullptr;
    case 4:  // x / y = x · (1 / y)
      if (is(n, Node::binary, "div")) return bin("mul", a[0], sbin("div", a[1], Scalar{1, 0}, 0));
      return nullptr;
    case 5:  // exp(a ± b) ↔ exp(a) ·/÷ exp(b)
      if (is(n, Node::unary, "exp") && (is(a[0], Node::binary, "add") || is(a[0], Node::binary, "sub")))
        return bin(a[0]->op == "add" ? "mul" : "div", un("exp", a[0]->args[0]), un("exp", a[0]->args[1]));
      if (is(n, Node::binary, "mul") && is(a[0], Node::unary, "exp") && is(a[1], Node::unary, "exp"))
        return un("exp", bin("add", a[0]->args[0], a[1]->args[0]));
      if (is(n, Node::binary, "div") && is(a[0], Node::unary, "exp") && is(a[1], Node::unary, "exp"))
        return un("exp", bin("sub", a[0]->args[0], a[1]->args[0]));
      return nullptr;
    case 6:  // silu(x) = x / (1 + exp(−x))
      if (is(n, Node::unary, "silu"))
        return bin("div", a[0], sbin("add", un("exp", sbin("mul", a[0], Scalar{-1, 0}, 1)), Scalar{1, 0}, 0));
      return nullptr;
    case 7:  // sqr(x) = x · x
      if (is(n, Node::unary, "sqr")) return bin("mul", a[0], a[0]);
      return nullptr;
    case 8:  // a − b = a + b · (−1)
      if (is(n, Node::binary, "sub")) return bin("add", a[0], sbin("mul", a[1], Scalar{-1, 0}, 0));
      return nullptr;
    default:
      return nullptr;
  }
}
constexpr int kNumRules = 9;
const char* const kRuleNames[kNumRules] = {"commute",  "distribute", "re-associate", "grouped sum", "x/y=x*(1/y)",
                                           "exp(a+b)", "silu",       "sqr",          "sub"};

/// Applies one random applicable rewrite somewhere in the DAG; returns the rule used (-1: none).
int rewrite_once(P& root, std::mt19937_64& rng) {
  std::vector<P> all;
  std::map<const Node*, bool> seen;
  nodes(root, all, seen);
  // A rule first (uniform over the applicable ones, so that commuting, which applies almost
  // everywhere, does not crowd out the others), then a node it applies to.
  std::vector<std::vector<P>> sites(kNumRules);
  std::vector<int> rules;
  for (int rule = 0; rule < kNumRules; ++rule) {
    for (const P& n : all)
      if (rewrite_node(n, rule)) sites[static_cast<size_t>(rule)].push_back(n);
    if (!sites[static_cast<size_t>(rule)].empty()) rules.push_back(rule);
  }
  if (rules.empty()) return -1;
  int rule = rules[std::uniform_int_distribution<size_t>(0, rules.size() - 1)(rng)];
  const std::vector<P>& at = sites[static_cast<size_t>(rule)];
  P n = at[std::uniform_int_distribution<size_t>(0, at.size() - 1)(rng)];
  std::map<const Node*, P> memo;
  root = replace(root, n.get(), rewrite_node(n, rule), memo);
  return rule;
}

/// The DAG with the k-th constant (in node order) changed by f.
P change_constant(const P& root, size_t k, const std::function<Scalar(Scalar)>& f) {
  std::vector<P> all;
  std::map<const Node*, bool> seen;
  nodes(root, all, seen);
  size_t i = 0;
  for (const P& n : all) {
    if (n->kind != Node::scalar_binary || i++ != k) continue;
    std::map<const Node*, P> memo;
    return replace(root, n.get(), sbin(n->op, n->args[0], f(n->constant), n->scalar_pos), memo);
  }
  return nullptr;
}

size_t count_constants(const P& root) {
  std::vector<P> all;
  std::map<const Node*, bool> seen;
  nodes(root, all, seen);
  size_t c = 0;
  for (const P& n : all) c += n->kind == Node::scalar_binary;
  return c;
}

/// Whether the float output is finite everywhere (a program with an identically-zero divisor, or
/// an overflowing exp, is not a useful sample).
bool finite_output(const Graph& g) {
  InterpOptions o;
  o.threads = 1;
  for (const HostTensor& t : run_float(g, random_inputs(g, 3), o))
    for (float v : t.data)
      if (!std::isfinite(v)) return false;
  return true;
}

std::string describe(const VerifyResult& r) {
  return "tests " + std::to_string(r.tests_run) + ", bound " + std::to_string(r.bound) + " (per test " +
         std::to_string(r.per_test_bound) + "), guarantee " + std::to_string(r.guarantee) + " " + r.guarantee_note;
}

VerifyOptions options(uint64_t seed) {
  VerifyOptions o;
  o.seed = seed;
  o.threads = 1;
  o.float_check = false;
  return o;
}

TEST(LaxProperty, RandomRewritesVerify) {
  auto start = std::chrono::steady_clock::now();
  const int cases = vtest::slow_build() ? 200 : 400;
  Generator gen(20240531);
  std::mt19937_64 rng(77);
  Inputs in;
  int programs = 0, verified = 0, skipped = 0, rules_used[kNumRules] = {};
  int guaranteed = 0, vacuous = 0, not_reached = 0;
  int64_t tests = 0;
  while (programs < cases) {
    P root = gen.program(in);
    std::string ref_text = program_text(root, in);
    Graph ref = parse_program(ref_text, "random");
    ASSERT_FALSE(validate(ref)) << validate(ref)->str() << "\n" << ref_text;
    if (!finite_output(ref)) {
      ++skipped;
      continue;
    }
    ++programs;
    LaxReport lax = check_lax(ref);
    ASSERT_TRUE(lax.lax) << lax.violation << "\n" << ref_text;
    // The program against itself, then a chain of three rewritten versions (1-4 steps each).
    P cur = root;
    for (int round = 0; round < 4; ++round) {
      std::string steps;
      if (round > 0) {
        int k = 1 + static_cast<int>(rng() % 4);
        for (int s = 0; s < k; ++s) {
          int rule = rewrite_once(cur, rng);
          if (rule < 0) break;
          ++rules_used[rule];
          steps += std::string(steps.empty() ? "" : ", ") + kRuleNames[rule];
        }
      }
      std::string text = program_text(cur, in);
      Graph cand = parse_program(text, "rewritten");
      ASSERT_FALSE(validate(cand)) << validate(cand)->str() << "\n" << text;
      VerifyResult r = verify(ref, cand, options(static_cast<uint64_t>(programs * 10 + round)));
      tests += r.tests_run;
      ASSERT_EQ(r.verdict, Verdict::equivalent) << r.reason << "\nrewrites: " << steps << "\nreference:\n"
                                                << ref_text << "candidate:\n"
                                                << text;
      ++verified;
      // The guarantee: Theorem 2's per-test bound grows with the number K of exponential terms
      // (q^(-1/K²)), so with exps it may be vacuous or not reach delta within max_tests. Without
      // exps it must always be reached; and it is claimed exactly when the bound reaches delta.
      bool exps = r.reference_lax.max_exps_on_path > 0 || r.candidate_lax.max_exps_on_path > 0;
      if (!exps) {
        EXPECT_TRUE(r.guarantee) << describe(r) << "\n" << ref_text << text;
      }
      EXPECT_EQ(r.guarantee, r.bound <= 1e-9) << describe(r) << "\n" << ref_text << text;
      if (r.guarantee) {
        ++guaranteed;
      } else if (r.per_test_bound >= 1) {
        ++vacuous;
      } else {
        ++not_reached;
      }
    }
  }
  std::printf(
      "[ property ] %d random programs (%d skipped for non-finite float output), %d verifications, "
      "%lld finite-field tests, %.2f s\n",
      programs, skipped, verified, static_cast<long long>(tests), vtest::seconds_since(start));
  std::printf(
      "[          ] guarantee reached in %d, per-test bound vacuous in %d, bound above 1e-9 after "
      "max_tests in %d\n",
      guaranteed, vacuous, not_reached);
  std::printf("[          ] rewrites applied:");
  for (int i = 0; i < kNumRules; ++i) std::printf(" %s %d;", kRuleNames[i], rules_used[i]);
  std::printf("\n");
  for (int i = 0; i < kNumRules; ++i) EXPECT_GT(rules_used[i], 0) << kRuleNames[i] << " never applied";
}

TEST(LaxProperty, ChangedConstantIsRejected) {
  auto start = std::chrono::steady_clock::now();
  const int cases = vtest::slow_build() ? 200 : 250;
  Generator gen(99);
  Inputs in;
  int programs = 0, rejected_large = 0, rejected_small = 0, independent = 0;
  while (programs < cases) {
    P root = gen.program(in);
    size_t nc = count_constants(root);
    if (nc == 0) continue;
    Graph ref = parse_program(program_text(root, in), "random");
    if (!finite_output(ref)) continue;
    ++programs;
    size_t k = static_cast<size_t>(gen.rand(static_cast<int>(nc)));
    // c → 3c: large; c → c · 1.0001: a near miss.
    P large = change_constant(root, k, [](Scalar c) { return Scalar{c.mantissa * 3, c.exp10}; });
    P small = change_constant(root, k, [](Scalar c) { return Scalar{c.mantissa * 10001, c.exp10 - 4}.normalized(); });
    std::string large_text = program_text(large, in), small_text = program_text(small, in);
    Graph g_large = parse_program(large_text, "large"), g_small = parse_program(small_text, "small");
    // Only constants the output depends on: the float outputs must differ for the large change.
    double err = float_max_relative_error(ref, g_large, 5, 1);
    if (!(err > 1e-3)) {
      ++independent;
      continue;
    }
    VerifyResult r1 = verify(ref, g_large, options(static_cast<uint64_t>(programs)));
    VerifyResult r2 = verify(ref, g_small, options(static_cast<uint64_t>(programs)));
    EXPECT_EQ(r1.verdict, Verdict::not_equivalent) << program_text(root, in) << large_text;
    EXPECT_EQ(r2.verdict, Verdict::not_equivalent) << program_text(root, in) << small_text;
    rejected_large += r1.verdict == Verdict::not_equivalent;
    rejected_small += r2.verdict == Verdict::not_equivalent;
  }
  std::printf(
      "[ property ] %d programs with constants: %d with a constant the output depends on; rejected: "
      "%d (c -> 3c), %d (c -> 1.0001 c); %.2f s\n",
      programs, programs - independent, rejected_large, rejected_small, vtest::seconds_since(start));
  EXPECT_GT(programs - independent, cases / 4);
}

TEST(LaxProperty, FormsBoundTheDegreesAlongALine) {
  // The degrees that Theorem 2's ε is computed from must bound the true ones: random programs
  // without exp or silu (broadcast columns and rows, matmuls and sums over shared or differing
  // denominators among them), each checked along a line through its inputs (line_degrees.h).
  const int programs = vtest::slow_build() ? 60 : 300;
  int checked = 0;
  for (int i = 0; i < programs; ++i) {
    Generator gen(9000 + static_cast<uint64_t>(i), false, true);
    Inputs in;
    const std::string text = program_text(gen.program(in), in);
    Graph g = parse_program(text, "line.mg");
    std::vector<lax::Form> forms;
    lax::check_lax_forms(g, forms);
    if (forms[0].num.deg + forms[0].den.deg > 160) continue;  // a system too large to be quick
    ++checked;
    EXPECT_TRUE(vtest::degrees_hold_along_a_line(g, forms[0], 77 + static_cast<uint64_t>(i))) << text;
  }
  EXPECT_GE(checked, programs * 3 / 4);
}

}  // namespace
}  // namespace mugraph
