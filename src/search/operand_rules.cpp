// Rules on a graph-defined kernel's operands (operand_rules.h).
#include "operand_rules.h"

#include <algorithm>

namespace mugraph::search_detail {

namespace {

/// Whether some program output is reachable from program tensor `from` by a path of one op or
/// more that enters no tensor of `blocked`.
bool reaches_output_avoiding(const SearchContext& ctx, int32_t from, const std::vector<bool>& blocked) {
  const auto& consumers = ctx.program_consumers();
  std::vector<bool> seen(consumers.size(), false);
  std::vector<int32_t> stack{from};
  while (!stack.empty()) {
    const int32_t t = stack.back();
    stack.pop_back();
    for (int32_t c : consumers[static_cast<size_t>(t)]) {
      if (blocked[static_cast<size_t>(c)] || seen[static_cast<size_t>(c)]) continue;
      if (ctx.is_program_output(c)) return true;
      seen[static_cast<size_t>(c)] = true;
      stack.push_back(c);
    }
  }
  return false;
}

/// The normal forms of the summands of the outermost sums of term e (nested sums are looked
/// through): what a partial result's sums add up. False if one has none (its limits).
bool outer_summands(SearchContext& ctx, ExprId e, std::vector<NfId>& out) {
  const ExprNode& n = ctx.exprs().node(e);
  if (n.kind == ExprKind::sum) {
    // Through nested sums, and through a sum scaled by constants inside one: a loop's
    // accumulator over (Σ_k' X²) / n adds up X² (the norm's mean of squares, split), and one
    // over (Σ_k' X²) / n / n adds up X² too (scaled so that no program value is its sum: the
    // kernel reading it refuses it: generator.cpp, stack_operand_rejection).
    ExprId inner = n.a;
    for (;;) {
      const ExprNode& i = ctx.exprs().node(inner);
      if (i.kind == ExprKind::sum) {
        inner = i.a;
        continue;
      }
      ExprId scaled = inner;
      for (;;) {
        const ExprNode& c = ctx.exprs().node(scaled);
        if ((c.kind == ExprKind::div || c.kind == ExprKind::mul) && ctx.exprs().node(c.b).kind == ExprKind::constant)
          scaled = c.a;
        else if (c.kind == ExprKind::mul && ctx.exprs().node(c.a).kind == ExprKind::constant)
          scaled = c.b;
        else
          break;
      }
      if (scaled != inner && ctx.exprs().node(scaled).kind == ExprKind::sum) {
        inner = scaled;
        continue;
      }
      break;
    }
    NfResult nf = normal_form(inner, ctx.exprs(), ctx.normal_forms());
    if (nf.stop != NfStop::none) return false;
    out.push_back(nf.id);
    return true;
  }
  const int arity = expr_arity(n.kind);
  return (arity < 1 || outer_summands(ctx, n.a, out)) && (arity < 2 || outer_summands(ctx, n.b, out));
}

/// Whether some contraction of the program sums a summand with normal form `summand`.
bool a_contraction_sums(const SearchContext& ctx, NfId summand) {
  const std::vector<ProgramValue>& values = ctx.program_values();
  return std::any_of(values.begin(), values.end(),
                     [&](const ProgramValue& v) { return v.summand_nf.valid() && v.summand_nf == summand; });
}

}  // namespace

bool sums_program_contractions(SearchContext& ctx, ExprId e) {
  std::vector<NfId> summands;
  if (!outer_summands(ctx, e, summands) || summands.empty()) return false;
  return std::all_of(summands.begin(), summands.end(), [&](NfId s) { return a_contraction_sums(ctx, s); });
}

std::optional<int32_t> completed_stack_value(SearchContext& ctx, ExprId stack, int64_t numel) {
  const std::vector<ProgramValue>& values = ctx.program_values();
  const Graph& program = ctx.program();
  for (size_t t = 0; t < values.size(); ++t) {
    const int64_t whole = program.tensors[t].type.shape.numel();
    if (numel % whole != 0 || numel / whole < 2) continue;
    // A value whose normal form is past the limits equals no form within them.
    const NfResult nf = normal_form(ctx.exprs().sum(numel / whole, stack), ctx.exprs(), ctx.normal_forms());
    if (nf.stop != NfStop::none) return std::nullopt;
    if (values[t].nf.valid() && nf.id == values[t].nf) return static_cast<int32_t>(t);
  }
  return -1;
}

bool writes_partial_sums_nothing_completes(SearchContext& ctx, const Graph& prefix, const std::vector<ExprId>& exprs) {
  const std::vector<ProgramValue>& values = ctx.program_values();
  if (values.empty() || prefix.ops.empty() || prefix.ops.back().kind != OpKind::graph_kernel) return false;
  for (TensorId t : prefix.ops.back().outputs) {
    const ExprId e = exprs[t.index()];
    const NfResult nf = normal_form(e, ctx.exprs(), ctx.normal_forms());
    if (nf.stop != NfStop::none) continue;
    // A whole value (a program value's normal form, over its indices or others) is no partial
    // sum, as the kernels reading it take it (generator.cpp, find_program_tiles).
    if (std::any_of(values.begin(), values.end(), [&](const ProgramValue& v) { return v.nf == nf.id; })) continue;
    if (!sums_program_contractions(ctx, e)) continue;
    const std::optional<int32_t> completion = completed_stack_value(ctx, e, prefix.type(t).shape.numel());
    if (completion && *completion < 0) return true;
  }
  return false;
}

std::vector<int32_t> program_values_held(const SearchContext& ctx, NfId nf, const Shape& shape,
                                         const DimLabels& labels) {
  std::vector<int32_t> held;
  if (!nf.valid()) return held;
  const std::vector<ProgramValue>& values = ctx.program_values();
  const Graph& program = ctx.program();
  for (size_t p = 0; p < values.size(); ++p)
    if (values[p].nf == nf && program.tensors[p].type.shape == shape && values[p].labels.same_dims(labels))
      held.push_back(static_cast<int32_t>(p));
  return held;
}

std::vector<std::vector<int32_t>> held_program_tensors(SearchContext& ctx, const Graph& prefix,
                                                       const std::vector<ExprId>& exprs, const GraphLabels& labels) {
  std::vector<std::vector<int32_t>> held(prefix.tensors.size());
  if (ctx.program_values().empty()) return held;
  for (size_t t = 0; t < prefix.tensors.size(); ++t) {
    NfResult nf = normal_form(exprs[t], ctx.exprs(), ctx.normal_forms());
    if (nf.stop != NfStop::none) continue;
    held[t] = program_values_held(ctx, nf.id, prefix.tensors[t].type.shape, labels.tensors[t]);
  }
  return held;
}

bool has_redundant_operand(SearchContext& ctx, const std::vector<std::vector<int32_t>>& held,
                           const std::vector<ExprId>& exprs, const std::vector<TensorId>& operands) {
  const std::vector<ProgramValue>& values = ctx.program_values();
  const size_t n = values.size();
  if (n == 0) return false;
  // What each operand carries (the function comment): the program values it holds, or for one
  // that holds none, the values on a single-use chain to an output inside its expression.
  std::vector<std::vector<int32_t>> carried(operands.size());
  const std::vector<bool>& chain = ctx.program_single_use_chains();
  for (size_t k = 0; k < operands.size(); ++k) {
    carried[k] = held[operands[k].index()];
    if (!carried[k].empty()) continue;
    for (size_t v = 0; v < n; ++v)
      if (chain[v] && ctx.oracle().decide(values[v].expr, exprs[operands[k].index()]) == SubexprAnswer::yes)
        carried[k].push_back(static_cast<int32_t>(v));
  }
  for (size_t k = 0; k < operands.size(); ++k) {
    const std::vector<int32_t>& mine = held[operands[k].index()];
    if (mine.empty()) continue;
    std::vector<bool> blocked(n, false);
    // An operand read twice (SearchContext::may_read_twice) is not redundant by its copy.
    for (size_t v = 0; v < operands.size(); ++v)
      if (v != k && operands[v] != operands[k])
        for (int32_t p : carried[v]) blocked[static_cast<size_t>(p)] = true;
    // A value another operand carries is not needed from this one either.
    bool needed = false;
    for (int32_t p : mine) needed |= !blocked[static_cast<size_t>(p)] && reaches_output_avoiding(ctx, p, blocked);
    if (!needed) return true;
  }
  return false;
}

std::vector<ProgramStep> find_program_steps(const Graph& program, const std::vector<ProgramValue>& values) {
  const size_t n = values.size();
  std::vector<ProgramStep> steps;
  if (n == 0) return steps;
  auto kind_of = [&](size_t t) { return program.op(program.tensors[t].producer).kind; };
  auto contracts_or_applies = [&](size_t t) {
    const OpKind k = kind_of(t);
    return k == OpKind::matmul || k == OpKind::sum || k == OpKind::silu || k == OpKind::relu || k == OpKind::gelu;
  };
  // A factor of a join can be moved into an operand of a matmul whose result has a dim of 1
  // among its last two ([i, k]·[k, 1] ⊙ v[i, 1] = ([i, k] ⊙ v)·[k, 1]).
  auto keeps_factors_out = [&](size_t t) {
    if (kind_of(t) != OpKind::matmul) return contracts_or_applies(t);
    const Shape& s = program.tensors[t].type.shape;
    return s[s.rank() - 1] > 1 && s[s.rank() - 2] > 1;
  };
  std::vector<bool> reaches_output(n, false);
  for (TensorId o : program.outputs)
    for (size_t t = 0; t < n; ++t) reaches_output[t] = reaches_output[t] || values[o.index()].cone[t];
  for (size_t t = 0; t < n; ++t) {
    if (!reaches_output[t] || !values[t].nf.valid()) continue;
    const Op& op = program.op(program.tensors[t].producer);
    if (op.kind == OpKind::input) continue;
    const Shape& shape = program.tensors[t].type.shape;
    const bool join = op_info(op.kind).category == OpCategory::binary && op.inputs.size() == 2 &&
                      program.type(op.inputs[0]).shape == shape && program.type(op.inputs[1]).shape == shape &&
                      (keeps_factors_out(op.inputs[0].index()) || keeps_factors_out(op.inputs[1].index()));
    const bool output = std::find(program.outputs.begin(), program.outputs.end(), TensorId(static_cast<int32_t>(t))) !=
                        program.outputs.end();
    if (!contracts_or_applies(t) && !join && !output) continue;
    auto same = std::find_if(steps.begin(), steps.end(), [&](const ProgramStep& s) {
      return values[static_cast<size_t>(s.tensors[0])].nf == values[t].nf;
    });
    if (same != steps.end())
      same->tensors.push_back(static_cast<int32_t>(t));
    else
      steps.push_back({values[t].expr, {static_cast<int32_t>(t)}});
  }
  return steps;
}

std::optional<std::vector<size_t>> steps_not_held(SearchContext& ctx, const std::vector<std::vector<int32_t>>& held,
                                                  const std::vector<ExprId>& exprs) {
  const std::vector<ProgramValue>& values = ctx.program_values();
  const std::vector<ProgramStep>& steps = ctx.program_steps();
  std::vector<bool> done(steps.size(), false);
  for (size_t p = 0; p < held.size(); ++p) {
    if (held[p].empty()) {
      if (steps.empty() || sums_program_contractions(ctx, exprs[p])) continue;
      return std::nullopt;
    }
    for (int32_t v : held[p])
      for (size_t s = 0; s < steps.size(); ++s)
        for (int32_t t : steps[s].tensors)
          done[s] = done[s] || values[static_cast<size_t>(v)].cone[static_cast<size_t>(t)];
  }
  std::vector<size_t> left;
  for (size_t s = 0; s < steps.size(); ++s)
    if (!done[s]) left.push_back(s);
  return left;
}

int steps_left(Generator& gen, const SearchContext& ctx, const std::vector<size_t>& not_held, uint64_t kernel_vars) {
  if (kernel_vars == 0) return static_cast<int>(not_held.size());
  const std::vector<ProgramStep>& steps = ctx.program_steps();
  return static_cast<int>(std::count_if(not_held.begin(), not_held.end(),
                                        [&](size_t s) { return (gen.vars_of(steps[s].expr) & ~kernel_vars) != 0; }));
}

std::vector<uint64_t> unsplittable_indices(SearchContext& ctx, const Graph& prefix,
                                           const std::vector<std::vector<int32_t>>& held,
                                           const std::vector<ExprId>& exprs, const std::vector<TensorId>& operands) {
  std::vector<uint64_t> out(operands.size(), 0);
  const std::vector<ProgramValue>& values = ctx.program_values();
  const size_t n = values.size();
  if (n == 0) return out;
  // Which operand holds each program tensor; which operands may complete each contraction.
  std::vector<int> holder(n, -1);
  std::vector<uint32_t> completes(n, 0);
  for (size_t k = 0; k < operands.size(); ++k) {
    const std::vector<int32_t>& mine = held[operands[k].index()];
    if (mine.empty()) {
      // A partial result. Each of its outermost sums must add up what a contraction of the
      // program sums (the same summand), or what it still lacks is unknown here (a
      // reassociation, such as Figure 3b's (X ⊙ G)·W): the rule is then silent. This operand
      // may complete those contractions; one with no sum completes none (a product of inputs).
      std::vector<NfId> summands;
      if (!outer_summands(ctx, exprs[operands[k].index()], summands)) return out;
      for (NfId s : summands) {
        if (!a_contraction_sums(ctx, s)) return out;
        for (size_t p = 0; p < n; ++p)
          if (values[p].summand_nf.valid() && values[p].summand_nf == s) completes[p] |= 1u << k;
      }
      continue;
    }
    for (int32_t p : mine) {
      if (holder[static_cast<size_t>(p)] >= 0) return out;  // either could supply it
      holder[static_cast<size_t>(p)] = static_cast<int>(k);
    }
  }
  std::vector<bool> produced(n, false);
  for (size_t t = 0; t < prefix.tensors.size(); ++t)
    for (int32_t p : held[t]) produced[static_cast<size_t>(p)] = true;

  // What the kernel must compute: the program tensors between the operands' values and the
  // outputs not yet produced. Per such tensor, the operands it is computed from (bit k:
  // operand k); each contraction among them marks its index unsplittable in those operands.
  const Graph& program = ctx.program();
  constexpr uint32_t kUnvisited = UINT32_MAX;
  std::vector<uint32_t> from(n, kUnvisited);
  bool closed = true;  // every path back from an output ends at an operand's value
  auto mark = [&](uint32_t operand_bits, int16_t label) {
    const int16_t index = index_of(label);
    if (index < 0 || index >= 64) return;
    for (size_t k = 0; k < operands.size(); ++k)
      if ((operand_bits >> k) & 1u) out[k] |= uint64_t{1} << index;
  };
  auto visit = [&](auto&& self, int32_t p) -> uint32_t {
    const size_t pi = static_cast<size_t>(p);
    if (holder[pi] >= 0) return 1u << holder[pi];
    // A contraction a partial result may complete is computed from it (its slices' sums may be
    // anywhere in the kernel's tiles of it; the contractions above mark its indices).
    if (completes[pi] != 0) return completes[pi];
    if (from[pi] != kUnvisited) return from[pi];
    const Op& op = program.op(program.tensors[pi].producer);
    if (op.kind == OpKind::input) {
      closed = false;  // an input this kernel does not read: it cannot finish anyway
      return from[pi] = 0;
    }
    uint32_t bits = 0;
    std::vector<uint32_t> in_bits;
    for (TensorId in : op.inputs) {
      in_bits.push_back(self(self, in.value));
      bits |= in_bits.back();
    }
    const DimLabels& a = values[op.inputs[0].index()].labels;
    if (op_info(op.kind).category == OpCategory::reduction)
      mark(in_bits[0], a[op.attrs.dim < 0 ? op.attrs.dim + a.rank : op.attrs.dim]);
    if (op.kind == OpKind::matmul) mark(bits, a[a.rank - 1]);
    return from[pi] = bits;
  };
  for (TensorId o : program.outputs)
    if (!produced[o.index()]) visit(visit, o.value);
  if (!closed) std::fill(out.begin(), out.end(), 0);
  return out;
}

bool splits_unsplittable(const KernelConfig& c, const std::vector<TensorId>& operands, const GraphLabels& labels,
                         const std::vector<uint64_t>& unsplittable) {
  for (size_t k = 0; k < operands.size(); ++k) {
    if (unsplittable[k] == 0) continue;
    const DimLabels& l = labels.tensors[operands[k].index()];
    for (size_t axis = 0; axis < 3; ++axis) {
      const int8_t d = c.imaps[k][axis];
      if (d == kPhi) continue;
      const int16_t index = index_of(l[d]);
      if (index >= 0 && index < 64 && ((unsplittable[k] >> index) & 1u)) return true;
    }
  }
  return false;
}

}  // namespace mugraph::search_detail
