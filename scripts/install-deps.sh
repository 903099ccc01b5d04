#!/usr/bin/env bash
# Installs the Debian 12 packages kiln builds and tests with (skips apt-get when all are present).
set -euo pipefail
packages=(cmake ninja-build g++ ccache git python3 python3-numpy python3-pytest python3-torch
          llvm-19-dev libfmt-dev libcli11-dev nlohmann-json3-dev libgtest-dev libbenchmark-dev
          libsqlite3-dev libtomlplusplus-dev libxxhash-dev pkg-config zlib1g-dev libzstd-dev
          graphviz libshaderc-dev glslang-dev spirv-tools libvulkan-dev mesa-vulkan-drivers
          libdlpack-dev \
          libonnx-testdata \
          libasan8 libubsan1 libtsan2)  # sanitizer runtimes (scripts/sanitize.sh)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "kiln: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
