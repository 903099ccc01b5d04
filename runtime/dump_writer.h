// KILN_DUMP=<dir>: every plan build writes a standalone reproducer and its dumps into <dir>.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/plan.h"
#include "runtime/planner.h"

namespace kiln::runtime {

// When KILN_DUMP names a directory, writes into it, under the next free sequence number NNNN:
//   graph-NNNN.kg            the subgraph as a standalone `.kg` (unnamed inputs: in0, in1, ...)
//   graph-NNNN.optimized.kg  the optimized graph
//   graph-NNNN.groups.txt    the fused groups with the fuser's cost estimates, and the reasons
//   graph-NNNN.kernels.txt   the kernel IR
//   graph-NNNN.source.ll     the LLVM IR (only when the plan was compiled)
// Failures are warnings on stderr; this never fails the build of the plan.
void write_plan_dump(const std::vector<const ir::Node*>& outputs,
                     const std::vector<const ir::Node*>& inputs, const Plan& plan,
                     const ValueNamer& namer);

// KILN_RECORD=<dir>: records a realized graph for `kiln warm` as <dir>/graph-<digest>.kg (the
// digest of the text, so a graph realized again, by this or another process, is recorded once).
// Called by the devices the first time a process realizes each graph structure. Failures are
// warnings on stderr.
void record_graph(const std::vector<const ir::Node*>& outputs,
                  const std::vector<const ir::Node*>& inputs, const ValueNamer& namer);

// The same files into `dir` under `stem` (e.g. "graph-0001"); returns the paths written, or the
// first error. Used by write_plan_dump and by tests.
Expected<std::vector<std::string>> write_plan_files(const std::string& dir, const std::string& stem,
                                                    const std::vector<const ir::Node*>& outputs,
                                                    const std::vector<const ir::Node*>& inputs,
                                                    const Plan& plan, const ValueNamer& namer);

}  // namespace kiln::runtime
