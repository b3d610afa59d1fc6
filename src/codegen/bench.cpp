// mugraph bench (bench.h): build the harness around generated code, run it, check, time.
#include "mugraph/bench.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "build_tools.h"
#include "mugraph/error.h"
#include "thread_pool.h"

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

/// The check against the interpreter, on the same (rounded) inputs: each output the harness wrote
/// (`io / (prefix + j + ".bin")`) against run_float's, into result's outputs, ok and values.
void check_outputs(const Graph& g, const std::vector<HostTensor>& inputs, const GeneratedCode& code, const fs::path& io,
                   const std::string& prefix, double tolerance, BenchResult* result, int threads = 0) {
  InterpOptions interp;
  interp.threads = threads;
  std::vector<HostTensor> want = run_float(g, inputs, interp);
  result->ok = true;
  for (size_t j = 0; j < code.outputs.size(); ++j) {
    HostTensor got = from_bytes(read_all(io / (prefix + std::to_string(j) + ".bin")), code.outputs[j].type);
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
    c.ok = c.not_finite == 0 && c.reference_not_finite == 0 && c.max_abs_error <= tolerance * c.max_abs_reference;
    result->ok = result->ok && c.ok;
    result->outputs.push_back(c);
    result->values.push_back(std::move(got));
  }
}

/// The timing fields of the harness's JSON line.
void read_timing(const nlohmann::json& j, BenchResult* result) {
  result->device = j.at("device").get<std::string>();
  result->runs = j.at("runs").get<int>();
  result->median_us = j.at("median_us").get<double>();
  result->min_us = j.at("min_us").get<double>();
  result->input_copies = j.at("copies").get<int>();
  if (j.contains("graph_median_us")) {
    result->graph_median_us = j.at("graph_median_us").get<double>();
    result->graph_min_us = j.at("graph_min_us").get<double>();
  }
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
    read_timing(nlohmann::json::parse(r.out), &result);
  } catch (const nlohmann::json::exception& e) {
    throw UserError("the benchmark harness printed something other than its JSON line: " + r.out);
  }

  check_outputs(g, inputs, code, io, "out_", opt.tolerance, &result);
  return result;
}

namespace {

/// What bench_ugraphs builds before it runs anything: each μGraph's code, its library (or why it
/// has none) and the batch harness.
struct BatchBuild {
  std::vector<GeneratedCode> codes;
  std::vector<std::string> libraries;
  std::vector<char> cached;
  std::vector<std::string> errors;  ///< empty where the library was built
  codegen::CachedBuild harness;
};

/// Generates every μGraph's code and builds it as a library, several at once (identical code
/// once: two builds of one source would share a cache directory), and the harness that loads
/// them, once per target and compiler. `inputs`, where given, is how many inputs the caller has
/// for each μGraph. Without a compiler it throws, for all alike.
BatchBuild build_batch(const std::vector<Graph>& ugraphs, std::optional<size_t> inputs, const BenchOptions& opt) {
  const CudaTarget& target = find_cuda_target(opt.target);
  const size_t n = ugraphs.size();
  BatchBuild b{std::vector<GeneratedCode>(n),
               std::vector<std::string>(n),
               std::vector<char>(n, 0),
               std::vector<std::string>(n),
               {}};
  std::vector<size_t> built_as(n);
  std::map<std::string, size_t> first_of;
  for (size_t i = 0; i < n; ++i) {
    built_as[i] = i;
    try {
      b.codes[i] = generate_cuda(ugraphs[i], target, opt.codegen);
      if (inputs && *inputs != b.codes[i].inputs.size())
        throw UserError("bench: " + std::to_string(*inputs) + " inputs given, the μGraph takes " +
                        std::to_string(b.codes[i].inputs.size()));
      built_as[i] = first_of.emplace(b.codes[i].source + b.codes[i].header, i).first->second;
    } catch (const UserError& e) {
      b.errors[i] = e.what();
    }
  }
  b.harness =
      codegen::build_cached(GeneratedCode{}, target, opt.emulate, opt.cache_dir, codegen::BuildProduct::batch_harness);
  std::vector<size_t> to_build;
  for (size_t i = 0; i < n; ++i)
    if (b.errors[i].empty() && built_as[i] == i) to_build.push_back(i);
  {
    // A build takes one core for seconds.
    const int workers =
        static_cast<int>(std::min<size_t>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u), to_build.size()));
    interp::ThreadPool pool(std::max(workers, 1));
    pool.parallel_for(static_cast<int64_t>(to_build.size()), [&](int, int64_t k) {
      const size_t i = to_build[static_cast<size_t>(k)];
      try {
        const codegen::CachedBuild built = codegen::build_cached(b.codes[i], target, opt.emulate, opt.cache_dir,
                                                                 codegen::BuildProduct::shared_library);
        b.libraries[i] = built.output.string();
        b.cached[i] = built.cached;
      } catch (const UserError& e) {
        b.errors[i] = e.what();
      }
    });
  }
  for (size_t i = 0; i < n; ++i)
    if (b.errors[i].empty() && built_as[i] != i) {
      b.libraries[i] = b.libraries[built_as[i]];
      b.cached[i] = b.cached[built_as[i]];
      b.errors[i] = b.errors[built_as[i]];
    }
  return b;
}

}  // namespace

BuiltBatch build_bench_batch(const std::vector<Graph>& ugraphs, const BenchOptions& opt) {
  const BatchBuild b = build_batch(ugraphs, std::nullopt, opt);
  BuiltBatch out;
  out.harness = {b.harness.dir.string(), b.harness.output.string(), b.harness.cached};
  for (size_t i = 0; i < ugraphs.size(); ++i) out.libraries.push_back({b.libraries[i], b.cached[i] != 0, b.errors[i]});
  return out;
}

std::vector<BatchBenchResult> bench_ugraphs(const std::vector<Graph>& ugraphs, const std::vector<HostTensor>& inputs,
                                            const BenchOptions& opt) {
  std::vector<BatchBenchResult> results(ugraphs.size());
  if (ugraphs.empty()) return results;
  BatchBuild built = build_batch(ugraphs, inputs.size(), opt);
  const std::vector<GeneratedCode>& codes = built.codes;
  const std::vector<std::string>& libraries = built.libraries;
  const std::vector<char>& cached = built.cached;
  const codegen::CachedBuild& harness = built.harness;
  for (size_t i = 0; i < ugraphs.size(); ++i) results[i].error = std::move(built.errors[i]);

  // One run directory for the batch: the inputs once, each job's outputs, the jobs file.
  static std::atomic<int> batches{0};
  const fs::path io = fs::path(harness.dir) / ("io-" + std::to_string(::getpid()) + "-" + std::to_string(batches++));
  std::error_code ec;
  fs::remove_all(io, ec);
  fs::create_directories(io, ec);
  if (ec) throw UserError("cannot create " + io.string() + ": " + ec.message());
  struct RemoveDir {
    fs::path dir;
    ~RemoveDir() {
      std::error_code e;
      fs::remove_all(dir, e);
    }
  } remove_io{io};
  std::vector<std::string> input_files;
  for (size_t k = 0; k < inputs.size(); ++k) {
    input_files.push_back((io / ("in_" + std::to_string(k) + ".bin")).string());
    write_bytes(input_files.back(), to_bytes(inputs[k]));
  }
  std::vector<size_t> job_of;  // job -> μGraph
  {
    std::ofstream jobs(io / "jobs.txt");
    for (size_t i = 0; i < ugraphs.size(); ++i) {
      if (!results[i].error.empty()) continue;
      jobs << libraries[i];
      for (size_t j = 0; j < codes[i].outputs.size(); ++j) {
        const TensorType& t = codes[i].outputs[j].type;
        jobs << '\t' << (io / ("out_" + std::to_string(job_of.size()) + "_" + std::to_string(j) + ".bin")).string()
             << ':' << t.shape.numel() * dtype_bytes(t.dtype);
      }
      jobs << '\n';
      job_of.push_back(i);
    }
    if (!jobs) throw UserError("cannot write " + (io / "jobs.txt").string());
  }

  // Run the jobs; a CUDA error ends the harness (the context may be lost), so it starts again
  // after the job that failed. A crash (no JSON line for the job it was running) counts as that
  // job's failure.
  std::vector<bool> reported(job_of.size(), false);
  size_t next = 0;
  while (next < job_of.size()) {
    std::vector<std::string> cmd = {harness.output.string(),     "--warmup", std::to_string(opt.warmup), "--repeats",
                                    std::to_string(opt.repeats), "--first",  std::to_string(next)};
    cmd.insert(cmd.end(), input_files.begin(), input_files.end());
    cmd.push_back("--");
    cmd.push_back((io / "jobs.txt").string());
    ProcessResult r = run_process(cmd, io);
    while (!r.err.empty() && std::isspace(static_cast<unsigned char>(r.err.back()))) r.err.pop_back();
    if (r.status == 3) throw UserError("mugraph bench needs a GPU: " + r.err);
    std::istringstream lines(r.out);
    std::string line;
    size_t after = next;
    while (std::getline(lines, line)) {
      if (line.empty()) continue;
      nlohmann::json j;
      size_t job = 0;
      try {
        j = nlohmann::json::parse(line);
        job = j.at("job").get<size_t>();
      } catch (const nlohmann::json::exception&) {
        continue;  // a line cut short by a crash: its job counts as not reported
      }
      if (job >= job_of.size())
        throw UserError("the batch harness reported job " + std::to_string(job) + " of " +
                        std::to_string(job_of.size()));
      BatchBenchResult& entry = results[job_of[job]];
      reported[job] = true;
      after = std::max(after, job + 1);
      if (j.contains("error")) {
        entry.error = "the generated code failed: " + j.at("error").get<std::string>();
        continue;
      }
      BenchResult b;
      b.build_dir = fs::path(libraries[job_of[job]]).parent_path().string();
      b.cached = cached[job_of[job]];
      read_timing(j, &b);
      entry.result = std::move(b);
    }
    if (r.status == 0 && after >= job_of.size()) break;
    if (after < job_of.size() && !reported[after] && r.status != 2) {
      // The harness stopped while running this job, without a line for it.
      results[job_of[after]].error =
          "the benchmark harness stopped (exit " + std::to_string(r.status) + ") running it: " + r.err;
      reported[after] = true;
      ++after;
    }
    if (after == next) {  // it failed before its first job: it runs none of them
      for (size_t job = next; job < job_of.size(); ++job)
        results[job_of[job]].error =
            "the batch harness failed (exit " + std::to_string(r.status) + ") before this job: " + r.err;
      break;
    }
    next = after;
  }

  // What the batch could not run is run alone, by its own harness (built from its source with
  // the harness's code, as mugraph bench with one file does): a μGraph that fails there too gets
  // both errors, and one that runs alone is measured, with the batch's error kept beside it.
  std::vector<char> alone(job_of.size(), 0);
  for (size_t job = 0; job < job_of.size(); ++job) {
    BatchBenchResult& entry = results[job_of[job]];
    if (entry.result) continue;
    if (entry.error.empty()) entry.error = "the batch harness reported nothing for it";
    alone[job] = 1;
    try {
      entry.result = bench_ugraph(ugraphs[job_of[job]], inputs, opt);
      entry.batch_error = entry.error;
      entry.error.clear();
    } catch (const UserError& e) {
      entry.error += "; run alone: " + std::string(e.what());
    }
  }

  // The checks against the interpreter: several μGraphs at once, the cores shared among them (a
  // small graph's interpretation does not keep every core busy).
  std::vector<size_t> to_check;
  for (size_t job = 0; job < job_of.size(); ++job)
    if (results[job_of[job]].result && !alone[job]) to_check.push_back(job);
  if (!to_check.empty()) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const int workers = std::min(cores, static_cast<int>(to_check.size()));
    interp::ThreadPool pool(workers);
    pool.parallel_for(static_cast<int64_t>(to_check.size()), [&](int, int64_t k) {
      const size_t job = to_check[static_cast<size_t>(k)];
      BatchBenchResult& entry = results[job_of[job]];
      try {
        check_outputs(ugraphs[job_of[job]], inputs, codes[job_of[job]], io, "out_" + std::to_string(job) + "_",
                      opt.tolerance, &*entry.result, std::max(1, cores / workers));
      } catch (const UserError& e) {
        entry.result.reset();
        entry.error = e.what();
      }
    });
  }
  return results;
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
