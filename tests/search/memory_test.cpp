// The memory a search may use: control-group limits read from a made-up /sys/fs/cgroup.
#include "memory.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "mugraph/error.h"
#include "mugraph/frontend.h"
#include "search_fixtures.h"

namespace mugraph::search_detail {
namespace {

class CgroupTree : public search_testing::TempDir {
 public:
  CgroupTree() : search_testing::TempDir("mugraph_cgroup") {}
  /// Writes `text` to root/sys/fs/cgroup/`path`, making its folders.
  void limit(const std::string& path, const std::string& text) const {
    const std::filesystem::path p = std::filesystem::path(root()) / "sys/fs/cgroup" / path;
    std::filesystem::create_directories(p.parent_path());
    write((std::filesystem::path("sys/fs/cgroup") / path).string(), text + "\n");
  }
  std::string root() const { return file(""); }
};

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(CgroupMemoryLimit, V2TakesTheSmallestLimitOnTheGroupsPath) {
  CgroupTree t;
  t.limit("memory.max", "max");
  t.limit("user.slice/memory.max", std::to_string(8 * kGiB));
  t.limit("user.slice/job/memory.max", std::to_string(12 * kGiB));
  EXPECT_EQ(cgroup_memory_limit(t.root(), "0::/user.slice/job\n"), 8 * kGiB);
  t.limit("user.slice/job/memory.max", std::to_string(3 * kGiB));
  EXPECT_EQ(cgroup_memory_limit(t.root(), "0::/user.slice/job\n"), 3 * kGiB);
}

TEST(CgroupMemoryLimit, V1ReadsTheMemoryControllersHierarchy) {
  CgroupTree t;
  // No limit is written as the largest page-aligned 64-bit number.
  t.limit("memory/memory.limit_in_bytes", "9223372036854771712");
  t.limit("memory/jobs/a/memory.limit_in_bytes", std::to_string(5 * kGiB));
  const std::string cgroup = "9:pids:/\n4:memory:/jobs/a\n3:cpu,cpuacct:/\n";
  EXPECT_EQ(cgroup_memory_limit(t.root(), cgroup), 5 * kGiB);
  // A controller list naming memory among others.
  EXPECT_EQ(cgroup_memory_limit(t.root(), "4:cpu,memory:/jobs/a\n"), 5 * kGiB);
}

TEST(CgroupMemoryLimit, AGroupNotMountedReadsTheHierarchysRoot) {
  // Inside a container the group's path names the host's folder; its own limit sits at the root.
  CgroupTree t;
  t.limit("memory.max", std::to_string(6 * kGiB));
  EXPECT_EQ(cgroup_memory_limit(t.root(), "0::/host/container/abc\n"), 6 * kGiB);
}

TEST(CgroupMemoryLimit, NoLimitUnreadableOrMalformedGivesZero) {
  CgroupTree t;
  EXPECT_EQ(cgroup_memory_limit(t.root(), ""), 0);
  EXPECT_EQ(cgroup_memory_limit(t.root(), "0::/\n"), 0);  // no files at all
  t.limit("memory.max", "max");
  EXPECT_EQ(cgroup_memory_limit(t.root(), "0::/\n"), 0);
  for (const char* bad : {"lots", "12abc", "-5", "0", "99999999999999999999999"}) {
    t.limit("memory.max", bad);
    EXPECT_EQ(cgroup_memory_limit(t.root(), "0::/\n"), 0) << bad;
  }
  EXPECT_EQ(cgroup_memory_limit(t.root(), "garbage without colons\n"), 0);
}

TEST(UsableMemory, IsAtMostThePhysicalMemoryAndHonoursTheGroupsLimit) {
  CgroupTree t;
  const int64_t physical = usable_memory_bytes(t.root());  // no cgroup files: the machine's
  ASSERT_GT(physical, 0);
  std::filesystem::create_directories(std::filesystem::path(t.root()) / "proc/self");
  t.write("proc/self/cgroup", "0::/job\n");
  t.limit("job/memory.max", std::to_string(kGiB));
  EXPECT_EQ(usable_memory_bytes(t.root()), std::min(physical, kGiB));
  t.limit("job/memory.max", std::to_string(physical * 2));
  EXPECT_EQ(usable_memory_bytes(t.root()), physical);
  EXPECT_GT(resident_bytes(), 0);
}

TEST(VerifierKeptInputs, AnEighthOfTheLimitAtMostTheDefault) {
  const int64_t gib = int64_t{1} << 30;
  EXPECT_EQ(verifier_kept_input_bytes(0), ReferenceRuns::kDefaultKeptInputBytes);
  EXPECT_EQ(verifier_kept_input_bytes(4 * gib), gib / 2);
  EXPECT_EQ(verifier_kept_input_bytes(16 * gib), 2 * gib);
  EXPECT_EQ(verifier_kept_input_bytes(96 * gib), ReferenceRuns::kDefaultKeptInputBytes);
}

TEST(VerificationBytes, CountsInputsAndOutputsOnceAtEightBytesAnElement) {
  // X [16, 64] and W [64, 32] in, O [16, 32] out, the intermediate not counted; an output that
  // is an input counts once.
  const Graph program = parse_program(
      "input X[16, 64]\ninput W[64, 32]\nY = exp(X)\nO = matmul(Y, W)\n"
      "output O\noutput X\n");
  EXPECT_EQ(verification_bytes_lower_bound(program), (16 * 64 + 64 * 32 + 16 * 32) * 8);
}

TEST(VerificationBytes, ASearchWhoseVerificationCannotFitIsRefusedBeforeItStarts) {
  // 2^40 inputs and as many outputs, the most a tensor may have: 16 TiB at least, more than any
  // machine this runs on. The refusal comes before the search; a smaller program searches.
  const Graph program = parse_program("input X[1048576, 1048576]\nO = exp(X)\noutput O\n");
  ASSERT_GT(usable_memory_bytes(), 0) << "this test needs to know the machine's memory";
  try {
    search(program, SearchOptions{});
    ADD_FAILURE() << "the search ran";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("takes at least 16384.0 GiB"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("of memory this process may use"), std::string::npos) << e.what();
  }
  SearchOptions options;
  options.time_limit_seconds = 5;
  EXPECT_FALSE(search(parse_program("input X[1024, 1024]\nO = exp(X)\noutput O\n"), options).top.empty());
}

}  // namespace
}  // namespace mugraph::search_detail
