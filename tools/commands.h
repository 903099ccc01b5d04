// The `kiln` subcommands: options structs and entry points (exit codes: 0 ok, 1 error).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/graph_inputs.h"

namespace kiln::tools {

struct RunOptions {
  std::string graph_path;
  InputSpec inputs;
  std::string device = "cpu";
  std::string out_dir;     // empty: print a summary of each output instead of writing files
  bool stats = false;
  std::string stats_json;  // empty: none
  int repeat = 1;          // run_ms is the median over this many runs
};
int run_command(const RunOptions& options);

struct DumpOptions {
  std::string graph_path;
  std::string stage = "kernels";  // graph | kernels | llvm
};
int dump_command(const DumpOptions& options);

// Prints "kiln: error: MESSAGE" (MESSAGE as is when it already carries a location) and returns 1.
int report_error(const std::string& message);

}  // namespace kiln::tools
