// Checkpoints of the search (src/search/checkpoint.h): exact round trips of pending tasks,
// candidates and counters; malformed files are user errors that name the file; the fingerprint
// tells programs and tree-shaping options apart.
#include "checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "../corpus_replay.h"
#include "mugraph/error.h"
#include "mugraph/frontend.h"
#include "mugraph/json.h"
#include "mugraph/loader.h"
#include "search_fixtures.h"

namespace mugraph::search_detail {
namespace {

constexpr const char* kProgram = R"(
input X[4, 64]
input G[64]
O = mul(exp(X), G)
output O
)";

const Graph& prefix_of(const Task& t) { return *t.prefix; }
void set_prefix(Task& t, Graph g) { t.prefix = std::make_shared<const Graph>(std::move(g)); }

class TempDir : public search_testing::TempDir {
 public:
  TempDir() : search_testing::TempDir("mugraph_checkpoint") {}
};

/// The program's inputs only (what the root task holds).
Graph inputs_only(const Graph& program) {
  Graph g;
  for (const Op& op : program.ops)
    if (op.kind == OpKind::input) g.add_input(op.attrs.name, op.attrs.shape, op.attrs.dtype);
  return g;
}

CheckpointState sample_state() {
  Graph program = parse_program(kProgram);
  CheckpointState st;
  st.fingerprint = search_fingerprint(program, SearchOptions{});
  st.elapsed_seconds = 1.25;
  st.bytes_phase_seconds = 0.5;
  st.stats.states = 1234;
  st.stats.kernel_states = 7;
  st.stats.block_configs = 56;
  st.stats.pruned = {{"shape", 10}, {"abstract_expression", 20}, {"index", 3}};
  st.stats.candidates = 2;
  st.stats.tasks = 9;
  st.stats.oracle_queries = 77;
  st.stats.block_replays = 88;

  Task kernel_task;
  kernel_task.path = {0, 2};
  set_prefix(kernel_task, inputs_only(program));
  st.pending.push_back(kernel_task);

  Task block_task;
  block_task.path = {0, 3, 1};
  set_prefix(block_task, inputs_only(program));
  block_task.operands = {TensorId(0), TensorId(1)};
  block_task.chunk = 2;
  block_task.finish_only = true;
  st.pending.push_back(block_task);

  // A complete candidate: the program itself is a valid kernel graph of pre-defined kernels.
  FoundCandidate c;
  c.graph = program;
  c.metrics = candidate_metrics(program);
  c.path = {0, 1};
  st.candidates.push_back(c);
  return st;
}

TEST(Checkpoint, RoundTripIsExact) {
  TempDir dir;
  const std::string path = dir.file("checkpoint.json");
  CheckpointState st = sample_state();
  write_checkpoint(path, st);
  ASSERT_TRUE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));  // written atomically, temporary renamed

  CheckpointState back = read_checkpoint(path, default_target());
  EXPECT_EQ(back.fingerprint, st.fingerprint);
  EXPECT_DOUBLE_EQ(back.elapsed_seconds, st.elapsed_seconds);
  EXPECT_DOUBLE_EQ(back.bytes_phase_seconds, st.bytes_phase_seconds);
  EXPECT_EQ(back.stats.states, st.stats.states);
  EXPECT_EQ(back.stats.kernel_states, st.stats.kernel_states);
  EXPECT_EQ(back.stats.block_configs, st.stats.block_configs);
  EXPECT_EQ(back.stats.pruned, st.stats.pruned);
  EXPECT_EQ(back.stats.candidates, st.stats.candidates);
  EXPECT_EQ(back.stats.tasks, st.stats.tasks);
  EXPECT_EQ(back.stats.oracle_queries, st.stats.oracle_queries);
  EXPECT_EQ(back.stats.block_replays, st.stats.block_replays);

  ASSERT_EQ(back.pending.size(), st.pending.size());
  for (size_t i = 0; i < st.pending.size(); ++i) {
    const Task &a = st.pending[i], &b = back.pending[i];
    EXPECT_EQ(b.path, a.path) << i;
    EXPECT_EQ(prefix_of(b), prefix_of(a)) << i;
    EXPECT_EQ(b.is_block(), a.is_block()) << i;
    EXPECT_EQ(b.chunk, a.chunk) << i;
    EXPECT_EQ(b.operands, a.operands) << i;
    EXPECT_EQ(b.finish_only, a.finish_only) << i;
  }
  ASSERT_EQ(back.candidates.size(), 1u);
  EXPECT_EQ(back.candidates[0].path, st.candidates[0].path);
  EXPECT_EQ(back.candidates[0].graph, st.candidates[0].graph);
  EXPECT_EQ(to_json(back.candidates[0].graph), to_json(st.candidates[0].graph));
  // Metrics are recomputed on reading.
  EXPECT_EQ(back.candidates[0].metrics.device_bytes, st.candidates[0].metrics.device_bytes);
  EXPECT_EQ(back.candidates[0].metrics.kernels, st.candidates[0].metrics.kernels);

  // Writing what was read gives the same file.
  const std::string again = dir.file("again.json");
  write_checkpoint(again, back);
  EXPECT_EQ(read_text_file(path, kMaxGraphFileBytes), read_text_file(again, kMaxGraphFileBytes));
}

TEST(Checkpoint, AWriterThatKeepsGraphTextsWritesWhatAFreshOneWrites) {
  // The search's writer keeps the text of the graphs of its last write; a later state drops some
  // prefixes and candidates, adds others, and shares the rest.
  TempDir dir;
  CheckpointState a = sample_state();
  CheckpointState b = a;
  b.pending.erase(b.pending.begin());
  Graph grown = prefix_of(a.pending[0]);
  grown.add_input("Y", Shape{4, 64}, DType::f16);
  Task t;
  t.path = {0, 5};
  set_prefix(t, grown);
  b.pending.push_back(t);
  b.pending.push_back(a.pending[1]);  // a second task on a prefix already written
  FoundCandidate c = a.candidates[0];
  c.graph.add_input("Y", Shape{4, 64}, DType::f16);  // another complete graph
  c.path = {0, 4};
  c.found_seconds = 0.75;
  b.candidates.insert(b.candidates.begin(), c);
  b.elapsed_seconds = 2.5;

  CheckpointWriter kept;
  for (const CheckpointState* st : {&a, &b, &a, &b, &b}) {
    kept.write(dir.file("kept.json"), *st);
    write_checkpoint(dir.file("fresh.json"), *st);
    ASSERT_EQ(read_text_file(dir.file("kept.json"), kMaxGraphFileBytes),
              read_text_file(dir.file("fresh.json"), kMaxGraphFileBytes));
    CheckpointState back = read_checkpoint(dir.file("kept.json"), default_target());
    ASSERT_EQ(back.pending.size(), st->pending.size());
    for (size_t i = 0; i < st->pending.size(); ++i) EXPECT_EQ(prefix_of(back.pending[i]), prefix_of(st->pending[i]));
    ASSERT_EQ(back.candidates.size(), st->candidates.size());
    for (size_t i = 0; i < st->candidates.size(); ++i) EXPECT_EQ(back.candidates[i].graph, st->candidates[i].graph);
  }
}

TEST(Checkpoint, TheWriterWritesTheJsonDocumentsDump) {
  // The writer streams its text rather than building a JSON document; the text must be exactly
  // the compact dump of the document it reads as (numbers as the JSON library prints them).
  TempDir dir;
  CheckpointState st = sample_state();
  st.pending[0].floor_us = 0.1 + 0.2;
  st.pending[1].floor_us = 1e-7;
  Task deep = st.pending[1];
  deep.path = {kModelPhasePath, 0, 1048576, 7};
  deep.floor_us = 123456.789;
  deep.chunk = 0;
  deep.finish_only = false;
  deep.operands = {TensorId(1)};
  st.pending.push_back(deep);
  st.candidates[0].found_seconds = 2.0 / 3.0;
  st.candidates[0].task_order_us = 17.0;
  FoundCandidate c = st.candidates[0];
  c.task_order_us = 0;
  c.path = {};
  st.candidates.push_back(c);
  const std::string path = dir.file("checkpoint.json");
  write_checkpoint(path, st);
  const std::string text = read_text_file(path, kMaxGraphFileBytes);
  EXPECT_EQ(nlohmann::ordered_json::parse(text).dump() + "\n", text);
  CheckpointState back = read_checkpoint(path, default_target());
  ASSERT_EQ(back.pending.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back.pending[i].floor_us, st.pending[i].floor_us);
    EXPECT_EQ(back.pending[i].path, st.pending[i].path);
    EXPECT_EQ(back.pending[i].operands, st.pending[i].operands);
    EXPECT_EQ(back.pending[i].chunk, st.pending[i].chunk);
    EXPECT_EQ(back.pending[i].finish_only, st.pending[i].finish_only);
  }
  ASSERT_EQ(back.candidates.size(), 2u);
  EXPECT_EQ(back.candidates[0].found_seconds, 2.0 / 3.0);
  EXPECT_EQ(back.candidates[0].task_order_us, 17.0);
  EXPECT_EQ(back.candidates[1].path, std::vector<int32_t>{});
}

TEST(Checkpoint, AnAbandonedWriteLeavesTheFileAsItWas) {
  // The search gives a periodic write of a large frontier up when a limit is reached (the
  // abandon callback is asked every 4096 tasks); the file keeps the previous write.
  TempDir dir;
  const std::string path = dir.file("checkpoint.json");
  CheckpointState st = sample_state();
  write_checkpoint(path, st);
  const std::string before = read_text_file(path, kMaxGraphFileBytes);
  CheckpointState big = st;
  while (big.pending.size() < 5000) big.pending.push_back(st.pending[big.pending.size() % st.pending.size()]);
  CheckpointWriter writer;
  int asked = 0;
  EXPECT_FALSE(writer.write(path, big, [&] { return ++asked > 0; }));
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(read_text_file(path, kMaxGraphFileBytes), before);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp")) << "the unfinished file is removed";
  EXPECT_TRUE(writer.write(path, big, [] { return false; }));
  EXPECT_EQ(read_checkpoint(path, default_target()).pending.size(), 5000u);
}

TEST(Checkpoint, EmptyStateRoundTrips) {
  TempDir dir;
  CheckpointState st;
  st.fingerprint = "fp";
  write_checkpoint(dir.file("c.json"), st);
  CheckpointState back = read_checkpoint(dir.file("c.json"), default_target());
  EXPECT_EQ(back.fingerprint, "fp");
  EXPECT_TRUE(back.pending.empty());
  EXPECT_TRUE(back.candidates.empty());
  EXPECT_TRUE(back.stats.pruned.empty());
}

TEST(Checkpoint, OverwritesAnOlderCheckpoint) {
  TempDir dir;
  const std::string path = dir.file("checkpoint.json");
  CheckpointState st = sample_state();
  write_checkpoint(path, st);
  st.pending.clear();
  st.elapsed_seconds = 9;
  write_checkpoint(path, st);
  CheckpointState back = read_checkpoint(path, default_target());
  EXPECT_TRUE(back.pending.empty());
  EXPECT_DOUBLE_EQ(back.elapsed_seconds, 9);
}

/// read_checkpoint(path) throws a UserError whose message names the file and holds `detail` (a
/// JSON path or a line and column: where the file is wrong).
void expect_user_error_naming_file(const std::string& path, const std::string& detail = "") {
  try {
    read_checkpoint(path, default_target());
    FAIL() << "expected a UserError for " << path;
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(std::filesystem::path(path).filename().string()), std::string::npos) << what;
    EXPECT_NE(what.find(detail), std::string::npos) << "expected \"" << detail << "\" in: " << what;
    // The library's own wording ("[json.exception.type_error.302] ...") never reaches the user.
    EXPECT_EQ(what.find("json.exception"), std::string::npos) << what;
  } catch (const std::exception& e) {
    FAIL() << "expected a UserError, got: " << e.what();
  }
}

TEST(Checkpoint, MissingFileIsAUserError) {
  TempDir dir;
  expect_user_error_naming_file(dir.file("nothing_here.json"), "cannot read");
}

TEST(Checkpoint, MalformedFilesAreUserErrorsNamingTheFileAndTheValue) {
  TempDir dir;
  write_checkpoint(dir.file("good.json"), sample_state());
  std::ifstream f(dir.file("good.json"));
  const nlohmann::json good = nlohmann::json::parse(f);

  dir.write("not_json.json", "{\n  this is not json");
  expect_user_error_naming_file(dir.file("not_json.json"), "not_json.json:2:");
  dir.write("empty.json", "");
  expect_user_error_naming_file(dir.file("empty.json"), "invalid JSON");
  dir.write("array.json", "[1, 2, 3]");
  expect_user_error_naming_file(dir.file("array.json"), "expected a search checkpoint");
  dir.write("deep.json", std::string(100000, '[') + std::string(100000, ']'));
  expect_user_error_naming_file(dir.file("deep.json"), "nested deeper");
  dir.write("ugraph.json", to_json(parse_program(kProgram)));  // a μGraph, not a checkpoint
  expect_user_error_naming_file(dir.file("ugraph.json"), "/format: expected \"mugraph-search-checkpoint\"");

  auto variant = [&](const std::string& name, const std::string& detail, auto&& edit) {
    nlohmann::json j = good;
    edit(j);
    dir.write(name, j.dump());
    expect_user_error_naming_file(dir.file(name), detail);
  };
  variant("wrong_format.json", "/format: expected", [](nlohmann::json& j) { j["format"] = "something-else"; });
  variant("wrong_version.json", "/version: expected 4", [](nlohmann::json& j) { j["version"] = 99; });
  variant("unknown_field.json", "unknown field \"extra\"", [](nlohmann::json& j) { j["extra"] = 1; });
  variant("no_stats.json", "missing field \"stats\"", [](nlohmann::json& j) { j.erase("stats"); });
  variant("bad_stat.json", "/stats/states: expected a count", [](nlohmann::json& j) { j["stats"]["states"] = -4; });
  variant("bad_pruned.json", "/stats/pruned/", [](nlohmann::json& j) { j["stats"]["pruned"]["why"] = "x"; });
  variant("no_pending.json", "missing field \"pending\"", [](nlohmann::json& j) { j.erase("pending"); });
  variant("bad_elapsed.json", "/elapsed_seconds: expected a number of seconds",
          [](nlohmann::json& j) { j["elapsed_seconds"] = "soon"; });
  variant("bad_prefix.json", "/pending/0/prefix: expected a prefix index", [](nlohmann::json& j) {
    j["pending"][0]["prefix"] = {{"format", "nope"}};
  });
  variant("missing_prefix.json", "/pending/0/prefix: prefix 7 does not exist",
          [](nlohmann::json& j) { j["pending"][0]["prefix"] = 7; });
  variant("bad_path.json", "/pending/0/path: expected a task path",
          [](nlohmann::json& j) { j["pending"][0]["path"] = "0/2"; });
  variant("bad_operand.json", "/pending/1/operands/1: expected a tensor of the task's prefix", [](nlohmann::json& j) {
    j["pending"][1]["operands"] = {0, 57};
  });
  variant("negative_operand.json", "/pending/1/operands/0",
          [](nlohmann::json& j) { j["pending"][1]["operands"] = {-1}; });
  variant("negative_chunk.json", "/pending/1/chunk: expected a chunk index",
          [](nlohmann::json& j) { j["pending"][1]["chunk"] = -3; });
  variant("bad_finish_only.json", "/pending/1/finish_only: expected true or false",
          [](nlohmann::json& j) { j["pending"][1]["finish_only"] = 1; });
  variant("bad_candidate.json", "/candidates/0/graph: expected an object",
          [](nlohmann::json& j) { j["candidates"][0]["graph"] = 5; });
  // A damaged graph inside: the path runs on into the μGraph.
  variant("bad_candidate_op.json", "/candidates/0/graph/graph/ops/0/op: unknown op \"frobnicate\"",
          [](nlohmann::json& j) { j["candidates"][0]["graph"]["graph"]["ops"][0]["op"] = "frobnicate"; });
  variant("bad_prefix_graph.json", "/prefixes/0/graph/tensors: expected an array",
          [](nlohmann::json& j) { j["prefixes"][0]["graph"]["tensors"] = 3; });
  // Well-formed JSON graphs that are not valid ones: a stored shape the shape rules contradict.
  variant("invalid_candidate.json", "/candidates/0/graph: not a valid μGraph for h100", [](nlohmann::json& j) {
    j["candidates"][0]["graph"]["graph"]["tensors"].back()["shape"] = {4, 32};
  });
  variant("invalid_prefix.json", "/prefixes/0: not a valid search state", [](nlohmann::json& j) {
    j["prefixes"][0]["graph"]["ops"][0]["shape"] = {4, 32};  // the input op's shape, against its tensor's
  });
}

TEST(Checkpoint, APrefixIsWrittenAsTheOneItExtendsAndWhatItAppends) {
  // A frontier's prefixes share their first kernels: each is written once, and a prefix whose
  // parent is known as that one's index and its new ops.
  TempDir dir;
  const Graph program = parse_program(kProgram);
  CheckpointState st = sample_state();
  const std::shared_ptr<const Graph> p0 = st.pending[0].prefix;
  Graph g1 = inputs_only(program);
  const TensorId e = g1.add(OpKind::exp, {TensorId(0)});
  Graph g2 = g1;
  g2.add(OpKind::mul, {e, TensorId(1)});
  const auto p1 = std::make_shared<const Graph>(g1);
  const auto p2 = std::make_shared<const Graph>(g2);
  const auto from_p0 = std::make_shared<const PrefixParent>(PrefixParent{p0, nullptr});
  const auto from_p1 = std::make_shared<const PrefixParent>(PrefixParent{p1, from_p0});
  Task t2;
  t2.path = {0, 2, 0, 0};
  t2.prefix = p2;
  t2.parent = from_p1;
  Task t2_block = t2;
  t2_block.path = {0, 2, 0, 1};
  t2_block.operands = {TensorId(3)};
  t2_block.chunk = 0;
  Task t1;
  t1.path = {0, 2, 1};
  t1.prefix = p1;
  t1.parent = from_p0;
  st.pending = {t2, t2_block, t1, st.pending[0]};
  const std::string path = dir.file("checkpoint.json");
  write_checkpoint(path, st);

  const std::string text = read_text_file(path, kMaxGraphFileBytes);
  const auto j = nlohmann::ordered_json::parse(text);
  EXPECT_EQ(j["version"], 5);
  ASSERT_EQ(j["prefixes"].size(), 3u) << "p0 written once: as p1's base and as the last task's prefix";
  EXPECT_EQ(j["prefixes"][0]["format"], "mugraph-ugraph");
  EXPECT_EQ(
      j["prefixes"][1].dump(),
      R"({"extends":0,"appended":{"tensors":[{"shape":[4,64],"dtype":"f16"}],"ops":[{"op":"exp","inputs":[0],"outputs":[2]}]}})");
  EXPECT_EQ(j["prefixes"][2]["extends"], 1);
  EXPECT_EQ(j["pending"][0]["prefix"], 2);
  EXPECT_EQ(j["pending"][1]["prefix"], 2);
  EXPECT_EQ(j["pending"][2]["prefix"], 1);
  EXPECT_EQ(j["pending"][3]["prefix"], 0);

  CheckpointState back = read_checkpoint(path, default_target());
  ASSERT_EQ(back.pending.size(), 4u);
  EXPECT_EQ(prefix_of(back.pending[0]), g2);
  EXPECT_EQ(prefix_of(back.pending[2]), g1);
  EXPECT_EQ(prefix_of(back.pending[3]), *p0);
  // What each prefix extends is known again, and shared as the graphs are.
  ASSERT_TRUE(back.pending[0].parent && back.pending[2].parent);
  EXPECT_EQ(back.pending[0].parent, back.pending[1].parent);
  EXPECT_EQ(back.pending[0].parent->prefix, back.pending[2].prefix);
  EXPECT_EQ(back.pending[2].parent->prefix, back.pending[3].prefix);
  EXPECT_EQ(back.pending[2].parent->parent, nullptr);
  EXPECT_EQ(back.pending[3].parent, nullptr);
  // So writing what was read gives the same file.
  write_checkpoint(dir.file("again.json"), back);
  EXPECT_EQ(read_text_file(dir.file("again.json"), kMaxGraphFileBytes), text);
  // A writer that keeps texts writes the same when a prefix's parent becomes unknown (whole).
  CheckpointWriter kept;
  kept.write(dir.file("kept.json"), st);
  CheckpointState orphan = st;
  orphan.pending[2].parent = nullptr;
  kept.write(dir.file("kept.json"), orphan);
  write_checkpoint(dir.file("fresh.json"), orphan);
  EXPECT_EQ(read_text_file(dir.file("kept.json"), kMaxGraphFileBytes),
            read_text_file(dir.file("fresh.json"), kMaxGraphFileBytes));

  // A checkpoint of version 4 (every prefix whole) still reads.
  CheckpointState whole = sample_state();
  write_checkpoint(dir.file("whole.json"), whole);
  auto v4 = nlohmann::ordered_json::parse(read_text_file(dir.file("whole.json"), kMaxGraphFileBytes));
  v4["version"] = 4;
  dir.write("v4.json", v4.dump());
  EXPECT_EQ(read_checkpoint(dir.file("v4.json"), default_target()).pending.size(), whole.pending.size());
  // ... but not with a prefix written as an extension, which version 4 did not have.
  auto v4_extends = j;
  v4_extends["version"] = 4;
  dir.write("v4_extends.json", v4_extends.dump());
  expect_user_error_naming_file(dir.file("v4_extends.json"), "/prefixes/1: unknown field \"extends\"");

  auto variant = [&](const std::string& name, const std::string& detail, auto&& edit) {
    auto v = j;
    edit(v);
    dir.write(name, v.dump());
    expect_user_error_naming_file(dir.file(name), detail);
  };
  variant("forward.json", "/prefixes/1/extends: expected the index of an earlier prefix",
          [](auto& v) { v["prefixes"][1]["extends"] = 1; });
  variant("first.json", "/prefixes/0/extends: expected the index of an earlier prefix", [](auto& v) {
    v["prefixes"][0] = {{"extends", 0}, {"appended", v["prefixes"][1]["appended"]}};
  });
  variant("no_appended.json", "/prefixes/1: missing field \"appended\"",
          [](auto& v) { v["prefixes"][1].erase("appended"); });
  variant("extra.json", "/prefixes/1: unknown field \"graph\"", [](auto& v) { v["prefixes"][1]["graph"] = 1; });
  variant("bad_appended.json", "/prefixes/2/appended/ops/0/outputs/0: tensor 2 is already produced",
          [](auto& v) { v["prefixes"][2]["appended"]["ops"][0]["outputs"][0] = 2; });
  // Well-formed but not a valid prefix: mul of X's exp by itself transposed shape.
  variant("invalid.json", "/prefixes/2: not a valid search state", [](auto& v) {
    v["prefixes"][2]["appended"]["tensors"][0]["shape"] = {64, 4};
  });
}

TEST(Checkpoint, WritingToAMissingDirectoryIsAUserError) {
  TempDir dir;
  EXPECT_THROW(write_checkpoint(dir.file("no/such/dir/checkpoint.json"), sample_state()), UserError);
}

TEST(Checkpoint, ASearchThatCannotWriteItsCheckpointStopsWithAUserError) {
  // The periodic write runs beside the workers; its failure must stop them and reach the caller
  // as the UserError naming the file (it once escaped the driver thread: std::terminate).
  TempDir dir;
  SearchOptions o;
  o.threads = 2;
  o.time_limit_seconds = 20;
  o.checkpoint_path = dir.file("no/such/dir/checkpoint.json");
  o.checkpoint_seconds = 0.05;
  try {
    search(parse_program(search_testing::kNTransSmall), o);
    FAIL() << "the search wrote a checkpoint into a missing directory";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write the checkpoint"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, FingerprintSeparatesProgramsAndTreeShapingOptions) {
  Graph program = parse_program(kProgram);
  Graph other = parse_program("input X[4, 64]\ninput G[64]\nO = mul(X, G)\noutput O\n");
  SearchOptions o;
  const std::string fp = search_fingerprint(program, o);
  EXPECT_EQ(fp, search_fingerprint(program, o));
  EXPECT_EQ(fp, search_fingerprint(parse_program(kProgram), o));  // same text, same fingerprint
  EXPECT_NE(fp, search_fingerprint(other, o));
  auto differs = [&](auto&& edit) {
    SearchOptions p = o;
    edit(p);
    return search_fingerprint(program, p) != fp;
  };
  EXPECT_TRUE(differs([](SearchOptions& p) { p.max_kernel_ops = 2; }));
  EXPECT_TRUE(differs([](SearchOptions& p) { p.max_block_ops = 7; }));
  EXPECT_TRUE(differs([](SearchOptions& p) { p.max_graph_kernels = 1; }));
  EXPECT_TRUE(differs([](SearchOptions& p) { p.max_kernel_inputs = 2; }));
  EXPECT_TRUE(differs([](SearchOptions& p) { p.abstract_pruning = false; }));
  EXPECT_TRUE(differs([](SearchOptions& p) { p.target = *find_target("a100"); }));
  // Options that do not change the tree do not change the fingerprint.
  EXPECT_FALSE(differs([](SearchOptions& p) { p.threads = 1; }));
  EXPECT_FALSE(differs([](SearchOptions& p) { p.time_limit_seconds = 3; }));
  EXPECT_FALSE(differs([](SearchOptions& p) { p.top_k = 1; }));
  EXPECT_FALSE(differs([](SearchOptions& p) { p.checkpoint_seconds = 1; }));
}

/// Options of a one-kernel search of kProgram resuming from the checkpoint at `path`.
SearchOptions small_resume_options(const std::string& path) {
  SearchOptions o;
  o.max_kernel_ops = 1;
  o.max_block_ops = 4;
  o.threads = 1;
  o.checkpoint_path = path;
  o.resume = true;
  return o;
}

TEST(Checkpoint, ResumeRefusesAForeignFingerprint) {
  TempDir dir;
  const std::string path = dir.file("checkpoint.json");
  CheckpointState st = sample_state();
  st.fingerprint = "written by another program";
  write_checkpoint(path, st);
  const SearchOptions o = small_resume_options(path);
  try {
    search(parse_program(kProgram), o);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint.json"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, ResumeRefusesACheckpointOfEarlierConfigurationLists) {
  // A checkpoint written before the configuration lists changed names its block tasks' chunks by
  // positions in the old lists: its fingerprint, without the lists' revision, is refused.
  TempDir dir;
  const std::string path = dir.file("checkpoint.json");
  const SearchOptions o = small_resume_options(path);
  const Graph program = parse_program(kProgram);
  std::string fp = search_fingerprint(program, o);
  const size_t at = fp.find(" config_lists=");
  ASSERT_NE(at, std::string::npos) << fp;
  CheckpointState st = sample_state();
  const size_t end = fp.find(' ', at + 1);
  st.fingerprint = fp.erase(at, end == std::string::npos ? std::string::npos : end - at);  // as before the revision
  write_checkpoint(path, st);
  try {
    search(program, o);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("another version of the search"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, ResumeRefusesAMalformedCheckpoint) {
  TempDir dir;
  dir.write("checkpoint.json", "{\"format\": \"mugraph-search-checkpoint\"");
  SearchOptions o;
  o.max_kernel_ops = 1;
  o.threads = 1;
  o.checkpoint_path = dir.file("checkpoint.json");
  o.resume = true;
  EXPECT_THROW(search(parse_program(kProgram), o), UserError);
}

/// Resumes the search from a hand-written checkpoint `st` (its fingerprint is set here).
SearchResult resume_from(const Graph& program, SearchOptions o, CheckpointState st) {
  TempDir dir;
  st.fingerprint = search_fingerprint(program, o);
  write_checkpoint(dir.file("checkpoint.json"), st);
  o.checkpoint_path = dir.file("checkpoint.json");
  o.resume = true;
  return search(program, o);
}

/// Resumes from a checkpoint that holds only a root task with this path.
SearchResult resume_from_root(const Graph& program, const SearchOptions& o, std::vector<int32_t> path,
                              double bytes_phase_seconds = -1) {
  CheckpointState st;
  st.bytes_phase_seconds = bytes_phase_seconds;
  Task root;
  root.path = std::move(path);
  set_prefix(root, inputs_only(program));
  st.pending.push_back(root);
  return resume_from(program, o, std::move(st));
}

/// Resumes from a checkpoint with nothing pending and one candidate, the program itself (a valid
/// kernel graph of pre-defined kernels), found by the task at `path`.
SearchResult resume_with_the_program_found(const Graph& program, const SearchOptions& o, std::vector<int32_t> path,
                                           double bytes_phase_seconds = -1) {
  CheckpointState st;
  st.bytes_phase_seconds = bytes_phase_seconds;
  FoundCandidate c;
  c.graph = program;
  c.metrics = candidate_metrics(program);
  c.path = std::move(path);
  st.candidates.push_back(c);
  return resume_from(program, o, std::move(st));
}

/// A resumed search that ran to its end with the reference's top candidates.
void expect_same_top(const SearchResult& r, const SearchResult& reference) {
  EXPECT_TRUE(r.resumed);
  EXPECT_EQ(r.stop_reason, StopReason::exhausted);
  ASSERT_EQ(r.top.size(), reference.top.size());
  for (size_t i = 0; i < r.top.size(); ++i) EXPECT_EQ(to_json(r.top[i].graph), to_json(reference.top[i].graph)) << i;
}

TEST(Checkpoint, ResumeFromAHandWrittenRootCheckpointRunsTheWholeSearch) {
  // A checkpoint holding only the root task is a search not yet started.
  Graph program = parse_program(kProgram);
  SearchOptions o;
  o.max_kernel_ops = 1;
  o.max_graph_kernels = 1;
  o.max_block_ops = 5;
  o.threads = 2;
  SearchResult reference = search(program, o);
  ASSERT_FALSE(reference.top.empty());

  SearchResult r = resume_from_root(program, o, {});
  expect_same_top(r, reference);
  EXPECT_EQ(r.stats.states, reference.stats.states);
}

TEST(Checkpoint, ResumeInTheModelPhaseOfCostBoundBothRunsTheModelSearch) {
  // A checkpoint of CostBound::both whose only task is the model phase's root: resuming runs
  // the model-bound search from the root, exactly as CostBound::model does (one thread, so the
  // bound tightens at the same moments), and reports when the bytes phase ended.
  Graph program = parse_program(R"(
input X[8, 256]
input W1[256, 128]
input W2[256, 128]
O = mul(silu(matmul(X, W1)), matmul(X, W2))
output O
)");
  SearchOptions o;
  o.threads = 1;
  o.cost_bound = CostBound::model;
  SearchResult model = search(program, o);
  ASSERT_FALSE(model.top.empty());
  o.cost_bound = CostBound::bytes;
  SearchResult bytes = search(program, o);
  // Otherwise the test could not tell the phases apart.
  ASSERT_NE(bytes.stats.states, model.stats.states) << "the bounds cut the same prefixes here";

  o.cost_bound = CostBound::both;
  SearchResult r = resume_from_root(program, o, {kModelPhasePath}, 0.25);
  expect_same_top(r, model);
  EXPECT_DOUBLE_EQ(r.bytes_phase_seconds, 0.25);
  EXPECT_EQ(r.stats.states, model.stats.states);
}

TEST(Checkpoint, ResumeAfterCostBoundBothEndedDoesNotRunItsModelPhaseAgain) {
  // What a stop during verification leaves: nothing pending, the model phase begun. Resuming
  // verifies the candidates and runs no task.
  Graph program = parse_program(kProgram);
  SearchOptions o;
  o.max_kernel_ops = 2;
  o.max_graph_kernels = 0;
  o.threads = 1;
  o.cost_bound = CostBound::both;
  SearchResult r = resume_with_the_program_found(program, o, {kModelPhasePath, 0}, 0.25);
  EXPECT_EQ(r.stop_reason, StopReason::exhausted);
  EXPECT_EQ(r.stats.tasks, 0);
  EXPECT_DOUBLE_EQ(r.bytes_phase_seconds, 0.25);
  ASSERT_EQ(r.top.size(), 1u);
}

TEST(Checkpoint, AFinishedSearchLeavesItsFinalStateAndResumingItSearchesNothing) {
  // Without the final write, the last periodic checkpoint (or, with CostBound::both, the one
  // written as its model phase begins) stays behind, and a resume searches that tree again.
  Graph program = parse_program(kProgram);
  for (CostBound bound : {CostBound::bytes, CostBound::both}) {
    TempDir dir;
    SearchOptions o;
    o.max_kernel_ops = 2;
    o.max_block_ops = 4;
    o.threads = 1;
    o.cost_bound = bound;
    o.checkpoint_path = dir.file("checkpoint.json");
    SearchResult first = search(program, o);
    ASSERT_EQ(first.stop_reason, StopReason::exhausted);
    ASSERT_FALSE(first.top.empty());
    CheckpointState st = read_checkpoint(o.checkpoint_path, o.target);
    EXPECT_TRUE(st.pending.empty());
    EXPECT_EQ(st.stats.tasks, first.stats.tasks);
    EXPECT_EQ(st.bytes_phase_seconds >= 0, bound == CostBound::both);

    o.resume = true;
    SearchResult again = search(program, o);
    EXPECT_EQ(again.stop_reason, StopReason::exhausted);
    EXPECT_EQ(again.stats.tasks, first.stats.tasks) << "the resumed search ran tasks";
    ASSERT_EQ(again.top.size(), first.top.size());
    for (size_t i = 0; i < first.top.size(); ++i) EXPECT_EQ(again.top[i].graph, first.top[i].graph) << i;
  }
}

TEST(Checkpoint, CandidatesInTheCheckpointAreReported) {
  // A checkpoint with nothing pending but one candidate: resuming verifies and reports it.
  Graph program = parse_program(kProgram);
  SearchOptions o;
  o.max_kernel_ops = 2;
  o.max_graph_kernels = 0;
  o.threads = 1;
  SearchResult r = resume_with_the_program_found(program, o, {0});
  EXPECT_EQ(r.stop_reason, StopReason::exhausted);
  ASSERT_EQ(r.top.size(), 1u);
  EXPECT_EQ(r.top[0].verification.verdict, Verdict::equivalent);
  EXPECT_EQ(r.top[0].metrics.kernels, 2);
}

TEST(Checkpoint, GraphsOfAnotherProgramAreRefusedWithTheirPlace) {
  // The fingerprint names the program, but a damaged or hand-edited file may hold graphs of
  // another: the search cannot label their inputs, so the resume refuses them up front.
  const Graph program = parse_program(kProgram);
  auto refusal = [&](const CheckpointState& st) -> std::string {
    try {
      check_checkpoint_program(st, program, "c.json");
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  };
  auto expect_refused = [&](const CheckpointState& st, const std::string& where, const std::string& why) {
    const std::string what = refusal(st);
    EXPECT_NE(what.find("c.json"), std::string::npos) << what;
    EXPECT_NE(what.find(where), std::string::npos) << "expected \"" << where << "\" in: " << what;
    EXPECT_NE(what.find(why), std::string::npos) << "expected \"" << why << "\" in: " << what;
  };
  const CheckpointState good = sample_state();
  ASSERT_GE(good.pending.size(), 1u);
  ASSERT_GE(good.candidates.size(), 1u);
  EXPECT_EQ(refusal(good), "");

  // A prefix with a renamed input, one with an input of another shape, one with an input more.
  auto with_prefix = [&](Graph g) {
    CheckpointState st = good;
    set_prefix(st.pending.back(), std::move(g));
    return st;
  };
  const std::string last = "/pending/" + std::to_string(good.pending.size() - 1) + ": its prefix";
  Graph renamed;
  renamed.add_input("X", Shape{4, 64});
  renamed.add_input("M", Shape{64});
  expect_refused(with_prefix(renamed), last, "input 1 is M but the program's is G");
  Graph reshaped;
  reshaped.add_input("X", Shape{4, 64});
  reshaped.add_input("G", Shape{32});
  expect_refused(with_prefix(reshaped), last, "input G is [32] f16 but the program's is [64] f16");
  Graph more = inputs_only(program);
  more.add_input("Y", Shape{4});
  expect_refused(with_prefix(more), last, "input Y is not an input of the program");
  Graph fewer;
  fewer.add_input("X", Shape{4, 64});
  expect_refused(with_prefix(fewer), last, "the program's input G is missing");

  // A candidate with the program's inputs but not its outputs.
  CheckpointState no_outputs = good;
  no_outputs.candidates[0].graph.outputs.clear();
  no_outputs.candidates[0].graph.output_names.clear();
  expect_refused(no_outputs, "/candidates/0/graph", "it has 0 outputs but the program has 1");
  CheckpointState other_output = good;
  other_output.candidates[0].graph = parse_program("input X[4, 64]\ninput G[64]\nO = mul(exp(G), G)\noutput O\n");
  expect_refused(other_output, "/candidates/0/graph", "output 0 is [64] f16 but the program's is [4, 64] f16");
  CheckpointState other_inputs = good;
  other_inputs.candidates[0].graph = renamed;
  expect_refused(other_inputs, "/candidates/0/graph", "input 1 is M but the program's is G");
}

// The seeds of fuzz/checkpoint_fuzzer (and what it found, once fixed), replayed as it runs them:
// each is read or refused with a UserError, and a search resumes from each one read (or refuses
// it with a UserError). The valid_* ones are checkpoints `mugraph search` wrote for the fuzzer's
// program and options, finished or stopped: reading and resuming them succeeds.
TEST(Checkpoint, FuzzCorpusReadsAndResumesOrThrowsUserError) {
  const Graph program = parse_program("input X[4, 64]\ninput G[64]\nO = mul(exp(X), G)\noutput O\n");
  TempDir dir;
  const int resumed = test_support::replay_corpus("checkpoint", [&](const std::string& path) {
    SearchOptions o;
    o.max_kernel_ops = 2;
    o.max_block_ops = 4;
    o.threads = 1;
    o.top_k = 1;
    o.time_limit_seconds = 5;
    // The search rewrites its checkpoint as it stops: resume from a copy, not the seed.
    o.checkpoint_path = dir.file("checkpoint.json");
    std::filesystem::copy_file(path, o.checkpoint_path, std::filesystem::copy_options::overwrite_existing);
    const CheckpointState st = read_checkpoint(o.checkpoint_path, o.target);
    // The seeds hold searches of each cost bound, which the fingerprint tells apart.
    for (CostBound bound : {CostBound::bytes, CostBound::model, CostBound::both}) {
      SearchOptions b = o;
      b.cost_bound = bound;
      if (search_fingerprint(program, b) == st.fingerprint) o.cost_bound = bound;
    }
    o.resume = true;
    const SearchResult r = search(program, o);
    EXPECT_EQ(r.stop_reason, StopReason::exhausted) << path;
    EXPECT_EQ(r.top.size(), 1u) << path;
  });
  EXPECT_GE(resumed, 4);
}

}  // namespace
}  // namespace mugraph::search_detail
