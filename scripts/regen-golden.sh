#!/usr/bin/env bash
# Regenerates tests/golden/*.groups.txt from examples/*.kg with the `kiln` binary of BUILD_DIR.
# Usage: scripts/regen-golden.sh [BUILD_DIR]   (default: build; the binary is BUILD_DIR/tools/kiln)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
kiln="$build/tools/kiln"
if [[ ! -x "$kiln" ]]; then
  echo "regen-golden: no kiln binary at $kiln (build it: ninja -C $build kiln_tool)" >&2
  exit 1
fi
golden="$root/tests/golden"
rm -f "$golden"/*.groups.txt
for graph in "$root"/examples/*.kg; do
  name="$(basename "$graph" .kg)"
  # Reference rates and no KILN_DUMP: the text depends only on the graph and the fuser.
  KILN_DUMP= "$kiln" dump "$graph" --stage groups --why --rates reference -o "$golden/$name.groups.txt"
  echo "regen-golden: $name.groups.txt"
done
echo "regen-golden: review the changes with: git diff --stat -- tests/golden"
