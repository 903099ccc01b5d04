// The `kiln` command line program (tools/cli_main.cpp, inside libkiln.so).
#include "tools/tool_main.h"

int main(int argc, char** argv) { return kiln_tool_main(argc, argv); }
