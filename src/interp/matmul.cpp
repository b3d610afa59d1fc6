// Batched matmul on strided views via OpenBLAS sgemm (f32 accumulation).
#include <cblas.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <vector>

#include "half.h"
#include "matmul_pieces.h"
#include "tensor_ops.h"

namespace mugraph::interp {

void init_blas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

namespace {

// Kernel-level matmuls are split into pieces of at most this many rows and columns; fixed so that
// the pieces (and hence the sgemm calls) do not depend on the number of workers.
constexpr int64_t kRowPiece = 256;
constexpr int64_t kColPiece = 512;

/// How one operand's last two dims (rows r, cols c) are handed to sgemm.
struct Operand {
  const float* data = nullptr;
  CBLAS_TRANSPOSE trans = CblasNoTrans;
  int64_t ld = 0;
};

/// Finds a BLAS description of v (rows × cols per batch), or returns false if v's last two dims
/// are not laid out as a row-major or column-major matrix.
bool describe(const View& v, Operand& op) {
  int r = v.rank();
  int64_t rows = v.shape[r - 2], cols = v.shape[r - 1];
  int64_t srow = v.stride[static_cast<size_t>(r - 2)], scol = v.stride[static_cast<size_t>(r - 1)];
  if ((cols == 1 || scol == 1) && (rows == 1 || srow >= cols)) {
    op.trans = CblasNoTrans;
    op.ld = rows == 1 ? std::max<int64_t>(cols, 1) : srow;
    return true;
  }
  if ((rows == 1 || srow == 1) && (cols == 1 || scol >= rows)) {
    op.trans = CblasTrans;
    op.ld = cols == 1 ? std::max<int64_t>(rows, 1) : scol;
    return true;
  }
  return false;
}

/// A dense copy of v in buf (for operands sgemm cannot read in place).
View densify(const View& v, std::vector<float>& buf) {
  buf.resize(static_cast<size_t>(v.numel()));
  MutView d = MutView::dense(buf.data(), v.shape);
  copy_view(v, d);
  return d;
}

}  // namespace

void eval_matmul(const View& a_in, const View& b_in, const MutView& out, DType dt, ThreadPool* pool) {
  init_blas();
  MUGRAPH_CHECK(out.contiguous()) << "matmul writes a dense result";
  thread_local std::vector<float> a_buf, b_buf;
  Operand a, b;
  View av = a_in, bv = b_in;
  if (!describe(av, a)) {
    av = densify(av, a_buf);
    describe(av, a);
  }
  if (!describe(bv, b)) {
    bv = densify(bv, b_buf);
    describe(bv, b);
  }
  a.data = av.data;
  b.data = bv.data;
  const int R = out.rank();
  const int64_t M = out.shape[R - 2], N = out.shape[R - 1], K = av.shape[av.rank() - 1];
  constexpr int64_t kBlasMax = std::numeric_limits<blasint>::max();
  MUGRAPH_CHECK(K <= kBlasMax && a.ld <= kBlasMax && b.ld <= kBlasMax && N <= kBlasMax && M <= kBlasMax)
      << "matmul extents exceed what OpenBLAS indexes: " << av.shape.str() << " times " << bv.shape.str();
  const MatmulPieces plan(out.shape, pool != nullptr, kRowPiece, kColPiece);

  auto piece = [&](int64_t index) {
    const auto [bi, r0, c0, m, n] = plan.piece(index);
    const float* pa = a.data + plan.batch_offset(bi, av);
    const float* pb = b.data + plan.batch_offset(bi, bv);
    pa += a.trans == CblasNoTrans ? r0 * a.ld : r0;
    pb += b.trans == CblasNoTrans ? c0 : c0 * b.ld;
    float* pc = out.data + bi * M * N + r0 * N + c0;
    if (K == 0) {
      for (int64_t r = 0; r < m; ++r) std::fill(pc + r * N, pc + r * N + n, 0.0f);
      return;
    }
    cblas_sgemm(CblasRowMajor, a.trans, b.trans, static_cast<blasint>(m), static_cast<blasint>(n),
                static_cast<blasint>(K), 1.0f, pa, static_cast<blasint>(a.ld), pb, static_cast<blasint>(b.ld), 0.0f, pc,
                static_cast<blasint>(N));
    if (dt != DType::f32)
      for (int64_t r = 0; r < m; ++r) round_span(pc + r * N, n, dt);
  };
  const int64_t pieces = plan.count();
  if (pool && pieces > 1) {
    pool->parallel_for(pieces, [&](int, int64_t i) { piece(i); });
  } else {
    for (int64_t i = 0; i < pieces; ++i) piece(i);
  }
}

}  // namespace mugraph::interp
