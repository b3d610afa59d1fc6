// Strict reading of JSON files (json_reader.h).
#include "json_reader.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mugraph::json_reading {

namespace {

/// Line and column (1-based) of a byte offset.
SourceLoc location_of(std::string_view text, size_t offset, const std::string& filename) {
  offset = std::min(offset, text.size());
  SourceLoc loc{filename, 1, 1};
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++loc.line;
      loc.column = 1;
    } else {
      ++loc.column;
    }
  }
  return loc;
}

/// Rejects bracket nesting deeper than kMaxNesting before the JSON library sees the text, so that
/// neither its parser nor its destructor can exhaust the stack.
void check_nesting(std::string_view text, const std::string& filename, int max_nesting) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_nesting)
        throw UserError("JSON nested deeper than " + std::to_string(max_nesting) + " levels",
                        location_of(text, i, filename));
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

}  // namespace

Json parse_document(std::string_view text, const std::string& filename, int max_nesting) {
  check_nesting(text, filename, max_nesting);
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.N] parse error at line L, column C: DETAIL".
    std::string what = e.what();
    size_t colon = what.find(": ");
    std::string detail = colon == std::string::npos ? what : what.substr(colon + 2);
    size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    throw UserError("invalid JSON: " + detail, location_of(text, offset, filename));
  } catch (const Json::exception& e) {
    throw UserError(std::string("invalid JSON: ") + e.what(), SourceLoc{filename});
  }
}

void ValueReader::fail(const std::string& path, const std::string& message) const {
  throw UserError((path.empty() ? std::string("/") : path) + ": " + message, SourceLoc{filename_});
}

void ValueReader::expect_object(const Json& v, const std::string& path, const std::string& message) const {
  if (!v.is_object()) fail(path, message);
}

void ValueReader::allow_keys(const Json& obj, const std::string& path,
                             std::initializer_list<std::string_view> keys) const {
  for (const auto& [key, val] : obj.items())
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) fail(path, "unknown field \"" + key + "\"");
}

const Json& ValueReader::field(const Json& obj, const std::string& path, const char* key) const {
  auto it = obj.find(key);
  if (it == obj.end()) fail(path, std::string("missing field \"") + key + "\"");
  return *it;
}

const Json* ValueReader::optional(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

int64_t ValueReader::integer(const Json& v, const std::string& path, int64_t lo, int64_t hi,
                             const std::string& what) const {
  bool fits = false;
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    fits = u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    x = fits ? static_cast<int64_t>(u) : 0;
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
    fits = true;
  }
  if (!fits || x < lo || x > hi) fail(path, "expected " + what);
  return x;
}

double ValueReader::number(const Json& v, const std::string& path, double lo, double hi,
                           const std::string& what) const {
  if (!v.is_number()) fail(path, "expected " + what);
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) fail(path, "expected " + what);
  return x;
}

bool ValueReader::boolean(const Json& v, const std::string& path) const {
  if (!v.is_boolean()) fail(path, "expected true or false");
  return v.get<bool>();
}

std::string ValueReader::string(const Json& v, const std::string& path, const std::string& what) const {
  if (!v.is_string()) fail(path, "expected " + what);
  return v.get<std::string>();
}

const Json& ValueReader::array(const Json& v, const std::string& path, const std::string& what) const {
  if (!v.is_array()) fail(path, "expected " + what);
  return v;
}

}  // namespace mugraph::json_reading
