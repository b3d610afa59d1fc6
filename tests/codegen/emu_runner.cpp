// Runs generated code (ugraph.cu compiled against the host emulation) on raw tensors:
//
//   emu_runner in_0.bin ... -- out_0.bin:BYTES ...
//
// Inputs are read whole; each output is poisoned (0xFF bytes: NaN in every float type) before the
// run, so an element the kernels never write shows up, and written after it. Exit status 0 on
// success, 1 on a bad argument or file, 2 if mugraph_run reports an error.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "ugraph.h"

int main(int argc, char** argv) {
  std::vector<std::vector<unsigned char>> inputs, outputs;
  std::vector<std::string> output_paths;
  bool after = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      after = true;
      continue;
    }
    if (!after) {
      std::ifstream f(arg, std::ios::binary);
      if (!f) {
        std::fprintf(stderr, "emu_runner: cannot read %s\n", arg.c_str());
        return 1;
      }
      inputs.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    } else {
      const size_t colon = arg.rfind(':');
      if (colon == std::string::npos) {
        std::fprintf(stderr, "emu_runner: output %s is not PATH:BYTES\n", arg.c_str());
        return 1;
      }
      output_paths.push_back(arg.substr(0, colon));
      outputs.emplace_back(std::stoull(arg.substr(colon + 1)), 0xFF);
    }
  }
  std::vector<const void*> in_ptrs;
  std::vector<void*> out_ptrs;
  for (auto& b : inputs) in_ptrs.push_back(b.data());
  for (auto& b : outputs) out_ptrs.push_back(b.data());
  std::vector<unsigned char> workspace(static_cast<size_t>(mugraph_workspace_bytes()), 0xFF);
  const int err = mugraph_run(in_ptrs.data(), out_ptrs.data(), workspace.data(), nullptr);
  if (err != 0) {
    std::fprintf(stderr, "emu_runner: mugraph_run returned %d\n", err);
    return 2;
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::ofstream f(output_paths[i], std::ios::binary);
    f.write(reinterpret_cast<const char*>(outputs[i].data()), static_cast<std::streamsize>(outputs[i].size()));
    if (!f) {
      std::fprintf(stderr, "emu_runner: cannot write %s\n", output_paths[i].c_str());
      return 1;
    }
  }
  return 0;
}
