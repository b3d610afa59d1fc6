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

/// Block-level labels carry split bits: label = base · 8 + bits, with these bits for the grid's x
/// and y axes and the for-loop (a tile holding a slice of the index: summing over it gives a
/// partial result).
inline constexpr int16_t kGridXBit = 1, kGridYBit = 2, kLoopBit = 4;
/// The split bits of a label (0 for kNone).
inline int16_t split_bits(int16_t label) { return label < 0 ? 0 : static_cast<int16_t>(label & 7); }
/// Whether a block tile's label marks its index as split by a grid axis or the for-loop.
inline bool is_split(int16_t label) { return split_bits(label) != 0; }
/// The program index a label stands for, without its split bits (kNone stays kNone).
inline int16_t label_base(int16_t label) { return label < 0 ? kNone : static_cast<int16_t>(label >> 3); }

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
  /// Whether a non-linear op (sqrt, exp, silu, relu, gelu) or the denominator of a div (kind
  /// div) may act on a value over the indices of `labels`: the program applies that op to a value
  /// whose index set contains them. No axiom moves a sum into or out of such an op, so an op on
  /// a value that still holds an index the program contracts first cannot be part of the program.
  bool nonlinear_ok(OpKind kind, const DimLabels& labels) const;

  /// The label of the concatenation of indices a and b (the LoRA rewrite's (W‖B)), contracted if
  /// both are.
  int16_t concat_label(int16_t a, int16_t b) const;

 private:
  std::vector<std::pair<std::string, DimLabels>> inputs_;
  std::vector<DimLabels> outputs_;
  std::vector<bool> contracted_;
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

/// The labels of an iterator's tile: its DTensor's labels with the split bits of the maps.
DimLabels tile_labels(const DimLabels& param, const std::array<int8_t, 3>& imap, int8_t fmap);

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
