/// \file search.h
/// The μGraph search (paper §4, Algorithm 1; DESIGN.md §4): grows kernel graphs and the block
/// graphs of their graph-defined kernels op by op from the program's inputs, prunes prefixes
/// whose abstract expressions are not subexpressions of the program's, verifies complete
/// candidates, builds their thread graphs and ranks them.
///
/// How the work is organised (docs/search.md has the whole story):
/// - The search is a tree of *tasks*. A kernel task holds a kernel-graph prefix and enumerates
///   its one-op extensions: every pre-defined kernel op becomes a child kernel task, every
///   configuration of a graph-defined kernel (operands, grid, for-loop, imaps, fmaps) a child
///   block task. A block task grows that kernel's block graph depth-first; every way of closing
///   it (output savers with their omaps) appends the graph_kernel op and becomes a child kernel
///   task. Tasks are values (a prefix and a configuration), so the queue of pending tasks is
///   exactly what a checkpoint saves.
/// - A task commits its children, candidates and counters when it finishes, all at once; a task
///   cut short by a stop is re-run from its start on resume. The set of candidates of an
///   exhausted search therefore does not depend on thread count, timing or interruptions.
/// - Every task has a path (its parent's path plus its index among the parent's children);
///   paths in lexicographic order are the order of a sequential depth-first search.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mugraph/cost_model.h"
#include "mugraph/graph.h"
#include "mugraph/validate.h"
#include "mugraph/verify.h"

namespace mugraph {

/// The search's cost bound (SearchOptions::cost_bound).
enum class CostBound : uint8_t { bytes, model, both };
std::string_view cost_bound_name(CostBound b);
/// The cost bound named `name` ("bytes", "model", "both"); a UserError naming them otherwise.
CostBound require_cost_bound(std::string_view name);

/// What the command line (`mugraph search`) and the Python package (`superoptimize`) search
/// under when the user does not say: the model-ranked search, which finds μGraphs the bytes bound
/// cuts (GQA split along its keys: 10.7 µs estimated against 22.6; QKNorm's two kernels: 12.9
/// against 48.8), with a time limit, since its model phase exhausts small spaces only. SearchOptions'
/// own defaults stay the bytes bound without a limit: a library caller says what it wants.
inline constexpr CostBound kDefaultCostBound = CostBound::both;
/// The time limit in seconds a front end gives a search under the model bound (model, both) when
/// the user gives none; 0 (or a limit given explicitly) stays. The bytes bound gets none.
inline constexpr double kDefaultModelBoundTimeLimitSeconds = 60;
/// The time limit a front end gives a search under bound b when the user gives none (0: none).
inline constexpr double default_time_limit_seconds(CostBound b) {
  return b == CostBound::bytes ? 0 : kDefaultModelBoundTimeLimitSeconds;
}

/// Why a search stopped.
enum class StopReason : uint8_t {
  exhausted,     ///< every state within the limits was explored
  time_limit,    ///< the time limit was reached
  interrupted,   ///< SIGINT/SIGTERM or SearchControl::stop
  memory_limit,  ///< the process's resident memory reached SearchOptions::memory_limit_bytes
};

/// "exhausted", "time_limit", "interrupted", "memory_limit".
std::string_view stop_reason_name(StopReason r);

/// The ranges of SearchOptions' limits, inclusive: the CLI's flags and search() check them.
struct LimitRange {
  int lo, hi;
};
inline constexpr LimitRange kMaxKernelOpsRange{1, 16};
inline constexpr LimitRange kMaxBlockOpsRange{1, 32};
inline constexpr LimitRange kMaxGraphKernelsRange{0, 8};
inline constexpr LimitRange kMaxKernelInputsRange{1, 8};  // 0 as well: the program's default
inline constexpr LimitRange kRetileSeedsRange{0, 64};

/// Options of a search; the defaults are the paper's limits where it has them.
struct SearchOptions {
  /// Most non-input ops in the kernel graph (pre-defined and graph-defined kernels alike).
  int max_kernel_ops = 5;
  /// Most ops in one block graph, input iterators counted and output savers not (the convention
  /// of the paper's implementation; thread graphs do not exist yet during the search).
  int max_block_ops = 12;
  /// Most graph-defined kernels in the kernel graph.
  int max_graph_kernels = 2;
  /// Most DTensors one graph-defined kernel reads; 0: the default for the program
  /// (default_max_kernel_inputs), which search() and SearchContext put in its place.
  int max_kernel_inputs = 0;
  /// Wall-clock limit in seconds; 0: none.
  double time_limit_seconds = 0;
  /// The search stops (StopReason::time_limit) if it has found no candidate after this many
  /// seconds; 0: never. search() sets it for a program it can cut in parts if the whole takes
  /// too long (docs/search.md, "Programs too large to search whole").
  double give_up_without_candidate_seconds = 0;
  /// Candidates the model estimates at this or more (µs) are dropped as found, and so are joins
  /// of parts that cost it or more; 0: none. search() sets it for the parts it searches beside a
  /// whole search, at model_bound_ratio times the whole search's best: a join costs at least
  /// each part's kernels, so a part's μGraph past it joins into nothing worth verifying (the
  /// paper's QK-norm at batch 8 spent 27 s verifying such a part's candidates at 209 µs beside a
  /// whole best of 34 µs). It caps the cost bound too: a subtree whose floor is past it is cut,
  /// by the model bound and, with the model's lower bound on bytes and kernels, in the bytes
  /// phase.
  double cost_ceiling_us = 0;
  /// Whether search() searches a program in parts, cut before its matmuls, when the whole search
  /// finds no candidate (in half the time limit, or within the limits at all; docs/search.md,
  /// "Programs too large to search whole"). false: the whole search's result, however empty
  /// (what tests of the limits themselves want).
  bool cut_into_parts = true;
  /// The search stops (StopReason::memory_limit, keeping what it found, as at a time limit) once
  /// the process's resident memory reaches this many bytes. Pending tasks accumulate in a long
  /// search (QKNorm: about 5 GB after 4 minutes on 2 threads), and the kernel's OOM killer would
  /// end it with nothing verified. 0: three quarters of what the process may use (the physical
  /// memory, or its control group's memory limit where that is lower).
  int64_t memory_limit_bytes = 0;
  /// Worker threads; 0: every core.
  int threads = 0;
  /// Run tasks in path order and, if the search stops early, keep only the candidates of the
  /// longest path-ordered prefix of tasks that all completed: the result is then the result a
  /// one-thread search stopped at that task would give.
  bool deterministic = false;
  /// Prune with the abstract-expression oracle (off: only shapes, memory and the other exact
  /// rules prune; for the ablation of the paper's Table 5).
  bool abstract_pruning = true;
  /// Tile-local values follow the program (docs/search.md, "Program tile values"): inside a
  /// block graph, a value every reduction of which sums dims its tile holds whole must equal
  /// (under A_eq, over the same indices) a value the program computes, and such a value with
  /// more than one op is computed by replaying the program's own ops on the tiles, as one step of
  /// the block-op budget. Off: block graphs are grown op by op only (ablation).
  bool program_tile_values = true;
  /// A kernel whose operands keep their values under a change of the program's inputs that
  /// changes an output cannot compute that output (docs/search.md, "Input probes"): it is not
  /// grown as one that finishes the program. Off: only the abstract expressions' inputs decide
  /// (ablation).
  bool input_probes = true;
  /// What cuts a prefix once top_k + 4 candidates not known to be wrong, or top_k verified ones
  /// (a background verifier checks the best while the search runs), are known (docs/search.md,
  /// "The cost bound"). bytes: its lower bound on (device bytes, kernels) is lexicographically
  /// worse than the last of them, or than the best verified candidate's (only candidates of
  /// the best verified key are reported); a heuristic for the model's rank (a μGraph moving more
  /// bytes may be estimated faster), which keeps searches to seconds. model: its lower bound on the estimate
  /// (cost_lower_bound_us) exceeds that candidate's estimate; never cuts a prefix whose
  /// completions could rank ahead, but prunes far less. both: the bytes search to its end, then
  /// the model search from the root with the candidates found so far (its bound is tight from the
  /// start), until it ends or the time limit; a time-limited search then never ranks below the
  /// bytes search, and finds what the bytes bound cuts (a split that moves more bytes to fill
  /// the SMs) where the time allows. With a time limit the bytes search gets at most
  /// bytes_phase_share of it.
  CostBound cost_bound = CostBound::bytes;
  /// CostBound::both with a time limit: the bytes phase runs for at most this share of the limit;
  /// then its pending tasks are dropped and the model phase starts from the root. Dropping them
  /// loses nothing the model phase needs: it reaches every μGraph that can rank in the top by the
  /// model on its own. Where many μGraphs tie on the fewest bytes, the bytes phase can run for
  /// minutes (RMSNorm then Q, K and V projections: not ended in 60 s), and the model phase, which
  /// finds μGraphs the model rates twice as fast within seconds, never ran. Not in the
  /// deterministic mode, whose result is a completed prefix of the tasks in path order, where
  /// the model phase's come last. In (0, 1]; 1: the bytes phase may take the whole limit.
  double bytes_phase_share = 0.25;
  /// ... but never less than this many seconds: under a short limit the bytes phase, whose
  /// candidates make the model phase's bound tight, is the better use of the time (the parts
  /// beside a search get a second or so each; cut at a quarter of that, under the sanitizers
  /// the model phase ran out of time on parts that both phases had finished). >= 0.
  double bytes_phase_min_seconds = 10;
  /// With the model bound (model, both): a prefix whose floor exceeds this many times the best
  /// verified candidate's estimate is cut as well, also before top_k are verified. Without it, a
  /// program with fewer than top_k good μGraphs (the paper's nTrans: two) is searched with no
  /// bound at all. On the H200 timings recorded so far, the fastest measured candidate's
  /// estimate was at most 1.40 times the model's pick's (docs/search.md, "The ratio bound");
  /// 0: off.
  double model_bound_ratio = 2.0;
  /// How many verified candidates to report (with the bytes bound, of the best verified
  /// (device bytes, kernels) only).
  int top_k = 8;
  /// How many complete candidates (by rank) to keep for verification.
  int candidate_pool = 512;
  /// Retiling (docs/search.md, "Retiling"): after the search, the block graphs of the best
  /// candidates of this many distinct structures are rebuilt under every configuration of their
  /// kernels' operands, and what computes the program joins the candidates. 0: none.
  int retile_seeds = 4;
  /// The background verifier (docs/search.md, "The cost bound") starts after this much search
  /// time, and then spends at most a quarter of the time searched; negative: never (the bound
  /// then rests on the top_k + 4 margin alone).
  double background_verify_after_seconds = 1.0;
  /// The block searches' results are shared between prefixes that give the next kernel the same
  /// operands (docs/search.md, "Block-search cache"), in a cache of about this many bytes; 0: off
  /// (every block search grows its block graphs anew; for measuring the cache).
  int64_t block_cache_bytes = int64_t{256} << 20;
  /// Target whose shared-memory limit block graphs must fit.
  Target target = default_target();
  /// Verification of candidates (delta, seed, float filter).
  VerifyOptions verify;
  /// Checkpoint file ("": none), written every `checkpoint_seconds` and when the search stops
  /// early; `resume` starts from it.
  std::string checkpoint_path;
  double checkpoint_seconds = 5;
  bool resume = false;
  /// Called about once a second from one thread with the current figures (may be empty).
  std::function<void(const struct SearchProgress&)> on_progress;
};

/// Figures of a running search, for the progress line.
struct SearchProgress {
  double elapsed_seconds = 0;
  int64_t states = 0;
  int64_t pruned = 0;
  int64_t candidates = 0;  ///< complete candidates found so far
  /// Of those kept for verification, the ones the background verifier has verified equivalent:
  /// what a stop now would report (up to top_k).
  int64_t verified = 0;
  int64_t tasks_done = 0, tasks_pending = 0;
  /// Best complete candidate so far (by rank, not yet verified); negative if none.
  int64_t best_device_bytes = -1;
  int best_kernels = 0;
  double best_estimated_us = 0;
  /// With the model bound, the least floor of the tasks pending or running: every μGraph the
  /// search has not reached is estimated at this or more (SearchResult::unsearched_floor_us);
  /// negative otherwise.
  double unsearched_floor_us = -1;
};

/// Figures of a complete μGraph that break ties of the cost model's estimate (the rank, see
/// rank_estimate_us): fewest device-memory bytes, then fewest kernels, then least load traffic
/// per SM, then fewest block ops, then least shared memory, then least shared-memory traffic per
/// SM; remaining ties by the canonical JSON text.
struct CandidateMetrics {
  /// Compulsory device-memory traffic: per kernel, the bytes of every distinct DTensor it reads
  /// plus every DTensor it writes (re-reads of one tensor by many blocks are taken to hit L2).
  int64_t device_bytes = 0;
  /// Bytes the input iterators load per SM: per graph-defined kernel, every block loads each
  /// iterator's tile once per iteration, spread over min(blocks, SMs) SMs (pre-defined kernels
  /// count their operands over all SMs). Separates tilings that move the same DRAM bytes: small
  /// grids leave SMs idle, tiles reloaded in every iteration or by every block cost traffic.
  int64_t load_bytes_per_sm = 0;
  int kernels = 0;
  int graph_defined_kernels = 0;
  int64_t block_ops = 0;  ///< ops in all block graphs before fusion
  /// Bytes block ops read and write in shared memory per SM (block_shared_traffic_bytes over all
  /// blocks, spread over min(blocks, SMs) SMs), before thread-graph fusion.
  int64_t shared_traffic_bytes_per_sm = 0;
  /// Largest block graph's (block_shared_memory_bytes: all STensors live, a concat's operands
  /// in its buffer). LoRA's (X‖X·A)·(W‖B) thus needs less than X·W + (X·A)·B (Figure 9b).
  int64_t shared_memory_bytes = 0;
};

/// Metrics of a complete μGraph on a target.
CandidateMetrics candidate_metrics(const Graph& kernel_graph, const Target& target = default_target());

/// What ranks a complete μGraph (found by the search, thread graphs not yet fused): the cost
/// model's estimate (cost_model.h) on `gpu` of the graph with its thread graphs fused and its
/// threads per block chosen (block_threads.h), as it will run. Lower is better.
double rank_estimate_us(const Graph& kernel_graph, const GpuSpec& gpu);

/// What the kernels of `kernel_graph` (a complete μGraph or a search prefix) cost in any μGraph
/// that contains them, beyond cost_lower_bound_us of their device bytes and kernel count: each
/// kernel's estimate, as rank_estimate_us takes it (thread graphs fused, threads chosen), over
/// its launch and its DRAM term at the peak. Exact, not a bound: a kernel's estimate depends on
/// that kernel alone, and a μGraph that extends a prefix keeps the prefix's kernels as they are.
double kernels_floor_extra_us(const Graph& kernel_graph, const GpuSpec& gpu);

/// kernels_floor_extra_us's share of the last op of `kernel_graph` (a kernel), so that a prefix's
/// figure is its parent's plus this.
double last_kernel_floor_extra_us(const Graph& kernel_graph, const GpuSpec& gpu);

/// A verified candidate.
struct SearchCandidate {
  Graph graph;  ///< thread graphs fused
  CandidateMetrics metrics;
  /// The cost model's estimate on the search's target (cost_model.h): the rank.
  CostEstimate cost;
  VerifyResult verification;
  /// When the search found it (seconds of search time, like SearchResult::search_seconds): a
  /// search cut by its time limit may have found its best long before.
  double found_seconds = 0;
};

/// Counters of a search. `pruned` maps a reason to how many candidate ops, kernels or prefixes
/// it removed: shape, shared_memory, abstract_expression, index, unclosable, missing_inputs,
/// cost_bound, redundant_operand, split_contraction, dead_ops, partial_sum, program_tile_value,
/// duplicate_value, steps_left (each rule and how exact it is: docs/search.md, "What prunes").
struct SearchStats {
  int64_t states = 0;  ///< prefixes kept (kernel and block level)
  int64_t kernel_states = 0;
  int64_t block_configs = 0;  ///< graph-defined kernel configurations tried
  std::map<std::string, int64_t> pruned;
  int64_t candidates = 0;  ///< complete μGraphs found (before verification)
  int64_t verified = 0;    ///< candidates that passed verification
  int64_t rejected = 0;    ///< candidates verification rejected
  int64_t tasks = 0;       ///< tasks completed
  int64_t oracle_queries = 0;
  /// Configurations whose block graphs a block task took from the block-search cache instead of
  /// growing them (their closings are counted in `states`, their growth is not).
  int64_t block_replays = 0;

  int64_t total_pruned() const;
  void add(const SearchStats& other);
};

/// What retiling did (SearchOptions::retile_seeds; docs/search.md, "Retiling").
struct RetileStats {
  int seeds = 0;         ///< candidates whose kernels were retiled (one per structure)
  int64_t configs = 0;   ///< configurations tried, over all seeds and kernels
  int64_t rebuilt = 0;   ///< kernels rebuilt under a configuration (each valid closing)
  int64_t complete = 0;  ///< of those, complete μGraphs that compute the program's outputs
  int64_t kept = 0;      ///< of those, new to the candidate pool and kept in it
  /// The best candidate's estimate before and after (µs; 0 when there was none).
  double best_before_us = 0, best_after_us = 0;
  double seconds = 0;
  bool stopped = false;  ///< a stop (interrupt) ended it early
  /// Adds another search's counts and time (a part's); the best estimates stay this one's.
  void add(const RetileStats& other);
};

/// One part of a program searched in parts (SearchResult::parts).
struct SearchPartResult {
  int ops = 0;                       ///< the program's ops it holds
  std::vector<std::string> inputs;   ///< its inputs: program inputs, or values made outside it
  std::vector<std::string> outputs;  ///< its values that a program output or another part reads
  bool searched = false;             ///< false: a stop came first (its ops are then kept as they are)
  StopReason stop_reason = StopReason::exhausted;
  std::string stop_detail;
  double search_seconds = 0, verify_seconds = 0;
  int64_t states = 0;
  /// Its best verified μGraph's estimate on the search's target (µs); 0 when it has none, and
  /// its ops then run as they are.
  double best_estimated_us = 0;
  int kernels = 0;  ///< that μGraph's kernels
  bool resumed = false;
  /// Where this part was cut in turn, its whole search having found nothing (SearchResult::cut_at).
  std::vector<std::string> cut_at;
};

/// The outcome of a search.
struct SearchResult {
  StopReason stop_reason = StopReason::exhausted;
  std::string stop_detail;    ///< e.g. "1234 tasks pending"
  /// A search the model bound cut (--cost-bound model, or both's model phase) that stopped with
  /// tasks pending: the smallest of their floors (µs). Every μGraph the search's rules generate
  /// and it has not reached is estimated at this or more, so the best found is within
  /// best / floor of the best there is under these limits, and the best there is if the floor
  /// is at least its estimate (docs/search.md, "What a stopped search proves"). Negative
  /// otherwise: exhausted, stopped in the bytes bound, or searched in parts.
  double unsearched_floor_us = -1;
  double search_seconds = 0;  ///< generation (until the stop)
  double verify_seconds = 0;  ///< verification, fusion and ranking after it
  SearchStats stats;
  /// Tasks a stop (time or memory limit, interrupt) cut short while they ran: their work is not
  /// in `stats`, which counts completed tasks (a cut task runs again from its start after a
  /// resume), but the progress line counted it as it went. A block task of seven-input kernels
  /// can grow millions of states before the limit cuts it.
  struct CutShort {
    int64_t tasks = 0, states = 0, pruned = 0;
    void add(const CutShort& other) {
      tasks += other.tasks;
      states += other.states;
      pruned += other.pruned;
    }
  } cut_short;
  std::vector<SearchCandidate> top;  ///< best first; top[0] is the best μGraph
  bool resumed = false;
  /// CostBound::both: search time when the bytes search ended and the model search began;
  /// negative if it did not end.
  double bytes_phase_seconds = -1;
  /// CostBound::both: the bytes phase's tasks still pending when its share of the time limit
  /// (SearchOptions::bytes_phase_share) ran out and the model phase began; 0 if it ended.
  int64_t bytes_phase_dropped_tasks = 0;
  /// Candidates the background verifier checked while the search ran (docs/search.md, "The
  /// cost bound"; verify_seconds reuses their verdicts), and the time it spent on them
  /// (included in search_seconds, beside the workers).
  int background_verified = 0;
  double background_verify_seconds = 0;
  /// Retiling, after the search and before verification (not in search_seconds).
  RetileStats retile;
  /// With the bytes bound: candidates not known to be wrong that were neither verified nor
  /// reported because their (device bytes, kernels) are worse than the best verified one's
  /// (they were found before the bound, which rests on it, had tightened).
  int worse_key = 0;
  /// A program with ops the generator does not grow (reshape, repeat, concat, sums to several
  /// values) is searched in parts between them (docs/search.md, "Programs with layout ops"):
  /// those ops, each kept as the pre-defined kernel it is ("reshape (Y)"), and each part's search.
  /// Then `stats` and the times are the parts' together, and `top` holds the μGraphs that join
  /// the parts' best ones, verified against the whole program. Empty for a program searched
  /// whole.
  std::vector<std::string> kept_ops;
  std::vector<SearchPartResult> parts;
  /// Repeats the search read as broadcasts ("repeat (KR)"): the program was rewritten so that
  /// what reads them reads the unrepeated tensor, and the copies are never written
  /// (docs/search.md, "Repeats as broadcasts"). The rewrite is searched in parts around its
  /// views, and `top` is verified against the program as it was given.
  std::vector<std::string> lifted_repeats;
  /// Repeats read by ops the generator grows that stayed copies, each with why: "repeat (R):
  /// sum (S) sums over the repeated dimension".
  std::vector<std::string> kept_repeats;
  /// A program whose whole search found no candidate (in half the time limit, or within the
  /// limits at all) is searched in parts cut before its chained matmuls, or where it has none,
  /// before its matmuls' computed operands (docs/search.md, "Programs too large to search
  /// whole"): the tensors it was cut at ("t12"), and the seconds the whole search took (also in
  /// search_seconds). Empty and 0 otherwise.
  std::vector<std::string> cut_at;
  double whole_search_seconds = 0;
  /// A program with such cuts whose whole search found candidates and was exhausted with time to
  /// spare, or stopped at its share of the time limit, is searched in parts as well, and `top`
  /// holds the best μGraphs of both (docs/search.md, "The parts beside an exhausted whole search"
  /// and "Its share of the time limit"): the whole search's best estimate (µs). 0 when the
  /// program was searched in parts because the whole search found nothing.
  double whole_best_estimated_us = 0;
  /// Why the whole search of a program with cuts stopped: exhausted, or time_limit (its share of
  /// the limit, or half of it without a candidate). Meaningful only where `cut_at` is not empty.
  StopReason whole_stop_reason = StopReason::exhausted;
  /// The input probes the search ran its prefixes under (docs/search.md, "Input probes"), what
  /// each changes ("H + C, X + C"); empty when it made none. A search in parts lists its whole
  /// search's.
  std::vector<std::string> input_probes;
};

/// External control of a running search (signal handlers set `stop`).
struct SearchControl {
  std::atomic<bool> stop{false};
};

/// SearchOptions::max_kernel_inputs when it is 0: 4, or 5 for a program of five inputs or more.
/// A kernel that reads all five of an RMSNorm's X and weight and Q, K and V's projections is one
/// kernel instead of two (bench/heldout/qkv_proj.mg: 7.32 µs in 19.1 s with 4, 6.06 µs in 6.0 s
/// with 5); llama_mlp_block and qkv_llama3_decode find the same μGraphs faster or as fast. Not
/// more: gpt2_mlp_block's seven inputs at 7 give a whole search that runs out of time on worse
/// μGraphs (138.6 µs against 13.22), and nothing measured gained from 6 (docs/search.md,
/// "Inputs per kernel").
int default_max_kernel_inputs(const Graph& program);

/// `options` with the program's defaults in place of its zeros (max_kernel_inputs): what a search
/// of `program` runs with, and what its report and checkpoint record.
SearchOptions resolved_options(const SearchOptions& options, const Graph& program);

/// Searches for μGraphs equivalent to `program` (a kernel graph of pre-defined ops, as
/// parse_program returns). Throws UserError for a program the search cannot take (no outputs,
/// unknown checkpoint) and InternalError on bugs.
SearchResult search(const Graph& program, const SearchOptions& options = {}, SearchControl* control = nullptr);

/// The report the CLI writes as report.json; `options` as resolved_options gives them.
std::string search_report_json(const SearchResult& result, const SearchOptions& options);

}  // namespace mugraph
