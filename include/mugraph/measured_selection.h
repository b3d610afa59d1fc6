/// \file measured_selection.h
/// Measured selection (DESIGN.md §7): with a GPU, the search's best candidates by the cost model
/// are built, checked against the CPU interpreter and timed (bench.h), and the fastest that
/// checks wins; the predicted and measured times go into the report, with their Spearman rank
/// correlation, which is how the model is calibrated.
#pragma once

#include <string>
#include <vector>

#include "mugraph/bench.h"
#include "mugraph/graph.h"

namespace mugraph {

/// One candidate's measurement.
struct MeasuredCandidate {
  int rank = 0;             ///< its place in the search's ranking (0: the model's choice)
  double predicted_us = 0;  ///< the cost model's estimate
  bool ok = false;          ///< built, ran, and matched the interpreter
  double measured_us = 0;   ///< median time (meaningless under emulation)
  std::string error;        ///< why it has no time (build or run failure, wrong result)
};

struct MeasuredSelection {
  std::string device;  ///< the GPU's name, or "host emulation"
  bool emulated = false;
  std::vector<MeasuredCandidate> candidates;
  int chosen_rank = 0;  ///< the fastest candidate that checks (the model's choice under emulation)
  /// Spearman rank correlation between predicted and measured times over the candidates that
  /// check (NaN with fewer than two, when either side is constant, and under emulation).
  double spearman = 0;
};

/// Builds, checks and times `candidates` (each a μGraph of the program, with the model's
/// estimate, in the search's order) on the same random inputs. Under emulation the code is
/// checked but the model's choice is kept (host times say nothing about a GPU). Throws
/// UserError when nothing can run (no compiler, no GPU), with bench's message.
MeasuredSelection measure_candidates(const std::vector<std::pair<Graph, double>>& candidates,
                                     const BenchOptions& options, uint64_t seed = 0);

/// Spearman's rank correlation of two equally long series (ties get their average rank); NaN
/// when fewer than two values or either series is constant.
double spearman_rank_correlation(const std::vector<double>& x, const std::vector<double>& y);

/// The selection as a JSON object: device, emulated, chosen_rank, spearman (null if NaN), and
/// per candidate rank, predicted_us, ok, measured_us, error.
std::string measured_selection_json(const MeasuredSelection& selection);

}  // namespace mugraph
