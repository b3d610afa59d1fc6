// NPY files (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html): a strict
// reader for little-endian float16/32/64 arrays in C order, and a writer of version 1.0 files.
// Every problem with a file is a UserError that names the file; nothing in a file can make the
// reader crash or allocate more than the file's own size justifies.
#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "half.h"
#include "mugraph/interp.h"

namespace mugraph {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr uint32_t kMaxHeader = 1u << 20;

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw UserError(path + ": " + what); }

/// The header dictionary: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

/// A strict parser of the Python literal subset NPY headers use.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& path) : s_(text), path_(path) {}

  Header parse() {
    Header h;
    bool have_descr = false, have_fortran = false, have_shape = false;
    expect('{');
    for (;;) {
      skip_space();
      if (peek() == '}') break;
      std::string key = string_literal();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (have_descr) bad("the key 'descr' appears twice");
        h.descr = string_literal();
        have_descr = true;
      } else if (key == "fortran_order") {
        if (have_fortran) bad("the key 'fortran_order' appears twice");
        h.fortran_order = boolean();
        have_fortran = true;
      } else if (key == "shape") {
        if (have_shape) bad("the key 'shape' appears twice");
        h.shape = tuple();
        have_shape = true;
      } else {
        bad("unexpected key '" + key + "' (an NPY header has 'descr', 'fortran_order' and 'shape')");
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') bad("expected ',' or '}' at offset " + std::to_string(pos_));
    }
    ++pos_;  // '}'
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) ++pos_;
    if (pos_ != s_.size()) bad("unexpected text after the header dictionary");
    if (!have_descr || !have_fortran || !have_shape)
      bad(std::string("the header lacks the key '") +
          (!have_descr     ? "descr"
           : !have_fortran ? "fortran_order"
                           : "shape") +
          "'");
    return h;
  }

 private:
  [[noreturn]] void bad(const std::string& what) const { fail(path_, "malformed NPY header: " + what); }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) bad(std::string("expected '") + c + "' at offset " + std::to_string(pos_));
    ++pos_;
  }
  std::string string_literal() {
    skip_space();
    char q = peek();
    if (q != '\'' && q != '"') bad("expected a quoted string at offset " + std::to_string(pos_));
    size_t end = s_.find(q, pos_ + 1);
    if (end == std::string_view::npos) bad("unterminated string");
    std::string out(s_.substr(pos_ + 1, end - pos_ - 1));
    if (out.find('\\') != std::string::npos) bad("escapes in strings are not supported");
    pos_ = end + 1;
    return out;
  }
  bool boolean() {
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    bad("'fortran_order' must be True or False");
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> dims;
    bool comma_after_last = false;
    expect('(');
    for (;;) {
      skip_space();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') bad("expected a dimension at offset " + std::to_string(pos_));
      int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        v = v * 10 + (peek() - '0');
        if (v > kMaxExtent) bad("a dimension exceeds " + std::to_string(kMaxExtent));
        ++pos_;
      }
      if (peek() == 'L') ++pos_;  // Python 2 long literal
      dims.push_back(v);
      if (dims.size() > static_cast<size_t>(kMaxRank))
        fail(path_, "the array has more than " + std::to_string(kMaxRank) + " dimensions; mugraph supports up to " +
                        std::to_string(kMaxRank));
      skip_space();
      comma_after_last = peek() == ',';
      if (comma_after_last) {
        ++pos_;
        continue;
      }
      if (peek() != ')') bad("expected ',' or ')' in the shape at offset " + std::to_string(pos_));
    }
    ++pos_;
    if (dims.size() == 1 && !comma_after_last) bad("a one-dimensional shape is written (n,)");
    return dims;
  }

  std::string_view s_;
  const std::string& path_;
  size_t pos_ = 0;
};

uint32_t read_le(const unsigned char* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

HostTensor read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open the file for reading");
  in.seekg(0, std::ios::end);
  std::streamoff size_off = in.tellg();
  if (size_off < 0) fail(path, "cannot determine the file's size");
  auto file_size = static_cast<uint64_t>(size_off);
  in.seekg(0, std::ios::beg);

  unsigned char pre[12] = {};
  if (file_size < 10 || !in.read(reinterpret_cast<char*>(pre), 10)) fail(path, "is not an NPY file (too short)");
  if (std::memcmp(pre, kMagic, kMagicLen) != 0)
    fail(path, "is not an NPY file (the magic string \\x93NUMPY is missing)");
  int major = pre[6], minor = pre[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    fail(path, "has NPY format version " + std::to_string(major) + "." + std::to_string(minor) +
                   "; versions 1.0, 2.0 and 3.0 are supported");
  uint32_t header_len;
  size_t prefix;
  if (major == 1) {
    header_len = read_le(pre + 8, 2);
    prefix = 10;
  } else {
    if (file_size < 12 || !in.read(reinterpret_cast<char*>(pre + 10), 2))
      fail(path, "is truncated inside its preamble");
    header_len = read_le(pre + 8, 4);
    prefix = 12;
  }
  if (header_len > kMaxHeader) fail(path, "declares a header of " + std::to_string(header_len) + " bytes");
  if (prefix + header_len > file_size) fail(path, "is truncated inside its header");
  std::string header(header_len, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(header_len))) fail(path, "is truncated inside its header");
  for (char c : header)
    if (static_cast<unsigned char>(c) >= 0x80 || (c < 0x20 && c != '\n' && c != '\r' && c != '\t'))
      fail(path, "has a header with non-ASCII or control characters");
  Header h = HeaderParser(header, path).parse();

  DType dtype;
  int elem_bytes;
  std::string_view d = h.descr;
  if (d.size() != 3) fail(path, "has dtype '" + h.descr + "'; only float16, float32 and float64 are supported");
  char order = d[0];
  std::string_view kind = d.substr(1);
  if (kind == "f2") {
    dtype = DType::f16;
    elem_bytes = 2;
  } else if (kind == "f4") {
    dtype = DType::f32;
    elem_bytes = 4;
  } else if (kind == "f8") {
    dtype = DType::f32;
    elem_bytes = 8;
  } else {
    fail(path, "has dtype '" + h.descr + "'; only float16 (<f2), float32 (<f4) and float64 (<f8) are supported");
  }
  if (order == '>')
    fail(path, "holds big-endian data ('" + h.descr + "'); save it little-endian ('<" + std::string(kind) + "')");
  // '=' is native order and '|' "not applicable"; NumPy reads both as native, which on every
  // platform we build for is little-endian.
  static_assert(std::endian::native == std::endian::little, "NPY reading assumes a little-endian host");
  if (order != '<' && order != '=' && order != '|')
    fail(path, "has dtype '" + h.descr + "' with an unknown byte order");
  if (h.fortran_order)
    fail(path, "holds a Fortran-order (column-major) array; save it in C order (numpy.ascontiguousarray)");

  Shape shape;
  for (int64_t v : h.shape) {
    if (v < 1)
      fail(path,
           "has an empty dimension (shape " + Shape(h.shape).str() + "); mugraph tensors have extents of at least 1");
    shape.push_back(v);
  }
  int64_t numel = 1;
  for (int64_t v : h.shape) {
    if (numel > kMaxElements / v) fail(path, "has more than 2^40 elements");
    numel *= v;
  }
  uint64_t data_offset = prefix + header_len;
  uint64_t want = static_cast<uint64_t>(numel) * static_cast<uint64_t>(elem_bytes);
  uint64_t have = file_size - data_offset;
  if (have < want)
    fail(path, "is truncated: shape " + shape.str() + " needs " + std::to_string(want) +
                   " bytes of data but the file has " + std::to_string(have));
  if (have > want)
    fail(path, "has " + std::to_string(have - want) + " bytes after the data of its shape " + shape.str());

  HostTensor t(TensorType{shape, dtype});
  constexpr size_t kBatch = size_t{1} << 20;  // elements per read
  std::vector<unsigned char> buf;
  for (size_t done = 0; done < static_cast<size_t>(numel);) {
    size_t n = std::min(kBatch, static_cast<size_t>(numel) - done);
    buf.resize(n * static_cast<size_t>(elem_bytes));
    if (!in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(buf.size())))
      fail(path, "could not be read completely");
    const unsigned char* p = buf.data();
    float* out = t.data.data() + done;
    if (elem_bytes == 2) {
      for (size_t i = 0; i < n; ++i) out[i] = interp::f16_to_f32(static_cast<uint16_t>(read_le(p + 2 * i, 2)));
    } else if (elem_bytes == 4) {
      for (size_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(read_le(p + 4 * i, 4));
    } else {
      for (size_t i = 0; i < n; ++i) {
        uint64_t bits = static_cast<uint64_t>(read_le(p + 8 * i + 4, 4)) << 32 | read_le(p + 8 * i, 4);
        out[i] = static_cast<float>(std::bit_cast<double>(bits));
      }
    }
    done += n;
  }
  return t;
}

void write_npy(const std::string& path, const HostTensor& t) {
  if (static_cast<int64_t>(t.data.size()) != t.type.shape.numel())
    throw UserError(path + ": cannot write a tensor of shape " + t.type.shape.str() + " that holds " +
                    std::to_string(t.data.size()) + " values");
  const bool half = t.type.dtype == DType::f16;
  std::string dict = std::string("{'descr': '") + (half ? "<f2" : "<f4") + "', 'fortran_order': False, 'shape': (";
  const int rank = t.type.shape.rank();
  for (int d = 0; d < rank; ++d) dict += (d ? ", " : "") + std::to_string(t.type.shape[d]);
  if (rank == 1) dict += ',';
  dict += "), }";
  // Pad with spaces so that the data starts on a 64-byte boundary; the header ends with '\n'.
  size_t total = kMagicLen + 4 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  if (dict.size() > 65535) throw UserError(path + ": the NPY header would be too long");

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw UserError(path + ": cannot open the file for writing");
  std::string pre(kMagic, kMagicLen);
  pre += '\x01';
  pre += '\x00';
  pre += static_cast<char>(dict.size() & 0xff);
  pre += static_cast<char>(dict.size() >> 8);
  out.write(pre.data(), static_cast<std::streamsize>(pre.size()));
  out.write(dict.data(), static_cast<std::streamsize>(dict.size()));
  constexpr size_t kBatch = size_t{1} << 20;
  std::vector<unsigned char> buf;
  for (size_t done = 0; done < t.data.size();) {
    size_t n = std::min(kBatch, t.data.size() - done);
    buf.clear();
    for (size_t i = 0; i < n; ++i) {
      float f = t.data[done + i];
      if (half) {
        uint16_t h = interp::f32_to_f16(f);
        buf.push_back(static_cast<unsigned char>(h & 0xff));
        buf.push_back(static_cast<unsigned char>(h >> 8));
      } else {
        uint32_t u = std::bit_cast<uint32_t>(f);
        for (int k = 0; k < 4; ++k) buf.push_back(static_cast<unsigned char>((u >> (8 * k)) & 0xff));
      }
    }
    out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
    done += n;
  }
  out.close();
  if (!out) throw UserError(path + ": could not write the file");
}

}  // namespace mugraph
