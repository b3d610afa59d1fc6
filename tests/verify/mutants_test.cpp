// Mutation testing of verify(): for each hand-written μGraph of examples/ugraphs/ (built at
// reduced shapes with the same structure), random single-edit mutants that stay valid and whose
// float output differs from the original's must all be rejected. A finite-field disagreement is
// certain, so two tests per mutant and no float filter suffice. Mutants whose float output
// agrees are reported for information (a constant scaled by 1 + 1e-4 is one of them: it is not
// equivalent and must be rejected too).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "../ir/example_graphs.h"
#include "mugraph/interp.h"
#include "mugraph/retype.h"
#include "mugraph/validate.h"
#include "mugraph/verify.h"
#include "mutate.h"
#include "verify_test_util.h"

namespace mugraph {
namespace {

/// max |a − b| / max |b| over all outputs; +inf if shapes differ or a value is not finite where
/// the reference's is.
double max_relative_error(const std::vector<HostTensor>& got, const std::vector<HostTensor>& want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (size_t o = 0; o < want.size(); ++o) {
    if (got[o].type.shape != want[o].type.shape) return std::numeric_limits<double>::infinity();
    double diff = 0, scale = 0;
    for (size_t i = 0; i < want[o].data.size(); ++i) {
      double a = got[o].data[i], b = want[o].data[i];
      if (!std::isfinite(a) && std::isfinite(b)) return std::numeric_limits<double>::infinity();
      diff = std::max(diff, std::fabs(a - b));
      scale = std::max(scale, std::fabs(b));
    }
    worst = std::max(worst, diff / std::max(scale, 1e-30));
  }
  return worst;
}

/// A seed per example that does not depend on the standard library.
uint64_t fnv1a(const char* s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; ++s) h = (h ^ static_cast<unsigned char>(*s)) * 1099511628211ull;
  return h;
}

struct Tally {
  int tried = 0, valid = 0, different = 0, rejected = 0, float_equal = 0, float_equal_rejected = 0;
};

struct MutantExample {
  const char* name;
  Graph (*build)();
};

const MutantExample kExamples[] = {
    {"rmsnorm_fig3b", [] { return examples::rmsnorm_fig3b(4, 64, 32, 4, 4); }},
    {"gated_mlp_fig10b", [] { return examples::gated_mlp_fig10b(4, 64, 32, 4, 4); }},
    {"exp_scale_concat", [] { return examples::exp_scale_concat(4, 64, 2, 4); }},
    {"rmsnorm_two_kernels", [] { return examples::rmsnorm_two_kernels(4, 64, 4, 2); }},
};

void PrintTo(const MutantExample& e, std::ostream* os) { *os << e.name; }

int mutant_count() {
  if (const char* n = std::getenv("MUGRAPH_MUTANTS")) return std::max(1, std::atoi(n));
  return vtest::slow_build() ? 1000 : 5000;
}

class Mutants : public ::testing::TestWithParam<MutantExample> {};

/// Draws `n` mutants of `ex` with `edits` successive edits each and checks every valid,
/// float-different one is rejected. Tallies are by the kind of the first edit.
void check_mutants(const MutantExample& ex, int n, int edits) {
  auto start = std::chrono::steady_clock::now();
  Graph ref = retype(ex.build(), DType::f32);
  ASSERT_FALSE(validate(ref)) << validate(ref)->str();
  InterpOptions interp;
  interp.threads = 1;
  std::vector<HostTensor> inputs = random_inputs(ref, 2024);
  std::vector<HostTensor> want = run_float(ref, inputs, interp);

  Tally total;
  Tally by_kind[mutate::kNumKinds];
  std::vector<std::string> accepted;  // float-different mutants that verify accepted: verifier bugs
  std::vector<std::string> equal_accepted;
  mutate::Mutator mutator(fnv1a(ex.name) + static_cast<uint64_t>(edits));
  int draws = 0;
  while (total.tried < n && draws < 100 * n) {
    ++draws;
    std::optional<mutate::Mutation> m = mutator.mutate(ref);
    for (int e = 1; e < edits && m; ++e) {
      std::optional<mutate::Mutation> next = mutator.mutate(m->graph);
      if (next) {
        next->what = m->what + "; then " + next->what;
        next->kind = m->kind;
      }
      m = std::move(next);
    }
    if (!m) continue;
    Tally& k = by_kind[static_cast<int>(m->kind)];
    ++total.tried, ++k.tried;
    Expected<Graph> g = mutate::rebuild(m->graph);
    if (!g || validate(*g) || *g == ref) continue;  // invalid, or the edits undid each other
    ++total.valid, ++k.valid;

    double err = max_relative_error(run_float(*g, inputs, interp), want);
    VerifyOptions o;
    o.seed = static_cast<uint64_t>(total.tried);
    o.max_tests = 2;
    o.threads = 1;
    o.float_check = false;
    VerifyResult r;
    try {
      r = verify(ref, *g, o);
    } catch (const std::exception& e) {
      ADD_FAILURE() << ex.name << ": verify threw on mutant " << m->what << ": " << e.what();
      continue;
    }
    bool rejected = r.verdict != Verdict::equivalent;
    if (err > 1e-3) {
      ++total.different, ++k.different;
      if (rejected) {
        ++total.rejected, ++k.rejected;
      } else {
        accepted.push_back(m->what + " (float error " + std::to_string(err) + ")");
      }
    } else {
      ++total.float_equal, ++k.float_equal;
      if (rejected) {
        ++total.float_equal_rejected, ++k.float_equal_rejected;
      } else {
        equal_accepted.push_back(m->what);
      }
      // A changed constant is never equivalent in these graphs (each constant is a divisor that
      // the output depends on), however close the float outputs are.
      if (edits == 1 && m->kind == mutate::Kind::constant) {
        EXPECT_TRUE(rejected) << ex.name << ": near-miss constant mutant accepted: " << m->what;
      }
    }
  }
  double secs = vtest::seconds_since(start);
  std::printf(
      "[ mutants  ] %s, %d edit(s): %d tried, %d valid, %d float-different, %d of them rejected; "
      "%d float-equal (%d rejected, %d accepted); %.2f s\n",
      ex.name, edits, total.tried, total.valid, total.different, total.rejected, total.float_equal,
      total.float_equal_rejected, total.float_equal - total.float_equal_rejected, secs);
  for (int i = 0; i < mutate::kNumKinds; ++i) {
    const Tally& k = by_kind[i];
    std::printf("[          ]   %-10s tried %4d valid %4d different %4d rejected %4d float-equal %4d (rejected %d)\n",
                mutate::kind_name(static_cast<mutate::Kind>(i)), k.tried, k.valid, k.different, k.rejected,
                k.float_equal, k.float_equal_rejected);
  }
  for (size_t i = 0; i < equal_accepted.size() && i < 8; ++i)
    std::printf("[          ]   float-equal, accepted: %s\n", equal_accepted[i].c_str());

  EXPECT_EQ(total.tried, n) << "the mutator ran out of applicable mutations";
  EXPECT_GT(total.different, 0);
  EXPECT_EQ(total.rejected, total.different);
  for (size_t i = 0; i < accepted.size() && i < 20; ++i)
    ADD_FAILURE() << ex.name << ": float-different mutant accepted: " << accepted[i];
}

TEST_P(Mutants, FloatDifferentSingleEditMutantsAreRejected) { check_mutants(GetParam(), mutant_count(), 1); }

TEST_P(Mutants, FloatDifferentDoubleEditMutantsAreRejected) { check_mutants(GetParam(), mutant_count() / 2, 2); }

INSTANTIATE_TEST_SUITE_P(Verify, Mutants, ::testing::ValuesIn(kExamples),
                         [](const ::testing::TestParamInfo<MutantExample>& p) { return p.param.name; });

/// The engine itself: rebuild() of an unmutated graph is the graph, and every mutation changes it.
TEST(MutationEngine, RebuildIsIdentityAndMutationsChangeTheGraph) {
  for (const MutantExample& ex : kExamples) {
    Graph g = retype(ex.build(), DType::f32);
    Expected<Graph> same = mutate::rebuild(g);
    ASSERT_TRUE(same.ok()) << ex.name << ": " << same.rejection().str();
    EXPECT_EQ(*same, g) << ex.name;
    mutate::Mutator mutator(1);
    for (int i = 0; i < 200; ++i) {
      auto m = mutator.mutate(g);
      if (m) {
        EXPECT_NE(m->graph, g) << ex.name << ": " << m->what;
      }
    }
  }
}

}  // namespace
}  // namespace mugraph
