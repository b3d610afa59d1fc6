// Element-wise ops (unary, binary with broadcasting), copies and accumulation on strided views.
// The float semantics of each op are apply_unary / apply_binary from the op registry.
#include <algorithm>

#include "half.h"
#include "strided_loop.h"
#include "tensor_ops.h"

namespace mugraph::interp {

namespace {

// Work pieces of this many output elements; fixed so that splitting does not depend on the pool.
constexpr int64_t kChunk = int64_t{1} << 15;

struct NoRound {
  float operator()(float x) const { return x; }
};
struct RoundF16 {
  float operator()(float x) const { return f16_to_f32(f32_to_f16(x)); }
};
struct RoundBF16 {
  float operator()(float x) const { return bf16_to_f32(f32_to_bf16(x)); }
};

template <typename Fn>
void with_rounding(DType dt, Fn&& fn) {
  switch (dt) {
    case DType::f16:
      fn(RoundF16{});
      return;
    case DType::bf16:
      fn(RoundBF16{});
      return;
    case DType::f32:
      fn(NoRound{});
      return;
  }
}

/// Runs body(begin, end) over [0, n) in fixed-size pieces, on the pool when there is one.
template <typename Body>
void split(int64_t n, ThreadPool* pool, Body&& body) {
  if (pool == nullptr || pool->size() == 1 || n <= kChunk) {
    body(int64_t{0}, n);
    return;
  }
  int64_t pieces = (n + kChunk - 1) / kChunk;
  pool->parallel_for(pieces, [&](int, int64_t i) { body(i * kChunk, std::min(n, (i + 1) * kChunk)); });
}

}  // namespace

void eval_unary(OpKind kind, const View& x, const MutView& out, DType dt, ThreadPool* pool) {
  MUGRAPH_CHECK(x.shape == out.shape) << "unary " << op_name(kind) << ": " << x.shape.str() << " vs "
                                      << out.shape.str();
  StridedLoop<2> loop(out.shape, {out.stride, x.stride});
  const int64_t so = loop.inner_stride(0), sx = loop.inner_stride(1);
  with_rounding(dt, [&](auto round) {
    split(loop.numel(), pool, [&](int64_t begin, int64_t end) {
      loop.run(begin, end, [&](const std::array<int64_t, 2>& off, int64_t n) {
        float* o = out.data + off[0];
        const float* p = x.data + off[1];
        for (int64_t j = 0; j < n; ++j) o[j * so] = round(apply_unary(kind, p[j * sx]));
      });
    });
  });
}

void eval_binary(OpKind kind, const View& a, const View& b, const MutView& out, DType dt, ThreadPool* pool) {
  int rank = out.rank();
  StridedLoop<3> loop(out.shape, {out.stride, broadcast_strides(a, rank), broadcast_strides(b, rank)});
  const int64_t so = loop.inner_stride(0), sa = loop.inner_stride(1), sb = loop.inner_stride(2);
  with_rounding(dt, [&](auto round) {
    split(loop.numel(), pool, [&](int64_t begin, int64_t end) {
      loop.run(begin, end, [&](const std::array<int64_t, 3>& off, int64_t n) {
        float* o = out.data + off[0];
        const float* p = a.data + off[1];
        const float* q = b.data + off[2];
        for (int64_t j = 0; j < n; ++j) o[j * so] = round(apply_binary(kind, p[j * sa], q[j * sb]));
      });
    });
  });
}

void copy_view(const View& src, const MutView& dst) {
  MUGRAPH_CHECK(src.shape == dst.shape) << "copy " << src.shape.str() << " to " << dst.shape.str();
  StridedLoop<2> loop(dst.shape, {dst.stride, src.stride});
  const int64_t sd = loop.inner_stride(0), ss = loop.inner_stride(1);
  loop.run(0, loop.numel(), [&](const std::array<int64_t, 2>& off, int64_t n) {
    float* o = dst.data + off[0];
    const float* p = src.data + off[1];
    if (sd == 1 && ss == 1) {
      std::copy(p, p + n, o);
    } else {
      for (int64_t j = 0; j < n; ++j) o[j * sd] = p[j * ss];
    }
  });
}

void add_into(const View& src, const MutView& dst) {
  MUGRAPH_CHECK(src.shape == dst.shape) << "accumulate " << src.shape.str() << " into " << dst.shape.str();
  StridedLoop<2> loop(dst.shape, {dst.stride, src.stride});
  const int64_t sd = loop.inner_stride(0), ss = loop.inner_stride(1);
  loop.run(0, loop.numel(), [&](const std::array<int64_t, 2>& off, int64_t n) {
    float* o = dst.data + off[0];
    const float* p = src.data + off[1];
    for (int64_t j = 0; j < n; ++j) o[j * sd] += p[j * ss];
  });
}

}  // namespace mugraph::interp
