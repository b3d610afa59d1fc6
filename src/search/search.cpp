// The search driver: a shared queue of tasks worked by every thread, limits and stop reasons,
// progress, checkpoints, then verification, thread-graph fusion and ranking of the candidates.
#include "mugraph/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "checkpoint.h"
#include "generator.h"
#include "lift_repeats.h"
#include "memory.h"
#include "mugraph/block_threads.h"
#include "mugraph/fuse_thread_graphs.h"
#include "mugraph/host_memory.h"
#include "mugraph/json.h"
#include "program_parts.h"
#include "retile.h"
#include "search_parts.h"
#include "thread_pool.h"

namespace mugraph {

namespace {

using namespace search_detail;
using Clock = std::chrono::steady_clock;

/// The ranking order: the cost model's estimate, then the metrics (search.h, CandidateMetrics);
/// `json` breaks the remaining ties so the order is total.
struct RankedCandidate {
  FoundCandidate found;
  std::string json;
  /// Set once verified, during the search (in the background) or after it.
  std::optional<VerifyResult> verdict;
  bool rejected() const { return verdict && verdict->verdict != Verdict::equivalent; }
  bool equivalent() const { return verdict && verdict->verdict == Verdict::equivalent; }
};

/// The background verifier's share of the search's time: it starts a candidate only while
/// what it spent so far is at most this fraction of the time searched (and only after
/// SearchOptions::background_verify_after_seconds: a shorter search needs no tighter bound, and
/// would end waiting for a test the verifier is running, since it stops between tests).
constexpr double kBackgroundVerifyShare = 0.25;

/// A candidate's key for the bytes bound: (device bytes, kernels), smaller first.
std::pair<int64_t, int> bytes_key(const RankedCandidate& c) {
  return {c.found.metrics.device_bytes, c.found.metrics.kernels};
}

bool rank_less(const RankedCandidate& a, const RankedCandidate& b) {
  auto key = [](const FoundCandidate& c) {
    const CandidateMetrics& m = c.metrics;
    return std::make_tuple(c.estimated_us, m.device_bytes, m.kernels, m.load_bytes_per_sm, m.block_ops,
                           m.shared_memory_bytes, m.shared_traffic_bytes_per_sm);
  };
  if (key(a.found) != key(b.found)) return key(a.found) < key(b.found);
  return a.json < b.json;
}

/// A pending task's place in the search's order (Driver::pending_).
using TaskKey = std::pair<double, std::vector<int32_t>>;

class Driver {
 public:
  Driver(SearchContext& ctx, SearchControl* control) : ctx_(ctx), opt_(ctx.options()), control_(control) {}

  SearchResult run() {
    SearchResult result;
    double offset = 0;
    if (opt_.resume) {
      if (opt_.checkpoint_path.empty()) throw UserError("search: --resume needs a checkpoint file");
      if (!std::filesystem::exists(opt_.checkpoint_path))
        throw UserError(opt_.checkpoint_path + ": no checkpoint to resume from");
      CheckpointState st = read_checkpoint(opt_.checkpoint_path, opt_.target);
      if (st.fingerprint != search_fingerprint(ctx_.program(), opt_))
        throw UserError(opt_.checkpoint_path +
                        ": the checkpoint was written for another program, other search limits or another "
                        "version of the search; start the search anew");
      check_checkpoint_program(st, ctx_.program(), opt_.checkpoint_path);
      offset = st.elapsed_seconds;
      stats_ = st.stats;
      bytes_phase_seconds_ = st.bytes_phase_seconds;
      // A checkpoint of CostBound::both's model phase (also one written after it ended, by a stop
      // during verification: nothing is pending then, and the phase must not run again).
      if (bytes_phase_seconds_ >= 0) ctx_.use_model_bound();
      for (Task& t : st.pending) push_locked(std::move(t));
      for (FoundCandidate& c : st.candidates) add_candidate(std::move(c));
      result.resumed = true;
    } else {
      push_locked(ctx_.root());
    }

    start_ = Clock::now();
    offset_ = offset;
    run_tasks();
    if (opt_.cost_bound == CostBound::both && !ctx_.model_bound() &&
        (stop_reason_ == StopReason::exhausted || bytes_phase_cut_)) {
      start_model_phase();
      run_tasks();
    }

    result.search_seconds = elapsed();
    result.stop_reason = stop_reason_;
    result.bytes_phase_seconds = bytes_phase_seconds_;
    result.bytes_phase_dropped_tasks = bytes_phase_dropped_;
    result.input_probes = ctx_.input_probes().names;
    // A search stopped early by the model bound saves what retiling finds too: resumed, it starts
    // with the bound they set (exact by the model; the bytes bound, a heuristic, would cut by
    // their keys what an uninterrupted search grows). Its state is written once, after retiling
    // (a frontier of hundreds of thousands of tasks takes seconds to write). Not in the
    // deterministic mode, which cuts the pool to the completed prefix of tasks: its checkpoint
    // must keep the candidates of the tasks that completed after the first unfinished one.
    const bool write_after_retile = stop_reason_ != StopReason::exhausted && stop_reason_ != StopReason::interrupted &&
                                    ctx_.model_bound() && !opt_.deterministic;
    if (stop_reason_ != StopReason::exhausted) {
      if (stop_reason_ == StopReason::memory_limit)
        result.stop_detail = "resident memory " + gib_text(memory_seen_.load()) + " reached the limit of " +
                             gib_text(memory_limit_) + "; ";
      result.stop_detail += std::to_string(pending_.size()) + " tasks pending";
      if (opt_.cost_bound == CostBound::both)
        result.stop_detail += ctx_.model_bound() ? " in the model phase" : " in the bytes phase";
      if (!opt_.checkpoint_path.empty() && !write_after_retile) write_state();
      if (opt_.deterministic) cut_to_completed_prefix(result);
      // What the search has not reached is below a pending task (a task cut short by the stop is
      // back among them) or was cut by the model bound, beyond the best found. The bytes bound's
      // floors are no estimates.
      result.unsearched_floor_us = unsearched_floor_locked();
    } else if (!opt_.checkpoint_path.empty()) {
      // The final state replaces the last periodic one, which would send a resume back into a
      // tree already searched: nothing is pending now, so a resume only verifies the candidates.
      write_state();
    }
    result.stats = stats_;
    result.cut_short = cut_short_;
    result.background_verified = background_verified_;
    result.background_verify_seconds = background_seconds_;

    if (stop_reason_ != StopReason::interrupted) retile_pool(result);
    if (write_after_retile && !opt_.checkpoint_path.empty()) write_state();

    auto verify_start = Clock::now();
    verify_and_rank(result);
    result.verify_seconds = std::chrono::duration<double>(Clock::now() - verify_start).count();
    return result;
  }

 private:
  double elapsed() const { return offset_ + std::chrono::duration<double>(Clock::now() - start_).count(); }
  /// What stops the search now, if anything: a requested stop, then the time limit, then the
  /// memory limit.
  std::optional<StopReason> limit_reached() const {
    if (control_ && control_->stop.load()) return StopReason::interrupted;
    if (opt_.time_limit_seconds > 0 && elapsed() >= opt_.time_limit_seconds) return StopReason::time_limit;
    if (opt_.give_up_without_candidate_seconds > 0 && !any_candidate_.load() &&
        elapsed() >= opt_.give_up_without_candidate_seconds)
      return StopReason::time_limit;
    if (over_memory_limit()) return StopReason::memory_limit;
    return std::nullopt;
  }
  /// CostBound::both: whether the bytes phase has had its share of the time limit
  /// (SearchOptions::bytes_phase_share; never in the deterministic mode).
  bool bytes_phase_over() const {
    return opt_.cost_bound == CostBound::both && !ctx_.model_bound() && !opt_.deterministic &&
           opt_.time_limit_seconds > 0 &&
           elapsed() >= std::max(opt_.bytes_phase_share * opt_.time_limit_seconds, opt_.bytes_phase_min_seconds);
  }
  /// Stops the workers (stop_) once a limit is reached (stop_reason_ says which) or, with
  /// CostBound::both, once the bytes phase has had its time (bytes_phase_cut_; the model phase
  /// follows). The lock held; whether this call stopped them.
  bool stop_at_limit_locked() {
    if (stop_.load()) return false;
    if (auto reason = limit_reached())
      stop_reason_ = *reason;
    else if (bytes_phase_over())
      bytes_phase_cut_ = true;
    else
      return false;
    stop_.store(true);
    return true;
  }

  /// Whether the resident memory reached the limit: read at most every 50 ms (workers ask at
  /// every task, the checkpoint writer at every prefix), and once reached it stays reached.
  bool over_memory_limit() const {
    if (memory_limit_ <= 0) return false;
    if (memory_seen_.load() >= memory_limit_) return true;
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
    int64_t last = memory_checked_ms_.load();
    if (now - last < 50 || !memory_checked_ms_.compare_exchange_strong(last, now)) return false;
    const int64_t rss = resident_bytes();
    memory_seen_.store(rss);
    return rss >= memory_limit_;
  }

  /// Works the pending tasks with every thread until they are done or a limit stops them.
  void run_tasks() {
    int threads = opt_.threads > 0 ? opt_.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    std::vector<std::thread> workers;
    for (int i = 0; i < threads; ++i) workers.emplace_back([this] { work(); });
    verifier_stop_.store(false);
    std::thread verifier([this] { verify_in_background(); });
    monitor();
    for (std::thread& w : workers) w.join();
    {
      std::lock_guard lock(mu_);
      verifier_stop_.store(true);
    }
    verifier_cv_.notify_all();
    verifier.join();
    if (error_) std::rethrow_exception(error_);
  }

  /// The background verifier: while the search runs, it verifies the best candidates (those the
  /// cost bound rests on, next_to_verify_locked) one at a time, within kBackgroundVerifyShare of
  /// the time, so that the bound can rest on verified candidates (update_bound_locked). Its
  /// verdicts are the ones verify_and_rank would reach (same options, seeds and reference runs),
  /// and it reuses them; a candidate cut short by the end of the search is verified again there.
  void verify_in_background() {
    std::unique_lock lock(mu_);
    while (!verifier_stop_.load()) {
      const double searched = elapsed();
      const double after = opt_.background_verify_after_seconds;
      const RankedCandidate* next =
          after >= 0 && searched >= after && background_seconds_ <= kBackgroundVerifyShare * searched
              ? next_to_verify_locked()
              : nullptr;
      if (next == nullptr) {
        // Woken by a new candidate; the time share frees up with the time.
        verifier_cv_.wait_for(lock, std::chrono::milliseconds(50));
        continue;
      }
      const Graph graph = next->found.graph;
      const std::string json = next->json;
      lock.unlock();
      const auto start = Clock::now();
      std::vector<VerifyResult> verdicts;
      try {
        verdicts = verify_all(ctx_.program(), {&graph}, opt_.verify, &runs_, &verifier_stop_);
      } catch (...) {
        lock.lock();
        fail_locked(std::current_exception());
        return;
      }
      lock.lock();
      background_seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
      if (verdicts.empty()) return;  // stopped: the search is over
      ++background_verified_;
      auto it = std::find_if(pool_.begin(), pool_.end(), [&](const RankedCandidate& c) { return c.json == json; });
      if (it == pool_.end()) continue;  // dropped from the pool meanwhile
      it->verdict = std::move(verdicts[0]);
      const std::pair<int64_t, int> key = bytes_key(*it);
      background_rejected_ += !it->equivalent();
      if (it->equivalent())
        best_verified_key_ = std::min(best_verified_key_.value_or(key), key);
      else if (auto k = keys_.find(key); k != keys_.end())
        keys_.erase(k);
      update_bound_locked();
    }
  }

  /// A worker or the background verifier failed: the first error is rethrown by run_tasks, and
  /// everything stops.
  void fail_locked(std::exception_ptr error) {
    if (!error_) error_ = std::move(error);
    stop_.store(true);
    cv_.notify_all();
    monitor_cv_.notify_one();
  }

  /// The best candidate not yet verified among the bound_margin() best not known to be wrong,
  /// or null: those are what the cost bound rests on. Only while the margin is in doubt: fewer
  /// candidates than it are known (there is no bound yet), a verdict already rejected one (it
  /// may rest on more), or none is verified yet, which the bounds on the best verified
  /// candidate wait for (the bytes bound's best verified key, the model's ratio). Otherwise
  /// verifying now would only do, less efficiently (alone and beside the workers), what
  /// verify_and_rank does after the search. (nTrans at bs 8: once the search grew quickly
  /// enough to find the margin's 12 candidates within its first second, before the verifier
  /// starts, the bound rested on them, most wrong by a constant factor that A_eq cannot tell,
  /// and the bytes phase ran to the time limit instead of ending at 1.5 s.)
  const RankedCandidate* next_to_verify_locked() const {
    size_t counted = 0;
    const RankedCandidate* next = nullptr;
    bool any_equivalent = false;
    for (const RankedCandidate& c : pool_) {
      any_equivalent |= c.equivalent();
      if (c.rejected()) continue;
      if (!c.verdict && next == nullptr) next = &c;
      if (++counted == bound_margin()) break;
    }
    return counted < bound_margin() || background_rejected_ > 0 || !any_equivalent ? next : nullptr;
  }

  /// CostBound::both, after the bytes phase ran to its end or its share of the time limit: the
  /// search starts again from the root, cut by the model bound, which the candidates found so
  /// far make tight from the start. The bytes phase's pending tasks are dropped: the model phase
  /// reaches whatever of theirs can rank in the top. (The workers are joined: no task runs, and
  /// the next ones build fresh generators.)
  void start_model_phase() {
    std::lock_guard lock(mu_);
    bytes_phase_seconds_ = elapsed();
    if (bytes_phase_cut_) {
      bytes_phase_dropped_ = static_cast<int64_t>(pending_.size());
      pending_.clear();
      pending_paths_.clear();
    }
    ctx_.use_model_bound();
    update_bound_locked();
    Task root = ctx_.root();
    root.path = {kModelPhasePath};
    push_locked(std::move(root));
    stop_.store(false);
    if (!opt_.checkpoint_path.empty()) write_state_locked();
  }

  void push_locked(Task&& t) {
    if (ctx_.model_bound() && t.floor_us > ctx_.bound_us()) {
      ++stats_.pruned["cost_bound"];
      return;
    }
    const double order = task_order_us(t);
    pending_paths_.emplace(t.path, order);
    TaskKey key{order, t.path};
    pending_.emplace(std::move(key), std::move(t));
  }

  /// The next task to run (the lock held, pending_ not empty): see pending_. `dive`: whether it
  /// is a dive's.
  Task pop_locked(bool& dive) {
    auto it = pending_.begin();
    dive = ctx_.model_bound() && !opt_.deterministic && dive_seconds_ <= best_first_seconds_;
    if (dive) {
      const auto& [path, floor] = *pending_paths_.begin();
      it = pending_.find(TaskKey{floor, path});
      MUGRAPH_CHECK(it != pending_.end()) << "a pending path has no pending task";
    }
    pending_paths_.erase(it->first.second);
    Task task = std::move(it->second);
    pending_.erase(it);
    return task;
  }

  /// With the model bound, a pending task whose floor is beyond the bound would find nothing
  /// (its every candidate is estimated at the floor or above): it is dropped as it would be cut
  /// when run. Best-first order keeps many tasks pending (kernel tasks with a prefix graph each),
  /// so this is what bounds the search's memory.
  void drop_beyond_bound_locked() {
    if (!ctx_.model_bound()) return;
    const double bound = ctx_.bound_us();
    auto from = pending_.upper_bound(TaskKey{bound, std::vector<int32_t>(1, INT32_MAX)});
    while (from != pending_.end() && !(from->first.first > bound)) ++from;
    for (auto it = from; it != pending_.end(); ++it) {
      ++stats_.pruned["cost_bound"];
      pending_paths_.erase(it->first.second);
    }
    pending_.erase(from, pending_.end());
  }

  /// How many candidates not known to be wrong the cost bound waits for: see update_bound_locked.
  size_t bound_margin() const { return static_cast<size_t>(std::max(1, opt_.top_k) + 4); }
  size_t wanted() const { return static_cast<size_t>(std::max(1, opt_.top_k)); }

  /// The cost bound: a prefix that cannot beat the bound_margin()-th best candidate not known to
  /// be wrong cannot reach the top_k, given that at most 4 of those fail verification (the
  /// margin); nor, by the model, can one that cannot beat the top_k-th verified candidate,
  /// without that proviso. By bytes the second is the best verified key itself: the bytes bound
  /// reports the candidates of that key only (verify_and_rank), so that a program with fewer
  /// good μGraphs than top_k + 4 (the paper's nTrans: two) is not searched with no bound at all.
  /// By the model, a third: model_bound_ratio times the best verified candidate's estimate, so
  /// that such a program is not searched with no bound by the model either.
  /// The bound is the tightest of these. By the model, "best" is the rank (the pool's order);
  /// by bytes, the smallest (bytes, kernels) keys. A rejection can loosen it.
  void update_bound_locked() {
    if (ctx_.model_bound()) {
      double bound = std::numeric_limits<double>::infinity();
      size_t usable = 0, verified = 0;
      for (const RankedCandidate& c : pool_) {
        if (c.rejected()) continue;
        if (++usable == bound_margin()) bound = std::min(bound, c.found.estimated_us);
        if (!c.equivalent()) continue;
        if (++verified == 1 && opt_.model_bound_ratio > 0)
          bound = std::min(bound, opt_.model_bound_ratio * c.found.estimated_us);
        if (verified == wanted()) bound = std::min(bound, c.found.estimated_us);
      }
      ctx_.set_bound_us(bound);
      drop_beyond_bound_locked();
      return;
    }
    std::pair<int64_t, int> bound{INT64_MAX, INT32_MAX};
    if (keys_.size() >= bound_margin()) bound = std::min(bound, *std::next(keys_.begin(), bound_margin() - 1));
    if (best_verified_key_) bound = std::min(bound, *best_verified_key_);
    ctx_.set_bound(bound.first, bound.second);
  }

  void work() {
    Generator gen(ctx_);
    while (true) {
      Task task;
      bool dive = false;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_.load() || !pending_.empty() || in_flight_.empty(); });
        // The limits are checked here too, not only by the monitor: the monitor wakes every
        // 50 ms (and may be writing a checkpoint), and a search shorter than that would run
        // past a smaller time limit, or a stop requested before it began, to its end.
        stop_at_limit_locked();
        if (stop_.load() || (pending_.empty() && in_flight_.empty())) {
          cv_.notify_all();
          monitor_cv_.notify_one();
          return;
        }
        task = pop_locked(dive);
        in_flight_.emplace(task.path, &task);
      }
      TaskOutput out;
      bool done = false;
      const Clock::time_point began = Clock::now();
      try {
        done = gen.run(task, out, stop_);
      } catch (...) {
        std::lock_guard lock(mu_);
        in_flight_.erase(task.path);
        ctx_.take_back_running(out);
        fail_locked(std::current_exception());
        return;
      }
      std::lock_guard lock(mu_);
      in_flight_.erase(task.path);
      // Its states and prunings are counted below (or, cut short by a stop, when it runs again), not
      // as running.
      ctx_.take_back_running(out);
      (dive ? dive_seconds_ : best_first_seconds_) += std::chrono::duration<double>(Clock::now() - began).count();
      if (!done) {
        // Cut short by a stop: it runs again from its start after a resume.
        ++cut_short_.tasks;
        cut_short_.states += out.stats.states;
        cut_short_.pruned += out.stats.total_pruned();
        push_locked(std::move(task));
      } else {
        ++out.stats.tasks;
        stats_.add(out.stats);
        for (Task& c : out.children) push_locked(std::move(c));
        for (FoundCandidate& c : out.candidates) {
          c.found_seconds = elapsed();
          c.task_order_us = task_order_us(task);
          add_candidate(std::move(c));
        }
      }
      // Wake idle workers only for new work or the end, and the monitor only when nothing runs:
      // tasks are short, and a wake-up per task cost a tenth of the search.
      if (in_flight_.empty()) {
        cv_.notify_all();
        monitor_cv_.notify_one();
      } else if (!out.children.empty() || !done) {
        cv_.notify_all();
      }
    }
  }

  /// The main thread: limits, progress and checkpoints, until the workers are done.
  void monitor() {
    auto last_progress = Clock::now();
    auto last_checkpoint = Clock::now();
    double checkpoint_interval = opt_.checkpoint_seconds;
    std::unique_lock lock(mu_);
    while (true) {
      monitor_cv_.wait_for(lock, std::chrono::milliseconds(50));
      if (pending_.empty() && in_flight_.empty()) {
        stop_reason_ = StopReason::exhausted;
        stop_.store(true);
        cv_.notify_all();
        return;
      }
      if (error_) return;
      if (stop_at_limit_locked()) cv_.notify_all();
      if (stop_.load()) {
        if (in_flight_.empty()) return;
        continue;
      }
      auto now = Clock::now();
      if (opt_.on_progress && now - last_progress >= std::chrono::seconds(1)) {
        last_progress = now;
        SearchProgress p = progress_locked();
        lock.unlock();
        opt_.on_progress(p);
        lock.lock();
      }
      if (!opt_.checkpoint_path.empty() &&
          std::chrono::duration<double>(now - last_checkpoint).count() >= checkpoint_interval) {
        last_checkpoint = now;
        // A copy of the state under the lock (milliseconds: tasks share their prefixes), the
        // file written without it, so that the workers need not wait for the disk.
        CheckpointState state = state_locked();
        lock.unlock();
        std::exception_ptr failed;
        try {
          // This thread also enforces the limits: a write of a large frontier (hundreds of
          // thousands of tasks take seconds) is given up when one is reached, and the final
          // write at the stop saves the state. The next periodic write waits at least four
          // times as long as this one took, so that writing stays a small share of the search.
          const auto started = Clock::now();
          checkpoint_writer_.write(opt_.checkpoint_path, state, [&] { return limit_reached().has_value(); });
          checkpoint_interval =
              std::max(opt_.checkpoint_seconds, 4 * std::chrono::duration<double>(Clock::now() - started).count());
        } catch (...) {
          failed = std::current_exception();
        }
        lock.lock();
        if (failed) {
          fail_locked(std::move(failed));  // run_tasks joins the threads, then rethrows it
          return;
        }
      }
    }
  }

  /// The least floor of the tasks pending or running, as SearchResult::unsearched_floor_us has it:
  /// negative without the model bound or without such tasks. pending_ is in order: the floor, but
  /// 0 for the root's first passes (task_order_us), which are few; so past those the first task
  /// has the least floor.
  double unsearched_floor_locked() const {
    if (!ctx_.model_bound() || (pending_.empty() && in_flight_.empty())) return -1;
    double least = std::numeric_limits<double>::infinity();
    for (const auto& [key, task] : pending_) {
      least = std::min(least, task.floor_us);
      if (key.first > 0) break;
    }
    for (const auto& [path, task] : in_flight_) least = std::min(least, task->floor_us);
    return least;
  }

  SearchProgress progress_locked() const {
    SearchProgress p;
    p.elapsed_seconds = elapsed();
    p.states = stats_.states + ctx_.running_states();
    p.pruned = stats_.total_pruned() + ctx_.running_pruned();
    p.candidates = stats_.candidates;
    for (const RankedCandidate& c : pool_) p.verified += c.equivalent();
    p.tasks_done = stats_.tasks;
    p.tasks_pending = static_cast<int64_t>(pending_.size() + in_flight_.size());
    p.unsearched_floor_us = unsearched_floor_locked();
    if (!pool_.empty()) {
      p.best_device_bytes = pool_.front().found.metrics.device_bytes;
      p.best_kernels = pool_.front().found.metrics.kernels;
      p.best_estimated_us = pool_.front().found.estimated_us;
    }
    return p;
  }

  /// Whether the pool kept it (it was new, and not the worst of a full pool).
  bool add_candidate(FoundCandidate c) {
    if (opt_.cost_ceiling_us > 0 && c.estimated_us >= opt_.cost_ceiling_us) return false;
    any_candidate_.store(true);
    RankedCandidate r{std::move(c), {}};
    r.json = to_json(r.found.graph);
    const std::pair<int64_t, int> key = bytes_key(r);
    auto it = std::lower_bound(pool_.begin(), pool_.end(), r, rank_less);
    if (it != pool_.end() && it->json == r.json) return false;  // found twice (a resumed task)
    const size_t at = static_cast<size_t>(it - pool_.begin());
    pool_.insert(it, std::move(r));
    // The deterministic mode may drop candidates later (cut_to_completed_prefix), so it keeps all.
    if (!opt_.deterministic && static_cast<int>(pool_.size()) > opt_.candidate_pool) pool_.pop_back();
    keys_.insert(key);
    update_bound_locked();
    verifier_cv_.notify_one();
    return at < pool_.size();
  }

  /// Retiling (retile.h) after the search: the best candidate not known to be wrong of each of
  /// the pool's first retile_seeds structures, best first, one seed per thread at a time (the
  /// workers are done); what they find joins the pool in seed order, so the result does not
  /// depend on the thread count.
  void retile_pool(SearchResult& result) {
    RetileStats& st = result.retile;
    if (opt_.retile_seeds <= 0 || pool_.empty()) return;
    const Clock::time_point began = Clock::now();
    st.best_before_us = pool_.front().found.estimated_us;
    std::vector<FoundCandidate> seeds;
    std::set<std::string> structures;
    for (const RankedCandidate& c : pool_) {
      if (static_cast<int>(seeds.size()) >= opt_.retile_seeds) break;
      if (!c.rejected() && structures.insert(tiling_free_structure(c.found.graph)).second) seeds.push_back(c.found);
    }
    const std::atomic<bool> never{false};
    const std::atomic<bool>& stop = control_ ? control_->stop : never;
    std::vector<std::vector<FoundCandidate>> found(seeds.size());
    std::vector<RetileStats> per_seed(seeds.size());
    const int hardware = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    interp::ThreadPool workers(
        static_cast<int>(std::min<size_t>(seeds.size(), opt_.threads > 0 ? opt_.threads : hardware)));
    std::vector<Generator> gens;  // one per worker: a generator keeps caches that are not shared
    for (int w = 0; w < workers.size(); ++w) gens.emplace_back(ctx_);
    workers.parallel_for(static_cast<int64_t>(seeds.size()), [&](int w, int64_t i) {
      const auto k = static_cast<size_t>(i);
      found[k] = retile(ctx_, gens[static_cast<size_t>(w)], seeds[k], stop, per_seed[k]);
    });
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < seeds.size(); ++i) {
      st.stopped |= per_seed[i].stopped;
      ++st.seeds;
      st.configs += per_seed[i].configs;
      st.rebuilt += per_seed[i].rebuilt;
      st.complete += per_seed[i].complete;
      for (FoundCandidate& c : found[i]) {
        c.found_seconds = elapsed();
        st.kept += add_candidate(std::move(c)) ? 1 : 0;
      }
    }
    // They are candidates the search found, as far as the counts go (verified + rejected ≤ found).
    result.stats.candidates += st.kept;
    st.best_after_us = pool_.front().found.estimated_us;
    st.seconds = std::chrono::duration<double>(Clock::now() - began).count();
  }

  CheckpointState state_locked() const {
    CheckpointState st;
    st.fingerprint = search_fingerprint(ctx_.program(), opt_);
    st.elapsed_seconds = elapsed();
    st.bytes_phase_seconds = bytes_phase_seconds_;
    st.stats = stats_;
    for (const auto& [key, t] : pending_) st.pending.push_back(t);
    for (const auto& [path, t] : in_flight_) st.pending.push_back(*t);
    for (const RankedCandidate& c : pool_) st.candidates.push_back(c.found);
    return st;
  }

  void write_state_locked() { checkpoint_writer_.write(opt_.checkpoint_path, state_locked()); }
  void write_state() {
    std::lock_guard lock(mu_);
    write_state_locked();
  }

  /// Deterministic mode after an early stop: keep the candidates of the tasks that precede the
  /// first unfinished task in the search's order (what a sequential search stopped there would
  /// have).
  void cut_to_completed_prefix(SearchResult& result) {
    if (pending_.empty()) return;
    const TaskKey& first = pending_.begin()->first;
    std::erase_if(pool_, [&](const RankedCandidate& c) {
      return !(TaskKey{c.found.task_order_us, c.found.path} < first);
    });
    const std::vector<int32_t>& frontier = first.second;
    result.stop_detail += "; deterministic: results of every task before path [";
    for (size_t i = 0; i < frontier.size(); ++i) result.stop_detail += (i ? "," : "") + std::to_string(frontier[i]);
    result.stop_detail += "]";
  }

  /// Verifies the pool in rank order until top_k are verified: in batches of as many as are
  /// still wanted, each batch test by test (verify_all: one draw of inputs per test for the
  /// batch, shared kernels computed once), so the result is what verifying one by one gives.
  /// With the bytes bound only candidates of the best verified key are verified and reported
  /// (update_bound_locked): the result is then the same whenever the bound tightened.
  /// A stop (Ctrl-C) ends verification; the candidates verified before it (most by the
  /// background verifier, during the search) are still reported, in rank order.
  void verify_and_rank(SearchResult& result) {
    std::optional<size_t> stopped_after;  // how many candidates were checked when a stop came
    std::optional<std::pair<int64_t, int>> best_key;
    if (!ctx_.model_bound()) best_key = best_verified_key(stopped_after);
    auto worse = [&](const RankedCandidate& c) { return best_key && bytes_key(c) > *best_key; };
    size_t checked = 0;
    const std::atomic<bool>* stop = control_ ? &control_->stop : nullptr;
    while (static_cast<int>(result.top.size()) < opt_.top_k && checked < pool_.size()) {
      // The next candidates until as many as are still wanted could pass, counting those not yet
      // verified as passing; these are verified together (the background verifier's verdicts
      // are reused).
      size_t end = checked;
      std::vector<const Graph*> batch;
      for (size_t wanted = static_cast<size_t>(opt_.top_k) - result.top.size(); end < pool_.size() && wanted > 0;
           ++end) {
        if (pool_[end].rejected() || worse(pool_[end])) continue;
        --wanted;
        if (!pool_[end].verdict) batch.push_back(&pool_[end].found.graph);
      }
      std::vector<VerifyResult> verdicts;
      if (!batch.empty() && !stopped_after && !(stop && stop->load()))
        verdicts = verify_all(ctx_.program(), batch, opt_.verify, &runs_, stop);
      if (!batch.empty() && verdicts.empty()) {
        if (!stopped_after) stopped_after = checked;
        // What is left unverified stays so; a resume verifies it from the checkpoint.
        end = pool_.size();
      }
      for (size_t i = checked, next = 0; i < end && static_cast<int>(result.top.size()) < opt_.top_k; ++i) {
        if (!pool_[i].rejected() && worse(pool_[i])) continue;
        if (!pool_[i].verdict) {
          if (next == verdicts.size()) continue;  // stopped before it was verified
          pool_[i].verdict = std::move(verdicts[next++]);
        }
        VerifyResult& v = *pool_[i].verdict;
        if (v.verdict != Verdict::equivalent) {
          ++result.stats.rejected;
          continue;
        }
        ++result.stats.verified;
        SearchCandidate sc;
        sc.graph = choose_block_threads(fuse_thread_graphs(pool_[i].found.graph), ctx_.gpu());
        sc.metrics = candidate_metrics(sc.graph, opt_.target);
        sc.cost = estimate_cost(sc.graph, ctx_.gpu());
        sc.verification = v;
        sc.found_seconds = pool_[i].found.found_seconds;
        result.top.push_back(std::move(sc));
      }
      checked = end;
    }
    if (stopped_after) interrupted_verification(result, *stopped_after);
    for (const RankedCandidate& c : pool_) result.worse_key += !c.rejected() && worse(c);
  }

  /// The bytes bound's best verified key: the smallest (bytes, kernels) of a candidate verified
  /// equivalent, verifying the pool's candidates in key order (then rank) until one is (most
  /// often the first, which the background verifier has verified); none if none is. A stop
  /// ends it (`stopped_after` then says how many were checked): the key is then the smallest
  /// of those verified equivalent before it, if any.
  std::optional<std::pair<int64_t, int>> best_verified_key(std::optional<size_t>& stopped_after) {
    std::vector<size_t> order;
    for (size_t i = 0; i < pool_.size(); ++i)
      if (!pool_[i].rejected()) order.push_back(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return bytes_key(pool_[a]) < bytes_key(pool_[b]); });
    const std::atomic<bool>* stop = control_ ? &control_->stop : nullptr;
    for (size_t n = 0; n < order.size(); ++n) {
      RankedCandidate& c = pool_[order[n]];
      if (!c.verdict) {
        std::vector<VerifyResult> verdicts;
        if (!(stop && stop->load())) verdicts = verify_all(ctx_.program(), {&c.found.graph}, opt_.verify, &runs_, stop);
        if (verdicts.empty()) {
          stopped_after = n;
          std::optional<std::pair<int64_t, int>> key;
          for (size_t m = n + 1; m < order.size() && !key; ++m)
            if (pool_[order[m]].equivalent()) key = bytes_key(pool_[order[m]]);
          return key;
        }
        c.verdict = std::move(verdicts[0]);
      }
      if (c.equivalent()) return bytes_key(c);
    }
    return std::nullopt;
  }

  /// A stop during verification (Ctrl-C in a long one) keeps what is verified so far; the
  /// checkpoint (written as the tree search ended) keeps the whole candidate pool, which a resume
  /// verifies again.
  void interrupted_verification(SearchResult& result, size_t checked) const {
    result.stop_reason = StopReason::interrupted;
    result.stop_detail += (result.stop_detail.empty() ? "" : "; ") + std::string("verification stopped after ") +
                          std::to_string(checked) + " of " + std::to_string(pool_.size()) + " candidates";
  }

  SearchContext& ctx_;
  const SearchOptions& opt_;
  SearchControl* control_;
  std::mutex mu_;
  std::condition_variable cv_;          ///< workers: tasks to take, or the end
  std::condition_variable monitor_cv_;  ///< the monitor: no task runs any more (or an error)
  std::atomic<bool> stop_{false};
  std::atomic<bool> any_candidate_{false};  ///< for give_up_without_candidate_seconds
  StopReason stop_reason_ = StopReason::exhausted;
  SearchResult::CutShort cut_short_;
  std::exception_ptr error_;
  /// Tasks to run, by order (task_order_us: the floor, Task::floor_us, but the root's first passes
  /// first), then by path. The bytes bound gives every task the floor 0, so that is depth-first
  /// path order. With the model bound, half the time goes to
  /// the task with the smallest path instead (a dive, pending_paths_): best first alone explores wide
  /// where the floors say little (QKNorm: floors of 5.6 µs under candidates of 47, and no
  /// candidate better than the bytes phase's in 60 s), depth first alone spends a time-limited
  /// search inside the first subtree it enters (RMSNorm; docs/search.md). The deterministic
  /// mode takes no dives: its order, (order, path), is the one its cut assumes.
  std::map<TaskKey, Task> pending_;
  std::map<std::vector<int32_t>, double> pending_paths_;  ///< pending_'s tasks: path → order
  /// Task time spent on dives and on best-first picks: the next pick is a dive while dives have
  /// had no more (by time, not by count: best-first picks many kernel tasks, which take far
  /// longer than most block tasks).
  double dive_seconds_ = 0, best_first_seconds_ = 0;
  /// Used by the driver thread only (monitor() and the writes between phases).
  CheckpointWriter checkpoint_writer_;
  std::map<std::vector<int32_t>, const Task*> in_flight_;
  std::vector<RankedCandidate> pool_;
  // Bytes bound: the (bytes, kernels) keys of every candidate found not known to be wrong, and
  // the smallest of those the background verifier verified.
  std::multiset<std::pair<int64_t, int>> keys_;
  std::optional<std::pair<int64_t, int>> best_verified_key_;
  // The background verifier (verify_in_background); runs_ is shared with verify_and_rank,
  // which runs after the verifier has stopped.
  ReferenceRuns runs_{verifier_kept_input_bytes(effective_memory_limit(opt_))};
  std::condition_variable verifier_cv_;
  std::atomic<bool> verifier_stop_{false};
  double background_seconds_ = 0;
  int background_verified_ = 0, background_rejected_ = 0;
  double bytes_phase_seconds_ = -1;  // CostBound::both: when the model phase began
  bool bytes_phase_cut_ = false;     // CostBound::both: the bytes phase had its share of the time limit
  int64_t bytes_phase_dropped_ = 0;  // its tasks then pending
  SearchStats stats_;
  Clock::time_point start_;
  double offset_ = 0;
  const int64_t memory_limit_ = effective_memory_limit(opt_);  ///< bytes; 0: none
  mutable std::atomic<int64_t> memory_checked_ms_{INT64_MIN / 2}, memory_seen_{0};
};

std::vector<std::string> cut_names(const Graph& program, const std::vector<TensorId>& cuts) {
  std::vector<std::string> names;
  for (TensorId t : cuts)
    names.push_back(program.tensor(t).name.empty() ? "t" + std::to_string(t.value) : program.tensor(t).name);
  return names;
}

/// The clock time a whole search took: its tree search and the verification after it, which
/// the parts after it must leave out of the user's limit (gpt2_mlp_block with
/// --max-kernel-inputs 7 spent 150 s verifying a pool of 512 wrong candidates after a 60 s search).
double whole_seconds(const SearchResult& whole) { return whole.search_seconds + whole.verify_seconds; }

/// The share of a time limit that the whole search of a program with cuts may take; the rest is
/// its parts'. Without it a whole search that found a poor μGraph early kept the whole limit and
/// the parts, whose join may be ten times faster, were never searched (gpt2_mlp_block with
/// --max-kernel-inputs 7: 138.6 µs at the 60 s limit, against 13.2 µs for the parts' join). A
/// quarter, not a half: the paper's QK-norm at batch 1 finds its best after 29.5 s of 60.
constexpr double kWholeShareOfTimeLimit = 0.75;

/// The time limit of the parts' search beside a whole search that found candidates (0: none), or
/// nothing when the time limit leaves none. A whole search stopped at its share of the limit
/// leaves the parts the rest of it. After an exhausted one the parts get as long as the whole
/// search took, or a second if that is more, within what the limit leaves: a user who gave no
/// limit asked for the search to end on its own, and the parts at most double it or add a
/// second. The second is for whole searches exhausted in milliseconds (the README's RMSNorm:
/// 47 ms), whose parts would otherwise stop at a budget of a few milliseconds, by the clock, with
/// tasks left. Deterministic searches get what the limit leaves, all of it: a share measured on
/// the clock would make what they find depend on the machine.
std::optional<double> parts_beside_whole_time_limit(const SearchOptions& options, const SearchResult& whole) {
  const double left = options.time_limit_seconds > 0 ? options.time_limit_seconds - whole_seconds(whole)
                                                     : std::numeric_limits<double>::infinity();
  if (left <= 0) return std::nullopt;
  if (options.deterministic || whole.stop_reason == StopReason::time_limit) return std::isinf(left) ? 0.0 : left;
  constexpr double kPartsLeastSeconds = 1.0;
  return std::max(std::min(left, std::max(whole.search_seconds, kPartsLeastSeconds)), 1e-3);
}

/// The parts' result after the whole search's: where it was cut, and the clock and counts
/// continued from the whole search's.
void after_whole(SearchResult& parts, const SearchResult& whole, const Graph& program,
                 const std::vector<TensorId>& cuts) {
  parts.whole_search_seconds = whole.search_seconds;
  parts.whole_stop_reason = whole.stop_reason;
  parts.search_seconds += whole.search_seconds;
  for (SearchCandidate& c : parts.top) c.found_seconds += whole.search_seconds;
  parts.stats.add(whole.stats);
  parts.cut_short.add(whole.cut_short);
  parts.verify_seconds += whole.verify_seconds;
  parts.background_verified += whole.background_verified;
  parts.background_verify_seconds += whole.background_verify_seconds;
  parts.worse_key += whole.worse_key;
  parts.cut_at = cut_names(program, cuts);
  parts.input_probes = whole.input_probes;
}

/// The whole search's result with the parts' beside it: the best of both, their times and
/// counts together.
SearchResult beside_whole(SearchResult whole, SearchResult parts, const Graph& program,
                          const std::vector<TensorId>& cuts, int top_k) {
  SearchResult r = std::move(parts);
  // The whole search's stop reason stands: exhausted, the parts' time was the search's own
  // choice, not the user's limit; stopped at its share of the limit, the search was time-limited.
  if (r.stop_reason != StopReason::interrupted) {
    if (!r.stop_detail.empty()) r.stop_detail = "the parts beside it: " + r.stop_detail;
    r.stop_reason = whole.stop_reason;
  }
  if (whole.stop_reason == StopReason::time_limit) {
    // What the whole search left: its pending tasks, and the model's floor under the μGraphs
    // within its limits that it has not reached.
    r.stop_detail = "the whole search: " + whole.stop_detail + (r.stop_detail.empty() ? "" : "; " + r.stop_detail);
    r.unsearched_floor_us = whole.unsearched_floor_us;
  }
  after_whole(r, whole, program, cuts);
  r.whole_best_estimated_us = whole.top.front().cost.total_us;
  r.bytes_phase_seconds = whole.bytes_phase_seconds;
  r.bytes_phase_dropped_tasks = whole.bytes_phase_dropped_tasks;
  r.resumed = whole.resumed;
  // The whole search's retiling, with the parts' counts and time.
  RetileStats retile = whole.retile;
  retile.add(r.retile);
  r.retile = retile;
  // Best first; on a tie the whole search's (one search's μGraph, not a join).
  std::vector<SearchCandidate> top = std::move(whole.top);
  for (SearchCandidate& c : r.top) top.push_back(std::move(c));
  std::stable_sort(top.begin(), top.end(), [](const SearchCandidate& a, const SearchCandidate& b) {
    return a.cost.total_us < b.cost.total_us;
  });
  if (top.size() > static_cast<size_t>(top_k)) top.resize(static_cast<size_t>(top_k));
  r.top = std::move(top);
  return r;
}

}  // namespace

int default_max_kernel_inputs(const Graph& program) {
  const auto inputs =
      std::count_if(program.ops.begin(), program.ops.end(), [](const Op& op) { return op.kind == OpKind::input; });
  return inputs >= 5 ? 5 : 4;
}

SearchOptions resolved_options(const SearchOptions& options, const Graph& program) {
  SearchOptions resolved = options;
  if (resolved.max_kernel_inputs == 0) resolved.max_kernel_inputs = default_max_kernel_inputs(program);
  return resolved;
}

SearchResult search(const Graph& program, const SearchOptions& given, SearchControl* control) {
  // The parts of a program searched in parts keep the whole program's defaults.
  const SearchOptions options = resolved_options(given, program);
  // Repeats become broadcasts first where they can (lift_repeats.h): the rewritten program is
  // searched, and its μGraphs are checked against this one.
  RepeatLift lift = lift_repeats(program);
  if (!lift.lifted.empty() || searched_in_parts(lift.program)) {
    SearchResult r = search_in_parts(lift.program, options, control, program);
    r.lifted_repeats = std::move(lift.lifted);
    r.kept_repeats = std::move(lift.kept);
    return r;
  }
  // A program with chained matmuls (a norm, a gated MLP and its down projection) may be too
  // large to search whole in the time given, or within the limits: the whole search gives up if
  // it has found nothing in half the time, and a program whose whole search found nothing is
  // searched in parts cut before its chained matmuls (docs/search.md, "Programs too large to
  // search whole"). A program without them (or such a part: a LayerNorm, a projection and gelu's
  // tanh form) is cut, the same way, before its matmuls' computed operands. A resume with part
  // checkpoints goes to the parts at once.
  // Cuts that other values bridge leave one part, the program again: no fallback then.
  const auto parts_apart = [&](std::vector<TensorId> cuts) {
    if (!cuts.empty() && split_program(program, cuts).parts.size() < 2) cuts.clear();
    return cuts;
  };
  std::vector<TensorId> cuts;
  if (options.cut_into_parts) {
    cuts = parts_apart(chained_matmul_operands(program));
    if (cuts.empty()) cuts = parts_apart(computed_matmul_operands(program));
  }
  auto searched_in_parts_before = [&] {
    return options.resume && !options.checkpoint_path.empty() &&
           std::filesystem::exists(part_checkpoint_path(options.checkpoint_path, 0));
  };
  SearchResult whole;
  if (cuts.empty() || !searched_in_parts_before()) {
    SearchOptions o = options;
    if (!cuts.empty() && options.time_limit_seconds > 0) {
      o.give_up_without_candidate_seconds = options.time_limit_seconds / 2;
      o.time_limit_seconds = options.time_limit_seconds * kWholeShareOfTimeLimit;
    }
    SearchContext ctx(program, o);
    Driver driver(ctx, control);
    whole = driver.run();
    const bool interrupted = control && control->stop.load();
    // Exhausted, or stopped by the clock: at its share of the limit, or at half of it without a
    // candidate (not by a stop or the memory limit).
    const bool exhausted_or_timed =
        whole.stop_reason == StopReason::exhausted || whole.stop_reason == StopReason::time_limit;
    // Nothing in half the time, or nothing within the limits at all: the parts may fit them.
    const bool nothing = !cuts.empty() && whole.top.empty() && exhausted_or_timed && !interrupted;
    if (!nothing) {
      // Exhausted with time to spare, or stopped at its share of the limit: the parts' join may
      // still be faster. The limits bound each part, not their join (a norm, a gated MLP and a
      // down projection take three graph-defined kernels), and the whole search never saw such
      // μGraphs.
      const std::optional<double> parts_limit = parts_beside_whole_time_limit(options, whole);
      if (cuts.empty() || whole.top.empty() || !exhausted_or_timed || interrupted || !parts_limit) return whole;
      SearchOptions rest = options;
      rest.time_limit_seconds = *parts_limit;
      // Each part's best alone: the whole search's candidates fill the rest of the top, and each
      // part's candidate verified costs another run at the program's size.
      rest.top_k = 1;
      // No part checkpoints: a resume goes to the whole search's checkpoint, which holds its
      // candidates, and searches the parts again after it.
      rest.checkpoint_path.clear();
      rest.resume = false;
      rest.on_progress = progress_after(options, whole.search_seconds);
      // Joins that the model puts past the whole search's best by more than the ratio the model
      // bound keeps (2 by default) are not worth verifying; a part searched beside its own whole
      // search keeps its program's ceiling if that is lower.
      if (options.model_bound_ratio > 0) {
        const double ceiling = options.model_bound_ratio * whole.top.front().cost.total_us;
        rest.cost_ceiling_us = options.cost_ceiling_us > 0 ? std::min(options.cost_ceiling_us, ceiling) : ceiling;
      }
      SearchResult parts = search_in_parts(program, rest, control, program, cuts);
      return beside_whole(std::move(whole), std::move(parts), program, cuts, options.top_k);
    }
  }
  SearchOptions rest = options;
  if (options.time_limit_seconds > 0)
    rest.time_limit_seconds = std::max(options.time_limit_seconds - whole_seconds(whole), 1e-3);
  rest.on_progress = progress_after(options, whole.search_seconds);  // the parts continue its clock
  SearchResult r = search_in_parts(program, rest, control, program, cuts);
  after_whole(r, whole, program, cuts);
  return r;
}

}  // namespace mugraph
