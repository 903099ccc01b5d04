#!/usr/bin/env bash
# The main job: install, build, then run every example graph on the cpu device, printing the
# fused kernels, timings and a summary of each result.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
for g in examples/*.kg; do
  echo "=== $g"
  build/tools/kiln run "$g" --random-inputs --seed 1 --device cpu --stats
done
