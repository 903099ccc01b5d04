// render_dot: Graphviz text; every label is a quoted, escaped DOT string.
#include "tools/dump_dot.h"

#include <fmt/format.h>

#include <array>

namespace kiln::tools {

namespace {

// A DOT double-quoted string; "\n" in `text` becomes a centred line break.
std::string dot_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') out += "\\n";
    else out += c;
  }
  return out + "\"";
}

std::string node_line(const DumpNode& n) {
  std::string label = fmt::format("{}\n{} {}", n.name, n.op, n.type);
  if (n.kernel < 0)
    return fmt::format("  {} [label={}, shape=ellipse, style=filled, fillcolor=\"#eeeeee\"];\n",
                       n.id, dot_string(label));
  return fmt::format("    {} [label={}, style=\"filled{}\", fillcolor=\"{}\"];\n", n.id, dot_string(label),
                     n.output ? ",bold" : "", kernel_colour(n.kernel));
}

}  // namespace

std::string kernel_colour(int k) {
  static constexpr std::array<const char*, 10> kPalette = {
      "#cfe2f3", "#d9ead3", "#fff2cc", "#f4cccc", "#d9d2e9",
      "#fce5cd", "#d0e0e3", "#ead1dc", "#e6e6b8", "#c9daf8"};
  return kPalette[static_cast<size_t>(k) % kPalette.size()];
}

std::string render_dot(const DumpGraph& graph, bool why) {
  std::string out = "digraph kiln {\n";
  out += "  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
  out += "  edge [fontname=\"monospace\", fontsize=9];\n";
  out += fmt::format("  label={};\n  labelloc=t;\n",
                     dot_string(fmt::format("{} kernel{}, estimated {}", graph.kernels.size(),
                                        graph.kernels.size() == 1 ? "" : "s",
                                        runtime::format_micros(graph.total_seconds))));
  for (const DumpNode& n : graph.nodes)
    if (n.kernel < 0) out += node_line(n);
  for (size_t k = 0; k < graph.kernels.size(); ++k) {
    const DumpKernel& kernel = graph.kernels[k];
    out += fmt::format("  subgraph cluster_{} {{\n", kernel.name);
    out += fmt::format("    label={};\n    style=rounded;\n",
                       dot_string(fmt::format("{}: {}", kernel.name, runtime::format_micros(kernel.cost.seconds))));
    for (const DumpNode& n : graph.nodes)
      if (n.kernel == static_cast<int>(k)) out += node_line(n);
    out += "  }\n";
  }
  for (const DumpEdge& e : graph.edges) {
    std::string attrs;
    if (e.crosses && graph.nodes[e.from].kernel >= 0) {
      attrs = " [color=\"#cc0000\"";
      if (why && !e.reason.empty()) attrs += fmt::format(", label={}, fontcolor=\"#cc0000\"", dot_string(e.reason));
      attrs += "]";
    }
    out += fmt::format("  {} -> {}{};\n", graph.nodes[e.from].id, graph.nodes[e.to].id, attrs);
  }
  return out + "}\n";
}

}  // namespace kiln::tools
