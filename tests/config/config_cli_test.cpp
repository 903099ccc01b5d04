// `kiln config` through the real binary: the listing, an env override's source, errors, warnings.
#include <gtest/gtest.h>

#include "tests/support/shell.h"


#include "tests/config/config_test_env.h"

namespace kiln::runtime {
namespace {

using KilnConfigCommand = testing_support::ScratchDir;

using Result = kiln::testing::CommandResult;

Result capture(const std::string& cmd) {
  return kiln::testing::run_shell(cmd);
}

// Runs `kiln config` in `dir` with extra environment assignments ("NAME=value ...").
Result run_config(const std::filesystem::path& dir, const std::string& env,
                  const std::string& redirect = "2>&1") {
  return capture("cd '" + dir.string() + "' && env " + env + " " + KILN_BINARY + " config " +
                 redirect);
}

std::string line_with(const std::string& text, const std::string& start) {
  size_t at = text.find("\n" + start);
  if (at == std::string::npos) return "(no line starting with " + start + ")";
  return text.substr(at + 1, text.find('\n', at + 1) - at - 1);
}

TEST_F(KilnConfigCommand, ListsEveryKeyWithItsSourceIncludingAnEnvOverride) {
  std::string file =
      write("kiln.toml", "[autotune]\nlevel = \"minimal\"\n[streaming]\nmax_streams = 4\n");
  std::filesystem::create_directories(dir_ / "nested");
  Result r = run_config(dir_ / "nested", "KILN_AUTOTUNE_LEVEL=full");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("# configuration file: " + file + "\n"), std::string::npos) << r.out;
  std::string level = line_with(r.out, "autotune.level = ");
  EXPECT_TRUE(level.starts_with("autotune.level = \"full\" ")) << level;
  EXPECT_TRUE(level.ends_with("# env KILN_AUTOTUNE_LEVEL")) << level;
  EXPECT_TRUE(line_with(r.out, "streaming.max_streams = ").ends_with("# " + file + ":4")) << r.out;
  EXPECT_TRUE(line_with(r.out, "cache.read_only = ").ends_with("# default")) << r.out;
  size_t keys = 0;
  for (size_t at = r.out.find(" = "); at != std::string::npos; at = r.out.find(" = ", at + 1))
    ++keys;
  EXPECT_EQ(keys, 28u) << r.out;
}

TEST_F(KilnConfigCommand, AWrongValueIsAnErrorWithExitCodeOne) {
  std::string file = write("kiln.toml", "[fusion.beam_search]\nmax_blocks = \"five\"\n");
  Result r = run_config(dir_, "");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, file +
                       ":2:14: error: fusion.beam_search.max_blocks: expected an integer >= 1, "
                       "got \"five\"\n");
}

TEST_F(KilnConfigCommand, WarningsGoToStderrAndTheListingStillPrints) {
  std::string file = write("kiln.toml", "[fusion.beam_search]\nmax_block = 3\n");
  Result r = run_config(dir_, "");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(r.out.starts_with(file + ":2:1: warning: unknown key fusion.beam_search.max_block "
                                       "(did you mean fusion.beam_search.max_blocks?)\n"))
      << r.out;
  std::string out = run_config(dir_, "", "2>/dev/null").out;
  EXPECT_EQ(out.find("warning"), std::string::npos) << out;
  EXPECT_NE(out.find("fusion.beam_search.max_blocks = 5"), std::string::npos) << out;
}

}  // namespace
}  // namespace kiln::runtime
