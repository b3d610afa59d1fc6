// Replays the program fuzzer's seed corpus (fuzz/corpus/program/): every file must parse or throw UserError.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "../corpus_replay.h"
#include "mugraph/frontend.h"

namespace mugraph {
namespace {

TEST(Corpus, EveryFileParsesOrThrowsUserError) {
  const int parsed = test_support::replay_corpus("program", [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    parse_program(text, std::filesystem::path(path).filename().string());
  });
  EXPECT_GT(parsed, 0);
}

}  // namespace
}  // namespace mugraph
