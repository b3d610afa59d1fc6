// The μGraphs in examples/ugraphs/: every file loads, validates for the default target, round
// trips exactly, is in the canonical form to_json writes, equals its builder in
// example_graphs.h, and has the inputs and outputs of the program it implements. The example in
// docs/json-format.md loads and validates too.
//
// To regenerate the files after changing a builder or the writer:
//   MUGRAPH_WRITE_EXAMPLES=1 MUGRAPH_SOURCE_DIR=$PWD build/bin/test_ir --gtest_filter='Examples.*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "example_graphs.h"
#include "mugraph/json.h"
#include "mugraph/validate.h"

namespace mugraph {
namespace {

namespace fs = std::filesystem;

fs::path source_dir() {
  const char* dir = std::getenv("MUGRAPH_SOURCE_DIR");
  return dir ? fs::path(dir) : fs::path(MUGRAPH_SOURCE_DIR_DEFAULT);
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

/// Program inputs (name, shape, dtype) and outputs, read with regular expressions so that this
/// test does not depend on the frontend library.
struct ProgramSignature {
  std::vector<std::tuple<std::string, Shape, DType>> inputs;
  std::vector<std::string> outputs;
};

ProgramSignature program_signature(const std::string& text) {
  ProgramSignature sig;
  static const std::regex input_re(R"(^\s*input\s+([A-Za-z_]\w*)\s*\[([^\]]*)\]\s*(\w+)?)");
  static const std::regex output_re(R"(^\s*output\s+([^#]*))");
  static const std::regex name_re(R"([A-Za-z_]\w*)");
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, input_re)) {
      Shape shape;
      std::istringstream dims(m[2].str());
      std::string dim;
      while (std::getline(dims, dim, ',')) shape.push_back(std::stoll(dim));
      DType dt = m[3].matched ? *parse_dtype(m[3].str()) : DType::f16;
      sig.inputs.emplace_back(m[1].str(), shape, dt);
    } else if (std::regex_search(line, m, output_re)) {
      std::string names = m[1].str();
      for (std::sregex_iterator it(names.begin(), names.end(), name_re), end; it != end; ++it)
        sig.outputs.push_back(it->str());
    }
  }
  return sig;
}

TEST(Examples, EveryFileLoadsValidatesAndRoundTrips) {
  fs::path dir = source_dir() / "examples" / "ugraphs";
  ASSERT_TRUE(fs::is_directory(dir)) << dir << " (set MUGRAPH_SOURCE_DIR)";
  int count = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    ++count;
    SCOPED_TRACE(entry.path().string());
    std::string text = read_text(entry.path());
    Graph g;
    try {
      g = from_json(text, entry.path().string());
    } catch (const UserError& e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    auto r = validate(g);
    EXPECT_FALSE(r) << r->str();
    EXPECT_TRUE(from_json(to_json(g)) == g);
    EXPECT_EQ(to_json(g), text) << "not in canonical form; regenerate (see the top of examples_test.cpp)";
  }
  EXPECT_GE(count, static_cast<int>(examples::all_examples().size()));
}

TEST(Examples, FilesEqualTheirBuildersAndMatchTheirPrograms) {
  bool write = std::getenv("MUGRAPH_WRITE_EXAMPLES") != nullptr;
  for (const examples::Example& ex : examples::all_examples()) {
    SCOPED_TRACE(ex.json_file);
    Graph built = ex.build();
    auto r = validate(built);
    ASSERT_FALSE(r) << r->str();
    fs::path path = source_dir() / "examples" / "ugraphs" / ex.json_file;
    if (write) std::ofstream(path, std::ios::binary) << to_json(built);
    Graph loaded = from_json(read_text(path), path.string());
    EXPECT_TRUE(loaded == built) << "the file differs from its builder; regenerate (see examples_test.cpp)";

    fs::path program = source_dir() / "examples" / ex.program_file;
    ASSERT_TRUE(fs::exists(program)) << program;
    ProgramSignature sig = program_signature(read_text(program));
    std::vector<std::tuple<std::string, Shape, DType>> inputs;
    for (const Op& op : loaded.ops)
      if (op.kind == OpKind::input) inputs.emplace_back(op.attrs.name, op.attrs.shape, op.attrs.dtype);
    EXPECT_EQ(inputs, sig.inputs) << "inputs differ from " << ex.program_file;
    EXPECT_EQ(loaded.output_names, sig.outputs) << "outputs differ from " << ex.program_file;
  }
}

TEST(Examples, ReferencesListEveryExampleWithItsProgram) {
  // examples/ugraphs/references.txt (read by the integration test) must agree with the table in
  // example_graphs.h.
  std::istringstream in(read_text(source_dir() / "examples" / "ugraphs" / "references.txt"));
  std::vector<std::pair<std::string, std::string>> listed, want;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string ugraph, program;
    if (fields >> ugraph >> program) listed.emplace_back(ugraph, program);
  }
  for (const examples::Example& ex : examples::all_examples()) want.emplace_back(ex.json_file, ex.program_file);
  std::sort(listed.begin(), listed.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(listed, want);
}

TEST(Examples, TheExampleInTheFormatDocumentationLoads) {
  std::string text = read_text(source_dir() / "docs" / "json-format.md");
  size_t begin = text.find("```json\n");
  ASSERT_NE(begin, std::string::npos);
  begin += 8;
  size_t end = text.find("```", begin);
  ASSERT_NE(end, std::string::npos);
  std::string json = text.substr(begin, end - begin);
  Graph g = from_json(json, "docs/json-format.md");
  auto r = validate(g);
  EXPECT_FALSE(r) << r->str();
  EXPECT_EQ(to_json(g), json) << "the documented example is not in canonical form";
}

}  // namespace
}  // namespace mugraph
