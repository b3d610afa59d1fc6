// libFuzzer target for the NPY reader (`--input NAME=PATH.npy` of run, verify and bench): any
// bytes must either read into a tensor whose values fill its shape or raise UserError. Anything
// else (a crash, a sanitizer report, another exception escaping, a hang, an allocation the file's
// size does not justify: libFuzzer's -rss_limit_mb and -malloc_limit_mb) is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "mugraph/interp.h"

namespace {

// The reader takes a path, as the commands do, so each input goes through a file of its own
// process (libFuzzer's -jobs may run several).
const std::string& scratch_path() {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("mugraph-npy-fuzz-" + std::to_string(getpid()) + ".npy")).string();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    std::ofstream out(scratch_path(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) std::abort();  // the fuzzer's own scratch file, not the code under test
  }
  try {
    mugraph::HostTensor t = mugraph::read_npy(scratch_path());
    if (static_cast<int64_t>(t.data.size()) != t.type.shape.numel()) std::abort();
  } catch (const mugraph::UserError&) {
  }
  return 0;
}
