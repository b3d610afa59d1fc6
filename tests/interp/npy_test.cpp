// NPY reading and writing: round trips, the header variants NumPy writes, and malformed files
// that must give a UserError naming the file (never a crash).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "../corpus_replay.h"
#include "mugraph/interp.h"

namespace mugraph {
namespace {

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "mugraph_npy_" + name + ".npy"; }

void write_bytes(const std::string& path, const std::string& bytes) {
  std::remove(path.c_str());  // truncating a file in place is slow on some file systems
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// An NPY 1.0 file with the given header dict (padded as NumPy does) and raw data.
std::string npy_file(const std::string& dict, const std::string& data, int major = 1) {
  std::string header = dict;
  size_t pre = major == 1 ? 10 : 12;
  size_t total = pre + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  if (major != 1) out += std::string(2, '\0');
  return out + header + data;
}

std::string f32_bytes(std::initializer_list<float> values) {
  std::string s;
  for (float v : values) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    for (int k = 0; k < 4; ++k) s += static_cast<char>((u >> (8 * k)) & 0xff);
  }
  return s;
}

/// Expects read_npy(path) to throw a UserError mentioning the file and `what`.
void expect_rejected(const std::string& path, const std::string& what) {
  try {
    read_npy(path);
    ADD_FAILURE() << path << " was accepted; expected an error about " << what;
  } catch (const UserError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  }
}

TEST(Npy, RoundTripsF32) {
  HostTensor t(TensorType{{2, 3}, DType::f32});
  t.data = {1.0f, -2.5f, 3.25f, 1e-30f, -0.0f, std::numeric_limits<float>::infinity()};
  std::string path = temp_path("f32");
  write_npy(path, t);
  std::string bytes = read_bytes(path);
  EXPECT_EQ(bytes.size() % 64, 24u);  // header padded to 64 bytes, then 24 bytes of data
  EXPECT_NE(bytes.find("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"), std::string::npos);
  HostTensor r = read_npy(path);
  EXPECT_EQ(r.type, t.type);
  ASSERT_EQ(r.data.size(), t.data.size());
  for (size_t i = 0; i < t.data.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(r.data[i]), std::bit_cast<uint32_t>(t.data[i]));
}

TEST(Npy, RoundTripsF16EveryHalf) {
  HostTensor t(TensorType{{256, 256}, DType::f16});
  for (uint32_t h = 0; h < 65536; ++h) t.data[h] = half_bits_to_float(static_cast<uint16_t>(h));
  std::string path = temp_path("f16");
  write_npy(path, t);
  EXPECT_EQ(read_bytes(path).size(), 128u + 2 * 65536u);
  HostTensor r = read_npy(path);
  EXPECT_EQ(r.type, t.type);
  for (uint32_t h = 0; h < 65536; ++h) ASSERT_EQ(float_to_half_bits(r.data[h]), h);
}

TEST(Npy, WritesOneDimensionalShapesWithATrailingComma) {
  HostTensor t(TensorType{{5}, DType::f32});
  std::string path = temp_path("rank1");
  write_npy(path, t);
  EXPECT_NE(read_bytes(path).find("'shape': (5,), }"), std::string::npos);
  EXPECT_EQ(read_npy(path).type.shape, (Shape{5}));
}

TEST(Npy, Bf16IsWrittenAsF32) {
  HostTensor t(TensorType{{2}, DType::bf16});
  t.data = {1.5f, -3.0f};
  std::string path = temp_path("bf16");
  write_npy(path, t);
  HostTensor r = read_npy(path);
  EXPECT_EQ(r.type.dtype, DType::f32);
  EXPECT_EQ(r.data, t.data);
}

TEST(Npy, ReadsF64AndHeaderVariants) {
  std::string path = temp_path("f64");
  std::string data;
  for (double v : {1.0, 0.1, -1e300}) {
    uint64_t u;
    std::memcpy(&u, &v, 8);
    for (int k = 0; k < 8; ++k) data += static_cast<char>((u >> (8 * k)) & 0xff);
  }
  // Keys in another order, double quotes, native byte order, version 2.0.
  write_bytes(path, npy_file("{\"shape\": (3,), \"fortran_order\": False, \"descr\": \"=f8\"}", data, 2));
  HostTensor r = read_npy(path);
  EXPECT_EQ(r.type, (TensorType{{3}, DType::f32}));
  EXPECT_EQ(r.data[0], 1.0f);
  EXPECT_EQ(r.data[1], 0.1f);  // nearest float
  EXPECT_TRUE(std::isinf(r.data[2]) && r.data[2] < 0);
}

TEST(Npy, ReadsAScalar) {
  std::string path = temp_path("scalar");
  write_bytes(path, npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", f32_bytes({7.0f})));
  HostTensor r = read_npy(path);
  EXPECT_EQ(r.type.shape.rank(), 0);
  EXPECT_EQ(r.data, std::vector<float>{7.0f});
}

TEST(Npy, RejectsWhatItCannotRepresent) {
  std::string path = temp_path("bad");
  auto with = [&](const std::string& dict, const std::string& data) { write_bytes(path, npy_file(dict, data)); };
  with("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", f32_bytes({1}));
  expect_rejected(path, "big-endian");
  with("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 1), }", f32_bytes({1}));
  expect_rejected(path, "Fortran-order");
  with("{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }", f32_bytes({1}));
  expect_rejected(path, "dtype '<i4'");
  with("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", f32_bytes({1, 1}));
  expect_rejected(path, "dtype '<c8'");
  with("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", f32_bytes({1}));
  expect_rejected(path, "malformed NPY header");
  with("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1), }", f32_bytes({1}));
  expect_rejected(path, "more than 6 dimensions");
  with("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", "");
  expect_rejected(path, "empty dimension");
  with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", f32_bytes({1, 2, 3}));
  expect_rejected(path, "truncated");
  with("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", f32_bytes({1, 2}));
  expect_rejected(path, "bytes after the data");
  with("{'descr': '<f4', 'fortran_order': False, 'shape': (3), }", f32_bytes({1, 2, 3}));
  expect_rejected(path, "(n,)");
  with("{'descr': '<f4', 'fortran_order': False, }", f32_bytes({1}));
  expect_rejected(path, "lacks the key 'shape'");
  with("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", f32_bytes({1}));
  expect_rejected(path, "unexpected key 'extra'");
  with("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }", f32_bytes({1}));
  expect_rejected(path, "True or False");
  with("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x", f32_bytes({1}));
  expect_rejected(path, "after the header dictionary");
  // A huge shape with no data behind it: rejected before anything is allocated.
  with("{'descr': '<f4', 'fortran_order': False, 'shape': (2147483648, 2147483648), }", "");
  expect_rejected(path, "2^40");
  with("{'descr': '<f4', 'fortran_order': False, 'shape': (65536, 65536), }", f32_bytes({1}));
  expect_rejected(path, "truncated");
}

TEST(Npy, RejectsBrokenFiles) {
  std::string path = temp_path("broken");
  expect_rejected(temp_path("does_not_exist"), "cannot open");
  write_bytes(path, "");
  expect_rejected(path, "not an NPY file");
  write_bytes(path, "hello, this is not an npy file at all");
  expect_rejected(path, "magic string");
  write_bytes(path, std::string("\x93NUMPY\x09\x00\x10\x00", 10));
  expect_rejected(path, "version 9.0");
  write_bytes(path, std::string("\x93NUMPY\x01\x00\xff\xff{'descr'", 18));
  expect_rejected(path, "truncated inside its header");
  write_bytes(path, std::string("\x93NUMPY\x02\x00\xff\xff\xff\x7f", 12));
  expect_rejected(path, "declares a header of");
  std::string good = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", f32_bytes({1, 2, 3, 4}));
  // Every truncation of a good file is an error, never a crash.
  for (size_t n = 0; n < good.size(); ++n) {
    write_bytes(path, good.substr(0, n));
    EXPECT_THROW(read_npy(path), UserError) << "truncated to " << n << " bytes";
  }
  write_bytes(path, good);
  EXPECT_EQ(read_npy(path).data, (std::vector<float>{1, 2, 3, 4}));
}

TEST(Npy, GarbageNeverCrashes) {
  std::string path = temp_path("garbage");
  std::string good = npy_file("{'descr': '<f2', 'fortran_order': False, 'shape': (3, 2), }", std::string(12, '\x3c'));
  uint64_t state = 42;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes = good;
    int flips = 1 + trial % 4;
    for (int f = 0; f < flips; ++f) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      size_t at = (state >> 33) % bytes.size();
      bytes[at] = static_cast<char>(state >> 56);
    }
    if (trial % 7 == 0) bytes.resize((state >> 40) % bytes.size());
    write_bytes(path, bytes);
    try {
      HostTensor t = read_npy(path);
      EXPECT_EQ(static_cast<int64_t>(t.data.size()), t.type.shape.numel());
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    }
  }
}

TEST(Npy, WriteFailuresAreUserErrors) {
  HostTensor t(TensorType{{2}, DType::f32});
  EXPECT_THROW(write_npy("/nonexistent_dir_mugraph/x.npy", t), UserError);
  t.data.resize(3);
  EXPECT_THROW(write_npy(temp_path("inconsistent"), t), UserError);
}

// The seeds of fuzz/npy_fuzzer (and what it found, once fixed): each reads into a tensor its
// values fill, or is refused with a UserError naming the file.
TEST(Npy, FuzzCorpusReadsOrThrowsUserError) {
  const int read = test_support::replay_corpus("npy", [](const std::string& path) {
    try {
      const HostTensor t = read_npy(path);
      EXPECT_EQ(static_cast<int64_t>(t.data.size()), t.type.shape.numel()) << path;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      throw;
    }
  });
  EXPECT_GE(read, 4);  // valid_f16, valid_f32, valid_f64, valid_v2 at least
}

}  // namespace
}  // namespace mugraph
