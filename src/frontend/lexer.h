/// \file lexer.h
/// The tokenizer of the program format (DESIGN.md §3), private to src/frontend.
///
/// Tokens are produced on demand with two tokens of lookahead, so memory stays bounded by the
/// nesting limit of the parser rather than by the length of a line. Token texts are views into
/// the program text. Lexical errors throw UserError with the position of the offending byte.
#pragma once

#include <string>
#include <string_view>

#include "mugraph/error.h"

namespace mugraph::frontend {

enum class TokenKind {
  identifier,  ///< [A-Za-z_][A-Za-z0-9_]*
  number,      ///< -?digits[.digits][e[+-]digits] (also ".5"); syntax checked, value not
  lparen,      ///< (
  rparen,      ///< )
  lbracket,    ///< [
  rbracket,    ///< ]
  comma,       ///< ,
  equals,      ///< =
  newline,     ///< end of a line (LF, CRLF or a lone CR)
  end,         ///< end of the text
};

/// One token: its kind, its text and the 1-based line and byte column of its first byte.
struct Token {
  TokenKind kind = TokenKind::end;
  std::string_view text;
  int line = 1;
  int column = 1;
};

/// How a token is named in a message: "'foo'", "','", "end of line", "end of file". Long texts
/// are shortened.
std::string describe(const Token& t);

/// Turns program text into tokens. Comments (`#` to the end of the line) and blanks (space, tab)
/// are skipped; a UTF-8 byte-order mark at the very start is ignored.
class Lexer {
 public:
  Lexer(std::string_view text, std::string filename);

  /// The token k places ahead (0: the next one). @pre 0 <= k < 2
  const Token& peek(int k = 0);
  /// Removes and returns the next token. At the end of the text it keeps returning `end`.
  Token next();

  /// The source location of a token.
  SourceLoc loc(const Token& t) const { return SourceLoc{filename_, t.line, t.column}; }
  /// Throws UserError(message) at the token's location.
  [[noreturn]] void fail(const Token& t, const std::string& message) const;

 private:
  Token scan();
  Token scan_number(size_t start, int column);
  [[noreturn]] void fail_at(int line, int column, const std::string& message) const;
  /// Moves past n bytes of the current line.
  void advance(size_t n);

  std::string_view text_;
  std::string filename_;
  size_t pos_ = 0;
  int line_ = 1;
  int column_ = 1;
  Token ahead_[2];
  int buffered_ = 0;
};

}  // namespace mugraph::frontend
