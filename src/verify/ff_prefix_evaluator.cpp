// FFPrefixEvaluator: evaluates a sequence of kernel graphs that share prefixes (the search's
// growing μGraphs), computing each op with the same code as run_ff (ff_detail::run_kernel_op).
#include "ff_ops.h"
#include "mugraph/ff_interp.h"

namespace mugraph {

namespace {

/// Whether op i of a and of b are the same op producing the same tensors (bodies included).
/// Earlier ops being equal, equal ops read equal values and so compute equal values.
bool same_op(const Graph& a, const Graph& b, size_t i) {
  const Op& x = a.ops[i];
  const Op& y = b.ops[i];
  if (!(x == y)) return false;
  for (TensorId t : x.outputs)
    if (t.index() >= a.tensors.size() || t.index() >= b.tensors.size() || !(a.tensors[t.index()] == b.tensors[t.index()]))
      return false;
  if (x.attrs.body >= 0) {
    auto k = static_cast<size_t>(x.attrs.body);
    if (k >= a.bodies.size() || k >= b.bodies.size() || !(a.bodies[k] == b.bodies[k])) return false;
  }
  return true;
}

}  // namespace

FFPrefixEvaluator::FFPrefixEvaluator(std::vector<FFTensor> inputs, FFContext ctx, int threads)
    : inputs_(std::move(inputs)),
      ctx_(ctx),
      pool_(std::make_unique<interp::ThreadPool>(ff_detail::resolve_threads(threads))) {}

FFPrefixEvaluator::~FFPrefixEvaluator() = default;
FFPrefixEvaluator::FFPrefixEvaluator(FFPrefixEvaluator&&) noexcept = default;
FFPrefixEvaluator& FFPrefixEvaluator::operator=(FFPrefixEvaluator&&) noexcept = default;

const std::vector<FFTensor>* FFPrefixEvaluator::evaluate(const Graph& g) {
  if (g.level != Level::kernel)
    throw UserError("FFPrefixEvaluator needs a kernel graph, got a " + std::string(level_name(g.level)) + " graph");
  size_t common = 0;
  const size_t limit = std::min({valid_ops_, g.ops.size(), last_.ops.size()});
  while (common < limit && same_op(g, last_, common)) ++common;
  reused_ += static_cast<int64_t>(common);

  ff_detail::FFState st(ctx_, pool_.get());
  tainted_ = ff_detail::exp_taint(g, {}).tensor;
  values_.resize(g.tensors.size());
  std::vector<ff_detail::FFView> views(g.tensors.size());
  size_t next_input = 0;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (op.kind == OpKind::input) {
      if (next_input >= inputs_.size())
        throw UserError("the graph has more inputs than the " + std::to_string(inputs_.size()) +
                        " the evaluator was given");
      const FFTensor& in = inputs_[next_input++];
      TensorId t = op.outputs.at(0);
      if (in.shape != g.type(t).shape)
        throw UserError("input '" + op.attrs.name + "' should have shape " + g.type(t).shape.str() + " but has " +
                        in.shape.str());
      if (i >= common) {
        values_[t.index()] = in;
        ++computed_;
      }
      views[t.index()] = ff_detail::view_of(values_[t.index()]);
      continue;
    }
    if (i < common) {
      for (TensorId t : op.outputs) views[t.index()] = ff_detail::view_of(values_[t.index()]);
      continue;
    }
    ++computed_;
    if (!ff_detail::run_kernel_op(g, i, tainted_, /*exp_only=*/{}, views, values_, st)) {
      last_ = g;
      valid_ops_ = i;  // the values of ops before i are still good
      return nullptr;
    }
    // Results that are views (none at kernel level today) become owned values.
    for (TensorId t : op.outputs)
      if (values_[t.index()].p.empty() && g.type(t).shape.numel() > 0) {
        FFTensor copy(g.type(t).shape);
        ff_detail::copy_ff(views[t.index()], ff_detail::mut_view_of(copy));
        values_[t.index()] = std::move(copy);
        views[t.index()] = ff_detail::view_of(values_[t.index()]);
      }
  }
  last_ = g;
  valid_ops_ = g.ops.size();
  return &values_;
}

}  // namespace mugraph
