// The finite-field interpreter's hot kernel: C = A · B over Z_p or Z_q, on residues < 2^30.
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

}  // namespace mugraph::ff_detail
