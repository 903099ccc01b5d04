#!/usr/bin/env bash
# Dynamic kernels against fully specialized ones on the 11 workloads (docs/dynamic-shapes.md):
# each workload runs under shapes.policy=static (A) and dynamic (B), A B A B ... (ROUNDS pairs,
# default 2) in one run, each a `kiln run --repeat N` process whose median is one round; the ratio
# is dynamic / static of the best round of each. Kernels that cannot be dynamic (streaming outputs,
# attention, a one-row matrix-vector product) stay specialized under both: `dyn` counts the
# dynamic ones, and a workload with none runs the same code twice (its ratio is the noise).
#   [ROUNDS=3] [WORKLOADS="matmul life"] bash bench/dynamic_vs_static.sh [BUILD_DIR] [REPEAT]
set -euo pipefail
source "$(dirname "$0")/scratch_cache.sh"
repeat="${2:-10}"
kiln="$build/tools/kiln"
workloads="${WORKLOADS:-ew_chain softmax layernorm reduce_sum argmax_axis0 small_ops gemv life matmul matmul_bias_relu attention}"
rounds="${ROUNDS:-2}"

run() {  # POLICY WORKLOAD -> "run_ms dynamic_kernels kernels"
  KILN_SHAPES_POLICY="$1" "$kiln" run "$here/examples/$2.kg" --random-inputs --repeat "$repeat" \
    --stats-json "$work/s.json" > /dev/null
  /usr/bin/python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["run_ms"], s["dynamic_kernels"], s["kernels"])' "$work/s.json"
}

# Warm-up: compile and tune every kernel of both policies, so the timed rounds run cached plans.
for w in $workloads; do run static "$w" > /dev/null; run dynamic "$w" > /dev/null; done

printf '%-18s %-40s %-40s %7s %8s\n' workload "static rounds (ms)" "dynamic rounds (ms)" dyn "dyn/stat"
for w in $workloads; do
  a=() b=()
  for ((r = 0; r < rounds; r++)); do
    read -r t _ _ < <(run static "$w"); a+=("$t")
    read -r t d k < <(run dynamic "$w"); b+=("$t")
  done
  /usr/bin/python3 - "$w" "$d" "$k" "${a[*]}" "${b[*]}" <<'PY'
import sys
w, d, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
a, b = [list(map(float, x.split())) for x in sys.argv[4:6]]
fmt = lambda v: " ".join(f"{x:.3f}" for x in v)
print(f"{w:<18} {fmt(a):<40} {fmt(b):<40} {d:>3}/{k:<3} {min(b) / min(a):8.3f}")
PY
done
