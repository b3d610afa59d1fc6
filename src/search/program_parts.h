// A program the generator cannot grow whole, cut into parts it can. The generator grows
// element-wise ops, sums to one value and matmuls; a program's layout ops (reshape, repeat,
// concat) and its sums to several values are left as the pre-defined kernels they are, and the
// ops between them are searched part by part (docs/search.md, "Programs with layout ops").
#pragma once

#include <string>
#include <vector>

#include "mugraph/graph.h"

namespace mugraph::search_detail {

/// Whether the generator grows `op` (a pre-defined op of a program): every kind but the layout
/// ops and sums to more than one value.
bool generator_grows(const Op& op);

/// One searchable part of a program: a program of its own, whose inputs stand for tensors of the
/// whole program and whose outputs are the part's values that something outside it reads.
struct ProgramPart {
  Graph program;
  /// Per input op of `program`, in order: the whole program's tensor it stands for.
  std::vector<TensorId> inputs;
  /// Per output of `program`, in order: the whole program's tensor it computes.
  std::vector<TensorId> outputs;
  /// The whole program's ops it holds, in order.
  std::vector<OpId> ops;
};

/// A program cut at the ops the generator does not grow.
struct ProgramSplit {
  std::vector<ProgramPart> parts;
  /// The program's ops left as they are (neither inputs nor in a part), in order.
  std::vector<OpId> kept;
  /// Parts and kept ops in an order that computes each before what reads it: an entry p >= 0 is
  /// parts[p], an entry -1 - i is kept[i].
  std::vector<int> order;
};

/// Cuts `program` (pre-defined ops, topologically ordered) into parts: maximal sets of ops the
/// generator grows that are connected through the tensors they pass each other, and that no
/// kept op separates (a part never reads what a kept op makes of its own values, so each part
/// can be searched, and later computed, in one go). A program every op of which the generator
/// grows is one part. Part inputs are named after the program's inputs, or after the tensor
/// ("t" and its id where it has no name or its name is taken).
/// `cuts`: tensors the parts are cut at as well, as if a kept op sat on each (its reader is in
/// another part than its producer unless a path that avoids the cuts joins them).
ProgramSplit split_program(const Graph& program, const std::vector<TensorId>& cuts = {});

/// The operands of the program's matmuls that a matmul computed, directly or through other
/// grown ops (the input of a down projection after a gated MLP): where a program too large to
/// search whole is cut (search.cpp), so that a part chains two matmuls only where other values
/// join them.
std::vector<TensorId> chained_matmul_operands(const Graph& program);

/// The operands of the program's matmuls that grown ops computed (a LayerNorm's output before
/// its projection): where a program without chained matmuls, or a part of one cut at them, is
/// cut when it is still too large to search whole (search.cpp).
std::vector<TensorId> computed_matmul_operands(const Graph& program);

/// The μGraph that computes `program` from its split: the kept ops as pre-defined kernels and
/// each part as `part_graphs[p]`, a μGraph equivalent to parts[p].program (its inputs matched by
/// name, its outputs by position).
Graph join_parts(const Graph& program, const ProgramSplit& split, const std::vector<const Graph*>& part_graphs);

/// What a kept op is, for messages: "reshape (O)" with the name of the tensor it makes, if any.
std::string kept_op_summary(const Graph& program, OpId op);

}  // namespace mugraph::search_detail
