// Replays a fuzz target's seed corpus (fuzz/corpus/<target>/) through the reader it fuzzes, so
// that the seeds (and the reproducers added there once fixed) are regression tests in every build,
// not only in the fuzzing stage: files named valid_* must be accepted; every other file must be
// accepted or refused with a UserError, never anything else.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "mugraph/error.h"

namespace mugraph::test_support {

/// `read(path)` reads one file as the fuzz target does, throwing UserError to refuse it. Returns
/// how many files were accepted.
template <class Read>
int replay_corpus(const std::string& target, Read read) {
  namespace fs = std::filesystem;
  const char* env_dir = std::getenv("MUGRAPH_SOURCE_DIR");
  const fs::path dir = fs::path(env_dir ? env_dir : MUGRAPH_SOURCE_DIR_DEFAULT) / "fuzz" / "corpus" / target;
  EXPECT_TRUE(fs::is_directory(dir)) << dir << " is missing";
  std::vector<fs::path> files;
  if (fs::is_directory(dir))
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  EXPECT_FALSE(files.empty()) << dir << " is empty";

  int accepted = 0;
  for (const fs::path& file : files) {
    const std::string name = file.filename().string();
    const bool must_accept = name.rfind("valid_", 0) == 0;
    try {
      read(file.string());
      ++accepted;
    } catch (const UserError& e) {
      EXPECT_FALSE(must_accept) << name << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << name << ": threw something other than UserError: " << e.what();
    } catch (...) {
      ADD_FAILURE() << name << ": threw something that is not a std::exception";
    }
  }
  return accepted;
}

}  // namespace mugraph::test_support
