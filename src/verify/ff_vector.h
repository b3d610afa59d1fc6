// The finite-field interpreter's vector kernels, on residues < 2^30: C = A · B over Z_p or Z_q,
// element-wise products, reductions of lazy sums, and powers by table (exp).
#pragma once

#include <cstdint>

#include "mugraph/ffield.h"

namespace mugraph::ff_detail {

/// The instruction set the kernels run with: chosen once from the CPU (the best it has); tests
/// choose each in turn (set_ff_vector_isa). The element-wise kernels have an AVX-512 version
/// only; with the others they run the portable loop.
enum class FFVectorIsa { portable, avx2, avx512 };

const char* ff_vector_isa_name(FFVectorIsa isa);
/// The instruction set the kernels run with now.
FFVectorIsa ff_vector_isa();
/// Whether this CPU (and build) can run `isa`.
bool ff_vector_isa_supported(FFVectorIsa isa);
/// Makes the kernels run with `isa` (tests); false, and no change, where it is not supported.
bool set_ff_vector_isa(FFVectorIsa isa);

/// Elements of the scratch panel ff_matmul needs for a contraction of length K.
inline int64_t ff_matmul_panel_elements(int64_t K) { return K * 16; }

/// C [m, n] = A [m, K] · B [K, n] mod `modulus` (kP or kQ), every residue < 2^30: A's element
/// (i, k) at a[i·sar + k·sak], B's (k, j) at b[k·ldb + j], C's (i, j) at c[i·ldc + j]. `panel`
/// holds ff_matmul_panel_elements(K) elements of scratch.
void ff_matmul(uint64_t modulus, const uint32_t* a, int64_t sar, int64_t sak, const uint32_t* b, int64_t ldb,
               uint32_t* c, int64_t ldc, int64_t m, int64_t n, int64_t K, uint32_t* panel);

/// o[j] = x[j·sx] · y[j·sy] mod `modulus` (kP or kQ) for j < n, every residue < 2^30; x and y
/// may be the same run (a square) and either stride may be 0 (a broadcast). With AVX-512 and
/// strides of 0 or 1, eight products at a time: the quotient estimated in double precision
/// (off by at most one), the remainder corrected once in each direction.
void ff_mul_run(uint64_t modulus, const uint32_t* x, int64_t sx, const uint32_t* y, int64_t sy, uint32_t* o, int64_t n);

/// o[j] = x[j·sx] + y[j·sy] mod `modulus` (kP or kQ), or x − y with `subtract`, for j < n, every
/// residue below the modulus; either stride may be 0. With AVX-512 and strides of 0 or 1, sixteen
/// at a time.
void ff_add_run(uint64_t modulus, bool subtract, const uint32_t* x, int64_t sx, const uint32_t* y, int64_t sy,
                uint32_t* o, int64_t n);

/// o[j] = low[e_j mod 2^low_bits] · high[e_j >> low_bits] mod p for e_j = e[j·se], j < n: a power
/// g^e_j from the tables of g^i and g^(2^low_bits·i) (exp's ω^x). With AVX-512 and a stride of 0
/// or 1, eight at a time (two gathers and mul_mod8).
void ff_pow_run(const uint32_t* low, const uint32_t* high, int low_bits, const uint32_t* e, int64_t se, uint32_t* o,
                int64_t n);

/// o[j] = ff::sqrt_pm(x[j·sx], modulus) (kP or kQ) for j < n, every residue < 2^30. With AVX-512
/// and a stride of 0 or 1, eight at a time: the power by the fixed exponent (modulus + 1) / 4 in
/// mul_mod8 steps (a scalar power is some 40 dependent divisions per element).
void ff_sqrt_run(uint64_t modulus, const uint32_t* x, int64_t sx, uint32_t* o, int64_t n);

/// o[j] = x[j] mod `modulus` (kP or kQ) for j < n, any 64-bit x (a lazily reduced sum).
void ff_reduce_run(uint64_t modulus, const uint64_t* x, uint32_t* o, int64_t n);

using ff::splitmix64;

/// The random functions' values (FFState::random_fn_seed): `key` hashed under `seed`, twice,
/// reduced mod p and mod q.
struct HashedResidues {
  uint32_t p, q;
};
HashedResidues hash_residues(uint64_t seed, uint64_t key);

/// op[j·sop], oq[j·soq] = hash_residues(seed, key_j) for j < n, with key_j = xp[j·sxp] << 32 |
/// xq[j·sxq], or xp[j·sxp] alone when xq is null. With AVX-512 and unit strides, eight at a
/// time (each 64-bit product from three 32-bit ones, the reductions as ff_reduce_run's): the same
/// values. An attention's exp applies it to every score.
void ff_hash_run(uint64_t seed, const uint32_t* xp, int64_t sxp, const uint32_t* xq, int64_t sxq, uint32_t* op,
                 int64_t sop, uint32_t* oq, int64_t soq, int64_t n);

}  // namespace mugraph::ff_detail
