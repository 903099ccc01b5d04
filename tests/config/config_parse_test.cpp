// kiln.toml parsing: defaults, every key, each kind of wrong value, unknown keys, printing.
#include <gtest/gtest.h>

#include "runtime/config.h"
#include "tests/config/config_test_env.h"

namespace kiln::runtime {
namespace {

using testing_support::ScopedEnv;

const char* kFullFile = R"([fusion]
enabled = false
[fusion.beam_search]
max_blocks = 7
beam_width = 2
[fusion.beam_search.logger]
level = "verbose"
targets = ["stdout", "log"]
[autotune]
level = "extensive"
cache = "global"
[autotune.logger]
level = "full"
targets = ["stdout", "log", { file = "autotune.log" }]
[compilation]
check_mode = "validate"
verify_ir = true
cache = { file = "/var/kiln/cache.db" }
[compilation.logger]
level = "disabled"
[streaming]
max_streams = 3
[memory]
persistent_memory = "enforced"
[memory.logger]
level = "verbose"
targets = "stdout"
[shapes]
policy = "dynamic"
buckets = true
max_slowdown = 1.25
[cache]
max_size = "512MiB"
read_only = true
[cache.logger]
level = "verbose"
targets = [{ file = "logs/cache.log" }]
)";

std::string error_of(const std::string& text) {
  auto r = parse_config(text, "kiln.toml");
  return r ? "(no error)" : r.error().message;
}

std::vector<std::string> warnings_of(const std::string& text) {
  auto r = parse_config(text, "kiln.toml");
  EXPECT_TRUE(r.has_value()) << r.error().message;
  return r ? r->warnings : std::vector<std::string>{};
}

TEST(ConfigParse, EmptyFileGivesTheDesignDefaults) {
  auto r = parse_config("", "/proj/kiln.toml");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  const Config& c = r->config;
  EXPECT_TRUE(c.fusion_enabled);
  EXPECT_EQ(c.max_blocks, 5);
  EXPECT_EQ(c.beam_width, 4);
  EXPECT_EQ(c.fusion_logger.level, "basic");
  EXPECT_EQ(c.fusion_logger.targets, (std::vector<LogTarget>{{"stderr", ""}}));
  EXPECT_TRUE(c.autotune_enabled);  // on by default, at balanced
  EXPECT_EQ(c.autotune_level, "balanced");
  EXPECT_EQ(c.autotune_cache.kind, "target");
  EXPECT_EQ(c.check_mode, "auto");
  EXPECT_EQ(c.verify_ir, passes::kVerifyIrByDefault);
  EXPECT_EQ(c.compilation_cache.kind, "target");
  EXPECT_EQ(c.cpu_target, "native");
  EXPECT_EQ(c.matmul_precision, "highest");
  EXPECT_EQ(c.max_streams, 8);
  EXPECT_EQ(c.persistent_memory, "enabled");
  EXPECT_EQ(c.cache_max_size, "2GiB");
  EXPECT_FALSE(c.cache_read_only);
  EXPECT_EQ(c.memory_logger.level, "disabled");
  EXPECT_EQ(c.file, "/proj/kiln.toml");
  EXPECT_EQ(c.project_root, "/proj");
  EXPECT_EQ(c.shapes_policy, "automatic");
  EXPECT_FALSE(c.shapes_buckets);
  EXPECT_EQ(c.shapes_max_slowdown, 1.1);
  EXPECT_EQ(c.sources.size(), 28u);
  for (const auto& [key, source] : c.sources) EXPECT_EQ(source, "default") << key;
  EXPECT_TRUE(r->warnings.empty());
}

TEST(ConfigParse, EveryKeyIsRead) {
  auto r = parse_config(kFullFile, "/proj/kiln.toml");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_TRUE(r->warnings.empty());
  const Config& c = r->config;
  EXPECT_FALSE(c.fusion_enabled);
  EXPECT_EQ(c.max_blocks, 7);
  EXPECT_EQ(c.beam_width, 2);
  EXPECT_EQ(c.fusion_logger.level, "verbose");
  EXPECT_EQ(c.fusion_logger.targets, (std::vector<LogTarget>{{"stdout", ""}, {"log", ""}}));
  EXPECT_EQ(c.autotune_level, "extensive");
  EXPECT_EQ(c.autotune_cache.kind, "global");
  EXPECT_EQ(c.autotune_logger.level, "full");
  EXPECT_EQ(c.autotune_logger.targets,
            (std::vector<LogTarget>{{"stdout", ""}, {"log", ""}, {"file", "/proj/autotune.log"}}));
  EXPECT_EQ(c.check_mode, "validate");
  EXPECT_TRUE(c.verify_ir);
  EXPECT_EQ(c.compilation_cache.kind, "file");
  EXPECT_EQ(c.compilation_cache.path, "/var/kiln/cache.db");
  EXPECT_EQ(c.compilation_logger.level, "disabled");
  EXPECT_EQ(c.compilation_logger.targets,
            (std::vector<LogTarget>{{"stderr", ""}}));  // default kept
  EXPECT_EQ(c.max_streams, 3);
  EXPECT_EQ(c.persistent_memory, "enforced");
  EXPECT_EQ(c.shapes_policy, "dynamic");
  EXPECT_TRUE(c.shapes_buckets);
  EXPECT_EQ(c.shapes_max_slowdown, 1.25);
  EXPECT_EQ(c.memory_logger.level, "verbose");
  EXPECT_EQ(c.memory_logger.targets, (std::vector<LogTarget>{{"stdout", ""}}));
  EXPECT_EQ(c.cache_max_size, "512MiB");
  EXPECT_TRUE(c.cache_read_only);
  EXPECT_EQ(c.cache_logger.level, "verbose");
  EXPECT_EQ(c.cache_logger.targets, (std::vector<LogTarget>{{"file", "/proj/logs/cache.log"}}));
  EXPECT_EQ(c.sources.at("fusion.enabled"), "/proj/kiln.toml:2");
  EXPECT_EQ(c.sources.at("autotune.logger.targets"), "/proj/kiln.toml:14");
  EXPECT_EQ(c.sources.at("cache.logger.targets"), "/proj/kiln.toml:37");
  EXPECT_EQ(c.sources.at("shapes.policy"), "/proj/kiln.toml:29");
  EXPECT_EQ(c.sources.at("compilation.logger.targets"), "default");
}

TEST(ConfigParse, WrongValuesNameLineColumnAndWhatWasExpected) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[compilation]\nmatmul_precision = \"tf32\"\n",
       "kiln.toml:2:20: error: compilation.matmul_precision: expected one of highest, high, got "
       "\"tf32\""},
      {"[autotune]\nlevel = \"fast\"\n",
       "kiln.toml:2:9: error: autotune.level: expected one of minimal, balanced, extensive, full, "
       "got \"fast\""},
      {"[fusion.beam_search]\nmax_blocks = \"five\"\n",
       "kiln.toml:2:14: error: fusion.beam_search.max_blocks: expected an integer >= 1, got "
       "\"five\""},
      {"[fusion.beam_search]\nbeam_width = 0\n",
       "kiln.toml:2:14: error: fusion.beam_search.beam_width: expected an integer >= 1, got 0"},
      {"[shapes]\nmax_slowdown = 0\n",
       "kiln.toml:2:16: error: shapes.max_slowdown: expected a number above 0, got 0"},
      {"[shapes]\nmax_slowdown = \"fast\"\n",
       "kiln.toml:2:16: error: shapes.max_slowdown: expected a number above 0, got \"fast\""},
      {"[fusion]\nenabled = \"yes\"\n",
       "kiln.toml:2:11: error: fusion.enabled: expected true or false, got \"yes\""},
      {"[compilation]\ncache = \"disk\"\n",
       "kiln.toml:2:9: error: compilation.cache: expected one of local, target, global, none or "
       "{ file = \"path\" }, got \"disk\""},
      {"[compilation]\ncpu_target = \"pentium-9000\"\n",
       "kiln.toml:2:14: error: compilation.cpu_target: unknown CPU 'pentium-9000' (expected "
       "native, x86-64-v3, x86-64-v4 or an LLVM x86-64 CPU name such as znver3), got "
       "\"pentium-9000\""},
      {"[compilation]\ncpu_target = 3\n",
       "kiln.toml:2:14: error: compilation.cpu_target: expected a string such as \"native\" or "
       "\"x86-64-v3\", got 3"},
      {"[autotune]\ncache = { path = \"x\" }\n",
       "kiln.toml:2:9: error: autotune.cache: expected one of local, target, global, none or "
       "{ file = \"path\" }, got { path = \"x\" }"},
      {"[compilation]\ncache = { file = \"\" }\n",
       "kiln.toml:2:9: error: compilation.cache: expected one of local, target, global, none or "
       "{ file = \"path\" }, got { file = \"\" }"},
      {"[fusion.beam_search]\nmax_blocks = 2147483648\n",
       "kiln.toml:2:14: error: fusion.beam_search.max_blocks: expected an integer from 1 to "
       "2147483647, got 2147483648"},
      {"[fusion.beam_search]\nmax_blocks = [1, 2]\n",
       "kiln.toml:2:14: error: fusion.beam_search.max_blocks: expected an integer >= 1, got [1, "
       "2]"},
      {"[autotune.logger]\ntargets = [\"stdout\", \"stdot\"]\n",
       "kiln.toml:2:11: error: autotune.logger.targets: expected each target to be one of stdout, "
       "stderr, log or { file = \"path\" }, got \"stdot\""},
      {"[cache.logger]\ntargets = 3\n",
       "kiln.toml:2:11: error: cache.logger.targets: expected an array of stdout, stderr, log or "
       "{ file = \"path\" }, got 3"},
      {"[fusion.beam_search.logger]\nlevel = \"full\"\n",
       "kiln.toml:2:9: error: fusion.beam_search.logger.level: expected one of disabled, basic, "
       "verbose, got \"full\""},
      {"[cache]\nmax_size = \"lots\"\n",
       "kiln.toml:2:12: error: cache.max_size: expected a size such as \"512MiB\" or \"2GiB\", got "
       "\"lots\""},
      {"streaming = 3\n", "kiln.toml:1:13: error: streaming: expected a table, got 3"},
      {"[shapes]\npolicy = \"sometimes\"\n",
       "kiln.toml:2:10: error: shapes.policy: expected one of static, dynamic, automatic, got "
       "\"sometimes\""},
  };
  for (const auto& [text, message] : cases) EXPECT_EQ(error_of(text), message) << text;
}

TEST(ConfigParse, EveryWrongValueIsReportedInFileOrder) {
  EXPECT_EQ(error_of("[streaming]\nmax_streams = -1\n[memory]\npersistent_memory = 1\n"),
            "kiln.toml:2:15: error: streaming.max_streams: expected an integer >= 1, got -1\n"
            "kiln.toml:4:21: error: memory.persistent_memory: expected one of enabled, disabled, "
            "enforced, got 1");
}

TEST(ConfigParse, SyntaxErrorNamesFileLineAndColumn) {
  EXPECT_EQ(error_of("[autotune]\nlevel = \n"),
            "kiln.toml:2:9: error: Error while parsing key-value pair: expected value, saw '\\n'");
  EXPECT_TRUE(error_of("[fusion\n").starts_with("kiln.toml:1:8: error: ")) << error_of("[fusion\n");
}

// toml++ parses nesting recursively: deep text is refused before it reaches it (issue 15: a
// header of 50 000 dotted parts crashed every command).
TEST(ConfigParse, NestingPastSixtyFourLevelsIsRefusedBeforeParsing) {
  auto dotted = [](int parts) {
    std::string h = "[a";
    for (int i = 1; i < parts; ++i) h += ".a";
    return h + "]\n";
  };
  const std::string expected =
      "kiln.toml:2: error: nesting deeper than 64 levels (tables, dotted keys, arrays); kiln's "
      "settings are at most 2 deep, as in [compilation] cache = \"local\"";
  EXPECT_EQ(error_of("# deep\n" + dotted(50'000)), expected);
  EXPECT_EQ(error_of("# deep\nx = " + std::string(50'000, '[') + std::string(50'000, ']')),
            expected);
  EXPECT_EQ(error_of("# deep\nx = " + std::string(50'000, '{')), expected);
  // At the limit it parses (and warns about the unknown section); dots in strings, comments and
  // numbers are not nesting.
  EXPECT_EQ(error_of(dotted(64)), "(no error)");
  EXPECT_EQ(error_of("# " + std::string(100, '.') + "\n[compilation]\ncache = \"none\" # a.b.c\n"
                     "[fusion.beam_search]\nmax_blocks = 5\n"),
            "(no error)");
  EXPECT_EQ(error_of("x = \"" + std::string(1000, '.') + "\"\ny = 1.5\n"), "(no error)");
}

TEST(ConfigParse, UnknownKeysWarnWithTheClosestValidKey) {
  EXPECT_EQ(warnings_of("[fusion]\nenabled = true\n[fusion.beam_search]\nmax_blocks = 5\n\n\n"
                        "max_block = 3\n"),
            (std::vector<std::string>{"kiln.toml:7:1: warning: unknown key "
                                      "fusion.beam_search.max_block (did you mean "
                                      "fusion.beam_search.max_blocks?)"}));
  EXPECT_EQ(warnings_of("[fusoin]\nenabled = true\n"),
            (std::vector<std::string>{
                "kiln.toml:1:2: warning: unknown section fusoin (did you mean fusion?)"}));
  // In file order, a key from another section suggested by its name, a stranger with no guess.
  EXPECT_EQ(warnings_of("[autotune]\nzzz = 1\nmax_streams = 2\n"),
            (std::vector<std::string>{
                "kiln.toml:2:1: warning: unknown key autotune.zzz",
                "kiln.toml:3:1: warning: unknown key autotune.max_streams (did you mean "
                "streaming.max_streams?)"}));
}

TEST(ConfigParse, UnknownKeysDoNotStopTheKnownOnes) {
  auto r = parse_config("[autotune]\nlevle = \"full\"\nlevel = \"minimal\"\n", "kiln.toml");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->config.autotune_level, "minimal");
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_EQ(r->warnings[0],
            "kiln.toml:2:1: warning: unknown key autotune.levle (did you mean autotune.level?)");
}

TEST(ConfigParse, EnvironmentOverridesApplyToExplicitText) {
  ScopedEnv level("KILN_AUTOTUNE_LEVEL", "minimal");
  auto r = parse_config("[autotune]\nlevel = \"full\"\n", "kiln.toml");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->config.autotune_level, "minimal");
  EXPECT_EQ(r->config.sources.at("autotune.level"), "env KILN_AUTOTUNE_LEVEL");
}

TEST(ConfigParse, ANumberFromTheEnvironment) {
  {
    ScopedEnv slowdown("KILN_SHAPES_MAX_SLOWDOWN", "1.5");
    auto r = parse_config("[shapes]\nmax_slowdown = 3\n", "kiln.toml");
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(r->config.shapes_max_slowdown, 1.5);
    EXPECT_EQ(r->config.sources.at("shapes.max_slowdown"), "env KILN_SHAPES_MAX_SLOWDOWN");
  }
  ScopedEnv slowdown("KILN_SHAPES_MAX_SLOWDOWN", "1.5x");
  auto r = parse_config("", "kiln.toml");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("shapes.max_slowdown: expected a number above 0, got \"1.5x\""),
            std::string::npos)
      << r.error().message;
}

TEST(ConfigParse, ByteSizes) {
  EXPECT_EQ(parse_byte_size("2GiB").value(), 2ull << 30);
  EXPECT_EQ(parse_byte_size("512MiB").value(), 512ull << 20);
  EXPECT_EQ(parse_byte_size("100MB").value(), 100'000'000ull);
  EXPECT_EQ(parse_byte_size("64 KiB").value(), 64ull << 10);
  EXPECT_EQ(parse_byte_size("4096").value(), 4096ull);
  EXPECT_EQ(parse_byte_size("12B").value(), 12ull);
  EXPECT_FALSE(parse_byte_size("GiB").has_value());
  EXPECT_FALSE(parse_byte_size("-1").has_value());
  EXPECT_FALSE(parse_byte_size("99999999999TiB").has_value());
  EXPECT_EQ(parse_byte_size("2 parsecs").error().message,
            "cache.max_size: expected a size such as \"512MiB\" or \"2GiB\", got \"2 parsecs\"");
  auto r = parse_config("[cache]\nmax_size = 1048576\n", "kiln.toml");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->config.cache_max_size, "1048576");
}

TEST(ConfigParse, PrintListsEveryKeyWithValueAndSourceInAFixedOrder) {
  auto r = parse_config(kFullFile, "/proj/kiln.toml");
  ASSERT_TRUE(r.has_value());
  std::string text = print_config(r->config);
  EXPECT_TRUE(text.starts_with("# configuration file: /proj/kiln.toml\n# project root: /proj\n"))
      << text;
  for (const auto& [key, source] : r->config.sources)
    EXPECT_NE(text.find(key + " = "), std::string::npos) << key;
  auto line_of = [&](const std::string& key) {
    size_t at = text.find("\n" + key + " = ");
    EXPECT_NE(at, std::string::npos) << key;
    return text.substr(at + 1, text.find('\n', at + 1) - at - 1);
  };
  EXPECT_TRUE(line_of("autotune.logger.targets")
                  .starts_with("autotune.logger.targets = [\"stdout\", \"log\", { file = "
                               "\"/proj/autotune.log\" }]"));
  EXPECT_TRUE(line_of("autotune.logger.targets").ends_with("# /proj/kiln.toml:14"));
  EXPECT_TRUE(line_of("compilation.cache")
                  .starts_with("compilation.cache = { file = \"/var/kiln/cache.db\" }"));
  EXPECT_TRUE(line_of("cache.max_size").starts_with("cache.max_size = \"512MiB\""));
  EXPECT_TRUE(line_of("compilation.logger.targets").ends_with("# default"));
  EXPECT_LT(text.find("fusion.enabled"), text.find("autotune.level"));
  EXPECT_LT(text.find("autotune.level"), text.find("cache.max_size"));
}

}  // namespace
}  // namespace kiln::runtime
