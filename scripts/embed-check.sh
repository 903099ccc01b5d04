#!/usr/bin/env bash
# kiln as an embedder gets it: installs the build into a temporary prefix, then builds and runs
# examples/embed against that prefix alone: the C++ program with CMake's find_package(kiln), the
# C program with pkg-config, the installed `kiln` program and the Python package.
# Usage: scripts/embed-check.sh [BUILD]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
echo "installed into $prefix: $(cd "$prefix" && find . -type f | sort | tr '\n' ' ')"

# C++: a CMake project that knows only the prefix.
cmake -S examples/embed -B "$work/cxx" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" > "$work/cxx.log"
cmake --build "$work/cxx" > "$work/cxx-build.log"
(cd "$work" && "$work/cxx/embed_mlp" cpu)

# C: pkg-config alone.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cc -std=c11 -Wall -Wextra -pedantic -Werror examples/embed/train.c \
  $(pkg-config --cflags --libs kiln) -lm -o "$work/train"
(cd "$work" && "$work/train" cpu)
if "$prefix/bin/kiln" devices | grep -q '^vulkan:0  present'; then
  (cd "$work" && "$work/cxx/embed_mlp" vulkan:0 && "$work/train" vulkan:0)
fi
"$prefix/bin/kiln" run examples/softmax.kg --random-inputs | tail -1

# Python: the package installed beside the library, imported from elsewhere (the prefix alone on
# its path: `cmake --install` into /usr/local or /usr needs no PYTHONPATH), with its cache there too.
python_dir=$(cd "$prefix" && find . -path '*-packages/kiln/__init__.py' | sed 's|/kiln/__init__.py$||')
(cd "$work" && PYTHONPATH="$prefix/$python_dir" XDG_CACHE_HOME="$work/cache" /usr/bin/python3 -c \
  "import kiln, numpy as np; print(kiln.softmax(kiln.tensor(np.ones((2,3),np.float32))).numpy())")
