// Running a shell command from a test, as a user would run the `kiln` program.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace kiln::testing {

struct CommandResult {
  int code;         // exit status; -1 when the command did not exit normally
  std::string out;  // what it wrote to stdout (append " 2>&1" to the command for stderr too)
};

inline CommandResult run_shell(const std::string& command) {
  FILE* p = popen(command.c_str(), "r");
  if (!p) return {-1, ""};
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace kiln::testing
