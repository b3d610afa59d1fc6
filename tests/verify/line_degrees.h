/// \file line_degrees.h
/// A check of the degree bounds Theorem 2's ε rests on (lax_forms.h), for the verifier's tests.
/// Along a line x = a + t·b through a graph's inputs (in Z_p), an output whose form claims
/// A / B with deg A ≤ N and deg B ≤ M is a rational function of t with such A and B. So at any
/// K > N + M + 1 points t_i with outputs y_i, the N + M + 2 coefficients of A and B solve
/// A(t_i) − y_i · B(t_i) = 0 with a nonzero solution. Were the output's degrees larger than
/// claimed, this homogeneous system would have only the zero solution (unless the random points
/// are special, which at p ≈ 2³⁰ they are not): a claim that is too small fails the check.
/// Graphs must be free of exp, silu, relu, gelu and sqrt (their values along the line are not
/// rational in t); a run with a zero divisor is drawn again.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "lax_forms.h"
#include "mugraph/ff_interp.h"
#include "mugraph/ffield.h"
#include "mugraph/graph.h"

namespace mugraph::vtest {

namespace line_detail {
/// The rank of `m` (rows of `cols` residues mod p), by Gaussian elimination.
inline size_t rank(std::vector<std::vector<uint64_t>> m, size_t cols) {
  size_t r = 0;
  for (size_t c = 0; c < cols && r < m.size(); ++c) {
    size_t pivot = r;
    while (pivot < m.size() && m[pivot][c] == 0) ++pivot;
    if (pivot == m.size()) continue;
    std::swap(m[pivot], m[r]);
    const uint64_t inv = ff::inv(m[r][c], ff::kP);
    for (size_t i = r + 1; i < m.size(); ++i) {
      if (m[i][c] == 0) continue;
      const uint64_t f = ff::mul(m[i][c], inv, ff::kP);
      for (size_t k = c; k < cols; ++k) m[i][k] = ff::sub(m[i][k], ff::mul(f, m[r][k], ff::kP), ff::kP);
    }
    ++r;
  }
  return r;
}
}  // namespace line_detail

/// Whether output `output` of `g` has numerator and denominator degrees within `form`'s along a
/// random line (see the file comment), checked at a few of its elements.
inline ::testing::AssertionResult degrees_hold_along_a_line(const Graph& g, const lax::Form& form, uint64_t seed,
                                                            size_t output = 0) {
  const size_t n = static_cast<size_t>(form.num.deg), m = static_cast<size_t>(form.den.deg);
  const size_t unknowns = n + m + 2, points = unknowns + 6;
  std::vector<FFTensor> a = random_ff_inputs(g, seed), b = random_ff_inputs(g, seed + 1);
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> ts;
  std::vector<FFTensor> ys;
  for (int draws = 0; ys.size() < points; ++draws) {
    if (draws > 4 * static_cast<int>(points)) return ::testing::AssertionFailure() << "zero divisors on most of the line";
    const uint64_t t = std::uniform_int_distribution<uint64_t>(1, ff::kP - 1)(rng);
    std::vector<FFTensor> x = a;
    for (size_t i = 0; i < x.size(); ++i)
      for (size_t e = 0; e < x[i].p.size(); ++e)
        x[i].p[e] = static_cast<uint32_t>(ff::add(a[i].p[e], ff::mul(t, b[i].p[e], ff::kP), ff::kP));
    FFRun run = run_ff(g, x, FFContext{}, 1);
    if (run.zero_divisor) continue;
    ts.push_back(t);
    ys.push_back(run.outputs.at(output));
  }
  const int64_t numel = ys[0].numel();
  for (int64_t e : {int64_t{0}, numel / 2, numel - 1}) {
    std::vector<std::vector<uint64_t>> rows;
    for (size_t i = 0; i < points; ++i) {
      std::vector<uint64_t> row(unknowns);
      const uint64_t y = ys[i].p[static_cast<size_t>(e)];
      uint64_t power = 1;
      for (size_t k = 0; k <= std::max(n, m); ++k, power = ff::mul(power, ts[i], ff::kP)) {
        if (k <= n) row[k] = power;                                    // A's coefficient of t^k
        if (k <= m) row[n + 1 + k] = ff::neg(ff::mul(y, power, ff::kP), ff::kP);  // −y · B's
      }
      rows.push_back(std::move(row));
    }
    if (line_detail::rank(rows, unknowns) == unknowns)
      return ::testing::AssertionFailure() << "element " << e << " of output " << output
                                           << " is no rational function of numerator degree ≤ " << n
                                           << " over denominator degree ≤ " << m << " along the line";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace mugraph::vtest
