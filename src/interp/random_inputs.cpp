// random_inputs: standard-normal inputs that are the same on every platform. The generator is
// splitmix64 (a fixed integer recipe) and Box–Muller with a logarithm, sine and cosine written
// here from +, −, ×, ÷ and sqrt only, all correctly rounded in IEEE arithmetic, so no libm
// differences can change a value.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "half.h"
#include "mugraph/interp.h"
#include "thread_pool.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF  // no fused multiply-adds: they would change the roundings
#endif

namespace mugraph {

namespace {

/// splitmix64 (Steele, Lea, Flood 2014).
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }
};

/// 1/(2k + 1), 1/((2k)(2k + 1)) and 1/((2k − 1)(2k)) as compile-time constants (correctly
/// rounded by the compiler), so the series below need no divisions.
struct SeriesConstants {
  double inv_odd[13];
  double inv_sin[10];
  double inv_cos[10];
  constexpr SeriesConstants() : inv_odd(), inv_sin(), inv_cos() {
    for (int k = 0; k < 13; ++k) inv_odd[k] = 1.0 / (2.0 * k + 1.0);
    for (int k = 1; k < 10; ++k) {
      inv_sin[k] = 1.0 / ((2.0 * k) * (2.0 * k + 1.0));
      inv_cos[k] = 1.0 / ((2.0 * k - 1.0) * (2.0 * k));
    }
  }
};
constexpr SeriesConstants kSeries;

/// ln(u) for u in (0, 1].
double det_log(double u) {
  int e = 0;
  double m = std::frexp(u, &e);  // exact: u = m · 2^e, m in [0.5, 1)
  if (m < 0.70710678118654752) {
    m = m * 2.0;
    e = e - 1;
  }
  // ln m = 2 atanh(s), s = (m − 1)/(m + 1), |s| ≤ 0.172: 13 terms of the series reach 1e-17.
  double s = (m - 1.0) / (m + 1.0);
  double s2 = s * s;
  double series = kSeries.inv_odd[12];
  for (int k = 11; k >= 0; --k) {
    double t = series * s2;
    series = t + kSeries.inv_odd[k];
  }
  double ln_m = 2.0 * s * series;
  double ln2_e = static_cast<double>(e) * 0.69314718055994531;
  return ln2_e + ln_m;
}

/// sin and cos of x for 0 ≤ x ≤ π/4 by Taylor series (error below 1e-17).
void sincos_small(double x, double& s, double& c) {
  double x2 = x * x;
  double ps = 1.0, pc = 1.0;
  // Horner from the highest term: sin: x(1 − x²/(2·3)(1 − x²/(4·5)(...))), cos likewise.
  for (int k = 9; k >= 1; --k) {
    double ts = x2 * kSeries.inv_sin[k];
    double tc = x2 * kSeries.inv_cos[k];
    double us = ts * ps;
    double uc = tc * pc;
    ps = 1.0 - us;
    pc = 1.0 - uc;
  }
  s = x * ps;
  c = pc;
}

/// cos(2πu) and sin(2πu) for u in [0, 1).
void det_cos_sin_2pi(double u, double& c, double& s) {
  constexpr double kHalfPi = 1.5707963267948966;
  double t = u * 4.0;  // exact
  double quad = std::floor(t);
  double f = t - quad;  // exact, in [0, 1): the angle within the quadrant is f·π/2
  double a, b;          // sin and cos of f·π/2
  if (f <= 0.5) {
    sincos_small(f * kHalfPi, a, b);
  } else {
    sincos_small((1.0 - f) * kHalfPi, b, a);  // 1 − f is exact
  }
  switch (static_cast<int>(quad)) {
    case 0:
      c = b;
      s = a;
      break;
    case 1:
      c = -a;
      s = b;
      break;
    case 2:
      c = -b;
      s = -a;
      break;
    default:
      c = a;
      s = -b;
      break;
  }
}

}  // namespace

std::vector<HostTensor> random_inputs(const Graph& g, uint64_t seed, int64_t max_bytes, int threads) {
  return random_inputs_scaled(g, seed, 1.0, max_bytes, threads);
}

std::vector<HostTensor> random_inputs_scaled(const Graph& g, uint64_t seed, double scale, int64_t max_bytes,
                                             int threads) {
  // Check the total before allocating anything, saturating instead of overflowing.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t bytes = 0;
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::input) continue;
    int64_t n = 4;
    for (int64_t d : g.type(op.outputs.at(0)).shape) n = (d > 0 && n > kMax / d) ? kMax : n * std::max<int64_t>(d, 0);
    bytes = bytes > kMax - n ? kMax : bytes + n;
  }
  if (bytes > max_bytes)
    throw UserError("the graph's inputs need " + std::to_string(bytes) + " bytes of host memory; the limit is " +
                    std::to_string(max_bytes));
  threads = interp::resolve_threads(threads, "random_inputs: the");
  // Each pair of values (Box–Muller) takes two draws of its input's stream, and splitmix64's
  // state after m draws is the stream's start plus m·γ: pair p begins at start + 2p·γ. So the
  // pairs are drawn in chunks on any number of threads, each chunk jumping to its first pair,
  // and give the values a single sequential pass gives.
  struct Chunk {
    HostTensor* t;
    uint64_t stream;
    size_t begin, end;  // elements (even begin)
  };
  constexpr size_t kChunk = size_t{1} << 16;
  std::vector<HostTensor> result;
  std::vector<uint64_t> streams;
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::input) continue;
    result.emplace_back(g.type(op.outputs.at(0)));
    // One stream per input, so that adding an input leaves the others' values unchanged.
    SplitMix64 mix{seed};
    streams.push_back(mix.next() ^ (0xd1b54a32d192ed03ull * (streams.size() + 1)));
  }
  std::vector<Chunk> chunks;
  for (size_t k = 0; k < result.size(); ++k)
    for (size_t b = 0; b < result[k].data.size(); b += kChunk)
      chunks.push_back(Chunk{&result[k], streams[k], b, std::min(result[k].data.size(), b + kChunk)});
  auto draw = [&](const Chunk& c) {
    HostTensor& t = *c.t;
    SplitMix64 rng{c.stream + static_cast<uint64_t>(c.begin) * 0x9e3779b97f4a7c15ull};
    for (size_t j = c.begin; j < c.end; j += 2) {
      double u1 = 1.0 - rng.uniform();  // (0, 1]
      double u2 = rng.uniform();
      double r = std::sqrt(-2.0 * det_log(u1));
      double co, si;
      det_cos_sin_2pi(u2, co, si);
      t.data[j] = interp::round_to(static_cast<float>(scale * (r * co)), t.type.dtype);
      if (j + 1 < c.end) t.data[j + 1] = interp::round_to(static_cast<float>(scale * (r * si)), t.type.dtype);
    }
  };
  const int workers = static_cast<int>(std::min<size_t>(static_cast<size_t>(threads), chunks.size()));
  if (workers > 1) {
    interp::ThreadPool pool(workers);
    pool.parallel_for(static_cast<int64_t>(chunks.size()),
                      [&](int, int64_t i) { draw(chunks[static_cast<size_t>(i)]); });
  } else {
    for (const Chunk& c : chunks) draw(c);
  }
  return result;
}

}  // namespace mugraph
