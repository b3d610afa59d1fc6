// Strict reading of JSON files, shared by the μGraph reader (json.cpp) and the search's
// checkpoints (src/search/checkpoint.cpp): syntax errors name the file, line and column; every
// value is checked before it is used, and a failed check names the JSON pointer of the value and
// what was expected ("FILE: /stats/states: expected a count (0 or more)"). Only for libraries that
// link nlohmann_json; not a public header.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "mugraph/graph.h"

namespace mugraph::json_reading {

using Json = nlohmann::ordered_json;

/// Parses `text` as one JSON document. Bracket nesting deeper than `max_nesting` is refused before
/// the library parses (neither its recursive parser nor its destructor may exhaust the stack).
/// Throws UserError with the file, line and column of a syntax error.
Json parse_document(std::string_view text, const std::string& filename, int max_nesting = 64);

/// Checked access to the values of a parsed document. Paths are JSON pointers ("" is the root).
class ValueReader {
 public:
  explicit ValueReader(std::string filename) : filename_(std::move(filename)) {}

  /// Throws UserError("PATH: message") naming the file.
  [[noreturn]] void fail(const std::string& path, const std::string& message) const;

  void expect_object(const Json& v, const std::string& path, const std::string& message) const;
  /// Fails on any key of `obj` not in `keys`.
  void allow_keys(const Json& obj, const std::string& path, std::initializer_list<std::string_view> keys) const;
  /// The value of a required key of an object.
  const Json& field(const Json& obj, const std::string& path, const char* key) const;
  /// The value of an optional key of an object, or null.
  static const Json* optional(const Json& obj, const char* key);
  /// An integer in [lo, hi]; `what` completes "expected ...".
  int64_t integer(const Json& v, const std::string& path, int64_t lo, int64_t hi, const std::string& what) const;
  /// A finite number (integer or not) in [lo, hi].
  double number(const Json& v, const std::string& path, double lo, double hi, const std::string& what) const;
  bool boolean(const Json& v, const std::string& path) const;
  std::string string(const Json& v, const std::string& path, const std::string& what) const;
  const Json& array(const Json& v, const std::string& path, const std::string& what) const;

  const std::string& filename() const { return filename_; }

 private:
  std::string filename_;
};

/// The μGraph document ({"format": "mugraph-ugraph", "version", "graph"}) at `path` of a parsed
/// file; from_json (mugraph/json.h) is this for a whole file. Errors name paths under `path`.
Graph ugraph_from_value(const Json& document, const std::string& path, const std::string& filename);

/// A μGraph as the JSON value that to_json writes (for embedding in other documents).
Json ugraph_value(const Graph& kernel_graph);

/// The tensors, ops and bodies that kernel graph `g` has beyond `base`, a kernel graph that `g`
/// begins with (the same tensors, ops and bodies first; neither has outputs), as an object
/// {"tensors", "ops", "bodies" (if any)} whose ops name tensors and bodies by their ids in `g`.
/// The search's checkpoints write a prefix as the prefix it extends and this.
Json extension_value(const Graph& g, const Graph& base);

/// `base` with an extension_value appended: its tensors, ops and bodies are checked as those of a
/// whole graph are (ids in range, every new tensor produced by exactly one new op). Errors name
/// paths under `path`.
Graph extended_from_value(Graph base, const Json& extension, const std::string& path, const std::string& filename);

}  // namespace mugraph::json_reading
