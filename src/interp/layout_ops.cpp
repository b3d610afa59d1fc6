// Layout ops: repeat and concat (reshape needs no code: it is a dense view with a new shape).
#include "tensor_ops.h"

namespace mugraph::interp {

void eval_repeat(const View& x, int dim, int64_t times, const MutView& out) {
  const int64_t n = x.shape[dim];
  MUGRAPH_CHECK(out.shape[dim] == n * times) << "repeat " << x.shape.str() << " into " << out.shape.str();
  for (int64_t t = 0; t < times; ++t) copy_view(x, out.slice(dim, t * n, n));
}

void eval_concat(const std::vector<View>& xs, int dim, const MutView& out) {
  int64_t at = 0;
  for (const View& x : xs) {
    copy_view(x, out.slice(dim, at, x.shape[dim]));
    at += x.shape[dim];
  }
  MUGRAPH_CHECK(at == out.shape[dim]) << "concat fills " << at << " of " << out.shape.str();
}

}  // namespace mugraph::interp
