// The Lax check (paper Definition 5.1) and the symbolic bounds Theorem 2 needs.
//
// One forward walk over the kernel graph, into graph-defined kernels and thread graphs through
// their params and back out through their savers. Per tensor it keeps
// - how many exp-like ops (exp, silu) the worst path from an input to it passes, and a trace of
//   that path (only turned into text when a violation is reported);
// - a symbolic bound on the form of Equation 2: value = A / B with A and B sums of terms
//   f · exp(g / h); we bound the degree of the f's of A and of B, the number of terms of A and of B
//   and the degrees of the exponents' g and h. The rules are in docs/verifier.md; all of them
//   over-approximate, and every number saturates at kCap.
// Ops that reach no output are skipped: Definition 5.1 is about input-to-output paths.
#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "block_structure.h"
#include "lax_forms.h"
#include "mugraph/ff_interp.h"
#include "mugraph/verify.h"

namespace mugraph {
namespace lax {
namespace {

/// Bounds saturate here; anything this large makes Theorem 2's bound vacuous anyway.
constexpr double kCap = 1e30;
double sat(double x) { return x < kCap ? x : kCap; }

Form variable_form() { return Form{}; }
Form constant_form() { return Form{Part{0, 1, true}, Part{0, 1, true}, {}}; }

Part pmul(const Part& a, const Part& b) { return {sat(a.deg + b.deg), sat(a.terms * b.terms), a.plain && b.plain}; }
Part padd(const Part& a, const Part& b) {
  return {std::max(a.deg, b.deg), sat(a.terms + b.terms - (a.plain && b.plain ? 1 : 0)), a.plain || b.plain};
}
/// exp(g1/h1) · exp(g2/h2) = exp((g1·h2 + g2·h1) / (h1·h2)).
Exponent ecombine(const Exponent& a, const Exponent& b) {
  return {sat(std::max(a.num + b.den, b.num + a.den)), sat(a.den + b.den)};
}
Exponent ejoin(const Exponent& a, const Exponent& b) { return {std::max(a.num, b.num), std::max(a.den, b.den)}; }
/// The exponent of a product of m terms. @pre m ≥ 1
Exponent epow(const Exponent& e, double m) { return {sat(e.num + (m - 1) * e.den), sat(m * e.den)}; }

Form fmul(const Form& x, const Form& y) { return {pmul(x.num, y.num), pmul(x.den, y.den), ecombine(x.ex, y.ex)}; }
Form fdiv(const Form& x, const Form& y) { return {pmul(x.num, y.den), pmul(x.den, y.num), ecombine(x.ex, y.ex)}; }
/// add and sub: A1/B1 ± A2/B2 = (A1·B2 ± A2·B1) / (B1·B2).
Form fadd(const Form& x, const Form& y) {
  return {padd(pmul(x.num, y.den), pmul(y.num, x.den)), pmul(x.den, y.den), ecombine(x.ex, y.ex)};
}
Form fjoin(const Form& x, const Form& y) {
  auto join = [](const Part& a, const Part& b) {
    return Part{std::max(a.deg, b.deg), std::max(a.terms, b.terms), a.plain || b.plain};
  };
  return {join(x.num, y.num), join(x.den, y.den), ejoin(x.ex, y.ex)};
}
bool trivial(const Part& p) { return p.deg == 0 && p.terms == 1 && p.plain; }

/// A sum of n values of form x (sum, matmul, summing accumulator): over the common denominator,
/// Σ_j A_j · Π_{l≠j} B_l / Π_l B_l. Where every summand has the same denominator B (`same_den`:
/// B does not depend on the index summed over, as 1/‖x‖ along a row), Σ_j A_j / B: nothing but
/// the term count grows.
Form fsum(const Form& x, double n, bool same_den) {
  if (n <= 1) return x;
  const Part& a = x.num;
  const Part& b = x.den;
  if (trivial(b) || same_den) return {Part{a.deg, sat(n * a.terms - (a.plain ? n - 1 : 0)), a.plain}, b, x.ex};
  bool plain = a.plain && b.plain;
  Part num{sat(a.deg + (n - 1) * b.deg), sat(n * a.terms * std::pow(b.terms, n - 1) - (plain ? n - 1 : 0)), plain};
  Part den{sat(n * b.deg), sat(std::pow(b.terms, n)), b.plain};
  return {num, den, epow(x.ex, n)};
}

/// exp(A/B) for an exp-free A/B: one term exp(g/h) with g = A, h = B.
Form fexp(const Form& x) { return {Part{0, 1, false}, Part{0, 1, true}, ejoin(x.ex, Exponent{x.num.deg, x.den.deg})}; }

/// silu(x) = x / (1 + exp(−x)).
Form fsilu(const Form& x) { return fdiv(x, fadd(constant_form(), fexp(x))); }

/// Indices a tensor's formula does not depend on, one bit each: data dim d (bit d), the blocks
/// along grid axis a (bit kGridBit + a), the for-loop's iterations (kLoopBit). Not depending on
/// each of several indices alone is not depending on them together.
using Indices = uint32_t;
constexpr int kGridBit = 28;
constexpr int kLoopBit = 31;
constexpr Indices kEvery = ~Indices{0};
constexpr Indices kDataDims = (Indices{1} << kMaxRank) - 1;
static_assert(kMaxRank <= kGridBit, "data dims and grid axes need their own bits");
constexpr Indices bit(int b) { return Indices{1} << b; }
constexpr bool has(Indices m, int b) { return (m >> b) & 1u; }

/// What a tensor's formula is the same along. It is what lets a sum keep one denominator: the
/// summands of a matmul over x / ‖x‖'s row, or of softmax's E / Σ E times V, share theirs, and
/// fsum's same_den then leaves the degree where it was instead of multiplying it by n.
struct Invariance {
  Indices den = kEvery;    ///< indices the denominator B of A / B does not depend on
  Indices value = kEvery;  ///< indices neither A nor B depends on
};

/// An input's: it depends on every data index (at the kernel level there are no blocks or
/// iterations).
constexpr Invariance kInputInvariance{kEvery, ~kDataDims};

/// Adds what a shape and a form imply: a dim of extent 1 has a single index, a constant
/// denominator depends on nothing, and where the formula does not change its denominator does not.
Invariance settle(Invariance v, const Form& f, const Shape& s) {
  for (int d = 0; d < s.rank(); ++d)
    if (s[d] == 1) v.value |= bit(d);
  v.den |= v.value;
  if (trivial(f.den)) v.den = kEvery;
  return v;
}

/// A rank-`r` operand's indices as those of the rank-`rank` result it broadcasts to (NumPy,
/// right-aligned): its dim j is the result's j + rank − r, and it is the same along the leading
/// dims it lacks.
Indices broadcast(Indices m, int r, int rank) {
  Indices data = (m & (bit(r) - 1)) << (rank - r);
  return (m & ~kDataDims) | ((data | (bit(rank - r) - 1)) & kDataDims);
}
Invariance broadcast(const Invariance& v, int r, int rank) {
  return {broadcast(v.den, r, rank), broadcast(v.value, r, rank)};
}
Invariance both(const Invariance& x, const Invariance& y) { return {x.den & y.den, x.value & y.value}; }

/// A block graph's tile of a kernel-level tensor (an input iterator): same along a grid axis or
/// the iterations where the map replicates (φ) or the tensor is the same along the dim mapped.
Indices tile(Indices m, const OpAttrs& a) {
  Indices r = m & kDataDims;
  for (int axis = 0; axis < 3; ++axis) {
    int d = a.imap[static_cast<size_t>(axis)];
    if (d == kPhi || has(m, d)) r |= bit(kGridBit + axis);
  }
  if (a.fmap == kPhi || has(m, a.fmap)) r |= bit(kLoopBit);
  return r;
}
/// The kernel-level tensor an output saver writes from its tiles: same along a dim if each tile
/// is and so is every block whose tile lies along it.
Indices untile(Indices m, const OpAttrs& a) {
  Indices r = m | ~kDataDims;
  for (int axis = 0; axis < 3; ++axis) {
    int d = a.omap[static_cast<size_t>(axis)];
    if (d != kPhi && !has(m, kGridBit + axis)) r &= ~bit(d);
  }
  return r;
}

/// What the walk knows about one tensor.
struct Value {
  Form form;
  Invariance same;
  int exps = 0;    ///< most exp-like ops on a path from an input
  int trace = -1;  ///< the last node of that path in Walker::trace_
};

/// One step of a path: the op kind (or input name) and the step before it.
struct TraceNode {
  int pred;
  std::string_view label;
};

class Walker {
 public:
  explicit Walker(LaxReport& report, FunctionApplications* opaque = nullptr) : report_(report), opaque_(opaque) {}

  /// Walks `g`: `params` are the values of a body's params. Returns the values of the kernel
  /// graph's outputs (kernel level) or of what the savers write, by io_index (bodies).
  std::vector<Value> walk(const Graph& g, const std::vector<Value>& params, const std::string& where) {
    std::vector<Value> vals(g.tensors.size());
    std::vector<Value> saved;
    std::vector<bool> live = live_ops(g);
    // How many times each op runs per block: a block graph's loop ops once per iteration.
    std::vector<double> per_block(g.ops.size(), 1.0);
    if (opaque_ && g.level == Level::block && g.forloop > 1) {
      std::vector<interp::BlockPhase> phases = interp::block_phases(g);
      for (size_t i = 0; i < g.ops.size(); ++i)
        if (phases[i] == interp::BlockPhase::loop) per_block[i] = static_cast<double>(g.forloop);
    }
    for (size_t i = 0; i < g.ops.size(); ++i) {
      if (!live[i]) continue;
      const Op& op = g.ops[i];
      auto in = [&](size_t k) -> const Value& { return vals[op.inputs[k].index()]; };
      auto out = [&](Value v) { vals[op.outputs[0].index()] = v; };
      switch (op_info(op.kind).category) {
        case OpCategory::source:
          out(Value{variable_form(), kInputInvariance, 0, node(-1, op.attrs.name)});
          break;
        case OpCategory::kernel_body:
        case OpCategory::thread_body: {
          std::vector<Value> sub_params;
          sub_params.reserve(op.inputs.size());
          for (TensorId t : op.inputs) sub_params.push_back(vals[t.index()]);
          const std::string sub_where =
              std::string(op.kind == OpKind::graph_kernel ? "block graph " : "thread graph ") +
              std::to_string(op.attrs.body) + " (body of op " + std::to_string(i) + " of " + where + ")";
          const Graph& body = g.bodies[static_cast<size_t>(op.attrs.body)];
          const double outer = runs_;
          runs_ *= per_block[i] * static_cast<double>(op.kind == OpKind::graph_kernel ? body.grid.volume() : 1);
          std::vector<Value> results = walk(body, sub_params, sub_where);
          runs_ = outer;
          for (size_t k = 0; k < op.outputs.size() && k < results.size(); ++k) vals[op.outputs[k].index()] = results[k];
          break;
        }
        case OpCategory::iterator: {
          Value v = params[static_cast<size_t>(op.attrs.io_index)];
          if (g.level == Level::block) v.same = {tile(v.same.den, op.attrs), tile(v.same.value, op.attrs)};
          out(v);
          break;
        }
        case OpCategory::saver: {
          size_t k = static_cast<size_t>(op.attrs.io_index);
          if (saved.size() <= k) saved.resize(k + 1);
          saved[k] = in(0);
          if (g.level == Level::block)
            saved[k].same = {untile(in(0).same.den, op.attrs), untile(in(0).same.value, op.attrs)};
          break;
        }
        case OpCategory::accumulator: {
          // After the loop nothing depends on the iteration.
          Invariance same{in(0).same.den | bit(kLoopBit), in(0).same.value | bit(kLoopBit)};
          if (op.attrs.dim == kPhi && g.forloop > 1) {
            const bool same_den = has(in(0).same.den, kLoopBit);
            out(step(op, in(0), fsum(in(0).form, static_cast<double>(g.forloop), same_den), same));
          } else {
            // Concatenation (or a single iteration) moves data: along the dim the iterations
            // are laid out in, the result is the same where each iteration's tile is, and every
            // iteration's is the same.
            if (op.attrs.dim != kPhi) {
              if (!has(in(0).same.den, kLoopBit)) same.den &= ~bit(op.attrs.dim);
              if (!has(in(0).same.value, kLoopBit)) same.value &= ~bit(op.attrs.dim);
            }
            Value v = in(0);
            v.same = same;
            out(v);
          }
          break;
        }
        case OpCategory::layout: {
          Value v = in(0);
          for (size_t k = 1; k < op.inputs.size(); ++k) {
            v.form = fjoin(v.form, in(k).form);
            v.same = both(v.same, in(k).same);
            if (in(k).exps > v.exps) {
              v.exps = in(k).exps;
              v.trace = in(k).trace;
            }
          }
          // A repeat copies along its dim (settle adds an extent-1 dim it widens); a concat joins
          // different formulas along its dim; a reshape mixes the dims: of theirs, only what
          // holds for blocks and iterations is kept.
          if (op.kind == OpKind::concat) {
            v.same.den &= ~bit(op.attrs.dim);
            v.same.value &= ~bit(op.attrs.dim);
          } else if (op.kind == OpKind::reshape) {
            v.same = {v.same.den & ~kDataDims, v.same.value & ~kDataDims};
          }
          out(v);
          break;
        }
        case OpCategory::matmul: {
          const Shape& a = g.type(op.inputs[0]).shape;
          const int ra = a.rank();
          const int rb = g.type(op.inputs[1]).shape.rank();
          const int rank = g.type(op.outputs[0]).shape.rank();
          double n = static_cast<double>(a[ra - 1]);
          const Value& x = in(0);
          const Value& y = in(1);
          // Each summand x[.., i, k] · y[.., k, j] has the denominator Bx[i, k] · By[k, j].
          const bool same_den = has(x.same.den, ra - 1) && has(y.same.den, rb - 2);
          // x's dims but the summed k are the result's but its last (j), along which x is the same;
          // y's batch dims are the result's batch dims, its j the result's j, and it is the same along i.
          auto from_x = [&](Indices m) { return broadcast(m & ~bit(ra - 1), ra - 1, rank - 1) | bit(rank - 1); };
          auto from_y = [&](Indices m) {
            Indices r = broadcast(m & ~(bit(rb - 2) | bit(rb - 1)), rb - 2, rank - 2) | bit(rank - 2);
            return has(m, rb - 1) ? r | bit(rank - 1) : r & ~bit(rank - 1);
          };
          Invariance same{from_x(x.same.den) & from_y(y.same.den), from_x(x.same.value) & from_y(y.same.value)};
          out(step(op, x.exps >= y.exps ? x : y, fsum(fmul(x.form, y.form), n, same_den), same,
                   std::max(x.exps, y.exps)));
          break;
        }
        case OpCategory::reduction: {
          const Shape& s = g.type(op.inputs[0]).shape;
          double n = static_cast<double>(s[op.attrs.dim]) / static_cast<double>(op.attrs.to);
          const bool same_den = has(in(0).same.den, op.attrs.dim);
          // Groups over the same denominator keep it, the same for every group; products of
          // different ones differ from group to group.
          Invariance same = in(0).same;
          if (!same_den) same.den &= ~bit(op.attrs.dim);
          out(step(op, in(0), fsum(in(0).form, n, same_den), same));
          break;
        }
        case OpCategory::binary: {
          const int rank = g.type(op.outputs[0]).shape.rank();
          Value c{constant_form(), Invariance{}, 0, -1};
          Value x0 = in(0);
          x0.same = broadcast(x0.same, g.type(op.inputs[0]).shape.rank(), rank);
          Value y0 = c;
          if (op.inputs.size() > 1) {
            y0 = in(1);
            y0.same = broadcast(y0.same, g.type(op.inputs[1]).shape.rank(), rank);
          }
          const Value* x = &x0;
          const Value* y = &y0;
          if (op.attrs.has_scalar && op.attrs.scalar_pos == 0) std::swap(x, y);
          Form f;
          Invariance same = both(x->same, y->same);
          switch (op.kind) {
            case OpKind::mul:
              f = fmul(x->form, y->form);
              break;
            case OpKind::div:
              f = fdiv(x->form, y->form);
              same.den = x->same.den & y->same.value;  // Bx · Ay
              break;
            default:
              f = fadd(x->form, y->form);
              break;  // add, sub
          }
          // The path continues through a tensor operand (never the constant), the one with more exps.
          const Value& worst = op.inputs.size() > 1 && in(1).exps > in(0).exps ? in(1) : in(0);
          out(step(op, worst, f, same));
          break;
        }
        case OpCategory::unary:
          out(unary(g, i, where, in(0), per_block[i]));
          break;
      }
      for (TensorId t : op.outputs)
        vals[t.index()].same = settle(vals[t.index()].same, vals[t.index()].form, g.type(t).shape);
    }
    if (g.level != Level::kernel) return saved;
    std::vector<Value> outputs;
    outputs.reserve(g.outputs.size());
    for (TensorId t : g.outputs) outputs.push_back(vals[t.index()]);
    return outputs;
  }

  /// "X → exp → mul → sum → exp"
  std::string path(int trace) const {
    std::vector<std::string_view> labels;
    for (int n = trace; n >= 0; n = trace_[static_cast<size_t>(n)].pred)
      labels.push_back(trace_[static_cast<size_t>(n)].label);
    std::string s;
    for (size_t k = labels.size(); k-- > 0;) {
      s += labels[k];
      if (k > 0) s += " → ";
    }
    return s;
  }

 private:
  int node(int pred, std::string_view label) {
    trace_.push_back({pred, label});
    return static_cast<int>(trace_.size()) - 1;
  }

  /// The value an op computes from `worst` (its operand on the path with the most exps).
  Value step(const Op& op, const Value& worst, const Form& f, const Invariance& same, int exps = -1) {
    return Value{f, same, exps < 0 ? worst.exps : exps, node(worst.trace, op_name(op.kind))};
  }

  void violate(const Graph& g, size_t i, const std::string& where, const std::string& what) {
    if (!report_.lax) return;  // report the first violation only
    report_.lax = false;
    const Op& op = g.ops[i];
    std::string loc = std::string(op_name(op.kind)) + " (op " + std::to_string(i) + " of " + where;
    const std::string& name = g.tensor(op.outputs[0]).name;
    if (!name.empty()) loc += ", tensor " + name;
    report_.violation = loc + ") " + what;
  }

  /// `per_block`: how many times the op runs per block (the for-loop's iterations in a loop).
  Value unary(const Graph& g, size_t i, const std::string& where, const Value& x, double per_block) {
    const Op& op = g.ops[i];
    if (opaque_ && is_opaque_function(op.kind)) {
      opaque_->count += static_cast<double>(g.type(op.outputs[0]).shape.numel()) * runs_ * per_block;
      opaque_->arg_num_deg = std::max(opaque_->arg_num_deg, x.form.num.deg);
      opaque_->arg_den_deg = std::max(opaque_->arg_den_deg, x.form.den.deg);
      return step(op, x, variable_form(), x.same);  // an unknown function: a fresh variable
    }
    switch (op.kind) {
      case OpKind::sqr:
        return step(op, x, fmul(x.form, x.form), x.same);
      case OpKind::sqrt:
        report_.uses_sqrt = true;
        return step(op, x, variable_form(), x.same);  // a deterministic function: a fresh variable
      case OpKind::exp:
      case OpKind::silu: {
        // silu's denominator x.den · (1 + exp(−x)) holds all of x.
        Invariance same = x.same;
        if (op.kind == OpKind::silu) same.den = x.same.value;
        Value v = step(op, x, op.kind == OpKind::exp ? fexp(x.form) : fsilu(x.form), same, x.exps + 1);
        if (x.exps > 0) {
          violate(g, i, where,
                  "is the second exp-like op on the path " + path(v.trace) + "; it is modelled as a random function");
          v.form = variable_form();
        }
        return v;
      }
      default: {  // relu, gelu: not multilinear
        Value v = step(op, x, variable_form(), x.same);
        violate(g, i, where, "is not multilinear; it is modelled as a random function (path " + path(v.trace) + ")");
        return v;
      }
    }
  }

  LaxReport& report_;
  FunctionApplications* opaque_;  ///< non-null: exp, silu, relu, gelu and sqrt are unknown functions
  double runs_ = 1;               ///< how many times an op of the graph being walked runs
  std::vector<TraceNode> trace_;
};

}  // namespace

double Form::degree() const { return std::max({num.deg, den.deg, ex.num, ex.den}); }
double Form::terms() const { return std::max(num.terms, den.terms); }

Form difference(const Form& x, const Form& y) { return fadd(x, y); }

LaxReport check_lax_forms(const Graph& kernel_graph, std::vector<Form>& forms) {
  LaxReport report;
  Walker walker(report);
  std::vector<Value> outputs = walker.walk(kernel_graph, {}, "the kernel graph");
  report.max_exps_on_path = 0;
  report.degree = 0;
  report.exp_terms = 1;
  forms.clear();
  for (const Value& v : outputs) {
    report.max_exps_on_path = std::max(report.max_exps_on_path, v.exps);
    report.degree = std::max(report.degree, v.form.degree());
    report.exp_terms = std::max(report.exp_terms, v.form.terms());
    forms.push_back(v.form);
  }
  return report;
}

void check_opaque_forms(const Graph& kernel_graph, std::vector<Form>& forms, FunctionApplications& apps) {
  LaxReport report;
  apps = {};
  Walker walker(report, &apps);
  std::vector<Value> outputs = walker.walk(kernel_graph, {}, "the kernel graph");
  forms.clear();
  for (const Value& v : outputs) forms.push_back(v.form);
}

}  // namespace lax

LaxReport check_lax(const Graph& kernel_graph) {
  std::vector<lax::Form> forms;
  return lax::check_lax_forms(kernel_graph, forms);
}

}  // namespace mugraph
