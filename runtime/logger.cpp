// Per-component loggers: levels from kiln.toml, and the stdout, stderr, callback and file sinks.
#include "runtime/logger.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "kiln/error.h"

namespace kiln::runtime {

// A stream that writes whole lines under its own lock, so lines from several threads never mix.
struct Logger::Sink {
  enum class Kind { stream, callback };
  Kind kind = Kind::stream;
  std::FILE* stream = nullptr;
  bool owned = false;  // a file this sink opened (closed with it)
  std::mutex mutex;

  ~Sink() {
    if (owned) std::fclose(stream);
  }
};

namespace {

std::mutex callback_mutex;
std::shared_ptr<const LogCallback> callback;  // replaced whole, so a caller keeps its copy alive

std::shared_ptr<const LogCallback> current_callback() {
  std::lock_guard lock(callback_mutex);
  return callback;
}

std::shared_ptr<Logger::Sink> standard_sink(std::FILE* stream) {
  auto sink = std::make_shared<Logger::Sink>();
  sink->stream = stream;
  return sink;
}

// Every logger of the process shares one sink per standard stream and per file path.
struct SinkRegistry {
  std::mutex mutex;
  std::shared_ptr<Logger::Sink> out = standard_sink(stdout);
  std::shared_ptr<Logger::Sink> err = standard_sink(stderr);
  std::shared_ptr<Logger::Sink> log = [] {
    auto sink = std::make_shared<Logger::Sink>();
    sink->kind = Logger::Sink::Kind::callback;
    return sink;
  }();
  std::map<std::string, std::weak_ptr<Logger::Sink>> files;
  std::set<std::string> warned;  // files already reported as unopenable

  static SinkRegistry& get() {
    static SinkRegistry registry;
    return registry;
  }

  std::shared_ptr<Logger::Sink> file(const std::string& path, std::string_view key) {
    std::lock_guard lock(mutex);
    if (auto open = files[path].lock()) return open;
    std::FILE* f = std::fopen(path.c_str(), "a");
    if (!f) {
      if (warned.insert(path).second)
        fmt::print(stderr,
                   "kiln: warning: {}: cannot open log file {}: {}; its lines are dropped\n", key,
                   path, std::strerror(errno));
      return nullptr;
    }
    auto sink = std::make_shared<Logger::Sink>();
    sink->stream = f;
    sink->owned = true;
    files[path] = sink;
    return sink;
  }

  std::shared_ptr<Logger::Sink> target(const LogTarget& t, std::string_view key) {
    if (t.kind == "stdout") return out;
    if (t.kind == "stderr") return err;
    if (t.kind == "log") return log;
    KILN_CHECK(t.kind == "file") << "unknown log target kind " << t.kind;
    return file(t.path, key);
  }
};

struct ComponentConfig {
  LogComponent component;
  const LoggerConfig* logger;
  const char* key;  // where kiln.toml sets it, for the file warning
};

LogLevel parse_level(LogComponent c, const std::string& name) {
  for (LogLevel l : {LogLevel::disabled, LogLevel::minimal, LogLevel::verbose})
    if (level_name(c, l) == name) return l;
  KILN_CHECK(false) << "logger level " << name << " of " << component_name(c)
                    << " was not checked by load_config";
  return LogLevel::disabled;
}

}  // namespace

std::string_view component_name(LogComponent c) {
  static constexpr std::array<std::string_view, 5> kNames = {"fusion", "autotune", "compilation",
                                                             "cache", "memory"};
  return kNames[static_cast<size_t>(c)];
}

std::string_view level_name(LogComponent c, LogLevel l) {
  if (l == LogLevel::disabled) return "disabled";
  if (l == LogLevel::minimal) return c == LogComponent::fusion ? "basic" : "minimal";
  bool full = c == LogComponent::autotune || c == LogComponent::compilation;
  return full ? "full" : "verbose";
}

void set_log_callback(LogCallback cb) {
  auto next = cb ? std::make_shared<const LogCallback>(std::move(cb)) : nullptr;
  std::lock_guard lock(callback_mutex);
  callback = std::move(next);
}

Logger Logger::from_config(const Config& c) {
  const ComponentConfig all[] = {
      {LogComponent::fusion, &c.fusion_logger, "fusion.beam_search.logger.targets"},
      {LogComponent::autotune, &c.autotune_logger, "autotune.logger.targets"},
      {LogComponent::compilation, &c.compilation_logger, "compilation.logger.targets"},
      {LogComponent::cache, &c.cache_logger, "cache.logger.targets"},
      {LogComponent::memory, &c.memory_logger, "memory.logger.targets"}};
  Logger logger;
  for (const ComponentConfig& cc : all) {
    ComponentLog& log = logger.components_[index(cc.component)];
    log.level = parse_level(cc.component, cc.logger->level);
    if (log.level == LogLevel::disabled) continue;  // opens no file it would never write
    for (const LogTarget& t : cc.logger->targets)
      if (auto sink = SinkRegistry::get().target(t, cc.key)) log.sinks.push_back(std::move(sink));
  }
  return logger;
}

void Logger::log(LogComponent c, LogLevel level, std::string_view message) const {
  if (!enabled(c, level)) return;
  std::string line = fmt::format("kiln[{}] {}\n", component_name(c), message);
  for (const auto& sink : components_[index(c)].sinks) {
    if (sink->kind == Sink::Kind::callback) {
      if (auto cb = current_callback()) (*cb)(component_name(c), level_name(c, level), message);
      continue;
    }
    std::lock_guard lock(sink->mutex);
    std::fwrite(line.data(), 1, line.size(), sink->stream);
    std::fflush(sink->stream);  // a crash must not lose the lines before it
  }
}

}  // namespace kiln::runtime
