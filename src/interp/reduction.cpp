// sum(dim, to) on strided views; sums of one group are accumulated in f64, in index order.
#include <algorithm>
#include <vector>

#include "half.h"
#include "tensor_ops.h"

namespace mugraph::interp {

void eval_sum(const View& x_in, int dim, int64_t to, const MutView& out, DType dt, ThreadPool* pool) {
  MUGRAPH_CHECK(out.contiguous()) << "sum writes a dense result";
  MUGRAPH_CHECK(dim >= 0 && dim < x_in.rank() && to >= 1 && x_in.shape[dim] % to == 0)
      << "sum over dim " << dim << " to " << to << " of " << x_in.shape.str();
  thread_local std::vector<float> x_buf;
  View x = x_in;
  if (!x.contiguous()) {
    x_buf.resize(static_cast<size_t>(x.numel()));
    MutView d = MutView::dense(x_buf.data(), x.shape);
    copy_view(x, d);
    x = d;
  }
  // x is [outer, to, group, inner] and out is [outer, to, inner], both dense.
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; ++d) outer *= x.shape[d];
  for (int d = dim + 1; d < x.rank(); ++d) inner *= x.shape[d];
  const int64_t group = x.shape[dim] / to;
  const int64_t rows = outer * to;  // one row = one (outer, j) pair = `inner` results

  auto run_rows = [&](int64_t r0, int64_t r1) {
    thread_local std::vector<double> acc;
    for (int64_t r = r0; r < r1; ++r) {
      const float* src = x.data + r * group * inner;  // (outer, j) starts at (outer·to + j)·group·inner
      float* dst = out.data + r * inner;
      if (inner == 1) {
        double s = 0.0;
        for (int64_t k = 0; k < group; ++k) s += src[k];
        dst[0] = round_to(static_cast<float>(s), dt);
        continue;
      }
      acc.assign(static_cast<size_t>(inner), 0.0);
      for (int64_t k = 0; k < group; ++k) {
        const float* row = src + k * inner;
        for (int64_t i = 0; i < inner; ++i) acc[static_cast<size_t>(i)] += row[i];
      }
      for (int64_t i = 0; i < inner; ++i) dst[i] = round_to(static_cast<float>(acc[static_cast<size_t>(i)]), dt);
    }
  };
  // Pieces of about 2^16 input elements, fixed by the shape alone.
  const int64_t per_row = std::max<int64_t>(1, group * inner);
  const int64_t rows_per_piece = std::max<int64_t>(1, (int64_t{1} << 16) / per_row);
  const int64_t pieces = (rows + rows_per_piece - 1) / rows_per_piece;
  if (pool && pieces > 1) {
    pool->parallel_for(pieces,
                       [&](int, int64_t p) { run_rows(p * rows_per_piece, std::min(rows, (p + 1) * rows_per_piece)); });
  } else {
    run_rows(0, rows);
  }
}

}  // namespace mugraph::interp
