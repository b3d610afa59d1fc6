#include "config_list_cache.h"

#include <mutex>

namespace mugraph::search_detail {

int64_t config_list_cache_bytes(int64_t memory_limit_bytes) {
  return memory_limit_bytes > 0 ? memory_limit_bytes / 4 : int64_t{4} << 30;
}

int64_t config_list_bytes(const ConfigList& list) {
  return static_cast<int64_t>(sizeof(ConfigList) + list.configs.capacity() * sizeof(KernelConfig) +
                              list.floors.capacity() * sizeof(double));
}

std::shared_ptr<const ConfigList> ConfigListCache::find(const std::string& key) const {
  std::shared_lock lock(mutex_);
  auto it = lists_.find(key);
  return it == lists_.end() ? nullptr : it->second;
}

void ConfigListCache::insert(const std::string& key, std::shared_ptr<const ConfigList> list) {
  // The map's node and the shared pointer's control block besides the list and the key.
  const int64_t bytes = config_list_bytes(*list) + static_cast<int64_t>(key.size()) + 96;
  std::unique_lock lock(mutex_);
  if (bytes_.load(std::memory_order_relaxed) + bytes > capacity_bytes_) {
    lists_.clear();
    bytes_.store(0, std::memory_order_relaxed);
  }
  if (lists_.emplace(key, std::move(list)).second) bytes_.fetch_add(bytes, std::memory_order_relaxed);
}

void ConfigListCache::clear() {
  std::unique_lock lock(mutex_);
  lists_.clear();
  bytes_.store(0, std::memory_order_relaxed);
}

}  // namespace mugraph::search_detail
