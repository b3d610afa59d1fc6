#include "mugraph/retype.h"

namespace mugraph {

Graph retype(const Graph& g, DType dtype) {
  Graph out = g;
  for (Tensor& t : out.tensors) t.type.dtype = dtype;
  for (TensorType& p : out.params) p.dtype = dtype;
  for (Op& op : out.ops)
    if (op.kind == OpKind::input) op.attrs.dtype = dtype;
  for (Graph& body : out.bodies) body = retype(body, dtype);
  return out;
}

}  // namespace mugraph
