#include "mugraph/error.h"

namespace mugraph {

std::string SourceLoc::str() const {
  std::ostringstream out;
  out << file;
  if (line > 0) {
    if (!file.empty()) out << ':';
    out << line;
    if (column > 0) out << ':' << column;
  }
  return out.str();
}

namespace {
std::string format_user_error(const std::string& message, const SourceLoc& loc) {
  std::string where = loc.str();
  return (where.empty() ? std::string() : where + ": ") + "error: " + message;
}
}  // namespace

UserError::UserError(std::string message, SourceLoc loc)
    : std::runtime_error(format_user_error(message, loc)), loc_(std::move(loc)), message_(std::move(message)) {}

void detail::throw_internal(const char* file, int line, const char* cond, const std::string& msg) {
  throw InternalError(std::string("internal error at ") + file + ":" + std::to_string(line) + ": check '" + cond +
                      "' failed" + (msg.empty() ? "" : ": " + msg));
}

std::string_view reason_name(Reason r) {
  switch (r) {
    case Reason::malformed: return "malformed";
    case Reason::level_mismatch: return "level_mismatch";
    case Reason::shape_mismatch: return "shape_mismatch";
    case Reason::bad_attribute: return "bad_attribute";
    case Reason::not_divisible: return "not_divisible";
    case Reason::bad_map: return "bad_map";
    case Reason::shared_memory: return "shared_memory";
    case Reason::device_memory: return "device_memory";
    case Reason::registers: return "registers";
    case Reason::path_rule: return "path_rule";
    case Reason::missing_output: return "missing_output";
    case Reason::too_large: return "too_large";
  }
  return "unknown";
}

std::string Rejection::str() const { return std::string(reason_name(reason)) + ": " + message; }

}  // namespace mugraph
