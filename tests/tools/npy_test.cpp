// .npy reading and writing: round trips, numpy-written fixtures, every error, atomic writes.
#include <gtest/gtest.h>

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tools/npy.h"

namespace kiln::tools {
namespace {

using ir::DType;
using ir::HostTensor;
using ir::Shape;

// A fresh directory per test, removed with its files afterwards.
class NpyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "kiln_npy_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const std::string& f : files()) ::unlink((dir_ + "/" + f).c_str());
    ::rmdir((dir_ + "/sub").c_str());
    ::rmdir(dir_.c_str());
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    DIR* d = ::opendir(dir_.c_str());
    if (!d) return out;
    while (dirent* e = ::readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
        out.push_back(e->d_name);
    ::closedir(d);
    return out;
  }
  std::string write_bytes(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
    return path(name);
  }
  static std::string read_bytes(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::string read_error(const std::string& bytes) const {
    const std::string p = write_bytes("bad.npy", bytes);
    auto r = read_npy(p);
    return r ? std::string("(no error)") : r.error().message;
  }

  std::string dir_;
};

// A version 1.0 file: magic, version, 2-byte length, the dict padded with spaces to `total`
// header bytes ending in '\n', then the data.
std::string npy_v1(const std::string& dict, const std::string& data, size_t total = 64) {
  std::string header = dict;
  while ((10 + header.size() + 1) % total != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

std::string npy_v2(char major, const std::string& dict, const std::string& data) {
  std::string header = dict + "\n";
  std::string out = "\x93NUMPY";
  out += major;
  out += '\x00';
  for (int i = 0; i < 4; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string f32_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

HostTensor sample(DType dtype, const Shape& shape) {
  HostTensor t = HostTensor::zeros(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set(i, dtype == DType::boolean ? i % 3 == 0 : i * 1.5 - 7);
  return t;
}

TEST_F(NpyTest, RoundTripsEveryDtypeAndShape) {
  const DType dtypes[] = {DType::f32, DType::f64, DType::f16, DType::i32,
                          DType::i64, DType::i8,  DType::u8,  DType::boolean};
  const Shape shapes[] = {{}, {0}, {5}, {2, 3, 4}};
  for (DType dtype : dtypes) {
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(std::string(ir::dtype_name(dtype)) + ir::shape_str(shape));
      const HostTensor t = sample(dtype, shape);
      const std::string p = path("t.npy");
      ASSERT_TRUE(write_npy(p, t).has_value());
      auto back = read_npy(p);
      ASSERT_TRUE(back.has_value()) << back.error().message;
      EXPECT_EQ(back->dtype, dtype);
      EXPECT_EQ(back->shape, shape);
      EXPECT_EQ(back->bytes, t.bytes);
    }
  }
  EXPECT_EQ(files(), std::vector<std::string>{"t.npy"});  // no temporary file left behind
}

TEST_F(NpyTest, WritesNumpysVersionOneLayout) {
  HostTensor t = HostTensor::zeros(DType::f32, {2, 3});
  for (int i = 0; i < 6; ++i) t.set(i, i);
  ASSERT_TRUE(write_npy(path("a.npy"), t).has_value());
  const std::string bytes = read_bytes(path("a.npy"));
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(bytes, npy_v1(dict, f32_bytes({0, 1, 2, 3, 4, 5})));
  EXPECT_EQ(bytes.size(), 128u + 24u);  // 10 + 60 + 1 rounds up to 128 header bytes
}

TEST_F(NpyTest, WritesShapeTuplesLikePython) {
  const std::pair<Shape, std::string> cases[] = {{{}, "()"}, {{5}, "(5,)"}, {{0, 2}, "(0, 2)"}};
  for (const auto& [shape, text] : cases) {
    ASSERT_TRUE(write_npy(path("s.npy"), HostTensor::zeros(DType::u8, shape)).has_value());
    const std::string bytes = read_bytes(path("s.npy"));
    const std::string want = "{'descr': '|u1', 'fortran_order': False, 'shape': " + text + ", }";
    EXPECT_EQ(bytes.substr(10, want.size()), want);
    EXPECT_EQ((bytes.size() - static_cast<size_t>(ir::shape_numel(shape))) % 64, 0u);
  }
}

// A header past 65535 bytes takes version 2. Only a shape of more axes than kiln takes (64) makes
// one, so reading it back is refused, briefly.
TEST_F(NpyTest, LongHeadersUseVersionTwo) {
  const Shape shape(25000, 1);  // "1, " per axis: the header no longer fits 65535 bytes
  ASSERT_TRUE(write_npy(path("long.npy"), sample(DType::i32, shape)).has_value());
  const std::string bytes = read_bytes(path("long.npy"));
  EXPECT_EQ(bytes[6], '\x02');
  auto back = read_npy(path("long.npy"));
  ASSERT_FALSE(back.has_value());
  EXPECT_EQ(back.error().message, "npy '" + path("long.npy") +
                                      "': shape [1,1,1,1,1,1,1,1,...,1,1] (25000 axes) has more "
                                      "than the 64 axes kiln takes");
}

TEST_F(NpyTest, ReadsAFileExactlyAsNumpyWritesIt) {
  // numpy 1.24 np.save(np.arange(6, dtype=np.float32).reshape(2, 3)): header length 118 (0x76).
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  const std::string file = npy_v1(dict, f32_bytes({0, 1, 2, 3, 4, 5}), 128);
  ASSERT_EQ(file.substr(8, 2), std::string("\x76\x00", 2));
  auto t = read_npy(write_bytes("np.npy", file));
  ASSERT_TRUE(t.has_value()) << t.error().message;
  EXPECT_EQ(t->dtype, DType::f32);
  EXPECT_EQ(t->shape, (Shape{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t->get(i), i);
}

TEST_F(NpyTest, ReadsKeysInAnyOrderAndPythonSpellings) {
  const std::string data = std::string("\x01\x00\x05", 3);
  const std::string dicts[] = {
      "{'shape': (3,), 'fortran_order': False, 'descr': '|b1'}",
      "{\"descr\": \"<b1\", \"shape\": (3L,), \"fortran_order\": False,}",
      "{ 'fortran_order' : False , 'descr' : '|b1' , 'shape' : ( 3 , ) }",
  };
  for (const std::string& dict : dicts) {
    SCOPED_TRACE(dict);
    auto t = read_npy(write_bytes("b.npy", npy_v1(dict, data)));
    ASSERT_TRUE(t.has_value()) << t.error().message;
    EXPECT_EQ(t->dtype, DType::boolean);
    EXPECT_EQ(t->shape, Shape{3});
    // Any non-zero byte is True; stored as 1.
    EXPECT_EQ(t->bytes, (std::vector<std::byte>{std::byte{1}, std::byte{0}, std::byte{1}}));
  }
}

TEST_F(NpyTest, ReadsEveryAcceptedDescr) {
  const std::pair<std::string, DType> cases[] = {
      {"<f4", DType::f32}, {"<f8", DType::f64},    {"<f2", DType::f16}, {"<i4", DType::i32},
      {"<i8", DType::i64}, {"|i1", DType::i8},     {"<i1", DType::i8},  {"|u1", DType::u8},
      {"<u1", DType::u8},  {"|b1", DType::boolean}};
  for (const auto& [descr, dtype] : cases) {
    const std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (2,), }";
    auto t =
        read_npy(write_bytes("d.npy", npy_v1(dict, std::string(2 * ir::dtype_size(dtype), '\0'))));
    ASSERT_TRUE(t.has_value()) << descr << ": " << t.error().message;
    EXPECT_EQ(t->dtype, dtype) << descr;
  }
}

TEST_F(NpyTest, ReadsVersionsTwoAndThree) {
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (), }";
  for (char major : {'\x02', '\x03'}) {
    auto t = read_npy(write_bytes("v.npy", npy_v2(major, dict, f32_bytes({2.5f}))));
    ASSERT_TRUE(t.has_value()) << t.error().message;
    EXPECT_EQ(t->shape, Shape{});
    EXPECT_EQ(t->get(0), 2.5);
  }
}

TEST_F(NpyTest, RejectsBadMagic) {
  const std::string p = path("bad.npy");
  EXPECT_EQ(read_error("PK\x03\x04 not numpy at all"),
            "npy '" + p + "': bad magic: not a .npy file (expected \"\\x93NUMPY\")");
  EXPECT_EQ(read_error(""),
            "npy '" + p + "': bad magic: not a .npy file (expected \"\\x93NUMPY\")");
}

TEST_F(NpyTest, RejectsUnknownVersions) {
  const std::string p = path("bad.npy");
  std::string file =
      npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", f32_bytes({1}));
  file[6] = '\x04';
  EXPECT_EQ(read_error(file),
            "npy '" + p + "': unsupported format version 4.0 (expected 1.0, 2.0 or 3.0)");
  file[6] = '\x01';
  file[7] = '\x01';
  EXPECT_EQ(read_error(file),
            "npy '" + p + "': unsupported format version 1.1 (expected 1.0, 2.0 or 3.0)");
}

TEST_F(NpyTest, RejectsTruncatedHeaders) {
  const std::string p = path("bad.npy");
  const std::string file = npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", "");
  EXPECT_EQ(read_error(file.substr(0, 9)), "npy '" + p + "': truncated header: no header length");
  EXPECT_EQ(read_error(file.substr(0, 40)),
            "npy '" + p + "': truncated header: expected 118 bytes, found 30");
}

TEST_F(NpyTest, RejectsMalformedHeaders) {
  const std::string p = "npy '" + path("bad.npy") + "': malformed header: ";
  const std::pair<std::string, std::string> cases[] = {
      {"{'descr': '<f4', 'fortran_order': False}", "missing key 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 'y'}", "unknown key 'x'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}",
       "key 'descr' appears twice"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': ()}",
       "expected a string, True, False or a tuple at offset 34, found \"0, 'shape':\""},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': '()'}", "'shape' must be a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (5)}",
       "the 1-element shape tuple is written (5,), not (5)"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
       "expected a non-negative integer dimension at offset 51, found \"-1,)}\""},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': ()}",
       "expected ',' or '}' at offset 16, found \"'fortran_ord\""},
      {"['descr', '<f4']", "expected '{' at offset 0, found \"['descr', '<\""},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': ()} x",
       "expected the end of the header after '}' at offset 54, found \"x\""},
      {"{'descr: '<f4'}", "expected ':' at offset 10, found \"<f4'}\""},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, ",
       "expected a non-negative integer dimension at the end of the header"},
  };
  for (const auto& [dict, message] : cases)
    EXPECT_EQ(read_error(npy_v1(dict, "")), p + message) << dict;
}

// Fortran-order data (what np.save writes for a transposed array) reads in row-major order (it
// was refused).
TEST_F(NpyTest, ReadsFortranOrderDataInRowMajorOrder) {
  // [[0, 1, 2], [3, 4, 5]] stored column by column, and a [2, 2, 2] of 0..7 likewise.
  const std::string p =
      write_bytes("f.npy", npy_v1("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                                  f32_bytes({0, 3, 1, 4, 2, 5})));
  auto t = read_npy(p);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->shape, (ir::Shape{2, 3}));
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(t->get(i), i);
  const std::string q =
      write_bytes("g.npy", npy_v1("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2, 2), }",
                                  f32_bytes({0, 4, 2, 6, 1, 5, 3, 7})));
  auto u = read_npy(q);
  ASSERT_TRUE(u) << u.error().message;
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(u->get(i), i);
}

TEST_F(NpyTest, RejectsBigEndianAndUnsupportedDtypes) {
  const std::string p = "npy '" + path("bad.npy") + "': ";
  EXPECT_EQ(read_error(npy_v1("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }",
                              f32_bytes({1}))),
            p + "big-endian dtype '>f4' is not supported (only little-endian data can be read)");
  EXPECT_EQ(read_error(npy_v1("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
                              std::string(8, '\0'))),
            p + "unsupported dtype '<c8' (supported: <f4 <f8 <f2 <i4 <i8 |i1 |u1 |b1)");
}

TEST_F(NpyTest, RejectsTruncatedAndTrailingData) {
  const std::string p = "npy '" + path("bad.npy") + "': ";
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(read_error(npy_v1(dict, f32_bytes({1, 2, 3, 4, 5}))),
            p + "truncated data: expected 24 bytes for f32[2,3], found 20");
  EXPECT_EQ(read_error(npy_v1(dict, f32_bytes({1, 2, 3, 4, 5, 6, 7}))),
            p + "trailing bytes after the data: expected 24 bytes for f32[2,3], found 28");
}

TEST_F(NpyTest, AnEmptyShapeWhoseOtherExtentsPassTheLimitIsRefusedInAnyOrder) {
  const std::string p = "npy '" + path("bad.npy") + "': shape ";
  const std::string why =
      " is empty, but its other extents multiply to more than 2^59, past what "
      "kiln indexes";
  // (Once only when the 0 came first: the extents after it were never multiplied.)
  for (const std::string shape :
       {"(1099511627776, 1099511627776, 0)", "(0, 1099511627776, 1099511627776)"}) {
    std::string text = shape.substr(1, shape.size() - 2);
    std::erase(text, ' ');
    EXPECT_EQ(read_error(
                  npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }", "")),
              p + "[" + text + "]" + why)
        << shape;
  }
  EXPECT_EQ(read_error(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, "
                              "4294967296), }",
                              "")),
            p + "[4294967296,4294967296] has too many elements (kiln indexes at most 2^59)");
  // At the limit, empty: read.
  const std::string fine = write_bytes(
      "fine.npy",
      npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 576460752303423488), }", ""));
  auto t = read_npy(fine);
  ASSERT_TRUE(t.has_value()) << t.error().message;
  EXPECT_EQ(t->shape, (ir::Shape{0, int64_t{1} << 59}));
}

TEST_F(NpyTest, ReportsAMissingFile) {
  auto r = read_npy(path("missing.npy"));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message,
            "npy '" + path("missing.npy") + "': cannot open: No such file or directory");
}

TEST_F(NpyTest, ADirectoryOrADeviceThatIsNoNpyIsAnErrorAtOnce) {
  ASSERT_EQ(::mkdir(path("d").c_str(), 0755), 0);
  auto dir = read_npy(path("d"));
  ASSERT_FALSE(dir.has_value());
  EXPECT_EQ(dir.error().message, "npy '" + path("d") + "': cannot open: it is a directory");
  // /dev/zero never ends: its first bytes are no magic, and nothing more is read.
  auto zero = read_npy("/dev/zero");
  ASSERT_FALSE(zero.has_value());
  EXPECT_EQ(zero.error().message,
            "npy '/dev/zero': bad magic: not a .npy file (expected \"\\x93NUMPY\")");
}

TEST_F(NpyTest, ReadsFromAPipeAndChecksItsLength) {
  // Not a regular file: the data is read to its end, then the length checked.
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  for (const auto& [data, message] : std::vector<std::pair<std::string, std::string>>{
           {f32_bytes({1, 2}), ""},
           {f32_bytes({1}), "truncated data: expected 8 bytes for f32[2], found 4"},
           {f32_bytes({1, 2, 3}),
            "trailing bytes after the data: expected 8 bytes for f32[2], found more"}}) {
    ASSERT_EQ(::mkfifo(path("p").c_str(), 0644), 0);
    std::thread writer([&] { std::ofstream(path("p"), std::ios::binary) << npy_v1(dict, data); });
    auto t = read_npy(path("p"));
    writer.join();
    ::unlink(path("p").c_str());
    if (message.empty()) {
      ASSERT_TRUE(t.has_value()) << t.error().message;
      EXPECT_EQ(t->shape, Shape{2});
    } else {
      ASSERT_FALSE(t.has_value());
      EXPECT_EQ(t.error().message, "npy '" + path("p") + "': " + message);
    }
  }
}

TEST_F(NpyTest, RefusesBFloat16WithoutCreatingAFile) {
  auto r = write_npy(path("b.npy"), HostTensor::zeros(DType::bf16, {2}));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message,
            "npy '" + path("b.npy") + "': bf16 has no numpy dtype and cannot be written to .npy");
  EXPECT_TRUE(files().empty());
}

TEST_F(NpyTest, RefusesATensorWhoseBytesDoNotMatchItsShape) {
  HostTensor t = HostTensor::zeros(DType::i32, {3});
  t.bytes.pop_back();
  auto r = write_npy(path("t.npy"), t);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message,
            "npy '" + path("t.npy") + "': tensor i32[3] holds 11 bytes, expected 12");
  EXPECT_TRUE(files().empty());
}

TEST_F(NpyTest, ReplacesAnExistingFileWhole) {
  ASSERT_TRUE(write_npy(path("t.npy"), sample(DType::f64, {2, 3, 4})).has_value());
  ASSERT_TRUE(write_npy(path("t.npy"), sample(DType::i8, {5})).has_value());
  auto back = read_npy(path("t.npy"));
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->dtype, DType::i8);
  EXPECT_EQ(back->shape, Shape{5});
  EXPECT_EQ(files(), std::vector<std::string>{"t.npy"});
}

TEST_F(NpyTest, FailedRenameRemovesTheTemporaryFile) {
  // The target is a non-empty directory: the data is written, then the rename fails.
  ASSERT_EQ(::mkdir(path("sub").c_str(), 0755), 0);
  write_bytes("sub/keep", "x");
  auto r = write_npy(path("sub"), sample(DType::f32, {5}));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message,
            "npy '" + path("sub") + "': cannot replace the file: Is a directory");
  EXPECT_EQ(files(), std::vector<std::string>{"sub"});
  ::unlink(path("sub/keep").c_str());
}

TEST_F(NpyTest, MissingDirectoryIsAnError) {
  auto r = write_npy(path("nope/t.npy"), sample(DType::f32, {5}));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message, "npy '" + path("nope/t.npy") +
                                   "': cannot create a temporary file: No such file or directory");
}

}  // namespace
}  // namespace kiln::tools
