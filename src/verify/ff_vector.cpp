// The finite-field interpreter's vector kernels (ff_vector.h).
//
// C = A · B over Z_p or Z_q. B is copied, 16 columns at a time, into a dense panel (its rows
// contiguous whatever B's stride: a [K, 32] tile of a [4096, 4096] weight has rows 16 KiB apart,
// all in the same cache sets); then R rows of A sweep the panel with their R × 16 sums in
// registers. Products of residues < 2^30 are < 2^60: 64-bit lanes take 16 of them, then fold,
// acc = hi·(2^32 mod M) + lo, which keeps acc < 2^45 and leaves room for the next 16 (checked
// below). One reduction per result at the end.
//
// Element-wise products and reductions take their quotients from doubles: exact to within one,
// then corrected once in each direction (mul_mod8, reduce8).
//
// The vector kernels are written with intrinsics: each product is one vpmuludq (32 × 32 → 64
// bits per lane), where GCC turns a 64-bit vector multiply of masked operands into the
// three-multiply sequence of a full 64-bit product (three times the work, measured 2026-11-28).
#include "ff_vector.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>

#include "mugraph/error.h"
#include "mugraph/ffield.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define MUGRAPH_FF_X86 1
#include <immintrin.h>
#else
#define MUGRAPH_FF_X86 0
#endif

namespace mugraph::ff_detail {

namespace {

using ff::kP;
using ff::kQ;

constexpr int64_t kLazy = 16;  // products per 64-bit lane between folds
constexpr uint64_t kSecondHash = 0x2545f4914f6cdd1dull;  // hash_residues' Z_q hash: of the Z_p one's, salted
constexpr int kPanel = 16;     // columns per panel

template <uint64_t M>
constexpr uint64_t kFold = (uint64_t{1} << 32) % M;

template <uint64_t M>
constexpr bool lazy_bound_holds() {
  constexpr uint64_t max64 = std::numeric_limits<uint64_t>::max();
  constexpr uint64_t folded = uint64_t{0xffffffffu} * kFold<M> + 0xffffffffu;
  return (M - 1) * (M - 1) <= max64 / kLazy && folded <= max64 - kLazy * (M - 1) * (M - 1);
}
static_assert(lazy_bound_holds<kP>() && lazy_bound_holds<kQ>(), "16 lazy products must fit in 64 bits");

/// Columns [0, cols) of B's K rows into a dense K × 16 panel, zeros beyond `cols`.
void pack_panel(const uint32_t* b, int64_t ldb, int64_t K, int64_t cols, uint32_t* panel) {
  for (int64_t k = 0; k < K; ++k) {
    uint32_t* row = panel + k * kPanel;
    std::memcpy(row, b + k * ldb, static_cast<size_t>(cols) * sizeof(uint32_t));
    std::fill(row + cols, row + kPanel, 0u);
  }
}

/// C's R rows from their sums (row r's column j at sums[r·16 + j]).
template <uint64_t M, int R>
inline void write_rows(const uint64_t* sums, uint32_t* c, int64_t ldc, int64_t cols) {
  for (int r = 0; r < R; ++r)
    for (int64_t j = 0; j < cols; ++j) c[r * ldc + j] = static_cast<uint32_t>(sums[r * kPanel + j] % M);
}

template <uint64_t M, int R>
void rows_portable(const uint32_t* a, int64_t sar, int64_t sak, const uint32_t* panel, int64_t K, uint32_t* c,
                   int64_t ldc, int64_t cols) {
  uint64_t acc[R * kPanel] = {};
  for (int64_t k0 = 0; k0 < K; k0 += kLazy) {
    const int64_t k1 = std::min(K, k0 + kLazy);
    for (int64_t k = k0; k < k1; ++k) {
      const uint32_t* bk = panel + k * kPanel;
      for (int r = 0; r < R; ++r) {
        const uint64_t ar = a[r * sar + k * sak];
        for (int j = 0; j < kPanel; ++j) acc[r * kPanel + j] += ar * bk[j];
      }
    }
    for (uint64_t& v : acc) v = (v >> 32) * kFold<M> + (v & 0xffffffffu);
  }
  write_rows<M, R>(acc, c, ldc, cols);
}

#if MUGRAPH_FF_X86

// GCC 12's AVX-512 intrinsics (shifts, conversions) start from _mm512_undefined_*, which
// -W(maybe-)uninitialized flags at every use (a known false positive in its headers).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// A row's 16 sums sit in 64-bit lanes, even columns apart from odd: a panel row loaded as 32-bit
// lanes has column 2i in the low half of 64-bit lane i (what vpmuludq reads) and column 2i + 1
// in its high half (one shift away). A's element is broadcast to every 32-bit lane.

/// r mod M for eight r in [−M, 2M): what x − q·M is when the quotient q is off by at most one.
template <uint64_t M>
__attribute__((target("avx512f"))) inline __m512i correct(__m512i r) {
  const __m512i m = _mm512_set1_epi64(static_cast<long long>(M));
  r = _mm512_mask_add_epi64(r, _mm512_cmplt_epi64_mask(r, _mm512_setzero_si512()), r, m);
  return _mm512_mask_sub_epi64(r, _mm512_cmpge_epi64_mask(r, m), r, m);
}

/// Eight products x · y mod M: the exact 64-bit products (vpmuludq), and the quotients from
/// doubles. x · y < 2^60 has 60 significant bits, so the double quotient is off by a relative
/// 2^-51 at most, less than 1 in absolute terms (quotients < 2^31): its truncation q is
/// ⌊x·y/M⌋ − 1, ⌊x·y/M⌋ or ⌊x·y/M⌋ + 1, and x·y − q·M lies in [−M, 2M).
template <uint64_t M>
__attribute__((target("avx512f"))) inline __m256i mul_mod8(__m256i x, __m256i y) {
  const __m512i m = _mm512_set1_epi64(static_cast<long long>(M));
  const __m512i product = _mm512_mul_epu32(_mm512_cvtepu32_epi64(x), _mm512_cvtepu32_epi64(y));
  const __m512d quotient =
      _mm512_mul_pd(_mm512_mul_pd(_mm512_cvtepu32_pd(x), _mm512_cvtepu32_pd(y)), _mm512_set1_pd(1.0 / double(M)));
  const __m512i q = _mm512_cvtepu32_epi64(_mm512_cvttpd_epu32(quotient));
  return _mm512_cvtepi64_epi32(correct<M>(_mm512_sub_epi64(product, _mm512_mul_epu32(q, m))));
}

/// x mod M for any eight 64-bit x: folded first (hi·(2^32 mod M) + lo < 2^45), which makes x
/// exactly a double; its quotient (< 2^16) from doubles is then off by at most one, as in mul_mod8.
template <uint64_t M>
__attribute__((target("avx512f"))) inline __m512i reduce8(__m512i x) {
  static_assert(uint64_t{0xffffffffu} * kFold<M> + 0xffffffffu < (uint64_t{1} << 52), "folded sums are exact doubles");
  const __m512i m = _mm512_set1_epi64(static_cast<long long>(M));
  x = _mm512_add_epi64(_mm512_mul_epu32(_mm512_srli_epi64(x, 32), _mm512_set1_epi64(static_cast<long long>(kFold<M>))),
                       _mm512_and_si512(x, _mm512_set1_epi64(0xffffffffll)));
  // An integer under 2^52 is the mantissa of 2^52 + x: set 2^52's exponent, subtract 2^52.
  const __m512i two52 = _mm512_set1_epi64(0x4330000000000000ll);
  const __m512d xd = _mm512_sub_pd(_mm512_castsi512_pd(_mm512_or_si512(x, two52)), _mm512_castsi512_pd(two52));
  const __m512i q = _mm512_cvtepu32_epi64(_mm512_cvttpd_epu32(_mm512_mul_pd(xd, _mm512_set1_pd(1.0 / double(M)))));
  return correct<M>(_mm512_sub_epi64(x, _mm512_mul_epu32(q, m)));
}

template <uint64_t M>
__attribute__((target("avx512f"))) int64_t reduce_run_avx512(const uint64_t* x, uint32_t* o, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + j),
                        _mm512_cvtepi64_epi32(reduce8<M>(_mm512_loadu_si512(x + j))));
  return j;
}

template <uint64_t M, int R>
__attribute__((target("avx512f"))) void rows_avx512(const uint32_t* a, int64_t sar, int64_t sak, const uint32_t* panel,
                                                    int64_t K, uint32_t* c, int64_t ldc, int64_t cols) {
  __m512i even[R], odd[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) even[r] = odd[r] = _mm512_setzero_si512();
  const __m512i fold = _mm512_set1_epi64(static_cast<long long>(kFold<M>));
  const __m512i low = _mm512_set1_epi64(0xffffffffll);
  for (int64_t k0 = 0; k0 < K; k0 += kLazy) {
    const int64_t k1 = std::min(K, k0 + kLazy);
    for (int64_t k = k0; k < k1; ++k) {
      const __m512i be = _mm512_loadu_si512(panel + k * kPanel);
      const __m512i bo = _mm512_srli_epi64(be, 32);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512i ar = _mm512_set1_epi32(static_cast<int>(a[r * sar + k * sak]));
        even[r] = _mm512_add_epi64(even[r], _mm512_mul_epu32(ar, be));
        odd[r] = _mm512_add_epi64(odd[r], _mm512_mul_epu32(ar, bo));
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      even[r] =
          _mm512_add_epi64(_mm512_mul_epu32(_mm512_srli_epi64(even[r], 32), fold), _mm512_and_si512(even[r], low));
      odd[r] = _mm512_add_epi64(_mm512_mul_epu32(_mm512_srli_epi64(odd[r], 32), fold), _mm512_and_si512(odd[r], low));
    }
  }
  for (int r = 0; r < R; ++r) {
    alignas(64) uint64_t e[8], o[8];
    _mm512_store_si512(e, reduce8<M>(even[r]));
    _mm512_store_si512(o, reduce8<M>(odd[r]));
    uint32_t* row = c + r * ldc;
    for (int64_t j = 0; j < cols; ++j) row[j] = static_cast<uint32_t>(j % 2 == 0 ? e[j / 2] : o[j / 2]);
  }
}

/// AVX2: 16 registers hold two rows' 16 sums (8 registers), the panel row's four quarters and
/// A's element; a third row would spill.
template <uint64_t M, int R>
__attribute__((target("avx2"))) void rows_avx2(const uint32_t* a, int64_t sar, int64_t sak, const uint32_t* panel,
                                               int64_t K, uint32_t* c, int64_t ldc, int64_t cols) {
  __m256i acc[R][4];  // columns 2i, 2i + 1, 8 + 2i, 8 + 2i + 1 of lane i
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    for (auto& v : acc[r]) v = _mm256_setzero_si256();
  const __m256i fold = _mm256_set1_epi64x(static_cast<long long>(kFold<M>));
  const __m256i low = _mm256_set1_epi64x(0xffffffffll);
  for (int64_t k0 = 0; k0 < K; k0 += kLazy) {
    const int64_t k1 = std::min(K, k0 + kLazy);
    for (int64_t k = k0; k < k1; ++k) {
      __m256i b[4];
      b[0] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + k * kPanel));
      b[1] = _mm256_srli_epi64(b[0], 32);
      b[2] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + k * kPanel + 8));
      b[3] = _mm256_srli_epi64(b[2], 32);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256i ar = _mm256_set1_epi32(static_cast<int>(a[r * sar + k * sak]));
        for (int q = 0; q < 4; ++q) acc[r][q] = _mm256_add_epi64(acc[r][q], _mm256_mul_epu32(ar, b[q]));
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      for (auto& v : acc[r])
        v = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(v, 32), fold), _mm256_and_si256(v, low));
  }
  uint64_t sums[R * kPanel];
  for (int r = 0; r < R; ++r) {
    alignas(32) uint64_t part[4][4];
    for (int q = 0; q < 4; ++q) _mm256_store_si256(reinterpret_cast<__m256i*>(part[q]), acc[r][q]);
    for (int i = 0; i < 4; ++i) {
      sums[r * kPanel + 2 * i] = part[0][i];
      sums[r * kPanel + 2 * i + 1] = part[1][i];
      sums[r * kPanel + 8 + 2 * i] = part[2][i];
      sums[r * kPanel + 8 + 2 * i + 1] = part[3][i];
    }
  }
  write_rows<M, R>(sums, c, ldc, cols);
}

/// Eight residues from p on, or p's one broadcast (stride 0).
__attribute__((target("avx512f"))) inline __m256i load8(const uint32_t* p, int64_t stride) {
  return stride == 0 ? _mm256_set1_epi32(static_cast<int>(*p))
                     : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

/// The *_run_avx512 kernels do whole groups of eight and return how many elements they did; the
/// caller's portable loop does the rest.
template <uint64_t M>
__attribute__((target("avx512f"))) int64_t mul_run_avx512(const uint32_t* x, int64_t sx, const uint32_t* y, int64_t sy,
                                                          uint32_t* o, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + j), mul_mod8<M>(load8(x + j * sx, sx), load8(y + j * sy, sy)));
  return j;
}

template <uint64_t M>
__attribute__((target("avx512f"))) int64_t pow_run_avx512(const uint32_t* low, const uint32_t* high, int low_bits,
                                                          const uint32_t* e, int64_t se, uint32_t* o, int64_t n) {
  const __m256i mask = _mm256_set1_epi32((1 << low_bits) - 1);
  const __m128i shift = _mm_cvtsi32_si128(low_bits);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256i x = load8(e + j * se, se);
    const __m256i lo = _mm256_i32gather_epi32(reinterpret_cast<const int*>(low), _mm256_and_si256(x, mask), 4);
    const __m256i hi = _mm256_i32gather_epi32(reinterpret_cast<const int*>(high), _mm256_srl_epi32(x, shift), 4);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + j), mul_mod8<M>(lo, hi));
  }
  return j;
}

/// Sixteen residues from p on, or p's one broadcast (stride 0).
__attribute__((target("avx512f"))) inline __m512i load16(const uint32_t* p, int64_t stride) {
  return stride == 0 ? _mm512_set1_epi32(static_cast<int>(*p)) : _mm512_loadu_si512(p);
}

/// x ± y mod M, sixteen at a time. Residues are below M < 2^31, so a sum does not wrap and the
/// smaller of s and s − M (which wraps when s < M) is the residue; a difference that wrapped is
/// made good by + M the same way.
template <uint64_t M, bool Subtract>
__attribute__((target("avx512f"))) int64_t add_run_avx512(const uint32_t* x, int64_t sx, const uint32_t* y, int64_t sy,
                                                          uint32_t* o, int64_t n) {
  const __m512i m = _mm512_set1_epi32(static_cast<int>(M));
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512i a = load16(x + j * sx, sx), b = load16(y + j * sy, sy);
    __m512i r;
    if constexpr (Subtract) {
      const __m512i d = _mm512_sub_epi32(a, b);
      r = _mm512_min_epu32(d, _mm512_add_epi32(d, m));
    } else {
      const __m512i s = _mm512_add_epi32(a, b);
      r = _mm512_min_epu32(s, _mm512_sub_epi32(s, m));
    }
    _mm512_storeu_si512(o + j, r);
  }
  return j;
}

/// ff::sqrt_pm of V groups of eight residues at once: x^((M+1)/4) by squaring from the exponent's
/// top bit down, then the smaller of ±r. Each group's 40-odd products depend one on the next, so
/// groups side by side are what keeps the multipliers busy.
template <uint64_t M, int V>
__attribute__((target("avx512f"))) inline void sqrt_groups(const uint32_t* x, int64_t sx, uint32_t* o) {
  constexpr uint64_t kE = (M + 1) / 4;
  constexpr int kTop = 63 - __builtin_clzll(kE);
  __m256i base[V], r[V];
  for (int v = 0; v < V; ++v) r[v] = base[v] = load8(x + v * 8 * sx, sx);  // the top bit
  for (int b = kTop - 1; b >= 0; --b) {
    for (int v = 0; v < V; ++v) r[v] = mul_mod8<M>(r[v], r[v]);
    if ((kE >> b) & 1)
      for (int v = 0; v < V; ++v) r[v] = mul_mod8<M>(r[v], base[v]);
  }
  const __m256i m = _mm256_set1_epi32(static_cast<int>(M));
  for (int v = 0; v < V; ++v)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + v * 8), _mm256_min_epu32(r[v], _mm256_sub_epi32(m, r[v])));
}

template <uint64_t M>
__attribute__((target("avx512f"))) int64_t sqrt_run_avx512(const uint32_t* x, int64_t sx, uint32_t* o, int64_t n) {
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) sqrt_groups<M, 4>(x + j * sx, sx, o + j);
  for (; j + 8 <= n; j += 8) sqrt_groups<M, 1>(x + j * sx, sx, o + j);
  return j;
}

/// x · c mod 2^64 for eight 64-bit x: lo(x)·lo(c) + (hi(x)·lo(c) + lo(x)·hi(c)) · 2^32.
__attribute__((target("avx512f"))) inline __m512i mul64_by(__m512i x, uint64_t c) {
  const __m512i c_lo = _mm512_set1_epi64(static_cast<long long>(c & 0xffffffffu));
  const __m512i c_hi = _mm512_set1_epi64(static_cast<long long>(c >> 32));
  const __m512i cross = _mm512_add_epi64(_mm512_mul_epu32(_mm512_srli_epi64(x, 32), c_lo), _mm512_mul_epu32(x, c_hi));
  return _mm512_add_epi64(_mm512_mul_epu32(x, c_lo), _mm512_slli_epi64(cross, 32));
}

/// splitmix64 of eight words.
__attribute__((target("avx512f"))) inline __m512i splitmix8(__m512i x) {
  x = _mm512_add_epi64(x, _mm512_set1_epi64(static_cast<long long>(0x9e3779b97f4a7c15ull)));
  x = mul64_by(_mm512_xor_si512(x, _mm512_srli_epi64(x, 30)), 0xbf58476d1ce4e5b9ull);
  x = mul64_by(_mm512_xor_si512(x, _mm512_srli_epi64(x, 27)), 0x94d049bb133111ebull);
  return _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
}

__attribute__((target("avx512f"))) int64_t hash_run_avx512(uint64_t seed, const uint32_t* xp, const uint32_t* xq,
                                                           uint32_t* op, uint32_t* oq, int64_t n) {
  const __m512i s = _mm512_set1_epi64(static_cast<long long>(seed));
  const __m512i second = _mm512_set1_epi64(static_cast<long long>(kSecondHash));
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m512i key = _mm512_cvtepu32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp + j)));
    if (xq)
      key = _mm512_or_si512(_mm512_slli_epi64(key, 32),
                            _mm512_cvtepu32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + j))));
    const __m512i h = splitmix8(_mm512_xor_si512(s, key));
    const __m512i h2 = splitmix8(_mm512_xor_si512(h, second));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(op + j), _mm512_cvtepi64_epi32(reduce8<kP>(h)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(oq + j), _mm512_cvtepi64_epi32(reduce8<kQ>(h2)));
  }
  return j;
}

#pragma GCC diagnostic pop

#endif  // MUGRAPH_FF_X86

template <uint64_t M, FFVectorIsa I, int R>
void rows(const uint32_t* a, int64_t sar, int64_t sak, const uint32_t* panel, int64_t K, uint32_t* c, int64_t ldc,
          int64_t cols) {
#if MUGRAPH_FF_X86
  if constexpr (I == FFVectorIsa::avx512) return rows_avx512<M, R>(a, sar, sak, panel, K, c, ldc, cols);
  if constexpr (I == FFVectorIsa::avx2) return rows_avx2<M, R>(a, sar, sak, panel, K, c, ldc, cols);
#endif
  rows_portable<M, R>(a, sar, sak, panel, K, c, ldc, cols);
}

/// Rows a kernel sweeps a panel with at most (what its registers hold).
constexpr int max_rows(FFVectorIsa isa) { return isa == FFVectorIsa::avx512 ? 8 : isa == FFVectorIsa::avx2 ? 2 : 4; }

template <uint64_t M, FFVectorIsa I>
void matmul_panels(const uint32_t* a, int64_t sar, int64_t sak, const uint32_t* b, int64_t ldb, uint32_t* c,
                   int64_t ldc, int64_t m, int64_t n, int64_t K, uint32_t* panel) {
  constexpr int kRows = max_rows(I);
  for (int64_t j0 = 0; j0 < n; j0 += kPanel) {
    const int64_t cols = std::min<int64_t>(kPanel, n - j0);
    pack_panel(b + j0, ldb, K, cols, panel);
    int64_t i = 0;
    for (; m - i >= kRows; i += kRows) rows<M, I, kRows>(a + i * sar, sar, sak, panel, K, c + i * ldc + j0, ldc, cols);
    // The last rows, fewer than kRows: 4, 2 and 1 at a time (7 = 4 + 2 + 1).
    if constexpr (kRows > 4)
      if (m - i >= 4) {
        rows<M, I, 4>(a + i * sar, sar, sak, panel, K, c + i * ldc + j0, ldc, cols);
        i += 4;
      }
    if constexpr (kRows > 2)
      if (m - i >= 2) {
        rows<M, I, 2>(a + i * sar, sar, sak, panel, K, c + i * ldc + j0, ldc, cols);
        i += 2;
      }
    if constexpr (kRows > 1)
      if (m - i >= 1) rows<M, I, 1>(a + i * sar, sar, sak, panel, K, c + i * ldc + j0, ldc, cols);
  }
}

FFVectorIsa best_isa() {
#if MUGRAPH_FF_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return FFVectorIsa::avx512;
  if (__builtin_cpu_supports("avx2")) return FFVectorIsa::avx2;
#endif
  return FFVectorIsa::portable;
}

std::atomic<FFVectorIsa>& isa_now() {
  static std::atomic<FFVectorIsa> isa{best_isa()};
  return isa;
}

/// f.template operator()<M>() with M the modulus (kP or kQ) as a constant.
template <typename F>
decltype(auto) with_modulus(uint64_t modulus, const char* what, F&& f) {
  if (modulus == kP) return f.template operator()<kP>();
  MUGRAPH_CHECK(modulus == kQ) << what << " modulo " << modulus << ", expected kP or kQ";
  return f.template operator()<kQ>();
}

template <uint64_t M>
void matmul_mod(const uint32_t* a, int64_t sar, int64_t sak, const uint32_t* b, int64_t ldb, uint32_t* c, int64_t ldc,
                int64_t m, int64_t n, int64_t K, uint32_t* panel) {
  switch (isa_now().load(std::memory_order_relaxed)) {
    case FFVectorIsa::avx512:
      return matmul_panels<M, FFVectorIsa::avx512>(a, sar, sak, b, ldb, c, ldc, m, n, K, panel);
    case FFVectorIsa::avx2:
      return matmul_panels<M, FFVectorIsa::avx2>(a, sar, sak, b, ldb, c, ldc, m, n, K, panel);
    case FFVectorIsa::portable:
      break;
  }
  matmul_panels<M, FFVectorIsa::portable>(a, sar, sak, b, ldb, c, ldc, m, n, K, panel);
}

}  // namespace

const char* ff_vector_isa_name(FFVectorIsa isa) {
  switch (isa) {
    case FFVectorIsa::avx512:
      return "avx512";
    case FFVectorIsa::avx2:
      return "avx2";
    case FFVectorIsa::portable:
      break;
  }
  return "portable";
}

FFVectorIsa ff_vector_isa() { return isa_now().load(std::memory_order_relaxed); }

bool ff_vector_isa_supported(FFVectorIsa isa) {
  const FFVectorIsa best = best_isa();
  return static_cast<int>(isa) <= static_cast<int>(best);
}

bool set_ff_vector_isa(FFVectorIsa isa) {
  if (!ff_vector_isa_supported(isa)) return false;
  isa_now().store(isa, std::memory_order_relaxed);
  return true;
}

void ff_mul_run(uint64_t modulus, const uint32_t* x, int64_t sx, const uint32_t* y, int64_t sy, uint32_t* o,
                int64_t n) {
  with_modulus(modulus, "ff_mul_run", [&]<uint64_t M>() {
    int64_t j = 0;
#if MUGRAPH_FF_X86
    if (ff_vector_isa() == FFVectorIsa::avx512 && (sx == 0 || sx == 1) && (sy == 0 || sy == 1))
      j = mul_run_avx512<M>(x, sx, y, sy, o, n);
#endif
    for (; j < n; ++j) o[j] = static_cast<uint32_t>(uint64_t{x[j * sx]} * y[j * sy] % M);
  });
}

void ff_add_run(uint64_t modulus, bool subtract, const uint32_t* x, int64_t sx, const uint32_t* y, int64_t sy,
                uint32_t* o, int64_t n) {
  with_modulus(modulus, "ff_add_run", [&]<uint64_t M>() {
    int64_t j = 0;
#if MUGRAPH_FF_X86
    if (ff_vector_isa() == FFVectorIsa::avx512 && (sx == 0 || sx == 1) && (sy == 0 || sy == 1))
      j = subtract ? add_run_avx512<M, true>(x, sx, y, sy, o, n) : add_run_avx512<M, false>(x, sx, y, sy, o, n);
#endif
    if (subtract) {
      for (; j < n; ++j) o[j] = static_cast<uint32_t>(ff::sub(x[j * sx], y[j * sy], M));
    } else {
      for (; j < n; ++j) o[j] = static_cast<uint32_t>(ff::add(x[j * sx], y[j * sy], M));
    }
  });
}

void ff_pow_run(const uint32_t* low, const uint32_t* high, int low_bits, const uint32_t* e, int64_t se, uint32_t* o,
                int64_t n) {
  int64_t j = 0;
#if MUGRAPH_FF_X86
  if (ff_vector_isa() == FFVectorIsa::avx512 && (se == 0 || se == 1))
    j = pow_run_avx512<kP>(low, high, low_bits, e, se, o, n);
#endif
  for (; j < n; ++j) {
    const uint32_t x = e[j * se];
    o[j] = static_cast<uint32_t>(uint64_t{low[x & ((1u << low_bits) - 1)]} * high[x >> low_bits] % kP);
  }
}

void ff_sqrt_run(uint64_t modulus, const uint32_t* x, int64_t sx, uint32_t* o, int64_t n) {
  with_modulus(modulus, "ff_sqrt_run", [&]<uint64_t M>() {
    int64_t j = 0;
#if MUGRAPH_FF_X86
    if (ff_vector_isa() == FFVectorIsa::avx512 && (sx == 0 || sx == 1)) j = sqrt_run_avx512<M>(x, sx, o, n);
#endif
    for (; j < n; ++j) o[j] = static_cast<uint32_t>(ff::sqrt_pm(x[j * sx], M));
  });
}

void ff_reduce_run(uint64_t modulus, const uint64_t* x, uint32_t* o, int64_t n) {
  with_modulus(modulus, "ff_reduce_run", [&]<uint64_t M>() {
    int64_t j = 0;
#if MUGRAPH_FF_X86
    if (ff_vector_isa() == FFVectorIsa::avx512) j = reduce_run_avx512<M>(x, o, n);
#endif
    for (; j < n; ++j) o[j] = static_cast<uint32_t>(x[j] % M);
  });
}

HashedResidues hash_residues(uint64_t seed, uint64_t key) {
  const uint64_t h = splitmix64(seed ^ key);
  const uint64_t h2 = splitmix64(h ^ kSecondHash);
  return {static_cast<uint32_t>(h % kP), static_cast<uint32_t>(h2 % kQ)};
}

void ff_hash_run(uint64_t seed, const uint32_t* xp, int64_t sxp, const uint32_t* xq, int64_t sxq, uint32_t* op,
                 int64_t sop, uint32_t* oq, int64_t soq, int64_t n) {
  int64_t j = 0;
#if MUGRAPH_FF_X86
  if (ff_vector_isa() == FFVectorIsa::avx512 && sxp == 1 && (!xq || sxq == 1) && sop == 1 && soq == 1)
    j = hash_run_avx512(seed, xp, xq, op, oq, n);
#endif
  for (; j < n; ++j) {
    const uint64_t key = xq ? uint64_t{xp[j * sxp]} << 32 | xq[j * sxq] : uint64_t{xp[j * sxp]};
    const HashedResidues r = hash_residues(seed, key);
    op[j * sop] = r.p;
    oq[j * soq] = r.q;
  }
}

void ff_matmul(uint64_t modulus, const uint32_t* a, int64_t sar, int64_t sak, const uint32_t* b, int64_t ldb,
               uint32_t* c, int64_t ldc, int64_t m, int64_t n, int64_t K, uint32_t* panel) {
  with_modulus(modulus, "ff_matmul", [&]<uint64_t M>() { matmul_mod<M>(a, sar, sak, b, ldb, c, ldc, m, n, K, panel); });
}

}  // namespace mugraph::ff_detail
