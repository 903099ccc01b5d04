// KILN_DUMP=<dir>: every plan build writes a standalone reproducer and its dumps into <dir>.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/pipeline.h"
#include "runtime/plan.h"
#include "runtime/planner.h"

namespace kiln::runtime {

// One plan build's dump. When KILN_DUMP names a directory, it claims the next free sequence
// number NNNN there and writes, as the build goes:
//   graph-NNNN.kg            the subgraph as a standalone `.kg` (unnamed inputs: in0, in1, ...)
//   graph-NNNN.steps/        the IR after every step, numbered in running order: the lowering
//                            script's (passes/pipeline.h) NN-fold_literals.kg, NN-fold_views.kg,
//                            NN-cse.kg (in rounds), NN-fuse.txt (groups, estimates, reasons),
//                            NN-lower.txt (kernel IR); then the executor's NN-compile.<ext> (the
//                            target's source: .ll LLVM IR, .cu CUDA C, .comp GLSL) and
//                            NN-slots.txt (buffers)
// and at the end:
//   graph-NNNN.optimized.kg  the optimized graph
//   graph-NNNN.groups.txt    the fused groups with the fuser's cost estimates, and the reasons
//   graph-NNNN.kernels.txt   the kernel IR
//   graph-NNNN.source.<ext>  the target's source (only when the plan was compiled)
// Failures are warnings on stderr (and end the dump); they never fail the build of the plan.
class PlanDump {
 public:
  // Inactive (every call does nothing) when `dir` is empty.
  PlanDump(const std::string& dir, const std::vector<const ir::Node*>& outputs,
           const std::vector<const ir::Node*>& inputs, ValueNamer namer, std::string fuser);
  bool active() const { return !stem_.empty(); }
  // The lowering script's observer (passes::LoweringOptions::observe).
  void lowering_step(int number, const passes::LoweringStep& step, const passes::Lowering& ir);
  // An executor step after the script, numbered after its last step.
  void executor_step(std::string_view name, std::string_view extension, const std::string& text);
  // The final files; the compiled kernels' source (when there is one) as source.<extension>.
  void finish(const Plan& plan, std::string_view source_extension);

 private:
  void write(const std::string& file, const std::string& text);

  const std::vector<const ir::Node*>& outputs_;
  const std::vector<const ir::Node*>& inputs_;
  ValueNamer namer_;
  std::string fuser_;
  std::string dir_, stem_;
  int last_step_ = 0;
};

// KILN_RECORD=<dir> (DeviceOptions::record_dir; nothing when empty): records a realized graph for
// `kiln warm` as <dir>/graph-<digest>.kg (the digest of the text, so a graph realized again, by
// this or another process, is recorded once). Called by the devices the first time a process
// realizes each graph structure. Failures are warnings on stderr.
void record_graph(const std::string& dir, const std::vector<const ir::Node*>& outputs,
                  const std::vector<const ir::Node*>& inputs, const ValueNamer& namer);

// The same files into `dir` under `stem` (e.g. "graph-0001"); returns the paths written, or the
// first error. Used by write_plan_dump and by tests.
Expected<std::vector<std::string>> write_plan_files(const std::string& dir, const std::string& stem,
                                                    const std::vector<const ir::Node*>& outputs,
                                                    const std::vector<const ir::Node*>& inputs,
                                                    const Plan& plan, const ValueNamer& namer,
                                                    std::string_view source_extension = "ll");

}  // namespace kiln::runtime
