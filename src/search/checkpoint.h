// Checkpoints of a search: the pending tasks, the candidates found and the counters, as JSON
// ("format": "mugraph-search-checkpoint"). Written atomically (temporary file, then rename).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
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

/// Writes the checkpoints of one search. Consecutive checkpoints share most of their graphs (the
/// pending tasks' prefixes and the candidates), and serialising graphs is most of a write, so
/// the writer keeps the JSON text of every graph of its last write and serialises only the new
/// ones (docs/benchmarks.md, "Checkpoints beside the search"). One thread at a time.
class CheckpointWriter {
 public:
  /// Writes the state to `path` atomically. Throws UserError if the file cannot be written.
  /// `abandon`, asked every few thousand tasks, gives the write up (the file stays as it was;
  /// returns false): a periodic write of a large frontier must not hold a stop back.
  bool write(const std::string& path, const CheckpointState& state, const std::function<bool()>& abandon = {});

 private:
  struct Text {
    std::string json;
    /// A prefix's: the prefix `json` says what it appends to (null: `json` is the whole graph).
    const Graph* base = nullptr;
    uint64_t write = 0;  ///< the last write that used it; older ones are dropped after a write
  };
  /// By the shared pointer itself: holding it keeps the prefix alive, so a key never comes to
  /// name another graph at the same address.
  std::unordered_map<std::shared_ptr<const Graph>, Text> prefixes_;
  std::unordered_map<Graph, Text> candidates_;
  uint64_t writes_ = 0;
};

/// Writes the state to `path` atomically (a CheckpointWriter with nothing kept). Throws
/// UserError if the file cannot be written.
void write_checkpoint(const std::string& path, const CheckpointState& state);

/// Reads a checkpoint. Throws UserError (with the file name) if it is missing or malformed.
CheckpointState read_checkpoint(const std::string& path, const Target& target);

/// Checks that the graphs of a checkpoint read from `path` belong to `program`: every pending
/// task's prefix and every candidate has the program's inputs (names, shapes, dtypes, in order),
/// and every candidate its outputs. The fingerprint says which program a checkpoint was written
/// for, but a hand-edited or damaged file may still hold graphs of another, which the search
/// cannot label. Throws UserError("FILE: PATH: what differs").
void check_checkpoint_program(const CheckpointState& state, const Graph& program, const std::string& path);

}  // namespace mugraph::search_detail
