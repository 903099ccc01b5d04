// The `kiln` subcommands: options structs and entry points (exit codes: 0 ok, 1 error).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/kg.h"
#include "runtime/device.h"
#include "tools/graph_inputs.h"

namespace CLI {
class App;
}

namespace kiln::tools {

// The fuser choice of `kiln run` and `kiln dump`.
struct FuserFlags {
  std::string fuser = "beam";     // beam | greedy (beam with 1 block, width 1) | first
  bool fuser_given = false;       // --fuser was on the command line (else kiln.toml decides)
  std::optional<int> max_blocks;  // beam only; default passes::BeamOptions
  std::optional<int> beam_width;
};
// The beam options the flags select (greedy: 1 block, width 1); an error when a beam-only
// flag is given with another fuser.
Expected<passes::BeamOptions> beam_options(const FuserFlags& flags);

struct RunOptions {
  std::string graph_path;
  InputSpec inputs;
  ir::KgSizes sizes;  // --dim NAME=N: the sizes of the graph's size symbols (`?b`)
  std::string device = "cpu";
  std::string out_dir;     // empty: print a summary of each output instead of writing files
  bool stats = false;
  std::string stats_json;  // empty: none
  int repeat = 1;          // run_ms is the median over this many runs
  bool autotune = false;   // --autotune: tune every kernel at kiln.toml's autotune.level
  bool no_autotune = false;  // --no-autotune; neither: kiln.toml's autotune.enabled (default on)
  FuserFlags fusion;
};
int run_command(const RunOptions& options);

// Whether a command tunes: --autotune, --no-autotune, else what kiln.toml (autotune.enabled) says.
inline bool autotune_from(bool on, bool off, bool configured) { return on || (!off && configured); }
// --autotune and --no-autotune on `cmd`, excluding each other.
void add_autotune_flags(CLI::App* cmd, bool& on, bool& off, const std::string& on_help);

struct DumpOptions {
  std::string graph_path;
  ir::KgSizes sizes;  // --dim NAME=N (as kiln run)
  std::string stage = "kernels";  // graph | groups | kernels | source (llvm: an alias of source)
  bool stage_given = false;       // --stage was on the command line
  bool why = false;               // groups: list why each kernel boundary did not fuse
  FuserFlags fusion;
  std::string rates;  // measured | reference; "": as `kiln run` (KILN_CPU_RATES, KILN_GPU_RATES)
  std::string format = "text";      // text | dot | html
  std::string output;               // empty: stdout
  std::string target = "cpu";       // cpu | cuda | vulkan: whose kernels `source` shows
  std::string arch = "sm_90";       // cuda: the architecture of ptx (no GPU needed)
  bool arch_given = false;
  std::string out_dir;              // one file per kernel (.ll / .cu .ptx .cubin / .comp .spv)
  bool autotune = false;            // the schedules a tuning `kiln run` runs (tuning what has none)
  bool no_autotune = false;         // the default schedules; neither: autotune.enabled
  bool measure = false;             // groups: run the plan (random inputs), each kernel's time
  int repeat = 5;                   // --measure: runs, the median kept
};
int dump_command(const DumpOptions& options);

// `kiln devices`: every device with its properties, and why an absent one is absent.
int devices_command();

// `kiln config`: prints the configuration found from the working directory, or its error.
int config_command();

// `kiln cache ACTION [ARG]`: inspects or maintains a kernel cache store (DESIGN.md §8).
struct CacheOptions {
  // stats | list | show | explain | prune | verify | export | import | clear
  std::string action;
  std::string argument;          // show: the KEY; export, import: the FILE
  std::string scope;  // local | target | global | file=PATH; empty: kiln.toml's compilation.cache
  std::string max_size;          // prune: the cap (512MiB, 2GiB, 1000000); empty: 2GiB
  std::string key_parts;         // explain: a JSON file of [name, value] pairs
  std::string table = "kernels"; // explain: kernels | plans | autotune
  // export --for: only the entries a run of these graphs reads (.kg files and KILN_RECORD
  // directories) on the target, as `kiln warm` compiles them; empty: the whole cache.
  std::vector<std::string> for_paths;
  std::string target = "cpu";  // cpu | cuda | vulkan (vulkan:0)
  bool target_given = false;
  std::string arch = "sm_90";  // cuda
  bool arch_given = false;
  bool autotune = false;       // the tuned plans, kernels and decisions of `kiln warm --autotune`
  bool no_autotune = false;    // the untuned ones; neither: autotune.enabled
};
int cache_command(const CacheOptions& options);

// `kiln warm PATH...`: compiles every kernel and stores every plan (any target) of .kg graphs or
// KILN_RECORD directories into a kernel cache; --check lists what would miss instead.
struct WarmOptions {
  std::vector<std::string> paths;
  std::string target = "cpu";  // cpu | cuda | vulkan (vulkan:0)
  std::string arch = "sm_90";  // cuda
  bool arch_given = false;
  std::string scope;           // local | target | global | file=PATH; empty: kiln.toml's
  bool check = false;
  bool autotune = false;
  bool no_autotune = false;  // neither: kiln.toml's autotune.enabled
  int jobs = 1;
  // --dim NAME=N or NAME=LO..HI: the sizes of a size symbol ?NAME to warm (parse_warm_dim).
  std::map<std::string, std::pair<int64_t, int64_t>> dims;
};
int warm_command(const WarmOptions& options);
// Parses `kiln warm --dim` "NAME=N" (a leading '?' on NAME allowed) as N..N, or "NAME=LO..HI"
// (0 <= LO <= HI), into `dims`.
Expected<void> parse_warm_dim(const std::string& arg,
                              std::map<std::string, std::pair<int64_t, int64_t>>& dims);
// The sizes `kiln warm --dim NAME=LO..HI` warms, in order: for each power-of-two bucket
// (2^(k-1), 2^k] that meets [LO, HI], its largest size in the range, then the one below it when
// that is in the bucket and the range too and at least 2 (two sizes of a bucket make its
// symbolic plan). A single size N warms N and a second size in its bucket (N + 1, or N - 1 at
// the bucket's top; 3 for N <= 2).
std::vector<int64_t> warm_sizes(int64_t lo, int64_t hi);

// --cache SCOPE (local | target | global | file=PATH) -> the store's path; an empty SCOPE is the
// configuration's compilation.cache, the store `kiln run` uses (an error when that is none).
Expected<std::string> cache_scope_path(const std::string& scope);

// Prints "kiln: error: MESSAGE" (MESSAGE as is when it already carries a location) and returns 1.
int report_error(const std::string& message);

}  // namespace kiln::tools
