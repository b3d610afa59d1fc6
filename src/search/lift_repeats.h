// Repeats turned into broadcasts before a search (docs/search.md, "Repeats as broadcasts").
//
// A repeat copies a tensor; the generator does not grow it, so a search keeps it as a kernel
// that writes every copy, and fuses nothing across it. Grouped-query attention written as
// PyTorch writes it is the common case: K and V repeated to one head per query head, then the
// attention. Most ops commute with a repeat, and a matmul or an element-wise op whose other
// operand holds every copy's worth of values reads the unrepeated tensor through a broadcast
// just as well, once that operand's repeated dimension is split in two (a view). This rewrite
// does that, so the attention is searched as one program and the copies are never written.
#pragma once

#include <string>
#include <vector>

#include "mugraph/graph.h"

namespace mugraph::search_detail {

struct RepeatLift {
  /// The program with every repeat it could lift rewritten; equal to the program where none.
  Graph program;
  /// Per lifted repeat: "repeat (KR)", its op's summary.
  std::vector<std::string> lifted;
  /// Per repeat left as it is and read by an op the generator grows: its summary and why.
  std::vector<std::string> kept;
};

/// Rewrites `program` (pre-defined ops, topologically ordered) so that its repeats are
/// broadcasts where that is exact and adds no cut between ops the search grows:
/// - R = repeat(X, dim=d, times=t), X of extent n at d, is X viewed with dims (1, n) at d; and
///   the form PyTorch's expand or repeat_interleave gives, R = reshape(repeat(X1, dim=e,
///   times=t)) with X1 of extent 1 at e and the reshape merging e with its neighbour, is X1.
/// - Each op that reads R (and what it makes, and so on) reads the split form instead, if it is
///   element-wise, a sum over another dimension, or a matmul whose batch dimensions hold the
///   repeated one. Its other operands are split too: by a reshape where they hold the full
///   extent (a program input, or a tensor a kept op makes: a view, no new cut), not at all
///   where they broadcast there, and through their own lift where they are repeats alike.
/// - Where a value leaves the rewritten ops (a program output, or read by a kept op) it is
///   repeated and merged back to its shape: the one copy left, written by the last kernel.
/// A repeat read by an op that cannot take the split form (a sum over the repeated dimension,
/// a matmul that contracts it) is kept, with the reason in `kept`.
RepeatLift lift_repeats(const Graph& program);

}  // namespace mugraph::search_detail
