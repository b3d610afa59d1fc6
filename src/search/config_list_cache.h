// The configuration lists of the search's kernel tasks (ConfigList), shared by its workers. A
// list depends on the operands' types and index use and on the bound only, and operand sets alike
// in those recur across prefixes; making one (kernel_configs, then a floor per configuration to
// sort them) is most of a short kernel task. Each worker kept its own cache before, of up to 4096
// lists: QKNorm bs 8 held 1.7 GB of lists with two workers (a third of its memory), the same
// lists twice, and a machine with more cores would hold more copies.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "generator.h"

namespace mugraph::search_detail {

/// The cache's capacity under a search's memory limit (effective_memory_limit; 0: none known):
/// a quarter of it, and 4 GiB without one. The cache trades memory for speed nearly one for one:
/// QKNorm bs 1 with 1, 2 and 4 GiB covered 6.0, 6.7 and 8.6 M states in 60 s (2.1, 3.2 and 4.6
/// GB peak), and 7.0 M with the workers' own caches (7.0 GB).
int64_t config_list_cache_bytes(int64_t memory_limit_bytes);

/// Roughly the bytes a list holds.
int64_t config_list_bytes(const ConfigList& list);

/// Lists by key (Generator::configs_for makes the key); lookups take a shared lock.
class ConfigListCache {
 public:
  /// Holds at most about `capacity_bytes` (lists and keys); past that it is cleared and refilled.
  explicit ConfigListCache(int64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  /// The list for `key`, or null.
  std::shared_ptr<const ConfigList> find(const std::string& key) const;
  /// Stores a list (another worker may have stored one for the key already: either serves).
  void insert(const std::string& key, std::shared_ptr<const ConfigList> list);
  /// Forgets every list (the model bound's phase begins: the bytes phase's lists are not its).
  void clear();

  int64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  const int64_t capacity_bytes_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const ConfigList>> lists_;
  std::atomic<int64_t> bytes_{0};
};

}  // namespace mugraph::search_detail
