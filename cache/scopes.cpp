// Where each cache scope keeps its file (DESIGN.md §8).
#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "cache/store.h"

namespace kiln::cache {
namespace fs = std::filesystem;

std::string local_scope_path(const std::string& project_root) {
  return (fs::path(project_root) / ".kiln" / "cache.sqlite").string();
}

std::string find_project_root(const std::string& start) {
  std::error_code ec;
  fs::path dir = fs::absolute(start, ec);
  if (ec) return start;
  for (fs::path d = dir;; d = d.parent_path()) {
    if (fs::exists(d / "kiln.toml", ec)) return d.string();
    if (d == d.parent_path()) break;
  }
  return dir.string();
}

std::string target_scope_path_in(const std::string& exe_dir, std::string_view xdg_cache_home,
                                 std::string_view home) {
  const fs::path file = fs::path(exe_dir) / "kiln-cache.sqlite";
  std::error_code ec;
  // A shipped cache is read where it is (read-only when it cannot be written); without one, the
  // app keeps what it compiles beside itself if it may, else where this user may.
  if (fs::exists(file, ec) || ::access(exe_dir.c_str(), W_OK) == 0) return file.string();
  return global_scope_path(xdg_cache_home, home);
}

std::string target_scope_path(std::string_view xdg_cache_home, std::string_view home) {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  fs::path dir = ec ? fs::current_path(ec) : exe.parent_path();
  return target_scope_path_in(dir.string(), xdg_cache_home, home);
}

std::string global_scope_path(std::string_view xdg_cache_home, std::string_view home) {
  // The XDG base directory spec: a relative XDG_CACHE_HOME is invalid and must be ignored.
  if (xdg_cache_home.starts_with('/')) return (fs::path(xdg_cache_home) / "kiln" / "cache.sqlite").string();
  std::string home_dir(home);
  if (home_dir.empty())
    if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir) home_dir = pw->pw_dir;
  if (home_dir.empty()) home_dir = fs::temp_directory_path().string();
  return (fs::path(home_dir) / ".cache" / "kiln" / "cache.sqlite").string();
}

bool is_scope_path(const std::string& path) {
  const fs::path p(path);
  const std::string name = p.filename().string(), dir = p.parent_path().filename().string();
  return name == "kiln-cache.sqlite" ||
         (name == "cache.sqlite" && (dir == "kiln" || dir == ".kiln"));
}

}  // namespace kiln::cache
