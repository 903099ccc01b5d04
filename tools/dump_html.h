// `kiln dump --format html`: one self-contained page (inline CSS, JS and SVG, no network) that
// draws the fused graph and shows each kernel's ops, cost estimate, kernel IR and source.
#pragma once

#include <string>

#include "tools/dump_graph.h"

namespace kiln::tools {

// `namer` names the optimized graph; the plan must have been compiled (its source is shown).
std::string render_html(const DumpGraph& graph, const runtime::Plan& plan,
                        const runtime::ValueNamer& namer, const std::string& title);

// Text made safe for HTML element content and attribute values.
std::string html_escape(const std::string& text);

}  // namespace kiln::tools
