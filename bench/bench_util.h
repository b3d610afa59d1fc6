/// \file bench_util.h
/// What every benchmark prints about where it ran.
#pragma once

#include <fstream>
#include <string>
#include <thread>

namespace mugraph::benchutil {

/// The CPU's model name from /proc/cpuinfo, or "unknown".
inline std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  return "unknown";
}

/// "machine: N hardware threads (nproc), CPU: <model>"
inline std::string machine_line() {
  return "machine: " + std::to_string(std::thread::hardware_concurrency()) +
         " hardware threads (nproc), CPU: " + cpu_model();
}

}  // namespace mugraph::benchutil
