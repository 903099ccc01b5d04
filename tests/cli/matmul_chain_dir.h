// A scratch directory per test holding g.kg, the graph the persistent-run suites (cpu and
// vulkan:0) run across processes: four chained matmuls (%a and %c, %b and %d are the same
// kernels; operands are materialized) and a softmax.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace kiln::testing {

class MatmulChainDir : public ::testing::Test {
 protected:
  // dir_ = <tmp>/<prefix><pid>_<test name>, fresh, with graph_ = dir_/g.kg written.
  void make_dir(const std::string& prefix) {
    dir_ = std::filesystem::temp_directory_path() /
           (prefix + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    graph_ = (dir_ / "g.kg").string();
    std::ofstream(graph_) << "kiln.graph v1\ninput %x : f32[64,64]\n%a = matmul(%x, %x)\n"
                             "%b = matmul(%a, %x)\n%c = matmul(%b, %a)\n%d = matmul(%c, %x)\n"
                             "%y = softmax(%d)\noutput %y\n";
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::filesystem::path dir_;
  std::string graph_;
};

}  // namespace kiln::testing
