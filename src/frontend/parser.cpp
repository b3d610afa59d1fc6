// The parser of the program format (DESIGN.md §3): a recursive-descent parser over the tokens of
// lexer.h that builds a kernel-level Graph with Graph::append as it goes, so every shape rule
// lives in the IR and a rejected op is reported at the call that made it.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "lexer.h"
#include "mugraph/frontend.h"
#include "mugraph/loader.h"

namespace mugraph {

namespace {

using frontend::describe;
using frontend::Lexer;
using frontend::Token;
using frontend::TokenKind;

/// Deepest nesting of op calls in one expression. The parser recurses once per level, so this
/// bounds its stack use whatever the input (a fuzzer finds 100000 nested exp( quickly).
constexpr int kMaxDepth = 256;
/// Largest program file load_program_file reads.
constexpr int64_t kMaxFileBytes = int64_t{64} << 20;
/// Integers in the text beyond this magnitude are clamped to it: they are out of every range
/// the format accepts, and clamping keeps arithmetic on them free of overflow.
constexpr int64_t kHuge = int64_t{1} << 62;

/// Whether programs may call an op: kernel-level computations and data movement. Sources,
/// graph-defined kernels, iterators, savers and accumulators are structural, never written.
bool callable(const OpInfo& info) {
  switch (info.category) {
    case OpCategory::unary:
    case OpCategory::binary:
    case OpCategory::matmul:
    case OpCategory::reduction:
    case OpCategory::layout:
      return info.at(Level::kernel);
    default:
      return false;
  }
}

std::optional<OpKind> callable_op(std::string_view name) {
  auto kind = op_by_name(name);
  if (kind && callable(op_info(*kind))) return kind;
  return std::nullopt;
}

/// "matmul, sum, add, ..." in registry order.
std::string callable_op_list() {
  std::string s;
  for (int i = 0; i < kNumOpKinds; ++i) {
    const OpInfo& info = op_info(static_cast<OpKind>(i));
    if (!callable(info)) continue;
    if (!s.empty()) s += ", ";
    s += info.name;
  }
  return s;
}

bool is_keyword(std::string_view name) { return name == "input" || name == "output"; }

/// Positional operands an op call takes. For binary ops the registry counts a constant operand
/// (arity_min 1 is "one tensor and a constant"), but a call always spells both operands.
int min_operands(const OpInfo& info) { return info.category == OpCategory::binary ? info.arity_max : info.arity_min; }

/// Keyword arguments of op calls. The registry has no attribute names, so they are listed here
/// by op; an op not named has none.
struct KeywordSpec {
  std::string_view name;
  bool is_list;  ///< key=[INT, ...] rather than key=INT
  bool required;
};

std::vector<KeywordSpec> keywords_of(OpKind kind) {
  switch (kind) {
    case OpKind::sum:
      return {{"dim", false, true}, {"to", false, false}};
    case OpKind::repeat:
      return {{"dim", false, true}, {"times", false, true}};
    case OpKind::reshape:
      return {{"shape", true, true}};
    case OpKind::concat:
      return {{"dim", false, true}};
    default:
      return {};
  }
}

std::string keyword_list(const std::vector<KeywordSpec>& specs) {
  std::string s;
  for (const KeywordSpec& k : specs) s += (s.empty() ? "" : ", ") + std::string(k.name);
  return s;
}

/// The integer a number token spells (integral values in any notation: "4096", "-1", "1e3"),
/// clamped to ±kHuge; nullopt if the number has a fractional part.
/// @pre text has the syntax of a number token
std::optional<int64_t> token_integer(std::string_view text) {
  bool neg = !text.empty() && text[0] == '-';
  if (auto s = parse_scalar(text)) {
    Scalar n = s->normalized();
    if (n.exp10 < 0) return std::nullopt;
    int64_t v = n.mantissa < 0 ? -n.mantissa : n.mantissa;
    for (int32_t e = 0; e < n.exp10 && v < kHuge; ++e) v = v > kHuge / 10 ? kHuge : v * 10;
    return neg ? -v : v;
  }
  // parse_scalar gives up on more than 18 significant digits or exponents beyond ±300. Estimate
  // the magnitude: integer digits (without leading zeros) plus the exponent.
  int64_t int_digits = 0, exponent = 0;
  bool exp_neg = false;
  size_t i = neg ? 1 : 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i)
    if (int_digits > 0 || text[i] != '0') ++int_digits;
  while (i < text.size() && text[i] != 'e' && text[i] != 'E') ++i;
  if (i < text.size()) {
    ++i;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) exp_neg = text[i++] == '-';
    for (; i < text.size(); ++i) exponent = std::min<int64_t>(exponent * 10 + (text[i] - '0'), 1000000);
  }
  if (int_digits + (exp_neg ? -exponent : exponent) > 18) return neg ? -kHuge : kHuge;
  return std::nullopt;
}

/// The product of positive extents, or nullopt if it exceeds kMaxElements (checked before each
/// multiplication, so it cannot overflow).
std::optional<int64_t> checked_elements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (n > kMaxElements / d) return std::nullopt;
    n *= d;
  }
  return n;
}

/// What a name or an expression stands for: a tensor of the graph or a scalar constant.
struct Value {
  bool is_scalar = false;
  TensorId tensor;
  Scalar scalar;
  Token where;  ///< where the expression starts, for messages about it
};

/// A parsed keyword argument.
struct KeywordValue {
  Token key;
  Token value;  ///< the integer, or the '[' of a list
  int64_t integer = 0;
  std::vector<int64_t> list;
};

struct Binding {
  Value value;
  int line = 0;  ///< where the name was defined
};

/// Transparent hashing so maps keyed by std::string can be searched with a string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class Parser {
 public:
  Parser(std::string_view text, const std::string& filename) : lex_(text, filename) {}

  Graph parse() {
    while (lex_.peek().kind != TokenKind::end) statement();
    if (graph_.outputs.empty())
      lex_.fail(lex_.peek(), "the program has no 'output' statement; name its results with a line like 'output Y'");
    return std::move(graph_);
  }

 private:
  // ---- statements ----

  void statement() {
    const Token& t = lex_.peek();
    if (t.kind == TokenKind::newline) {
      lex_.next();
      return;
    }
    if (t.kind != TokenKind::identifier)
      lex_.fail(t, "expected a statement ('input NAME[...]', 'output NAME' or 'NAME = EXPR'), found " + describe(t));
    if (t.text == "input") {
      input_statement();
    } else if (t.text == "output") {
      output_statement();
    } else {
      assignment();
    }
    end_of_statement();
  }

  void end_of_statement() {
    const Token& t = lex_.peek();
    if (t.kind == TokenKind::newline) {
      lex_.next();
    } else if (t.kind != TokenKind::end) {
      lex_.fail(t, "expected end of line after the statement, found " + describe(t));
    }
  }

  /// input NAME[d0, d1, ...] [dtype]
  void input_statement() {
    Token kw = lex_.next();
    if (lex_.peek().kind == TokenKind::equals) lex_.fail(kw, "'input' is a keyword and cannot be used as a name");
    Token name = lex_.next();
    if (name.kind != TokenKind::identifier)
      lex_.fail(name, "expected the name of the input after 'input', found " + describe(name));
    check_definable(name);
    std::string n(name.text);

    Token open = lex_.next();
    if (open.kind != TokenKind::lbracket)
      lex_.fail(open, "expected '[' and the shape of input '" + n + "', found " + describe(open));
    std::vector<int64_t> dims;
    for (;;) {
      Token d = lex_.next();
      if (d.kind != TokenKind::number)
        lex_.fail(d, "expected an extent (a positive integer) in the shape of input '" + n + "', found " + describe(d));
      if (dims.size() >= static_cast<size_t>(kMaxRank))
        lex_.fail(d, "input '" + n + "' has more than " + std::to_string(kMaxRank) +
                         " dimensions; mugraph supports at most " + std::to_string(kMaxRank));
      dims.push_back(extent(d, "the shape of input '" + n + "'"));
      Token sep = lex_.next();
      if (sep.kind == TokenKind::rbracket) break;
      if (sep.kind != TokenKind::comma)
        lex_.fail(sep, "expected ',' or ']' in the shape of input '" + n + "', found " + describe(sep));
    }
    if (!checked_elements(dims))
      lex_.fail(name, "input '" + n + "' with shape " + Shape(dims).str() + " has more than " +
                          std::to_string(kMaxElements) + " (2^40) elements");

    OpAttrs attrs;
    attrs.name = n;
    attrs.shape = Shape(dims);
    if (lex_.peek().kind == TokenKind::identifier) {
      Token dt = lex_.next();
      auto parsed = parse_dtype(dt.text);
      if (!parsed) lex_.fail(dt, "expected a dtype (f16, bf16, f32), found " + describe(dt));
      attrs.dtype = *parsed;
    }
    TensorId t = append(name, OpKind::input, {}, std::move(attrs));
    define(name, Value{false, t, {}, name});
  }

  /// output NAME {, NAME}
  void output_statement() {
    Token kw = lex_.next();
    if (lex_.peek().kind == TokenKind::equals) lex_.fail(kw, "'output' is a keyword and cannot be used as a name");
    for (;;) {
      Token name = lex_.next();
      if (name.kind != TokenKind::identifier)
        lex_.fail(name, "expected the name of a tensor after 'output', found " + describe(name));
      Value v = lookup(name);
      if (v.is_scalar)
        lex_.fail(name, "'" + std::string(name.text) + "' is a constant, not a tensor; only tensors can be outputs");
      auto [it, fresh] = output_lines_.try_emplace(std::string(name.text), name.line);
      if (!fresh)
        lex_.fail(name,
                  "'" + std::string(name.text) + "' is already an output (line " + std::to_string(it->second) + ")");
      graph_.mark_output(v.tensor, std::string(name.text));
      if (lex_.peek().kind != TokenKind::comma) break;
      lex_.next();
    }
  }

  /// NAME = EXPR
  void assignment() {
    Token name = lex_.next();
    if (callable_op(name.text) && lex_.peek().kind == TokenKind::lparen)
      lex_.fail(name, "the result of " + std::string(name.text) +
                          " needs a name: write 'NAME = " + std::string(name.text) + "(...)'");
    check_definable(name);
    Token eq = lex_.next();
    if (eq.kind != TokenKind::equals)
      lex_.fail(eq, "expected '=' after the name '" + std::string(name.text) + "', found " + describe(eq));
    Value v = expression(0, "after '='");
    if (!v.is_scalar) {
      // `B = A` makes B another name of A's tensor; the tensor keeps its first name.
      Tensor& t = graph_.tensors[v.tensor.index()];
      if (t.name.empty()) t.name = std::string(name.text);
    }
    define(name, v);
  }

  // ---- names ----

  void check_definable(const Token& name) {
    std::string n(name.text);
    if (is_keyword(name.text)) lex_.fail(name, "'" + n + "' is a keyword and cannot be used as a name");
    if (callable_op(name.text)) lex_.fail(name, "'" + n + "' is the name of an op and cannot be used as a name");
    auto it = names_.find(name.text);
    if (it != names_.end())
      lex_.fail(name, "'" + n + "' is already defined at line " + std::to_string(it->second.line));
  }

  void define(const Token& name, const Value& v) { names_.emplace(std::string(name.text), Binding{v, name.line}); }

  Value lookup(const Token& name) {
    auto it = names_.find(name.text);
    if (it == names_.end()) {
      if (is_keyword(name.text))
        lex_.fail(name, "'" + std::string(name.text) + "' is a keyword, not the name of a tensor");
      lex_.fail(name, "undefined name '" + std::string(name.text) + "'");
    }
    Value v = it->second.value;
    v.where = name;
    return v;
  }

  // ---- expressions ----

  /// EXPR: a number, a name or a call. `context` says where it stands, for messages.
  Value expression(int depth, const std::string& context) {
    Token t = lex_.peek();
    if (t.kind == TokenKind::number) {
      lex_.next();
      auto s = parse_scalar(t.text);
      if (!s)
        lex_.fail(t, "the number " + describe(t) +
                         " is out of range: constants have at most 18 significant "
                         "digits and magnitudes between 1e-300 and 1e300");
      return Value{true, {}, *s, t};
    }
    if (t.kind == TokenKind::identifier) {
      if (lex_.peek(1).kind == TokenKind::lparen) return call(depth);
      lex_.next();
      if (callable_op(t.text))
        lex_.fail(lex_.peek(),
                  "expected '(' after the op name '" + std::string(t.text) + "', found " + describe(lex_.peek()));
      return lookup(t);
    }
    lex_.fail(t, "expected an expression (a name, a number or an op call) " + context + ", found " + describe(t));
  }

  /// op(positional, ..., key=value, ...)
  Value call(int depth) {
    Token name = lex_.next();
    auto kind = callable_op(name.text);
    if (!kind) {
      auto any = op_by_name(name.text);
      lex_.fail(name, (any ? "'" + std::string(name.text) + "' cannot be called in a program"
                           : "unknown op '" + std::string(name.text) + "'") +
                          "; known ops are: " + callable_op_list());
    }
    const OpInfo& info = op_info(*kind);
    std::string op(info.name);
    if (depth >= kMaxDepth)
      lex_.fail(name, "expressions nest more than " + std::to_string(kMaxDepth) +
                          " op calls deep; split the expression into named statements");
    lex_.next();  // '('

    const std::vector<KeywordSpec> specs = keywords_of(*kind);
    std::vector<Value> operands;
    std::vector<std::optional<KeywordValue>> keywords(specs.size());
    std::optional<Token> first_keyword;
    // Whether every operand the op can take has been given (ops with an unbounded operand count,
    // like concat, are never full).
    auto full = [&] { return info.arity_max >= 0 && operands.size() >= static_cast<size_t>(info.arity_max); };

    if (lex_.peek().kind == TokenKind::rparen) {
      lex_.next();
    } else {
      for (;;) {
        Token t = lex_.peek();
        if (t.kind == TokenKind::identifier && lex_.peek(1).kind == TokenKind::equals) {
          size_t k = keyword(specs, op, t);
          if (keywords[k]) lex_.fail(t, "duplicate keyword argument '" + std::string(t.text) + "' in " + op);
          keywords[k] = keyword_value(specs[k], op);
          if (!first_keyword) first_keyword = t;
        } else {
          if (first_keyword)
            lex_.fail(t, "positional argument after the keyword argument '" + std::string(first_keyword->text) +
                             "' in " + op + "; operands come first");
          if (full())
            lex_.fail(t, op + " takes " + std::to_string(info.arity_max) + " operand" +
                             (info.arity_max == 1 ? "" : "s") + "; expected a keyword argument (" +
                             keyword_list(specs) + "), found " + describe(t));
          operands.push_back(expression(depth + 1, "as an argument of " + op));
        }
        Token sep = lex_.next();
        if (sep.kind == TokenKind::rparen) break;
        // An op without keywords that has all its operands can only be closed.
        bool closing = specs.empty() && full();
        if (sep.kind != TokenKind::comma || closing)
          lex_.fail(sep, closing ? "expected ')' after the arguments of " + op + ", found " + describe(sep)
                                 : "expected ',' or ')' after an argument of " + op + ", found " + describe(sep));
        if (lex_.peek().kind == TokenKind::rparen)
          lex_.fail(lex_.peek(), "expected another argument of " + op + " after ',', found ')'");
      }
    }
    return build(name, *kind, operands, specs, keywords);
  }

  /// The index of a keyword in specs, or an error naming the keywords the op has.
  size_t keyword(const std::vector<KeywordSpec>& specs, const std::string& op, const Token& key) {
    for (size_t i = 0; i < specs.size(); ++i)
      if (specs[i].name == key.text) return i;
    if (specs.empty()) lex_.fail(key, op + " takes no keyword arguments, found '" + std::string(key.text) + "'");
    lex_.fail(key, op + " has no keyword argument '" + std::string(key.text) + "'; its keyword arguments are " +
                       keyword_list(specs));
  }

  /// The value after `key=`: an integer or a list of integers, as the spec says.
  KeywordValue keyword_value(const KeywordSpec& spec, const std::string& op) {
    KeywordValue kv;
    kv.key = lex_.next();
    lex_.next();  // '='
    std::string what = "'" + std::string(spec.name) + "' of " + op;
    kv.value = lex_.next();
    if (!spec.is_list) {
      if (kv.value.kind == TokenKind::lbracket)
        lex_.fail(kv.value, "expected an integer for " + what + ", found a list");
      kv.integer = integer(kv.value, what);
      return kv;
    }
    if (kv.value.kind != TokenKind::lbracket)
      lex_.fail(kv.value, "expected a list of integers '[...]' for " + what + ", found " + describe(kv.value));
    for (;;) {
      Token d = lex_.next();
      if (kv.list.size() >= static_cast<size_t>(kMaxRank) && d.kind == TokenKind::number)
        lex_.fail(d, what + " has more than " + std::to_string(kMaxRank) + " dimensions; mugraph supports at most " +
                         std::to_string(kMaxRank));
      kv.list.push_back(extent(d, what));
      Token sep = lex_.next();
      if (sep.kind == TokenKind::rbracket) break;
      if (sep.kind != TokenKind::comma)
        lex_.fail(sep, "expected ',' or ']' in the list for " + what + ", found " + describe(sep));
    }
    return kv;
  }

  /// An integer token's value (clamped to ±kHuge).
  int64_t integer(const Token& t, const std::string& what) {
    if (t.kind != TokenKind::number) lex_.fail(t, "expected an integer for " + what + ", found " + describe(t));
    auto v = token_integer(t.text);
    if (!v) lex_.fail(t, "expected an integer for " + what + ", found " + describe(t));
    return *v;
  }

  /// An extent in a shape: an integer from 1 to kMaxExtent.
  int64_t extent(const Token& t, const std::string& where) {
    if (t.kind != TokenKind::number)
      lex_.fail(t, "expected an extent (a positive integer) in " + where + ", found " + describe(t));
    auto v = token_integer(t.text);
    if (!v) lex_.fail(t, "expected an extent (a positive integer) in " + where + ", found " + describe(t));
    if (*v < 1) lex_.fail(t, "extents must be positive; found " + describe(t) + " in " + where);
    if (*v > kMaxExtent)
      lex_.fail(t, "extent " + describe(t) + " in " + where + " is too large; extents are at most " +
                       std::to_string(kMaxExtent) + " (2^31)");
    return *v;
  }

  /// Checks the operands and keywords of a parsed call and appends its op.
  Value build(const Token& name, OpKind kind, const std::vector<Value>& operands, const std::vector<KeywordSpec>& specs,
              const std::vector<std::optional<KeywordValue>>& keywords) {
    const OpInfo& info = op_info(kind);
    std::string op(info.name);
    int n = static_cast<int>(operands.size());
    int need = min_operands(info);
    bool exact = need == info.arity_max;
    if (n < need || (info.arity_max >= 0 && n > info.arity_max))
      lex_.fail(name, op + " takes " + (exact ? "" : "at least ") + std::to_string(need) + " operand" +
                          (need == 1 ? "" : "s") + ", got " + std::to_string(n));

    OpAttrs attrs;
    std::vector<TensorId> inputs;
    if (info.category == OpCategory::binary) {
      if (operands[0].is_scalar && operands[1].is_scalar)
        lex_.fail(name, op + ": both operands are constants; at least one must be a tensor");
      for (int i = 0; i < 2; ++i) {
        const Value& v = operands[static_cast<size_t>(i)];
        if (v.is_scalar) {
          // A divisor of 0 makes every element inf or NaN: no μGraph could be checked against it.
          if (i == 1 && info.kind == OpKind::div && v.scalar.mantissa == 0)
            lex_.fail(v.where, "div: the divisor is the constant 0");
          attrs.has_scalar = true;
          attrs.scalar = v.scalar;
          attrs.scalar_pos = static_cast<int8_t>(i);
        } else {
          inputs.push_back(v.tensor);
        }
      }
    } else {
      for (size_t i = 0; i < operands.size(); ++i) {
        const Value& v = operands[i];
        if (v.is_scalar)
          lex_.fail(v.where, op + ": operand " + std::to_string(i + 1) + " is the constant " + v.scalar.str() +
                                 ", but " + op + " takes tensors (constants are operands of add, sub, mul and div)");
        inputs.push_back(v.tensor);
      }
    }

    for (size_t k = 0; k < specs.size(); ++k) {
      if (specs[k].required && !keywords[k])
        lex_.fail(name, op + " needs the keyword argument '" + std::string(specs[k].name) + "=...'");
      if (!keywords[k]) continue;
      const KeywordValue& kv = *keywords[k];
      std::string_view key = specs[k].name;
      if (key == "dim") {
        int rank = graph_.type(inputs[0]).shape.rank();
        int64_t d = kv.integer;
        if (d < -rank || d >= rank)
          lex_.fail(kv.value, "dim=" + std::string(kv.value.text) + " is out of range for " + op + " of a rank-" +
                                  std::to_string(rank) + " tensor (valid: " + std::to_string(-rank) + " to " +
                                  std::to_string(rank - 1) + ")");
        attrs.dim = static_cast<int32_t>(d < 0 ? d + rank : d);
      } else if (key == "to" || key == "times") {
        if (kv.integer < 1 || kv.integer > kMaxExtent)
          lex_.fail(kv.value, std::string(key) + "=" + std::string(kv.value.text) + " of " + op +
                                  " must be between 1 and " + std::to_string(kMaxExtent));
        (key == "to" ? attrs.to : attrs.times) = kv.integer;
      } else if (key == "shape") {
        if (!checked_elements(kv.list)) {
          Shape from = graph_.type(inputs[0]).shape;
          lex_.fail(name, "reshape of " + from.str() + " (" + std::to_string(from.numel()) + " elements) to " +
                              Shape(kv.list).str() + " (more than 2^40 elements)");
        }
        attrs.shape = Shape(kv.list);
      }
    }
    TensorId t = append(name, kind, std::move(inputs), std::move(attrs));
    return Value{false, t, {}, name};
  }

  /// Appends an op; a rejection becomes an error at the op's name.
  TensorId append(const Token& at, OpKind kind, std::vector<TensorId> inputs, OpAttrs attrs) {
    auto r = graph_.append(kind, std::move(inputs), std::move(attrs));
    if (!r) {
      std::string msg = r.rejection().message;
      std::string_view op = op_name(kind);
      if (msg.compare(0, op.size(), op) != 0) msg = std::string(op) + ": " + msg;
      lex_.fail(at, msg);
    }
    return graph_.op(*r).outputs.at(0);
  }

  Lexer lex_;
  Graph graph_;
  std::unordered_map<std::string, Binding, StringHash, std::equal_to<>> names_;
  std::unordered_map<std::string, int, StringHash, std::equal_to<>> output_lines_;
};

}  // namespace

Graph parse_program(std::string_view text, const std::string& filename) { return Parser(text, filename).parse(); }

bool is_reserved_name(std::string_view name) { return is_keyword(name) || callable_op(name).has_value(); }

Graph load_program_file(const std::string& path) {
  return parse_program(read_text_file(path, kMaxFileBytes), path);
}

}  // namespace mugraph
