// Shape rules of every op: the one place that says what shape and dtype an op produces.
#include <algorithm>
#include <string>

#include "mugraph/graph.h"

namespace mugraph {

namespace {

using Types = std::vector<TensorType>;

bool dim_ok(int64_t d) { return d >= 1 && d <= kMaxExtent; }

/// NumPy broadcasting of two shapes (right-aligned; extents equal or one of them 1).
Expected<Shape> broadcast(const Shape& a, const Shape& b, std::string_view op) {
  int rank = std::max(a.rank(), b.rank());
  Shape out;  // filled in place: a vector here was an allocation for every element-wise op tried
  for (int i = 0; i < rank; ++i) {
    int ia = a.rank() - rank + i, ib = b.rank() - rank + i;
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return reject(Reason::shape_mismatch) << op << ": shapes " << a.str() << " and " << b.str()
                                            << " do not broadcast (dimension " << i - rank << ": " << da
                                            << " vs " << db << ")";
    out.push_back(da == 1 ? db : da);
  }
  return out;
}

Expected<Types> iterator_types(const Graph& g, const OpAttrs& a) {
  // Graphs built in code may carry any grid; dividing by it below needs it positive.
  for (int axis = 0; axis < 3; ++axis)
    if (g.grid[axis] < 1) return reject(Reason::bad_attribute) << "grid " << axis_name(axis) << " = " << g.grid[axis] << " must be at least 1";
  if (g.forloop < 1) return reject(Reason::bad_attribute) << "for-loop range " << g.forloop << " must be at least 1";
  if (a.io_index < 0 || static_cast<size_t>(a.io_index) >= g.params.size())
    return reject(Reason::malformed) << "input_iterator reads input " << a.io_index << " but the "
                                     << level_name(g.level) << " graph has " << g.params.size() << " inputs";
  TensorType t = g.params[static_cast<size_t>(a.io_index)];
  if (g.level == Level::thread) {
    if (a.imap != OpAttrs{}.imap || a.fmap != kPhi)
      return reject(Reason::bad_map) << "a thread-graph input_iterator has no imap or fmap";
    return Types{t};
  }
  int rank = t.shape.rank();
  bool used[kMaxRank] = {};
  for (int axis = 0; axis < 3; ++axis) {
    int d = a.imap[static_cast<size_t>(axis)];
    if (d == kPhi) continue;
    if (g.grid[axis] == 1)
      return reject(Reason::bad_map) << "imap maps grid axis " << axis_name(axis)
                                     << " of size 1; only axes with more than one block are mapped";
    if (d < 0 || d >= rank)
      return reject(Reason::bad_map) << "imap maps grid axis " << axis_name(axis) << " to dimension " << d
                                     << " of a rank-" << rank << " tensor";
    if (used[d]) return reject(Reason::bad_map) << "imap maps two grid axes to dimension " << d;
    used[d] = true;
    if (t.shape[d] % g.grid[axis] != 0)
      return reject(Reason::not_divisible) << "imap splits dimension " << d << " (extent " << t.shape[d]
                                           << ") over grid axis " << axis_name(axis) << " of " << g.grid[axis]
                                           << " blocks, which does not divide it";
    t.shape[d] /= g.grid[axis];
  }
  if (a.fmap != kPhi) {
    if (g.forloop == 1) return reject(Reason::bad_map) << "fmap maps a dimension but the for-loop has 1 iteration";
    if (a.fmap < 0 || a.fmap >= rank)
      return reject(Reason::bad_map) << "fmap maps the for-loop to dimension " << int(a.fmap) << " of a rank-"
                                     << rank << " tensor";
    if (t.shape[a.fmap] % g.forloop != 0)
      return reject(Reason::not_divisible) << "fmap splits dimension " << int(a.fmap) << " (tile extent "
                                           << t.shape[a.fmap] << ") over " << g.forloop
                                           << " iterations, which does not divide it";
    t.shape[a.fmap] /= g.forloop;
  }
  return Types{t};
}

Expected<Types> saver_types(const Graph& g, const TensorType& in, const OpAttrs& a) {
  if (g.level == Level::thread) {
    if (a.omap != OpAttrs{}.omap) return reject(Reason::bad_map) << "a thread-graph output_saver has no omap";
    return Types{};
  }
  bool used[kMaxRank] = {};
  for (int axis = 0; axis < 3; ++axis) {
    int d = a.omap[static_cast<size_t>(axis)];
    if (g.grid[axis] == 1) {
      if (d != kPhi)
        return reject(Reason::bad_map) << "omap maps grid axis " << axis_name(axis)
                                       << " of size 1; only axes with more than one block are mapped";
      continue;
    }
    if (d == kPhi)
      return reject(Reason::bad_map) << "omap leaves grid axis " << axis_name(axis) << " (" << g.grid[axis]
                                     << " blocks) unmapped; blocks must write disjoint parts of the output";
    if (d < 0 || d >= in.shape.rank())
      return reject(Reason::bad_map) << "omap maps grid axis " << axis_name(axis) << " to dimension " << d
                                     << " of a rank-" << in.shape.rank() << " tile";
    if (used[d]) return reject(Reason::bad_map) << "omap maps two grid axes to dimension " << d;
    used[d] = true;
  }
  return Types{};
}

}  // namespace

Shape saved_shape(const Graph& g, const Shape& tile, const std::array<int8_t, 3>& omap) {
  Shape s = tile;
  for (int axis = 0; axis < 3; ++axis)
    if (omap[static_cast<size_t>(axis)] != kPhi) s[omap[static_cast<size_t>(axis)]] *= g.grid[axis];
  return s;
}

Expected<std::vector<TensorType>> body_output_types(const Graph& body) {
  std::vector<std::optional<TensorType>> found;
  for (const Op& op : body.ops) {
    if (op.kind != OpKind::output_saver) continue;
    int idx = op.attrs.io_index;
    if (idx < 0 || idx > 4096) return reject(Reason::malformed) << "output_saver index " << idx << " is out of range";
    if (op.inputs.size() != 1 || !op.inputs[0].valid() || op.inputs[0].index() >= body.tensors.size())
      return reject(Reason::malformed) << "output_saver " << idx << " has no valid input";
    if (found.size() <= static_cast<size_t>(idx)) found.resize(static_cast<size_t>(idx) + 1);
    if (found[static_cast<size_t>(idx)])
      return reject(Reason::malformed) << "two output_savers write output " << idx;
    TensorType t = body.type(op.inputs[0]);
    if (body.level == Level::block) t.shape = saved_shape(body, t.shape, op.attrs.omap);
    found[static_cast<size_t>(idx)] = t;
  }
  std::vector<TensorType> out;
  for (size_t i = 0; i < found.size(); ++i) {
    if (!found[i]) return reject(Reason::missing_output) << "no output_saver writes output " << i;
    out.push_back(*found[i]);
  }
  if (out.empty()) return reject(Reason::missing_output) << "the " << level_name(body.level) << " graph has no output_saver";
  return out;
}

Expected<std::vector<TensorType>> infer_output_types(const Graph& g, OpKind kind, const Types& in,
                                                     const OpAttrs& a) {
  const OpInfo& info = op_info(kind);
  if (!info.at(g.level))
    return reject(Reason::level_mismatch) << info.name << " does not exist in a " << level_name(g.level) << " graph";
  int operands = static_cast<int>(in.size()) + (a.has_scalar ? 1 : 0);
  if (a.has_scalar && info.category != OpCategory::binary)
    return reject(Reason::bad_attribute) << info.name << " takes no scalar constant";
  if (info.category == OpCategory::binary && (in.empty() || operands != 2))
    return reject(Reason::malformed) << info.name << " takes two operands, at least one a tensor; got "
                                     << in.size() << " tensors" << (a.has_scalar ? " and a constant" : "");
  if (operands < info.arity_min || (info.arity_max >= 0 && operands > info.arity_max))
    return reject(Reason::malformed) << info.name << " takes "
                                     << (info.arity_min == info.arity_max || info.arity_max < 0
                                             ? std::to_string(info.arity_min) + (info.arity_max < 0 ? " or more" : "")
                                             : std::to_string(info.arity_min) + " to " + std::to_string(info.arity_max))
                                     << " operands, got " << operands;
  DType dt = in.empty() ? DType::f32 : in[0].dtype;
  for (const TensorType& t : in) dt = promote(dt, t.dtype);

  Types out;
  switch (info.category) {
    case OpCategory::source: {
      if (a.shape.rank() < 1) return reject(Reason::bad_attribute) << "input '" << a.name << "' needs at least one dimension";
      for (int64_t d : a.shape)
        if (!dim_ok(d))
          return reject(Reason::too_large) << "input '" << a.name << "' has extent " << d
                                           << "; extents must be between 1 and " << kMaxExtent;
      out = {TensorType{a.shape, a.dtype}};
      break;
    }
    case OpCategory::kernel_body:
    case OpCategory::thread_body: {
      Level want = info.category == OpCategory::kernel_body ? Level::block : Level::thread;
      if (a.body < 0 || static_cast<size_t>(a.body) >= g.bodies.size())
        return reject(Reason::malformed) << info.name << " refers to body " << a.body << " of " << g.bodies.size();
      const Graph& body = g.bodies[static_cast<size_t>(a.body)];
      if (body.level != want)
        return reject(Reason::level_mismatch) << info.name << " needs a " << level_name(want) << " graph as its body";
      if (body.params != in) {
        std::string got, want_s;
        for (const auto& t : in) got += " " + t.str();
        for (const auto& t : body.params) want_s += " " + t.str();
        return reject(Reason::shape_mismatch) << info.name << ": its body expects inputs" << want_s << " but gets" << got;
      }
      auto outs = body_output_types(body);
      if (!outs) return outs.rejection();
      out = *outs;
      break;
    }
    case OpCategory::iterator: return iterator_types(g, a);
    case OpCategory::saver: return saver_types(g, in[0], a);
    case OpCategory::accumulator: {
      TensorType t = in[0];
      if (a.dim != kPhi) {
        if (a.dim < 0 || a.dim >= t.shape.rank())
          return reject(Reason::bad_attribute) << "accum concatenates along dimension " << a.dim << " of a rank-"
                                               << t.shape.rank() << " tensor";
        t.shape[a.dim] *= g.forloop;
      }
      out = {t};
      break;
    }
    case OpCategory::unary: out = {TensorType{in[0].shape, dt}}; break;
    case OpCategory::binary: {
      if (in.size() == 1) {
        out = {TensorType{in[0].shape, dt}};
        break;
      }
      auto s = broadcast(in[0].shape, in[1].shape, info.name);
      if (!s) return s.rejection();
      out = {TensorType{*s, dt}};
      break;
    }
    case OpCategory::matmul: {
      const Shape &x = in[0].shape, &y = in[1].shape;
      if (x.rank() < 2 || y.rank() < 2)
        return reject(Reason::shape_mismatch) << "matmul needs operands of rank 2 or more; got " << x.str() << " and " << y.str();
      if (x[x.rank() - 1] != y[y.rank() - 2])
        return reject(Reason::shape_mismatch) << "matmul: " << x.str() << " times " << y.str()
                                              << ": inner extents " << x[x.rank() - 1] << " and " << y[y.rank() - 2]
                                              << " differ";
      Shape bx, by;
      for (int i = 0; i < x.rank() - 2; ++i) bx.push_back(x[i]);
      for (int i = 0; i < y.rank() - 2; ++i) by.push_back(y[i]);
      auto batch = broadcast(bx, by, "matmul batch dimensions");
      if (!batch) return batch.rejection();
      Shape s = *batch;
      if (s.rank() + 2 > kMaxRank) return reject(Reason::too_large) << "matmul result has rank above " << kMaxRank;
      s.push_back(x[x.rank() - 2]);
      s.push_back(y[y.rank() - 1]);
      out = {TensorType{s, dt}};
      break;
    }
    case OpCategory::reduction: {
      Shape s = in[0].shape;
      if (a.dim < 0 || a.dim >= s.rank())
        return reject(Reason::bad_attribute) << "sum over dimension " << a.dim << " of a rank-" << s.rank() << " tensor";
      if (a.to < 1 || s[a.dim] % a.to != 0)
        return reject(Reason::bad_attribute) << "sum(to=" << a.to << ") must divide the extent " << s[a.dim]
                                             << " of dimension " << a.dim;
      s[a.dim] = a.to;
      out = {TensorType{s, dt}};
      break;
    }
    case OpCategory::layout: {
      Shape s = in[0].shape;
      if (kind == OpKind::repeat) {
        if (a.dim < 0 || a.dim >= s.rank())
          return reject(Reason::bad_attribute) << "repeat along dimension " << a.dim << " of a rank-" << s.rank() << " tensor";
        if (a.times < 1 || a.times > kMaxExtent)
          return reject(Reason::bad_attribute) << "repeat times=" << a.times << " must be between 1 and " << kMaxExtent;
        s[a.dim] *= a.times;
      } else if (kind == OpKind::reshape) {
        if (a.shape.rank() < 1) return reject(Reason::bad_attribute) << "reshape needs a target shape";
        for (int64_t d : a.shape)
          if (!dim_ok(d)) return reject(Reason::bad_attribute) << "reshape target extent " << d << " is out of range";
        if (a.shape.numel() != s.numel())
          return reject(Reason::shape_mismatch) << "reshape of " << s.str() << " (" << s.numel() << " elements) to "
                                                << a.shape.str() << " (" << a.shape.numel() << " elements)";
        s = a.shape;
      } else {  // concat
        if (a.dim < 0 || a.dim >= s.rank())
          return reject(Reason::bad_attribute) << "concat along dimension " << a.dim << " of a rank-" << s.rank() << " tensor";
        for (size_t i = 1; i < in.size(); ++i) {
          const Shape& t = in[i].shape;
          bool same = t.rank() == s.rank();
          for (int d = 0; same && d < s.rank(); ++d) same = d == a.dim || t[d] == s[d];
          if (!same)
            return reject(Reason::shape_mismatch) << "concat along dimension " << a.dim << ": " << in[0].shape.str()
                                                  << " and " << t.str() << " differ in another dimension";
          s[a.dim] += t[a.dim];
        }
      }
      out = {TensorType{s, dt}};
      break;
    }
  }
  for (const TensorType& t : out) {
    for (int64_t d : t.shape)
      if (!dim_ok(d)) return reject(Reason::too_large) << info.name << " makes a tensor with extent " << d;
    // Check the element count without overflow: every extent ≤ 2^31 so divide as we go.
    int64_t n = 1;
    for (int64_t d : t.shape) {
      if (n > kMaxElements / d) return reject(Reason::too_large) << info.name << " makes a tensor " << t.shape.str()
                                                                 << " with more than 2^40 elements";
      n *= d;
    }
  }
  return out;
}

}  // namespace mugraph
