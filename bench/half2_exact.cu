// Whether the device library's f16 pair ops give its f32 path's bits, on the GPU, for every pair
// of f16 values: the claim behind computing f16 add, sub, mul and sqr with HADD2/HSUB2/HMUL2
// (runtime/include/mugraph_device/elementwise.h). The host emulation computes a pair as two f32
// ops, so only the hardware can check it. For each op F and all 2^32 operand pairs (a, b):
// F(pack(a, b), pack(b, a)) against from_float<half>(F(to_float(a), to_float(b))) and its mirror,
// bit for bit (any NaN matches any NaN). Sqr: all 2^16 values.
//
//   nvcc -std=c++17 -O3 -arch=sm_90a -I runtime/include bench/half2_exact.cu -o half2_exact && ./half2_exact
//
// Prints one line per op and exits 1 on any mismatch (2 without a GPU). The gpu_session.sh
// `pairs` step runs it.
#include <cstdio>

#include "mugraph_device/device.h"

namespace {

constexpr int kOps = 4;
const char* const kNames[kOps] = {"add", "sub", "mul", "sqr"};

__device__ unsigned long long mismatches[kOps];
__device__ unsigned first_mismatch[kOps];  // a's bits << 16 | b's bits, of one mismatch

__device__ bool same_bits(mgd::half x, mgd::half y) {
  return __half_as_ushort(x) == __half_as_ushort(y) || (__hisnan(x) && __hisnan(y));
}

__device__ void count(int op, unsigned a_bits, unsigned b_bits) {
  atomicAdd(&mismatches[op], 1ull);
  first_mismatch[op] = a_bits << 16 | b_bits;
}

template <typename F>
__device__ void check_binary(int op, mgd::half a, mgd::half b, unsigned a_bits, unsigned b_bits) {
  const F f;
  const mgd::half2 pair = f(mgd::pack_half2(a, b), mgd::pack_half2(b, a));
  const mgd::half ab = mgd::from_float<mgd::half>(f(mgd::to_float(a), mgd::to_float(b)));
  const mgd::half ba = mgd::from_float<mgd::half>(f(mgd::to_float(b), mgd::to_float(a)));
  if (!same_bits(mgd::low_half(pair), ab) || !same_bits(mgd::high_half(pair), ba)) count(op, a_bits, b_bits);
}

// Block (x, y), thread t: a = x · 256 + t against b = y · 256 ... y · 256 + 255.
__global__ void every_pair() {
  const unsigned a_bits = blockIdx.x * 256 + threadIdx.x;
  const mgd::half a = __ushort_as_half(static_cast<unsigned short>(a_bits));
  for (unsigned i = 0; i < 256; ++i) {
    const unsigned b_bits = blockIdx.y * 256 + i;
    const mgd::half b = __ushort_as_half(static_cast<unsigned short>(b_bits));
    check_binary<mgd::op::Add>(0, a, b, a_bits, b_bits);
    check_binary<mgd::op::Sub>(1, a, b, a_bits, b_bits);
    check_binary<mgd::op::Mul>(2, a, b, a_bits, b_bits);
  }
  if (blockIdx.y == 0) {  // the folded square a sum reads through (tile.h: ReadThrough)
    const mgd::ReadThrough<mgd::op::Sqr, mgd::half> read;
    const mgd::half sq = mgd::low_half(read(mgd::pack_half2(a, a)));
    if (!same_bits(sq, mgd::from_float<mgd::half>(read(mgd::to_float(a))))) count(3, a_bits, a_bits);
  }
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "half2_exact: no CUDA GPU\n");
    return 2;
  }
  every_pair<<<dim3(256, 256), 256>>>();
  unsigned long long counts[kOps] = {};
  unsigned first[kOps] = {};
  if (cudaDeviceSynchronize() != cudaSuccess || cudaMemcpyFromSymbol(counts, mismatches, sizeof counts) != cudaSuccess ||
      cudaMemcpyFromSymbol(first, first_mismatch, sizeof first) != cudaSuccess) {
    std::fprintf(stderr, "half2_exact: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 2;
  }
  bool all_same = true;
  for (int op = 0; op < kOps; ++op) {
    const unsigned long long checked = op == 3 ? (1ull << 16) : 2 * (1ull << 32);
    if (counts[op] == 0) {
      std::printf("%s: %llu results, all the f32 path's bits\n", kNames[op], checked);
    } else {
      all_same = false;
      std::printf("%s: %llu of %llu results differ from the f32 path's, e.g. a = 0x%04x, b = 0x%04x\n", kNames[op],
                  counts[op], checked, first[op] >> 16, first[op] & 0xffff);
    }
  }
  return all_same ? 0 : 1;
}
