# Sourced by the bench scripts that run the `kiln` program: sets `here` (the source tree) and
# `build` (the build directory: $1, default build/), and points kiln's kernel and autotune caches
# at a scratch file removed on exit, so that a run starts cold and leaves nothing behind.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export KILN_COMPILATION_CACHE="file=$work/cache.sqlite" KILN_AUTOTUNE_CACHE="file=$work/cache.sqlite"
