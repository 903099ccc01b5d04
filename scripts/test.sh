#!/usr/bin/env bash
# Install, build and run the whole default test suite (ctest; GPU tests skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd build
# Label perf (timed checks of the cost model against the machine) is left out: run it alone
# on a quiet machine with `ctest -L perf`.
ctest --output-on-failure -j "$(nproc)" --timeout 600 -LE perf "$@"
