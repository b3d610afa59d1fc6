// Input probes: changes to the program's inputs that keep some of its values and change its
// outputs. A kernel computes its outputs from its operands alone, so a kernel whose operands keep
// their values under a probe gives the same outputs under it: it cannot compute a program output
// the probe changes. nTrans's D = H − X keeps its value when H and X are shifted by one tensor,
// while the output, which also adds X alone, does not: a kernel reading D, α and the sums of D²
// holds every input by the abstract expressions (which take a difference for a sum) and cannot
// finish the program (docs/search.md, "Input probes").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "mugraph/ff_interp.h"
#include "mugraph/graph.h"

namespace mugraph::search_detail {

/// Most probes a search keeps (a bit each of a mask).
inline constexpr int kMaxInputProbes = 8;
/// Probes are made only for programs whose run takes at most this many element steps
/// (run_steps), and a prefix is probed only if its kernels do: each probe evaluates every prefix
/// it is asked about once more, on the search's worker thread.
inline constexpr int64_t kInputProbeMaxSteps = int64_t{1} << 20;

/// The probes of one program, made once per search.
struct InputProbes {
  FFContext context;                          ///< Lax semantics, as the verifier's first tests
  std::vector<FFTensor> base;                 ///< random inputs, one per program input op
  std::vector<std::vector<FFTensor>> inputs;  ///< per probe, the changed inputs
  std::vector<std::string> names;             ///< per probe, what it changes ("H + C, X + C")
  /// Per program output (in Graph::outputs order): the probes that change it (bit i: probe i).
  std::vector<uint32_t> changes_output;
  /// Per program output: its values under the base inputs (a prefix tensor with them may already
  /// hold that output, and then no probe is asked to rule it out).
  std::vector<FFTensor> base_outputs;
  bool empty() const { return inputs.empty(); }
};

/// The probes of `program` from `seed`. For each pair of inputs: both shifted by one random tensor
/// (keeps their difference; inputs of one shape), shifted by opposite ones (their sum), scaled
/// by one random factor (their quotient) and by inverse ones (their product); for each input,
/// its negation (its square). A probe is kept if it changes some program output and keeps the
/// values of some program tensor that depends on an input it changes (else no kernel is likely
/// to keep them either), at most kMaxInputProbes. None for a program of more than
/// kInputProbeMaxSteps.
InputProbes make_input_probes(const Graph& program, uint64_t seed);

/// Evaluates kernel-graph prefixes under the base inputs and every probe; one per search thread.
class ProbeEvaluator {
 public:
  explicit ProbeEvaluator(const InputProbes& probes);
  ~ProbeEvaluator();

  /// Whether a kernel reading `operands` of `prefix` cannot compute the program's outputs from
  /// them: some probe keeps the value of every operand and changes an output that no tensor of
  /// the prefix holds yet. False when it cannot tell (no probes, a prefix past
  /// kInputProbeMaxSteps, a run with a zero divisor). Remembers the last prefixes it evaluated.
  bool cannot_finish(const std::shared_ptr<const Graph>& prefix, const std::vector<TensorId>& operands);

  /// Prefixes evaluated (each once per probe and for the base inputs).
  int64_t prefixes_evaluated() const { return evaluated_; }

 private:
  struct Facts {
    std::shared_ptr<const Graph> prefix;  ///< kept alive so that its address names it
    bool known = false;                   ///< false: not probed (too large, zero divisor)
    std::vector<uint32_t> changed;        ///< per tensor: the probes that change its values
    uint32_t open_outputs = 0;            ///< probes changing an output the prefix does not hold
  };
  const Facts& facts(const std::shared_ptr<const Graph>& prefix);
  Facts evaluate(const std::shared_ptr<const Graph>& prefix);

  const InputProbes& probes_;
  std::vector<FFPrefixEvaluator> evaluators_;  ///< [0]: the base inputs; then one per probe
  std::unordered_map<const Graph*, Facts> cache_;
  int64_t evaluated_ = 0;
};

}  // namespace mugraph::search_detail
