#include "mugraph/types.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "mugraph/error.h"

namespace mugraph {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f32: return "f32";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  if (name == "f16") return DType::f16;
  if (name == "bf16") return DType::bf16;
  if (name == "f32") return DType::f32;
  return std::nullopt;
}

int dtype_bytes(DType t) { return t == DType::f32 ? 4 : 2; }

DType promote(DType a, DType b) {
  if (a == b) return a;
  return DType::f32;  // f16 with bf16, or either with f32
}

Shape::Shape(std::initializer_list<int64_t> dims) {
  for (int64_t d : dims) push_back(d);
}

Shape::Shape(const std::vector<int64_t>& dims) {
  for (int64_t d : dims) push_back(d);
}

void Shape::push_back(int64_t d) {
  MUGRAPH_CHECK(rank_ < kMaxRank) << "shape rank exceeds " << kMaxRank;
  dims_[static_cast<size_t>(rank_++)] = d;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : *this) n *= d;
  return n;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) s += (i ? ", " : "") + std::to_string((*this)[i]);
  return s + "]";
}

bool operator==(const Shape& a, const Shape& b) {
  if (a.rank_ != b.rank_) return false;
  for (int i = 0; i < a.rank_; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

double Scalar::value() const {
  // strtod on the canonical text rounds correctly, unlike mantissa * pow(10, exp10).
  std::string text = std::to_string(mantissa) + "e" + std::to_string(exp10);
  return std::strtod(text.c_str(), nullptr);
}

Scalar Scalar::normalized() const {
  Scalar s = *this;
  if (s.mantissa == 0) return Scalar{0, 0};
  while (s.mantissa % 10 == 0) {
    s.mantissa /= 10;
    ++s.exp10;
  }
  return s;
}

std::string Scalar::str() const {
  Scalar s = normalized();
  bool neg = s.mantissa < 0;
  // |INT64_MIN| cannot occur: parse_scalar limits mantissas to 18 digits.
  std::string digits = std::to_string(neg ? -s.mantissa : s.mantissa);
  std::string body;
  if (s.exp10 >= 0 && s.exp10 <= 6) {
    body = digits + std::string(static_cast<size_t>(s.exp10), '0');
  } else if (s.exp10 < 0 && -s.exp10 <= 18) {
    size_t frac = static_cast<size_t>(-s.exp10);
    if (digits.size() <= frac) digits = std::string(frac - digits.size() + 1, '0') + digits;
    body = digits.substr(0, digits.size() - frac) + "." + digits.substr(digits.size() - frac);
  } else {
    body = digits + "e" + std::to_string(s.exp10);
  }
  return (neg ? "-" : "") + body;
}

std::optional<Scalar> parse_scalar(std::string_view text) {
  size_t i = 0;
  bool neg = false;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) neg = text[i++] == '-';
  int64_t mantissa = 0;
  int significant = 0;
  int64_t exp10 = 0;
  int64_t trailing_zeros = 0;  // zeros after the last non-zero digit: an exponent, not digits
  bool any_digit = false;
  auto take_digit = [&](char c, bool after_point) {
    any_digit = true;
    if (after_point) --exp10;
    if (c == '0') {
      trailing_zeros += mantissa != 0;
      return true;
    }
    for (; trailing_zeros > 0; --trailing_zeros) {
      if (++significant > 18) return false;
      mantissa *= 10;
    }
    if (++significant > 18) return false;
    mantissa = mantissa * 10 + (c - '0');
    return true;
  };
  while (i < text.size() && text[i] >= '0' && text[i] <= '9')
    if (!take_digit(text[i++], false)) return std::nullopt;
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9')
      if (!take_digit(text[i++], true)) return std::nullopt;
  }
  if (!any_digit) return std::nullopt;
  exp10 += trailing_zeros;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) eneg = text[i++] == '-';
    if (i == text.size()) return std::nullopt;
    int64_t e = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      e = e * 10 + (text[i++] - '0');
      if (e > 100000) return std::nullopt;
    }
    exp10 += eneg ? -e : e;
  }
  if (i != text.size()) return std::nullopt;
  if (mantissa == 0) return Scalar{0, 0};
  // Magnitudes from 1e-300 to 1e300: the leading digit's exponent decides, then 1e300 itself
  // (the mantissa ends in a non-zero digit, so 1 is its only power of ten).
  const int64_t leading = exp10 + significant - 1;
  if (leading < -300 || leading > 300 || (leading == 300 && mantissa != 1)) return std::nullopt;
  Scalar s{neg ? -mantissa : mantissa, static_cast<int32_t>(exp10)};
  s = s.normalized();
  if (!std::isfinite(s.value()) || s.value() == 0.0) return std::nullopt;
  return s;
}

std::string_view axis_name(int axis) { return axis == 0 ? "x" : axis == 1 ? "y" : "z"; }

size_t hash_value(const Shape& s) {
  size_t h = static_cast<size_t>(s.rank());
  for (int64_t d : s) hash_combine(h, std::hash<int64_t>{}(d));
  return h;
}

size_t hash_value(const Scalar& s) {
  Scalar n = s.normalized();
  size_t h = std::hash<int64_t>{}(n.mantissa);
  hash_combine(h, std::hash<int32_t>{}(n.exp10));
  return h;
}

}  // namespace mugraph
