// Names graph values after the `.kg` file that defined them, for stats and dumps.
#pragma once

#include "ir/kg.h"
#include "runtime/planner.h"

namespace kiln::tools {

// Inputs and outputs keep their `.kg` names; every other value prints as %t<id>.
runtime::ValueNamer make_namer(const ir::KgGraph& graph);

}  // namespace kiln::tools
