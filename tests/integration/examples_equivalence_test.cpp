// Every hand-written μGraph in examples/ugraphs/ computes what its reference program computes.
// examples/ugraphs/references.txt pairs each μGraph with its program. Both run in f32 (retype)
// on the same seeded inputs; outputs must agree to a max relative error of 1e-3.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "mugraph/interp.h"
#include "mugraph/loader.h"
#include "mugraph/retype.h"
#include "mugraph/validate.h"

namespace mugraph {
namespace {

std::string source_dir() {
  const char* dir = std::getenv("MUGRAPH_SOURCE_DIR");
  return dir ? dir : MUGRAPH_SOURCE_DIR_DEFAULT;
}

struct Pair {
  std::string ugraph, program;
};

void PrintTo(const Pair& p, std::ostream* os) { *os << p.ugraph << " vs " << p.program; }

std::vector<Pair> read_pairs() {
  std::ifstream in(source_dir() + "/examples/ugraphs/references.txt");
  std::vector<Pair> pairs;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    Pair p;
    if (fields >> p.ugraph >> p.program) pairs.push_back(p);
  }
  return pairs;
}

/// max |a − b| / max |b|
double max_relative_error(const HostTensor& a, const HostTensor& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < b.data.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(a.data[i] - b.data[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(b.data[i])));
  }
  return diff / std::max(scale, 1e-30);
}

std::map<std::string, HostTensor> inputs_by_name(const Graph& g, const std::vector<HostTensor>& values) {
  std::map<std::string, HostTensor> out;
  size_t i = 0;
  for (const Op& op : g.ops)
    if (op.kind == OpKind::input) out[op.attrs.name] = values.at(i++);
  return out;
}

class ExampleEquivalence : public ::testing::TestWithParam<Pair> {};

TEST_P(ExampleEquivalence, MatchesReferenceProgramInF32) {
  const Pair& p = GetParam();
  // Validated as committed (f16): retyping to f32 doubles shared memory, which the attention
  // example's first kernel then exceeds.
  Graph ugraph = load_graph_file(source_dir() + "/examples/ugraphs/" + p.ugraph);
  Graph program = load_graph_file(source_dir() + "/examples/" + p.program);
  ASSERT_FALSE(validate(ugraph)) << validate(ugraph)->str();
  ASSERT_FALSE(validate(program)) << validate(program)->str();
  ugraph = retype(ugraph, DType::f32);
  program = retype(program, DType::f32);
  ASSERT_GT(ugraph.bodies.size(), 0u) << p.ugraph << " has no graph-defined kernel";

  std::vector<HostTensor> program_inputs = random_inputs(program, 42);
  auto by_name = inputs_by_name(program, program_inputs);
  std::vector<HostTensor> ugraph_inputs;
  for (const Op& op : ugraph.ops)
    if (op.kind == OpKind::input) {
      ASSERT_TRUE(by_name.count(op.attrs.name)) << "input " << op.attrs.name << " is not in " << p.program;
      ugraph_inputs.push_back(by_name[op.attrs.name]);
    }
  auto want = run_float(program, program_inputs);
  auto got = run_float(ugraph, ugraph_inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    // Outputs are matched by name, so a μGraph may list them in any order.
    auto it = std::find(program.output_names.begin(), program.output_names.end(), ugraph.output_names[i]);
    ASSERT_NE(it, program.output_names.end()) << "output " << ugraph.output_names[i];
    const HostTensor& w = want[static_cast<size_t>(it - program.output_names.begin())];
    ASSERT_EQ(got[i].type.shape, w.type.shape);
    double err = max_relative_error(got[i], w);
    EXPECT_LE(err, 1e-3) << p.ugraph << " output " << ugraph.output_names[i];
    RecordProperty(ugraph.output_names[i] + "_max_rel_error", std::to_string(err));
  }
}

TEST(ExampleEquivalence, ManifestCoversEveryUgraph) {
  auto pairs = read_pairs();
  EXPECT_GE(pairs.size(), 4u);
}

INSTANTIATE_TEST_SUITE_P(Examples, ExampleEquivalence, ::testing::ValuesIn(read_pairs()),
                         [](const ::testing::TestParamInfo<Pair>& param_info) {
                           std::string name = param_info.param.ugraph.substr(0, param_info.param.ugraph.find('.'));
                           std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
                           return name;
                         });

}  // namespace
}  // namespace mugraph
