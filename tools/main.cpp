// The `kiln` command line program.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "tools/commands.h"

namespace kiln::tools {
int report_error(const std::string& message) {
  // Messages that carry a location ("FILE:LINE:COL: error: ...") are printed as they are.
  if (message.find(": error: ") != std::string::npos) fmt::print(stderr, "{}\n", message);
  else fmt::print(stderr, "kiln: error: {}\n", message);
  return 1;
}
}  // namespace kiln::tools

int main(int argc, char** argv) {
  using namespace kiln::tools;
  CLI::App app{"kiln: a JIT kernel compiler and graph fuser"};
  app.require_subcommand(1);

  RunOptions run;
  std::vector<std::string> input_args;
  auto* run_cmd = app.add_subcommand("run", "Run a .kg graph and write or print its outputs");
  run_cmd->add_option("graph", run.graph_path, "The .kg graph file")->required();
  run_cmd->add_option("--input", input_args, "NAME=PATH.npy for a graph input (repeatable)");
  run_cmd->add_flag("--random-inputs", run.inputs.random, "Fill unbound inputs with seeded random data");
  run_cmd->add_option("--seed", run.inputs.seed, "Seed for --random-inputs")->default_val(0);
  run_cmd->add_option("--device", run.device, "cpu or reference")->default_val("cpu");
  run_cmd->add_option("--out", run.out_dir, "Write each output %y to DIR/y.npy");
  run_cmd->add_flag("--stats", run.stats, "Print kernels, compile time and run time");
  run_cmd->add_option("--stats-json", run.stats_json, "Write the statistics as JSON to FILE");
  run_cmd->add_option("--repeat", run.repeat, "Run N times; run time is the median")
      ->check(CLI::Range(1, 100000));

  DumpOptions dump;
  auto* dump_cmd = app.add_subcommand("dump", "Print the optimized graph, kernel IR or LLVM IR");
  dump_cmd->add_option("graph", dump.graph_path, "The .kg graph file")->required();
  dump_cmd->add_option("--stage", dump.stage, "graph | kernels | llvm")->default_val("kernels");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (*run_cmd) {
    for (const std::string& arg : input_args) {
      auto parsed = parse_input_arg(arg);
      if (!parsed) return report_error(parsed.error().message);
      if (!run.inputs.files.emplace(parsed->first, parsed->second).second)
        return report_error(fmt::format("--input {} is given twice", parsed->first));
    }
    return run_command(run);
  }
  return dump_command(dump);
}
