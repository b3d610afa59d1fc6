#include "mugraph/graph.h"

#include <numeric>

namespace mugraph {

std::string TensorType::str() const { return shape.str() + " " + std::string(dtype_name(dtype)); }

const Tensor& Graph::tensor(TensorId id) const {
  MUGRAPH_CHECK(id.valid() && id.index() < tensors.size()) << "tensor id " << id.value << " of " << tensors.size();
  return tensors[id.index()];
}

const Op& Graph::op(OpId id) const {
  MUGRAPH_CHECK(id.valid() && id.index() < ops.size()) << "op id " << id.value << " of " << ops.size();
  return ops[id.index()];
}

Expected<OpId> Graph::append(OpKind kind, std::vector<TensorId> inputs, OpAttrs attrs) {
  std::vector<TensorType> types;
  types.reserve(inputs.size());
  for (TensorId t : inputs) {
    if (!t.valid() || t.index() >= tensors.size())
      return reject(Reason::malformed) << op_name(kind) << " reads tensor " << t.value << " but the graph has "
                                       << tensors.size();
    types.push_back(tensors[t.index()].type);
  }
  auto outs = infer_output_types(*this, kind, types, attrs);
  if (!outs) return outs.rejection();
  OpId id(static_cast<int32_t>(ops.size()));
  Op op{kind, std::move(inputs), {}, std::move(attrs)};
  for (const TensorType& t : *outs) {
    op.outputs.emplace_back(static_cast<int32_t>(tensors.size()));
    std::vector<int8_t> layout(static_cast<size_t>(t.shape.rank()));
    std::iota(layout.begin(), layout.end(), int8_t{0});
    tensors.push_back(Tensor{t, std::move(layout), id, kind == OpKind::input ? op.attrs.name : std::string()});
  }
  ops.push_back(std::move(op));
  return id;
}

Expected<OpId> Graph::append_with_body(OpKind kind, std::vector<TensorId> inputs, Graph body) {
  OpAttrs attrs;
  attrs.body = static_cast<int32_t>(bodies.size());
  bodies.push_back(std::move(body));
  auto r = append(kind, std::move(inputs), std::move(attrs));
  if (!r) bodies.pop_back();
  return r;
}

TensorId Graph::add_input(std::string name, Shape shape, DType dtype) {
  OpAttrs a;
  a.name = std::move(name);
  a.shape = shape;
  a.dtype = dtype;
  return add(OpKind::input, {}, std::move(a));
}

TensorId Graph::add(OpKind kind, std::vector<TensorId> inputs, OpAttrs attrs) {
  auto r = append(kind, std::move(inputs), std::move(attrs));
  MUGRAPH_CHECK(r.ok()) << "cannot add " << op_name(kind) << ": " << r.rejection().str();
  const Op& op = ops[r->index()];
  return op.outputs.empty() ? TensorId() : op.outputs[0];
}

void Graph::mark_output(TensorId t, std::string name) {
  MUGRAPH_CHECK(t.valid() && t.index() < tensors.size()) << "output tensor " << t.value;
  outputs.push_back(t);
  output_names.push_back(std::move(name));
}

Graph make_block_graph(std::vector<TensorType> params, Dim3 grid, int64_t forloop, Dim3 threads) {
  Graph g;
  g.level = Level::block;
  g.params = std::move(params);
  g.grid = grid;
  g.forloop = forloop;
  g.threads = threads;
  return g;
}

Graph make_thread_graph(std::vector<TensorType> params) {
  Graph g;
  g.level = Level::thread;
  g.params = std::move(params);
  g.threads = Dim3{1, 1, 1};
  return g;
}

uint32_t attr_fields(OpKind kind) {
  switch (op_info(kind).category) {
    case OpCategory::source: return kAttrName | kAttrShape | kAttrDType;
    case OpCategory::kernel_body:
    case OpCategory::thread_body: return kAttrBody;
    case OpCategory::iterator: return kAttrInput | kAttrInMaps;
    case OpCategory::saver: return kAttrOutput | kAttrOMap;
    case OpCategory::accumulator: return kAttrAccum;
    case OpCategory::unary:
    case OpCategory::matmul: return 0;
    case OpCategory::binary: return kAttrScalar;
    case OpCategory::reduction: return kAttrDim | kAttrTo;
    case OpCategory::layout:
      if (kind == OpKind::repeat) return kAttrDim | kAttrTimes;
      if (kind == OpKind::reshape) return kAttrShape;
      return kAttrDim;  // concat
  }
  return 0;
}

OpAttrs used_attrs(OpKind kind, const OpAttrs& a) {
  uint32_t f = attr_fields(kind);
  OpAttrs out;
  if (f & kAttrName) out.name = a.name;
  if (f & kAttrShape) out.shape = a.shape;
  if (f & kAttrDType) out.dtype = a.dtype;
  if (f & (kAttrDim | kAttrAccum)) out.dim = a.dim;
  if (f & kAttrTo) out.to = a.to;
  if (f & kAttrTimes) out.times = a.times;
  if ((f & kAttrScalar) && a.has_scalar) {
    out.has_scalar = true;
    out.scalar = a.scalar;
    out.scalar_pos = a.scalar_pos;
  }
  if (f & (kAttrInput | kAttrOutput)) out.io_index = a.io_index;
  if (f & kAttrInMaps) {
    out.imap = a.imap;
    out.fmap = a.fmap;
  }
  if (f & kAttrOMap) out.omap = a.omap;
  if (f & kAttrBody) out.body = a.body;
  return out;
}

namespace attrs {
OpAttrs iterator(int32_t io_index, std::array<int8_t, 3> imap, int8_t fmap) {
  OpAttrs a;
  a.io_index = io_index;
  a.imap = imap;
  a.fmap = fmap;
  return a;
}
OpAttrs saver(int32_t io_index, std::array<int8_t, 3> omap) {
  OpAttrs a;
  a.io_index = io_index;
  a.omap = omap;
  return a;
}
OpAttrs accum(int32_t dim) {
  OpAttrs a;
  a.dim = dim;
  return a;
}
OpAttrs sum(int32_t dim, int64_t to) {
  OpAttrs a;
  a.dim = dim;
  a.to = to;
  return a;
}
OpAttrs scalar(Scalar value, int8_t pos) {
  OpAttrs a;
  a.has_scalar = true;
  a.scalar = value;
  a.scalar_pos = pos;
  return a;
}
}  // namespace attrs

namespace {
size_t hash_type(const TensorType& t) {
  size_t h = hash_value(t.shape);
  hash_combine(h, static_cast<size_t>(t.dtype));
  return h;
}

size_t hash_attrs(const OpAttrs& a) {
  std::hash<int64_t> hi;
  size_t h = std::hash<std::string>{}(a.name);
  hash_combine(h, hash_value(a.shape));
  hash_combine(h, static_cast<size_t>(a.dtype));
  hash_combine(h, hi(a.dim));
  hash_combine(h, hi(a.to));
  hash_combine(h, hi(a.times));
  hash_combine(h, a.has_scalar ? hash_value(a.scalar) + static_cast<size_t>(a.scalar_pos) : 0);
  hash_combine(h, hi(a.io_index));
  for (int8_t m : a.imap) hash_combine(h, hi(m));
  hash_combine(h, hi(a.fmap));
  for (int8_t m : a.omap) hash_combine(h, hi(m));
  hash_combine(h, hi(a.body));
  return h;
}
}  // namespace

size_t hash_value(const Graph& g) {
  std::hash<int64_t> hi;
  size_t h = static_cast<size_t>(g.level);
  for (const Tensor& t : g.tensors) {
    hash_combine(h, hash_type(t.type));
    for (int8_t d : t.layout) hash_combine(h, hi(d));
    hash_combine(h, hi(t.producer.value));
    hash_combine(h, std::hash<std::string>{}(t.name));
  }
  for (const Op& op : g.ops) {
    hash_combine(h, static_cast<size_t>(op.kind));
    for (TensorId t : op.inputs) hash_combine(h, hi(t.value));
    for (TensorId t : op.outputs) hash_combine(h, hi(t.value));
    hash_combine(h, hash_attrs(op.attrs));
  }
  for (TensorId t : g.outputs) hash_combine(h, hi(t.value));
  for (const auto& n : g.output_names) hash_combine(h, std::hash<std::string>{}(n));
  for (const TensorType& t : g.params) hash_combine(h, hash_type(t));
  for (const Graph& b : g.bodies) hash_combine(h, hash_value(b));
  for (int axis = 0; axis < 3; ++axis) {
    hash_combine(h, hi(g.grid[axis]));
    hash_combine(h, hi(g.threads[axis]));
  }
  hash_combine(h, hi(g.forloop));
  return h;
}

std::vector<bool> live_ops(const Graph& g) {
  std::vector<bool> live(g.ops.size(), false), needed(g.tensors.size(), false);
  for (TensorId t : g.outputs) needed[t.index()] = true;
  for (size_t i = g.ops.size(); i-- > 0;) {
    const Op& op = g.ops[i];
    bool reaches = op.kind == OpKind::output_saver;
    for (TensorId t : op.outputs) reaches = reaches || needed[t.index()];
    if (!reaches) continue;
    live[i] = true;
    for (TensorId t : op.inputs) needed[t.index()] = true;
  }
  return live;
}

int64_t count_ops(const Graph& g) {
  int64_t n = static_cast<int64_t>(g.ops.size());
  for (const Graph& b : g.bodies) n += count_ops(b);
  return n;
}

}  // namespace mugraph
