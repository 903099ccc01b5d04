#!/usr/bin/env bash
# kiln vs numpy, A B A B in one session (the machine is noisy). Usage: [BUILD=dir] compare.sh [workload...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
for round in 1 2; do
  for w in ${@:-ew_chain softmax layernorm matmul matmul_bias_relu gemv reduce_sum argmax_axis0 small_ops life attention}; do
    "$BUILD"/bench/kiln_bench --benchmark_filter="^$w/" 2>/dev/null | awk -v w=$w '/_median/ {print "kiln " w " " $2 " ms"}'
    /usr/bin/python3 bench/numpy_peer.py "$w"
  done
done
