/// \file types.h
/// Value types shared by every level of a μGraph: data types, shapes, scalar constants, grid
/// dimensions and strong ids. All are small, copyable, comparable and hashable.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mugraph {

/// Element types a tensor can be stored in. Arithmetic always happens in f32 or wider.
enum class DType : uint8_t { f16, bf16, f32 };

/// "f16", "bf16", "f32".
std::string_view dtype_name(DType t);
/// Parses a dtype name; nullopt if unknown.
std::optional<DType> parse_dtype(std::string_view name);
/// Bytes per element.
int dtype_bytes(DType t);
/// The type of a result computed from operands of types a and b: the wider one; f16 with bf16
/// gives f32 because neither holds the other exactly.
DType promote(DType a, DType b);

/// Largest tensor rank mugraph supports.
inline constexpr int kMaxRank = 6;
/// Largest extent of one dimension, and largest element count of one tensor.
inline constexpr int64_t kMaxExtent = int64_t{1} << 31;
inline constexpr int64_t kMaxElements = int64_t{1} << 40;

/// A tensor shape: up to kMaxRank extents, stored inline so that shapes are cheap values.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t& operator[](int i) { return dims_[static_cast<size_t>(i)]; }
  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + rank_; }
  /// Product of the extents (1 for rank 0). @pre every extent ≥ 0 and the product ≤ kMaxElements.
  int64_t numel() const;
  std::vector<int64_t> to_vector() const { return {begin(), end()}; }
  /// "[16, 4096]"
  std::string str() const;

  /// Appends a dimension. @pre rank() < kMaxRank
  void push_back(int64_t d);

  friend bool operator==(const Shape& a, const Shape& b);
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

/// A scalar constant exactly as the program spelled it: mantissa · 10^exp10. Kept exact so the
/// finite-field interpreter can use the rational it spells (0.125 = 125 · 10^-3 = 1/8).
struct Scalar {
  int64_t mantissa = 0;
  int32_t exp10 = 0;

  /// The nearest double.
  double value() const;
  /// Canonical decimal text ("0.125", "4096", "-2", "1e-06"); parse_scalar(str()) == *this.
  std::string str() const;
  /// Removes trailing zeros from the mantissa so that equal numbers compare equal.
  Scalar normalized() const;
  friend bool operator==(const Scalar&, const Scalar&) = default;
};

/// Parses a decimal number ("4096", "0.125", "1e-6", "-2"); nullopt if it is not one, has more
/// than 18 significant digits or an exponent beyond ±300.
std::optional<Scalar> parse_scalar(std::string_view text);

/// Grid or thread-block dimensions.
struct Dim3 {
  int64_t x = 1, y = 1, z = 1;
  int64_t operator[](int axis) const { return axis == 0 ? x : axis == 1 ? y : z; }
  int64_t& operator[](int axis) { return axis == 0 ? x : axis == 1 ? y : z; }
  int64_t volume() const { return x * y * z; }
  friend bool operator==(const Dim3&, const Dim3&) = default;
};

/// The name of grid axis 0/1/2: "x", "y", "z".
std::string_view axis_name(int axis);

/// A map entry that maps to no data dimension (the paper's φ: replicate).
inline constexpr int kPhi = -1;

/// A strong integer id (index into one of a Graph's vectors). Tag keeps kinds apart.
template <typename Tag>
struct Id {
  int32_t value = -1;
  constexpr Id() = default;
  constexpr explicit Id(int32_t v) : value(v) {}
  constexpr bool valid() const { return value >= 0; }
  constexpr size_t index() const { return static_cast<size_t>(value); }
  friend constexpr bool operator==(Id a, Id b) = default;
  friend constexpr auto operator<=>(Id a, Id b) = default;
};
struct TensorTag {};
struct OpTag {};
/// Index of a tensor in its Graph.
using TensorId = Id<TensorTag>;
/// Index of an op in its Graph.
using OpId = Id<OpTag>;

/// Mixes v into the hash seed h (boost-style, 64-bit).
inline void hash_combine(size_t& h, size_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 12) + (h >> 4);
}

size_t hash_value(const Shape& s);
size_t hash_value(const Scalar& s);

}  // namespace mugraph
