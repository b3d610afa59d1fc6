// libFuzzer target for the μGraph JSON format (docs/json-format.md) and everything a command does
// with a file it accepts: any bytes must either load or raise UserError; a loaded graph is printed
// (describe, DOT: both promise to tolerate graphs that are not valid), checked by validate(), and
// a valid one round-trips through to_json exactly, gets a cost estimate and generates CUDA for
// both targets (or a UserError saying why not), and, when it is small enough to run in
// milliseconds, runs on the float interpreter and the finite-field one (the verifier's), which
// share one block-graph executor. Anything else (a crash, a sanitizer report, an InternalError or
// another exception escaping, a hang) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "mugraph/codegen.h"
#include "mugraph/cost_model.h"
#include "mugraph/dot.h"
#include "mugraph/ff_interp.h"
#include "mugraph/interp.h"
#include "mugraph/json.h"
#include "mugraph/printer.h"
#include "mugraph/validate.h"

namespace {

/// Runs a valid graph on both interpreters, which may refuse it only with a UserError.
void run_interpreters(const mugraph::Graph& g) {
  mugraph::InterpOptions options;
  options.threads = 1;
  try {
    (void)mugraph::run_float(g, mugraph::random_inputs(g, 1), options);
  } catch (const mugraph::UserError&) {
  }
  mugraph::FFContext ctx;
  ctx.omega = mugraph::random_root_of_unity(1);
  (void)mugraph::run_ff(g, mugraph::random_ff_inputs(g, 1), ctx, 1);
  ctx.opaque_functions = true;
  (void)mugraph::run_ff(g, mugraph::random_ff_inputs(g, 2), ctx, 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  mugraph::Graph g;
  try {
    g = mugraph::from_json(text, "fuzz.json");
  } catch (const mugraph::UserError&) {
    return 0;  // the expected way to refuse bad input
  }
  (void)mugraph::describe(g);
  (void)mugraph::to_dot(g);
  // The writer and the reader agree on everything the reader accepts, valid μGraph or not.
  const std::string written = mugraph::to_json(g);
  if (!(mugraph::from_json(written, "round-trip.json") == g)) std::abort();
  if (mugraph::to_json(mugraph::from_json(written, "round-trip.json")) != written) std::abort();

  // A million element steps run in well under a second.
  bool ran = false;
  for (const mugraph::CudaTarget& target : mugraph::cuda_targets()) {
    if (mugraph::validate(g, *target.limits)) continue;
    if (!ran && mugraph::run_steps(g) <= (int64_t{1} << 20)) {
      run_interpreters(g);
      ran = true;
    }
    (void)mugraph::estimate_cost(g, mugraph::gpu_spec(target.limits->name));
    try {
      (void)mugraph::generate_cuda(g, target);
    } catch (const mugraph::UserError&) {
      // What the emitter does not support yet (e.g. layouts other than row-major) is refused
      // with a reason.
    }
  }
  return 0;
}
