// The configuration suites test kiln.toml and the overrides they set themselves, so config
// overrides already in the environment (`KILN_COMPILATION_CPU_TARGET=x86-64-v3 scripts/test.sh`)
// are cleared for this whole test binary, the `kiln` processes it starts included.
#include <gtest/gtest.h>

#include <optional>

#include "tests/config/config_test_env.h"

namespace kiln::runtime::testing_support {
namespace {

class ClearConfigOverrides : public ::testing::Environment {
 public:
  void SetUp() override { clean_.emplace(); }
  void TearDown() override { clean_.reset(); }

 private:
  std::optional<NoConfigOverrides> clean_;
};

[[maybe_unused]] const ::testing::Environment* const kRegistered =
    ::testing::AddGlobalTestEnvironment(new ClearConfigOverrides);

}  // namespace
}  // namespace kiln::runtime::testing_support
