// libFuzzer target for search checkpoints (`mugraph search --resume`, `superoptimize(resume=True)`):
// any bytes must either read or raise UserError; a checkpoint that reads round-trips exactly
// through write_checkpoint, and a search resumes from it (under a short time limit) or refuses
// it with a UserError. Anything else (a crash, a sanitizer report, an InternalError or another
// exception escaping, a hang) is a finding.
//
// The seeds in fuzz/corpus/checkpoint/ are checkpoints of kProgram under the options of
// resume_options() below, as `mugraph search` writes them:
//   printf 'input X[4, 64]\ninput G[64]\nO = mul(exp(X), G)\noutput O\n' > p.mg
//   mugraph search p.mg -o out --max-kernel-ops 2 --max-block-ops 4 --threads 1 --top 1 \
//     [--time-limit 0.001 | --cost-bound both] -q
// so that a mutated checkpoint whose fingerprint survived drives a real resume.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "checkpoint.h"
#include "mugraph/frontend.h"
#include "mugraph/search.h"

namespace {

using namespace mugraph;
using namespace mugraph::search_detail;

constexpr const char* kProgram = "input X[4, 64]\ninput G[64]\nO = mul(exp(X), G)\noutput O\n";

// The reader takes a path, as the commands do, so each input goes through a file of its own
// process (libFuzzer's -jobs may run several).
std::string scratch_path(const char* name) {
  return (std::filesystem::temp_directory_path() /
          ("mugraph-checkpoint-fuzz-" + std::to_string(getpid()) + "-" + name + ".json"))
      .string();
}

SearchOptions resume_options(const std::string& path) {
  SearchOptions o;
  o.max_kernel_ops = 2;
  o.max_block_ops = 4;
  o.threads = 1;
  o.top_k = 1;
  o.time_limit_seconds = 0.05;  // a resumed tree may be large: the search is cut, not finished
  o.checkpoint_path = path;
  o.resume = true;
  return o;
}

bool same_tasks(const Task& a, const Task& b) {
  return a.path == b.path && *a.prefix == *b.prefix && a.operands == b.operands && a.chunk == b.chunk &&
         a.finish_only == b.finish_only;
}

bool same_state(const CheckpointState& a, const CheckpointState& b) {
  if (a.fingerprint != b.fingerprint || a.elapsed_seconds != b.elapsed_seconds ||
      a.bytes_phase_seconds != b.bytes_phase_seconds || a.pending.size() != b.pending.size() ||
      a.candidates.size() != b.candidates.size())
    return false;
  const SearchStats &s = a.stats, &t = b.stats;
  if (s.states != t.states || s.kernel_states != t.kernel_states || s.block_configs != t.block_configs ||
      s.pruned != t.pruned || s.candidates != t.candidates || s.tasks != t.tasks ||
      s.oracle_queries != t.oracle_queries || s.block_replays != t.block_replays)
    return false;
  for (size_t i = 0; i < a.pending.size(); ++i)
    if (!same_tasks(a.pending[i], b.pending[i])) return false;
  for (size_t i = 0; i < a.candidates.size(); ++i)
    if (a.candidates[i].path != b.candidates[i].path ||
        a.candidates[i].found_seconds != b.candidates[i].found_seconds ||
        !(a.candidates[i].graph == b.candidates[i].graph))
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Graph program = parse_program(kProgram);
  static const std::string input = scratch_path("input"), copy = scratch_path("copy");
  {
    std::ofstream out(input, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) std::abort();  // the fuzzer's own scratch file, not the code under test
  }
  const SearchOptions options = resume_options(input);
  CheckpointState st;
  try {
    st = read_checkpoint(input, options.target);
  } catch (const UserError&) {
    return 0;  // the expected way to refuse bad input
  }
  // The writer and the reader agree on everything the reader accepts.
  write_checkpoint(copy, st);
  if (!same_state(read_checkpoint(copy, options.target), st)) std::abort();

  SearchOptions resume = options;
  // The seeds hold searches of each cost bound, which the fingerprint tells apart.
  for (CostBound bound : {CostBound::bytes, CostBound::model, CostBound::both}) {
    SearchOptions b = options;
    b.cost_bound = bound;
    if (search_fingerprint(program, b) == st.fingerprint) resume.cost_bound = bound;
  }
  try {
    (void)search(program, resume);  // rewrites `input` as it stops: the next input rewrites it again
  } catch (const UserError&) {
  }
  return 0;
}
