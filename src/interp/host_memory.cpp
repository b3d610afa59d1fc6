// The host memory this process uses and may use (host_memory.h): /proc and the control groups
// under /sys/fs/cgroup.
#include "mugraph/host_memory.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace mugraph {

namespace {

namespace fs = std::filesystem;

/// A limit file's value: bytes, or 0 for "max" (v2), an absurd v1 value (no limit is written as
/// the largest page-aligned 64-bit number) or an unreadable file.
int64_t read_limit(const fs::path& file) {
  std::ifstream in(file);
  std::string text;
  if (!(in >> text) || text == "max") return 0;
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used != text.size() || v <= 0 || v >= (int64_t{1} << 62)) return 0;
    return v;
  } catch (const std::exception&) {
    return 0;  // out of range or not a number: treated as no limit
  }
}

/// The smallest limit in `file_name` from `group` (a path below `hierarchy`) up to the
/// hierarchy's root; 0 where there is none.
int64_t smallest_limit_up(const fs::path& hierarchy, std::string group, const char* file_name) {
  std::error_code ec;
  const fs::path below = fs::path(group).relative_path();
  fs::path dir = below.empty() ? hierarchy : hierarchy / below;
  if (!fs::is_directory(dir, ec)) dir = hierarchy;
  int64_t smallest = 0;
  for (;;) {
    const int64_t v = read_limit(dir / file_name);
    if (v > 0 && (smallest == 0 || v < smallest)) smallest = v;
    if (dir == hierarchy || !dir.has_relative_path()) break;
    const fs::path up = dir.parent_path();
    if (up == dir || up.native().size() < hierarchy.native().size()) break;
    dir = up;
  }
  return smallest;
}

}  // namespace

int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size_pages = 0, resident_pages = 0;
  if (!(statm >> size_pages >> resident_pages)) return 0;
  return resident_pages * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

int64_t cgroup_memory_limit(const std::string& root, const std::string& proc_self_cgroup) {
  const fs::path cgroups = fs::path(root) / "sys/fs/cgroup";
  int64_t smallest = 0;
  auto take = [&](int64_t v) {
    if (v > 0 && (smallest == 0 || v < smallest)) smallest = v;
  };
  // Lines are "id:controllers:path": "0::/path" for v2, "4:memory:/path" for v1's memory
  // controller (its hierarchy is mounted at sys/fs/cgroup/memory).
  std::istringstream lines(proc_self_cgroup);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), group = line.substr(b + 1);
    if (controllers.empty()) {
      take(smallest_limit_up(cgroups, group, "memory.max"));
    } else {
      std::istringstream names(controllers);
      std::string name;
      while (std::getline(names, name, ','))
        if (name == "memory") take(smallest_limit_up(cgroups / "memory", group, "memory.limit_in_bytes"));
    }
  }
  return smallest;
}

int64_t usable_memory_bytes(const std::string& root) {
  int64_t usable = 0;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) usable = static_cast<int64_t>(pages) * static_cast<int64_t>(page);
  std::ifstream in(fs::path(root) / "proc/self/cgroup");
  std::stringstream text;
  text << in.rdbuf();
  const int64_t group = cgroup_memory_limit(root, text.str());
  if (group > 0 && (usable == 0 || group < usable)) usable = group;
  return usable;
}

int64_t machine_usable_memory_bytes() {
  static const int64_t usable = usable_memory_bytes();
  return usable;
}

std::string gib_text(int64_t bytes, int decimals) {
  char s[48];
  std::snprintf(s, sizeof s, "%.*f GiB", decimals, static_cast<double>(bytes) / static_cast<double>(int64_t{1} << 30));
  return s;
}

}  // namespace mugraph
