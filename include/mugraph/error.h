/// \file error.h
/// The three error tiers of mugraph.
///
/// 1. UserError: the caller's input is wrong. Carries a source location when one is known and a
///    full sentence saying what was expected. The CLI turns it into exit code 1.
/// 2. InternalError: a broken invariant inside mugraph (our bug). Raised by MUGRAPH_CHECK; it is an
///    exception, not an abort, so a long-running search or a Python caller survives it.
/// 3. Rejection: a graph that is well-formed data but not a valid μGraph (the search produces many
///    of these). It is a value with a machine-readable reason and a message, never an exception.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace mugraph {

/// A position in a source file; line and column are 1-based, 0 means unknown.
struct SourceLoc {
  std::string file;
  int line = 0;
  int column = 0;

  /// "file:line:column" (parts that are unknown are left out).
  std::string str() const;
};

/// An error in what the user gave us. what() is "file:line:col: error: message".
class UserError : public std::runtime_error {
 public:
  explicit UserError(std::string message, SourceLoc loc = {});
  const SourceLoc& loc() const { return loc_; }
  const std::string& message() const { return message_; }

 private:
  SourceLoc loc_;
  std::string message_;
};

/// A broken invariant inside mugraph.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
[[noreturn]] void throw_internal(const char* file, int line, const char* cond, const std::string& msg);

/// Builds a message only when a check has failed.
class MessageBuilder {
 public:
  template <typename T>
  MessageBuilder& operator<<(const T& value) {
    out_ << value;
    return *this;
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};
}  // namespace detail

/// Internal invariant check: `MUGRAPH_CHECK(x > 0) << "x was " << x;` throws InternalError.
#define MUGRAPH_CHECK(cond)                                                                     \
  for (bool mugraph_check_failed_ = !(cond); mugraph_check_failed_; mugraph_check_failed_ = false) \
  ::mugraph::detail::CheckThrower(__FILE__, __LINE__, #cond) = ::mugraph::detail::MessageBuilder()

namespace detail {
struct CheckThrower {
  const char* file;
  int line;
  const char* cond;
  CheckThrower(const char* f, int l, const char* c) : file(f), line(l), cond(c) {}
  [[noreturn]] void operator=(const MessageBuilder& msg) { throw_internal(file, line, cond, msg.str()); }
};
}  // namespace detail

/// Why a graph is not a valid μGraph. Stable names (see reason_name) are part of the JSON/CLI surface.
enum class Reason : uint8_t {
  malformed,            ///< dangling ids, wrong arity, ops out of order, stored shape disagrees
  level_mismatch,       ///< an op used at a graph level it does not exist at
  shape_mismatch,       ///< an op's operand shapes do not satisfy its shape rule
  bad_attribute,        ///< an attribute out of range (negative dim, to not dividing n, ...)
  not_divisible,        ///< an imap/fmap/omap splits a dimension that the grid or loop does not divide
  bad_map,              ///< a map names a dimension twice, or an omap uses φ on a grid axis > 1
  shared_memory,        ///< the STensors of a block graph exceed the target's shared memory
  device_memory,        ///< the DTensors exceed the target's device memory
  registers,            ///< a thread graph needs more registers per thread than the target has
  path_rule,            ///< paper Definition 2.1: iterator / accumulator / saver counts on a path
  missing_output,       ///< a kernel-op output with no saver, or a program output not produced
  too_large,            ///< a tensor with more elements than mugraph supports
};

/// The stable snake_case name of a reason.
std::string_view reason_name(Reason r);

/// A graph rejected with a reason; a value, never thrown.
struct Rejection {
  Reason reason;
  std::string message;

  /// "reason_name: message"
  std::string str() const;
};

/// Either a value or a Rejection (std::expected is C++23).
template <typename T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}          // NOLINT(google-explicit-constructor)
  Expected(Rejection rej) : v_(std::move(rej)) {}      // NOLINT(google-explicit-constructor)
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  const T& value() const& {
    MUGRAPH_CHECK(ok()) << "value() on a rejection: " << std::get<1>(v_).str();
    return std::get<0>(v_);
  }
  T&& value() && {
    MUGRAPH_CHECK(ok()) << "value() on a rejection: " << std::get<1>(v_).str();
    return std::get<0>(std::move(v_));
  }
  const T& operator*() const& { return value(); }
  const T* operator->() const { return &value(); }
  const Rejection& rejection() const {
    MUGRAPH_CHECK(!ok()) << "rejection() on a value";
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Rejection> v_;
};

/// Builds a Rejection with a streamed message: `return reject(Reason::x) << "...";`
class RejectBuilder {
 public:
  explicit RejectBuilder(Reason r) : reason_(r) {}
  template <typename T>
  RejectBuilder& operator<<(const T& v) {
    out_ << v;
    return *this;
  }
  operator Rejection() const { return Rejection{reason_, out_.str()}; }  // NOLINT
  template <typename T>
  operator Expected<T>() const {  // NOLINT
    return Expected<T>(Rejection{reason_, out_.str()});
  }

 private:
  Reason reason_;
  std::ostringstream out_;
};

inline RejectBuilder reject(Reason r) { return RejectBuilder(r); }

}  // namespace mugraph
