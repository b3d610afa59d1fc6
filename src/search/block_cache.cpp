#include "block_cache.h"

#include <cstring>
#include <mutex>

namespace mugraph::search_detail {

namespace {

template <typename T>
void put(std::string& key, const T& v) {
  char raw[sizeof(T)];
  std::memcpy(raw, &v, sizeof(T));
  key.append(raw, sizeof(T));
}

/// What an entry takes in the cache, its configuration and the table's node included.
int64_t entry_bytes(const BlockClosings& entry) {
  return entry.bytes + static_cast<int64_t>(sizeof(KernelConfig) + sizeof(BlockClosings) + 64);
}

/// What a shelf takes, its key (held twice: in the map and in the shelf) included.
int64_t shelf_bytes(const std::string& key) { return static_cast<int64_t>(2 * key.size() + sizeof(BlockShelf) + 128); }

int64_t graph_bytes(const Graph& g) {
  int64_t n = static_cast<int64_t>(sizeof(Graph) + g.tensors.size() * sizeof(Tensor) + g.ops.size() * sizeof(Op) +
                                   g.params.size() * sizeof(TensorType));
  for (const Op& op : g.ops)
    n += static_cast<int64_t>((op.inputs.size() + op.outputs.size()) * sizeof(TensorId) + op.attrs.name.size());
  for (const Graph& b : g.bodies) n += graph_bytes(b);
  return n;
}

}  // namespace

std::string block_operands_key(const Graph& prefix, const PrefixFacts& facts, const std::vector<TensorId>& operands) {
  std::string key;
  key.reserve(256);
  put(key, static_cast<uint8_t>(operands.size()));
  for (TensorId t : operands) {
    const TensorType& type = prefix.type(t);
    put(key, static_cast<uint8_t>(type.dtype));
    put(key, static_cast<uint8_t>(type.shape.rank()));
    for (int64_t d : type.shape) put(key, d);
    put(key, facts.exprs[t.index()].value);
    const DimLabels& labels = facts.labels.tensors[t.index()];
    put(key, static_cast<uint8_t>(labels.rank));
    for (int d = 0; d < labels.rank; ++d) put(key, labels[d]);
    put(key, static_cast<uint16_t>(labels.carriers.size()));
    for (const CarrierEntry& c : labels.carriers) {
      put(key, c.index);
      put(key, c.factor);
      put(key, c.count);
    }
  }
  return key;
}

std::string block_shelf_key(std::string key, bool must_finish, int kernel_ops_after, bool model_bound) {
  put(key, static_cast<uint8_t>(must_finish));
  // The room after the kernel bounds its outputs only when it need not finish the program.
  put(key, static_cast<int16_t>(must_finish ? -1 : kernel_ops_after));
  put(key, static_cast<uint8_t>(model_bound));
  return key;
}

BlockSearchKey block_search_key(const Graph& prefix, const PrefixFacts& facts, const std::vector<TensorId>& operands,
                                const KernelConfig& config, bool must_finish, int kernel_ops_after, bool model_bound) {
  return {block_shelf_key(block_operands_key(prefix, facts, operands), must_finish, kernel_ops_after, model_bound),
          config};
}

size_t KernelConfigHash::operator()(const KernelConfig& c) const {
  size_t h = 0;
  hash_combine(h, static_cast<size_t>(c.grid.x));
  hash_combine(h, static_cast<size_t>(c.grid.y));
  hash_combine(h, static_cast<size_t>(c.grid.z));
  hash_combine(h, static_cast<size_t>(c.forloop));
  // The maps are int8 arrays: hashed eight at a time.
  auto words = [&h](const void* data, size_t size) {
    for (size_t i = 0; i < size; i += sizeof(uint64_t)) {
      uint64_t w;
      std::memcpy(&w, static_cast<const char*>(data) + i, sizeof(w));
      hash_combine(h, static_cast<size_t>(w));
    }
  };
  static_assert(sizeof(c.imaps) % sizeof(uint64_t) == 0 && sizeof(c.fmaps) % sizeof(uint64_t) == 0);
  words(c.imaps.data(), sizeof(c.imaps));
  words(c.fmaps.data(), sizeof(c.fmaps));
  return h;
}

int64_t closing_bytes(const BlockClosing& c) {
  return graph_bytes(c.body) + static_cast<int64_t>(sizeof(BlockClosing) + c.saved_exprs.size() * sizeof(ExprId));
}

std::shared_ptr<BlockShelf> BlockCache::shelf(const std::string& key) {
  {
    std::shared_lock lock(mutex_);
    auto it = shelves_.find(key);
    if (it != shelves_.end()) return it->second;
  }
  std::unique_lock lock(mutex_);
  auto it = shelves_.find(key);
  if (it != shelves_.end()) return it->second;
  const int64_t size = shelf_bytes(key);
  if (bytes_.load() + size > capacity_bytes_) clear_locked();
  auto made = std::make_shared<BlockShelf>(key);
  shelves_.emplace(key, made);
  bytes_.fetch_add(size);
  return made;
}

std::shared_ptr<const BlockClosings> BlockCache::find(const BlockShelf& shelf, const KernelConfig& config,
                                                      double cut_us) const {
  std::shared_lock lock(shelf.mutex_);
  auto it = shelf.entries_.find(config);
  if (it == shelf.entries_.end() || it->second->complete_to_us < cut_us) return nullptr;
  return it->second;
}

void BlockCache::insert(const std::shared_ptr<BlockShelf>& shelf, const KernelConfig& config,
                        std::shared_ptr<const BlockClosings> entry) {
  const int64_t size = entry_bytes(*entry);
  if (size > entry_limit_bytes()) return;
  std::unique_lock lock(mutex_);
  if (!holds_locked(*shelf)) return;  // cleared since the task took it
  std::unique_lock shelf_lock(shelf->mutex_);
  auto it = shelf->entries_.find(config);
  if (it != shelf->entries_.end()) {
    if (it->second->complete_to_us >= entry->complete_to_us) return;
    bytes_.fetch_sub(entry_bytes(*it->second));
    shelf->entries_.erase(it);
  }
  if (bytes_.load() + size > capacity_bytes_) {
    // Refill from this entry: the shelf stays, empty.
    clear_locked();
    shelf->entries_.clear();
    shelves_.emplace(shelf->key(), shelf);
    bytes_.fetch_add(shelf_bytes(shelf->key()));
  }
  shelf->entries_.emplace(config, std::move(entry));
  bytes_.fetch_add(size);
}

std::shared_ptr<const BlockClosings> BlockCache::find(const BlockSearchKey& key, double cut_us) {
  std::shared_ptr<BlockShelf> s;
  {
    std::shared_lock lock(mutex_);
    auto it = shelves_.find(key.shelf);
    if (it == shelves_.end()) return nullptr;
    s = it->second;
  }
  return find(*s, key.config, cut_us);
}

void BlockCache::insert(const BlockSearchKey& key, std::shared_ptr<const BlockClosings> entry) {
  insert(shelf(key.shelf), key.config, std::move(entry));
}

void BlockCache::clear() {
  std::unique_lock lock(mutex_);
  clear_locked();
}

bool BlockCache::holds_locked(const BlockShelf& shelf) const {
  auto it = shelves_.find(shelf.key());
  return it != shelves_.end() && it->second.get() == &shelf;
}

void BlockCache::clear_locked() {
  // Tasks that hold a shelf the cache no longer holds may still find its entries (they are
  // right for their keys) but add none.
  shelves_.clear();
  bytes_.store(0);
}

}  // namespace mugraph::search_detail
