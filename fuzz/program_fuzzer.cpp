// libFuzzer target for the program format: any bytes must either parse into a well-formed kernel
// graph or raise UserError. Anything else (a crash, a sanitizer report, another exception escaping,
// a hang) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "mugraph/frontend.h"
#include "mugraph/validate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  mugraph::Graph g;
  try {
    g = mugraph::parse_program(text, "fuzz.mg");
  } catch (const mugraph::UserError&) {
    return 0;  // the expected way to refuse bad input
  }
  // A graph the parser accepted must be well-formed; only the target's memory may be too small
  // for it (the format allows tensors larger than any GPU).
  if (auto r = mugraph::validate(g); r && r->reason != mugraph::Reason::device_memory) std::abort();
  return 0;
}
