// The block searches' results, shared between prefixes. The block graphs one configuration of a
// graph-defined kernel grows depend on its operands (types, abstract expressions, index labels),
// the configuration and a few limits, not on the rest of the prefix; many prefixes hand the next
// kernel the same operands (RMSNorm bs 8: 857 distinct first kernels, most of which write the
// same tensors under other grids). A block task looks its configuration up here first and, on a
// hit, closes the cached block graphs onto its own prefix instead of growing them again
// (docs/search.md, "Block-search cache").
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "generator.h"

namespace mugraph::search_detail {

/// One way a block search closed its block graph: the kernel it appends to any prefix with the
/// key's operands.
struct BlockClosing {
  Graph body;  ///< the closed block graph, output savers included
  /// The abstract expressions of the saved tensors, in saver order (the new DTensors').
  std::vector<ExprId> saved_exprs;
  /// The growth floor (growth_floor.h) of the state the search closed (0 without the model
  /// bound). Floors only grow along a path, so the search reaches this closing exactly when the
  /// cut it grows with (the bound less the rest floor) is at least this.
  double floor_us = 0;
};

/// Everything one block search closed, in the order it closed it.
struct BlockClosings {
  std::vector<BlockClosing> closings;
  /// The growth cut the search ran with at its end (the bound was tightest then): it holds
  /// every closing of any search whose cut is at most this. Infinite without the model bound.
  double complete_to_us = std::numeric_limits<double>::infinity();
  /// What the closings hold, roughly (for the cache's capacity).
  int64_t bytes = 0;
};

/// The identity of a block search: what BlockSearch reads of the prefix and the task, in two
/// parts. The shelf: the operands (types, abstract expressions, index labels), the room after
/// the kernel and the bound, the same for every configuration of a block task, so that a task
/// finds its shelf once. The configuration: what differs between a task's block searches, a
/// fixed-size value looked up on the shelf.
/// `kernel_ops_after`: kernel ops the prefix leaves room for after this one (it bounds the
/// kernel's outputs); `must_finish`: its outputs can only be program outputs.
struct BlockSearchKey {
  std::string shelf;
  KernelConfig config;
  friend bool operator==(const BlockSearchKey&, const BlockSearchKey&) = default;
};
BlockSearchKey block_search_key(const Graph& prefix, const PrefixFacts& facts, const std::vector<TensorId>& operands,
                                const KernelConfig& config, bool must_finish, int kernel_ops_after, bool model_bound);
/// The shelf's part of the key that reads the operands, made once per task.
std::string block_operands_key(const Graph& prefix, const PrefixFacts& facts, const std::vector<TensorId>& operands);
/// The shelf key: the operands' key and the rest of what the task's block searches share.
std::string block_shelf_key(std::string operands_key, bool must_finish, int kernel_ops_after, bool model_bound);

/// Roughly the bytes a closing holds.
int64_t closing_bytes(const BlockClosing& c);

struct KernelConfigHash {
  size_t operator()(const KernelConfig& c) const;
};

/// The entries of one shelf key, by configuration. A task holds its shelf while it runs: the
/// lookups per configuration touch only this small table, not the whole cache (a search makes
/// tens of millions of them: 12 M in 20 s on `bench/heldout/llama_mlp_block.mg`).
class BlockShelf {
 public:
  explicit BlockShelf(std::string key) : key_(std::move(key)) {}
  const std::string& key() const { return key_; }

 private:
  friend class BlockCache;
  const std::string key_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<KernelConfig, std::shared_ptr<const BlockClosings>, KernelConfigHash> entries_;
};

/// Shared by the worker threads of one search; lookups take shared locks.
class BlockCache {
 public:
  /// Holds at most about `capacity_bytes` (entries and keys); past that it is cleared and refilled.
  explicit BlockCache(int64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  /// The shelf for `key`, made (empty) if there is none.
  std::shared_ptr<BlockShelf> shelf(const std::string& key);
  /// The entry for `config` on `shelf` whose cut reaches `cut_us` (it holds every closing a
  /// search with that cut would make); null if there is none.
  std::shared_ptr<const BlockClosings> find(const BlockShelf& shelf, const KernelConfig& config, double cut_us) const;
  /// Stores an entry, unless one that reaches as far is there. A shelf the cache no longer
  /// holds (it was cleared since) takes none.
  void insert(const std::shared_ptr<BlockShelf>& shelf, const KernelConfig& config,
              std::shared_ptr<const BlockClosings> entry);
  /// The same through a whole key.
  std::shared_ptr<const BlockClosings> find(const BlockSearchKey& key, double cut_us);
  void insert(const BlockSearchKey& key, std::shared_ptr<const BlockClosings> entry);
  /// Forgets every entry (the model bound's phase begins: the bytes phase's entries hold no
  /// floors).
  void clear();

  /// Largest entry worth keeping (bigger searches are rare and fill the cache alone).
  int64_t entry_limit_bytes() const { return capacity_bytes_ / 16; }
  int64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  /// Whether `shelf` is the one the cache holds for its key (not one cleared since).
  bool holds_locked(const BlockShelf& shelf) const;
  void clear_locked();

  const int64_t capacity_bytes_;
  /// Guards shelves_; taken before a shelf's mutex.
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<BlockShelf>> shelves_;
  std::atomic<int64_t> bytes_{0};
};

}  // namespace mugraph::search_detail
