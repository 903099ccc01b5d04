// An execution plan: the compiled kernels of one subgraph and how their buffers are wired.
// Built once per distinct subgraph structure (planner.h), replayed by the executor.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/kernel_facts.h"
#include "ir/kernel_ir.h"
#include "passes/fuser.h"
#include "runtime/target.h"

namespace kiln::runtime {

// A buffer the plan reads or writes: a plan input (bound at run time) or one a kernel writes.
struct Slot {
  ir::DType dtype;
  ir::Shape shape;
  int input_index = -1;  // >= 0: the plan's input at this position
};

// Buffer donation: an output parameter that may be written into the memory of a plan input whose
// caller gives that buffer up (Device::execute's `donated`; the frontend donates a realized tensor
// that nothing but the realize still holds), so `w = w - lr * g` updates w in place. The planner
// allows it only where that is safe (planner.cpp: in_place_candidates): the kernel's one store
// writes each element of the output once, every load of the input reads the element that the same
// point stores, the two have one dtype and shape, and no later step reads the input, nor is it a
// plan output.
struct InPlace {
  int param;       // the output parameter
  int input_slot;  // the plan input whose memory it may take
};

struct PlanStep {
  kir::Kernel kernel;
  // What the backends ask of the kernel (the lowering script's `analyze`), handed to codegen;
  // null in a plan read back from its record (its kernels are compiled already).
  std::shared_ptr<const kir::KernelFacts> facts;
  std::shared_ptr<const Artifact> artifact;  // null when the plan was not compiled
  std::vector<int> args;           // slot of each kernel parameter
  std::vector<int> release_after;  // temporary slots whose last reader is this step
  std::vector<InPlace> in_place;   // outputs that may take a donated input's memory
  std::vector<std::string> values; // the graph values this kernel computes (for stats and dumps)
  int num_ops = 0;                 // non-movement ops computed in this kernel
  // The kernel's arithmetic (autotune::kernel_work's flops), counted while the body exists and
  // kept in the plan record, which has no body; -1 where unknown (a record written before it).
  double flops = -1;
  std::string kernel_digest;       // persistent cache key of the kernel ("" without one)
};

struct Plan {
  std::vector<Slot> slots;
  std::vector<PlanStep> steps;
  std::vector<int> output_slots;
  std::vector<const ir::Node*> optimized_outputs;  // the optimized graph, for dumps
  passes::FusionPlan fusion;                       // groups, cost estimates, reasons (for dumps)
  std::string fuser;                               // the fuser's name
  int compiled = 0;                                // kernels compiled while building it
  int loaded = 0;                                  // kernels read from the persistent cache
  int tuned = 0;                                   // kernels autotuned while building it
  std::vector<std::string> miss_reasons;           // persistent-cache misses, when explained
  // Why it was built for a graph seen at other sizes, and the kernels generalized then
  // (RunStats::recompile_reasons).
  std::vector<std::string> recompile_reasons;
  double compile_ms = 0;                           // codegen time while building it
  double plan_ms = 0;                              // total build time (passes + fusion + codegen)
};

}  // namespace kiln::runtime
