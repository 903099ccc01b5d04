// Golden files: `kiln dump --stage groups --why --rates reference` of every examples/*.kg against
// tests/golden/<name>.groups.txt. scripts/regen-golden.sh rewrites them after an intended change.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tests/dump/run_kiln.h"

namespace kiln::dump_test {
namespace {

namespace fs = std::filesystem;

const fs::path kExamples = fs::path(KILN_SOURCE_DIR) / "examples";
const fs::path kGolden = fs::path(KILN_SOURCE_DIR) / "tests" / "golden";

std::vector<std::string> example_names() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(kExamples))
    if (e.path().extension() == ".kg") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string regen_hint() {
  fs::path build = fs::path(KILN_BINARY).parent_path().parent_path();
  return "If the change is intended, regenerate the golden files with\n    " +
         (fs::path(KILN_SOURCE_DIR) / "scripts" / "regen-golden.sh").string() + " " + build.string() +
         "\nand review `git diff tests/golden`.";
}

// "line N: expected '...', got '...'" for the first line that differs.
std::string first_difference(const std::string& want, const std::string& got) {
  std::istringstream a(want), b(got);
  std::string la, lb;
  for (int line = 1;; ++line) {
    bool ha = static_cast<bool>(std::getline(a, la)), hb = static_cast<bool>(std::getline(b, lb));
    if (!ha && !hb) return "they differ only in the final newline";
    if (!ha || !hb || la != lb)
      return "first difference at line " + std::to_string(line) + ":\n  golden: " + (ha ? la : "<end>") +
             "\n  now:    " + (hb ? lb : "<end>");
  }
}

class GroupsGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(GroupsGolden, MatchesCheckedInFile) {
  const std::string& name = GetParam();
  fs::path golden = kGolden / (name + ".groups.txt");
  ASSERT_TRUE(fs::exists(golden)) << golden << " is missing.\n" << regen_hint();
  Result r = run_kiln("dump " + (kExamples / (name + ".kg")).string() + " --stage groups --why --rates reference",
                      "KILN_DUMP=");
  ASSERT_EQ(r.code, 0) << r.err;
  std::string want = read_text(golden);
  EXPECT_TRUE(r.out == want) << "`kiln dump examples/" << name << ".kg --stage groups --why --rates reference`"
                             << " differs from " << golden.string() << ";\n"
                             << first_difference(want, r.out) << "\n" << regen_hint();
}

INSTANTIATE_TEST_SUITE_P(Examples, GroupsGolden, ::testing::ValuesIn(example_names()),
                         [](const auto& info) { return info.param; });

TEST(GroupsGoldenFiles, EveryGoldenHasItsExample) {
  std::vector<std::string> names = example_names();
  std::set<std::string> examples(names.begin(), names.end());
  for (const auto& e : fs::directory_iterator(kGolden)) {
    std::string file = e.path().filename().string();
    if (!file.ends_with(".groups.txt")) continue;
    EXPECT_TRUE(examples.contains(file.substr(0, file.size() - 11)))
        << e.path() << " has no examples/*.kg; delete it.\n" << regen_hint();
  }
}

}  // namespace
}  // namespace kiln::dump_test
