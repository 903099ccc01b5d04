#!/usr/bin/env bash
# libkiln.so exports kiln's API and nothing else (cmake/package.cmake): every global symbol it
# defines is a C function kiln_* or a C++ name in namespace kiln (KILN_EXPORT).
# Usage: exported_symbols.sh LIBKILN
set -euo pipefail
lib=$1
all=$(nm -D --defined-only "$lib" | awk '$2 ~ /[A-Z]/ {print $3}')
count=$(echo "$all" | wc -l)
others=$(echo "$all" | c++filt | grep -v -E '^(kiln_[a-z0-9_]+|kiln::.*)$' || true)
if [ -n "$others" ]; then
  echo "libkiln.so exports symbols outside kiln's API:"
  echo "$others" | head -20
  exit 1
fi
for needed in kiln_device_open kiln_tensor_from_host kiln_matmul kiln_version; do
  echo "$all" | grep -qx "$needed" || { echo "libkiln.so does not export $needed"; exit 1; }
done
echo "libkiln.so: $count exported symbols, all kiln_* or kiln::"
