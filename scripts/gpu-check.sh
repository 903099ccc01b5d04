#!/usr/bin/env bash
# Everything kiln checks on a real NVIDIA GPU, in one script (docs/gpu.md).
#
#   scripts/gpu-check.sh bundle
#       On a machine without a GPU (the README's dependencies installed): builds build-gpu/ with
#       -DKILN_GPU_CHECK_BUILD=ON (the kiln tool and the cuda:0 suites, stripped), copies the shared
#       libraries they need into build-gpu/lib, writes the GPU-sized workload graphs, warms a kernel
#       cache for them and for examples/ with `kiln warm --target cuda --arch sm_90`, and packs it
#       all into .gpu/bundle.tar.xz (well under the 64 MiB a GPU run can carry).
#   scripts/gpu-check.sh run [tests|tensor-cores|bench|all] [REPORT_DIR]
#       On the GPU machine, from the repository root with .gpu/ beside it: unpacks the bundle and
#       runs, writing logs and REPORT_DIR/gpu-report.md (default .gpu/report):
#         tests: ctest -L gpu (the CUDA driver tests, the conformance suites and the random-graph
#                fuzz on cuda:0); `kiln run` of every example on cuda:0 checked against cpu, and
#                the matmul examples on the tensor cores (matmul_precision = high); every
#                example and workload run with the warmed cache, which must compile nothing;
#         tensor-cores: the tensor-core part of tests alone (its conformance suite, the matmul
#                examples on tf32);
#         bench: the workloads at GPU sizes next to PyTorch eager and torch.compile, the
#                matmuls also on tf32 next to PyTorch's (scripts/gpu/workloads.py); with
#                GPU_CHECK_ONLY=a,b only those workloads.
#       Exits 1 if any check failed.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# KILN_GPU_BUILD_DIR: another build directory to configure for the check (the README's `build`
# reuses its objects and only links again; the GPU side must be given the same name).
build=${KILN_GPU_BUILD_DIR:-build-gpu}
bins="$build/tools/kiln $build/tests/conformance/kiln_conformance_tests
      $build/tests/conformance/kiln_fuzz_tests $build/tests/runtime/kiln_cuda_backend_gpu_tests
      $build/kiln_dynamic_batch $build/examples/llm/kiln_llm_decode"

bundle() {
  set -e
  cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_GPU_CHECK_BUILD=ON >/dev/null
  cmake --build $build -j "$(nproc)"
  # Every shared library beyond the C and C++ runtimes (and zlib, zstd, xz) that all Linux
  # distributions have; the executables find them through their DT_RPATH, build-gpu/lib.
  rm -rf $build/lib && mkdir -p $build/lib
  # shellcheck disable=SC2086
  ldd $bins | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so* | libm.so* | libstdc++* | libgcc_s* | libpthread* | libdl.so* | librt.so* | \
      ld-linux* | libz.so* | libzstd* | liblzma*) ;;
      *) cp -L "$lib" $build/lib/ ;;
    esac
  done
  # libkiln.so itself (kiln_dynamic_batch and kiln_llm_decode link it as embedders do).
  cp -a $build/libkiln.so* $build/lib/
  rm -rf $build/gpu-graphs && python3 scripts/gpu/workloads.py graphs $build/gpu-graphs
  rm -f $build/warm-cache.sqlite
  $build/tools/kiln warm --target cuda --arch sm_90 --cache "file=$root/$build/warm-cache.sqlite" \
    -j "$(nproc)" examples/*.kg $build/gpu-graphs/*.kg
  echo "$root" >$build/source_dir
  echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo '+changes')" >$build/commit
  mkdir -p .gpu
  # shellcheck disable=SC2046,SC2086
  tar -cf - $bins $build/lib $build/gpu-graphs $build/warm-cache.sqlite $build/source_dir \
    $build/commit $build/kiln.toml $(find $build -name CTestTestfile.cmake -o -name '*_include.cmake' \
    -o -name '*_tests.cmake') | xz -9 -T "$(nproc)" >.gpu/bundle.tar.xz
  echo "gpu-check: .gpu/bundle.tar.xz, $(stat -c %s .gpu/bundle.tar.xz) bytes"
}

# compare GOT WANT [--of-scale TOL]: compare_npy.py once, its lines kept in GOT/compare.txt for
# the report; its status.
compare() {
  python3 scripts/gpu/compare_npy.py "$@" >"$1/compare.txt" 2>&1
  local rc=$?
  cat "$1/compare.txt"
  return $rc
}
compared() { tr -s ' ' <"$1/compare.txt" | paste -sd';'; }

failures=0
fail() { echo "gpu-check: FAILED: $*" | tee -a "$report"; failures=$((failures + 1)); }

unpack() {
  [[ -f .gpu/bundle.tar.xz ]] || { echo "gpu-check: no .gpu/bundle.tar.xz (run 'bundle' first)"; exit 1; }
  tar -xJf .gpu/bundle.tar.xz
  # The build's paths (test commands, KILN_SOURCE_DIR) name the repository where it was built.
  local src
  src=$(cat $build/source_dir)
  if [[ "$src" != "$root" && ! -e "$src" ]]; then
    mkdir -p "$(dirname "$src")" && ln -s "$root" "$src"
  fi
  [[ -d "$src/$build" ]] || { echo "gpu-check: $src/$build not reachable"; exit 1; }
}

run_tests() {
  local kiln=$build/tools/kiln
  {
    echo "## Device"
    echo '```'
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    $kiln devices
    echo '```'
  } >>"$report" 2>&1

  echo "## ctest -L gpu" >>"$report"
  # -V: the suites print their counts (conformance: N graphs ..., fuzz: N graphs ...).
  # A test that hangs (a kernel that never ends) is cut at 200 s: the slowest take about 100.
  (cd $build && timeout 420 ctest -L gpu -j 8 --timeout 200 -V) \
    >"$logs/ctest.log" 2>&1 || fail "ctest -L gpu (see ctest.log)"
  grep -E "tests passed|tests failed|Total Test time" "$logs/ctest.log" | sed 's/^/    /' >>"$report"
  grep -oE "conformance: [0-9]+ graphs, [0-9]+ of [0-9]+ outputs" "$logs/ctest.log" |
    awk '{g += $2; m += $4; o += $6} END {printf "    conformance on cuda:0: %d graphs, %d of %d outputs matched the reference\n", g, m, o}' >>"$report"
  grep -ohE "fuzz: [0-9]+ (graphs|shape families).*" "$logs/ctest.log" | sed 's/^/    /' >>"$report"
  grep -E "\*\*\*Failed|Not Run|Timeout" "$logs/ctest.log" | sed 's/^/    /' >>"$report"
  # The first failures' messages, so that the report alone says what went wrong.
  grep -A3 -E ": Failure$" "$logs/ctest.log" | head -40 | sed 's/^/    /' >>"$report"

  echo "## Examples: cuda:0 against cpu (--random-inputs --seed 7)" >>"$report"
  for g in examples/*.kg; do
    local n
    n=$(basename "$g" .kg)
    rm -rf "/tmp/gc/$n" && mkdir -p "/tmp/gc/$n"
    {
      echo "### $n"
      timeout 120 $kiln run "$g" --random-inputs --seed 7 --device cpu --out "/tmp/gc/$n/cpu" &&
        timeout 120 $kiln run "$g" --random-inputs --seed 7 --device cuda:0 --out "/tmp/gc/$n/cuda" \
          --stats &&
        compare "/tmp/gc/$n/cuda" "/tmp/gc/$n/cpu"
    } >>"$logs/examples.log" 2>&1
    if [[ $? -eq 0 ]]; then
      echo "    $n: ok, $(compared "/tmp/gc/$n/cuda")" >>"$report"
    else
      fail "example $n (see examples.log)"
    fi
  done

  run_tensor_cores

  # Dynamic shapes on cuda:0 (docs/dynamic-shapes.md): one process through batch sizes 1..100 of
  # a marked MLP under each policy (the family fuzz in ctest checks the values), and the decode
  # loop, whose tokens must equal the cpu's.
  echo "## Dynamic shapes and the decode loop on cuda:0" >>"$report"
  if timeout 300 $build/kiln_dynamic_batch examples/mlp_batch.kg 1 100 cuda:0 >"$logs/dynamic.log" 2>&1; then
    sed 's/^/    /' "$logs/dynamic.log" >>"$report"
  else
    fail "kiln_dynamic_batch on cuda:0 (see dynamic.log)"
  fi
  local decode_ok=1
  for d in cpu cuda:0; do
    timeout 300 $build/examples/llm/kiln_llm_decode --steps 100 --device "$d" --cache none \
      >"$logs/decode-${d%%:*}.log" 2>&1 || decode_ok=0
    grep -E "^kiln C\+\+" "$logs/decode-${d%%:*}.log" | sed 's/^/    /' >>"$report"
  done
  if [[ $decode_ok -eq 0 ]]; then
    fail "kiln_llm_decode (see decode-cpu.log, decode-cuda.log)"
  elif ! cmp -s <(grep '^tokens:' "$logs/decode-cpu.log") <(grep '^tokens:' "$logs/decode-cuda.log"); then
    fail "kiln_llm_decode: cuda:0's tokens differ from cpu's"
  else
    echo "    decode: cuda:0's $(grep -o ' [0-9]*' <(grep '^tokens:' "$logs/decode-cuda.log") | wc -l) tokens equal cpu's" >>"$report"
  fi

  echo "## Warm cache (kiln warm --target cuda --arch sm_90, built without a GPU)" >>"$report"
  local hits=0 misses=0
  for g in examples/*.kg $build/gpu-graphs/*.kg; do
    local out
    # The warm cache holds untuned kernels (tuning needs the GPU): runs that use it as shipped
    # keep autotune off.
    out=$(KILN_COMPILATION_CACHE="file=$root/$build/warm-cache.sqlite" KILN_CACHE_READ_ONLY=true \
      KILN_AUTOTUNE_ENABLED=false \
      KILN_CACHE_LOGGER_LEVEL=verbose timeout 120 $kiln run "$g" --random-inputs --device cuda:0 --stats 2>&1)
    echo "### $g" >>"$logs/warm.log"
    echo "$out" >>"$logs/warm.log"
    local line
    line=$(grep -E "^cache: " <<<"$out")
    echo "    $(basename "$g"): $line; $(grep -E '^kernels: ' <<<"$out")" >>"$report"
    if ! grep -qE "^kernels: [0-9]+ launched, 0 compiled" <<<"$out"; then
      fail "$(basename "$g") compiled kernels with the warmed cache"
      misses=$((misses + 1))
    else
      hits=$((hits + 1))
    fi
  done
  echo "    $hits graphs ran from the warmed cache alone, $misses did not" >>"$report"
}

# The matmul examples on the tensor cores (compilation.matmul_precision = high) against cpu: the
# source must hold the tf32 mma.sync, and the outputs agree within 2e-3 of their scale (tf32 keeps
# 10 mantissa bits). Runs the tensor-core conformance suite too when called alone.
run_tensor_cores() {
  local kiln=$build/tools/kiln
  echo "## Tensor cores (compilation.matmul_precision = high): cuda:0 against cpu" >>"$report"
  if [[ "${1:-}" == alone ]]; then
    (cd $build && timeout 120 ctest -R "cuda:0.TensorCore" --timeout 100 -V) \
      >"$logs/ctest-tensor-cores.log" 2>&1 || fail "ctest -R cuda:0.TensorCore (see ctest-tensor-cores.log)"
    grep -E "tests passed|tests failed" "$logs/ctest-tensor-cores.log" | sed 's/^/    /' >>"$report"
  fi
  for n in matmul matmul_bias_relu; do
    mkdir -p "/tmp/gc/$n"
    {
      echo "### $n (high)"
      # Run with the tests, the examples' loop has just written the cpu outputs.
      if [[ "${1:-}" == alone ]]; then
        timeout 120 $kiln run "examples/$n.kg" --random-inputs --seed 7 --device cpu --out "/tmp/gc/$n/cpu"
      fi &&
        KILN_COMPILATION_MATMUL_PRECISION=high timeout 120 $kiln dump "examples/$n.kg" --target cuda \
          --no-autotune --stage source >"/tmp/gc/$n/high.cu" &&
        grep -q "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" "/tmp/gc/$n/high.cu" &&
        KILN_COMPILATION_MATMUL_PRECISION=high timeout 120 $kiln run "examples/$n.kg" --random-inputs \
          --seed 7 --device cuda:0 --out "/tmp/gc/$n/high" --stats &&
        compare "/tmp/gc/$n/high" "/tmp/gc/$n/cpu" --of-scale 2e-3
    } >>"$logs/examples.log" 2>&1
    if [[ $? -eq 0 ]]; then
      echo "    $n: ok, mma.sync on tf32 in its source; $(compared "/tmp/gc/$n/high")" >>"$report"
    else
      fail "tensor-core $n (see examples.log)"
    fi
  done
}

run_bench() {
  echo "## Workloads at GPU sizes (median of 10 after 2 warm-ups)" >>"$report"
  # shellcheck disable=SC2086
  PYTHONUNBUFFERED=1 timeout 540 python3 scripts/gpu/workloads.py bench "$root/$build/tools/kiln" \
    $build/gpu-graphs "$logs" ${GPU_CHECK_ONLY:+--only "$GPU_CHECK_ONLY"} >"$logs/bench.log" 2>&1 ||
    fail "workloads (see bench.log)"
  if [[ -f "$logs/workloads.md" ]]; then cat "$logs/workloads.md" >>"$report"; fi
}

case "${1:-}" in
  bundle) bundle ;;
  run)
    what=${2:-all}
    logs=${3:-.gpu/report}
    mkdir -p "$logs"
    logs=$(cd "$logs" && pwd)
    report=$logs/gpu-report.md
    unpack
    echo "# kiln GPU check ($what), $(date -u '+%Y-%m-%d %H:%M UTC'), bundle of $(cat $build/commit)" >"$report"
    case "$what" in
      tests) run_tests ;;
      tensor-cores) run_tensor_cores alone ;;
      bench) run_bench ;;
      all) run_tests; run_bench ;;
      *) echo "gpu-check: run tests|tensor-cores|bench|all"; exit 2 ;;
    esac
    echo "gpu-check: $failures failed" | tee -a "$report"
    cat "$report"
    [[ $failures -eq 0 ]]
    ;;
  *)
    sed -n '2,20p' "$0"
    exit 2
    ;;
esac
