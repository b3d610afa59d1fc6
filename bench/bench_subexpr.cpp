// Times the subexpression oracle on the queries a search of RMSNorm + matmul would make: every
// tensor, at every level, of the Figure 3b μGraph at several tilings against the program's output
// expression. Cold: fresh pools (normal forms computed, nothing cached); warm: the same queries
// again (answered from the cache). A few prefixes that must be pruned are mixed in.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "bench_util.h"
#include "mugraph/frontend.h"
#include "mugraph/subexpr.h"
#include "test_graphs.h"

namespace {

using namespace mugraph;

void collect(const GraphExprs& e, std::vector<ExprId>& out) {
  for (ExprId t : e.tensors)
    if (t.valid()) out.push_back(t);
  for (const GraphExprs& b : e.bodies) collect(b, out);
}

const char* kProgram =
    "input X[16, 4096]\ninput G[4096]\ninput W[4096, 4096]\nS = sum(sqr(X), dim=1)\n"
    "Y = div(mul(X, G), sqrt(div(S, 4096)))\nO = matmul(Y, W)\noutput O\n";

}  // namespace

int main() {
  std::printf("bench_subexpr: subexpression oracle, Figure 3b tensors against the RMSNorm program\n");
  std::printf("%s\n\n", benchutil::machine_line().c_str());
  const int kRuns = 5;
  std::vector<double> cold_us, warm_us;
  size_t queries = 0;
  SubexprStats last;
  for (int run = 0; run < kRuns; ++run) {
    ExprPool pool;
    NormalFormPool nfs;
    SubexprOracle oracle(pool, nfs);
    ExprId target = output_expressions(parse_program(kProgram), pool)[0];
    std::vector<ExprId> es;
    for (auto [grid, loop] : {std::pair{128, 16}, {64, 64}, {256, 4}, {32, 128}, {16, 256}})
      collect(expressions(test::rmsnorm_fig3b(16, 4096, 4096, grid, loop), pool), es);
    // Prefixes a search would generate and must prune (none is a subexpression of the program).
    ExprId x = pool.var("X"), g = pool.var("G"), w = pool.var("W");
    size_t positives = es.size();
    for (ExprId neg : {pool.add(x, g), pool.exp(x), pool.mul(pool.mul(x, x), w), pool.sum(3, pool.mul(x, w)),
                       pool.div(x, g), pool.sqrt(pool.sum(4096, pool.mul(x, w))), pool.add(x, pool.mul(x, g)),
                       pool.mul(g, g)})
      es.push_back(neg);
    queries = es.size();
    for (int pass = 0; pass < 2; ++pass) {
      auto start = std::chrono::steady_clock::now();
      size_t pruned = 0;
      for (ExprId e : es) pruned += oracle.is_subexpression(e, target) ? 0 : 1;
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
      (pass == 0 ? cold_us : warm_us).push_back(us);
      if (pruned != es.size() - positives) std::printf("unexpected: %zu of %zu queries pruned\n", pruned, es.size());
    }
    last = oracle.stats();
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  double cold = median(cold_us), warm = median(warm_us);
  std::printf("%zu queries per pass (5 tilings), median of %d runs\n", queries, kRuns);
  std::printf("cold (normal forms computed): %8.1f us total, %6.2f us per query\n", cold, cold / queries);
  std::printf("warm (cached):                %8.1f us total, %6.2f us per query\n", warm, warm / queries);
  std::printf("last run: %lld queries, %lld cache hits, %lld yes, %lld no, %lld undecided\n",
              static_cast<long long>(last.queries), static_cast<long long>(last.cache_hits),
              static_cast<long long>(last.yes), static_cast<long long>(last.no),
              static_cast<long long>(last.undecided));
  return 0;
}
