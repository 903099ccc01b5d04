#!/usr/bin/env bash
# 100 batch sizes through one MLP graph (examples/mlp_batch.kg, batch dimension `?b`), one
# `kiln run --dim b=N --stats-json` process each over one persistent cache: how many kernels each
# run compiled, and how many it found in the cache (docs/dynamic-shapes.md). With
# SHAPES_POLICY=static every size compiles its own kernels.
#   [SHAPES_POLICY=dynamic|static|automatic] bash bench/dynamic_batch.sh [BUILD_DIR] [FIRST] [COUNT]
set -euo pipefail
source "$(dirname "$0")/scratch_cache.sh"
first="${2:-1}"
count="${3:-100}"
export KILN_SHAPES_POLICY="${SHAPES_POLICY:-automatic}"
for ((b = first; b < first + count; b++)); do
  "$build/tools/kiln" run "$here/examples/mlp_batch.kg" --random-inputs --no-autotune --dim "b=$b" \
    --stats-json "$work/b$b.json" > /dev/null
done
/usr/bin/python3 - "$work" "$first" "$count" <<'PY'
import json, sys
work, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
runs = [json.load(open(f"{work}/b{b}.json")) for b in range(first, first + count)]
compiled = [r["compiled"] for r in runs]
at = [first + i for i, c in enumerate(compiled) if c]
print(f"batch sizes {first}..{first + count - 1}: {count} runs, {sum(compiled)} kernels compiled "
      f"(at b = {', '.join(map(str, at)) or 'none'}), {sum(r['cache_hits'] for r in runs)} found in the cache, "
      f"{sum(r['kernels'] for r in runs)} launched, {sum(r['dynamic_kernels'] for r in runs)} of them dynamic")
PY
