/// \file graph.h
/// The one graph model used for all three levels of a μGraph.
///
/// A Graph is a value: ops and tensors live in vectors and refer to each other by strong integer
/// ids; a graph-defined kernel op or a thread-graph op refers to its body by an index into
/// `bodies`, which holds the nested graphs by value. Copying a Graph copies the whole μGraph;
/// graphs compare with == and hash with hash_value.
///
/// Levels:
/// - kernel: ops are program inputs, pre-defined kernels (any op at level K) and graph_kernel ops
///   whose body is a block graph. `outputs` are the program outputs.
/// - block: `params` are the types of the DTensors the kernel op passes in; input_iterator ops
///   load tiles of them (imap over the grid, fmap over the for-loop), accum ops combine
///   iterations, output_saver ops write tiles of the kernel op's outputs (omap). thread_graph ops
///   have thread-graph bodies.
/// - thread: `params` are the STensors the thread_graph op passes in; iterators and savers copy
///   whole tensors between shared memory and registers; the ops between are element-wise.
///
/// Ops appear in a valid topological order: an op only reads tensors made by earlier ops.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mugraph/error.h"
#include "mugraph/ops.h"
#include "mugraph/types.h"

namespace mugraph {

/// Shape and element type of a tensor.
struct TensorType {
  Shape shape;
  DType dtype = DType::f16;
  friend bool operator==(const TensorType&, const TensorType&) = default;
  /// "[16, 4096] f16"
  std::string str() const;
};

/// Attributes of an op. One struct for every kind keeps ops plain values; each kind reads the
/// fields listed beside it and leaves the others at their defaults (validate checks this).
struct OpAttrs {
  // input: the program input's name, shape and dtype.
  std::string name;
  Shape shape;  ///< input: its shape; reshape: the target shape
  DType dtype = DType::f16;

  int32_t dim = 0;    ///< sum, repeat, concat: the dimension (non-negative); accum: kPhi sums
                      ///< over the iterations, a dim concatenates the iterations along it
  int64_t to = 1;     ///< sum: the reduced dimension's new extent
  int64_t times = 1;  ///< repeat: how many copies

  /// add/sub/mul/div with a constant operand: the constant and its position (0: left, 1: right).
  bool has_scalar = false;
  Scalar scalar;
  int8_t scalar_pos = 1;

  /// input_iterator: which param it reads; output_saver: which output of the enclosing op it writes.
  int32_t io_index = 0;
  /// input_iterator (block): per grid axis, the data dim split across that axis, or kPhi.
  std::array<int8_t, 3> imap{kPhi, kPhi, kPhi};
  /// input_iterator (block): the data dim split across the for-loop iterations, or kPhi.
  int8_t fmap = kPhi;
  /// output_saver (block): per grid axis, the data dim the blocks are concatenated along, or kPhi
  /// for axes of size 1.
  std::array<int8_t, 3> omap{kPhi, kPhi, kPhi};

  /// graph_kernel, thread_graph: index of the body in Graph::bodies.
  int32_t body = -1;

  friend bool operator==(const OpAttrs&, const OpAttrs&) = default;
};

/// OpAttrs fields as bits, for saying which ones an op kind uses.
enum AttrField : uint32_t {
  kAttrName = 1u << 0,     ///< input: name
  kAttrShape = 1u << 1,    ///< input, reshape: shape
  kAttrDType = 1u << 2,    ///< input: dtype
  kAttrDim = 1u << 3,      ///< sum, repeat, concat: dim
  kAttrTo = 1u << 4,       ///< sum: to
  kAttrTimes = 1u << 5,    ///< repeat: times
  kAttrScalar = 1u << 6,   ///< binary: has_scalar, scalar, scalar_pos
  kAttrInput = 1u << 7,    ///< input_iterator: io_index
  kAttrOutput = 1u << 8,   ///< output_saver: io_index
  kAttrInMaps = 1u << 9,   ///< input_iterator: imap, fmap
  kAttrOMap = 1u << 10,    ///< output_saver: omap
  kAttrAccum = 1u << 11,   ///< accum: dim (kPhi sums)
  kAttrBody = 1u << 12,    ///< graph_kernel, thread_graph: body
};

/// The OpAttrs fields an op kind uses (a bit set of AttrField): the one place that says so.
uint32_t attr_fields(OpKind kind);

/// `attrs` with every field that `kind` does not use reset to its default. Ops keep unused
/// fields at their defaults so that equal ops compare and hash equal; validate() checks it.
OpAttrs used_attrs(OpKind kind, const OpAttrs& attrs);

/// Attribute builders for the common op kinds, so code that builds graphs reads as what it means.
namespace attrs {
/// input_iterator: block level with its imap (per grid axis) and fmap; thread level with no maps.
OpAttrs iterator(int32_t io_index, std::array<int8_t, 3> imap = {kPhi, kPhi, kPhi}, int8_t fmap = kPhi);
/// output_saver with its omap (kPhi for grid axes of size 1; thread level: all kPhi).
OpAttrs saver(int32_t io_index, std::array<int8_t, 3> omap = {kPhi, kPhi, kPhi});
/// accum: kPhi sums over the iterations; a dim concatenates them along it.
OpAttrs accum(int32_t dim = kPhi);
/// sum(dim, to), also the attributes of concat (dim) and repeat (dim, times) via the fields.
OpAttrs sum(int32_t dim, int64_t to = 1);
/// A binary op with a constant operand at position pos (0: left, 1: right).
OpAttrs scalar(Scalar value, int8_t pos = 1);
}  // namespace attrs

/// A tensor of a graph (a DTensor at kernel level, an STensor at block level, registers at thread
/// level).
struct Tensor {
  TensorType type;
  /// Memory order of the dims, outermost first (identity = row-major). Changes speed, never meaning.
  std::vector<int8_t> layout;
  OpId producer;
  /// Name from the program (inputs, named statements); empty for temporaries.
  std::string name;
  friend bool operator==(const Tensor&, const Tensor&) = default;
};

/// A node of a graph.
struct Op {
  OpKind kind = OpKind::input;
  std::vector<TensorId> inputs;
  std::vector<TensorId> outputs;
  OpAttrs attrs;
  friend bool operator==(const Op&, const Op&) = default;
};

/// Whether a block op is an accumulator that sums its iterations (accum with dim kPhi), not one
/// that concatenates them. It keeps its sums in f32 whatever its dtype, as tensor-core matmuls
/// and reductions do: shared memory, the cost model and the emitter all size its tensors so.
inline bool is_sum_accumulator(const Op& op) { return op.kind == OpKind::accum && op.attrs.dim == kPhi; }

/// A kernel, block or thread graph.
struct Graph {
  Level level = Level::kernel;
  std::vector<Tensor> tensors;
  std::vector<Op> ops;
  /// kernel: program outputs in order; block and thread: unused (savers say what leaves).
  std::vector<TensorId> outputs;
  /// Names of the program outputs, parallel to `outputs` (kernel level).
  std::vector<std::string> output_names;
  /// block and thread: types of what the enclosing op passes in, by io_index.
  std::vector<TensorType> params;
  /// Nested graphs referred to by OpAttrs::body.
  std::vector<Graph> bodies;
  /// block: grid dims, threads per block, for-loop iterations.
  Dim3 grid;
  Dim3 threads{128, 1, 1};
  int64_t forloop = 1;

  friend bool operator==(const Graph&, const Graph&) = default;

  const Tensor& tensor(TensorId id) const;
  const Op& op(OpId id) const;
  const TensorType& type(TensorId id) const { return tensor(id).type; }

  /// Appends an op after checking it (level, arity, ids, attributes, shape rule) and creates its
  /// output tensors; returns the new op's id or why it cannot be added. The graph is unchanged
  /// on rejection. For graph_kernel and thread_graph, `body` is moved into `bodies`.
  Expected<OpId> append(OpKind kind, std::vector<TensorId> inputs, OpAttrs attrs = {});
  Expected<OpId> append_with_body(OpKind kind, std::vector<TensorId> inputs, Graph body);

  /// Shorthands for building graphs in code and tests: append and return the first output.
  /// They throw InternalError on rejection; use append() where rejection is expected.
  TensorId add_input(std::string name, Shape shape, DType dtype = DType::f16);
  TensorId add(OpKind kind, std::vector<TensorId> inputs, OpAttrs attrs = {});
  /// Marks a tensor as a program output (kernel level).
  void mark_output(TensorId t, std::string name);
};

/// Creates an empty block graph for a kernel op whose inputs have the given types.
Graph make_block_graph(std::vector<TensorType> params, Dim3 grid, int64_t forloop, Dim3 threads = {128, 1, 1});
/// Creates an empty thread graph for a thread_graph op whose inputs have the given types.
Graph make_thread_graph(std::vector<TensorType> params);

/// Infers the output types of an op from its operand types, or says why the op is invalid.
/// `g` supplies the context: block-graph params, grid and for-loop for iterators and savers, and
/// the bodies of graph_kernel / thread_graph ops.
Expected<std::vector<TensorType>> infer_output_types(const Graph& g, OpKind kind,
                                                     const std::vector<TensorType>& inputs,
                                                     const OpAttrs& attrs);

/// The types of the DTensors (block graph) or STensors (thread graph) written by a body's output
/// savers, indexed by io_index; rejected if an index is missing, duplicated or inconsistent.
Expected<std::vector<TensorType>> body_output_types(const Graph& body);

/// The full-tensor shape an output saver writes: its tile with each omap dim multiplied by the
/// grid extent. @pre g.level == block
Shape saved_shape(const Graph& g, const Shape& tile, const std::array<int8_t, 3>& omap);

/// Structural hash of a whole graph (bodies included); equal graphs hash equal.
size_t hash_value(const Graph& g);

/// Per op: whether its results reach an output of the graph (a program output at kernel level, an
/// output saver in a body). Ops that reach none are dead and need not run.
std::vector<bool> live_ops(const Graph& g);

/// Total number of ops in a graph and all its bodies.
int64_t count_ops(const Graph& g);

}  // namespace mugraph

template <>
struct std::hash<mugraph::Graph> {
  size_t operator()(const mugraph::Graph& g) const { return mugraph::hash_value(g); }
};
