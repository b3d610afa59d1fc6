// Checkpoint files of the search (checkpoint.h). Graphs inside are μGraph JSON objects
// (docs/json-format.md); a task's configuration and the counters are plain fields.
#include "checkpoint.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "mugraph/json.h"
#include "mugraph/validate.h"

namespace mugraph::search_detail {

namespace {

using Json = nlohmann::json;
constexpr const char* kFormat = "mugraph-search-checkpoint";
constexpr int kVersion = 2;

Json graph_json(const Graph& g) { return Json::parse(to_json(g)); }

Json stats_json(const SearchStats& s) {
  Json j;
  j["states"] = s.states;
  j["kernel_states"] = s.kernel_states;
  j["block_configs"] = s.block_configs;
  j["pruned"] = s.pruned;
  j["candidates"] = s.candidates;
  j["tasks"] = s.tasks;
  j["oracle_queries"] = s.oracle_queries;
  return j;
}

SearchStats stats_from(const Json& j) {
  SearchStats s;
  s.states = j.at("states").get<int64_t>();
  s.kernel_states = j.at("kernel_states").get<int64_t>();
  s.block_configs = j.at("block_configs").get<int64_t>();
  s.pruned = j.at("pruned").get<std::map<std::string, int64_t>>();
  s.candidates = j.at("candidates").get<int64_t>();
  s.tasks = j.at("tasks").get<int64_t>();
  s.oracle_queries = j.at("oracle_queries").get<int64_t>();
  return s;
}

}  // namespace

std::string search_fingerprint(const Graph& program, const SearchOptions& o) {
  std::ostringstream s;
  s << std::hex << hash_value(program) << std::dec << " kernel_ops=" << o.max_kernel_ops
    << " block_ops=" << o.max_block_ops << " graph_kernels=" << o.max_graph_kernels
    << " kernel_inputs=" << o.max_kernel_inputs << " abstract_pruning=" << o.abstract_pruning
    << " program_tile_values=" << o.program_tile_values << " target=" << o.target.name
    << " cost_bound=" << cost_bound_name(o.cost_bound);
  return s.str();
}

void write_checkpoint(const std::string& path, const CheckpointState& st) {
  Json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["fingerprint"] = st.fingerprint;
  j["elapsed_seconds"] = st.elapsed_seconds;
  if (st.bytes_phase_seconds >= 0) j["bytes_phase_seconds"] = st.bytes_phase_seconds;
  j["stats"] = stats_json(st.stats);
  // Sibling tasks share their prefix: each distinct prefix is written once.
  Json prefixes = Json::array();
  std::map<const Graph*, size_t> prefix_index;
  Json pending = Json::array();
  for (const Task& t : st.pending) {
    Json tj;
    tj["path"] = t.path;
    auto [it, fresh] = prefix_index.try_emplace(t.prefix.get(), prefix_index.size());
    if (fresh) prefixes.push_back(graph_json(*t.prefix));
    tj["prefix"] = it->second;
    if (t.is_block()) {
      std::vector<int32_t> operands;
      for (TensorId o : t.operands) operands.push_back(o.value);
      tj["operands"] = operands;
      tj["chunk"] = t.chunk;
      tj["finish_only"] = t.finish_only;
    }
    pending.push_back(std::move(tj));
  }
  j["prefixes"] = std::move(prefixes);
  j["pending"] = std::move(pending);
  Json cands = Json::array();
  for (const FoundCandidate& c : st.candidates)
    cands.push_back({{"path", c.path}, {"found_seconds", c.found_seconds}, {"graph", graph_json(c.graph)}});
  j["candidates"] = std::move(cands);

  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw UserError(tmp + ": cannot write the checkpoint");
    f << j.dump() << '\n';
    if (!f.flush()) throw UserError(tmp + ": cannot write the checkpoint");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw UserError(path + ": cannot replace the checkpoint");
}

CheckpointState read_checkpoint(const std::string& path, const Target& target) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw UserError(path + ": cannot read the checkpoint");
  std::stringstream buf;
  buf << f.rdbuf();
  CheckpointState st;
  try {
    Json j = Json::parse(buf.str());
    if (j.at("format").get<std::string>() != kFormat || j.at("version").get<int>() != kVersion)
      throw UserError(path + ": not a mugraph search checkpoint of version " + std::to_string(kVersion));
    st.fingerprint = j.at("fingerprint").get<std::string>();
    st.elapsed_seconds = j.at("elapsed_seconds").get<double>();
    st.bytes_phase_seconds = j.value("bytes_phase_seconds", -1.0);
    st.stats = stats_from(j.at("stats"));
    std::vector<std::shared_ptr<const Graph>> prefixes;
    // Graphs from the file are checked as graphs from any file are, so that an edited or damaged
    // checkpoint is refused here rather than breaking the search that resumes from it.
    for (const Json& pj : j.at("prefixes")) {
      Graph g = from_json(pj.dump(), path);
      if (auto r = validate_prefix(g, target))
        throw std::runtime_error("prefix " + std::to_string(prefixes.size()) +
                                 " is not a valid search state: " + r->str());
      prefixes.push_back(std::make_shared<const Graph>(std::move(g)));
    }
    for (const Json& tj : j.at("pending")) {
      Task t;
      t.path = tj.at("path").get<std::vector<int32_t>>();
      const size_t index = tj.at("prefix").get<size_t>();
      if (index >= prefixes.size()) throw std::runtime_error("a task names a prefix the checkpoint does not have");
      t.prefix = prefixes[index];
      if (tj.contains("chunk")) {
        t.chunk = tj.at("chunk").get<int32_t>();
        t.finish_only = tj.at("finish_only").get<bool>();
        for (int32_t o : tj.at("operands").get<std::vector<int32_t>>()) {
          if (o < 0 || static_cast<size_t>(o) >= t.prefix->tensors.size() || t.chunk < 0)
            throw std::runtime_error("a block task names a tensor its prefix does not have");
          t.operands.push_back(TensorId(o));
        }
      }
      st.pending.push_back(std::move(t));
    }
    for (const Json& cj : j.at("candidates")) {
      FoundCandidate c;
      c.path = cj.at("path").get<std::vector<int32_t>>();
      c.found_seconds = cj.value("found_seconds", 0.0);
      c.graph = from_json(cj.at("graph").dump(), path);
      if (auto r = validate(c.graph, target))
        throw std::runtime_error("candidate " + std::to_string(st.candidates.size()) + " is not a valid μGraph for " +
                                 std::string(target.name) + ": " + r->str());
      c.metrics = candidate_metrics(c.graph, target);
      c.estimated_us = rank_estimate_us(c.graph, gpu_spec(target.name));
      st.candidates.push_back(std::move(c));
    }
  } catch (const UserError&) {
    throw;
  } catch (const std::exception& e) {
    throw UserError(path + ": malformed checkpoint: " + e.what());
  }
  return st;
}

}  // namespace mugraph::search_detail
