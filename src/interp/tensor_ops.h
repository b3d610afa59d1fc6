/// \file tensor_ops.h
/// The computing ops of every graph level (element-wise, matmul, sum, repeat, concat, copies) on
/// strided views. Results are rounded to the given dtype; arithmetic is f32, matmul and sum
/// accumulate in f32 / f64. With a pool, an op splits its work into pieces whose boundaries
/// depend only on the shapes, so the result does not depend on the number of workers.
#pragma once

#include <cstdint>
#include <vector>

#include "mugraph/ops.h"
#include "mugraph/types.h"
#include "thread_pool.h"
#include "view.h"

namespace mugraph::interp {

/// out = kind(x), element-wise. @pre same shape
void eval_unary(OpKind kind, const View& x, const MutView& out, DType dt, ThreadPool* pool = nullptr);

/// out = kind(a, b) with NumPy broadcasting. A scalar constant is a rank-0 view.
/// @pre out.shape is the broadcast of a.shape and b.shape
void eval_binary(OpKind kind, const View& a, const View& b, const MutView& out, DType dt, ThreadPool* pool = nullptr);

/// out = a · b, batched on the last two dims with broadcast batch dims, via OpenBLAS sgemm.
/// @pre out is dense with the matmul shape rule's shape
void eval_matmul(const View& a, const View& b, const MutView& out, DType dt, ThreadPool* pool = nullptr);

/// sum(x, dim, to): element j of dim sums the j-th contiguous group of shape[dim]/to (in f64).
/// @pre out is dense; 0 ≤ dim < rank; to divides x.shape[dim]
void eval_sum(const View& x, int dim, int64_t to, const MutView& out, DType dt, ThreadPool* pool = nullptr);

/// out = x tiled `times` times along dim (torch.Tensor.repeat on one dim).
void eval_repeat(const View& x, int dim, int64_t times, const MutView& out);

/// out = the concatenation of xs along dim.
void eval_concat(const std::vector<View>& xs, int dim, const MutView& out);

/// dst = src (same shape, any strides). Values are not rounded.
void copy_view(const View& src, const MutView& dst);

/// dst += src in f32 without rounding (for-loop accumulators). @pre same shape
void add_into(const View& src, const MutView& dst);

/// Makes OpenBLAS single-threaded (we parallelise ourselves). Idempotent and thread-safe.
void init_blas();

}  // namespace mugraph::interp
