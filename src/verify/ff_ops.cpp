// The computing ops of the finite-field interpreter on strided residue views: element-wise ops
// (paper Table 3), matmul and sum with lazy reduction, layout ops, and the exp-taint analysis.
#include "ff_ops.h"

#include <algorithm>

#include "ff_vector.h"
#include "matmul_pieces.h"
#include "strided_loop.h"

namespace mugraph::ff_detail {

namespace {

using ff::kP;
using ff::kQ;

// Element-wise work pieces of this many elements when an op is split over the pool.
constexpr int64_t kChunk = int64_t{1} << 15;

/// Runs body(begin, end) over [0, n), in pieces on the pool when allowed and worthwhile.
template <typename Body>
void split(int64_t n, interp::ThreadPool* pool, Body&& body) {
  if (pool == nullptr || pool->size() == 1 || n <= kChunk) {
    body(int64_t{0}, n);
    return;
  }
  int64_t pieces = (n + kChunk - 1) / kChunk;
  pool->parallel_for(pieces, [&](int, int64_t i) { body(i * kChunk, std::min(n, (i + 1) * kChunk)); });
}

/// Calls f.template operator()<M>(p-view-of-each, ...) for M = p and M = q.
template <typename F>
void per_field(F&& f) {
  f.template operator()<kP>(0);
  f.template operator()<kQ>(1);
}

/// per_field for an op's (dense) result, computing only the parts something reads; the others
/// are set to 0. An exp-tainted result's Z_q part is never read (exp reads Z_q residues of
/// untainted values only, the random functions and the output comparison Z_p residues of tainted
/// ones); the Z_p part of a result only untainted exps read is never read either. In attention
/// this halves the work of both matmuls: QK^T is needed in Z_q only, exp(·)·V in Z_p only.
template <typename F>
void result_fields(PartsRead read, const FFMutView& out, F&& f) {
  MUGRAPH_CHECK(out.p.contiguous() && out.q.contiguous()) << "an op writes a dense result";
  if (read.p) {
    f.template operator()<kP>(0);
  } else {
    std::fill_n(out.p.data, out.p.numel(), 0u);
  }
  if (read.q) {
    f.template operator()<kQ>(1);
  } else {
    std::fill_n(out.q.data, out.q.numel(), 0u);
  }
}

template <uint64_t M>
uint32_t reduce(uint64_t x) {
  return static_cast<uint32_t>(x % M);
}

/// out = kind(a, b) in one field, NumPy broadcasting; div has already become mul by inverses.
template <uint64_t M>
void binary_field(OpKind kind, const UView& a, const UView& b, const MutUView& out, interp::ThreadPool* pool) {
  int rank = out.rank();
  interp::StridedLoop<3> loop(out.shape,
                              {out.stride, interp::broadcast_strides(a, rank), interp::broadcast_strides(b, rank)});
  const int64_t so = loop.inner_stride(0), sa = loop.inner_stride(1), sb = loop.inner_stride(2);
  split(loop.numel(), pool, [&](int64_t begin, int64_t end) {
    loop.run(begin, end, [&](const std::array<int64_t, 3>& off, int64_t n) {
      uint32_t* o = out.data + off[0];
      const uint32_t* x = a.data + off[1];
      const uint32_t* y = b.data + off[2];
      switch (kind) {
        case OpKind::add:
          if (so == 1) {
            ff_add_run(M, false, x, sa, y, sb, o, n);
          } else {
            for (int64_t j = 0; j < n; ++j) o[j * so] = static_cast<uint32_t>(ff::add(x[j * sa], y[j * sb], M));
          }
          break;
        case OpKind::sub:
          if (so == 1) {
            ff_add_run(M, true, x, sa, y, sb, o, n);
          } else {
            for (int64_t j = 0; j < n; ++j) o[j * so] = static_cast<uint32_t>(ff::sub(x[j * sa], y[j * sb], M));
          }
          break;
        default:  // mul (and div by inverses)
          if (so == 1) {
            ff_mul_run(M, x, sa, y, sb, o, n);
          } else {
            for (int64_t j = 0; j < n; ++j) o[j * so] = reduce<M>(uint64_t{x[j * sa]} * y[j * sb]);
          }
          break;
      }
    });
  });
}

/// Inverts every residue of v in place with Montgomery's trick (one exponentiation for the
/// whole run). Zero residues stay zero; returns whether there was one.
template <uint64_t M>
bool invert_all(std::vector<uint32_t>& v) {
  thread_local std::vector<uint32_t> prefix;
  prefix.resize(v.size());
  uint64_t acc = 1;
  bool zero = false;
  for (size_t i = 0; i < v.size(); ++i) {
    prefix[i] = static_cast<uint32_t>(acc);
    if (v[i] == 0) {
      zero = true;
      continue;
    }
    acc = acc * v[i] % M;
  }
  uint64_t inv = ff::inv(acc, M);  // inverse of the product of the non-zero residues
  for (size_t i = v.size(); i-- > 0;) {
    if (v[i] == 0) continue;
    uint64_t x = v[i];
    v[i] = static_cast<uint32_t>(inv * prefix[i] % M);
    inv = inv * x % M;
  }
  return zero;
}

void copy_field(const UView& src, const MutUView& dst) {
  interp::StridedLoop<2> loop(dst.shape, {dst.stride, src.stride});
  const int64_t sd = loop.inner_stride(0), ss = loop.inner_stride(1);
  loop.run(0, loop.numel(), [&](const std::array<int64_t, 2>& off, int64_t n) {
    uint32_t* o = dst.data + off[0];
    const uint32_t* s = src.data + off[1];
    if (sd == 1 && ss == 1) {
      std::copy(s, s + n, o);
    } else {
      for (int64_t j = 0; j < n; ++j) o[j * sd] = s[j * ss];
    }
  });
}

/// A dense copy of v in buf, or v itself if it is dense already.
UView dense(const UView& v, std::vector<uint32_t>& buf) {
  if (v.contiguous()) return v;
  buf.resize(static_cast<size_t>(v.numel()));
  MutUView d = MutUView::dense(buf.data(), v.shape);
  copy_field(v, d);
  return d;
}

// ---- matmul (ff_vector.h has the kernel) ------------------------------------------------------

// Kernel-level matmuls are split into pieces of at most this many rows and columns.
constexpr int64_t kRowPiece = 64;
constexpr int64_t kColPiece = 512;

template <uint64_t M>
void matmul_field(const UView& a_in, const UView& b_in, const MutUView& out, interp::ThreadPool* pool) {
  MUGRAPH_CHECK(out.contiguous()) << "matmul writes a dense result";
  thread_local std::vector<uint32_t> b_buf;
  const int R = out.rank();
  const int ra = a_in.rank(), rb = b_in.rank();
  const int64_t Mr = out.shape[R - 2], N = out.shape[R - 1], K = a_in.shape[ra - 1];
  // B's rows must be contiguous; otherwise (or if N is 1 with any stride) use a dense copy.
  UView b = b_in;
  if (N > 1 && b.stride[static_cast<size_t>(rb - 1)] != 1) b = dense(b_in, b_buf);
  const int64_t ldb = b.stride[static_cast<size_t>(rb - 2)];
  const interp::MatmulPieces plan(out.shape, pool != nullptr, kRowPiece, kColPiece);
  const int64_t sar = a_in.stride[static_cast<size_t>(ra - 2)], sak = a_in.stride[static_cast<size_t>(ra - 1)];
  auto piece = [&](int64_t index) {
    thread_local std::vector<uint32_t> panel;
    panel.resize(static_cast<size_t>(ff_matmul_panel_elements(K)));
    const auto [bi, r0, c0, m, n] = plan.piece(index);
    const uint32_t* pa = a_in.data + plan.batch_offset(bi, a_in);
    const uint32_t* pb = b.data + plan.batch_offset(bi, b);
    uint32_t* pc = out.data + bi * Mr * N + r0 * N + c0;
    ff_matmul(M, pa + r0 * sar, sar, sak, pb + c0, ldb, pc, N, m, n, K, panel.data());
  };
  const int64_t pieces = plan.count();
  if (pool && pool->size() > 1 && pieces > 1) {
    pool->parallel_for(pieces, [&](int, int64_t i) { piece(i); });
  } else {
    for (int64_t i = 0; i < pieces; ++i) piece(i);
  }
}

/// sum(x, dim, to) in one field: element j of dim sums the j-th contiguous group, lazily reduced.
template <uint64_t M>
void sum_field(const UView& x_in, int dim, int64_t to, const MutUView& out, interp::ThreadPool* pool) {
  MUGRAPH_CHECK(out.contiguous()) << "sum writes a dense result";
  thread_local std::vector<uint32_t> x_buf;
  UView x = dense(x_in, x_buf);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; ++d) outer *= x.shape[d];
  for (int d = dim + 1; d < x.rank(); ++d) inner *= x.shape[d];
  const int64_t group = x.shape[dim] / to;
  const int64_t rows = outer * to;
  constexpr uint64_t kFold = (uint64_t{1} << 32) % M;
  auto run_rows = [&](int64_t r0, int64_t r1) {
    thread_local std::vector<uint64_t> acc;
    acc.resize(static_cast<size_t>(inner));
    for (int64_t r = r0; r < r1; ++r) {
      const uint32_t* src = x.data + r * group * inner;
      uint32_t* dst = out.data + r * inner;
      if (inner == 1) {
        // A row's sum (softmax's denominators, norms): four running sums side by side, not one
        // chain of adds through memory. Each adds at most 2^31 residues < 2^30 before its fold.
        uint64_t s[4] = {0, 0, 0, 0};
        for (int64_t k0 = 0; k0 < group; k0 += (int64_t{1} << 33)) {
          const int64_t k1 = std::min(group, k0 + (int64_t{1} << 33));
          int64_t k = k0;
          for (; k + 4 <= k1; k += 4)
            for (int l = 0; l < 4; ++l) s[l] += src[k + l];
          for (; k < k1; ++k) s[0] += src[k];
          for (uint64_t& v : s) v = (v >> 32) * kFold + (v & 0xffffffffu);
        }
        // Four folded sums (each < 2^32 · kFold + 2^32 < 2^62) add up without overflow.
        *dst = static_cast<uint32_t>((s[0] + s[1] + s[2] + s[3]) % M);
        continue;
      }
      std::fill(acc.begin(), acc.end(), uint64_t{0});
      // Residues < 2^30: 2^33 of them fit in 64 bits; fold every 2^32 to be safe.
      for (int64_t k0 = 0; k0 < group; k0 += (int64_t{1} << 32)) {
        const int64_t k1 = std::min(group, k0 + (int64_t{1} << 32));
        for (int64_t k = k0; k < k1; ++k) {
          const uint32_t* row = src + k * inner;
          for (int64_t i = 0; i < inner; ++i) acc[static_cast<size_t>(i)] += row[i];
        }
        for (auto& v : acc) v = (v >> 32) * kFold + (v & 0xffffffffu);
      }
      ff_reduce_run(M, acc.data(), dst, inner);
    }
  };
  const int64_t per_row = std::max<int64_t>(1, group * inner);
  const int64_t rows_per_piece = std::max<int64_t>(1, (int64_t{1} << 16) / per_row);
  const int64_t pieces = (rows + rows_per_piece - 1) / rows_per_piece;
  if (pool && pool->size() > 1 && pieces > 1) {
    pool->parallel_for(pieces,
                       [&](int, int64_t p) { run_rows(p * rows_per_piece, std::min(rows, (p + 1) * rows_per_piece)); });
  } else {
    run_rows(0, rows);
  }
}

/// Unary ops, both fields at once (exp and the random functions mix them).
void unary_ff(OpKind kind, const FFView& x, bool tainted, const FFMutView& out, FFState& st, interp::ThreadPool* pool) {
  interp::StridedLoop<4> loop(out.shape(), {out.p.stride, out.q.stride, x.p.stride, x.q.stride});
  const int64_t sop = loop.inner_stride(0), soq = loop.inner_stride(1), sxp = loop.inner_stride(2),
                sxq = loop.inner_stride(3);
  // Runs f(x_p, x_q) → {r_p, r_q} over every element; f is chosen per op, outside the loop, so
  // each op's loop is its own (and keeps its tables in registers).
  auto each = [&](auto f) {
    split(loop.numel(), pool, [&](int64_t begin, int64_t end) {
      loop.run(begin, end, [&](const std::array<int64_t, 4>& off, int64_t n) {
        uint32_t* op = out.p.data + off[0];
        uint32_t* oq = out.q.data + off[1];
        const uint32_t* xp = x.p.data + off[2];
        const uint32_t* xq = x.q.data + off[3];
        for (int64_t j = 0; j < n; ++j) {
          const std::array<uint64_t, 2> r = f(uint64_t{xp[j * sxp]}, uint64_t{xq[j * sxq]});
          op[j * sop] = static_cast<uint32_t>(r[0]);
          oq[j * soq] = static_cast<uint32_t>(r[1]);
        }
      });
    });
  };
  // A random function over every element: of both residues (`pair`) or of the Z_p one.
  auto hash_each = [&](uint64_t seed, bool pair) {
    split(loop.numel(), pool, [&](int64_t begin, int64_t end) {
      loop.run(begin, end, [&](const std::array<int64_t, 4>& off, int64_t n) {
        ff_hash_run(seed, x.p.data + off[2], sxp, pair ? x.q.data + off[3] : nullptr, sxq, out.p.data + off[0], sop,
                    out.q.data + off[1], soq, n);
      });
    });
  };
  if (st.ctx.opaque_functions && is_opaque_function(kind)) return hash_each(st.random_pair_fn_seed(kind), true);
  // exp and silu of a tainted value are second exps: random functions like relu and gelu.
  if (kind == OpKind::relu || kind == OpKind::gelu || (tainted && (kind == OpKind::exp || kind == OpKind::silu)))
    return hash_each(st.random_fn_seed(kind), false);
  switch (kind) {
    case OpKind::sqr:
      split(loop.numel(), pool, [&](int64_t begin, int64_t end) {
        loop.run(begin, end, [&](const std::array<int64_t, 4>& off, int64_t n) {
          if (sop != 1 || soq != 1) {
            for (int64_t j = 0; j < n; ++j) {
              const uint64_t a = x.p.data[off[2] + j * sxp], b = x.q.data[off[3] + j * sxq];
              out.p.data[off[0] + j * sop] = static_cast<uint32_t>(a * a % kP);
              out.q.data[off[1] + j * soq] = static_cast<uint32_t>(b * b % kQ);
            }
            return;
          }
          ff_mul_run(kP, x.p.data + off[2], sxp, x.p.data + off[2], sxp, out.p.data + off[0], n);
          ff_mul_run(kQ, x.q.data + off[3], sxq, x.q.data + off[3], sxq, out.q.data + off[1], n);
        });
      });
      return;
    case OpKind::sqrt:
      split(loop.numel(), pool, [&](int64_t begin, int64_t end) {
        loop.run(begin, end, [&](const std::array<int64_t, 4>& off, int64_t n) {
          if (sop != 1 || soq != 1) {
            for (int64_t j = 0; j < n; ++j) {
              out.p.data[off[0] + j * sop] = static_cast<uint32_t>(ff::sqrt_pm(x.p.data[off[2] + j * sxp], kP));
              out.q.data[off[1] + j * soq] = static_cast<uint32_t>(ff::sqrt_pm(x.q.data[off[3] + j * sxq], kQ));
            }
            return;
          }
          ff_sqrt_run(kP, x.p.data + off[2], sxp, out.p.data + off[0], n);
          ff_sqrt_run(kQ, x.q.data + off[3], sxq, out.q.data + off[1], n);
        });
      });
      return;
    case OpKind::exp: {
      // ω^(x_q); the Z_q part has no meaning (0).
      const OmegaPow pow = st.omega_pow();
      split(loop.numel(), pool, [&](int64_t begin, int64_t end) {
        loop.run(begin, end, [&](const std::array<int64_t, 4>& off, int64_t n) {
          uint32_t* op = out.p.data + off[0];
          uint32_t* oq = out.q.data + off[1];
          if (sop == 1) {
            ff_pow_run(pow.low, pow.high, OmegaPow::kLowBits, x.q.data + off[3], sxq, op, n);
          } else {
            for (int64_t j = 0; j < n; ++j) op[j * sop] = static_cast<uint32_t>(pow(x.q.data[off[3] + j * sxq]));
          }
          for (int64_t j = 0; j < n; ++j) oq[j * soq] = 0;
        });
      });
      return;
    }
    case OpKind::silu: {
      // x / (1 + exp(−x)); ω^(−x_q) ≠ −1 since ω has odd order, so 1 + it is never 0.
      const OmegaPow pow = st.omega_pow();
      std::atomic<bool>& zero_divisor = st.zero_divisor;
      each([pow, &zero_divisor](uint64_t a, uint64_t b) {
        const uint64_t d = ff::add(1, pow(ff::neg(b, kQ)), kP);
        if (d == 0) {
          zero_divisor = true;
          return std::array<uint64_t, 2>{0, 0};
        }
        return std::array<uint64_t, 2>{a * ff::inv(d, kP) % kP, b};  // exp's Z_q part is 0: x_q / (1 + 0)
      });
      return;
    }
    default:
      detail::bad_elementwise(kind);
  }
}

template <uint64_t M>
void repeat_field(const UView& x, int dim, int64_t times, const MutUView& out) {
  const int64_t n = x.shape[dim];
  for (int64_t t = 0; t < times; ++t) copy_field(x, out.slice(dim, t * n, n));
}

}  // namespace

FFState::FFState(const FFContext& c, interp::ThreadPool* p) : ctx(c), pool(p) {}

std::shared_ptr<const FFState::OmegaPowers> FFState::omega_powers(uint64_t omega) {
  // The last few ω seen: a verification's draws each have one, and threads may verify at once.
  static std::mutex mutex;
  static std::vector<std::pair<uint64_t, std::shared_ptr<const OmegaPowers>>> recent;
  constexpr size_t kKept = 8;
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& [w, powers] : recent)
      if (w == omega) return powers;
  }
  auto powers = std::make_shared<OmegaPowers>();
  auto fill = [](std::vector<uint32_t>& table, size_t size, uint64_t base) {
    table.resize(size);
    uint64_t v = 1;
    for (uint32_t& e : table) {
      e = static_cast<uint32_t>(v);
      v = v * base % kP;
    }
    return v;  // base^size
  };
  const uint64_t step = fill(powers->low, size_t{1} << OmegaPow::kLowBits, omega % kP);  // ω^(2^15)
  fill(powers->high, static_cast<size_t>((kQ >> OmegaPow::kLowBits) + 1), step);
  std::lock_guard<std::mutex> lock(mutex);
  if (recent.size() == kKept) recent.erase(recent.begin());
  recent.emplace_back(omega, powers);
  return powers;
}

OmegaPow FFState::omega_pow() const {
  std::call_once(powers_once_, [&] { powers_ = omega_powers(ctx.omega); });
  return OmegaPow{powers_->low.data(), powers_->high.data()};
}

namespace {
/// The seed of a random function: the test's, mixed with the op kind and `kind_mix` (one per
/// kind of function).
uint64_t seeded(uint64_t test_seed, uint64_t kind_mix, OpKind kind) {
  return splitmix64(test_seed ^ (kind_mix * (static_cast<uint64_t>(kind) + 1)));
}
}  // namespace

uint64_t FFState::random_fn_seed(OpKind kind) const { return seeded(ctx.test_seed, 0x51ed270b27a3e1b7ull, kind); }

// A seed of its own per kind, so that the pair function is not the Z_p one at xq = 0.
uint64_t FFState::random_pair_fn_seed(OpKind kind) const { return seeded(ctx.test_seed, 0x9e6c63d0676a9a99ull, kind); }

std::array<uint32_t, 2> scalar_residues(const Scalar& s) {
  std::array<uint32_t, 2> r{};
  auto one = [&](uint64_t m) {
    uint64_t v = ff::from_int(s.mantissa, m);
    uint64_t ten = s.exp10 >= 0 ? 10 : ff::inv(10, m);
    return static_cast<uint32_t>(
        v * ff::pow(ten, static_cast<uint64_t>(s.exp10 >= 0 ? s.exp10 : -int64_t{s.exp10}), m) % m);
  };
  r[0] = one(kP);
  r[1] = one(kQ);
  return r;
}

void copy_ff(const FFView& src, const FFMutView& dst) {
  MUGRAPH_CHECK(src.shape() == dst.shape()) << "copy " << src.shape().str() << " to " << dst.shape().str();
  copy_field(src.p, dst.p);
  copy_field(src.q, dst.q);
}

void add_into_ff(const FFView& src, const FFMutView& dst) {
  MUGRAPH_CHECK(src.shape() == dst.shape()) << "accumulate " << src.shape().str() << " into " << dst.shape().str();
  per_field([&]<uint64_t M>(int f) {
    const UView& s = f == 0 ? src.p : src.q;
    const MutUView& d = f == 0 ? dst.p : dst.q;
    binary_field<M>(OpKind::add, d, s, d, nullptr);
  });
}

void eval_ff_op(const Op& op, const std::vector<FFView>& ins, const std::array<bool, 2>& tainted,
                const std::array<uint32_t, 2>& scalar, const FFMutView& out, FFState& st, bool parallel,
                PartsRead read) {
  interp::ThreadPool* pool = parallel ? st.pool : nullptr;
  const OpAttrs& a = op.attrs;
  switch (op_info(op.kind).category) {
    case OpCategory::unary:
      unary_ff(op.kind, ins.at(0), tainted[0], out, st, pool);
      return;
    case OpCategory::binary: {
      // Operands as (x, y, taint of y); a constant is a rank-0 view that broadcasts.
      std::array<uint32_t, 2> c = scalar;
      FFView cv{UView{c.data(), Shape{}, {}}, UView{c.data() + 1, Shape{}, {}}};
      FFView x = a.has_scalar && a.scalar_pos == 0 ? cv : ins.at(0);
      FFView y = a.has_scalar ? (a.scalar_pos == 0 ? ins.at(0) : cv) : ins.at(1);
      OpKind kind = op.kind;
      thread_local std::vector<uint32_t> inv_p, inv_q;
      if (kind == OpKind::div) {
        // x / y = x · y⁻¹: invert y's elements once (it is often much smaller than x).
        kind = OpKind::mul;
        inv_p.resize(static_cast<size_t>(y.shape().numel()));
        inv_q.resize(inv_p.size());
        // A zero residue of the divisor is no zero divisor in a field whose part of the quotient
        // nothing reads (result_fields); that part is not computed at all.
        bool zero = false;
        if (read.p) {
          copy_field(y.p, MutUView::dense(inv_p.data(), y.shape()));
          zero = invert_all<kP>(inv_p);
        }
        if (read.q) {
          copy_field(y.q, MutUView::dense(inv_q.data(), y.shape()));
          zero = invert_all<kQ>(inv_q) || zero;
        }
        if (zero) {
          st.zero_divisor = true;
          return;
        }
        y = {UView::dense(inv_p.data(), y.shape()), UView::dense(inv_q.data(), y.shape())};
      }
      result_fields(read, out, [&]<uint64_t M>(int f) {
        binary_field<M>(kind, f == 0 ? x.p : x.q, f == 0 ? y.p : y.q, f == 0 ? out.p : out.q, pool);
      });
      return;
    }
    case OpCategory::matmul:
      result_fields(read, out, [&]<uint64_t M>(int f) {
        matmul_field<M>(f == 0 ? ins.at(0).p : ins.at(0).q, f == 0 ? ins.at(1).p : ins.at(1).q, f == 0 ? out.p : out.q,
                        pool);
      });
      return;
    case OpCategory::reduction:
      MUGRAPH_CHECK(a.dim >= 0 && a.dim < ins.at(0).p.rank() && a.to >= 1 && ins.at(0).shape()[a.dim] % a.to == 0)
          << "sum over dim " << a.dim << " to " << a.to << " of " << ins.at(0).shape().str();
      result_fields(read, out, [&]<uint64_t M>(int f) {
        sum_field<M>(f == 0 ? ins.at(0).p : ins.at(0).q, a.dim, a.to, f == 0 ? out.p : out.q, pool);
      });
      return;
    case OpCategory::layout:
      if (op.kind == OpKind::repeat) {
        per_field([&]<uint64_t M>(int f) {
          repeat_field<M>(f == 0 ? ins.at(0).p : ins.at(0).q, a.dim, a.times, f == 0 ? out.p : out.q);
        });
      } else if (op.kind == OpKind::reshape) {
        MUGRAPH_CHECK(ins.at(0).shape().numel() == out.shape().numel())
            << "reshape of " << ins.at(0).shape().str() << " to " << out.shape().str();
        copy_ff(ins.at(0), FFMutView{MutUView::dense(out.p.data, ins.at(0).shape()),
                                     MutUView::dense(out.q.data, ins.at(0).shape())});
      } else {
        int64_t at = 0;
        for (const FFView& x : ins) {
          copy_ff(x, out.slice(a.dim, at, x.shape()[a.dim]));
          at += x.shape()[a.dim];
        }
        MUGRAPH_CHECK(at == out.shape()[a.dim]) << "concat fills " << at << " of " << out.shape().str();
      }
      return;
    default:
      break;
  }
  MUGRAPH_CHECK(false) << op_name(op.kind) << " is not a computing op";
}

Taint exp_taint(const Graph& g, const std::vector<bool>& params, bool exps_taint) {
  Taint t;
  t.tensor.assign(g.tensors.size(), false);
  for (const Op& op : g.ops) {
    bool any = false;
    for (TensorId in : op.inputs) any = any || t.tensor[in.index()];
    switch (op_info(op.kind).category) {
      case OpCategory::source:
        break;
      case OpCategory::iterator: {
        auto io = static_cast<size_t>(op.attrs.io_index);
        any = io < params.size() && params[io];
        break;
      }
      case OpCategory::saver: {
        auto io = static_cast<size_t>(op.attrs.io_index);
        if (t.out.size() <= io) t.out.resize(io + 1, false);
        t.out[io] = any;
        break;
      }
      case OpCategory::kernel_body:
      case OpCategory::thread_body: {
        std::vector<bool> in;
        for (TensorId x : op.inputs) in.push_back(t.tensor[x.index()]);
        Taint body = exp_taint(g.bodies.at(static_cast<size_t>(op.attrs.body)), in, exps_taint);
        for (size_t k = 0; k < op.outputs.size(); ++k)
          t.tensor[op.outputs[k].index()] = k < body.out.size() && body.out[k];
        continue;
      }
      default:
        if (exps_taint && (op.kind == OpKind::exp || op.kind == OpKind::silu)) any = true;
        break;
    }
    for (TensorId x : op.outputs) t.tensor[x.index()] = any;
  }
  if (g.level == Level::kernel)
    for (TensorId x : g.outputs) t.out.push_back(t.tensor[x.index()]);
  // Readers per tensor: 0 none, 1 only exps of untainted values, 2 any other.
  std::vector<uint8_t> readers(g.tensors.size(), 0);
  for (const Op& op : g.ops) {
    const bool first_exp = exps_taint && op.kind == OpKind::exp && !t.tensor[op.inputs.at(0).index()];
    for (TensorId in : op.inputs) {
      uint8_t& r = readers[in.index()];
      r = first_exp && r != 2 ? 1 : 2;
    }
  }
  for (TensorId x : g.outputs) readers[x.index()] = 2;
  t.exp_only.resize(g.tensors.size());
  for (size_t i = 0; i < readers.size(); ++i) t.exp_only[i] = readers[i] == 1;
  return t;
}

}  // namespace mugraph::ff_detail
