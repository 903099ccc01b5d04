// The HTML dump's pieces: layered layout (longest path from the inputs) and escaping.
#include <gtest/gtest.h>

#include "tools/dump_html.h"
#include "tools/dump_layout.h"

namespace kiln::tools {
namespace {

DumpGraph diamond() {
  // in -> a -> b -> c, and in -> c directly: c's layer is its longest path (3), not 1.
  DumpGraph g;
  for (const char* id : {"in1", "k0_n2", "k0_n3", "k1_n4", "k1_n5"})
    g.nodes.push_back({id, std::string("%") + id, "add", "f32[4]", id[0] == 'i' ? -1 : id[1] - '0', false});
  g.edges = {{0, 1, "", true}, {1, 2, "", false}, {2, 3, "", true}, {0, 3, "", true}, {0, 4, "", true}};
  return g;
}

TEST(DumpLayout, LayerIsLongestPathFromInputs) {
  Layout l = layered_layout(diamond());
  EXPECT_EQ(l.layer, (std::vector<int>{0, 1, 2, 3, 1}));
  // Same layer: side by side, ordered by kernel, never overlapping.
  EXPECT_EQ(l.y[1], l.y[4]);
  EXPECT_GE(l.x[4] - l.x[1], Layout::kBoxWidth);
  EXPECT_LT(l.y[2], l.y[3]);
  EXPECT_GE(l.width, l.x[4] + Layout::kBoxWidth);
  EXPECT_GE(l.height, l.y[3] + Layout::kBoxHeight);
}

TEST(DumpLayout, EmptyGraphHasOnlyMargins) {
  Layout l = layered_layout(DumpGraph{});
  EXPECT_EQ(l.width, 2 * Layout::kMargin);
  EXPECT_EQ(l.height, 2 * Layout::kMargin);
}

TEST(DumpHtml, EscapesMarkupAndQuotes) {
  EXPECT_EQ(html_escape("<a href='x'>&\"</a>"), "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;");
  EXPECT_EQ(html_escape("plain %t1 = add"), "plain %t1 = add");
}

}  // namespace
}  // namespace kiln::tools
