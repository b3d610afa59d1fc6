// The computing ops of the finite-field interpreter on strided residue views: element-wise ops
// (paper Table 3), matmul and sum with lazy reduction, layout ops, and the exp-taint analysis.
#include <algorithm>
#include <cstring>
#include <limits>

#include "ff_ops.h"
#include "matmul_pieces.h"
#include "strided_loop.h"

namespace mugraph::ff_detail {

namespace {

using ff::kP;
using ff::kQ;

// Element-wise work pieces of this many elements when an op is split over the pool.
constexpr int64_t kChunk = int64_t{1} << 15;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

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
          for (int64_t j = 0; j < n; ++j) o[j * so] = static_cast<uint32_t>(ff::add(x[j * sa], y[j * sb], M));
          break;
        case OpKind::sub:
          for (int64_t j = 0; j < n; ++j) o[j * so] = static_cast<uint32_t>(ff::sub(x[j * sa], y[j * sb], M));
          break;
        default:  // mul (and div by inverses)
          for (int64_t j = 0; j < n; ++j) o[j * so] = reduce<M>(uint64_t{x[j * sa]} * y[j * sb]);
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

// ---- matmul: the hot kernel -------------------------------------------------------------------
//
// C[i, :] = Σ_k A[i, k] · B[k, :] with B's rows contiguous. Products of residues < 2^30 are
// < 2^60; 64-bit lanes accumulate 16 of them, then fold: acc = hi·(2^32 mod M) + lo keeps
// acc < 2^45, leaving room for the next 16 (checked below). One % per result at the end.
// Four rows of A share each load of a row of B; the j-loops vectorize (vpmuludq).

template <uint64_t M>
constexpr bool lazy_bound_holds() {
  constexpr uint64_t max64 = std::numeric_limits<uint64_t>::max();
  constexpr uint64_t folded = uint64_t{0xffffffffu} * ((uint64_t{1} << 32) % M) + 0xffffffffu;
  return (M - 1) * (M - 1) <= max64 / 16 && folded <= max64 - 16 * (M - 1) * (M - 1);
}
static_assert(lazy_bound_holds<kP>() && lazy_bound_holds<kQ>(), "16 lazy products must fit in 64 bits");

constexpr int64_t kLazy = 16;
constexpr int kRows = 4;
constexpr int64_t kWide = 256;  // columns from which B is streamed by rows instead of packed

template <uint64_t M>
[[gnu::always_inline]] inline void matmul_rows(const uint32_t* __restrict a, int64_t sar, int64_t sak,
                                               const uint32_t* __restrict b, int64_t ldb, uint32_t* __restrict c,
                                               int64_t ldc, int64_t m, int64_t n, int64_t k_total,
                                               uint64_t* __restrict acc) {
  constexpr uint64_t kFold = (uint64_t{1} << 32) % M;
  for (int64_t i = 0; i < m; i += kRows) {
    const int64_t rows = std::min<int64_t>(kRows, m - i);
    std::fill(acc, acc + kRows * n, uint64_t{0});
    uint64_t* __restrict acc0 = acc;
    uint64_t* __restrict acc1 = acc + n;
    uint64_t* __restrict acc2 = acc + 2 * n;
    uint64_t* __restrict acc3 = acc + 3 * n;
    for (int64_t k0 = 0; k0 < k_total; k0 += kLazy) {
      const int64_t k1 = std::min(k_total, k0 + kLazy);
      for (int64_t k = k0; k < k1; ++k) {
        const uint32_t* __restrict bk = b + k * ldb;
        const uint32_t* ak = a + i * sar + k * sak;
        if (rows == kRows) {
          const uint64_t a0 = ak[0], a1 = ak[sar], a2 = ak[2 * sar], a3 = ak[3 * sar];
          for (int64_t j = 0; j < n; ++j) {
            const uint64_t bj = bk[j];
            acc0[j] += a0 * bj;
            acc1[j] += a1 * bj;
            acc2[j] += a2 * bj;
            acc3[j] += a3 * bj;
          }
        } else {
          for (int64_t r = 0; r < rows; ++r) {
            const uint64_t ar = ak[r * sar];
            uint64_t* __restrict accr = acc + r * n;
            for (int64_t j = 0; j < n; ++j) accr[j] += ar * bk[j];
          }
        }
      }
      for (int64_t j = 0; j < rows * n; ++j) acc[j] = (acc[j] >> 32) * kFold + (acc[j] & 0xffffffffu);
    }
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) c[(i + r) * ldc + j] = static_cast<uint32_t>(acc[r * n + j] % M);
  }
}

typedef uint64_t U64x8 __attribute__((vector_size(64)));
typedef uint32_t U32x8 __attribute__((vector_size(32)));

/// The register-blocked core: a 4 × 16 tile of C in eight 8-lane accumulators; each row of B
/// is loaded once for the four rows of A. Operands are masked to 32 bits so that the multiply
/// is one vpmuludq.
template <uint64_t M>
[[gnu::always_inline]] inline void matmul_4x16(const uint32_t* a, int64_t sar, int64_t sak, const uint32_t* b,
                                               int64_t ldb, uint32_t* c, int64_t ldc, int64_t k_total) {
  constexpr uint64_t kFold = (uint64_t{1} << 32) % M;
  const U64x8 lo = U64x8{} + 0xffffffffu;
  U64x8 acc[kRows][2] = {};
  for (int64_t k0 = 0; k0 < k_total; k0 += kLazy) {
    const int64_t k1 = std::min(k_total, k0 + kLazy);
    for (int64_t k = k0; k < k1; ++k) {
      U32x8 b0, b1;
      std::memcpy(&b0, b + k * ldb, sizeof b0);
      std::memcpy(&b1, b + k * ldb + 8, sizeof b1);
      const U64x8 w0 = __builtin_convertvector(b0, U64x8), w1 = __builtin_convertvector(b1, U64x8);
      for (int r = 0; r < kRows; ++r) {
        const U64x8 ar = (U64x8{} + a[r * sar + k * sak]) & lo;
        acc[r][0] += ar * (w0 & lo);
        acc[r][1] += ar * (w1 & lo);
      }
    }
    for (auto& row : acc)
      for (auto& v : row) v = (v >> 32) * kFold + (v & lo);
  }
  for (int r = 0; r < kRows; ++r)
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 8; ++j) c[r * ldc + h * 8 + j] = static_cast<uint32_t>(acc[r][h][j] % M);
}

/// C [m, n] = A [m, K] · B [K, n] with B's rows at stride ldb. A wide B (block tiles of many
/// columns, kernel-level operands) streams its rows through matmul_rows. A narrow B (a [K, 32]
/// tile of a [4096, 4096] weight: rows 16 KiB apart, all in the same cache sets) is packed
/// densely once, then computed in 4 × 16 register tiles.
template <uint64_t M>
[[gnu::always_inline]] inline void matmul_any(const uint32_t* a, int64_t sar, int64_t sak, const uint32_t* b,
                                              int64_t ldb, uint32_t* c, int64_t ldc, int64_t m, int64_t n,
                                              int64_t k_total, uint64_t* acc, uint32_t* packed) {
  if (n >= kWide || m < kRows) {
    matmul_rows<M>(a, sar, sak, b, ldb, c, ldc, m, n, k_total, acc);
    return;
  }
  if (ldb != n) {
    for (int64_t k = 0; k < k_total; ++k) std::copy(b + k * ldb, b + k * ldb + n, packed + k * n);
    b = packed;
    ldb = n;
  }
  const int64_t m4 = m / kRows * kRows, n16 = n / 16 * 16;
  for (int64_t i = 0; i < m4; i += kRows)
    for (int64_t j = 0; j < n16; j += 16) matmul_4x16<M>(a + i * sar, sar, sak, b + j, ldb, c + i * ldc + j, ldc, k_total);
  if (n16 < n) matmul_rows<M>(a, sar, sak, b + n16, ldb, c + n16, ldc, m4, n - n16, k_total, acc);
  if (m4 < m) matmul_rows<M>(a + m4 * sar, sar, sak, b, ldb, c + m4 * ldc, ldc, m - m4, n, k_total, acc);
}

// One clone per instruction set; the loader picks the best at startup.
#define MUGRAPH_FF_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

MUGRAPH_FF_CLONES void matmul_rows_p(const uint32_t* a, int64_t sar, int64_t sak, const uint32_t* b, int64_t ldb,
                                     uint32_t* c, int64_t ldc, int64_t m, int64_t n, int64_t k, uint64_t* acc,
                                     uint32_t* packed) {
  matmul_any<kP>(a, sar, sak, b, ldb, c, ldc, m, n, k, acc, packed);
}
MUGRAPH_FF_CLONES void matmul_rows_q(const uint32_t* a, int64_t sar, int64_t sak, const uint32_t* b, int64_t ldb,
                                     uint32_t* c, int64_t ldc, int64_t m, int64_t n, int64_t k, uint64_t* acc,
                                     uint32_t* packed) {
  matmul_any<kQ>(a, sar, sak, b, ldb, c, ldc, m, n, k, acc, packed);
}

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
  const int64_t cols_per = plan.cols_per();
  const int64_t sar = a_in.stride[static_cast<size_t>(ra - 2)], sak = a_in.stride[static_cast<size_t>(ra - 1)];
  auto piece = [&](int64_t index) {
    thread_local std::vector<uint64_t> acc;
    thread_local std::vector<uint32_t> packed;
    acc.resize(static_cast<size_t>(kRows * std::max<int64_t>(N, 1)));
    packed.resize(static_cast<size_t>(K * std::min({N, cols_per, kWide})));
    const auto [bi, r0, c0, m, n] = plan.piece(index);
    const uint32_t* pa = a_in.data + plan.batch_offset(bi, a_in);
    const uint32_t* pb = b.data + plan.batch_offset(bi, b);
    uint32_t* pc = out.data + bi * Mr * N + r0 * N + c0;
    pb += c0;
    if (M == kP) {
      matmul_rows_p(pa + r0 * sar, sar, sak, pb, ldb, pc, N, m, n, K, acc.data(), packed.data());
    } else {
      matmul_rows_q(pa + r0 * sar, sar, sak, pb, ldb, pc, N, m, n, K, acc.data(), packed.data());
    }
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
      for (int64_t i = 0; i < inner; ++i) dst[i] = reduce<M>(acc[static_cast<size_t>(i)]);
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
  // exp and silu of a tainted value are second exps: random functions like relu and gelu.
  const bool random = kind == OpKind::relu || kind == OpKind::gelu ||
                      (tainted && (kind == OpKind::exp || kind == OpKind::silu));
  split(loop.numel(), pool, [&](int64_t begin, int64_t end) {
    loop.run(begin, end, [&](const std::array<int64_t, 4>& off, int64_t n) {
      uint32_t* op = out.p.data + off[0];
      uint32_t* oq = out.q.data + off[1];
      const uint32_t* xp = x.p.data + off[2];
      const uint32_t* xq = x.q.data + off[3];
      for (int64_t j = 0; j < n; ++j) {
        uint64_t a = xp[j * sxp], b = xq[j * sxq];
        uint64_t rp = 0, rq = 0;
        if (random) {
          auto r = st.random_fn(kind, static_cast<uint32_t>(a));
          rp = r[0];
          rq = r[1];
        } else {
          switch (kind) {
            case OpKind::sqr:
              rp = a * a % kP;
              rq = b * b % kQ;
              break;
            case OpKind::sqrt:
              rp = ff::sqrt_pm(a, kP);
              rq = ff::sqrt_pm(b, kQ);
              break;
            case OpKind::exp:
              rp = st.omega_pow(b);  // ω^(x_q); the Z_q part has no meaning
              break;
            case OpKind::silu: {
              // x / (1 + exp(−x)); ω^(−x_q) ≠ −1 since ω has odd order, so 1 + it is never 0.
              uint64_t d = ff::add(1, st.omega_pow(ff::neg(b, kQ)), kP);
              if (d == 0) {
                st.zero_divisor = true;
                return;
              }
              rp = a * ff::inv(d, kP) % kP;
              rq = b;  // exp's Z_q part is 0: x_q / (1 + 0)
              break;
            }
            default:
              detail::bad_elementwise(kind);
          }
        }
        op[j * sop] = static_cast<uint32_t>(rp);
        oq[j * soq] = static_cast<uint32_t>(rq);
      }
    });
  });
}

template <uint64_t M>
void repeat_field(const UView& x, int dim, int64_t times, const MutUView& out) {
  const int64_t n = x.shape[dim];
  for (int64_t t = 0; t < times; ++t) copy_field(x, out.slice(dim, t * n, n));
}

}  // namespace

FFState::FFState(const FFContext& c, interp::ThreadPool* p) : ctx(c), pool(p) {
  uint64_t base = c.omega % kP;
  for (auto& table : omega_table_) {
    uint64_t v = 1;
    for (auto& e : table) {
      e = static_cast<uint32_t>(v);
      v = v * base % kP;
    }
    base = v;  // ω^(256^(k+1))
  }
}

uint32_t FFState::omega_pow(uint64_t e) const {
  uint64_t r = omega_table_[0][e & 255];
  r = r * omega_table_[1][(e >> 8) & 255] % kP;
  r = r * omega_table_[2][(e >> 16) & 255] % kP;
  r = r * omega_table_[3][(e >> 24) & 255] % kP;
  return static_cast<uint32_t>(r);
}

std::array<uint32_t, 2> FFState::random_fn(OpKind kind, uint32_t xp) const {
  uint64_t h = splitmix64(ctx.test_seed ^ (0x51ed270b27a3e1b7ull * (static_cast<uint64_t>(kind) + 1)));
  h = splitmix64(h ^ xp);
  uint64_t h2 = splitmix64(h ^ 0x2545f4914f6cdd1dull);
  return {static_cast<uint32_t>(h % kP), static_cast<uint32_t>(h2 % kQ)};
}

std::array<uint32_t, 2> scalar_residues(const Scalar& s) {
  std::array<uint32_t, 2> r{};
  auto one = [&](uint64_t m) {
    uint64_t v = ff::from_int(s.mantissa, m);
    uint64_t ten = s.exp10 >= 0 ? 10 : ff::inv(10, m);
    return static_cast<uint32_t>(v * ff::pow(ten, static_cast<uint64_t>(s.exp10 >= 0 ? s.exp10 : -int64_t{s.exp10}), m) % m);
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

Taint exp_taint(const Graph& g, const std::vector<bool>& params) {
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
        Taint body = exp_taint(g.bodies.at(static_cast<size_t>(op.attrs.body)), in);
        for (size_t k = 0; k < op.outputs.size(); ++k)
          t.tensor[op.outputs[k].index()] = k < body.out.size() && body.out[k];
        continue;
      }
      default:
        if (op.kind == OpKind::exp || op.kind == OpKind::silu) any = true;
        break;
    }
    for (TensorId x : op.outputs) t.tensor[x.index()] = any;
  }
  if (g.level == Level::kernel)
    for (TensorId x : g.outputs) t.out.push_back(t.tensor[x.index()]);
  // Readers per tensor: 0 none, 1 only exps of untainted values, 2 any other.
  std::vector<uint8_t> readers(g.tensors.size(), 0);
  for (const Op& op : g.ops) {
    const bool first_exp = op.kind == OpKind::exp && !t.tensor[op.inputs.at(0).index()];
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
