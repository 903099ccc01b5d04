// render_html: an SVG of the layered graph plus one details section per kernel, all inline.
#include "tools/dump_html.h"

#include <fmt/format.h>

#include <algorithm>

#include "tools/dump_dot.h"
#include "tools/dump_layout.h"

namespace kiln::tools {

namespace {

constexpr const char* kStyle = R"(<style>
body { font-family: sans-serif; margin: 0; display: flex; height: 100vh; }
#graph { flex: 3; overflow: auto; border-right: 1px solid #ccc; }
#side { flex: 2; overflow: auto; padding: 8px 12px; }
pre { background: #f6f6f6; padding: 6px; font-size: 11px; overflow-x: auto; }
.node rect { stroke: #555; stroke-width: 1; }
.node.out rect { stroke-width: 2.5; }
.node.k { cursor: pointer; }
.node.sel rect { stroke: #000; stroke-width: 3; }
.node text { font: 11px monospace; pointer-events: none; }
.node text.kname { text-anchor: end; fill: #555; }
.edge { fill: none; stroke: #888; }
.edge.cross { stroke: #c00; stroke-dasharray: 5 3; }
.why-label { font: 10px sans-serif; fill: #c00; }
table td { padding: 1px 8px 1px 0; }
</style>
)";

constexpr const char* kScript = R"(<script>
function show(k) {
  document.querySelectorAll('section.kernel').forEach(s => { s.hidden = s.dataset.kernel !== k; });
  document.querySelectorAll('g.node').forEach(n => n.classList.toggle('sel', n.dataset.kernel === k));
  document.getElementById('kernel-select').value = k;
}
document.getElementById('kernel-select').addEventListener('change', e => show(e.target.value));
document.querySelectorAll('g.node.k').forEach(n => n.addEventListener('click', () => show(n.dataset.kernel)));
if (document.querySelector('section.kernel')) show('0');
</script>
)";

std::string svg(const DumpGraph& graph) {
  Layout l = layered_layout(graph);
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" "
      "viewBox=\"0 0 {0:.0f} {1:.0f}\">\n", l.width, l.height);
  for (const DumpEdge& e : graph.edges) {
    double x1 = l.x[e.from] + Layout::kBoxWidth / 2, y1 = l.y[e.from] + Layout::kBoxHeight;
    double x2 = l.x[e.to] + Layout::kBoxWidth / 2, y2 = l.y[e.to];
    bool cross = e.crosses && graph.nodes[e.from].kernel >= 0;
    out += fmt::format("<path class=\"edge{}\" d=\"M{:.1f},{:.1f} C{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}\">",
                       cross ? " cross" : "", x1, y1, x1, y1 + 30, x2, y2 - 30, x2, y2);
    if (!e.reason.empty()) out += fmt::format("<title>{}</title>", html_escape(e.reason));
    out += "</path>\n";
    if (cross &&
        !e.reason.empty()) {  // the fuser's reason beside the boundary (its estimates on hover)
      std::string shown = e.reason.substr(0, e.reason.find(" ("));
      out += fmt::format(
          "<text class=\"why-label\" x=\"{:.1f}\" y=\"{:.1f}\"><title>{}</title>{}</text>\n",
          (x1 + x2) / 2 + 4, (y1 + y2) / 2, html_escape(e.reason), html_escape(shown));
    }
  }
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const DumpNode& n = graph.nodes[i];
    std::string classes = n.kernel >= 0 ? " k" : "";
    if (n.output) classes += " out";
    out += fmt::format("<g class=\"node{}\" data-kernel=\"{}\" transform=\"translate({:.1f},{:.1f})\">",
                       classes, n.kernel, l.x[i], l.y[i]);
    out += fmt::format("<title>{}</title>", html_escape(n.name + " = " + n.op + " : " + n.type));
    out += fmt::format("<rect width=\"{:.0f}\" height=\"{:.0f}\" rx=\"{}\" fill=\"{}\"/>",
                       Layout::kBoxWidth, Layout::kBoxHeight, n.kernel >= 0 ? 3 : 18,
                       n.kernel >= 0 ? kernel_colour(n.kernel) : "#eeeeee");
    out += fmt::format("<text x=\"6\" y=\"16\">{}</text><text x=\"6\" y=\"32\">{}</text>",
                       html_escape(n.name), html_escape(n.op + " " + n.type));
    if (n.kernel >= 0)  // the kernel's name, so colours need no legend
      out += fmt::format("<text class=\"kname\" x=\"{:.0f}\" y=\"16\">{}</text>", Layout::kBoxWidth - 6,
                         html_escape(graph.kernels[n.kernel].name));
    out += "</g>\n";
  }
  return out + "</svg>\n";
}

std::string kernel_section(size_t k, const DumpKernel& kernel, const runtime::PlanStep& step,
                           const passes::FusedGroup& group, const runtime::ValueNamer& namer,
                           const std::string& boundaries, const std::string& language,
                           const std::string& source) {
  std::string ops;
  for (const ir::Node* n : group.nodes)
    if (runtime::is_shown_op(n)) ops += runtime::node_statement(n, namer) + "\n";
  const passes::GroupCost& c = kernel.cost;
  std::string out = fmt::format("<section class=\"kernel\" data-kernel=\"{}\" hidden>\n<h2>{}</h2>\n", k,
                                html_escape(kernel.name));
  out += fmt::format(
      "<table><tr><td>estimated cost</td><td>{}</td></tr><tr><td>bytes</td><td>{:.0f}</td></tr>"
      "<tr><td>launches</td><td>{}</td></tr><tr><td>flops</td><td>{:.0f}</td></tr></table>\n",
      html_escape(runtime::format_micros(c.seconds)), c.bytes, c.launches, c.flops);
  out += fmt::format("<h3>Ops</h3>\n<pre class=\"ops\">{}</pre>\n", html_escape(ops));
  out += fmt::format(
      "<h3>Why it reads from other kernels</h3>\n<pre class=\"why\">{}</pre>\n",
      html_escape(boundaries.empty() ? "(no value from another kernel)\n" : boundaries));
  out += fmt::format("<h3>Kernel IR</h3>\n<pre class=\"kir\">{}</pre>\n",
                     html_escape(kir::print_kernel(step.kernel)));
  out += fmt::format("<h3>Source ({})</h3>\n<pre class=\"source\">{}</pre>\n</section>\n",
                     html_escape(language), html_escape(source));
  return out;
}

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string render_html(const DumpGraph& graph, const runtime::Plan& plan,
                        const runtime::ValueNamer& namer, const std::string& title,
                        const KernelSources& sources, const passes::CostModel& model) {
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += fmt::format("<title>kiln dump: {}</title>\n{}</head>\n<body>\n", html_escape(title), kStyle);
  out += fmt::format("<div id=\"graph\">\n{}</div>\n<div id=\"side\">\n", svg(graph));
  out += fmt::format("<h1>{}</h1>\n<p>{} kernel{}, estimated {} (fuser: {})</p>\n", html_escape(title),
                     graph.kernels.size(), graph.kernels.size() == 1 ? "" : "s",
                     html_escape(runtime::format_micros(graph.total_seconds)), html_escape(plan.fuser));
  out += "<label>Kernel <select id=\"kernel-select\">\n";
  for (size_t k = 0; k < graph.kernels.size(); ++k)
    out += fmt::format("<option value=\"{}\">{} ({})</option>\n", k, html_escape(graph.kernels[k].name),
                       html_escape(runtime::format_micros(graph.kernels[k].cost.seconds)));
  out += "</select></label>\n";
  // Every boundary, and each kernel's own (the boundaries its values come in through).
  std::string why;
  std::vector<std::string> into(plan.fusion.groups.size());
  for (const passes::FusionReason& r : runtime::boundary_reasons(plan.fusion)) {
    std::string line = runtime::reason_line(r, namer, plan.fusion, model) + "\n";
    why += line;
    for (size_t k = 0; k < plan.fusion.groups.size(); ++k)
      if (std::ranges::count(plan.fusion.groups[k].nodes, r.consumer) &&
          std::ranges::count(plan.fusion.groups[k].inputs, r.producer))
        into[k] += line;
  }
  out += fmt::format("<h3>Why not fused</h3>\n<pre class=\"why\">{}</pre>\n",
                     html_escape(why.empty() ? "(one kernel: nothing to explain)\n" : why));
  for (size_t k = 0; k < graph.kernels.size(); ++k)
    out += kernel_section(k, graph.kernels[k], plan.steps[k], plan.fusion.groups[k], namer, into[k],
                          sources.language,
                          k < sources.sources.size() ? sources.sources[k] : "(not compiled)");
  return out + "</div>\n" + kScript + "</body>\n</html>\n";
}

}  // namespace kiln::tools
