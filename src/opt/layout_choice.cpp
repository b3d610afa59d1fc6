// Layout choice for the STensors of a block graph (layout_choice.h): a lane-by-lane model of
// every shared-memory access the device library makes, and an exact search over the layouts
// it supports.
#include "mugraph/layout_choice.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <sstream>

#include "mugraph/error.h"
#include "mugraph/ops.h"
#include "mugraph_device/mma_rules.h"
#include "mugraph_device/sum_rules.h"
#include "mugraph_device/wgmma_rules.h"

namespace mugraph {

namespace {

constexpr int kWarp = 32;
constexpr int kBanks = 32;
// matmul_wgmma's shape rules, shared with the device library.
using mgd::kWgmmaM;
using mgd::kWgmmaStageK;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Offset of element e (row-major index over `shape`) through `strides`.
int64_t offset_of(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, int64_t e) {
  int64_t off = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    off += (e % shape[d]) * strides[d];
    e /= shape[d];
  }
  return off;
}

std::vector<int64_t> extents_of(const Shape& s) {
  if (s.rank() == 0) return {1};
  return s.to_vector();
}

/// Sums the wavefronts of warp-wide accesses.
struct WavefrontCount {
  int64_t total = 0;
  std::array<int64_t, kWarp> lanes{};

  void clear() { lanes.fill(-1); }
  void issue(int bytes) { total += warp_wavefronts(lanes, bytes); }

  /// The accesses of a cooperative op of `threads` threads over `count` items (tile.h's
  /// for_each: thread r takes items r, r + threads, ...), item i at byte address address(i)
  /// (negative: no access).
  template <typename F>
  void simt(int64_t count, int64_t threads, int bytes, F&& address) {
    for (int64_t start = 0; start < count; start += threads)
      for (int64_t w = 0; w * kWarp < threads; ++w) {
        clear();
        bool any = false;
        for (int64_t l = 0; l < kWarp && w * kWarp + l < threads; ++l) {
          const int64_t i = start + w * kWarp + l;
          if (i >= count) break;
          lanes[static_cast<size_t>(l)] = address(i);
          any = true;
        }
        if (any) issue(bytes);
      }
  }
};

const Op* producer_of(const Graph& g, TensorId t, const BlockSchedule& s, size_t* index) {
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (s.phase[i] == OpPhase::dead) continue;
    for (TensorId o : g.ops[i].outputs)
      if (o == t) {
        if (index) *index = i;
        return &g.ops[i];
      }
  }
  return nullptr;
}

/// The sum that folded op i (BlockSchedule::folded) runs in: the one live op reading its result.
const Op& folding_sum(const Graph& g, const BlockSchedule& s, size_t i) {
  for (size_t j = 0; j < g.ops.size(); ++j)
    if (s.phase[j] != OpPhase::dead &&
        std::find(g.ops[j].inputs.begin(), g.ops[j].inputs.end(), g.ops[i].outputs[0]) != g.ops[j].inputs.end())
      return g.ops[j];
  MUGRAPH_CHECK(false) << "a folded op without its sum";
  return g.ops[i];
}

/// Bytes per element of tensor t in shared memory (summing accumulators hold f32).
int element_bytes(const Graph& g, TensorId t, const Op* producer) {
  if (producer && is_sum_accumulator(*producer)) return 4;
  return dtype_bytes(g.type(t).dtype);
}

/// How often op i runs per block: once per iteration in the loop (a loop-invariant load once).
int64_t runs(const Graph& g, const BlockSchedule& s, size_t i) {
  const Op& op = g.ops[i];
  const bool hoisted = op.kind == OpKind::input_iterator && op.attrs.fmap == kPhi;
  return s.phase[i] == OpPhase::loop && !hoisted ? g.forloop : 1;
}

/// A matmul's operand as the device library indexes it, and whether every batch stride keeps
/// 16-byte alignment for 16-bit elements (mma.h's batch_strides_aligned).
struct MatmulOperand {
  std::vector<int64_t> st;
  int64_t k_stride = 0;
  bool batch_aligned = true;
};

MatmulOperand matmul_operand(const Shape& x, const std::vector<int64_t>& strides, const Shape& c, bool is_a) {
  MatmulOperandStrides s = matmul_operand_strides(x, strides, c, is_a);
  MatmulOperand m{std::move(s.strides), s.k_stride, true};
  for (int d = 0; d + 2 < c.rank(); ++d) m.batch_aligned = m.batch_aligned && m.st[static_cast<size_t>(d)] % 8 == 0;
  return m;
}

/// matmul_tc's reads of operand A (is_a) or B (mma.h), per block run.
int64_t tc_operand_wavefronts(const Shape& x, const std::vector<int64_t>& strides, const Shape& c, int64_t k_extent,
                              bool is_a, int esz) {
  const int r = c.rank();
  const int64_t M = c[r - 2], N = c[r - 1], K = k_extent;
  const MatmulOperand op = matmul_operand(x, strides, c, is_a);
  const std::vector<int64_t> ce = extents_of(c);
  const int64_t TM = ceil_div(M, 16), TN = ceil_div(N, 8), batches = c.numel() / (M * N);
  const int64_t row = op.st[static_cast<size_t>(is_a ? r - 2 : r - 1)];  // AM or BN
  // A: whole 16-row blocks through ldmatrix.x4, a last block of 8 rows through .x2.
  const bool ldsm = is_a ? mgd::ldmatrix_a(row, op.k_stride, M, K, op.batch_aligned)
                         : mgd::ldmatrix_b(op.k_stride, row, N, K, op.batch_aligned);
  WavefrontCount w;
  // The reads depend on a block's m0 (A) or n0 (B) only; the other index repeats them.
  const int64_t blocks = is_a ? TM : TN, repeats = is_a ? TN : TM;
  for (int64_t b = 0; b < batches; ++b) {
    const int64_t base = offset_of(ce, op.st, b * M * N);
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t before = w.total;
      for (int64_t k0 = 0; k0 < K; k0 += 16) {
        if (ldsm) {
          w.clear();
          const bool half_block = is_a && blk * 16 + 16 > M;
          for (int l = 0; l < kWarp; ++l) {
            if (is_a && half_block) {
              if (l < 16) w.lanes[static_cast<size_t>(l)] = (base + (blk * 16 + l % 8) * row + k0 + l / 8 * 8) * esz;
            } else if (is_a) {
              w.lanes[static_cast<size_t>(l)] =
                  (base + (blk * 16 + l % 8 + (l / 8) % 2 * 8) * row + k0 + l / 16 * 8) * esz;
            } else if (l < 16) {
              w.lanes[static_cast<size_t>(l)] = (base + (k0 + l) * op.k_stride + blk * 8) * esz;
            }
          }
          w.issue(16);
          continue;
        }
        // Gathered: one 16-bit read per element of the fragment (pack2 of two reads), at these
        // (row, k) offsets from the lane's first element for A, (k, n) offsets for B.
        static constexpr std::array<std::pair<int, int>, 8> kGatherA{
            {{0, 0}, {0, 1}, {8, 0}, {8, 1}, {0, 8}, {0, 9}, {8, 8}, {8, 9}}};
        static constexpr std::array<std::pair<int, int>, 4> kGatherB{{{0, 0}, {1, 0}, {8, 0}, {9, 0}}};
        const std::span<const std::pair<int, int>> at =
            is_a ? std::span<const std::pair<int, int>>(kGatherA) : std::span<const std::pair<int, int>>(kGatherB);
        for (const auto& [dr, dk] : at) {
          w.clear();
          for (int l = 0; l < kWarp; ++l) {
            const int64_t g = l / 4, t = l % 4;
            if (is_a) {
              const int64_t m = blk * 16 + g + dr, k = k0 + 2 * t + dk;
              if (m < M && k < K) w.lanes[static_cast<size_t>(l)] = (base + m * row + k * op.k_stride) * esz;
            } else {
              const int64_t k = k0 + 2 * t + dr, n = blk * 8 + g;
              if (k < K && n < N) w.lanes[static_cast<size_t>(l)] = (base + k * op.k_stride + n * row) * esz;
            }
          }
          w.issue(esz);
        }
      }
      w.total += (w.total - before) * (repeats - 1);
    }
  }
  return w.total;
}

/// The swizzle span of tensor t where the copy engine writes it for matmuls to read in place.
int64_t swizzle_of(const LayoutProblem& p, TensorId t) { return p.swizzle.empty() ? 0 : p.swizzle[t.index()]; }

/// Whether the wgmma matmul `op` computes its transpose: matmul_wgmma's rule, given which of its
/// operands it reads in place.
bool wgmma_swap(const LayoutProblem& p, const Op& op) {
  const Graph& g = *p.body;
  const Shape& c = g.type(op.outputs[0]).shape;
  const Shape& a = g.type(op.inputs[0]).shape;
  return mgd::wgmma_orientation_swaps(c[c.rank() - 2], c[c.rank() - 1], a[a.rank() - 1],
                                      swizzle_of(p, op.inputs[0]) != 0, swizzle_of(p, op.inputs[1]) != 0);
}

/// matmul_wgmma's staging reads of operand A (is_a) or B (wgmma.h, wgmma_stage), per block run.
int64_t wgmma_operand_wavefronts(const Shape& x, const std::vector<int64_t>& strides, const Shape& c, int64_t k_extent,
                                 bool is_a, int esz, bool swap) {
  const int r = c.rank();
  const int64_t M = c[r - 2], N = c[r - 1], K = k_extent;
  const mgd::WgmmaJobs jobs = mgd::wgmma_jobs(M, N, swap);
  const int64_t NT = jobs.n, TM = jobs.row_jobs, TN = jobs.col_jobs, batches = c.numel() / (M * N);
  const MatmulOperand op = matmul_operand(x, strides, c, is_a);
  const std::vector<int64_t> ce = extents_of(c);
  const int64_t RS = op.st[static_cast<size_t>(is_a ? r - 2 : r - 1)], KS = op.k_stride;
  // The operand on the instruction's 64-row side: A, or B when swapped.
  const bool row_side = is_a != jobs.swap;
  const int64_t rows = row_side ? kWgmmaM : NT, ext = is_a ? M : N;
  const bool vector = KS == 1 && RS % 8 == 0 && op.batch_aligned;
  WavefrontCount w;
  const int64_t blocks = row_side ? TM : TN, repeats = row_side ? TN : TM;
  for (int64_t b = 0; b < batches; ++b) {
    const int64_t base = offset_of(ce, op.st, b * M * N);
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t before = w.total, r0 = blk * rows;
      for (int64_t kc = 0; kc < K; kc += kWgmmaStageK) {
        for (int64_t c0 = 0; c0 < rows * 8; c0 += kWarp) {
          // Lanes c0 .. c0 + 31 are one warp of the warpgroup in one round of the chunk loop.
          auto chunk = [&](int64_t cc, int64_t* rr, int64_t* k) {
            const int64_t rw = KS == 1 ? cc / 8 : cc % rows, ch = KS == 1 ? cc % 8 : cc / rows;
            *rr = r0 + rw;
            *k = kc + ch * 8;
          };
          bool all_vector = vector;
          w.clear();
          for (int l = 0; l < kWarp && c0 + l < rows * 8; ++l) {
            int64_t rr, k;
            chunk(c0 + l, &rr, &k);
            if (rr >= ext) continue;
            if (vector && k + 8 <= K)
              w.lanes[static_cast<size_t>(l)] = (base + rr * RS + k) * esz;
            else
              all_vector = false;
          }
          w.issue(16);
          if (all_vector) continue;
          // Lanes whose chunk is not one vector read its 8 elements one by one.
          for (int j = 0; j < 8; ++j) {
            w.clear();
            for (int l = 0; l < kWarp && c0 + l < rows * 8; ++l) {
              int64_t rr, k;
              chunk(c0 + l, &rr, &k);
              if (rr >= ext || (vector && k + 8 <= K) || k + j >= K) continue;
              w.lanes[static_cast<size_t>(l)] = (base + rr * RS + (k + j) * KS) * esz;
            }
            w.issue(esz);
          }
        }
      }
      w.total += (w.total - before) * (repeats - 1);
    }
  }
  return w.total;
}

/// A matmul's result writes from the accumulator fragments (mma.sync or wgmma), per block run.
int64_t matmul_result_wavefronts(const Shape& c, const std::vector<int64_t>& strides, bool wgmma, int esz, bool swap) {
  const int r = c.rank();
  const int64_t M = c[r - 2], N = c[r - 1], batches = c.numel() / (M * N);
  const int64_t OM = strides[static_cast<size_t>(r - 2)], ON = strides[static_cast<size_t>(r - 1)];
  const std::vector<int64_t> ce = extents_of(c);
  WavefrontCount w;
  for (int64_t b = 0; b < batches; ++b) {
    const int64_t base = offset_of(ce, strides, b * M * N);
    if (!wgmma) {
      for (int64_t m0 = 0; m0 < M; m0 += 16)
        for (int64_t n0 = 0; n0 < N; n0 += 8)
          for (int i = 0; i < 4; ++i) {
            w.clear();
            for (int l = 0; l < kWarp; ++l) {
              const int64_t m = m0 + l / 4 + (i >= 2 ? 8 : 0), n = n0 + 2 * (l % 4) + (i & 1);
              if (m < M && n < N) w.lanes[static_cast<size_t>(l)] = (base + m * OM + n * ON) * esz;
            }
            w.issue(esz);
          }
      continue;
    }
    const mgd::WgmmaJobs jobs = mgd::wgmma_jobs(M, N, swap);
    const int64_t NT = jobs.n;
    for (int64_t m0 = 0; m0 < jobs.rows; m0 += kWgmmaM)
      for (int64_t n0 = 0; n0 < jobs.cols; n0 += NT)
        for (int64_t warp = 0; warp < 4; ++warp)
          for (int64_t i = 0; i < NT / 2; ++i) {
            w.clear();
            for (int l = 0; l < kWarp; ++l) {
              const int64_t rw = m0 + 16 * warp + l / 4 + 8 * (i / 2 % 2), cl = n0 + 8 * (i / 4) + 2 * (l % 4) + i % 2;
              const int64_t m = jobs.swap ? cl : rw, n = jobs.swap ? rw : cl;
              if (m < M && n < N) w.lanes[static_cast<size_t>(l)] = (base + m * OM + n * ON) * esz;
            }
            w.issue(esz);
          }
  }
  return w.total;
}

/// Which of a thread graph's inputs each group of its savers (by saved shape) reads, as the
/// emitter generates them: one pass over the elements per saved shape.
std::map<std::vector<int64_t>, std::vector<bool>> thread_graph_reads(const Graph& tg) {
  std::map<std::vector<int64_t>, std::vector<size_t>> groups;
  for (size_t i = 0; i < tg.ops.size(); ++i)
    if (tg.ops[i].kind == OpKind::output_saver) groups[extents_of(tg.type(tg.ops[i].inputs[0]).shape)].push_back(i);
  std::map<std::vector<int64_t>, std::vector<bool>> reads;
  for (const auto& [shape, savers] : groups) {
    std::vector<bool> need(tg.tensors.size(), false);
    for (size_t i : savers) need[tg.ops[i].inputs[0].index()] = true;
    for (size_t i = tg.ops.size(); i-- > 0;) {
      bool needed = false;
      for (TensorId t : tg.ops[i].outputs) needed = needed || need[t.index()];
      if (needed)
        for (TensorId t : tg.ops[i].inputs) need[t.index()] = true;
    }
    std::vector<bool>& in = reads[shape];
    in.assign(tg.params.size(), false);
    for (const Op& op : tg.ops)
      if (op.kind == OpKind::input_iterator && need[op.outputs[0].index()])
        in[static_cast<size_t>(op.attrs.io_index)] = true;
  }
  return reads;
}

struct Cost {
  int64_t wavefronts = 0, bytes = 0;
  Cost operator+(const Cost& o) const { return {wavefronts + o.wavefronts, bytes + o.bytes}; }
  bool operator<(const Cost& o) const {
    return wavefronts != o.wavefronts ? wavefronts < o.wavefronts : bytes < o.bytes;
  }
};

}  // namespace

std::string TileLayout::str() const {
  std::ostringstream s;
  if (transposed) s << "transposed";
  if (pad > 0) s << (transposed ? ", columns" : "rows") << " padded by " << pad;
  if (!transposed && pad == 0) s << "row-major";
  return s.str();
}

std::vector<int64_t> layout_strides(const Shape& shape, const TileLayout& layout) {
  const std::vector<int64_t> e = extents_of(shape);
  const size_t r = e.size();
  std::vector<int64_t> s(r, 0);
  if (r == 1) {
    s[0] = 1;
    return s;
  }
  const size_t inner = layout.transposed ? r - 2 : r - 1, outer = layout.transposed ? r - 1 : r - 2;
  s[inner] = 1;
  s[outer] = e[inner] + layout.pad;
  int64_t span = s[outer] * e[outer];
  for (size_t d = r - 2; d-- > 0;) {
    s[d] = span;
    span *= e[d];
  }
  return s;
}

int64_t layout_elements(const Shape& shape, const TileLayout& layout) {
  const std::vector<int64_t> e = extents_of(shape);
  if (e.size() == 1) return e[0];
  const size_t r = e.size(), inner = layout.transposed ? r - 2 : r - 1, outer = layout.transposed ? r - 1 : r - 2;
  int64_t n = (e[inner] + layout.pad) * e[outer];
  for (size_t d = 0; d + 2 < r; ++d) n *= e[d];
  return n;
}

std::vector<int64_t> broadcast_read_strides(const Shape& operand, const std::vector<int64_t>& strides,
                                            const Shape& result) {
  const int rank = std::max(1, result.rank());
  std::vector<int64_t> s(static_cast<size_t>(rank), 0);
  for (int d = 0; d < operand.rank(); ++d) {
    const int r = rank - operand.rank() + d;
    MUGRAPH_CHECK(r >= 0) << "operand " << operand.str() << " has more dims than " << result.str();
    const bool broadcast = operand[d] == 1 && result[r] != 1;
    MUGRAPH_CHECK(broadcast || operand[d] == result[r]) << operand.str() << " does not broadcast to " << result.str();
    s[static_cast<size_t>(r)] = broadcast ? 0 : strides[static_cast<size_t>(d)];
  }
  return s;
}

MatmulOperandStrides matmul_operand_strides(const Shape& x, const std::vector<int64_t>& x_strides, const Shape& result,
                                            bool is_a) {
  const int r = result.rank();
  Shape as_result = result;
  as_result[r - 2] = x[x.rank() - 2];
  as_result[r - 1] = x[x.rank() - 1];
  MatmulOperandStrides m{broadcast_read_strides(x, x_strides, as_result), 0};
  // Along the result's N (for A) or M (for B) the operand takes no step.
  const size_t contracted = static_cast<size_t>(is_a ? r - 1 : r - 2);
  m.k_stride = m.strides[contracted];
  m.strides[contracted] = 0;
  return m;
}

int64_t warp_wavefronts(std::span<const int64_t> addresses, int bytes) {
  MUGRAPH_CHECK(bytes == 2 || bytes == 4 || bytes == 8 || bytes == 16) << "warp_wavefronts: access of " << bytes;
  const size_t phase_lanes = bytes <= 4 ? kWarp : static_cast<size_t>(kWarp * 4 / bytes);
  const int words_per_access = std::max(1, bytes / 4);
  int64_t total = 0;
  for (size_t p0 = 0; p0 < addresses.size(); p0 += phase_lanes) {
    // Per bank, the distinct words asked of it in this phase.
    std::array<std::array<int64_t, kWarp>, kBanks> words;
    std::array<int, kBanks> count{};
    bool any = false;
    for (size_t l = p0; l < std::min(addresses.size(), p0 + phase_lanes); ++l) {
      if (addresses[l] < 0) continue;
      any = true;
      for (int w = 0; w < words_per_access; ++w) {
        const int64_t word = addresses[l] / 4 + w;
        const size_t bank = static_cast<size_t>(word % kBanks);
        auto& list = words[bank];
        const auto end = list.begin() + count[bank];
        if (std::find(list.begin(), end, word) == end) list[static_cast<size_t>(count[bank]++)] = word;
      }
    }
    if (any) total += *std::max_element(count.begin(), count.end());
  }
  return total;
}

std::vector<TileLayout> allowed_layouts(const LayoutProblem& p, TensorId t) {
  const Graph& g = *p.body;
  const BlockSchedule& s = *p.schedule;
  size_t pi = 0;
  const Op* producer = producer_of(g, t, s, &pi);
  const Shape& shape = g.type(t).shape;
  std::vector<TileLayout> out{TileLayout{}};
  if (!producer || shape.rank() < 2) return out;
  // A tile wgmma reads in place has the swizzled layout its matmuls read.
  if (swizzle_of(p, t) != 0) return out;
  // Reshapes alias their operand's bytes in row-major order; summing accumulators are dense f32;
  // the copy engine writes dense boxes.
  if (producer->kind == OpKind::reshape || s.folded[pi]) return out;  // folded: never stored
  if (is_sum_accumulator(*producer)) return out;
  const TileLoad load = producer->kind == OpKind::input_iterator ? p.loads[pi] : TileLoad::none;
  if (load == TileLoad::tma) return out;
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (s.phase[i] == OpPhase::dead || g.ops[i].kind != OpKind::reshape) continue;
    if (g.ops[i].inputs[0] == t) return out;
  }
  const int esz = element_bytes(g, t, producer);
  const int r = shape.rank();
  const bool can_transpose = shape[r - 2] > 1 && shape[r - 1] > 1;
  std::vector<std::vector<int64_t>> seen{layout_strides(shape, TileLayout{})};
  for (bool transposed : {false, true}) {
    if (transposed && (!can_transpose || load != TileLoad::none)) continue;  // loads keep the source's rows
    for (int pad_bytes : {0, 4, 16}) {
      if (pad_bytes % esz != 0) continue;
      if (load == TileLoad::cp_async && pad_bytes % 16 != 0) continue;  // 16-byte vectors stay aligned
      const TileLayout l{transposed, pad_bytes / esz};
      std::vector<int64_t> st = layout_strides(shape, l);
      if (std::find(seen.begin(), seen.end(), st) != seen.end()) continue;
      seen.push_back(std::move(st));
      out.push_back(l);
    }
  }
  return out;
}

int64_t tensor_wavefronts(const LayoutProblem& p, TensorId t, const TileLayout& layout) {
  const Graph& g = *p.body;
  const BlockSchedule& s = *p.schedule;
  size_t pi = 0;
  const Op* producer = producer_of(g, t, s, &pi);
  if (!producer || s.folded[pi]) return 0;  // a folded op's result is never stored
  const Shape& shape = g.type(t).shape;
  const int esz = element_bytes(g, t, producer);
  const std::vector<int64_t> st = layout_strides(shape, layout);
  const std::vector<int64_t> te = extents_of(shape);
  const int64_t threads = g.threads.volume();
  int64_t total = 0;
  WavefrontCount w;
  // Reads of t by an op iterating over `iter` (row-major), t broadcast to it.
  auto simt_read = [&](const Shape& iter) {
    const std::vector<int64_t> ie = extents_of(iter), rs = broadcast_read_strides(shape, st, iter);
    w.simt(iter.numel(), threads, esz, [&](int64_t e) { return offset_of(ie, rs, e) * esz; });
  };
  // Writes of t by an op iterating over t's elements in row-major order.
  auto simt_write = [&](int64_t base) {
    w.simt(shape.numel(), threads, esz, [&](int64_t e) { return (base + offset_of(te, st, e)) * esz; });
  };

  // The producer's writes.
  {
    w.total = 0;
    const Op& op = *producer;
    switch (op_info(op.kind).category) {
      case OpCategory::iterator:
        if (p.loads[pi] == TileLoad::cp_async) {
          const int64_t v = 16 / esz;
          w.simt(shape.numel() / v, threads, 16, [&](int64_t i) { return offset_of(te, st, i * v) * esz; });
        } else if (p.loads[pi] == TileLoad::copy) {
          simt_write(0);
        }
        break;
      case OpCategory::matmul:
        w.total = matmul_result_wavefronts(shape, st, p.wgmma[pi], esz, wgmma_swap(p, op));
        break;
      case OpCategory::layout:
        if (op.kind == OpKind::concat) {
          int64_t at = 0;
          for (TensorId in : op.inputs) {
            const Shape& is = g.type(in).shape;
            const std::vector<int64_t> ie = extents_of(is);
            const int64_t base = at * st[static_cast<size_t>(op.attrs.dim)];
            w.simt(is.numel(), threads, esz, [&](int64_t e) { return (base + offset_of(ie, st, e)) * esz; });
            at += is[op.attrs.dim];
          }
        } else if (op.kind == OpKind::repeat) {
          simt_write(0);
        }
        break;
      case OpCategory::accumulator:
        if (op.attrs.dim == kPhi) {
          simt_write(0);
        } else {
          const Shape& is = g.type(op.inputs[0]).shape;
          const std::vector<int64_t> ie = extents_of(is);
          w.simt(is.numel(), threads, esz, [&](int64_t e) { return offset_of(ie, st, e) * esz; });
        }
        break;
      default:  // element-wise, sum, thread graph: one write per element
        simt_write(0);
        break;
    }
    total += w.total * runs(g, s, pi);
  }

  // Every consumer's reads. An op folded into a sum reads t as the sum does (op_order.h).
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (s.phase[i] == OpPhase::dead) continue;
    const Op& op = s.folded[i] ? folding_sum(g, s, i) : g.ops[i];
    for (size_t j = 0; j < g.ops[i].inputs.size(); ++j) {
      if (g.ops[i].inputs[j] != t) continue;
      w.total = 0;
      switch (op_info(op.kind).category) {
        case OpCategory::unary:
        case OpCategory::binary:
          simt_read(g.type(op.outputs[0]).shape);
          break;
        case OpCategory::reduction: {
          const Shape& os = g.type(op.outputs[0]).shape;
          const std::vector<int64_t> oe = extents_of(os);
          const int dim = op.attrs.dim;
          const int64_t group = shape[dim] / os[dim], ds = st[static_cast<size_t>(dim)];
          // Where output e's group starts.
          auto group_start = [&](int64_t e) {
            int64_t rest = e, off = 0;
            for (size_t d = oe.size(); d-- > 0;) {
              const int64_t c = rest % oe[d];
              rest /= oe[d];
              off += (static_cast<int>(d) == dim ? c * group : c) * st[d];
            }
            return off;
          };
          // As tile.h's sum reads (sum_rules.h): split among `lanes` consecutive lanes of a warp,
          // lane l of output e reading elements l, l + lanes, ... of its group, or its chunks of 8
          // elements l, l + lanes, ... in 16-byte accesses; else a thread per output, element k
          // of every group at once.
          const int64_t lanes = mgd::block_sum_lanes(os.numel(), threads, group);
          bool starts_in_eights = true;
          for (size_t d = 0; d < oe.size(); ++d)
            starts_in_eights = starts_in_eights && (static_cast<int>(d) == dim || oe[d] == 1 || st[d] % 8 == 0);
          if (lanes > 1) {
            // A lane's access: one element, or a chunk of 8 in one 16-byte read.
            const int64_t width = mgd::sum_reads_vectors(lanes, group, esz, ds, starts_in_eights) ? 8 : 1;
            const int bytes = width == 8 ? 16 : esz;
            const int64_t per_round = threads / lanes;
            for (int64_t first = 0; first < os.numel(); first += per_round)
              for (int64_t k = 0; k < group; k += width * lanes)
                w.simt(std::min(threads, (os.numel() - first) * lanes), threads, bytes, [&](int64_t r) {
                  return (group_start(first + r / lanes) + std::min(k + width * (r % lanes), group - width) * ds) * esz;
                });
          } else {
            for (int64_t k = 0; k < group; ++k)
              w.simt(os.numel(), threads, esz, [&](int64_t e) { return (group_start(e) + k * ds) * esz; });
          }
          break;
        }
        case OpCategory::matmul: {
          const Shape& c = g.type(op.outputs[0]).shape;
          const int64_t k = g.type(op.inputs[0]).shape[g.type(op.inputs[0]).shape.rank() - 1];
          if (p.wgmma[i] && swizzle_of(p, t) != 0) break;  // read in place by the tensor cores
          w.total = p.wgmma[i] ? wgmma_operand_wavefronts(shape, st, c, k, j == 0, esz, wgmma_swap(p, op))
                               : tc_operand_wavefronts(shape, st, c, k, j == 0, esz);
          break;
        }
        case OpCategory::layout:
          if (op.kind == OpKind::repeat) {
            const Shape& os = g.type(op.outputs[0]).shape;
            const std::vector<int64_t> oe = extents_of(os);
            const int dim = op.attrs.dim;
            w.simt(os.numel(), threads, esz, [&](int64_t e) {
              int64_t rest = e, off = 0;
              for (size_t d = oe.size(); d-- > 0;) {
                const int64_t c = rest % oe[d];
                rest /= oe[d];
                off += (static_cast<int>(d) == dim ? c % te[d] : c) * st[d];
              }
              return off * esz;
            });
          } else if (op.kind == OpKind::concat) {
            simt_read(shape);
          }
          break;
        case OpCategory::thread_body: {
          const Graph& tg = g.bodies[static_cast<size_t>(op.attrs.body)];
          for (const auto& [group_shape, reads] : thread_graph_reads(tg))
            if (reads[j]) simt_read(Shape(group_shape));
          break;
        }
        default:  // savers, accumulators: one read per element
          simt_read(shape);
          break;
      }
      total += w.total * runs(g, s, i);
    }
  }
  return total;
}

LayoutChoice choose_layouts(const LayoutProblem& p) {
  const Graph& g = *p.body;
  MUGRAPH_CHECK(p.schedule && p.loads.size() == g.ops.size() && p.wgmma.size() == g.ops.size() && p.fits)
      << "choose_layouts: an incomplete problem";
  const size_t n = g.tensors.size();
  LayoutChoice choice;
  choice.layouts.assign(n, TileLayout{});
  // Each tensor's candidates with their costs, best first.
  struct Candidate {
    TileLayout layout;
    Cost cost;
  };
  std::vector<std::vector<Candidate>> cands(n);
  for (size_t t = 0; t < n; ++t) {
    const TensorId id{static_cast<int32_t>(t)};
    const std::vector<TileLayout> allowed = allowed_layouts(p, id);
    const Op* producer = producer_of(g, id, *p.schedule, nullptr);
    const int esz = producer ? element_bytes(g, id, producer) : 0;
    const int64_t dense = producer ? layout_elements(g.type(id).shape, TileLayout{}) : 0;
    for (const TileLayout& l : allowed) {
      const Cost c{tensor_wavefronts(p, id, l), (producer ? layout_elements(g.type(id).shape, l) - dense : 0) * esz};
      cands[t].push_back({l, c});
    }
    choice.row_major_wavefronts += cands[t].front().cost.wavefronts;
    std::stable_sort(cands[t].begin(), cands[t].end(),
                     [](const Candidate& a, const Candidate& b) { return a.cost < b.cost; });
  }
  // Branch and bound over the tensors with a choice, widest cost spread first. The bound adds
  // each remaining tensor's cheapest candidate. Every node checks that its smallest completion
  // (the remaining tensors row-major, which take the fewest bytes) fits: if it does not, no
  // completion does, since padding only adds bytes. A node that chose row-major has its
  // parent's smallest completion, already checked.
  std::vector<size_t> order;
  Cost fixed;
  for (size_t t = 0; t < n; ++t) {
    if (cands[t].size() > 1)
      order.push_back(t);
    else
      fixed = fixed + cands[t].front().cost;
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int64_t sa = cands[a].back().cost.wavefronts - cands[a].front().cost.wavefronts;
    const int64_t sb = cands[b].back().cost.wavefronts - cands[b].front().cost.wavefronts;
    return sa != sb ? sa > sb : a < b;
  });
  std::vector<Cost> rest(order.size() + 1);
  for (size_t k = order.size(); k-- > 0;) rest[k] = rest[k + 1] + cands[order[k]].front().cost;
  std::vector<TileLayout> current = choice.layouts;
  Cost best{std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max()};
  bool budget_hit = false;
  auto fits = [&]() {
    if (choice.fit_checks >= p.fit_budget) {
      budget_hit = true;
      return false;
    }
    ++choice.fit_checks;
    return p.fits(current);
  };
  auto search = [&](auto&& self, size_t k, Cost so_far) -> void {
    if (budget_hit || !(so_far + rest[k] < best)) return;
    if (k == order.size()) {
      best = so_far;
      choice.layouts = current;
      return;
    }
    for (const Candidate& c : cands[order[k]]) {
      current[order[k]] = c.layout;
      if (!c.layout.is_row_major() && !fits()) continue;
      self(self, k + 1, so_far + c.cost);
      if (budget_hit) break;
    }
    current[order[k]] = TileLayout{};
  };
  choice.fits = fits();
  if (choice.fits) search(search, 0, fixed);
  choice.optimal = choice.fits && !budget_hit;
  choice.method = budget_hit ? "exact (budget reached)" : "exact";
  for (size_t t = 0; t < n; ++t)
    for (const Candidate& c : cands[t])
      if (c.layout == choice.layouts[t]) {
        choice.wavefronts += c.cost.wavefronts;
        choice.extra_bytes += c.cost.bytes;
      }
  return choice;
}

}  // namespace mugraph
