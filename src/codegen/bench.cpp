// mugraph bench (bench.h): build the harness around generated code, run it, check, time.
#include "mugraph/bench.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "files.h"
#include "mugraph/error.h"

extern char** environ;

namespace mugraph {

namespace {

namespace fs = std::filesystem;

struct ProcessResult {
  int status = -1;  ///< exit status, or -1 if it did not exit normally
  std::string out, err;
};

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

/// Runs argv (no shell) with stdout and stderr captured in files under dir.
ProcessResult run_process(const std::vector<std::string>& argv, const fs::path& dir) {
  const fs::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ProcessResult r;
  if (rc != 0) {
    r.err = "cannot start " + argv[0] + ": " + std::strerror(rc);
    return r;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_all(out);
  r.err = read_all(err);
  return r;
}

bool executable(const fs::path& p) { return ::access(p.c_str(), X_OK) == 0; }

/// nvcc: $CUDACXX, else on PATH, else the toolkit's default place.
std::string find_nvcc() {
  if (const char* c = std::getenv("CUDACXX"); c && *c) return c;
  if (const char* path = std::getenv("PATH")) {
    std::istringstream dirs(path);
    std::string d;
    while (std::getline(dirs, d, ':'))
      if (!d.empty() && executable(fs::path(d) / "nvcc")) return (fs::path(d) / "nvcc").string();
  }
  if (executable("/usr/local/cuda/bin/nvcc")) return "/usr/local/cuda/bin/nvcc";
  throw UserError("mugraph bench needs nvcc (the CUDA toolkit): set CUDACXX or put nvcc on PATH");
}

fs::path cache_root(const std::string& given) {
  if (!given.empty()) return given;
  if (const char* c = std::getenv("MUGRAPH_CACHE_DIR"); c && *c) return c;
  if (const char* c = std::getenv("XDG_CACHE_HOME"); c && *c) return fs::path(c) / "mugraph";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "mugraph";
  return fs::temp_directory_path() / "mugraph-cache";
}

/// FNV-1a, 64 bits: the cache key of a build (a collision would need equal-length inputs that
/// hash equal; the key also holds the target and the compiler command).
uint64_t fnv1a(const std::string& s, uint64_t h = 0xcbf29ce484222325ULL) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

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

BenchResult bench_ugraph(const Graph& g, const std::vector<HostTensor>& inputs, const BenchOptions& opt) {
  const CudaTarget& target = find_cuda_target(opt.target);
  GeneratedCode code = generate_cuda(g, target, opt.codegen);
  if (inputs.size() != code.inputs.size())
    throw UserError("bench: " + std::to_string(inputs.size()) + " inputs given, the μGraph takes " +
                    std::to_string(code.inputs.size()));

  // The build command and everything it reads make the cache key.
  const std::string compiler = opt.emulate ? (std::getenv("CXX") ? std::getenv("CXX") : "c++") : find_nvcc();
  std::string key =
      std::string(target.arch) + (opt.emulate ? " emulate " : " gpu ") + compiler + "\n" + code.source + code.header;
  for (const codegen::EmbeddedFile& f : codegen::device_library_files())
    key += std::string(f.name) + std::string(f.text);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(key)));
  BenchResult result;
  const fs::path dir =
      cache_root(opt.cache_dir) / (std::string(opt.emulate ? "emu-" : "") + std::string(target.arch) + "-" + hex);
  result.build_dir = dir.string();
  const fs::path exe = dir / "bench";
  result.cached = executable(exe);
  if (!result.cached) {
    write_generated_code(code, dir.string());
    std::vector<std::string> cmd;
    if (opt.emulate) {
      cmd = {compiler,
             "-std=c++20",
             "-O2",
             "-I" + dir.string(),
             "-x",
             "c++",
             (dir / "ugraph.cu").string(),
             "-x",
             "c++",
             (dir / "mugraph_device" / "bench_main.cu").string(),
             "-o",
             exe.string()};
    } else {
      const std::string arch(target.arch);
      cmd = {compiler,
             "-std=c++17",
             "-O3",
             "-arch=" + arch,
             "-I" + dir.string(),
             (dir / "ugraph.cu").string(),
             (dir / "mugraph_device" / "bench_main.cu").string(),
             "-lcublas",
             "-o",
             exe.string()};
    }
    ProcessResult r = run_process(cmd, dir);
    if (r.status != 0) throw UserError("building the benchmark harness in " + dir.string() + " failed:\n" + r.err);
  }

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
      if (!std::isfinite(x)) {
        ++c.not_finite;
        continue;
      }
      c.max_abs_error = std::max(c.max_abs_error, std::abs(x - y));
      c.max_abs_reference = std::max(c.max_abs_reference, std::abs(y));
    }
    c.ok = c.not_finite == 0 && c.max_abs_error <= opt.tolerance * c.max_abs_reference;
    result.ok = result.ok && c.ok;
    result.outputs.push_back(c);
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
  j["ok"] = r.ok;
  j["runs"] = r.runs;
  j["median_us"] = r.median_us;
  j["min_us"] = r.min_us;
  j["input_copies"] = r.input_copies;
  j["cached"] = r.cached;
  j["build_dir"] = r.build_dir;
  nlohmann::ordered_json outs = nlohmann::ordered_json::array();
  for (const BenchOutputCheck& c : r.outputs)
    outs.push_back({{"name", c.name},
                    {"max_abs_error", c.max_abs_error},
                    {"max_abs_reference", c.max_abs_reference},
                    {"not_finite", c.not_finite},
                    {"ok", c.ok}});
  j["outputs"] = outs;
  return j.dump();
}

}  // namespace mugraph
