// The benchmark harness of generated code (mugraph bench): runs mugraph_run on a GPU (or on the
// host emulation) on raw tensors, checks nothing itself, and times it.
//
//   bench_main [--warmup N] [--repeats N] [--rotate-bytes B] in_0.bin ... -- out_0.bin:BYTES ...
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
#include <string>
#include <vector>

#include "ugraph.h"

namespace {

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

}  // namespace

int main(int argc, char** argv) {
  int warmup = 10, repeats = 100;
  long long rotate_bytes = -1;
  std::vector<std::vector<unsigned char>> inputs;
  std::vector<std::string> output_paths;
  std::vector<size_t> output_bytes;
  bool after = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      after = true;
    } else if ((arg == "--warmup" || arg == "--repeats" || arg == "--rotate-bytes") && i + 1 < argc) {
      const long long v = std::atoll(argv[++i]);
      if (arg == "--warmup") warmup = static_cast<int>(v);
      if (arg == "--repeats") repeats = static_cast<int>(std::max(1LL, v));
      if (arg == "--rotate-bytes") rotate_bytes = v;
    } else if (!after) {
      std::ifstream f(arg, std::ios::binary);
      if (!f) {
        std::fprintf(stderr, "bench_main: cannot read %s\n", arg.c_str());
        return 1;
      }
      inputs.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    } else {
      const size_t colon = arg.rfind(':');
      if (colon == std::string::npos) {
        std::fprintf(stderr, "bench_main: output %s is not PATH:BYTES\n", arg.c_str());
        return 1;
      }
      output_paths.push_back(arg.substr(0, colon));
      output_bytes.push_back(static_cast<size_t>(std::stoull(arg.substr(colon + 1))));
    }
  }
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
  const int copies = input_bytes == 0 ? 1 : static_cast<int>(std::min<long long>(64, 1 + rotate_bytes / static_cast<long long>(input_bytes)));
  std::vector<std::vector<void*>> d_in(static_cast<size_t>(copies));
  for (auto& set : d_in)
    for (const auto& b : inputs) {
      void* p = nullptr;
      if ((e = cudaMalloc(&p, b.size())) != cudaSuccess) return cuda_failed(e, "cudaMalloc (inputs)");
      if ((e = cudaMemcpy(p, b.data(), b.size(), cudaMemcpyHostToDevice)) != cudaSuccess)
        return cuda_failed(e, "cudaMemcpy (inputs)");
      set.push_back(p);
    }
  std::vector<void*> d_out;
  for (size_t bytes : output_bytes) {
    void* p = nullptr;
    if ((e = cudaMalloc(&p, bytes)) != cudaSuccess) return cuda_failed(e, "cudaMalloc (outputs)");
    if ((e = cudaMemset(p, 0xFF, bytes)) != cudaSuccess) return cuda_failed(e, "cudaMemset");
    d_out.push_back(p);
  }
  void* workspace = nullptr;
  if ((e = cudaMalloc(&workspace, static_cast<size_t>(mugraph_workspace_bytes()))) != cudaSuccess)
    return cuda_failed(e, "cudaMalloc (workspace)");

  auto run_on = [&](int copy, cudaStream_t stream) {
    std::vector<const void*> in(d_in[static_cast<size_t>(copy)].begin(), d_in[static_cast<size_t>(copy)].end());
    return mugraph_run(in.data(), d_out.data(), workspace, stream);
  };
  auto run = [&](int copy) { return run_on(copy, nullptr); };
  // The checked run: the outputs as the first run leaves them.
  if (int err = run(0)) return cuda_failed(static_cast<cudaError_t>(err), "mugraph_run");
  if ((e = cudaDeviceSynchronize()) != cudaSuccess) return cuda_failed(e, "the first run");
  for (size_t i = 0; i < d_out.size(); ++i) {
    std::vector<unsigned char> host(output_bytes[i]);
    if ((e = cudaMemcpy(host.data(), d_out[i], host.size(), cudaMemcpyDeviceToHost)) != cudaSuccess)
      return cuda_failed(e, "cudaMemcpy (outputs)");
    std::ofstream f(output_paths[i], std::ios::binary);
    f.write(reinterpret_cast<const char*>(host.data()), static_cast<std::streamsize>(host.size()));
    if (!f) {
      std::fprintf(stderr, "bench_main: cannot write %s\n", output_paths[i].c_str());
      return 1;
    }
  }
  for (int i = 0; i < warmup; ++i)
    if (int err = run(i % copies)) return cuda_failed(static_cast<cudaError_t>(err), "mugraph_run (warm-up)");
  if ((e = cudaDeviceSynchronize()) != cudaSuccess) return cuda_failed(e, "the warm-up runs");
  std::vector<float> times;
  if ((e = time_runs(run, copies, repeats, &times)) != cudaSuccess) return cuda_failed(e, "the timed runs");
  std::string name = prop.name;
  for (char& c : name)
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = ' ';
  std::printf("{\"device\": \"%s\", \"runs\": %d, \"median_us\": %.3f, \"min_us\": %.3f, \"copies\": %d", name.c_str(),
              repeats, times[times.size() / 2], times.front(), copies);
#if defined(__CUDACC__)
  // The same runs replayed from CUDA graphs, one per input copy, as the PyTorch baselines with
  // CUDA graphs are timed: what is left of the host's launch work is one graph launch.
  std::vector<float> graph_times;
  if (const cudaError_t g = time_graph_runs(run_on, copies, warmup, repeats, &graph_times); g == cudaSuccess)
    std::printf(", \"graph_median_us\": %.3f, \"graph_min_us\": %.3f", graph_times[graph_times.size() / 2],
                graph_times.front());
  else
    std::fprintf(stderr, "bench_main: no CUDA graph timing: %s\n", cudaGetErrorString(g));
#endif
  std::printf("}\n");
  for (auto& set : d_in)
    for (void* p : set) cudaFree(p);
  for (void* p : d_out) cudaFree(p);
  cudaFree(workspace);
  return 0;
}
