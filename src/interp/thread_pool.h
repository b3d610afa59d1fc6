/// \file thread_pool.h
/// A small fixed-size pool of std::threads for the interpreter's parallel loops.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mugraph::interp {

/// The workers for a thread count given by a user (0: all hardware threads). Throws UserError,
/// "WHOSE thread count must be between 0 (all hardware threads) and 4096; got N", outside that.
int resolve_threads(int threads, const char* whose);

/// Runs index ranges on a fixed set of workers; the calling thread is worker 0. Which worker runs
/// which index depends on timing, so callers make each index's result independent of the worker
/// (per-worker scratch only, disjoint outputs): results are then the same for any pool size.
class ThreadPool {
 public:
  /// @pre workers ≥ 1 (the caller counts as one).
  explicit ThreadPool(int workers);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(threads_.size()) + 1; }

  /// Calls fn(worker, i) for every i in [0, n), spread over the workers, and returns when all
  /// calls have finished. If calls throw, the remaining indices are skipped and the first
  /// exception is rethrown here. Not reentrant: fn must not call parallel_for.
  void parallel_for(int64_t n, const std::function<void(int, int64_t)>& fn);

 private:
  void worker_main(int worker);
  void run_indices(int worker);

  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  int busy_ = 0;  // workers (besides the caller) still inside the current job
  // The current job; read by workers only between wake-up and busy_ decrement.
  const std::function<void(int, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  std::mutex next_mu_;
  int64_t next_ = 0;
  std::exception_ptr error_;
};

}  // namespace mugraph::interp
