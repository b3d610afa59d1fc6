/// \file interp_test_util.h
/// Helpers shared by the interpreter tests.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "mugraph/interp.h"

namespace mugraph::test {

/// A tensor with the given values.
inline HostTensor tensor(Shape shape, std::vector<float> values, DType dt = DType::f32) {
  HostTensor t(TensorType{shape, dt});
  t.data = std::move(values);
  return t;
}

/// Runs g with the given worker count.
inline std::vector<HostTensor> run(const Graph& g, const std::vector<HostTensor>& inputs, int threads = 1) {
  InterpOptions o;
  o.threads = threads;
  return run_float(g, inputs, o);
}

/// max|a − b| / max|b| (the relative error the tests bound); infinity if the types differ.
inline double relative_error(const HostTensor& a, const HostTensor& b) {
  if (a.type.shape != b.type.shape || a.data.size() != b.data.size()) return INFINITY;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a.data[i]) - b.data[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b.data[i])));
  }
  return scale == 0 ? diff : diff / scale;
}

/// Whether two tensors are equal bit for bit.
inline bool bit_identical(const HostTensor& a, const HostTensor& b) {
  if (a.type != b.type || a.data.size() != b.data.size()) return false;
  for (size_t i = 0; i < a.data.size(); ++i)
    if (std::bit_cast<uint32_t>(a.data[i]) != std::bit_cast<uint32_t>(b.data[i])) return false;
  return true;
}

}  // namespace mugraph::test
