// The tokenizer of the program format. See lexer.h.
#include "lexer.h"

#include <climits>
#include <utility>

namespace mugraph::frontend {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_alnum(char c) { return is_alpha(c) || is_digit(c); }

/// A byte as it is shown in a message: itself if printable ASCII, else a \xNN escape, so that
/// binary input never ends up raw in a terminal.
std::string printable(char c) {
  auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string(1, c);
  static constexpr char kHex[] = "0123456789abcdef";
  return std::string("\\x") + kHex[u >> 4] + kHex[u & 0xf];
}

/// Whether `s` is exactly -?(digits[.digits*] | .digits)([eE][+-]?digits)?.
bool is_number_syntax(std::string_view s) {
  size_t i = 0, n = s.size();
  if (i < n && s[i] == '-') ++i;
  size_t mantissa_digits = 0;
  while (i < n && is_digit(s[i])) ++i, ++mantissa_digits;
  if (i < n && s[i] == '.') {
    ++i;
    while (i < n && is_digit(s[i])) ++i, ++mantissa_digits;
  }
  if (mantissa_digits == 0) return false;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
    size_t exp_digits = 0;
    while (i < n && is_digit(s[i])) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  return i == n;
}

constexpr std::pair<char, TokenKind> kPunctuation[] = {
    {'(', TokenKind::lparen},   {')', TokenKind::rparen}, {'[', TokenKind::lbracket},
    {']', TokenKind::rbracket}, {',', TokenKind::comma},  {'=', TokenKind::equals},
};

/// Adds one to a line or column counter without overflowing on absurdly large inputs.
int bump(int v) { return v < INT_MAX ? v + 1 : v; }

}  // namespace

std::string describe(const Token& t) {
  switch (t.kind) {
    case TokenKind::newline:
      return "end of line";
    case TokenKind::end:
      return "end of file";
    default:
      break;
  }
  constexpr size_t kShown = 40;
  if (t.text.size() > kShown) return "'" + std::string(t.text.substr(0, kShown)) + "...'";
  return "'" + std::string(t.text) + "'";
}

Lexer::Lexer(std::string_view text, std::string filename) : text_(text), filename_(std::move(filename)) {
  if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;  // UTF-8 byte-order mark: not part of line 1
}

const Token& Lexer::peek(int k) {
  MUGRAPH_CHECK(k >= 0 && k < 2) << "lookahead " << k;
  while (buffered_ <= k) ahead_[buffered_++] = scan();
  return ahead_[k];
}

Token Lexer::next() {
  Token t = peek(0);
  ahead_[0] = ahead_[1];
  --buffered_;
  return t;
}

void Lexer::fail(const Token& t, const std::string& message) const { fail_at(t.line, t.column, message); }

void Lexer::fail_at(int line, int column, const std::string& message) const {
  throw UserError(message, SourceLoc{filename_, line, column});
}

void Lexer::advance(size_t n) {
  pos_ += n;
  for (size_t i = 0; i < n; ++i) column_ = bump(column_);
}

Token Lexer::scan() {
  // Blanks and a comment; a comment's position stands for the end of its line in messages,
  // because that is where the statement stopped.
  while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) advance(1);
  int end_line = line_, end_column = column_;
  if (pos_ < text_.size() && text_[pos_] == '#') {
    // Comments may hold any bytes (UTF-8 prose, stray control characters) up to the line end.
    while (pos_ < text_.size() && text_[pos_] != '\n' && text_[pos_] != '\r') advance(1);
  }
  if (pos_ >= text_.size()) return Token{TokenKind::end, {}, end_line, end_column};

  size_t start = pos_;
  int column = column_;
  char c = text_[pos_];
  if (c == '\n' || c == '\r') {
    // LF, CRLF and a lone CR all end a line.
    size_t len = (c == '\r' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '\n') ? 2 : 1;
    pos_ += len;
    line_ = bump(line_);
    column_ = 1;
    return Token{TokenKind::newline, text_.substr(start, len), end_line, end_column};
  }
  if (is_alpha(c)) {
    size_t n = 1;
    while (start + n < text_.size() && is_alnum(text_[start + n])) ++n;
    advance(n);
    return Token{TokenKind::identifier, text_.substr(start, n), line_, column};
  }
  bool next_is_digit = pos_ + 1 < text_.size() && is_digit(text_[pos_ + 1]);
  if (is_digit(c) || (c == '.' && next_is_digit)) return scan_number(start, column);
  if (c == '-') {
    bool dot_digit = pos_ + 2 < text_.size() && text_[pos_ + 1] == '.' && is_digit(text_[pos_ + 2]);
    if (next_is_digit || dot_digit) return scan_number(start, column);
    fail_at(line_, column,
            "expected a digit after '-'; negative numbers are written like -2 (to negate a "
            "tensor X, write mul(X, -1))");
  }
  for (const auto& [ch, kind] : kPunctuation) {
    if (c != ch) continue;
    advance(1);
    return Token{kind, text_.substr(start, 1), line_, column};
  }
  fail_at(line_, column, "unexpected character '" + printable(c) + "'");
}

Token Lexer::scan_number(size_t start, int column) {
  // Take the longest run that could belong to the number (letters and dots included, and a sign
  // right after an exponent marker), so that "4096abc" or "1.2.3" is reported as one malformed
  // number rather than as a number followed by something confusing.
  size_t n = 1;
  while (start + n < text_.size()) {
    char c = text_[start + n];
    char prev = text_[start + n - 1];
    if (is_alnum(c) || c == '.' || ((c == '+' || c == '-') && (prev == 'e' || prev == 'E'))) {
      ++n;
    } else {
      break;
    }
  }
  std::string_view s = text_.substr(start, n);
  if (!is_number_syntax(s)) {
    Token bad{TokenKind::number, s, line_, column};
    fail_at(line_, column, "malformed number " + describe(bad));
  }
  advance(n);
  return Token{TokenKind::number, s, line_, column};
}

}  // namespace mugraph::frontend
