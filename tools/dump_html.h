// `kiln dump --format html`: one self-contained page (inline CSS, JS and SVG, no network) that
// draws the fused graph and shows each kernel's ops, cost estimate, kernel IR and source.
#pragma once

#include <string>
#include <vector>

#include "tools/dump_graph.h"

namespace kiln::tools {

// The source each kernel is shown with: the target's own (LLVM IR, CUDA C, GLSL), one per step.
struct KernelSources {
  std::string language;              // "LLVM IR", "CUDA C", "GLSL"
  std::vector<std::string> sources;  // one per plan step
};

// `namer` names the optimized graph. Every kernel boundary carries its reason beside the edge
// (the fuser's reason and the two estimates behind it, by `model`), in the kernel's section and
// in the list of all boundaries, above the kernels.
std::string render_html(const DumpGraph& graph, const runtime::Plan& plan,
                        const runtime::ValueNamer& namer, const std::string& title,
                        const KernelSources& sources, const passes::CostModel& model);

// Text made safe for HTML element content and attribute values.
std::string html_escape(const std::string& text);

}  // namespace kiln::tools
