// Input probes (input_probes.h).
#include "input_probes.h"

#include <utility>

#include "mugraph/ffield.h"
#include "mugraph/interp.h"

namespace mugraph::search_detail {

namespace {

/// The next value of a splitmix64 stream.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// A residue in [2, m): neither 0 (a scale must be invertible) nor 1 (it must change something).
uint32_t random_scale(uint64_t& state, uint64_t m) { return static_cast<uint32_t>(2 + next_random(state) % (m - 2)); }

/// x with every element of `c` added (sign +1) or subtracted (−1), in both fields.
FFTensor shifted(const FFTensor& x, const FFTensor& c, int sign) {
  FFTensor r = x;
  for (size_t i = 0; i < r.p.size(); ++i) {
    r.p[i] = static_cast<uint32_t>(sign > 0 ? ff::add(r.p[i], c.p[i], ff::kP) : ff::sub(r.p[i], c.p[i], ff::kP));
    r.q[i] = static_cast<uint32_t>(sign > 0 ? ff::add(r.q[i], c.q[i], ff::kQ) : ff::sub(r.q[i], c.q[i], ff::kQ));
  }
  return r;
}

/// x times (sp, sq) element-wise.
FFTensor scaled(const FFTensor& x, uint64_t sp, uint64_t sq) {
  FFTensor r = x;
  for (size_t i = 0; i < r.p.size(); ++i) {
    r.p[i] = static_cast<uint32_t>(ff::mul(r.p[i], sp, ff::kP));
    r.q[i] = static_cast<uint32_t>(ff::mul(r.q[i], sq, ff::kQ));
  }
  return r;
}

/// Whether a program output differs between two runs: its Z_p part, and its Z_q part unless it is
/// exp-tainted (then that part has no meaning, ff_interp.h, and the verifier does not compare it).
bool output_differs(const FFTensor& a, const FFTensor& b, bool exp_tainted) {
  return a.p != b.p || (!exp_tainted && a.q != b.q);
}

}  // namespace

InputProbes make_input_probes(const Graph& program, uint64_t seed) {
  InputProbes probes;
  probes.context.omega = random_root_of_unity(seed);
  probes.context.test_seed = seed;
  if (run_steps(program) > kInputProbeMaxSteps) return probes;
  probes.base = random_ff_inputs(program, seed, 1);
  const std::vector<FFTensor> shifts = random_ff_inputs(program, seed ^ 0x5bd1e9955bd1e995ull, 1);

  FFPrefixEvaluator base_run(probes.base, probes.context, 1);
  const std::vector<FFTensor>* base_values = base_run.evaluate(program);
  if (base_values == nullptr) return probes;  // a zero divisor: no probes (the search is unchanged)
  std::vector<bool> tainted = base_run.exp_tainted();
  for (TensorId t : program.outputs) probes.base_outputs.push_back((*base_values)[t.index()]);

  // Per program tensor, the inputs (by input index) its value depends on; which are inputs.
  std::vector<uint64_t> depends(program.tensors.size(), 0);
  std::vector<bool> is_input(program.tensors.size(), false);
  std::vector<std::string> input_names;
  for (const Op& op : program.ops) {
    if (op.kind == OpKind::input) {
      const size_t i = input_names.size();
      input_names.push_back(op.attrs.name);
      depends[op.outputs.at(0).index()] = i < 64 ? uint64_t{1} << i : 0;
      is_input[op.outputs.at(0).index()] = true;
      continue;
    }
    uint64_t d = 0;
    for (TensorId t : op.inputs) d |= depends[t.index()];
    for (TensorId t : op.outputs) depends[t.index()] = d;
  }

  uint64_t scale_state = seed ^ 0x2545f4914f6cdd1dull;
  auto consider = [&](std::vector<FFTensor> inputs, uint64_t changed_inputs, std::string name) {
    if (static_cast<int>(probes.inputs.size()) >= kMaxInputProbes) return;
    FFPrefixEvaluator run(inputs, probes.context, 1);
    const std::vector<FFTensor>* values = run.evaluate(program);
    if (values == nullptr) return;
    uint32_t changes = 0;
    std::vector<uint32_t> per_output;
    for (size_t k = 0; k < program.outputs.size(); ++k) {
      const size_t t = program.outputs[k].index();
      per_output.push_back(output_differs((*base_values)[t], (*values)[t], tainted[t]) ? 1u : 0u);
      changes |= per_output.back();
    }
    bool keeps = false;
    for (size_t t = 0; t < program.tensors.size() && !keeps; ++t)
      keeps = !is_input[t] && (depends[t] & changed_inputs) != 0 && (*base_values)[t] == (*values)[t];
    if (!changes || !keeps) return;
    const uint32_t bit = 1u << probes.inputs.size();
    if (probes.changes_output.empty()) probes.changes_output.assign(program.outputs.size(), 0);
    for (size_t k = 0; k < per_output.size(); ++k)
      if (per_output[k]) probes.changes_output[k] |= bit;
    probes.inputs.push_back(std::move(inputs));
    probes.names.push_back(std::move(name));
  };

  const size_t n = probes.base.size();
  for (size_t i = 0; i < n && i < 64; ++i) {
    for (size_t j = i + 1; j < n && j < 64; ++j) {
      const uint64_t pair = (uint64_t{1} << i) | (uint64_t{1} << j);
      const std::string& a = input_names[i];
      const std::string& b = input_names[j];
      if (probes.base[i].shape == probes.base[j].shape) {
        for (int sign : {+1, -1}) {
          std::vector<FFTensor> in = probes.base;
          in[i] = shifted(in[i], shifts[i], +1);
          in[j] = shifted(in[j], shifts[i], sign);
          consider(std::move(in), pair, a + " + C, " + b + (sign > 0 ? " + C" : " - C"));
        }
      }
      const uint64_t sp = random_scale(scale_state, ff::kP);
      const uint64_t sq = random_scale(scale_state, ff::kQ);
      for (bool inverse : {false, true}) {
        std::vector<FFTensor> in = probes.base;
        in[i] = scaled(in[i], sp, sq);
        in[j] = inverse ? scaled(in[j], ff::inv(sp, ff::kP), ff::inv(sq, ff::kQ)) : scaled(in[j], sp, sq);
        consider(std::move(in), pair, "s*" + a + ", " + (inverse ? b + "/s" : "s*" + b));
      }
    }
  }
  for (size_t i = 0; i < n && i < 64; ++i) {
    std::vector<FFTensor> in = probes.base;
    in[i] = scaled(in[i], ff::kP - 1, ff::kQ - 1);
    consider(std::move(in), uint64_t{1} << i, "-" + input_names[i]);
  }
  return probes;
}

ProbeEvaluator::ProbeEvaluator(const InputProbes& probes) : probes_(probes) {
  evaluators_.emplace_back(probes.base, probes.context, 1);
  for (const std::vector<FFTensor>& in : probes.inputs) evaluators_.emplace_back(in, probes.context, 1);
}

ProbeEvaluator::~ProbeEvaluator() = default;

bool ProbeEvaluator::cannot_finish(const std::shared_ptr<const Graph>& prefix, const std::vector<TensorId>& operands) {
  if (probes_.empty()) return false;
  const Facts& f = facts(prefix);
  if (!f.known) return false;
  uint32_t blind = f.open_outputs;
  for (TensorId t : operands) blind &= ~f.changed[t.index()];
  return blind != 0;
}

const ProbeEvaluator::Facts& ProbeEvaluator::facts(const std::shared_ptr<const Graph>& prefix) {
  if (auto it = cache_.find(prefix.get()); it != cache_.end()) return it->second;
  // The search's frontier holds thousands of prefixes; a few thousand facts are a few MB.
  if (cache_.size() >= 4096) cache_.clear();
  return cache_.emplace(prefix.get(), evaluate(prefix)).first->second;
}

ProbeEvaluator::Facts ProbeEvaluator::evaluate(const std::shared_ptr<const Graph>& prefix) {
  Facts f;
  f.prefix = prefix;
  const Graph& g = *prefix;
  if (run_steps(g) > kInputProbeMaxSteps) return f;
  const std::vector<FFTensor>* base = evaluators_[0].evaluate(g);
  ++evaluated_;
  if (base == nullptr) return f;
  f.changed.assign(g.tensors.size(), 0);
  for (size_t i = 1; i < evaluators_.size(); ++i) {
    const std::vector<FFTensor>* values = evaluators_[i].evaluate(g);
    if (values == nullptr) return f;
    for (size_t t = 0; t < g.tensors.size(); ++t)
      if (!((*values)[t] == (*base)[t])) f.changed[t] |= 1u << (i - 1);
  }
  // An output some prefix tensor already holds (by its Z_p values) may be that tensor: the
  // kernel need not compute it.
  for (size_t k = 0; k < probes_.base_outputs.size(); ++k) {
    bool held = false;
    for (size_t t = 0; t < g.tensors.size() && !held; ++t)
      held = (*base)[t].shape == probes_.base_outputs[k].shape && (*base)[t].p == probes_.base_outputs[k].p;
    if (!held) f.open_outputs |= probes_.changes_output[k];
  }
  f.known = true;
  return f;
}

}  // namespace mugraph::search_detail
