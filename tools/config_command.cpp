// `kiln config`: the effective kiln.toml configuration, each key with where its value came from.
#include <fmt/format.h>

#include <filesystem>

#include "runtime/config.h"
#include "tools/commands.h"

namespace kiln::tools {

int config_command() {
  auto loaded = runtime::load_config(std::filesystem::current_path().string());
  if (!loaded) return report_error(loaded.error().message);
  for (const std::string& warning : loaded->warnings) fmt::print(stderr, "{}\n", warning);
  fmt::print("{}", runtime::print_config(loaded->config));
  return 0;
}

}  // namespace kiln::tools
