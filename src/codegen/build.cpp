// Building generated code (build.h, build_tools.h): the compiler commands and the build cache.
#include "mugraph/build.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "build_tools.h"
#include "files.h"
#include "mugraph/error.h"

extern char** environ;

namespace mugraph {

namespace codegen {

namespace fs = std::filesystem;

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

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

namespace {

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
  throw UserError("building generated code needs nvcc (the CUDA toolkit): set CUDACXX or put nvcc on PATH");
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

/// What `compiler --version` prints (cached per compiler for the process): part of a build's
/// cache key, so that a toolkit upgraded in place builds again instead of reusing old builds.
std::string compiler_version(const std::string& compiler) {
  static std::mutex mu;
  static std::map<std::string, std::string> known;
  std::lock_guard lock(mu);
  if (auto it = known.find(compiler); it != known.end()) return it->second;
  std::error_code ec;
  const fs::path dir = fs::temp_directory_path(ec) / ("mugraph-version-" + std::to_string(::getpid()));
  fs::create_directories(dir, ec);
  const ProcessResult r = run_process({compiler, "--version"}, dir);
  fs::remove_all(dir, ec);
  // A compiler that cannot say (or cannot start: the build reports that) keys by its path alone.
  return known[compiler] = r.status == 0 ? r.out : std::string();
}

}  // namespace

std::string nvcc_gencode(const CudaTarget& target) {
  // Machine code for the target alone. The shorthand -arch=sm_90a also embeds compute_90 PTX,
  // and that second device pass (plain sm_90: no wgmma, no __CUDA_ARCH_FEAT_SM90_ALL) rejects
  // the kernels that read swizzled wgmma operands in place (nvcc 13.0). The harness and the
  // library run on the GPU they were built for, so the PTX would never be used.
  const std::string a(target.cmake_arch);
  return "-gencode=arch=compute_" + a + ",code=sm_" + a;
}

CachedBuild build_cached(const GeneratedCode& code, const CudaTarget& target, bool emulate,
                         const std::string& cache_dir, BuildProduct product) {
  const bool library = product == BuildProduct::shared_library, batch = product == BuildProduct::batch_harness;
  const std::string compiler = emulate ? (std::getenv("CXX") ? std::getenv("CXX") : "c++") : find_nvcc();
  // The build command, the compiler's version and everything the build reads make the cache key.
  const char* product_key = library ? " library" : batch ? " batch" : "";
  const char* dir_prefix = library ? "lib-" : batch ? "batch-" : "";
  std::string key = std::string(target.arch) + (emulate ? " emulate " : " gpu ") + compiler + product_key + "\n" +
                    compiler_version(compiler) + (batch ? std::string() : code.source + code.header);
  for (const EmbeddedFile& f : device_library_files()) key += std::string(f.name) + std::string(f.text);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(key)));
  CachedBuild build;
  build.dir =
      cache_root(cache_dir) / (std::string(emulate ? "emu-" : "") + dir_prefix + std::string(target.arch) + "-" + hex);
  build.output = build.dir / (library ? "libugraph.so" : batch ? "bench_libraries" : "bench");
  build.cached = fs::exists(build.output);
  if (build.cached) return build;

  // Build in a directory of this process's own and move it into place whole, so that a build cut
  // short never looks cached and two processes building the same code (parallel tests, two
  // `mugraph bench` runs) never write each other's files: the first to finish wins, the other's
  // copy is dropped. The files keep their names, so the build runs in the staging directory.
  static std::atomic<int> builds{0};  // threads of one process may build the same code too
  const fs::path staging =
      build.dir.string() + ".partial-" + std::to_string(::getpid()) + "-" + std::to_string(builds++);
  std::error_code ec;
  fs::remove_all(staging, ec);
  write_generated_code(code, staging.string());
  const std::string dir = staging.string();
  const fs::path output = staging / build.output.filename();
  std::vector<std::string> cmd;
  const std::string bench_main = (staging / "mugraph_device" / "bench_main.cu").string();
  if (batch) {
    // No generated code: the harness loads each μGraph's library (dlopen).
    if (emulate)
      cmd = {compiler, "-std=c++20", "-O2", "-DMGD_BENCH_LIBRARIES", "-I" + dir, "-x", "c++", bench_main, "-ldl"};
    else
      cmd = {compiler,   "-std=c++17", "-O3", nvcc_gencode(target), "-DMGD_BENCH_LIBRARIES",
             "-I" + dir, bench_main,   "-ldl"};
  } else if (emulate) {
    cmd = {compiler, "-std=c++20", "-O2", "-I" + dir, "-x", "c++", (staging / "ugraph.cu").string()};
    if (library) {
      cmd.insert(cmd.begin() + 1, {"-shared", "-fPIC"});
    } else {
      cmd.insert(cmd.end(), {"-x", "c++", bench_main});
    }
  } else {
    cmd = {compiler, "-std=c++17", "-O3", nvcc_gencode(target), "-I" + dir, (staging / "ugraph.cu").string()};
    if (library) {
      cmd.insert(cmd.begin() + 1, {"-shared", "-Xcompiler", "-fPIC"});
    } else {
      cmd.push_back(bench_main);
    }
    cmd.push_back("-lcublas");
  }
  cmd.insert(cmd.end(), {"-o", output.string()});
  ProcessResult r = run_process(cmd, staging);
  if (r.status != 0) throw UserError("building the generated code in " + dir + " failed:\n" + r.err);
  // A directory left without its output (a build of an older version cut short) is replaced.
  if (fs::exists(build.dir, ec) && !fs::exists(build.output, ec)) fs::remove_all(build.dir, ec);
  fs::rename(staging, build.dir, ec);
  if (ec) {
    if (!fs::exists(build.output)) throw UserError("cannot move the build " + dir + " into place: " + ec.message());
    fs::remove_all(staging, ec);  // another process built the same code first
  }
  return build;
}

}  // namespace codegen

BuiltLibrary build_ugraph_library(const Graph& ugraph, const BuildOptions& options) {
  const CudaTarget& target = find_cuda_target(options.target);
  BuiltLibrary lib;
  lib.code = generate_cuda(ugraph, target, options.codegen);
  const codegen::CachedBuild b = codegen::build_cached(lib.code, target, options.emulate, options.cache_dir,
                                                       codegen::BuildProduct::shared_library);
  lib.library = b.output.string();
  lib.dir = b.dir.string();
  lib.cached = b.cached;
  return lib;
}

}  // namespace mugraph
