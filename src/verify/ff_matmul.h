// The finite-field interpreter's hot kernels: C = A · B over Z_p or Z_q, and element-wise
// products, on residues < 2^30.
#pragma once

#include <cstdint>

namespace mugraph::ff_detail {

/// The instruction set the matmul kernel runs with. Chosen once from the CPU (the best it
/// has); tests choose each in turn (set_ff_matmul_isa).
enum class FFMatmulIsa { portable, avx2, avx512 };

const char* ff_matmul_isa_name(FFMatmulIsa isa);
/// The instruction set matmuls run with now.
FFMatmulIsa ff_matmul_isa();
/// Whether this CPU (and build) can run `isa`.
bool ff_matmul_isa_supported(FFMatmulIsa isa);
/// Makes matmuls run with `isa` (tests); false, and no change, where it is not supported.
bool set_ff_matmul_isa(FFMatmulIsa isa);

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

/// o[j] = x[j] mod `modulus` (kP or kQ) for j < n, any 64-bit x (a lazily reduced sum).
void ff_reduce_run(uint64_t modulus, const uint64_t* x, uint32_t* o, int64_t n);

}  // namespace mugraph::ff_detail
