// Replays the fuzzer's seed corpus (fuzz/corpus/): every file must parse or throw UserError.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "mugraph/frontend.h"

namespace mugraph {
namespace {

namespace fs = std::filesystem;

TEST(Corpus, EveryFileParsesOrThrowsUserError) {
  const char* env_dir = std::getenv("MUGRAPH_SOURCE_DIR");
  const char* source_dir = env_dir ? env_dir : MUGRAPH_SOURCE_DIR_DEFAULT;
  fs::path dir = fs::path(source_dir) / "fuzz" / "corpus";
  ASSERT_TRUE(fs::is_directory(dir)) << dir << " is missing";

  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty()) << dir << " is empty";

  int parsed = 0;
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string name = file.filename().string();
    // Seeds named valid_* are well-formed programs and must parse.
    bool must_parse = name.rfind("valid_", 0) == 0;
    try {
      parse_program(text, name);
      ++parsed;
    } catch (const UserError& e) {
      EXPECT_FALSE(must_parse) << name << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << name << ": threw something other than UserError: " << e.what();
    } catch (...) {
      ADD_FAILURE() << name << ": threw something that is not a std::exception";
    }
  }
  EXPECT_GT(parsed, 0);
}

}  // namespace
}  // namespace mugraph
