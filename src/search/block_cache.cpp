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

/// What an entry takes in the cache, its key included.
int64_t entry_bytes(const std::string& key, const BlockClosings& entry) {
  return entry.bytes + static_cast<int64_t>(key.size() + sizeof(BlockClosings) + 64);
}

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

std::string block_search_key(std::string key, size_t operands, const KernelConfig& config, bool must_finish,
                             int kernel_ops_after, bool model_bound) {
  put(key, config.grid.x);
  put(key, config.grid.y);
  put(key, config.grid.z);
  put(key, config.forloop);
  for (size_t i = 0; i < operands; ++i) {
    key.append(reinterpret_cast<const char*>(config.imaps[i].data()), config.imaps[i].size());
    put(key, config.fmaps[i]);
  }
  put(key, static_cast<uint8_t>(must_finish));
  // The room after the kernel bounds its outputs only when it need not finish the program.
  put(key, static_cast<int16_t>(must_finish ? -1 : kernel_ops_after));
  put(key, static_cast<uint8_t>(model_bound));
  return key;
}

std::string block_search_key(const Graph& prefix, const PrefixFacts& facts, const std::vector<TensorId>& operands,
                             const KernelConfig& config, bool must_finish, int kernel_ops_after, bool model_bound) {
  return block_search_key(block_operands_key(prefix, facts, operands), operands.size(), config, must_finish,
                          kernel_ops_after, model_bound);
}

int64_t closing_bytes(const BlockClosing& c) {
  return graph_bytes(c.body) + static_cast<int64_t>(sizeof(BlockClosing) + c.saved_exprs.size() * sizeof(ExprId));
}

std::shared_ptr<const BlockClosings> BlockCache::find(const std::string& key, double cut_us) const {
  std::shared_lock lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second->complete_to_us < cut_us) return nullptr;
  return it->second;
}

void BlockCache::insert(const std::string& key, std::shared_ptr<const BlockClosings> entry) {
  const int64_t size = entry_bytes(key, *entry);
  if (size > entry_limit_bytes()) return;
  std::unique_lock lock(mutex_);
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    if (it->second->complete_to_us >= entry->complete_to_us) return;
    bytes_.fetch_sub(entry_bytes(key, *it->second));
    entries_.erase(it);
  }
  if (bytes_.load() + size > capacity_bytes_) {
    entries_.clear();
    bytes_.store(0);
  }
  entries_.emplace(key, std::move(entry));
  bytes_.fetch_add(size);
}

void BlockCache::clear() {
  std::unique_lock lock(mutex_);
  entries_.clear();
  bytes_.store(0);
}

}  // namespace mugraph::search_detail
