// The benchmark harness of generated code (mugraph bench): runs mugraph_run on a GPU (or on the
// host emulation) on raw tensors, checks nothing itself, and times it.
//
//   bench_main [--warmup N] [--repeats N] [--rotate-bytes B] in_0.bin ... -- out_0.bin:BYTES ...
//
// Built with MGD_BENCH_LIBRARIES, it is the batch harness instead (mugraph bench with several
// μGraphs, measured selection): it runs the generated code of many μGraphs of one program, each
// built as a shared library (libugraph.so), one after another in one process, on one set of
// inputs, so that the GPU's context, the inputs' copies and the harness's build are paid once:
//
//   bench_main [--warmup N] [--repeats N] [--rotate-bytes B] [--first J] in_0.bin ... -- JOBS
//
// JOBS is a file with one line per μGraph: its library, then its outputs as PATH:BYTES, separated
// by tabs. Jobs from J (default 0) run in order; each prints its JSON line with "job": its index.
// A library that cannot be loaded is reported on its line ("error") and the next job runs. A
// CUDA error is reported the same way, and the harness then stops with status 2: the error may
// have left the context unusable (an illegal address does), so the caller starts it again from
// the next job.
//
// Inputs are read whole and copied to the device; outputs are poisoned (0xFF bytes: NaN in every
// float type) before the first run, so an element the kernels never write shows up, then
// copied back and written. Timing: `warmup` runs, then `repeats` runs each between its own pair
// of events, queued back to back (time_runs); then, on a GPU, the same replayed from CUDA graphs
// (graph_median_us, graph_min_us; left out where capture fails). The inputs rotate over enough copies that together
// exceed `rotate-bytes` (default: twice the L2 cache), so a run does not find its inputs in L2 from the previous one.
// Prints one JSON line: device, runs, median_us, min_us, copies[, graph_median_us, graph_min_us]. Exit status: 0
// success, 1 bad arguments or files, 2 a CUDA error, 3 no GPU.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#if defined(MGD_BENCH_LIBRARIES)
#include <dlfcn.h>

#include "mugraph_device/platform.h"
#else
#include "ugraph.h"
#endif

namespace {

/// What a harness runs: the generated code's two entry points.
struct Ugraph {
  int64_t (*workspace_bytes)(void) = nullptr;
  int (*run)(const void* const* inputs, void* const* outputs, void* workspace, cudaStream_t stream) = nullptr;
};

int cuda_failed(cudaError_t e, const char* what) {
  std::fprintf(stderr, "bench_main: %s: %s\n", what, cudaGetErrorString(e));
  return 2;
}

/// Times `repeats` calls of launch(copy) (copies rotating) with a pair of events around each,
/// recorded without waiting in between, as PyTorch's baselines are timed (bench/paper/run.py):
/// the host queues the next run while the device executes this one, so a run's time is the
/// device's, plus whatever host work in the run the device outpaces. Sorted microseconds.
template <typename Launch>
cudaError_t time_runs(Launch&& launch, int copies, int repeats, std::vector<float>* us) {
  std::vector<cudaEvent_t> starts(static_cast<size_t>(repeats)), stops(static_cast<size_t>(repeats));
  cudaError_t e = cudaSuccess;
  for (int i = 0; i < repeats && e == cudaSuccess; ++i) {
    if ((e = cudaEventCreate(&starts[static_cast<size_t>(i)])) == cudaSuccess)
      e = cudaEventCreate(&stops[static_cast<size_t>(i)]);
  }
  for (int i = 0; i < repeats && e == cudaSuccess; ++i) {
    cudaEventRecord(starts[static_cast<size_t>(i)], nullptr);
    if (int err = launch(i % copies)) e = static_cast<cudaError_t>(err);
    cudaEventRecord(stops[static_cast<size_t>(i)], nullptr);
  }
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  for (int i = 0; i < repeats && e == cudaSuccess; ++i) {
    float ms = 0;
    e = cudaEventElapsedTime(&ms, starts[static_cast<size_t>(i)], stops[static_cast<size_t>(i)]);
    us->push_back(ms * 1000.0f);
  }
  for (size_t i = 0; i < starts.size(); ++i) {
    if (starts[i]) cudaEventDestroy(starts[i]);
    if (stops[i]) cudaEventDestroy(stops[i]);
  }
  std::sort(us->begin(), us->end());
  return e;
}

#if defined(__CUDACC__)
/// run(copy, stream) captured as one CUDA graph per copy and timed as time_runs times launches.
template <typename Run>
cudaError_t time_graph_runs(Run&& run, int copies, int warmup, int repeats, std::vector<float>* us) {
  cudaStream_t stream = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  std::vector<cudaGraphExec_t> execs;
  for (int c = 0; c < copies && e == cudaSuccess; ++c) {
    cudaGraph_t graph = nullptr;
    if ((e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal)) != cudaSuccess) break;
    const int err = run(c, stream);
    e = cudaStreamEndCapture(stream, &graph);
    if (err != 0) e = static_cast<cudaError_t>(err);
    cudaGraphExec_t exec = nullptr;
    if (e == cudaSuccess) e = cudaGraphInstantiate(&exec, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (e == cudaSuccess) execs.push_back(exec);
  }
  auto replay = [&](int c) { return static_cast<int>(cudaGraphLaunch(execs[static_cast<size_t>(c)], nullptr)); };
  for (int i = 0; i < warmup && e == cudaSuccess; ++i) e = static_cast<cudaError_t>(replay(i % copies));
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = time_runs(replay, copies, repeats, us);
  for (cudaGraphExec_t x : execs) cudaGraphExecDestroy(x);
  if (stream) cudaStreamDestroy(stream);
  cudaGetLastError();  // a failed capture leaves nothing behind for the caller
  return e;
}
#endif

/// One output: where its bytes go, and how many.
struct Output {
  std::string path;
  size_t bytes = 0;
};

bool parse_output(const std::string& arg, Output* out) {
  const size_t colon = arg.rfind(':');
  if (colon == std::string::npos || colon + 1 == arg.size()) {
    std::fprintf(stderr, "bench_main: output %s is not PATH:BYTES\n", arg.c_str());
    return false;
  }
  out->path = arg.substr(0, colon);
  out->bytes = static_cast<size_t>(std::strtoull(arg.c_str() + colon + 1, nullptr, 10));
  return true;
}

/// A string as a JSON string's contents: quotes, backslashes and control characters blanked.
std::string json_safe(std::string s) {
  for (char& c : s)
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = ' ';
  return s;
}

/// The inputs, on the device in `copies` copies, and the device's name and rotation.
struct DeviceInputs {
  std::vector<std::vector<void*>> copies;
  std::string device;
};

/// Runs one μGraph: the checked run (its outputs written to their files), the warm-up, the timed
/// runs and the graph replays; prints the JSON line (with `job_prefix` at its start: "" or
/// "\"job\": J, "). Returns 0, 1 (an output file cannot be written) or 2 (a CUDA error, reported
/// on stderr and, in `error`, for the caller's JSON line).
int bench_one(const Ugraph& g, const DeviceInputs& in, const std::vector<Output>& outputs, int warmup, int repeats,
              const std::string& job_prefix, std::string* error) {
  const int copies = static_cast<int>(in.copies.size());
  cudaError_t e = cudaSuccess;
  std::vector<void*> d_out;
  void* workspace = nullptr;
  auto release = [&] {
    for (void* p : d_out) cudaFree(p);
    if (workspace) cudaFree(workspace);
  };
  auto failed = [&](cudaError_t err, const char* what) {
    *error = std::string(what) + ": " + cudaGetErrorString(err);
    release();
    return cuda_failed(err, what);
  };
  for (const Output& o : outputs) {
    void* p = nullptr;
    if ((e = cudaMalloc(&p, o.bytes)) != cudaSuccess) return failed(e, "cudaMalloc (outputs)");
    d_out.push_back(p);
    if ((e = cudaMemset(p, 0xFF, o.bytes)) != cudaSuccess) return failed(e, "cudaMemset");
  }
  if ((e = cudaMalloc(&workspace, static_cast<size_t>(g.workspace_bytes()))) != cudaSuccess)
    return failed(e, "cudaMalloc (workspace)");

  auto run_on = [&](int copy, cudaStream_t stream) {
    const std::vector<void*>& set = in.copies[static_cast<size_t>(copy)];
    std::vector<const void*> ptrs(set.begin(), set.end());
    return g.run(ptrs.data(), d_out.data(), workspace, stream);
  };
  auto run = [&](int copy) { return run_on(copy, nullptr); };
  // The checked run: the outputs as the first run leaves them.
  if (int err = run(0)) return failed(static_cast<cudaError_t>(err), "mugraph_run");
  if ((e = cudaDeviceSynchronize()) != cudaSuccess) return failed(e, "the first run");
  for (size_t i = 0; i < d_out.size(); ++i) {
    std::vector<unsigned char> host(outputs[i].bytes);
    if ((e = cudaMemcpy(host.data(), d_out[i], host.size(), cudaMemcpyDeviceToHost)) != cudaSuccess)
      return failed(e, "cudaMemcpy (outputs)");
    std::ofstream f(outputs[i].path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(host.data()), static_cast<std::streamsize>(host.size()));
    if (!f) {
      std::fprintf(stderr, "bench_main: cannot write %s\n", outputs[i].path.c_str());
      *error = "cannot write " + outputs[i].path;
      release();
      return 1;
    }
  }
  for (int i = 0; i < warmup; ++i)
    if (int err = run(i % copies)) return failed(static_cast<cudaError_t>(err), "mugraph_run (warm-up)");
  if ((e = cudaDeviceSynchronize()) != cudaSuccess) return failed(e, "the warm-up runs");
  std::vector<float> times;
  if ((e = time_runs(run, copies, repeats, &times)) != cudaSuccess) return failed(e, "the timed runs");
  std::printf("{%s\"device\": \"%s\", \"runs\": %d, \"median_us\": %.3f, \"min_us\": %.3f, \"copies\": %d",
              job_prefix.c_str(), in.device.c_str(), repeats, times[times.size() / 2], times.front(), copies);
#if defined(__CUDACC__)
  // The same runs replayed from CUDA graphs, one per input copy, as the PyTorch baselines with
  // CUDA graphs are timed: what is left of the host's launch work is one graph launch.
  std::vector<float> graph_times;
  if (const cudaError_t ge = time_graph_runs(run_on, copies, warmup, repeats, &graph_times); ge == cudaSuccess)
    std::printf(", \"graph_median_us\": %.3f, \"graph_min_us\": %.3f", graph_times[graph_times.size() / 2],
                graph_times.front());
  else
    std::fprintf(stderr, "bench_main: no CUDA graph timing: %s\n", cudaGetErrorString(ge));
#endif
  std::printf("}\n");
  std::fflush(stdout);
  release();
  return 0;
}

#if defined(MGD_BENCH_LIBRARIES)
/// One line of the jobs file: a library and its outputs.
struct Job {
  std::string library;
  std::vector<Output> outputs;
};

bool read_jobs(const std::string& path, std::vector<Job>* jobs) {
  std::ifstream f(path);
  if (!f) {
    std::fprintf(stderr, "bench_main: cannot read %s\n", path.c_str());
    return false;
  }
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    std::istringstream fields(line);
    std::string field;
    Job job;
    std::getline(fields, job.library, '\t');
    while (std::getline(fields, field, '\t')) {
      Output o;
      if (!parse_output(field, &o)) return false;
      job.outputs.push_back(o);
    }
    jobs->push_back(std::move(job));
  }
  return true;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  int warmup = 10, repeats = 100;
  long long rotate_bytes = -1, first = 0;
  std::vector<std::vector<unsigned char>> inputs;
  std::vector<std::string> after_args;
  bool after = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--" && !after) {
      after = true;
    } else if (!after && (arg == "--warmup" || arg == "--repeats" || arg == "--rotate-bytes" || arg == "--first") &&
               i + 1 < argc) {
      const long long v = std::atoll(argv[++i]);
      if (arg == "--warmup") warmup = static_cast<int>(v);
      if (arg == "--repeats") repeats = static_cast<int>(std::max(1LL, v));
      if (arg == "--rotate-bytes") rotate_bytes = v;
      if (arg == "--first") first = std::max(0LL, v);
    } else if (!after) {
      std::ifstream f(arg, std::ios::binary);
      if (!f) {
        std::fprintf(stderr, "bench_main: cannot read %s\n", arg.c_str());
        return 1;
      }
      inputs.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    } else {
      after_args.push_back(arg);
    }
  }
#if defined(MGD_BENCH_LIBRARIES)
  if (after_args.size() != 1) {
    std::fprintf(stderr, "bench_main: expected one jobs file after --\n");
    return 1;
  }
  std::vector<Job> jobs;
  if (!read_jobs(after_args[0], &jobs)) return 1;
#else
  std::vector<Output> outputs;
  for (const std::string& arg : after_args) {
    Output o;
    if (!parse_output(arg, &o)) return 1;
    outputs.push_back(o);
  }
#endif
  int devices = 0;
  const cudaError_t found = cudaGetDeviceCount(&devices);
  if (found != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "no CUDA device (cudaGetDeviceCount: %s)\n",
                 found != cudaSuccess ? cudaGetErrorString(found) : "0 devices");
    return 3;
  }
  cudaDeviceProp prop;
  cudaError_t e = cudaGetDeviceProperties(&prop, 0);
  if (e != cudaSuccess) return cuda_failed(e, "cudaGetDeviceProperties");
  if (rotate_bytes < 0) rotate_bytes = 2LL * prop.l2CacheSize;

  size_t input_bytes = 0;
  for (const auto& b : inputs) input_bytes += b.size();
  const int copies =
      input_bytes == 0
          ? 1
          : static_cast<int>(std::min<long long>(64, 1 + rotate_bytes / static_cast<long long>(input_bytes)));
  DeviceInputs in;
  in.device = json_safe(prop.name);
  in.copies.resize(static_cast<size_t>(copies));
  for (auto& set : in.copies)
    for (const auto& b : inputs) {
      void* p = nullptr;
      if ((e = cudaMalloc(&p, b.size())) != cudaSuccess) return cuda_failed(e, "cudaMalloc (inputs)");
      if ((e = cudaMemcpy(p, b.data(), b.size(), cudaMemcpyHostToDevice)) != cudaSuccess)
        return cuda_failed(e, "cudaMemcpy (inputs)");
      set.push_back(p);
    }
  int status = 0;
  std::string error;
#if defined(MGD_BENCH_LIBRARIES)
  for (size_t j = static_cast<size_t>(first); j < jobs.size() && status != 2; ++j) {
    const std::string prefix = "\"job\": " + std::to_string(j) + ", ";
    // Each library keeps its own symbols (RTLD_LOCAL: every one defines mugraph_run) and stays
    // loaded: unloading one that linked the CUDA runtime statically is not safe while others run.
    void* lib = dlopen(jobs[j].library.c_str(), RTLD_NOW | RTLD_LOCAL);
    Ugraph g;
    if (lib) {
      g.workspace_bytes = reinterpret_cast<int64_t (*)(void)>(dlsym(lib, "mugraph_workspace_bytes"));
      g.run = reinterpret_cast<decltype(g.run)>(dlsym(lib, "mugraph_run"));
    }
    if (!g.workspace_bytes || !g.run) {
      const char* why = dlerror();
      std::printf("{%s\"error\": \"cannot load %s: %s\"}\n", prefix.c_str(), json_safe(jobs[j].library).c_str(),
                  json_safe(why ? why : "no mugraph_run in it").c_str());
      std::fflush(stdout);
      continue;
    }
    error.clear();
    const int s = bench_one(g, in, jobs[j].outputs, warmup, repeats, prefix, &error);
    if (s != 0) {
      std::printf("{%s\"error\": \"%s\"}\n", prefix.c_str(), json_safe(error).c_str());
      std::fflush(stdout);
      status = std::max(status, s);
    }
  }
#else
  (void)first;  // the batch harness's
  status = bench_one(Ugraph{mugraph_workspace_bytes, mugraph_run}, in, outputs, warmup, repeats, "", &error);
#endif
  if (status != 2)
    for (auto& set : in.copies)
      for (void* p : set) cudaFree(p);
  return status;
}
