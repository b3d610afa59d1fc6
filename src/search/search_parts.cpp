// search() for a program with ops the generator does not grow: each part between them is
// searched as a program of its own, and the parts' best μGraphs are joined around those ops
// (program_parts.h; docs/search.md, "Programs with layout ops").
#include "search_parts.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>

#include "mugraph/json.h"
#include "program_parts.h"

namespace mugraph::search_detail {

namespace {

using Clock = std::chrono::steady_clock;

/// The stop reason that says most about a search of several parts: an interruption, then the
/// memory limit, then the time limit.
int stop_severity(StopReason r) {
  switch (r) {
    case StopReason::exhausted:
      return 0;
    case StopReason::time_limit:
      return 1;
    case StopReason::memory_limit:
      return 2;
    case StopReason::interrupted:
      return 3;
  }
  return 0;
}

}  // namespace

std::function<void(const SearchProgress&)> progress_after(const SearchOptions& options, double seconds) {
  if (!options.on_progress) return {};
  return [&options, seconds](const SearchProgress& progress) {
    SearchProgress shifted = progress;
    shifted.elapsed_seconds += seconds;
    options.on_progress(shifted);
  };
}

bool searched_in_parts(const Graph& program) {
  return std::any_of(program.ops.begin(), program.ops.end(),
                     [](const Op& op) { return op.kind != OpKind::input && !generator_grows(op); });
}

std::string part_checkpoint_path(const std::string& path, size_t part) {
  if (path.empty()) return path;
  const std::filesystem::path p(path);
  return (p.parent_path() / (p.stem().string() + ".part" + std::to_string(part + 1) + p.extension().string())).string();
}

VerifyResult joined_verdict(const Graph& program, const Graph& joined, const std::vector<const VerifyResult*>& parts,
                            const VerifyOptions& options, ReferenceRuns* runs) {
  VerifyResult v;
  v.verdict = Verdict::equivalent;
  v.seed = options.seed;
  v.per_test_bound = 0;
  v.bound = 0;
  v.guarantee = true;
  v.tests_run = 0;
  bool any = false;
  for (size_t p = 0; p < parts.size(); ++p) {
    const VerifyResult* r = parts[p];
    if (!r) continue;  // the part's own ops: the same function
    MUGRAPH_CHECK(r->verdict == Verdict::equivalent) << "joined_verdict: part " << p << " was not verified";
    v.tests_run = any ? std::min(v.tests_run, r->tests_run) : r->tests_run;
    any = true;
    v.redraws += r->redraws;
    v.per_test_bound = std::max(v.per_test_bound, r->per_test_bound);
    v.bound = std::min(1.0, v.bound + r->bound);
    v.guarantee = v.guarantee && r->guarantee;
    v.opaque_functions = v.opaque_functions || r->opaque_functions;  // some part's bound is for that model
    if (!r->guarantee_note.empty())
      v.guarantee_note += (v.guarantee_note.empty() ? "" : "; ") + std::string("part ") + std::to_string(p + 1) + ": " +
                          r->guarantee_note;
  }
  v.guarantee = v.guarantee && v.bound <= options.delta;
  v.reference_lax = check_lax(program);
  v.candidate_lax = check_lax(joined);
  if (options.float_check) {
    v.float_max_rel_error = float_max_relative_error(program, joined, options.seed, options.threads, runs);
    if (!(v.float_max_rel_error <= options.float_tolerance)) {
      v.verdict = Verdict::not_equivalent;
      v.guarantee = false;
      v.reason = "numerically unstable: float relative error " + std::to_string(v.float_max_rel_error) +
                 " > tolerance " + std::to_string(options.float_tolerance) + " (f32 run of the whole program)";
    }
  }
  return v;
}

SearchResult search_in_parts(const Graph& program, const SearchOptions& options, SearchControl* control,
                             const Graph& reference, const std::vector<TensorId>& cuts) {
  if (program.outputs.empty()) throw UserError("search: the program has no outputs");
  const ProgramSplit split = split_program(program, cuts);
  const size_t n = split.parts.size();
  SearchResult result;
  for (OpId k : split.kept) result.kept_ops.push_back(kept_op_summary(program, k));
  if (options.resume) {
    if (options.checkpoint_path.empty()) throw UserError("search: --resume needs a checkpoint file");
    bool any = false;
    for (size_t p = 0; p < n; ++p) any |= std::filesystem::exists(part_checkpoint_path(options.checkpoint_path, p));
    if (!any)
      throw UserError(options.checkpoint_path + ": no checkpoint to resume from (this program is searched in parts, " +
                      "whose checkpoints are " + part_checkpoint_path(options.checkpoint_path, 0) + " and on)");
  }

  // Each part in turn, with a share of the time the earlier ones left by its number of ops:
  // a norm with a gated MLP takes longer to search than the down projection after it.
  std::vector<SearchResult> found(n);
  size_t ops_left = 0;
  for (const ProgramPart& part : split.parts) ops_left += part.ops.size();
  std::vector<double> offset(n, 0);
  double searched_seconds = 0;
  for (size_t p = 0; p < n; ++p) {
    const ProgramPart& part = split.parts[p];
    SearchPartResult& pr = result.parts.emplace_back();
    pr.ops = static_cast<int>(part.ops.size());
    for (const Op& op : part.program.ops)
      if (op.kind == OpKind::input) pr.inputs.push_back(op.attrs.name);
    pr.outputs = part.program.output_names;
    if (control && control->stop.load()) continue;
    SearchOptions o = options;
    if (options.time_limit_seconds > 0) {
      const double left = std::max(options.time_limit_seconds - searched_seconds, 0.0);
      // 0 would mean no limit; a part reached with no time left still gets a moment to find its
      // first candidates.
      o.time_limit_seconds =
          std::max(left * static_cast<double>(part.ops.size()) / static_cast<double>(ops_left), 1e-3);
    }
    ops_left -= part.ops.size();
    o.checkpoint_path = part_checkpoint_path(options.checkpoint_path, p);
    o.resume = options.resume && std::filesystem::exists(o.checkpoint_path);
    offset[p] = searched_seconds;
    o.on_progress = progress_after(options, searched_seconds);
    found[p] = search(part.program, o, control);
    const SearchResult& r = found[p];
    searched_seconds += r.search_seconds;
    pr.searched = true;
    pr.stop_reason = r.stop_reason;
    pr.stop_detail = r.stop_detail;
    pr.search_seconds = r.search_seconds;
    pr.verify_seconds = r.verify_seconds;
    pr.states = r.stats.states;
    pr.resumed = r.resumed;
    pr.cut_at = r.cut_at;
    if (!r.top.empty()) {
      pr.best_estimated_us = r.top.front().cost.total_us;
      pr.kernels = r.top.front().metrics.kernels;
    }
    result.stats.add(r.stats);
    result.cut_short.add(r.cut_short);
    result.search_seconds += r.search_seconds;
    result.verify_seconds += r.verify_seconds;
    result.background_verified += r.background_verified;
    result.background_verify_seconds += r.background_verify_seconds;
    result.worse_key += r.worse_key;
    result.resumed |= r.resumed;
    result.retile.add(r.retile);
  }

  // The stop reason and what each part that did not finish left.
  for (size_t p = 0; p < n; ++p) {
    const SearchPartResult& pr = result.parts[p];
    const StopReason reason = pr.searched ? pr.stop_reason : StopReason::interrupted;
    if (stop_severity(reason) > stop_severity(result.stop_reason)) result.stop_reason = reason;
    if (reason == StopReason::exhausted) continue;
    result.stop_detail += (result.stop_detail.empty() ? "" : "; ") + std::string("part ") + std::to_string(p + 1) +
                          " of " + std::to_string(n) + ": " +
                          (pr.searched ? std::string(stop_reason_name(reason)) +
                                             (pr.stop_detail.empty() ? "" : " (" + pr.stop_detail + ")")
                                       : std::string("not searched"));
  }

  // The μGraphs: every part's best, and each part's other verified ones beside the others' best.
  // A part with none (a stop came first) runs its own ops, which its program is as a μGraph.
  std::vector<std::vector<const Graph*>> choices(n);
  std::vector<std::vector<const VerifyResult*>> verdict_of(n);  // null: the part's own ops
  std::vector<std::vector<double>> found_at(n);
  for (size_t p = 0; p < n; ++p) {
    for (const SearchCandidate& c : found[p].top) {
      choices[p].push_back(&c.graph);
      verdict_of[p].push_back(&c.verification);
      found_at[p].push_back(offset[p] + c.found_seconds);
    }
    if (choices[p].empty()) {
      choices[p].push_back(&split.parts[p].program);
      verdict_of[p].push_back(nullptr);
      found_at[p].push_back(0);
    }
  }
  struct Joined {
    Graph graph;
    CostEstimate cost;
    double found_seconds = 0;
    std::string json;
    std::vector<const VerifyResult*> part_verdicts;
  };
  std::vector<Joined> joined_graphs;
  std::set<std::string> seen;
  const GpuSpec& gpu = gpu_spec(options.target.name);
  auto join = [&](size_t varied, size_t choice) {
    std::vector<const Graph*> graphs(n);
    double at = 0;
    for (size_t p = 0; p < n; ++p) {
      const size_t c = p == varied ? choice : 0;
      graphs[p] = choices[p][c];
      at = std::max(at, found_at[p][c]);
    }
    Joined j;
    for (size_t p = 0; p < n; ++p) j.part_verdicts.push_back(verdict_of[p][p == varied ? choice : 0]);
    j.graph = join_parts(program, split, graphs);
    j.json = to_json(j.graph);
    if (!seen.insert(j.json).second) return;
    j.cost = estimate_cost(j.graph, gpu);
    j.found_seconds = at;
    joined_graphs.push_back(std::move(j));
  };
  join(n, 0);
  for (size_t p = 0; p < n; ++p)
    for (size_t c = 1; c < choices[p].size(); ++c) join(p, c);
  std::stable_sort(joined_graphs.begin(), joined_graphs.end(), [](const Joined& a, const Joined& b) {
    return std::tie(a.cost.total_us, a.json) < std::tie(b.cost.total_us, b.json);
  });
  // A join past the ceiling (SearchOptions::cost_ceiling_us) is not worth verifying.
  if (options.cost_ceiling_us > 0)
    std::erase_if(joined_graphs, [&](const Joined& j) { return j.cost.total_us >= options.cost_ceiling_us; });
  if (joined_graphs.size() > static_cast<size_t>(options.top_k))
    joined_graphs.resize(static_cast<size_t>(options.top_k));
  // The joined μGraphs are candidates of their own, verified below (stats: the parts' and theirs).
  result.stats.candidates += static_cast<int64_t>(joined_graphs.size());

  // Each part's μGraphs were verified against the part; a joined one's verdict follows from
  // theirs (joined_verdict), and its float run checks the joining.
  const auto began = Clock::now();
  const std::atomic<bool>* stop = control ? &control->stop : nullptr;
  if (stop && stop->load()) {
    result.stop_reason = StopReason::interrupted;
    result.stop_detail +=
        (result.stop_detail.empty() ? "" : "; ") + std::string("stopped before the joined μGraphs were verified");
    return result;
  }
  ReferenceRuns runs;  // the program's float run, once for every joined μGraph
  for (Joined& j : joined_graphs) {
    VerifyResult v = joined_verdict(reference, j.graph, j.part_verdicts, options.verify, &runs);
    if (v.verdict != Verdict::equivalent) {
      ++result.stats.rejected;
      result.stop_detail +=
          (result.stop_detail.empty() ? "" : "; ") + std::string("a joined μGraph was rejected: ") + v.reason;
      continue;
    }
    ++result.stats.verified;
    SearchCandidate c;
    c.graph = std::move(j.graph);
    c.metrics = candidate_metrics(c.graph, options.target);
    c.cost = std::move(j.cost);
    c.verification = std::move(v);
    c.found_seconds = j.found_seconds;
    result.top.push_back(std::move(c));
  }
  result.verify_seconds += std::chrono::duration<double>(Clock::now() - began).count();
  return result;
}

}  // namespace mugraph::search_detail
