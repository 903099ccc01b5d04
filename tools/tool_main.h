// The `kiln` program's entry point. It lives in libkiln.so with the rest of the program, so the
// executable (tools/main.cpp) links the very library embedders use; it is exported for that
// executable only and is not part of kiln's API (docs/embedding.md, "ABI").
#pragma once

#include "kiln/export.h"

extern "C" KILN_EXPORT int kiln_tool_main(int argc, char** argv);
