#include "retile.h"

#include <map>
#include <memory>
#include <optional>

namespace mugraph::search_detail {

namespace {

/// Appends a copy of op `op` of `from` to `into` (same kind, operands, attributes and body):
/// false if it no longer fits (its operands' shapes changed).
bool append_copy(Graph& into, const Graph& from, const Op& op) {
  if (op.kind == OpKind::input) {
    into.add_input(op.attrs.name, op.attrs.shape, op.attrs.dtype);
    return true;
  }
  if (op.attrs.body >= 0)
    return into.append_with_body(op.kind, op.inputs, from.bodies[static_cast<size_t>(op.attrs.body)]).ok();
  return into.append(op.kind, op.inputs, op.attrs).ok();
}

/// The kernel graph of `g`'s first `nops` ops (tensor ids unchanged: they number the tensors in
/// the order the ops make them).
Graph leading_ops(const Graph& g, size_t nops) {
  Graph out;
  out.level = Level::kernel;
  for (size_t i = 0; i < nops; ++i)
    MUGRAPH_CHECK(append_copy(out, g, g.ops[i])) << "retile: an op of a candidate does not fit its own operands";
  return out;
}

void add_int(std::string& key, int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); }

/// tiling_free_structure's part for one graph (bodies included).
void add_structure(std::string& key, const Graph& g) {
  add_int(key, static_cast<int64_t>(g.ops.size()));
  for (const Op& op : g.ops) {
    add_int(key, static_cast<int64_t>(op.kind));
    for (TensorId t : op.inputs) add_int(key, t.value);
    OpAttrs a = op.attrs;
    a.imap = a.omap = {kPhi, kPhi, kPhi};
    a.fmap = kPhi;
    a.body = -1;
    add_int(key, static_cast<int64_t>(std::hash<std::string>{}(a.name)));
    add_int(key, a.dim);
    add_int(key, a.to);
    add_int(key, a.times);
    add_int(key, a.io_index);
    add_int(key, a.has_scalar ? 1 : 0);
    if (a.has_scalar) {
      add_int(key, a.scalar.mantissa);
      add_int(key, a.scalar.exp10);
      add_int(key, a.scalar_pos);
    }
    if (op.attrs.body >= 0) add_structure(key, g.bodies[static_cast<size_t>(op.attrs.body)]);
  }
}

class Retiler {
 public:
  Retiler(SearchContext& ctx, Generator& gen, const FoundCandidate& seed, const std::atomic<bool>& stop,
          RetileStats& stats)
      : ctx_(ctx), gen_(gen), seed_(seed), stop_(stop), stats_(stats) {}

  std::vector<FoundCandidate> run() {
    const Graph& g = seed_.graph;
    std::vector<FoundCandidate> found;
    for (size_t p = 0; p < g.ops.size(); ++p) {
      const Op& op = g.ops[p];
      if (op.kind != OpKind::graph_kernel) continue;
      // The choices made for the kernels after this one hold for this one's variants only.
      memo_.clear();
      varied_from_ = op.outputs.front().index();
      const auto prefix = std::make_shared<const Graph>(leading_ops(g, p));
      const Graph& body = g.bodies[static_cast<size_t>(op.attrs.body)];
      const KernelConfig current = config_of(body);
      const std::shared_ptr<const ConfigList> list = gen_.configs_for(prefix, op.inputs);
      for (const KernelConfig& c : list->configs) {
        if (stop_.load(std::memory_order_relaxed)) {
          stats_.stopped = true;
          return found;
        }
        if (c == current) continue;
        ++stats_.configs;
        for (Graph& k : gen_.retile_kernel(prefix, op.inputs, c, body)) {
          if (!same_outputs(k, op)) continue;
          ++stats_.rebuilt;
          if (std::optional<FoundCandidate> r = complete(std::move(k), p + 1)) found.push_back(std::move(*r));
        }
      }
    }
    return found;
  }

 private:
  /// Whether kernel graph `k`'s last kernel writes as many tensors as the seed's kernel `op` it
  /// retiles: a block graph can close with or without saving a program output it also reads
  /// (generator.cpp, try_close), and the seed's later ops and outputs name its tensors by id.
  static bool same_outputs(const Graph& k, const Op& op) { return k.ops.back().outputs.size() == op.outputs.size(); }

  /// Appends the seed's ops from `from` on to `g`, the seed's first `from` ops with one kernel
  /// retiled: each graph-defined kernel under the configuration that gives the best estimate.
  /// The best complete μGraph, or none.
  std::optional<FoundCandidate> complete(Graph g, size_t from) {
    const Graph& seed = seed_.graph;
    for (size_t i = from; i < seed.ops.size(); ++i) {
      const Op& op = seed.ops[i];
      if (op.kind != OpKind::graph_kernel) {
        if (!append_copy(g, seed, op)) return std::nullopt;
        continue;
      }
      const std::optional<GraphLabels> labels = kernel_graph_labels(ctx_.indices(), g);
      if (!labels) return std::nullopt;
      const std::string key = rest_key(g, *labels, i);
      if (auto hit = memo_.find(key); hit != memo_.end()) {
        if (!hit->second) return std::nullopt;
        // What the rest reads has the same shapes and labels as when it was chosen: its ops fit as
        // they are, and (the estimate being a sum over kernels) are still the best choice.
        const Graph& best = *hit->second;
        for (size_t j = i; j < seed.ops.size(); ++j)
          MUGRAPH_CHECK(append_copy(g, best, best.ops[j])) << "retile: a chosen kernel no longer fits";
        return finish(std::move(g));
      }
      const auto prefix = std::make_shared<const Graph>(std::move(g));
      std::optional<FoundCandidate> best;
      const std::shared_ptr<const ConfigList> list = gen_.configs_for(prefix, op.inputs);
      for (const KernelConfig& c : list->configs) {
        if (stop_.load(std::memory_order_relaxed)) break;
        ++stats_.configs;
        for (Graph& k : gen_.retile_kernel(prefix, op.inputs, c, seed.bodies[static_cast<size_t>(op.attrs.body)])) {
          if (!same_outputs(k, op)) continue;
          ++stats_.rebuilt;
          std::optional<FoundCandidate> r = complete(std::move(k), i + 1);
          if (r && (!best || r->estimated_us < best->estimated_us)) best = std::move(r);
        }
      }
      memo_.emplace(key, best ? std::optional<Graph>(best->graph) : std::nullopt);
      return best;
    }
    return finish(std::move(g));
  }

  /// What the choices for the seed's ops from `i` on depend on: the shapes, dtypes and labels of
  /// the tensors the retiled kernel and the ops after it made (the ones before are the seed's).
  std::string rest_key(const Graph& g, const GraphLabels& labels, size_t i) const {
    std::string key;
    add_int(key, static_cast<int64_t>(i));
    for (size_t t = varied_from_; t < g.tensors.size(); ++t) {
      const TensorType& type = g.tensors[t].type;
      add_int(key, type.shape.rank());
      for (int d = 0; d < type.shape.rank(); ++d) add_int(key, type.shape[d]);
      add_int(key, static_cast<int64_t>(type.dtype));
      const DimLabels& l = labels.tensors[t];
      for (int d = 0; d < l.rank; ++d) add_int(key, l[d]);
      for (const CarrierEntry& c : l.carriers) add_int(key, c.index), add_int(key, c.factor), add_int(key, c.count);
    }
    return key;
  }

  /// The candidate `g` makes once the seed's outputs are marked, if it computes the program's
  /// outputs: the consider_prefix checks (shapes, labels, abstract expressions, no dead ops).
  std::optional<FoundCandidate> finish(Graph g) {
    const Graph& seed = seed_.graph;
    for (size_t j = 0; j < seed.outputs.size(); ++j) g.mark_output(seed.outputs[j], seed.output_names[j]);
    const std::optional<GraphLabels> labels = kernel_graph_labels(ctx_.indices(), g);
    if (!labels) return std::nullopt;
    const std::vector<ExprId> exprs = expressions(g, ctx_.exprs()).tensors;
    for (size_t j = 0; j < g.outputs.size(); ++j)
      if (!computes_program_output(ctx_, g, *labels, exprs, g.outputs[j].index(), j)) return std::nullopt;
    if (has_dead_ops(g)) return std::nullopt;
    ++stats_.complete;
    FoundCandidate c = found_candidate(ctx_, std::move(g), seed_.path);
    c.task_order_us = seed_.task_order_us;
    return c;
  }

  SearchContext& ctx_;
  Generator& gen_;
  const FoundCandidate& seed_;
  const std::atomic<bool>& stop_;
  RetileStats& stats_;
  size_t varied_from_ = 0;  ///< the first tensor of the retiled kernel
  /// By rest_key: the best complete graph for the seed's ops from there on (none: no
  /// configuration of them fits).
  std::map<std::string, std::optional<Graph>> memo_;
};

}  // namespace

std::string tiling_free_structure(const Graph& kernel_graph) {
  std::string key;
  add_structure(key, kernel_graph);
  return key;
}

KernelConfig config_of(const Graph& body) {
  KernelConfig c;
  c.grid = body.grid;
  c.forloop = body.forloop;
  for (const Op& op : body.ops) {
    if (op.kind != OpKind::input_iterator) continue;
    const auto i = static_cast<size_t>(op.attrs.io_index);
    MUGRAPH_CHECK(i < c.imaps.size()) << "a graph-defined kernel with more than " << c.imaps.size() << " operands";
    c.imaps[i] = op.attrs.imap;
    c.fmaps[i] = op.attrs.fmap;
  }
  return c;
}

std::vector<FoundCandidate> retile(SearchContext& ctx, Generator& gen, const FoundCandidate& seed,
                                   const std::atomic<bool>& stop, RetileStats& stats) {
  return Retiler(ctx, gen, seed, stop, stats).run();
}

}  // namespace mugraph::search_detail
