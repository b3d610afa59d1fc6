// Batched matmul on strided views via OpenBLAS sgemm (f32 accumulation).
#include <cblas.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <vector>

#include "half.h"
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
  std::array<int64_t, kMaxRank> batch_stride{};  // per output batch dim (0 broadcasts)
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
  // Batch dims of the result, with each operand's stride (broadcast dims get 0).
  Shape batch;
  for (int d = 0; d < R - 2; ++d) batch.push_back(out.shape[d]);
  auto batch_strides = [&](const View& v, Operand& op) {
    int vb = v.rank() - 2;
    for (int i = 0; i < R - 2; ++i) {
      int j = i - (R - 2 - vb);
      op.batch_stride[static_cast<size_t>(i)] = (j < 0 || v.shape[j] == 1) ? 0 : v.stride[static_cast<size_t>(j)];
    }
  };
  batch_strides(av, a);
  batch_strides(bv, b);
  constexpr int64_t kBlasMax = std::numeric_limits<blasint>::max();
  MUGRAPH_CHECK(K <= kBlasMax && a.ld <= kBlasMax && b.ld <= kBlasMax && N <= kBlasMax && M <= kBlasMax)
      << "matmul extents exceed what OpenBLAS indexes: " << av.shape.str() << " times " << bv.shape.str();
  const int64_t batches = batch.numel();
  const int64_t row_pieces = pool ? (M + kRowPiece - 1) / kRowPiece : 1;
  const int64_t col_pieces = pool ? (N + kColPiece - 1) / kColPiece : 1;
  const int64_t rows_per = pool ? kRowPiece : M, cols_per = pool ? kColPiece : N;

  auto piece = [&](int64_t index) {
    int64_t cp = index % col_pieces, rp = (index / col_pieces) % row_pieces, bi = index / (col_pieces * row_pieces);
    int64_t r0 = rp * rows_per, c0 = cp * cols_per;
    int64_t m = std::min(M - r0, rows_per), n = std::min(N - c0, cols_per);
    const float* pa = a.data;
    const float* pb = b.data;
    int64_t rest = bi;
    for (int d = R - 3; d >= 0; --d) {
      int64_t i = rest % batch[d];
      rest /= batch[d];
      pa += i * a.batch_stride[static_cast<size_t>(d)];
      pb += i * b.batch_stride[static_cast<size_t>(d)];
    }
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
  const int64_t pieces = batches * row_pieces * col_pieces;
  if (pool && pieces > 1) {
    pool->parallel_for(pieces, [&](int, int64_t i) { piece(i); });
  } else {
    for (int64_t i = 0; i < pieces; ++i) piece(i);
  }
}

}  // namespace mugraph::interp
