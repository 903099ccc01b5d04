// Internal: what a realize would run, as the text of a `kiln dump` stage, for a `.kg` graph or for
// pending tensors, planned (and for `source` compiled) by the device's own executor, with its
// options, caches and cost model.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "frontend/kg_call.h"
#include "kiln/kiln.h"

namespace kiln::detail {

// The text of dump `stage` for the file's outputs on `device`. Stages: "graph" (the optimized
// graph, as .kg), "groups" (the kernels with their cost estimates; with `why`, each boundary's
// reason), "kernels" (kernel IR), "analyze" (what codegen is told of each kernel), "source" (each
// kernel's generated source: LLVM IR, CUDA C or GLSL). Values keep the file's names.
Expected<std::string> dump_kg(const Device& device, const KgFile& file, std::string_view stage,
                              bool why);
// The same for what realizing `tensors` (one device) would compute now; values already realized
// are its inputs. Nothing is realized.
Expected<std::string> dump_tensors(const std::vector<Tensor>& tensors, std::string_view stage,
                                   bool why);
// Whether `stage` names one of the stages above.
bool is_dump_stage(std::string_view stage);

}  // namespace kiln::detail
