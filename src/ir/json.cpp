// The versioned JSON format of μGraphs (docs/json-format.md).
//
// Writing walks the Graph and emits, per op, only the attributes its kind carries (attr_fields in
// graph.h is the one place that says which). Reading is strict: every value is type- and range-checked,
// unknown fields are errors, and every error names the JSON path of the offending value, so no
// input can crash the reader or leave an index that points outside its vector.
#include "mugraph/json.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>

#include "json_reader.h"

namespace mugraph {

namespace {

using json_reading::Json;

constexpr std::string_view kFormatName = "mugraph-ugraph";
/// Deepest bracket nesting accepted; a complete μGraph needs about 15.
constexpr int kMaxNesting = 64;
/// Deepest graph nesting accepted: kernel → block → thread, and one spare level so that a
/// misplaced body is reported by validate() rather than here.
constexpr int kMaxGraphDepth = 4;
/// Line width of the pretty printer: a value whose one-line form fits stays on one line.
constexpr size_t kLineWidth = 120;

// ---------------------------------------------------------------------------------------------
// Which attributes an op kind carries: the one place that says so. Writer and reader both use it.

/// The field (bit) a JSON key of an op names, or 0 for keys that are not attributes.
uint32_t field_of_key(std::string_view key) {
  static constexpr std::pair<std::string_view, uint32_t> kKeys[] = {
      {"name", kAttrName},   {"shape", kAttrShape},   {"dtype", kAttrDType},       {"dim", kAttrDim},     {"to", kAttrTo},
      {"times", kAttrTimes}, {"scalar", kAttrScalar}, {"scalar_pos", kAttrScalar}, {"input", kAttrInput}, {"output", kAttrOutput},
      {"imap", kAttrInMaps}, {"fmap", kAttrInMaps},   {"omap", kAttrOMap},         {"accum", kAttrAccum}, {"body", kAttrBody},
  };
  for (const auto& [name, bit] : kKeys)
    if (name == key) return bit;
  return 0;
}

/// Level-dependent defaults of the graph fields that not every level uses.
Graph level_defaults(Level level) {
  if (level == Level::thread) return make_thread_graph({});
  Graph g;
  g.level = level;
  return g;
}

std::vector<int8_t> identity_layout(int rank) {
  std::vector<int8_t> layout(static_cast<size_t>(std::max(rank, 0)));
  std::iota(layout.begin(), layout.end(), int8_t{0});
  return layout;
}

// ---------------------------------------------------------------------------------------------
// Writing.

Json shape_json(const Shape& s) {
  Json a = Json::array();
  for (int64_t d : s) a.push_back(d);
  return a;
}

Json ids_json(const std::vector<TensorId>& ids) {
  Json a = Json::array();
  for (TensorId t : ids) a.push_back(t.value);
  return a;
}

Json dim3_json(const Dim3& d) { return Json::array({d.x, d.y, d.z}); }

Json map_entry(int8_t d) { return d == kPhi ? Json(nullptr) : Json(static_cast<int>(d)); }

/// A grid map as {"x": d, ...}: axes with more than one block (block level), and any axis that
/// is mapped although it should not be, so that the round trip stays exact for invalid graphs.
Json grid_map_json(const Graph& g, const std::array<int8_t, 3>& map) {
  Json m = Json::object();
  for (int axis = 0; axis < 3; ++axis) {
    int8_t d = map[static_cast<size_t>(axis)];
    if ((g.level == Level::block && g.grid[axis] > 1) || d != kPhi) m[std::string(axis_name(axis))] = map_entry(d);
  }
  return m;
}

Json op_json(const Graph& g, const Op& op) {
  const OpAttrs& a = op.attrs;
  const uint32_t f = attr_fields(op.kind);
  Json j = Json::object();
  j["op"] = std::string(op_name(op.kind));
  j["inputs"] = ids_json(op.inputs);
  j["outputs"] = ids_json(op.outputs);
  if (f & kAttrName) j["name"] = a.name;
  if (f & kAttrShape) j["shape"] = shape_json(a.shape);
  if (f & kAttrDType) j["dtype"] = std::string(dtype_name(a.dtype));
  if (f & kAttrDim) j["dim"] = a.dim;
  if (f & kAttrTo) j["to"] = a.to;
  if (f & kAttrTimes) j["times"] = a.times;
  if ((f & kAttrScalar) && a.has_scalar) {
    j["scalar"] = a.scalar.str();
    j["scalar_pos"] = a.scalar_pos == 0 ? "left" : "right";
  }
  if (f & kAttrInput) j["input"] = a.io_index;
  if (f & kAttrOutput) j["output"] = a.io_index;
  if (f & kAttrInMaps) {
    Json m = grid_map_json(g, a.imap);
    if (!m.empty()) j["imap"] = std::move(m);
    if ((g.level == Level::block && g.forloop > 1) || a.fmap != kPhi) j["fmap"] = map_entry(a.fmap);
  }
  if (f & kAttrOMap) {
    Json m = grid_map_json(g, a.omap);
    if (!m.empty()) j["omap"] = std::move(m);
  }
  if (f & kAttrAccum) j["accum"] = a.dim == kPhi ? Json("sum") : Json::object({{"concat", a.dim}});
  if (f & kAttrBody) j["body"] = a.body;
  return j;
}

Json tensor_json(const Tensor& t) {
  Json j = Json::object({{"shape", shape_json(t.type.shape)}, {"dtype", std::string(dtype_name(t.type.dtype))}});
  if (!t.name.empty()) j["name"] = t.name;
  if (t.layout != identity_layout(t.type.shape.rank())) {
    Json l = Json::array();
    for (int8_t d : t.layout) l.push_back(static_cast<int>(d));
    j["layout"] = std::move(l);
  }
  return j;
}

Json graph_json(const Graph& g) {
  const Graph defaults = level_defaults(g.level);
  Json j = Json::object();
  j["level"] = std::string(level_name(g.level));
  if (g.level != Level::kernel || !g.params.empty()) {
    Json params = Json::array();
    for (const TensorType& t : g.params)
      params.push_back(Json::object({{"shape", shape_json(t.shape)}, {"dtype", std::string(dtype_name(t.dtype))}}));
    j["params"] = std::move(params);
  }
  if (g.level == Level::block || g.grid != defaults.grid) j["grid"] = dim3_json(g.grid);
  if (g.level == Level::block || g.threads != defaults.threads) j["threads"] = dim3_json(g.threads);
  if (g.level == Level::block || g.forloop != defaults.forloop) j["forloop"] = g.forloop;

  Json tensors = Json::array();
  for (const Tensor& t : g.tensors) tensors.push_back(tensor_json(t));
  j["tensors"] = std::move(tensors);

  Json ops = Json::array();
  for (const Op& op : g.ops) ops.push_back(op_json(g, op));
  j["ops"] = std::move(ops);

  if (g.level == Level::kernel || !g.outputs.empty()) {
    Json outs = Json::array();
    for (size_t i = 0; i < g.outputs.size(); ++i)
      outs.push_back(Json::object(
          {{"tensor", g.outputs[i].value}, {"name", i < g.output_names.size() ? g.output_names[i] : std::string()}}));
    j["outputs"] = std::move(outs);
  }
  if (!g.bodies.empty()) {
    Json bodies = Json::array();
    for (const Graph& b : g.bodies) bodies.push_back(graph_json(b));
    j["bodies"] = std::move(bodies);
  }
  return j;
}

/// Scalars and strings as JSON text; invalid UTF-8 in names is replaced rather than thrown on.
std::string scalar_text(const Json& v) { return v.dump(-1, ' ', false, Json::error_handler_t::replace); }

/// The one-line form of a value: {"a": 1, "b": [1, 2]}.
std::string one_line(const Json& v) {
  if (v.is_object()) {
    std::string s = "{";
    bool first = true;
    for (const auto& [key, val] : v.items()) {
      s += (first ? "" : ", ") + scalar_text(Json(key)) + ": " + one_line(val);
      first = false;
    }
    return s + "}";
  }
  if (v.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + one_line(v[i]);
    return s + "]";
  }
  return scalar_text(v);
}

/// Pretty-prints with two-space indentation; a container whose one-line form fits in kLineWidth
/// (with its indentation, its key `lead` characters and a trailing comma) stays on one line.
void write_pretty(std::string& out, const Json& v, size_t indent, size_t lead) {
  std::string flat = one_line(v);
  if (!v.is_structured() || v.empty() || indent + lead + flat.size() + 1 <= kLineWidth) {
    out += flat;
    return;
  }
  std::string pad(indent + 2, ' ');
  bool first = true;
  if (v.is_object()) {
    out += "{\n";
    for (const auto& [key, val] : v.items()) {
      std::string k = scalar_text(Json(key)) + ": ";
      out += (first ? "" : ",\n") + pad + k;
      write_pretty(out, val, indent + 2, k.size());
      first = false;
    }
    out += "\n" + std::string(indent, ' ') + "}";
  } else {
    out += "[\n";
    for (const Json& val : v) {
      out += (first ? "" : ",\n") + pad;
      write_pretty(out, val, indent + 2, 0);
      first = false;
    }
    out += "\n" + std::string(indent, ' ') + "]";
  }
}

// ---------------------------------------------------------------------------------------------
// Reading.

/// Reads one document; every check throws UserError("PATH: message", {filename}).
class Reader : public json_reading::ValueReader {
 public:
  using ValueReader::ValueReader;

  Graph document(const Json& doc, const std::string& base) {
    expect_object(doc, base, "expected an object with \"format\", \"version\" and \"graph\"");
    allow_keys(doc, base, {"format", "version", "graph"});
    const Json& format = field(doc, base, "format");
    if (!format.is_string() || format.get<std::string>() != kFormatName)
      fail(base + "/format", "expected \"" + std::string(kFormatName) + "\"; this is not a mugraph μGraph");
    const Json& version = field(doc, base, "version");
    if (!version.is_number_integer()) fail(base + "/version", "expected an integer");
    if (version.get<int64_t>() != kJsonFormatVersion)
      fail(base + "/version", "unsupported version " + version.dump() + "; this mugraph reads version " +
                                  std::to_string(kJsonFormatVersion));
    return graph(field(doc, base, "graph"), base + "/graph", 1);
  }

  /// Appends the tensors, ops and bodies of an extension value to `g`, a kernel graph.
  Graph extension(Graph g, const Json& v, const std::string& path) const {
    expect_object(v, path,
                  "expected the tensors, ops and bodies appended to a graph: an object with \"tensors\" and \"ops\"");
    allow_keys(v, path, {"tensors", "ops", "bodies"});
    if (g.level != Level::kernel) fail(path, "only a kernel graph can be extended");
    const size_t tensors_before = g.tensors.size();
    const size_t bodies_before = g.bodies.size();
    read_tensors(g, v, path);
    const Json* bodies = optional(v, "bodies");
    if (bodies) array(*bodies, path + "/bodies", "an array of graphs");
    read_ops(g, v, path, bodies_before + (bodies ? bodies->size() : 0), tensors_before);
    if (bodies) read_bodies(g, *bodies, path + "/bodies", 1);
    return g;
  }

 private:
  Shape shape(const Json& v, const std::string& path) const {
    array(v, path, "a shape: an array of extents");
    if (v.size() > static_cast<size_t>(kMaxRank))
      fail(path,
           "a shape has at most " + std::to_string(kMaxRank) + " dimensions; this one has " + std::to_string(v.size()));
    Shape s;
    for (size_t i = 0; i < v.size(); ++i)
      s.push_back(integer(v[i], path + "/" + std::to_string(i), 1, kMaxExtent,
                          "an extent between 1 and " + std::to_string(kMaxExtent)));
    return s;
  }

  DType dtype(const Json& v, const std::string& path) const {
    std::string name = string(v, path, "a dtype: \"f16\", \"bf16\" or \"f32\"");
    auto t = parse_dtype(name);
    if (!t) fail(path, "unknown dtype \"" + name + "\"; expected \"f16\", \"bf16\" or \"f32\"");
    return *t;
  }

  TensorType tensor_type(const Json& v, const std::string& path, bool allow_extra) const {
    expect_object(v, path, "expected an object with \"shape\" and \"dtype\"");
    if (allow_extra)
      allow_keys(v, path, {"shape", "dtype", "name", "layout"});
    else
      allow_keys(v, path, {"shape", "dtype"});
    TensorType t;
    t.shape = shape(field(v, path, "shape"), path + "/shape");
    if (const Json* d = optional(v, "dtype")) t.dtype = dtype(*d, path + "/dtype");
    return t;
  }

  Dim3 dim3(const Json& v, const std::string& path) const {
    array(v, path, "three positive integers [x, y, z]");
    if (v.size() != 3) fail(path, "expected three positive integers [x, y, z]");
    Dim3 d;
    for (int axis = 0; axis < 3; ++axis)
      d[axis] = integer(v[static_cast<size_t>(axis)], path + "/" + std::to_string(axis), 1,
                        std::numeric_limits<int32_t>::max(), "a positive 32-bit integer");
    return d;
  }

  /// A map entry: a dimension 0..127 or null (φ).
  int8_t map_entry(const Json& v, const std::string& path, const char* what) const {
    if (v.is_null()) return kPhi;
    return static_cast<int8_t>(integer(v, path, 0, std::numeric_limits<int8_t>::max(), what));
  }

  std::array<int8_t, 3> grid_map(const Json& v, const std::string& path) const {
    const char* what = "an object mapping grid axes to dims or null";
    if (!v.is_object()) fail(path, std::string("expected ") + what);
    std::array<int8_t, 3> m{kPhi, kPhi, kPhi};
    for (const auto& [key, val] : v.items()) {
      int axis = key == "x" ? 0 : key == "y" ? 1 : key == "z" ? 2 : -1;
      if (axis < 0) fail(path, "unknown grid axis \"" + key + "\"; expected \"x\", \"y\" or \"z\"");
      m[static_cast<size_t>(axis)] = map_entry(val, path + "/" + key, "a dimension (0 or more) or null");
    }
    return m;
  }

  TensorId tensor_id(const Json& v, const std::string& path, size_t num_tensors) const {
    int64_t id = integer(v, path, 0, std::numeric_limits<int64_t>::max(), "a tensor id (an integer, 0 or more)");
    if (static_cast<uint64_t>(id) >= num_tensors)
      fail(path, "tensor " + std::to_string(id) + " does not exist; the graph has " + std::to_string(num_tensors) +
                     " tensors");
    return TensorId(static_cast<int32_t>(id));
  }

  std::vector<TensorId> ids(const Json& v, const std::string& path, size_t num_tensors) const {
    array(v, path, "an array of tensor ids");
    std::vector<TensorId> out;
    out.reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i) out.push_back(tensor_id(v[i], path + "/" + std::to_string(i), num_tensors));
    return out;
  }

  Op op(const Json& v, const std::string& path, size_t num_tensors, size_t num_bodies) const {
    expect_object(v, path, "expected an op: an object with \"op\", \"inputs\" and \"outputs\"");
    std::string name = string(field(v, path, "op"), path + "/op", "an op name");
    auto kind = op_by_name(name);
    if (!kind) fail(path + "/op", "unknown op \"" + name + "\"");
    Op op;
    op.kind = *kind;
    const uint32_t allowed = attr_fields(*kind);
    for (const auto& [key, val] : v.items()) {
      if (key == "op" || key == "inputs" || key == "outputs") continue;
      uint32_t bit = field_of_key(key);
      if (bit == 0) fail(path, "unknown field \"" + key + "\"");
      if ((allowed & bit) == 0) fail(path, "field \"" + key + "\" does not apply to " + name);
    }
    op.inputs = ids(field(v, path, "inputs"), path + "/inputs", num_tensors);
    op.outputs = ids(field(v, path, "outputs"), path + "/outputs", num_tensors);

    OpAttrs& a = op.attrs;
    auto opt = [&](const char* key) { return optional(v, key); };
    auto at = [&](const char* key) { return path + "/" + key; };
    const int64_t i32max = std::numeric_limits<int32_t>::max(), i32min = std::numeric_limits<int32_t>::min();
    const int64_t i64max = std::numeric_limits<int64_t>::max(), i64min = std::numeric_limits<int64_t>::min();
    if (allowed & kAttrName) a.name = string(field(v, path, "name"), at("name"), "a string");
    if (allowed & kAttrShape) a.shape = shape(field(v, path, "shape"), at("shape"));
    if (const Json* d = opt("dtype")) a.dtype = dtype(*d, at("dtype"));
    if (const Json* d = opt("dim"))
      a.dim = static_cast<int32_t>(integer(*d, at("dim"), i32min, i32max, "a 32-bit integer"));
    if (const Json* d = opt("to")) a.to = integer(*d, at("to"), i64min, i64max, "an integer");
    if (const Json* d = opt("times")) a.times = integer(*d, at("times"), i64min, i64max, "an integer");
    if (const Json* s = opt("scalar")) {
      std::string text = string(*s, at("scalar"), "a decimal number as a string, like \"0.125\"");
      auto value = parse_scalar(text);
      if (!value) fail(at("scalar"), "\"" + text + "\" is not a decimal number mugraph can hold exactly");
      a.has_scalar = true;
      a.scalar = *value;
    }
    if (const Json* p = opt("scalar_pos")) {
      if (!a.has_scalar) fail(at("scalar_pos"), "\"scalar_pos\" needs a \"scalar\"");
      std::string pos = string(*p, at("scalar_pos"), "\"left\" or \"right\"");
      if (pos != "left" && pos != "right") fail(at("scalar_pos"), "expected \"left\" or \"right\"");
      a.scalar_pos = pos == "left" ? 0 : 1;
    }
    // As in the program format: a divisor of 0 makes every element inf or NaN, so nothing could be
    // checked against the graph (verification would reject every comparison).
    if (op.kind == OpKind::div && a.has_scalar && a.scalar_pos == 1 && a.scalar.mantissa == 0)
      fail(at("scalar"), "div: the divisor is the constant 0");
    if (const Json* d = opt("input"))
      a.io_index = static_cast<int32_t>(integer(*d, at("input"), 0, i32max, "an input index (0 or more)"));
    if (const Json* d = opt("output"))
      a.io_index = static_cast<int32_t>(integer(*d, at("output"), 0, i32max, "an output index (0 or more)"));
    if (const Json* m = opt("imap")) a.imap = grid_map(*m, at("imap"));
    if (const Json* m = opt("fmap")) a.fmap = map_entry(*m, at("fmap"), "a dimension (0 or more) or null");
    if (const Json* m = opt("omap")) a.omap = grid_map(*m, at("omap"));
    if (allowed & kAttrAccum) {
      a.dim = kPhi;
      if (const Json* acc = opt("accum")) {
        const char* what = "\"sum\" or {\"concat\": dim}";
        if (acc->is_string()) {
          if (acc->get<std::string>() != "sum") fail(at("accum"), std::string("expected ") + what);
        } else if (acc->is_object() && acc->size() == 1 && acc->contains("concat")) {
          a.dim = static_cast<int32_t>(
              integer(acc->at("concat"), at("accum") + "/concat", 0, i32max, "a dimension (0 or more)"));
        } else {
          fail(at("accum"), std::string("expected ") + what);
        }
      }
    }
    if (allowed & kAttrBody) {
      a.body = static_cast<int32_t>(integer(field(v, path, "body"), at("body"), 0, i32max, "a body index (0 or more)"));
      if (static_cast<size_t>(a.body) >= num_bodies)
        fail(at("body"), "body " + std::to_string(a.body) + " does not exist; the graph has " +
                             std::to_string(num_bodies) + " bodies");
    }
    return op;
  }

  Graph graph(const Json& v, const std::string& path, int depth) const {
    expect_object(v, path, "expected a graph: an object with \"level\", \"tensors\" and \"ops\"");
    allow_keys(v, path, {"level", "params", "grid", "threads", "forloop", "tensors", "ops", "outputs", "bodies"});
    std::string level_text = string(field(v, path, "level"), path + "/level", "\"kernel\", \"block\" or \"thread\"");
    auto level = parse_level(level_text);
    if (!level)
      fail(path + "/level", "unknown level \"" + level_text + "\"; expected \"kernel\", \"block\" or \"thread\"");
    Graph g = level_defaults(*level);

    if (const Json* p = optional(v, "params")) {
      array(*p, path + "/params", "an array of tensor types");
      for (size_t i = 0; i < p->size(); ++i)
        g.params.push_back(tensor_type((*p)[i], path + "/params/" + std::to_string(i), false));
    }
    if (const Json* d = optional(v, "grid")) g.grid = dim3(*d, path + "/grid");
    if (const Json* d = optional(v, "threads")) g.threads = dim3(*d, path + "/threads");
    if (const Json* d = optional(v, "forloop"))
      g.forloop = integer(*d, path + "/forloop", 1, kMaxExtent, "a positive number of iterations");

    read_tensors(g, v, path);
    const Json* bodies = optional(v, "bodies");
    if (bodies) array(*bodies, path + "/bodies", "an array of graphs");
    read_ops(g, v, path, bodies ? bodies->size() : 0);

    if (const Json* outs = optional(v, "outputs")) {
      array(*outs, path + "/outputs", "an array of {\"tensor\": id, \"name\": name}");
      for (size_t i = 0; i < outs->size(); ++i) {
        std::string p = path + "/outputs/" + std::to_string(i);
        const Json& o = (*outs)[i];
        expect_object(o, p, "expected {\"tensor\": id, \"name\": name}");
        allow_keys(o, p, {"tensor", "name"});
        g.outputs.push_back(tensor_id(field(o, p, "tensor"), p + "/tensor", g.tensors.size()));
        const Json* n = optional(o, "name");
        g.output_names.push_back(n ? string(*n, p + "/name", "a string") : std::string());
      }
    }
    if (bodies) read_bodies(g, *bodies, path + "/bodies", depth);
    return g;
  }

  /// Appends the tensors of graph value `v` to `g`, after those it has.
  void read_tensors(Graph& g, const Json& v, const std::string& path) const {
    const Json& tensors = array(field(v, path, "tensors"), path + "/tensors", "an array of tensors");
    for (size_t i = 0; i < tensors.size(); ++i) {
      std::string p = path + "/tensors/" + std::to_string(i);
      Tensor t;
      t.type = tensor_type(tensors[i], p, true);
      if (const Json* n = optional(tensors[i], "name")) t.name = string(*n, p + "/name", "a string");
      if (const Json* l = optional(tensors[i], "layout")) {
        array(*l, p + "/layout", "an array of dimensions, outermost first");
        if (l->size() > static_cast<size_t>(kMaxRank))
          fail(p + "/layout", "a layout has at most " + std::to_string(kMaxRank) + " entries");
        for (size_t k = 0; k < l->size(); ++k)
          t.layout.push_back(
              static_cast<int8_t>(integer((*l)[k], p + "/layout/" + std::to_string(k), 0,
                                          std::numeric_limits<int8_t>::max(), "a dimension (0 or more)")));
      } else {
        t.layout = identity_layout(t.type.shape.rank());
      }
      g.tensors.push_back(std::move(t));
    }
  }

  /// Appends the ops of graph value `v` to `g` (whose tensors are all read), which then has
  /// `num_bodies` bodies; op i of the array is op g.ops.size() + i. Every tensor from
  /// `first_tensor` on must be produced by exactly one of them (those before have producers).
  void read_ops(Graph& g, const Json& v, const std::string& path, size_t num_bodies, size_t first_tensor = 0) const {
    const Json& ops = array(field(v, path, "ops"), path + "/ops", "an array of ops");
    for (size_t i = 0; i < ops.size(); ++i) {
      std::string p = path + "/ops/" + std::to_string(i);
      Op o = op(ops[i], p, g.tensors.size(), num_bodies);
      for (size_t k = 0; k < o.outputs.size(); ++k) {
        Tensor& t = g.tensors[o.outputs[k].index()];
        if (t.producer.valid())
          fail(p + "/outputs/" + std::to_string(k), "tensor " + std::to_string(o.outputs[k].value) +
                                                        " is already produced by op " +
                                                        std::to_string(t.producer.value));
        t.producer = OpId(static_cast<int32_t>(g.ops.size()));
      }
      g.ops.push_back(std::move(o));
    }
    for (size_t i = first_tensor; i < g.tensors.size(); ++i)
      if (!g.tensors[i].producer.valid())
        fail(path + "/tensors/" + std::to_string(i - first_tensor),
             "no op lists tensor " + std::to_string(i) + " among its outputs");
  }

  /// Appends the bodies (an array, checked) of a graph at nesting `depth` to `g`.
  void read_bodies(Graph& g, const Json& bodies, const std::string& path, int depth) const {
    if (depth >= kMaxGraphDepth && !bodies.empty()) fail(path, "graphs nest deeper than kernel → block → thread");
    for (size_t i = 0; i < bodies.size(); ++i)
      g.bodies.push_back(graph(bodies[i], path + "/" + std::to_string(i), depth + 1));
  }
};

}  // namespace

std::string to_json(const Graph& kernel_graph) {
  std::string out;
  write_pretty(out, json_reading::ugraph_value(kernel_graph), 0, 0);
  return out + "\n";
}

Graph from_json(std::string_view text, const std::string& filename) {
  return json_reading::ugraph_from_value(json_reading::parse_document(text, filename, kMaxNesting), "", filename);
}

namespace json_reading {

Graph ugraph_from_value(const Json& document, const std::string& path, const std::string& filename) {
  try {
    return Reader(filename).document(document, path);
  } catch (const Json::exception& e) {
    // Every access above is checked first; this is a safety net that keeps the promise of
    // UserError for any input.
    throw UserError(std::string("malformed μGraph JSON: ") + e.what(), SourceLoc{filename});
  }
}

Json ugraph_value(const Graph& kernel_graph) {
  Json doc = Json::object();
  doc["format"] = std::string(kFormatName);
  doc["version"] = kJsonFormatVersion;
  doc["graph"] = graph_json(kernel_graph);
  return doc;
}

Json extension_value(const Graph& g, const Graph& base) {
  MUGRAPH_CHECK(g.level == Level::kernel && base.level == Level::kernel && base.tensors.size() <= g.tensors.size() &&
                base.ops.size() <= g.ops.size() && base.bodies.size() <= g.bodies.size() && base.outputs.empty() &&
                g.outputs.empty())
      << "json: an extension is of a kernel graph without outputs by one it begins with";
  Json j = Json::object();
  Json tensors = Json::array();
  for (size_t i = base.tensors.size(); i < g.tensors.size(); ++i) tensors.push_back(tensor_json(g.tensors[i]));
  j["tensors"] = std::move(tensors);
  Json ops = Json::array();
  for (size_t i = base.ops.size(); i < g.ops.size(); ++i) ops.push_back(op_json(g, g.ops[i]));
  j["ops"] = std::move(ops);
  if (g.bodies.size() > base.bodies.size()) {
    Json bodies = Json::array();
    for (size_t i = base.bodies.size(); i < g.bodies.size(); ++i) bodies.push_back(graph_json(g.bodies[i]));
    j["bodies"] = std::move(bodies);
  }
  return j;
}

Graph extended_from_value(Graph base, const Json& extension, const std::string& path, const std::string& filename) {
  try {
    return Reader(filename).extension(std::move(base), extension, path);
  } catch (const Json::exception& e) {
    throw UserError(std::string("malformed μGraph JSON: ") + e.what(), SourceLoc{filename});
  }
}

}  // namespace json_reading

bool looks_like_json(std::string_view text) {
  // A UTF-8 byte-order mark may precede the document.
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    return c == '{';
  }
  return false;
}

}  // namespace mugraph
