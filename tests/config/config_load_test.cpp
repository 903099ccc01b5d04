// load_config: finding kiln.toml (upward, KILN_CONFIG) and KILN_<SECTION>_<KEY> overrides.
#include <gtest/gtest.h>

#include "runtime/config.h"
#include "runtime/device.h"
#include "tests/config/config_test_env.h"

namespace kiln::runtime {
namespace {

using testing_support::ScopedEnv;
using ConfigLoad = testing_support::ScratchDir;

TEST_F(ConfigLoad, NoFileMeansDefaultsRootedAtTheWorkingDirectory) {
  auto r = load_config(dir_.string());
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->config.file, "");
  EXPECT_EQ(r->config.project_root, dir_.string());
  EXPECT_EQ(r->config.autotune_level, "balanced");
  EXPECT_EQ(r->config.sources.at("autotune.level"), "default");
}

TEST_F(ConfigLoad, SearchesUpwardFromANestedDirectory) {
  std::string file = write(
      "kiln.toml", "[streaming]\nmax_streams = 2\n[autotune]\ncache = { file = \"tune.db\" }\n");
  std::filesystem::create_directories(dir_ / "src" / "deep");
  auto r = load_config((dir_ / "src" / "deep").string());
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->config.file, file);
  EXPECT_EQ(r->config.project_root, dir_.string());
  EXPECT_EQ(r->config.max_streams, 2);
  EXPECT_EQ(r->config.sources.at("streaming.max_streams"), file + ":2");
  // Relative to the project root, not to the directory the search started from.
  EXPECT_EQ(r->config.autotune_cache.path, (dir_ / "tune.db").string());
}

TEST_F(ConfigLoad, TheNearestFileWins) {
  write("kiln.toml", "[streaming]\nmax_streams = 2\n");
  std::string inner = write("sub/kiln.toml", "[streaming]\nmax_streams = 6\n");
  auto r = load_config((dir_ / "sub").string());
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->config.max_streams, 6);
  EXPECT_EQ(r->config.file, inner);
}

TEST_F(ConfigLoad, KilnConfigNamesTheFile) {
  write("kiln.toml", "[streaming]\nmax_streams = 2\n");
  std::string other = write("elsewhere/custom.toml", "[streaming]\nmax_streams = 9\n");
  ScopedEnv env("KILN_CONFIG", other);
  auto r = load_config(dir_.string());
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->config.max_streams, 9);
  EXPECT_EQ(r->config.file, other);
  EXPECT_EQ(r->config.project_root, (dir_ / "elsewhere").string());
}

// KILN_CONFIG set to nothing is unset: the search finds kiln.toml (it was "... is not a file").
TEST_F(ConfigLoad, AnEmptyKilnConfigIsUnset) {
  std::string file = write("kiln.toml", "[streaming]\nmax_streams = 3\n");
  ScopedEnv env("KILN_CONFIG", "");
  auto r = load_config(dir_.string());
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->config.max_streams, 3);
  EXPECT_EQ(r->config.file, file);
}

TEST_F(ConfigLoad, KilnConfigToAMissingFileIsAnError) {
  ScopedEnv env("KILN_CONFIG", (dir_ / "missing.toml").string());
  auto r = load_config(dir_.string());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message,
            "env KILN_CONFIG: error: " + (dir_ / "missing.toml").string() + " is not a file");
}

TEST_F(ConfigLoad, ErrorsNameTheFileFound) {
  std::string file = write("kiln.toml", "[autotune]\nlevel = \"fast\"\n");
  auto r = load_config(dir_.string());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message, file +
                                   ":2:9: error: autotune.level: expected one of minimal, "
                                   "balanced, extensive, full, got \"fast\"");
}

TEST_F(ConfigLoad, EnvironmentOverridesWinOverTheFileAndShowTheirSource) {
  write("kiln.toml",
        "[autotune]\nlevel = \"minimal\"\n[fusion.beam_search]\nmax_blocks = 5\n[cache]\nread_only "
        "= false\n");
  ScopedEnv level("KILN_AUTOTUNE_LEVEL", "full");
  ScopedEnv blocks("KILN_FUSION_BEAM_SEARCH_MAX_BLOCKS", "3");
  ScopedEnv scope("KILN_COMPILATION_CACHE", "global");
  ScopedEnv file("KILN_AUTOTUNE_CACHE", "file=/data/tune.db");
  ScopedEnv relative("KILN_CACHE_LOGGER_TARGETS", "stderr,file=logs/c.log");
  ScopedEnv read_only("KILN_CACHE_READ_ONLY", "true");
  ScopedEnv logger("KILN_FUSION_BEAM_SEARCH_LOGGER_LEVEL", "verbose");
  auto r = load_config(dir_.string());
  ASSERT_TRUE(r.has_value()) << r.error().message;
  const Config& c = r->config;
  EXPECT_EQ(c.autotune_level, "full");
  EXPECT_EQ(c.max_blocks, 3);
  EXPECT_EQ(c.compilation_cache.kind, "global");
  EXPECT_EQ(c.autotune_cache.kind, "file");
  EXPECT_EQ(c.autotune_cache.path, "/data/tune.db");
  EXPECT_EQ(c.cache_logger.targets,
            (std::vector<LogTarget>{{"stderr", ""}, {"file", (dir_ / "logs/c.log").string()}}));
  EXPECT_TRUE(c.cache_read_only);
  EXPECT_EQ(c.fusion_logger.level, "verbose");
  EXPECT_EQ(c.sources.at("autotune.level"), "env KILN_AUTOTUNE_LEVEL");
  EXPECT_EQ(c.sources.at("fusion.beam_search.max_blocks"),
            "env KILN_FUSION_BEAM_SEARCH_MAX_BLOCKS");
  EXPECT_EQ(c.sources.at("cache.read_only"), "env KILN_CACHE_READ_ONLY");
  EXPECT_EQ(c.sources.at("streaming.max_streams"), "default");
  EXPECT_TRUE(r->warnings.empty());
}

TEST_F(ConfigLoad, EnvironmentOverridesAreCheckedAndNameTheVariable) {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"KILN_AUTOTUNE_LEVEL", "fast",
       "env KILN_AUTOTUNE_LEVEL: error: autotune.level: expected one of minimal, balanced, "
       "extensive, full, got \"fast\""},
      {"KILN_FUSION_BEAM_SEARCH_MAX_BLOCKS", "five",
       "env KILN_FUSION_BEAM_SEARCH_MAX_BLOCKS: error: fusion.beam_search.max_blocks: expected an "
       "integer >= 1, got \"five\""},
      {"KILN_CACHE_READ_ONLY", "yes",
       "env KILN_CACHE_READ_ONLY: error: cache.read_only: expected true or false, got \"yes\""},
      {"KILN_COMPILATION_CACHE", "file=",
       "env KILN_COMPILATION_CACHE: error: compilation.cache: expected one of local, target, "
       "global, none or { file = \"path\" }, got { file = \"\" }"},
      {"KILN_MEMORY_LOGGER_TARGETS", "stderr,journal",
       "env KILN_MEMORY_LOGGER_TARGETS: error: memory.logger.targets: expected each target to be "
       "one of stdout, stderr, log or { file = \"path\" }, got \"journal\""},
  };
  for (const auto& [name, value, message] : cases) {
    ScopedEnv env(name, value);
    auto r = load_config(dir_.string());
    ASSERT_FALSE(r.has_value()) << name;
    EXPECT_EQ(r.error().message, message);
  }
}

TEST_F(ConfigLoad, UnknownConfigVariablesWarnButOtherKilnVariablesDoNot) {
  ScopedEnv typo("KILN_FUSION_BEAM_SEARCH_MAX_BLOCK", "3");
  ScopedEnv dump("KILN_DUMP", "/tmp/dump");
  ScopedEnv threads("KILN_NUM_THREADS", "2");
  ScopedEnv rates("KILN_CPU_RATES", "reference");
  auto r = load_config(dir_.string());
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->warnings, (std::vector<std::string>{
                             "env KILN_FUSION_BEAM_SEARCH_MAX_BLOCK: warning: unknown variable "
                             "KILN_FUSION_BEAM_SEARCH_MAX_BLOCK (did you mean "
                             "KILN_FUSION_BEAM_SEARCH_MAX_BLOCKS?)"}));
  EXPECT_EQ(r->config.max_blocks, 5);
}

// compilation.matmul_precision: f32 matmuls by default; "high" (kiln.toml, the environment or an
// embedder's setting) asks the devices for tensor-core matmuls.
TEST_F(ConfigLoad, MatmulPrecisionHighAsksForTensorCores) {
  auto r = load_config(dir_.string());
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_FALSE(device_options_from_config(r->config)->tensor_core_matmul);
  {
    ScopedEnv high("KILN_COMPILATION_MATMUL_PRECISION", "high");
    auto e = load_config(dir_.string());
    ASSERT_TRUE(e.has_value()) << e.error().message;
    EXPECT_TRUE(device_options_from_config(e->config)->tensor_core_matmul);
  }
  Config c = default_config(dir_.string());
  ASSERT_TRUE(apply_setting(c, "compilation.matmul_precision", "high").has_value());
  EXPECT_TRUE(device_options_from_config(c)->tensor_core_matmul);
  ASSERT_TRUE(apply_setting(c, "compilation.matmul_precision", "highest").has_value());
  EXPECT_FALSE(device_options_from_config(c)->tensor_core_matmul);
}

// Autotuning is on by default at balanced (issue 16), and one setting turns it off: in kiln.toml,
// the environment, or an embedder's options.
TEST_F(ConfigLoad, AutotuneIsOnByDefaultAndOneSettingTurnsItOff) {
  auto r = load_config(dir_.string());
  ASSERT_TRUE(r.has_value()) << r.error().message;
  auto on = device_options_from_config(r->config);
  ASSERT_TRUE(on.has_value()) << on.error().message;
  EXPECT_TRUE(on->autotune);
  EXPECT_EQ(on->autotune_level, autotune::Level::balanced);
  {
    ScopedEnv off("KILN_AUTOTUNE_ENABLED", "false");
    auto e = load_config(dir_.string());
    ASSERT_TRUE(e.has_value()) << e.error().message;
    EXPECT_FALSE(device_options_from_config(e->config)->autotune);
  }
  Config c = default_config(dir_.string());
  ASSERT_TRUE(apply_setting(c, "autotune.enabled", "false").has_value());
  EXPECT_FALSE(device_options_from_config(c)->autotune);
  auto bad = apply_setting(c, "autotune.enabled", "sometimes");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message, "option autotune.enabled: expected true or false, got \"sometimes\"");
}

// KILN_DUMP and KILN_RECORD are read here, at the edge, and handed down in the device options.
TEST_F(ConfigLoad, DumpAndRecordDirectoriesComeFromTheEnvironmentIntoTheDeviceOptions) {
  {
    ScopedEnv dump("KILN_DUMP", "/tmp/kiln-dump-dir");
    ScopedEnv record("KILN_RECORD", "rec/");
    auto r = load_config(dir_.string());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    auto o = device_options_from_config(r->config);
    ASSERT_TRUE(o.has_value()) << o.error().message;
    EXPECT_EQ(o->dump_dir, "/tmp/kiln-dump-dir");
    EXPECT_EQ(o->record_dir, "rec/");
  }
  auto unset = load_config(dir_.string());
  ASSERT_TRUE(unset.has_value());
  EXPECT_EQ(unset->config.dump_dir, "");
  EXPECT_EQ(unset->config.record_dir, "");
}

// The environment-only settings are read here too, mapped into the device options, and a bad
// value is an error naming the variable (the layers below never read them).
TEST_F(ConfigLoad, ThreadsRatesAndNvrtcComeFromTheEnvironmentIntoTheDeviceOptions) {
  {
    ScopedEnv threads("KILN_NUM_THREADS", "3");
    ScopedEnv cpu("KILN_CPU_RATES", "reference");
    ScopedEnv gpu("KILN_GPU_RATES", "measured");
    ScopedEnv nvrtc("KILN_NVRTC_LIBRARY", "/opt/nvrtc/libnvrtc.so.13");
    ScopedEnv home("CUDA_HOME", "/opt/cuda");
    auto r = load_config(dir_.string());
    ASSERT_TRUE(r.has_value()) << r.error().message;
    auto o = device_options_from_config(r->config);
    ASSERT_TRUE(o.has_value()) << o.error().message;
    EXPECT_EQ(o->num_threads, 3);
    EXPECT_EQ(o->cpu_rates, RatesSource::reference);
    EXPECT_EQ(o->gpu_rates, RatesSource::measured);
    EXPECT_EQ(o->nvrtc.library, "/opt/nvrtc/libnvrtc.so.13");
    EXPECT_EQ(o->nvrtc.cuda_home, "/opt/cuda");
  }
  const std::tuple<const char*, const char*, const char*> cases[] = {
      {"KILN_NUM_THREADS", "many",
       "env KILN_NUM_THREADS: error: expected a thread count from 1 to 1024, got \"many\""},
      {"KILN_NUM_THREADS", "0",
       "env KILN_NUM_THREADS: error: expected a thread count from 1 to 1024, got \"0\""},
      {"KILN_CPU_RATES", "fast", "env KILN_CPU_RATES: error: expected measured or reference, got \"fast\""},
      {"KILN_GPU_RATES", "", "env KILN_GPU_RATES: error: expected measured or reference, got \"\""},
  };
  for (const auto& [name, value, message] : cases) {
    ScopedEnv cpu("KILN_CPU_RATES", std::nullopt);
    ScopedEnv env(name, value);
    auto r = load_config(dir_.string());
    ASSERT_FALSE(r.has_value()) << name << "=" << value;
    EXPECT_EQ(r.error().message, message);
  }
}

}  // namespace
}  // namespace kiln::runtime
