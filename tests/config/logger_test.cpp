// Per-component loggers: levels, and the stdout, callback and file targets.
#include <gtest/gtest.h>

#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "runtime/logger.h"
#include "tests/config/config_test_env.h"

namespace kiln::runtime {
namespace {

using LoggerTest = testing_support::ScratchDir;

struct Captured {
  std::string component, level, message;
  bool operator==(const Captured&) const = default;
};

// Installs a callback that records what it is given, and removes it at the end.
class CallbackRecorder {
 public:
  CallbackRecorder() {
    set_log_callback([this](std::string_view c, std::string_view l, std::string_view m) {
      std::lock_guard lock(mutex_);
      seen_.push_back({std::string(c), std::string(l), std::string(m)});
    });
  }
  ~CallbackRecorder() { set_log_callback(nullptr); }
  std::vector<Captured> seen() {
    std::lock_guard lock(mutex_);
    return seen_;
  }

 private:
  std::mutex mutex_;
  std::vector<Captured> seen_;
};

std::vector<std::string> lines_of(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST_F(LoggerTest, LevelsFollowEachComponentsConfiguration) {
  Config c;  // defaults: fusion basic, autotune minimal, memory disabled
  c.compilation_logger.level = "full";
  c.cache_logger.level = "disabled";
  Logger logger = Logger::from_config(c);
  EXPECT_TRUE(logger.enabled(LogComponent::fusion, LogLevel::minimal));
  EXPECT_FALSE(logger.enabled(LogComponent::fusion, LogLevel::verbose));
  EXPECT_TRUE(logger.enabled(LogComponent::compilation, LogLevel::verbose));
  EXPECT_FALSE(logger.enabled(LogComponent::cache, LogLevel::minimal));
  EXPECT_FALSE(logger.enabled(LogComponent::memory, LogLevel::minimal));
  EXPECT_FALSE(logger.enabled(LogComponent::autotune, LogLevel::disabled));
  EXPECT_FALSE(Logger().enabled(LogComponent::fusion, LogLevel::minimal));
  EXPECT_EQ(level_name(LogComponent::fusion, LogLevel::minimal), "basic");
  EXPECT_EQ(level_name(LogComponent::autotune, LogLevel::verbose), "full");
  EXPECT_EQ(level_name(LogComponent::memory, LogLevel::verbose), "verbose");
}

TEST_F(LoggerTest, CallbackTargetGetsComponentLevelAndMessage) {
  CallbackRecorder recorder;
  Config c;
  c.autotune_logger = {"full", {{"log", ""}}};
  c.fusion_logger = {"basic", {{"log", ""}}};
  Logger logger = Logger::from_config(c);
  logger.log(LogComponent::autotune, LogLevel::verbose, "tried 12 tile sizes");
  logger.log(LogComponent::fusion, LogLevel::minimal, "3 groups");
  logger.log(LogComponent::fusion, LogLevel::verbose, "beam state dropped");  // above basic
  logger.log(LogComponent::memory, LogLevel::minimal, "disabled component");
  EXPECT_EQ(recorder.seen(), (std::vector<Captured>{{"autotune", "full", "tried 12 tile sizes"},
                                                    {"fusion", "basic", "3 groups"}}));
}

TEST_F(LoggerTest, StandardStreamsGetPrefixedLines) {
  Config c;
  c.cache_logger = {"minimal", {{"stdout", ""}}};
  c.memory_logger = {"verbose", {{"stderr", ""}}};
  Logger logger = Logger::from_config(c);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  logger.log(LogComponent::cache, LogLevel::minimal, "hit 4f2a");
  logger.log(LogComponent::memory, LogLevel::verbose, "pool grew to 64MiB");
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "kiln[cache] hit 4f2a\n");
  EXPECT_EQ(err, "kiln[memory] pool grew to 64MiB\n");
}

TEST_F(LoggerTest, FileTargetsAppendWholeLinesFromManyThreads) {
  auto path = dir_ / "kiln.log";
  std::ofstream(path) << "earlier line\n";
  Config c;
  c.cache_logger = {"minimal", {{"file", path.string()}}};
  c.compilation_logger = {"minimal", {{"file", path.string()}}};
  Logger logger = Logger::from_config(c);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&logger, t] {
      for (int i = 0; i < 50; ++i)
        logger.log(t % 2 ? LogComponent::cache : LogComponent::compilation, LogLevel::minimal,
                   "thread " + std::to_string(t) + " message " + std::to_string(i));
    });
  for (auto& th : threads) th.join();
  auto lines = lines_of(path);
  ASSERT_EQ(lines.size(), 201u);
  EXPECT_EQ(lines[0], "earlier line");
  int cache = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    bool is_cache = lines[i].starts_with("kiln[cache] thread ");
    EXPECT_TRUE(is_cache || lines[i].starts_with("kiln[compilation] thread ")) << lines[i];
    cache += is_cache;
  }
  EXPECT_EQ(cache, 100);
}

TEST_F(LoggerTest, AFileThatCannotBeOpenedIsOneWarningNotAnError) {
  CallbackRecorder recorder;
  auto bad = dir_ / "no_such_dir" / "x.log";
  Config c;
  c.autotune_logger = {"minimal", {{"file", bad.string()}, {"log", ""}}};
  c.compilation_logger = {"minimal", {{"file", bad.string()}}};
  ::testing::internal::CaptureStderr();
  Logger logger = Logger::from_config(c);
  Logger again = Logger::from_config(c);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "kiln: warning: autotune.logger.targets: cannot open log file " + bad.string() +
                     ": No such file or directory; its lines are dropped\n");
  logger.log(LogComponent::autotune, LogLevel::minimal, "still logged");
  EXPECT_EQ(recorder.seen(), (std::vector<Captured>{{"autotune", "minimal", "still logged"}}));
}

TEST_F(LoggerTest, LoggersFromAParsedFileWriteWhereItSays) {
  auto r =
      parse_config("[cache.logger]\nlevel = \"verbose\"\ntargets = [{ file = \"cache.log\" }]\n",
                   (dir_ / "kiln.toml").string());
  ASSERT_TRUE(r.has_value()) << r.error().message;
  Logger::from_config(r->config).log(LogComponent::cache, LogLevel::verbose, "evicted 3 entries");
  EXPECT_EQ(lines_of(dir_ / "cache.log"),
            (std::vector<std::string>{"kiln[cache] evicted 3 entries"}));
}

}  // namespace
}  // namespace kiln::runtime
