// Measured selection (measured_selection.h): time the model's best candidates, keep the fastest.
#include "mugraph/measured_selection.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>

#include "mugraph/error.h"

namespace mugraph {

namespace {

/// 1-based ranks of xs, ties getting the average of the ranks they span.
std::vector<double> average_ranks(const std::vector<double>& xs) {
  std::vector<size_t> order(xs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return xs[a] < xs[b]; });
  std::vector<double> rank(xs.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && xs[order[j + 1]] == xs[order[i]]) ++j;
    const double r = (static_cast<double>(i) + static_cast<double>(j)) / 2 + 1;
    for (size_t k = i; k <= j; ++k) rank[order[k]] = r;
    i = j + 1;
  }
  return rank;
}

}  // namespace

double spearman_rank_correlation(const std::vector<double>& x, const std::vector<double>& y) {
  MUGRAPH_CHECK(x.size() == y.size()) << "spearman: series of " << x.size() << " and " << y.size() << " values";
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (x.size() < 2) return nan;
  // Pearson's correlation of the ranks (exact with ties, unlike the 1 - 6Σd²/(n³ - n) shortcut).
  const std::vector<double> rx = average_ranks(x), ry = average_ranks(y);
  const double n = static_cast<double>(x.size()), mean = (n + 1) / 2;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (rx[i] - mean) * (ry[i] - mean);
    sxx += (rx[i] - mean) * (rx[i] - mean);
    syy += (ry[i] - mean) * (ry[i] - mean);
  }
  if (sxx == 0 || syy == 0) return nan;
  return sxy / std::sqrt(sxx * syy);
}

MeasuredSelection measure_candidates(const std::vector<std::pair<Graph, double>>& candidates,
                                     const BenchOptions& options, uint64_t seed) {
  MeasuredSelection s;
  s.emulated = options.emulate;
  s.device = options.emulate ? "host emulation" : "";
  if (candidates.empty()) return s;
  const std::vector<HostTensor> inputs =
      random_inputs_scaled(candidates.front().first, seed, kCheckInputScale, kDefaultMaxHostBytes,
                           /*threads=*/0);
  // One batch: the candidates' libraries built several at once, then timed in one process.
  std::vector<Graph> graphs;
  for (const auto& [graph, predicted] : candidates) graphs.push_back(graph);
  const std::vector<BatchBenchResult> results = bench_ugraphs(graphs, inputs, options);
  double best = std::numeric_limits<double>::infinity();
  std::vector<double> predicted, measured;
  for (size_t i = 0; i < candidates.size(); ++i) {
    MeasuredCandidate m;
    m.rank = static_cast<int>(i);
    m.predicted_us = candidates[i].second;
    if (const auto& r = results[i].result) {
      s.device = r->device;
      m.ok = r->ok;
      m.measured_us = r->median_us;
      const bool unchecked = std::any_of(r->outputs.begin(), r->outputs.end(),
                                         [](const BenchOutputCheck& c) { return c.reference_not_finite > 0; });
      if (unchecked)
        m.error =
            "not checked: the interpreter's own result is not finite on the inputs (they overflow the "
            "program in its dtypes)";
      else if (!r->ok)
        m.error = "its result does not match the interpreter";
    } else {
      m.error = results[i].error;
    }
    if (m.ok) {
      predicted.push_back(m.predicted_us);
      measured.push_back(m.measured_us);
      if (!options.emulate && m.measured_us < best) {
        best = m.measured_us;
        s.chosen_rank = m.rank;
      }
    }
    s.candidates.push_back(std::move(m));
  }
  // Host times under emulation say nothing about a GPU: no correlation to report.
  s.spearman =
      options.emulate ? std::numeric_limits<double>::quiet_NaN() : spearman_rank_correlation(predicted, measured);
  return s;
}

std::string measured_selection_json(const MeasuredSelection& s) {
  nlohmann::ordered_json j;
  j["device"] = s.device;
  j["emulated"] = s.emulated;
  j["chosen_rank"] = s.chosen_rank;
  j["spearman"] = std::isnan(s.spearman) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s.spearman);
  j["candidates"] = nlohmann::ordered_json::array();
  for (const MeasuredCandidate& m : s.candidates) {
    nlohmann::ordered_json c;
    c["rank"] = m.rank;
    c["predicted_us"] = m.predicted_us;
    c["ok"] = m.ok;
    c["measured_us"] = m.measured_us;
    if (!m.error.empty()) c["error"] = m.error;
    j["candidates"].push_back(std::move(c));
  }
  return j.dump(2);
}

}  // namespace mugraph
