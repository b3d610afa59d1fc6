// run_ff and the finite-field helpers of ff_interp.h. The ops themselves are in ff_ops.cpp and
// ff_kernel_op.cpp, shared with FFPrefixEvaluator.
#include <algorithm>
#include <string>
#include <thread>

#include "ff_ops.h"
#include "mugraph/ff_interp.h"
#include "mugraph/ffield.h"

namespace mugraph {

namespace {

constexpr int kMaxThreads = 4096;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// A uniform residue mod m (< 2^32) by rejection sampling 32-bit draws.
uint32_t uniform_residue(uint64_t& state, uint64_t m) {
  const uint64_t limit = (uint64_t{1} << 32) / m * m;
  for (;;) {
    uint64_t r = splitmix64(state);
    for (uint64_t half : {r & 0xffffffffu, r >> 32})
      if (half < limit) return static_cast<uint32_t>(half % m);
  }
}

}  // namespace

namespace ff_detail {
int resolve_threads(int threads) {
  if (threads < 0 || threads > kMaxThreads)
    throw UserError("the thread count must be between 0 (all hardware threads) and " + std::to_string(kMaxThreads) +
                    "; got " + std::to_string(threads));
  return threads == 0 ? std::max(1, static_cast<int>(std::thread::hardware_concurrency())) : threads;
}

}  // namespace ff_detail

FFTensor::FFTensor(Shape s)
    : shape(s), p(static_cast<size_t>(s.numel()), 0), q(static_cast<size_t>(s.numel()), 0) {}

FFRun run_ff(const Graph& g, const std::vector<FFTensor>& inputs, const FFContext& ctx, int threads) {
  if (g.level != Level::kernel)
    throw UserError("run_ff needs a kernel graph, got a " + std::string(level_name(g.level)) + " graph");
  std::vector<size_t> input_ops;
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (g.ops[i].kind == OpKind::input) input_ops.push_back(i);
  if (inputs.size() != input_ops.size())
    throw UserError("the graph has " + std::to_string(input_ops.size()) + " inputs but " +
                    std::to_string(inputs.size()) + " were given");
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Shape& want = g.type(g.ops[input_ops[k]].outputs.at(0)).shape;
    const FFTensor& in = inputs[k];
    if (in.shape != want || in.p.size() != static_cast<size_t>(want.numel()) || in.q.size() != in.p.size())
      throw UserError("input " + std::to_string(k) + " ('" + g.ops[input_ops[k]].attrs.name + "') should have shape " +
                      want.str() + " but has " + in.shape.str() + " with " + std::to_string(in.p.size()) + "/" +
                      std::to_string(in.q.size()) + " residues");
  }
  interp::ThreadPool pool(ff_detail::resolve_threads(threads));
  ff_detail::FFState st(ctx, &pool);
  const ff_detail::Taint taint = ff_detail::exp_taint(g, {});

  // Only the ops the outputs need run.
  std::vector<bool> needed(g.tensors.size(), false), live(g.ops.size(), false);
  for (TensorId t : g.outputs) needed[t.index()] = true;
  for (size_t i = g.ops.size(); i-- > 0;) {
    bool l = false;
    for (TensorId t : g.ops[i].outputs) l = l || needed[t.index()];
    if (!l) continue;
    live[i] = true;
    for (TensorId t : g.ops[i].inputs) needed[t.index()] = true;
  }
  std::vector<ff_detail::FFView> views(g.tensors.size());
  std::vector<FFTensor> store(g.tensors.size());
  FFRun run;
  for (size_t k = 0; k < input_ops.size(); ++k)
    views[g.ops[input_ops[k]].outputs[0].index()] = ff_detail::view_of(inputs[k]);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (!live[i] || g.ops[i].kind == OpKind::input) continue;
    if (!ff_detail::run_kernel_op(g, i, taint.tensor, taint.exp_only, views, store, st)) {
      run.zero_divisor = true;
      return run;
    }
  }
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    TensorId t = g.outputs[k];
    bool again =
        std::find(g.outputs.begin() + static_cast<std::ptrdiff_t>(k) + 1, g.outputs.end(), t) != g.outputs.end();
    if (!again && !store[t.index()].p.empty()) {
      run.outputs.push_back(std::move(store[t.index()]));
    } else {
      FFTensor copy(g.type(t).shape);
      ff_detail::copy_ff(views[t.index()], ff_detail::mut_view_of(copy));
      run.outputs.push_back(std::move(copy));
    }
    run.exp_tainted.push_back(taint.out[k]);
  }
  return run;
}

std::vector<FFTensor> random_ff_inputs(const Graph& g, uint64_t seed) {
  std::vector<FFTensor> result;
  uint64_t k = 0;
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::input) continue;
    FFTensor t(g.type(op.outputs.at(0)).shape);
    uint64_t sp = seed ^ (0x632be59bd9b4e019ull * (2 * k + 1));
    uint64_t sq = seed ^ (0x632be59bd9b4e019ull * (2 * k + 2));
    splitmix64(sp);
    splitmix64(sq);
    for (auto& v : t.p) v = uniform_residue(sp, ff::kP);
    for (auto& v : t.q) v = uniform_residue(sq, ff::kQ);
    result.push_back(std::move(t));
    ++k;
  }
  return result;
}

// Z_p^* is cyclic of order p − 1 = 2q, so squaring maps it 2-to-1 onto its unique subgroup of
// order q, which is exactly the set of q-th roots of unity; every root has exactly two square
// roots ±r. Hence r² for uniform r ≠ 0 is uniform over the q-th roots of unity (1 included).
uint64_t random_root_of_unity(uint64_t seed) {
  uint64_t state = seed ^ 0x3c6ef372fe94f82bull;
  uint64_t r = 0;
  while (r == 0) r = uniform_residue(state, ff::kP);
  return ff::mul(r, r, ff::kP);
}

uint64_t hash_ff(const FFTensor& t) {
  uint64_t h = 0x84222325cbf29ce4ull ^ static_cast<uint64_t>(t.shape.rank());
  auto mix = [&](uint64_t v) {
    h ^= v;
    h *= 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
  };
  for (int64_t d : t.shape) mix(static_cast<uint64_t>(d));
  for (size_t i = 0; i < t.p.size(); ++i) mix((uint64_t{t.p[i]} << 32) | t.q[i]);
  uint64_t state = h;
  return splitmix64(state);
}

}  // namespace mugraph
