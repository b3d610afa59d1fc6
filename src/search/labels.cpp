// Index labels (labels.h). A label packs the program index class and, for block tiles, how the
// block's tile of that index is split: label = base · 8 + bits, bit 0/1 the grid x/y axis,
// bit 2 the for-loop. Two tile dims are only combined when both the index and the split agree.
#include "labels.h"

#include <algorithm>
#include <iterator>
#include <numeric>
#include <tuple>

#include "mugraph/error.h"

namespace mugraph::search_detail {

namespace {

int16_t with_bits(int16_t b, int16_t bitset) { return static_cast<int16_t>(b * kLabelStride + bitset); }

static_assert((kStackBase + kMaxProgramIndices * kMaxProgramIndices) * kLabelStride <= 32767,
              "labels must fit in int16_t");

struct UnionFind {
  std::vector<int> parent;
  int find(int x) {
    while (parent[static_cast<size_t>(x)] != x)
      x = parent[static_cast<size_t>(x)] = parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
    return x;
  }
  void unite(int a, int b) { parent[static_cast<size_t>(find(a))] = find(b); }
};

using Carriers = std::vector<CarrierEntry>;

bool key_less(const CarrierEntry& a, const CarrierEntry& b) {
  return std::tie(a.index, a.factor) < std::tie(b.index, b.factor);
}
bool same_key(const CarrierEntry& a, const CarrierEntry& b) { return a.index == b.index && a.factor == b.factor; }

/// Sorted by (index, factor), each key once: what every DimLabels holds.
bool is_normal(const Carriers& c) {
  for (size_t i = 1; i < c.size(); ++i)
    if (!key_less(c[i - 1], c[i])) return false;
  return true;
}

/// Sorted, entries of one key merged (counts added), in place: the search labels millions of
/// ops, and a vector allocated per step was a tenth of its time.
Carriers normalize(Carriers c) {
  if (is_normal(c)) return c;
  std::sort(c.begin(), c.end(), key_less);
  size_t w = 0;
  for (const CarrierEntry& e : c) {
    if (w > 0 && same_key(c[w - 1], e))
      c[w - 1].count += e.count;
    else
      c[w++] = e;
  }
  c.resize(w);
  return c;
}

/// The keys of normal a and b in order, each once, its count combine(count in a, count in b)
/// (a key in one only keeps its count).
template <typename Combine>
Carriers merge_normal(const Carriers& a, const Carriers& b, Combine combine) {
  Carriers r;
  r.reserve(a.size() + b.size());
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && key_less(a[i], b[j]))) {
      r.push_back(a[i++]);
    } else if (i == a.size() || key_less(b[j], a[i])) {
      r.push_back(b[j++]);
    } else {
      r.push_back(a[i]);
      r.back().count = combine(a[i++].count, b[j++].count);
    }
  }
  return r;
}

/// mul, div, matmul: the factors of both operands.
Carriers product(const Carriers& a, const Carriers& b) {
  if (!is_normal(a) || !is_normal(b)) return product(normalize(a), normalize(b));
  return merge_normal(a, b, [](int32_t x, int32_t y) { return x + y; });
}

/// add, sub: either operand's factors (the larger count of each).
Carriers either(const Carriers& a, const Carriers& b) {
  if (!is_normal(a) || !is_normal(b)) return either(normalize(a), normalize(b));
  return merge_normal(a, b, [](int32_t x, int32_t y) { return std::max(x, y); });
}

/// A non-linear op wraps every factor (its argument is one opaque factor of the result).
Carriers wrap(OpKind kind, const Carriers& a) {
  Carriers c = a;
  for (CarrierEntry& e : c)
    if (e.factor != kAnyFactor) e.factor = e.factor * 32 + static_cast<uint32_t>(kind) + 1;
  return normalize(std::move(c));
}

/// Removes the entries of one index and returns them.
Carriers take(Carriers& c, int16_t index) {
  Carriers taken, kept;
  for (const CarrierEntry& e : c) (e.index == index ? taken : kept).push_back(e);
  c = std::move(kept);
  return taken;
}

Carriers input_carriers(const DimLabels& l, uint32_t factor) {
  Carriers c;
  for (int d = 0; d < l.rank; ++d)
    if (label_base(l[d]) != kNone) c.push_back(CarrierEntry{label_base(l[d]), factor, 1});
  return normalize(std::move(c));
}

}  // namespace

ProgramIndices::ProgramIndices(const Graph& p) {
  std::vector<int> offset(p.tensors.size() + 1, 0);
  for (size_t t = 0; t < p.tensors.size(); ++t) offset[t + 1] = offset[t] + p.tensors[t].type.shape.rank();
  UnionFind uf;
  uf.parent.resize(static_cast<size_t>(offset.back()));
  std::iota(uf.parent.begin(), uf.parent.end(), 0);
  std::vector<bool> contracted_node(uf.parent.size(), false);
  auto node = [&](TensorId t, int d) { return offset[t.index()] + d; };
  auto extent = [&](TensorId t, int d) { return p.type(t).shape[d]; };
  // Right-aligned unification of an operand with the result (NumPy broadcasting).
  auto align = [&](TensorId in, TensorId out, int skip_tail) {
    int ri = p.type(in).shape.rank() - skip_tail, ro = p.type(out).shape.rank() - skip_tail;
    for (int i = 1; i <= ri && i <= ro; ++i)
      if (extent(in, ri - i) == extent(out, ro - i)) uf.unite(node(in, ri - i), node(out, ro - i));
  };
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::input) continue;
    TensorId out = op.outputs[0];
    const OpInfo& info = op_info(op.kind);
    if (info.elementwise()) {
      for (TensorId in : op.inputs) align(in, out, 0);
    } else if (op.kind == OpKind::sum) {
      TensorId in = op.inputs[0];
      int dim = op.attrs.dim;
      for (int d = 0; d < p.type(in).shape.rank(); ++d)
        if (d != dim) uf.unite(node(in, d), node(out, d));
      contracted_node[static_cast<size_t>(node(in, dim))] = true;
    } else if (op.kind == OpKind::matmul) {
      TensorId a = op.inputs[0], b = op.inputs[1];
      int ra = p.type(a).shape.rank(), rb = p.type(b).shape.rank(), ro = p.type(out).shape.rank();
      align(a, out, 2);
      align(b, out, 2);
      uf.unite(node(a, ra - 2), node(out, ro - 2));
      uf.unite(node(b, rb - 1), node(out, ro - 1));
      uf.unite(node(a, ra - 1), node(b, rb - 2));
      contracted_node[static_cast<size_t>(node(a, ra - 1))] = true;
    } else {
      throw UserError("search: index analysis does not handle " + std::string(op_name(op.kind)) + " in programs yet");
    }
  }
  // Number the classes of extent > 1.
  std::vector<int> class_label(uf.parent.size(), -1);
  int next = 0;
  auto label_of = [&](TensorId t, int d) -> int16_t {
    if (extent(t, d) == 1) return kNone;
    int r = uf.find(node(t, d));
    if (class_label[static_cast<size_t>(r)] < 0) {
      class_label[static_cast<size_t>(r)] = next++;
      extents_.push_back(extent(t, d));
    }
    return static_cast<int16_t>(class_label[static_cast<size_t>(r)]);
  };
  auto labels = [&](TensorId t) {
    DimLabels l;
    l.rank = p.type(t).shape.rank();
    for (int d = 0; d < l.rank; ++d) {
      int16_t b = label_of(t, d);
      l[d] = b == kNone ? kNone : with_bits(b, 0);
    }
    return l;
  };
  {
    uint32_t factor = 1;
    for (const Op& op : p.ops)
      if (op.kind == OpKind::input) {
        DimLabels l = labels(op.outputs[0]);
        l.carriers = input_carriers(l, factor++);
        inputs_.emplace_back(op.attrs.name, std::move(l));
      }
  }
  for (TensorId o : p.outputs) outputs_.push_back(labels(o));
  for (size_t t = 0; t < p.tensors.size(); ++t)
    for (int d = 0; d < p.tensors[t].type.shape.rank(); ++d) label_of(TensorId(static_cast<int32_t>(t)), d);
  if (next > kMaxProgramIndices)
    throw UserError("search: the program has " + std::to_string(next) + " distinct indices; at most " +
                    std::to_string(kMaxProgramIndices) + " are supported");
  // Indices that some program tensor ranges over together (apart_ is filled from it below).
  std::vector<uint64_t> together(static_cast<size_t>(next), 0);
  for (size_t t = 0; t < p.tensors.size(); ++t) {
    uint64_t set = 0;
    for (int d = 0; d < p.tensors[t].type.shape.rank(); ++d) {
      const int16_t l = label_of(TensorId(static_cast<int32_t>(t)), d);
      if (l != kNone) set |= uint64_t{1} << l;
    }
    for (int i = 0; i < next; ++i)
      if ((set >> i) & 1) together[static_cast<size_t>(i)] |= set;
  }
  // A class is contracted if any of its nodes is.
  contracted_.assign(static_cast<size_t>(next), false);
  for (size_t n = 0; n < uf.parent.size(); ++n)
    if (contracted_node[n]) {
      int r = uf.find(static_cast<int>(n));
      if (class_label[static_cast<size_t>(r)] >= 0)
        contracted_[static_cast<size_t>(class_label[static_cast<size_t>(r)])] = true;
    }
  uint64_t free = 0;
  for (int i = 0; i < next; ++i)
    if (!contracted_[static_cast<size_t>(i)]) free |= uint64_t{1} << i;
  apart_.assign(static_cast<size_t>(next), 0);
  for (int i = 0; i < next; ++i)
    if (!contracted_[static_cast<size_t>(i)]) apart_[static_cast<size_t>(i)] = free & ~together[static_cast<size_t>(i)];
  for (const Op& op : p.ops) {
    bool nonlinear = op_info(op.kind).category == OpCategory::unary && op.kind != OpKind::sqr;
    bool divides = op.kind == OpKind::div && op.inputs.size() == 2;
    if (!nonlinear && !divides) continue;
    TensorId arg = op.inputs[nonlinear ? 0 : 1];
    nonlinear_.emplace_back(op.kind, index_set(labels(arg)));
  }
  // Carriers of every program tensor, and the contractions the program performs.
  std::vector<Carriers> car(p.tensors.size());
  uint32_t next_factor = 1;
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::input) {
      car[op.outputs[0].index()] = input_carriers(labels(op.outputs[0]), next_factor++);
      continue;
    }
    const Carriers& a = car[op.inputs[0].index()];
    Carriers c;
    const OpInfo& info = op_info(op.kind);
    if (op.kind == OpKind::sqr)
      c = product(a, a);
    else if (info.category == OpCategory::unary)
      c = wrap(op.kind, a);
    else if (info.category == OpCategory::binary && op.inputs.size() == 1)
      c = a;
    else if (op.kind == OpKind::add || op.kind == OpKind::sub)
      c = either(a, car[op.inputs[1].index()]);
    else if (op.kind == OpKind::mul || op.kind == OpKind::div)
      c = product(a, car[op.inputs[1].index()]);
    else if (op.kind == OpKind::matmul || op.kind == OpKind::sum) {
      c = op.kind == OpKind::matmul ? product(a, car[op.inputs[1].index()]) : a;
      int16_t k = op.kind == OpKind::matmul ? labels(op.inputs[0])[p.type(op.inputs[0]).shape.rank() - 1]
                                            : labels(op.inputs[0])[op.attrs.dim];
      if (label_base(k) != kNone) contractions_.emplace_back(label_base(k), take(c, label_base(k)));
    }
    car[op.outputs[0].index()] = std::move(c);
  }
}

uint64_t index_set(const DimLabels& l) {
  uint64_t s = 0;
  for (int i = 0; i < l.rank; ++i) {
    int16_t b = label_base(l[i]);
    if (b == kNone) continue;
    s |= uint64_t{1} << (b < kConcatBase ? b : 63);
  }
  return s;
}

bool ProgramIndices::nonlinear_ok(OpKind kind, const DimLabels& labels) const {
  uint64_t have = index_set(labels);
  for (const auto& [k, set] : nonlinear_)
    if (k == kind && (have & ~set) == 0) return true;
  return false;
}

const DimLabels& ProgramIndices::input(const std::string& name) const {
  for (const auto& [n, l] : inputs_)
    if (n == name) return l;
  MUGRAPH_CHECK(false) << "no program input named " << name;
  return inputs_.front().second;
}

bool ProgramIndices::contraction_ok(int16_t l, const std::vector<CarrierEntry>& carried) const {
  int16_t b = label_base(l);
  if (b == kNone || b >= kConcatBase) return true;  // concats: the §8.1 expression is checked instead
  for (const CarrierEntry& e : carried)
    if (e.factor == kAnyFactor) return true;
  for (const auto& [index, c] : contractions_)
    if (index == b && c == carried) return true;
  return false;
}

uint64_t ProgramIndices::apart_from(int16_t index) const {
  return index < 0 || static_cast<size_t>(index) >= apart_.size() ? 0 : apart_[static_cast<size_t>(index)];
}

bool ProgramIndices::contracted(int16_t l) const {
  int16_t b = label_base(l);
  if (b == kNone) return true;  // an extent-1 dimension may always be summed
  if (is_stack(l)) return contracted(stack_index(l));
  if (b >= kConcatBase) {
    int rest = b - kConcatBase;
    return contracted(with_bits(static_cast<int16_t>(rest / kMaxProgramIndices), 0)) &&
           contracted(with_bits(static_cast<int16_t>(rest % kMaxProgramIndices), 0));
  }
  return static_cast<size_t>(b) < contracted_.size() && contracted_[static_cast<size_t>(b)];
}

int16_t ProgramIndices::concat_label(int16_t a, int16_t b) const {
  int16_t ba = label_base(a), bb = label_base(b);
  if (ba == kNone || bb == kNone || ba >= kConcatBase || bb >= kConcatBase || split_bits(a) != split_bits(b))
    return kNone;
  return with_bits(static_cast<int16_t>(kConcatBase + ba * kMaxProgramIndices + bb), split_bits(a));
}

int16_t ProgramIndices::stack_label(int16_t k, int16_t slot) const {
  const int16_t bk = label_base(k), bs = label_base(slot);
  MUGRAPH_CHECK(bk != kNone && bk < kMaxProgramIndices && bs != kNone && bs < kMaxProgramIndices)
      << "a stack of partial results over labels " << k << " and " << slot;
  return with_bits(static_cast<int16_t>(kStackBase + bk * kMaxProgramIndices + bs), 0);
}

int64_t ProgramIndices::extent(int16_t l) const {
  if (l == kNone) return 1;
  if (is_stack(l)) return extent(stack_slot(l));
  const int16_t b = label_base(l);
  if (b >= kConcatBase) {
    const int rest = b - kConcatBase;
    return extent(with_bits(static_cast<int16_t>(rest / kMaxProgramIndices), 0)) +
           extent(with_bits(static_cast<int16_t>(rest % kMaxProgramIndices), 0));
  }
  MUGRAPH_CHECK(static_cast<size_t>(b) < extents_.size()) << "label " << l << " is no program index";
  return extents_[static_cast<size_t>(b)];
}

std::optional<DimLabels> elementwise_labels(const DimLabels& a, const Shape& sa, const DimLabels& b, const Shape& sb,
                                            const Shape& out) {
  DimLabels r;
  r.rank = out.rank();
  for (int i = 1; i <= out.rank(); ++i) {
    int ia = sa.rank() - i, ib = sb.rank() - i;
    int16_t la = ia >= 0 ? a[ia] : kNone, lb = ib >= 0 ? b[ib] : kNone;
    int16_t l = kNone;
    if (la != kNone && lb != kNone) {
      if (la != lb || sa[ia] != sb[ib]) return std::nullopt;
      l = la;
    } else {
      l = la != kNone ? la : lb;
    }
    r[out.rank() - i] = l;
  }
  return r;
}

std::optional<DimLabels> matmul_labels(const ProgramIndices& p, const DimLabels& a, const Shape& sa, const DimLabels& b,
                                       const Shape& sb, const Shape& out) {
  int ra = sa.rank(), rb = sb.rank(), ro = out.rank();
  int16_t ka = a[ra - 1], kb = b[rb - 2];
  if (ka != kb) return std::nullopt;
  if (!p.contracted(ka)) return std::nullopt;
  int16_t m = a[ra - 2], n = b[rb - 1];
  DimLabels r;
  r.rank = ro;
  for (int i = 3; i <= ro; ++i) {
    int ia = ra - i, ib = rb - i;
    int16_t la = ia >= 0 ? a[ia] : kNone, lb = ib >= 0 ? b[ib] : kNone;
    if (la != kNone && lb != kNone && (la != lb || sa[ia] != sb[ib])) return std::nullopt;
    r[ro - i] = la != kNone ? la : lb;
  }
  r[ro - 2] = m;
  r[ro - 1] = n;
  return r;
}

std::optional<DimLabels> sum_labels(const ProgramIndices& p, const DimLabels& a, int dim) {
  if (!p.contracted(a[dim])) return std::nullopt;
  DimLabels r = a;
  r[dim] = kNone;
  return r;
}

IteratorSplit iterator_split(const DimLabels& param, const std::array<int8_t, 3>& imap, int8_t fmap) {
  IteratorSplit s;
  for (int ax = 0; ax < 3; ++ax)
    if (imap[static_cast<size_t>(ax)] != kPhi) s.grid[static_cast<size_t>(ax)] = param[imap[static_cast<size_t>(ax)]];
  if (fmap != kPhi) s.loop = param[fmap];
  return s;
}

std::optional<DimLabels> accum_labels(const ProgramIndices& p, const DimLabels& a, int dim, uint64_t deps,
                                      const std::vector<IteratorSplit>& splits) {
  bool loop_split = false;
  for (size_t i = 0; i < splits.size(); ++i)
    if (((deps >> i) & 1) && splits[i].loop != kNone) loop_split = true;
  // A value that is the same in every iteration is not accumulated (it would be F times itself).
  if (!loop_split) return std::nullopt;
  DimLabels r = a;
  if (dim == kPhi) {
    // Summing over iterations sums the slices the loop split; a dim still holding such a slice
    // would be mixed up, and the split index must be one the program contracts.
    for (int d = 0; d < a.rank; ++d)
      if (a[d] != kNone && (split_bits(a[d]) & kLoopBit)) return std::nullopt;
    for (size_t i = 0; i < splits.size(); ++i)
      if (((deps >> i) & 1) && splits[i].loop != kNone && !p.contracted(splits[i].loop)) return std::nullopt;
    // Summing the slots of a stack of partial results completes their index's contraction:
    // the value no longer ranges over it.
    for (size_t i = 0; i < splits.size(); ++i) {
      if (!((deps >> i) & 1) || splits[i].loop == kNone) continue;
      const int16_t k = index_of(splits[i].loop);
      std::erase_if(r.carriers, [&](const CarrierEntry& e) { return e.index == k && e.factor == kAnyFactor; });
    }
    return r;
  }
  // Concatenating iterations reassembles the one dim the loop split.
  for (int d = 0; d < a.rank; ++d) {
    bool split = a[d] != kNone && (split_bits(a[d]) & kLoopBit);
    if (split != (d == dim)) return std::nullopt;
  }
  r[dim] = static_cast<int16_t>(a[dim] & ~kLoopBit);
  return r;
}

std::optional<DimLabels> saver_labels(const ProgramIndices& p, const DimLabels& a, const std::array<int8_t, 3>& omap,
                                      const Dim3& grid, uint64_t deps, const std::vector<IteratorSplit>& splits) {
  DimLabels r = a;
  for (int ax = 0; ax < 3; ++ax) {
    const int16_t bit = static_cast<int16_t>(1 << ax);
    if (grid[ax] == 1) continue;
    int d = omap[static_cast<size_t>(ax)];
    if (d == kPhi) return std::nullopt;
    int split_dims = 0;
    for (int i = 0; i < a.rank; ++i) split_dims += a[i] != kNone && (split_bits(a[i]) & bit);
    if (split_dims > 1) return std::nullopt;
    if (split_dims == 1) {
      // The tile holds this block's slice of an index: write it there.
      if (a[d] == kNone || !(split_bits(a[d]) & bit)) return std::nullopt;
      r[d] = static_cast<int16_t>(r[d] & ~bit);
      continue;
    }
    // The block contracted its slice of an index: its partial results go side by side along an
    // extent-1 dim, which then ranges over the split index (a later op sums them).
    int16_t split = kNone;
    for (size_t i = 0; i < splits.size(); ++i) {
      if (!((deps >> i) & 1) || splits[i].grid[static_cast<size_t>(ax)] == kNone) continue;
      int16_t l = static_cast<int16_t>(splits[i].grid[static_cast<size_t>(ax)] & ~kSplitBitsMask);
      if (split != kNone && split != l) return std::nullopt;
      split = l;
    }
    if (split == kNone || !p.contracted(split) || is_stack(split)) return std::nullopt;
    if (a[d] == kNone) {
      r[d] = split;
    } else {
      // Along a dim over another index the partials lie side by side as a stack.
      if (split_bits(a[d]) != 0 || label_base(a[d]) >= kConcatBase) return std::nullopt;
      r[d] = p.stack_label(split, a[d]);
    }
    r.carriers.push_back(CarrierEntry{label_base(split), kAnyFactor, 1});
    r.carriers = normalize(std::move(r.carriers));
  }
  for (int i = 0; i < r.rank; ++i)
    if (r[i] != kNone && split_bits(r[i]) != 0) return std::nullopt;  // still split: not a whole DTensor
  return r;
}

}  // namespace mugraph::search_detail

namespace mugraph::search_detail {

std::optional<DimLabels> tile_labels(const ProgramIndices& p, const DimLabels& param, const std::array<int8_t, 3>& imap,
                                     int8_t fmap, const Shape& tile) {
  DimLabels r = param;
  for (int ax = 0; ax < 3; ++ax) {
    int d = imap[static_cast<size_t>(ax)];
    if (d == kPhi || r[d] == kNone) continue;
    if (is_stack(r[d])) return std::nullopt;  // blocks would each hold a few slots
    r[d] = static_cast<int16_t>(r[d] | (1 << ax));
  }
  if (fmap != kPhi && r[fmap] != kNone) {
    const int16_t l = r[fmap];
    const bool partials = std::any_of(param.carriers.begin(), param.carriers.end(), [&](const CarrierEntry& e) {
      return e.factor == kAnyFactor && e.index == label_base(l);
    });
    if (is_stack(l)) {
      if (tile[fmap] != p.extent(stack_slot(l))) return std::nullopt;
      r[fmap] = stack_slot(l);
    } else if (partials && split_bits(l) == 0 && tile[fmap] == 1) {
      r[fmap] = kNone;
    } else {
      r[fmap] = static_cast<int16_t>(l | kLoopBit);
    }
  }
  for (int d = 0; d < r.rank; ++d)
    if (is_stack(r[d])) return std::nullopt;
  return r;
}

std::optional<DimLabels> concat_labels(const ProgramIndices& p, const DimLabels& a, const Shape& sa, const DimLabels& b,
                                       const Shape& sb, int dim) {
  if (sa.rank() != sb.rank()) return std::nullopt;
  DimLabels r = a;
  for (int d = 0; d < sa.rank(); ++d) {
    if (d == dim) continue;
    if (a[d] != b[d] || sa[d] != sb[d]) return std::nullopt;
  }
  r[dim] = p.concat_label(a[dim], b[dim]);
  if (r[dim] == kNone) return std::nullopt;
  return r;
}

std::optional<DimLabels> op_dims(const ProgramIndices& p, OpKind kind, const OpAttrs& attrs,
                                 const std::vector<DimLabels>& in, const std::vector<Shape>& shapes, const Shape& out);

std::optional<DimLabels> op_labels(const ProgramIndices& p, OpKind kind, const OpAttrs& attrs,
                                   const std::vector<DimLabels>& in, const std::vector<Shape>& shapes,
                                   const Shape& out) {
  std::optional<DimLabels> r = op_dims(p, kind, attrs, in, shapes, out);
  if (!r) return r;
  const OpInfo& info = op_info(kind);
  const Carriers& a = in[0].carriers;
  if (kind == OpKind::sqr)
    r->carriers = product(a, a);
  else if (info.category == OpCategory::unary)
    r->carriers = wrap(kind, a);
  else if (info.category == OpCategory::binary && in.size() == 1)
    r->carriers = a;
  else if (kind == OpKind::add || kind == OpKind::sub)
    r->carriers = either(a, in[1].carriers);
  else if (kind == OpKind::mul || kind == OpKind::div)
    r->carriers = product(a, in[1].carriers);
  else if (kind == OpKind::matmul || kind == OpKind::sum) {
    Carriers c = kind == OpKind::matmul ? product(a, in[1].carriers) : a;
    int16_t k = kind == OpKind::matmul ? in[0][shapes[0].rank() - 1] : in[0][attrs.dim];
    if (label_base(k) != kNone && !p.contraction_ok(k, take(c, label_base(k)))) return std::nullopt;
    r->carriers = std::move(c);
  } else if (kind == OpKind::concat) {
    Carriers ca = in[0].carriers, cb = in[1].carriers;
    Carriers pa = take(ca, label_base(in[0][attrs.dim])), pb = take(cb, label_base(in[1][attrs.dim]));
    Carriers c = either(ca, cb);
    for (CarrierEntry e : pa) c.push_back(CarrierEntry{label_base((*r)[attrs.dim]), e.factor, e.count});
    for (CarrierEntry e : pb) c.push_back(CarrierEntry{label_base((*r)[attrs.dim]), e.factor, e.count});
    r->carriers = normalize(std::move(c));
  }
  return r;
}

std::optional<DimLabels> op_dims(const ProgramIndices& p, OpKind kind, const OpAttrs& attrs,
                                 const std::vector<DimLabels>& in, const std::vector<Shape>& shapes, const Shape& out) {
  // A stack of partial results is only read slot by slot and summed (tile_labels).
  for (const DimLabels& l : in)
    for (int d = 0; d < l.rank; ++d)
      if (is_stack(l[d])) return std::nullopt;
  const OpInfo& info = op_info(kind);
  if (info.category == OpCategory::unary) return in[0];
  if (info.category == OpCategory::binary) {
    if (in.size() == 1) return in[0];
    return elementwise_labels(in[0], shapes[0], in[1], shapes[1], out);
  }
  if (kind == OpKind::matmul) return matmul_labels(p, in[0], shapes[0], in[1], shapes[1], out);
  if (kind == OpKind::sum) {
    if (attrs.to != 1) return std::nullopt;
    return sum_labels(p, in[0], attrs.dim);
  }
  if (kind == OpKind::concat && in.size() == 2) return concat_labels(p, in[0], shapes[0], in[1], shapes[1], attrs.dim);
  return std::nullopt;
}

namespace {
std::optional<DimLabels> graph_op_labels(const ProgramIndices& p, const Graph& g, const Op& op,
                                         const std::vector<DimLabels>& in) {
  std::vector<Shape> shapes;
  for (TensorId t : op.inputs) shapes.push_back(g.type(t).shape);
  return op_labels(p, op.kind, op.attrs, in, shapes, g.type(op.outputs[0]).shape);
}
}  // namespace

std::optional<GraphLabels> kernel_graph_labels(const ProgramIndices& p, const Graph& g) {
  GraphLabels r;
  r.tensors.resize(g.tensors.size());
  for (const Op& op : g.ops) {
    std::vector<DimLabels> in;
    for (TensorId t : op.inputs) in.push_back(r.tensors[t.index()]);
    if (op.kind == OpKind::input) {
      r.tensors[op.outputs[0].index()] = p.input(op.attrs.name);
      continue;
    }
    if (op.kind != OpKind::graph_kernel) {
      auto l = graph_op_labels(p, g, op, in);
      if (!l) return std::nullopt;
      r.tensors[op.outputs[0].index()] = *l;
      continue;
    }
    const Graph& body = g.bodies[static_cast<size_t>(op.attrs.body)];
    std::vector<IteratorSplit> splits(op.inputs.size());
    std::vector<DimLabels> bl(body.tensors.size());
    std::vector<uint64_t> deps(body.tensors.size(), 0);
    for (const Op& b : body.ops) {
      if (b.kind == OpKind::input_iterator) {
        size_t i = static_cast<size_t>(b.attrs.io_index);
        splits[i] = iterator_split(in[i], b.attrs.imap, b.attrs.fmap);
        auto tile = tile_labels(p, in[i], b.attrs.imap, b.attrs.fmap, body.type(b.outputs[0]).shape);
        if (!tile) return std::nullopt;
        bl[b.outputs[0].index()] = *tile;
        deps[b.outputs[0].index()] = uint64_t{1} << i;
      }
    }
    for (const Op& b : body.ops) {
      if (b.kind == OpKind::input_iterator) continue;
      std::vector<DimLabels> bin;
      uint64_t dep = 0;
      for (TensorId t : b.inputs) {
        bin.push_back(bl[t.index()]);
        dep |= deps[t.index()];
      }
      std::optional<DimLabels> l;
      if (b.kind == OpKind::output_saver) {
        l = saver_labels(p, bin[0], b.attrs.omap, body.grid, dep, splits);
        if (!l) return std::nullopt;
        r.tensors[op.outputs[static_cast<size_t>(b.attrs.io_index)].index()] = *l;
        continue;
      }
      if (b.kind == OpKind::accum)
        l = accum_labels(p, bin[0], b.attrs.dim, dep, splits);
      else
        l = graph_op_labels(p, body, b, bin);
      if (!l) return std::nullopt;
      bl[b.outputs[0].index()] = *l;
      deps[b.outputs[0].index()] = dep;
    }
  }
  return r;
}

}  // namespace mugraph::search_detail
