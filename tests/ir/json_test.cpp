#include "mugraph/json.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "../corpus_replay.h"
#include "json_reader.h"
#include "mugraph/validate.h"
#include "test_graphs.h"

namespace mugraph {
namespace {

/// Every op kind that exists at kernel level, with every attribute that JSON carries.
Graph kernel_zoo() {
  Graph g;
  TensorId x = g.add_input("X", {8, 64}, DType::bf16);
  TensorId y = g.add_input("Y", {64, 32}, DType::f32);
  TensorId mm = g.add(OpKind::matmul, {x, y});
  OpAttrs s;
  s.dim = 1;
  s.to = 4;
  TensorId red = g.add(OpKind::sum, {mm}, s);
  TensorId e = g.add(OpKind::gelu, {g.add(OpKind::relu, {g.add(OpKind::exp, {red})})});
  TensorId sub = g.add(OpKind::sub, {e}, test::scalar("-0.0125", 0));
  TensorId add = g.add(OpKind::add, {sub}, test::scalar("1e-300"));
  TensorId sq = g.add(OpKind::sqrt, {g.add(OpKind::sqr, {g.add(OpKind::silu, {add})})});
  OpAttrs rep;
  rep.dim = 0;
  rep.times = 3;
  TensorId r = g.add(OpKind::repeat, {sq}, rep);
  OpAttrs resh;
  resh.shape = Shape{2, 12, 4};
  TensorId rs = g.add(OpKind::reshape, {r}, resh);
  OpAttrs cat;
  cat.dim = 2;
  TensorId c = g.add(OpKind::concat, {rs, rs, rs}, cat);
  TensorId d = g.add(OpKind::div, {c, c});
  TensorId m = g.add(OpKind::mul, {d}, test::scalar("4096"));
  g.tensors[m.index()].name = "M";
  g.tensors[c.index()].layout = {2, 0, 1};
  g.mark_output(m, "M");
  g.mark_output(mm, "MM");
  return g;
}

/// A block graph with a concatenating accumulator, a 2-D grid and layout changes.
Graph concat_accum_graph() {
  Graph k;
  TensorId x = k.add_input("X", {16, 64, 32}, DType::f16);
  Graph body = make_block_graph({k.type(x)}, Dim3{2, 4, 1}, 4, Dim3{64, 2, 1});
  TensorId xt = body.add(OpKind::input_iterator, {}, test::iter(0, {0, 2, kPhi}, 1));
  TensorId e = body.add(OpKind::exp, {xt});
  OpAttrs acc;
  acc.dim = 1;
  TensorId a = body.add(OpKind::accum, {e}, acc);
  OpAttrs rep;
  rep.dim = 2;
  rep.times = 2;
  TensorId r = body.add(OpKind::repeat, {a}, rep);
  body.add(OpKind::output_saver, {r}, test::saver(0, {0, 2, kPhi}));
  auto op = k.append_with_body(OpKind::graph_kernel, {x}, std::move(body));
  k.mark_output(k.ops[op->index()].outputs[0], "O");
  return k;
}

void expect_round_trip(const Graph& g) {
  std::string text = to_json(g);
  Graph back = from_json(text);
  EXPECT_TRUE(back == g) << text;
  EXPECT_EQ(hash_value(back), hash_value(g));
  EXPECT_EQ(to_json(back), text);
}

TEST(Json, RoundTripFigure3b) {
  for (int64_t grid : {1, 8, 128})
    for (int64_t loop : {1, 4, 16}) {
      Graph g = test::rmsnorm_fig3b(16, 4096, 4096, grid, loop, DType::f16);
      expect_round_trip(g);
    }
}

TEST(Json, RoundTripEveryKernelOp) {
  Graph g = kernel_zoo();
  ASSERT_FALSE(validate(g)) << validate(g)->str();
  expect_round_trip(g);
}

TEST(Json, RoundTripConcatAccumulatorAndTwoDGrid) {
  Graph g = concat_accum_graph();
  ASSERT_FALSE(validate(g)) << validate(g)->str();
  expect_round_trip(g);
  std::string text = to_json(g);
  EXPECT_NE(text.find("\"accum\": {\"concat\": 1}"), std::string::npos) << text;
  EXPECT_NE(text.find("\"imap\": {\"x\": 0, \"y\": 2}"), std::string::npos) << text;
  EXPECT_NE(text.find("\"threads\": [64, 2, 1]"), std::string::npos) << text;
}

TEST(Json, RoundTripKeepsOddValuesOfInvalidGraphs) {
  // Graphs the validator rejects still round-trip, so a file can carry them to `mugraph check`.
  Graph g = test::rmsnorm_fig3b(16, 256, 256, 8, 4);
  g.bodies[0].ops[0].attrs.imap = {kPhi, 0, kPhi};  // maps a grid axis of size 1
  g.bodies[0].ops[1].attrs.fmap = kPhi;
  g.bodies[0].bodies[0].threads = Dim3{2, 1, 1};
  g.grid = Dim3{3, 1, 1};
  g.params.push_back(TensorType{{4}, DType::f32});
  g.tensors[0].layout = {};
  g.tensors[1].name = "renamed";
  expect_round_trip(g);
}

TEST(Json, WritesOnlyTheAttributesOfEachKind) {
  std::string text = to_json(test::rmsnorm_fig3b(16, 4096, 4096, 128, 16, DType::f16));
  EXPECT_NE(text.find("\"format\": \"mugraph-ugraph\""), std::string::npos);
  EXPECT_NE(text.find("\"version\": 1"), std::string::npos);
  EXPECT_NE(
      text.find(R"({"op": "input_iterator", "inputs": [], "outputs": [2], "input": 2, "imap": {"x": 1}, "fmap": 0})"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find(R"({"op": "accum", "inputs": [6], "outputs": [8], "accum": "sum"})"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("scalar": "4096", "scalar_pos": "right")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"({"op": "sqr", "inputs": [0], "outputs": [3]})"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("outputs": [{"tensor": 3, "name": "O"}])"), std::string::npos) << text;
  EXPECT_EQ(text.find("layout"), std::string::npos);
}

TEST(Json, DefaultsForOmittedFields) {
  Graph g = from_json(R"({"format": "mugraph-ugraph", "version": 1, "graph": {
    "level": "kernel",
    "tensors": [{"shape": [4, 8]}, {"shape": [4, 8]}],
    "ops": [{"op": "input", "inputs": [], "outputs": [0], "name": "X", "shape": [4, 8]},
            {"op": "sum", "inputs": [0], "outputs": [1]}],
    "outputs": [{"tensor": 1}]}})");
  EXPECT_EQ(g.tensors[0].type.dtype, DType::f16);
  EXPECT_EQ(g.tensors[0].layout, (std::vector<int8_t>{0, 1}));
  EXPECT_EQ(g.tensors[1].producer, OpId(1));
  EXPECT_EQ(g.ops[1].attrs.dim, 0);
  EXPECT_EQ(g.ops[1].attrs.to, 1);
  EXPECT_EQ(g.output_names, std::vector<std::string>{""});
  EXPECT_EQ(g.threads, (Dim3{128, 1, 1}));
}

/// The kernel graph of the program inputs of `g` (its first ops).
Graph inputs_of(const Graph& g) {
  Graph in;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::input) in.add_input(op.attrs.name, op.attrs.shape, op.attrs.dtype);
  return in;
}

/// The message of the UserError `f` throws, or a failure note.
template <typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.message();
  } catch (const std::exception& e) {
    return std::string("NOT A USER ERROR: ") + e.what();
  }
  return "NO ERROR";
}

TEST(Json, AnExtensionAppendsToAGraphWhatAnotherHasBeyondIt) {
  // The search's checkpoints write a prefix as the one it extends plus this.
  Graph kernel = test::rmsnorm_fig3b(16, 4096, 4096, 8, 4, DType::f16);
  kernel.outputs.clear();
  kernel.output_names.clear();
  const Graph inputs = inputs_of(kernel);
  const json_reading::Json ext = json_reading::extension_value(kernel, inputs);
  EXPECT_EQ(ext["tensors"].size(), kernel.tensors.size() - inputs.tensors.size());
  EXPECT_EQ(ext["ops"].size(), 1u);
  EXPECT_EQ(ext["bodies"].size(), 1u);
  EXPECT_EQ(ext["ops"][0]["inputs"], json_reading::Json::array({0, 1, 2}));
  EXPECT_TRUE(json_reading::extended_from_value(inputs, ext, "/p", "c.json") == kernel);

  // A second kernel (pre-defined, no body) on the first: ids run on from the graph it extends.
  Graph longer = kernel;
  longer.add(OpKind::exp, {TensorId(3)});
  const json_reading::Json ext2 = json_reading::extension_value(longer, kernel);
  EXPECT_FALSE(ext2.contains("bodies"));
  EXPECT_EQ(ext2.dump(),
            R"({"tensors":[{"shape":[16,4096],"dtype":"f16"}],"ops":[{"op":"exp","inputs":[3],"outputs":[4]}]})");
  EXPECT_TRUE(json_reading::extended_from_value(kernel, ext2, "/p", "c.json") == longer);
  EXPECT_TRUE(json_reading::extended_from_value(kernel, json_reading::extension_value(kernel, kernel), "/p",
                                                "c.json") == kernel);

  auto bad = [&](const std::string& what, const Graph& base, auto&& edit) {
    json_reading::Json e = ext;
    edit(e);
    const std::string m = message_of([&] { json_reading::extended_from_value(base, e, "/p", "c.json"); });
    EXPECT_NE(m.find(what), std::string::npos) << m;
  };
  bad("/p/tensors/0: no op lists tensor 3", inputs, [](auto& e) { e["ops"] = json_reading::Json::array(); });
  bad("/p/ops/0/outputs/0: tensor 0 is already produced by op 0", inputs,
      [](auto& e) { e["ops"][0]["outputs"][0] = 0; });
  bad("/p/ops/0/inputs/1: tensor 99 does not exist; the graph has 4 tensors", inputs,
      [](auto& e) { e["ops"][0]["inputs"][1] = 99; });
  bad("/p/ops/0/body: body 1 does not exist", inputs, [](auto& e) { e["ops"][0]["body"] = 1; });
  bad("/p: unknown field \"outputs\"", inputs, [](auto& e) { e["outputs"] = json_reading::Json::array(); });
  bad("/p/bodies/0/level", inputs, [](auto& e) { e["bodies"][0]["level"] = "warp"; });
  bad("/p: only a kernel graph can be extended", kernel.bodies[0], [](auto&) {});
}

TEST(Json, LooksLikeJson) {
  EXPECT_TRUE(looks_like_json("  \n{\"format\": 1}"));
  EXPECT_TRUE(looks_like_json("\xEF\xBB\xBF{"));
  EXPECT_FALSE(looks_like_json("# a program\ninput X[4]"));
  EXPECT_FALSE(looks_like_json(""));
  EXPECT_FALSE(looks_like_json("   "));
}

/// The message of the UserError from_json throws on `text`, or a failure note.
std::string error_of(const std::string& text, SourceLoc* loc = nullptr) {
  try {
    from_json(text, "g.json");
  } catch (const UserError& e) {
    if (loc) *loc = e.loc();
    return e.message();
  } catch (const std::exception& e) {
    return std::string("NOT A USER ERROR: ") + e.what();
  }
  return "NO ERROR";
}

/// A minimal valid document with `graph` substituted.
std::string doc(const std::string& graph) {
  return R"({"format": "mugraph-ugraph", "version": 1, "graph": )" + graph + "}";
}

const char* kKernelPrefix = R"({"level": "kernel", "tensors": [{"shape": [4, 8]}, {"shape": [4, 8]}], "ops": [
  {"op": "input", "inputs": [], "outputs": [0], "name": "X", "shape": [4, 8]},)";

std::string with_op(const std::string& op) {
  return doc(std::string(kKernelPrefix) + op + R"(], "outputs": [{"tensor": 1, "name": "O"}]})");
}

/// A kernel with one graph_kernel whose block graph has the given ops (tensor 0: the tile).
std::string with_block_ops(const std::string& ops) {
  return doc(R"({"level": "kernel", "tensors": [{"shape": [4, 8]}, {"shape": [4, 8]}], "ops": [
    {"op": "input", "inputs": [], "outputs": [0], "name": "X", "shape": [4, 8]},
    {"op": "graph_kernel", "inputs": [0], "outputs": [1], "body": 0}],
    "outputs": [{"tensor": 1, "name": "O"}],
    "bodies": [{"level": "block", "params": [{"shape": [4, 8], "dtype": "f16"}], "grid": [2, 1, 1],
      "threads": [128, 1, 1], "forloop": 1, "tensors": [{"shape": [2, 8]}], "ops": [)" +
             ops + "]}]}");
}

struct BadCase {
  std::string text;
  std::string message;  ///< a substring the message must contain
};

TEST(Json, MalformedDocumentsGiveUserErrorsNamingThePath) {
  const std::vector<BadCase> cases = {
      {"", "invalid JSON"},
      {"[1, 2]", "/: expected an object with \"format\""},
      {R"({"format": "mugraph-ugraph", "version": 2, "graph": {}})",
       "/version: unsupported version 2; this mugraph reads version 1"},
      {R"({"format": "mirage", "version": 1, "graph": {}})", "/format: expected \"mugraph-ugraph\""},
      {R"({"format": "mugraph-ugraph", "version": "1", "graph": {}})", "/version: expected an integer"},
      {R"({"format": "mugraph-ugraph", "version": 1})", "/: missing field \"graph\""},
      {R"({"format": "mugraph-ugraph", "version": 1, "graph": {}, "extra": 0})", "/: unknown field \"extra\""},
      {doc("[]"), "/graph: expected a graph"},
      {doc(R"({"level": "grid", "tensors": [], "ops": []})"), "/graph/level: unknown level \"grid\""},
      {doc(R"({"level": "kernel", "ops": []})"), "/graph: missing field \"tensors\""},
      {doc(R"({"level": "kernel", "tensors": [{"shape": [4], "dtype": "f64"}], "ops": []})"),
       "/graph/tensors/0/dtype: unknown dtype \"f64\""},
      {doc(R"({"level": "kernel", "tensors": [{"shape": [4, 0]}], "ops": []})"),
       "/graph/tensors/0/shape/1: expected an extent between 1 and"},
      {doc(R"({"level": "kernel", "tensors": [{"shape": [4.5]}], "ops": []})"),
       "/graph/tensors/0/shape/0: expected an extent"},
      {doc(R"({"level": "kernel", "tensors": [{"shape": [1, 1, 1, 1, 1, 1, 1]}], "ops": []})"),
       "/graph/tensors/0/shape: a shape has at most 6 dimensions"},
      {with_op(R"({"op": "matmull", "inputs": [0], "outputs": [1]})"), "/graph/ops/1/op: unknown op \"matmull\""},
      {with_op(R"({"op": "exp", "inputs": [9], "outputs": [1]})"),
       "/graph/ops/1/inputs/0: tensor 9 does not exist; the graph has 2 tensors"},
      {with_op(R"({"op": "exp", "inputs": [-1], "outputs": [1]})"), "/graph/ops/1/inputs/0: expected a tensor id"},
      {with_op(R"({"op": "exp", "inputs": 0, "outputs": [1]})"),
       "/graph/ops/1/inputs: expected an array of tensor ids"},
      {with_op(R"({"op": "exp", "inputs": [0], "outputs": [1], "dim": 1})"),
       "/graph/ops/1: field \"dim\" does not apply to exp"},
      {with_op(R"({"op": "exp", "inputs": [0], "outputs": [1], "colour": 1})"),
       "/graph/ops/1: unknown field \"colour\""},
      {with_op(R"({"op": "exp", "inputs": [0], "outputs": [0]})"),
       "/graph/ops/1/outputs/0: tensor 0 is already produced by op 0"},
      {with_op(R"({"op": "exp", "inputs": [0], "outputs": []})"), "/graph/tensors/1: no op lists tensor 1"},
      {with_op(R"({"op": "mul", "inputs": [0], "outputs": [1], "scalar": 0.125})"),
       "/graph/ops/1/scalar: expected a decimal number as a string"},
      {with_op(R"({"op": "mul", "inputs": [0], "outputs": [1], "scalar": "1/8"})"),
       "/graph/ops/1/scalar: \"1/8\" is not a decimal number"},
      {with_op(R"({"op": "mul", "inputs": [0], "outputs": [1], "scalar": "2", "scalar_pos": "middle"})"),
       "/graph/ops/1/scalar_pos: expected \"left\" or \"right\""},
      {with_op(R"({"op": "div", "inputs": [0], "outputs": [1], "scalar": "0.000", "scalar_pos": "right"})"),
       "/graph/ops/1/scalar: div: the divisor is the constant 0"},
      {with_op(R"({"op": "mul", "inputs": [0, 0], "outputs": [1], "scalar_pos": "left"})"),
       "/graph/ops/1/scalar_pos: \"scalar_pos\" needs a \"scalar\""},
      {with_op(R"({"op": "sum", "inputs": [0], "outputs": [1], "to": 1e30})"), "/graph/ops/1/to: expected an integer"},
      {with_op(R"({"op": "sum", "inputs": [0], "outputs": [1], "dim": 4294967296})"),
       "/graph/ops/1/dim: expected a 32-bit integer"},
      {with_op(R"({"op": "graph_kernel", "inputs": [0], "outputs": [1], "body": 0})"),
       "/graph/ops/1/body: body 0 does not exist; the graph has 0 bodies"},
      {with_op(R"({"op": "graph_kernel", "inputs": [0], "outputs": [1]})"), "/graph/ops/1: missing field \"body\""},
      {with_block_ops(R"({"op": "input_iterator", "inputs": [], "outputs": [0], "input": 0, "imap": [1]})"),
       "/graph/bodies/0/ops/0/imap: expected an object mapping grid axes to dims or null"},
      {with_block_ops(R"({"op": "input_iterator", "inputs": [], "outputs": [0], "input": 0, "imap": {"w": 0}})"),
       "/graph/bodies/0/ops/0/imap: unknown grid axis \"w\""},
      {with_block_ops(R"({"op": "input_iterator", "inputs": [], "outputs": [0], "input": 0, "imap": {"x": 300}})"),
       "/graph/bodies/0/ops/0/imap/x: expected a dimension (0 or more) or null"},
      {with_block_ops(R"({"op": "input_iterator", "inputs": [], "outputs": [0], "input": -2})"),
       "/graph/bodies/0/ops/0/input: expected an input index"},
      {with_block_ops(R"({"op": "accum", "inputs": [0], "outputs": [0], "accum": "max"})"),
       "/graph/bodies/0/ops/0/accum: expected \"sum\" or {\"concat\": dim}"},
      {with_block_ops(R"({"op": "accum", "inputs": [0], "outputs": [0], "accum": {"concat": -1}})"),
       "/graph/bodies/0/ops/0/accum/concat: expected a dimension"},
      {doc(R"({"level": "block", "grid": [2, 1], "tensors": [], "ops": []})"),
       "/graph/grid: expected three positive integers [x, y, z]"},
      {doc(R"({"level": "block", "forloop": 0, "tensors": [], "ops": []})"),
       "/graph/forloop: expected a positive number of iterations"},
      {doc(R"({"level": "kernel", "tensors": [], "ops": [], "outputs": [{"name": "O"}]})"),
       "/graph/outputs/0: missing field \"tensor\""},
      {doc(R"({"level": "kernel", "tensors": [], "ops": [], "outputs": [{"tensor": 0, "name": "O"}]})"),
       "/graph/outputs/0/tensor: tensor 0 does not exist"},
      {doc(R"({"level": "kernel", "tensors": [], "ops": [], "bodies": [{"level": "block", "tensors": [], "ops": [],
           "bodies": [{"level": "thread", "tensors": [], "ops": [], "bodies": [{"level": "thread", "tensors": [], "ops": [],
           "bodies": [{"level": "thread", "tensors": [], "ops": []}]}]}]}]})"),
       "bodies: graphs nest deeper than kernel"},
      {std::string(100, '[') + std::string(100, ']'), "JSON nested deeper than 64 levels"},
      {"\xff\xfe\x00garbage", "invalid JSON"},
  };
  for (const BadCase& c : cases) {
    std::string message = error_of(c.text);
    EXPECT_NE(message.find(c.message), std::string::npos)
        << "document: " << c.text << "\nmessage: " << message << "\nexpected to contain: " << c.message;
  }
}

TEST(Json, SyntaxErrorsHaveLineAndColumn) {
  SourceLoc loc;
  std::string message = error_of("{\n  \"format\": \"mugraph-ugraph\",\n  \"version\": 1,,\n}", &loc);
  EXPECT_NE(message.find("invalid JSON"), std::string::npos) << message;
  EXPECT_EQ(loc.file, "g.json");
  EXPECT_EQ(loc.line, 3);
  EXPECT_EQ(loc.column, 16);
  try {
    from_json(doc("{}"), "file.json");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()), "file.json: error: /graph: missing field \"level\"");
  }
}

TEST(Json, NeverCrashesOnMutatedDocuments) {
  // Truncations and byte mutations of a valid document: from_json either parses (and validate
  // judges the result) or throws UserError; nothing else.
  const std::string text = to_json(test::rmsnorm_fig3b(16, 256, 256, 8, 4, DType::f16));
  std::mt19937 rng(12345);
  const char kBytes[] = "{}[]\",:0123456789-.e null true x";
  int parsed = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string t = text;
    if (trial % 3 == 0) {
      t.resize(rng() % t.size());
    } else {
      for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k)
        t[rng() % t.size()] = kBytes[rng() % (sizeof(kBytes) - 1)];
    }
    try {
      Graph g = from_json(t);
      ++parsed;
      (void)validate(g);
    } catch (const UserError&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a UserError: " << e.what() << "\ndocument:\n" << t;
      break;
    }
  }
  EXPECT_GT(parsed, 0);
}

// The seeds of fuzz/ugraph_json_fuzzer (and what it found, once fixed): each loads or is refused
// with a UserError; the valid_* ones are valid μGraphs.
TEST(Json, FuzzCorpusLoadsOrThrowsUserError) {
  const int loaded = test_support::replay_corpus("ugraph_json", [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const Graph g = from_json(text, path);
    if (path.find("/valid_") == std::string::npos) return;
    const auto rejection = validate(g);
    EXPECT_FALSE(rejection) << path << ": " << rejection->str();
  });
  EXPECT_GT(loaded, 0);
}

}  // namespace
}  // namespace mugraph
