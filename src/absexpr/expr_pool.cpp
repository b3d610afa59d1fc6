// The hash-consing arena of abstract expressions.
//
// Storage: chunk c holds kFirstChunk << c nodes (c = 0, 1, ...), so node i lives in chunk
// bit_width(i + kFirstChunk) - 1 - kFirstChunkBits and no node ever moves. A writer fills the node
// and then publishes it (size_, release) under the mutex; a reader holding an id got it, directly
// or through some other synchronization, after that publication, so node() needs no lock.
#include <bit>
#include <deque>
#include <unordered_map>

#include "mugraph/absexpr.h"

namespace mugraph {

namespace {

struct ExprKindInfo {
  std::string_view name;
  int arity;
};

constexpr ExprKindInfo kKinds[] = {
#define MUGRAPH_EXPR_INFO(name, arity) {#name, arity},
    MUGRAPH_EXPR_KINDS(MUGRAPH_EXPR_INFO)
#undef MUGRAPH_EXPR_INFO
};

const ExprKindInfo& kind_info(ExprKind kind) {
  size_t i = static_cast<size_t>(kind);
  MUGRAPH_CHECK(i < std::size(kKinds)) << "bad expression kind " << i;
  return kKinds[i];
}

/// The hash of a node's identity: a var is identified by its slot (value), not its name.
uint64_t node_hash(const ExprNode& n) {
  auto mix = [](uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 31);
  };
  uint64_t h = mix(static_cast<uint64_t>(n.kind), static_cast<uint64_t>(n.value));
  h = mix(h, (static_cast<uint64_t>(static_cast<uint32_t>(n.exp10)) << 32) | static_cast<uint32_t>(n.a.value));
  h = mix(h, static_cast<uint32_t>(n.b.value));
  return h ^ (h >> 29);
}

}  // namespace

std::string_view expr_kind_name(ExprKind kind) { return kind_info(kind).name; }
int expr_arity(ExprKind kind) { return kind_info(kind).arity; }

/// Slots of node ids (-1: empty), probed linearly from the hash; at most half full. An index is
/// never freed before the pool: a reader may still probe one that a larger index replaced.
struct ExprPool::Index {
  explicit Index(size_t capacity) : mask(capacity - 1), slots(new std::atomic<int32_t>[capacity]) {
    for (size_t i = 0; i < capacity; ++i) slots[i].store(-1, std::memory_order_relaxed);
  }
  size_t mask;
  std::unique_ptr<std::atomic<int32_t>[]> slots;
};

struct ExprPool::Table {
  std::vector<std::unique_ptr<Index>> indexes;  ///< the last is index_
  size_t used = 0;                              ///< ids in the last index
  /// Var names by slot; a deque so that the strings (and views of them) never move.
  std::deque<std::string> names;
  std::unordered_map<std::string, int64_t> name_slots;
};

namespace {
constexpr size_t kFirstIndexCapacity = 1024;
}

ExprPool::ExprPool() : table_(std::make_unique<Table>()) {
  table_->indexes.push_back(std::make_unique<Index>(kFirstIndexCapacity));
  index_.store(table_->indexes.back().get(), std::memory_order_release);
}

ExprPool::~ExprPool() {
  for (auto& chunk : chunks_) delete[] chunk.load(std::memory_order_relaxed);
}

ExprNode* ExprPool::slot(int64_t index) const {
  uint64_t j = static_cast<uint64_t>(index) + (uint64_t{1} << kFirstChunkBits);
  int high = std::bit_width(j) - 1;
  ExprNode* chunk = chunks_[high - kFirstChunkBits].load(std::memory_order_acquire);
  return chunk + (j - (uint64_t{1} << high));
}

// Lookups are lock-free: a search interns a term for every op it tries, from every thread, and
// the mutex with a node-based map took about a sixth of the search. A writer fills the node,
// publishes it (size_), and only then stores its id into the index (release), so a reader that
// finds an id finds its node. A reader that misses (the term is new, is being added, or the
// index it probed was replaced) takes the lock and looks again in the current index.
ExprId ExprPool::intern(const ExprNode& n) {
  for (int k = 0; k < expr_arity(n.kind); ++k) {
    ExprId child = k == 0 ? n.a : n.b;
    MUGRAPH_CHECK(child.valid() && child.value < size())
        << "child " << child.value << " of a " << expr_kind_name(n.kind) << " node is not a term of this pool";
  }
  const uint64_t hash = node_hash(n);
  if (ExprId id = find(*index_.load(std::memory_order_acquire), n, hash); id.valid()) return id;
  std::lock_guard<std::mutex> lock(mutex_);
  if (ExprId id = find(*index_.load(std::memory_order_relaxed), n, hash); id.valid()) return id;
  int64_t index = size_.load(std::memory_order_relaxed);
  MUGRAPH_CHECK(index < int64_t{INT32_MAX}) << "expression pool is full";
  uint64_t j = static_cast<uint64_t>(index) + (uint64_t{1} << kFirstChunkBits);
  int high = std::bit_width(j) - 1;
  std::atomic<ExprNode*>& chunk = chunks_[high - kFirstChunkBits];
  if (chunk.load(std::memory_order_relaxed) == nullptr) {
    chunk.store(new ExprNode[size_t{1} << high], std::memory_order_release);
  }
  *slot(index) = n;
  ExprId id(static_cast<int32_t>(index));
  size_.store(index + 1, std::memory_order_release);
  insert_locked(id, hash);
  return id;
}

ExprId ExprPool::find(const Index& index, const ExprNode& n, uint64_t hash) const {
  for (size_t i = hash & index.mask;; i = (i + 1) & index.mask) {
    const int32_t id = index.slots[i].load(std::memory_order_acquire);
    if (id < 0) return ExprId{};
    if (*slot(id) == n) return ExprId(id);
  }
}

void ExprPool::insert_locked(ExprId id, uint64_t hash) {
  Table& t = *table_;
  if (2 * (t.used + 1) > t.indexes.back()->mask + 1) {
    // Grow: a new index of twice the capacity with every id so far, published whole.
    auto bigger = std::make_unique<Index>(2 * (t.indexes.back()->mask + 1));
    const int32_t n = id.value;  // ids 0 .. n-1 are in the old index; id itself goes in below
    for (int32_t k = 0; k < n; ++k) {
      const uint64_t h = node_hash(*slot(k));
      size_t i = h & bigger->mask;
      while (bigger->slots[i].load(std::memory_order_relaxed) >= 0) i = (i + 1) & bigger->mask;
      bigger->slots[i].store(k, std::memory_order_relaxed);
    }
    t.indexes.push_back(std::move(bigger));
    index_.store(t.indexes.back().get(), std::memory_order_release);
  }
  const Index& index = *t.indexes.back();
  size_t i = hash & index.mask;
  while (index.slots[i].load(std::memory_order_relaxed) >= 0) i = (i + 1) & index.mask;
  index.slots[i].store(id.value, std::memory_order_release);
  t.used = static_cast<size_t>(id.value) + 1;
}

const ExprNode& ExprPool::node(ExprId id) const {
  MUGRAPH_CHECK(id.valid() && id.value < size()) << "expression id " << id.value << " is not a term of this pool";
  return *slot(id.value);
}

ExprPoolStats ExprPool::stats() const { return ExprPoolStats{size()}; }

ExprId ExprPool::var(std::string_view name) {
  ExprNode n;
  n.kind = ExprKind::var;
  {
    // Slots are handed out under the same mutex as nodes; intern() locks again afterwards, which
    // is fine because a name's slot and view never change once made.
    std::lock_guard<std::mutex> lock(mutex_);
    auto [it, inserted] = table_->name_slots.try_emplace(std::string(name), static_cast<int64_t>(table_->names.size()));
    if (inserted) table_->names.emplace_back(name);
    n.value = it->second;
    n.name = table_->names[static_cast<size_t>(it->second)];
  }
  return intern(n);
}

ExprId ExprPool::constant(Scalar value) {
  Scalar s = value.normalized();
  ExprNode n;
  n.kind = ExprKind::constant;
  n.value = s.mantissa;
  n.exp10 = s.exp10;
  return intern(n);
}

Scalar ExprPool::constant_value(ExprId id) const {
  const ExprNode& n = node(id);
  MUGRAPH_CHECK(n.kind == ExprKind::constant) << "constant_value of a " << expr_kind_name(n.kind) << " node";
  return Scalar{n.value, n.exp10};
}

ExprId ExprPool::unary(ExprKind kind, ExprId x) {
  MUGRAPH_CHECK(expr_arity(kind) == 1 && kind != ExprKind::sum) << expr_kind_name(kind) << " is not a unary kind";
  ExprNode n;
  n.kind = kind;
  n.a = x;
  return intern(n);
}

ExprId ExprPool::binary(ExprKind kind, ExprId x, ExprId y) {
  MUGRAPH_CHECK(expr_arity(kind) == 2) << expr_kind_name(kind) << " is not a binary kind";
  ExprNode n;
  n.kind = kind;
  // Commutative kinds keep the smaller id first so that add(a, b) and add(b, a) coincide.
  bool commutative = kind == ExprKind::add || kind == ExprKind::mul;
  n.a = commutative && y < x ? y : x;
  n.b = commutative && y < x ? x : y;
  return intern(n);
}

ExprId ExprPool::add(ExprId x, ExprId y) { return binary(ExprKind::add, x, y); }
ExprId ExprPool::mul(ExprId x, ExprId y) { return binary(ExprKind::mul, x, y); }
ExprId ExprPool::div(ExprId x, ExprId y) { return binary(ExprKind::div, x, y); }
ExprId ExprPool::concat(ExprId x, ExprId y) { return binary(ExprKind::concat, x, y); }

ExprId ExprPool::sum(int64_t k, ExprId x) {
  MUGRAPH_CHECK(k >= 1) << "sum over " << k << " elements";
  if (k == 1) return x;  // A_eq: sum(1, x) = x
  ExprNode n;
  n.kind = ExprKind::sum;
  n.value = k;
  n.a = x;
  return intern(n);
}

namespace {

class Printer {
 public:
  Printer(const ExprPool& pool, size_t max_chars) : pool_(pool), max_(max_chars) {}

  void print(ExprId id) {
    if (full()) return;
    const ExprNode& n = pool_.node(id);
    switch (n.kind) {
      case ExprKind::var:
        put(n.name);
        return;
      case ExprKind::constant:
        put("c");
        put(Scalar{n.value, n.exp10}.str());
        return;
      case ExprKind::sum:
        put("sum(");
        put(std::to_string(n.value));
        put(", ");
        print(n.a);
        put(")");
        return;
      default:
        put(expr_kind_name(n.kind));
        put("(");
        print(n.a);
        if (expr_arity(n.kind) == 2) {
          put(", ");
          print(n.b);
        }
        put(")");
        return;
    }
  }

  std::string take() {
    if (full()) {
      out_.resize(max_);
      out_ += "...";
    }
    return std::move(out_);
  }

 private:
  bool full() const { return out_.size() > max_; }
  void put(std::string_view s) {
    if (!full()) out_ += s;
  }

  const ExprPool& pool_;
  size_t max_;
  std::string out_;
};

}  // namespace

std::string ExprPool::str(ExprId id, size_t max_chars) const {
  Printer p(*this, max_chars);
  p.print(id);
  return p.take();
}

}  // namespace mugraph
