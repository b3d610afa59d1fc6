// HostTensor: a dense row-major tensor of floats in host memory.
#include "half.h"
#include "mugraph/interp.h"

namespace mugraph {

HostTensor::HostTensor(TensorType t) : type(t), data(static_cast<size_t>(t.shape.numel()), 0.0f) {}

void round_tensor(HostTensor& t) {
  interp::round_span(t.data.data(), static_cast<int64_t>(t.data.size()), t.type.dtype);
}

}  // namespace mugraph
