// Test helpers for the configuration suites: scoped environment variables and a scratch directory.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/config.h"

namespace kiln::runtime::testing_support {

// Sets (or, with nullopt, removes) one variable and puts the old value back at the end of the test.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, std::optional<std::string> value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    if (value)
      ::setenv(name_.c_str(), value->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Unsets every config override in the environment (KILN_FUSION_..., KILN_COMPILATION_..., as
// runtime/config.h reads them) for its lifetime; clear_overrides.cpp holds one for the whole
// config test binary.
class NoConfigOverrides {
 public:
  NoConfigOverrides() {
    std::vector<std::string> names;  // collected first: unsetting changes `environ`
    for (char** e = environ; *e; ++e) {
      std::string_view entry(*e);
      if (looks_like_config_variable(entry)) names.emplace_back(entry.substr(0, entry.find('=')));
    }
    for (const std::string& n : names) unset_.push_back(std::make_unique<ScopedEnv>(n, std::nullopt));
  }

 private:
  std::vector<std::unique_ptr<ScopedEnv>> unset_;
};

// A fresh directory per test, removed afterwards.
class ScratchDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kiln_config_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    dir_ = std::filesystem::canonical(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    auto path = dir_ / name;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
    return path.string();
  }
  std::filesystem::path dir_;
  // A stray KILN_CONFIG in the developer's shell would change every answer.
  ScopedEnv no_config_{"KILN_CONFIG", std::nullopt};
};

}  // namespace kiln::runtime::testing_support
