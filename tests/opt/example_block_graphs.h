// The block graphs of the bundled examples, for tests of the passes over block graphs.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "mugraph/loader.h"

namespace mugraph::test {

inline std::string source_dir() {
  const char* env = std::getenv("MUGRAPH_SOURCE_DIR");
  return env ? env : MUGRAPH_SOURCE_DIR_DEFAULT;
}

/// Every block graph of the hand-written examples and of the saved search results, named.
inline std::vector<std::pair<std::string, Graph>> example_block_graphs() {
  std::vector<std::pair<std::string, Graph>> out;
  auto add = [&](const std::string& name, const Graph& k) {
    for (size_t i = 0; i < k.bodies.size(); ++i)
      if (k.bodies[i].level == Level::block) out.emplace_back(name + " body " + std::to_string(i), k.bodies[i]);
  };
  for (const auto& e : std::filesystem::directory_iterator(source_dir() + "/examples/ugraphs"))
    if (e.path().extension() == ".json") add(e.path().filename().string(), load_graph_file(e.path().string()));
  for (const auto& e : std::filesystem::directory_iterator(source_dir() + "/examples/found")) {
    const auto best = e.path() / "best.json";
    if (std::filesystem::exists(best)) add(e.path().filename().string(), load_graph_file(best.string()));
  }
  return out;
}

}  // namespace mugraph::test
