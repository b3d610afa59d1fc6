/// \file files.h
/// Internals of code generation shared by its files: the device library's headers embedded in
/// the binary (written beside every generated source, so its directory builds on its own), and
/// the manifest and build file of a generated μGraph.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "mugraph/codegen.h"

namespace mugraph::codegen {

struct EmbeddedFile {
  std::string_view name;  ///< file name under mugraph_device/
  std::string_view text;
};

/// The headers of runtime/include/mugraph_device, as built into this binary.
const std::vector<EmbeddedFile>& device_library_files();

/// manifest.json of generated code: target, inputs and outputs (names, shapes, dtypes) in the
/// order mugraph_run takes them, workspace bytes, kernel launches.
std::string manifest_json(const GeneratedCode& code, const CudaTarget& target);

/// CMakeLists.txt that builds ugraph.cu into a shared library for the target.
std::string cmake_file(const CudaTarget& target);

}  // namespace mugraph::codegen
