/// \file mutate.h
/// A small mutation engine for μGraphs, for testing that the verifier rejects graphs that are
/// almost, but not quite, the reference: one op's kind, one operand, one attribute, one map entry,
/// one constant, or a block graph's grid or for-loop changed. A mutation edits a copy of the graph
/// in place (so stored tensor types may go stale); rebuild() then re-appends every op through
/// Graph::append so the shape rules run again, and the caller keeps only mutants that also pass
/// validate().
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "mugraph/graph.h"

namespace mugraph::mutate {

/// Re-appends every op of `g` (and, recursively, of its bodies) into a fresh graph of the same
/// level, so that every tensor type is what the shape rules infer from the (possibly edited) ops.
/// `params` are the types the enclosing op passes in (ignored at kernel level). Rejected if any
/// op no longer satisfies its shape rule or reads a tensor that does not exist before it.
inline Expected<Graph> rebuild(const Graph& g, const std::vector<TensorType>& params) {
  Graph out;
  if (g.level == Level::block) {
    out = make_block_graph(params, g.grid, g.forloop, g.threads);
  } else if (g.level == Level::thread) {
    out = make_thread_graph(params);
  }
  std::vector<TensorId> map(g.tensors.size());
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    std::vector<TensorId> inputs;
    std::vector<TensorType> input_types;
    for (TensorId t : op.inputs) {
      if (!t.valid() || t.index() >= g.tensors.size() || !map[t.index()].valid())
        return reject(Reason::malformed) << "op " << i << " reads tensor " << t.value << " before it is made";
      inputs.push_back(map[t.index()]);
      input_types.push_back(out.type(inputs.back()));
    }
    Expected<OpId> r = [&]() -> Expected<OpId> {
      if (op.attrs.body < 0) return out.append(op.kind, inputs, op.attrs);
      if (static_cast<size_t>(op.attrs.body) >= g.bodies.size()) return reject(Reason::malformed) << "bad body";
      Expected<Graph> body = rebuild(g.bodies[static_cast<size_t>(op.attrs.body)], input_types);
      if (!body) return body.rejection();
      return out.append_with_body(op.kind, inputs, std::move(body).value());
    }();
    if (!r) return r.rejection();
    const Op& added = out.ops[r->index()];
    if (added.outputs.size() != op.outputs.size())
      return reject(Reason::malformed) << "op " << i << " now has " << added.outputs.size() << " outputs";
    for (size_t k = 0; k < op.outputs.size(); ++k) {
      map[op.outputs[k].index()] = added.outputs[k];
      out.tensors[added.outputs[k].index()].name = g.tensor(op.outputs[k]).name;
    }
  }
  for (size_t k = 0; k < g.outputs.size(); ++k) out.mark_output(map[g.outputs[k].index()], g.output_names[k]);
  return out;
}

/// rebuild() of a kernel graph.
inline Expected<Graph> rebuild(const Graph& kernel_graph) { return rebuild(kernel_graph, {}); }

/// What a mutation changed.
enum class Kind : uint8_t { op_kind, operand, dim_attr, map_entry, io_index, constant, grid_loop };

inline const char* kind_name(Kind k) {
  switch (k) {
    case Kind::op_kind:
      return "op_kind";
    case Kind::operand:
      return "operand";
    case Kind::dim_attr:
      return "dim_attr";
    case Kind::map_entry:
      return "map_entry";
    case Kind::io_index:
      return "io_index";
    case Kind::constant:
      return "constant";
    case Kind::grid_loop:
      return "grid_loop";
  }
  return "?";
}
inline constexpr int kNumKinds = 7;

/// One mutation: the edited (not yet rebuilt) graph and a description of the edit.
struct Mutation {
  Graph graph;
  Kind kind;
  std::string what;
};

/// Draws random single-edit mutations of a μGraph. Deterministic for a seed.
class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  /// A random mutation of `g`; nullopt when the drawn edit has no candidate in `g` (draw again).
  std::optional<Mutation> mutate(const Graph& g) {
    std::vector<Site> sites;
    collect(g, {}, sites);
    if (sites.empty()) return std::nullopt;
    Kind kind = static_cast<Kind>(pick(kNumKinds));
    Mutation m{g, kind, {}};
    const Site& s = sites[static_cast<size_t>(pick(static_cast<int>(sites.size())))];
    Graph& owner = at(m.graph, s.path);
    bool ok = false;
    switch (kind) {
      case Kind::op_kind:
        ok = mutate_kind(owner, s, m.what);
        break;
      case Kind::operand:
        ok = mutate_operand(owner, s, m.what);
        break;
      case Kind::dim_attr:
        ok = mutate_dim(owner, s, m.what);
        break;
      case Kind::map_entry:
        ok = mutate_map(owner, s, m.what);
        break;
      case Kind::io_index:
        ok = mutate_io(owner, s, m.what);
        break;
      case Kind::constant:
        ok = mutate_constant(owner, s, m.what);
        break;
      case Kind::grid_loop:
        ok = mutate_grid_loop(owner, m.what);
        break;
    }
    if (!ok) return std::nullopt;
    m.what = where(s) + ": " + m.what;
    return m;
  }

 private:
  /// An op of the μGraph: the body path (op indices of body-owning ops, from the kernel graph
  /// down) and its index in the graph at that path.
  struct Site {
    std::vector<size_t> path;
    size_t op;
  };

  static void collect(const Graph& g, std::vector<size_t> path, std::vector<Site>& sites) {
    for (size_t i = 0; i < g.ops.size(); ++i) {
      if (g.ops[i].kind != OpKind::input) sites.push_back({path, i});
      if (g.ops[i].attrs.body >= 0) {
        std::vector<size_t> inner = path;
        inner.push_back(i);
        collect(g.bodies[static_cast<size_t>(g.ops[i].attrs.body)], inner, sites);
      }
    }
  }

  static Graph& at(Graph& g, const std::vector<size_t>& path) {
    Graph* cur = &g;
    for (size_t i : path) cur = &cur->bodies[static_cast<size_t>(cur->ops[i].attrs.body)];
    return *cur;
  }

  static std::string where(const Site& s) {
    std::string out = "kernel";
    for (size_t i : s.path) out += "/op" + std::to_string(i);
    return out + " op " + std::to_string(s.op);
  }

  int pick(int n) { return static_cast<int>(std::uniform_int_distribution<int>(0, n - 1)(rng_)); }

  /// A random element of `options` other than `current`; nullopt if there is none.
  template <typename T>
  std::optional<T> other(const std::vector<T>& options, const T& current) {
    std::vector<T> rest;
    for (const T& o : options)
      if (!(o == current)) rest.push_back(o);
    if (rest.empty()) return std::nullopt;
    return rest[static_cast<size_t>(pick(static_cast<int>(rest.size())))];
  }

  bool mutate_kind(Graph& g, const Site& s, std::string& what) {
    Op& op = g.ops[s.op];
    static const std::vector<OpKind> unary = {OpKind::exp,  OpKind::sqr,  OpKind::sqrt,
                                              OpKind::silu, OpKind::relu, OpKind::gelu};
    static const std::vector<OpKind> binary = {OpKind::add, OpKind::sub, OpKind::mul, OpKind::div};
    const std::vector<OpKind>* family = nullptr;
    if (op_info(op.kind).category == OpCategory::unary) family = &unary;
    if (op_info(op.kind).category == OpCategory::binary) family = &binary;
    if (!family) return false;
    auto k = other(*family, op.kind);
    if (!k) return false;
    what = std::string(op_name(op.kind)) + " -> " + std::string(op_name(*k));
    op.kind = *k;
    return true;
  }

  bool mutate_operand(Graph& g, const Site& s, std::string& what) {
    Op& op = g.ops[s.op];
    if (op.inputs.empty()) return false;
    size_t slot = static_cast<size_t>(pick(static_cast<int>(op.inputs.size())));
    TensorId cur = op.inputs[slot];
    std::vector<TensorId> same;
    for (size_t t = 0; t < g.tensors.size(); ++t) {
      TensorId id(static_cast<int32_t>(t));
      if (g.tensors[t].producer.index() < s.op && g.tensors[t].type == g.type(cur)) same.push_back(id);
    }
    auto repl = other(same, cur);
    if (!repl) return false;
    what = "operand " + std::to_string(slot) + " t" + std::to_string(cur.value) + " -> t" + std::to_string(repl->value);
    op.inputs[slot] = *repl;
    return true;
  }

  /// Values a dim attribute can take for a tensor of rank r: kPhi (if allowed) and 0..r-1.
  static std::vector<int> dims(int rank, bool with_phi) {
    std::vector<int> out;
    if (with_phi) out.push_back(kPhi);
    for (int d = 0; d < rank; ++d) out.push_back(d);
    return out;
  }

  bool mutate_dim(Graph& g, const Site& s, std::string& what) {
    Op& op = g.ops[s.op];
    if (op.inputs.empty()) return false;
    const Shape& in = g.type(op.inputs[0]).shape;
    if (op.kind == OpKind::sum) {
      if (pick(2) == 0) {
        auto d = other(dims(in.rank(), false), static_cast<int>(op.attrs.dim));
        if (!d) return false;
        what = "sum dim " + std::to_string(op.attrs.dim) + " -> " + std::to_string(*d);
        op.attrs.dim = *d;
        op.attrs.to = 1;
      } else {
        std::vector<int64_t> divisors;
        int64_t n = in[op.attrs.dim];
        for (int64_t t = 1; t <= n; ++t)
          if (n % t == 0) divisors.push_back(t);
        auto t = other(divisors, op.attrs.to);
        if (!t) return false;
        what = "sum to " + std::to_string(op.attrs.to) + " -> " + std::to_string(*t);
        op.attrs.to = *t;
      }
      return true;
    }
    if (op.kind == OpKind::accum || op.kind == OpKind::concat || op.kind == OpKind::repeat) {
      auto d = other(dims(in.rank(), op.kind == OpKind::accum), static_cast<int>(op.attrs.dim));
      if (!d) return false;
      what = std::string(op_name(op.kind)) + " dim " + std::to_string(op.attrs.dim) + " -> " + std::to_string(*d);
      op.attrs.dim = *d;
      return true;
    }
    return false;
  }

  bool mutate_map(Graph& g, const Site& s, std::string& what) {
    Op& op = g.ops[s.op];
    if (g.level != Level::block) return false;
    if (op.kind == OpKind::input_iterator) {
      if (static_cast<size_t>(op.attrs.io_index) >= g.params.size()) return false;
      int rank = g.params[static_cast<size_t>(op.attrs.io_index)].shape.rank();
      int axis = pick(4);  // 3: the fmap
      int8_t& entry = axis == 3 ? op.attrs.fmap : op.attrs.imap[static_cast<size_t>(axis)];
      auto v = other(dims(rank, true), static_cast<int>(entry));
      if (!v) return false;
      what = std::string(axis == 3 ? "fmap" : "imap[" + std::to_string(axis) + "]") + " " + std::to_string(entry) +
             " -> " + std::to_string(*v);
      entry = static_cast<int8_t>(*v);
      return true;
    }
    if (op.kind == OpKind::output_saver) {
      int rank = g.type(op.inputs[0]).shape.rank();
      int axis = pick(3);
      int8_t& entry = op.attrs.omap[static_cast<size_t>(axis)];
      auto v = other(dims(rank, true), static_cast<int>(entry));
      if (!v) return false;
      what = "omap[" + std::to_string(axis) + "] " + std::to_string(entry) + " -> " + std::to_string(*v);
      entry = static_cast<int8_t>(*v);
      return true;
    }
    return false;
  }

  bool mutate_io(Graph& g, const Site& s, std::string& what) {
    Op& op = g.ops[s.op];
    if (op.kind != OpKind::input_iterator && op.kind != OpKind::output_saver) return false;
    int n = op.kind == OpKind::input_iterator ? static_cast<int>(g.params.size()) : 2;
    std::vector<int> options;
    for (int i = 0; i < n; ++i) options.push_back(i);
    auto v = other(options, static_cast<int>(op.attrs.io_index));
    if (!v) return false;
    what =
        std::string(op_name(op.kind)) + " io_index " + std::to_string(op.attrs.io_index) + " -> " + std::to_string(*v);
    op.attrs.io_index = *v;
    return true;
  }

  bool mutate_constant(Graph& g, const Site& s, std::string& what) {
    Op& op = g.ops[s.op];
    if (!op.attrs.has_scalar) return false;
    Scalar old = op.attrs.scalar;
    switch (pick(3)) {
      case 0: {  // a relative change of 1e-4: c · 1.0001, exactly
        if (old.mantissa > 100000000000000 || old.mantissa < -100000000000000) return false;
        op.attrs.scalar = Scalar{old.mantissa * 10001, old.exp10 - 4}.normalized();
        break;
      }
      case 1: {
        static const std::vector<Scalar> values = {{2, 0}, {5, -1}, {-1, 0}, {1, 0}, {3, 0}, {4097, 0}};
        auto v = other(values, old.normalized());
        if (!v) return false;
        op.attrs.scalar = *v;
        break;
      }
      default:
        op.attrs.scalar_pos = static_cast<int8_t>(1 - op.attrs.scalar_pos);
        what = "constant " + old.str() + " moved to position " + std::to_string(op.attrs.scalar_pos);
        return true;
    }
    what = "constant " + old.str() + " -> " + op.attrs.scalar.str();
    return true;
  }

  bool mutate_grid_loop(Graph& g, std::string& what) {
    if (g.level != Level::block) return false;
    static const std::vector<int64_t> extents = {1, 2, 4, 8, 16};
    int which = pick(3);  // 0: grid.x, 1: grid.y, 2: forloop
    int64_t& v = which == 0 ? g.grid.x : which == 1 ? g.grid.y : g.forloop;
    auto n = other(extents, v);
    if (!n) return false;
    what = std::string(which == 0   ? "grid.x "
                       : which == 1 ? "grid.y "
                                    : "forloop ") +
           std::to_string(v) + " -> " + std::to_string(*n);
    v = *n;
    return true;
  }

  std::mt19937_64 rng_;
};

}  // namespace mugraph::mutate
