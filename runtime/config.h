// kiln.toml (DESIGN.md §10): found upward from the working directory (or KILN_CONFIG=<path>),
// read once with toml++, every key overridable by KILN_<SECTION>_<KEY> (nested tables joined with
// '_', upper case: KILN_FUSION_BEAM_SEARCH_MAX_BLOCKS). Only runtime/ reads it; other layers get
// plain option structs built from it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "passes/pipeline.h"
#include "kiln/error.h"

namespace kiln::runtime {

// `stdout`, `stderr`, `log` (the embedding program's callback), or { file = "path" }.
struct LogTarget {
  std::string kind;  // stdout | stderr | log | file
  std::string path;  // for file
  bool operator==(const LogTarget&) const = default;
};

struct LoggerConfig {
  std::string level;  // per component: see Config
  std::vector<LogTarget> targets;
};

// local | target | global | none (no persistent cache) | { file = "path" }
struct CacheScope {
  std::string kind = "target";
  std::string path;  // for file
};

struct Config {
  bool fusion_enabled = true;                                   // [fusion] enabled
  int max_blocks = 5;                                           // [fusion.beam_search] max_blocks
  int beam_width = 4;                                           // [fusion.beam_search] beam_width
  LoggerConfig fusion_logger{"basic", {{"stderr", ""}}};        // disabled | basic | verbose
  // [autotune] enabled: every kernel a device compiles is tuned (once per machine: decisions are
  // kept in the cache); false runs the default schedules, or tuned ones a warm cache holds.
  bool autotune_enabled = true;
  std::string autotune_level = "balanced";                      // minimal | balanced | extensive | full
  CacheScope autotune_cache;                                    // [autotune] cache
  LoggerConfig autotune_logger{"minimal", {{"stderr", ""}}};    // disabled | minimal | full
  std::string check_mode = "auto";                              // enforce | validate | auto
  // [compilation] verify_ir: the IR verifier after every lowering step (passes/pipeline.h);
  // on by default in debug builds.
  bool verify_ir = passes::kVerifyIrByDefault;
  CacheScope compilation_cache;                                 // [compilation] cache
  std::string cpu_target = "native";                            // native | x86-64-v3 | v4 | CPU
  std::string matmul_precision = "highest";                     // highest | high (tensor cores)
  LoggerConfig compilation_logger{"minimal", {{"stderr", ""}}}; // disabled | minimal | full
  int max_streams = 8;                                          // [streaming] max_streams
  std::string persistent_memory = "enabled";                    // enabled | disabled | enforced
  // [shapes] (docs/dynamic-shapes.md): which kernels take their outer size at run time.
  std::string shapes_policy = "automatic";                      // static | dynamic | automatic
  bool shapes_buckets = false;                                  // one kernel per power-of-two bucket
  double shapes_max_slowdown = 1.1;  // automatic, tuned: general / specialized time kept at most
  // [cache] (kiln's addition for issue 4): the store behind every cache scope.
  std::string cache_max_size = "2GiB";                          // size cap, LRU eviction
  bool cache_read_only = false;                                 // shipped caches
  LoggerConfig cache_logger{"minimal", {{"stderr", ""}}};       // disabled | minimal | verbose
  LoggerConfig memory_logger{"disabled", {{"stderr", ""}}};     // disabled | minimal | verbose

  // From the environment only: KILN_DUMP (every plan build writes its IR after every step there:
  // runtime/dump_writer.h) and KILN_RECORD (each realized graph is recorded there for kiln warm);
  // "" = off.
  std::string dump_dir;
  std::string record_dir;
  // From the environment only, read here so that no layer below reads it: KILN_NUM_THREADS (the
  // cpu's threads; 0 = every core), KILN_CPU_RATES and KILN_GPU_RATES (measured | reference: the
  // cost model's rates, runtime/target.h RatesSource) and KILN_NVRTC_LIBRARY (the libnvrtc to
  // load first; "" = the loader's path, then /usr/local/cuda) and CUDA_HOME.
  int num_threads = 0;
  std::string cpu_rates = "measured";
  std::string gpu_rates = "measured";
  std::string nvrtc_library;
  std::string cuda_home;  // CUDA_HOME: another toolkit whose lib64 holds libnvrtc
  // XDG_CACHE_HOME and HOME: where the global cache scope is (cache::global_scope_path).
  std::string xdg_cache_home;
  std::string home;

  std::string file;  // the kiln.toml read ("" when none)
  std::string project_root;  // its directory, else the working directory
  // Where each effective value came from: "kiln.toml:12", "env KILN_AUTOTUNE_LEVEL", "default".
  std::map<std::string, std::string> sources;  // keyed by dotted key, e.g. "autotune.level"
};

// Loads the configuration. Errors name the file, line and the allowed values
// ("kiln.toml:4:9: error: autotune.level: expected one of minimal, balanced, extensive, full,
// got \"fast\""); unknown keys produce warnings naming the closest valid key
// ("kiln.toml:7:1: warning: unknown key fusion.beam_search.max_block (did you mean
// fusion.beam_search.max_blocks?)"). Environment overrides win over the file; their errors name the
// variable ("env KILN_AUTOTUNE_LEVEL: error: autotune.level: ..."). Relative file paths (cache
// scopes, logger files) resolve against the project root.
struct LoadedConfig {
  Config config;
  std::vector<std::string> warnings;
};
Expected<LoadedConfig> load_config(const std::string& working_dir);
// Same, from explicit text (tests): `file` names it in messages; env overrides still apply.
Expected<LoadedConfig> parse_config(const std::string& text, const std::string& file);

// The configuration of kiln's defaults alone: no kiln.toml, no environment (the API's devices
// without use_config); relative paths in later settings resolve against `project_root`.
Config default_config(const std::string& project_root);
// One setting given by an embedder (kiln::Options, kiln_options_set): a kiln.toml key and its
// value as text, read as the key's environment variable would be ("file=PATH" a file table,
// "stdout,log" a list of targets), or "threads" (the cpu's threads, 0 = every core). Errors name
// the key and the values it takes; an unknown key names the closest one.
Expected<void> apply_setting(Config& c, const std::string& key, const std::string& value);
// Whether an environment variable is in the config override namespace (KILN_<SECTION>_...): one
// that names no key is a likely typo. KILN_CONFIG, KILN_DUMP, KILN_NUM_THREADS, KILN_CPU_RATES
// and the like are not.
bool looks_like_config_variable(std::string_view name);

// `kiln config`: every key with its effective value and source, one per line, in a fixed order.
std::string print_config(const Config& c);

// A [cache] max_size in bytes: "2GiB", "512MiB", "100MB", "64KiB", "4096" (bytes).
Expected<std::uint64_t> parse_byte_size(const std::string& text);

// The one rule for where a cache scope's store is (DESIGN.md §8), for the library, `kiln run`,
// `kiln warm` and `kiln cache` alike: local beside kiln.toml, target beside the executable,
// global under XDG_CACHE_HOME (as the configuration read it), file as given; "" for none.
std::string cache_scope_path(const CacheScope& scope, const Config& config);
// "local", "target", "global", "none" or "file=PATH" (a --cache option) -> the scope.
Expected<CacheScope> parse_cache_scope(std::string_view text);

}  // namespace kiln::runtime
