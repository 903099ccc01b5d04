// Runs the real `kiln` binary for the dump tests, and a scratch directory per test.
#pragma once

#include <gtest/gtest.h>

#include "tests/support/shell.h"
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace kiln::dump_test {

struct Result {
  int code;
  std::string out;  // stdout
  std::string err;  // stderr
};

// `env` is prepended to the command line ("KILN_DUMP=/tmp/x").
inline Result run_kiln(const std::string& args, const std::string& env = "") {
  std::string err_path = std::filesystem::temp_directory_path() /
                         ("kiln_dump_err_" + std::to_string(::getpid()));
  std::string cmd = env + (env.empty() ? "" : " ") + KILN_BINARY + " " + args + " 2>" + err_path;
  auto r = kiln::testing::run_shell(cmd);
  std::stringstream err;
  err << std::ifstream(err_path).rdbuf();
  std::filesystem::remove(err_path);
  return {r.code, r.out, err.str()};
}

inline std::string read_text(const std::filesystem::path& path) {
  std::stringstream s;
  s << std::ifstream(path).rdbuf();
  return s.str();
}

class ScratchDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kiln_dump_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  std::filesystem::path dir_;
};

inline size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace kiln::dump_test
