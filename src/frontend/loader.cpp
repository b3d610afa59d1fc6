// Loading a program or μGraph JSON file (loader.h).
#include "mugraph/loader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mugraph/error.h"
#include "mugraph/frontend.h"
#include "mugraph/json.h"

namespace mugraph {

namespace {

[[noreturn]] void cannot_read(const std::string& path, const std::string& reason) {
  throw UserError("cannot read '" + path + "': " + reason);
}

}  // namespace

// POSIX calls so that a directory and a file over the limit are reported before anything is read.
std::string read_text_file(const std::string& path, int64_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) cannot_read(path, std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) cannot_read(path, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) cannot_read(path, "it is a directory");
  auto too_large = [&](int64_t bytes) {
    std::string limit = std::to_string(max_bytes) + " bytes";
    cannot_read(path, bytes > 0 ? "it has " + std::to_string(bytes) + " bytes; the limit is " + limit
                                : "it is larger than the limit of " + limit);
  };
  if (S_ISREG(st.st_mode) && st.st_size > max_bytes) too_large(st.st_size);
  std::string text;
  if (S_ISREG(st.st_mode)) text.reserve(static_cast<size_t>(st.st_size));
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) cannot_read(path, std::strerror(errno));
    if (n == 0) break;
    if (static_cast<int64_t>(text.size()) + n > max_bytes) too_large(0);
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

Graph load_graph_file(const std::string& path) {
  std::string text = read_text_file(path, kMaxGraphFileBytes);
  if (looks_like_json(text)) return from_json(text, path);
  return parse_program(text, path);
}

}  // namespace mugraph
