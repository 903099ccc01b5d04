// A fresh directory per test, removed afterwards, and small helpers to build cache entries.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "cache/store.h"

namespace kiln::cache::testing {

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kiln_cache_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    // Tests may make directories read-only; give write access back so they can be removed.
    std::error_code ec;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_, ec))
      if (e.is_directory())
        std::filesystem::permissions(e.path(), std::filesystem::perms::owner_all,
                                     std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

inline KeyParts kernel_key(const std::string& kernel, const std::string& features = "+avx2",
                           const std::string& llvm = "19.1.7") {
  return KeyParts{{{"kernel", kernel},
                   {"tune", "vec=8"},
                   {"target", "cpu"},
                   {"cpu", "znver4"},
                   {"features", features},
                   {"llvm", llvm},
                   {"codegen", "kiln-cpu-3"},
                   {"schema", "1"}}};
}

inline Entry entry(const std::string& value, const std::string& source = "",
                   const std::string& metadata = "{}") {
  Entry e;
  e.value.assign(value.begin(), value.end());
  e.source = source;
  e.metadata = metadata;
  return e;
}

inline std::string read_bytes(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::string value_text(const Entry& e) {
  return {e.value.begin(), e.value.end()};
}

}  // namespace kiln::cache::testing
