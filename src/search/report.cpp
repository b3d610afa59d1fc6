// report.json of a search (search.h, search_report_json).
#include <nlohmann/json.hpp>
#include <thread>

#include "mugraph/search.h"

namespace mugraph {

namespace {

nlohmann::ordered_json metrics_json(const SearchCandidate& c) {
  nlohmann::ordered_json j;
  j["kernels"] = c.metrics.kernels;
  j["graph_defined_kernels"] = c.metrics.graph_defined_kernels;
  j["device_bytes"] = c.metrics.device_bytes;
  j["load_bytes_per_sm"] = c.metrics.load_bytes_per_sm;
  j["block_ops"] = c.metrics.block_ops;
  j["shared_traffic_bytes_per_sm"] = c.metrics.shared_traffic_bytes_per_sm;
  j["shared_memory_bytes"] = c.metrics.shared_memory_bytes;
  // The cost model's estimate on the search's target, kernel by kernel (cost_model.h).
  j["estimated_us"] = c.cost.total_us;
  nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
  for (const KernelCost& k : c.cost.kernels)
    kernels.push_back({{"kind", k.kind},
                       {"total_us", k.total_us},
                       {"bound", k.bound},
                       {"launch_us", k.launch_us},
                       {"dram_us", k.dram_us},
                       {"dram_share", k.dram_share},
                       {"l2_us", k.l2_us},
                       {"sm_load_us", k.sm_load_us},
                       {"shared_us", k.shared_us},
                       {"tensor_us", k.tensor_us},
                       {"fma_us", k.fma_us},
                       {"pieces_us", k.pieces_us},
                       {"issue_us", k.issue_us},
                       {"barrier_us", k.barrier_us},
                       {"pipeline_us", k.pipeline_us},
                       {"pipelined", k.pipelined},
                       {"blocks", k.blocks},
                       {"blocks_on_busiest_sm", k.blocks_on_busiest_sm},
                       {"resident_blocks_per_sm", k.resident_blocks_per_sm}});
  j["estimate"] = std::move(kernels);
  j["found_seconds"] = c.found_seconds;
  const VerifyResult& v = c.verification;
  j["verification"] = {{"tests", v.tests_run},
                       {"bound", v.bound},
                       {"guarantee", v.guarantee},
                       {"guarantee_note", v.guarantee_note},
                       {"opaque_functions", v.opaque_functions},
                       {"seed", v.seed},
                       {"float_max_relative_error", v.float_max_rel_error}};
  return j;
}

}  // namespace

std::string search_report_json(const SearchResult& r, const SearchOptions& o) {
  nlohmann::ordered_json j;
  j["format"] = "mugraph-search-report";
  j["version"] = 1;
  j["search_seconds"] = r.search_seconds;
  j["verify_seconds"] = r.verify_seconds;
  j["background_verification"] = {{"candidates", r.background_verified}, {"seconds", r.background_verify_seconds}};
  j["stop_reason"] = stop_reason_name(r.stop_reason);
  j["stop_detail"] = r.stop_detail;
  j["unsearched_floor_us"] = r.unsearched_floor_us >= 0 ? nlohmann::ordered_json(r.unsearched_floor_us) : nullptr;
  j["resumed"] = r.resumed;
  if (o.cost_bound == CostBound::both) {
    j["bytes_phase_seconds"] = r.bytes_phase_seconds >= 0 ? nlohmann::ordered_json(r.bytes_phase_seconds) : nullptr;
    j["bytes_phase_dropped_tasks"] = r.bytes_phase_dropped_tasks;
  }
  const RetileStats& rt = r.retile;
  j["retile"] = {{"seeds", rt.seeds},
                 {"configs", rt.configs},
                 {"rebuilt", rt.rebuilt},
                 {"complete", rt.complete},
                 {"kept", rt.kept},
                 {"best_before_us", rt.best_before_us},
                 {"best_after_us", rt.best_after_us},
                 {"seconds", rt.seconds},
                 {"stopped", rt.stopped}};
  j["states_explored"] = r.stats.states;
  j["kernel_states"] = r.stats.kernel_states;
  j["block_configs"] = r.stats.block_configs;
  j["pruned"] = r.stats.pruned;
  j["input_probes"] = r.input_probes;
  j["pruned_total"] = r.stats.total_pruned();
  j["candidates"] = r.stats.candidates;
  j["verified"] = r.stats.verified;
  j["rejected"] = r.stats.rejected;
  j["worse_key"] = r.worse_key;
  j["tasks"] = r.stats.tasks;
  // Not in the counts above: the work of the tasks a stop cut short (SearchResult::cut_short).
  j["cut_short"] = {{"tasks", r.cut_short.tasks}, {"states", r.cut_short.states}, {"pruned", r.cut_short.pruned}};
  j["oracle_queries"] = r.stats.oracle_queries;
  j["block_replays"] = r.stats.block_replays;
  j["options"] = {{"max_kernel_ops", o.max_kernel_ops},
                  {"max_block_ops", o.max_block_ops},
                  {"block_ops_convention", "input iterators counted, output savers not"},
                  {"max_graph_kernels", o.max_graph_kernels},
                  {"max_kernel_inputs", o.max_kernel_inputs},
                  {"time_limit_seconds", o.time_limit_seconds},
                  {"threads", o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency())},
                  {"deterministic", o.deterministic},
                  {"abstract_pruning", o.abstract_pruning},
                  {"program_tile_values", o.program_tile_values},
                  {"input_probes", o.input_probes},
                  {"retile_seeds", o.retile_seeds},
                  {"target", o.target.name},
                  {"cost_bound", cost_bound_name(o.cost_bound)},
                  {"bytes_phase_share", o.bytes_phase_share},
                  {"bytes_phase_min_seconds", o.bytes_phase_min_seconds},
                  {"bound_ratio", o.model_bound_ratio},
                  {"block_cache_bytes", o.block_cache_bytes},
                  {"verify_delta", o.verify.delta}};
  if (!r.lifted_repeats.empty()) j["lifted_repeats"] = r.lifted_repeats;
  if (!r.kept_repeats.empty()) j["kept_repeats"] = r.kept_repeats;
  if (!r.cut_at.empty()) {
    j["cut_at"] = r.cut_at;
    j["whole_search_seconds"] = r.whole_search_seconds;
    j["whole_stop_reason"] = stop_reason_name(r.whole_stop_reason);
    j["whole_best_estimated_us"] =
        r.whole_best_estimated_us > 0 ? nlohmann::ordered_json(r.whole_best_estimated_us) : nullptr;
  }
  if (!r.kept_ops.empty() || !r.parts.empty()) {
    j["kept_ops"] = r.kept_ops;
    nlohmann::ordered_json parts = nlohmann::ordered_json::array();
    for (const SearchPartResult& p : r.parts) {
      nlohmann::ordered_json pj;
      pj["ops"] = p.ops;
      pj["inputs"] = p.inputs;
      pj["outputs"] = p.outputs;
      pj["searched"] = p.searched;
      pj["stop_reason"] = p.searched ? nlohmann::ordered_json(stop_reason_name(p.stop_reason)) : nullptr;
      pj["stop_detail"] = p.stop_detail;
      pj["resumed"] = p.resumed;
      pj["search_seconds"] = p.search_seconds;
      pj["verify_seconds"] = p.verify_seconds;
      pj["states_explored"] = p.states;
      pj["best_estimated_us"] = p.best_estimated_us > 0 ? nlohmann::ordered_json(p.best_estimated_us) : nullptr;
      pj["best_kernels"] = p.kernels;
      if (!p.cut_at.empty()) pj["cut_at"] = p.cut_at;
      parts.push_back(std::move(pj));
    }
    j["parts"] = std::move(parts);
  }
  if (!r.top.empty())
    j["best"] = metrics_json(r.top.front());
  else
    j["best"] = nullptr;
  nlohmann::ordered_json top = nlohmann::ordered_json::array();
  for (const SearchCandidate& c : r.top) top.push_back(metrics_json(c));
  j["top"] = std::move(top);
  return j.dump(2) + "\n";
}

}  // namespace mugraph
