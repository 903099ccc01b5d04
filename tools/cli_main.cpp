// The `kiln` command line program: its options and subcommands (tools/main.cpp calls this).
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "tools/commands.h"
#include "tools/graph_file.h"
#include "tools/tool_main.h"

namespace kiln::tools {
int report_error(const std::string& message) {
  // Messages that carry a location ("FILE:LINE:COL: error: ...") are printed as they are.
  if (message.find(": error: ") != std::string::npos) fmt::print(stderr, "{}\n", message);
  else fmt::print(stderr, "kiln: error: {}\n", message);
  return 1;
}

void add_fuser_options(CLI::App* cmd, FuserFlags& o) {
  cmd->add_option("--fuser", o.fuser, "beam | greedy (beam, 1 block, width 1) | first")
      ->default_val("beam")
      ->check(CLI::IsMember({"beam", "greedy", "first"}));
  cmd->add_option("--max-blocks", o.max_blocks, "Beam search: open groups tracked at once")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--beam-width", o.beam_width, "Beam search: states kept per step")
      ->check(CLI::Range(1, 1000));
}

void add_dump_options(CLI::App* cmd, DumpOptions& o) {
  cmd->add_option("graph", o.graph_path, "The .kg graph file or .onnx model")->required();
  cmd->add_option("--stage", o.stage,
                  "graph | groups | kernels | analyze (what codegen is told of each kernel: matmul "
                  "pattern, row reuse, loop cuts) | source (the target's: LLVM IR, CUDA C, GLSL; "
                  "llvm: alias) | ptx (cuda) | spirv (vulkan, disassembled)")
      ->default_val("kernels")
      ->check(CLI::IsMember({"graph", "groups", "kernels", "analyze", "source", "llvm", "ptx", "spirv"}));
  cmd->add_option("--target", o.target, "cpu | cuda | vulkan: the backend whose source is shown")
      ->default_val("cpu")
      ->check(CLI::IsMember({"cpu", "cuda", "vulkan"}));
  cmd->add_option("--arch", o.arch, "cuda: the architecture to compile for, e.g. sm_80, sm_90")
      ->default_val("sm_90");
  cmd->add_option("--out-dir", o.out_dir,
                  "Write one file per kernel: .ll (cpu); .cu .ptx .cubin (cuda); .comp .spv (vulkan)");
  cmd->add_flag("--why", o.why, "With the groups: why each kernel boundary did not fuse");
  cmd->add_flag("--measure", o.measure,
                "With the groups: run the plan on the target's device (seeded random inputs) and "
                "print each kernel's estimate next to its measured time");
  cmd->add_option("--repeat", o.repeat, "--measure: runs of the plan, the median kept")
      ->default_val(5)
      ->check(CLI::Range(1, 100000));
  add_fuser_options(cmd, o.fusion);
  cmd->add_option("--rates", o.rates,
                  "Cost model rates: measured (this machine's, kept in the cache, as `kiln run` "
                  "uses) | reference (fixed). Default: KILN_CPU_RATES / KILN_GPU_RATES, else measured")
      ->check(CLI::IsMember({"reference", "measured"}));
  cmd->add_option("--format", o.format, "text | dot (Graphviz) | html (one self-contained page)")
      ->default_val("text")
      ->check(CLI::IsMember({"text", "dot", "html"}));
  cmd->add_option("-o,--output", o.output, "Write to FILE instead of stdout");
  add_autotune_flags(cmd, o.autotune, o.no_autotune,
                     "Show the kernels as a tuning `kiln run` runs them: tuned schedules from the "
                     "cache, tuning those it lacks on the device");
}
void add_autotune_flags(CLI::App* cmd, bool& on, bool& off, const std::string& on_help) {
  CLI::Option* yes = cmd->add_flag("--autotune", on,
                                   on_help + " (the default when kiln.toml's autotune.enabled is)");
  cmd->add_flag("--no-autotune", off, "Run the default schedules (or tuned ones the cache holds)")
      ->excludes(yes);
}

void add_cache_options(CLI::App* cmd, CacheOptions& o) {
  cmd->add_option("action", o.action,
                  "stats | list | show KEY | explain | prune | verify | "
                  "export FILE [--for PATH...] | import FILE | clear")
      ->required()
      ->check(CLI::IsMember(
          {"stats", "list", "show", "explain", "prune", "verify", "export", "import", "clear"}));
  cmd->add_option("argument", o.argument, "show: the KEY; export, import: the bundle FILE");
  cmd->add_option("--cache", o.scope,
                  "local | target | global | file=PATH (default: kiln.toml compilation.cache, as kiln run)");
  cmd->add_option("--max-size", o.max_size,
                  "prune: the size cap, e.g. 512MiB, 2GiB, 1000000 (default 2GiB)");
  cmd->add_option("--key-parts", o.key_parts,
                  "explain: a JSON file holding an array of [name, value] pairs");
  cmd->add_option("--table", o.table, "explain: kernels | plans | autotune")
      ->default_val("kernels")
      ->check(CLI::IsMember({"kernels", "plans", "autotune"}));
  cmd->add_option("--for", o.for_paths,
                  "export: only what runs of these .kg files or KILN_RECORD directories read");
  cmd->add_option("--target", o.target, "export --for: cpu | cuda (see --arch) | vulkan")
      ->default_val("cpu")
      ->check(CLI::IsMember({"cpu", "cuda", "vulkan"}));
  cmd->add_option("--arch", o.arch, "export --for --target cuda: the architecture, e.g. sm_90")
      ->default_val("sm_90");
  add_autotune_flags(cmd, o.autotune, o.no_autotune,
                     "export --for: what tuned runs read, decisions included");
}
}  // namespace kiln::tools

namespace {
int run_tool(int argc, char** argv);
}  // namespace

// Output that cannot be written (a full disk, a closed pipe with SIGPIPE ignored) is an error: fmt
// throws where a write fails, and buffered output fails at the last flush, which is checked.
int kiln_tool_main(int argc, char** argv) {
  int rc = 0;
  try {
    rc = run_tool(argc, argv);
  } catch (const std::system_error& e) {
    std::fprintf(stderr, "kiln: error: cannot write the output: %s\n", e.what());
    return 1;
  }
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "kiln: error: cannot write to standard output: %s\n",
                 std::strerror(errno));
    return rc == 0 ? 1 : rc;
  }
  return rc;
}

namespace {
int run_tool(int argc, char** argv) {
  using namespace kiln::tools;
  CLI::App app{"kiln: a JIT kernel compiler and graph fuser"};
  app.require_subcommand(1);

  RunOptions run;
  std::vector<std::string> input_args;
  auto* run_cmd = app.add_subcommand("run", "Run a .kg graph and write or print its outputs");
  run_cmd->add_option("graph", run.graph_path, "The .kg graph file or .onnx model")->required();
  run_cmd->add_option("--input", input_args, "NAME=PATH.npy (or an ONNX TensorProto PATH.pb) for a graph input (repeatable)");
  run_cmd->add_flag("--random-inputs", run.inputs.random, "Fill unbound inputs with seeded random data");
  run_cmd->add_option("--seed", run.inputs.seed, "Seed for --random-inputs (0 to 2^64-1)")
      ->default_val(0)
      ->check(CLI::Validator(
          [](const std::string& text) -> std::string {
            // Whole decimal digits that fit 64 bits: not -1 (wrapped) nor 2^64 (clamped).
            uint64_t v = 0;
            const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
            if (text.empty() || ec != std::errc{} || end != text.data() + text.size())
              return "expected an integer from 0 to 18446744073709551615, got '" + text + "'";
            return "";
          },
          "UINT64"));
  std::vector<std::string> run_dims, dump_dims;
  run_cmd->add_option("--dim", run_dims, "NAME=N: the size of the graph's size symbol ?NAME (repeatable)");
  run_cmd->add_option("--device", run.device, "cpu, reference, vulkan:N or cuda:N (see kiln devices)")
      ->default_val("cpu");
  run_cmd->add_option("--out", run.out_dir,
                      "Write each output %y to DIR/y.npy (characters other than letters, digits, "
                      "'_', '-' and '.' written '_')");
  run_cmd->add_flag("--stats", run.stats, "Print kernels, compile time and run time");
  run_cmd->add_option("--stats-json", run.stats_json, "Write the statistics as JSON to FILE");
  add_autotune_flags(run_cmd, run.autotune, run.no_autotune,
                     "Tune each kernel's schedule by measuring (autotune.level); kept in the cache");
  run_cmd->add_option("--repeat", run.repeat, "Run N times; run time is the median")
      ->check(CLI::Range(1, 100000));
  add_fuser_options(run_cmd, run.fusion);

  DumpOptions dump;
  auto* dump_cmd = app.add_subcommand(
      "dump", "Show how a .kg graph is optimized, fused and compiled (graph, groups, kernels, source)");
  add_dump_options(dump_cmd, dump);
  dump_cmd->add_option("--dim", dump_dims, "NAME=N: the size of the graph's size symbol ?NAME (repeatable)");

  WarmOptions warm;
  auto* warm_cmd = app.add_subcommand(
      "warm",
      "Compile the kernels of .kg graphs, .onnx models or a KILN_RECORD directory into a kernel cache (a .kg "
      "with size symbols also at a second size: its symbolic plan serves a run at any size)");
  warm_cmd->add_option("paths", warm.paths, ".kg files, .onnx models, and directories of .kg files (KILN_RECORD=DIR)")
      ->required();
  warm_cmd->add_option("--target", warm.target, "cpu | cuda (no GPU needed, see --arch) | vulkan")
      ->default_val("cpu")
      ->check(CLI::IsMember({"cpu", "cuda", "vulkan"}));
  warm_cmd->add_option("--arch", warm.arch, "cuda: the architecture, e.g. sm_80, sm_90")
      ->default_val("sm_90");
  warm_cmd->add_option("--cache", warm.scope,
                       "local | target | global | file=PATH (default: kiln.toml compilation.cache)");
  add_autotune_flags(warm_cmd, warm.autotune, warm.no_autotune,
                     "Also tune each kernel on the target device (cuda: cuda:0); the decisions go in the cache");
  warm_cmd->add_flag("--check", warm.check,
                     "Compile nothing; list every kernel or plan a run would miss (exit 1 if any)");
  std::vector<std::string> warm_dims;
  warm_cmd->add_option(
      "--dim", warm_dims,
      "NAME=N or NAME=LO..HI: warm the size symbol ?NAME at N (and a second size of its "
      "bucket), or every power-of-two bucket from LO to HI at two sizes each: the kernels "
      "and symbolic plan of each (repeatable; over several graphs, those with ?NAME)");
  warm_cmd->add_option("--jobs,-j", warm.jobs, "Graphs compiled at once")
      ->default_val(1)
      ->check(CLI::Range(1, 256));

  auto* devices_cmd =
      app.add_subcommand("devices", "List the devices kiln can run on, with their properties");

  auto* config_cmd = app.add_subcommand(
      "config", "Print the effective kiln.toml configuration and where each value came from");

  CacheOptions cache;
  auto* cache_cmd = app.add_subcommand(
      "cache", "Inspect and maintain the kernel cache: stats, list, show, explain, prune, verify, "
               "export, import, clear");
  add_cache_options(cache_cmd, cache);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // A bad option value is one "kiln: error:" line and exit code 1, like its other errors.
    if ((dump_cmd->parsed() || run_cmd->parsed() || cache_cmd->parsed() || warm_cmd->parsed()) &&
        e.get_exit_code() != 0)
      return report_error(e.what());
    return app.exit(e);
  }
  if (*cache_cmd) {
    cache.target_given = cache_cmd->count("--target") > 0;
    cache.arch_given = cache_cmd->count("--arch") > 0;
    return cache_command(cache);
  }
  if (*config_cmd) return config_command();
  if (*devices_cmd) return devices_command();
  if (*warm_cmd) {
    warm.arch_given = warm_cmd->count("--arch") > 0;
    for (const std::string& arg : warm_dims)
      if (auto ok = parse_warm_dim(arg, warm.dims); !ok) return report_error(ok.error().message);
    return warm_command(warm);
  }
  if (*run_cmd) {
    for (const std::string& arg : input_args) {
      auto parsed = parse_input_arg(arg);
      if (!parsed) return report_error(parsed.error().message);
      if (!run.inputs.files.emplace(parsed->first, parsed->second).second)
        return report_error(fmt::format("--input {} is given twice", parsed->first));
    }
    for (const std::string& arg : run_dims)
      if (auto ok = parse_dim_arg(arg, run.sizes); !ok) return report_error(ok.error().message);
    run.fusion.fuser_given = run_cmd->count("--fuser") > 0;
    return run_command(run);
  }
  for (const std::string& arg : dump_dims)
    if (auto ok = parse_dim_arg(arg, dump.sizes); !ok) return report_error(ok.error().message);
  dump.stage_given = dump_cmd->count("--stage") > 0;
  dump.fusion.fuser_given = dump_cmd->count("--fuser") > 0;
  dump.arch_given = dump_cmd->count("--arch") > 0;
  return dump_command(dump);
}
}  // namespace
