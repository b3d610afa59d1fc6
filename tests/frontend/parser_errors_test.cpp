// Programs that do not parse: each error's exact message and line:column.
#include <gtest/gtest.h>

#include <string>

#include "mugraph/frontend.h"

namespace mugraph {
namespace {

/// what() of the UserError that parsing `text` as "t.mg" throws; "" if it parses.
std::string error_of(std::string_view text) {
  try {
    parse_program(text, "t.mg");
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

struct ErrorCase {
  const char* name;
  std::string text;
  std::string error;  ///< the full what(): "t.mg:line:col: error: message"
};

std::string repeat_text(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

const std::string kOps =
    "known ops are: matmul, sum, add, sub, mul, div, exp, sqr, sqrt, silu, relu, gelu, repeat, reshape, concat";

std::vector<ErrorCase> error_cases() {
  return {
      // ---- the shape rules of the IR, reported at the op ----
      {"matmul_inner_extents",
       "input X[16, 4096]\ninput W[1024, 64]\n\nO = add(X, 1)\nP = 1\nQ = P\nY = matmul(X, W)\n",
       "t.mg:7:5: error: matmul: [16, 4096] times [1024, 64]: inner extents 4096 and 1024 differ"},
      {"broadcast_mismatch", "input X[4]\ninput Z[5]\nY = mul(2, add(X, Z))\n",
       "t.mg:3:12: error: add: shapes [4] and [5] do not broadcast (dimension -1: 4 vs 5)"},
      {"matmul_rank", "input X[4]\nY = matmul(X, X)\n",
       "t.mg:2:5: error: matmul needs operands of rank 2 or more; got [4] and [4]"},
      {"sum_to_not_dividing", "input X[6]\nY = sum(X, dim=0, to=4)\n",
       "t.mg:2:5: error: sum(to=4) must divide the extent 6 of dimension 0"},
      {"reshape_element_count", "input X[6]\nY = reshape(X, shape=[4])\n",
       "t.mg:2:5: error: reshape of [6] (6 elements) to [4] (4 elements)"},
      {"repeat_too_large", "input X[2147483648]\nY = repeat(X, dim=0, times=2)\n",
       "t.mg:2:5: error: repeat makes a tensor with extent 4294967296"},

      // ---- names ----
      {"undefined_name", "input X[4]\nY = exp(Z)\noutput Y\n", "t.mg:2:9: error: undefined name 'Z'"},
      {"used_before_defined", "input X[4]\noutput Y\nY = exp(X)\n", "t.mg:2:8: error: undefined name 'Y'"},
      {"redefined_input", "input X[4]\ninput X[8]\n", "t.mg:2:7: error: 'X' is already defined at line 1"},
      {"redefined_statement", "input X[4]\nY = exp(X)\noutput Y\nY = exp(X)\n",
       "t.mg:4:1: error: 'Y' is already defined at line 2"},
      {"op_name_as_name", "input X[4]\nsum = exp(X)\n",
       "t.mg:2:1: error: 'sum' is the name of an op and cannot be used as a name"},
      {"keyword_as_input_name", "input input[4]\n",
       "t.mg:1:7: error: 'input' is a keyword and cannot be used as a name"},
      {"keyword_assigned", "output = 3\n", "t.mg:1:1: error: 'output' is a keyword and cannot be used as a name"},
      {"output_twice", "input X[4]\noutput X\nY = exp(X)\noutput Y, X\n",
       "t.mg:4:11: error: 'X' is already an output (line 2)"},
      {"output_constant", "input X[4]\nC = 2\noutput C\n",
       "t.mg:3:8: error: 'C' is a constant, not a tensor; only tensors can be outputs"},
      {"unnamed_call", "input X[4]\nexp(X)\n",
       "t.mg:2:1: error: the result of exp needs a name: write 'NAME = exp(...)'"},

      // ---- ops and their arguments ----
      {"unknown_op", "input X[4]\nY = softmax(X)\n", "t.mg:2:5: error: unknown op 'softmax'; " + kOps},
      {"structural_op", "input X[4]\nY = accum(X)\n",
       "t.mg:2:5: error: 'accum' cannot be called in a program; " + kOps},
      {"too_many_operands", "input X[4]\nY = matmul(X, X, X)\n",
       "t.mg:2:16: error: expected ')' after the arguments of matmul, found ','"},
      {"too_few_operands", "input X[4]\nY = concat(X, dim=0)\n",
       "t.mg:2:5: error: concat takes at least 2 operands, got 1"},
      {"op_without_parens", "input X[4]\nY = exp\n",
       "t.mg:2:8: error: expected '(' after the op name 'exp', found end of line"},
      {"missing_keyword", "input X[4]\nY = sum(X)\n", "t.mg:2:5: error: sum needs the keyword argument 'dim=...'"},
      {"keyword_as_positional", "input X[4]\nY = sum(X, 0)\n",
       "t.mg:2:12: error: sum takes 1 operand; expected a keyword argument (dim, to), found '0'"},
      {"duplicate_keyword", "input X[4]\nY = sum(X, dim=0, dim=0)\n",
       "t.mg:2:19: error: duplicate keyword argument 'dim' in sum"},
      {"keyword_before_positional", "input X[4]\nY = sum(dim=0, X)\n",
       "t.mg:2:16: error: positional argument after the keyword argument 'dim' in sum; operands come first"},
      {"unknown_keyword", "input X[4]\nY = sum(X, axis=0)\n",
       "t.mg:2:12: error: sum has no keyword argument 'axis'; its keyword arguments are dim, to"},
      {"keyword_on_unary", "input X[4]\nY = exp(X, dim=0)\n",
       "t.mg:2:10: error: expected ')' after the arguments of exp, found ','"},
      {"list_for_integer", "input X[4]\nY = sum(X, dim=[0])\n",
       "t.mg:2:16: error: expected an integer for 'dim' of sum, found a list"},
      {"integer_for_list", "input X[4]\nY = reshape(X, shape=4)\n",
       "t.mg:2:22: error: expected a list of integers '[...]' for 'shape' of reshape, found '4'"},
      {"fractional_dim", "input X[4]\nY = sum(X, dim=0.5)\n",
       "t.mg:2:16: error: expected an integer for 'dim' of sum, found '0.5'"},
      {"dim_out_of_range", "input X[4, 4]\nY = sum(X, dim=-3)\n",
       "t.mg:2:16: error: dim=-3 is out of range for sum of a rank-2 tensor (valid: -2 to 1)"},
      {"absurd_dim", "input X[4]\nY = sum(X, dim=99999999999999999999999)\n",
       "t.mg:2:16: error: dim=99999999999999999999999 is out of range for sum of a rank-1 tensor (valid: -1 to 0)"},
      {"zero_times", "input X[4]\nY = repeat(X, dim=0, times=0)\n",
       "t.mg:2:28: error: times=0 of repeat must be between 1 and 2147483648"},
      {"both_constants", "input X[4]\nY = add(1, 2)\n",
       "t.mg:2:5: error: add: both operands are constants; at least one must be a tensor"},
      {"divide_by_constant_zero", "input X[4]\nY = div(X, 0.0)\n",
       "t.mg:2:12: error: div: the divisor is the constant 0"},
      {"constant_operand_of_unary", "input X[4]\nY = exp(2)\n",
       "t.mg:2:9: error: exp: operand 1 is the constant 2, but exp takes tensors (constants are operands of add, "
       "sub, mul and div)"},
      {"named_constant_in_matmul", "input X[4, 4]\nC = 0.5\nY = matmul(X, C)\n",
       "t.mg:3:15: error: matmul: operand 2 is the constant 0.5, but matmul takes tensors (constants are operands of "
       "add, sub, mul and div)"},
      {"trailing_comma", "input X[4]\nY = add(X, )\n",
       "t.mg:2:12: error: expected another argument of add after ',', found ')'"},
      {"unclosed_call", "input X[4]\nY = exp(X\noutput Y\n",
       "t.mg:2:10: error: expected ')' after the arguments of exp, found end of line"},
      {"missing_comma", "input X[4]\nY = sum(X, dim=0 to=1)\n",
       "t.mg:2:18: error: expected ',' or ')' after an argument of sum, found 'to'"},
      {"empty_argument", "input X[4]\nY = add(X,\n",
       "t.mg:2:11: error: expected an expression (a name, a number or an op call) as an argument of add, found end of "
       "line"},
      {"negated_name", "input X[4]\nY = mul(X, -X)\n",
       "t.mg:2:12: error: expected a digit after '-'; negative numbers are written like -2 (to negate a tensor X, "
       "write mul(X, -1))"},

      // ---- input statements and sizes ----
      {"unknown_dtype", "input X[4] f64\n", "t.mg:1:12: error: expected a dtype (f16, bf16, f32), found 'f64'"},
      {"unterminated_shape", "input X[4, 8\noutput X\n",
       "t.mg:1:13: error: expected ',' or ']' in the shape of input 'X', found end of line"},
      {"unterminated_shape_at_eof", "input X[4",
       "t.mg:1:10: error: expected ',' or ']' in the shape of input 'X', found end of file"},
      {"empty_shape", "input X[]\n",
       "t.mg:1:9: error: expected an extent (a positive integer) in the shape of input 'X', found ']'"},
      {"missing_shape", "input X 4\n", "t.mg:1:9: error: expected '[' and the shape of input 'X', found '4'"},
      {"missing_input_name", "input [4]\n", "t.mg:1:7: error: expected the name of the input after 'input', found '['"},
      {"zero_extent", "input X[0]\n", "t.mg:1:9: error: extents must be positive; found '0' in the shape of input 'X'"},
      {"negative_extent", "input X[8, -3]\n",
       "t.mg:1:12: error: extents must be positive; found '-3' in the shape of input 'X'"},
      {"fractional_extent", "input X[2.5]\n",
       "t.mg:1:9: error: expected an extent (a positive integer) in the shape of input 'X', found '2.5'"},
      {"absurd_extent_exponent", "input X[1e12]\n",
       "t.mg:1:9: error: extent '1e12' in the shape of input 'X' is too large; extents are at most 2147483648 (2^31)"},
      {"absurd_extent_digits", "input X[99999999999999999999]\n",
       "t.mg:1:9: error: extent '99999999999999999999' in the shape of input 'X' is too large; extents are at most "
       "2147483648 (2^31)"},
      {"too_many_elements", "input X[65536, 65536, 65536]\n",
       "t.mg:1:7: error: input 'X' with shape [65536, 65536, 65536] has more than 1099511627776 (2^40) elements"},
      {"too_many_dimensions", "input X[1,2,3,4,5,6,7]\n",
       "t.mg:1:21: error: input 'X' has more than 6 dimensions; mugraph supports at most 6"},
      {"reshape_absurd", "input X[4]\nY = reshape(X, shape=[2147483648, 2147483648, 2147483648])\n",
       "t.mg:2:5: error: reshape of [4] (4 elements) to [2147483648, 2147483648, 2147483648] (more than 2^40 "
       "elements)"},
      {"constant_out_of_range", "input X[4]\nY = add(X, 1e400)\n",
       "t.mg:2:12: error: the number '1e400' is out of range: constants have at most 18 significant digits and "
       "magnitudes between 1e-300 and 1e300"},

      // ---- statements and lexical errors ----
      {"empty_file", "",
       "t.mg:1:1: error: the program has no 'output' statement; name its results with a line like 'output Y'"},
      {"only_comments", "# nothing\n\n# here\n",
       "t.mg:4:1: error: the program has no 'output' statement; name its results with a line like 'output Y'"},
      {"no_output", "input X[4]\nY = exp(X)",
       "t.mg:2:11: error: the program has no 'output' statement; name its results with a line like 'output Y'"},
      {"trailing_junk", "input X[4]\noutput X\nY = exp(X) junk\n",
       "t.mg:3:12: error: expected end of line after the statement, found 'junk'"},
      {"trailing_junk_after_dtype", "input X[4] bf16 f32\n",
       "t.mg:1:17: error: expected end of line after the statement, found 'f32'"},
      {"missing_equals", "input X[4]\nY X\n", "t.mg:2:3: error: expected '=' after the name 'Y', found 'X'"},
      {"statement_starts_with_symbol", "= 3\n",
       "t.mg:1:1: error: expected a statement ('input NAME[...]', 'output NAME' or 'NAME = EXPR'), found '='"},
      {"empty_output", "input X[4]\noutput\n",
       "t.mg:2:7: error: expected the name of a tensor after 'output', found end of line"},
      {"output_trailing_comma", "input X[4]\noutput X, # more later\n",
       "t.mg:2:11: error: expected the name of a tensor after 'output', found end of line"},
      {"unexpected_character", "input X[4]\nY = $X\n", "t.mg:2:5: error: unexpected character '$'"},
      {"malformed_number", "input X[4]\nY = add(X, 4096abc)\n", "t.mg:2:12: error: malformed number '4096abc'"},
      {"two_dots", "input X[4]\nY = 1.2.3\n", "t.mg:2:5: error: malformed number '1.2.3'"},
      {"nul_byte", std::string("input X[4]\nY = exp(X)\0\noutput Y", 28),
       "t.mg:2:11: error: unexpected character '\\x00'"},
      {"binary_garbage", "\xff\xfe\x00\x01", "t.mg:1:1: error: unexpected character '\\xff'"},
      {"non_ascii_name", "input X\xc3\xa9[4]\n", "t.mg:1:8: error: unexpected character '\\xc3'"},
      {"crlf_columns", "input X[4]\r\n\r\nY = exq(X)\r\n", "t.mg:3:5: error: unknown op 'exq'; " + kOps},
      {"tabs_are_one_column", "input X[4]\n\tY\t=\texp(Z)\n", "t.mg:2:10: error: undefined name 'Z'"},
      {"deep_nesting", "input X[4]\nY = " + repeat_text("exp(", 100000) + "X" + repeat_text(")", 100000) + "\n",
       "t.mg:2:1029: error: expressions nest more than 256 op calls deep; split the expression into named statements"},
      {"deep_parentheses", "input X[4]\nY = " + repeat_text("(", 100000) + "\n",
       "t.mg:2:5: error: expected an expression (a name, a number or an op call) after '=', found '('"},
      {"long_name", "input X[4]\n" + std::string(100000, 'x') + " = exp(Y)\n",
       "t.mg:2:100008: error: undefined name 'Y'"},
      {"long_junk_is_shortened", "input X[4]\nY = exp(X) " + std::string(1000, 'q') + "\n",
       "t.mg:2:12: error: expected end of line after the statement, found '" + std::string(40, 'q') + "...'"},
  };
}

class ErrorMessage : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ErrorMessage, IsExact) { EXPECT_EQ(error_of(GetParam().text), GetParam().error); }

INSTANTIATE_TEST_SUITE_P(ParserErrors, ErrorMessage, ::testing::ValuesIn(error_cases()),
                         [](const ::testing::TestParamInfo<ErrorCase>& p) { return std::string(p.param.name); });

TEST(ParserErrors, LocationIsStructured) {
  try {
    parse_program("input X[16, 4096]\ninput W[1024, 64]\nO = matmul(X, W)\n", "prog.mg");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_EQ(e.loc().file, "prog.mg");
    EXPECT_EQ(e.loc().line, 3);
    EXPECT_EQ(e.loc().column, 5);
    EXPECT_EQ(e.message(), "matmul: [16, 4096] times [1024, 64]: inner extents 4096 and 1024 differ");
  }
}

TEST(ParserErrors, EveryPrefixOfAProgramParsesOrThrowsUserError) {
  // Cutting a valid program anywhere must give a clean error, never a crash or another exception.
  const std::string text =
      "input X[16, 4096] f16\ninput G[4096]\nS = sum(sqr(X), dim=-1, to=1)\n"
      "Y = div(mul(X, G), sqrt(div(S, 4096)))\nR = reshape(repeat(Y, dim=0, times=2), shape=[32, 64, 64])\n"
      "C = concat(R, R, dim=1)\noutput C, Y\n";
  for (size_t n = 0; n <= text.size(); ++n) {
    try {
      parse_program(std::string_view(text).substr(0, n));
    } catch (const UserError&) {
    }
  }
  EXPECT_EQ(parse_program(text).outputs.size(), 2u);
}

TEST(ParserErrors, EveryByteAtEveryPositionParsesOrThrowsUserError) {
  // A deterministic miniature of the fuzzer: all 256 byte values at each position of a program.
  const std::string text =
      "input X[4, 8] bf16\nS = sum(X, dim=-1, to=2)\nY = add(0.5, reshape(S, shape=[8]))\noutput Y\n";
  int parsed = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    for (int b = 0; b < 256; ++b) {
      std::string mutated = text;
      mutated[i] = static_cast<char>(b);
      try {
        parse_program(mutated);
        ++parsed;
      } catch (const UserError& e) {
        EXPECT_GE(e.loc().line, 1) << e.what();
        EXPECT_GE(e.loc().column, 1) << e.what();
      }
    }
  }
  EXPECT_GT(parsed, 0);
}

}  // namespace
}  // namespace mugraph
