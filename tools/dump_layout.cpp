// layered_layout: longest-path layering (Kahn order) and row packing.
#include "tools/dump_layout.h"

#include <algorithm>
#include <deque>
#include <tuple>

#include "kiln/error.h"

namespace kiln::tools {

Layout layered_layout(const DumpGraph& graph) {
  size_t n = graph.nodes.size();
  Layout out;
  out.layer.assign(n, 0);
  std::vector<std::vector<int>> next(n);
  std::vector<int> pending(n, 0);
  for (const DumpEdge& e : graph.edges) {
    next[e.from].push_back(e.to);
    ++pending[e.to];
  }
  std::deque<int> ready;
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push_back(static_cast<int>(i));
  size_t visited = 0;
  while (!ready.empty()) {
    int i = ready.front();
    ready.pop_front();
    ++visited;
    for (int j : next[i]) {
      out.layer[j] = std::max(out.layer[j], out.layer[i] + 1);
      if (--pending[j] == 0) ready.push_back(j);
    }
  }
  KILN_CHECK(visited == n) << "the fused graph of a dump has a cycle";

  std::vector<int> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return std::tuple(out.layer[a], graph.nodes[a].kernel, a) <
           std::tuple(out.layer[b], graph.nodes[b].kernel, b);
  });
  out.x.assign(n, 0);
  out.y.assign(n, 0);
  int row = -1, column = 0, widest = 0;
  for (int i : order) {
    if (out.layer[i] != row) row = out.layer[i], column = 0;
    out.x[i] = Layout::kMargin + column * (Layout::kBoxWidth + Layout::kGapX);
    out.y[i] = Layout::kMargin + row * (Layout::kBoxHeight + Layout::kGapY);
    widest = std::max(widest, ++column);
  }
  out.width = 2 * Layout::kMargin + std::max(0.0, widest * (Layout::kBoxWidth + Layout::kGapX) - Layout::kGapX);
  out.height = 2 * Layout::kMargin + std::max(0.0, (row + 1) * (Layout::kBoxHeight + Layout::kGapY) - Layout::kGapY);
  return out;
}

}  // namespace kiln::tools
