// The memory this process may use: control-group limits read from a made-up /sys/fs/cgroup.
#include "mugraph/host_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

namespace mugraph {
namespace {

namespace fs = std::filesystem;

/// A made-up file tree standing for `/`, removed when the test ends.
class CgroupTree {
 public:
  CgroupTree() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::path(::testing::TempDir()) / ("mugraph_cgroup_" + std::string(info->name()) + "_" +
                                              std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~CgroupTree() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  CgroupTree(const CgroupTree&) = delete;
  CgroupTree& operator=(const CgroupTree&) = delete;

  /// Writes `text` to root/`path`, making its folders.
  void write(const std::string& path, const std::string& text) const {
    const fs::path p = root_ / path;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  /// Writes `text` to root/sys/fs/cgroup/`path`.
  void limit(const std::string& path, const std::string& text) const { write("sys/fs/cgroup/" + path, text + "\n"); }
  std::string root() const { return root_.string(); }

 private:
  fs::path root_;
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
  t.write("proc/self/cgroup", "0::/job\n");
  t.limit("job/memory.max", std::to_string(kGiB));
  EXPECT_EQ(usable_memory_bytes(t.root()), std::min(physical, kGiB));
  t.limit("job/memory.max", std::to_string(physical * 2));
  EXPECT_EQ(usable_memory_bytes(t.root()), physical);
  EXPECT_GT(resident_bytes(), 0);
}

TEST(UsableMemory, TheMachinesFigureIsReadOnceAndIsTheRootsFigure) {
  EXPECT_EQ(machine_usable_memory_bytes(), usable_memory_bytes());
  EXPECT_EQ(machine_usable_memory_bytes(), machine_usable_memory_bytes());
}

TEST(GibText, GivesTheDecimalsAskedFor) {
  EXPECT_EQ(gib_text(int64_t{3} << 29), "1.50 GiB");
  EXPECT_EQ(gib_text(int64_t{16384} << 30, 1), "16384.0 GiB");
  EXPECT_EQ(gib_text(0, 0), "0 GiB");
}

}  // namespace
}  // namespace mugraph
