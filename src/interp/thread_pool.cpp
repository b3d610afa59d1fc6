#include "thread_pool.h"

#include <algorithm>
#include <string>

#include "mugraph/error.h"

namespace mugraph::interp {

int resolve_threads(int threads, const char* whose) {
  constexpr int kMaxThreads = 4096;
  if (threads < 0 || threads > kMaxThreads)
    throw UserError(std::string(whose) + " thread count must be between 0 (all hardware threads) and " +
                    std::to_string(kMaxThreads) + "; got " + std::to_string(threads));
  return threads == 0 ? std::max(1, static_cast<int>(std::thread::hardware_concurrency())) : threads;
}

ThreadPool::ThreadPool(int workers) {
  MUGRAPH_CHECK(workers >= 1) << "a thread pool needs at least one worker, got " << workers;
  threads_.reserve(static_cast<size_t>(workers - 1));
  for (int w = 1; w < workers; ++w) threads_.emplace_back([this, w] { worker_main(w); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::run_indices(int worker) {
  for (;;) {
    int64_t i;
    {
      std::lock_guard<std::mutex> lock(next_mu_);
      if (next_ >= n_) return;
      i = next_++;
    }
    try {
      (*fn_)(worker, i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(next_mu_);
      if (!error_) error_ = std::current_exception();
      next_ = n_;  // skip the rest
    }
  }
}

void ThreadPool::worker_main(int worker) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_indices(worker);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--busy_ == 0) done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int, int64_t)>& fn) {
  if (n <= 0) return;
  if (threads_.empty() || n == 1) {
    for (int64_t i = 0; i < n; ++i) fn(0, i);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    {
      std::lock_guard<std::mutex> next_lock(next_mu_);
      n_ = n;
      next_ = 0;
      error_ = nullptr;
    }
    busy_ = static_cast<int>(threads_.size());
    ++generation_;
  }
  wake_.notify_all();
  run_indices(0);
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return busy_ == 0; });
    fn_ = nullptr;
    std::lock_guard<std::mutex> next_lock(next_mu_);
    error = error_;
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace mugraph::interp
