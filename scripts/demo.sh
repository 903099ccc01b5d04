#!/usr/bin/env bash
# The main job: install, build, then run every example graph on the cpu device, printing the
# fused kernels, timings and a summary of each result; then a softmax from Python (README).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
for g in examples/*.kg; do
  echo "=== $g"
  build/tools/kiln run "$g" --random-inputs --seed 1 --device cpu --stats
done
echo "=== python: kiln.softmax(kiln.tensor(np.ones((2, 3), np.float32))).numpy()"
PYTHONPATH=build/python /usr/bin/python3 -c \
  "import kiln, numpy as np; print(kiln.softmax(kiln.tensor(np.ones((2, 3), np.float32))).numpy())"
