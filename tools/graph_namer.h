// Names graph values after the `.kg` file that defined them, for stats and dumps.
#pragma once

#include "ir/kg.h"
#include "runtime/planner.h"

namespace kiln::tools {

// Values keep their `.kg` names (outputs first); values the file did not name print as %t<id>.
runtime::ValueNamer make_namer(const ir::KgGraph& graph);

}  // namespace kiln::tools
