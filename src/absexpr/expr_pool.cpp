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

struct NodeHash {
  size_t operator()(const ExprNode& n) const {
    // var is identified by its slot (value); the name need not be hashed.
    size_t h = static_cast<size_t>(n.kind);
    hash_combine(h, std::hash<int64_t>{}(n.value));
    hash_combine(h, std::hash<int32_t>{}(n.exp10));
    hash_combine(h, std::hash<int32_t>{}(n.a.value));
    hash_combine(h, std::hash<int32_t>{}(n.b.value));
    return h;
  }
};

}  // namespace

std::string_view expr_kind_name(ExprKind kind) { return kind_info(kind).name; }
int expr_arity(ExprKind kind) { return kind_info(kind).arity; }

struct ExprPool::Table {
  std::unordered_map<ExprNode, ExprId, NodeHash> ids;
  /// Var names by slot; a deque so that the strings (and views of them) never move.
  std::deque<std::string> names;
  std::unordered_map<std::string, int64_t> name_slots;
  int64_t lookups = 0;
  int64_t hits = 0;
};

ExprPool::ExprPool() : table_(std::make_unique<Table>()) {}

ExprPool::~ExprPool() {
  for (auto& chunk : chunks_) delete[] chunk.load(std::memory_order_relaxed);
}

ExprNode* ExprPool::slot(int64_t index) const {
  uint64_t j = static_cast<uint64_t>(index) + (uint64_t{1} << kFirstChunkBits);
  int high = std::bit_width(j) - 1;
  ExprNode* chunk = chunks_[high - kFirstChunkBits].load(std::memory_order_acquire);
  return chunk + (j - (uint64_t{1} << high));
}

ExprId ExprPool::intern(const ExprNode& n) {
  for (int k = 0; k < expr_arity(n.kind); ++k) {
    ExprId child = k == 0 ? n.a : n.b;
    MUGRAPH_CHECK(child.valid() && child.value < size())
        << "child " << child.value << " of a " << expr_kind_name(n.kind) << " node is not a term of this pool";
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ++table_->lookups;
  if (auto it = table_->ids.find(n); it != table_->ids.end()) {
    ++table_->hits;
    return it->second;
  }
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
  table_->ids.emplace(n, id);
  size_.store(index + 1, std::memory_order_release);
  return id;
}

const ExprNode& ExprPool::node(ExprId id) const {
  MUGRAPH_CHECK(id.valid() && id.value < size()) << "expression id " << id.value << " is not a term of this pool";
  return *slot(id.value);
}

ExprPoolStats ExprPool::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ExprPoolStats{size(), table_->lookups, table_->hits};
}

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
