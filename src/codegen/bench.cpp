// mugraph bench (bench.h): build the harness around generated code, run it, check, time.
#include "mugraph/bench.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "build_tools.h"
#include "mugraph/error.h"

namespace mugraph {

namespace {

namespace fs = std::filesystem;
using codegen::ProcessResult;
using codegen::read_all;
using codegen::run_process;

void write_bytes(const fs::path& p, const std::vector<unsigned char>& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw UserError("cannot write " + p.string());
}

/// A tensor as the raw bytes of its dtype.
std::vector<unsigned char> to_bytes(const HostTensor& t) {
  const int b = dtype_bytes(t.type.dtype);
  std::vector<unsigned char> out(static_cast<size_t>(t.numel() * b));
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float x = t.data[static_cast<size_t>(i)];
    if (t.type.dtype == DType::f32) {
      std::memcpy(&out[static_cast<size_t>(i) * 4], &x, 4);
    } else {
      const uint16_t h = t.type.dtype == DType::f16 ? float_to_half_bits(x) : float_to_bfloat16_bits(x);
      std::memcpy(&out[static_cast<size_t>(i) * 2], &h, 2);
    }
  }
  return out;
}

HostTensor from_bytes(const std::string& bytes, const TensorType& type) {
  HostTensor t(type);
  const int b = dtype_bytes(type.dtype);
  if (static_cast<int64_t>(bytes.size()) != t.numel() * b)
    throw UserError("the harness wrote " + std::to_string(bytes.size()) + " bytes for an output of " +
                    std::to_string(t.numel() * b));
  for (int64_t i = 0; i < t.numel(); ++i) {
    float x;
    if (type.dtype == DType::f32) {
      std::memcpy(&x, &bytes[static_cast<size_t>(i) * 4], 4);
    } else {
      uint16_t h;
      std::memcpy(&h, &bytes[static_cast<size_t>(i) * 2], 2);
      x = type.dtype == DType::f16 ? half_bits_to_float(h) : bfloat16_bits_to_float(h);
    }
    t.data[static_cast<size_t>(i)] = x;
  }
  return t;
}

}  // namespace

BuiltHarness build_bench_harness(const Graph& g, const BenchOptions& opt) {
  const CudaTarget& target = find_cuda_target(opt.target);
  const codegen::CachedBuild build = codegen::build_cached(generate_cuda(g, target, opt.codegen), target, opt.emulate,
                                                           opt.cache_dir, codegen::BuildProduct::bench_harness);
  return {build.dir.string(), build.output.string(), build.cached};
}

BenchResult bench_ugraph(const Graph& g, const std::vector<HostTensor>& inputs, const BenchOptions& opt) {
  const CudaTarget& target = find_cuda_target(opt.target);
  GeneratedCode code = generate_cuda(g, target, opt.codegen);
  if (inputs.size() != code.inputs.size())
    throw UserError("bench: " + std::to_string(inputs.size()) + " inputs given, the μGraph takes " +
                    std::to_string(code.inputs.size()));

  BenchResult result;
  const codegen::CachedBuild build =
      codegen::build_cached(code, target, opt.emulate, opt.cache_dir, codegen::BuildProduct::bench_harness);
  const fs::path dir = build.dir, exe = build.output;
  result.build_dir = dir.string();
  result.cached = build.cached;

  // Inputs and outputs as raw files, then one run of the harness.
  const fs::path io = dir / "io";
  std::error_code ec;
  fs::create_directories(io, ec);
  std::vector<std::string> cmd = {exe.string(), "--warmup", std::to_string(opt.warmup), "--repeats",
                                  std::to_string(opt.repeats)};
  for (size_t i = 0; i < inputs.size(); ++i) {
    const fs::path p = io / ("in_" + std::to_string(i) + ".bin");
    write_bytes(p, to_bytes(inputs[i]));
    cmd.push_back(p.string());
  }
  cmd.push_back("--");
  for (size_t j = 0; j < code.outputs.size(); ++j) {
    const TensorType& t = code.outputs[j].type;
    cmd.push_back((io / ("out_" + std::to_string(j) + ".bin")).string() + ":" +
                  std::to_string(t.shape.numel() * dtype_bytes(t.dtype)));
  }
  // The harness's file arguments, for running it again by hand (under compute-sanitizer, say).
  std::string file_args;
  for (size_t i = 5; i < cmd.size(); ++i) file_args += (i > 5 ? " " : "") + cmd[i];
  write_bytes(io / "args.txt", std::vector<unsigned char>(file_args.begin(), file_args.end()));
  ProcessResult r = run_process(cmd, io);
  while (!r.err.empty() && std::isspace(static_cast<unsigned char>(r.err.back()))) r.err.pop_back();
  if (r.status == 3) throw UserError("mugraph bench needs a GPU: " + r.err);
  if (r.status != 0) throw UserError("the benchmark harness failed (exit " + std::to_string(r.status) + "): " + r.err);
  try {
    nlohmann::json j = nlohmann::json::parse(r.out);
    result.device = j.at("device").get<std::string>();
    result.runs = j.at("runs").get<int>();
    result.median_us = j.at("median_us").get<double>();
    result.min_us = j.at("min_us").get<double>();
    result.input_copies = j.at("copies").get<int>();
    if (j.contains("graph_median_us")) {
      result.graph_median_us = j.at("graph_median_us").get<double>();
      result.graph_min_us = j.at("graph_min_us").get<double>();
    }
  } catch (const nlohmann::json::exception& e) {
    throw UserError("the benchmark harness printed something other than its JSON line: " + r.out);
  }

  // The check against the interpreter, on the same (rounded) inputs.
  std::vector<HostTensor> want = run_float(g, inputs);
  result.ok = true;
  for (size_t j = 0; j < code.outputs.size(); ++j) {
    HostTensor got = from_bytes(read_all(io / ("out_" + std::to_string(j) + ".bin")), code.outputs[j].type);
    BenchOutputCheck c;
    c.name = code.outputs[j].name;
    for (size_t k = 0; k < got.data.size(); ++k) {
      const double x = got.data[k], y = want[j].data[k];
      if (!std::isfinite(y)) {
        ++c.reference_not_finite;
        continue;
      }
      if (!std::isfinite(x)) {
        ++c.not_finite;
        continue;
      }
      c.max_abs_error = std::max(c.max_abs_error, std::abs(x - y));
      c.max_abs_reference = std::max(c.max_abs_reference, std::abs(y));
    }
    c.ok = c.not_finite == 0 && c.reference_not_finite == 0 && c.max_abs_error <= opt.tolerance * c.max_abs_reference;
    result.ok = result.ok && c.ok;
    result.outputs.push_back(c);
    result.values.push_back(std::move(got));
  }
  return result;
}

std::string bench_result_json(const BenchResult& r, const BenchOptions& opt) {
  nlohmann::ordered_json j;
  j["device"] = r.device;
  j["target"] = opt.target;
  j["emulated"] = opt.emulate;
  j["pipeline_stages"] = opt.codegen.pipeline_stages;  // 0: chosen per kernel
  j["layouts"] = opt.codegen.choose_layouts ? "chosen" : "row-major";
  j["wgmma_operands"] = opt.codegen.read_operands_in_place ? "in-place" : "staged";
  j["matmul_chains"] = opt.codegen.matmul_chains_in_registers ? "registers" : "op-by-op";
  j["chain_accumulators"] = opt.codegen.chain_accumulators_in_registers ? "registers" : "shared";
  j["matmul_accumulators"] = opt.codegen.matmul_accumulators_in_registers ? "registers" : "shared";
  j["chain_split"] = opt.codegen.chain_split_n_blocks ? "on" : "off";
  j["matmul_overlap"] = opt.codegen.overlap_loop_matmuls ? "on" : "off";
  j["wgmma_stage_buffers"] = opt.codegen.wgmma_stage_buffers;  // the most a matmul may take
  j["block_threads"] = opt.codegen.block_threads;              // 0: each block graph's own
  j["ok"] = r.ok;
  j["runs"] = r.runs;
  j["median_us"] = r.median_us;
  j["min_us"] = r.min_us;
  if (r.graph_median_us) {
    j["graph_median_us"] = *r.graph_median_us;
    j["graph_min_us"] = *r.graph_min_us;
  }
  j["input_copies"] = r.input_copies;
  j["cached"] = r.cached;
  j["build_dir"] = r.build_dir;
  nlohmann::ordered_json outs = nlohmann::ordered_json::array();
  for (const BenchOutputCheck& c : r.outputs)
    outs.push_back({{"name", c.name},
                    {"max_abs_error", c.max_abs_error},
                    {"max_abs_reference", c.max_abs_reference},
                    {"not_finite", c.not_finite},
                    {"reference_not_finite", c.reference_not_finite},
                    {"ok", c.ok}});
  j["outputs"] = outs;
  return j.dump();
}

}  // namespace mugraph
