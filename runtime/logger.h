// Per-component loggers configured by kiln.toml: a level per component and where its lines go.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "runtime/config.h"

namespace kiln::runtime {

enum class LogComponent { fusion, autotune, compilation, cache, memory };

// Three steps shared by every component; each component names them its own way in kiln.toml:
// fusion disabled | basic | verbose, autotune and compilation disabled | minimal | full,
// cache and memory disabled | minimal | verbose. `minimal` is the second step, `verbose` the third.
enum class LogLevel { disabled = 0, minimal = 1, verbose = 2 };

std::string_view component_name(LogComponent c);          // "fusion", "cache", ...
std::string_view level_name(LogComponent c, LogLevel l);  // the component's name for it: "basic"

// The `log` target: the embedding program's callback, process-wide (an empty function removes
// it; lines for `log` are then dropped). Called from whichever thread logs.
using LogCallback = std::function<void(std::string_view component, std::string_view level,
                                       std::string_view message)>;
void set_log_callback(LogCallback callback);

class Logger {
 public:
  Logger() = default;  // everything disabled
  // A file target that cannot be opened is one warning on stderr per file and process; the other
  // targets still work.
  static Logger from_config(const Config& c);

  bool enabled(LogComponent c, LogLevel level) const {
    return level != LogLevel::disabled && level <= components_[index(c)].level;
  }
  // Writes "kiln[cache] message" to each of the component's targets when `level` is enabled;
  // safe to call from several threads.
  void log(LogComponent c, LogLevel level, std::string_view message) const;

  struct Sink;  // one target; files are shared by every logger that writes to them

 private:
  struct ComponentLog {
    LogLevel level = LogLevel::disabled;
    std::vector<std::shared_ptr<Sink>> sinks;
  };
  static size_t index(LogComponent c) { return static_cast<size_t>(c); }
  std::array<ComponentLog, 5> components_;
};

}  // namespace kiln::runtime
