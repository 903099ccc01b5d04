// Size symbols in `.kg` (DESIGN.md §4, docs/dynamic-shapes.md): `?b=N` and `?b` in an input's
// type mark a dynamic dimension; the reader's caller may size them; attribute lists read them.
#include "tests/ir/ir_test_support.h"

namespace kiln::ir {
namespace {

const std::string kMlp =
    "kiln.graph v1\n"
    "input %x : f32[?b=4,6]\n"
    "input %w : f32[6,3]\n"
    "input %t : f32[?b,3]\n"
    "%y = matmul(%x, %w)\n"
    "%z = add(%y, %t)\n"
    "%r = reshape(%z, shape=[?b,3,1])\n"
    "output %r\n";

TEST(KgSymbols, AnInputDimensionTakesTheSymbolsSize) {
  Graph g;
  auto kg = read_kg(g, kMlp, "m.kg");
  ASSERT_TRUE(kg.has_value()) << kg.error().message;
  EXPECT_EQ(kg->inputs[0].second->shape, (Shape{4, 6}));
  EXPECT_EQ(kg->inputs[2].second->shape, (Shape{4, 3}));
  EXPECT_EQ(kg->outputs[0].second->shape, (Shape{4, 3, 1}));
  EXPECT_EQ(input_symbols(*kg->inputs[0].second), (std::vector<std::string>{"b", ""}));
  EXPECT_EQ(input_symbols(*kg->inputs[1].second), (std::vector<std::string>{"", ""}));
  EXPECT_EQ(kg->sizes, (std::vector<std::pair<std::string, int64_t>>{{"b", 4}}));
}

TEST(KgSymbols, TheCallersSizeWins) {
  Graph g;
  const KgSizes sizes{{"b", 9}};
  auto kg = read_kg(g, kMlp, "m.kg", &sizes);
  ASSERT_TRUE(kg.has_value()) << kg.error().message;
  EXPECT_EQ(kg->inputs[0].second->shape, (Shape{9, 6}));
  EXPECT_EQ(kg->outputs[0].second->shape, (Shape{9, 3, 1}));
}

TEST(KgSymbols, PrintingKeepsTheSymbols) {
  Graph g;
  auto kg = read_kg(g, kMlp, "m.kg");
  ASSERT_TRUE(kg.has_value());
  const std::string text = print_kg(*kg);
  EXPECT_NE(text.find("input %x : f32[?b=4,6]"), std::string::npos) << text;
  EXPECT_NE(text.find("input %t : f32[?b,3]"), std::string::npos) << text;
  Graph g2;
  auto again = read_kg(g2, text, "again.kg");
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ(print_kg(*again), text);
}

std::string read_error(const std::string& body, const KgSizes* sizes = nullptr) {
  Graph g;
  auto r = read_kg(g, "kiln.graph v1\n" + body, "s.kg", sizes);
  EXPECT_FALSE(r.has_value()) << body;
  return r ? "<no error>" : r.error().message;
}

TEST(KgSymbols, ErrorsSayWhatAndWhere) {
  EXPECT_EQ(read_error("input %x : f32[?b,3]\noutput %x\n"),
            "s.kg:2:16: error: size symbol '?b' has no size: write '?b=N' in the file, or give it "
            "when reading (kiln run --dim b=N)");
  EXPECT_EQ(read_error("input %x : f32[?b=2,3]\ninput %y : f32[?b=5]\noutput %x\n"),
            "s.kg:3:16: error: size symbol '?b' is 5 here but 2 where it was first given");
  EXPECT_EQ(read_error("input %x : f32[2,3]\n%y = reshape(%x, shape=[?n,3])\noutput %y\n"),
            "s.kg:3:25: error: size symbol '?n' is not defined (an input's type defines it, as in "
            "'input %x : f32[?n,64]')");
  EXPECT_EQ(read_error("input %x : f32[?3,3]\noutput %x\n"),
            "s.kg:2:17: error: expected a size symbol's name after '?', got '3'");
  EXPECT_EQ(read_error("input %x : f32[?b=-1,3]\noutput %x\n"),
            "s.kg:2:19: error: expected the size of '?b', a non-negative integer, got '-1'");
}

}  // namespace
}  // namespace kiln::ir
