// Many processes on one cache file at once: every write and read succeeds, a corrupt file is
// moved aside once, and nothing committed is lost, even by a process killed mid-write.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <regex>
#include <thread>

#include "tests/cache/temp_dir.h"

namespace kiln::cache {
namespace {

using testing::entry;
using testing::kernel_key;
using testing::value_text;

constexpr int kProcesses = 16;
constexpr int kKeysEach = 20;

// Forks `n` children that all start `work(id)` at the same moment; returns their exit codes.
std::vector<int> run_at_once(int n, const std::function<int(int)>& work) {
  int gate[2];
  EXPECT_EQ(::pipe(gate), 0);
  std::vector<pid_t> children;
  for (int id = 0; id < n; ++id) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(gate[1]);
      char c;
      while (::read(gate[0], &c, 1) > 0) {
      }
      ::_exit(work(id));  // skip gtest's and static destructors in the child
    }
    EXPECT_GT(pid, 0);
    children.push_back(pid);
  }
  ::close(gate[0]);
  ::close(gate[1]);  // opens the gate
  std::vector<int> codes;
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  return codes;
}

std::string own_key(int id, int i) {
  return "p" + std::to_string(id) + "_" + std::to_string(i);
}

// A child's work: shared keys (every process writes the same value) and its own keys.
int share_work(const std::string& file, int id) {
  std::vector<std::string> warnings;
  auto store = Store::open(file, {.warn = [&](const std::string& w) { warnings.push_back(w); }});
  if (!store) return 2;
  for (int i = 0; i < kKeysEach; ++i) {
    std::string shared = "shared" + std::to_string(i), own = own_key(id, i);
    if (!(*store)->put(Table::kernels, kernel_key(shared), entry("value of " + shared))) return 3;
    if (!(*store)->put(Table::plans, kernel_key(own), entry("value of " + own))) return 4;
    auto a = (*store)->get(Table::kernels, kernel_key(shared));
    auto b = (*store)->get(Table::plans, kernel_key(own));
    if (!a || value_text(*a) != "value of " + shared) return 5;
    if (!b || value_text(*b) != "value of " + own) return 6;
  }
  return warnings.empty() ? 0 : 7;
}

class ConcurrencyTest : public testing::TempDirTest {};

TEST_F(ConcurrencyTest, SixteenProcessesShareOneNewFile) {
  std::string file = path("cache.sqlite");
  auto codes = run_at_once(kProcesses, [&](int id) { return share_work(file, id); });
  EXPECT_EQ(codes, std::vector<int>(kProcesses, 0)) << "see share_work's exit codes";
  auto store = Store::open(file);
  ASSERT_TRUE(store.has_value());
  auto verified = (*store)->verify();
  EXPECT_TRUE(verified.has_value()) << verified.error().message;
  Stats s = (*store)->stats();
  EXPECT_EQ(s.kernels, kKeysEach);
  EXPECT_EQ(s.plans, kProcesses * kKeysEach);
  for (int id = 0; id < kProcesses; ++id)
    for (int i = 0; i < kKeysEach; ++i)
      EXPECT_TRUE((*store)->get(Table::plans, kernel_key(own_key(id, i)))) << own_key(id, i);
}

TEST_F(ConcurrencyTest, ThreadsShareOneStore) {
  auto store = Store::open(path("cache.sqlite"));
  ASSERT_TRUE(store.has_value());
  std::atomic<int> failures = 0;
  std::vector<std::thread> threads;
  for (int id = 0; id < 4; ++id)
    threads.emplace_back([&, id] {
      for (int i = 0; i < kKeysEach; ++i) {
        failures += !(*store)->put(Table::kernels, kernel_key(own_key(id, i)), entry("v"));
        failures += !(*store)->get(Table::kernels, kernel_key(own_key(id, i))).has_value();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ((*store)->stats().kernels, 4 * kKeysEach);
}

TEST_F(ConcurrencyTest, ACorruptFileOpenedByManyIsMovedAsideOnce) {
  std::string file = path("kiln-cache.sqlite");  // a scope's path: garbage there was a cache
  std::ofstream(file, std::ios::binary) << std::string(20000, '\x7e');
  // Exit code: the number of warnings the child saw (0 or 1), 10 + n on a failed write.
  auto codes = run_at_once(8, [&](int id) {
    int warnings = 0;
    auto store = Store::open(file, {.warn = [&](const std::string&) { ++warnings; }});
    if (!(*store)->put(Table::kernels, kernel_key(own_key(id, 0)), entry("v")))
      return 10 + warnings;
    return warnings;
  });
  int total = 0;
  for (int code : codes) {
    EXPECT_LE(code, 1);
    total += code;
  }
  EXPECT_EQ(total, 1);
  int aside = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_))
    aside += std::regex_match(e.path().filename().string(),
                              std::regex(R"(kiln-cache\.sqlite\.corrupt-\d+(-\d+)?)"));
  EXPECT_EQ(aside, 1);
  auto store = Store::open(file);
  EXPECT_EQ((*store)->stats().kernels, 8);
}

TEST_F(ConcurrencyTest, AProcessKilledMidWriteLosesNothingCommitted) {
  std::string file = path("cache.sqlite");
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(report[0]);
    auto store = Store::open(file);
    for (int i = 0;; ++i) {  // writes until killed, telling the parent each committed key
      if (!(*store)->put(Table::kernels, kernel_key(own_key(0, i)), entry(std::string(2000, 'k'))))
        ::_exit(3);
      if (::write(report[1], &i, sizeof i) != sizeof i) ::_exit(4);
    }
  }
  ::close(report[1]);
  int committed = -1;
  for (int i; committed < 200 && ::read(report[0], &i, sizeof i) == sizeof i;) committed = i;
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ::close(report[0]);
  ASSERT_GE(committed, 200);
  std::vector<std::string> warnings;
  auto store = Store::open(file, {.warn = [&](const std::string& w) { warnings.push_back(w); }});
  EXPECT_TRUE(warnings.empty());
  for (int i = 0; i <= committed; ++i)
    ASSERT_TRUE((*store)->get(Table::kernels, kernel_key(own_key(0, i)))) << own_key(0, i);
  EXPECT_TRUE((*store)->verify().has_value());
}

}  // namespace
}  // namespace kiln::cache
