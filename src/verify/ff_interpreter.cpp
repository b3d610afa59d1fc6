// run_ff and the finite-field helpers of ff_interp.h. The ops themselves are in ff_ops.cpp and
// ff_kernel_op.cpp, shared with FFPrefixEvaluator.
#include <algorithm>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

#include "ff_ops.h"
#include "mugraph/ff_interp.h"
#include "mugraph/ffield.h"

namespace mugraph {

namespace {

/// splitmix64's output function: a bijective mix of a 64-bit word.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t splitmix64(uint64_t& state) { return mix64(state += 0x9e3779b97f4a7c15ull); }

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
int resolve_threads(int threads) { return interp::resolve_threads(threads, "the"); }

}  // namespace ff_detail

FFTensor::FFTensor(Shape s) : shape(s), p(static_cast<size_t>(s.numel()), 0), q(static_cast<size_t>(s.numel()), 0) {}

// ---- Buffers kept between runs ------------------------------------------------------------------

namespace {

struct KeptBuffers {
  static constexpr size_t kSmallest = size_t{1} << 18;  // residues; smaller ones come from malloc's heap
  static constexpr size_t kMaxBytes = size_t{2} << 30;
  std::mutex mutex;
  int reusers = 0;                             // FFBufferReuse objects alive
  size_t bytes = 0;                            // capacity kept, in bytes
  std::vector<std::vector<uint32_t>> buffers;  // oldest first
};

KeptBuffers& kept_buffers() {
  static KeptBuffers k;
  return k;
}

}  // namespace

FFBufferReuse::FFBufferReuse() {
  KeptBuffers& k = kept_buffers();
  std::lock_guard<std::mutex> lock(k.mutex);
  ++k.reusers;
}

FFBufferReuse::~FFBufferReuse() {
  KeptBuffers& k = kept_buffers();
  std::vector<std::vector<uint32_t>> freed;
  {
    std::lock_guard<std::mutex> lock(k.mutex);
    if (--k.reusers == 0) {
      freed.swap(k.buffers);
      k.bytes = 0;
    }
  }
}

namespace ff_detail {

std::vector<uint32_t> take_buffer(size_t n, bool zeroed) {
  std::vector<uint32_t> buffer;
  if (n >= KeptBuffers::kSmallest) {
    KeptBuffers& k = kept_buffers();
    std::lock_guard<std::mutex> lock(k.mutex);
    // The smallest kept buffer that holds n residues without wasting half of itself.
    auto best = k.buffers.end();
    for (auto it = k.buffers.begin(); it != k.buffers.end(); ++it)
      if (it->capacity() >= n && it->capacity() / 2 <= n &&
          (best == k.buffers.end() || it->capacity() < best->capacity()))
        best = it;
    if (best != k.buffers.end()) {
      buffer.swap(*best);
      k.buffers.erase(best);
      k.bytes -= buffer.capacity() * sizeof(uint32_t);
    }
  }
  if (zeroed)
    buffer.assign(n, 0);
  else
    buffer.resize(n);  // a kept buffer keeps its size: no element is written when it held n or more
  return buffer;
}

void give_buffer(std::vector<uint32_t>&& buffer) {
  if (buffer.capacity() < KeptBuffers::kSmallest) return;
  KeptBuffers& k = kept_buffers();
  std::lock_guard<std::mutex> lock(k.mutex);
  const size_t bytes = buffer.capacity() * sizeof(uint32_t);
  if (k.reusers == 0 || bytes > KeptBuffers::kMaxBytes) return;
  while (k.bytes + bytes > KeptBuffers::kMaxBytes) {  // the oldest make room
    k.bytes -= k.buffers.front().capacity() * sizeof(uint32_t);
    k.buffers.erase(k.buffers.begin());
  }
  k.bytes += bytes;
  k.buffers.push_back(std::move(buffer));
}

}  // namespace ff_detail

// ---- FFOpCache ---------------------------------------------------------------------------------

namespace {

/// Where a value came from: an op (its kind and attributes, its body graph, and the values it
/// read) and which output of it, with which residues computed. Values are numbered by the cache:
/// a value id is op id · kMaxOutputs + output index, and an input is an op of kind input named
/// by its name and shape, so equal ids mean equal provenance.
struct OpKey {
  OpKind kind = OpKind::input;
  OpAttrs attrs;                ///< body cleared (the body itself is compared)
  const Graph* body = nullptr;  ///< graph_kernel: the block graph (owned by the cache once kept)
  std::vector<int64_t> inputs;  ///< value ids
  std::vector<uint8_t> parts;   ///< per output: 1 Z_p part computed, 2 Z_q part computed
  friend bool operator==(const OpKey& a, const OpKey& b) {
    return a.kind == b.kind && a.attrs == b.attrs && a.inputs == b.inputs && a.parts == b.parts &&
           (a.body == b.body || (a.body && b.body && *a.body == *b.body));
  }
};

struct OpKeyHash {
  size_t operator()(const OpKey& k) const {
    size_t h = static_cast<size_t>(k.kind);
    hash_combine(h, std::hash<std::string>{}(k.attrs.name));
    hash_combine(h, hash_value(k.attrs.shape));
    hash_combine(h, static_cast<size_t>(k.attrs.dim) * 31 + static_cast<size_t>(k.attrs.to));
    if (k.attrs.has_scalar) hash_combine(h, hash_value(k.attrs.scalar));
    for (int64_t v : k.inputs) hash_combine(h, static_cast<size_t>(v));
    for (uint8_t v : k.parts) hash_combine(h, v);
    if (k.body) hash_combine(h, hash_value(*k.body));
    return h;
  }
};

constexpr int64_t kMaxOutputs = 256;

}  // namespace

struct FFOpCache::Impl {
  int64_t max_bytes = 0;
  int64_t kept_bytes = 0;
  int64_t hits = 0;
  std::unordered_map<OpKey, int64_t, OpKeyHash> ids;
  std::deque<Graph> bodies;                                     ///< the bodies of kept keys (stable addresses)
  std::vector<std::vector<std::shared_ptr<FFTensor>>> results;  ///< by op id; empty: not kept
  /// Kept results of graph-defined kernels by content (hash_ff): value ids. Two tilings of one
  /// kernel compute the same values under different keys; the later one's value takes the
  /// earlier one's id (same_as), so the ops that read it are shared too (the down projection
  /// after a gated MLP kernel, in every retiled candidate of a Llama MLP).
  std::unordered_multimap<uint64_t, int64_t> by_content;
  std::unordered_map<int64_t, int64_t> same_as;  ///< value id → the id of an equal kept value

  /// The kept result with value id v (op id · kMaxOutputs + output index).
  const FFTensor& kept_value(int64_t v) const {
    return *results[static_cast<size_t>(v / kMaxOutputs)][static_cast<size_t>(v % kMaxOutputs)];
  }

  /// The id the value `v`, kept, is known by: an earlier kept value of the same content, or v.
  int64_t by_value(int64_t v) {
    if (auto it = same_as.find(v); it != same_as.end()) return it->second;
    const FFTensor& t = kept_value(v);
    const uint64_t h = hash_ff(t);
    for (auto [it, end] = by_content.equal_range(h); it != end; ++it)
      if (kept_value(it->second) == t) return same_as[v] = it->second;
    by_content.emplace(h, v);
    return same_as[v] = v;
  }

  /// The kept results' buffers go back for the next draw's runs (FFBufferReuse).
  ~Impl() {
    for (auto& op : results)
      for (auto& t : op)
        if (t.use_count() == 1) ff_detail::give_buffers(*t);
  }

  /// The op id of `key`, made if new (its body copied into the cache).
  int64_t intern(OpKey key) {
    if (auto it = ids.find(key); it != ids.end()) return it->second;
    if (key.body) key.body = &bodies.emplace_back(*key.body);
    const auto id = static_cast<int64_t>(results.size());
    results.emplace_back();
    ids.emplace(std::move(key), id);
    return id;
  }
};

FFOpCache::FFOpCache(int64_t max_bytes) : impl_(std::make_unique<Impl>()) { impl_->max_bytes = max_bytes; }
FFOpCache::~FFOpCache() = default;
int64_t FFOpCache::hits() const { return impl_->hits; }
int64_t FFOpCache::kept_bytes() const { return impl_->kept_bytes; }

FFRun run_ff(const Graph& g, const std::vector<FFTensor>& inputs, const FFContext& ctx, int threads, FFOpCache* cache) {
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
  const ff_detail::Taint taint = ff_detail::exp_taint(g, {}, !ctx.opaque_functions);

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
  // With a cache: the value id of every tensor. The cache outlives the run and never drops a
  // result, so views of its results stay valid.
  FFOpCache::Impl* shared = cache ? &cache->impl() : nullptr;
  std::vector<int64_t> value(shared ? g.tensors.size() : 0, -1);
  auto op_key = [&](const Op& op) {
    OpKey key;
    key.kind = op.kind;
    key.attrs = op.attrs;
    key.attrs.body = -1;
    if (op.kind == OpKind::graph_kernel) key.body = &g.bodies.at(static_cast<size_t>(op.attrs.body));
    for (TensorId t : op.inputs) key.inputs.push_back(value[t.index()]);
    // A pre-defined op computes only the parts of its result that are read (PartsRead); an
    // input is given whole, and a graph-defined kernel's blocks decide from its operands alone.
    const bool pre_defined = op.kind != OpKind::input && op.kind != OpKind::graph_kernel;
    for (TensorId t : op.outputs)
      key.parts.push_back(
          pre_defined ? static_cast<uint8_t>((taint.exp_only[t.index()] ? 0 : 1) | (taint.tensor[t.index()] ? 0 : 2))
                      : uint8_t{3});
    return key;
  };
  if (shared)
    for (size_t i : input_ops) value[g.ops[i].outputs[0].index()] = shared->intern(op_key(g.ops[i])) * kMaxOutputs;
  // A graph-defined kernel's kept results go by their content (FFOpCache::Impl::by_value).
  auto known_by_content = [&](const Op& op, int64_t id) {
    if (op.kind != OpKind::graph_kernel) return;
    for (size_t k = 0; k < op.outputs.size(); ++k)
      value[op.outputs[k].index()] = shared->by_value(id * kMaxOutputs + static_cast<int64_t>(k));
  };
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    if (!live[i] || op.kind == OpKind::input) continue;
    int64_t id = -1;
    if (shared && static_cast<int64_t>(op.outputs.size()) <= kMaxOutputs) {
      id = shared->intern(op_key(op));
      for (size_t k = 0; k < op.outputs.size(); ++k)
        value[op.outputs[k].index()] = id * kMaxOutputs + static_cast<int64_t>(k);
      const auto& kept = shared->results[static_cast<size_t>(id)];
      if (!kept.empty()) {
        for (size_t k = 0; k < op.outputs.size(); ++k) views[op.outputs[k].index()] = ff_detail::view_of(*kept[k]);
        known_by_content(op, id);
        ++shared->hits;
        continue;
      }
    }
    if (!ff_detail::run_kernel_op(g, i, taint.tensor, taint.exp_only, views, store, st)) {
      run.zero_divisor = true;
      return run;
    }
    if (id >= 0) {
      int64_t bytes = 0;
      bool stored = true;  // every result in `store` (none a view of another tensor)
      for (TensorId t : op.outputs) {
        const FFTensor& r = store[t.index()];
        stored = stored && static_cast<int64_t>(r.p.size()) == g.type(t).shape.numel();
        bytes += 2 * static_cast<int64_t>(r.p.size() * sizeof(uint32_t));
      }
      if (stored && shared->kept_bytes + bytes <= shared->max_bytes) {
        // Moving a tensor keeps its buffers where they are, so views[t] stays valid.
        shared->kept_bytes += bytes;
        for (TensorId t : op.outputs)
          shared->results[static_cast<size_t>(id)].push_back(std::make_shared<FFTensor>(std::move(store[t.index()])));
        known_by_content(op, id);
      }
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
  for (FFTensor& t : store) ff_detail::give_buffers(t);
  return run;
}

namespace {

/// Elements of one input's field that one task of random_ff_inputs draws.
constexpr int64_t kDrawChunk = int64_t{1} << 16;

/// Element i of `out` (one field of one input, stream `key`) is the i-th 32-bit half of the
/// splitmix64 sequence of `key` (counter-based: word w is mix64(key + (w + 1)·γ)), reduced mod M
/// if it lies below the largest multiple of M under 2^32. A half above it (probability under
/// 4·10⁻⁹ for p and q) is replaced by a rejection-sampled draw from a stream of its own index.
/// Either way the element is uniform and independent of the others, and each element is a
/// function of (key, i) alone: chunks run in any order on any thread and give the same values.
template <uint64_t M>
void draw_residues(uint64_t key, uint32_t* out, int64_t begin, int64_t end) {
  constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ull;
  constexpr uint64_t kLimit = (uint64_t{1} << 32) / M * M;
  // begin is even (chunks are), so element i is half i % 2 of word i / 2.
  for (int64_t i = begin; i < end; i += 2) {
    const uint64_t z = mix64(key + (static_cast<uint64_t>(i / 2) + 1) * kGamma);
    out[i] = static_cast<uint32_t>(z);
    if (i + 1 < end) out[i + 1] = static_cast<uint32_t>(z >> 32);
  }
  for (int64_t i = begin; i < end; ++i) {
    uint64_t v = out[i];
    if (v >= kLimit) [[unlikely]] {
      uint64_t state = mix64(key ^ 0x2545f4914f6cdd1dull) + static_cast<uint64_t>(i) * 0xd1342543de82ef95ull;
      do v = splitmix64(state) & 0xffffffffu;
      while (v >= kLimit);
    }
    out[i] = static_cast<uint32_t>(v % M);
  }
}

}  // namespace

std::vector<FFTensor> random_ff_inputs(const Graph& g, uint64_t seed, int threads) {
  std::vector<FFTensor> result;
  for (const Op& op : g.ops) {
    if (op.kind != OpKind::input) continue;
    // Every element is drawn below: the buffers of an earlier draw serve as they are (a Llama
    // MLP's weights are 1.4 GB of residues; zeroing fresh pages cost a third of a draw).
    FFTensor& t = result.emplace_back();
    t.shape = g.type(op.outputs.at(0)).shape;
    t.p = ff_detail::take_buffer(static_cast<size_t>(t.shape.numel()), /*zeroed=*/false);
    t.q = ff_detail::take_buffer(static_cast<size_t>(t.shape.numel()), /*zeroed=*/false);
  }
  // The tasks: (input, field, chunk), each a stream key's elements [begin, end).
  struct Task {
    uint32_t* out;
    uint64_t key;
    bool p;
    int64_t begin, end;
  };
  std::vector<Task> tasks;
  for (size_t k = 0; k < result.size(); ++k) {
    FFTensor& t = result[k];
    const int64_t n = static_cast<int64_t>(t.p.size());
    for (int field = 0; field < 2; ++field) {
      uint64_t key_state = seed ^ (0x632be59bd9b4e019ull * (2 * k + 1 + static_cast<uint64_t>(field)));
      const uint64_t key = splitmix64(key_state);
      for (int64_t b = 0; b < n; b += kDrawChunk)
        tasks.push_back(Task{field == 0 ? t.p.data() : t.q.data(), key, field == 0, b, std::min(n, b + kDrawChunk)});
    }
  }
  auto run = [&](int64_t i) {
    const Task& t = tasks[static_cast<size_t>(i)];
    if (t.p)
      draw_residues<ff::kP>(t.key, t.out, t.begin, t.end);
    else
      draw_residues<ff::kQ>(t.key, t.out, t.begin, t.end);
  };
  const int workers = std::min<int64_t>(ff_detail::resolve_threads(threads), static_cast<int64_t>(tasks.size()));
  if (workers > 1) {
    interp::ThreadPool pool(workers);
    pool.parallel_for(static_cast<int64_t>(tasks.size()), [&](int, int64_t i) { run(i); });
  } else {
    for (size_t i = 0; i < tasks.size(); ++i) run(static_cast<int64_t>(i));
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
