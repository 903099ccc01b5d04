#!/usr/bin/env bash
# CI sanitizer phases: unit, conformance and fuzz suites under ASan+UBSan (build-asan), the
# threading tests under TSan (build-tsan). Prints each phase's wall time; fails on any finding.
#
#   KILN_SANITIZE_PHASES  which to run: "asan tsan" (default), or one of them
#   KILN_TSAN_TRIALS      trials of each threading test under TSan (default 10000)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
phases=${KILN_SANITIZE_PHASES:-asan tsan}
jobs=$(nproc)

timed() {  # timed NAME COMMAND...: runs COMMAND, prints how long it took
  local name=$1 start=$SECONDS
  shift
  "$@"
  echo "sanitize: $name took $((SECONDS - start)) s"
}

# -O1: sanitizer reports keep usable stacks, and compiling is faster than at -O3. No bench.
configure() {  # configure DIR SANITIZERS
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
    -DKILN_SANITIZE="$2" -DKILN_BUILD_BENCH=OFF >/dev/null
}

asan() {
  configure build-asan address,undefined
  timed "asan build" cmake --build build-asan -j "$jobs"
  # Leaks are checked, except inside Mesa's Vulkan driver and loader (scripts/lsan.supp).
  # allocator_may_return_null: the allocation-failure tests ask for 400 GB and expect an error
  # value (runtime/buffer.h), not ASan's report of a huge request.
  export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:strict_init_order=1:allocator_may_return_null=1"
  export LSAN_OPTIONS="suppressions=$root/scripts/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
  # The GPU backends' own suites (label vulkan: Mesa's lavapipe, uninstrumented) and the repeats of
  # the cpu suites on vulkan:0, cuda:0 and for x86-64-v3 are left to the plain run: under ASan
  # they would double its time and exercise no other kiln code.
  (cd build-asan && timed "asan tests (unit, conformance, fuzz)" asan_tests)
}

# The ASan suites in build-asan, their output also in asan-ctest.log. LeakSanitizer's tracer
# sometimes crashes by itself at exit ("Tracer caught signal 11", then "LeakSanitizer has
# encountered a fatal error": google/sanitizers#1353), failing a test that passed; a run whose
# failures carry that signature and no sanitizer finding reruns its failed tests once.
asan_tests() {
  if ctest --output-on-failure -j "$jobs" --timeout 900 -L 'unit|conformance|fuzz' \
    -LE 'vulkan|gpu' -E '^(vulkan:0|cuda:0|x86-64-v3)[.]' 2>&1 | tee asan-ctest.log; then
    return 0
  fi
  if grep -q "Tracer caught signal" asan-ctest.log &&
    ! grep -qE "ERROR: AddressSanitizer|runtime error:|detected memory leaks" asan-ctest.log; then
    echo "sanitize: LeakSanitizer's tracer crashed (google/sanitizers#1353): the failed tests once more"
    ctest --output-on-failure --timeout 900 --rerun-failed
    return
  fi
  return 1
}

tsan() {
  configure build-tsan thread
  timed "tsan build" cmake --build build-tsan -j "$jobs" --target kiln_thread_tests
  # Third-party, uninstrumented libraries only (scripts/tsan.supp says why for each).
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/scripts/tsan.supp"
  export KILN_THREAD_TRIALS=${KILN_TSAN_TRIALS:-10000}
  (cd build-tsan && timed "tsan tests (threads, $KILN_THREAD_TRIALS trials)" \
    ctest --output-on-failure --timeout 1800 -L threads)
}

for p in $phases; do
  case $p in
    asan) timed "asan phase" asan ;;
    tsan) timed "tsan phase" tsan ;;
    *) echo "sanitize: unknown phase '$p' (asan, tsan)" >&2; exit 2 ;;
  esac
done
