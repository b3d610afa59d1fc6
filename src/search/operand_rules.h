// Rules on the operands of a graph-defined kernel, checked before its block graph is grown.
//
// Both rest on the program-tile-values assumption (docs/search.md, "Program tile values"): a
// kernel-graph tensor that holds a value of the program (same normal form, shape and indices)
// is that value, and a μGraph computes what lies between such values the way the program does.
// A block search of a kernel that cannot close explores its whole depth before it gives up (on
// nTrans, hundreds of thousands of states per configuration); these rules refuse such kernels
// before any block op is tried.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "generator.h"

namespace mugraph::search_detail {

/// The program tensors (ids, increasing) a kernel-graph tensor with normal form `nf`, this shape
/// and these kernel-graph labels holds: the same normal form, shape and indices. Empty for
/// `nf` invalid, and when the search runs without program tile values.
std::vector<int32_t> program_values_held(const SearchContext& ctx, NfId nf, const Shape& shape,
                                         const DimLabels& labels);

/// By kernel-graph tensor of `prefix`, the program tensors it holds (ids, increasing; empty for
/// a tensor that holds none, a partial result). `exprs` and `labels` are the prefix's tensor
/// expressions and kernel-graph labels. Empty when the search runs without program tile values.
std::vector<std::vector<int32_t>> held_program_tensors(SearchContext& ctx, const Graph& prefix,
                                                       const std::vector<ExprId>& exprs, const GraphLabels& labels);

/// Whether term e (a partial result's) is made of sums each of which adds up the summand of a
/// contraction of the program (the same normal form), at least one: partial sums of the
/// program's own contractions, which a later kernel completes. False for a sum of something no
/// contraction of the program sums (a reassociation, such as Figure 3b's (X ⊙ G)·W).
bool sums_program_contractions(SearchContext& ctx, ExprId e);

/// The program value (an id) that adding up the partial sums a DTensor of `numel` elements with
/// expression `stack` holds gives, or -1: a value P whose normal form is that of the DTensor's
/// n partials of each element summed, n its size over P's (however the kernel that wrote them
/// laid its slots out). nullopt if a normal form was past its limits (nothing is known).
std::optional<int32_t> completed_stack_value(SearchContext& ctx, ExprId stack, int64_t numel);

/// Whether the last op of `prefix`, a graph-defined kernel, writes partial sums of the program's
/// contractions (sums_program_contractions; no program value's normal form) that no sum of them
/// completes to a program value: it scaled them (c·p_k, c whole) so that c·P is none. A later
/// kernel could only scale them again (c'·p_k) to complete them to one, and the kernel saving
/// p_k scaled by c'·c, or unscaled, is grown too (nTrans: Σ (H − X)² / 4096², saved for a later
/// kernel to multiply by 4096). `exprs`: the prefix's tensor expressions.
bool writes_partial_sums_nothing_completes(SearchContext& ctx, const Graph& prefix, const std::vector<ExprId>& exprs);

/// Whether some operand of a kernel reading `operands` is redundant: it holds program values,
/// and another operand carries each of them, or every path in the program from it to an output
/// passes through a value another operand carries. Whatever the kernel would compute from it,
/// the others already carry (nTrans: after a kernel computing α ⊙ norm(H − X), a kernel reading
/// H, α and that value besides X).
///
/// An operand carries the program values it holds and, if it holds none (a partial result, or a
/// value the program does not spell, such as (X ⊙ G)·W), every program value v whose expression
/// is exactly (SubexprAnswer::yes) a subexpression of its own and from which a chain of single
/// uses leads to an output. Such a v reaches the output only through that chain, and the operand
/// already holds v's share of it: a second copy computed from the first operand could not join
/// it, as abstract expressions never cancel (RMSNorm: after a kernel writing partial sums of
/// (X ⊙ G)·W and of X², a kernel reading them besides X or G). An operand read twice
/// (SearchContext::may_read_twice) is not redundant by its own copy. `exprs`: the prefix's
/// tensor expressions.
bool has_redundant_operand(SearchContext& ctx, const std::vector<std::vector<int32_t>>& held,
                           const std::vector<ExprId>& exprs, const std::vector<TensorId>& operands);

/// The program's steps: the values that lead to an output and that, under the index and
/// program-tile-values assumptions (docs/search.md, "What prunes"), any μGraph computes with an
/// op of its own, no op computing two of them. One per normal form (a step without one is left
/// out), in program order:
/// - contractions (matmul, sum): an op contracts one index over the factors of one of the
///   program's contractions;
/// - silu, relu and gelu applications: no axiom relates them to anything (exp and sqrt are left
///   out: exp(x)·exp(y) is exp(x + y), and sqrt(x)·sqrt(y) is sqrt(x·y));
/// - joins: a binary element-wise op of two tensors of its own shape, one of them a contraction
///   or an application (the gated MLP's silu(X·W1) ⊙ (X·W2)). The other tensor cannot be moved
///   into the first's op: a function does not take it in, a matmul's result (two dims over 1)
///   has an index that each of its operands lacks, and moving it into a sum's summand takes an
///   op too, unless the last graph-defined kernel computes the product, and then it computes
///   the sum as well;
/// - outputs that no step makes (a residual add): a contraction or an application makes no
///   such value.
std::vector<ProgramStep> find_program_steps(const Graph& program, const std::vector<ProgramValue>& values);

/// The program's steps (SearchContext::program_steps, by index) inside no value a prefix tensor
/// holds. A prefix tensor that holds partial sums of the program's contractions holds no step (a
/// sum must still complete them); nullopt (no rule) when one holds another value that is no
/// program value, a reassociation such as Figure 3b's (X ⊙ G)·W, which a single op may turn into
/// a value past several steps. `held`: held_program_tensors of the prefix; `exprs`: its tensors'
/// expressions. Depends on the prefix alone: a kernel task computes it once for all its operand
/// sets.
std::optional<std::vector<size_t>> steps_not_held(SearchContext& ctx, const std::vector<std::vector<int32_t>>& held,
                                                  const std::vector<ExprId>& exprs);

/// How many of the steps `not_held` (steps_not_held) are still to compute after a graph-defined
/// kernel whose operands depend on the program inputs `kernel_vars` (var bits, as
/// Generator::vars_of; 0: no kernel, all of them): those the kernel cannot compute, since an
/// input they depend on is not among its operands'. When only pre-defined kernels may follow (no
/// graph-defined kernel is left), each of them needs one.
int steps_left(Generator& gen, const SearchContext& ctx, const std::vector<size_t>& not_held, uint64_t kernel_vars);

/// For a kernel that must finish the program (no kernel follows it) reading `operands`: per
/// operand, the program indices (bit i: index i) that its tiles must not be split along by a
/// grid axis. Blocks do not communicate, so a contraction over index i that this kernel must
/// compute (it lies between the operands' values and an output no prefix tensor holds) needs
/// every value of i of each operand its summand is computed from; a block holding a slice of
/// i has a partial sum, which only a later kernel could complete. An operand that holds no
/// program value (a partial result) may complete the program's contractions whose summand its
/// outermost sums add up (nTrans: the blocks' sums of (H − X)² complete sum((H − X)²)); those
/// are not computed again. All zero (no rule) when such an operand has a sum of something no
/// contraction of the program sums (a reassociation: what it lacks is unknown), or a program
/// value is held by two operands. `exprs`: the prefix's tensor expressions.
std::vector<uint64_t> unsplittable_indices(SearchContext& ctx, const Graph& prefix,
                                           const std::vector<std::vector<int32_t>>& held,
                                           const std::vector<ExprId>& exprs, const std::vector<TensorId>& operands);

/// Whether configuration `c` splits an operand along one of its unsplittable indices by a grid
/// axis. `labels`: the prefix's kernel-graph labels.
bool splits_unsplittable(const KernelConfig& c, const std::vector<TensorId>& operands, const GraphLabels& labels,
                         const std::vector<uint64_t>& unsplittable);

}  // namespace mugraph::search_detail
