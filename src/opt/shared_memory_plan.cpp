// Shared-memory planning: best-fit, then an exact branch-and-bound search for small problems
// (shared_memory_plan.h).
#include "mugraph/shared_memory_plan.h"

#include <algorithm>
#include <utility>

#include "mugraph/error.h"

namespace mugraph {

namespace {

bool live_together(const SharedBuffer& a, const SharedBuffer& b) { return a.first <= b.last && b.first <= a.last; }

int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

/// Byte ranges [lo, hi) taken, while `b` is live, by the placed buffers; sorted by lo.
std::vector<std::pair<int64_t, int64_t>> busy_ranges(const std::vector<SharedBuffer>& buffers,
                                                     const std::vector<int64_t>& offsets,
                                                     const std::vector<bool>& placed, const SharedBuffer& b) {
  std::vector<std::pair<int64_t, int64_t>> busy;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (placed[i] && live_together(buffers[i], b)) busy.emplace_back(offsets[i], offsets[i] + buffers[i].bytes);
  std::sort(busy.begin(), busy.end());
  return busy;
}

/// The lowest aligned offset where `b` overlaps none of `busy`.
int64_t lowest_fit(const SharedBuffer& b, const std::vector<std::pair<int64_t, int64_t>>& busy) {
  int64_t at = 0;
  for (const auto& [lo, hi] : busy) {
    if (at + b.bytes <= lo) break;
    at = std::max(at, align_up(hi, b.align));
  }
  return at;
}

/// Best-fit: largest buffers first, each into the free gap (over its lifetime) it fills most
/// tightly, or above everything.
void best_fit(const std::vector<SharedBuffer>& buffers, const std::vector<size_t>& todo,
              std::vector<int64_t>& offsets) {
  std::vector<size_t> order = todo;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes) return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].first < buffers[b].first;
  });
  std::vector<bool> placed(buffers.size(), false);
  for (size_t i : order) {
    const SharedBuffer& b = buffers[i];
    const auto busy = busy_ranges(buffers, offsets, placed, b);
    int64_t best_at = -1, best_slack = -1, gap_lo = 0;
    for (size_t k = 0; k <= busy.size(); ++k) {
      const bool top = k == busy.size();
      const int64_t at = align_up(gap_lo, b.align);
      if (top) {
        if (best_at < 0) best_at = at;
        break;
      }
      const int64_t gap_hi = busy[k].first;
      if (at + b.bytes <= gap_hi && (best_slack < 0 || gap_hi - gap_lo < best_slack)) {
        best_at = at;
        best_slack = gap_hi - gap_lo;
      }
      gap_lo = std::max(gap_lo, busy[k].second);
    }
    offsets[i] = best_at;
    placed[i] = true;
  }
}

int64_t peak_of(const std::vector<SharedBuffer>& buffers, const std::vector<int64_t>& offsets) {
  int64_t peak = 0;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].bytes > 0) peak = std::max(peak, offsets[i] + buffers[i].bytes);
  return peak;
}

/// Branch and bound over the order in which buffers are placed lowest-fit.
class ExactSearch {
 public:
  ExactSearch(const std::vector<SharedBuffer>& buffers, const std::vector<size_t>& todo, int64_t lower_bound,
              int64_t budget)
      : buffers_(buffers), todo_(todo), lower_bound_(lower_bound), budget_(budget) {}

  /// Improves `best` (offsets with peak `best_peak`) if it can; returns whether it finished.
  bool run(std::vector<int64_t>& best, int64_t& best_peak) {
    best_ = &best;
    best_peak_ = best_peak;
    offsets_.assign(buffers_.size(), 0);
    placed_.assign(buffers_.size(), false);
    finished_ = true;
    descend(0, 0);
    best_peak = best_peak_;
    return finished_;
  }
  int64_t placements() const { return placements_; }

 private:
  void descend(size_t depth, int64_t peak) {
    if (best_peak_ <= lower_bound_) return;  // nothing can beat it
    if (depth == todo_.size()) {
      if (peak < best_peak_) {
        best_peak_ = peak;
        *best_ = offsets_;
      }
      return;
    }
    std::vector<const SharedBuffer*> tried;  // equal buffers are interchangeable
    for (size_t i : todo_) {
      if (placed_[i]) continue;
      const SharedBuffer& b = buffers_[i];
      if (std::any_of(tried.begin(), tried.end(), [&](const SharedBuffer* o) {
            return o->bytes == b.bytes && o->align == b.align && o->first == b.first && o->last == b.last;
          }))
        continue;
      tried.push_back(&b);
      if (placements_ >= budget_) {
        finished_ = false;
        return;
      }
      ++placements_;
      const int64_t at = lowest_fit(b, busy_ranges(buffers_, offsets_, placed_, b));
      const int64_t next_peak = std::max(peak, at + b.bytes);
      if (next_peak >= best_peak_) continue;
      offsets_[i] = at;
      placed_[i] = true;
      descend(depth + 1, next_peak);
      placed_[i] = false;
      if (!finished_) return;
    }
  }

  const std::vector<SharedBuffer>& buffers_;
  const std::vector<size_t>& todo_;
  int64_t lower_bound_;
  int64_t budget_;
  std::vector<int64_t>* best_ = nullptr;
  int64_t best_peak_ = 0;
  std::vector<int64_t> offsets_;
  std::vector<bool> placed_;
  int64_t placements_ = 0;
  bool finished_ = true;
};

}  // namespace

SharedMemoryPlan plan_shared_memory(const std::vector<SharedBuffer>& buffers, const SharedPlanOptions& options) {
  std::vector<size_t> todo;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const SharedBuffer& b = buffers[i];
    MUGRAPH_CHECK(b.bytes >= 0 && b.align > 0 && (b.align & (b.align - 1)) == 0 && b.first <= b.last)
        << "plan_shared_memory: buffer " << i << " has " << b.bytes << " bytes, alignment " << b.align << ", lifetime ["
        << b.first << ", " << b.last << "]";
    if (b.bytes > 0) todo.push_back(i);
  }
  SharedMemoryPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  // The most bytes live at one time: at some buffer's first step.
  for (size_t i : todo) {
    int64_t live = 0;
    for (size_t j : todo)
      if (buffers[j].first <= buffers[i].first && buffers[i].first <= buffers[j].last) live += buffers[j].bytes;
    plan.live_lower_bound = std::max(plan.live_lower_bound, live);
  }
  best_fit(buffers, todo, plan.offsets);
  plan.peak = peak_of(buffers, plan.offsets);
  plan.method = "best-fit";
  bool proven = plan.peak <= plan.live_lower_bound;
  if (!proven && static_cast<int>(todo.size()) <= options.exact_max_buffers) {
    ExactSearch exact(buffers, todo, plan.live_lower_bound, options.exact_budget);
    proven = exact.run(plan.offsets, plan.peak);
    plan.placements = exact.placements();
    plan.method = proven ? "exact" : "exact (budget reached)";
  }
  plan.optimal = proven || plan.peak <= plan.live_lower_bound;
  return plan;
}

bool plan_is_valid(const std::vector<SharedBuffer>& buffers, const SharedMemoryPlan& plan) {
  if (plan.offsets.size() != buffers.size()) return false;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const SharedBuffer& a = buffers[i];
    if (a.bytes == 0) continue;
    if (plan.offsets[i] < 0 || plan.offsets[i] % a.align != 0 || plan.offsets[i] + a.bytes > plan.peak) return false;
    for (size_t j = i + 1; j < buffers.size(); ++j) {
      const SharedBuffer& b = buffers[j];
      if (b.bytes == 0 || !live_together(a, b)) continue;
      if (plan.offsets[i] < plan.offsets[j] + b.bytes && plan.offsets[j] < plan.offsets[i] + a.bytes) return false;
    }
  }
  return true;
}

}  // namespace mugraph
