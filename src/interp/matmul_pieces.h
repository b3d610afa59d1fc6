/// \file matmul_pieces.h
/// How a batched matmul result [batch..., M, N] is cut into pieces for the thread pool, and where
/// each piece's operands start. Shared by the float and the finite-field interpreters, whose
/// inner kernels differ but whose work split is the same.
#pragma once

#include <algorithm>
#include <cstdint>

#include "view.h"

namespace mugraph::interp {

class MatmulPieces {
 public:
  /// One piece: rows [r0, r0 + m) and columns [c0, c0 + n) of batch `batch`.
  struct Piece {
    int64_t batch, r0, c0, m, n;
  };

  /// @pre out_shape has rank ≥ 2. Without `parallel` there is one piece per batch.
  MatmulPieces(const Shape& out_shape, bool parallel, int64_t row_piece, int64_t col_piece)
      : rank_(out_shape.rank()), M_(out_shape[rank_ - 2]), N_(out_shape[rank_ - 1]) {
    for (int d = 0; d < rank_ - 2; ++d) batch_.push_back(out_shape[d]);
    rows_per_ = parallel ? row_piece : std::max<int64_t>(M_, 1);
    cols_per_ = parallel ? col_piece : std::max<int64_t>(N_, 1);
    row_pieces_ = parallel ? (M_ + row_piece - 1) / row_piece : 1;
    col_pieces_ = parallel ? (N_ + col_piece - 1) / col_piece : 1;
  }

  int64_t count() const { return batch_.numel() * row_pieces_ * col_pieces_; }
  int64_t cols_per() const { return cols_per_; }

  Piece piece(int64_t index) const {
    int64_t cp = index % col_pieces_, rp = (index / col_pieces_) % row_pieces_;
    int64_t r0 = rp * rows_per_, c0 = cp * cols_per_;
    return Piece{index / (col_pieces_ * row_pieces_), r0, c0, std::min(M_ - r0, rows_per_),
                 std::min(N_ - c0, cols_per_)};
  }

  /// Offset, in elements, of batch `batch` in an operand view (right-aligned batch dims; a
  /// missing or size-1 dim broadcasts and contributes nothing).
  template <typename T>
  int64_t batch_offset(int64_t batch, const BasicView<T>& v) const {
    int64_t offset = 0;
    const int shift = (rank_ - 2) - (v.rank() - 2);
    for (int d = rank_ - 3; d >= 0; --d) {
      int64_t i = batch % batch_[d];
      batch /= batch_[d];
      int j = d - shift;
      if (j >= 0 && v.shape[j] != 1) offset += i * v.stride[static_cast<size_t>(j)];
    }
    return offset;
  }

 private:
  int rank_;
  int64_t M_, N_;
  Shape batch_;
  int64_t rows_per_ = 0, cols_per_ = 0, row_pieces_ = 1, col_pieces_ = 1;
};

}  // namespace mugraph::interp
