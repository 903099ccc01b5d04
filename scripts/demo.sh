#!/usr/bin/env bash
# The main job: install, build, then run every example graph on the cpu device, printing the
# fused kernels, timings and a summary of each result; then install (/usr/local) and run a softmax
# from Python with the installed package (README).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
for g in examples/*.kg; do
  echo "=== $g"
  build/tools/kiln run "$g" --random-inputs --seed 1 --device cpu --stats
done
# Install the library, the kiln program and the Python package under /usr/local (docs/python.md),
# then use the package as a user would: Debian's python3, outside the source tree, no PYTHONPATH.
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "=== cmake --install build (prefix /usr/local)"
$SUDO cmake --install build >/dev/null
$SUDO ldconfig
py=python3
python3 -c "import numpy" 2>/dev/null || py=/usr/bin/python3  # a python3 on PATH without numpy
echo "=== $py -c \"import kiln, numpy as np; print(kiln.softmax(kiln.tensor(np.ones((2, 3), np.float32))).numpy())\""
(cd / && "$py" -c \
  "import kiln, numpy as np; print(kiln.softmax(kiln.tensor(np.ones((2, 3), np.float32))).numpy())")
