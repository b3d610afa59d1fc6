// Index labels: which index of the program each dimension of a tensor stands for.
//
// The abstract expressions of the paper erase indices: sum(k, ·) is a formal coefficient, so
// sum(X, dim=0) and sum(X, dim=1) of an RMSNorm are both "subexpressions" of the program, and so
// is G·W with G broadcast along W's wrong dimension. The search therefore also tracks, for every
// dimension of every tensor, the index of the program it ranges over (its label, found by
// unifying dimensions through the program's ops) and keeps only ops that use indices the way the
// program can: element-wise ops combine equal indices, sums and matmuls contract only indices the
// program contracts, accumulators sum over iterations only along contracted indices, and output
// savers place each block's tile along the index its grid axis split. These rules are what makes
// the search tractable; docs/search.md states the assumption they rest on (a μGraph equivalent to
// the program computes every intermediate value over the program's own indices) and what it rules
// out (index-permuting tricks no benchmark needs).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "mugraph/graph.h"

namespace mugraph::search_detail {

/// Label of a dimension: a program index class (≥ 0), kNone for an extent-1 dimension that
/// stands for no index (a reduced or broadcast dimension).
inline constexpr int16_t kNone = -1;

/// Block-level labels carry split bits: label = base · kLabelStride + bits, with these bits for the
/// grid's x, y and z axes (bit 1 << axis) and the for-loop (a tile holding a slice of the index:
/// summing over it gives a partial result).
inline constexpr int16_t kGridXBit = 1, kGridYBit = 2, kGridZBit = 4, kLoopBit = 8;
inline constexpr int kLabelShift = 4;
inline constexpr int16_t kLabelStride = 1 << kLabelShift;
inline constexpr int16_t kSplitBitsMask = kLabelStride - 1;
/// The split bits of a label (0 for kNone).
inline int16_t split_bits(int16_t label) { return label < 0 ? 0 : static_cast<int16_t>(label & kSplitBitsMask); }
/// Whether a block tile's label marks its index as split by a grid axis or the for-loop.
inline bool is_split(int16_t label) { return split_bits(label) != 0; }
/// The program index a label stands for, without its split bits (kNone stays kNone).
inline int16_t label_base(int16_t label) { return label < 0 ? kNone : static_cast<int16_t>(label >> kLabelShift); }

/// Label bases: program indices below kMaxProgramIndices, then the concatenations of two
/// (ProgramIndices::concat_label), then the stacks of partial results (ProgramIndices::stack_label).
/// (30 keeps every label, split bits included, within int16_t: see labels.cpp.)
inline constexpr int kMaxProgramIndices = 30;
inline constexpr int kConcatBase = 64;
inline constexpr int kStackBase = kConcatBase + kMaxProgramIndices * kMaxProgramIndices;
/// Whether a label is a stack of partial results (see ProgramIndices::stack_label).
inline bool is_stack(int16_t label) { return label_base(label) >= kStackBase; }
/// The contracted index whose partial results a stack label holds (a base label, no bits).
inline int16_t stack_index(int16_t label) {
  return static_cast<int16_t>((label_base(label) - kStackBase) / kMaxProgramIndices * kLabelStride);
}
/// The index each slot of a stack ranges over (a base label, no bits).
inline int16_t stack_slot(int16_t label) {
  return static_cast<int16_t>((label_base(label) - kStackBase) % kMaxProgramIndices * kLabelStride);
}
/// The program index a dim ranges over, a stack's counting as its contracted index (a base, no
/// bits; kNone stays kNone).
inline int16_t index_of(int16_t label) {
  if (label < 0) return kNone;
  return is_stack(label) ? label_base(stack_index(label)) : label_base(label);
}

/// The set of program indices (bases) of labels, as bits.
struct DimLabels;
uint64_t index_set(const DimLabels& l);

/// One entry of a value's carriers: program index `index` (a base label) is carried by `count`
/// occurrences of `factor` (a program input, or a non-linear op applied to one; kAnyFactor
/// marks partial results whose contraction was checked where it began).
struct CarrierEntry {
  int16_t index = 0;
  uint32_t factor = 0;
  int32_t count = 0;
  friend bool operator==(const CarrierEntry&, const CarrierEntry&) = default;
  friend auto operator<=>(const CarrierEntry&, const CarrierEntry&) = default;
};
inline constexpr uint32_t kAnyFactor = 0;

struct DimLabels {
  int rank = 0;
  std::array<int16_t, kMaxRank> dims{};
  /// For every index the value ranges over, which factors carry it (sorted). A contraction
  /// (sum, matmul) of index i must sum a product whose i-carrying factors are exactly those of
  /// one of the program's contractions of i: summing X over k where the program sums X·X over k
  /// is not part of the program, whatever sum-past-mul lets the abstract expressions say.
  std::vector<CarrierEntry> carriers;
  /// Same dims (carriers not compared).
  bool same_dims(const DimLabels& o) const { return rank == o.rank && dims == o.dims; }
  int16_t operator[](int i) const { return dims[static_cast<size_t>(i)]; }
  int16_t& operator[](int i) { return dims[static_cast<size_t>(i)]; }
  bool contains(int16_t l) const {
    for (int i = 0; i < rank; ++i)
      if (dims[static_cast<size_t>(i)] == l) return true;
    return false;
  }
  friend bool operator==(const DimLabels&, const DimLabels&) = default;
};

/// The labels of a program: per input name and per output, and which indices it contracts.
class ProgramIndices {
 public:
  explicit ProgramIndices(const Graph& program);

  /// Labels of the program input with this name. @pre the name is an input of the program
  const DimLabels& input(const std::string& name) const;
  /// Labels of program output j.
  const DimLabels& output(size_t j) const { return outputs_[j]; }
  /// Whether the program contracts index l (a label) over a product whose l-carrying factors are
  /// `carried` (the entries of index base(l), sorted).
  bool contraction_ok(int16_t l, const std::vector<CarrierEntry>& carried) const;

  /// Whether the program sums over index l somewhere (sum or matmul).
  bool contracted(int16_t l) const;
  /// The program indices (as bits) that share no program tensor with index `index` (a label
  /// base): no value of the program ranges over both, so no product pairs their slices. Only
  /// indices the program never sums over are apart from anything (0 for one it sums): blocks
  /// that split a summed index write partial sums that only a later kernel finishes, and the
  /// exception is for independent outputs (Q's, K's and V's columns), not for pairing partial
  /// sums with slices of another index (attention's key width, summed, and its value width
  /// share no tensor either).
  uint64_t apart_from(int16_t index) const;
  /// Whether a non-linear op (sqrt, exp, silu, relu, gelu) or the denominator of a div (kind
  /// div) may act on a value over the indices of `labels`: the program applies that op to a value
  /// whose index set contains them. No axiom moves a sum into or out of such an op, so an op on
  /// a value that still holds an index the program contracts first cannot be part of the program.
  bool nonlinear_ok(OpKind kind, const DimLabels& labels) const;

  /// The label of the concatenation of indices a and b (the LoRA rewrite's (W‖B)), contracted if
  /// both are.
  int16_t concat_label(int16_t a, int16_t b) const;

  /// The label of a dim holding one block's partial result per slice of contracted index k side
  /// by side, each slot ranging over index `slot` (labels without split bits): the blocks split
  /// k, contracted their slice, and an output saver placed their results along a dim over
  /// `slot` (a dim of extent 1 instead simply ranges over k). Such a dim is only ever read one
  /// slot per iteration of a for-loop whose accumulator sums the slots (tile_labels), which
  /// completes the contraction of k: FlashDecoding's split of the key/value sequence.
  int16_t stack_label(int16_t k, int16_t slot) const;

  /// The extent of the program index a label stands for (1 for kNone; a stack's is its slot's).
  int64_t extent(int16_t l) const;

 private:
  std::vector<std::pair<std::string, DimLabels>> inputs_;
  std::vector<DimLabels> outputs_;
  std::vector<bool> contracted_;
  std::vector<uint64_t> apart_;                                              // by program index: apart_from's answer
  std::vector<int64_t> extents_;                                             // by program index
  std::vector<std::pair<OpKind, uint64_t>> nonlinear_;                       // op kind, index set of its operand
  std::vector<std::pair<int16_t, std::vector<CarrierEntry>>> contractions_;  // base label, carriers
};

/// Label rules of the ops the generator appends. Each returns nullopt when the op would use
/// indices in a way the program cannot (the generator prunes it).
std::optional<DimLabels> elementwise_labels(const DimLabels& a, const Shape& sa, const DimLabels& b, const Shape& sb,
                                            const Shape& out);
std::optional<DimLabels> matmul_labels(const ProgramIndices& p, const DimLabels& a, const Shape& sa, const DimLabels& b,
                                       const Shape& sb, const Shape& out);
std::optional<DimLabels> sum_labels(const ProgramIndices& p, const DimLabels& a, int dim);

/// Labels of every tensor of a kernel graph built by the generator, and of the tensors of every
/// body (block tensors: by body index, then tensor id). nullopt if some op breaks the rules.
struct GraphLabels {
  std::vector<DimLabels> tensors;
};
std::optional<GraphLabels> kernel_graph_labels(const ProgramIndices& p, const Graph& g);

/// For the block level: the labels an iterator's tile carries (those of its DTensor), and the
/// per-input label of the dims an iterator's imap (per grid axis) and fmap split.
struct IteratorSplit {
  std::array<int16_t, 3> grid{kNone, kNone, kNone};
  int16_t loop = kNone;
};
IteratorSplit iterator_split(const DimLabels& param, const std::array<int8_t, 3>& imap, int8_t fmap);

/// The labels of an iterator's tile of extents `tile`: its DTensor's labels with the split bits
/// of the maps. Two loops read a stack of partial results (saver_labels), a slot per iteration:
/// a for-loop over a stack dim whose tile is one slot (the tile then ranges over the slot's
/// index), and a for-loop over a dim of partials of an extent-1 value (carried by kAnyFactor)
/// whose tile is one partial (the tile then has no index there); accumulating either over the
/// iterations sums the partials. nullopt if the tile holds a stack in any other way.
std::optional<DimLabels> tile_labels(const ProgramIndices& p, const DimLabels& param, const std::array<int8_t, 3>& imap,
                                     int8_t fmap, const Shape& tile);

/// concat(a, b) along dim: equal labels elsewhere; dim gets the concatenated index.
std::optional<DimLabels> concat_labels(const ProgramIndices& p, const DimLabels& a, const Shape& sa, const DimLabels& b,
                                       const Shape& sb, int dim);

/// Labels of the output of a pre-defined-kind op (element-wise, matmul, sum, concat) from its
/// operands' labels and shapes and its output shape.
std::optional<DimLabels> op_labels(const ProgramIndices& p, OpKind kind, const OpAttrs& attrs,
                                   const std::vector<DimLabels>& in, const std::vector<Shape>& shapes,
                                   const Shape& out);

/// accum over the iterations of a tensor that depends on iterators `deps` (bit set):
/// dim = kPhi sums, else concatenates along dim. nullopt if not index-consistent.
std::optional<DimLabels> accum_labels(const ProgramIndices& p, const DimLabels& a, int dim, uint64_t deps,
                                      const std::vector<IteratorSplit>& splits);

/// The labels of the DTensor an output saver writes from a tile with labels `a` depending on
/// iterators `deps`, or nullopt if the omap does not reassemble what the grid split.
std::optional<DimLabels> saver_labels(const ProgramIndices& p, const DimLabels& a, const std::array<int8_t, 3>& omap,
                                      const Dim3& grid, uint64_t deps, const std::vector<IteratorSplit>& splits);

}  // namespace mugraph::search_detail
