/// \file blas.h
/// Pre-defined matmuls on cuBLAS: a batched row-major matmul C = A·B (f16, bf16 or f32 operands
/// and result, f32 accumulation) as one cublasGemmStridedBatchedEx on the caller's stream.
/// cuBLAS is column-major, so the call computes Cᵀ = Bᵀ·Aᵀ, which has the same bytes as C.
///
/// Under the host emulation cublasGemmStridedBatchedEx is a plain loop written from cuBLAS's
/// column-major definition, so CI checks the mapping above without a GPU.
#pragma once

#include <cstdint>

#include "mugraph_device/platform.h"

#if defined(__CUDACC__)
#include <cublas_v2.h>
#else
#include <cstring>
// The cuBLAS API subset blas.h uses, for the host emulation.
using cublasHandle_t = struct cublasEmuContext*;
enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7 };
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cudaDataType { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };
inline cublasStatus_t cublasCreate(cublasHandle_t* h) {
  *h = nullptr;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }

namespace mgd::emu {
inline float load_as_float(const void* p, cudaDataType t, int64_t i) {
  switch (t) {
    case CUDA_R_16F:
      return to_float(static_cast<const half*>(p)[i]);
    case CUDA_R_16BF:
      return to_float(static_cast<const bfloat16*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}
inline void store_float(void* p, cudaDataType t, int64_t i, float x) {
  switch (t) {
    case CUDA_R_16F:
      static_cast<half*>(p)[i] = from_float<half>(x);
      break;
    case CUDA_R_16BF:
      static_cast<bfloat16*>(p)[i] = from_float<bfloat16>(x);
      break;
    default:
      static_cast<float*>(p)[i] = x;
  }
}
}  // namespace mgd::emu

/// Column-major, per cuBLAS: C_b = α·op(A_b)·op(B_b) + β·C_b for b < batch, where X_b starts at
/// X + b·strideX, element (i, j) of a matrix with leading dimension ld is at i + j·ld, and
/// op(X) is X (OP_N) or its transpose (OP_T). op(A) is m×k, op(B) k×n, C m×n.
inline cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m,
                                                 int n, int k, const void* alpha, const void* A, cudaDataType at,
                                                 int lda, long long sa, const void* B, cudaDataType bt, int ldb,
                                                 long long sb, const void* beta, void* C, cudaDataType ct, int ldc,
                                                 long long sc, int batch, cublasComputeType_t, cublasGemmAlgo_t) {
  if (m < 0 || n < 0 || k < 0 || batch < 0 || ldc < m) return CUBLAS_STATUS_INVALID_VALUE;
  if (lda < (ta == CUBLAS_OP_N ? m : k) || ldb < (tb == CUBLAS_OP_N ? k : n)) return CUBLAS_STATUS_INVALID_VALUE;
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  for (int b = 0; b < batch; ++b)
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        float acc = 0.0f;
        for (int l = 0; l < k; ++l) {
          const int64_t ai = ta == CUBLAS_OP_N ? i + int64_t{l} * lda : l + int64_t{i} * lda;
          const int64_t bi = tb == CUBLAS_OP_N ? l + int64_t{j} * ldb : j + int64_t{l} * ldb;
          acc += mgd::emu::load_as_float(A, at, b * sa + ai) * mgd::emu::load_as_float(B, bt, b * sb + bi);
        }
        const int64_t ci = b * sc + i + int64_t{j} * ldc;
        const float old = be == 0.0f ? 0.0f : mgd::emu::load_as_float(C, ct, ci);  // β = 0 ignores C
        mgd::emu::store_float(C, ct, ci, al * acc + be * old);
      }
  return CUBLAS_STATUS_SUCCESS;
}
#endif

namespace mgd {

/// What mugraph_run returns for a failed cuBLAS call: kBlasErrorBase + its cublasStatus_t
/// (cudaError_t values stay below it).
constexpr int kBlasErrorBase = 10000;

template <typename T>
constexpr cudaDataType blas_type() {
  if constexpr (std::is_same_v<T, half>) return CUDA_R_16F;
  if constexpr (std::is_same_v<T, bfloat16>) return CUDA_R_16BF;
  return CUDA_R_32F;
}

/// This host thread's cuBLAS handle, made on first use (cuBLAS handles are not to be shared
/// between threads that use them at once); it lives as long as the thread.
inline cublasStatus_t blas_handle(cublasHandle_t* h) {
  static thread_local cublasHandle_t handle = nullptr;
  static thread_local cublasStatus_t made = cublasCreate(&handle);
  *h = handle;
  return made;
}

/// C = A·B for `batch` row-major matrices: A_b m×k at a + b·stride_a, B_b k×n at b + b·stride_b
/// (stride 0 broadcasts an operand), C_b m×n at c + b·stride_c, on stream. Returns 0 or
/// kBlasErrorBase + the cuBLAS status.
template <typename T>
inline int gemm(cudaStream_t stream, const T* a, const T* b, T* c, int64_t batch, int64_t m, int64_t n, int64_t k,
                int64_t stride_a, int64_t stride_b, int64_t stride_c) {
  cublasHandle_t h;
  cublasStatus_t s = blas_handle(&h);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetStream(h, stream);
  const float one = 1.0f, zero = 0.0f;
  constexpr cudaDataType t = blas_type<T>();
  // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: B first, with n rows (its row length).
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                                   static_cast<int>(k), &one, b, t, static_cast<int>(n), stride_b, a, t,
                                   static_cast<int>(k), stride_a, &zero, c, t, static_cast<int>(n), stride_c,
                                   static_cast<int>(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  return s == CUBLAS_STATUS_SUCCESS ? 0 : kBlasErrorBase + static_cast<int>(s);
}

}  // namespace mgd
