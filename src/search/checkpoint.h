// Checkpoints of a search: the pending tasks, the candidates found and the counters, as JSON
// ("format": "mugraph-search-checkpoint"). Written atomically (temporary file, then rename).
#pragma once

#include <string>
#include <vector>

#include "generator.h"

namespace mugraph::search_detail {

struct CheckpointState {
  /// Identifies the program and the options that change what is explored; resume refuses a
  /// checkpoint whose fingerprint differs.
  std::string fingerprint;
  double elapsed_seconds = 0;
  /// CostBound::both: when its model phase began (negative: not yet); a resume with it set is in
  /// that phase (and its pending tasks' paths start with kModelPhasePath).
  double bytes_phase_seconds = -1;
  SearchStats stats;
  std::vector<Task> pending;
  std::vector<FoundCandidate> candidates;
};

/// The fingerprint of a program and the search options that shape the tree.
std::string search_fingerprint(const Graph& program, const SearchOptions& options);

/// Writes the state to `path` atomically. Throws UserError if the file cannot be written.
void write_checkpoint(const std::string& path, const CheckpointState& state);

/// Reads a checkpoint. Throws UserError (with the file name) if it is missing or malformed.
CheckpointState read_checkpoint(const std::string& path, const Target& target);

}  // namespace mugraph::search_detail
